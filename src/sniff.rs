//! HTTP/2 or HTTP/1.1 on a connection that named no protocol (TLS without ALPN, or plain TCP):
//! its first bytes are read and compared with HTTP/2's connection preface, then given back to
//! the protocol's connection in front of the rest of the stream ([`Prefixed`]). The edge's
//! listener serves every connection over a `Prefixed` stream (empty when ALPN settled the
//! protocol), so hyper's HTTP/1.1 and HTTP/2 connections are each built for one stream type;
//! the standalone engine tells HTTP/1.1 from h2c the same way.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// What an HTTP/2 client sends first (RFC 9113, section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads until the bytes read differ from the preface (HTTP/1.1) or are the whole of it
/// (HTTP/2). Returns whether it is HTTP/2, and the bytes read. An error: the peer closed or
/// failed first (with no request: nothing to answer). At most 24 bytes are read.
pub async fn sniff<T: AsyncRead + Unpin>(io: &mut T) -> io::Result<(bool, Bytes)> {
    let mut buf = [0u8; PREFACE.len()];
    let mut n = 0;
    while n < buf.len() {
        let got = io.read(&mut buf[n..]).await?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        n += got;
        if buf[..n] != PREFACE[..n] {
            return Ok((false, Bytes::copy_from_slice(&buf[..n])));
        }
    }
    Ok((true, Bytes::copy_from_slice(&buf)))
}

/// A stream that yields `prefix` before the rest of `inner` (writes go to `inner`).
pub struct Prefixed<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Prefixed<T> {
    pub fn new(prefix: Bytes, inner: T) -> Prefixed<T> {
        Prefixed { prefix, inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// What the peer sends, in writes -> HTTP/2?, the bytes given back (None: closed first).
    #[tokio::test]
    async fn the_preface_decides_and_what_was_read_is_given_back() {
        let preface: &[u8] = PREFACE;
        type Sniffed<'a> = Option<(bool, &'a [u8])>;
        #[rustfmt::skip]
        let cases: Vec<(Vec<&[u8]>, Sniffed)> = vec![
            (vec![preface], Some((true, preface))),
            // Split anywhere: read on until the preface is whole.
            (vec![&preface[..1], &preface[1..10], &preface[10..]], Some((true, preface))),
            // At most the preface's length is read: the rest stays in the stream.
            (vec![b"GET / HTTP/1.1\r\nhost: a\r\n\r\n"], Some((false, b"GET / HTTP/1.1\r\nhost: a\r"))),
            // A difference ends the sniff at once, mid-preface too.
            (vec![b"PRI * HTTP/1.1\r\n"], Some((false, b"PRI * HTTP/1.1\r\n"))),
            (vec![b"PRI", b" * HTTP/2.0\r\n\r\nXX"], Some((false, b"PRI * HTTP/2.0\r\n\r\nXX"))),
            (vec![b"P", b"O"], Some((false, b"PO"))),
            // Lowercase is not the preface.
            (vec![b"pri * http/2.0\r\n\r\nsm\r\n\r\n"], Some((false, b"pri * http/2.0\r\n\r\nsm\r\n\r\n"))),
            // Closed before the preface is whole or different: nothing to serve.
            (vec![], None),
            (vec![b"PRI * HTTP/2.0"], None),
        ];
        for (writes, want) in cases {
            let (mut client, mut server) = tokio::io::duplex(64);
            let label = format!("{writes:?}");
            tokio::spawn(async move {
                for w in writes {
                    client.write_all(w).await.unwrap();
                    client.flush().await.unwrap();
                    tokio::task::yield_now().await;
                }
            });
            let got = sniff(&mut server).await.ok();
            let got = got.as_ref().map(|(h2, b)| (*h2, &b[..]));
            assert_eq!(got, want, "{label}");
        }
    }

    #[tokio::test]
    async fn prefixed_gives_the_prefix_then_the_stream() {
        let (mut client, server) = tokio::io::duplex(64);
        client.write_all(b" world").await.unwrap();
        drop(client);
        let mut p = Prefixed::new(Bytes::from_static(b"hello"), server);
        // A small buffer takes the prefix in parts.
        let mut small = [0u8; 3];
        p.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"hel");
        let mut rest = Vec::new();
        p.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"lo world");
    }
}
