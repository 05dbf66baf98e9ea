//! `[[upstreams]] http2 = true`: the edge speaks HTTP/2 to the agent (h2c over http://, ALPN
//! h2 over https://). Requests and streams share connections, at most `http2_max_streams` on
//! one; beyond, another connection opens instead of a request waiting behind a long stream.
//! An agent that does not speak HTTP/2 fails the request clearly.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use serde_json::json;

fn h2_upstream(url: &str, extra: &str) -> ProxyOpts {
    ProxyOpts {
        upstream_url: url.to_string(),
        extra_upstream: format!("http2 = true\n{extra}"),
        ..Default::default()
    }
}

#[tokio::test]
async fn requests_reach_an_http2_agent_over_a_few_shared_connections() {
    let up = RecordingUpstream::start_h2(Reply::Echo).await;
    let proxy = Proxy::start(h2_upstream(&up.url, "")).await;
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        for i in 0..10 {
            let v = c
                .rpc("SendMessage", message(&format!("m{i}"), json!({})))
                .await;
            assert_eq!(
                v["result"]["message"]["parts"][0]["text"], "echo",
                "{proto:?}: {v}"
            );
        }
    }
    let rpc = up.rpc_requests();
    assert_eq!(rpc.len(), 20);
    assert!(
        rpc.iter().all(|r| r.version == http::Version::HTTP_2),
        "every request went over HTTP/2"
    );
    // One pool per worker thread and one for the rest (the card fetch, health checks): the
    // twenty requests, one after another, never needed a connection each.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let conns = up.connections.load(Ordering::SeqCst);
    assert!(conns <= workers + 1, "{conns} connections for 20 requests");
    // The agent still sees only what the edge forwards: its own serialization, no caller
    // credential.
    assert!(rpc
        .iter()
        .all(|r| r.headers.get("authorization").is_none() && !r.body.is_empty()));
}

/// A client of `proto` and the stream `s{i}` it opened, its first event read (within 10 s:
/// none waits for a place).
async fn open_stream(proxy: &Proxy, proto: Proto, i: usize) -> (Client, EventReader) {
    let mut c = proxy.client(proto).await;
    let resp = c
        .rpc_stream("SendStreamingMessage", message(&format!("s{i}"), json!({})))
        .await;
    let mut events = EventReader::new(resp);
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
        .await
        .expect("the stream's first event came without waiting");
    assert!(first.is_some(), "stream {i} ended early");
    (c, events)
}

#[tokio::test]
async fn streams_past_http2_max_streams_open_another_connection_and_none_waits() {
    let closed = Arc::new(AtomicBool::new(false));
    let up = RecordingUpstream::start_h2(Reply::Endless(closed.clone())).await;
    let proxy = Proxy::start(h2_upstream(&up.url, "http2_max_streams = 2\n")).await;
    let before = up.connections.load(Ordering::SeqCst);
    // Five streams held open at once; each gets its events (none waits for a place).
    let mut clients = Vec::new();
    let mut streams = Vec::new();
    for i in 0..5 {
        let (c, events) = open_stream(&proxy, Proto::H1, i).await;
        streams.push(events);
        clients.push(c);
    }
    for (i, events) in streams.iter_mut().enumerate() {
        assert!(events.next().await.is_some(), "stream {i} went on");
    }
    // At most two on a connection: five streams took at least three.
    let opened = up.connections.load(Ordering::SeqCst) - before;
    assert!(opened >= 3, "five streams on {opened} connections");
    assert!(up
        .rpc_requests()
        .iter()
        .all(|r| r.version == http::Version::HTTP_2));
    // Ending the streams gives their places back: a caller that leaves resets its stream,
    // the agent sees its body dropped.
    drop(streams);
    drop(clients);
    until_set(
        &closed,
        std::time::Duration::from_secs(10),
        "the agent's stream stayed open",
    )
    .await;
    let mut c = proxy.client(Proto::H2).await;
    let v = c.rpc("GetTask", json!({"id": "t-endless"})).await;
    assert_eq!(v["result"]["id"], "t-endless", "{v}");
}

/// A TCP relay to the agent at `url` that holds what the agent sends on each connection for
/// `hold` before passing it on (what the edge sends passes at once); its URL.
async fn late_settings_relay(url: &str, hold: std::time::Duration) -> String {
    let to = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((edge, _)) = listener.accept().await {
            let to = to.clone();
            tokio::spawn(async move {
                let Ok(agent) = tokio::net::TcpStream::connect(&to).await else {
                    return;
                };
                let (mut from_edge, mut to_edge) = edge.into_split();
                let (mut from_agent, mut to_agent) = agent.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_edge, &mut to_agent).await;
                });
                tokio::time::sleep(hold).await;
                let _ = tokio::io::copy(&mut from_agent, &mut to_edge).await;
            });
        }
    });
    relay
}

/// An agent that allows fewer streams on a connection (its `SETTINGS_MAX_CONCURRENT_STREAMS`,
/// here 1) than `http2_max_streams` (the default 100): a request past its limit would wait
/// on the connection until a stream ends (a long stream: for up to an hour, every caller's
/// request behind it timing out); the edge opens another connection instead.
#[tokio::test]
async fn an_agent_that_allows_fewer_streams_gets_more_connections_and_none_waits() {
    let closed = Arc::new(AtomicBool::new(false));
    let up = RecordingUpstream::start_h2_allowing(Reply::Endless(closed.clone()), 1).await;
    // (its SETTINGS, the first thing it sends on a connection, arrive 300 ms late)
    let relay = late_settings_relay(&up.url, std::time::Duration::from_millis(300)).await;
    let proxy = Proxy::start(h2_upstream(&relay, "")).await;
    let before = up.connections.load(Ordering::SeqCst);
    // Three at once, while no new connection knows the agent's limit yet (one takes
    // requests once it does; a stream sent past a limit not yet known would be refused by
    // the agent, REFUSED_STREAM, and go again on another connection), then three more one
    // by one.
    let open = |i: usize| open_stream(&proxy, Proto::H2, i);
    let (a, b, c) = tokio::join!(open(0), open(1), open(2));
    let mut clients = vec![a.0, b.0, c.0];
    let mut streams = vec![a.1, b.1, c.1];
    for i in 3..6 {
        let (c, events) = open(i).await;
        streams.push(events);
        clients.push(c);
    }
    // A unary request beside them is answered at once too.
    let mut c = proxy.client(Proto::H1).await;
    let v = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        c.rpc("GetTask", json!({"id": "t-endless"})),
    )
    .await
    .expect("the request beside the streams did not wait");
    assert_eq!(v["result"]["id"], "t-endless", "{v}");
    let opened = up.connections.load(Ordering::SeqCst) - before;
    assert!(
        opened >= 7,
        "six streams and a request on {opened} connections"
    );
    drop(streams);
    drop(clients);
}

#[tokio::test]
async fn an_agent_that_does_not_speak_http2_fails_the_request_clearly() {
    // An HTTP/1.1-only agent: the h2c preface is not a request it can read.
    let up = RecordingUpstream::start(Reply::Echo).await;
    let proxy = Proxy::start(h2_upstream(&up.url, "")).await;
    let mut c = proxy.client(Proto::H2).await;
    let v = c.rpc("SendMessage", message("hello", json!({}))).await;
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.unavailable",
        "{v}"
    );
    assert!(
        up.rpc_requests().is_empty(),
        "nothing reached the agent as a request"
    );
}

#[tokio::test]
async fn a_standalone_engine_serves_json_and_streams_over_h2c() {
    let (url, _stop) = start_engine().await;
    let proxy = Proxy::start(h2_upstream(&url, "")).await;
    let mut c = proxy.client(Proto::H2).await;
    let v = c
        .rpc("SendMessage", message("[[complete]] over h2c", json!({})))
        .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            message("[[chunks:2]] h2c", json!({})),
        )
        .await;
    let events = EventReader::new(resp).rest().await;
    assert!(events.len() >= 3, "{events:?}");
    assert!(events.iter().all(|(_, v)| v.get("result").is_some()));
    let v = c.rpc("GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["id"], task.as_str(), "{v}");
}

/// Over https the agent must choose h2 by ALPN (here another a2a-edge, which offers h2).
#[tokio::test]
async fn an_https_agent_is_reached_over_http2_by_alpn() {
    let inner = Proxy::start(ProxyOpts::default()).await;
    std::env::set_var("A2A_EDGE_TEST_H2_INNER_TOKEN", TOKEN);
    let outer = Proxy::start(ProxyOpts {
        upstream_url: format!("https://localhost:{}/", inner.addr.port()),
        upstream_token_env: Some("A2A_EDGE_TEST_H2_INNER_TOKEN"),
        extra_upstream: format!(
            "ca_file = {:?}\nhttp2 = true\n",
            inner.ca.display().to_string()
        ),
        ..Default::default()
    })
    .await;
    let mut c = outer.client(Proto::H1).await;
    let v = c
        .rpc("SendMessage", message("over h2 and tls", json!({})))
        .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{v}"
    );
}
