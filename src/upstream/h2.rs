//! HTTP/2 to an agent (`[[upstreams]] http2 = true`): many requests and streams share a few
//! connections instead of one connection each. Over `http://` it is h2c with prior knowledge;
//! over `https://` the agent must choose `h2` by ALPN (else the connection is refused).
//!
//! One pool per worker thread, like the HTTP/1.1 clients. A connection carries at most
//! `max_streams` requests at once (counted by the edge: from the request until its response
//! body is dropped); beyond, the next request opens another connection rather than wait for
//! a slot, so a long stream never holds up another caller's request. Flow control cannot
//! couple streams either: the connection's receive window is the sum of its streams' windows,
//! so streams that a slow caller has filled leave the others their whole window.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http2::{Builder, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// What each stream may receive ahead of the caller reading it.
pub const STREAM_WINDOW: u32 = 256 * 1024;
/// The most streams one connection carries (the policy's bound on `http2_max_streams`).
pub const MAX_STREAMS: usize = 1000;

/// Where and how to connect.
#[derive(Clone)]
pub struct Dial {
    /// Host as a name or an address (IPv6 without brackets), and port.
    pub host: String,
    pub port: u16,
    /// `https://` agents: the edge's client configuration with ALPN `h2`.
    pub tls: Option<TlsConnector>,
    pub connect_timeout: Duration,
    pub max_streams: usize,
}

impl Dial {
    /// The dial for an agent's URL; `tls` is the client configuration for `https://`.
    pub fn new(
        uri: &Uri,
        tls: Option<rustls::ClientConfig>,
        connect_timeout: Duration,
        max_streams: usize,
    ) -> Result<Dial, String> {
        let https = uri.scheme_str() == Some("https");
        let host = uri
            .host()
            .ok_or("the URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = match (https, tls) {
            (true, Some(mut cfg)) => {
                cfg.alpn_protocols = vec![b"h2".to_vec()];
                Some(TlsConnector::from(Arc::new(cfg)))
            }
            (true, None) => return Err("an https:// agent needs a TLS configuration".into()),
            (false, _) => None,
        };
        Ok(Dial {
            host,
            port,
            tls,
            connect_timeout,
            max_streams: max_streams.clamp(1, MAX_STREAMS),
        })
    }
}

/// One connection and the requests it carries now.
struct Conn {
    tx: SendRequest<Full<Bytes>>,
    streams: Arc<AtomicUsize>,
}

/// The HTTP/2 connections of one worker to one agent.
pub struct Pool {
    dial: Dial,
    conns: Mutex<Vec<Conn>>,
}

/// Why a request got no response.
#[derive(Debug)]
pub enum H2Error {
    Connect(String),
    Http(hyper::Error),
}

impl std::fmt::Display for H2Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            H2Error::Connect(m) => write!(f, "connect: {m}"),
            H2Error::Http(e) => write!(f, "{e}"),
        }
    }
}

/// A response body that keeps its connection's count of streams until it is dropped.
pub struct Counted {
    inner: Incoming,
    _slot: Slot,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One request's place on a connection.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    pub fn new(dial: Dial) -> Pool {
        Pool {
            dial,
            conns: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        // A panic while holding it leaves a list that is still consistent.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place on an open connection with room, if any (closed connections are forgotten).
    fn take_open(&self) -> Option<(SendRequest<Full<Bytes>>, Slot)> {
        let mut conns = self.lock();
        conns.retain(|c| !c.tx.is_closed());
        conns.iter().find_map(|c| {
            let taken = c
                .streams
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < self.dial.max_streams).then_some(n + 1)
                })
                .is_ok();
            taken.then(|| (c.tx.clone(), Slot(c.streams.clone())))
        })
    }

    /// A place on a new connection, which joins the pool.
    async fn take_new(&self) -> Result<(SendRequest<Full<Bytes>>, Slot), H2Error> {
        let tx = connect(&self.dial).await?;
        let streams = Arc::new(AtomicUsize::new(1));
        self.lock().push(Conn {
            tx: tx.clone(),
            streams: streams.clone(),
        });
        Ok((tx, Slot(streams)))
    }

    /// Sends a request (absolute URI) and returns the response head; its body holds the
    /// request's place on the connection until dropped. A request the connection could not
    /// take (it was closing) goes once more on a new connection.
    pub async fn request(&self, req: Request<Full<Bytes>>) -> Result<Response<Counted>, H2Error> {
        let (mut tx, slot) = match self.take_open() {
            Some(taken) => taken,
            None => self.take_new().await?,
        };
        let (mut tx, slot, req) = match tx.try_send_request(req).await {
            Ok(resp) => return Ok(counted(resp, slot)),
            Err(mut e) => match e.take_message() {
                Some(req) => {
                    drop(slot);
                    let (tx, slot) = self.take_new().await?;
                    (tx, slot, req)
                }
                None => return Err(H2Error::Http(e.into_error())),
            },
        };
        match tx.try_send_request(req).await {
            Ok(resp) => Ok(counted(resp, slot)),
            Err(e) => Err(H2Error::Http(e.into_error())),
        }
    }
}

fn counted(resp: Response<Incoming>, slot: Slot) -> Response<Counted> {
    resp.map(|inner| Counted { inner, _slot: slot })
}

/// Opens a connection (TCP, TLS with ALPN `h2` for https, the HTTP/2 handshake) and spawns
/// its task on this worker.
async fn connect(dial: &Dial) -> Result<SendRequest<Full<Bytes>>, H2Error> {
    let fail = |m: String| H2Error::Connect(m);
    let tcp = tokio::time::timeout(
        dial.connect_timeout,
        tokio::net::TcpStream::connect((dial.host.as_str(), dial.port)),
    )
    .await
    .map_err(|_| fail("timed out".into()))?
    .map_err(|e| fail(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let streams = u32::try_from(dial.max_streams).unwrap_or(u32::MAX);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(STREAM_WINDOW.saturating_mul(streams).min(i32::MAX as u32));
    match &dial.tls {
        None => {
            let (tx, conn) = builder
                .handshake(TokioIo::new(tcp))
                .await
                .map_err(H2Error::Http)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(tx)
        }
        Some(tls) => {
            let name = ServerName::try_from(dial.host.clone())
                .map_err(|_| fail("not a valid server name".into()))?;
            let stream = tokio::time::timeout(dial.connect_timeout, tls.connect(name, tcp))
                .await
                .map_err(|_| fail("TLS handshake timed out".into()))?
                .map_err(|e| fail(format!("TLS: {e}")))?;
            if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(fail("the agent did not choose h2 by ALPN".into()));
            }
            let (tx, conn) = builder
                .handshake(TokioIo::new(stream))
                .await
                .map_err(H2Error::Http)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(tx)
        }
    }
}
