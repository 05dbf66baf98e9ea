//! Per-connection activity, for the idle timeout: how many requests are in flight on the
//! connection (a response counts until its body is done, so a running stream keeps the
//! connection busy) and since when none is. HTTP/2 has no idle timeout of its own in hyper,
//! and keep-alive pings keep a silent connection open forever without this.

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
    /// A request has begun on this connection.
    used: bool,
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
        Activity(Arc::new(Mutex::new(State {
            in_flight: 0,
            since: Instant::now(),
            used: false,
        })))
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut st);
    }

    /// A request started; it ends when the returned guard is dropped.
    pub fn begin(&self) -> InFlight {
        self.update(|s| {
            s.in_flight += 1;
            s.used = true;
        });
        InFlight(self.clone())
    }

    /// Since when nothing is in flight; `None` while something is.
    fn idle_since(&self) -> Option<Instant> {
        let st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (st.in_flight == 0).then_some(st.since)
    }

    /// Completes once the connection has had nothing in flight for `timeout`.
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            match self.idle_since() {
                Some(since) if since.elapsed() >= timeout => return,
                Some(since) => tokio::time::sleep_until(since + timeout).await,
                // Busy: look again later (a request ending resets `since`).
                None => tokio::time::sleep(timeout).await,
            }
        }
    }
}

impl Activity {
    /// Completes when no request has begun within `timeout` of the connection's start (a
    /// client that completes the TLS handshake and then sends nothing, or too little to tell
    /// HTTP/1.1 from HTTP/2, which no HTTP timeout of hyper covers); never completes once one
    /// has.
    pub async fn no_request_within(&self, timeout: Duration) {
        let start = {
            let st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            st.since
        };
        tokio::time::sleep_until(start + timeout).await;
        let used = self.0.lock().unwrap_or_else(PoisonError::into_inner).used;
        if used {
            std::future::pending::<()>().await;
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

/// The response with `guard` held until its body is done (or dropped).
pub fn hold_until_body_done(resp: Response<BoxBody>, guard: InFlight) -> Response<BoxBody> {
    resp.map(|inner| {
        Tracked {
            inner,
            _guard: guard,
        }
        .boxed_unsync()
    })
}

struct Tracked {
    inner: BoxBody,
    _guard: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = <BoxBody as Body>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_end_of_the_last_body() {
        let a = Activity::new();
        let guard = a.begin();
        let resp = hold_until_body_done(Response::new(crate::body::full("x")), guard);
        // Busy while the body is alive, however long.
        let idle = a.idle_for(Duration::from_secs(5));
        tokio::pin!(idle);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), &mut idle)
                .await
                .is_err(),
            "idle while a response body is alive"
        );
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "x");
        // The body was consumed and dropped: idle counts from now.
        let t0 = Instant::now();
        tokio::time::timeout(Duration::from_secs(60), idle)
            .await
            .unwrap();
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_secs(4) && waited <= Duration::from_secs(10),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_must_start_a_request_in_time() {
        let silent = Activity::new();
        let t0 = Instant::now();
        silent.no_request_within(Duration::from_secs(2)).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(2));
        let used = Activity::new();
        drop(used.begin());
        let waited = tokio::time::timeout(
            Duration::from_secs(60),
            used.no_request_within(Duration::from_secs(2)),
        )
        .await;
        assert!(
            waited.is_err(),
            "a used connection is never cut by the first-request timer"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_connection_is_idle_after_the_timeout() {
        let a = Activity::new();
        let t0 = Instant::now();
        a.idle_for(Duration::from_secs(3)).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
        let g = a.begin();
        drop(g);
        assert!(a.idle_since().is_some());
    }
}
