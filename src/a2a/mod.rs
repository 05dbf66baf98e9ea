//! A2A 1.0 over JSON-RPC 2.0: the method set, the request envelope, error codes with
//! `ErrorInfo`, and the server-sent-events codec. Knows nothing of HTTP or policy.

pub mod envelope;
pub mod error;
pub mod json;
pub mod method;
pub mod sse;
pub mod write;

pub use envelope::{error_body, result_body, to_json_bytes, to_json_bytes_sized, RpcRequest};
pub use error::{code, RpcError};
pub use method::Method;

/// The `@type` of a google.rpc.ErrorInfo entry in `error.data`.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The `domain` of every ErrorInfo this project emits.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";
/// The media type of server-sent-event responses.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";
