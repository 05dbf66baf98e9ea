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
    // ListTasks still lists every task: the dead agent's as the edge knows them (id,
    // context, state), the others' as their agents answer.
    let v = c.rpc("ListTasks", json!({"pageSize": 100})).await;
    let listed = v["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(listed.len(), 10, "{v}");
    for (i, t) in tasks.iter().enumerate() {
        let entry = listed
            .iter()
            .find(|e| e["id"] == t.as_str())
            .unwrap_or_else(|| panic!("{t} listed: {v}"));
        assert_eq!(entry["contextId"], format!("ctx-{i}"), "{entry}");
        assert_eq!(
            entry["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{entry}"
        );
        assert_eq!(
            entry.get("history").is_none(),
            owner[i] == victim,
            "{entry}"
        );
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

/// Reloads the proxy with `upstreams` (TOML `[[upstreams]]` tables) in place of its own.
async fn reload_with(proxy: &Proxy, upstreams: &str) {
    let text = PolicyDoc::base(proxy.dir.path())
        .remove("upstreams")
        .merge(upstreams)
        .text();
    proxy.reload(&text).await;
}

#[tokio::test]
async fn a_reload_that_reorders_the_fleet_keeps_contexts_with_their_agent() {
    let (one, _stop1) = start_engine().await;
    let (two, _stop2) = start_engine().await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: one.clone(),
        ..Default::default()
    })
    .await;
    let mut c = proxy.client(Proto::H1).await;
    let v = c
        .rpc(
            "SendMessage",
            message("[[input]] hello", json!({"contextId": "ctx-reload"})),
        )
        .await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert!(engine_has_task(&one, &task).await);
    // A new agent first in the list: agent-1 moves from the first place to the second.
    reload_with(
        &proxy,
        &format!(
            "[[upstreams]]\nname = \"agent-0\"\nurl = \"{two}\"\n\n[[upstreams]]\nname = \"agent-1\"\nurl = \"{one}\"\n"
        ),
    )
    .await;
    for _ in 0..3 {
        let v = c
            .rpc(
                "SendMessage",
                message(
                    "[[input]] again",
                    json!({"contextId": "ctx-reload", "taskId": task}),
                ),
            )
            .await;
        assert_eq!(v["result"]["task"]["id"], task.as_str(), "{v}");
        let v = c.rpc("GetTask", json!({"id": task})).await;
        assert_eq!(v["result"]["id"], task.as_str(), "{v}");
    }
    assert!(!engine_has_task(&two, &task).await);
    // agent-1 removed: its context fails clearly, it does not move to agent-0.
    reload_with(
        &proxy,
        &format!("[[upstreams]]\nname = \"agent-0\"\nurl = \"{two}\"\n"),
    )
    .await;
    let v = c.rpc("GetTask", json!({"id": task})).await;
    assert!(v.get("error").is_some(), "{v}");
    // New contexts go to agent-0.
    let v = c
        .rpc("SendMessage", message("[[input]] new", json!({})))
        .await;
    let fresh = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert!(engine_has_task(&two, &fresh).await);
}

#[tokio::test]
async fn a_reload_keeps_what_the_edge_knows_of_an_agents_health() {
    let (live, _stop) = start_engine().await;
    let dead = closed_port_url().await;
    // Checks at start-up, then once a minute: nothing but the start-up check runs in this test.
    let dead_agent = format!(
        "[[upstreams]]\nname = \"agent-dead\"\nurl = \"{dead}\"\nhealth_interval_ms = 60000\nunhealthy_threshold = 1\n"
    );
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: live.clone(),
        extra_upstream: format!("health_interval_ms = 60000\n\n{dead_agent}"),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    })
    .await;
    let admin = proxy.running.as_ref().unwrap().admin_addr.unwrap();
    until_unhealthy(admin, "agent-dead", "agent-dead never ejected").await;
    // The same agents again: agent-dead stays out (carried over; a fresh fleet would call it
    // healthy until the check that follows the reload: src/upstream/fleet.rs tests that part
    // deterministically) and no new context goes to it.
    let live_agent = format!(
        "[[upstreams]]\nname = \"agent-1\"\nurl = \"{live}\"\nhealth_interval_ms = 60000\n"
    );
    reload_with(&proxy, &format!("{live_agent}\n{dead_agent}")).await;
    let text = metrics(admin).await;
    assert!(
        text.contains("a2a_edge_upstream_healthy{upstream=\"agent-dead\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("a2a_edge_upstream_healthy{upstream=\"agent-1\"} 1\n"),
        "{text}"
    );
    let mut c = proxy.client(Proto::H1).await;
    for _ in 0..4 {
        let v = c
            .rpc("SendMessage", message("[[input]] hi", json!({})))
            .await;
        assert!(
            v.get("result").is_some(),
            "a new context went to the dead agent: {v}"
        );
    }
    // A new target under the same name starts fresh (healthy until checked).
    reload_with(
        &proxy,
        &format!("{live_agent}\n{}", dead_agent.replace(&dead, &live)),
    )
    .await;
    let text = metrics(admin).await;
    assert!(
        text.contains("a2a_edge_upstream_healthy{upstream=\"agent-dead\"} 1\n"),
        "{text}"
    );
}

/// Waits (10 s at most, else fails with `why`) until the admin's metrics say `agent` is
/// unhealthy.
async fn until_unhealthy(admin: std::net::SocketAddr, agent: &str, why: &str) {
    let line = format!("a2a_edge_upstream_healthy{{upstream=\"{agent}\"}} 0\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !metrics(admin).await.contains(&line) {
        assert!(Instant::now() < deadline, "{why}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn metrics(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).await.unwrap();
    text
}

#[tokio::test]
async fn a_reload_checks_the_agents_at_once() {
    let (live, _stop) = start_engine().await;
    let dead = closed_port_url().await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: live.clone(),
        extra_upstream: "health_interval_ms = 60000\n".into(),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    })
    .await;
    let admin = proxy.running.as_ref().unwrap().admin_addr.unwrap();
    // A dead agent joins; the next scheduled check is a minute away, yet it is found out now.
    reload_with(
        &proxy,
        &format!(
            "[[upstreams]]\nname = \"agent-1\"\nurl = \"{live}\"\nhealth_interval_ms = 60000\n\n[[upstreams]]\nname = \"agent-new\"\nurl = \"{dead}\"\nhealth_interval_ms = 60000\nunhealthy_threshold = 1\n"
        ),
    )
    .await;
    until_unhealthy(
        admin,
        "agent-new",
        "the new agent was not checked after the reload",
    )
    .await;
}

/// Two agents, one of which never answers its health path (its response timeout a minute):
/// each check is bounded by the health interval, so the silent agent's check fails (and
/// ejects it) at that time, and the other agent goes on being checked at its interval
/// instead of waiting a minute for the silent one's check.
#[tokio::test]
async fn a_silent_agent_does_not_hold_up_the_others_health_checks() {
    use common::{RawAgent, RawAnswer};
    let live = RawAgent::start(RawAnswer::Whole, RawAnswer::Whole, RawAnswer::Whole).await;
    let silent = RawAgent::start(RawAnswer::Whole, RawAnswer::Silent, RawAnswer::Whole).await;
    let proxy = Proxy::start(ProxyOpts {
        upstream_url: live.url.clone(),
        extra_upstream: format!(
            "health_interval_ms = 200\nresponse_timeout_ms = 60000\n\n[[upstreams]]\nname = \"agent-silent\"\nurl = \"{}\"\nhealth_interval_ms = 200\nresponse_timeout_ms = 60000\nunhealthy_threshold = 1\n",
            silent.url
        ),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    })
    .await;
    let admin = proxy.running.as_ref().unwrap().admin_addr.unwrap();
    until_unhealthy(
        admin,
        "agent-silent",
        "agent-silent never ejected: its check waited for the response timeout",
    )
    .await;
    // Rounds of at most 200 ms: the live agent is checked again and again meanwhile.
    let deadline = Instant::now() + Duration::from_secs(10);
    let checked = live.count("/health");
    while live.count("/health") < checked + 3 {
        assert!(
            Instant::now() < deadline,
            "the live agent's checks waited for the silent one ({} so far)",
            live.count("/health")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = metrics(admin).await;
    assert!(
        text.contains("a2a_edge_upstream_healthy{upstream=\"agent-1\"} 1\n"),
        "{text}"
    );
    // New contexts go to the live agent only.
    let mut c = proxy.client(Proto::H1).await;
    let before = silent.count("/");
    for _ in 0..3 {
        let v = c.rpc("SendMessage", message("hi", json!({}))).await;
        assert_eq!(v["result"]["message"]["parts"][0]["text"], "ok", "{v}");
    }
    assert_eq!(silent.count("/"), before);
}
