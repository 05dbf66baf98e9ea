//! The fetcher against throwaway local servers: plain HTTP on 127.0.0.1 and HTTPS with a
//! private CA (the dev certificates).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::super::tests::{cli, tmp_dir};
use super::*;
use crate::card::canonical::tests::tiny_card;
use crate::card::jws::{sign_card, SignOptions};
use crate::card::keys::tests::generated_pem;
use crate::card::keys::{SigningAlg, SigningKey};

type Route = (&'static str, u16, Vec<u8>);

/// A throwaway HTTP/1.1 server on 127.0.0.1 (TLS if `tls`), answering each path with a fixed
/// response; the path `/slow` never answers.
fn serve(routes: Vec<Route>, tls: Option<Arc<rustls::ServerConfig>>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = Arc::new(routes);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let routes = routes.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        Some(cfg) => {
                            if let Ok(s) = tokio_rustls::TlsAcceptor::from(cfg).accept(tcp).await {
                                answer(s, &routes).await;
                            }
                        }
                        None => answer(tcp, &routes).await,
                    }
                });
            }
        });
    });
    addr
}

async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, routes: &[Route]) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
    if path == "/slow" {
        tokio::time::sleep(Duration::from_secs(30)).await;
        return;
    }
    let (status, body) = routes
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, s, b)| (*s, b.clone()))
        .unwrap_or((404, b"{}".to_vec()));
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(&body).await;
    let _ = s.shutdown().await;
}

fn signed_es256() -> (Value, Value) {
    let key =
        SigningKey::from_private_pem("es", SigningAlg::ES256, &generated_pem(SigningAlg::ES256))
            .unwrap();
    let mut card = tiny_card();
    sign_card(&mut card, &key, &SignOptions::default()).unwrap();
    (card, json!({"keys": [key.public_jwk().unwrap()]}))
}

#[test]
fn verify_over_local_http() {
    let (card, jwks) = signed_es256();
    let addr = serve(
        vec![
            (
                "/.well-known/agent-card.json",
                200,
                card.to_string().into_bytes(),
            ),
            ("/jwks.json", 200, jwks.to_string().into_bytes()),
            ("/moved", 302, b"{}".to_vec()),
            ("/big", 200, vec![b' '; MAX_BODY + 10]),
        ],
        None,
    );
    let url = |p: &str| format!("http://127.0.0.1:{}{p}", addr.port());
    let card_url = url("/.well-known/agent-card.json");
    assert_eq!(
        cli(
            &[
                "verify",
                "--url",
                &card_url,
                "--jwks-url",
                &url("/jwks.json")
            ],
            &[]
        ),
        (Ok(0), "valid\n".into())
    );
    let localhost = format!(
        "http://localhost:{}/.well-known/agent-card.json",
        addr.port()
    );
    assert_eq!(
        cli(&["verify", "--url", &localhost], &[]),
        (Ok(1), "missing-key\n".into())
    );
    for bad in ["/missing", "/moved", "/big"] {
        let (code, out) = cli(&["verify", "--url", &url(bad)], &[]);
        assert!(code.is_err(), "{bad}: {out}");
    }
    let err = fetch_json(&url("/slow"), None, Duration::from_millis(300)).unwrap_err();
    assert!(err.contains("timed out"), "{err}");
    for refused in [
        "http://example.com/card.json",
        "http://10.0.0.1/card.json",
        "ftp://127.0.0.1/card.json",
        "https://user:pw@127.0.0.1/card.json",
        "not a url",
    ] {
        assert!(
            fetch_json(refused, None, Duration::from_millis(300)).is_err(),
            "{refused}"
        );
    }
}

#[test]
fn verify_over_https_with_a_private_ca() {
    let scratch = tmp_dir();
    let dir = scratch.path.as_path();
    let certs = crate::tls::dev::ensure(dir).unwrap();
    let server = crate::tls::server_config(&certs.server_cert, &certs.server_key).unwrap();
    let (card, jwks) = signed_es256();
    let addr = serve(
        vec![
            ("/card", 200, card.to_string().into_bytes()),
            ("/jwks", 200, jwks.to_string().into_bytes()),
        ],
        Some(server),
    );
    let ca = certs.ca_cert.to_string_lossy().into_owned();
    let base = format!("https://localhost:{}", addr.port());
    assert_eq!(
        cli(
            &[
                "verify",
                "--url",
                &format!("{base}/card"),
                "--jwks-url",
                &format!("{base}/jwks"),
                "--ca-file",
                &ca
            ],
            &[]
        ),
        (Ok(0), "valid\n".into())
    );
    let by_ip = format!("https://127.0.0.1:{}/card", addr.port());
    assert_eq!(
        cli(&["verify", "--url", &by_ip, "--ca-file", &ca], &[]),
        (Ok(1), "missing-key\n".into())
    );
    // The dev CA is not a system root.
    let (code, _) = cli(&["verify", "--url", &format!("{base}/card")], &[]);
    assert!(code.is_err());
}
