//! The stack's floor, for the load benchmark only (`benches/load/run.sh` with `FLOOR=1`): a
//! TLS reverse proxy built from exactly what the edge is built from, doing none of the edge's
//! work. It answers "how fast can any proxy on this stack be here?", so that the edge's rate
//! can be read against nginx's in two parts: what the stack costs (floor / nginx) and what the
//! edge's checks cost (edge / floor).
//!
//!   cargo build --release --example floor-proxy
//!   floor-proxy --upstream http://127.0.0.1:8080/ --cert server.pem --key server.key \
//!               --ready-file ready.json [--listen 127.0.0.1:0] [--token-env BENCH_TOKEN]
//!
//! The same as the edge: rustls on ring with the edge's own server configuration
//! (`a2a_edge::tls::server_config`: TLS 1.3 and 1.2, ALPN h2 and http/1.1, the server's suite
//! order), hyper 1.x served per ALPN with the edge's HTTP/1.1 and HTTP/2 settings, the edge's
//! worker threads (`a2a_edge::server::workers`: one per core, a single-threaded tokio runtime
//! each, connections dealt out in turn, `A2A_EDGE_WORKERS` too), each thread its own
//! hyper-util client pool to the upstream (keep-alive, `TCP_NODELAY`), mimalloc. What it does
//! per request: compares the bearer token in constant time (401 otherwise), drops the
//! hop-by-hop headers both ways (the edge's `strip_hop_by_hop`), and streams the
//! body through untouched: what nginx's `proxy_pass` does, and nothing of what the edge does
//! (no JSON parse, no validation, no ownership, no cleaned answer, no log line, no metrics).
//! It writes `{"public_url": ...}` to the ready file, as `a2a-edge serve` does.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_edge::server::workers::Workers;
use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use subtle::ConstantTimeEq;
use tokio::runtime::Builder;
use tokio_rustls::TlsAcceptor;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: floor-proxy --upstream URL --cert PEM --key PEM --ready-file FILE \
                     [--listen ADDR] [--token-env NAME]";

type Body = UnsyncBoxBody<Bytes, hyper::Error>;

struct Args {
    upstream: String,
    cert: PathBuf,
    key: PathBuf,
    ready: PathBuf,
    listen: SocketAddr,
    token_env: String,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut upstream, mut cert, mut key, mut ready) = (None, None, None, None);
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut token_env = "BENCH_TOKEN".to_string();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--upstream" => upstream = Some(value()?),
            "--cert" => cert = Some(PathBuf::from(value()?)),
            "--key" => key = Some(PathBuf::from(value()?)),
            "--ready-file" => ready = Some(PathBuf::from(value()?)),
            "--listen" => listen = value()?.parse().map_err(|e| format!("--listen: {e}"))?,
            "--token-env" => token_env = value()?,
            _ => return Err(format!("unknown argument {flag:?}\n{USAGE}")),
        }
    }
    match (upstream, cert, key, ready) {
        (Some(upstream), Some(cert), Some(key), Some(ready)) => Ok(Args {
            upstream,
            cert,
            key,
            ready,
            listen,
            token_env,
        }),
        _ => Err(USAGE.to_string()),
    }
}

/// What every request reads: the upstream's origin and the whole expected `Authorization`.
struct Shared {
    origin: String,
    authorization: Vec<u8>,
}

thread_local! {
    /// Each worker thread's own pool of upstream connections (as the edge's, per thread).
    static CLIENT: Client<HttpConnector, Incoming> = {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(1024)
            .build(connector)
    };
}

/// Hop-by-hop headers (the edge's own removal: RFC 9110 7.6.1 and what `Connection` names)
/// and Host: never forwarded, either way.
fn strip(headers: &mut HeaderMap) {
    a2a_edge::upstream::headers::strip_hop_by_hop(headers);
    headers.remove(header::HOST);
}

fn answer(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::new())
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r
}

async fn proxy(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let authorized = req
        .headers()
        .get(header::AUTHORIZATION)
        .is_some_and(|v| bool::from(v.as_bytes().ct_eq(&shared.authorization)));
    if !authorized {
        // The refused request's body (bounded) is read first, so that the 401 follows the
        // whole request: over HTTP/2 an answer before the client's end of stream resets
        // the stream, which a client may see before the answer (as the edge does it too).
        let _ = Limited::new(req.into_body(), 1 << 20).collect().await;
        return Ok(answer(StatusCode::UNAUTHORIZED));
    }
    let (mut parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = format!("{}{path}", shared.origin).parse::<Uri>() else {
        return Ok(answer(StatusCode::BAD_REQUEST));
    };
    parts.uri = uri;
    parts.version = Version::HTTP_11;
    strip(&mut parts.headers);
    let sent = CLIENT.with(|c| c.request(Request::from_parts(parts, body)));
    match sent.await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip(&mut parts.headers);
            Ok(Response::from_parts(parts, body.boxed_unsync()))
        }
        Err(_) => Ok(answer(StatusCode::BAD_GATEWAY)),
    }
}

/// The edge's connection settings (src/server/mod.rs `Builders`), with its defaults.
fn builders() -> (
    hyper::server::conn::http1::Builder,
    hyper::server::conn::http2::Builder<TokioExecutor>,
) {
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .max_buf_size(64 * 1024)
        .max_headers(100)
        .keep_alive(true);
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2
        .timer(TokioTimer::new())
        .max_header_list_size(64 * 1024)
        .max_concurrent_streams(128)
        .max_pending_accept_reset_streams(Some(64))
        .max_local_error_reset_streams(Some(256))
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    (http1, http2)
}

async fn serve(tcp: std::net::TcpStream, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let Ok(tcp) = tokio::net::TcpStream::from_std(tcp) else {
        return;
    };
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(tls);
    let svc = service_fn(move |req| proxy(req, shared.clone()));
    let (http1, http2) = builders();
    let _ = if h2 {
        http2.serve_connection(io, svc).await
    } else {
        http1.serve_connection(io, svc).await
    };
}

fn run() -> Result<(), String> {
    let a = args()?;
    let token = std::env::var(&a.token_env).map_err(|_| format!("{} is not set", a.token_env))?;
    let origin = a.upstream.trim_end_matches('/').to_string();
    origin
        .parse::<Uri>()
        .map_err(|e| format!("--upstream {origin}: {e}"))?;
    let shared = Arc::new(Shared {
        origin,
        authorization: format!("Bearer {token}").into_bytes(),
    });
    let tls = a2a_edge::tls::server_config(&a.cert, &a.key).map_err(|e| e.to_string())?;
    let acceptor = TlsAcceptor::from(tls);

    // The edge's own worker threads (one per core, connections dealt out in turn).
    let workers = Workers::start().map_err(|e| format!("worker threads: {e}"))?;

    let rt = Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .map_err(|e| format!("bind {}: {e}", a.listen))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        let url = format!("https://{local}/");
        std::fs::write(&a.ready, format!("{{\"public_url\": \"{url}\"}}\n"))
            .map_err(|e| format!("{}: {e}", a.ready.display()))?;
        eprintln!(
            "floor-proxy listening on {url}, forwarding to {}",
            shared.origin
        );
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let Ok(tcp) = tcp.into_std() else { continue };
            workers.spawn(serve(tcp, acceptor.clone(), shared.clone()));
        }
    })
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor-proxy: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
