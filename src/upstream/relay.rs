//! Relaying an agent's response to the caller: JSON bodies bounded and whole; server-sent
//! events one event at a time as they arrive, never buffered whole, each cleaned and
//! re-encoded by the edge. A silent agent is covered by keep-alive comments; an agent silent
//! past the idle timeout, a stream past its maximum duration, or an agent that fails in the
//! middle gives the caller an `event: error` frame, then the end.

use std::sync::Arc;
use std::time::Duration;

use http::{header, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::UpstreamError;
use crate::a2a::sse::{comment, data_event, error_event, SseDecoder};
use crate::a2a::{error_body, to_json_bytes, RpcError};
use crate::body::{collect_limited, sse_response, BoxBody, ChannelBody};
use crate::telemetry::metrics::Metrics;

/// Bounds on what the proxy accepts from an agent.
#[derive(Debug, Clone, Copy)]
pub struct RelayLimits {
    pub max_json_bytes: usize,
    pub max_event_bytes: usize,
    /// A `:` comment is sent when nothing was relayed for this long.
    pub keepalive: Duration,
    /// The stream ends with an error frame when the agent sends nothing for this long.
    pub idle_timeout: Duration,
    /// ... or when it has lasted this long.
    pub max_duration: Duration,
}

impl Default for RelayLimits {
    fn default() -> Self {
        Self {
            max_json_bytes: 64 * 1024 * 1024,
            max_event_bytes: 16 * 1024 * 1024,
            keepalive: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(300),
            max_duration: Duration::from_secs(3600),
        }
    }
}

/// Whose stream it is, for the `stream_end` log line and the stream metrics.
#[derive(Clone)]
pub struct StreamLog {
    pub request_id: String,
    pub metrics: Arc<Metrics>,
}

/// Turns the agent's response into the caller's. `id` is the JSON-RPC id of the request,
/// used for an error frame if the stream breaks. `observe` sees every JSON-RPC response the
/// agent sends (the one JSON answer, or each SSE event's); it is dropped when the answer is
/// complete, so whatever it owns (a concurrency slot, a running turn) lives exactly as long.
pub async fn relay_response<F>(
    upstream: Response<BoxBody>,
    id: &Value,
    limits: RelayLimits,
    log: StreamLog,
    mut observe: F,
) -> Result<Response<BoxBody>, UpstreamError>
where
    F: FnMut(&mut Value) + Send + 'static,
{
    if upstream.status() != StatusCode::OK {
        crate::telemetry::log(
            "upstream_status",
            serde_json::json!({"status": upstream.status().as_u16()}),
        );
        return Err(UpstreamError::BadResponse);
    }
    let content_type = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    match media.as_str() {
        "text/event-stream" => Ok(relay_sse(
            upstream.into_body(),
            id.clone(),
            limits,
            log,
            observe,
        )),
        "application/json" => {
            let bytes = collect_limited(upstream.into_body(), limits.max_json_bytes)
                .await
                .map_err(|_| UpstreamError::BadResponse)?;
            let mut v: Value =
                serde_json::from_slice(&bytes).map_err(|_| UpstreamError::BadResponse)?;
            observe(&mut v);
            Ok(crate::body::json_response(
                StatusCode::OK,
                to_json_bytes(&v),
            ))
        }
        _ => Err(UpstreamError::BadResponse),
    }
}

/// `observe` (and what it owns) is dropped when the stream ends, however it ends. How it
/// ended is logged (`stream_end`) and counted (`a2a_edge_streams_total{outcome}`).
fn relay_sse<F>(
    mut body: BoxBody,
    id: Value,
    limits: RelayLimits,
    log: StreamLog,
    mut observe: F,
) -> Response<BoxBody>
where
    F: FnMut(&mut Value) + Send + 'static,
{
    let (tx, out) = ChannelBody::new(16);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let _open = log.metrics.open_stream();
        let mut events = 0u64;
        let outcome: &'static str = async {
            let mut decoder = SseDecoder::new(limits.max_event_bytes);
            let broken = |reason: &'static str| {
                let err = RpcError::new(-32603, "Upstream stream failed", reason);
                error_event(&error_body(&id, &err))
            };
            // Sends the error frame that ends the stream; the outcome is its reason.
            let fail = |reason: &'static str| {
                let frame = broken(reason);
                let tx = &tx;
                async move {
                    let _ = tx.send(Ok(frame)).await;
                    reason
                }
            };
            let deadline = started + limits.max_duration;
            let mut last_upstream = tokio::time::Instant::now();
            let mut last_sent = tokio::time::Instant::now();
            loop {
                let next_keepalive = last_sent + limits.keepalive;
                let idle_at = last_upstream + limits.idle_timeout;
                let frame = tokio::select! {
                    f = body.frame() => f,
                    _ = tokio::time::sleep_until(next_keepalive) => {
                        if tx.send(Ok(comment("keep-alive"))).await.is_err() {
                            return "client_gone";
                        }
                        last_sent = tokio::time::Instant::now();
                        continue;
                    }
                    _ = tokio::time::sleep_until(idle_at) => return fail("upstream.stream_idle").await,
                    _ = tokio::time::sleep_until(deadline) => return fail("upstream.stream_too_long").await,
                    // The caller left: stop, dropping the agent's stream with it.
                    _ = tx.closed() => return "client_gone",
                };
                last_upstream = tokio::time::Instant::now();
                let (decoded, end) = match frame {
                    // The end of the agent's stream may complete a last CR-framed event.
                    None => (decoder.finish(), true),
                    Some(Ok(f)) => match f.into_data() {
                        Ok(data) => (decoder.push(&data), false),
                        Err(_) => continue, // trailers carry nothing for SSE
                    },
                    Some(Err(_)) => return fail("upstream.stream_broken").await,
                };
                let Ok(decoded) = decoded else {
                    return fail("upstream.bad_stream").await;
                };
                for ev in decoded {
                    let out = match ev.data.as_deref() {
                        // A comment (the agent's own keep-alive) is not relayed: its text is the
                        // agent's, unchecked; the edge sends keep-alives of its own.
                        None => continue,
                        Some(d) => match serde_json::from_str::<Value>(d) {
                            Ok(mut v) => {
                                observe(&mut v);
                                let json = to_json_bytes(&v);
                                if ev.event.as_deref() == Some("error") {
                                    error_event(&json)
                                } else {
                                    data_event(&json)
                                }
                            }
                            Err(_) => return fail("upstream.bad_stream").await,
                        },
                    };
                    if tx.send(Ok(out)).await.is_err() {
                        return "client_gone";
                    }
                    events += 1;
                    last_sent = tokio::time::Instant::now();
                }
                if end {
                    break;
                }
            }
            if decoder.pending() > 0 {
                // The agent ended in the middle of an event: what it sent cannot be trusted whole.
                return fail("upstream.stream_truncated").await;
            }
            "completed"
        }
        .await;
        // The turn (and the caller's stream slot) end with the stream.
        drop(observe);
        log.metrics.stream_ended(outcome);
        crate::telemetry::log(
            "stream_end",
            serde_json::json!({
                "request_id": log.request_id,
                "outcome": outcome,
                "events": events,
                "ms": started.elapsed().as_millis() as u64,
            }),
        );
    });
    sse_response(out.boxed())
}
