//! The admin listener (`server.admin_listen`): plain HTTP/1.1 for operators and load balancers,
//! apart from the public listener. `/metrics` (Prometheus text), `/ready` (503 with the reasons
//! while the edge cannot serve: draining, no healthy agent, no card), `/health` (the process
//! answers). Nothing else: no A2A, no card, no credentials. It stays up while the public
//! listener drains, so a balancer sees `/ready` turn 503 before the process goes away.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::body::{full, json_response, BoxBody};
use crate::gate::Gate;
use crate::reason;
use crate::telemetry::metrics::Metrics;

/// Scrapers and probes are few; more connections than this are refused at once.
const MAX_ADMIN_CONNECTIONS: usize = 64;
/// A request's head must arrive within this, also the next one on a kept-alive connection
/// (hyper's header timer runs while the connection waits for a request).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A peer that takes nothing of an answer for this long loses its connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The kernel's send buffer for an admin connection (it doubles it for its bookkeeping).
const SEND_BUFFER: usize = 64 * 1024;
/// No admin connection outlives this (a scraper reconnects): then it is closed after the
/// answer in progress, which has [`WRITE_TIMEOUT`] more to go.
const LIFETIME: Duration = Duration::from_secs(60);

/// Serves the admin routes until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    gates: crate::gate::Gates,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_ADMIN_CONNECTIONS));
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        // A fixed send buffer: the kernel's autotuning would let each peer that never reads
        // pin megabytes until the write timeout; an answer here is a few KiB.
        let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(SEND_BUFFER);
        let gates = gates.clone();
        let metrics = metrics.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = service_fn(move |req| {
                let resp = answer(&req, &gates.load(), &metrics);
                async move { Ok::<_, Infallible>(resp) }
            });
            let io = crate::write_stall::WriteStall::new(tcp, WRITE_TIMEOUT);
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(16 * 1024)
                .serve_connection(TokioIo::new(io), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.changed() => return,
                _ = tokio::time::sleep(LIFETIME) => conn.as_mut().graceful_shutdown(),
            }
            let _ = tokio::time::timeout(WRITE_TIMEOUT, conn).await;
        });
    }
}

fn answer(req: &Request<Incoming>, gate: &Gate, metrics: &Metrics) -> Response<BoxBody> {
    let path = req.uri().path();
    if !matches!(path, "/metrics" | "/ready" | "/health") {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let mut resp = match path {
        "/metrics" => {
            let mut r = Response::new(full(metrics.render(&gate.snapshot())));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        "/ready" => ready(gate, metrics),
        _ => json_response(StatusCode::OK, r#"{"status":"healthy"}"#),
    };
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if req.method() == Method::HEAD {
        *resp.body_mut() = crate::body::empty();
    }
    resp
}

/// Ready when not draining, at least one agent is healthy and a card is published.
fn ready(gate: &Gate, metrics: &Metrics) -> Response<BoxBody> {
    let now = gate.snapshot();
    let healthy = now.upstreams.iter().filter(|u| u.healthy).count();
    let mut reasons = Vec::new();
    if metrics.is_draining() {
        reasons.push(reason::SERVER_DRAINING);
    }
    if healthy == 0 {
        reasons.push(reason::UPSTREAM_NONE_HEALTHY);
    }
    if now.state_available == Some(false) {
        reasons.push(reason::STATE_UNAVAILABLE);
    }
    if !now.card_published {
        reasons.push(reason::CARD_UNAVAILABLE);
    }
    if now.card_invalid {
        reasons.push(reason::CARD_INVALID);
    }
    let body = json!({
        "status": if reasons.is_empty() { "ready" } else { "not_ready" },
        "reasons": reasons,
        "upstreams": {"healthy": healthy, "total": now.upstreams.len()},
        "card_published": now.card_published,
    });
    let status = if reasons.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(status, body.to_string())
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody> {
    let mut r = Response::new(full(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
