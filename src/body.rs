//! HTTP body types shared by the server, the forwarder and the engine.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use tokio::sync::mpsc;

/// Error type of every body this crate produces.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response the proxy and the engine send.
pub type BoxBody = UnsyncBoxBody<Bytes, BodyError>;

/// A complete body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> BoxBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty() -> BoxBody {
    full(Bytes::new())
}

/// A response with a JSON body and the given status.
pub fn json_response(status: StatusCode, bytes: impl Into<Bytes>) -> Response<BoxBody> {
    json_around(status, full(bytes))
}

fn json_around(status: StatusCode, body: BoxBody) -> Response<BoxBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A response with a JSON body and the given status, the body owning `held` while it is
/// sent ([`Holding`]).
pub fn json_response_holding(
    status: StatusCode,
    bytes: impl Into<Bytes>,
    held: impl Send + Unpin + 'static,
) -> Response<BoxBody> {
    json_around(status, Holding::new(bytes, held).boxed())
}

/// The most a [`Holding`] body hands the connection at a time.
pub(crate) const PIECE_BYTES: usize = 16 * 1024;

/// A complete body that owns `held` until the connection has taken its last piece, or drops
/// the body unsent. It is handed out in pieces of at most [`PIECE_BYTES`], so the connection
/// takes it as the caller reads (hyper buffers a bounded amount ahead of the socket), not all
/// at once: what `held` stands for (the caller's concurrency slot) lasts while the answer is
/// sent, and a caller that reads nothing holds no more answers than it has slots.
pub struct Holding<H> {
    rest: Bytes,
    held: Option<H>,
}

impl<H: Send + Unpin + 'static> Holding<H> {
    pub fn new(bytes: impl Into<Bytes>, held: H) -> Holding<H> {
        Holding {
            rest: bytes.into(),
            held: Some(held),
        }
    }

    pub fn boxed(self) -> BoxBody {
        UnsyncBoxBody::new(self)
    }
}

impl<H: Unpin> Body for Holding<H> {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.rest.is_empty() {
            this.held = None;
            return Poll::Ready(None);
        }
        let piece = this.rest.split_to(this.rest.len().min(PIECE_BYTES));
        if this.rest.is_empty() {
            // The last piece is the connection's now (hyper drops a body that says it ended
            // without polling it again).
            this.held = None;
        }
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

/// A `200` server-sent-events response around `body`, with the headers that keep proxies and
/// caches from buffering it.
pub fn sse_response(body: BoxBody) -> Response<BoxBody> {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::a2a::SSE_CONTENT_TYPE),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// A body fed chunk by chunk from a channel; it ends when every sender is dropped.
/// Used for server-sent events: each chunk is written to the wire as soon as it is sent.
pub struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, BodyError>>,
}

impl ChannelBody {
    /// A body and the sender that feeds it. `capacity` bounds how far the producer may run ahead.
    pub fn new(capacity: usize) -> (mpsc::Sender<Result<Bytes, BodyError>>, Self) {
        let (tx, rx) = mpsc::channel(capacity);
        (tx, Self { rx })
    }

    /// Boxed, ready for a response.
    pub fn boxed(self) -> BoxBody {
        UnsyncBoxBody::new(self)
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(bytes))) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// The error of a [`Deadline`] body whose end did not come in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the body did not end in time")
    }
}

impl std::error::Error for TimedOut {}

/// A body that must end by an instant: past it, waiting for more is an error ([`TimedOut`])
/// whoever reads it. An agent's answer that is not a stream is bounded so, head and body
/// together, by the agent's response timeout: a body that stalls after its head cannot hold
/// the caller, its slot, or a card refresh forever. The timer is made only when the body
/// has to wait (an answer whose body is in hand costs nothing).
pub struct Deadline {
    inner: BoxBody,
    at: tokio::time::Instant,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Deadline {
    pub fn new(inner: BoxBody, at: tokio::time::Instant) -> Self {
        Self {
            inner,
            at,
            timer: None,
        }
    }

    pub fn boxed(self) -> BoxBody {
        UnsyncBoxBody::new(self)
    }
}

impl Body for Deadline {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let at = this.at;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(TimedOut)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Why a body could not be collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectError {
    /// More than the cap arrived.
    TooLarge,
    /// The stream failed.
    Read,
    /// It did not end by its deadline ([`Deadline`]).
    TimedOut,
}

/// Reads a whole body, refusing it as soon as it grows beyond `cap` bytes. A body that
/// arrives in one frame (the usual small JSON answer) is returned as it came, without a copy.
pub async fn collect_limited<B>(body: B, cap: usize) -> Result<Bytes, CollectError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BodyError>,
{
    let mut left = cap;
    collect_taking(body, |n| match left.checked_sub(n) {
        Some(l) => {
            left = l;
            true
        }
        None => false,
    })
    .await
}

/// Reads a whole body as [`collect_limited`] does, each piece's bytes granted by `take` as it
/// arrives: refused (`TooLarge`) as soon as `take` grants no more.
pub async fn collect_taking<B>(
    mut body: B,
    mut take: impl FnMut(usize) -> bool,
) -> Result<Bytes, CollectError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BodyError>,
{
    let mut first: Option<Bytes> = None;
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match e.into().is::<TimedOut>() {
            true => CollectError::TimedOut,
            false => CollectError::Read,
        })?;
        if let Ok(data) = frame.into_data() {
            if !take(data.len()) {
                return Err(CollectError::TooLarge);
            }
            if data.is_empty() {
                continue;
            }
            match first.take() {
                None if buf.is_empty() => first = Some(data),
                None => buf.extend_from_slice(&data),
                Some(f) => {
                    buf.reserve(f.len() + data.len());
                    buf.extend_from_slice(&f);
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What a [`Holding`] body owns goes with its last piece, or with the body unsent; the
    /// pieces are the bytes in order, none larger than [`PIECE_BYTES`].
    #[tokio::test]
    async fn a_holding_body_owns_until_its_last_piece_is_taken() {
        let bytes: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let held = Arc::new(());
        let mut body = Holding::new(bytes.clone(), held.clone());
        assert_eq!(body.size_hint().exact(), Some(40_000));
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let piece = frame.unwrap().into_data().unwrap();
            assert!(piece.len() <= PIECE_BYTES);
            got.extend_from_slice(&piece);
            let done = got.len() == bytes.len();
            assert_eq!(Arc::strong_count(&held) == 1, done, "after {}", got.len());
            assert_eq!(body.is_end_stream(), done);
        }
        assert_eq!(got, bytes);

        let unsent = Holding::new(bytes, held.clone());
        assert_eq!(Arc::strong_count(&held), 2);
        drop(unsent);
        assert_eq!(Arc::strong_count(&held), 1);
    }
}
