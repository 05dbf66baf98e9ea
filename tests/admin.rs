//! The admin listener (`server.admin_listen`): `/metrics` counts what the public listener did
//! by low-cardinality labels only, `/ready` says 503 with reasons when the edge cannot serve
//! (no healthy agent, draining), and nothing of it is reachable on the public listener.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ADMIN: &str = "admin_listen = \"127.0.0.1:0\"\n";

/// One plain-HTTP/1.1 request to the admin listener: status, content type, body.
async fn admin(addr: SocketAddr, method: &str, path: &str) -> (StatusCode, String, String) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "admin")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, ct, String::from_utf8(body.to_vec()).unwrap())
}

/// Polls `/ready` until it answers `want`, for at most `within`; returns the body.
async fn ready_until(addr: SocketAddr, want: StatusCode, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (status, _, body) = admin(addr, "GET", "/ready").await;
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/ready is {status}, not {want}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A proxy with the default test policy and an admin listener.
/// The admin listener's metrics once `counted` holds of them, or the last ones after 5 s
/// (the caller asserts: a count may lag the answer that caused it).
async fn metrics_when(addr: SocketAddr, counted: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, _, text) = admin(addr, "GET", "/metrics").await;
        if counted(&text) || Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn with_admin() -> Proxy {
    Proxy::start(ProxyOpts {
        extra_server: ADMIN.into(),
        ..Default::default()
    })
    .await
}

fn admin_addr(p: &Proxy) -> SocketAddr {
    p.running.as_ref().unwrap().admin_addr.unwrap()
}

/// The value of one sample line `name{labels} value`, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

fn send_message(text: &str) -> Value {
    json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}})
}

#[tokio::test]
async fn metrics_count_requests_by_route_method_status_and_reason() {
    let proxy = with_admin().await;
    let addr = admin_addr(&proxy);
    let mut c = proxy.client(Proto::H2).await;
    for _ in 0..2 {
        let v = c.rpc("SendMessage", send_message("hello")).await;
        assert!(v.get("result").is_some(), "{v}");
    }
    // A part with a media type outside the policy: refused by validation.
    let v = c
        .rpc(
            "SendMessage",
            json!({"message": {"messageId": "m-2", "role": "ROLE_USER",
                "parts": [{"raw": "AAAA", "mediaType": "application/x-msdownload"}]}}),
        )
        .await;
    let refused = v["error"]["data"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    // No credential: 401 before the body is read.
    let (status, _, _) = c
        .request(
            "POST",
            "/",
            &[("content-type", "application/json"), ("a2a-version", "1.0")],
            "{}",
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = c.request("GET", "/nowhere", &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A client that is no TLS client at all.
    let mut raw = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    drop(raw);

    // The log line of a request is written before its response; the TLS failure may lag.
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let (status, ct, text) = admin(addr, "GET", "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            ct,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        if sample(
            &text,
            "a2a_edge_connections_total{outcome=\"tls.handshake_failed\"}",
        ) >= 1.0
            || Instant::now() > deadline
        {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ok = "a2a_edge_requests_total{route=\"rpc\",method=\"SendMessage\",status=\"200\",reason=\"ok\"}";
    assert_eq!(sample(&text, ok), 2.0, "{text}");
    let bad = format!("a2a_edge_requests_total{{route=\"rpc\",method=\"SendMessage\",status=\"200\",reason=\"{refused}\"}}");
    assert_eq!(sample(&text, &bad), 1.0, "{text}");
    let unauth =
        "a2a_edge_requests_total{route=\"rpc\",method=\"\",status=\"401\",reason=\"auth.missing\"}";
    assert_eq!(sample(&text, unauth), 1.0, "{text}");
    let nf = "a2a_edge_requests_total{route=\"not_found\",method=\"\",status=\"404\",reason=\"route.not_found\"}";
    assert_eq!(sample(&text, nf), 1.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "a2a_edge_request_duration_seconds_count{route=\"rpc\"}"
        ),
        4.0
    );
    assert!(sample(&text, "a2a_edge_connections_total{outcome=\"accepted\"}") >= 2.0);
    assert_eq!(
        sample(
            &text,
            "a2a_edge_connections_total{outcome=\"tls.handshake_failed\"}"
        ),
        1.0,
        "{text}"
    );
    assert!(sample(&text, "a2a_edge_connections_open") >= 1.0);
    assert_eq!(
        sample(&text, "a2a_edge_upstream_healthy{upstream=\"agent-1\"}"),
        1.0
    );
    assert_eq!(sample(&text, "a2a_edge_card_published"), 1.0);
    assert!(sample(&text, "a2a_edge_registry_entries{kind=\"contexts\"}") >= 1.0);
    // Labels are codes: no caller, address, token, path or message text.
    for leak in [
        "tester",
        "127.0.0.1",
        TOKEN,
        "hello",
        "/nowhere",
        "x-msdownload",
    ] {
        assert!(!text.contains(leak), "{leak} in metrics:\n{text}");
    }
}

#[tokio::test]
async fn admin_routes_are_only_on_the_admin_listener() {
    let proxy = with_admin().await;
    let addr = admin_addr(&proxy);
    let mut c = proxy.client(Proto::H1).await;
    for path in ["/metrics", "/ready"] {
        let (status, _, _) = c.request("GET", path, &[], "").await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{path} on the public listener"
        );
    }
    let cases = [
        ("GET", "/health", StatusCode::OK),
        ("GET", "/ready", StatusCode::OK),
        ("HEAD", "/metrics", StatusCode::OK),
        ("POST", "/metrics", StatusCode::METHOD_NOT_ALLOWED),
        ("GET", "/", StatusCode::NOT_FOUND),
        ("GET", "/.well-known/agent-card.json", StatusCode::NOT_FOUND),
        ("GET", "/metrics/../ready", StatusCode::NOT_FOUND),
    ];
    for (method, path, want) in cases {
        let (status, _, body) = admin(addr, method, path).await;
        assert_eq!(status, want, "{method} {path}: {body}");
        if method == "HEAD" {
            assert!(body.is_empty());
        }
    }
    let (_, ct, body) = admin(addr, "GET", "/ready").await;
    assert_eq!(ct, "application/json");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({"status": "ready", "reasons": [], "upstreams": {"healthy": 1, "total": 1}, "card_published": true})
    );
}

/// The admin listener's 64 connections cannot be held: connections idle after their answer,
/// connections that never send a request, and connections that ask for `/metrics` over and
/// over without reading the answers are each closed, so the balancer's next probe is
/// answered.
#[tokio::test]
async fn connections_that_hold_the_admin_listener_are_closed() {
    let proxy = with_admin().await;
    let addr = admin_addr(&proxy);
    for kind in ["idle after an answer", "silent", "never reads"] {
        let mut held = Vec::new();
        for _ in 0..64 {
            // A small receive window: with the admin listener's fixed send buffer, a few
            // dozen answers fill what the kernels hold for a peer that never reads. (The
            // proxy runs on this test's one thread; tens of thousands of /metrics answers
            // into autotuned megabytes starved its timers, and the slots freed "early".)
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            let mut tcp = socket.connect(addr).await.unwrap();
            match kind {
                "idle after an answer" => {
                    tcp.write_all(b"GET /health HTTP/1.1\r\nhost: admin\r\n\r\n")
                        .await
                        .unwrap();
                    let mut buf = [0u8; 512];
                    let n = tcp.read(&mut buf).await.unwrap();
                    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "keep-alive answer");
                }
                "never reads" => {
                    let asks = b"GET /metrics HTTP/1.1\r\nhost: admin\r\n\r\n".repeat(4000);
                    tokio::spawn(async move {
                        let _ = tcp.write_all(&asks).await;
                        tokio::time::sleep(Duration::from_secs(120)).await;
                        drop(tcp);
                    });
                    continue;
                }
                _ => {}
            }
            held.push(tcp);
        }
        // Every slot is taken: a probe now is turned away (closed unanswered).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut probe = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = probe
            .write_all(b"GET /ready HTTP/1.1\r\nhost: admin\r\n\r\n")
            .await;
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(1), probe.read_to_end(&mut buf)).await;
        assert!(
            buf.is_empty(),
            "{kind}: the slots were full, yet a probe was answered"
        );
        // They are closed within the admin timeouts, and the probe is answered again.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut probe = tokio::net::TcpStream::connect(addr).await.unwrap();
            let _ = probe
                .write_all(b"GET /ready HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n")
                .await;
            let mut buf = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(2), probe.read_to_end(&mut buf)).await;
            if buf.starts_with(b"HTTP/1.1 200") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{kind}: the admin listener stayed full"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        for mut tcp in held {
            let mut buf = [0u8; 64];
            let n = tokio::time::timeout(Duration::from_secs(1), tcp.read(&mut buf))
                .await
                .expect("the held connection was closed")
                .unwrap_or(0);
            assert_eq!(n, 0, "{kind}: a held connection is closed");
        }
    }
}

#[tokio::test]
async fn ready_is_503_when_no_agent_is_healthy() {
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: closed_port_url().await,
        extra_server: ADMIN.into(),
        extra_upstream: "health_interval_ms = 100\nunhealthy_threshold = 1\n".into(),
        ..Default::default()
    })
    .await;
    let addr = admin_addr(&proxy);
    let body = ready_until(
        addr,
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_secs(10),
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "not_ready");
    let reasons = v["reasons"].as_array().unwrap();
    assert!(reasons.contains(&json!("upstream.none_healthy")), "{v}");
    // The agent never answered, so no card could be fetched either.
    assert!(reasons.contains(&json!("card.unavailable")), "{v}");
    assert_eq!(v["upstreams"], json!({"healthy": 0, "total": 1}));
    let (_, _, text) = admin(addr, "GET", "/metrics").await;
    assert_eq!(
        sample(&text, "a2a_edge_upstream_healthy{upstream=\"agent-1\"}"),
        0.0
    );
    assert!(sample(&text, "a2a_edge_card_refresh_failures_total") >= 1.0);
}

#[tokio::test]
async fn ready_turns_503_while_draining_and_the_admin_listener_stops_after() {
    let mut proxy = with_admin().await;
    let addr = admin_addr(&proxy);
    assert_eq!(admin(addr, "GET", "/ready").await.0, StatusCode::OK);
    let mut c = proxy.client(Proto::H1).await;
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            send_message("[[slow:300]] [[chunks:5]] draining"),
        )
        .await;
    let mut events = EventReader::new(resp);
    assert!(events.next().await.is_some());
    let running = proxy.running.take().unwrap();
    running.shutdown();
    // While the stream drains, the edge says it is not ready (balancers take it out).
    let body = ready_until(
        addr,
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_secs(5),
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["reasons"], json!(["server.draining"]));
    let (_, _, text) = admin(addr, "GET", "/metrics").await;
    assert_eq!(sample(&text, "a2a_edge_draining"), 1.0);
    // The stream still completes, then the process's listeners are gone.
    let rest = events.rest().await;
    assert!(rest.iter().all(|(name, _)| name.is_none()), "{rest:?}");
    running.wait().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn metrics_count_policy_reloads() {
    let proxy = with_admin().await;
    let addr = admin_addr(&proxy);
    // The same policy without the admin listener: applied, except what only a restart can
    // change, which the reload names.
    let ignored = proxy
        .reload(&policy_text(proxy.dir.path(), &ProxyOpts::default()))
        .await;
    assert_eq!(ignored, ["server.admin_listen"]);
    let changed = policy_text(
        proxy.dir.path(),
        &ProxyOpts {
            extra_server: ADMIN.into(),
            extra_policy: "[limits]\nidle_timeout_ms = 5000\nmax_registry_entries = 10\nmax_in_flight_per_principal = 3\n".into(),
            ..Default::default()
        },
    );
    let ignored = proxy.reload(&changed).await;
    assert_eq!(
        ignored,
        ["limits.idle_timeout_ms", "limits.max_registry_entries"],
        "max_in_flight_per_principal is applied by a reload, the others are not"
    );
    let (_, _, text) = admin(addr, "GET", "/metrics").await;
    assert_eq!(
        sample(&text, "a2a_edge_policy_reloads_total{result=\"ok\"}"),
        2.0
    );
    assert_eq!(
        sample(&text, "a2a_edge_policy_reloads_total{result=\"refused\"}"),
        0.0
    );
    // The admin listener stays where it was (the reloaded policy has none: listeners are
    // fixed at start) and keeps counting.
    assert_eq!(admin(addr, "GET", "/ready").await.0, StatusCode::OK);
}

#[tokio::test]
async fn registry_evictions_are_counted_for_alerting() {
    let proxy = Proxy::start(ProxyOpts {
        extra_server: ADMIN.into(),
        extra_policy: "[limits]\nmax_registry_entries = 2\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H1).await;
    for i in 0..5 {
        let v = c
            .rpc(
                "SendMessage",
                json!({"message": {"messageId": format!("m-{i}"), "role": "ROLE_USER",
                    "contextId": format!("ctx-{i}"), "parts": [{"text": "[[complete]] hi"}]}}),
            )
            .await;
        assert!(v.get("result").is_some(), "{v}");
    }
    let (_, _, text) = admin(admin_addr(&proxy), "GET", "/metrics").await;
    assert_eq!(
        sample(&text, "a2a_edge_registry_entries{kind=\"contexts\"}"),
        2.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "a2a_edge_registry_evictions_total{kind=\"contexts\"}"
        ),
        3.0,
        "{text}"
    );
    assert!(sample(&text, "a2a_edge_registry_evictions_total{kind=\"tasks\"}") >= 3.0);
}

#[tokio::test]
async fn streams_are_counted_by_how_they_end() {
    let proxy = with_admin().await;
    let addr = admin_addr(&proxy);
    let mut c = proxy.client(Proto::H2).await;
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            send_message("[[chunks:3]] to the end"),
        )
        .await;
    let events = EventReader::new(resp).rest().await;
    assert!(events.len() >= 3, "{events:?}");
    // A caller that leaves in the middle.
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            json!({"message": {"messageId": "m-2", "role": "ROLE_USER",
                "parts": [{"text": "[[slow:100]] [[chunks:50]] long"}]}}),
        )
        .await;
    let mut reader = EventReader::new(resp);
    assert!(reader.next().await.is_some());
    let (_, _, text) = admin(addr, "GET", "/metrics").await;
    assert_eq!(sample(&text, "a2a_edge_streams_open"), 1.0, "{text}");
    drop(reader);
    let gone = "a2a_edge_streams_total{outcome=\"client_gone\"}";
    // (The relay closes a stream in the gauge before counting it ended; both are waited for
    // all the same.)
    let text = metrics_when(addr, |t| {
        sample(t, gone) >= 1.0 && sample(t, "a2a_edge_streams_open") == 0.0
    })
    .await;
    assert!(
        sample(&text, gone) >= 1.0,
        "client_gone never counted:\n{text}"
    );
    assert_eq!(
        sample(&text, "a2a_edge_streams_total{outcome=\"completed\"}"),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "a2a_edge_streams_open"), 0.0, "{text}");
}

/// A caller that leaves while its stream waits for the principal's shared buffer budget
/// (another of its streams, unread, holds all of it) ends that stream at once: its slot
/// and its agent's stream are not kept until the idle timeout (8 s here).
#[tokio::test]
async fn a_caller_that_leaves_while_its_stream_waits_for_the_shared_budget_ends_it() {
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (_up, proxy) = Proxy::with_recorder(
        Reply::Flood(closed),
        ProxyOpts {
            extra_server: ADMIN.into(),
            extra_policy: "[limits]\nstream_idle_timeout_ms = 8000\nstream_keepalive_ms = 200\nstream_buffer_bytes = 4096\nstream_buffer_bytes_per_principal = 8192\n".into(),
            ..Default::default()
        },
    )
    .await;
    let addr = admin_addr(&proxy);
    // The first stream, never read: its queued events take the whole shared budget.
    let mut first = proxy.client(Proto::H2).await;
    let unread = first
        .rpc_stream("SendStreamingMessage", send_message("unread"))
        .await;
    assert_eq!(unread.status(), 200);
    // The second waits for that budget, and its caller leaves.
    let mut second = proxy.client(Proto::H1).await;
    let waiting = second
        .rpc_stream("SendStreamingMessage", send_message("waiting"))
        .await;
    assert_eq!(waiting.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, _, text) = admin(addr, "GET", "/metrics").await;
    assert_eq!(sample(&text, "a2a_edge_streams_open"), 2.0, "{text}");
    let left = Instant::now();
    drop(waiting);
    drop(second);
    let gone = "a2a_edge_streams_total{outcome=\"client_gone\"}";
    // (The relay closes a stream in the gauge before counting it ended; both are waited for
    // all the same.)
    let text = metrics_when(addr, |t| {
        sample(t, gone) >= 1.0 && sample(t, "a2a_edge_streams_open") == 1.0
    })
    .await;
    assert!(
        sample(&text, gone) >= 1.0,
        "client_gone never counted:\n{text}"
    );
    // Well before the 8 s idle timeout would have ended it.
    assert!(
        left.elapsed() < Duration::from_secs(5),
        "{:?}\n{text}",
        left.elapsed()
    );
    assert_eq!(sample(&text, "a2a_edge_streams_open"), 1.0, "{text}");
    drop(unread);
}

#[tokio::test]
async fn a_caller_that_hangs_up_leaves_no_request_in_flight() {
    // The agent never answers; six callers (HTTP/1.1 and HTTP/2) wait, then hang up.
    let (up, p) = Proxy::with_recorder(
        Reply::Hang,
        ProxyOpts {
            extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
            ..Default::default()
        },
    )
    .await;
    let mut calls = Vec::new();
    for proto in PROTOS {
        for _ in 0..3 {
            let mut c = p.client(proto).await;
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_message("hang")}).to_string();
            calls.push(tokio::spawn(async move {
                c.request("POST", "/", &rpc_headers(), body).await
            }));
        }
    }
    let series = "a2a_edge_upstream_in_flight{upstream=\"agent-1\"}";
    let gauge_reaches = |want: f64| {
        let p = &p;
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let (_, text) = admin_get(p, "/metrics").await;
                if text.contains(&format!("{series} {want}")) {
                    return;
                }
                assert!(Instant::now() < deadline, "{series} never {want}: {text}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    gauge_reaches(6.0).await;
    // The gauge counts a request once the edge has sent it; the agent records it once it has
    // read it, a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    while up.rpc_requests().len() < 6 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        up.rpc_requests().len(),
        6,
        "every request reached the agent"
    );
    for call in calls {
        call.abort();
    }
    // The gauge (which the fleet's choice of the least busy agent reads) falls back to 0.
    gauge_reaches(0.0).await;
}

/// Without ALPN the edge tells HTTP/2 from HTTP/1.1 by the first bytes: a connection that
/// sends nothing, part of HTTP/2's preface, or the whole preface and then nothing, is closed
/// by the first-request timeout and counted as such (and so is an HTTP/2 one by ALPN); one
/// that starts HTTP/1.1 is served.
#[tokio::test]
async fn a_connection_without_alpn_that_starts_no_request_is_closed_and_counted() {
    let proxy = Proxy::start(ProxyOpts {
        extra_server: ADMIN.into(),
        extra_policy: "[limits]\nheader_read_timeout_ms = 400\n".into(),
        ..Default::default()
    })
    .await;
    let addr = admin_addr(&proxy);
    let preface: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // (ALPN offered, first bytes): HTTP/2's graceful close waits for the peer's answer to a
    // PING, which a silent peer never sends; the edge does not wait for it past the timeout.
    let none: &[&[u8]] = &[];
    let h2: &[&[u8]] = &[b"h2"];
    let silent = [
        (none, &b""[..]),
        (none, b"PRI * HTTP"),
        (none, preface),
        (h2, b""),
        (h2, preface),
    ];
    for (alpn, first) in silent {
        let mut s = proxy.raw_tls_offering(alpn).await;
        assert_eq!(s.get_ref().1.alpn_protocol(), alpn.first().copied());
        s.write_all(first).await.unwrap();
        s.flush().await.unwrap();
        let started = Instant::now();
        let mut buf = Vec::new();
        // Closed by the 400 ms timer: without it, nothing else would close the connection
        // within 10 s (HTTP/2's keep-alive pings are 30 s apart).
        let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "{alpn:?} {first:?}: still open after 10 s");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{alpn:?} {first:?}: closed after {:?}",
            started.elapsed()
        );
    }
    let series = "a2a_edge_connections_total{outcome=\"first_request_timeout\"}";
    let text = metrics_when(addr, |t| sample(t, series) == 5.0).await;
    assert_eq!(sample(&text, series), 5.0, "{text}");
    // HTTP/1.1 without ALPN, its first bytes split: served.
    let mut s = proxy.raw_tls_offering(&[]).await;
    s.write_all(b"GET /hea").await.unwrap();
    s.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(b"lth HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&buf);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#"{"status":"healthy"}"#), "{answer}");
}

/// A TLS handshake that never finishes is counted apart from one that fails.
#[tokio::test]
async fn a_handshake_that_times_out_is_counted_apart_from_one_that_fails() {
    let proxy = Proxy::start(ProxyOpts {
        extra_server: format!("{ADMIN}tls_handshake_timeout_ms = 200\n"),
        ..Default::default()
    })
    .await;
    let addr = admin_addr(&proxy);
    // Silent after connecting: the handshake times out.
    let mut silent = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    // Not TLS at all: the handshake fails.
    let mut plain = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the silent connection was not closed");
    let series = |o: &str| format!("a2a_edge_connections_total{{outcome=\"{o}\"}}");
    let text = metrics_when(addr, |t| {
        sample(t, &series("tls.handshake_failed")) >= 1.0
            && sample(t, &series("tls.handshake_timeout")) >= 1.0
    })
    .await;
    assert_eq!(
        sample(&text, &series("tls.handshake_timeout")),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, &series("tls.handshake_failed")),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, &series("socket.error")), 0.0, "{text}");
}

/// A stream that can be frozen: from then on it neither reads nor writes, its socket still
/// open (a peer that stopped reading, or whose process hangs).
struct Freezable<T> {
    inner: T,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Freezable<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Freezable<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// On shutdown an HTTP/2 connection with nothing in flight says goodbye (GOAWAY, a PING the
/// peer must answer); a peer that no longer reads never answers. It is dropped once the
/// connection has had nothing to do for the header-read timeout, not held until the drain
/// timeout; a connection still serving a stream is not (the drain test above).
#[tokio::test]
async fn shutdown_drops_an_idle_http2_peer_that_stopped_reading() {
    let mut proxy = Proxy::start(ProxyOpts {
        extra_server: "drain_timeout_ms = 60000\n".into(),
        extra_policy: "[limits]\nheader_read_timeout_ms = 300\n".into(),
        ..Default::default()
    })
    .await;
    let cfg = a2a_edge::tls::client_config(&proxy.ca, &[b"h2"]).unwrap();
    let tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .unwrap();
    let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let io = TokioIo::new(Freezable {
        inner: tls,
        frozen: frozen.clone(),
    });
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    tokio::spawn(conn);
    // Used: one request answered over it.
    let req = Request::get("https://localhost/health")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body().collect().await.unwrap();
    frozen.store(true, std::sync::atomic::Ordering::SeqCst);

    let running = proxy.running.take().unwrap();
    running.shutdown();
    // Well before the 60 s drain timeout (the header-read timeout is 0.3 s).
    tokio::time::timeout(Duration::from_secs(15), running.wait())
        .await
        .expect("the silent peer held the drain");
}
