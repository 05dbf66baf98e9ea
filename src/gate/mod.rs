//! The request pipeline. [`Gate::handle`] is the one place where the stages run, in order:
//!
//! ```text
//! route ─ /health ─ /.well-known/agent-card.json
//!       └ JSON-RPC: authenticate → read body (cap) → parse envelope → forward → relay
//! ```
//!
//! Each stage returns `Result<_, Rejection>`; how each decides lives in its own module.

mod rejection;
mod route;

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

pub use rejection::Rejection;
pub use route::{classify, Route, CARD_PATH, HEALTH_PATH};

use crate::a2a::{RpcError, RpcRequest};
use crate::auth::{Authenticator, Principal};
use crate::body::{collect_limited, json_response, BoxBody, CollectError};
use crate::card::{self, EdgeFace};
use crate::policy::Policy;
use crate::telemetry;
use crate::upstream::{self, relay_response, Upstream, UpstreamError};

/// Largest agent card the edge will read from an agent.
const MAX_CARD_BYTES: usize = 1024 * 1024;

/// What the gate knows about the connection a request came on.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub peer: SocketAddr,
}

/// The pipeline with everything its stages need. Built once per policy.
pub struct Gate {
    rpc_path: String,
    face: EdgeFace,
    auth: Authenticator,
    upstream: Upstream,
    max_body_bytes: usize,
}

impl Gate {
    /// `public_url` is the policy's, with a port 0 already replaced by the bound port.
    pub fn new(policy: &Policy, public_url: &url::Url) -> Result<Gate, String> {
        let first = policy
            .upstreams
            .first()
            .ok_or_else(|| "no upstream configured".to_string())?;
        let auth = Authenticator::from_policy(&policy.auth);
        let mut schemes = Map::new();
        if !policy.auth.bearer.is_empty() {
            schemes.insert(
                "bearerAuth".into(),
                json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}}),
            );
        }
        Ok(Gate {
            rpc_path: public_url.path().to_string(),
            face: EdgeFace {
                public_url: public_url.to_string(),
                security_schemes: schemes,
            },
            auth,
            upstream: Upstream::from_policy(first)?,
            max_body_bytes: policy.a2a.max_body_bytes,
        })
    }

    /// Serves one request. Never fails: every refusal is rendered as a response.
    pub async fn handle(&self, conn: ConnInfo, req: Request<Incoming>) -> Response<BoxBody> {
        let started = Instant::now();
        let route = classify(req.method(), req.uri().path(), &self.rpc_path);
        let head = req.method() == Method::HEAD;
        let (outcome, principal, rpc_method) = match route {
            Route::Health => (Ok(health()), None, None),
            Route::Card => (self.card(head).await, None, None),
            Route::Rpc => self.rpc(req).await,
            Route::NotFound => (
                Err(Rejection::Http {
                    status: StatusCode::NOT_FOUND,
                    message: "Not found",
                    reason: "route.not_found",
                    allow: None,
                }),
                None,
                None,
            ),
            Route::MethodNotAllowed(allow) => (
                Err(Rejection::Http {
                    status: StatusCode::METHOD_NOT_ALLOWED,
                    message: "Method not allowed",
                    reason: "route.method_not_allowed",
                    allow: Some(allow),
                }),
                None,
                None,
            ),
        };
        let (resp, reason) = match outcome {
            Ok(r) => (r, None),
            Err(rej) => {
                let reason = rej.reason();
                (rej.render(), Some(reason))
            }
        };
        telemetry::log(
            "request",
            json!({
                "client": conn.peer.ip().to_string(),
                "route": route_name(route),
                "method": rpc_method,
                "principal": principal,
                "reason": reason,
                "status": resp.status().as_u16(),
                "ms": started.elapsed().as_millis() as u64,
            }),
        );
        resp
    }

    /// The JSON-RPC route: the stages in order.
    async fn rpc(
        &self,
        req: Request<Incoming>,
    ) -> (
        Result<Response<BoxBody>, Rejection>,
        Option<String>,
        Option<&'static str>,
    ) {
        let (parts, body) = req.into_parts();
        let principal = match self.authenticate(&parts.headers) {
            Ok(p) => p,
            Err(rej) => return (Err(rej), None, None),
        };
        let name = Some(principal.name.clone());
        let bytes = match read_body(body, &parts.headers, self.max_body_bytes).await {
            Ok(b) => b,
            Err(rej) => return (Err(rej), name, None),
        };
        let rpc = match RpcRequest::parse(&bytes) {
            Ok(r) => r,
            Err(e) => return (Err(Rejection::rpc(e.id, e.error)), name, None),
        };
        let method = Some(rpc.method.as_str());
        (self.forward(&parts.headers, &rpc).await, name, method)
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Rejection> {
        self.auth
            .authenticate(headers)
            .map_err(|r| Rejection::Unauthorized {
                reason: r.reason,
                challenge: self.auth.challenge(),
            })
    }

    /// Sends the proxy's own serialization of the validated request with sanitized headers.
    async fn forward(
        &self,
        caller_headers: &HeaderMap,
        rpc: &RpcRequest,
    ) -> Result<Response<BoxBody>, Rejection> {
        let headers = upstream::upstream_request_headers(caller_headers);
        let upstream_error = |e: UpstreamError| {
            Rejection::rpc(
                rpc.id.clone(),
                RpcError::new(-32603, e.message(), e.reason()),
            )
        };
        let resp = self
            .upstream
            .send_rpc(headers, Bytes::from(rpc.to_bytes()))
            .await
            .map_err(upstream_error)?;
        relay_response(resp, &rpc.id, Default::default())
            .await
            .map_err(upstream_error)
    }

    /// The public Agent Card: the agent's, rewritten for the edge.
    async fn card(&self, head: bool) -> Result<Response<BoxBody>, Rejection> {
        let unavailable = Rejection::Http {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "Agent card unavailable",
            reason: "card.unavailable",
            allow: None,
        };
        let resp = self
            .upstream
            .get(CARD_PATH)
            .await
            .map_err(|_| unavailable.clone())?;
        if resp.status() != StatusCode::OK {
            return Err(unavailable);
        }
        let bytes = collect_limited(resp.into_body(), MAX_CARD_BYTES)
            .await
            .map_err(|_| unavailable.clone())?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| unavailable.clone())?;
        let card = card::rewrite(value, &self.face).map_err(|_| unavailable)?;
        let body = Bytes::from(card.to_string());
        let len = body.len();
        let mut r = json_response(StatusCode::OK, if head { Bytes::new() } else { body });
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        Ok(r)
    }
}

fn health() -> Response<BoxBody> {
    json_response(StatusCode::OK, r#"{"status":"healthy"}"#)
}

fn route_name(route: Route) -> &'static str {
    match route {
        Route::Health => "health",
        Route::Card => "card",
        Route::Rpc => "rpc",
        Route::NotFound => "not_found",
        Route::MethodNotAllowed(_) => "method_not_allowed",
    }
}

/// Reads the request body up to `cap` bytes; a declared or actual excess is refused with 413
/// before (or as soon as) it crosses the cap.
async fn read_body(body: Incoming, headers: &HeaderMap, cap: usize) -> Result<Bytes, Rejection> {
    let too_large = Rejection::Rpc {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        id: Value::Null,
        error: RpcError::invalid_request("Request body too large", "body.too_large"),
    };
    if let Some(len) = headers.get(header::CONTENT_LENGTH) {
        let declared = len.to_str().ok().and_then(|s| s.parse::<u64>().ok());
        match declared {
            Some(n) if n > cap as u64 => return Err(too_large),
            Some(_) => {}
            None => {
                return Err(Rejection::Http {
                    status: StatusCode::BAD_REQUEST,
                    message: "Invalid Content-Length",
                    reason: "body.content_length",
                    allow: None,
                })
            }
        }
    }
    match collect_limited(body, cap).await {
        Ok(bytes) => Ok(bytes),
        Err(CollectError::TooLarge) => Err(too_large),
        Err(CollectError::Read) => Err(Rejection::Http {
            status: StatusCode::BAD_REQUEST,
            message: "Request body could not be read",
            reason: "body.read",
            allow: None,
        }),
    }
}
