//! A connection to an agent whose writes fail once the agent has taken nothing for a while.
//!
//! An agent that stops reading (it answers, or starts a stream, before it has read the
//! request, and never reads the rest) would otherwise keep its connection busy, and the copy
//! of the request hyper is still writing (charged to the caller's request budget), for as
//! long as it liked: the kernel keeps probing a zero window for ever. A write that has waited
//! longer than the limit fails the connection instead, and what it held goes with it. The
//! limit only runs while a write waits: an idle connection, or one that waits for the agent's
//! answer, is not timed here.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::time::Sleep;

/// An agent's connection, its writes bounded by how long one may wait ([`Stalling::new`]).
pub struct Stalling<T> {
    io: T,
    limit: Duration,
    /// When the write that waits for the agent fails (made once, reset for each wait).
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether a write waits now (the timer runs).
    waiting: bool,
}

impl<T> Stalling<T> {
    /// `io`, whose writes fail once one has waited `limit` for the agent to take anything.
    pub fn new(io: T, limit: Duration) -> Stalling<T> {
        Stalling {
            io,
            limit,
            timer: None,
            waiting: false,
        }
    }

    /// A write's outcome: through (or failed), the wait is over; still waiting past the
    /// limit, an error.
    fn waited<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.waiting = false;
            return polled;
        }
        let deadline = tokio::time::Instant::now() + self.limit;
        let timer = match &mut self.timer {
            Some(timer) => {
                if !self.waiting {
                    timer.as_mut().reset(deadline);
                }
                timer
            }
            None => self
                .timer
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.waiting = true;
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the agent took nothing written to it for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: Read + Unpin> Read for Stalling<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Stalling<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.waited(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.waited(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.waited(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for Stalling<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

/// A connector whose connections are [`Stalling`].
#[derive(Clone)]
pub struct StallLimit<C> {
    inner: C,
    limit: Duration,
}

impl<C> StallLimit<C> {
    pub fn new(inner: C, limit: Duration) -> StallLimit<C> {
        StallLimit { inner, limit }
    }
}

impl<C> tower_service::Service<Uri> for StallLimit<C>
where
    C: tower_service::Service<Uri>,
    C::Future: Send + 'static,
{
    type Response = Stalling<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let limit = self.limit;
        Box::pin(async move { Ok(Stalling::new(connecting.await?, limit)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;

    /// Writes `chunk` once (however long that waits).
    async fn write(
        io: &mut Stalling<TokioIo<tokio::net::TcpStream>>,
        chunk: &[u8],
    ) -> io::Result<usize> {
        std::future::poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, chunk)).await
    }

    /// Writes to a peer that reads in bursts, pausing shorter than the limit, go through for
    /// several times the limit (each wait is timed afresh); once the peer stops reading, the
    /// write that waits fails when it has waited the limit, not before.
    #[tokio::test]
    async fn a_write_that_waits_past_the_limit_fails() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        use tokio::io::AsyncReadExt;
        let limit = Duration::from_millis(400);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pulsing = std::sync::Arc::new(AtomicBool::new(true));
        let pulse = pulsing.clone();
        tokio::spawn(async move {
            let (mut peer, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1 << 20];
            while pulse.load(SeqCst) {
                // Reads for 50 ms, then pauses 150 ms (less than the limit).
                let until = tokio::time::Instant::now() + Duration::from_millis(50);
                while let Ok(read) = tokio::time::timeout_at(until, peer.read(&mut buf)).await {
                    if !matches!(read, Ok(n) if n > 0) {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            std::future::pending::<()>().await;
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut io = Stalling::new(TokioIo::new(tcp), limit);
        let chunk = vec![0u8; 64 * 1024];
        let started = tokio::time::Instant::now();
        while started.elapsed() < limit * 4 {
            write(&mut io, &chunk)
                .await
                .expect("a peer that pauses less than the limit takes every write");
        }
        pulsing.store(false, SeqCst);
        let error = loop {
            let began = tokio::time::Instant::now();
            if let Err(e) = write(&mut io, &chunk).await {
                assert!(
                    began.elapsed() >= limit,
                    "failed after {:?}",
                    began.elapsed()
                );
                break e;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "never failed");
        };
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }
}
