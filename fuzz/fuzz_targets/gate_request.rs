//! The whole request pipeline (`gate::Gate::handle`) without a socket: a sequence of
//! arbitrary requests (split at `\n###\n`; in each, the first 8 bytes choose the method, the
//! path, the caller (`alice`, `bob`, none, a wrong token, two headers), the content type, the
//! A2A version, the declared length, HTTP/1.1 or HTTP/2 and the client address; the rest is
//! the body) to a gate built for this input, whose agent is in the process and records what
//! reaches it. The agent's answers are fixed: for SendMessage task `task-N` in context `ctx-M`,
//! N the first character of the message's text when it is 0-3 (else 1), M the second when it
//! is 0-3 (else N; `-`: no `contextId` at all), so that callers' new conversations land in
//! tasks and contexts the agent names for others; for GetTask and CancelTask
//! `task-1` whatever task they name (the edge, which knows who owns what, must keep it from
//! everyone else, and refuses an answer about another task than the one asked for:
//! ListTasks reads its tasks through GetTask too); TaskNotFoundError for
//! everything else. The registry holds two tasks and two contexts, so an input evicts.
//!
//! Properties: never panics, never answers 500; every JSON-RPC error's reason is one of the
//! edge's codes (`reason::ALL`); every request the agent receives is strict JSON, a JSON-RPC
//! 2.0 request of one of the 11 methods with object params; a request refused before it is
//! forwarded (any 4xx, or a JSON-RPC error whose reason belongs to a check that runs before
//! forwarding) never reached the agent; a request that names a task (GetTask, CancelTask,
//! SubscribeToTask, the push-config methods, a message's `taskId`, its `referenceTaskIds`, the
//! push config sent with it) reaches the agent only for
//! a `task-N` and only for the caller it was shown to; and each `task-N` and `ctx-N` is only
//! ever shown to the caller it was first shown to (the agent answers every caller with
//! task-1, and names a context for whoever's text asks: the edge must refuse them to the
//! others), evicted or not (the registry remembers who owned an evicted task or context).
#![no_main]

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use a2a_edge::a2a::json::{parse_strict, MAX_DEPTH};
use a2a_edge::a2a::Method;
use a2a_edge::body::BoxBody;
use a2a_edge::gate::Process;
use a2a_edge::gate::{ConnInfo, Gate};
use a2a_edge::policy::{LoadMode, Policy};
use a2a_edge::reason;
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
principal = "alice"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

[[auth.bearer]]
principal = "bob"
token_sha256 = "d9298a10d1b0735837dc4bd85dac641b0f3cef27a47e5d53a54f2f3f5b2fcffa"

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
        let task = |n: char, context: Option<char>| {
            let mut t = json!({
            "id": format!("task-{n}"),
            "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                       "timestamp": "2026-12-05T00:00:00Z"}});
            if let Some(c) = context {
                t["contextId"] = json!(format!("ctx-{c}"));
            }
            t
        };
        // A careless (or hostile) agent: task-1 to whoever asks for any task, and the
        // task and context the message's text names to whoever sends one.
        let text = request["params"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("");
        let mut chars = text.chars();
        let digit = |c: Option<char>| c.filter(|c| ('0'..='3').contains(c));
        let n = digit(chars.next()).unwrap_or('1');
        let context = match chars.next() {
            Some('-') => None,
            c => Some(digit(c).unwrap_or(n)),
        };
        let answer = match request["method"].as_str() {
            Some("SendMessage") => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"task": task(n, context)}})
            }
            Some("GetTask" | "CancelTask") => {
                json!({"jsonrpc": "2.0", "id": id, "result": task('1', Some('1'))})
            }
            _ => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32001, "message": "Task not found"}}),
        };
        let resp = Response::builder()
            .header("content-type", "application/json")
            .body(a2a_edge::body::full(answer.to_string()))
            .unwrap();
        Box::pin(async move { resp })
    }
}

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        Policy::from_toml(std::path::Path::new("fuzz.toml"), POLICY, LoadMode::Check)
            .expect("the fuzz policy loads")
    })
}

/// A gate of its own for each input (no state carried from one input to the next), and its
/// agent.
async fn world() -> (Gate, Arc<Agent>) {
    let agent = Arc::new(Agent {
        seen: Mutex::new(Vec::new()),
    });
    let process = Process::in_memory(2, agent.clone());
    let url = url::Url::parse("https://edge.example/").unwrap();
    let gate = Gate::new(policy(), &url, 443, &process, None)
        .await
        .expect("the gate builds");
    (gate, agent)
}

/// The families of the checks that run before a request is forwarded.
const BEFORE_FORWARDING: &[&str] = &[
    "auth",
    "authz",
    "body",
    "content_type",
    "extensions",
    "http",
    "id",
    "int",
    "json",
    "jsonrpc",
    "message",
    "metadata",
    "params",
    "part",
    "push",
    "rate",
    "concurrency",
    "route",
    "string",
    "task_state",
    "tenant",
    "timestamp",
    "version",
    "workspace",
    "context",
    "list",
    "registry",
];

/// Who was first shown each of the agent's ids.
type Shown = std::collections::BTreeMap<String, Caller>;

/// Who a request is from, as far as the test knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Alice,
    Bob,
    Nobody,
}

fn request(data: &[u8]) -> Option<(Caller, Request<Full<Bytes>>)> {
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
    let req = Request::builder()
        .method(method)
        .uri(path)
        .version(if sel[6] % 2 == 0 {
            http::Version::HTTP_2
        } else {
            http::Version::HTTP_11
        });
    let (caller, req) = match sel[2] % 6 {
        0 | 1 => (Caller::Alice, req.header("authorization", "Bearer test")),
        2 => (Caller::Bob, req.header("authorization", "Bearer other")),
        3 => (Caller::Nobody, req),
        4 => (Caller::Nobody, req.header("authorization", "Bearer tes")),
        _ => (
            Caller::Nobody,
            req.header("authorization", "Bearer test")
                .header("authorization", "Bearer other"),
        ),
    };
    let mut req = req;
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
        4 => req
            .header("a2a-version", "1.0")
            .header("a2a-version", "1.0"),
        _ => req.header("a2a-version", "2"),
    };
    req = match sel[5] % 4 {
        0 | 1 => req.header("content-length", body.len()),
        2 => req,
        _ => req.header("content-length", "1e3"),
    };
    let req = req.body(Full::new(Bytes::copy_from_slice(body))).ok()?;
    Some((caller, req))
}

/// The requests of one input: its pieces between separators.
fn requests(data: &[u8]) -> Vec<&[u8]> {
    const SEP: &[u8] = b"\n###\n";
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(SEP.len()).position(|w| w == SEP) {
        out.push(&rest[..at]);
        rest = &rest[at + SEP.len()..];
    }
    out.push(rest);
    out.truncate(8);
    out
}

fuzz_target!(|data: &[u8]| {
    runtime().block_on(async {
        let (gate, agent) = world().await;
        // Who was first shown each of the agent's ids (`task-N`, `ctx-N`).
        let mut shown: Shown = Default::default();
        for piece in requests(data) {
            let Some((caller, req)) = request(piece) else {
                continue;
            };
            let conn = ConnInfo {
                peer: std::net::SocketAddr::from(([10, 0, 0, piece[7]], 40000)),
                client_cert: false,
                client_identity: None,
                gates: None,
            };
            let resp = gate.handle(conn, req).await;
            let status = resp.status();
            let body = resp.into_body().collect().await.map(|c| c.to_bytes());
            let body = body.unwrap_or_default();
            let seen = std::mem::take(&mut *agent.seen.lock().unwrap());
            check(caller, status, &body, &seen, &mut shown);
        }
    });
});

fn check(caller: Caller, status: StatusCode, body: &[u8], seen: &[Bytes], shown: &mut Shown) {
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR);
    for forwarded in seen {
        let v = parse_strict(forwarded, MAX_DEPTH).expect("the agent got strict JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        let m = v["method"].as_str().expect("a method");
        assert!(Method::from_name(m).is_some(), "{m}");
        assert!(v["params"].is_object(), "{v}");
        // A task is named to the agent (read, cancelled, subscribed to, its push configs, a
        // follow-up message) only for the caller it was shown to: the only tasks there are are
        // the agent's `task-N`, and only once shown (the edge must not let a caller probe the
        // agent for tasks it does not know to be theirs).
        let p = &v["params"];
        let named: Vec<&Value> = match m {
            "GetTask" | "CancelTask" | "SubscribeToTask" => vec![&p["id"]],
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => vec![&p["taskId"]],
            _ => {
                let references = p["message"]["referenceTaskIds"].as_array();
                let push = &p["configuration"]["taskPushNotificationConfig"];
                [p["message"].get("taskId"), push.get("taskId")]
                    .into_iter()
                    .flatten()
                    .chain(references.into_iter().flatten())
                    .collect()
            }
        };
        for task in named {
            let owner = task.as_str().and_then(|t| shown.get(t));
            assert_eq!(owner, Some(&caller), "{m} forwarded for {caller:?}: {v}");
        }
    }
    if status.is_client_error() {
        assert!(seen.is_empty(), "{status} but forwarded: {seen:?}");
    }
    // The caller's own JSON-RPC id comes back as it was sent (it may well say "task-1"):
    // everything else in the answer is what the edge shows.
    let mut answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let shown_bytes = match answer.as_object_mut() {
        Some(members) => {
            members.remove("id");
            serde_json::to_vec(&answer).unwrap_or_default()
        }
        None => body.to_vec(),
    };
    // Each of the agent's ids is shown to one caller only, the first it was shown to
    // (evicted from the registry or not).
    for n in '0'..='3' {
        for id in [format!("task-{n}"), format!("ctx-{n}")] {
            let quoted = format!("\"{id}\"");
            if shown_bytes
                .windows(quoted.len())
                .any(|w| w == quoted.as_bytes())
            {
                assert_ne!(caller, Caller::Nobody, "{id} shown to no one in particular");
                let first = *shown.entry(id.clone()).or_insert(caller);
                assert_eq!(first, caller, "{id} of {first:?} shown to {caller:?}");
            }
        }
    }
    if let Some(r) = answer["error"]["data"][0]["reason"].as_str() {
        assert!(
            reason::ALL.iter().any(|known| *known == r),
            "unknown reason {r}"
        );
        let family = r.split('.').next().unwrap_or("");
        // (`registry.full` is also the answer an agent's new task or context gets when the
        // registry has no room to record it: after forwarding, not relayed)
        if r.contains('.') && BEFORE_FORWARDING.contains(&family) && r != "registry.full" {
            assert!(seen.is_empty(), "{r} but forwarded: {seen:?}");
        }
    }
}
