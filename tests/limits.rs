//! The edge under abuse, over real sockets: rate limits per principal and per address,
//! slowloris and slow POST, connection floods, denied networks, forged forwarding headers,
//! request-smuggling shapes and oversize header sections.

mod common;

use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#;

fn h(token: &str) -> Vec<(&str, &str)> {
    vec![
        ("authorization", token),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ]
}

/// A second principal with its own token.
const OTHER: &str = "[[auth.bearer]]\nprincipal = \"other\"\ntoken_sha256 = \"6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754\"\n";
const OTHER_TOKEN: &str = "Bearer other-token";

async fn proxy(limits: &str, extra: &str) -> Proxy {
    assert_eq!(
        hex(&a2a_edge::policy::sha256(b"other-token")),
        "6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754"
    );
    Proxy::start(ProxyOpts {
        extra_policy: format!("{OTHER}[limits]\n{limits}\n{extra}"),
        ..Default::default()
    })
    .await
}

async fn read_all(s: &mut (impl AsyncReadExt + Unpin), limit: Duration) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(limit, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_burst_over_the_rate_gets_429_while_another_principal_is_unaffected() {
    // (One request per 100 s: no refill within the test, however slow the machine.)
    let p = proxy("requests_per_second = 0.01\nburst = 5\nclient_ip_requests_per_second = 1000\nclient_ip_burst = 1000", "").await;
    let mut c = p.client(Proto::H2).await;
    let token = "Bearer test-token-0123456789";
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let (status, headers, body) = c.request("POST", "/", &h(token), BODY).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(
                headers["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
                    >= 1
            );
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["reason"], "rate.principal");
        }
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(statuses[7], StatusCode::TOO_MANY_REQUESTS);
    for _ in 0..5 {
        let (status, _, _) = c.request("POST", "/", &h(OTHER_TOKEN), BODY).await;
        assert_eq!(status, StatusCode::OK);
    }
}

#[tokio::test]
async fn per_method_rates_and_forged_forwarding_headers() {
    // (One request per 100 s: no refill within the test, however slow the machine.)
    let p = proxy(
        "client_ip_requests_per_second = 0.01\nclient_ip_burst = 4\n[limits.methods]\nGetTask = { requests_per_second = 0.01, burst = 1 }",
        "",
    )
    .await;
    let mut c = p.client(Proto::H1).await;
    let token = "Bearer test-token-0123456789";
    let get = r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#;
    let (status, _, _) = c.request("POST", "/", &h(token), get).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = c.request("POST", "/", &h(token), get).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["reason"],
        "rate.method"
    );
    // The peer is not a trusted proxy: a different X-Forwarded-For on each request does not
    // make it a different client.
    let mut limited = false;
    for i in 0..6 {
        let xff = format!("203.0.113.{i}");
        let mut headers = h(token);
        headers.push(("x-forwarded-for", xff.as_str()));
        headers.push(("forwarded", "for=198.51.100.7"));
        let (status, _, body) = c.request("POST", "/", &headers, BODY).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(
                serde_json::from_slice::<Value>(&body).unwrap()["reason"],
                "rate.client_ip"
            );
            limited = true;
        }
    }
    assert!(
        limited,
        "forged X-Forwarded-For escaped the per-address limit"
    );
}

/// Every request spends its client address's rate, whatever its route: the public ones
/// (health, card, JWKS), a path that does not exist (404) and a method a route does not take
/// (405) alike. Past the burst, each is 429 `rate.client_ip` with `Retry-After`.
#[tokio::test]
async fn every_route_spends_the_client_address_rate() {
    // (method, path, the answer within the burst)
    let rows = [
        ("GET", "/health", StatusCode::OK),
        ("GET", "/.well-known/agent-card.json", StatusCode::OK),
        ("GET", "/nope", StatusCode::NOT_FOUND),
        ("DELETE", "/health", StatusCode::METHOD_NOT_ALLOWED),
        ("GET", "/", StatusCode::METHOD_NOT_ALLOWED),
    ];
    for (method, path, within) in rows {
        let p = proxy(
            "client_ip_requests_per_second = 0.01\nclient_ip_burst = 2",
            "",
        )
        .await;
        let mut c = p.client(Proto::H2).await;
        for _ in 0..2 {
            let (status, _, _) = c.request(method, path, &[], "").await;
            assert_eq!(status, within, "{method} {path}");
        }
        let (status, headers, body) = c.request(method, path, &[], "").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{method} {path}");
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["reason"],
            "rate.client_ip",
            "{method} {path}"
        );
        assert!(headers.contains_key("retry-after"), "{method} {path}");
    }
}

#[tokio::test]
async fn slowloris_and_slow_post_are_cut_while_an_honest_client_is_served() {
    let p = proxy("header_read_timeout_ms = 800\nmin_body_bytes_per_second = 1000\nbody_read_timeout_ms = 20000", "").await;
    // Slowloris: a request head that never ends.
    let mut slow_head = p.raw_tls().await;
    slow_head
        .write_all(b"POST / HTTP/1.1\r\nhost: localhost\r\nx-a: ")
        .await
        .unwrap();
    // Slow POST: headers complete, body trickling far below the minimum rate.
    let mut slow_body = p.raw_tls().await;
    slow_body
        .write_all(b"POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer test-token-0123456789\r\ncontent-type: application/json\r\na2a-version: 1.0\r\ncontent-length: 100000\r\n\r\n{")
        .await
        .unwrap();
    let started = Instant::now();
    let mut honest = p.client(Proto::H1).await;
    let mut served = 0;
    let mut head_closed = false;
    let mut body_answer = String::new();
    while started.elapsed() < Duration::from_secs(15) && (!head_closed || body_answer.is_empty()) {
        let (status, _, _) = honest
            .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
            .await;
        assert_eq!(status, StatusCode::OK);
        served += 1;
        if !head_closed {
            let mut buf = [0u8; 1];
            head_closed = matches!(
                tokio::time::timeout(Duration::from_millis(50), slow_head.read(&mut buf)).await,
                Ok(Ok(0)) | Ok(Err(_))
            );
        }
        if body_answer.is_empty() {
            let _ = slow_body.write_all(b" ").await;
            let mut buf = [0u8; 512];
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(50), slow_body.read(&mut buf)).await
            {
                body_answer = String::from_utf8_lossy(&buf[..n]).into_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(head_closed, "the slowloris connection was not closed");
    assert!(
        body_answer.starts_with("HTTP/1.1 408"),
        "slow POST: {body_answer:?}"
    );
    assert!(body_answer.contains("body.too_slow"));
    assert!(
        served > 5,
        "the honest client was served throughout ({served})"
    );
}

#[tokio::test]
async fn a_connection_flood_beyond_the_maximum_is_refused_while_an_honest_client_is_served() {
    let p = proxy("max_connections = 8", "").await;
    let mut honest = p.client(Proto::H1).await;
    let mut flood = Vec::new();
    let mut refused = 0;
    for _ in 0..20 {
        let tcp = tokio::net::TcpStream::connect(p.addr).await.unwrap();
        let cfg = a2a_edge::tls::client_config(&p.ca, &[b"http/1.1"]).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        match tokio::time::timeout(
            Duration::from_secs(5),
            tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
        )
        .await
        {
            Ok(Ok(s)) => flood.push(s),
            _ => refused += 1,
        }
    }
    assert!(
        refused >= 12,
        "only {refused} of 20 flood connections were refused"
    );
    assert!(flood.len() <= 7);
    let (status, _, _) = honest
        .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
        .await;
    assert_eq!(status, StatusCode::OK);
    drop(flood);
    // Slots free again once the flood is gone (as soon as the edge has seen its connections
    // close, which a loaded machine may take a while to do).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut late = loop {
        match Client::try_connect(p.addr, &p.ca, Proto::H2, None).await {
            Ok(c) => break c,
            Err(e) => assert!(
                Instant::now() < deadline,
                "no slot was free 5 s after the flood left: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (status, _, _) = late.request("GET", "/health", &[], "").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn denied_networks_are_dropped_before_tls() {
    let p = proxy("", "[network]\ndeny = [\"127.0.0.0/8\"]").await;
    let cfg = a2a_edge::tls::client_config(&p.ca, &[b"http/1.1"]).unwrap();
    let tcp = tokio::net::TcpStream::connect(p.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    assert!(tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .is_err());
    let q = proxy("", "[network]\nallow = [\"10.0.0.0/8\"]").await;
    let cfg = a2a_edge::tls::client_config(&q.ca, &[b"http/1.1"]).unwrap();
    let tcp = tokio::net::TcpStream::connect(q.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    assert!(tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .is_err());
    let open = proxy(
        "",
        "[network]\nallow = [\"127.0.0.1/32\"]\ndeny = [\"10.0.0.0/8\"]",
    )
    .await;
    let mut c = open.client(Proto::H1).await;
    assert_eq!(c.request("GET", "/health", &[], "").await.0, StatusCode::OK);
}

/// A reload that denies a network closes the connections open from it (what runs
/// finishes; the accept loop only sees new ones); a reload that leaves them permitted
/// leaves them open, over both protocols.
#[tokio::test]
async fn a_reload_that_denies_a_network_closes_its_open_connections() {
    let opts = |extra: &str| ProxyOpts {
        extra_policy: format!("{OTHER}[limits]\n{extra}"),
        ..Default::default()
    };
    let p = Proxy::start(opts("")).await;
    let mut open = Vec::new();
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        assert_eq!(c.request("GET", "/health", &[], "").await.0, StatusCode::OK);
        open.push((proto, c));
    }
    let permitted = policy_text(p.dir.path(), &opts("[network]\ndeny = [\"10.0.0.0/8\"]"));
    p.reload(&permitted).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (proto, c) in &mut open {
        assert!(!c.is_closed(), "{proto:?}");
        assert_eq!(
            c.request("GET", "/health", &[], "").await.0,
            StatusCode::OK,
            "{proto:?}"
        );
    }
    // A connection accepted before the reload whose handshake ends after it: closed too
    // (a request the peer sends before it sees the goodbye gets 421, retry elsewhere).
    let ok = |r: Result<http::Response<hyper::body::Incoming>, hyper::Error>| match r {
        Ok(r) if r.status() == StatusCode::MISDIRECTED_REQUEST => false,
        Ok(r) => panic!("served: {}", r.status()),
        Err(_) => false,
    };
    let mut handshaking = Vec::new();
    for proto in PROTOS {
        let tcp = tokio::net::TcpStream::connect(p.addr).await.unwrap();
        handshaking.push((proto, tcp));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let denied = policy_text(p.dir.path(), &opts("[network]\ndeny = [\"127.0.0.0/8\"]"));
    p.reload(&denied).await;
    for (proto, tcp) in handshaking {
        let alpn: &[u8] = match proto {
            Proto::H1 => b"http/1.1",
            Proto::H2 => b"h2",
        };
        let cfg = a2a_edge::tls::client_config(&p.ca, &[alpn]).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let served = match tokio_rustls::TlsConnector::from(cfg)
            .connect(name, tcp)
            .await
        {
            Err(_) => false,
            Ok(tls) => {
                let io = hyper_util::rt::TokioIo::new(tls);
                let req = || {
                    http::Request::get("https://localhost/health")
                        .header("host", "localhost")
                        .body(http_body_util::Empty::<bytes::Bytes>::new())
                        .unwrap()
                };
                match proto {
                    Proto::H1 => match hyper::client::conn::http1::handshake(io).await {
                        Err(_) => false,
                        Ok((mut send, conn)) => {
                            tokio::spawn(conn);
                            ok(send.send_request(req()).await)
                        }
                    },
                    Proto::H2 => match hyper::client::conn::http2::handshake(
                        hyper_util::rt::TokioExecutor::new(),
                        io,
                    )
                    .await
                    {
                        Err(_) => false,
                        Ok((mut send, conn)) => {
                            tokio::spawn(conn);
                            ok(send.send_request(req()).await)
                        }
                    },
                }
            }
        };
        assert!(
            !served,
            "{proto:?}: served under the old policy's admission"
        );
    }
    for (proto, mut c) in open {
        let started = std::time::Instant::now();
        while !c.is_closed() && started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(c.is_closed(), "{proto:?}: a denied connection stayed open");
        let sent = c.try_request("GET", "/health", &[], "").await;
        assert!(
            sent.is_err(),
            "{proto:?}: served after the reload: {sent:?}"
        );
    }
}

#[tokio::test]
async fn request_smuggling_shapes_are_rejected() {
    let p = proxy("", "").await;
    let head = "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer test-token-0123456789\r\ncontent-type: application/json\r\na2a-version: 1.0\r\n";
    let cases: Vec<(&str, String)> = vec![
        (
            "CL and TE",
            format!("{head}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
        ),
        (
            "two CLs",
            format!("{head}content-length: 5\r\ncontent-length: 6\r\n\r\n{BODY}"),
        ),
        (
            "CL list",
            format!("{head}content-length: 5, 6\r\n\r\n{BODY}"),
        ),
        (
            "obs-fold",
            format!(
                "{head}x-folded: a\r\n b\r\ncontent-length: {}\r\n\r\n{BODY}",
                BODY.len()
            ),
        ),
        (
            "TE not chunked",
            format!("{head}transfer-encoding: gzip\r\n\r\n{BODY}"),
        ),
        (
            "bad chunk size",
            format!("{head}transfer-encoding: chunked\r\n\r\nzz\r\n{BODY}\r\n0\r\n\r\n"),
        ),
        (
            "space before colon",
            format!("{head}content-length : 5\r\n\r\n{BODY}"),
        ),
        (
            "NUL in a header",
            format!(
                "{head}x-a: a\0b\r\ncontent-length: {}\r\n\r\n{BODY}",
                BODY.len()
            ),
        ),
    ];
    for (name, raw) in &cases {
        let mut s = p.raw_tls().await;
        s.write_all(raw.as_bytes()).await.unwrap();
        let answer = read_all(&mut s, Duration::from_secs(5)).await;
        if *name == "CL and TE" {
            // Refused outright: a body must have a declared length (and hyper closes the
            // connection after this shape anyway).
            assert!(answer.starts_with("HTTP/1.1 411"), "{name}: {answer:?}");
            assert!(answer.contains("connection: close"), "{name}: {answer:?}");
            continue;
        }
        let status = answer.split_whitespace().nth(1).unwrap_or("closed");
        assert!(
            status == "closed" || status.starts_with('4'),
            "{name}: {answer:?}"
        );
        assert!(
            !answer.contains("\"result\""),
            "{name} was served: {answer}"
        );
    }
    // A chunked body alone is refused by default too (411), and accepted where the policy
    // allows it.
    let chunked = format!(
        "{head}transfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{BODY}\r\n0\r\n\r\n",
        BODY.len()
    );
    let mut s = p.raw_tls().await;
    s.write_all(chunked.as_bytes()).await.unwrap();
    let answer = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 411"), "{answer}");
    let lenient = proxy("allow_chunked_requests = true", "").await;
    let mut s = lenient.raw_tls().await;
    s.write_all(chunked.as_bytes()).await.unwrap();
    let answer = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A well-formed request on the same kind of connection works.
    let mut s = p.raw_tls().await;
    s.write_all(
        format!(
            "{head}content-length: {}\r\nconnection: close\r\n\r\n{BODY}",
            BODY.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answer = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn oversize_or_too_many_headers_are_refused() {
    let p = proxy("max_headers = 20", "").await;
    let mut many = String::from("GET /health HTTP/1.1\r\nhost: localhost\r\n");
    for i in 0..40 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let mut s = p.raw_tls().await;
    s.write_all(many.as_bytes()).await.unwrap();
    let answer = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(
        answer.is_empty()
            || answer.starts_with("HTTP/1.1 431")
            || answer.starts_with("HTTP/1.1 400"),
        "{answer:?}"
    );
    // HTTP/2: a header list over the limit (the end of any CONTINUATION flood).
    let big = "v".repeat(70 * 1024);
    let mut c = p.client(Proto::H2).await;
    let refused = c
        .try_request("GET", "/health", &[("x-big", big.as_str())], "")
        .await;
    match refused {
        Err(_) => {}
        Ok((status, _, _)) => assert!(status.is_client_error(), "{status}"),
    }
    let mut c = p.client(Proto::H2).await;
    assert_eq!(c.request("GET", "/health", &[], "").await.0, StatusCode::OK);
}

#[tokio::test]
async fn an_http2_rapid_reset_burst_does_not_take_the_edge_down() {
    let p = proxy("client_ip_requests_per_second = 100000\nclient_ip_burst = 100000\nrequests_per_second = 100000\nburst = 100000", "").await;
    // One connection opens streams and cancels each at once (RST_STREAM), hundreds of times.
    let mut attacker = p.client(Proto::H2).await;
    let mut attacker_cut = false;
    for _ in 0..200 {
        let req = http::Request::builder()
            .method("POST")
            .uri("https://localhost/")
            .header("authorization", "Bearer test-token-0123456789")
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(http_body_util::Full::new(bytes::Bytes::from(BODY)))
            .unwrap();
        let fut = attacker.send(req);
        // Dropping the response future resets the stream.
        if tokio::time::timeout(Duration::from_micros(1), fut)
            .await
            .is_ok()
        {
            continue;
        }
        if attacker
            .try_request("GET", "/health", &[], "")
            .await
            .is_err()
        {
            attacker_cut = true;
            break;
        }
    }
    // Whatever happened to the attacker's connection, an honest client is served.
    let mut honest = p.client(Proto::H2).await;
    for _ in 0..5 {
        let (status, _, _) = honest
            .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    // Record (not assert) whether the limit closed the attacker's connection: hyper only counts
    // resets of streams not yet accepted, which a fast edge rarely leaves pending.
    eprintln!("rapid reset: attacker connection closed by the edge: {attacker_cut}");
}

/// A TLS connection (HTTP/1.1 by ALPN) to the edge from the loopback address `local`
/// (127.0.0.2 is another client), or None when the edge closed it before the handshake ended.
async fn connect_from(
    p: &Proxy,
    local: &str,
) -> Option<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{local}:0").parse().unwrap()).unwrap();
    let tcp = sock.connect(p.addr).await.unwrap();
    let cfg = a2a_edge::tls::client_config(&p.ca, &[b"http/1.1"]).unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
    )
    .await
    .ok()
    .and_then(Result::ok)
}

/// One HTTP/1.1 request on a TLS connection of [`connect_from`]; its status line.
async fn status_line(
    s: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    request: &str,
) -> String {
    s.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(2).any(|w| w == b"\r\n") {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn one_client_cannot_take_every_connection_slot() {
    let p = proxy("max_connections = 100\nmax_connections_per_client = 4", "").await;
    // A slow client (127.0.0.1) holds as many connections as it can.
    let mut held = Vec::new();
    for _ in 0..10 {
        if let Some(s) = connect_from(&p, "127.0.0.1").await {
            held.push(s);
        }
    }
    assert_eq!(held.len(), 4, "per-client cap");
    // Another client (127.0.0.2) still gets in and is served.
    let mut s = connect_from(&p, "127.0.0.2")
        .await
        .expect("another client was refused");
    s.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A client may open `client_ip_connections_per_second` new connections a second after a
/// burst of `client_ip_connection_burst`: past it, each is closed at accept, before any TLS
/// work (`limits.connection_rate`), and none of its requests can reach the agent. The
/// connections it holds keep working; another address is not affected.
#[tokio::test]
async fn a_client_opening_connections_too_fast_is_closed_before_tls() {
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
            extra_policy:
                "[limits]\nclient_ip_connections_per_second = 0.1\nclient_ip_connection_burst = 3\n"
                    .into(),
            ..Default::default()
        },
    )
    .await;
    let send = "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer test-token-0123456789\r\ncontent-type: application/json\r\na2a-version: 1.0\r\ncontent-length: {}\r\n\r\n";
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-rate-1","role":"ROLE_USER","parts":[{"text":"hello from a fast client"}]}}}"#;
    let request = format!("{}{body}", send.replace("{}", &body.len().to_string()));
    let mut held = Vec::new();
    for i in 0..6 {
        match connect_from(&p, "127.0.0.1").await {
            Some(s) => {
                assert!(i < 3, "connection {i} past the burst was admitted");
                held.push(s);
            }
            None => assert!(i >= 3, "connection {i} within the burst was refused"),
        }
    }
    assert_eq!(held.len(), 3);
    // The held connections are served: the rate is of new connections.
    for s in &mut held {
        let line = status_line(s, &request).await;
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    }
    assert_eq!(
        up.rpc_requests().len(),
        3,
        "only the admitted connections' requests reached the agent"
    );
    // Another address has its own budget.
    let mut other = connect_from(&p, "127.0.0.2")
        .await
        .expect("another client was refused");
    let line = status_line(&mut other, &request).await;
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let (_, metrics) = admin_get(&p, "/metrics").await;
    let refused = "a2a_edge_connections_total{outcome=\"limits.connection_rate\"} 3";
    assert!(metrics.contains(refused), "{metrics}");
    assert!(
        !metrics.contains("outcome=\"tls.handshake_failed\""),
        "no handshake was begun for them: {metrics}"
    );
    // A trusted proxy carries many clients: it is not held to one client's connection rate.
    let p = Proxy::start(ProxyOpts {
        extra_policy: "[limits]\nclient_ip_connections_per_second = 0.1\nclient_ip_connection_burst = 3\n[network]\ntrusted_proxies = [\"127.0.0.1/32\"]\n".into(),
        ..Default::default()
    })
    .await;
    for i in 0..6 {
        let mut s = connect_from(&p, "127.0.0.1")
            .await
            .unwrap_or_else(|| panic!("connection {i} from the proxy was refused"));
        let line = status_line(&mut s, "GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n").await;
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    }
    // Another address is still held to it.
    for i in 0..4 {
        let admitted = connect_from(&p, "127.0.0.2").await.is_some();
        assert_eq!(admitted, i < 3, "connection {i} from 127.0.0.2");
    }
}

#[tokio::test]
async fn idle_connections_are_closed_but_busy_ones_and_running_streams_are_not() {
    let p = proxy("idle_timeout_ms = 1000\n", "").await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        // A stream that outlasts the idle timeout (5 chunks 300 ms apart) runs to its end: a
        // stream is activity.
        let resp = c
            .rpc_stream(
                "SendStreamingMessage",
                serde_json::json!({"message": {"messageId": "m-idle", "role": "ROLE_USER",
                    "parts": [{"text": "[[slow:300]] [[chunks:5]] long"}]}}),
            )
            .await;
        let events = EventReader::new(resp).rest().await;
        assert!(events.len() >= 5, "{proto:?}: {events:?}");
        assert!(events.iter().all(|(name, _)| name.is_none()), "{events:?}");
        // Requests closer together than the timeout keep the connection open (five, 300 ms
        // apart, outlast it).
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let (status, _, _) = c
                .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
                .await;
            assert_eq!(status, StatusCode::OK, "{proto:?}");
        }
        // Then silence: the edge closes the connection (HTTP/2: GOAWAY), though HTTP/2
        // keep-alive pings alone would hold it open.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !c.is_closed() {
            assert!(
                Instant::now() < deadline,
                "{proto:?}: idle connection still open"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_connection_that_never_starts_a_request_is_closed() {
    let p = proxy("header_read_timeout_ms = 500\n", "").await;
    // Silent after the handshake, or too few bytes to tell HTTP/1.1 from HTTP/2: no hyper
    // timeout covers these; the edge's first-request timer does.
    for first_bytes in [&b""[..], b"PRI * HTTP", b"GET"] {
        let mut s = p.raw_tls().await;
        s.write_all(first_bytes).await.unwrap();
        s.flush().await.unwrap();
        let started = Instant::now();
        // Closed by the 500 ms timer, well before the read gives up at 10 s (no other timer
        // of this policy closes a connection sooner: the idle timeout is 120 s).
        let got = read_all(&mut s, Duration::from_secs(10)).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{first_bytes:?}: still open after {:?} ({got:?})",
            started.elapsed()
        );
    }
    // A client that does send its request in time is served.
    let mut c = p.client(Proto::H2).await;
    let (status, _, _) = c
        .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// Wrong credentials from addresses rotated inside one IPv6 /64 (behind a trusted proxy, the
/// only way to have many IPv6 clients on loopback) spend one budget: after the burst they get
/// 429, and a caller in another /64 is unaffected.
#[tokio::test]
async fn failures_rotated_inside_one_ipv6_prefix_are_throttled_together() {
    let p = Proxy::start(ProxyOpts {
        extra_auth: "failures_per_minute = 30\nfailures_burst = 10\n".into(),
        extra_policy: "[network]\ntrusted_proxies = [\"127.0.0.1/32\", \"::1/128\"]\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H2).await;
    let mut statuses = Vec::new();
    for i in 0..300u32 {
        let xff = format!("2001:db8:5:6:{:x}:{:x}::1", i >> 8, i & 0xff);
        let mut headers = h("Bearer wrong-token");
        headers.push(("x-forwarded-for", xff.as_str()));
        let (status, _, body) = c.request("POST", "/", &headers, BODY).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(String::from_utf8_lossy(&body).contains("auth.throttled"));
        }
        statuses.push(status);
    }
    let throttled = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert!(throttled >= 280, "{throttled} of 300 got 429");
    let mut headers = h("Bearer test-token-0123456789");
    headers.push(("x-forwarded-for", "2001:db8:5:7::1"));
    let (status, _, _) = c.request("POST", "/", &headers, BODY).await;
    assert_eq!(status, StatusCode::OK, "another /64 is unaffected");
}

async fn send_as(c: &mut Client, token: &str, method: &str, params: Value) -> Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params});
    let (_, _, rb) = c.request("POST", "/", &h(token), body.to_string()).await;
    serde_json::from_slice(&rb).unwrap()
}

fn big_message(kib: usize) -> Value {
    serde_json::json!({"message": {"messageId": format!("m-{}", a2a_edge::policy::random_token()),
        "role": "ROLE_USER", "parts": [{"text": format!("[[input]] {}", "x".repeat(kib * 1024))}]}})
}

/// A ListTasks page holds at most `limits.list_tasks_page_bytes` of tasks: it ends early with
/// a token that resumes after the last task it holds (no gap, no duplicate), and a task larger
/// than the whole budget is listed as what the registry knows of it.
#[tokio::test]
async fn list_tasks_pages_are_bounded_by_bytes() {
    let p = proxy(
        "list_tasks_page_bytes = 1048576\nrequests_per_second = 1000\nburst = 1000",
        "",
    )
    .await;
    let mut c = p.client(Proto::H2).await;
    let mut created = Vec::new();
    for _ in 0..5 {
        let v = send_as(
            &mut c,
            "Bearer test-token-0123456789",
            "SendMessage",
            big_message(300),
        )
        .await;
        created.push(v["result"]["task"]["id"].as_str().unwrap().to_string());
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let v = send_as(
            &mut c,
            "Bearer test-token-0123456789",
            "ListTasks",
            if token.is_empty() {
                serde_json::json!({"pageSize": 5})
            } else {
                serde_json::json!({"pageSize": 5, "pageToken": token})
            },
        )
        .await;
        let tasks = v["result"]["tasks"].as_array().unwrap().clone();
        assert!(
            !tasks.is_empty() && tasks.len() <= 3,
            "{} tasks of ~300 KiB in a 1 MiB page",
            tasks.len()
        );
        seen.extend(tasks.iter().map(|t| t["id"].as_str().unwrap().to_string()));
        assert_eq!(v["result"]["totalSize"], 5);
        pages += 1;
        token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
        assert!(pages < 10);
    }
    assert!(pages >= 2, "the page was cut by bytes");
    let mut want = created.clone();
    want.sort();
    let mut got = seen.clone();
    got.sort();
    assert_eq!(got, want, "every task once, none twice");
    // A budget smaller than one task: each is listed by what the registry knows.
    let small = proxy(
        "list_tasks_page_bytes = 4096\nrequests_per_second = 1000\nburst = 1000",
        "",
    )
    .await;
    let mut c = small.client(Proto::H1).await;
    let v = send_as(
        &mut c,
        "Bearer test-token-0123456789",
        "SendMessage",
        big_message(64),
    )
    .await;
    let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let v = send_as(
        &mut c,
        "Bearer test-token-0123456789",
        "ListTasks",
        serde_json::json!({}),
    )
    .await;
    let t = &v["result"]["tasks"][0];
    assert_eq!(t["id"], id, "{v}");
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert!(t.get("history").is_none(), "{t}");
}

/// Each task a ListTasks reads spends the caller's rate budget.
#[tokio::test]
async fn list_tasks_reads_spend_the_callers_rate() {
    // 10 requests at once, then one every 100 s.
    let p = proxy("requests_per_second = 0.01\nburst = 10", "").await;
    let mut c = p.client(Proto::H1).await;
    for _ in 0..4 {
        let v = send_as(
            &mut c,
            "Bearer test-token-0123456789",
            "SendMessage",
            big_message(1),
        )
        .await;
        assert!(v.get("result").is_some(), "{v}");
    }
    // 1 for the request, 4 reads: 9 of 10 spent.
    let v = send_as(
        &mut c,
        "Bearer test-token-0123456789",
        "ListTasks",
        serde_json::json!({}),
    )
    .await;
    assert_eq!(v["result"]["tasks"].as_array().unwrap().len(), 4, "{v}");
    // The 10th token admits the request, none is left for a read: 429.
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "ListTasks", "params": {}});
    let (status, _, rb) = c
        .request(
            "POST",
            "/",
            &h("Bearer test-token-0123456789"),
            body.to_string(),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        String::from_utf8_lossy(&rb)
    );
}

/// The failure throttle's and the rates' settings of the reload tests: three failures per
/// client address, then blocked; two requests per principal, then over its rate.
fn budgets_before() -> ProxyOpts {
    ProxyOpts {
        extra_auth: "failures_per_minute = 1\nfailures_burst = 3\n".into(),
        extra_policy: "[limits]\nrequests_per_second = 0.01\nburst = 2\n[network]\ntrusted_proxies = [\"127.0.0.1/32\"]\n".into(),
        ..Default::default()
    }
}

/// A guesser is blocked and a principal is over its rate under [`budgets_before`]; after a
/// reload to `after`, both still are.
async fn reload_keeps_the_spent_budgets(after: ProxyOpts) {
    // The guesser comes through the trusted proxy from its own address.
    async fn guess(c: &mut Client) -> (StatusCode, String) {
        let mut headers = h("Bearer wrong");
        headers.push(("x-forwarded-for", "192.0.2.9"));
        let (status, _, body) = c.request("POST", "/", &headers, BODY).await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }
    async fn honest(c: &mut Client) -> (StatusCode, String) {
        let (status, _, body) = c
            .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
            .await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }
    let p = Proxy::start(budgets_before()).await;
    let mut c = p.client(Proto::H1).await;
    for _ in 0..3 {
        assert_eq!(guess(&mut c).await.0, StatusCode::UNAUTHORIZED);
    }
    let (status, body) = guess(&mut c).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(body.contains("auth.throttled"), "{body}");
    for _ in 0..2 {
        assert_eq!(honest(&mut c).await.0, StatusCode::OK);
    }
    let (status, body) = honest(&mut c).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(body.contains("rate.principal"), "{body}");
    p.reload(&policy_text(p.dir.path(), &after)).await;
    let mut c = p.client(Proto::H2).await;
    let (status, body) = guess(&mut c).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "block kept: {body}");
    assert!(body.contains("auth.throttled"), "{body}");
    let (status, body) = honest(&mut c).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "rate kept: {body}");
    assert!(body.contains("rate.principal"), "{body}");
}

/// A reload keeps every budget whose settings it does not change: a guesser blocked by the
/// failure throttle stays blocked, a principal over its rate stays over it.
#[tokio::test]
async fn a_reload_resets_no_budget() {
    reload_keeps_the_spent_budgets(budgets_before()).await;
}

/// A reload that changes some budgets' settings keeps every other budget, and the blocks
/// of the one it changes: a new override for someone else, a new method rate, a new
/// concurrency maximum and a new failure rate leave the guesser blocked and the principal
/// over its own rate.
#[tokio::test]
async fn a_reload_that_changes_other_budgets_keeps_these() {
    reload_keeps_the_spent_budgets(ProxyOpts {
        extra_auth: "failures_per_minute = 2\nfailures_burst = 3\n".into(),
        extra_policy: "[limits]\nrequests_per_second = 0.01\nburst = 2\nmax_in_flight_per_principal = 100\n[limits.principals]\n\"jwt:someone-else\" = { requests_per_second = 5, burst = 5 }\n[limits.methods]\nGetTask = { requests_per_second = 5, burst = 5 }\n[network]\ntrusted_proxies = [\"127.0.0.1/32\"]\n".into(),
        ..Default::default()
    })
    .await;
}

/// What [`flooded_stream`] gives: the agent's flag set when the stream is closed, the agent,
/// the proxy, and the caller's unread connection.
type FloodedStream = (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    RecordingUpstream,
    Proxy,
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
);

/// A proxy with these `[limits]` before an agent that floods a stream ([`Reply::Flood`]:
/// its flag set when the stream is closed), and a raw HTTP/1.1 TLS connection on which a
/// SendStreamingMessage was sent and nothing is read yet.
async fn flooded_stream(limits: &str) -> FloodedStream {
    flooded_stream_with(limits, "").await
}

/// [`flooded_stream`] with these `[server]` lines too.
async fn flooded_stream_with(limits: &str, server: &str) -> FloodedStream {
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (up, p) = Proxy::with_recorder(
        Reply::Flood(closed.clone()),
        ProxyOpts {
            extra_server: server.into(),
            extra_policy: format!("[limits]\n{limits}"),
            ..Default::default()
        },
    )
    .await;
    let mut s = p.raw_tls().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"flood me"}]}}}"#;
    let req = format!(
        "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer test-token-0123456789\r\ncontent-type: application/json\r\na2a-version: 1.0\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    (closed, up, p, s)
}

/// An event the relay has made into its frame and waits to queue (its caller reads
/// nothing, its stream's buffer is full) stays charged to the caller's request budget: a
/// caller's unread streams hold no uncounted frames of up to `max_event_bytes` each (64
/// streams of 16 MiB were a GiB no budget saw). Here the agent floods 64 KiB events.
#[tokio::test]
async fn a_frame_waiting_for_its_caller_is_charged() {
    let (closed, _up, p, s) = flooded_stream_with(
        "stream_buffer_bytes = 4096\nstream_idle_timeout_ms = 600000\nwrite_timeout_ms = 600000\n",
        "admin_listen = \"127.0.0.1:0\"\n",
    )
    .await;
    // Nothing read: the socket's buffers fill, then the stream's, then a frame waits.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let held = request_bytes_held(&p).await;
        if held >= 64 << 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waiting frame is not charged: {held} held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!closed.load(std::sync::atomic::Ordering::SeqCst));
    drop(s);
    // The caller gone, its frame goes with its charge.
    request_bytes_become(&p, 0, "after the caller left").await;
}

/// A stream its caller stopped reading for `stream_idle_timeout_ms` is ended without its
/// last chunk (HTTP/1.1): the caller that reads again gets what was written, then the
/// connection's end, never a complete-looking end of a stream whose events were dropped.
#[tokio::test]
async fn a_stalled_stream_is_aborted_not_ended_as_complete() {
    let (closed, _up, _p, mut s) =
        flooded_stream("stream_idle_timeout_ms = 1000\nstream_buffer_bytes = 4096\n").await;
    // Read nothing until the relay has given up on this caller (the agent's stream closed).
    until_set(
        &closed,
        Duration::from_secs(20),
        "the stalled stream was not ended",
    )
    .await;
    let mut taken = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => {
                    taken.extend_from_slice(&buf[..n]);
                    if taken.ends_with(b"\r\n0\r\n\r\n") {
                        return false;
                    }
                }
            }
        }
    })
    .await;
    assert_eq!(
        ended,
        Ok(true),
        "the stream ended as complete after {} bytes",
        taken.len()
    );
    assert!(
        taken.starts_with(b"HTTP/1.1 200"),
        "what was written came first"
    );
}

/// A caller that stops reading a stream loses its connection once nothing written to it is
/// taken for `limits.write_timeout_ms`: the socket, its buffers and the kernel's send queue
/// are not held for as long as the caller likes.
#[tokio::test]
async fn a_connection_whose_peer_takes_nothing_is_closed() {
    let (closed, _up, _p, mut s) =
        flooded_stream("write_timeout_ms = 1000\nstream_idle_timeout_ms = 600000\n").await;
    // Read nothing while the agent floods: the kernel buffers fill, the proxy's writes stall,
    // and the connection goes, the agent's stream with it (however long the buffers took to
    // fill: under load, more than a fixed wait allowed once).
    until_set(
        &closed,
        Duration::from_secs(30),
        "the agent's stream was kept while its caller took nothing",
    )
    .await;
    // The proxy has closed the connection: what was queued drains, then the end comes.
    let mut taken = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => {
                    taken += n;
                    if taken > 256 << 20 {
                        return false;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(ended, "the connection was kept ({taken} bytes read)");
}

/// An HTTP/2 caller that grants no flow-control window (its streams' initial window 0)
/// takes nothing of a response body, and nothing is pending on the socket for the write
/// timeout to see: the connection is dropped once no response on it moved for
/// `limits.write_timeout_ms` (counted as `write_timeout`), not held with its answers for
/// ever. A caller that reads, however little at a time, keeps its connection.
#[tokio::test]
async fn an_http2_caller_that_grants_no_window_is_dropped() {
    use http_body_util::BodyExt;
    let p = Proxy::start(ProxyOpts {
        extra_policy: "[limits]\nwrite_timeout_ms = 500\nidle_timeout_ms = 1000\n".into(),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    })
    .await;
    let card = || {
        http::Request::get("https://localhost/.well-known/agent-card.json")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap()
    };
    // The stingy caller: the head comes, the body never can. (The time is taken before the
    // request is sent: the edge's write timer cannot start before that, so however late the
    // head arrives here, the drop comes at least the write timeout after it.)
    let (mut stingy, stingy_conn) = h2_granting(&p, 0).await;
    let started = Instant::now();
    let resp = stingy.send_request(card()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let dropped = tokio::time::timeout(Duration::from_secs(10), stingy_conn).await;
    assert!(dropped.is_ok(), "the stingy connection was kept");
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert!(resp.into_body().collect().await.is_err());
    // A reader, at the default window, is served as ever.
    let mut reader = p.client(Proto::H2).await;
    let (status, _, _) = reader
        .request("GET", "/.well-known/agent-card.json", &[], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!reader.is_closed());
    let (_, metrics) = admin_get(&p, "/metrics").await;
    assert!(
        metrics.contains("a2a_edge_connections_total{outcome=\"write_timeout\"} 1"),
        "{metrics}"
    );
}

/// An HTTP/2 connection to `p` whose streams each grant the edge `window` bytes (and no
/// more until read), and its running connection task.
async fn h2_granting<B>(
    p: &Proxy,
    window: u32,
) -> (
    hyper::client::conn::http2::SendRequest<B>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
)
where
    B: http_body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = hyper_util::rt::TokioIo::new(p.raw_tls_offering(&[b"h2"]).await);
    let (send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(window)
            .handshake(io)
            .await
            .unwrap();
    (send, tokio::spawn(conn))
}

/// A caller that reads a stream's large events slowly but steadily keeps its connection:
/// each 64 KiB event takes it longer than the write timeout to read (a 16 KiB window,
/// opened as it reads every 250 ms), yet it takes something all the time. (Over HTTP/2,
/// hyper takes the next piece of a body once the last is in its send buffer; the edge's
/// pieces of at most 16 KiB keep HTTP/1.1's wait for a large event as short:
/// `stream_body::tests`.)
#[tokio::test]
async fn a_slow_but_steady_reader_of_large_events_keeps_its_stream() {
    use http_body_util::BodyExt;
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (_up, p) = Proxy::with_recorder(
        Reply::Flood(closed.clone()),
        ProxyOpts {
            extra_policy: "[limits]\nwrite_timeout_ms = 700\nstream_idle_timeout_ms = 600000\n"
                .into(),
            ..Default::default()
        },
    )
    .await;
    let (mut caller, conn) = h2_granting(&p, 16_384).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"flood me"}]}}}"#;
    let req = http::Request::post("https://localhost/")
        .header("authorization", "Bearer test-token-0123456789")
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("accept", "text/event-stream")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = caller.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.into_body();
    let started = Instant::now();
    let mut taken = 0usize;
    while started.elapsed() < Duration::from_secs(4) {
        match stream.frame().await {
            Some(Ok(f)) => taken += f.into_data().map_or(0, |d| d.len()),
            other => panic!(
                "the stream ended after {taken} bytes, {:?}: {other:?}",
                started.elapsed()
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(taken > 2 * 65_536, "two events at least: {taken} bytes");
    assert!(!conn.is_finished(), "the connection was dropped");
    drop(stream);
    until_set(
        &closed,
        Duration::from_secs(5),
        "the agent's stream was kept",
    )
    .await;
}

/// A stream's slot lasts until its caller has taken the stream's end, not only while the
/// agent's stream lasts: an agent that sends its events and ends at once leaves them queued
/// for a caller that reads nothing (an HTTP/2 window of 0), and they stay counted against
/// the caller's streams until the caller takes them or leaves.
#[tokio::test]
async fn a_stream_holds_its_slot_until_its_caller_takes_the_end() {
    const EVENTS: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"task\":{\"id\":\"t-s\",\"contextId\":\"c-s\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t-s\",\"contextId\":\"c-s\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}}\n\n";
    let (up, p) = Proxy::with_recorder(
        Reply::RawStream(EVENTS),
        ProxyOpts {
            extra_policy: "[limits]\nmax_streams_per_principal = 1\n".into(),
            ..Default::default()
        },
    )
    .await;
    let stream = |text: &str| {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": {"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]}}});
        http::Request::post("https://localhost/")
            .header("authorization", "Bearer test-token-0123456789")
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .header("accept", "text/event-stream")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .unwrap()
    };
    let (mut stingy, _conn) = h2_granting(&p, 0).await;
    let unread = stingy.send_request(stream("first")).await.unwrap();
    assert_eq!(unread.status(), StatusCode::OK);
    // The agent has sent both events and ended its stream.
    let deadline = Instant::now() + Duration::from_secs(5);
    while up.rpc_requests().is_empty() {
        assert!(Instant::now() < deadline, "the agent was never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut other = p.client(Proto::H1).await;
    let busy = other.rpc_stream("SendStreamingMessage", serde_json::json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "second"}]}})).await;
    assert_eq!(
        busy.status(),
        429,
        "the unread stream's slot was given back"
    );
    assert_eq!(
        up.rpc_requests().len(),
        1,
        "the refused stream never reached the agent"
    );
    // The caller leaves: the slot is free.
    drop(unread);
    drop(stingy);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let again = other.rpc_stream("SendStreamingMessage", serde_json::json!({"message": {"messageId": "m-3", "role": "ROLE_USER", "parts": [{"text": "third"}]}})).await;
        if again.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the slot was never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One answer the HTTP/2 caller never reads stalls the connection though the caller keeps
/// reading others on it: the unread one (its slot, its bytes) is not held for as long as
/// the connection lives.
#[tokio::test]
async fn an_http2_answer_never_read_drops_the_connection_while_others_move() {
    use http_body_util::BodyExt;
    let p = Proxy::start(ProxyOpts {
        // (a stall is seen within the idle timeout and the write timeout of its start)
        extra_policy: "[limits]\nwrite_timeout_ms = 500\nidle_timeout_ms = 1000\n".into(),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    })
    .await;
    let (mut caller, conn) = h2_granting(&p, 65_535).await;
    // An answer of about 200 KB (the engine echoes the message), never read past its head.
    let text = "x".repeat(200_000);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m-big", "role": "ROLE_USER", "parts": [{"text": text}]}}});
    let big = http::Request::post("https://localhost/")
        .header("authorization", "Bearer test-token-0123456789")
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    let unread = caller.send_request(big).await.unwrap();
    assert_eq!(unread.status(), StatusCode::OK);
    let started = Instant::now();
    // Meanwhile the caller reads other answers on the connection, one every 100 ms.
    let mut answered = 0;
    while !conn.is_finished() && started.elapsed() < Duration::from_secs(10) {
        let health = http::Request::get("https://localhost/health")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        match caller.send_request(health).await {
            Ok(r) => {
                if r.into_body().collect().await.is_ok() {
                    answered += 1;
                }
            }
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dropped = tokio::time::timeout(Duration::from_secs(2), conn).await;
    assert!(
        dropped.is_ok(),
        "the connection was kept ({answered} answers read meanwhile)"
    );
    assert!(answered >= 2, "{answered}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let (_, metrics) = admin_get(&p, "/metrics").await;
    assert!(
        metrics.contains("a2a_edge_connections_total{outcome=\"write_timeout\"} 1"),
        "{metrics}"
    );
    drop(unread);
}

/// An HTTP/1.1 answer to a request whose body was refused while it was still coming (too
/// large) says `connection: close`, and the connection closes: nothing pipelined behind is
/// served. A refusal that did not need the body (401, a JSON-RPC error) keeps the
/// connection when the whole body had arrived, as does an answer to a valid request; HTTP/2
/// answers never carry the header.
#[tokio::test]
async fn an_answer_to_a_body_refused_midway_says_connection_close() {
    // Chunked requests allowed, so that a chunked body can break its framing.
    let p = proxy("allow_chunked_requests = true", "").await;
    let valid = |token: &str| {
        format!(
            "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: {token}\r\ncontent-type: application/json\r\na2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{BODY}",
            BODY.len()
        )
    };
    let good = valid("Bearer test-token-0123456789");
    let head = "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer test-token-0123456789\r\ncontent-type: application/json\r\na2a-version: 1.0\r\n";
    // (name, request, its status, closes after it)
    let cases: Vec<(&str, String, &str, bool)> = vec![
        (
            "a body declared over the cap",
            format!("{head}content-length: 100000000\r\n\r\n{{"),
            "413",
            true,
        ),
        (
            "a chunked body whose framing breaks (chunked allowed here)",
            format!("{head}transfer-encoding: chunked\r\n\r\n5\r\n{{\"jso\r\nzz\r\n"),
            "400",
            true,
        ),
        (
            "a wrong token, the whole body sent, a valid request pipelined behind",
            format!("{}{good}", valid("Bearer wrong-token-0123456789")),
            "401",
            false,
        ),
        (
            "a wrong token while a large body is still coming",
            format!(
                "{}content-length: 1000000\r\n\r\n{{\"jsonrpc\"",
                head.replace("test-token-0123456789", "wrong-token-0123456789")
            ),
            "401",
            true,
        ),
        (
            "a wrong token, a small body that stops coming",
            format!(
                "{}content-length: 1000\r\n\r\n{{\"jsonrpc\"",
                head.replace("test-token-0123456789", "wrong-token-0123456789")
            ),
            "401",
            true,
        ),
        (
            "a content type the edge does not take (a JSON-RPC error), a valid request behind",
            format!(
                "{}{good}",
                good.replace("content-type: application/json", "content-type: text/plain")
            ),
            "200",
            false,
        ),
    ];
    for (name, raw, status, closes) in &cases {
        let mut s = p.raw_tls().await;
        let _ = s.write_all(raw.as_bytes()).await;
        let started = Instant::now();
        let answer = read_all(&mut s, Duration::from_secs(3)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{name}: {answer:?}"
        );
        if *closes {
            assert!(
                started.elapsed() < Duration::from_millis(2500),
                "{name}: the connection stayed open: {answer:?}"
            );
            assert!(answer.contains("connection: close"), "{name}: {answer:?}");
            assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{name}: {answer:?}");
        } else {
            assert!(!answer.contains("connection: close"), "{name}: {answer:?}");
            // The request behind was served on the same connection.
            assert_eq!(
                answer.matches("HTTP/1.1 200").count(),
                1 + (*status == "200") as usize,
                "{name}: {answer:?}"
            );
            assert!(answer.contains("\"result\""), "{name}: {answer:?}");
        }
    }
    // Over HTTP/2 a refusal has no connection header (RFC 9113 §8.2.2) and the connection
    // carries the next request.
    let mut c = p.client(Proto::H2).await;
    let (status, headers, _) = c
        .request("POST", "/", &h("Bearer wrong-token-0123456789"), BODY)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get("connection").is_none(), "{headers:?}");
    let (status, _, _) = c
        .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// Every route, not only JSON-RPC, reads and drops (within bounds) an HTTP/1.1 body it did not
/// need, so that the connection carries the next request; a body it could not drop (a larger
/// declared length, or one that stops coming) gets `connection: close` on the answer, and
/// nothing behind it is served. Before, the other routes dropped the body unread and hyper
/// closed the connection under the client without saying so.
#[tokio::test]
async fn every_route_keeps_its_connection_after_a_body_it_did_not_need() {
    let p = Proxy::start(ProxyOpts {
        extra_server: "agent_paths = [\"/iac-code/readiness\"]\n".into(),
        ..Default::default()
    })
    .await;
    let bearer = "authorization: Bearer test-token-0123456789\r\n";
    let wrong = "authorization: Bearer wrong-token-0123456789\r\n";
    // A valid JSON-RPC request pipelined behind, whose answer closes the connection.
    let behind = format!(
        "POST / HTTP/1.1\r\nhost: localhost\r\n{bearer}content-type: application/json\r\na2a-version: 1.0\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let with_body = |line: &str, auth: &str, declared: usize, sent: &str| {
        format!(
            "{line} HTTP/1.1\r\nhost: localhost\r\n{auth}content-length: {declared}\r\n\r\n{sent}"
        )
    };
    // (name, request, status of its answer, whether the connection closes after it)
    let cases: Vec<(&str, String, &str, bool)> = vec![
        (
            "health",
            with_body("GET /health", "", 5, "hello"),
            "200",
            false,
        ),
        (
            "card",
            with_body("GET /.well-known/agent-card.json", "", 5, "hello"),
            "200",
            false,
        ),
        (
            "catalog",
            with_body("GET /.well-known/agents.json", "", 5, "hello"),
            "200",
            false,
        ),
        (
            "not found",
            with_body("POST /nope", bearer, 5, "hello"),
            "404",
            false,
        ),
        (
            "method not allowed",
            with_body("GET /", bearer, 5, "hello"),
            "405",
            false,
        ),
        (
            "agent path, wrong token",
            with_body("GET /iac-code/readiness", wrong, 5, "hello"),
            "401",
            false,
        ),
        (
            "health, a large body declared",
            with_body("GET /health", "", 1_000_000, "{"),
            "200",
            true,
        ),
        (
            "not found, a body that stops coming",
            with_body("POST /nope", bearer, 1000, "{"),
            "404",
            true,
        ),
        (
            "agent path, wrong token, a large body declared",
            with_body("GET /iac-code/readiness", wrong, 1_000_000, "{"),
            "401",
            true,
        ),
    ];
    for (name, first, status, closes) in &cases {
        let mut s = p.raw_tls().await;
        let _ = s.write_all(format!("{first}{behind}").as_bytes()).await;
        let answer = read_all(&mut s, Duration::from_secs(5)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{name}: {answer:?}"
        );
        let answers = answer.matches("HTTP/1.1 ").count();
        let first_answer = answer[1..]
            .find("HTTP/1.1 ")
            .map_or(answer.as_str(), |at| &answer[..at + 1]);
        if *closes {
            assert!(
                first_answer.contains("connection: close"),
                "{name}: {answer:?}"
            );
            assert_eq!(
                answers, 1,
                "{name}: served behind an unread body: {answer:?}"
            );
        } else {
            assert!(
                !first_answer.contains("connection: close"),
                "{name}: {answer:?}"
            );
            assert_eq!(
                answers, 2,
                "{name}: the request behind was not served: {answer:?}"
            );
            assert!(answer.contains("\"result\""), "{name}: {answer:?}");
        }
    }
}

/// A request body of one piece that says nothing of its length.
struct Unsized(Option<bytes::Bytes>);

impl http_body::Body for Unsized {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.take().map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// The request byte budgets of the answer tests: one request, answer or listed task at these
/// bounds is reckoned at most 2 x 100,000 + 192 x 1,024 = 396,608 bytes of a caller's 420,000;
/// everyone's `total`.
fn budgets(total: usize) -> String {
    format!("[a2a]\nmax_body_bytes = 100000\nmax_json_values = 1024\n[limits]\nlist_tasks_page_bytes = 100000\nrequest_bytes_per_principal = 420000\nrequest_bytes = {total}\nrequests_per_second = 1000\nburst = 1000\nmin_body_bytes_per_second = 0\nbody_read_timeout_ms = 30000\n")
}

/// A proxy with the admin listener (its metrics), the other principal, and [`budgets`] with
/// everyone's 2 MB.
fn budgeted() -> ProxyOpts {
    ProxyOpts {
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        extra_policy: format!("{OTHER}{}", budgets(2_000_000)),
        ..Default::default()
    }
}

/// Alice's task that could never fit beside a ListTasks request padded to 99 KB (reckoned
/// 198 KB, leaving 222 KB of her 420 KB; the task, about 40 KB read and 965 values: 265 KB),
/// and that request, listing its context.
async fn a_task_too_large_beside_a_padded_page(c: &mut Client, alice: &str) -> (Value, String) {
    let params = serde_json::json!({"message": {"messageId": "large-and-many",
        "role": "ROLE_USER", "parts": [{"data": {"d": vec![0; 900]},
        "mediaType": "application/json"}, {"text": "y".repeat(20_000)}]}});
    let v = send_as(c, alice, "SendMessage", params).await;
    let large = v["result"]["task"].clone();
    let body = format!(
        r#"{{"jsonrpc": "2.0", "id": 5, "method": "ListTasks", "params": {{"contextId": {}}}}}{}"#,
        large["contextId"],
        " ".repeat(99_000)
    );
    (large, body)
}

/// What requests being read and checked hold, reckoned, per `a2a_edge_request_bytes`.
async fn request_bytes_held(p: &Proxy) -> u64 {
    let (_, text) = admin_get(p, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix("a2a_edge_request_bytes "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no a2a_edge_request_bytes in {text}"))
}

/// Waits (up to 5 s) until what requests hold, per `a2a_edge_request_bytes`, is `want`.
async fn request_bytes_become(p: &Proxy, want: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let held = request_bytes_held(p).await;
        if held == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {held} held, {want} wanted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TLS connection whose request declares a body of `len` bytes and sends `sent` of them:
/// what it sent stays reserved while the edge waits for the rest.
async fn holding(
    p: &Proxy,
    token: &str,
    len: usize,
    sent: usize,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let before = request_bytes_held(p).await;
    let mut s = p.raw_tls().await;
    let head = format!("POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: {token}\r\ncontent-type: application/json\r\na2a-version: 1.0\r\ncontent-length: {len}\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&vec![b' '; sent]).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while request_bytes_held(p).await < before + sent as u64 {
        assert!(Instant::now() < deadline, "the body was never reserved");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s
}

/// What one principal's requests being read and checked hold together is bounded (429
/// `concurrency.request_bytes`), and so is everyone's (503 `overload.request_bytes`): before
/// the body is read when its declared length cannot fit, as it arrives when it declares none,
/// after its parse when its tree does not fit (a small body of many values is refused where a
/// body of its size and few values is not). What a body holds is what it sent, not what it
/// declared. A refused request never reaches the agent, another principal is served
/// meanwhile, and what a request held is given back when it ends, however it ends.
#[tokio::test]
async fn request_bytes_are_bounded_per_principal_and_in_all() {
    // The budgets hold one request at these bounds (2 x 100,000 + 192 x 1,024 = 396,608).
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
            extra_policy: format!("{OTHER}[a2a]\nmax_body_bytes = 100000\nmax_json_values = 1024\n[limits]\nlist_tasks_page_bytes = 100000\nrequest_bytes_per_principal = 420000\nrequest_bytes = 450000\nmin_body_bytes_per_second = 0\nbody_read_timeout_ms = 30000\n"),
            ..Default::default()
        },
    )
    .await;
    let alice = "Bearer test-token-0123456789";
    let send = |n: usize, many: bool| {
        // A message of one data part: `n` zeros in an array, or one string of `2 n` bytes
        // (about the same body, a handful of values).
        let data = if many {
            Value::Array(vec![Value::from(0); n])
        } else {
            Value::String("0,".repeat(n))
        };
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": format!("m-{n}-{many}"), "role": "ROLE_USER",
                "parts": [{"data": {"d": data}, "mediaType": "application/json"}]}}})
        .to_string()
    };
    let mut c = p.client(Proto::H1).await;
    // Alone, either body is within alice's budget (the array: 2 KB and about 925 values,
    // reckoned its buffer, its strings and 192 bytes a value: 182 KB).
    for many in [false, true] {
        let (status, _, body) = c.request("POST", "/", &h(alice), send(900, many)).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert!(v["result"].is_object(), "{v}");
    }
    assert_eq!(up.rpc_requests().len(), 2);
    assert_eq!(request_bytes_held(&p).await, 0);
    // A body holds what it sent (its buffer's room), not what it declared; its room grows
    // no further than its declared length.
    for (declared, sent, most) in [(100_000, 1_000, 2_047), (60_000, 59_999, 60_000)] {
        let hold = holding(&p, alice, declared, sent).await;
        let reserved = request_bytes_held(&p).await;
        assert!(
            (sent as u64..=most).contains(&reserved),
            "{declared} {sent}: {reserved}"
        );
        drop(hold);
        let deadline = Instant::now() + Duration::from_secs(5);
        while request_bytes_held(&p).await > 0 {
            assert!(Instant::now() < deadline, "never given back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Four bodies of alice's that have sent 99,999 of their 100,000 bytes: about 400,000
    // reserved (each buffer's room, at most the cap), none answered.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(holding(&p, alice, 100_000, 99_999).await);
    }
    let reserved = request_bytes_held(&p).await;
    assert!((399_996..=400_000).contains(&reserved), "{reserved}");
    let mut h2 = p.client(Proto::H2).await;
    // (caller, body, many values, the answer's status and reason)
    let rows: [(&str, usize, bool, u16, &str); 6] = [
        ("alice", 900, false, 200, ""),
        ("alice", 900, true, 429, "concurrency.request_bytes"),
        ("alice", 15_000, false, 429, "concurrency.request_bytes"),
        ("other", 900, false, 200, ""),
        ("other", 900, true, 503, "overload.request_bytes"),
        ("other", 30_000, false, 503, "overload.request_bytes"),
    ];
    let mut reached = 2;
    for (who, n, many, status, reason) in rows {
        let token = if who == "alice" { alice } else { OTHER_TOKEN };
        // (over HTTP/2: a body refused unread ends its stream, not the connection, which an
        // HTTP/1.1 client may see closed while it still writes the body)
        let (got, headers, body) = h2.request("POST", "/", &h(token), send(n, many)).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(got.as_u16(), status, "{who} {n} {many}: {text}");
        if status == 200 {
            reached += 1;
        } else {
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["reason"], reason, "{who} {n} {many}");
        }
        if status == 429 || status == 503 {
            assert_eq!(headers["retry-after"], "1", "{who} {n} {many}");
        }
        assert_eq!(
            up.rpc_requests().len(),
            reached,
            "{who} {n} {many}: reached the agent"
        );
        assert_eq!(
            request_bytes_held(&p).await,
            reserved,
            "{who} {n} {many}: given back"
        );
    }
    // A body that declares no length (HTTP/2) is reserved as it comes: refused midway, not
    // read whole (and then found not to be JSON).
    let (mut unsized_h2, _conn) = h2_granting(&p, 1 << 20).await;
    let req = http::Request::post("https://localhost/")
        .header("authorization", alice)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Unsized(Some(bytes::Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","x":"{}"#,
            "a".repeat(60_000)
        )))))
        .unwrap();
    assert!(req.headers().get("content-length").is_none());
    let resp = unsized_h2.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&body.to_bytes()).unwrap();
    assert_eq!(v["reason"], "concurrency.request_bytes");
    assert_eq!(up.rpc_requests().len(), reached);
    // The held bodies were never answered (nor refused for their pace); what they reserved is
    // given back when their connections go, and then alice's refused request passes.
    for s in &mut held {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await;
        assert!(read.is_err(), "a held body was answered: {read:?}");
    }
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    while request_bytes_held(&p).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the reservation was never given back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut c = p.client(Proto::H1).await;
    let (status, _, _) = c.request("POST", "/", &h(alice), send(15_000, false)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(up.rpc_requests().len(), reached + 1);
    assert_eq!(request_bytes_held(&p).await, 0, "nothing stays held");
}

/// A ListTasks page is charged to its caller's request budgets as a request is: each task it
/// reads holds its bytes twice (read, then written into the answer) and 192 bytes a value of
/// its tree. The page ends, with a token that resumes after its last task, where the caller's
/// budget does; a page that cannot hold even its first task while the caller's other requests
/// hold the budget is refused 429 `concurrency.request_bytes` (its read past what is left, or
/// its tree), and passes once they end; another caller is served meanwhile; all a page held
/// is given back once its answer is sent. An agent's answer to a request is charged alike.
#[tokio::test]
async fn list_tasks_pages_are_charged_to_the_callers_request_bytes() {
    // One request or listed task at these bounds: 2 x 100,000 + 192 x 1,024 = 396,608.
    let p = Proxy::start(budgeted()).await;
    let alice = "Bearer test-token-0123456789";
    let mut c = p.client(Proto::H2).await;
    // Alice's three tasks of about 960 values each (a data part of 900 zeros): about 2.9 KB
    // read, reckoned 2 x 2.9 KB + 192 x 960 = 190 KB; two fit her budget, three do not (nor
    // two beside one held body of 100 KB, nor one beside three).
    let (mut created, mut contexts) = (Vec::new(), Vec::new());
    for n in 0..3 {
        let params = serde_json::json!({"message": {"messageId": format!("many-{n}"),
            "role": "ROLE_USER", "parts": [{"data": {"d": vec![0; 900]},
            "mediaType": "application/json"}]}});
        let v = send_as(&mut c, alice, "SendMessage", params).await;
        created.push(
            v["result"]["task"]["id"]
                .as_str()
                .expect("a task")
                .to_string(),
        );
        contexts.push(v["result"]["task"]["contextId"].clone());
    }
    // The other caller's task: 30 KB of text, a few values.
    let other_task = send_as(&mut c, OTHER_TOKEN, "SendMessage", big_message(30)).await;
    let other_task = other_task["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let list = |token: &'static str, page_token: String| {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "ListTasks",
            "params": {"pageSize": 10, "pageToken": page_token}});
        (h(token), body.to_string())
    };
    // Alice's pages: all her tasks, once each, two to a page.
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let (headers, body) = list(alice, token);
        let (status, _, rb) = c.request("POST", "/", &headers, body).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&rb));
        let v: Value = serde_json::from_slice(&rb).unwrap();
        let ids: Vec<String> = v["result"]["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        assert!(
            v["result"]["tasks"][0]["history"].is_array(),
            "read whole, not a summary: {v}"
        );
        pages.push(ids);
        token = v["result"]["nextPageToken"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if token.is_empty() || pages.len() > 3 {
            break;
        }
    }
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [2, 1],
        "{pages:?}"
    );
    let mut seen: Vec<String> = pages.concat();
    seen.sort();
    created.sort();
    assert_eq!(seen, created, "every task once");
    let given_back = |want: u64| request_bytes_become(&p, want, "given back");
    given_back(0).await;
    // (alice's bodies held, alice's page: its tasks, or its refusal)
    let rows: [(usize, Result<usize, &str>); 2] =
        [(1, Ok(1)), (3, Err("concurrency.request_bytes"))];
    for (holds, want) in rows {
        let mut held = Vec::new();
        for _ in 0..holds {
            held.push(holding(&p, alice, 100_000, 99_999).await);
        }
        let before = request_bytes_held(&p).await;
        let (headers, body) = list(alice, String::new());
        let (status, rh, rb) = c.request("POST", "/", &headers, body).await;
        let v: Value = serde_json::from_slice(&rb).unwrap();
        match want {
            Ok(n) => {
                assert_eq!(status, StatusCode::OK, "{holds}: {v}");
                let tasks = v["result"]["tasks"].as_array().unwrap();
                assert_eq!(tasks.len(), n, "{holds}: {v}");
                assert!(
                    tasks.iter().all(|t| t["history"].is_array()),
                    "{holds}: {v}"
                );
                assert_ne!(v["result"]["nextPageToken"], "", "{holds}");
            }
            Err(reason) => {
                assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{holds}: {v}");
                assert_eq!(v["reason"], reason, "{holds}");
                assert_eq!(rh["retry-after"], "1");
            }
        }
        // Another caller is served meanwhile: its one task, read whole.
        let (headers, body) = list(OTHER_TOKEN, String::new());
        let (status, _, rb) = c.request("POST", "/", &headers, body).await;
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["result"]["tasks"][0]["id"], other_task.as_str());
        assert!(v["result"]["tasks"][0]["history"].is_array(), "{v}");
        given_back(before).await;
        drop(held);
        given_back(0).await;
    }
    // A task that could never fit beside its page's own request is listed as what the edge
    // knows of it, not refused for ever.
    let (large, body) = a_task_too_large_beside_a_padded_page(&mut c, alice).await;
    // (the same whether or not another request of the caller holds a little of the budget)
    for busy in [false, true] {
        let hold = match busy {
            true => Some(holding(&p, alice, 100_000, 10).await),
            false => None,
        };
        let (status, _, rb) = c.request("POST", "/", &h(alice), body.clone()).await;
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert_eq!(status, StatusCode::OK, "{busy}: {v}");
        assert_eq!(v["result"]["tasks"][0]["id"], large["id"], "{busy}: {v}");
        assert!(
            v["result"]["tasks"][0].get("history").is_none(),
            "{busy}: {v}"
        );
        drop(hold);
        given_back(0).await;
    }
    // ... where one that fits, with the same request, is read whole.
    let body = format!(
        r#"{{"jsonrpc": "2.0", "id": 5, "method": "ListTasks", "params": {{"contextId": {}}}}}{}"#,
        contexts[0],
        " ".repeat(99_000)
    );
    let (status, _, rb) = c.request("POST", "/", &h(alice), body).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&rb).unwrap();
    assert!(v["result"]["tasks"][0]["history"].is_array(), "{v}");
    given_back(0).await;
    // The other caller's 30 KB task does not fit what its held bodies leave (about 20 KB):
    // its read stops there, and the page is refused, not given a summary.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(holding(&p, OTHER_TOKEN, 100_000, 99_999).await);
    }
    let (headers, body) = list(OTHER_TOKEN, String::new());
    let (status, _, rb) = c.request("POST", "/", &headers, body).await;
    let v: Value = serde_json::from_slice(&rb).unwrap();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["reason"], "concurrency.request_bytes");
    // An agent's answer is charged the same way, as it arrives: the task's 60 KB does not
    // fit, and the caller is told so (a JSON-RPC error, for the agent has had the request).
    let get = serde_json::json!({"id": other_task});
    let v = send_as(&mut c, OTHER_TOKEN, "GetTask", get.clone()).await;
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "concurrency.request_bytes",
        "{v}"
    );
    drop(held);
    given_back(0).await;
    let v = send_as(&mut c, OTHER_TOKEN, "GetTask", get.clone()).await;
    assert_eq!(v["result"]["id"], other_task.as_str(), "{v}");
    given_back(0).await;
    let (headers, body) = list(OTHER_TOKEN, String::new());
    let (status, _, rb) = c.request("POST", "/", &headers, body).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&rb));
    // An answer larger than the caller's whole budget (a task of three 40 KB messages, read
    // and written: about 500 KB of 420 KB) is relayed to a caller with nothing else held,
    // for the agent has acted on the request; refused while another request holds the
    // budget.
    let v = send_as(&mut c, alice, "SendMessage", big_message(40)).await;
    let (task, context) = (
        &v["result"]["task"]["id"],
        &v["result"]["task"]["contextId"],
    );
    for _ in 0..2 {
        let mut more = big_message(40);
        more["message"]["taskId"] = task.clone();
        more["message"]["contextId"] = context.clone();
        let v = send_as(&mut c, alice, "SendMessage", more).await;
        assert_eq!(v["result"]["task"]["id"], *task, "{v}");
    }
    let get = serde_json::json!({"id": task});
    let v = send_as(&mut c, alice, "GetTask", get.clone()).await;
    assert_eq!(
        v["result"]["id"],
        *task,
        "{}",
        &v.to_string()[..200.min(v.to_string().len())]
    );
    let raw = v.to_string().len();
    assert!(2 * raw > 420_000, "{raw}");
    given_back(0).await;
    let hold = holding(&p, alice, 100_000, 10).await;
    let v = send_as(&mut c, alice, "GetTask", get).await;
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "concurrency.request_bytes",
        "{v}"
    );
    drop(hold);
    given_back(0).await;
}

/// An agent's stream is charged to its caller's request budgets as its events are read and
/// checked (their text, and a tree where the edge rebuilds an event whole): an event that
/// does not fit what the caller's other requests leave ends the stream with an error event
/// (-32603 `concurrency.request_bytes`), where the same stream passes whole otherwise; what
/// the stream held is given back as it ends.
#[tokio::test]
async fn a_streams_events_are_charged_to_the_callers_request_bytes() {
    // One event: a working task whose metadata holds 950 zeros under a key longer than the
    // fast pass reads (256 bytes), so that the event is rebuilt whole: about 2.3 KB read,
    // reckoned 2 x 2.3 KB + 192 x 960 = 189 KB.
    let raw = format!(
        "data: {{\"jsonrpc\":\"2.0\",\"id\":{{id}},\"result\":{{\"task\":{{\"id\":\"t1\",\"contextId\":\"c1\",\"status\":{{\"state\":\"TASK_STATE_WORKING\"}},\"metadata\":{{\"{}\":{:?}}}}}}}}}\n\n",
        "k".repeat(300),
        vec![0; 950]
    );
    let raw: &'static str = Box::leak(raw.into_boxed_str());
    let (_up, p) = Proxy::with_recorder(Reply::RawStream(raw), budgeted()).await;
    let alice = "Bearer test-token-0123456789";
    let message = |n: usize| {
        serde_json::json!({"message": {"messageId": format!("m-{n}"), "role": "ROLE_USER",
            "parts": [{"text": "hi"}]}})
    };
    // (alice's bodies held, whether the event reaches her)
    for (n, (holds, passes)) in [(0, true), (3, false), (1, true)].into_iter().enumerate() {
        let mut held = Vec::new();
        for _ in 0..holds {
            held.push(holding(&p, alice, 100_000, 99_999).await);
        }
        let before = request_bytes_held(&p).await;
        let mut c = p.client(Proto::H2).await;
        let events = EventReader::new(c.rpc_stream("SendStreamingMessage", message(n)).await)
            .rest()
            .await;
        assert_eq!(events.len(), 1, "{holds}: {events:?}");
        let (kind, v) = &events[0];
        if passes {
            assert_eq!(kind.as_deref(), None, "{holds}: {v}");
            assert_eq!(v["result"]["task"]["id"], "t1", "{holds}: {v}");
        } else {
            assert_eq!(kind.as_deref(), Some("error"), "{holds}: {v}");
            assert_eq!(v["error"]["code"], -32603, "{v}");
            assert_eq!(
                v["error"]["data"][0]["reason"], "concurrency.request_bytes",
                "{v}"
            );
        }
        request_bytes_become(&p, before, &format!("{holds}: the stream's")).await;
        drop(held);
        request_bytes_become(&p, 0, &format!("{holds}: the held bodies")).await;
    }
}

/// An agent path's answer is charged to its caller's request budgets as a JSON-RPC answer is:
/// one larger than the caller's whole budget (a 150 KB document read, written and parsed:
/// about 450 KB of 420 KB) is relayed to a caller with nothing else held, for the agent has
/// had the request, and answered 502 with the budget's reason while another request of the
/// caller holds the budget; what it held is given back.
#[tokio::test]
async fn an_agent_paths_answer_is_charged_to_the_callers_request_bytes() {
    let raw: &'static str =
        Box::leak(format!("{{\"ready\":\"{}\"}}", "r".repeat(150_000)).into_boxed_str());
    let (up, p) = Proxy::with_recorder(
        Reply::Raw(raw),
        ProxyOpts {
            extra_server:
                "admin_listen = \"127.0.0.1:0\"\nagent_paths = [\"/iac-code/readiness\"]\n".into(),
            ..budgeted()
        },
    )
    .await;
    let alice = "Bearer test-token-0123456789";
    let mut c = p.client(Proto::H2).await;
    let auth = [("authorization", alice)];
    let reached = || {
        up.requests()
            .iter()
            .filter(|r| r.path == "/iac-code/readiness")
            .count()
    };
    let (status, _, body) = c.request("GET", "/iac-code/readiness", &auth, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.len(), raw.len());
    request_bytes_become(&p, 0, "the answer's").await;
    let hold = holding(&p, alice, 100_000, 10).await;
    let (status, _, body) = c.request("GET", "/iac-code/readiness", &auth, "").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["reason"], "concurrency.request_bytes", "{v}");
    assert_eq!(reached(), 2, "the agent had both");
    drop(hold);
    request_bytes_become(&p, 0, "the held body's").await;
}

/// A ListTasks page's first task that could never fit beside the page's own request is
/// listed as what the edge knows of it even when everyone's budget is the one with the
/// smaller room (here everyone's budget is one caller's, and another caller holds a little of
/// it): never 503 for ever.
#[tokio::test]
async fn a_task_that_never_fits_is_a_summary_whichever_budget_is_short() {
    let p = Proxy::start(ProxyOpts {
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        extra_policy: format!("{OTHER}{}", budgets(420_000)),
        ..Default::default()
    })
    .await;
    let alice = "Bearer test-token-0123456789";
    let mut c = p.client(Proto::H2).await;
    let (large, body) = a_task_too_large_beside_a_padded_page(&mut c, alice).await;
    let hold = holding(&p, OTHER_TOKEN, 100_000, 10).await;
    let (status, _, rb) = c.request("POST", "/", &h(alice), body).await;
    let v: Value = serde_json::from_slice(&rb).unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["tasks"][0]["id"], large["id"], "{v}");
    assert!(v["result"]["tasks"][0].get("history").is_none(), "{v}");
    drop(hold);
}

/// The extended card is read again from the agent's answer to be rewritten and signed: that
/// copy and its tree are the caller's too. A card of 150 KB and about 940 values, most in an
/// extension's params (its tree reckoned at some 330 KB, beside its 150 KB read: more than
/// the caller's 420 KB), is served to a caller with nothing else held, and refused -32603
/// with the budget's reason while another request of the caller holds the budget, though the
/// relay's own pass over the answer (its bytes read and written, 300 KB) fits; what it held
/// is given back. A card past the bound is not read further.
#[tokio::test]
async fn the_extended_cards_copy_is_charged_to_the_callers_request_bytes() {
    let (up, p) = Proxy::with_recorder(Reply::Echo, budgeted()).await;
    {
        let mut card = up.card.lock().unwrap();
        card["description"] = serde_json::json!("d".repeat(150_000));
        // (the recorder's extended card has skills of its own: the values go in an
        // extension's params)
        card["capabilities"]["extensions"] =
            serde_json::json!([{"uri": "urn:x", "params": {"v": vec![0; 900]}}]);
    }
    let alice = "Bearer test-token-0123456789";
    let mut c = p.client(Proto::H2).await;
    let v = rpc_as(&mut c, alice, "GetExtendedAgentCard", serde_json::json!({})).await;
    let card = &v["result"];
    assert_eq!(card["skills"][0]["id"], "secret-skill", "{}", v["error"]);
    assert_eq!(card["description"].as_str().map(str::len), Some(150_000));
    assert!(!v.to_string().contains("10.1.2.3"), "rewritten");
    request_bytes_become(&p, 0, "the card's").await;
    let hold = holding(&p, alice, 100_000, 10).await;
    let v = rpc_as(&mut c, alice, "GetExtendedAgentCard", serde_json::json!({})).await;
    assert_eq!(v["error"]["code"], -32603, "{}", v["error"]);
    assert_eq!(
        v["error"]["data"][0]["reason"], "concurrency.request_bytes",
        "{v}"
    );
    drop(hold);
    request_bytes_become(&p, 0, "the held body's").await;
    // A card past its bound (1 MiB) is not read further: the agent's card is invalid.
    up.card.lock().unwrap()["description"] = serde_json::json!("d".repeat(1_100_000));
    let v = rpc_as(&mut c, alice, "GetExtendedAgentCard", serde_json::json!({})).await;
    assert_eq!(v["error"]["code"], -32006, "{}", v["error"]);
    assert_eq!(v["error"]["data"][0]["reason"], "card.extended_invalid");
    request_bytes_become(&p, 0, "the large card's").await;
}

/// A SendStreamingMessage of Alice's with a 16 MB text part, and its body's length.
fn a_16_mb_stream_request() -> (usize, http::Request<http_body_util::Full<bytes::Bytes>>) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m-large", "role": "ROLE_USER",
        "parts": [{"text": "x".repeat(16_000_000)}]}}})
    .to_string();
    let len = body.len();
    let req = http::Request::post("https://localhost/")
        .header("authorization", "Bearer test-token-0123456789")
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    (len, req)
}

/// The copy of a request sent to the agent is the caller's while the connection holds it: an
/// agent that starts its stream before it has read the request (16 MB, more than the sockets
/// and its HTTP/2 window take) leaves the copy with the edge, charged to the caller's budget
/// after the stream has started and the rest of the request's share is given back; given back
/// once the agent has read it, while the stream goes on. Over HTTP/1.1 and HTTP/2 to the
/// agent; over HTTP/2 also once the caller has left (the stream to the agent is reset, the
/// copy with it; over HTTP/1.1 the connection goes on writing it until the agent reads or the
/// write waits the response timeout: `an_agent_that_never_reads_the_request_loses_its_connection`).
#[tokio::test]
async fn the_copy_sent_to_the_agent_is_charged_until_the_connection_takes_it() {
    use http_body_util::BodyExt;
    for (http2, leaves) in [(false, false), (true, false), (true, true)] {
        let go = std::sync::Arc::new(tokio::sync::Notify::new());
        let up = match http2 {
            false => RecordingUpstream::start(Reply::Unread(go.clone())).await,
            true => RecordingUpstream::start_h2(Reply::Unread(go.clone())).await,
        };
        let p = Proxy::start(ProxyOpts {
            upstream_url: up.url.clone(),
            extra_upstream: format!("http2 = {http2}\n"),
            extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
            ..Default::default()
        })
        .await;
        let mut c = p.client(Proto::H2).await;
        let (len, req) = a_16_mb_stream_request();
        let mut resp = c.send(req).await;
        assert_eq!(resp.status(), StatusCode::OK, "http2 = {http2}");
        let first = resp.body_mut().frame().await.unwrap().unwrap();
        let first = String::from_utf8_lossy(first.data_ref().unwrap()).to_string();
        assert!(first.contains("t-unread"), "http2 = {http2}: {first}");
        // (the event's own charge is given back as it is relayed: what stays is the copy's,
        // the request as the edge wrote it, a few bytes more than the caller's here)
        let held = request_bytes_held(&p).await;
        assert!(
            (16_000_000..=len as u64 + 1024).contains(&held),
            "http2 = {http2}: {held} held of a {len} byte request"
        );
        if leaves {
            drop(resp);
            let what = format!("http2 = {http2}: the copy's, once the caller has left");
            request_bytes_become(&p, 0, &what).await;
            assert!(up.rpc_requests().is_empty(), "http2 = {http2}: never read");
            continue;
        }
        go.notify_one();
        let deadline = Instant::now() + Duration::from_secs(10);
        while up.rpc_requests().is_empty() {
            assert!(Instant::now() < deadline, "http2 = {http2}: never read");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        request_bytes_become(&p, 0, "the copy's, once the agent has read it").await;
        drop(resp);
    }
}

/// A unary request gives back what it holds of the caller's budget once the agent has it:
/// its body's buffer goes after the parse, its tree once it is written for the agent, and the
/// copy once the connection has taken it, so a turn that takes minutes (here: an agent that
/// never answers) holds nothing of the budget while it runs.
#[tokio::test]
async fn a_request_the_agent_has_holds_none_of_the_budget_while_it_works() {
    let (up, p) = Proxy::with_recorder(
        Reply::Hang,
        ProxyOpts {
            extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(Proto::H2).await;
    let params = serde_json::json!({"message": {"messageId": "m-long", "role": "ROLE_USER",
        "parts": [{"text": "x".repeat(1_000_000)}]}});
    let turn = tokio::spawn(async move {
        send_as(
            &mut c,
            "Bearer test-token-0123456789",
            "SendMessage",
            params,
        )
        .await
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while up.rpc_requests().is_empty() {
        assert!(Instant::now() < deadline, "the agent never had the request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    request_bytes_become(&p, 0, "the request the agent works on").await;
    assert!(!turn.is_finished(), "the turn goes on");
    turn.abort();
}

/// An agent that never reads the rest of a request it has started to answer loses its
/// connection once a write has waited its response timeout (here 3 s; HTTP/1.1): the
/// stream ends with an error event, and the copy's charge goes with the connection.
#[tokio::test]
async fn an_agent_that_never_reads_the_request_loses_its_connection() {
    use http_body_util::BodyExt;
    let go = std::sync::Arc::new(tokio::sync::Notify::new());
    let up = RecordingUpstream::start(Reply::Unread(go.clone())).await;
    let p = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        extra_upstream: "response_timeout_ms = 3000\n".into(),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H2).await;
    let (_, req) = a_16_mb_stream_request();
    let started = Instant::now();
    let resp = c.send(req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        request_bytes_held(&p).await >= 16_000_000,
        "the copy is charged"
    );
    let events = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
        .await
        .expect("the stream ends")
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).to_string())
        .unwrap_or_default();
    assert!(events.contains("t-unread"), "{events}");
    assert!(
        events.contains("\"error\""),
        "ends with an error event: {events}"
    );
    assert!(started.elapsed() >= Duration::from_millis(3000));
    request_bytes_become(&p, 0, "the copy's, with the connection").await;
    assert!(up.rpc_requests().is_empty(), "the agent never read it");
}

/// A task the agent made for a caller whose answer does not fit what the caller's other
/// requests leave of its request budget (-32603 `concurrency.request_bytes`) is still that
/// caller's: learned from the answer's projection, which holds nothing of the budget, so that
/// once the budget has room the caller lists the task and reads it (its GetTask reaches the
/// agent), and another caller still cannot (never forwarded). Whichever step of the answer is
/// refused: its written copy (a 60 KB task the fast pass takes, beside 330 KB held), its tree
/// (a 2 KB task whose metadata needs the full pass, 950 values reckoned 189 KB, beside 300 KB
/// held), one stream event's text (an 80 KB event, its text and data 160 KB) or its tree.
#[tokio::test]
async fn a_task_its_busy_caller_cannot_be_given_is_still_its_own() {
    fn task(id: &str, extra: &str) -> String {
        format!(
            r#"{{"id":"{id}","contextId":"ctx-{id}","status":{{"state":"TASK_STATE_WORKING"}}{extra}}}"#
        )
    }
    let text = format!(
        r#","artifacts":[{{"artifactId":"a","parts":[{{"text":"{}"}}]}}]"#,
        "x".repeat(60_000)
    );
    let values = format!(
        r#","metadata":{{"{}":{:?}}}"#,
        "k".repeat(300),
        vec![0; 950]
    );
    let event = |t: String| -> &'static str {
        Box::leak(
            format!("data: {{\"jsonrpc\":\"2.0\",\"id\":{{id}},\"result\":{{\"task\":{t}}}}}\n\n")
                .into_boxed_str(),
        )
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let long_text = text.replace(&"x".repeat(60_000), &"x".repeat(80_000));
    // (case, the agent's answer, the task's id, the method, whether the answer is an SSE
    // stream, bytes alice's other requests hold)
    let send = "SendMessage";
    let stream = "SendStreamingMessage";
    type Row<'a> = (&'a str, Reply, &'a str, &'a str, bool, Vec<usize>);
    let rows: Vec<Row> = vec![
        (
            "the copy",
            Reply::Task(leak(task("t-copy", &text))),
            "t-copy",
            send,
            false,
            vec![99_999, 99_999, 99_999, 30_000],
        ),
        (
            "the tree",
            Reply::Task(leak(task("t-tree", &values))),
            "t-tree",
            send,
            false,
            vec![99_999; 3],
        ),
        // (an agent's one JSON answer to a stream: refused as JSON, as the edge's refusals
        // of streams are)
        (
            "a streamed answer's tree",
            Reply::Task(leak(task("t-one", &values))),
            "t-one",
            stream,
            false,
            vec![99_999; 3],
        ),
        (
            "an event's text",
            Reply::RawStream(event(task("t-text", &long_text))),
            "t-text",
            stream,
            true,
            vec![99_999; 3],
        ),
        (
            "an event's tree",
            Reply::RawStream(event(task("t-event", &values))),
            "t-event",
            stream,
            true,
            vec![99_999; 3],
        ),
        // (a small event and a 20 KB one in the agent's first chunk, about 5 KB left: the
        // small one is learned, though it and what follows it do not fit)
        (
            "an event before a large one",
            Reply::RawStream(leak(format!(
                "{}{}",
                event(task("t-first", "")),
                event(task(
                    "t-first",
                    &text.replace(&"x".repeat(60_000), &"x".repeat(20_000))
                ))
            ))),
            "t-first",
            stream,
            true,
            vec![99_999, 99_999, 99_999, 99_999, 15_000],
        ),
    ];
    let alice = "Bearer test-token-0123456789";
    // With the state in Redis, what was learned is read through another replica.
    let redis = RedisServer::start();
    std::env::set_var(
        "A2A_EDGE_TEST_BUSY_SECRET",
        "a-page-token-secret-of-at-least-32-bytes",
    );
    let rows = [false, true]
        .into_iter()
        .flat_map(|shared| rows.iter().map(move |row| (shared, row)));
    for (n, (shared, (case, reply, id, method, sse, holds))) in rows.enumerate() {
        let (case, id, method, sse) = (&format!("{case}, {n}"), *id, *method, *sse);
        // (an agent that answers GetTask and ListTasks' reads with the task)
        let reads = matches!(reply, Reply::Task(_));
        let state = match shared {
            false => String::new(),
            true => format!("[state]\nbackend = \"redis\"\nredis_url = \"{}\"\nkey_prefix = \"b{n}:\"\ntimeout_ms = 1000\npage_token_secret_env = \"A2A_EDGE_TEST_BUSY_SECRET\"\n", redis.url()),
        };
        let opts = || {
            let mut o = budgeted();
            o.extra_policy.push_str(&state);
            o
        };
        let (up, p) = Proxy::with_recorder(reply.clone(), opts()).await;
        let other = match shared {
            false => None,
            true => Some(
                Proxy::start(ProxyOpts {
                    upstream_url: up.url.clone(),
                    ..opts()
                })
                .await,
            ),
        };
        let mut held = Vec::new();
        for &sent in holds {
            // (each body declares one byte more than it sends: it holds what it sent)
            held.push(holding(&p, alice, sent + 1, sent).await);
        }
        let mut c = p.client(Proto::H2).await;
        let message = serde_json::json!({"message": {"messageId": format!("m-{id}"),
            "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
        let v = match sse {
            false => send_as(&mut c, alice, method, message).await,
            true => {
                let mut events = EventReader::new(c.rpc_stream(method, message).await)
                    .rest()
                    .await;
                let (kind, last) = events.pop().expect("an event");
                assert_eq!(kind.as_deref(), Some("error"), "{case}: {last}");
                // (before it, only what fitted)
                assert!(
                    events.iter().all(|(k, _)| k.is_none()),
                    "{case}: {events:?}"
                );
                last
            }
        };
        assert_eq!(v["error"]["code"], -32603, "{case}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "concurrency.request_bytes",
            "{case}: {v}"
        );
        drop(held);
        request_bytes_become(&p, 0, case).await;
        let p = other.as_ref().unwrap_or(&p);
        let mut c = p.client(Proto::H2).await;
        let reached = |id: &str| {
            up.rpc_requests()
                .iter()
                .filter(|r| {
                    let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                    v["method"] == "GetTask" && v["params"]["id"] == id
                })
                .count()
        };
        let get = serde_json::json!({"id": id});
        let v = send_as(&mut c, OTHER_TOKEN, "GetTask", get.clone()).await;
        assert_eq!(v["error"]["code"], -32001, "{case}: another caller's: {v}");
        assert_eq!(
            reached(id),
            0,
            "{case}: another caller's GetTask was forwarded"
        );
        let v = send_as(&mut c, alice, "GetTask", get).await;
        assert_eq!(
            reached(id),
            1,
            "{case}: alice's GetTask never reached the agent: {v}"
        );
        if reads {
            assert_eq!(v["result"]["id"], id, "{case}: {v}");
            let v = send_as(&mut c, alice, "ListTasks", serde_json::json!({})).await;
            assert_eq!(v["result"]["tasks"][0]["id"], id, "{case}: {v}");
        }
    }
}

/// An answer refused for its caller's busy request budget that names another caller's task
/// is refused for that (`upstream.foreign_task`, as it would be with room for it), not for
/// the budget, and teaches nothing: the task stays its owner's.
#[tokio::test]
async fn an_unrelayed_answer_naming_another_callers_task_says_so() {
    let task = r#"{"id":"t-bobs","contextId":"ctx-bobs","status":{"state":"TASK_STATE_WORKING"},"metadata":{"KEY":[VALUES]}}"#;
    let task: &'static str = Box::leak(
        task.replace("KEY", &"k".repeat(300))
            .replace("VALUES", &vec!["0"; 950].join(","))
            .into_boxed_str(),
    );
    let (up, p) = Proxy::with_recorder(Reply::Task(task), budgeted()).await;
    let alice = "Bearer test-token-0123456789";
    let mut c = p.client(Proto::H2).await;
    let message = |n: &str| serde_json::json!({"message": {"messageId": n, "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    let v = send_as(&mut c, OTHER_TOKEN, "SendMessage", message("m-1")).await;
    assert_eq!(v["result"]["task"]["id"], "t-bobs", "{v}");
    // Alice's other requests leave less than the answer's tree (189 KB reckoned).
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(holding(&p, alice, 100_000, 99_999).await);
    }
    let v = send_as(&mut c, alice, "SendMessage", message("m-2")).await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.foreign_task",
        "{v}"
    );
    drop(held);
    request_bytes_become(&p, 0, "the held bodies").await;
    let get = serde_json::json!({"id": "t-bobs"});
    let v = send_as(&mut c, alice, "GetTask", get.clone()).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = send_as(&mut c, OTHER_TOKEN, "GetTask", get).await;
    assert_eq!(v["result"]["id"], "t-bobs", "{v}");
    assert_eq!(
        up.rpc_requests().len(),
        3,
        "alice's GetTask never reached the agent"
    );
}

/// Behind a trusted proxy that writes `X-Forwarded-For`, a guesser adds a `Forwarded` header
/// of its own that disagrees. With `network.client_address_header = "x-forwarded-for"` that
/// header is never read: the guesser is counted as itself, blocked after its failures
/// whatever it adds, and the proxy's own address (its health checks) keeps its budget.
/// Unnamed, both headers are read and must agree: the disagreeing guesses are counted as the
/// proxy, whose own requests are then blocked (the risk the setting removes).
#[tokio::test]
async fn a_forged_forwarded_header_buys_no_second_budget_when_the_header_is_named() {
    for named in [true, false] {
        let header = if named {
            "client_address_header = \"x-forwarded-for\"\n"
        } else {
            ""
        };
        let p = Proxy::start(ProxyOpts {
            extra_auth: "failures_per_minute = 1\nfailures_burst = 3\n".into(),
            extra_policy: format!("[network]\ntrusted_proxies = [\"127.0.0.1/32\"]\n{header}"),
            ..Default::default()
        })
        .await;
        let mut c = p.client(Proto::H2).await;
        let mut statuses = Vec::new();
        for forwarded in ["for=unknown", "for=198.51.100.7", "for=\"broken", "for=_x"] {
            for _ in 0..2 {
                let mut headers = h("Bearer wrong");
                headers.push(("x-forwarded-for", "192.0.2.9"));
                headers.push(("forwarded", forwarded));
                statuses.push(c.request("POST", "/", &headers, BODY).await.0);
            }
        }
        // The proxy's own request (a health check through it, a client it cannot name).
        let (proxy_own, _, body) = c
            .request("POST", "/", &h("Bearer test-token-0123456789"), BODY)
            .await;
        let body = String::from_utf8_lossy(&body);
        let throttled = statuses
            .iter()
            .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
            .count();
        if named {
            assert_eq!(throttled, 5, "the guesser is one client: {statuses:?}");
            assert_eq!(proxy_own, StatusCode::OK, "{body}");
            // The guesser's address stays blocked, without any Forwarded header too.
            let mut headers = h("Bearer test-token-0123456789");
            headers.push(("x-forwarded-for", "192.0.2.9"));
            let (status, _, body) = c.request("POST", "/", &headers, BODY).await;
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
            assert!(String::from_utf8_lossy(&body).contains("auth.throttled"));
        } else {
            assert_eq!(throttled, 5, "counted as the proxy: {statuses:?}");
            assert_eq!(proxy_own, StatusCode::TOO_MANY_REQUESTS, "{body}");
            assert!(body.contains("auth.throttled"), "{body}");
        }
    }
}
