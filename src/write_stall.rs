//! A connection whose peer takes nothing for too long is closed: a write (or flush, or
//! shutdown) that makes no progress for `limit` fails with `TimedOut`, and hyper drops the
//! connection, and what it held with it. The limit only runs while a write waits: an idle
//! connection, or one waiting to read, is not timed here.
//!
//! - Callers' connections (the server): a caller that stops reading cannot pin its
//!   connection, its buffers and the kernel's send queue for as long as it likes (the relay
//!   already ends its stream; this ends the socket).
//! - Agents' connections (the upstream client, [`crate::upstream`]): an agent that stops
//!   reading (it answers, or starts a stream, before it has read the request, and never reads
//!   the rest) cannot keep its connection busy, and the copy of the request still being
//!   written (charged to the caller's request budget), for ever: the kernel keeps probing a
//!   zero window for as long as the peer answers.
//!
//! [`WriteStall`] wraps either kind of stream: tokio's (`AsyncRead`/`AsyncWrite`) or hyper's
//! (`hyper::rt::Read`/`Write`, with hyper-util's `Connection` for its client's pool).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A stream whose writes fail once one has waited `limit` for the peer to take anything.
pub struct WriteStall<T> {
    inner: T,
    limit: Duration,
    /// When the write that waits fails (made at the first wait, reset for each one after).
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether a write waits now (the timer runs).
    waiting: bool,
}

impl<T> WriteStall<T> {
    pub fn new(inner: T, limit: Duration) -> WriteStall<T> {
        WriteStall {
            inner,
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
                "the peer took nothing written to it for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteStall<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

/// The write side of both traits (the same methods, each write timed by [`WriteStall::waited`]).
macro_rules! timed_writes {
    () => {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
            this.waited(cx, polled)
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
            this.waited(cx, polled)
        }

        fn is_write_vectored(&self) -> bool {
            self.inner.is_write_vectored()
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let polled = Pin::new(&mut this.inner).poll_flush(cx);
            this.waited(cx, polled)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
            this.waited(cx, polled)
        }
    };
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteStall<T> {
    timed_writes!();
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for WriteStall<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for WriteStall<T> {
    timed_writes!();
}

impl<T: hyper_util::client::legacy::connect::Connection>
    hyper_util::client::legacy::connect::Connection for WriteStall<T>
{
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_that_makes_no_progress_times_out_and_progress_resets_it() {
        // A duplex pipe of 64 bytes that nobody reads: the second write blocks.
        let (a, b) = tokio::io::duplex(64);
        let mut w = WriteStall::new(a, Duration::from_millis(200));
        w.write_all(&[1; 64]).await.unwrap();
        let started = std::time::Instant::now();
        let err = w.write_all(&[2; 64]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(200));
        // A reader that keeps taking, slowly, never trips it (its 20 ms steps far below a
        // limit of 1 s, which a stalled thread of a loaded machine does not reach).
        let (a, mut b2) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 16];
            let mut total = 0;
            while total < 1024 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                total += b2.read(&mut buf).await.unwrap();
            }
        });
        let mut w = WriteStall::new(a, Duration::from_secs(1));
        w.write_all(&[3; 1024]).await.unwrap();
        reader.await.unwrap();
        drop(b);
    }

    /// Writes `chunk` once through hyper's traits (however long that waits).
    async fn write(
        io: &mut WriteStall<TokioIo<tokio::net::TcpStream>>,
        chunk: &[u8],
    ) -> io::Result<usize> {
        std::future::poll_fn(|cx| hyper::rt::Write::poll_write(Pin::new(&mut *io), cx, chunk)).await
    }

    /// Over hyper's traits and a real socket: writes to a peer that reads in bursts, pausing
    /// shorter than the limit, go through for several times the limit (each wait is timed
    /// afresh); once the peer stops reading, the write that waits fails when it has waited
    /// the limit, not before.
    #[tokio::test]
    async fn each_wait_is_timed_afresh_and_the_one_past_the_limit_fails() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        use tokio::io::AsyncReadExt;
        // (well above the peer's 150 ms pauses, so that a stalled thread of a loaded machine
        // does not make one of them reach it)
        let limit = Duration::from_secs(1);
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
        let mut io = WriteStall::new(TokioIo::new(tcp), limit);
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
