//! The embedded A2A task engine: a small, faithful, in-memory A2A 1.0 JSON-RPC server with an
//! echo agent. It is the default upstream of the proxy and the upstream of tests and benchmarks.
//!
//! - [`Engine::handle`] serves one HTTP request (body already read): `/health`, the Agent
//!   Card, and JSON-RPC on `POST /` (and on the path of `public_url`).
//! - [`serve`] runs it standalone on plain HTTP (HTTP/1.1 and h2c).
//!
//! Rooms: `rpc` (methods), `params` (checked params), `store` (tasks, turns, state machine,
//! paging), `task` (ProtoJSON shapes), `agent` (the echo agent and its directives), `stream`
//! (SSE), `card`, `serve`, `ids` (time formatting is `crate::time`).

mod agent;
mod card;
mod events;
mod ids;
mod params;
mod rpc;
mod serve;
mod store;
mod stream;
mod task;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use serde_json::Value;

use crate::body::{json_response, BoxBody};

pub use serve::serve;

/// How the engine presents itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// The JSON-RPC URL advertised in the card.
    pub public_url: String,
    /// The agent name in the card.
    pub name: String,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            public_url: "http://127.0.0.1/".into(),
            name: "a2a-edge echo agent".into(),
        }
    }
}

/// The engine: configuration, card, and the task store.
pub struct Engine {
    card: Value,
    card_bytes: Bytes,
    /// The path of `public_url`, also served as the JSON-RPC endpoint (besides `/`).
    rpc_path: String,
    store: Arc<store::Store>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rpc_path", &self.rpc_path)
            .finish_non_exhaustive()
    }
}

/// The path part of a URL (`/` when there is none).
fn url_path(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    let path = path.split(['?', '#']).next().unwrap_or("/");
    if path.is_empty() {
        "/".into()
    } else {
        path.into()
    }
}

impl Engine {
    pub fn new(config: EngineConfig) -> Arc<Engine> {
        Self::with_limits(config, store::MAX_TASKS, store::MAX_BYTES)
    }

    /// An engine holding at most `max_tasks` tasks and `max_bytes` of their messages and
    /// artifacts (see [`store::MAX_BYTES`]).
    pub(crate) fn with_limits(
        config: EngineConfig,
        max_tasks: usize,
        max_bytes: usize,
    ) -> Arc<Engine> {
        let card = card::build(&config);
        Arc::new(Engine {
            card_bytes: Bytes::from(card.to_string()),
            card,
            rpc_path: url_path(&config.public_url),
            store: Arc::new(store::Store::new(max_tasks, max_bytes)),
        })
    }

    /// The public Agent Card.
    pub fn card(&self) -> Value {
        self.card.clone()
    }

    fn is_rpc_path(&self, path: &str) -> bool {
        path == "/"
            || path == self.rpc_path
            || path.strip_suffix('/') == Some(self.rpc_path.as_str())
            || self.rpc_path.strip_suffix('/') == Some(path)
    }

    /// Serves one HTTP request whose body is already read. Routes: GET|HEAD /health;
    /// GET|HEAD /.well-known/agent-card.json; POST / (JSON-RPC). Another path is 404, another
    /// method 405; every body is JSON (or SSE for a stream).
    pub async fn handle(self: &Arc<Self>, req: Request<Bytes>) -> Response<BoxBody> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path();
        let readable = parts.method == http::Method::GET || parts.method == http::Method::HEAD;
        match path {
            "/health" if readable => json_response(StatusCode::OK, &br#"{"status":"healthy"}"#[..]),
            "/.well-known/agent-card.json" if readable => {
                json_response(StatusCode::OK, self.card_bytes.clone())
            }
            "/health" | "/.well-known/agent-card.json" => not_allowed("GET, HEAD"),
            p if self.is_rpc_path(p) => {
                if parts.method == http::Method::POST {
                    rpc::handle(self, &parts.headers, &body).await
                } else {
                    not_allowed("POST")
                }
            }
            _ => json_response(StatusCode::NOT_FOUND, &br#"{"error":"not found"}"#[..]),
        }
    }
}

fn not_allowed(allow: &'static str) -> Response<BoxBody> {
    let mut resp = json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &br#"{"error":"method not allowed"}"#[..],
    );
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    resp
}
