//! HTTP/2 to an agent (`[[upstreams]] http2 = true`): many requests and streams share a few
//! connections instead of one connection each. Over `http://` it is h2c with prior knowledge;
//! over `https://` the agent must choose `h2` by ALPN (else the connection is refused).
//!
//! One pool per worker thread, like the HTTP/1.1 clients. A connection carries at most
//! `max_streams` requests at once, and no more than the agent allows on it (its
//! `SETTINGS_MAX_CONCURRENT_STREAMS`: [`super::peer_settings`]), counted by the edge from the
//! request until its response body is dropped; beyond, the next request opens another
//! connection rather than wait for a slot, so a long stream never holds up another caller's
//! request. Flow control cannot
//! couple streams either: the connection's receive window is the sum of its streams' windows,
//! so streams that a slow caller has filled leave the others their whole window.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http2::{Builder, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// What each stream may receive ahead of the caller reading it.
pub const STREAM_WINDOW: u32 = 256 * 1024;
/// The most streams one connection carries (the policy's bound on `http2_max_streams`).
pub use super::settings::MAX_HTTP2_STREAMS as MAX_STREAMS;
/// A connection quiet for this long is sent a PING (idle ones too)...
const KEEPALIVE: Duration = Duration::from_secs(30);
/// ... and closed, failing what it carries, when the answer takes longer: an agent that
/// vanished without closing its connections fails its requests in under a minute, not at
/// `response_timeout_ms` (a connection carries up to `http2_max_streams` of them).
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// A connection that has carried nothing for this long is closed when the pool is next used
/// (after a spike, its extra connections go instead of being pinged for ever).
const IDLE_CLOSE: Duration = Duration::from_secs(60);

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
    /// PING interval and how long its answer may take.
    pub keepalive: (Duration, Duration),
    /// How long a connection may carry nothing before the pool closes it.
    pub idle_close: Duration,
    /// How long a write may wait for the agent to take anything before the connection fails
    /// ([`crate::write_stall`]; the agent's response timeout).
    pub write_stall: Duration,
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
            keepalive: (KEEPALIVE, KEEPALIVE_TIMEOUT),
            idle_close: IDLE_CLOSE,
            write_stall: Duration::from_secs(300),
        })
    }

    /// A write's stall limit, and how long the connection may take to be ready.
    fn timeouts(&self) -> (Duration, Duration) {
        (self.write_stall, self.connect_timeout)
    }
}

/// One connection and the requests it carries now.
struct Conn {
    tx: SendRequest<Full<Bytes>>,
    streams: Arc<Use>,
    /// The most the agent allows on it (its `SETTINGS_MAX_CONCURRENT_STREAMS`; unlimited
    /// until it says): [`super::peer_settings`].
    allowed: Arc<AtomicUsize>,
}

/// The requests a connection carries, and since when it carries none.
struct Use {
    count: AtomicUsize,
    /// Microseconds from the pool's epoch to when `count` last fell to 0.
    idle_since: AtomicU64,
    epoch: Instant,
}

impl Use {
    fn new(epoch: Instant) -> Use {
        Use {
            count: AtomicUsize::new(1),
            idle_since: AtomicU64::new(0),
            epoch,
        }
    }

    fn micros(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Carries nothing, and has for at least `d`.
    fn idle_for(&self, d: Duration) -> bool {
        self.count.load(Ordering::Relaxed) == 0
            && self
                .micros()
                .saturating_sub(self.idle_since.load(Ordering::Relaxed))
                >= u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
    }
}

/// The HTTP/2 connections of one worker to one agent.
pub struct Pool {
    dial: Dial,
    conns: Mutex<Vec<Conn>>,
    /// The connections being dialed: a request that finds no room claims a place on one of
    /// them that has places left and waits for it, rather than dialing its own (a cold burst
    /// of a hundred requests made a hundred connections); past their places it dials the next.
    /// Those that waited for a dial that failed fail with it, rather than each dialing again
    /// in turn.
    dialing: Mutex<Vec<Arc<UnderWay>>>,
    /// The places a new connection is expected to have: `max_streams`, or fewer once a
    /// connection has shown the agent allows fewer (so that only a first burst guesses).
    expected_room: AtomicUsize,
    epoch: Instant,
}

/// A connection being dialed: the places on it not yet claimed by a waiting request, and its
/// end (`Some(None)` dialed, `Some(Some(why))` failed; closed unsent when the request that
/// dials it left, and the waiters look again).
struct UnderWay {
    unclaimed: AtomicUsize,
    ended: tokio::sync::watch::Receiver<Option<Option<String>>>,
}

/// Takes a dial off the pool's list of dials under way however its request ends.
struct Listed<'a>(&'a Pool, Arc<UnderWay>);

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.0.dials().retain(|d| !Arc::ptr_eq(d, &self.1));
    }
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
struct Slot(Arc<Use>);

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.idle_since.store(self.0.micros(), Ordering::Relaxed);
        }
    }
}

impl Pool {
    pub fn new(dial: Dial) -> Pool {
        Pool {
            expected_room: AtomicUsize::new(dial.max_streams),
            dial,
            conns: Mutex::new(Vec::new()),
            dialing: Mutex::new(Vec::new()),
            epoch: Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        // A panic while holding it leaves a list that is still consistent.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn dials(&self) -> std::sync::MutexGuard<'_, Vec<Arc<UnderWay>>> {
        self.dialing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place on an open connection with room, if any (closed connections are forgotten,
    /// and those that carried nothing for `idle_close` are closed: their last sender goes).
    fn take_open(&self) -> Option<(SendRequest<Full<Bytes>>, Slot)> {
        let mut conns = self.lock();
        let idle = self.dial.idle_close;
        conns.retain(|c| !c.tx.is_closed() && !c.streams.idle_for(idle));
        conns.iter().find_map(|c| {
            // (past what the agent allows, a request waits on the connection until one of
            // its streams ends: another connection takes it instead)
            let room = self.dial.max_streams.min(c.allowed.load(Ordering::Relaxed));
            let taken = c
                .streams
                .count
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < room).then_some(n + 1)
                })
                .is_ok();
            taken.then(|| (c.tx.clone(), Slot(c.streams.clone())))
        })
    }

    /// A place on a connection that is not open yet: on one being dialed with places left
    /// ([`UnderWay`]), else on one this request dials ([`Pool::dial_shared`]), which joins the
    /// pool. Boxed where it is awaited (a TCP connect, a TLS and an HTTP/2 handshake), so the
    /// request's own future, moved and copied on every request, does not carry it for the
    /// rare new connection.
    async fn take_new(&self) -> Result<(SendRequest<Full<Bytes>>, Slot), H2Error> {
        loop {
            if let Some(taken) = self.take_open() {
                return Ok(taken);
            }
            let claimed = self.dials().iter().find_map(|d| {
                d.unclaimed
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                    .then(|| d.ended.clone())
            });
            let Some(mut ended) = claimed else {
                return self.dial_shared().await;
            };
            // (its connection is in the pool once it has ended well, or its request left:
            // look again either way)
            let failed = match ended.wait_for(Option::is_some).await {
                Ok(end) => end.clone().flatten(),
                Err(_) => None,
            };
            if let Some(why) = failed {
                return Err(H2Error::Connect(why));
            }
        }
    }

    /// Dials a new connection whose other places the requests that find no room meanwhile
    /// claim ([`UnderWay`]), and takes its first place.
    async fn dial_shared(&self) -> Result<(SendRequest<Full<Bytes>>, Slot), H2Error> {
        let (end, ended) = tokio::sync::watch::channel(None);
        let under_way = Arc::new(UnderWay {
            unclaimed: AtomicUsize::new(
                self.expected_room.load(Ordering::Relaxed).saturating_sub(1),
            ),
            ended,
        });
        self.dials().push(under_way.clone());
        let listed = Listed(self, under_way);
        let dialed = self.dial_new().await;
        // Off the list before its waiters look again.
        drop(listed);
        let _ = end.send(Some(dialed.as_ref().err().map(|e| match e {
            H2Error::Connect(m) => m.clone(),
            H2Error::Http(e) => e.to_string(),
        })));
        dialed
    }

    /// Dials a new connection and takes the first place on it.
    async fn dial_new(&self) -> Result<(SendRequest<Full<Bytes>>, Slot), H2Error> {
        let allowed = Arc::new(AtomicUsize::new(usize::MAX));
        let tx = connect(&self.dial, allowed.clone()).await?;
        // (its first SETTINGS are read: what the agent allows is known)
        let room = self.dial.max_streams.min(allowed.load(Ordering::Relaxed));
        self.expected_room.store(room.max(1), Ordering::Relaxed);
        let streams = Arc::new(Use::new(self.epoch));
        self.lock().push(Conn {
            tx: tx.clone(),
            streams: streams.clone(),
            allowed,
        });
        Ok((tx, Slot(streams)))
    }

    /// Sends a request (absolute URI) and returns the response head; its body holds the
    /// request's place on the connection until dropped. A request the connection could not
    /// take (it was closing) goes once more on a new connection.
    pub async fn request(&self, req: Request<Full<Bytes>>) -> Result<Response<Counted>, H2Error> {
        let (mut tx, slot) = match self.take_open() {
            Some(taken) => taken,
            None => Box::pin(self.take_new()).await?,
        };
        let (mut tx, slot, req) = match tx.try_send_request(req).await {
            Ok(resp) => return Ok(counted(resp, slot)),
            Err(mut e) => match e.take_message() {
                Some(req) => {
                    drop(slot);
                    let (tx, slot) = Box::pin(self.take_new()).await?;
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
/// its task on this worker; `allowed` follows the agent's stream limit.
async fn connect(
    dial: &Dial,
    allowed: Arc<AtomicUsize>,
) -> Result<SendRequest<Full<Bytes>>, H2Error> {
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
        .initial_connection_window_size(STREAM_WINDOW.saturating_mul(streams).min(i32::MAX as u32))
        .timer(TokioTimer::new())
        .keep_alive_interval(dial.keepalive.0)
        .keep_alive_timeout(dial.keepalive.1)
        .keep_alive_while_idle(true);
    match &dial.tls {
        None => handshake(&builder, tcp, dial.timeouts(), allowed).await,
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
            handshake(&builder, stream, dial.timeouts(), allowed).await
        }
    }
}

/// The HTTP/2 handshake on `io`, ready once the agent's first SETTINGS are read; the
/// connection's task runs on this worker until it closes.
async fn handshake<T>(
    builder: &Builder<TokioExecutor>,
    io: T,
    (write_stall, connect_timeout): (Duration, Duration),
    allowed: Arc<AtomicUsize>,
) -> Result<SendRequest<Full<Bytes>>, H2Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io = crate::write_stall::WriteStall::new(io, write_stall);
    let (settled, mut known) = tokio::sync::watch::channel(false);
    let (tx, conn) = builder
        .handshake(TokioIo::new(super::peer_settings::PeerSettings::new(
            io, allowed, settled,
        )))
        .await
        .map_err(H2Error::Http)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    // The connection takes requests once the agent's first SETTINGS are read (its first
    // frame, one round trip): before, a burst could put more on it than the agent allows.
    let ready = tokio::time::timeout(connect_timeout, known.wait_for(|k| *k))
        .await
        .is_ok_and(|r| r.is_ok());
    if ready {
        Ok(tx)
    } else {
        Err(H2Error::Connect("the agent sent no HTTP/2 settings".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::convert::Infallible;

    /// An h2c server whose `/flood` streams 64 KiB frames for as long as they are taken and
    /// whose other paths send `/n` bytes in 64 KiB frames, then end.
    async fn h2_server() -> std::net::SocketAddr {
        h2_server_after(Duration::ZERO).await
    }

    /// [`h2_server`] that starts HTTP/2 on each connection `delay` after accepting it (an
    /// agent slow to answer a new connection).
    async fn h2_server_after(delay: Duration) -> std::net::SocketAddr {
        h2_server_allowing(delay, 1000).await
    }

    /// [`h2_server_after`] that allows `streams` at once on a connection.
    async fn h2_server_allowing(delay: Duration, streams: u32) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let path = req.uri().path().to_string();
                    let (tx, body) = crate::body::ChannelBody::new(1);
                    tokio::spawn(async move {
                        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                        let mut left: usize = path[1..].parse().unwrap_or(usize::MAX);
                        while left > 0 {
                            let n = left.min(chunk.len());
                            if tx.send(Ok(chunk.slice(..n))).await.is_err() {
                                return;
                            }
                            left -= n;
                        }
                    });
                    Ok::<_, Infallible>(Response::new(body))
                });
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .max_concurrent_streams(streams)
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await
                });
            }
        });
        addr
    }

    fn get(addr: std::net::SocketAddr, path: &str) -> Request<Full<Bytes>> {
        Request::builder()
            .uri(format!("http://{addr}{path}"))
            .body(Full::new(Bytes::new()))
            .unwrap()
    }

    /// A TCP relay to `to` that stops passing bytes (both ways, its connections kept open)
    /// once `frozen` is set: a peer that vanished without closing.
    async fn freezing_relay(
        to: std::net::SocketAddr,
        frozen: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((a, _)) = listener.accept().await {
                let b = tokio::net::TcpStream::connect(to).await.unwrap();
                let (ar, aw) = a.into_split();
                let (br, bw) = b.into_split();
                for (mut r, mut w) in [(ar, bw), (br, aw)] {
                    let frozen = frozen.clone();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match r.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            while frozen.load(Ordering::SeqCst) {
                                tokio::time::sleep(Duration::from_secs(3600)).await;
                            }
                            if w.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        addr
    }

    /// An agent that stops answering without closing its connection: the connection's PING
    /// goes unanswered, and the stream on it fails at the keep-alive timeout instead of
    /// waiting forever (without keep-alive this test times out).
    #[tokio::test]
    async fn a_stream_whose_agent_vanished_fails_at_the_keepalive_timeout() {
        let server = h2_server().await;
        let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let relay = freezing_relay(server, frozen.clone()).await;
        let uri: Uri = format!("http://{relay}/").parse().unwrap();
        let mut dial = Dial::new(&uri, None, Duration::from_secs(5), 10).unwrap();
        dial.keepalive = (Duration::from_millis(100), Duration::from_millis(200));
        let pool = Pool::new(dial);
        let mut body = pool
            .request(get(relay, "/flood"))
            .await
            .unwrap()
            .into_body();
        assert!(body.frame().await.unwrap().is_ok());
        frozen.store(true, Ordering::SeqCst);
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match body.frame().await {
                    Some(Ok(_)) => continue,
                    Some(Err(_)) => return "error",
                    None => return "end",
                }
            }
        })
        .await;
        assert_eq!(ended, Ok("error"), "the stream failed instead of hanging");
        // The dead connection is not handed out again.
        assert!(pool.take_open().is_none());
        assert_eq!(pool.lock().len(), 0);
    }

    /// Three streams nobody reads fill their windows; a fourth on the same connection still
    /// receives 4 MiB. (With hyper's own windows, 2 MiB a stream and 5 MiB the connection, the
    /// three would hold the whole connection window and the fourth would stall.)
    #[tokio::test]
    async fn streams_nobody_reads_do_not_stall_another_on_the_connection() {
        let addr = h2_server().await;
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let pool = Pool::new(Dial::new(&uri, None, Duration::from_secs(5), 4).unwrap());
        let mut stalled = Vec::new();
        for _ in 0..3 {
            stalled.push(pool.request(get(addr, "/flood")).await.unwrap());
        }
        // Let the flood fill what it may.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let reader = pool.request(get(addr, "/4194304")).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(10), reader.into_body().collect())
            .await
            .expect("the fourth stream was not stalled")
            .unwrap()
            .to_bytes();
        assert_eq!(read.len(), 4 * 1024 * 1024);
        assert_eq!(pool.lock().len(), 1, "all four shared one connection");
        drop(stalled);
    }

    /// Connections that carried nothing for `idle_close` are closed at the pool's next use:
    /// after a spike of three at once (one stream a connection), one connection is left.
    #[tokio::test]
    async fn connections_idle_past_the_limit_are_closed() {
        let addr = h2_server().await;
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let mut dial = Dial::new(&uri, None, Duration::from_secs(5), 1).unwrap();
        // (a limit a stalled thread of a loaded machine does not reach between two steps)
        dial.idle_close = Duration::from_secs(1);
        let pool = Pool::new(dial);
        let spike = spike_of_three(&pool, addr).await;
        assert_eq!(pool.lock().len(), 3);
        drop(spike);
        // Within the limit, they stay (and one is taken again).
        let kept = pool.request(get(addr, "/10")).await.unwrap();
        assert_eq!(pool.lock().len(), 3);
        drop(kept);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let after = pool.request(get(addr, "/10")).await.unwrap();
        assert_eq!(pool.lock().len(), 1, "the idle ones were closed, one made");
        drop(after);
    }

    /// Three requests at once, each on its own connection (one stream a connection).
    async fn spike_of_three(pool: &Pool, addr: std::net::SocketAddr) -> Vec<Response<Counted>> {
        let mut out = Vec::new();
        for _ in 0..3 {
            out.push(pool.request(get(addr, "/flood")).await.unwrap());
        }
        out
    }

    /// Requests at once on a cold pool share one dial: the first dials, the others wait for
    /// that connection and take their places on it (before, each dialed its own).
    #[tokio::test]
    async fn a_cold_burst_makes_one_connection() {
        let addr = h2_server().await;
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let pool = Arc::new(Pool::new(
            Dial::new(&uri, None, Duration::from_secs(5), 10).unwrap(),
        ));
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..6 {
            let pool = pool.clone();
            burst.spawn(async move { pool.request(get(addr, "/flood")).await.map(drop) });
        }
        while let Some(done) = burst.join_next().await {
            assert!(done.unwrap().is_ok());
        }
        assert_eq!(pool.lock().len(), 1, "one connection for the burst");
        // Past the places of the dials under way, the next request dials another at once
        // (two places a connection: five requests, three dials).
        let pool = Arc::new(Pool::new(
            Dial::new(&uri, None, Duration::from_secs(5), 2).unwrap(),
        ));
        let mut held = tokio::task::JoinSet::new();
        let (release, released) = tokio::sync::watch::channel(false);
        for _ in 0..5 {
            let (pool, mut released) = (pool.clone(), released.clone());
            held.spawn(async move {
                let resp = pool.request(get(addr, "/flood")).await;
                let _ = released.wait_for(|r| *r).await;
                resp.map(drop)
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool
            .lock()
            .iter()
            .map(|c| c.streams.count.load(Ordering::Relaxed))
            .sum::<usize>()
            < 5
        {
            assert!(Instant::now() < deadline, "the five never got their places");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(pool.lock().len(), 3, "two places a connection");
        let _ = release.send(true);
        while let Some(done) = held.join_next().await {
            assert!(done.unwrap().is_ok());
        }
    }

    /// `n` requests at once, each keeping its place until all have answers (no place is freed
    /// for another): how long until they all had one.
    async fn held_burst(pool: &Arc<Pool>, addr: std::net::SocketAddr, n: usize) -> Duration {
        let started = Instant::now();
        let all_in = Arc::new(tokio::sync::Barrier::new(n));
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..n {
            let (pool, all_in) = (pool.clone(), all_in.clone());
            burst.spawn(async move {
                let answer = pool.request(get(addr, "/flood")).await;
                all_in.wait().await;
                answer.map(drop)
            });
        }
        while let Some(done) = burst.join_next().await {
            assert!(done.unwrap().is_ok());
        }
        started.elapsed()
    }

    /// Past the places a connection being dialed will have, the next request dials its own at
    /// once rather than waiting for that dial to end: four requests at one stream a
    /// connection to an agent that takes 500 ms to answer a new connection are all answered
    /// in about 500 ms (one dial after another: 2 s).
    #[tokio::test]
    async fn dials_past_the_places_they_will_have_run_side_by_side() {
        let addr = h2_server_after(Duration::from_millis(500)).await;
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let pool = Arc::new(Pool::new(
            Dial::new(&uri, None, Duration::from_secs(5), 1).unwrap(),
        ));
        let took = held_burst(&pool, addr, 4).await;
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert_eq!(pool.lock().len(), 4);
    }

    /// The places a new connection will have are those the agent allows, once a connection
    /// has shown them: with an agent that allows one stream (`max_streams` 10), a burst of
    /// three after a first request dials three connections side by side (about one dial's
    /// 600 ms), not in waves of waiters that claimed places the connection never had (1.8 s).
    #[tokio::test]
    async fn a_burst_expects_the_places_the_agent_allows() {
        let addr = h2_server_allowing(Duration::from_millis(600), 1).await;
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let pool = Arc::new(Pool::new(
            Dial::new(&uri, None, Duration::from_secs(5), 10).unwrap(),
        ));
        // (a first request: its connection shows what the agent allows, and stays busy)
        let first = pool.request(get(addr, "/flood")).await.unwrap();
        assert_eq!(pool.expected_room.load(Ordering::Relaxed), 1);
        let took = held_burst(&pool, addr, 3).await;
        assert!(took < Duration::from_millis(1200), "{took:?}");
        assert_eq!(pool.lock().len(), 4);
        drop(first);
    }

    /// A dial that fails fails the requests that waited for it, at once: an agent that takes
    /// connections and never speaks HTTP/2 costs a burst one connect timeout, not one each in
    /// turn.
    #[tokio::test]
    async fn those_that_waited_for_a_failed_dial_fail_with_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            let mut silent = Vec::new();
            while let Ok((tcp, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                silent.push(tcp);
            }
        });
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let pool = Arc::new(Pool::new(
            Dial::new(&uri, None, Duration::from_secs(1), 10).unwrap(),
        ));
        let started = Instant::now();
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let pool = pool.clone();
            burst.spawn(async move { pool.request(get(addr, "/10")).await.map(drop) });
        }
        while let Some(done) = burst.join_next().await {
            assert!(done.unwrap().is_err());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one dial for the four");
        // (four dials in turn would take 4 s)
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        // A request after the failure dials again.
        assert!(pool.request(get(addr, "/10")).await.is_err());
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    /// A connection carries at most `max_streams` requests: the next opens another, and a
    /// place freed (a body dropped) is taken again before a new connection is opened.
    #[tokio::test]
    async fn a_full_connection_makes_the_next_request_open_another() {
        let addr = h2_server().await;
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let pool = Pool::new(Dial::new(&uri, None, Duration::from_secs(5), 2).unwrap());
        let a = pool.request(get(addr, "/flood")).await.unwrap();
        let b = pool.request(get(addr, "/flood")).await.unwrap();
        assert_eq!(pool.lock().len(), 1);
        let c = pool.request(get(addr, "/flood")).await.unwrap();
        assert_eq!(pool.lock().len(), 2);
        drop(a);
        let d = pool.request(get(addr, "/flood")).await.unwrap();
        assert_eq!(pool.lock().len(), 2, "the freed place was taken");
        let counts = || -> Vec<usize> {
            pool.lock()
                .iter()
                .map(|c| c.streams.count.load(Ordering::Relaxed))
                .collect()
        };
        assert_eq!(counts(), vec![2, 1]);
        drop((b, c, d));
        assert_eq!(counts(), vec![0, 0]);
    }
}
