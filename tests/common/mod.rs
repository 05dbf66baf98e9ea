//! Shared test harness: temp dirs, the proxy on port 0 over real TLS, real HTTP/1.1 and
//! HTTP/2 clients (hyper over tokio-rustls), a standalone engine and a recording upstream.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_edge::policy::{LoadMode, Policy};
use a2a_edge::server::{self, Running};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};

mod policy;
pub use policy::PolicyDoc;

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "a2a-edge-{tag}-{}",
            a2a_edge::policy::random_token()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub const TOKEN: &str = "test-token-0123456789";
pub const UPSTREAM_TOKEN: &str = "upstream-secret-abcdef";

/// Options for a test proxy: [`PolicyDoc::base`] changed by TOML fragments, each merged
/// into its table by [`PolicyDoc::merge_into`] (tables in a fragment merge at the root, as in
/// a file; arrays of tables such as `[[auth.bearer]]` or `[[upstreams]]` are appended to).
pub struct ProxyOpts {
    pub upstream_url: String,
    /// Keys of `[server]`.
    pub extra_server: String,
    /// Keys of `[tls]` (tables after them are the root's, as in a file).
    pub extra_tls: String,
    /// Keys of `[auth]`, then any of its sub-tables (`[auth.identity_assertion]`).
    pub extra_auth: String,
    /// Keys of the first upstream, `agent-1` (further `[[upstreams]]` after them are added).
    pub extra_upstream: String,
    /// Keys of the base principal's `[[auth.bearer]]` entry, `tester` (`tenant`, `groups`).
    pub extra_tester: String,
    /// Merged at the root.
    pub extra_policy: String,
    pub upstream_token_env: Option<&'static str>,
}

impl Default for ProxyOpts {
    fn default() -> Self {
        Self {
            upstream_url: "embedded".into(),
            extra_server: String::new(),
            extra_tls: String::new(),
            extra_auth: String::new(),
            extra_upstream: String::new(),
            extra_tester: String::new(),
            extra_policy: String::new(),
            upstream_token_env: None,
        }
    }
}

/// A proxy serving on 127.0.0.1:0 with dev certificates in a temp dir.
pub struct Proxy {
    pub addr: SocketAddr,
    pub public_url: String,
    pub ca: PathBuf,
    pub running: Option<Running>,
    pub dir: TempDir,
}

/// The policy of `o`: [`PolicyDoc::base`] with `o`'s upstream and each `extra_*` fragment
/// merged into its table (`extra_policy` at the root).
pub fn policy_text(dir: &Path, o: &ProxyOpts) -> String {
    let mut doc = PolicyDoc::base(dir).set("upstreams.0.url", o.upstream_url.as_str());
    if let Some(var) = o.upstream_token_env {
        doc = doc.set("upstreams.0.token_env", var);
    }
    doc.merge_into("server", &o.extra_server)
        .merge_into("tls", &o.extra_tls)
        .merge_into("upstreams.0", &o.extra_upstream)
        .merge_into("auth", &o.extra_auth)
        .merge_into("auth.bearer.0", &o.extra_tester)
        .merge(&o.extra_policy)
        .text()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Proxy {
    /// A raw TLS stream (HTTP/1.1 ALPN) for writing malformed or slow requests by hand, or
    /// reading the answer's bytes as they come.
    pub async fn raw_tls(&self) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        self.raw_tls_offering(&[b"http/1.1"]).await
    }

    /// A raw TLS stream offering these ALPN protocols (none: the edge sniffs the protocol).
    pub async fn raw_tls_offering(
        &self,
        alpn: &[&[u8]],
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let cfg = a2a_edge::tls::client_config(&self.ca, alpn).unwrap();
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        tokio_rustls::TlsConnector::from(cfg)
            .connect(name, tcp)
            .await
            .unwrap()
    }

    pub async fn start(o: ProxyOpts) -> Proxy {
        let dir = TempDir::new("proxy");
        let text = policy_text(dir.path(), &o);
        Proxy::start_text(dir, &text).await
    }

    /// A proxy serving the policy `text` (its dev certificates in `dir/certs`).
    pub async fn start_text(dir: TempDir, text: &str) -> Proxy {
        let policy = Policy::from_toml(Path::new("test.toml"), text, LoadMode::Serve)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let running = server::start(policy).await.unwrap();
        Proxy {
            addr: running.local_addr,
            public_url: running.public_url.to_string(),
            ca: dir.path().join("certs/ca.pem"),
            running: Some(running),
            dir,
        }
    }

    /// A recording upstream answering with `reply`, and a proxy in front of it (`o` with
    /// `upstream_url` set to the recorder).
    pub async fn with_recorder(reply: Reply, o: ProxyOpts) -> (RecordingUpstream, Proxy) {
        let up = RecordingUpstream::start(reply).await;
        let proxy = Proxy::start(ProxyOpts {
            upstream_url: up.url.clone(),
            ..o
        })
        .await;
        (up, proxy)
    }

    pub async fn client(&self, proto: Proto) -> Client {
        Client::connect(self.addr, &self.ca, proto).await
    }

    /// Reloads the running proxy with the policy `text` (as SIGHUP would), panicking if it
    /// does not apply.
    /// Returns the changed keys that only a restart applies.
    pub async fn reload(&self, text: &str) -> Vec<&'static str> {
        self.try_reload(text).await.unwrap()
    }

    /// A reload the running proxy may refuse (the policy loads, what it names does not).
    pub async fn try_reload(&self, text: &str) -> Result<Vec<&'static str>, String> {
        let policy = Policy::from_toml(Path::new("reload.toml"), text, LoadMode::Serve)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let running = self.running.as_ref().expect("running");
        running.reload(policy).await.map_err(|e| e.to_string())
    }

    /// Stops the proxy and waits for the drain.
    pub async fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown();
            r.wait().await;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    H1,
    H2,
}

pub const PROTOS: [Proto; 2] = [Proto::H1, Proto::H2];

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

/// One TLS connection speaking HTTP/1.1 or HTTP/2 (negotiated by ALPN).
pub struct Client {
    sender: Sender,
    pub alpn: Option<Vec<u8>>,
}

impl Client {
    pub async fn connect(addr: SocketAddr, ca: &Path, proto: Proto) -> Client {
        Client::try_connect(addr, ca, proto, None).await.unwrap()
    }

    /// Connects, optionally presenting a client certificate (chain, PKCS#8 key DER).
    pub async fn try_connect(
        addr: SocketAddr,
        ca: &Path,
        proto: Proto,
        client_cert: Option<(Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>)>,
    ) -> Result<Client, String> {
        let alpn: &[&[u8]] = match proto {
            Proto::H1 => &[b"http/1.1"],
            Proto::H2 => &[b"h2"],
        };
        Client::connect_offering(addr, ca, proto, alpn, client_cert).await
    }

    /// Connects offering `alpn` (empty: no ALPN at all), then speaks `proto`.
    pub async fn connect_offering(
        addr: SocketAddr,
        ca: &Path,
        proto: Proto,
        alpn: &[&[u8]],
        client_cert: Option<(Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>)>,
    ) -> Result<Client, String> {
        let cfg = match client_cert {
            None => a2a_edge::tls::client_config(ca, alpn).unwrap(),
            Some((chain, key)) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in a2a_edge::tls::load_certs(ca).unwrap() {
                    roots.add(c).unwrap();
                }
                let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.into());
                let mut cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .unwrap();
                cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
                std::sync::Arc::new(cfg)
            }
        };
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(cfg)
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let negotiated = tls.get_ref().1.alpn_protocol().map(|p| p.to_vec());
        let io = TokioIo::new(tls);
        let sender = match proto {
            Proto::H1 => {
                let (s, conn) = hyper::client::conn::http1::handshake(io)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                Sender::H1(s)
            }
            Proto::H2 => {
                let (s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                Sender::H2(s)
            }
        };
        Ok(Client {
            sender,
            alpn: negotiated,
        })
    }

    /// Another handle on this HTTP/2 connection: its requests are streams of the same
    /// connection.
    pub fn h2_handle(&self) -> Client {
        match &self.sender {
            Sender::H2(s) => Client {
                sender: Sender::H2(s.clone()),
                alpn: self.alpn.clone(),
            },
            Sender::H1(_) => panic!("an HTTP/1.1 connection has one request at a time"),
        }
    }

    /// The server closed the connection (or it broke).
    pub fn is_closed(&self) -> bool {
        match &self.sender {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
        }
    }

    /// Like [`Client::request`], but a transport failure is an `Err`, not a panic.
    pub async fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<(StatusCode, HeaderMap, Bytes), String> {
        let mut b = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).unwrap())
            .uri(format!("https://localhost{path}"));
        if matches!(self.sender, Sender::H1(_)) {
            b = b.header("host", "localhost");
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b.body(Full::new(body.into())).unwrap();
        let resp = match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await.map_err(|e| e.to_string())?;
                s.send_request(req).await.map_err(|e| e.to_string())?
            }
            Sender::H2(s) => {
                s.ready().await.map_err(|e| e.to_string())?;
                s.send_request(req).await.map_err(|e| e.to_string())?
            }
        };
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((parts.status, parts.headers, bytes))
    }

    /// Sends a request and returns the response with its body unread.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Response<Incoming> {
        match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await.unwrap();
                s.send_request(req).await.unwrap()
            }
            Sender::H2(s) => {
                s.ready().await.unwrap();
                s.send_request(req).await.unwrap()
            }
        }
    }

    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> (StatusCode, HeaderMap, Bytes) {
        self.try_request(method, path, headers, body).await.unwrap()
    }

    /// POSTs a JSON-RPC request with the test token and `A2A-Version: 1.0`.
    pub async fn rpc(&mut self, method: &str, params: Value) -> Value {
        let (status, _, body) = self.rpc_raw(method, params).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    pub async fn rpc_raw(&mut self, method: &str, params: Value) -> (StatusCode, HeaderMap, Bytes) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.request("POST", "/", &rpc_headers(), body.to_string())
            .await
    }

    /// Starts a streaming JSON-RPC call and returns the response with its body unread.
    pub async fn rpc_stream(&mut self, method: &str, params: Value) -> Response<Incoming> {
        let body = json!({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params});
        let mut b = Request::builder().method("POST").uri("https://localhost/");
        if matches!(self.sender, Sender::H1(_)) {
            b = b.header("host", "localhost");
        }
        for (k, v) in rpc_headers() {
            b = b.header(k, v);
        }
        b = b.header("accept", "text/event-stream");
        self.send(b.body(Full::new(Bytes::from(body.to_string()))).unwrap())
            .await
    }
}

pub fn rpc_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("authorization", "Bearer test-token-0123456789"),
        ("a2a-version", "1.0"),
        ("content-type", "application/json"),
    ]
}

/// Reads server-sent events one at a time from a streaming response.
pub struct EventReader {
    body: Incoming,
    decoder: a2a_edge::a2a::sse::SseDecoder,
    queue: std::collections::VecDeque<a2a_edge::a2a::sse::SseEvent>,
}

impl EventReader {
    pub fn new(resp: Response<Incoming>) -> EventReader {
        EventReader {
            body: resp.into_body(),
            decoder: a2a_edge::a2a::sse::SseDecoder::new(1 << 24),
            queue: Default::default(),
        }
    }

    /// The next event with data (comments skipped), or None at the end of the stream.
    pub async fn next(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            while let Some(ev) = self.queue.pop_front() {
                if let Some(data) = ev.data {
                    return Some((ev.event, serde_json::from_str(&data).unwrap()));
                }
            }
            let frame = tokio::time::timeout(Duration::from_secs(30), self.body.frame())
                .await
                .expect("stream stalled")?;
            let frame = frame.ok()?;
            if let Ok(data) = frame.into_data() {
                self.queue.extend(self.decoder.push(&data).unwrap());
            }
        }
    }

    /// Every remaining event.
    pub async fn rest(&mut self) -> Vec<(Option<String>, Value)> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// A standalone engine on 127.0.0.1:0 (plain HTTP); returns its JSON-RPC URL.
pub async fn start_engine() -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let engine = a2a_edge::engine::Engine::new(a2a_edge::engine::EngineConfig {
        public_url: url.clone(),
        ..Default::default()
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(a2a_edge::engine::serve(listener, engine, async move {
        let _ = rx.await;
    }));
    (url, tx)
}

/// One request as the recording upstream saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub version: http::Version,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    fn of(parts: &http::request::Parts, body: Bytes) -> Recorded {
        Recorded {
            version: parts.version,
            method: parts.method.clone(),
            path: parts.uri.path().to_string(),
            headers: parts.headers.clone(),
            body,
        }
    }
}

/// How the recording upstream answers.
#[derive(Clone)]
pub enum Reply {
    /// Answers each method with its simplest A2A 1.0 result ([`echo_result`]), the request's
    /// JSON-RPC id echoed.
    Echo,
    /// Never answers.
    Hang,
    /// Sends the first SSE event, then breaks the connection.
    BreakStream,
    /// Answers with secrets an agent might echo, and an internal error with a path.
    Leaky,
    /// Streams an event every 50 ms until the stream is closed; then sets the flag.
    Endless(Arc<std::sync::atomic::AtomicBool>),
    /// Answers a stream with `body` as is (`{id}` replaced by the request id), then ends it.
    RawStream(&'static str),
    /// Answers every JSON-RPC request with this JSON body (`{id}` replaced by the request id).
    Raw(&'static str),
    /// Answers each method in its A2A 1.0 shape around this Task (JSON): SendMessage and
    /// the streaming methods `{"task": T}` (as one JSON answer), GetTask and CancelTask `T`,
    /// a push config's methods a config `p1` of T's id (a list of it; `{}` for a delete).
    Task(&'static str),
    /// An agent that sends no status timestamps: a message gets a new completed task
    /// (`t-` and the message's id) in context `ctx-untimed`; GetTask gets that task back.
    Untimed,
    /// Streams 64 KiB events as fast as they are taken until the stream is closed; then sets
    /// the flag.
    Flood(Arc<std::sync::atomic::AtomicBool>),
    /// Answers a stream with its head at once and its one event (a working task) this long
    /// after, then ends it.
    Late(Duration),
    /// Answers a JSON-RPC request (its id taken to be 1) with a stream at once, one working
    /// task event, before it has read the request's body; reads the body once notified (then
    /// records the request and ends the stream).
    Unread(Arc<tokio::sync::Notify>),
    /// Answers a SendMessage with a completed task named by the message's text, `task
    /// context [STATE]` (`-`: no `contextId`; `STATE`, e.g. `WORKING`, instead of
    /// `COMPLETED`): an agent that mixes callers up (or is told to) names whatever ids it is
    /// given; a SendStreamingMessage gets that task as its stream's one event; `msg context
    /// task` gets a Message in that context referring to that task. A
    /// ListTaskPushNotificationConfigs gets a config of the
    /// named task and one of `t-a1` (an agent that ignores the request's `taskId`).
    Named,
    /// An agent that goes on after ending its turn, as iac-code does after a provider error
    /// (`iac-code-upstream.md`: FAILED in the middle of the stream, then WORKING and a final
    /// INPUT_REQUIRED). Its task is `t-` and the message's id, in the message's context or
    /// `c-` and the message's id. A SendStreamingMessage gets the task WORKING, at once a
    /// FAILED update, and after each pause a WORKING and an INPUT_REQUIRED update; then the
    /// stream ends (`again`: no WORKING, the INPUT_REQUIRED one pause after FAILED; `cut`: no
    /// INPUT_REQUIRED, the stream ends after WORKING; `json`: the task WORKING as one JSON
    /// answer instead of a stream). A message
    /// that says `error` gets a JSON-RPC error (an `event: error` in a stream), `broken` an
    /// HTTP 500 (a stream: its task WORKING, then the connection breaks), anything else its
    /// task INPUT_REQUIRED at once. `slow` before any of these: the same after three pauses.
    Relapse(Duration),
}

/// A plain-HTTP upstream that records every request it receives.
pub struct RecordingUpstream {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Recorded>>>,
    /// Connections accepted so far.
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    /// The card it serves (tests may change it); its extended card adds a skill.
    pub card: Arc<Mutex<Value>>,
}

/// The card a recording upstream serves by default.
pub fn recorder_card() -> Value {
    json!({
        "name": "recorder", "version": "1", "description": "records",
        "supportedInterfaces": [{"url": "http://10.1.2.3:9/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true, "extendedAgentCard": true}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": []
    })
}

impl RecordingUpstream {
    /// Over HTTP/1.1.
    pub async fn start(reply: Reply) -> RecordingUpstream {
        Self::start_with(reply, false, None).await
    }

    /// Over HTTP/2 only (h2c with prior knowledge): an HTTP/1.1 request fails.
    pub async fn start_h2(reply: Reply) -> RecordingUpstream {
        Self::start_with(reply, true, None).await
    }

    /// [`RecordingUpstream::start_h2`] allowing at most `streams` at once on a connection
    /// (its `SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub async fn start_h2_allowing(reply: Reply, streams: u32) -> RecordingUpstream {
        Self::start_with(reply, true, Some(streams)).await
    }

    async fn start_with(reply: Reply, h2: bool, streams: Option<u32>) -> RecordingUpstream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        if let Reply::Unread(_) = reply {
            // (what it leaves unread stays with the edge, whatever the host's default socket
            // buffers: the accepted sockets inherit this one's)
            socket.set_recv_buffer_size(64 * 1024).unwrap();
        }
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1024).unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let seen2 = seen.clone();
        let card = Arc::new(Mutex::new(recorder_card()));
        let card2 = card.clone();
        let connections: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let accepted = connections.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let seen = seen2.clone();
                let reply = reply.clone();
                let card = card2.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let seen = seen.clone();
                        let reply = reply.clone();
                        let card = card.lock().unwrap().clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            if let (Reply::Unread(go), &Method::POST) = (&reply, &parts.method) {
                                return Ok(unread(go.clone(), parts, body, seen));
                            }
                            let body = body.collect().await.unwrap().to_bytes();
                            seen.lock()
                                .unwrap()
                                .push(Recorded::of(&parts, body.clone()));
                            Ok::<_, Infallible>(answer(reply, card, &parts.uri, &body).await)
                        }
                    });
                    if h2 {
                        let mut builder = hyper::server::conn::http2::Builder::new(
                            hyper_util::rt::TokioExecutor::new(),
                        );
                        if streams.is_some() {
                            builder.max_concurrent_streams(streams);
                        }
                        let _ = builder.serve_connection(TokioIo::new(tcp), svc).await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), svc)
                            .await;
                    }
                });
            }
        });
        RecordingUpstream {
            url,
            seen,
            connections,
            card,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }

    /// JSON-RPC requests only (the card fetch is a GET).
    pub fn rpc_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == Method::POST)
            .collect()
    }
}

type TestBody = a2a_edge::body::BoxBody;

/// [`Reply::Unread`]'s answer.
fn unread(
    go: Arc<tokio::sync::Notify>,
    parts: http::request::Parts,
    body: Incoming,
    seen: Arc<Mutex<Vec<Recorded>>>,
) -> Response<TestBody> {
    let (tx, events) = a2a_edge::body::ChannelBody::new(1);
    tokio::spawn(async move {
        let event = json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t-unread",
            "contextId": "c-unread", "status": {"state": "TASK_STATE_WORKING"}}}});
        let _ = tx.send(Ok(Bytes::from(format!("data: {event}\n\n")))).await;
        go.notified().await;
        let body = body.collect().await.unwrap().to_bytes();
        seen.lock().unwrap().push(Recorded::of(&parts, body));
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(events.boxed())
        .unwrap()
}

/// The simplest A2A 1.0 result of the request's method: a Message whose one part is the text
/// `echo` (no context: it names nothing) to a message or anything unknown, the task asked
/// for (no context, WORKING; CANCELED to a cancel; `{"task": …}` to a subscribe), a push
/// config `p-echo` of the task asked for (its `url` the request's, if any), an empty list of
/// them, `null` to a delete.
pub fn echo_result(body: &[u8]) -> Value {
    let request = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    let params = &request["params"];
    let task = |state: &str| json!({"id": params["id"], "status": {"state": state}});
    let url = params["url"]
        .as_str()
        .unwrap_or("https://hooks.example.com/echo");
    let config = json!({"id": params["id"].as_str().unwrap_or("p-echo"), "taskId": params["taskId"], "url": url});
    match request["method"].as_str().unwrap_or("") {
        "GetTask" => task("TASK_STATE_WORKING"),
        "CancelTask" => task("TASK_STATE_CANCELED"),
        "SubscribeToTask" => json!({"task": task("TASK_STATE_WORKING")}),
        "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => config,
        "ListTaskPushNotificationConfigs" => json!({"configs": []}),
        "DeleteTaskPushNotificationConfig" => Value::Null,
        _ => {
            json!({"message": {"messageId": "m-echo", "role": "ROLE_AGENT", "parts": [{"text": "echo"}]}})
        }
    }
}

async fn answer(reply: Reply, card: Value, uri: &http::Uri, body: &Bytes) -> Response<TestBody> {
    let json = |v: Value| {
        Response::builder()
            .header("content-type", "application/json")
            .body(
                Full::new(Bytes::from(v.to_string()))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap()
    };
    if uri.path() == "/.well-known/agent-card.json" {
        return json(card);
    }
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(Value::Null);
    let method = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("method").cloned());
    if method == Some(json!("GetExtendedAgentCard")) {
        let mut extended = card;
        extended["skills"] =
            json!([{"id": "secret-skill", "name": "s", "description": "d", "tags": ["x"]}]);
        return json(json!({"jsonrpc": "2.0", "id": id, "result": extended}));
    }
    match reply {
        // (a POST never comes here: `unread` answers it)
        Reply::Echo | Reply::Unread(_) => {
            json(json!({"jsonrpc": "2.0", "id": id, "result": echo_result(body)}))
        }
        Reply::Leaky
            if method == Some(json!("SendMessage")) || method == Some(json!("GetTask")) =>
        {
            let task = json!({
                "id": "leaky-task", "contextId": "leaky-ctx", "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
                "metadata": {"iac_code": {"iac_code_api_key": "sk-from-agent-config", "cwd": "/w"}},
                "history": [{"messageId": "x", "role": "ROLE_AGENT", "parts": [{"text": "ok"}],
                    "metadata": {"iac_code": {"llm_headers": {"Authorization": "Bearer llm-secret"}}}}]
            });
            let result = if method == Some(json!("GetTask")) {
                task
            } else {
                json!({"task": task})
            };
            json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Reply::Leaky if method == Some(json!("SendStreamingMessage")) => {
            let event = json!({"jsonrpc": "2.0", "id": id, "result": {"statusUpdate": {
                "taskId": "leaky-task", "contextId": "leaky-ctx", "status": {"state": "TASK_STATE_WORKING"},
                "metadata": {"iac_code": {"iac_code_api_key": "sk-from-agent-config"}}}}});
            let body = format!(
                ": keep-alive from /home/agent/secret/path.py\r\n\r\ndata: {event}\r\n\r\n"
            );
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(
                    Full::new(Bytes::from(body))
                        .map_err(|never| match never {})
                        .boxed_unsync(),
                )
                .unwrap()
        }
        Reply::Leaky if method == Some(json!("GetTaskPushNotificationConfig")) => {
            json(json!({"jsonrpc": "2.0", "id": id, "result": {
            "taskId": "leaky-task", "id": "c1", "url": "https://hooks.example.com/x", "token": "notification-secret",
            "authentication": {"scheme": "Bearer", "credentials": "callback-secret"}}}))
        }
        Reply::Leaky => json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
            "message": "Traceback (most recent call last): File \"/home/agent/iac_code/a2a/executor.py\"",
            "data": [{"stack": "/home/agent/secret/path.py"}]}})),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            json(json!({}))
        }
        Reply::Endless(closed) if method == Some(json!("SendStreamingMessage")) => {
            let (tx, body) = a2a_edge::body::ChannelBody::new(1);
            tokio::spawn(async move {
                for i in 0u64.. {
                    let ev = format!(
                        "data: {}\r\n\r\n",
                        json!({"jsonrpc": "2.0", "id": id, "result": {"statusUpdate": {"taskId": "t-endless", "contextId": "c-endless", "status": {"state": "TASK_STATE_WORKING"}, "metadata": {"n": i}}}})
                    );
                    if tx.send(Ok(Bytes::from(ev))).await.is_err() {
                        closed.store(true, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body.boxed())
                .unwrap()
        }
        Reply::Endless(_) => json(json!({"jsonrpc": "2.0", "id": id, "result": echo_result(body)})),
        Reply::Flood(_) if method != Some(json!("SendStreamingMessage")) => {
            json(json!({"jsonrpc": "2.0", "id": id, "result": echo_result(body)}))
        }
        Reply::Flood(closed) => {
            let (tx, body) = a2a_edge::body::ChannelBody::new(1);
            tokio::spawn(async move {
                let filler = "x".repeat(64 * 1024);
                loop {
                    let ev = format!(
                        "data: {}\r\n\r\n",
                        json!({"jsonrpc": "2.0", "id": id, "result": {"statusUpdate": {"taskId": "t-flood", "contextId": "c-flood", "status": {"state": "TASK_STATE_WORKING"}, "metadata": {"filler": filler}}}})
                    );
                    if tx.send(Ok(Bytes::from(ev))).await.is_err() {
                        closed.store(true, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                }
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body.boxed())
                .unwrap()
        }
        Reply::Untimed => {
            let request = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
            let task = |id: &str| json!({"id": id, "contextId": "ctx-untimed", "status": {"state": "TASK_STATE_COMPLETED"}});
            let result = match request["params"]["message"]["messageId"].as_str() {
                Some(m) => json!({"task": task(&format!("t-{m}"))}),
                None => task(request["params"]["id"].as_str().unwrap_or("")),
            };
            json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Reply::Named => {
            let request = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
            let said = request["params"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or("");
            if let Some(ids) = said.strip_prefix("msg ") {
                let mut ids = ids.split_whitespace();
                let message = json!({"messageId": "m-named", "role": "ROLE_AGENT",
                    "contextId": ids.next().unwrap_or("c"), "taskId": ids.next().unwrap_or("t"),
                    "parts": [{"text": "named"}]});
                return json(json!({"jsonrpc": "2.0", "id": id, "result": {"message": message}}));
            }
            if request["method"] == "ListTaskPushNotificationConfigs" {
                let hook = |t: &Value| {
                    json!({"id": format!("cfg-{}", t.as_str().unwrap_or("")),
                    "taskId": t, "url": format!("https://hooks.example/{}", t.as_str().unwrap_or(""))})
                };
                let configs = [hook(&request["params"]["taskId"]), hook(&json!("t-a1"))];
                return json(json!({"jsonrpc": "2.0", "id": id, "result": {"configs": configs}}));
            }
            let text = request["params"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or("");
            let mut ids = text.split_whitespace();
            let (task, context) = (ids.next().unwrap_or("t"), ids.next().unwrap_or("c"));
            let state = format!("TASK_STATE_{}", ids.next().unwrap_or("COMPLETED"));
            let mut task = json!({"id": task, "contextId": context,
                "status": {"state": state, "timestamp": "2026-12-05T12:00:00Z"}});
            if context == "-" {
                task.as_object_mut().map(|t| t.remove("contextId"));
            }
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"task": task}});
            if request["method"] == "SendStreamingMessage" {
                return Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(
                        Full::new(Bytes::from(format!("data: {answer}\r\n\r\n")))
                            .map_err(|never| match never {})
                            .boxed_unsync(),
                    )
                    .unwrap();
            }
            json(answer)
        }
        Reply::Relapse(pause) => {
            let request = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
            let m = &request["params"]["message"];
            let mut said = m["parts"][0]["text"].as_str().unwrap_or("").to_string();
            if let Some(rest) = said.strip_prefix("slow") {
                said = rest.trim_start().to_string();
                tokio::time::sleep(pause * 3).await;
            }
            let mid = m["messageId"].as_str().unwrap_or("m");
            let context = m["contextId"]
                .as_str()
                .map_or(format!("c-{mid}"), str::to_string);
            let task = format!("t-{mid}");
            let update = |state: &str| {
                json!({"jsonrpc": "2.0", "id": id, "result": {"statusUpdate": {"taskId": task,
                    "contextId": context, "status": {"state": format!("TASK_STATE_{state}")}}}})
            };
            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "failed as asked"}});
            let streaming = request["method"] == "SendStreamingMessage";
            match said.as_str() {
                "broken" if !streaming => {
                    return Response::builder()
                        .status(500)
                        .body(
                            Full::new(Bytes::new())
                                .map_err(|never| match never {})
                                .boxed_unsync(),
                        )
                        .unwrap()
                }
                "error" if !streaming => return json(error),
                _ => {}
            }
            let task = json!({"jsonrpc": "2.0", "id": id, "result": {"task": {"id": task,
                "contextId": context, "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}});
            if !streaming {
                return json(task);
            }
            if said == "json" {
                let mut working = task;
                working["result"]["task"]["status"]["state"] = json!("TASK_STATE_WORKING");
                return json(working);
            }
            let broken = said == "broken";
            let frames = if said == "error" {
                vec![(
                    Duration::ZERO,
                    format!("event: error\r\ndata: {error}\r\n\r\n"),
                )]
            } else {
                let mut first = task.clone();
                first["result"]["task"]["status"]["state"] = json!("TASK_STATE_WORKING");
                let mut steps = vec![
                    (Duration::ZERO, first),
                    (Duration::ZERO, update("FAILED")),
                    (pause, update("WORKING")),
                    (pause, update("INPUT_REQUIRED")),
                ];
                match said.as_str() {
                    "broken" => steps.truncate(1),
                    "again" => drop(steps.remove(2)),
                    "cut" => steps.truncate(3),
                    _ => {}
                }
                steps
                    .into_iter()
                    .map(|(after, v)| (after, format!("data: {v}\r\n\r\n")))
                    .collect()
            };
            let (tx, body) = a2a_edge::body::ChannelBody::new(1);
            tokio::spawn(async move {
                for (after, frame) in frames {
                    tokio::time::sleep(after).await;
                    if tx.send(Ok(Bytes::from(frame))).await.is_err() {
                        return;
                    }
                }
                if broken {
                    tokio::time::sleep(pause).await;
                    let _ = tx.send(Err("agent died".into())).await;
                }
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body.boxed())
                .unwrap()
        }
        Reply::Task(task) => {
            let task: Value = serde_json::from_str(task).unwrap();
            let config =
                json!({"id": "p1", "taskId": task["id"], "url": "https://hooks.example/a2a"});
            let result = match method.as_ref().and_then(Value::as_str).unwrap_or("") {
                "GetTask" | "CancelTask" => task,
                "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => config,
                "ListTaskPushNotificationConfigs" => json!({"configs": [config]}),
                "DeleteTaskPushNotificationConfig" => json!({}),
                _ => json!({"task": task}),
            };
            json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Reply::Raw(raw) => Response::builder()
            .header("content-type", "application/json")
            .body(
                Full::new(Bytes::from(raw.replace("{id}", &id.to_string())))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap(),
        Reply::RawStream(raw) => Response::builder()
            .header("content-type", "text/event-stream")
            .body(
                Full::new(Bytes::from(raw.replace("{id}", &id.to_string())))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap(),
        Reply::Late(delay) => {
            let event = format!(
                "data: {}\r\n\r\n",
                json!({"jsonrpc": "2.0", "id": id, "result": {"task": {"id": "t-late", "contextId": "c-late", "status": {"state": "TASK_STATE_WORKING"}}}})
            );
            let (tx, body) = a2a_edge::body::ChannelBody::new(1);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = tx.send(Ok(Bytes::from(event))).await;
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body.boxed())
                .unwrap()
        }
        Reply::BreakStream => {
            let first = format!(
                "data: {}\r\n\r\n",
                json!({"jsonrpc": "2.0", "id": id, "result": {"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}}})
            );
            // The first event is flushed, then the connection breaks mid-stream.
            let (tx, body) = a2a_edge::body::ChannelBody::new(4);
            tokio::spawn(async move {
                let _ = tx.send(Ok(Bytes::from(first))).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = tx.send(Err("agent died".into())).await;
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body.boxed())
                .unwrap()
        }
    }
}

/// How a [`RawAgent`] answers one kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawAnswer {
    /// A whole JSON answer, then the connection is closed.
    Whole,
    /// A head promising `Content-Length: 100`, then `{`, then silence (the connection held
    /// open): an agent whose body stalls.
    StalledBody,
    /// Nothing at all (the request read, the connection held open).
    Silent,
    /// For the JSON-RPC endpoint: a SendMessage gets a whole answer, a completed task
    /// `t-raw` in `c-raw`; anything else (a GetTask, an agent path) a [`RawAnswer::StalledBody`].
    TaskThenStalls,
    /// A head saying `Content-Type: text/event-stream` (no length: the body runs until the
    /// connection closes), then `{`, then silence: an agent that answers what asked for one
    /// whole answer with a stream that stalls.
    StalledStream,
    /// [`RawAnswer::TaskThenStalls`] whose stall is a [`RawAnswer::StalledStream`].
    TaskThenStreamStalls,
    /// A stream of one event framed with CR alone (`data: …\r\r`, a Message answering the
    /// request's id), then silence (the connection held open): an agent that ends its lines
    /// with CR and has nothing more to say for now.
    CrStream,
    /// For the JSON-RPC endpoint: a SendMessage as [`RawAnswer::TaskThenStalls`]; anything
    /// else the task `t-raw` whole, with a history, but answered in a way the edge must not
    /// read: this [`BadRead`].
    TaskThenBad(BadRead),
    /// A stream that starts an event (`data: {`) and then sends one more byte of it every
    /// 100 ms, never ending it: an agent that is busy without ever saying anything.
    TrickleStream,
    /// A stream of SSE comments only (`: ping` and a blank line every 100 ms): an agent's
    /// own keep-alives through a long turn.
    PingStream,
}

/// What is wrong with a [`RawAnswer::TaskThenBad`] answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRead {
    /// HTTP 500.
    Status500,
    /// Another JSON-RPC id than the request's.
    WrongId,
    /// `Content-Type: application/jsonp`.
    NotJson,
}

impl RawAnswer {
    /// How a request other than a SendMessage is answered, for the `TaskThen…` kinds.
    fn after_task(self) -> Option<RawAnswer> {
        match self {
            RawAnswer::TaskThenStalls => Some(RawAnswer::StalledBody),
            RawAnswer::TaskThenStreamStalls => Some(RawAnswer::StalledStream),
            RawAnswer::TaskThenBad(_) => Some(self),
            _ => None,
        }
    }
}

/// An HTTP/1.1 agent written by hand on a plain TCP socket, one request per connection, so
/// that it can do what no HTTP library would: stall in the middle of a body. Its card, its
/// `/health` and its JSON-RPC endpoint (any other path) are answered as told.
pub struct RawAgent {
    pub url: String,
    /// `METHOD path` of every request it read.
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl RawAgent {
    pub async fn start(card: RawAnswer, health: RawAnswer, rpc: RawAnswer) -> RawAgent {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let record = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut tcp, _)) = listener.accept().await else {
                    return;
                };
                let record = record.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p + 4;
                        }
                        match tcp.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    // The whole request is read before answering (a close with unread bytes
                    // would reset the connection under the answer).
                    while buf.len() < head_end + length {
                        match tcp.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let mut words = head.split_whitespace();
                    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                    record.lock().unwrap().push(format!("{method} {path}"));
                    let sends = String::from_utf8_lossy(&buf[head_end..]).contains("SendMessage");
                    let id = serde_json::from_slice::<Value>(&buf[head_end..])
                        .ok()
                        .and_then(|v| v.get("id").cloned())
                        .unwrap_or(Value::Null);
                    let (how, body) = match path {
                        "/.well-known/agent-card.json" => (card, recorder_card().to_string()),
                        "/health" => (health, r#"{"status":"ok"}"#.to_string()),
                        _ if rpc.after_task().is_some() && sends => (
                            RawAnswer::Whole,
                            json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t-raw", "contextId": "c-raw", "status": {"state": "TASK_STATE_COMPLETED"}}}}).to_string(),
                        ),
                        _ if matches!(rpc, RawAnswer::TaskThenBad(_)) => (
                            rpc,
                            json!({"jsonrpc": "2.0", "id": if rpc == RawAnswer::TaskThenBad(BadRead::WrongId) { 7 } else { 1 }, "result": {"id": "t-raw", "contextId": "c-raw", "status": {"state": "TASK_STATE_COMPLETED"}, "history": [{"messageId": "h-raw", "role": "ROLE_AGENT", "parts": [{"text": "unread"}]}]}}).to_string(),
                        ),
                        _ if rpc.after_task().is_some() => (rpc.after_task().unwrap(), String::new()),
                        _ if rpc == RawAnswer::CrStream => (
                            rpc,
                            json!({"jsonrpc": "2.0", "id": id, "result": {"message": {"messageId": "m-cr", "role": "ROLE_AGENT", "parts": [{"text": "cr"}]}}}).to_string(),
                        ),
                        _ => (
                            rpc,
                            json!({"jsonrpc": "2.0", "id": 1, "result": {"message": {"messageId": "m-raw", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}}).to_string(),
                        ),
                    };
                    let answer = match how {
                        RawAnswer::Whole => format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        RawAnswer::StalledBody | RawAnswer::TaskThenStalls => "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{".to_string(),
                        RawAnswer::StalledStream | RawAnswer::TaskThenStreamStalls => "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{".to_string(),
                        RawAnswer::CrStream => format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {body}\r\r"),
                        RawAnswer::Silent => String::new(),
                        RawAnswer::TrickleStream => "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {".to_string(),
                        RawAnswer::PingStream => "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n".to_string(),
                        RawAnswer::TaskThenBad(bad) => {
                            let (status, media) = match bad {
                                BadRead::Status500 => ("500 Internal Server Error", "application/json"),
                                BadRead::WrongId => ("200 OK", "application/json"),
                                BadRead::NotJson => ("200 OK", "application/jsonp"),
                            };
                            format!(
                                "HTTP/1.1 {status}\r\nContent-Type: {media}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            )
                        }
                    };
                    let _ = tcp.write_all(answer.as_bytes()).await;
                    let _ = tcp.flush().await;
                    let drip: &[u8] = match how {
                        RawAnswer::TrickleStream => b" ",
                        RawAnswer::PingStream => b": ping\n\n",
                        _ => b"",
                    };
                    while !drip.is_empty() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if tcp.write_all(drip).await.is_err() || tcp.flush().await.is_err() {
                            return;
                        }
                    }
                    if !matches!(how, RawAnswer::Whole | RawAnswer::TaskThenBad(_)) {
                        // Held open, silent, until the peer leaves.
                        let _ = tcp.read(&mut chunk).await;
                    }
                });
            }
        });
        RawAgent { url, seen }
    }

    /// How many requests for `path` it read.
    pub fn count(&self, path: &str) -> usize {
        let suffix = format!(" {path}");
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.ends_with(&suffix))
            .count()
    }
}

/// Waits until `flag` is set (an agent's stream closed, say), failing with `what` past
/// `within`.
pub async fn until_set(flag: &std::sync::atomic::AtomicBool, within: Duration, what: &str) {
    let deadline = std::time::Instant::now() + within;
    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An address nothing listens on.
pub async fn closed_port_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/")
}

/// A real `redis-server` on a free loopback port, in a temp dir, stopped on drop.
pub struct RedisServer {
    pub port: u16,
    child: Option<std::process::Child>,
    dir: TempDir,
    /// `appendonly yes` with `appendfsync always`: what it held survives a restart.
    aof: bool,
}

impl RedisServer {
    /// Starts one. When `redis-server` is missing and the tests run as root (a fresh CI
    /// machine), it is installed once with apt-get; otherwise the test fails (never skips)
    /// saying how to install it.
    pub fn start() -> RedisServer {
        Self::start_with(false)
    }

    /// One that writes every change to its append-only file first (the persistence the
    /// README recommends), so a restart keeps what it held.
    pub fn start_persistent() -> RedisServer {
        Self::start_with(true)
    }

    fn start_with(aof: bool) -> RedisServer {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            let present = std::process::Command::new("redis-server")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            let root = std::process::Command::new("id")
                .arg("-u")
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"0"));
            if !present && root {
                let _ = std::process::Command::new("apt-get")
                    .args(["install", "-y", "redis-server"])
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .status();
            }
        });
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut r = RedisServer {
            port,
            child: None,
            dir: TempDir::new("redis"),
            aof,
        };
        r.restart();
        r
    }

    /// Starts it again on the same port (after [`RedisServer::stop`]).
    pub fn restart(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--protected-mode", "yes"])
            .args(if self.aof {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            })
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--unixsocket")
            .arg(self.socket())
            .args(["--unixsocketperm", "700"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start redis-server ({e}): install it, e.g. `apt-get install redis-server` (.ci/run does)")
            });
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"PING\r\n");
                let mut buf = [0u8; 7];
                if s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n" {
                    return;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one inline command (`INFO commandstats`) and returns the reply's text: a bulk
    /// string's body (`(nil)` for none), an array's elements a line each, else the reply
    /// line.
    pub fn command(&self, line: &str) -> String {
        use std::io::{BufRead, Read, Write};
        fn reply<R: BufRead + Read>(r: &mut R) -> String {
            let mut head = String::new();
            r.read_line(&mut head).unwrap();
            if head.trim_end() == "$-1" {
                return "(nil)".into();
            }
            if let Some(n) = head.strip_prefix('$') {
                let mut body = vec![0; n.trim().parse::<usize>().unwrap() + 2];
                r.read_exact(&mut body).unwrap();
                body.truncate(body.len() - 2);
                return String::from_utf8(body).unwrap();
            }
            if let Some(n) = head.strip_prefix('*') {
                let n: usize = n.trim().parse().unwrap();
                return (0..n).map(|_| reply(r)).collect::<Vec<_>>().join("\n");
            }
            head.trim_end().to_string()
        }
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        reply(&mut std::io::BufReader::new(s))
    }

    /// How many times Redis ran `command` (scripts' calls included) since the last
    /// `CONFIG RESETSTAT`.
    pub fn calls(&self, command: &str) -> u64 {
        let stats = self.command("INFO commandstats");
        let prefix = format!("cmdstat_{command}:calls=");
        stats
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse().unwrap())
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Its Unix socket (in its temp dir).
    pub fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// The same database through the Unix socket.
    pub fn unix_url(&self) -> String {
        format!("unix://{}?db=0", self.socket().display())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One plain-HTTP/1.1 GET to the proxy's admin listener: status and body.
pub async fn admin_get(p: &Proxy, path: &str) -> (u16, String) {
    admin_get_at(p.running.as_ref().unwrap().admin_addr.unwrap(), path).await
}

/// One plain-HTTP/1.1 GET to an admin listener at `addr` (of a proxy run as a binary).
pub async fn admin_get_at(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::builder()
        .uri(path)
        .header("host", "admin")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A second bearer principal, `mallory`, for `extra_policy` (token [`MALLORY`]).
pub const MALLORY_ENTRY: &str = "[[auth.bearer]]\nprincipal = \"mallory\"\ntoken_sha256 = \"6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754\"\n";
/// The `authorization` header of the policy's own principal (`tester`).
pub const ALICE: &str = "Bearer test-token-0123456789";
/// The `authorization` header of [`MALLORY_ENTRY`].
pub const MALLORY: &str = "Bearer other-token";

/// One JSON-RPC request as `token` (an `authorization` header value): the answer.
pub async fn rpc_as(c: &mut Client, token: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let headers = [
        ("authorization", token),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    let (_, _, rb) = c.request("POST", "/", &headers, body.to_string()).await;
    serde_json::from_slice(&rb).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&rb)))
}

/// SendMessage params: a user message of `text` (fresh messageId) with `extra` keys merged in.
pub fn message(text: &str, extra: Value) -> Value {
    let mut m = json!({"messageId": format!("m-{}", a2a_edge::crypto::random_token()), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let (Value::Object(m), Value::Object(e)) = (&mut m, extra) {
        m.extend(e);
    }
    json!({"message": m})
}
