//! Several agents behind one edge (`[[agents]]`), over real TLS with HTTP/1.1 and HTTP/2:
//! routing by host and path prefix (and the attack spellings that must route nowhere), a
//! card per agent rewritten and signed for its own URL, one root JWKS, isolation of tasks
//! between agents, ListTasks per agent, per-agent rules, the catalog, authorization by
//! agent, metrics labels, and reloads that add and remove agents.

mod common;

use std::path::Path;

use a2a_edge::card::verify::{verify_card, VerifyKeys};
use a2a_edge::policy::{LoadMode, Policy};
use bytes::Bytes;
use common::*;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

/// One agent of a test policy: name, public URL (port 0: the listener's), upstream URL.
struct Agent<'a> {
    name: &'a str,
    url: &'a str,
    upstream: &'a str,
    /// Lines added to the agent's table (its own sections).
    extra: &'a str,
}

/// The two agents most tests use: `tf` and `ros` under two prefixes of `localhost`.
fn tf_and_ros<'a>(tf: &'a str, ros: &'a str) -> [Agent<'a>; 2] {
    let agent = |name, url, upstream| Agent {
        name,
        url,
        upstream,
        extra: "",
    };
    [
        agent("tf", "https://localhost:0/agents/tf/", tf),
        agent("ros", "https://localhost:0/agents/ros/", ros),
    ]
}

fn policy_text(dir: &Path, agents: &[Agent<'_>], extra: &str) -> String {
    let token_sha = hex(&a2a_edge::policy::sha256(TOKEN.as_bytes()));
    let mut text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:0/"
admin_listen = "127.0.0.1:0"

[tls]
dev = true
dev_dir = "{dir}/certs"

[auth]
[[auth.bearer]]
principal = "tester"
token_sha256 = "{token_sha}"
{MALLORY_ENTRY}
[card]
refresh_interval_ms = 60000
active_kid = "edge-1"
[[card.signing_keys]]
kid = "edge-1"
alg = "ES256"
private_key_file = "{dir}/edge-1.pem"
generate_if_missing = true
{extra}
"#,
        dir = dir.display()
    );
    for a in agents {
        text.push_str(&format!(
            "\n[[upstreams]]\nname = \"up-{n}\"\nurl = \"{u}\"\n",
            n = a.name,
            u = a.upstream
        ));
    }
    for a in agents {
        text.push_str(&format!(
            "\n[[agents]]\nname = \"{n}\"\npublic_url = \"{url}\"\nupstreams = [\"up-{n}\"]\n{extra}\n",
            n = a.name,
            url = a.url,
            extra = a.extra
        ));
    }
    text
}

async fn start(dir: TempDir, text: &str) -> Proxy {
    Proxy::start_text(dir, text).await
}

/// One request to `authority` (h1: the `Host` header; h2: the `:authority`).
async fn at(
    c: &mut Client,
    proto: Proto,
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> (StatusCode, http::HeaderMap, Bytes) {
    let mut b = Request::builder().method(method);
    b = match proto {
        Proto::H1 => b.uri(path).header("host", authority),
        Proto::H2 => b.uri(format!("https://{authority}{path}")),
    };
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = c.send(b.body(Full::new(body.into())).unwrap()).await;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, bytes)
}

/// A JSON-RPC call as `token` at `authority` + `path`: the answer.
#[allow(clippy::too_many_arguments)]
async fn rpc_at(
    c: &mut Client,
    proto: Proto,
    authority: &str,
    path: &str,
    token: &str,
    method: &str,
    params: Value,
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let headers = [
        ("authorization", token),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    let (status, _, b) = at(
        c,
        proto,
        authority,
        "POST",
        path,
        &headers,
        body.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    serde_json::from_slice(&b).unwrap()
}

/// GetTask of `task` as the test's caller at `authority` + `path`: the answer.
async fn get_task(c: &mut Client, proto: Proto, authority: &str, path: &str, task: &str) -> Value {
    rpc_at(
        c,
        proto,
        authority,
        path,
        ALICE,
        "GetTask",
        json!({"id": task}),
    )
    .await
}

/// A standalone engine whose card carries `name`; returns its JSON-RPC URL.
async fn engine_with_name(name: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let engine = a2a_edge::engine::Engine::new(a2a_edge::engine::EngineConfig {
        public_url: url.clone(),
        name: name.to_string(),
    });
    tokio::spawn(a2a_edge::engine::serve(
        listener,
        engine,
        std::future::pending::<()>(),
    ));
    url
}

/// Two engines under two prefixes of `localhost`, a third under a second host name.
struct Three {
    proxy: Proxy,
    port: u16,
    /// The engines' own `host:port`s (they name them in their cards).
    engines: Vec<String>,
}

async fn three(extra: &str, tf_extra: &str) -> Three {
    let tf = engine_with_name("terraform agent").await;
    let ros = engine_with_name("ros review agent").await;
    let third = engine_with_name("third-party agent").await;
    let dir = TempDir::new("agents");
    let text = policy_text(
        dir.path(),
        &[
            Agent {
                name: "tf",
                url: "https://localhost:0/agents/tf/",
                upstream: &tf,
                extra: tf_extra,
            },
            Agent {
                name: "ros",
                url: "https://localhost:0/agents/ros/",
                upstream: &ros,
                extra: "",
            },
            Agent {
                name: "third",
                url: "https://other.localhost:0/",
                upstream: &third,
                extra: "",
            },
        ],
        extra,
    );
    let proxy = start(dir, &text).await;
    let port = proxy.addr.port();
    let engines = [&tf, &ros, &third]
        .iter()
        .map(|u| {
            u.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string()
        })
        .collect();
    Three {
        proxy,
        port,
        engines,
    }
}

fn host(port: u16) -> String {
    format!("localhost:{port}")
}

#[tokio::test]
async fn each_agent_has_its_own_card_rewritten_and_signed_for_its_url() {
    let s = three("", "").await;
    let port = s.port;
    for proto in PROTOS {
        let mut c = s.proxy.client(proto).await;
        let (status, _, jwks) = at(
            &mut c,
            proto,
            &host(port),
            "GET",
            "/.well-known/jwks.json",
            &[],
            "",
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let mut keys = VerifyKeys::new();
        keys.add_jwks(&serde_json::from_slice(&jwks).unwrap())
            .unwrap();
        let mut etags = Vec::new();
        for (authority, path, name, url) in [
            (
                host(port),
                "/agents/tf/.well-known/agent-card.json",
                "terraform agent",
                format!("https://localhost:{port}/agents/tf/"),
            ),
            (
                host(port),
                "/agents/ros/.well-known/agent-card.json",
                "ros review agent",
                format!("https://localhost:{port}/agents/ros/"),
            ),
            (
                format!("other.localhost:{port}"),
                "/.well-known/agent-card.json",
                "third-party agent",
                format!("https://other.localhost:{port}/"),
            ),
        ] {
            let (status, h, body) = at(&mut c, proto, &authority, "GET", path, &[], "").await;
            assert_eq!(status, StatusCode::OK, "{authority}{path}");
            let card: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(card["name"], name, "{proto:?} {path}");
            assert_eq!(card["supportedInterfaces"][0]["url"], url.as_str());
            // The engine names its own address in its card (interfaces, provider): none
            // of it reaches callers.
            let text = String::from_utf8_lossy(&body);
            for engine in &s.engines {
                assert!(
                    !text.contains(engine.as_str()),
                    "{path} shows {engine}: {text}"
                );
            }
            assert!(
                verify_card(&card, &keys).is_valid(),
                "{path}: the signature verifies with the root JWKS"
            );
            etags.push(h["etag"].to_str().unwrap().to_string());
        }
        etags.sort();
        etags.dedup();
        assert_eq!(etags.len(), 3, "each card has its own ETag");
        // The extended card of each agent: that agent's, rewritten and signed for its URL.
        for (path, name) in [
            ("/agents/tf/", "terraform agent"),
            ("/agents/ros/", "ros review agent"),
        ] {
            let v = rpc_at(
                &mut c,
                proto,
                &host(port),
                path,
                ALICE,
                "GetExtendedAgentCard",
                json!({}),
            )
            .await;
            let card = &v["result"];
            assert_eq!(card["name"], name, "{v}");
            assert_eq!(
                card["supportedInterfaces"][0]["url"],
                format!("https://localhost:{port}{path}")
            );
            assert!(verify_card(card, &keys).is_valid(), "{path}");
            let text = card.to_string();
            for engine in &s.engines {
                assert!(
                    !text.contains(engine.as_str()),
                    "{path} shows {engine}: {text}"
                );
            }
        }
        // The edge's own root card is no agent's (no agent is published at `/` of localhost).
        let (status, _, _) = at(
            &mut c,
            proto,
            &host(port),
            "GET",
            "/.well-known/agent-card.json",
            &[],
            "",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn a_task_of_one_agent_is_not_found_at_another() {
    let s = three("", "").await;
    let h = host(s.port);
    for proto in PROTOS {
        let mut c = s.proxy.client(proto).await;
        let sent = rpc_at(
            &mut c,
            proto,
            &h,
            "/agents/tf/",
            ALICE,
            "SendMessage",
            message("plan", json!({})),
        )
        .await;
        let task = sent["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{sent}"))
            .to_string();
        let context = sent["result"]["task"]["contextId"]
            .as_str()
            .unwrap()
            .to_string();
        // Its own agent knows it.
        let got = get_task(&mut c, proto, &h, "/agents/tf", &task).await;
        assert_eq!(got["result"]["id"], task.as_str(), "{got}");
        // Every other agent: -32001, as for a task that does not exist.
        let cases = [
            ("GetTask", json!({"id": task})),
            ("CancelTask", json!({"id": task})),
            ("SubscribeToTask", json!({"id": task})),
            ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
            (
                "GetTaskPushNotificationConfig",
                json!({"taskId": task, "id": "c1"}),
            ),
            (
                "SendMessage",
                message("follow-up", json!({"taskId": task, "contextId": context})),
            ),
        ];
        for (authority, path) in [
            (h.clone(), "/agents/ros/"),
            (format!("other.localhost:{}", s.port), "/"),
        ] {
            for (method, params) in &cases {
                let v = rpc_at(
                    &mut c,
                    proto,
                    &authority,
                    path,
                    ALICE,
                    method,
                    params.clone(),
                )
                .await;
                assert_eq!(v["error"]["code"], -32001, "{proto:?} {path} {method}: {v}");
            }
            // ListTasks at another agent lists none of the first agent's tasks.
            let listed = rpc_at(
                &mut c,
                proto,
                &authority,
                path,
                ALICE,
                "ListTasks",
                json!({}),
            )
            .await;
            let ids: Vec<&str> = listed["result"]["tasks"]
                .as_array()
                .unwrap_or_else(|| panic!("{listed}"))
                .iter()
                .filter_map(|t| t["id"].as_str())
                .collect();
            assert!(!ids.contains(&task.as_str()), "{path}: {listed}");
        }
        let listed = rpc_at(
            &mut c,
            proto,
            &h,
            "/agents/tf/",
            ALICE,
            "ListTasks",
            json!({}),
        )
        .await;
        let ids: Vec<&str> = listed["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["id"].as_str())
            .collect();
        assert!(ids.contains(&task.as_str()), "{listed}");
        // Another caller at the task's own agent: -32001 too.
        let v = rpc_at(
            &mut c,
            proto,
            &h,
            "/agents/tf/",
            MALLORY,
            "GetTask",
            json!({"id": task}),
        )
        .await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
    }
}

#[tokio::test]
async fn path_and_host_spellings_never_reach_another_agent() {
    let tf = RecordingUpstream::start(Reply::Echo).await;
    let ros = RecordingUpstream::start(Reply::Echo).await;
    let dir = TempDir::new("agents");
    let text = policy_text(dir.path(), &tf_and_ros(&tf.url, &ros.url), "");
    let proxy = start(dir, &text).await;
    let port = proxy.addr.port();
    let h = host(port);
    // A SendMessage reaches an agent whenever it is routed to one.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", json!({}))})
        .to_string();
    let headers = rpc_headers();
    // Nothing here names an agent's exact host and path: 404, and no agent hears of it.
    let refused: Vec<(String, &str)> = vec![
        (h.clone(), "/agents/tf/../ros/"),
        (h.clone(), "/agents/tf/%2E%2E/ros/"),
        (h.clone(), "/agents/tf%2F..%2Fros/"),
        (h.clone(), "/agents/tf/..%2Fros/"),
        (h.clone(), "/agents/ros%2F"),
        (h.clone(), "//agents/ros/"),
        (h.clone(), "/agents//ros/"),
        (h.clone(), "/agents/ros//"),
        (h.clone(), "/agents/ros/./"),
        (h.clone(), "/agents/./ros/"),
        (h.clone(), "/Agents/ros/"),
        (h.clone(), "/agents/ROS/"),
        (h.clone(), "/agents/ros%2f"),
        (h.clone(), "/agents/%72os/"),
        (h.clone(), "/agents/ros\\"),
        (h.clone(), "/agents/ros/x"),
        (h.clone(), "/agents/"),
        (h.clone(), "/"),
        (h.clone(), "/agents/rosx/"),
        (format!("localhost..:{port}"), "/agents/ros/"),
        (format!("localhost:{port}0"), "/agents/ros/"),
        (format!("localhost:0{port}"), "/agents/ros/"),
        ("localhost".to_string(), "/agents/ros/"),
        (format!("127.0.0.1:{port}"), "/agents/ros/"),
        (format!("other.localhost:{port}"), "/agents/ros/"),
        (format!("localhost:{port}@evil"), "/agents/ros/"),
    ];
    for proto in PROTOS {
        for (authority, path) in &refused {
            // Some spellings cannot even be written as an HTTP/2 authority or URI.
            if proto == Proto::H2
                && (authority.contains('@') || path.contains('\\') || authority.contains(".."))
            {
                continue;
            }
            let mut c = proxy.client(proto).await;
            let (status, _, b) = at(
                &mut c,
                proto,
                authority,
                "POST",
                path,
                &headers,
                body.clone(),
            )
            .await;
            assert!(
                status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST,
                "{proto:?} {authority} {path}: {status} {}",
                String::from_utf8_lossy(&b)
            );
        }
    }
    assert!(tf.rpc_requests().is_empty(), "{:?}", tf.rpc_requests());
    assert!(ros.rpc_requests().is_empty(), "{:?}", ros.rpc_requests());
    // The same host however it is spelled (case, one trailing dot), and the prefix with or
    // without its slash: each reaches its own agent only.
    let routed: Vec<(String, &str)> = vec![
        (format!("LOCALHOST:{port}"), "/agents/ros/"),
        (format!("localhost.:{port}"), "/agents/ros"),
        (h.clone(), "/agents/ros/"),
    ];
    for proto in PROTOS {
        let mut c = proxy.client(proto).await;
        for (authority, path) in &routed {
            let (status, _, b) = at(
                &mut c,
                proto,
                authority,
                "POST",
                path,
                &headers,
                body.clone(),
            )
            .await;
            assert_eq!(
                status,
                StatusCode::OK,
                "{authority}{path}: {}",
                String::from_utf8_lossy(&b)
            );
        }
    }
    assert_eq!(ros.rpc_requests().len(), 2 * routed.len());
    assert!(tf.rpc_requests().is_empty());
}

#[tokio::test]
async fn each_agent_keeps_its_own_rules_and_rates() {
    // tf requires an extension, caps bodies at 2 KiB and allows one SendMessage at a time;
    // ros has the global rules.
    let tf_extra = r#"[agents.a2a]
max_body_bytes = 2048
required_extensions = ["https://example.com/ext/tf/v1"]
[agents.limits.methods]
SendMessage = { requests_per_second = 0.01, burst = 1 }
"#;
    let s = three("", tf_extra).await;
    let h = host(s.port);
    let mut c = s.proxy.client(Proto::H1).await;
    let refused = rpc_at(
        &mut c,
        Proto::H1,
        &h,
        "/agents/tf/",
        ALICE,
        "GetTask",
        json!({"id": "x"}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32008, "{refused}");
    let ok = rpc_at(
        &mut c,
        Proto::H1,
        &h,
        "/agents/ros/",
        ALICE,
        "GetTask",
        json!({"id": "x"}),
    )
    .await;
    assert_eq!(
        ok["error"]["code"], -32001,
        "ros has no extension to require: {ok}"
    );
    // The body cap.
    let big = message(&"x".repeat(4096), json!({}));
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": big}).to_string();
    let mut headers = rpc_headers();
    headers.push(("a2a-extensions", "https://example.com/ext/tf/v1"));
    let (status, refusal_headers, _) = at(
        &mut c,
        Proto::H1,
        &h,
        "POST",
        "/agents/tf/",
        &headers,
        body.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Its body is not read: the connection closes (and says so).
    assert_eq!(refusal_headers["connection"], "close");
    let mut c = s.proxy.client(Proto::H1).await;
    let (status, _, b) = at(
        &mut c,
        Proto::H1,
        &h,
        "POST",
        "/agents/ros/",
        &rpc_headers(),
        body,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    // The method rate: tf's own, per agent.
    let small = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("a", json!({}))}).to_string();
    let (first, _, _) = at(
        &mut c,
        Proto::H1,
        &h,
        "POST",
        "/agents/tf/",
        &headers,
        small.clone(),
    )
    .await;
    let (second, _, _) = at(
        &mut c,
        Proto::H1,
        &h,
        "POST",
        "/agents/tf/",
        &headers,
        small.clone(),
    )
    .await;
    assert_eq!(
        (first, second),
        (StatusCode::OK, StatusCode::TOO_MANY_REQUESTS)
    );
    let (other, _, _) = at(
        &mut c,
        Proto::H1,
        &h,
        "POST",
        "/agents/ros/",
        &rpc_headers(),
        small,
    )
    .await;
    assert_eq!(other, StatusCode::OK, "ros's rate is not tf's");
    // The metrics carry the agent's name.
    let (status, metrics) = admin_get(&s.proxy, "/metrics").await;
    assert_eq!(status, 200);
    for agent in ["tf", "ros"] {
        assert!(
            metrics.contains(&format!(
                "a2a_edge_requests_total{{agent=\"{agent}\",route=\"rpc\""
            )),
            "{metrics}"
        );
    }
}

#[tokio::test]
async fn the_catalog_lists_agents_and_what_a_caller_may_use() {
    let authz = r#"
[authz]
default = "deny"
[[authz.rules]]
name = "tester everywhere"
principals = ["tester"]
methods = ["*"]
[[authz.rules]]
name = "mallory at ros"
principals = ["mallory"]
agents = ["ros"]
methods = ["read", "write"]
"#;
    let s = three(authz, "").await;
    let port = s.port;
    let h = host(port);
    for proto in PROTOS {
        let mut c = s.proxy.client(proto).await;
        let (status, headers, body) = at(
            &mut c,
            proto,
            &h,
            "GET",
            "/.well-known/agents.json",
            &[],
            "",
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers["cache-control"]
            .to_str()
            .unwrap()
            .starts_with("public"));
        let doc: Value = serde_json::from_slice(&body).unwrap();
        let names: Vec<&str> = doc["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["tf", "ros", "third"]);
        assert_eq!(
            doc["agents"][0]["cardUrl"],
            format!("https://localhost:{port}/agents/tf/.well-known/agent-card.json")
        );
        assert!(doc["agents"][1]["description"]
            .as_str()
            .unwrap()
            .starts_with("An in-memory A2A 1.0 echo agent"));
        assert_eq!(
            doc["agents"][2]["cardUrl"],
            format!("https://other.localhost:{port}/.well-known/agent-card.json")
        );
        assert!(doc["signatures"][0]["protected"].is_string(), "{doc}");
        // The ETag answers a conditional request.
        let etag = headers["etag"].to_str().unwrap().to_string();
        let (status, _, _) = at(
            &mut c,
            proto,
            &h,
            "GET",
            "/.well-known/agents.json",
            &[("if-none-match", &etag)],
            "",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        // An authenticated caller sees the agents it may use.
        for (token, want) in [(ALICE, vec!["tf", "ros", "third"]), (MALLORY, vec!["ros"])] {
            let (status, headers, body) = at(
                &mut c,
                proto,
                &h,
                "GET",
                "/.well-known/agents.json",
                &[("authorization", token)],
                "",
            )
            .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(headers["cache-control"], "private, no-store");
            let doc: Value = serde_json::from_slice(&body).unwrap();
            let names: Vec<&str> = doc["agents"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, want);
        }
        let (status, _, _) = at(
            &mut c,
            proto,
            &h,
            "GET",
            "/.well-known/agents.json",
            &[("authorization", "Bearer wrong")],
            "",
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        // Mallory may not use tf at all: not even its extended card.
        for method in ["GetExtendedAgentCard", "GetTask"] {
            let v = rpc_at(
                &mut c,
                proto,
                &h,
                "/agents/tf/",
                MALLORY,
                method,
                json!({"id": "t"}),
            )
            .await;
            assert_eq!(v["error"]["code"], -32050, "{method}: {v}");
        }
        let v = rpc_at(
            &mut c,
            proto,
            &h,
            "/agents/ros/",
            MALLORY,
            "GetTask",
            json!({"id": "t"}),
        )
        .await;
        assert_eq!(v["error"]["code"], -32001, "mallory may use ros: {v}");
    }
}

#[tokio::test]
async fn a_reload_adds_and_removes_agents() {
    let tf = engine_with_name("terraform agent").await;
    let ros = engine_with_name("ros review agent").await;
    let dir = TempDir::new("agents");
    let d = dir.path().to_path_buf();
    let agent = |name: &'static str, upstream: &str| Agent {
        name,
        url: if name == "tf" {
            "https://localhost:0/agents/tf/"
        } else {
            "https://localhost:0/agents/ros/"
        },
        upstream: Box::leak(upstream.to_string().into_boxed_str()),
        extra: "",
    };
    let proxy = start(dir, &policy_text(&d, &[agent("tf", &tf)], "")).await;
    let h = host(proxy.addr.port());
    let card = |path: &'static str| format!("/agents/{path}/.well-known/agent-card.json");
    let mut c = proxy.client(Proto::H2).await;
    let (s1, _, _) = at(&mut c, Proto::H2, &h, "GET", &card("tf"), &[], "").await;
    let (s2, _, _) = at(&mut c, Proto::H2, &h, "GET", &card("ros"), &[], "").await;
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::NOT_FOUND));
    let sent = rpc_at(
        &mut c,
        Proto::H2,
        &h,
        "/agents/tf/",
        ALICE,
        "SendMessage",
        message("a", json!({})),
    )
    .await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    proxy
        .reload(&policy_text(
            &d,
            &[agent("tf", &tf), agent("ros", &ros)],
            "",
        ))
        .await;
    let (s1, _, _) = at(&mut c, Proto::H2, &h, "GET", &card("tf"), &[], "").await;
    let (s2, _, body) = at(&mut c, Proto::H2, &h, "GET", &card("ros"), &[], "").await;
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK));
    let ros_card: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(ros_card["name"], "ros review agent");
    // The task of tf is still tf's after the reload, and still no one else's.
    let v = get_task(&mut c, Proto::H2, &h, "/agents/tf/", &task).await;
    assert_eq!(v["result"]["id"], task.as_str(), "{v}");
    let v = get_task(&mut c, Proto::H2, &h, "/agents/ros/", &task).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    proxy
        .reload(&policy_text(&d, &[agent("ros", &ros)], ""))
        .await;
    let (s1, _, _) = at(&mut c, Proto::H2, &h, "GET", &card("tf"), &[], "").await;
    let (s2, _, _) = at(&mut c, Proto::H2, &h, "GET", &card("ros"), &[], "").await;
    assert_eq!((s1, s2), (StatusCode::NOT_FOUND, StatusCode::OK));
    let (status, _, _) = at(
        &mut c,
        Proto::H2,
        &h,
        "POST",
        "/agents/tf/",
        &rpc_headers(),
        "{}",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a removed agent is gone");
}

#[tokio::test]
async fn agents_stay_apart_across_replicas_sharing_redis() {
    let redis = RedisServer::start();
    std::env::set_var(
        "A2A_EDGE_TEST_PAGE_SECRET",
        "a-page-token-secret-of-at-least-32-bytes",
    );
    let state = format!(
        "[state]\nbackend = \"redis\"\nredis_url = \"{}\"\nkey_prefix = \"agents:\"\ntimeout_ms = 1000\npage_token_secret_env = \"A2A_EDGE_TEST_PAGE_SECRET\"\n",
        redis.url()
    );
    let tf = engine_with_name("terraform agent").await;
    let ros = engine_with_name("ros review agent").await;
    let replica = || async {
        let dir = TempDir::new("agents-redis");
        let agents = tf_and_ros(&tf, &ros);
        let text = policy_text(dir.path(), &agents, &state);
        start(dir, &text).await
    };
    let (a, b) = (replica().await, replica().await);
    let (ha, hb) = (host(a.addr.port()), host(b.addr.port()));
    let mut ca = a.client(Proto::H1).await;
    let mut cb = b.client(Proto::H2).await;
    let sent = rpc_at(
        &mut ca,
        Proto::H1,
        &ha,
        "/agents/tf/",
        ALICE,
        "SendMessage",
        message("plan", json!({})),
    )
    .await;
    let task = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_string();
    // The other replica knows the task at its agent (from Redis), and only there.
    let v = get_task(&mut cb, Proto::H2, &hb, "/agents/tf/", &task).await;
    assert_eq!(v["result"]["id"], task.as_str(), "{v}");
    let v = get_task(&mut cb, Proto::H2, &hb, "/agents/ros/", &task).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = get_task(&mut ca, Proto::H1, &ha, "/agents/ros/", &task).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    // ListTasks from Redis: per agent.
    let ids = |v: &Value| -> Vec<String> {
        v["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .filter_map(|t| t["id"].as_str().map(str::to_string))
            .collect()
    };
    let at_ros = rpc_at(
        &mut cb,
        Proto::H2,
        &hb,
        "/agents/ros/",
        ALICE,
        "ListTasks",
        json!({}),
    )
    .await;
    assert!(ids(&at_ros).is_empty(), "{at_ros}");
    let at_tf = rpc_at(
        &mut cb,
        Proto::H2,
        &hb,
        "/agents/tf/",
        ALICE,
        "ListTasks",
        json!({}),
    )
    .await;
    assert_eq!(ids(&at_tf), vec![task], "{at_tf}");
}

#[tokio::test]
async fn agent_paths_are_served_under_each_prefix_to_that_agent() {
    let tf = RecordingUpstream::start(Reply::Echo).await;
    let ros = RecordingUpstream::start(Reply::Echo).await;
    let dir = TempDir::new("agents");
    let text = policy_text(dir.path(), &tf_and_ros(&tf.url, &ros.url), "").replacen(
        "admin_listen",
        "agent_paths = [\"/iac-code/readiness\"]\nadmin_listen",
        1,
    );
    let proxy = start(dir, &text).await;
    let h = host(proxy.addr.port());
    let mut c = proxy.client(Proto::H1).await;
    let auth = [("authorization", ALICE)];
    let (status, _, b) = at(
        &mut c,
        Proto::H1,
        &h,
        "GET",
        "/agents/ros/iac-code/readiness?x=1",
        &auth,
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let seen: Vec<String> = ros
        .requests()
        .iter()
        .filter(|r| r.path != "/.well-known/agent-card.json" && r.path != "/health")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(seen, ["/iac-code/readiness"]);
    // Not at the root, not under another spelling, and never to the other agent.
    for path in [
        "/iac-code/readiness",
        "/agents/ros//iac-code/readiness",
        "/agents/ros/iac-code/readiness/",
    ] {
        let (status, _, _) = at(&mut c, Proto::H1, &h, "GET", path, &auth, "").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    assert!(tf
        .requests()
        .iter()
        .all(|r| r.path == "/.well-known/agent-card.json" || r.path == "/health"));
}

#[test]
fn the_shipped_agents_policy_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/agents.toml");
    let p = Policy::load(&path, LoadMode::Check).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = p.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["iac-code", "ros-review", "partner"]);
    assert!(p
        .summary()
        .contains("agent    partner at https://partner.localhost:8443/"));
}

#[tokio::test]
async fn without_agents_the_catalog_lists_the_one_agent() {
    let proxy = Proxy::start(ProxyOpts::default()).await;
    let mut c = proxy.client(Proto::H2).await;
    let (status, _, body) = c.request("GET", "/.well-known/agents.json", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["agents"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["agents"][0]["name"], "a2a-edge echo agent");
    assert_eq!(
        doc["agents"][0]["cardUrl"],
        format!("{}.well-known/agent-card.json", proxy.public_url)
    );
}

/// The binary as operators run it: each request line and audit line names its agent.
#[tokio::test]
async fn logs_name_the_agent() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let tf = engine_with_name("terraform agent").await;
    let ros = engine_with_name("ros review agent").await;
    let dir = TempDir::new("agents-logs");
    let authz = "[authz]\n[[authz.rules]]\nname = \"tester at tf\"\nprincipals = [\"tester\"]\nagents = [\"tf\"]\nmethods = [\"*\"]\n";
    let agents = tf_and_ros(&tf, &ros);
    let file = dir.path().join("p.toml");
    std::fs::write(&file, policy_text(dir.path(), &agents, authz)).unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .args(["serve", "--policy"])
        .arg(&file)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready.exists() {
        assert!(std::time::Instant::now() < deadline, "no ready file");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let info: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    let addr: std::net::SocketAddr = info["listen"].as_str().unwrap().parse().unwrap();
    let mut c = Client::connect(addr, &dir.path().join("certs/ca.pem"), Proto::H1).await;
    let h = host(addr.port());
    let v = rpc_at(
        &mut c,
        Proto::H1,
        &h,
        "/agents/tf/",
        ALICE,
        "GetTask",
        json!({"id": "t"}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = rpc_at(
        &mut c,
        Proto::H1,
        &h,
        "/agents/ros/",
        ALICE,
        "GetTask",
        json!({"id": "t"}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32050, "{v}");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut out = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let _ = child.wait();
    let lines: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let request = |agent: &str| {
        lines
            .iter()
            .any(|l| l["event"] == "request" && l["agent"] == agent && l["route"] == "rpc")
    };
    assert!(request("tf") && request("ros"), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "authz_refused" && l["agent"] == "ros"),
        "{out}"
    );
}
