//! A fleet of three standalone engines behind the proxy: new contexts spread over healthy
//! agents, follow-ups reach the agent that owns their context, ListTasks spans the fleet, and
//! an agent that goes down fails its own contexts clearly while new contexts go elsewhere.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn message(text: &str, extra: Value) -> Value {
    let mut m = json!({"messageId": format!("m-{}", a2a_edge::policy::random_token()), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let (Value::Object(m), Value::Object(e)) = (&mut m, extra) {
        m.extend(e);
    }
    json!({"message": m})
}

#[tokio::test]
async fn contexts_stay_with_their_agent_and_a_dead_agent_fails_only_its_own() {
    let mut engines = Vec::new();
    for _ in 0..3 {
        engines.push(start_engine().await);
    }
    let upstreams: String = engines
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, (url, _))| format!("\n[[upstreams]]\nname = \"agent-{i}b\"\nurl = \"{url}\"\nhealth_interval_ms = 100\nunhealthy_threshold = 1\n"))
        .collect();
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: engines[0].0.clone(),
        extra_upstream: format!("health_interval_ms = 100\nunhealthy_threshold = 1\n{upstreams}"),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H2).await;
    // Six new contexts, each a task waiting for input.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let v = c
            .rpc(
                "SendMessage",
                message("[[input]] hello", json!({"contextId": format!("ctx-{i}")})),
            )
            .await;
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
        tasks.push(t["id"].as_str().unwrap().to_string());
    }
    // Follow-ups name the task: only the agent that created it knows it, so success proves
    // the edge routed each follow-up to the right agent.
    for (i, t) in tasks.iter().enumerate() {
        let v = c
            .rpc(
                "SendMessage",
                message(
                    "[[input]] again",
                    json!({"contextId": format!("ctx-{i}"), "taskId": t}),
                ),
            )
            .await;
        assert_eq!(v["result"]["task"]["id"], t.as_str(), "{v}");
    }
    // ListTasks spans the fleet.
    let v = c.rpc("ListTasks", json!({"pageSize": 100})).await;
    assert_eq!(v["result"]["totalSize"], 6, "{v}");
    // Which agent holds which task? Ask each engine directly (plain HTTP).
    let mut owner = Vec::new();
    for t in &tasks {
        let mut found = None;
        for (i, (url, _)) in engines.iter().enumerate() {
            if engine_has_task(url, t).await {
                found = Some(i);
            }
        }
        owner.push(found.expect("every task is on some engine"));
    }
    let used: std::collections::HashSet<_> = owner.iter().collect();
    assert!(
        used.len() >= 2,
        "new contexts spread over the fleet: {owner:?}"
    );
    // Take one agent down.
    let victim = owner[0];
    let (_, stop) = engines.remove(victim);
    let _ = stop.send(());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let v = c.rpc("GetTask", json!({"id": tasks[0]})).await;
        if v["error"]["data"][0]["reason"] == "upstream.unavailable" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dead agent's task never failed clearly: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its contexts fail clearly, never moved elsewhere; the others' tasks still work.
    for (i, t) in tasks.iter().enumerate() {
        let v = c.rpc("GetTask", json!({"id": t})).await;
        if owner[i] == victim {
            assert_eq!(v["error"]["code"], -32603, "{v}");
        } else {
            assert!(v["result"]["id"].is_string(), "{v}");
        }
    }
    // New contexts go to the healthy agents.
    for i in 0..4 {
        let v = c
            .rpc(
                "SendMessage",
                message("[[input]] new", json!({"contextId": format!("fresh-{i}")})),
            )
            .await;
        assert!(v["result"]["task"].is_object(), "{v}");
    }
}

async fn engine_has_task(url: &str, task: &str) -> bool {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let Ok(tcp) = tokio::net::TcpStream::connect(&addr).await else {
        return false;
    };
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}}).to_string();
    let req = http::Request::builder()
        .method("POST")
        .uri("/")
        .header("host", "x")
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["result"]["id"] == task
}

/// An https agent (here: another a2a-edge with its embedded engine) behind the edge, trusted
/// through a CA file, with its own bearer token.
#[tokio::test]
async fn an_https_agent_is_reached_over_verified_tls() {
    let inner = Proxy::start(ProxyOpts::default()).await;
    std::env::set_var("A2A_EDGE_TEST_INNER_TOKEN", TOKEN);
    let outer = Proxy::start(ProxyOpts {
        upstream_url: format!("https://localhost:{}/", inner.addr.port()),
        upstream_token_env: Some("A2A_EDGE_TEST_INNER_TOKEN"),
        extra_upstream: format!("ca_file = {:?}\n", inner.ca.display().to_string()),
        ..Default::default()
    })
    .await;
    let mut c = outer.client(Proto::H2).await;
    let v = c.rpc("SendMessage", message("over tls", json!({}))).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{v}"
    );
    let (status, _, body) = c
        .request("GET", "/.well-known/agent-card.json", &[], "")
        .await;
    assert_eq!(status, http::StatusCode::OK);
    let card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        outer.public_url.as_str()
    );
    // Without the right CA the agent is not trusted: the edge says so, it does not fall back.
    let other_ca = TempDir::new("other-ca");
    let other = a2a_edge::tls::dev::ensure(other_ca.path()).unwrap();
    let distrusting = Proxy::start(ProxyOpts {
        upstream_url: format!("https://localhost:{}/", inner.addr.port()),
        upstream_token_env: Some("A2A_EDGE_TEST_INNER_TOKEN"),
        extra_upstream: format!("ca_file = {:?}\n", other.ca_cert.display().to_string()),
        ..Default::default()
    })
    .await;
    let mut d = distrusting.client(Proto::H1).await;
    let v = d.rpc("SendMessage", message("over tls", json!({}))).await;
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.unavailable",
        "{v}"
    );
}

#[tokio::test]
async fn list_tasks_pages_across_the_fleet_while_tasks_are_being_created() {
    let mut engines = Vec::new();
    for _ in 0..3 {
        engines.push(start_engine().await);
    }
    let more: String = engines
        .iter()
        .skip(1)
        .enumerate()
        .map(|(i, (url, _))| format!("\n[[upstreams]]\nname = \"agent-x{i}\"\nurl = \"{url}\"\n"))
        .collect();
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: engines[0].0.clone(),
        extra_upstream: more,
        extra_policy: "[[auth.bearer]]\nprincipal = \"mallory\"\ntoken_sha256 = \"6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754\"\n[limits]\nrequests_per_second = 100000\nburst = 100000\nclient_ip_requests_per_second = 100000\nclient_ip_burst = 100000\n".into(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H2).await;
    let mut before = std::collections::HashSet::new();
    for i in 0..15 {
        let v = c
            .rpc(
                "SendMessage",
                message(&format!("[[chunks:1]] {i}"), json!({})),
            )
            .await;
        before.insert(v["result"]["task"]["id"].as_str().unwrap().to_string());
    }
    // Keep creating tasks while another connection pages through the list.
    let (addr, ca) = (proxy.addr, proxy.ca.clone());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let creator = tokio::spawn(async move {
        let mut c = Client::connect(addr, &ca, Proto::H1).await;
        let mut n = 0;
        while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
            let v = c
                .rpc("SendMessage", message("[[chunks:1]] more", json!({})))
                .await;
            assert!(v["result"]["task"].is_object());
            n += 1;
        }
        n
    });
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let mut params = json!({"pageSize": 3});
        if !token.is_empty() {
            params["pageToken"] = json!(token);
        }
        let v = c.rpc("ListTasks", params).await;
        for t in v["result"]["tasks"].as_array().unwrap() {
            seen.push(t["id"].as_str().unwrap().to_string());
        }
        token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let created_meanwhile = creator.await.unwrap();
    let unique: std::collections::HashSet<_> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a task appeared twice");
    assert!(
        before.is_subset(&unique),
        "a task that existed before paging was missed"
    );
    assert!(created_meanwhile > 0);
    // Another principal sees none of it, on any agent of the fleet.
    let mallory = [
        ("authorization", "Bearer other-token"),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string();
    let (_, _, body) = c.request("POST", "/", &mallory, list).await;
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["result"]["totalSize"], 0, "{v}");
    for t in before.iter().take(5) {
        for method in ["GetTask", "CancelTask", "SubscribeToTask"] {
            let b = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": t}})
                .to_string();
            let (_, _, body) = c.request("POST", "/", &mallory, b).await;
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
        }
    }
}
