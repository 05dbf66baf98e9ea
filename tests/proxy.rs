//! The walking skeleton end to end: the proxy over real TLS (HTTP/1.1 and HTTP/2) in front of
//! the embedded engine, a standalone engine, or a recording upstream.

mod common;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};

fn message(text: &str) -> Value {
    json!({"message": {"messageId": format!("m-{}", a2a_edge::policy::random_token()), "role": "ROLE_USER", "parts": [{"text": text}]}})
}

#[tokio::test]
async fn alpn_negotiates_both_protocols_and_health_needs_no_auth() {
    let proxy = Proxy::start(ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let want: &[u8] = if proto == Proto::H1 {
            b"http/1.1"
        } else {
            b"h2"
        };
        assert_eq!(c.alpn.as_deref(), Some(want));
        let (status, headers, body) = c.request("GET", "/health", &[], "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(body, r#"{"status":"healthy"}"#);
    }
}

/// A client that offers no ALPN has its protocol sniffed from its first bytes; one whose ALPN
/// settled HTTP/1.1 is served HTTP/1.1 only (an HTTP/2 preface there is a bad request).
#[tokio::test]
async fn without_alpn_the_protocol_is_sniffed_and_with_it_the_alpn_protocol_is_served() {
    let proxy = Proxy::start(ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = Client::connect_offering(proxy.addr, &proxy.ca, proto, &[], None)
            .await
            .unwrap();
        assert_eq!(c.alpn, None);
        let (status, _, body) = c.request("GET", "/health", &[], "").await;
        assert_eq!(status, StatusCode::OK, "{proto:?}");
        assert_eq!(body, r#"{"status":"healthy"}"#);
        let answer = c.rpc("SendMessage", message("sniffed")).await;
        assert_eq!(
            answer["result"]["task"]["artifacts"][0]["parts"][1]["text"], " sni",
            "{answer}"
        );
    }
    // HTTP/2 spoken on a connection that settled HTTP/1.1: the handshake or the request fails.
    let c = Client::connect_offering(proxy.addr, &proxy.ca, Proto::H2, &[b"http/1.1"], None).await;
    let served = match c {
        Err(_) => false,
        Ok(mut c) => c.try_request("GET", "/health", &[], "").await.is_ok(),
    };
    assert!(
        !served,
        "an HTTP/2 preface on an HTTP/1.1 connection is not served"
    );
}

#[tokio::test]
async fn card_is_public_and_points_at_the_public_url() {
    let proxy = Proxy::start(ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let (status, headers, body) = c
            .request("GET", "/.well-known/agent-card.json", &[], "")
            .await;
        assert_eq!(status, StatusCode::OK);
        let card: Value = serde_json::from_slice(&body).unwrap();
        let ifaces = card["supportedInterfaces"].as_array().unwrap();
        assert_eq!(ifaces.len(), 1);
        assert_eq!(ifaces[0]["url"], proxy.public_url.as_str());
        assert_eq!(ifaces[0]["protocolBinding"], "JSONRPC");
        assert_eq!(
            card["securitySchemes"]["bearerAuth"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        let len: usize = headers["content-length"].to_str().unwrap().parse().unwrap();
        assert_eq!(len, body.len());
        let (status, headers, body) = c
            .request("HEAD", "/.well-known/agent-card.json", &[], "")
            .await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.is_empty());
        assert_eq!(
            headers["content-length"]
                .to_str()
                .unwrap()
                .parse::<usize>()
                .unwrap(),
            len
        );
    }
}

/// Sends `raw` on a new HTTP/1.1 TLS connection and reads the answer to the end (at most 5 s).
async fn raw_exchange(proxy: &Proxy, raw: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = proxy.raw_tls().await;
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        s.read_to_end(&mut answer),
    )
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The card names the public URL whatever host the request names: an origin-form request
/// whose `Host` (and `X-Forwarded-Host`) name another host gets the same card, never the
/// agent's address nor that host. (A `Host` beside an authority naming another is refused
/// before: `http.host_mismatch`.)
#[tokio::test]
async fn card_from_an_http_upstream_never_leaks_its_address() {
    let (_up, proxy) = Proxy::with_recorder(Reply::Echo, ProxyOpts::default()).await;
    let text = raw_exchange(
        &proxy,
        "GET /.well-known/agent-card.json HTTP/1.1\r\nhost: evil.example\r\n\
         x-forwarded-host: evil.example\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(!text.contains("10.1.2.3"), "{text}");
    assert!(!text.contains("evil.example"), "{text}");
    assert!(text.contains(&proxy.public_url), "{text}");
}

/// A `Host` that names another host than the request's authority (an HTTP/1.1
/// absolute-form target, HTTP/2 `:authority`) is refused 400 `http.host_mismatch` and never
/// reaches the agent: the edge routes by the authority, a component reading `Host` could
/// take it for another host's. The same host in other letter case, or a `Host` alone, is
/// served.
#[tokio::test]
async fn a_host_naming_another_authority_is_refused() {
    const SEND: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#;
    let (up, proxy) = Proxy::with_recorder(Reply::Echo, ProxyOpts::default()).await;
    // (target, Host header lines, served)
    let h1: [(&str, &str, bool); 11] = [
        ("https://localhost/", "host: evil.example\r\n", false),
        ("https://localhost/", "host: localhost:8443\r\n", false),
        ("https://localhost:8443/", "host: localhost\r\n", false),
        ("https://localhost/", "host: localhost.\r\n", false),
        ("https://localhost/", "host: localhost:443\r\n", true),
        (
            "https://localhost/",
            "host: localhost\r\nhost: evil.example\r\n",
            false,
        ),
        ("https://localhost/", "host: user@localhost\r\n", false),
        ("https://localhost:443/", "host: localhost\r\n", true),
        ("https://localhost/", "host: LocalHost\r\n", true),
        ("https://localhost/", "host: localhost\r\n", true),
        ("/", "host: evil.example\r\n", true),
    ];
    let mut served = 0;
    for (target, hosts, ok) in h1 {
        let head = format!(
            "POST {target} HTTP/1.1\r\n{hosts}authorization: Bearer test-token-0123456789\r\n\
             content-type: application/json\r\na2a-version: 1.0\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{SEND}",
            SEND.len()
        );
        let text = raw_exchange(&proxy, &head).await;
        if ok {
            served += 1;
            assert!(
                text.starts_with("HTTP/1.1 200"),
                "{target} {hosts:?}: {text}"
            );
        } else {
            assert!(
                text.starts_with("HTTP/1.1 400"),
                "{target} {hosts:?}: {text}"
            );
            assert!(text.contains("http.host_mismatch"), "{text}");
            assert!(text.contains("connection: close"), "{text}");
        }
        assert_eq!(up.rpc_requests().len(), served, "{target} {hosts:?}");
    }
    let mut c = proxy.client(Proto::H2).await;
    for (host, ok) in [("evil.example", false), ("localhost", true)] {
        let mut headers = rpc_headers();
        headers.push(("host", host));
        let (status, _, body) = c.request("POST", "/", &headers, SEND).await;
        if ok {
            served += 1;
            assert_eq!(status, StatusCode::OK, "h2 {host}");
        } else {
            assert_eq!(status, StatusCode::BAD_REQUEST, "h2 {host}");
            assert!(String::from_utf8_lossy(&body).contains("http.host_mismatch"));
        }
        assert_eq!(up.rpc_requests().len(), served, "h2 {host}");
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_get_json_errors() {
    let proxy = Proxy::start(ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let cases: &[(&str, &str, StatusCode, Option<&str>)] = &[
            ("GET", "/nope", StatusCode::NOT_FOUND, None),
            ("GET", "/iac-code/readiness", StatusCode::NOT_FOUND, None),
            ("POST", "/message:send", StatusCode::NOT_FOUND, None),
            ("GET", "/", StatusCode::METHOD_NOT_ALLOWED, Some("POST")),
            (
                "DELETE",
                "/health",
                StatusCode::METHOD_NOT_ALLOWED,
                Some("GET, HEAD"),
            ),
            (
                "POST",
                "/.well-known/agent-card.json",
                StatusCode::METHOD_NOT_ALLOWED,
                Some("GET, HEAD"),
            ),
        ];
        for (m, path, status, allow) in cases {
            let (got, headers, body) = c.request(m, path, &rpc_headers(), "").await;
            assert_eq!(got, *status, "{m} {path}");
            assert_eq!(headers["content-type"], "application/json");
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert!(v["error"].is_string(), "{v}");
            assert_eq!(headers.get("allow").map(|h| h.to_str().unwrap()), *allow);
        }
    }
}

#[tokio::test]
async fn unauthenticated_requests_get_401_and_never_reach_the_agent() {
    let (up, proxy) = Proxy::with_recorder(Reply::Echo, ProxyOpts::default()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string();
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let cases: &[&[(&str, &str)]] = &[
            &[],
            &[("authorization", "Bearer wrong-token")],
            &[("authorization", "Basic dGVzdDp0ZXN0")],
            &[("authorization", "Bearer")],
            &[("authorization", "bearer test-token-0123456789x")],
        ];
        for headers in cases {
            let mut h = headers.to_vec();
            h.push(("a2a-version", "1.0"));
            let (status, rh, rb) = c.request("POST", "/", &h, body.clone()).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{headers:?}");
            assert_eq!(rb, r#"{"error":"Unauthorized"}"#);
            assert!(rh["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer"));
        }
    }
    assert!(up.rpc_requests().is_empty(), "{:?}", up.rpc_requests());
}

#[tokio::test]
async fn body_over_the_cap_is_refused_before_the_agent() {
    let (up, proxy) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: "[a2a]\nmax_body_bytes = 1024\n".into(),
            ..Default::default()
        },
    )
    .await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message(&"x".repeat(2000))}).to_string();
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let (status, headers, body) = c.request("POST", "/", &rpc_headers(), big.clone()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], -32600);
        assert_eq!(v["error"]["data"][0]["reason"], "body.too_large");
        // Over HTTP/1.1 the rest of the body is not read: the connection closes, and says
        // so (as nginx's 413); an HTTP/2 stream is reset alone.
        if proto == Proto::H1 {
            assert_eq!(headers["connection"], "close");
            c = proxy.client(proto).await;
        } else {
            assert!(headers.get("connection").is_none());
        }
        // Exactly at the cap is fine.
        let small =
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("small")})
                .to_string();
        let (status, _, _) = c.request("POST", "/", &rpc_headers(), small).await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(
        up.rpc_requests().len(),
        2,
        "only the small requests arrived"
    );
}

#[tokio::test]
async fn malformed_json_rpc_is_answered_at_the_edge() {
    let (up, proxy) = Proxy::with_recorder(Reply::Echo, ProxyOpts::default()).await;
    let mut c = proxy.client(Proto::H2).await;
    let cases: &[(&str, i64)] = &[
        ("{", -32700),
        ("[]", -32600),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}"#,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#,
            -32602,
        ),
    ];
    for (body, code) in cases {
        let (status, _, rb) = c.request("POST", "/", &rpc_headers(), *body).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert_eq!(v["error"]["code"], *code, "{body}: {v}");
        assert_eq!(v["error"]["data"][0]["domain"], "a2a-protocol.org");
    }
    assert!(up.rpc_requests().is_empty());
}

#[tokio::test]
async fn forwarded_requests_are_sanitized_and_reserialized() {
    std::env::set_var("A2A_EDGE_TEST_UPSTREAM_TOKEN_1", UPSTREAM_TOKEN);
    let (up, proxy) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            upstream_token_env: Some("A2A_EDGE_TEST_UPSTREAM_TOKEN_1"),
            ..Default::default()
        },
    )
    .await;
    let mut c = proxy.client(Proto::H1).await;
    let raw = "{ \"params\" : {\"message\": {\"role\":\"ROLE_USER\", \"messageId\":\"m-1\", \"parts\":[{\"text\":\"hi\"}]}}, \"method\":\"SendMessage\",\n \"id\": 42, \"jsonrpc\":\"2.0\" }";
    let mut h = rpc_headers();
    h.extend([
        ("cookie", "session=caller"),
        ("x-forwarded-for", "6.6.6.6"),
        ("a2a-extensions", "urn:a"),
        ("a2a-extensions", "urn:b"),
        ("x-a2a-edge-principal", "forged"),
        ("connection", "keep-alive, x-custom"),
        ("x-custom", "hop"),
        ("x-request-id", "caller-chosen-id"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        ("tracestate", "rojo=00f067aa0ba902b7"),
    ]);
    let (status, _, body) = c.request("POST", "/", &h, raw).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["id"], 42);
    assert_eq!(v["result"]["message"]["parts"][0]["text"], "echo");
    let seen = up.rpc_requests();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(
        r.headers["authorization"],
        format!("Bearer {UPSTREAM_TOKEN}").as_str()
    );
    assert_eq!(r.headers["a2a-version"], "1.0");
    let ext: Vec<_> = r
        .headers
        .get_all("a2a-extensions")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    // All caller lines merged into one normalized header.
    assert_eq!(ext, ["urn:a, urn:b"]);
    // The principal header is the proxy's, never the caller's forged one.
    assert_eq!(r.headers["x-a2a-edge-principal"], "tester");
    assert_eq!(r.headers.get_all("x-a2a-edge-principal").iter().count(), 1);
    // Forwarding headers say what the proxy knows, never what the caller claimed.
    assert_eq!(r.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(r.headers["x-forwarded-proto"], "https");
    assert_eq!(r.headers["forwarded"], "for=127.0.0.1;proto=https");
    // The request id is the proxy's own (random per-process prefix, counter), never the caller's.
    let rid = r.headers["x-request-id"].to_str().unwrap();
    let (prefix, counter) = rid.split_once('-').unwrap();
    assert_eq!(prefix.len(), 12, "{rid}");
    assert!(u64::from_str_radix(counter, 16).is_ok(), "{rid}");
    assert_eq!(r.headers.get_all("x-request-id").iter().count(), 1);
    // A well-formed W3C trace context joins the caller's trace.
    assert_eq!(
        r.headers["traceparent"],
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    );
    assert_eq!(r.headers["tracestate"], "rojo=00f067aa0ba902b7");
    for gone in ["cookie", "x-custom"] {
        assert!(r.headers.get(gone).is_none(), "{gone} reached the agent");
    }
    let forwarded = std::str::from_utf8(&r.body).unwrap();
    assert!(
        !forwarded.contains(' ') && !forwarded.contains('\n'),
        "{forwarded}"
    );
    let fv: Value = serde_json::from_str(forwarded).unwrap();
    assert_eq!(
        fv,
        json!({"jsonrpc": "2.0", "id": 42, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hi", "mediaType": "text/plain"}]}}})
    );
}

#[tokio::test]
async fn upstream_down_or_silent_gives_a_clear_error_not_a_hang() {
    let down = Proxy::start(ProxyOpts {
        upstream_url: closed_port_url().await,
        ..Default::default()
    })
    .await;
    let up = RecordingUpstream::start(Reply::Hang).await;
    let silent = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        extra_upstream: "response_timeout_ms = 300\n".into(),
        ..Default::default()
    })
    .await;
    for (proxy, reason) in [
        (&down, "upstream.unavailable"),
        (&silent, "upstream.timeout"),
    ] {
        for proto in PROTOS {
            let mut c = proxy.client(proto).await;
            let v = c.rpc("SendMessage", message("are you there?")).await;
            assert_eq!(v["error"]["code"], -32603, "{v}");
            assert_eq!(v["error"]["data"][0]["reason"], reason, "{v}");
            assert!(!v.to_string().contains("127.0.0.1"), "address leaked: {v}");
        }
    }
    // The card route says so too.
    let mut c = down.client(Proto::H1).await;
    let (status, _, _) = c
        .request("GET", "/.well-known/agent-card.json", &[], "")
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn agent_dying_mid_stream_gives_an_error_frame_then_the_end() {
    let (_up, proxy) = Proxy::with_recorder(Reply::BreakStream, ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let resp = c.rpc_stream("SendStreamingMessage", message("hi")).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let mut events = EventReader::new(resp);
        let (kind, first) = events.next().await.unwrap();
        assert_eq!(kind, None);
        assert_eq!(first["result"]["task"]["id"], "t1");
        let rest = events.rest().await;
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert_eq!(rest[0].0.as_deref(), Some("error"));
        assert_eq!(rest[0].1["error"]["code"], -32603);
        assert_eq!(rest[0].1["id"], "s1");
    }
}

#[tokio::test]
async fn agent_answers_are_cleaned_of_secrets_and_internals() {
    let (_up, proxy) = Proxy::with_recorder(Reply::Leaky, ProxyOpts::default()).await;
    let mut c = proxy.client(Proto::H1).await;
    let v = c.rpc("SendMessage", message("hi")).await;
    let text = v.to_string();
    for secret in ["sk-from-agent-config", "llm-secret"] {
        assert!(
            !text.contains(secret),
            "{secret} reached the caller: {text}"
        );
    }
    assert_eq!(v["result"]["task"]["metadata"]["iac_code"]["cwd"], "/w");
    let v = c
        .rpc(
            "GetTaskPushNotificationConfig",
            json!({"taskId": "leaky-task", "id": "c1"}),
        )
        .await;
    let text = v.to_string();
    for secret in ["notification-secret", "callback-secret"] {
        assert!(
            !text.contains(secret),
            "{secret} reached the caller: {text}"
        );
    }
    assert_eq!(v["result"]["url"], "https://hooks.example.com/x");
    // GetTask, and ListTasks (which reads every listed task from its agent), are cleaned too.
    for (method, params) in [
        ("GetTask", json!({"id": "leaky-task"})),
        ("ListTasks", json!({})),
    ] {
        let v = c.rpc(method, params).await;
        let text = v.to_string();
        assert!(text.contains("leaky-task"), "{method}: {text}");
        for secret in ["sk-from-agent-config", "llm-secret"] {
            assert!(
                !text.contains(secret),
                "{secret} reached the caller through {method}: {text}"
            );
        }
    }
    // A stream: the agent's events are cleaned, its comments not relayed at all.
    let resp = c
        .rpc_stream("SendStreamingMessage", message("[[chunks:1]] hi"))
        .await;
    let raw = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.contains("TASK_STATE_WORKING"), "{raw}");
    for leak in ["sk-from-agent-config", "/home/agent"] {
        assert!(
            !raw.contains(leak),
            "{leak} reached the caller in a stream: {raw}"
        );
    }
    let v = c.rpc("CancelTask", json!({"id": "leaky-task"})).await;
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(v["error"]["message"], "Internal error");
    assert!(!v.to_string().contains("/home/agent"), "{v}");
}

#[tokio::test]
async fn silent_streams_get_keepalives_then_an_idle_error() {
    let proxy = Proxy::start(ProxyOpts {
        extra_policy: "[limits]\nstream_keepalive_ms = 150\nstream_idle_timeout_ms = 1200\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H2).await;
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            message("[[slow:3000]] [[chunks:2]] quiet"),
        )
        .await;
    let mut body = resp.into_body();
    let mut raw = String::new();
    while let Some(frame) = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        http_body_util::BodyExt::frame(&mut body),
    )
    .await
    .unwrap()
    {
        if let Ok(data) = frame.unwrap().into_data() {
            raw.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(raw.contains(": keep-alive"), "{raw}");
    assert!(raw.contains("event: error"), "{raw}");
    assert!(raw.contains("upstream.stream_idle"), "{raw}");
}

/// A stream's head leaves as soon as the agent's does, ahead of the first event: the caller
/// reads and parses it while the edge checks that event. (Holding the head back to send it
/// with the first event, in one write, was measured slower to the first event: +0.04 ms p50,
/// benches/streams, 2026-12-03; benches/PERFORMANCE.md, stop 32, "Tried and not kept".)
#[tokio::test]
async fn a_streams_head_leaves_ahead_of_its_first_event() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = RecordingUpstream::start(Reply::Late(std::time::Duration::from_secs(1))).await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        ..Default::default()
    })
    .await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
        "params": message("late")})
    .to_string();
    let mut s = proxy.raw_tls().await;
    let request = format!(
        "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\naccept: text/event-stream\r\na2a-version: 1.0\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&buf[..n]);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.contains("text/event-stream"), "{first}");
    assert!(first.ends_with("\r\n\r\n"), "{first:?}");
    assert!(
        !first.contains("t-late"),
        "the head waited for the first event: {first:?}"
    );
    // The event follows when the agent sends it.
    let mut rest = String::new();
    while !rest.contains("t-late") {
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the stream ended without its event: {rest}");
        rest.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(rest.contains("data: "), "{rest}");
    assert_eq!(up.rpc_requests().len(), 1);
}

#[tokio::test]
async fn a_caller_that_leaves_closes_the_agents_stream() {
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let up = RecordingUpstream::start(Reply::Endless(closed.clone())).await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        ..Default::default()
    })
    .await;
    for proto in PROTOS {
        closed.store(false, std::sync::atomic::Ordering::SeqCst);
        let mut c = proxy.client(proto).await;
        let resp = c
            .rpc_stream("SendStreamingMessage", message("forever"))
            .await;
        let mut events = EventReader::new(resp);
        for _ in 0..3 {
            assert!(events.next().await.is_some());
        }
        assert!(!closed.load(std::sync::atomic::Ordering::SeqCst));
        drop(events);
        drop(c);
        until_set(
            &closed,
            std::time::Duration::from_secs(10),
            &format!("{proto:?}: the agent's stream stayed open"),
        )
        .await;
    }
}

#[tokio::test]
async fn agent_paths_are_unreachable_unless_the_policy_exposes_them() {
    let up = RecordingUpstream::start(Reply::Echo).await;
    let closed = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        ..Default::default()
    })
    .await;
    let mut c = closed.client(Proto::H1).await;
    let auth = [("authorization", "Bearer test-token-0123456789")];
    let (status, _, _) = c.request("GET", "/iac-code/readiness", &auth, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(up
        .requests()
        .iter()
        .all(|r| r.path != "/iac-code/readiness"));

    std::env::set_var("A2A_EDGE_TEST_UPSTREAM_TOKEN_2", UPSTREAM_TOKEN);
    let open = Proxy::start(ProxyOpts {
        upstream_url: up.url.clone(),
        upstream_token_env: Some("A2A_EDGE_TEST_UPSTREAM_TOKEN_2"),
        extra_server: "agent_paths = [\"/iac-code/readiness\"]\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = open.client(Proto::H2).await;
    // Still authenticated.
    let (status, _, _) = c.request("GET", "/iac-code/readiness", &[], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = c.request("GET", "/iac-code/readiness?x=1", &auth, "").await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let seen: Vec<_> = up
        .requests()
        .into_iter()
        .filter(|r| r.path == "/iac-code/readiness")
        .collect();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {UPSTREAM_TOKEN}").as_str()
    );
    assert_eq!(seen[0].headers["x-a2a-edge-principal"], "tester");
    // Other private paths stay closed.
    let (status, _, _) = c
        .request("GET", "/iac-code/session/recovery", &auth, "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_reload_rotates_the_tls_certificate_for_new_connections_only() {
    use a2a_edge::policy::{LoadMode, Policy};
    let dir = TempDir::new("tls-rotate");
    let old = a2a_edge::tls::dev::ensure(&dir.path().join("ca-old")).unwrap();
    let new = a2a_edge::tls::dev::ensure(&dir.path().join("ca-new")).unwrap();
    let (cert, key) = (dir.path().join("live.pem"), dir.path().join("live.key"));
    let install = |from: &a2a_edge::tls::dev::DevCerts| {
        std::fs::copy(&from.server_cert, &cert).unwrap();
        std::fs::copy(&from.server_key, &key).unwrap();
    };
    install(&old);
    let text = PolicyDoc::base(dir.path())
        .remove("tls.dev")
        .remove("tls.dev_dir")
        .set("tls.cert_file", cert.display().to_string())
        .set("tls.key_file", key.display().to_string())
        .text();
    let load =
        || Policy::from_toml(std::path::Path::new("p.toml"), &text, LoadMode::Serve).unwrap();
    let running = a2a_edge::server::start(load()).await.unwrap();
    let addr = running.local_addr;
    let mut before = Client::connect(addr, &old.ca_cert, Proto::H2).await;
    assert!(before
        .rpc("ListTasks", json!({}))
        .await
        .get("result")
        .is_some());

    // The operator renews the certificate (another CA here, to tell them apart) and reloads.
    install(&new);
    running.reload(load()).await.unwrap();
    assert!(
        Client::try_connect(addr, &old.ca_cert, Proto::H1, None)
            .await
            .is_err(),
        "a new connection still got the old certificate"
    );
    let mut after = Client::connect(addr, &new.ca_cert, Proto::H1).await;
    assert!(after
        .rpc("ListTasks", json!({}))
        .await
        .get("result")
        .is_some());
    // The connection made before the reload goes on.
    assert!(before
        .rpc("ListTasks", json!({}))
        .await
        .get("result")
        .is_some());

    // A broken key refuses the whole reload: the running certificate stays.
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let e = running.reload(load()).await.unwrap_err().to_string();
    assert!(!e.contains("AAAA"), "{e}");
    // So does a good key that others can read.
    install(&old);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let e = running.reload(load()).await.unwrap_err().to_string();
    assert!(e.contains("chmod 600"), "{e}");
    let mut still = Client::connect(addr, &new.ca_cert, Proto::H2).await;
    assert!(still
        .rpc("ListTasks", json!({}))
        .await
        .get("result")
        .is_some());
    running.shutdown();
    running.wait().await;
}

/// An SSE stream framed with CR only (valid per the SSE spec) whose last event ends in `\r\r`
/// right before the end of the stream: every event arrives, and the stream completes.
#[tokio::test]
async fn a_cr_only_stream_keeps_its_last_event() {
    const RAW: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"task\":{\"id\":\"t-cr\",\"contextId\":\"c-cr\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\r\rdata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t-cr\",\"contextId\":\"c-cr\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}}\r\r";
    let (_up, p) = Proxy::with_recorder(Reply::RawStream(RAW), ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let resp = c
            .rpc_stream(
                "SendStreamingMessage",
                json!({"message": {"messageId": "m-cr", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
            )
            .await;
        let events = EventReader::new(resp).rest().await;
        assert_eq!(events.len(), 2, "{proto:?}: {events:?}");
        assert_eq!(
            events[1].1["result"]["statusUpdate"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        assert!(events.iter().all(|(kind, _)| kind.is_none()), "{events:?}");
    }
}

/// The edge picks the cipher suite by its own order, not the client's: a client that lists
/// ChaCha20 (or AES-128) before AES-256 still gets AES-256-GCM, over TLS 1.3 and 1.2.
#[tokio::test]
async fn the_edge_chooses_the_cipher_suite_by_its_own_order() {
    use rustls::crypto::ring::{cipher_suite as cs, default_provider};
    use rustls_pki_types::ServerName;
    let proxy = Proxy::start(ProxyOpts::default()).await;
    let mut roots = rustls::RootCertStore::empty();
    for c in a2a_edge::tls::load_certs(&proxy.ca).unwrap() {
        roots.add(c).unwrap();
    }
    let cases = [
        (
            &rustls::version::TLS13,
            vec![
                cs::TLS13_CHACHA20_POLY1305_SHA256,
                cs::TLS13_AES_128_GCM_SHA256,
                cs::TLS13_AES_256_GCM_SHA384,
            ],
            cs::TLS13_AES_256_GCM_SHA384,
        ),
        (
            &rustls::version::TLS12,
            vec![
                cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
                cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ],
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
    ];
    for (version, client_order, expected) in cases {
        let provider = rustls::crypto::CryptoProvider {
            cipher_suites: client_order,
            ..default_provider()
        };
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let (_, session) = tls.get_ref();
        let got = session.negotiated_cipher_suite().unwrap().suite();
        // The dev certificate's key decides ECDSA or RSA for TLS 1.2: compare the bulk cipher.
        let name = format!("{got:?}");
        let want = format!("{:?}", expected.suite());
        assert!(
            name.ends_with("AES_256_GCM_SHA384") && want.ends_with("AES_256_GCM_SHA384"),
            "{version:?}: got {name}, want the edge's first suite ({want})"
        );
    }
}

/// An agent whose JSON-RPC answer stalls after its head (`Content-Length: 100`, then `{`
/// and silence): the caller gets `upstream.timeout` within about the agent's
/// `response_timeout_ms` (head and body together), and the request's in-flight slot is
/// given back (with one slot per principal, the next request is not refused with 429).
#[tokio::test]
async fn an_answer_whose_body_stalls_times_out_and_frees_its_slot() {
    use std::time::{Duration, Instant};
    let agent = RawAgent::start(RawAnswer::Whole, RawAnswer::Whole, RawAnswer::StalledBody).await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: agent.url.clone(),
        extra_upstream: "response_timeout_ms = 500\n".into(),
        extra_policy: "[limits]\nmax_in_flight_per_principal = 1\n".into(),
        ..Default::default()
    })
    .await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        for attempt in 0..2 {
            let started = Instant::now();
            let (status, _, body) = tokio::time::timeout(
                Duration::from_secs(10),
                c.rpc_raw("SendMessage", message("are you there?")),
            )
            .await
            .unwrap_or_else(|_| panic!("{proto:?} #{attempt}: the stalled answer held the caller"));
            let took = started.elapsed();
            assert_eq!(status, StatusCode::OK, "{proto:?} #{attempt}");
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["error"]["code"], -32603, "{proto:?} #{attempt}: {v}");
            assert_eq!(
                v["error"]["data"][0]["reason"], "upstream.timeout",
                "{proto:?} #{attempt}: {v}"
            );
            assert!(
                took < Duration::from_secs(5),
                "{proto:?} #{attempt}: {took:?}"
            );
        }
    }
    assert_eq!(agent.count("/"), 4, "{:?}", agent.seen.lock().unwrap());
}

/// The edge's own reads of an agent's answers whose body stalls after the head: ListTasks
/// reading a listed task (GetTask) and an agent path. Each ends within about the agent's
/// `response_timeout_ms` (ListTasks lists the task as the edge knows it; the agent path is
/// 502 upstream.timeout) and gives its in-flight slot back (one slot per principal: the next
/// request is not refused with 429).
/// Also when the stalled answer calls itself an event stream (only a streaming method's
/// answer may run past the response timeout).
#[tokio::test]
async fn a_listing_read_or_agent_path_whose_body_stalls_times_out() {
    for stall in [RawAnswer::TaskThenStalls, RawAnswer::TaskThenStreamStalls] {
        a_listing_read_or_agent_path_times_out(stall).await;
    }
}

/// ListTasks reads each listed task from its agent (a GetTask of its own) and holds that
/// answer to what a relayed answer must be: a 200 of `application/json` echoing the
/// request's id. Otherwise the task is listed as the edge knows it (id, context, state),
/// never with the history of an answer it should not have read.
#[tokio::test]
async fn a_listing_read_that_is_no_proper_answer_is_not_listed() {
    for bad in [BadRead::Status500, BadRead::WrongId, BadRead::NotJson] {
        let agent = RawAgent::start(
            RawAnswer::Whole,
            RawAnswer::Whole,
            RawAnswer::TaskThenBad(bad),
        )
        .await;
        let proxy = Proxy::start(ProxyOpts {
            upstream_url: agent.url.clone(),
            ..Default::default()
        })
        .await;
        let mut c = proxy.client(Proto::H1).await;
        let v = c.rpc("SendMessage", message("make a task")).await;
        assert_eq!(v["result"]["task"]["id"], "t-raw", "{bad:?}: {v}");
        let v = c.rpc("ListTasks", json!({})).await;
        let listed = &v["result"]["tasks"][0];
        assert_eq!(listed["id"], "t-raw", "{bad:?}: {v}");
        let mut keys: Vec<&String> = listed.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["contextId", "id", "status"], "{bad:?}: {v}");
        assert!(agent.count("/") >= 2, "{bad:?}: the agent was read");
    }
}

async fn a_listing_read_or_agent_path_times_out(stall: RawAnswer) {
    use std::time::{Duration, Instant};
    let agent = RawAgent::start(RawAnswer::Whole, RawAnswer::Whole, stall).await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: agent.url.clone(),
        extra_upstream: "response_timeout_ms = 500\n".into(),
        extra_server: "agent_paths = [\"/iac-code/readiness\"]\n".into(),
        extra_policy: "[limits]\nmax_in_flight_per_principal = 1\n".into(),
        ..Default::default()
    })
    .await;
    let auth = [("authorization", "Bearer test-token-0123456789")];
    let bounded = |what: String| {
        move |started: Instant| {
            let took = started.elapsed();
            assert!(took < Duration::from_secs(5), "{what}: {took:?}");
        }
    };
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let v = c.rpc("SendMessage", message("make a task")).await;
        assert_eq!(v["result"]["task"]["id"], "t-raw", "{proto:?}: {v}");
        for attempt in 0..2 {
            let started = Instant::now();
            let v = tokio::time::timeout(Duration::from_secs(10), c.rpc("ListTasks", json!({})))
                .await
                .unwrap_or_else(|_| panic!("{proto:?} #{attempt}: ListTasks held the caller"));
            bounded(format!("{proto:?} ListTasks #{attempt}"))(started);
            // The read that timed out leaves the task listed as the edge knows it: its id,
            // context and state only.
            let listed = &v["result"]["tasks"][0];
            assert_eq!(listed["id"], "t-raw", "{proto:?} #{attempt}: {v}");
            let mut keys: Vec<&String> = listed.as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(
                keys,
                ["contextId", "id", "status"],
                "{proto:?} #{attempt}: {v}"
            );
            let started = Instant::now();
            let (status, _, body) = tokio::time::timeout(
                Duration::from_secs(10),
                c.request("GET", "/iac-code/readiness", &auth, ""),
            )
            .await
            .unwrap_or_else(|_| panic!("{proto:?} #{attempt}: the agent path held the caller"));
            bounded(format!("{proto:?} agent path #{attempt}"))(started);
            assert_eq!(status, StatusCode::BAD_GATEWAY, "{proto:?} #{attempt}");
            // (an agent path's answer that is not JSON is refused at its head)
            let want = match stall {
                RawAnswer::TaskThenStreamStalls => "upstream.bad_response",
                _ => "upstream.timeout",
            };
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains(want), "{proto:?}: {text}");
        }
    }
    assert_eq!(agent.count("/iac-code/readiness"), 4);
}

/// An agent whose card body stalls after its head: the proxy still starts (the fetch is
/// bounded by the response timeout and fails like any failed fetch: no card yet, 503), serves
/// JSON-RPC, and a reload does not hang either. Also when the stalled card calls itself an
/// event stream.
#[tokio::test]
async fn a_card_whose_body_stalls_does_not_hold_start_or_reload() {
    for stall in [RawAnswer::StalledBody, RawAnswer::StalledStream] {
        a_stalled_card_holds_nothing(stall).await;
    }
}

async fn a_stalled_card_holds_nothing(stall: RawAnswer) {
    use std::time::Duration;
    let agent = RawAgent::start(stall, RawAnswer::Whole, RawAnswer::Whole).await;
    let o = ProxyOpts {
        upstream_url: agent.url.clone(),
        extra_upstream: "response_timeout_ms = 500\n".into(),
        ..Default::default()
    };
    let dir = TempDir::new("stalled-card");
    let text = policy_text(dir.path(), &o);
    let proxy = tokio::time::timeout(Duration::from_secs(10), Proxy::start_text(dir, &text))
        .await
        .expect("start-up waited for a card whose body stalls");
    assert!(agent.count("/.well-known/agent-card.json") >= 1);
    let mut c = proxy.client(Proto::H1).await;
    let (status, _, _) = c
        .request("GET", "/.well-known/agent-card.json", &[], "")
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let v = c.rpc("SendMessage", message("hi")).await;
    assert_eq!(v["result"]["message"]["parts"][0]["text"], "ok", "{v}");
    tokio::time::timeout(Duration::from_secs(10), proxy.reload(&text))
        .await
        .expect("a reload waited for a card whose body stalls");
}

/// An agent that ends its SSE lines with CR alone (WHATWG allows CR, LF or CRLF) and then
/// says nothing more: its event (`data: …\r\r`) reaches the caller at once, not when the
/// agent's next bytes would show that no LF follows the last CR. The agent sends none, so the
/// stream ends at the idle timeout, after the event.
#[tokio::test]
async fn a_cr_only_agents_event_is_relayed_before_its_next_bytes() {
    let agent = RawAgent::start(RawAnswer::Whole, RawAnswer::Whole, RawAnswer::CrStream).await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: agent.url.clone(),
        extra_policy: "[limits]\nstream_keepalive_ms = 500\nstream_idle_timeout_ms = 1500\n".into(),
        ..Default::default()
    })
    .await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        let resp = c
            .rpc_stream("SendStreamingMessage", message("cr only"))
            .await;
        let mut events = EventReader::new(resp);
        let (event, v) = events.next().await.expect("an event");
        assert_eq!(event, None, "{proto:?}: {v}");
        assert_eq!(
            v["result"]["message"]["messageId"], "m-cr",
            "{proto:?}: {v}"
        );
        let (event, v) = events.next().await.expect("the idle error");
        assert_eq!(event.as_deref(), Some("error"), "{proto:?}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.stream_idle",
            "{proto:?}: {v}"
        );
        assert_eq!(events.next().await, None, "{proto:?}");
    }
}

/// Only a whole event (an agent's comment with its blank line included) is the agent's
/// word: one that sends an event's bytes one at a time and never ends it is silent, and its
/// stream ends at the idle timeout; one that sends its own keep-alives is not.
#[tokio::test]
async fn an_agent_that_trickles_one_event_is_idle() {
    use std::time::{Duration, Instant};
    for (answer, idle) in [
        (RawAnswer::TrickleStream, true),
        (RawAnswer::PingStream, false),
    ] {
        let agent = RawAgent::start(RawAnswer::Whole, RawAnswer::Whole, answer).await;
        let proxy = Proxy::start(ProxyOpts {
            upstream_url: agent.url.clone(),
            extra_policy: "[limits]\nstream_keepalive_ms = 300\nstream_idle_timeout_ms = 1000\n"
                .into(),
            ..Default::default()
        })
        .await;
        let mut c = proxy.client(Proto::H1).await;
        let resp = c.rpc_stream("SendStreamingMessage", message("drip")).await;
        let mut body = resp.into_body();
        let started = Instant::now();
        let mut raw = String::new();
        // An idle stream ends within about the idle timeout (up to 5 s allowed for a slow
        // machine: nothing else in this policy ends a stream within the hour); a pinging one
        // is still open at three times that.
        let window = Duration::from_secs(if idle { 5 } else { 3 });
        while started.elapsed() < window {
            let left = window.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, http_body_util::BodyExt::frame(&mut body)).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        raw.push_str(&String::from_utf8_lossy(&data));
                    }
                }
                Ok(_) => break,
                Err(_) => break,
            }
        }
        assert_eq!(
            raw.contains("upstream.stream_idle"),
            idle,
            "{answer:?} after {:?}: {raw}",
            started.elapsed()
        );
        if idle {
            assert!(started.elapsed() < Duration::from_secs(5), "{raw}");
        }
    }
}

/// The answer to a request over the caller's in-flight limit: 429 `concurrency.in_flight`.
fn refused_in_flight(status: StatusCode, body: &[u8], what: &str) {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{what}: {text}");
    assert!(text.contains("concurrency.in_flight"), "{what}: {text}");
}

/// A response's whole body, read now, as JSON.
async fn read_json(resp: http::Response<hyper::body::Incoming>) -> Value {
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// An answer waiting unread in its HTTP/2 stream holds the caller's slot, not its turn: the
/// next message on the same context is served (not `context.busy`) while the first answer is
/// still unsent. (For a while the body held the turn too, so a caller that had not yet read
/// an answer could not go on with its context.)
#[tokio::test]
async fn an_unsent_answer_leaves_its_context_free_for_the_next_turn() {
    let text = "x".repeat(8 << 20);
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{{id}},"result":{{"message":{{"messageId":"m-big","role":"ROLE_AGENT","parts":[{{"text":"{text}"}}]}}}}}}"#
    );
    let (_up, proxy) = Proxy::with_recorder(
        Reply::Raw(Box::leak(answer.into_boxed_str())),
        ProxyOpts::default(),
    )
    .await;
    let in_context = |text: &str| {
        json!({"message": {"messageId": format!("m-{text}"), "role": "ROLE_USER",
            "parts": [{"text": text}], "contextId": "ctx-unread"}})
    };
    let mut h2 = proxy.client(Proto::H2).await;
    // (its body left unread)
    let unread = h2.rpc_stream("SendMessage", in_context("first")).await;
    assert_eq!(unread.status(), StatusCode::OK);
    let mut c = proxy.client(Proto::H1).await;
    let (status, _, body) = c.rpc_raw("SendMessage", in_context("second")).await;
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("m-big"), "{text}");
    let v = read_json(unread).await;
    assert_eq!(v["result"]["message"]["messageId"], "m-big");
}

/// A caller that sends unary requests and reads none of their (large) answers holds one
/// in-flight slot per answer until the answer has been sent: with
/// `max_in_flight_per_principal = 2`, a third request is refused (`concurrency.in_flight`)
/// while two answers wait in their connections (HTTP/1.1) or streams (HTTP/2), and one is
/// served once the caller has read them. (The slot used to be given back when the answer was built, before it was written:
/// a caller that reads nothing could have the edge hold any number of answers.)
#[tokio::test]
async fn unread_answers_hold_their_in_flight_slots_until_sent() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Far more than the kernel's and hyper's buffers take for a caller that reads nothing.
    let text = "x".repeat(8 << 20);
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{{id}},"result":{{"message":{{"messageId":"m-big","role":"ROLE_AGENT","parts":[{{"text":"{text}"}}]}}}}}}"#
    );
    let (_up, proxy) = Proxy::with_recorder(
        Reply::Raw(Box::leak(answer.into_boxed_str())),
        ProxyOpts {
            extra_policy: "[limits]\nmax_in_flight_per_principal = 2\n".into(),
            ..Default::default()
        },
    )
    .await;
    // Two connections with a small receive buffer, each sending one SendMessage; of each
    // answer only the head is read (so the edge has built it and begun to send it).
    let mut unread = Vec::new();
    for i in 0..2 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let tcp = socket.connect(proxy.addr).await.unwrap();
        let cfg = a2a_edge::tls::client_config(&proxy.ca, &[b"http/1.1"]).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(cfg)
            .connect(name, tcp)
            .await
            .unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": message(&format!("unread {i}"))})
        .to_string();
        let mut request = String::from("POST / HTTP/1.1\r\nhost: localhost\r\n");
        for (k, v) in rpc_headers() {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        let head_end = loop {
            if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = tls.read(&mut buf).await.unwrap();
            assert!(n > 0, "#{i}: the connection closed");
            got.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "#{i}: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or_else(|| panic!("#{i}: {head}"));
        unread.push((tls, got.len() - head_end, length));
    }
    let mut c = proxy.client(Proto::H1).await;
    let (status, _, body) = c.rpc_raw("SendMessage", message("third")).await;
    refused_in_flight(status, &body, "h1");
    // The caller reads its answers: its slots come back.
    for (i, (mut tls, mut read, length)) in unread.into_iter().enumerate() {
        let mut buf = vec![0u8; 64 * 1024];
        while read < length {
            let n = tls.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "#{i}: the answer ended after {read} of {length} bytes"
            );
            read += n;
        }
    }
    let v = c.rpc("SendMessage", message("fourth")).await;
    let short: String = v.to_string().chars().take(300).collect();
    assert_eq!(v["result"]["message"]["messageId"], "m-big", "{short}");

    // Over HTTP/2: two streams of one connection whose bodies are not read (the client's
    // windows take 2 MiB of each), then the same.
    let mut h2 = proxy.client(Proto::H2).await;
    let mut unread = Vec::new();
    for i in 0..2 {
        // (its body left unread)
        let resp = h2
            .rpc_stream("SendMessage", message(&format!("unread h2 {i}")))
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "h2 #{i}");
        unread.push(resp);
    }
    let (status, _, body) = c.rpc_raw("SendMessage", message("third h2")).await;
    refused_in_flight(status, &body, "h2");
    for resp in unread {
        let v = read_json(resp).await;
        assert_eq!(v["result"]["message"]["messageId"], "m-big");
    }
    let v = c.rpc("SendMessage", message("fourth h2")).await;
    assert_eq!(v["result"]["message"]["messageId"], "m-big");
}

/// The same for an agent path (`server.agent_paths`): its answer holds the caller's
/// in-flight slot until it has been sent.
#[tokio::test]
async fn unread_agent_path_answers_hold_their_in_flight_slots_until_sent() {
    let text = "x".repeat(8 << 20);
    let answer = format!(r#"{{"ready":true,"log":"{text}"}}"#);
    let (_up, proxy) = Proxy::with_recorder(
        Reply::Raw(Box::leak(answer.into_boxed_str())),
        ProxyOpts {
            extra_server: "agent_paths = [\"/iac-code/readiness\"]\n".into(),
            extra_policy: "[limits]\nmax_in_flight_per_principal = 2\n".into(),
            ..Default::default()
        },
    )
    .await;
    let get = || {
        http::Request::builder()
            .method("GET")
            .uri("https://localhost/iac-code/readiness")
            .header("authorization", "Bearer test-token-0123456789")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    // Two streams of one HTTP/2 connection whose bodies are not read.
    let mut h2 = proxy.client(Proto::H2).await;
    let mut unread = Vec::new();
    for i in 0..2 {
        let resp = h2.send(get()).await;
        assert_eq!(resp.status(), StatusCode::OK, "#{i}");
        unread.push(resp);
    }
    let mut c = proxy.client(Proto::H1).await;
    let auth = [("authorization", "Bearer test-token-0123456789")];
    let (status, _, body) = c.request("GET", "/iac-code/readiness", &auth, "").await;
    refused_in_flight(status, &body, "h1");
    for resp in unread {
        let v = read_json(resp).await;
        assert_eq!(v["ready"], true);
    }
    let (status, _, body) = c.request("GET", "/iac-code/readiness", &auth, "").await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["ready"], true);
}

/// The same for ListTasks (the edge's own answer, from the tasks it reads from the agent):
/// its answer holds the caller's in-flight slot until it has been sent.
#[tokio::test]
async fn unread_list_tasks_answers_hold_their_in_flight_slots_until_sent() {
    // One task of about 3 MiB: a page under the default 4 MiB budget.
    let text = "x".repeat(3 << 20);
    let task = format!(
        r#"{{"id":"t-big","contextId":"c-big","status":{{"state":"TASK_STATE_COMPLETED","message":{{"messageId":"m-big","role":"ROLE_AGENT","parts":[{{"text":"{text}"}}]}}}}}}"#
    );
    let (_up, proxy) = Proxy::with_recorder(
        Reply::Task(Box::leak(task.into_boxed_str())),
        ProxyOpts {
            extra_policy: "[limits]\nmax_in_flight_per_principal = 2\n".into(),
            ..Default::default()
        },
    )
    .await;
    let mut c = proxy.client(Proto::H1).await;
    let v = c.rpc("SendMessage", message("a big task")).await;
    assert_eq!(v["result"]["task"]["id"], "t-big");
    let list = || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
        let mut b = http::Request::builder()
            .method("POST")
            .uri("https://localhost/");
        for (k, v) in rpc_headers() {
            b = b.header(k, v);
        }
        b.body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap()
    };
    // Two streams of one HTTP/2 connection whose bodies are not read.
    let mut h2 = proxy.client(Proto::H2).await;
    let mut unread = Vec::new();
    for i in 0..2 {
        let resp = h2.send(list()).await;
        assert_eq!(resp.status(), StatusCode::OK, "#{i}");
        unread.push(resp);
    }
    let (status, _, body) = c.rpc_raw("ListTasks", json!({})).await;
    refused_in_flight(status, &body, "h1");
    for resp in unread {
        let v = read_json(resp).await;
        assert_eq!(v["result"]["tasks"][0]["id"], "t-big");
    }
    let v = c.rpc("ListTasks", json!({})).await;
    let short: String = v.to_string().chars().take(300).collect();
    assert_eq!(v["result"]["tasks"][0]["id"], "t-big", "{short}");
}
