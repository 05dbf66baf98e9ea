//! Server-sent-event responses: one `data:` event per `StreamResponse`, each written as soon
//! as it happens, with the request's JSON-RPC id. A client that reads slowly holds at most
//! `BODY_BYTES` queued (and the turn's own events, [`super::events`]); a client that goes
//! away ends only its own stream, never the turn.

use std::time::Duration;

use bytes::Bytes;
use http::Response;
use serde_json::Value;

use super::store::Events;
use crate::a2a::{result_body, sse};
use crate::body::{full, sse_response, BoxBody};
use crate::stream_body::budgeted;

/// What the writer may run ahead of the client before it waits (bytes; a larger event goes
/// alone).
const BODY_BYTES: usize = 256 * 1024;
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
    let (tx, body) = budgeted(BODY_BYTES, None);
    tokio::spawn(async move {
        if tx.send(event(&id, first)).await.is_err() {
            return;
        }
        let mut ping =
            tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
        loop {
            tokio::select! {
                got = events.recv() => match got {
                    Some(update) => {
                        let frame = event(&id, update.result.clone());
                        if tx.send(frame).await.is_err() || update.last {
                            return;
                        }
                    }
                    // The turn is over and everything was relayed.
                    None => return,
                },
                _ = ping.tick() => {
                    let now = crate::time::format_rfc3339(crate::time::now_micros());
                    if tx.send(sse::comment(&format!("ping - {now}"))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    sse_response(body.boxed())
}
