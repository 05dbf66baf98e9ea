//! The JSON-RPC 2.0 request envelope of A2A: parsing what a caller sent into a typed
//! request, and serializing requests and responses the proxy's own way.

use serde::Serialize;
use serde_json::{Map, Value};

use super::json::{parse_strict_counted, JsonError, DEFAULT_MAX_VALUES, MAX_DEPTH};
use super::{Method, RpcError};
use crate::reason;

/// The longest string `id` of a request, in bytes (UTF-8). An id is echoed in every answer
/// and kept as long as the request's stream runs (an hour by default), outside the request
/// budgets: callers' ids are counters and UUIDs. A longer one is refused (-32600
/// `jsonrpc.id`, answered with a null id).
pub const MAX_RPC_ID_BYTES: usize = 256;

/// A parsed JSON-RPC request. Forwarding re-serializes this value: the upstream never sees
/// the caller's raw bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    /// A string, an integer or null (a notification is answered with `null` too).
    pub id: Value,
    pub method: Method,
    pub params: Map<String, Value>,
}

/// Why an envelope was refused, with the id to answer with (null when it could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeError {
    pub id: Value,
    /// Boxed: the error travels in every `Result` of the parse.
    pub error: Box<RpcError>,
}

impl RpcRequest {
    /// Parses and checks a JSON-RPC 2.0 request body (at most
    /// [`DEFAULT_MAX_VALUES`] JSON values).
    pub fn parse(body: &[u8]) -> Result<RpcRequest, EnvelopeError> {
        Self::parse_within(body, DEFAULT_MAX_VALUES)
    }

    /// [`RpcRequest::parse`] with at most `max_values` JSON values (`a2a.max_json_values`).
    pub fn parse_within(body: &[u8], max_values: usize) -> Result<RpcRequest, EnvelopeError> {
        Self::parse_counted(body, max_values).map(|(rpc, _)| rpc)
    }

    /// [`RpcRequest::parse_within`], and how many JSON values the body held.
    pub fn parse_counted(
        body: &[u8],
        max_values: usize,
    ) -> Result<(RpcRequest, usize), EnvelopeError> {
        let refuse = |id: Value, error: RpcError| EnvelopeError {
            id,
            error: Box::new(error),
        };
        let (value, values) = parse_strict_counted(body, MAX_DEPTH, max_values).map_err(|e| {
            let message = match e {
                JsonError::Syntax => "Parse error",
                JsonError::DuplicateKey => "Parse error: duplicate object key",
                JsonError::TooDeep => "Parse error: nested too deep",
                JsonError::TooManyValues => "Parse error: too many JSON values",
            };
            refuse(
                Value::Null,
                RpcError::new(crate::a2a::code::PARSE_ERROR, message, e.reason()),
            )
        })?;
        let obj = match value {
            Value::Object(obj) => obj,
            Value::Array(_) => {
                return Err(refuse(
                    Value::Null,
                    RpcError::invalid_request(
                        "Batch requests are not supported",
                        reason::JSONRPC_BATCH,
                    ),
                ))
            }
            _ => {
                return Err(refuse(
                    Value::Null,
                    RpcError::invalid_request(
                        "Request must be an object",
                        reason::JSONRPC_ENVELOPE,
                    ),
                ))
            }
        };
        let mut obj = obj;
        let id = match obj.remove("id") {
            None | Some(Value::Null) => Value::Null,
            Some(Value::String(s)) if s.len() > MAX_RPC_ID_BYTES => {
                return Err(refuse(
                    Value::Null,
                    RpcError::invalid_request(
                        format!("id must be at most {MAX_RPC_ID_BYTES} bytes"),
                        reason::JSONRPC_ID,
                    ),
                ))
            }
            Some(Value::String(s)) => Value::String(s),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n),
            Some(_) => {
                return Err(refuse(
                    Value::Null,
                    RpcError::invalid_request(
                        "id must be a string, an integer or null",
                        reason::JSONRPC_ID,
                    ),
                ))
            }
        };
        if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
            return Err(refuse(
                id,
                RpcError::invalid_request("jsonrpc must be \"2.0\"", reason::JSONRPC_VERSION),
            ));
        }
        let method = match obj.get("method") {
            Some(Value::String(name)) => match Method::from_name(name) {
                Some(m) => m,
                None => return Err(refuse(id, RpcError::method_not_found())),
            },
            _ => {
                return Err(refuse(
                    id,
                    RpcError::invalid_request("method must be a string", reason::JSONRPC_METHOD),
                ))
            }
        };
        let params = match obj.remove("params") {
            Some(Value::Object(p)) => p,
            // GetExtendedAgentCard may omit params.
            None => Map::new(),
            Some(_) => {
                return Err(refuse(
                    id,
                    RpcError::invalid_params("params must be an object", reason::JSONRPC_PARAMS),
                ))
            }
        };
        for key in obj.keys() {
            if key != "jsonrpc" && key != "method" {
                return Err(refuse(
                    id,
                    RpcError::invalid_request(
                        "unknown member in the request envelope",
                        reason::JSONRPC_ENVELOPE,
                    ),
                ));
            }
        }
        Ok((RpcRequest { id, method, params }, values))
    }

    /// The proxy's own serialization of this request.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_sized(128)
    }

    /// [`RpcRequest::to_bytes`] into a buffer of `hint` bytes to start with.
    pub fn to_bytes_sized(&self, hint: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(hint.max(128));
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        super::write::value(&mut out, &self.id);
        out.extend_from_slice(br#","method":"#);
        super::write::string(&mut out, self.method.as_str());
        out.extend_from_slice(br#","params":"#);
        super::write::object(&mut out, &self.params);
        out.push(b'}');
        out
    }
}

/// Serializes without the detour through `Display` and without copying into a `Value`.
/// Serializing a `Value` or a map of them to memory cannot fail; should it, the body is an
/// internal error, never a panic.
pub fn to_json_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    to_json_bytes_sized(v, 128)
}

/// [`to_json_bytes`] into a buffer of `hint` bytes to start with (the size of what was
/// parsed, for a re-serialization: no regrowing and copying on the way). Every hint is the
/// size of bytes already held (a body or an answer within its limit), so the buffer is never
/// more than what is already bounded.
pub fn to_json_bytes_sized<T: Serialize>(v: &T, hint: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(hint.max(128));
    match serde_json::to_writer(&mut out, v) {
        Ok(()) => out,
        Err(_) => {
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#
                .to_vec()
        }
    }
}

/// A JSON-RPC error response body.
pub fn error_body(id: &Value, error: &RpcError) -> Vec<u8> {
    #[derive(Serialize)]
    struct Wire<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        error: Value,
    }
    to_json_bytes(&Wire {
        jsonrpc: "2.0",
        id,
        error: error.to_json(),
    })
}

/// A JSON-RPC success response body.
pub fn result_body(id: &Value, result: Value) -> Vec<u8> {
    #[derive(Serialize)]
    struct Wire<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: Value,
    }
    to_json_bytes(&Wire {
        jsonrpc: "2.0",
        id,
        result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_table() {
        let id_of = |n: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":"{}","method":"ListTasks","params":{{}}}}"#,
                "i".repeat(n)
            )
        };
        // (body, expected code or 0 for ok, expected id)
        let cases: &[(&str, i64, Value)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#,
                0,
                json!(1),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"GetExtendedAgentCard"}"#,
                0,
                json!("a"),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"ListTasks","params":{}}"#,
                0,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ListTasks","params":{}}"#,
                0,
                Value::Null,
            ),
            (r#"not json"#, -32700, Value::Null),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}} x"#,
                -32700,
                Value::Null,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]"#,
                -32600,
                Value::Null,
            ),
            (r#""str""#, -32600, Value::Null),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}"#,
                -32600,
                json!(1),
            ),
            (
                r#"{"id":1,"method":"GetTask","params":{}}"#,
                -32600,
                json!(1),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"GetTask","params":{}}"#,
                -32600,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":true,"method":"GetTask","params":{}}"#,
                -32600,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"GetTask","params":{}}"#,
                -32600,
                Value::Null,
            ),
            (
                &id_of(MAX_RPC_ID_BYTES),
                0,
                json!("i".repeat(MAX_RPC_ID_BYTES)),
            ),
            (&id_of(MAX_RPC_ID_BYTES + 1), -32600, Value::Null),
            (&id_of(1 << 20), -32600, Value::Null),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}"#,
                -32601,
                json!(1),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":7,"params":{}}"#,
                -32600,
                json!(1),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[]}"#,
                -32602,
                json!(1),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{},"x":1}"#,
                -32600,
                json!(1),
            ),
        ];
        for (body, code, id) in cases {
            match RpcRequest::parse(body.as_bytes()) {
                Ok(req) => {
                    assert_eq!(*code, 0, "{body} parsed but expected {code}");
                    assert_eq!(&req.id, id, "{body}");
                    // What the proxy forwards parses back to the same request.
                    let again = RpcRequest::parse(&req.to_bytes()).unwrap();
                    assert_eq!(again, req);
                }
                Err(e) => {
                    assert_eq!(e.error.code, *code, "{body}: {e:?}");
                    assert_eq!(&e.id, id, "{body}");
                }
            }
        }
    }

    #[test]
    fn error_body_carries_error_info() {
        let b = error_body(&json!(7), &RpcError::task_not_found());
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(v["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["error"]["data"][0]["domain"], "a2a-protocol.org");
    }
}
