//! Server-sent-event responses: one `data:` event per `StreamResponse`, each written as soon
//! as it happens, with the request's JSON-RPC id. A listener that falls too far behind is
//! dropped with an `event: error` frame rather than buffered without bound; a client that goes
//! away ends only its own stream, never the turn.

use std::time::Duration;

use bytes::Bytes;
use http::Response;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::store::Events;
use crate::a2a::{error_body, result_body, sse, RpcError};
use crate::body::{full, sse_response, BoxBody, ChannelBody};

/// Events the writer may run ahead of the client before it waits.
const BODY_CAPACITY: usize = 16;
/// Keep-alive comment interval on a quiet stream (as sse-starlette).
const PING_EVERY: Duration = Duration::from_secs(15);

fn event(id: &Value, result: Value) -> Bytes {
    sse::data_event(&result_body(id, result))
}

/// A stream of exactly one event (a bare message, or a task that is already final).
pub(crate) fn single(id: &Value, result: Value) -> Response<BoxBody> {
    sse_response(full(event(id, result)))
}

/// A stream that starts with `first` and relays `events` until the one that ends the turn.
pub(crate) fn relay(id: Value, first: Value, mut events: Events) -> Response<BoxBody> {
    let (tx, body) = ChannelBody::new(BODY_CAPACITY);
    tokio::spawn(async move {
        if tx.send(Ok(event(&id, first))).await.is_err() {
            return;
        }
        let mut ping =
            tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
        loop {
            tokio::select! {
                got = events.recv() => match got {
                    Ok(update) => {
                        let frame = event(&id, update.result.clone());
                        if tx.send(Ok(frame)).await.is_err() || update.last {
                            return;
                        }
                    }
                    // The turn is over and everything was relayed.
                    Err(RecvError::Closed) => return,
                    Err(RecvError::Lagged(_)) => {
                        let err = RpcError::internal("engine.subscriber_lagged");
                        let _ = tx.send(Ok(sse::error_event(&error_body(&id, &err)))).await;
                        return;
                    }
                },
                _ = ping.tick() => {
                    let now = crate::time::format_rfc3339(crate::time::now_micros());
                    if tx.send(Ok(sse::comment(&format!("ping - {now}")))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    sse_response(body.boxed())
}
