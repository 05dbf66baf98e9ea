//! Relaying an agent's response to the caller: JSON bodies bounded and whole; server-sent
//! events one event at a time as they arrive, never buffered whole. If the agent fails in
//! the middle of a stream, the caller gets an `event: error` frame, then the end.

use http::{header, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::UpstreamError;
use crate::a2a::sse::{error_event, SseDecoder};
use crate::a2a::{error_body, RpcError};
use crate::body::{collect_limited, sse_response, BoxBody, ChannelBody};

/// Bounds on what the proxy accepts from an agent.
#[derive(Debug, Clone, Copy)]
pub struct RelayLimits {
    pub max_json_bytes: usize,
    pub max_event_bytes: usize,
}

impl Default for RelayLimits {
    fn default() -> Self {
        Self {
            max_json_bytes: 64 * 1024 * 1024,
            max_event_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Turns the agent's response into the caller's. `id` is the JSON-RPC id of the request,
/// used for an error frame if the stream breaks. `observe` sees every JSON-RPC response the
/// agent sends (the one JSON answer, or each SSE event's); it is dropped when the answer is
/// complete, so whatever it owns (a concurrency slot, a running turn) lives exactly as long.
pub async fn relay_response<F>(
    upstream: Response<BoxBody>,
    id: &Value,
    limits: RelayLimits,
    mut observe: F,
) -> Result<Response<BoxBody>, UpstreamError>
where
    F: FnMut(&Value) + Send + 'static,
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
        "text/event-stream" => Ok(relay_sse(upstream.into_body(), id.clone(), limits, observe)),
        "application/json" => {
            let bytes = collect_limited(upstream.into_body(), limits.max_json_bytes)
                .await
                .map_err(|_| UpstreamError::BadResponse)?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => observe(&v),
                Err(_) => return Err(UpstreamError::BadResponse),
            }
            Ok(crate::body::json_response(StatusCode::OK, bytes))
        }
        _ => Err(UpstreamError::BadResponse),
    }
}

/// `observe` (and what it owns) is dropped when the stream ends, however it ends.
fn relay_sse<F>(
    mut body: BoxBody,
    id: Value,
    limits: RelayLimits,
    mut observe: F,
) -> Response<BoxBody>
where
    F: FnMut(&Value) + Send + 'static,
{
    let (tx, out) = ChannelBody::new(16);
    tokio::spawn(async move {
        let mut decoder = SseDecoder::new(limits.max_event_bytes);
        let broken = |reason: &'static str| {
            let err = RpcError::new(-32603, "Upstream stream failed", reason);
            error_event(&error_body(&id, &err))
        };
        loop {
            let frame = match body.frame().await {
                None => break,
                Some(Ok(f)) => f,
                Some(Err(_)) => {
                    let _ = tx.send(Ok(broken("upstream.stream_broken"))).await;
                    return;
                }
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers carry nothing for SSE
            };
            match decoder.push(&data) {
                Ok(events) => {
                    for ev in events {
                        if let Some(v) = ev
                            .data
                            .as_deref()
                            .and_then(|d| serde_json::from_str::<Value>(d).ok())
                        {
                            observe(&v);
                        }
                        // The caller left: stop, dropping the agent's stream with it.
                        if tx.send(Ok(ev.raw)).await.is_err() {
                            return;
                        }
                    }
                }
                Err(_) => {
                    let _ = tx.send(Ok(broken("upstream.bad_stream"))).await;
                    return;
                }
            }
        }
        if decoder.pending() > 0 {
            // The agent ended in the middle of an event: what it sent cannot be trusted whole.
            let _ = tx.send(Ok(broken("upstream.stream_truncated"))).await;
        }
    });
    sse_response(out.boxed())
}
