//! A connection whose peer takes nothing for too long is closed: a write (or flush) that
//! makes no progress for `limit` fails with `TimedOut`, and hyper drops the connection. So a
//! caller that stops reading cannot pin the connection, its buffers and the kernel's send
//! queue for as long as it likes (the relay already ends its stream; this ends the socket).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

pub struct WriteStall<T> {
    inner: T,
    limit: Duration,
    /// Runs while writes are pending; reset by every write that makes progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteStall<T> {
    pub fn new(inner: T, limit: Duration) -> WriteStall<T> {
        WriteStall {
            inner,
            limit,
            stalled: None,
        }
    }

    /// The write is pending: has it been pending too long?
    fn pending<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer took nothing for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteStall<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteStall<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.pending(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.pending(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.pending(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_shutdown(cx) {
            Poll::Pending => self.pending(cx),
            done => done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        // A reader that keeps taking, slowly, never trips it.
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
        let mut w = WriteStall::new(a, Duration::from_millis(200));
        w.write_all(&[3; 1024]).await.unwrap();
        reader.await.unwrap();
        drop(b);
    }
}
