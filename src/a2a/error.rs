//! JSON-RPC error objects with the A2A codes and a google.rpc.ErrorInfo entry.

use serde_json::{json, Value};

use super::{ERROR_DOMAIN, ERROR_INFO_TYPE};
use crate::reason::{self, Reason};

/// The JSON-RPC 2.0 and A2A 1.0 error codes (A2A §5.4; JSON-RPC 2.0 §5.1), each spelled once.
pub mod code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Not one of the methods.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params break a rule.
    pub const INVALID_PARAMS: i64 = -32602;
    /// An internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// TaskNotFoundError.
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// TaskNotCancelableError.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// PushNotificationNotSupportedError.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// UnsupportedOperationError.
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// ContentTypeNotSupportedError.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// InvalidAgentResponseError.
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    /// ExtendedAgentCardNotConfiguredError.
    pub const EXTENDED_AGENT_CARD_NOT_CONFIGURED: i64 = -32007;
    /// ExtensionSupportRequiredError.
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    /// VersionNotSupportedError.
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// Every code's standard message as the SDKs send it and, for A2A's own codes (-32001 to
/// -32009, A2A §5.4 and §9.5), the ErrorInfo `reason` A2A gives it: one row per code, read by
/// the edge's own errors and by the cleaning of an agent's.
const STANDARD: [(i64, &str, Option<Reason>); 14] = [
    (code::PARSE_ERROR, "Parse error", None),
    (code::INVALID_REQUEST, "Invalid Request", None),
    (code::METHOD_NOT_FOUND, "Method not found", None),
    (code::INVALID_PARAMS, "Invalid params", None),
    (code::INTERNAL_ERROR, "Internal error", None),
    (
        code::TASK_NOT_FOUND,
        "Task not found",
        Some(reason::TASK_NOT_FOUND),
    ),
    (
        code::TASK_NOT_CANCELABLE,
        "Task cannot be canceled",
        Some(reason::TASK_NOT_CANCELABLE),
    ),
    (
        code::PUSH_NOTIFICATION_NOT_SUPPORTED,
        "Push Notification is not supported",
        Some(reason::PUSH_NOTIFICATION_NOT_SUPPORTED),
    ),
    (
        code::UNSUPPORTED_OPERATION,
        "This operation is not supported",
        Some(reason::UNSUPPORTED_OPERATION),
    ),
    (
        code::CONTENT_TYPE_NOT_SUPPORTED,
        "Incompatible content types",
        Some(reason::CONTENT_TYPE_NOT_SUPPORTED),
    ),
    (
        code::INVALID_AGENT_RESPONSE,
        "Invalid agent response",
        Some(reason::INVALID_AGENT_RESPONSE),
    ),
    (
        code::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
        "Extended agent card is not configured",
        Some(reason::EXTENDED_AGENT_CARD_NOT_CONFIGURED),
    ),
    (
        code::EXTENSION_SUPPORT_REQUIRED,
        "Extension support is required",
        Some(reason::EXTENSION_SUPPORT_REQUIRED),
    ),
    (
        code::VERSION_NOT_SUPPORTED,
        "A2A version is not supported",
        Some(reason::VERSION_NOT_SUPPORTED),
    ),
];

fn standard(code: i64) -> Option<&'static (i64, &'static str, Option<Reason>)> {
    STANDARD.iter().find(|row| row.0 == code)
}

/// The standard message of a JSON-RPC or A2A error code, as the SDKs send it.
pub fn standard_message(code: i64) -> Option<&'static str> {
    standard(code).map(|row| row.1)
}

/// The ErrorInfo `reason` A2A gives each of its own codes: what an error with that code
/// carries, also when an agent's came without one.
pub fn a2a_kind(code: i64) -> Option<Reason> {
    standard(code).and_then(|row| row.2)
}

/// The edge's `google.rpc.ErrorInfo` entry of an error's `data`: this reason in A2A's domain.
pub fn error_info(reason: Reason, metadata: serde_json::Map<String, Value>) -> Value {
    json!({
        "@type": ERROR_INFO_TYPE,
        "reason": reason,
        "domain": ERROR_DOMAIN,
        "metadata": metadata,
    })
}

/// A JSON-RPC error as sent to a caller: the A2A code, a short human message, and a
/// low-cardinality reason code that goes into `error.data[0].reason` (ErrorInfo), the
/// audit log and the metrics. Messages never carry paths, secrets or upstream addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub reason: Reason,
    /// `ErrorInfo.metadata` (low-cardinality values only: never a value from the request).
    /// Boxed: most errors carry none, and the error travels in every `Result`.
    pub metadata: Option<Box<Vec<(&'static str, String)>>>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>, reason: Reason) -> Self {
        Self {
            code,
            message: message.into(),
            reason,
            metadata: None,
        }
    }

    /// An error of this code with its standard message (`STANDARD`).
    fn standard(code: i64, reason: Reason) -> Self {
        Self::new(
            code,
            standard_message(code).unwrap_or("Internal error"),
            reason,
        )
    }

    /// One of A2A's own errors as A2A gives it: its standard message and kind.
    fn a2a(code: i64) -> Self {
        let kind = a2a_kind(code).unwrap_or(reason::INTERNAL_ERROR);
        Self::standard(code, kind)
    }

    /// The same error with one more `ErrorInfo.metadata` entry.
    pub fn with_metadata(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metadata
            .get_or_insert_with(Default::default)
            .push((key, value.into()));
        self
    }

    /// -32600: the envelope is not a valid JSON-RPC 2.0 request.
    pub fn invalid_request(message: impl Into<String>, reason: Reason) -> Self {
        Self::new(code::INVALID_REQUEST, message, reason)
    }
    /// -32601: not one of the 11 A2A 1.0 methods.
    pub fn method_not_found() -> Self {
        Self::standard(code::METHOD_NOT_FOUND, reason::JSONRPC_METHOD)
    }
    /// -32602: the params break a rule.
    pub fn invalid_params(message: impl Into<String>, reason: Reason) -> Self {
        Self::new(code::INVALID_PARAMS, message, reason)
    }
    /// -32603: an internal error; the message is generic on purpose.
    pub fn internal(reason: Reason) -> Self {
        Self::standard(code::INTERNAL_ERROR, reason)
    }
    /// -32001
    pub fn task_not_found() -> Self {
        Self::a2a(code::TASK_NOT_FOUND)
    }
    /// -32002
    pub fn task_not_cancelable() -> Self {
        Self::a2a(code::TASK_NOT_CANCELABLE)
    }
    /// -32003
    pub fn push_not_supported() -> Self {
        Self::a2a(code::PUSH_NOTIFICATION_NOT_SUPPORTED)
    }
    /// -32004
    pub fn unsupported_operation(message: impl Into<String>) -> Self {
        Self::new(
            code::UNSUPPORTED_OPERATION,
            message,
            reason::UNSUPPORTED_OPERATION,
        )
    }
    /// -32005
    pub fn content_type_not_supported(message: impl Into<String>) -> Self {
        Self::new(
            code::CONTENT_TYPE_NOT_SUPPORTED,
            message,
            reason::CONTENT_TYPE_NOT_SUPPORTED,
        )
    }
    /// -32007
    pub fn extended_card_not_configured() -> Self {
        Self::a2a(code::EXTENDED_AGENT_CARD_NOT_CONFIGURED)
    }
    /// -32009
    pub fn version_not_supported(got: &str) -> Self {
        // The version string is echoed only after the caller's header was checked to be short
        // printable ASCII by the caller of this function.
        Self::new(
            code::VERSION_NOT_SUPPORTED,
            format!("A2A version '{got}' is not supported. Expected version '1.0'."),
            reason::VERSION_NOT_SUPPORTED,
        )
    }

    /// The `error` member of a JSON-RPC response.
    pub fn to_json(&self) -> Value {
        let metadata = self
            .metadata
            .iter()
            .flat_map(|m| m.iter())
            .map(|(k, v)| ((*k).to_string(), Value::String(v.clone())))
            .collect();
        json!({
            "code": self.code,
            "message": self.message,
            "data": [error_info(self.reason, metadata)]
        })
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.code, self.message, self.reason)
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_row_and_a2as_own_have_their_kind() {
        let codes = [
            code::PARSE_ERROR,
            code::INVALID_REQUEST,
            code::METHOD_NOT_FOUND,
            code::INVALID_PARAMS,
            code::INTERNAL_ERROR,
            code::TASK_NOT_FOUND,
            code::TASK_NOT_CANCELABLE,
            code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            code::UNSUPPORTED_OPERATION,
            code::CONTENT_TYPE_NOT_SUPPORTED,
            code::INVALID_AGENT_RESPONSE,
            code::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
            code::EXTENSION_SUPPORT_REQUIRED,
            code::VERSION_NOT_SUPPORTED,
        ];
        assert_eq!(codes.len(), STANDARD.len());
        for c in codes {
            assert_eq!(STANDARD.iter().filter(|row| row.0 == c).count(), 1, "{c}");
            assert!(standard_message(c).is_some_and(|m| !m.is_empty()), "{c}");
            // A2A's own codes, and only they, have an ErrorInfo kind of A2A's.
            assert_eq!(a2a_kind(c).is_some(), (-32009..=-32001).contains(&c), "{c}");
        }
        for c in [0, -32000, -32010, -32099, 1, i64::MIN] {
            assert_eq!(standard_message(c), None, "{c}");
            assert_eq!(a2a_kind(c), None, "{c}");
        }
    }

    #[test]
    fn the_edges_own_errors_read_the_table() {
        let cases = [
            (
                RpcError::method_not_found(),
                code::METHOD_NOT_FOUND,
                "Method not found",
                reason::JSONRPC_METHOD,
            ),
            (
                RpcError::internal(reason::AUTH_INTERNAL),
                code::INTERNAL_ERROR,
                "Internal error",
                reason::AUTH_INTERNAL,
            ),
            (
                RpcError::task_not_found(),
                code::TASK_NOT_FOUND,
                "Task not found",
                reason::TASK_NOT_FOUND,
            ),
            (
                RpcError::task_not_cancelable(),
                code::TASK_NOT_CANCELABLE,
                "Task cannot be canceled",
                reason::TASK_NOT_CANCELABLE,
            ),
            (
                RpcError::push_not_supported(),
                code::PUSH_NOTIFICATION_NOT_SUPPORTED,
                "Push Notification is not supported",
                reason::PUSH_NOTIFICATION_NOT_SUPPORTED,
            ),
            (
                RpcError::extended_card_not_configured(),
                code::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
                "Extended agent card is not configured",
                reason::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
            ),
        ];
        for (error, code, message, reason) in cases {
            assert_eq!(
                (error.code, error.message.as_str(), error.reason),
                (code, message, reason)
            );
            let json = error.to_json();
            assert_eq!(json["data"][0]["reason"], reason.as_str(), "{json}");
        }
    }
}
