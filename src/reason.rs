//! Every reason code the edge gives, named once. A reason is the low-cardinality word for
//! why a request, a connection or a stream was refused or ended: it goes into the caller's
//! `ErrorInfo.reason` (JSON-RPC errors), the `reason` field of 429 bodies, the request's log
//! line and the `reason` label of the metrics.
//!
//! [`Reason`] can only be made here, so the list [`ALL`] is every code there is; a test
//! checks that README.md and policies/README.md document exactly these.

use std::fmt;

/// One reason code (see the module's doc). Compared with `==` or matched against the
/// constants below.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason(&'static str);

impl Reason {
    /// The code as it is written on the wire and in logs.
    pub const fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<Reason> for &str {
    fn eq(&self, other: &Reason) -> bool {
        *self == other.0
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl From<Reason> for &'static str {
    fn from(r: Reason) -> &'static str {
        r.0
    }
}

macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        $($(#[$doc])* pub const $name: Reason = Reason($code);)*
        /// Every reason code, in the order of this file.
        pub const ALL: &[Reason] = &[$($name),*];
    };
}

reasons! {
    AUTH_EXTENDED_CARD_ANONYMOUS = "auth.extended_card_anonymous",
    AUTH_INTERNAL = "auth.internal",
    AUTH_INVALID = "auth.invalid",
    AUTH_MALFORMED = "auth.malformed",
    AUTH_MISSING = "auth.missing",
    AUTH_MTLS_NO_IDENTITY = "auth.mtls_no_identity",
    AUTH_MULTIPLE_HEADERS = "auth.multiple_headers",
    AUTH_OVERLOADED = "auth.overloaded",
    AUTH_REVOKED = "auth.revoked",
    AUTH_THROTTLED = "auth.throttled",
    AUTH_UNSUPPORTED_SCHEME = "auth.unsupported_scheme",

    AUTHZ_ATTRIBUTE_VALUE = "authz.attribute_value",
    AUTHZ_METHOD = "authz.method",
    AUTHZ_PUSH = "authz.push",

    BODY_CONTENT_LENGTH = "body.content_length",
    BODY_READ = "body.read",
    BODY_TOO_LARGE = "body.too_large",
    BODY_TOO_SLOW = "body.too_slow",

    CARD_EXTENDED_INVALID = "card.extended_invalid",
    CARD_INVALID = "card.invalid",
    CARD_MISSING_FIELD = "card.missing_field",
    CARD_NOT_OBJECT = "card.not_object",
    CARD_SIGN_FAILED = "card.sign_failed",
    CARD_UNAVAILABLE = "card.unavailable",
    CARD_UPSTREAM_BODY = "card.upstream_body",
    CARD_UPSTREAM_JSON = "card.upstream_json",
    CARD_UPSTREAM_SIGNATURE = "card.upstream_signature",
    CARD_UPSTREAM_STATUS = "card.upstream_status",

    CATALOG_SIGN_FAILED = "catalog.sign_failed",

    CLIENT_STALLED = "client.stalled",

    CONCURRENCY_IN_FLIGHT = "concurrency.in_flight",
    CONCURRENCY_REQUEST_BYTES = "concurrency.request_bytes",
    CONCURRENCY_STREAMS = "concurrency.streams",

    CONNECTION_OUTLIVED = "connection.outlived",

    CONTENT_TYPE_UNSUPPORTED = "content_type.unsupported",

    CONTEXT_BUSY = "context.busy",
    CONTEXT_LEASE_LOST = "context.lease_lost",
    CONTEXT_TASK_MISMATCH = "context.task_mismatch",
    CONTEXT_WORKSPACE_MISMATCH = "context.workspace_mismatch",

    ENGINE_TASK_EVICTED = "engine.task_evicted",

    EXTENSIONS_MALFORMED = "extensions.malformed",
    EXTENSIONS_MISSING_REQUIRED = "extensions.missing_required",

    HTTP_FRAMING = "http.framing",
    HTTP_HOST_MISMATCH = "http.host_mismatch",
    HTTP_LENGTH_REQUIRED = "http.length_required",

    ID_INVALID = "id.invalid",

    IDENTITY_SIGN_FAILED = "identity.sign_failed",

    INT_RANGE = "int.range",

    JSON_DUPLICATE_KEY = "json.duplicate_key",
    JSON_SYNTAX = "json.syntax",
    JSON_TOO_DEEP = "json.too_deep",
    JSON_TOO_MANY_VALUES = "json.too_many_values",

    JSONRPC_BATCH = "jsonrpc.batch",
    JSONRPC_ENVELOPE = "jsonrpc.envelope",
    JSONRPC_ID = "jsonrpc.id",
    JSONRPC_METHOD = "jsonrpc.method",
    JSONRPC_PARAMS = "jsonrpc.params",
    JSONRPC_VERSION = "jsonrpc.version",

    JWT_ALG = "jwt.alg",
    JWT_AUDIENCE = "jwt.audience",
    JWT_CLAIM = "jwt.claim",
    JWT_EXPIRED = "jwt.expired",
    JWT_ISSUER = "jwt.issuer",
    JWT_KEY_MISMATCH = "jwt.key_mismatch",
    JWT_KID_MISSING = "jwt.kid_missing",
    JWT_MALFORMED = "jwt.malformed",
    JWT_NOT_YET_VALID = "jwt.not_yet_valid",
    JWT_SIGNATURE = "jwt.signature",
    JWT_UNKNOWN_KID = "jwt.unknown_kid",

    LIMITS_CONNECTIONS = "limits.connections",
    LIMITS_CONNECTION_RATE = "limits.connection_rate",
    LIMITS_CONNECTIONS_PER_CLIENT = "limits.connections_per_client",

    LIST_PAGE_TOKEN = "list.page_token",

    MESSAGE_ID = "message.id",
    MESSAGE_PARTS = "message.parts",
    MESSAGE_ROLE = "message.role",

    METADATA_DENIED_KEY = "metadata.denied_key",
    METADATA_DOTTED_WORKSPACE = "metadata.dotted_workspace",
    METADATA_KEY_TOO_LONG = "metadata.key_too_long",
    METADATA_TOO_DEEP = "metadata.too_deep",
    METADATA_TOO_MANY_KEYS = "metadata.too_many_keys",
    METADATA_TYPE = "metadata.type",

    NETWORK_DENIED = "network.denied",

    OVERLOAD_REQUEST_BYTES = "overload.request_bytes",

    PARAMS_DUPLICATE_FIELD = "params.duplicate_field",
    PARAMS_MISSING = "params.missing",
    PARAMS_TOO_MANY = "params.too_many",
    PARAMS_TYPE = "params.type",

    PART_BASE64 = "part.base64",
    PART_CHARSET = "part.charset",
    PART_FILE_MISSING = "part.file_missing",
    PART_FILE_NOT_REGULAR = "part.file_not_regular",
    PART_FILE_UNREADABLE = "part.file_unreadable",
    PART_FILE_WITHOUT_WORKSPACE = "part.file_without_workspace",
    PART_FILENAME = "part.filename",
    PART_MEDIA_PARAM = "part.media_param",
    PART_MEDIA_TYPE = "part.media_type",
    PART_OUTSIDE_WORKSPACE = "part.outside_workspace",
    PART_SHAPE = "part.shape",
    PART_TOO_LARGE = "part.too_large",
    PART_URL_ENCODING = "part.url_encoding",
    PART_URL_HOST = "part.url_host",
    PART_URL_SCHEME = "part.url_scheme",
    PART_URL_SYNTAX = "part.url_syntax",
    PART_URL_TOO_DEEP = "part.url_too_deep",
    PART_URL_TOO_LONG = "part.url_too_long",
    PART_UTF8 = "part.utf8",

    PUSH_LOCAL_NAME = "push.local_name",
    PUSH_LOCALHOST = "push.localhost",
    PUSH_PRIVATE_ADDRESS = "push.private_address",
    PUSH_RESOLVE_FAILED = "push.resolve_failed",
    PUSH_SPECIAL_ADDRESS = "push.special_address",
    PUSH_URL_HOST = "push.url_host",
    PUSH_URL_SCHEME = "push.url_scheme",
    PUSH_URL_SYNTAX = "push.url_syntax",
    PUSH_URL_TOO_LONG = "push.url_too_long",
    PUSH_URL_USERINFO = "push.url_userinfo",

    RATE_CLIENT_IP = "rate.client_ip",
    RATE_METHOD = "rate.method",
    RATE_PRINCIPAL = "rate.principal",

    REGISTRY_FULL = "registry.full",

    ROUTE_METHOD_NOT_ALLOWED = "route.method_not_allowed",
    ROUTE_NOT_FOUND = "route.not_found",

    SERVER_DRAINING = "server.draining",

    SOCKET_ERROR = "socket.error",

    STATE_UNAVAILABLE = "state.unavailable",

    STRING_INVALID = "string.invalid",

    TASK_STATE_INVALID = "task_state.invalid",

    TENANT_MISMATCH = "tenant.mismatch",

    TIMESTAMP_INVALID = "timestamp.invalid",

    TLS_HANDSHAKE_FAILED = "tls.handshake_failed",
    TLS_HANDSHAKE_TIMEOUT = "tls.handshake_timeout",

    UPSTREAM_BAD_RESPONSE = "upstream.bad_response",
    UPSTREAM_BAD_STREAM = "upstream.bad_stream",
    UPSTREAM_ERROR_EVENT = "upstream.error_event",
    UPSTREAM_FOREIGN_TASK = "upstream.foreign_task",
    UPSTREAM_NONE_HEALTHY = "upstream.none_healthy",
    UPSTREAM_STREAM_BROKEN = "upstream.stream_broken",
    UPSTREAM_STREAM_IDLE = "upstream.stream_idle",
    UPSTREAM_STREAM_TOO_LONG = "upstream.stream_too_long",
    UPSTREAM_STREAM_TRUNCATED = "upstream.stream_truncated",
    UPSTREAM_TIMEOUT = "upstream.timeout",
    UPSTREAM_UNAVAILABLE = "upstream.unavailable",

    VALIDATE_PANICKED = "validate.panicked",

    VERSION_AMBIGUOUS = "version.ambiguous",
    VERSION_UNSUPPORTED = "version.unsupported",

    WORKSPACE_CONFLICT = "workspace.conflict",
    WORKSPACE_CONTROL = "workspace.control",
    WORKSPACE_MISSING = "workspace.missing",
    WORKSPACE_NOT_DIRECTORY = "workspace.not_directory",
    WORKSPACE_NUL = "workspace.nul",
    WORKSPACE_OUTSIDE_ROOTS = "workspace.outside_roots",
    WORKSPACE_RELATIVE = "workspace.relative",
    WORKSPACE_REQUIRED = "workspace.required",
    WORKSPACE_TOO_DEEP = "workspace.too_deep",
    WORKSPACE_TOO_LONG = "workspace.too_long",
    WORKSPACE_TRAVERSAL = "workspace.traversal",
    WORKSPACE_TYPE = "workspace.type",

    // A2A's own error kinds, as the reference SDKs name them in ErrorInfo (the embedded
    // engine's answers, the edge's where the error is one of these kinds, and an agent's
    // error of one of A2A's codes that came without an ErrorInfo).
    CONTENT_TYPE_NOT_SUPPORTED = "CONTENT_TYPE_NOT_SUPPORTED",
    EXTENDED_AGENT_CARD_NOT_CONFIGURED = "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    EXTENSION_SUPPORT_REQUIRED = "EXTENSION_SUPPORT_REQUIRED",
    INTERNAL_ERROR = "INTERNAL_ERROR",
    INVALID_AGENT_RESPONSE = "INVALID_AGENT_RESPONSE",
    INVALID_PARAMS = "INVALID_PARAMS",
    PUSH_NOTIFICATION_NOT_SUPPORTED = "PUSH_NOTIFICATION_NOT_SUPPORTED",
    TASK_NOT_CANCELABLE = "TASK_NOT_CANCELABLE",
    TASK_NOT_FOUND = "TASK_NOT_FOUND",
    UNSUPPORTED_OPERATION = "UNSUPPORTED_OPERATION",
    VERSION_NOT_SUPPORTED = "VERSION_NOT_SUPPORTED",
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn docs() -> Vec<(&'static str, String)> {
        ["README.md", "policies/README.md"]
            .into_iter()
            .map(|name| {
                let path = format!("{}/{name}", env!("CARGO_MANIFEST_DIR"));
                (name, std::fs::read_to_string(path).unwrap())
            })
            .collect()
    }

    /// The words of the doc's `code` spans: split where a reason code cannot continue.
    fn code_words(doc: &str) -> BTreeSet<&str> {
        let mut words = BTreeSet::new();
        for (i, span) in doc.split('`').enumerate() {
            if i % 2 == 1 {
                words.extend(
                    span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                        .filter(|w| !w.is_empty()),
                );
            }
        }
        words
    }

    /// The codes in the `reason` column of the doc's tables.
    fn reason_columns(doc: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut column = None;
        for line in doc.lines() {
            let Some(row) = line.trim().strip_prefix('|') else {
                column = None;
                continue;
            };
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            match column {
                None => column = cells.iter().position(|c| *c == "reason"),
                Some(col) if cells.iter().all(|c| c.chars().all(|ch| "-: ".contains(ch))) => {
                    let _ = col;
                }
                Some(col) => {
                    if let Some(cell) = cells.get(col) {
                        found.extend(code_words(cell).into_iter().map(str::to_string));
                    }
                }
            }
        }
        found
    }

    /// `family.name` (lower case) or an A2A kind (`TASK_NOT_FOUND`).
    fn well_formed(code: &str) -> bool {
        let word = |w: &str, upper: bool| {
            !w.is_empty()
                && w.bytes().all(|b| {
                    b == b'_'
                        || (upper && b.is_ascii_uppercase())
                        || (!upper && (b.is_ascii_lowercase() || b.is_ascii_digit()))
                })
        };
        match code.split_once('.') {
            Some((family, name)) => word(family, false) && word(name, false),
            None => word(code, true),
        }
    }

    #[test]
    fn every_code_is_named_once_and_well_formed() {
        let codes: BTreeSet<&str> = ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(codes.len(), ALL.len(), "a code is listed twice");
        for code in codes {
            assert!(
                well_formed(code),
                "{code}: neither family.name nor an A2A kind"
            );
        }
        for bad in [
            "part",
            "part.",
            ".x",
            "a.b.c",
            "Part.x",
            "part.too-large",
            "Task_x",
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
    }

    #[test]
    fn the_docs_list_every_code() {
        let docs = docs();
        let words: BTreeSet<&str> = docs.iter().flat_map(|(_, d)| code_words(d)).collect();
        let undocumented: Vec<&str> = ALL
            .iter()
            .map(|r| r.as_str())
            .filter(|c| !words.contains(c))
            .collect();
        assert!(
            undocumented.is_empty(),
            "reason codes README.md and policies/README.md do not name: {undocumented:?}"
        );
    }

    #[test]
    fn the_docs_reason_tables_name_only_codes_the_edge_gives() {
        let codes: BTreeSet<&str> = ALL.iter().map(|r| r.as_str()).collect();
        let mut seen = 0;
        for (name, doc) in docs() {
            for code in reason_columns(&doc).into_iter().filter(|c| well_formed(c)) {
                seen += 1;
                assert!(
                    codes.contains(code.as_str()),
                    "{name} documents reason `{code}`, which the edge never gives"
                );
            }
        }
        // The validation table, the other reasons' table and the authorization table.
        assert!(seen > 80, "only {seen} codes found in reason columns");
    }

    #[test]
    fn a_reason_reads_as_its_code() {
        assert_eq!(PART_TOO_LARGE.as_str(), "part.too_large");
        assert_eq!(PART_TOO_LARGE, "part.too_large");
        assert_eq!("part.too_large", PART_TOO_LARGE);
        assert_ne!(PART_TOO_LARGE, "part.too_larg");
        assert_eq!(PART_TOO_LARGE.to_string(), "part.too_large");
        assert_eq!(format!("{PART_TOO_LARGE:?}"), "\"part.too_large\"");
        assert_eq!(
            serde_json::to_string(&[STATE_UNAVAILABLE, TASK_NOT_FOUND]).unwrap(),
            r#"["state.unavailable","TASK_NOT_FOUND"]"#
        );
    }
}
