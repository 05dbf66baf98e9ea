//! A refused request and how it is rendered: a JSON-RPC error (HTTP 200 as A2A requires, or
//! the HTTP status that says more, such as 413) or a plain HTTP error with a JSON body.

use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

use crate::a2a::{error_body, RpcError};
use crate::body::{json_response, BoxBody};
use crate::reason::Reason;

#[derive(Debug, Clone)]
pub enum Rejection {
    /// 401 `{"error":"Unauthorized"}` with a `WWW-Authenticate` challenge per scheme.
    Unauthorized {
        reason: Reason,
        challenges: Vec<HeaderValue>,
    },
    /// 429 with `Retry-After` (seconds).
    TooManyRequests {
        reason: Reason,
        retry_after_secs: u64,
    },
    /// 503 with `Retry-After` (seconds): the edge is full, not the caller over its share.
    Overloaded {
        reason: Reason,
        retry_after_secs: u64,
    },
    /// A non-JSON-RPC route or a failure before a JSON-RPC id is known.
    Http {
        status: StatusCode,
        message: &'static str,
        reason: Reason,
        allow: Option<&'static str>,
    },
    /// A JSON-RPC error answering the request `id`.
    Rpc {
        status: StatusCode,
        id: Value,
        /// Boxed: a rejection travels in every stage's `Result`.
        error: Box<RpcError>,
    },
}

/// A request past a request budget ([`crate::limits::concurrency::RequestBytes`]): its
/// caller's (429, as its other concurrency limits) or everyone's (503: the edge is full, not
/// the caller over its share).
pub(super) fn over_request_budget(reason: Reason) -> Rejection {
    if reason == crate::reason::OVERLOAD_REQUEST_BYTES {
        Rejection::Overloaded {
            reason,
            retry_after_secs: 1,
        }
    } else {
        Rejection::TooManyRequests {
            reason,
            retry_after_secs: 1,
        }
    }
}

impl Rejection {
    pub fn rpc(id: Value, error: impl Into<Box<RpcError>>) -> Self {
        Rejection::Rpc {
            status: StatusCode::OK,
            id,
            error: error.into(),
        }
    }

    /// The reason code for logs and metrics.
    pub fn reason(&self) -> Reason {
        match self {
            Rejection::Unauthorized { reason, .. } => *reason,
            Rejection::TooManyRequests { reason, .. } | Rejection::Overloaded { reason, .. } => {
                *reason
            }
            Rejection::Http { reason, .. } => *reason,
            Rejection::Rpc { error, .. } => error.reason,
        }
    }

    pub fn render(self) -> Response<BoxBody> {
        match self {
            Rejection::Unauthorized { challenges, .. } => {
                let mut r = json_response(StatusCode::UNAUTHORIZED, r#"{"error":"Unauthorized"}"#);
                for c in challenges {
                    r.headers_mut().append(header::WWW_AUTHENTICATE, c);
                }
                r
            }
            Rejection::TooManyRequests {
                reason,
                retry_after_secs,
            } => retry_later(StatusCode::TOO_MANY_REQUESTS, reason, retry_after_secs),
            Rejection::Overloaded {
                reason,
                retry_after_secs,
            } => retry_later(StatusCode::SERVICE_UNAVAILABLE, reason, retry_after_secs),
            Rejection::Http {
                status,
                message,
                reason,
                allow,
            } => {
                let body = json!({"error": message, "reason": reason}).to_string();
                let mut r = json_response(status, body);
                if let Some(allow) = allow {
                    r.headers_mut()
                        .insert(header::ALLOW, HeaderValue::from_static(allow));
                }
                r
            }
            Rejection::Rpc { status, id, error } => json_response(status, error_body(&id, &error)),
        }
    }
}

/// `{"error": <status text>, "reason": …}` with `Retry-After` (seconds).
fn retry_later(status: StatusCode, reason: Reason, secs: u64) -> Response<BoxBody> {
    let error = status.canonical_reason().unwrap_or("Unavailable");
    let body = json!({"error": error, "reason": reason}).to_string();
    let mut r = json_response(status, body);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    r
}
