//! The whole request pipeline (`gate::Gate::handle`) without a socket: arbitrary requests
//! (method, path, credentials, content type, A2A version, declared length, HTTP version and
//! client address chosen by the first 8 bytes; the rest is the body) to a gate whose agent is
//! in the process and records what reaches it. Its answers are fixed: a task for SendMessage,
//! TaskNotFoundError for everything else.
//!
//! Properties: never panics, never answers 500; every JSON-RPC error's reason is one of the
//! edge's codes (`reason::ALL`); every request the agent receives is strict JSON, a JSON-RPC
//! 2.0 request of one of the 11 methods with object params; and a request refused before it
//! is forwarded (any 4xx, or a JSON-RPC error whose reason belongs to a check that runs before
//! forwarding) never reached the agent.
#![no_main]

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use a2a_edge::a2a::json::{parse_strict, MAX_DEPTH};
use a2a_edge::a2a::Method;
use a2a_edge::body::BoxBody;
use a2a_edge::gate::{ConnInfo, Gate};
use a2a_edge::policy::{LoadMode, Policy};
use a2a_edge::reason;
use a2a_edge::state::ownership::Ownership;
use a2a_edge::state::registry::TaskRegistry;
use a2a_edge::state::Process;
use a2a_edge::telemetry::metrics::Metrics;
use a2a_edge::upstream::LocalAgent;
use a2a_edge_fuzz::runtime;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const POLICY: &str = r#"
[server]
listen = "127.0.0.1:0"
public_url = "https://edge.example/"

[tls]
dev = true

[[upstreams]]
name = "agent"
url = "embedded"

[auth]
[[auth.bearer]]
principal = "fuzz"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

[a2a]
max_body_bytes = 65536
"#;

/// Records the JSON-RPC requests that reach it (a POST; the edge also fetches the agent's
/// card with a GET, answered 404 here); answers at once.
struct Agent {
    seen: Mutex<Vec<Bytes>>,
}

impl LocalAgent for Agent {
    fn handle(
        &self,
        req: Request<Bytes>,
    ) -> Pin<Box<dyn std::future::Future<Output = Response<BoxBody>> + Send + '_>> {
        if req.method() != http::Method::POST {
            let resp = Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(a2a_edge::body::full(""))
                .unwrap();
            return Box::pin(async move { resp });
        }
        let body = req.into_body();
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        self.seen.lock().unwrap().push(body);
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let answer = if request["method"] == "SendMessage" {
            json!({"jsonrpc": "2.0", "id": id, "result": {"task": {
                "id": "task-1", "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                           "timestamp": "2026-12-05T00:00:00Z"}}}})
        } else {
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32001, "message": "Task not found"}})
        };
        let resp = Response::builder()
            .header("content-type", "application/json")
            .body(a2a_edge::body::full(answer.to_string()))
            .unwrap();
        Box::pin(async move { resp })
    }
}

struct World {
    gate: Gate,
    agent: Arc<Agent>,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let policy = Policy::from_toml(std::path::Path::new("fuzz.toml"), POLICY, LoadMode::Check)
            .expect("the fuzz policy loads");
        let agent = Arc::new(Agent {
            seen: Mutex::new(Vec::new()),
        });
        let local: Arc<dyn LocalAgent> = agent.clone();
        let process = Process {
            owners: Ownership::new(TaskRegistry::new(10_000), None),
            metrics: Arc::new(Metrics::new()),
            local_agent: Some(local),
            shared: None,
        };
        let url = url::Url::parse("https://edge.example/").unwrap();
        let gate = runtime()
            .block_on(Gate::new(&policy, &url, 443, &process, None))
            .expect("the gate builds");
        World { gate, agent }
    })
}

/// The families of the checks that run before a request is forwarded.
const BEFORE_FORWARDING: &[&str] = &[
    "auth", "authz", "body", "content_type", "extensions", "http", "id", "int", "json",
    "jsonrpc", "message", "metadata", "params", "part", "push", "rate", "concurrency", "route",
    "string", "task_state", "tenant", "timestamp", "version", "workspace", "context", "list",
    "registry",
];

fn request(data: &[u8]) -> Option<Request<Full<Bytes>>> {
    let (sel, body) = (data.get(..8)?, &data[8..]);
    let method = match sel[0] % 8 {
        0..=4 => "POST",
        5 => "GET",
        6 => "HEAD",
        _ => "PUT",
    };
    let path = match sel[1] % 8 {
        0..=4 => "/",
        5 => "/.well-known/agent-card.json",
        6 => "/.well-known/jwks.json",
        _ => "/a/../",
    };
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .version(if sel[6] % 2 == 0 { http::Version::HTTP_2 } else { http::Version::HTTP_11 });
    req = match sel[2] % 6 {
        0..=2 => req.header("authorization", "Bearer test"),
        3 => req,
        4 => req.header("authorization", "Bearer tes"),
        _ => req
            .header("authorization", "Bearer test")
            .header("authorization", "Bearer test"),
    };
    req = match sel[3] % 6 {
        0 | 1 => req.header("content-type", "application/json"),
        2 => req.header("content-type", "application/json; charset=utf-8"),
        3 => req,
        4 => req.header("content-type", "text/plain"),
        _ => req.header("content-type", "APPLICATION/JSON;charset=\"UTF-8\""),
    };
    req = match sel[4] % 6 {
        0 | 1 => req.header("a2a-version", "1.0"),
        2 => req,
        3 => req.header("a2a-version", "0.3"),
        4 => req.header("a2a-version", "1.0").header("a2a-version", "1.0"),
        _ => req.header("a2a-version", "2"),
    };
    req = match sel[5] % 4 {
        0 | 1 => req.header("content-length", body.len()),
        2 => req,
        _ => req.header("content-length", "1e3"),
    };
    req.body(Full::new(Bytes::copy_from_slice(body))).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(req) = request(data) else {
        return;
    };
    let w = world();
    w.agent.seen.lock().unwrap().clear();
    let conn = ConnInfo {
        peer: std::net::SocketAddr::from(([10, 0, 0, data[7]], 40000)),
        client_cert: false,
        client_identity: None,
    };
    let (status, body) = runtime().block_on(async {
        let resp = w.gate.handle(conn, req).await;
        let status = resp.status();
        let body = resp.into_body().collect().await.map(|c| c.to_bytes());
        (status, body.unwrap_or_default())
    });
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let seen = std::mem::take(&mut *w.agent.seen.lock().unwrap());
    for forwarded in &seen {
        let v = parse_strict(forwarded, MAX_DEPTH).expect("the agent got strict JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        let m = v["method"].as_str().expect("a method");
        assert!(Method::from_name(m).is_some(), "{m}");
        assert!(v["params"].is_object(), "{v}");
    }
    if status.is_client_error() {
        assert!(seen.is_empty(), "{status} but forwarded: {seen:?}");
    }
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(r) = answer["error"]["data"][0]["reason"].as_str() {
        assert!(
            reason::ALL.iter().any(|known| *known == r),
            "unknown reason {r}"
        );
        let family = r.split('.').next().unwrap_or("");
        if r.contains('.') && BEFORE_FORWARDING.contains(&family) {
            assert!(seen.is_empty(), "{r} but forwarded: {seen:?}");
        }
    }
});
