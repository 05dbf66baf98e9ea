//! Relaying an agent's response to the caller: JSON bodies bounded and whole; server-sent
//! events one event at a time as they arrive, never buffered whole, each cleaned and
//! re-encoded by the edge. A silent agent is covered by keep-alive comments; an agent silent
//! past the idle timeout, a stream past its maximum duration, or an agent that fails in the
//! middle gives the caller an `event: error` frame, then the end.
//!
//! Every JSON-RPC response of the agent (the one JSON answer, or each event's) is put in the
//! shape the caller asked for before anything else looks at it: one object, `jsonrpc` 2.0,
//! the caller's own `id`, exactly one of `result` and `error`. Then the observer cleans it and
//! learns from it; an observer that refuses it (another caller's task) ends the answer with an
//! error instead. An error (an `event: error`, or a response with `error`) ends a stream.
//!
//! What one stream may hold is bounded by bytes ([`crate::stream_body`]): its own queue, and
//! the budget its principal's streams share. While the relay waits for a caller that does not
//! read, the stream's maximum duration still applies, and so does the idle timeout: a caller
//! that takes nothing for that long is dropped (`client.stalled`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{header, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::answer::{self, Cleaning};
use super::UpstreamError;
use crate::a2a::sse::{comment, data_event, error_event, SseDecoder, SseEvent};
use crate::a2a::{error_body, write, RpcError};
use crate::body::{collect_taking, sse_response, BodyError, BoxBody};
use crate::limits::concurrency::{reckoned_tree, values_within, RequestBytes};
use crate::reason::{self, Reason};
use crate::stream_body::budgeted;
use crate::telemetry::metrics::{Metrics, StreamOutcome};
use crate::validate::request::RequestPolicy;

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
    /// What one stream may hold queued for a caller that reads slowly.
    pub stream_buffer_bytes: usize,
}

impl Default for RelayLimits {
    fn default() -> Self {
        Self {
            max_json_bytes: 64 * 1024 * 1024,
            max_event_bytes: 16 * 1024 * 1024,
            keepalive: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(300),
            max_duration: Duration::from_secs(3600),
            stream_buffer_bytes: 1024 * 1024,
        }
    }
}

/// Whose stream it is, for the `stream_end` log line and the stream metrics, and the budget
/// its principal's streams share (a semaphore and its size).
#[derive(Clone)]
pub struct StreamLog {
    pub request_id: String,
    pub metrics: Arc<Metrics>,
    pub shared_budget: Option<(Arc<tokio::sync::Semaphore>, usize)>,
}

/// Why an observer refused an answer: its reason code.
pub type Refused = Reason;

/// Ends a stream before its agent does, whatever the agent sends or not (the stream's turn
/// lost its busy lease): resolves to the reason of the stream's last event, its error.
pub type Interrupt = std::pin::Pin<Box<dyn Future<Output = Reason> + Send>>;

/// Puts one JSON-RPC response of the agent in the shape of an answer to `id`: an object, with
/// `jsonrpc` 2.0, the caller's id and exactly one of `result` and `error`. The agent's own
/// `id` must be the request's (JSON-RPC 2.0 §5: the edge forwards the caller's id as it
/// came): a result for another id is an answer to another request (an agent that mixes up
/// concurrent answers) and is refused; an error may also carry `null` or no id (an agent
/// that could not read the request: only its code reaches the caller anyway).
fn shape(v: Value, id: &Value) -> Result<Value, Refused> {
    let Value::Object(mut map) = v else {
        return Err(reason::UPSTREAM_BAD_RESPONSE);
    };
    let error = map.contains_key("error");
    let echoed = match map.get("id") {
        Some(theirs) => theirs == id || (theirs.is_null() && error),
        None => error,
    };
    if !echoed {
        tracing::warn!(event = "upstream_response_id");
        return Err(reason::UPSTREAM_BAD_RESPONSE);
    }
    match (map.remove("result"), map.remove("error")) {
        (Some(r), None) => {
            map.clear();
            map.insert("result".into(), r);
        }
        (None, Some(e)) if e.is_object() => {
            map.clear();
            map.insert("error".into(), e);
        }
        _ => return Err(reason::UPSTREAM_BAD_RESPONSE),
    }
    map.insert("jsonrpc".into(), Value::from("2.0"));
    map.insert("id".into(), id.clone());
    Ok(Value::Object(map))
}

/// Shows the observer that the answer ends here without a response that ends it (the edge's
/// error frame, a stream that ends without its agent ending the turn, one JSON answer to a
/// streaming method): a response without `result`, `{"error": {"code": code}}`. A turn the
/// observer owns ends then (its context freed) before the caller sees the end; that is waited
/// for unless `wait` is false (a release is still sent).
async fn end_of_answer<F, P>(observe: &mut F, code: i64, wait: bool)
where
    F: FnMut(&mut Value) -> Result<Option<P>, Refused>,
    P: Future<Output = Result<(), Refused>>,
{
    let mut end = serde_json::json!({"error": {"code": code}});
    if let (Ok(Some(ending)), true) = (observe(&mut end), wait) {
        let _ = ending.await;
    }
}

/// Why one response of the agent was not relayed.
enum Failed<P> {
    /// Not a JSON-RPC response the edge accepts.
    Bad,
    /// The observer refused it.
    Refused(Refused),
    /// Past the caller's request budgets, with what the observer made of it nonetheless
    /// ([`learn_unrelayed`]): its pending write, to finish before the refusal is relayed, or
    /// its own refusal.
    Over(Reason, Result<Option<P>, Refused>),
}

impl<P: Future<Output = Result<(), Refused>>> Failed<P> {
    /// The caller's error, once what was learned of the answer is written. What the
    /// observer refuses in the answer, or its write's failure, is the caller's error (as it
    /// would have been with room for the answer: the shared state unavailable, another
    /// caller's task), else the budget's.
    async fn settled(self) -> UpstreamError {
        match self {
            Failed::Bad => UpstreamError::BadResponse,
            Failed::Refused(r) | Failed::Over(_, Err(r)) => UpstreamError::Refused(r),
            Failed::Over(reason, Ok(pending)) => match pending {
                Some(pending) => UpstreamError::Refused(pending.await.err().unwrap_or(reason)),
                None => UpstreamError::Refused(reason),
            },
        }
    }
}

/// What the agent did, learned from one of its responses that the caller is not given for
/// the caller's request budgets: the observer sees the response's projection
/// ([`answer::project`]: its ids and states, no tree, at most [`answer::MAX_BUILT_VALUES`]
/// values and [`answer::MAX_BUILT_BYTES`], not charged to the budgets), so that a
/// task the agent made for the caller is still the caller's, to find with ListTasks and read
/// once its budgets have room. What the projection cannot be taken of (an `error`, a
/// response the scan leaves to the full pass for its shape or size) is not learned; what the
/// observer refuses is not either, and is returned. Returns the observer's pending write.
fn learn_unrelayed<F, P>(
    text: &[u8],
    id: &Value,
    fast: Option<&RequestPolicy>,
    observe: &mut F,
) -> Result<Option<P>, Refused>
where
    F: FnMut(&mut Value) -> Result<Option<P>, Refused>,
{
    let max_values = fast.map_or(crate::a2a::json::DEFAULT_MAX_VALUES, |r| r.max_json_values);
    let Some((projection, theirs)) = answer::project(text, max_values) else {
        return Ok(None);
    };
    match shape_projection(projection, theirs, id) {
        Ok(mut v) => observe(&mut v),
        Err(_) => Ok(None),
    }
}

/// A response's projection (its `result`'s, and the agent's `id`) as the observer sees it:
/// shaped as the whole response would be ([`shape`]).
fn shape_projection(
    projection: Value,
    theirs: Option<Value>,
    id: &Value,
) -> Result<Value, Refused> {
    let mut response = serde_json::Map::new();
    response.insert("result".into(), projection);
    if let Some(theirs) = theirs {
        response.insert("id".into(), theirs);
    }
    shape(Value::Object(response), id)
}

/// Reads an agent's whole answer of at most `cap` bytes, its bytes charged to the caller's
/// request budgets (`held`) as they arrive: past those, refused with the budget's reason
/// (`concurrency.request_bytes`, `overload.request_bytes`).
pub async fn read_answer<B>(
    body: B,
    cap: usize,
    held: &mut RequestBytes,
) -> Result<bytes::Bytes, UpstreamError>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: Into<BodyError>,
{
    let mut left = cap;
    let mut over = None;
    let read = collect_taking(body, |n| {
        let Some(l) = left.checked_sub(n) else {
            return false;
        };
        left = l;
        held.grow(n).map_err(|r| over = Some(r)).is_ok()
    })
    .await;
    match (read, over) {
        (Err(_), Some(reason)) => Err(UpstreamError::Refused(reason)),
        (read, _) => read.map_err(UpstreamError::of_body),
    }
}

/// An agent's whole answer as a tree, parsed only as far as the caller's request budgets
/// (`held`) have room for it, and then charged to them (its strings and 192 bytes a value, as
/// a request's tree is): `Err(Some((reason, tree)))` past them (`tree`: what its tree would
/// have been charged), `Err(None)` when it is not JSON of at most `max_values` values (whether
/// or not it would fit).
pub fn parse_charged(
    text: &[u8],
    max_values: usize,
    held: &mut RequestBytes,
) -> Result<Value, Option<(Reason, usize)>> {
    let (room, bound) = held.room();
    let most = values_within(room, text.len()).min(max_values);
    match crate::a2a::json::parse_answer_counted(text, most) {
        Ok((v, values)) => {
            let tree = reckoned_tree(text.len(), values);
            held.grow(tree).map_err(|reason| Some((reason, tree)))?;
            Ok(v)
        }
        // Stopped by the budget, or over the bound (or not JSON) all the same: counted to
        // tell, without a tree.
        Err(crate::a2a::json::JsonError::TooManyValues) if most < max_values => {
            match crate::a2a::json::count_answer(text, max_values) {
                Ok(values) => Err(Some((bound, reckoned_tree(text.len(), values)))),
                Err(_) => Err(None),
            }
        }
        Err(_) => Err(None),
    }
}

/// One JSON-RPC response of the agent made the caller's: shaped, seen by the observer,
/// written. With `fast` (the route's cleaning), the answer's fast pass ([`super::answer`])
/// goes first: when the cleaning would change nothing, the agent's `result` is relayed as
/// it came and the observer sees its projection (what the registry reads); else the whole
/// response is built, cleaned and written again. Returns the caller's JSON, whether it is an
/// error, and the observer's pending write. With `held` (the answer's share of the caller's
/// request budgets), the whole response's tree is charged to them (its strings and 192 bytes
/// a value), and parsed only as far as they have room.
fn one_response<F, P>(
    text: &[u8],
    id: &Value,
    fast: Option<&RequestPolicy>,
    observe: &mut F,
    held: Option<&mut RequestBytes>,
) -> Result<(Vec<u8>, bool, Option<P>), Failed<P>>
where
    F: FnMut(&mut Value) -> Result<Option<P>, Refused>,
{
    let cleaning = fast.map(|r| Cleaning {
        metadata: &r.metadata,
        redact_paths: r.redact_paths,
        max_values: r.max_json_values,
    });
    if let Some(untouched) = cleaning.and_then(|c| answer::scan(text, c)) {
        let mut v =
            shape_projection(untouched.projection, untouched.id, id).map_err(|_| Failed::Bad)?;
        let pending = observe(&mut v).map_err(Failed::Refused)?;
        let id = v.get("id").unwrap_or(&Value::Null);
        return Ok((answer::respond(untouched.result, id), false, pending));
    }
    // The whole answer as a tree: as many values as a request may hold, no more (a tree
    // costs 32 bytes and more per value, where the text may spend two).
    let max_values = fast.map_or(crate::a2a::json::DEFAULT_MAX_VALUES, |r| r.max_json_values);
    let v = match held {
        Some(held) => parse_charged(text, max_values, held).map_err(|over| match over {
            Some((reason, _)) => Failed::Over(reason, learn_unrelayed(text, id, fast, observe)),
            None => Failed::Bad,
        })?,
        None => crate::a2a::json::parse_answer(text, max_values).map_err(|_| Failed::Bad)?,
    };
    let mut v = shape(v, id).map_err(|_| Failed::Bad)?;
    let pending = observe(&mut v).map_err(Failed::Refused)?;
    let error = v.get("error").is_some();
    Ok((write::to_vec_sized(&v, text.len() + 64), error, pending))
}

/// The media type of a response (`Content-Type` without its parameters), lowercased.
fn media_type(headers: &http::HeaderMap) -> String {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Whether an agent's answer is a 200 of `application/json` (exactly that media type, any
/// parameters): what a whole answer the edge reads must be.
pub fn is_json_ok(resp: &Response<BoxBody>) -> bool {
    resp.status() == StatusCode::OK && is_json(resp.headers())
}

/// Whether a `Content-Type` is `application/json` (exactly that media type, any parameters:
/// not `application/jsonp` or `application/json-seq`).
pub fn is_json(headers: &http::HeaderMap) -> bool {
    media_type(headers) == "application/json"
}

/// Turns the agent's response into the caller's. `id` is the JSON-RPC id of the request,
/// used for an error frame if the stream breaks. `observe` sees every JSON-RPC response the
/// agent sends (the one JSON answer, or each SSE event's), and an answer's end that no
/// response of the agent ends ([`end_of_answer`]: the edge's error frame, a stream's end, one
/// JSON answer to a stream); it is dropped when the answer has
/// been sent (a JSON answer's last piece taken by the connection, a stream's end), or
/// dropped unsent, so whatever it owns (a concurrency slot, a running turn) lives exactly as
/// long: a caller that reads nothing holds no more answers than its slots.
/// `streaming`: the caller asked for a stream (SendStreamingMessage, SubscribeToTask); an
/// agent answering any other method with a stream is refused (it would hold the caller's
/// request slot for as long as it liked, outside the stream limits, and hand the caller a
/// stream it did not ask for).
/// What the observer returns may be a write to finish before the answer is relayed (the
/// shared state's record of a new task): it is awaited first, and its refusal ends the answer
/// like the observer's own. `fast` is the request policy whose cleaning the observer applies
/// (`clean_response` with its metadata policy and `redact_paths`): with it, responses that
/// cleaning would leave as they are take the fast pass, and the observer sees their
/// projection ([`one_response`]); `None` builds and cleans every response whole.
/// `interrupt`, when it resolves, ends a stream with an error frame at once, without waiting
/// for the agent's next event (a JSON answer is its observer's alone to refuse). `slot` (the
/// caller's concurrency slot) is the answer's: a JSON answer's body holds it until it has
/// been sent, a stream until it ends; `observe` (and the turn it owns) goes once the JSON
/// answer is built, or when the stream ends. `held` (the request's share of the caller's
/// request budgets) is grown by a JSON answer as it is read and built ([`read_answer`]), and
/// then holds what the answer's body holds until it is sent; a stream's, what its events hold
/// while each is read and checked.
#[allow(clippy::too_many_arguments)]
pub async fn relay_response<F, P, S>(
    upstream: Response<BoxBody>,
    id: &Value,
    streaming: bool,
    limits: RelayLimits,
    log: StreamLog,
    fast: Option<Arc<RequestPolicy>>,
    interrupt: Option<Interrupt>,
    (slot, mut held): (S, RequestBytes),
    mut observe: F,
) -> Result<Response<BoxBody>, UpstreamError>
where
    F: FnMut(&mut Value) -> Result<Option<P>, Refused> + Send + 'static,
    P: Future<Output = Result<(), Refused>> + Send,
    S: Send + Unpin + 'static,
{
    // (the agent has acted on the request: its answer is refused for the caller's budget only
    // while the caller's other requests hold it)
    held.answering();
    if upstream.status() != StatusCode::OK {
        tracing::warn!(
            event = "upstream_status",
            status = upstream.status().as_u16()
        );
        return Err(UpstreamError::BadResponse);
    }
    match media_type(upstream.headers()).as_str() {
        "text/event-stream" if !streaming => {
            tracing::warn!(event = "upstream_unasked_stream");
            Err(UpstreamError::BadResponse)
        }
        "text/event-stream" => Ok(relay_sse(
            upstream.into_body(),
            id.clone(),
            limits,
            log,
            fast,
            interrupt,
            (slot, held),
            observe,
        )),
        "application/json" => {
            // Bounded in time with the head ([`super::Upstream`]'s response timeout), and in
            // bytes by the caller's request budgets: the answer read, the answer written for
            // the caller (about as large) and a tree where one is built.
            let bytes = read_answer(upstream.into_body(), limits.max_json_bytes, &mut held).await?;
            if let Err(reason) = held.grow(bytes.len()) {
                let pending = learn_unrelayed(&bytes, id, fast.as_deref(), &mut observe);
                return Err(Failed::Over(reason, pending).settled().await);
            }
            let answered = one_response(&bytes, id, fast.as_deref(), &mut observe, Some(&mut held));
            let (json, error, pending) = match answered {
                Ok(answered) => answered,
                Err(failed) => return Err(failed.settled().await),
            };
            drop(bytes);
            // (what the answer holds while it is sent)
            held.shrink_to(json.len());
            let slot = (slot, held);
            if let Some(pending) = pending {
                pending.await.map_err(UpstreamError::Refused)?;
            }
            // An agent's one JSON result to a stream is the stream's last event.
            if streaming && !error {
                end_of_answer(&mut observe, 0, true).await;
            }
            // The turn ends with its answer (its context is free for the next one); the
            // caller's slot is the body's until the answer has been sent.
            drop(observe);
            if streaming && !error {
                // A streaming method is answered with a stream (A2A §3.1.2, §9.4.2: an SSE
                // client reads no JSON body): an agent's one JSON result is its one event.
                // A JSON error stays JSON, as the edge's own refusals of streams are.
                return Ok(crate::body::sse_response(
                    crate::body::Holding::new(data_event(&json), slot).boxed(),
                ));
            }
            Ok(crate::body::json_response_holding(
                StatusCode::OK,
                json,
                slot,
            ))
        }
        _ => Err(UpstreamError::BadResponse),
    }
}

/// `observe` (and what it owns) is dropped when the stream ends, however it ends. How it
/// ended is logged (`stream_end`) and counted (`a2a_edge_streams_total{outcome}`).
#[allow(clippy::too_many_arguments)]
fn relay_sse<F, P, S>(
    mut body: BoxBody,
    id: Value,
    limits: RelayLimits,
    log: StreamLog,
    fast: Option<Arc<RequestPolicy>>,
    interrupt: Option<Interrupt>,
    (slot, mut held): (S, RequestBytes),
    mut observe: F,
) -> Response<BoxBody>
where
    F: FnMut(&mut Value) -> Result<Option<P>, Refused> + Send + 'static,
    P: Future<Output = Result<(), Refused>> + Send,
    S: Send + Unpin + 'static,
{
    let (tx, out) = budgeted(limits.stream_buffer_bytes, log.shared_budget.clone());
    // The caller's stream slot lasts until the caller has taken the stream's last byte (or
    // left), not only while the agent's stream lasts: what is queued for a slow reader stays
    // counted against its principal.
    tx.hold(slot);
    // What the stream holds of the agent's events while they are read and checked (the
    // decoder's unfinished event, the events out of it, a tree where one is built) is the
    // caller's, as its requests' is: past its request budgets the stream ends (what is queued
    // for the caller has the stream budgets). The request's own share goes with it.
    held.shrink_to(0);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let open = log.metrics.open_stream();
        let mut events = 0u64;
        let ended: Result<StreamOutcome, Reason> = async {
            let mut decoder = SseDecoder::data_only(limits.max_event_bytes);
            // `Err(reason)` ends the stream with an error frame (below).
            let deadline = started + limits.max_duration;
            let mut interrupt = interrupt.unwrap_or_else(|| Box::pin(std::future::pending()));
            let mut last_upstream = tokio::time::Instant::now();
            let mut last_sent = tokio::time::Instant::now();
            // Sends one frame, waiting for a slow caller no longer than the stream may last
            // or stay without progress, nor past an interrupt (a turn that lost its context
            // ends while its caller does not read, too). Every wait has one timer, set to the
            // earliest of what is due (not one per limit); when several are due, the stream's
            // end goes first.
            macro_rules! send {
                ($frame:expr) => {{
                    let frame = $frame;
                    let stalled = tokio::time::Instant::now() + limits.idle_timeout;
                    tokio::select! {
                        r = tx.send(frame) => if r.is_err() { return Ok(StreamOutcome::ClientGone) },
                        reason = &mut interrupt => return Err(reason),
                        _ = tokio::time::sleep_until(stalled.min(deadline)) => {
                            if stalled < deadline {
                                // What is queued is dropped: the response is aborted, so
                                // the caller cannot take its end for the stream's.
                                tx.abort(reason::CLIENT_STALLED.as_str());
                                return Ok(StreamOutcome::Ended(reason::CLIENT_STALLED));
                            }
                            return Err(reason::UPSTREAM_STREAM_TOO_LONG);
                        }
                    }
                    last_sent = tokio::time::Instant::now();
                }};
            }
            loop {
                let next_keepalive = last_sent + limits.keepalive;
                let idle_at = last_upstream + limits.idle_timeout;
                let wake = next_keepalive.min(idle_at).min(deadline);
                let frame = tokio::select! {
                    f = body.frame() => f,
                    _ = tokio::time::sleep_until(wake) => {
                        if wake == deadline {
                            return Err(reason::UPSTREAM_STREAM_TOO_LONG);
                        }
                        if wake == idle_at {
                            // Nothing complete waits in the decoder (each event is out of
                            // `push` at its blank line, a CR-only one too): what is pending
                            // is an unfinished event, lost with the stream.
                            return Err(reason::UPSTREAM_STREAM_IDLE);
                        }
                        // Time spent waiting for the caller is not the agent's silence.
                        let waited = tokio::time::Instant::now();
                        send!(comment("keep-alive"));
                        last_upstream += waited.elapsed();
                        continue;
                    }
                    // The caller left: stop, dropping the agent's stream with it.
                    _ = tx.closed() => return Ok(StreamOutcome::ClientGone),
                    reason = &mut interrupt => return Err(reason),
                };
                let arrived = tokio::time::Instant::now();
                let end = match frame {
                    // The end of the agent's stream (every complete event was taken out
                    // as it came).
                    None => true,
                    Some(Ok(f)) => match f.into_data() {
                        Ok(data) => {
                            decoder.feed(&data).map_err(|_| reason::UPSTREAM_BAD_STREAM)?;
                            false
                        }
                        Err(_) => continue, // trailers carry nothing for SSE
                    },
                    Some(Err(_)) => return Err(reason::UPSTREAM_STREAM_BROKEN),
                };
                // The chunk's events one at a time (a chunk of many small events never
                // stands as many events at once), each charged with what was fed after it;
                // what ends no event is charged after them (nothing is awaited before
                // either): an event that ends in the chunk is learned from even when what
                // follows it does not fit.
                let mut any = false;
                loop {
                    let ev = match decoder.next_event() {
                        Ok(Some(ev)) => ev,
                        Ok(None) => break,
                        Err(_) => return Err(reason::UPSTREAM_BAD_STREAM),
                    };
                    any = true;
                    if let Err(reason) = held.resize(decoder.pending() + ev.held()) {
                        let text = ev.data.as_deref().unwrap_or_default().as_bytes();
                        let pending = learn_unrelayed(text, &id, fast.as_deref(), &mut observe);
                        return Err(Failed::Over(reason, pending).settled().await.reason());
                    }
                    // Only what is relayed is kept while the caller is waited for: the raw
                    // event, its text and the parsed value are dropped first.
                    let size = ev.held();
                    let SseEvent { event, data, .. } = ev;
                    // A comment (the agent's own keep-alive) is not relayed: its text is the
                    // agent's, unchecked; the edge sends keep-alives of its own.
                    let Some(data) = data else {
                        continue;
                    };
                    let before = held.bytes();
                    let answered = one_response(
                        data.as_bytes(),
                        &id,
                        fast.as_deref(),
                        &mut observe,
                        Some(&mut held),
                    );
                    let (json, error, pending) = match answered {
                        Ok(answered) => answered,
                        Err(Failed::Bad) => return Err(reason::UPSTREAM_BAD_STREAM),
                        Err(failed) => return Err(failed.settled().await.reason()),
                    };
                    drop(data);
                    // (its tree and its text are gone) What is relayed stays charged until
                    // it is queued, which waits for the caller's reading (up to the stall
                    // limit): its text, then its frame.
                    let keep = before.saturating_sub(size);
                    if let Err(reason) = held.resize(keep + json.len()) {
                        let failed = Failed::Over(reason, Ok(pending));
                        return Err(failed.settled().await.reason());
                    }
                    // The event's facts written to the shared state (bounded by its
                    // timeout) are waited for even past an interrupt or the caller's
                    // leaving: a task learned there is the caller's to read afterwards.
                    if let Some(pending) = pending {
                        pending.await?;
                    }
                    // An error ends the stream, whatever the agent sends after it; an error
                    // frame around a result is no answer the caller can read.
                    if event.as_deref() == Some("error") && !error {
                        return Err(reason::UPSTREAM_BAD_STREAM);
                    }
                    let frame = if error {
                        error_event(&json)
                    } else {
                        data_event(&json)
                    };
                    drop(json);
                    held.resize(keep + frame.len())?;
                    send!(frame);
                    // (queued: charged to the stream's buffer now)
                    held.shrink_to(keep);
                    // Time spent waiting for the caller is not the agent's silence.
                    last_upstream = tokio::time::Instant::now();
                    events += 1;
                    if error {
                        return Ok(StreamOutcome::Ended(reason::UPSTREAM_ERROR_EVENT));
                    }
                }
                // Only a whole event is the agent's word (its own keep-alive, a comment and
                // its blank line, included): one that sends an event's bytes one at a time,
                // never ending it, is as silent as one that sends nothing. (Each event
                // relayed counts from when it was sent: the caller's wait is not the agent's.)
                if any || decoder.pending() == 0 {
                    last_upstream = last_upstream.max(arrived);
                }
                held.resize(decoder.pending())?;
                if end {
                    break;
                }
            }
            if decoder.pending() > 0 {
                // The agent ended in the middle of an event: what it sent cannot be trusted whole.
                return Err(reason::UPSTREAM_STREAM_TRUNCATED);
            }
            Ok(StreamOutcome::Completed)
        }
        .await;
        let outcome = match ended {
            Ok(StreamOutcome::Completed) => {
                // (a turn the agent ended is over already)
                end_of_answer(&mut observe, 0, true).await;
                StreamOutcome::Completed
            }
            Ok(outcome) => outcome,
            Err(reason) => {
                // The observer sees the edge's error that ends the stream too, before the
                // caller does (not waited for when the shared state is what failed).
                let wait = reason != reason::STATE_UNAVAILABLE;
                end_of_answer(&mut observe, super::answer_code(reason), wait).await;
                let err = RpcError::new(
                    super::answer_code(reason),
                    super::stream_end_message(reason),
                    reason,
                );
                // Small, it goes past the budgets (a caller that reads gets it).
                tx.send_last(error_event(&error_body(&id, &err)));
                StreamOutcome::Ended(reason)
            }
        };
        // The turn ends with the agent's stream (the caller's slot with the body).
        drop(observe);
        // Closed before it is counted as ended: a scrape that sees the end sees it closed.
        drop(open);
        log.metrics.stream_ended(outcome);
        tracing::info!(
            event = "stream_end",
            request_id = log.request_id.as_str(),
            outcome = outcome.as_str(),
            events,
            ms = started.elapsed().as_millis() as u64,
        );
    });
    sse_response(out.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::concurrency::ConcurrencyLimits;

    /// An answer's tree is charged to the caller's budget (its text and 192 bytes a value);
    /// one the budget stopped building is refused with the budget's reason, one over the
    /// value bound (or not JSON) as a bad answer whatever the budget; a refusal holds nothing.
    #[test]
    fn an_answers_tree_is_charged_or_told_apart() {
        let zeros = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        // (text, the caller's budget, bound: Ok(bytes charged) or the refusal)
        type Charged = Result<usize, Option<(Reason, usize)>>;
        let rows: [(String, usize, Charged); 6] = [
            (zeros(99), 100_000, Ok(199 + 100 * 192)),
            (
                zeros(99),
                19_000,
                Err(Some((reason::CONCURRENCY_REQUEST_BYTES, 199 + 100 * 192))),
            ),
            (zeros(200), 19_000, Err(None)),
            (zeros(200), 100_000, Err(None)),
            (format!("{}x", zeros(150)), 19_000, Err(None)),
            ("[1,".to_string(), 100_000, Err(None)),
        ];
        for (text, budget, want) in rows {
            let limits = ConcurrencyLimits::new(8, 8).with_request_budget(budget, 1 << 30);
            let mut held = limits.reservation("alice");
            let got = parse_charged(text.as_bytes(), 150, &mut held).map(|_| held.bytes());
            assert_eq!(got, want, "{} values, budget {budget}", text.len() / 2);
            drop(held);
            assert_eq!(limits.request_bytes_total(), 0);
        }
    }

    /// A whole answer is read only when its media type is `application/json` itself.
    #[test]
    fn only_application_json_is_json() {
        for (content_type, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            (" application/json ;x=y", true),
            ("application/jsonp", false),
            ("application/json-seq", false),
            ("application/json+x", false),
            ("text/json", false),
            ("text/event-stream", false),
            ("", false),
        ] {
            let mut headers = http::HeaderMap::new();
            if !content_type.is_empty() {
                headers.insert(
                    header::CONTENT_TYPE,
                    http::HeaderValue::from_str(content_type).unwrap(),
                );
            }
            assert_eq!(is_json(&headers), json, "{content_type:?}");
        }
    }
}
