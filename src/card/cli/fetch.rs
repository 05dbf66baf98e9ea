//! A small one-shot HTTPS GET for cards and JWKS documents: hyper's HTTP/1.1 client over
//! tokio-rustls, roots from `--ca-file` or the system store, a 5 s deadline for the whole
//! exchange, 200 only (no redirects), at most 1 MiB of body.
//!
//! Plain `http://` is accepted only to 127.0.0.1, localhost and [::1], so tests can run a
//! local server without certificates; nothing crosses a network unencrypted.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{ACCEPT, CONTENT_LENGTH, HOST, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::ServerName;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::{Host, Url};

/// The deadline for connect, TLS, request and body together.
pub(super) const TIMEOUT: Duration = Duration::from_secs(5);

/// Largest body accepted.
pub(super) const MAX_BODY: usize = 1024 * 1024;

/// GETs `url` and parses the body as JSON. Runs on its own thread and runtime, so it works
/// whether or not the caller is inside a tokio runtime.
pub(super) fn fetch_json(
    url: &str,
    ca_file: Option<&Path>,
    timeout: Duration,
) -> Result<Value, String> {
    let target = Url::parse(url).map_err(|e| format!("{url}: not a URL: {e}"))?;
    let tls = match target.scheme() {
        "https" => Some(tls_config(ca_file)?),
        "http" if is_loopback(&target) => None,
        "http" => {
            return Err(format!(
                "{url}: plain http:// is only allowed to 127.0.0.1, localhost and [::1]"
            ))
        }
        other => return Err(format!("{url}: unsupported scheme {other}")),
    };
    if !target.username().is_empty() || target.password().is_some() {
        return Err(format!("{url}: credentials in URLs are not accepted"));
    }
    let shown = url.to_string();
    let worker = std::thread::spawn(move || -> Result<Bytes, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        runtime.block_on(async {
            tokio::time::timeout(timeout, get(&target, tls))
                .await
                .map_err(|_| format!("timed out after {} ms", timeout.as_millis()))?
        })
    });
    let body = worker
        .join()
        .map_err(|_| "the fetch thread failed".to_string())?
        .map_err(|e| format!("{shown}: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("{shown}: not JSON: {e}"))
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip == std::net::Ipv4Addr::LOCALHOST,
        Some(Host::Ipv6(ip)) => ip == std::net::Ipv6Addr::LOCALHOST,
        None => false,
    }
}

fn tls_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    const ALPN: &[&[u8]] = &[b"http/1.1"];
    if let Some(ca) = ca_file {
        return crate::tls::client_config(ca, ALPN).map_err(|e| e.0);
    }
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        return Err("no system root certificates found; give --ca-file".into());
    }
    let mut cfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    cfg.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

async fn get(url: &Url, tls: Option<Arc<ClientConfig>>) -> Result<Bytes, String> {
    let port = url.port_or_known_default().ok_or("no port")?;
    let tcp = match url.host() {
        Some(Host::Domain(d)) => TcpStream::connect((d, port)).await,
        Some(Host::Ipv4(ip)) => TcpStream::connect((ip, port)).await,
        Some(Host::Ipv6(ip)) => TcpStream::connect((ip, port)).await,
        None => return Err("no host".into()),
    }
    .map_err(|e| format!("cannot connect: {e}"))?;
    let host = url.host_str().ok_or("no host")?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let path = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let request = Request::get(if path.is_empty() { "/" } else { path })
        .header(HOST, authority)
        .header(ACCEPT, "application/json")
        .header(USER_AGENT, concat!("a2a-edge/", env!("CARGO_PKG_VERSION")))
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("bad request: {e}"))?;
    match tls {
        None => exchange(TokioIo::new(tcp), request).await,
        Some(cfg) => {
            let name = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let name = ServerName::try_from(name).map_err(|e| format!("bad server name: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            exchange(TokioIo::new(stream), request).await
        }
    }
}

async fn exchange<T>(io: TokioIo<T>, request: Request<Empty<Bytes>>) -> Result<Bytes, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    let driver = tokio::spawn(conn);
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        if response.status() != StatusCode::OK {
            return Err(format!(
                "HTTP status {} (only 200 is accepted)",
                response.status()
            ));
        }
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            return Err("the body is larger than 1 MiB".to_string());
        }
        Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| format!("reading the body: {e} (at most 1 MiB)"))
    }
    .await;
    driver.abort();
    result
}

#[cfg(test)]
mod tests;
