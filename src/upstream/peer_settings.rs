//! What an HTTP/2 agent allows: its `SETTINGS_MAX_CONCURRENT_STREAMS`, read from the frames
//! it sends as they pass to the client (hyper does not tell it). A connection the edge has
//! put as many requests on as the agent allows holds the next one in its queue until a
//! stream ends (a long stream: for up to an hour), so the pool ([`super::h2`]) counts the
//! agent's limit as well as `http2_max_streams` and opens another connection instead.
//!
//! [`FrameReader`] follows the frame boundaries (a 9-byte header, then its payload, skipped
//! whole unless it is a SETTINGS frame), so its work is per frame, not per byte; only the
//! entries of SETTINGS frames (six bytes each) are read. [`PeerSettings`] wraps the
//! connection's reads with it.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

/// The frame type of SETTINGS (RFC 9113 §6.5).
const SETTINGS: u8 = 0x4;
/// Its ACK flag (an acknowledgement carries no settings).
const ACK: u8 = 0x1;
/// `SETTINGS_MAX_CONCURRENT_STREAMS`.
const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// Follows the frames a peer sends, reporting each `SETTINGS_MAX_CONCURRENT_STREAMS` it
/// sets.
#[derive(Debug, Default)]
pub struct FrameReader {
    head: [u8; 9],
    /// Bytes of `head` read so far (9: in a payload).
    have: usize,
    /// Bytes of the current frame's payload still to come.
    left: usize,
    /// The current frame is a SETTINGS frame on stream 0 that is not an ACK.
    settings: bool,
    entry: [u8; 6],
    entry_have: usize,
    /// A whole SETTINGS frame on stream 0 that is not an ACK has been read.
    settled: bool,
}

impl FrameReader {
    /// Reads the next bytes the peer sent; `on_limit` gets each value of
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, in order.
    pub fn read(&mut self, mut bytes: &[u8], mut on_limit: impl FnMut(u32)) {
        while !bytes.is_empty() {
            if self.have < 9 {
                let n = (9 - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == 9 {
                    let h = &self.head;
                    self.left =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                    self.settings = h[3] == SETTINGS && h[4] & ACK == 0 && stream == 0;
                    self.entry_have = 0;
                    if self.left == 0 {
                        self.settled |= self.settings;
                        self.have = 0;
                    }
                }
                continue;
            }
            let n = self.left.min(bytes.len());
            if self.settings {
                for &b in &bytes[..n] {
                    self.entry[self.entry_have] = b;
                    self.entry_have += 1;
                    if self.entry_have == 6 {
                        self.entry_have = 0;
                        let e = &self.entry;
                        if u16::from_be_bytes([e[0], e[1]]) == MAX_CONCURRENT_STREAMS {
                            on_limit(u32::from_be_bytes([e[2], e[3], e[4], e[5]]));
                        }
                    }
                }
            }
            self.left -= n;
            bytes = &bytes[n..];
            if self.left == 0 {
                self.settled |= self.settings;
                self.have = 0;
            }
        }
    }

    /// Whether a whole SETTINGS frame of the peer's has been read (its first frame: the
    /// limits it sets are known from then on).
    pub fn settled(&self) -> bool {
        self.settled
    }
}

/// A connection whose reads pass through a [`FrameReader`]; `limit` holds the peer's last
/// `SETTINGS_MAX_CONCURRENT_STREAMS` (`usize::MAX` while it sets none: unlimited), and
/// `settled` turns true once its first SETTINGS frame has been read.
pub struct PeerSettings<T> {
    inner: T,
    frames: FrameReader,
    limit: Arc<AtomicUsize>,
    settled: Option<watch::Sender<bool>>,
}

impl<T> PeerSettings<T> {
    pub fn new(inner: T, limit: Arc<AtomicUsize>, settled: watch::Sender<bool>) -> PeerSettings<T> {
        PeerSettings {
            inner,
            frames: FrameReader::default(),
            limit,
            settled: Some(settled),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for PeerSettings<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let limit = &this.limit;
            this.frames.read(&buf.filled()[before..], |n| {
                limit.store(usize::try_from(n).unwrap_or(usize::MAX), Ordering::Relaxed);
            });
            if this.frames.settled() {
                if let Some(settled) = this.settled.take() {
                    settled.send_replace(true);
                }
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for PeerSettings<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn setting(id: u16, value: u32) -> Vec<u8> {
        let mut e = id.to_be_bytes().to_vec();
        e.extend_from_slice(&value.to_be_bytes());
        e
    }

    /// Every limit the frames set, read in pieces of `piece` bytes.
    fn limits(bytes: &[u8], piece: usize) -> Vec<u32> {
        let mut r = FrameReader::default();
        let mut got = Vec::new();
        for chunk in bytes.chunks(piece) {
            r.read(chunk, |n| got.push(n));
        }
        got
    }

    /// Settled once a whole SETTINGS frame on stream 0 that is not an ACK is read (an empty
    /// one too), not by an ACK, another frame, or part of one.
    #[test]
    fn the_peers_settings_are_known_once_its_first_settings_frame_is_whole() {
        let whole = frame(SETTINGS, 0, 0, &setting(MAX_CONCURRENT_STREAMS, 5));
        let rows: Vec<(&str, Vec<u8>, bool)> = vec![
            ("whole", whole.clone(), true),
            ("empty", frame(SETTINGS, 0, 0, &[]), true),
            ("part", whole[..whole.len() - 1].to_vec(), false),
            ("an ACK", frame(SETTINGS, ACK, 0, &[]), false),
            ("a PING", frame(0x6, 0, 0, &[0; 8]), false),
        ];
        for (name, bytes, settled) in rows {
            for piece in [1, 4, bytes.len().max(1)] {
                let mut r = FrameReader::default();
                for chunk in bytes.chunks(piece) {
                    r.read(chunk, |_| {});
                }
                assert_eq!(r.settled(), settled, "{name} in pieces of {piece}");
            }
        }
    }

    #[test]
    fn the_peers_stream_limit_is_read_from_its_settings_at_any_split() {
        let settings = [
            setting(0x4, 65_535),
            setting(MAX_CONCURRENT_STREAMS, 10),
            setting(0x5, 16_384),
        ]
        .concat();
        // (a DATA frame whose payload spells a SETTINGS frame setting 1: not read)
        let inside = frame(SETTINGS, 0, 0, &setting(MAX_CONCURRENT_STREAMS, 1));
        let rows: Vec<(&str, Vec<u8>, Vec<u32>)> = vec![
            ("settings", frame(SETTINGS, 0, 0, &settings), vec![10]),
            ("none set", frame(SETTINGS, 0, 0, &setting(0x4, 1)), vec![]),
            (
                "an ACK's payload is not read",
                frame(SETTINGS, ACK, 0, &setting(MAX_CONCURRENT_STREAMS, 2)),
                vec![],
            ),
            (
                "on a stream: not the connection's",
                frame(SETTINGS, 0, 3, &setting(MAX_CONCURRENT_STREAMS, 2)),
                vec![],
            ),
            (
                "after other frames, lowered later",
                [
                    frame(SETTINGS, 0, 0, &settings),
                    frame(0x0, 0, 1, &inside),
                    frame(0x8, 0, 0, &[0, 0, 1, 0]),
                    frame(0x1, 0x4, 1, &[]),
                    frame(SETTINGS, ACK, 0, &[]),
                    frame(SETTINGS, 0, 0, &setting(MAX_CONCURRENT_STREAMS, 3)),
                ]
                .concat(),
                vec![10, 3],
            ),
        ];
        for (name, bytes, want) in rows {
            for piece in [1, 2, 5, 6, 7, 9, 10, 64, bytes.len()] {
                assert_eq!(limits(&bytes, piece), want, "{name} in pieces of {piece}");
            }
        }
    }

    /// Through the wrapper, from a real HTTP/2 server's first SETTINGS.
    #[tokio::test]
    async fn a_servers_limit_reaches_the_shared_count() {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let svc = hyper::service::service_fn(|_req| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                    bytes::Bytes::from_static(b"ok"),
                )))
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(7)
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
        let limit = Arc::new(AtomicUsize::new(usize::MAX));
        let (settled, mut known) = watch::channel(false);
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let io = TokioIo::new(PeerSettings::new(tcp, limit.clone(), settled));
        let (mut tx, conn) = hyper::client::conn::http2::handshake::<
            _,
            _,
            http_body_util::Empty<bytes::Bytes>,
        >(TokioExecutor::new(), io)
        .await
        .unwrap();
        tokio::spawn(conn);
        known.wait_for(|k| *k).await.unwrap();
        assert_eq!(limit.load(Ordering::Relaxed), 7, "known before any request");
        let req = http::Request::get(format!("http://{addr}/"))
            .body(http_body_util::Empty::new())
            .unwrap();
        let resp = tx.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(limit.load(Ordering::Relaxed), 7);
    }
}
