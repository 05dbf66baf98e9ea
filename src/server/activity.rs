//! Per-connection activity, for the idle timeout: how many requests are in flight on the
//! connection (a response counts until its body is done, so a running stream keeps the
//! connection busy) and since when none is. HTTP/2 has no idle timeout of its own in hyper,
//! and keep-alive pings keep a silent connection open forever without this.
//!
//! And for the write timeout where the socket cannot see it: a response body handed to
//! hyper waits on the peer until hyper takes its next frame (HTTP/2 takes none while the
//! peer grants no flow-control window, and nothing is pending on the socket then, so
//! `write_stall` never fires). A connection on which one body has waited on the peer for
//! the write timeout is closed ([`Unused::Stalled`]), whatever its other streams do: a
//! peer that keeps one stream's window shut while others move would otherwise hold that
//! answer, its slot and its bytes for ever.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::Instant;

use crate::body::BoxBody;

#[derive(Debug)]
struct State {
    in_flight: usize,
    since: Instant,
    /// Response bodies that gave hyper a frame (or their head) and were not asked for
    /// another since, waiting on the peer: (ticket, since when), oldest first (tickets and
    /// times grow together, so the oldest wait is the front).
    waiting: VecDeque<(u64, Instant)>,
    /// The next waiting body's ticket.
    next_ticket: u64,
    /// A request has begun on this connection.
    used: bool,
    /// No new request is to be served ([`Activity::close_to_new`]).
    closed_to_new: bool,
    /// When the connection started.
    started: Instant,
}

/// Why a connection is closed for want of use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unused {
    /// Nothing in flight for the idle timeout.
    Idle,
    /// No request begun within the first-request timeout of the start.
    NoRequest,
    /// A response has waited on the peer for the write timeout.
    Stalled,
}

/// The activity of one connection. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Activity(Arc<Mutex<State>>);

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

impl Activity {
    pub fn new() -> Activity {
        let now = Instant::now();
        Activity(Arc::new(Mutex::new(State {
            in_flight: 0,
            since: now,
            waiting: VecDeque::new(),
            next_ticket: 0,
            closed_to_new: false,
            used: false,
            started: now,
        })))
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut st);
    }

    /// A request started; it ends when the returned guard is dropped.
    #[cfg(test)]
    pub fn begin(&self) -> InFlight {
        self.update(|s| {
            s.in_flight += 1;
            s.used = true;
        });
        InFlight(self.clone())
    }

    /// A request started, unless the connection is closed to new requests; it ends when the
    /// returned guard is dropped.
    pub fn begin_if_open(&self) -> Option<InFlight> {
        let mut st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if st.closed_to_new {
            return None;
        }
        st.in_flight += 1;
        st.used = true;
        drop(st);
        Some(InFlight(self.clone()))
    }

    /// No request begun from now on is served (what runs finishes): for a connection that
    /// may no longer serve under the policy in force, while its goodbye is under way (an
    /// HTTP/2 peer may open streams until it acknowledges the GOAWAY's PING).
    pub fn close_to_new(&self) {
        self.update(|s| s.closed_to_new = true);
    }

    /// Since when nothing is in flight; `None` while something is.
    #[cfg(test)]
    fn idle_since(&self) -> Option<Instant> {
        let st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (st.in_flight == 0).then_some(st.since)
    }

    /// Completes when the connection is to close for want of use: nothing in flight for
    /// `idle` (counted from the end of the last response body, or from the start), or no
    /// request begun within `first_request` of the start (a client that completes the TLS
    /// handshake and then sends nothing, or too little to tell HTTP/1.1 from HTTP/2, which no
    /// HTTP timeout of hyper covers; never once a request has begun), or a response waiting
    /// on the peer for `stall`. One timer, set to whichever is due first: every open
    /// connection (each stream's) waits here.
    pub async fn unused(&self, idle: Duration, first_request: Duration, stall: Duration) -> Unused {
        loop {
            let (idle_due, first_due, stall_due) = {
                let st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                (
                    (st.in_flight == 0).then_some(st.since + idle),
                    (!st.used).then_some(st.started + first_request),
                    st.stall_due(stall),
                )
            };
            let now = Instant::now();
            if first_due.is_some_and(|t| t <= now) {
                return Unused::NoRequest;
            }
            if idle_due.is_some_and(|t| t <= now) {
                return Unused::Idle;
            }
            if stall_due.is_some_and(|t| t <= now) {
                return Unused::Stalled;
            }
            // Busy: look again after `idle` (a request's end moves `since`) or `stall`, or
            // when the oldest waiting response would have stalled (so a stall is seen within
            // at most `idle` + `stall` of its start, with no wake-up per response).
            let mut wake = idle_due.unwrap_or(now + idle.min(stall));
            if let Some(due) = stall_due {
                wake = wake.min(due);
            }
            tokio::time::sleep_until(first_due.map_or(wake, |t| t.min(wake))).await;
        }
    }

    /// Completes when a response has waited on the peer for `stall` (as
    /// [`Activity::unused`] sees it): while a closing connection finishes what runs.
    pub async fn stalled(&self, stall: Duration) {
        loop {
            let due = {
                let st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                st.stall_due(stall)
            };
            let now = Instant::now();
            match due {
                Some(t) if t <= now => return,
                Some(t) => tokio::time::sleep_until(t).await,
                None => tokio::time::sleep(stall).await,
            }
        }
    }

    /// Completes once nothing has been in flight for `grace`, counted from the call or the
    /// end of the last response body, whichever is later: on shutdown, how long a connection
    /// with no work left may take to say goodbye (an HTTP/2 peer that no longer reads never
    /// answers the closing PING).
    pub async fn settled(&self, grace: Duration) {
        let from = Instant::now();
        loop {
            let due = {
                let st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                (st.in_flight == 0).then_some(st.since.max(from) + grace)
            };
            match due {
                Some(t) if t <= Instant::now() => return,
                Some(t) => tokio::time::sleep_until(t).await,
                // Busy: look again after `grace` (a request's end moves `since`).
                None => tokio::time::sleep(grace).await,
            }
        }
    }
}

impl State {
    /// When the response waiting on the peer longest has waited `stall`; `None`: none waits.
    fn stall_due(&self, stall: Duration) -> Option<Instant> {
        self.waiting.front().map(|&(_, since)| since + stall)
    }

    /// A body begins to wait on the peer: its ticket.
    fn wait(&mut self) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.push_back((ticket, Instant::now()));
        ticket
    }

    /// The body of `ticket` waits no longer (asked for its next frame, or dropped).
    fn done_waiting(&mut self, ticket: u64) {
        // (tickets ascend along the queue; a connection's waiting bodies are few)
        if let Ok(i) = self.waiting.binary_search_by_key(&ticket, |&(t, _)| t) {
            self.waiting.remove(i);
        }
    }
}

/// One request in flight on a connection.
#[derive(Debug)]
pub struct InFlight(Activity);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.since = Instant::now();
        });
    }
}

/// The response with `guard` held until its body is done (or dropped); the body waits on
/// the peer from now until hyper asks for its first frame.
pub fn hold_until_body_done(resp: Response<BoxBody>, guard: InFlight) -> Response<BoxBody> {
    let mut ticket = None;
    guard.0.update(|s| ticket = Some(s.wait()));
    resp.map(|inner| {
        Tracked {
            inner,
            guard,
            waiting: ticket,
        }
        .boxed_unsync()
    })
}

struct Tracked {
    inner: BoxBody,
    guard: InFlight,
    /// Gave hyper a frame (or the head) and was not asked for the next since: its ticket.
    waiting: Option<u64>,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = <BoxBody as Body>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(ticket) = this.waiting.take() {
            this.guard.0.update(|s| s.done_waiting(ticket));
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            let mut ticket = None;
            this.guard.0.update(|s| ticket = Some(s.wait()));
            this.waiting = ticket;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(ticket) = self.waiting {
            self.guard.0.update(|s| s.done_waiting(ticket));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(5);
    const FIRST: Duration = Duration::from_secs(2);
    /// Longer than any test here waits: no stall unless a test means one.
    const STALL: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_end_of_the_last_body() {
        let a = Activity::new();
        let guard = a.begin();
        let resp = hold_until_body_done(Response::new(crate::body::full("x")), guard);
        // Busy while the body is alive, however long (and the request began in time).
        let unused = a.unused(IDLE, FIRST, STALL);
        tokio::pin!(unused);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), &mut unused)
                .await
                .is_err(),
            "idle while a response body is alive"
        );
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "x");
        // The body was consumed and dropped: idle counts from now.
        let t0 = Instant::now();
        let why = tokio::time::timeout(Duration::from_secs(60), unused)
            .await
            .unwrap();
        assert_eq!(why, Unused::Idle);
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_secs(4) && waited <= IDLE,
            "{waited:?}"
        );
    }

    /// A response body waits on the peer from its head until it is asked for a frame, and
    /// after each frame it gives until it is asked for the next: a connection on which one
    /// waits and none moves for the stall timeout is stalled. A body asked often enough, or
    /// one that waits on its own source (an idle stream), never is.
    #[tokio::test(start_paused = true)]
    async fn a_response_the_peer_takes_nothing_of_stalls_the_connection() {
        let s = Duration::from_secs;
        let (idle, first, stall) = (s(3600), s(10), s(5));
        // Never asked for a frame (an HTTP/2 peer that grants no window).
        let a = Activity::new();
        let resp = hold_until_body_done(Response::new(crate::body::full("x")), a.begin());
        let t0 = Instant::now();
        let why = tokio::time::timeout(s(60), a.unused(idle, first, stall)).await;
        assert_eq!(why, Ok(Unused::Stalled));
        assert!(t0.elapsed() <= 2 * stall + stall, "{:?}", t0.elapsed());
        // Taken whole: nothing waits, the connection is only busy until the body is dropped.
        let mut body = resp.into_body();
        while let Some(frame) = body.frame().await {
            frame.unwrap();
        }
        let busy = tokio::time::timeout(s(60), a.unused(idle, first, stall)).await;
        assert!(busy.is_err(), "{busy:?}");
        drop(body);
        // A stream whose source is idle: asked, and pending on its source, not on the peer.
        let a = Activity::new();
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let resp = hold_until_body_done(Response::new(Source(rx).boxed_unsync()), a.begin());
        let mut body = resp.into_body();
        let pending = tokio::time::timeout(Duration::from_millis(1), body.frame()).await;
        assert!(pending.is_err(), "pending on its source");
        let waiting = tokio::time::timeout(s(60), a.unused(idle, first, stall)).await;
        assert!(waiting.is_err(), "an idle stream stalled: {waiting:?}");
        // It gives a frame the peer never takes: stalled.
        tx.send(Bytes::from_static(b"event")).await.unwrap();
        assert!(body.frame().await.is_some());
        let why = tokio::time::timeout(s(60), a.unused(idle, first, stall)).await;
        assert_eq!(why, Ok(Unused::Stalled));
        // `stalled` sees the same (for a connection that is closing).
        let why = tokio::time::timeout(s(60), a.stalled(stall)).await;
        assert!(why.is_ok());
        // Taken again, and then within each stall: never stalled.
        tx.send(Bytes::from_static(b"event")).await.unwrap();
        assert!(body.frame().await.is_some());
        let moving = async {
            loop {
                tokio::time::sleep(s(4)).await;
                tx.send(Bytes::from_static(b"event")).await.unwrap();
                assert!(body.frame().await.is_some());
            }
        };
        tokio::select! {
            () = moving => {}
            why = a.unused(idle, first, stall) => panic!("a moving stream stalled: {why:?}"),
            () = tokio::time::sleep(s(60)) => {}
        }
    }

    /// One response the peer takes nothing of stalls the connection although another on it
    /// keeps moving (an HTTP/2 peer that shuts one stream's window and reads the others,
    /// or keeps opening new ones): the stuck one would otherwise be held for ever.
    #[tokio::test(start_paused = true)]
    async fn one_stuck_response_stalls_the_connection_whatever_the_others_do() {
        let s = Duration::from_secs;
        let (idle, first, stall) = (s(3600), s(10), s(5));
        let a = Activity::new();
        let _stuck = hold_until_body_done(Response::new(crate::body::full("x")), a.begin());
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let moving = hold_until_body_done(Response::new(Source(rx).boxed_unsync()), a.begin());
        let mut body = moving.into_body();
        let t0 = Instant::now();
        let keep_moving = async {
            loop {
                tx.send(Bytes::from_static(b"event")).await.unwrap();
                assert!(body.frame().await.is_some());
                // (and a short response begun and taken whole meanwhile)
                let short = hold_until_body_done(Response::new(crate::body::full("y")), a.begin());
                short.into_body().collect().await.unwrap();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        };
        tokio::select! {
            () = keep_moving => {}
            why = a.unused(idle, first, stall) => assert_eq!(why, Unused::Stalled),
            () = tokio::time::sleep(s(60)) => panic!("the stuck response never stalled"),
        }
        assert!(
            t0.elapsed() <= stall + Duration::from_millis(1),
            "{:?}",
            t0.elapsed()
        );
    }

    /// A body of what a channel receives (a stream's relay, in small).
    struct Source(tokio::sync::mpsc::Receiver<Bytes>);

    impl Body for Source {
        type Data = Bytes;
        type Error = crate::body::BodyError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
        }
    }

    /// (idle timeout, first-request timeout, a request begun at once?) -> why and when the
    /// connection closes.
    #[tokio::test(start_paused = true)]
    async fn one_timer_for_the_first_request_and_idleness() {
        let s = Duration::from_secs;
        #[rustfmt::skip]
        let cases = [
            (s(5), s(2), false, Unused::NoRequest, s(2)),
            (s(3), s(10), false, Unused::Idle, s(3)),
            (s(5), s(5), false, Unused::NoRequest, s(5)),
            // A request began (and ended at once): the first-request timer is off.
            (s(5), s(2), true, Unused::Idle, s(5)),
            (s(3), s(1), true, Unused::Idle, s(3)),
        ];
        for (idle, first, request, want, after) in cases {
            let a = Activity::new();
            if request {
                drop(a.begin());
            }
            let t0 = Instant::now();
            let why = tokio::time::timeout(s(60), a.unused(idle, first, STALL)).await;
            assert_eq!(why, Ok(want), "{idle:?} {first:?} {request}");
            assert_eq!(t0.elapsed(), after, "{idle:?} {first:?} {request}");
        }
    }

    /// (idle before the call, a response alive until, grace) -> settled after.
    #[tokio::test(start_paused = true)]
    async fn settled_counts_from_the_call_or_the_last_body() {
        let s = Duration::from_secs;
        #[rustfmt::skip]
        let cases = [
            // Idle long before: the grace counts from the call.
            (s(30), None, s(2), s(2)),
            // A response still streaming: from its end.
            (s(0), Some(s(7)), s(2), s(9)),
            (s(30), Some(s(1)), s(5), s(6)),
        ];
        for (idle_before, busy_until, grace, want) in cases {
            let a = Activity::new();
            tokio::time::sleep(idle_before).await;
            let guard = busy_until.map(|d| (a.begin(), d));
            let t0 = Instant::now();
            let settled = a.settled(grace);
            tokio::pin!(settled);
            if let Some((g, d)) = guard {
                let early = tokio::time::timeout(d, &mut settled).await;
                assert!(early.is_err(), "settled while a response was in flight");
                drop(g);
            }
            tokio::time::timeout(s(60), settled).await.unwrap();
            assert_eq!(
                t0.elapsed(),
                want,
                "{idle_before:?} {busy_until:?} {grace:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_busy_past_the_first_request_timeout_stays() {
        let a = Activity::new();
        let g = a.begin();
        let waited =
            tokio::time::timeout(Duration::from_secs(60), a.unused(IDLE, FIRST, STALL)).await;
        assert!(waited.is_err(), "a busy connection is never cut");
        drop(g);
        assert!(a.idle_since().is_some());
    }
}
