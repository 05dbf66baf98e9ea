//! Engine tests through [`Engine::handle`] (every method, the state machine, streams, paging)
//! and one through [`serve`] over real sockets.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::*;
use crate::a2a::sse::SseDecoder;
use crate::time;

/// Guards against a hang; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

fn engine() -> Arc<Engine> {
    Engine::new(EngineConfig::default())
}

fn rpc(method: &str, params: Value) -> Request<Bytes> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    Request::post("/")
        .header("a2a-version", "1.0")
        .body(Bytes::from(body.to_string()))
        .unwrap()
}

async fn body_json<B>(body: B) -> Value
where
    B: Body,
    B::Error: std::fmt::Debug,
{
    let bytes = body.collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

fn content_type<B>(resp: &Response<B>) -> &str {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The JSON body of a JSON-RPC answer (checks HTTP 200 application/json).
async fn call(e: &Arc<Engine>, method: &str, params: Value) -> Value {
    let resp = e.handle(rpc(method, params)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(content_type(&resp), "application/json");
    let v = body_json(resp.into_body()).await;
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], 7);
    v
}

async fn result(e: &Arc<Engine>, method: &str, params: Value) -> Value {
    let v = call(e, method, params).await;
    assert!(v.get("error").is_none(), "{method}: {v}");
    v["result"].clone()
}

async fn error_code(e: &Arc<Engine>, method: &str, params: Value) -> i64 {
    let v = call(e, method, params).await;
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{method}: {v}"))
}

fn user(text: &str) -> Value {
    json!({"messageId": ids::uuid_v4(), "role": "ROLE_USER", "parts": [{"text": text}]})
}

fn user_in(text: &str, context_id: Option<&str>, task_id: Option<&str>) -> Value {
    let mut m = user(text);
    if let Some(c) = context_id {
        m["contextId"] = json!(c);
    }
    if let Some(t) = task_id {
        m["taskId"] = json!(t);
    }
    m
}

async fn send(e: &Arc<Engine>, message: Value) -> Value {
    result(e, "SendMessage", json!({ "message": message })).await["task"].clone()
}

/// Starts a `[[wait]]` turn and returns at once (the task stays WORKING until canceled).
async fn send_waiting(e: &Arc<Engine>, context_id: Option<&str>) -> Value {
    let params = json!({
        "message": user_in("[[wait]] hold", context_id, None),
        "configuration": {"returnImmediately": true},
    });
    result(e, "SendMessage", params).await["task"].clone()
}

fn text_of(message: &Value) -> String {
    message["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

/// Reads an SSE body event by event (the `data:` JSON of each).
struct Sse<B> {
    body: B,
    decoder: SseDecoder,
    pending: VecDeque<Value>,
}

impl<B> Sse<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    fn new(body: B) -> Self {
        Self {
            body,
            decoder: SseDecoder::new(1 << 20),
            pending: VecDeque::new(),
        }
    }

    /// The next event, `None` at the end of the stream.
    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(PATIENCE, self.next_inner())
            .await
            .expect("stream stalled")
    }

    async fn next_inner(&mut self) -> Option<Value> {
        loop {
            if let Some(v) = self.pending.pop_front() {
                return Some(v);
            }
            let frame = self.body.frame().await?.unwrap();
            if let Ok(data) = frame.into_data() {
                for ev in self.decoder.push(&data).unwrap() {
                    if let Some(d) = ev.data {
                        self.pending.push_back(serde_json::from_str(&d).unwrap());
                    }
                }
            }
        }
    }

    async fn rest(mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.next().await {
            out.push(v);
        }
        out
    }
}

fn assert_sse_headers<B>(resp: &Response<B>) {
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(content_type(resp), "text/event-stream; charset=utf-8");
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
}

async fn open_stream(e: &Arc<Engine>, method: &str, params: Value) -> Sse<BoxBody> {
    let resp = e.handle(rpc(method, params)).await;
    assert_sse_headers(&resp);
    Sse::new(resp.into_body())
}

/// Polls GetTask until the task leaves SUBMITTED/WORKING (bounded by PATIENCE).
async fn settle(e: &Arc<Engine>, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let t = result(e, "GetTask", json!({ "id": id })).await;
        if !matches!(state(&t), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING") {
            return t;
        }
        assert!(tokio::time::Instant::now() < deadline, "task never settled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- HTTP routes, envelope, version ----

#[tokio::test]
async fn routes() {
    let e = engine();
    let get = |path: &str, method: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .body(Bytes::new())
            .unwrap()
    };
    for m in ["GET", "HEAD"] {
        let resp = e.handle(get("/health", m)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(content_type(&resp), "application/json");
        assert_eq!(
            body_json(resp.into_body()).await,
            json!({"status": "healthy"})
        );
        let resp = e.handle(get("/.well-known/agent-card.json", m)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(body_json(resp.into_body()).await, e.card());
    }
    for (path, method, allow) in [
        ("/health", "POST", "GET, HEAD"),
        ("/.well-known/agent-card.json", "POST", "GET, HEAD"),
        ("/", "GET", "POST"),
        ("/", "PUT", "POST"),
    ] {
        let resp = e.handle(get(path, method)).await;
        assert_eq!(
            resp.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(resp.headers()["allow"], allow);
        assert_eq!(content_type(&resp), "application/json");
    }
    for path in ["/nope", "/iac-code/readiness", "/health/"] {
        let resp = e.handle(get(path, "GET")).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(content_type(&resp), "application/json");
    }

    // The path of public_url also takes JSON-RPC, with or without a trailing slash.
    let e = Engine::new(EngineConfig {
        public_url: "https://edge.example/a2a".into(),
        name: "n".into(),
    });
    for path in ["/a2a", "/a2a/", "/"] {
        let mut req = rpc("GetTask", json!({"id": "x"}));
        *req.uri_mut() = path.parse().unwrap();
        let v = body_json(e.handle(req).await.into_body()).await;
        assert_eq!(v["error"]["code"], -32001, "{path}");
    }
}

#[tokio::test]
async fn card_shape() {
    let e = Engine::new(EngineConfig {
        public_url: "https://edge.example/".into(),
        name: "Edge echo".into(),
    });
    let c = e.card();
    assert_eq!(c["name"], "Edge echo");
    assert_eq!(c["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        c["supportedInterfaces"],
        json!([{"url": "https://edge.example/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert!(c.get("provider").is_none(), "{c}");
    assert_eq!(
        c["capabilities"],
        json!({"streaming": true, "pushNotifications": false, "extendedAgentCard": true})
    );
    assert_eq!(c["defaultInputModes"].as_array().map(Vec::len), Some(14));
    assert_eq!(c["defaultOutputModes"], json!(["text/plain"]));
    assert_eq!(c["skills"][0]["id"], "echo");
    assert_eq!(c["skills"][0]["tags"], json!(["echo"]));
    assert!(c["description"].as_str().is_some_and(|d| !d.is_empty()));

    let x = result(&e, "GetExtendedAgentCard", json!({})).await;
    let ids: Vec<&str> = x["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["echo", "runtime_details"]);
    assert_eq!(x["name"], c["name"]);
}

#[tokio::test]
async fn envelope_and_version_errors() {
    let e = engine();
    let raw = |body: &str, version: Option<&str>| {
        let mut b = Request::post("/");
        if let Some(v) = version {
            b = b.header("a2a-version", v);
        }
        b.body(Bytes::from(body.to_string())).unwrap()
    };
    let ok = r#"{"jsonrpc":"2.0","id":"r1","method":"GetTask","params":{"id":"none"}}"#;
    // (body, version header, expected code, expected id)
    let cases: &[(&str, Option<&str>, i64, Value)] = &[
        ("not json", Some("1.0"), -32700, Value::Null),
        (r#"[{"jsonrpc":"2.0"}]"#, Some("1.0"), -32600, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}"#,
            Some("1.0"),
            -32601,
            json!(1),
        ),
        (ok, None, -32009, json!("r1")),
        (ok, Some(""), -32009, json!("r1")),
        (ok, Some("0.3"), -32009, json!("r1")),
        (ok, Some("2.0"), -32009, json!("r1")),
        (ok, Some("1.0"), -32001, json!("r1")),
        (ok, Some("1"), -32001, json!("r1")),
        (ok, Some("1.1"), -32001, json!("r1")),
        (ok, Some("1.0.7"), -32001, json!("r1")),
    ];
    for (body, version, code, id) in cases {
        let resp = e.handle(raw(body, *version)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(content_type(&resp), "application/json");
        let v = body_json(resp.into_body()).await;
        assert_eq!(v["error"]["code"], *code, "{body} {version:?}: {v}");
        assert_eq!(v["id"], *id, "{body}");
    }
    let v = body_json(e.handle(raw(ok, None)).await.into_body()).await;
    assert!(v["error"]["message"].as_str().unwrap().contains("'0.3'"));
    assert_eq!(v["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    let v = body_json(
        e.handle(raw(ok, Some("1.0-and-much-more-text")))
            .await
            .into_body(),
    )
    .await;
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("'invalid'"));
    // a streaming method with a bad version answers plain JSON, not SSE
    let stream_req = json!({"jsonrpc":"2.0","id":3,"method":"SendStreamingMessage",
                            "params":{"message": user("x")}})
    .to_string();
    let resp = e.handle(raw(&stream_req, Some("9.0"))).await;
    assert_eq!(content_type(&resp), "application/json");
    assert_eq!(body_json(resp.into_body()).await["error"]["code"], -32009);
}

// ---- SendMessage and the echo agent ----

#[tokio::test]
async fn send_message_echoes_and_ends_input_required() {
    let e = engine();
    let msg = user("hello world");
    let t = send(&e, msg.clone()).await;
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
    let task_id = t["id"].as_str().unwrap();
    let ctx = t["contextId"].as_str().unwrap();
    assert_eq!(task_id.len(), 36);
    assert_eq!(ctx.len(), 36);
    assert_ne!(task_id, ctx);
    // RFC 3339 UTC with microseconds and Z
    let ts = t["status"]["timestamp"].as_str().unwrap();
    assert_eq!(ts.len(), 27, "{ts}");
    assert!(ts.ends_with('Z') && ts.as_bytes()[19] == b'.', "{ts}");
    assert!(time::parse_rfc3339(ts).is_some());

    let status_msg = &t["status"]["message"];
    assert_eq!(status_msg["role"], "ROLE_AGENT");
    assert_eq!(text_of(status_msg), "echo: hello world");
    assert_eq!(status_msg["taskId"], task_id);
    assert_eq!(status_msg["contextId"], ctx);

    let history = t["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["messageId"], msg["messageId"]);
    assert_eq!(history[0]["role"], "ROLE_USER");
    assert_eq!(history[0]["taskId"], task_id);
    assert_eq!(history[0]["contextId"], ctx);
    assert_eq!(history[0]["parts"], msg["parts"]);
    assert_eq!(history[1], *status_msg);

    // one artifact, default 3 chunks appended into its parts, together the full echo
    let artifacts = t["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(artifacts[0]["name"], "echo");
    let parts = artifacts[0]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    let joined: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(joined, "echo: hello world");

    // GetTask sees the same task
    let got = result(&e, "GetTask", json!({"id": task_id})).await;
    assert_eq!(got, t);

    // a given contextId is kept
    let t = send(&e, user_in("x", Some("my-ctx"), None)).await;
    assert_eq!(t["contextId"], "my-ctx");
}

#[tokio::test]
async fn directives_drive_the_ending() {
    let e = engine();
    // (text, final state, final text, artifact parts)
    let cases = [
        ("[[complete]] done", "TASK_STATE_COMPLETED", "echo: done", 3),
        ("[[fail]] boom", "TASK_STATE_FAILED", agent::FAIL_TEXT, 3),
        (
            "[[input]] ask",
            "TASK_STATE_INPUT_REQUIRED",
            agent::QUESTION_TEXT,
            3,
        ),
        (
            "[[chunks:5]] [[slow:1]] five",
            "TASK_STATE_INPUT_REQUIRED",
            "echo: five",
            5,
        ),
        (
            "[[chunks:1]] one",
            "TASK_STATE_INPUT_REQUIRED",
            "echo: one",
            1,
        ),
    ];
    for (text, want_state, want_text, n) in cases {
        let t = send(&e, user(text)).await;
        assert_eq!(state(&t), want_state, "{text}");
        assert_eq!(text_of(&t["status"]["message"]), want_text, "{text}");
        let parts = t["artifacts"][0]["parts"].as_array().unwrap();
        assert_eq!(parts.len(), n, "{text}");
    }
}

#[tokio::test]
async fn message_directive_answers_with_a_bare_message() {
    let e = engine();
    let r = result(
        &e,
        "SendMessage",
        json!({"message": user_in("[[message]] hi", Some("c1"), None)}),
    )
    .await;
    assert!(r.get("task").is_none());
    assert_eq!(r["message"]["role"], "ROLE_AGENT");
    assert_eq!(r["message"]["contextId"], "c1");
    assert!(r["message"].get("taskId").is_none());
    assert_eq!(text_of(&r["message"]), "echo: hi");
    // no task was made
    let list = result(&e, "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0);

    let events = open_stream(
        &e,
        "SendStreamingMessage",
        json!({"message": user("[[message]] yo")}),
    )
    .await
    .rest()
    .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["id"], 7);
    assert_eq!(text_of(&events[0]["result"]["message"]), "echo: yo");
}

#[tokio::test]
async fn history_length_limits_returned_history() {
    let e = engine();
    let params = |n: i64| json!({"message": user("h"), "configuration": {"historyLength": n}});
    let t = result(&e, "SendMessage", params(1)).await["task"].clone();
    let h = t["history"].as_array().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["role"], "ROLE_AGENT");
    let t = result(&e, "SendMessage", params(0)).await["task"].clone();
    assert!(t.get("history").is_none());
    let id = t["id"].as_str().unwrap();
    let full = result(&e, "GetTask", json!({"id": id})).await;
    assert_eq!(full["history"].as_array().map(Vec::len), Some(2));
    let one = result(&e, "GetTask", json!({"id": id, "historyLength": 1})).await;
    assert_eq!(one["history"][0]["role"], "ROLE_AGENT");
    let none = result(&e, "GetTask", json!({"id": id, "historyLength": 0})).await;
    assert!(none.get("history").is_none());
}

#[tokio::test]
async fn invalid_params_and_unknown_tasks() {
    let e = engine();
    for params in [
        json!({}),
        json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
        json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
    ] {
        assert_eq!(
            error_code(&e, "SendMessage", params.clone()).await,
            -32602,
            "{params}"
        );
        assert_eq!(error_code(&e, "SendStreamingMessage", params).await, -32602);
    }
    for params in [
        json!({}),
        json!({"id": 5}),
        json!({"id": "x", "historyLength": -1}),
    ] {
        assert_eq!(error_code(&e, "GetTask", params).await, -32602);
    }
    assert_eq!(
        error_code(&e, "GetTask", json!({"id": "nope"})).await,
        -32001
    );
    assert_eq!(
        error_code(&e, "CancelTask", json!({"id": "nope"})).await,
        -32001
    );
    assert_eq!(error_code(&e, "CancelTask", json!({})).await, -32602);
    assert_eq!(
        error_code(&e, "SubscribeToTask", json!({"id": "nope"})).await,
        -32001
    );
    let unknown = json!({"message": user_in("x", None, Some("no-such-task"))});
    assert_eq!(error_code(&e, "SendMessage", unknown.clone()).await, -32001);
    assert_eq!(
        error_code(&e, "SendStreamingMessage", unknown).await,
        -32001
    );
    for m in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        let v = call(
            &e,
            m,
            json!({"taskId": "t", "id": "x", "url": "https://x/"}),
        )
        .await;
        assert_eq!(v["error"]["code"], -32003, "{m}");
        assert_eq!(
            v["error"]["data"][0]["reason"],
            "PUSH_NOTIFICATION_NOT_SUPPORTED"
        );
    }
}

// ---- the state machine ----

#[tokio::test]
async fn follow_ups_terminal_and_interrupted() {
    let e = engine();
    let first = send(&e, user("one")).await;
    let id = first["id"].as_str().unwrap();
    let ctx = first["contextId"].as_str().unwrap();
    assert_eq!(state(&first), "TASK_STATE_INPUT_REQUIRED");

    // interrupted → a new turn on the same task, history grows
    let second = send(&e, user_in("two", None, Some(id))).await;
    assert_eq!(second["id"], id);
    assert_eq!(second["contextId"], ctx);
    assert_eq!(state(&second), "TASK_STATE_INPUT_REQUIRED");
    let texts: Vec<String> = second["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(text_of)
        .collect();
    assert_eq!(texts, ["one", "echo: one", "two", "echo: two"]);
    assert_eq!(second["artifacts"].as_array().map(Vec::len), Some(2));

    // context mismatch → -32602
    let v = call(
        &e,
        "SendMessage",
        json!({"message": user_in("x", Some("other"), Some(id))}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602);

    // finish it, then a follow-up is refused: -32004
    let done = send(&e, user_in("[[complete]] three", Some(ctx), Some(id))).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    let v = call(
        &e,
        "SendMessage",
        json!({"message": user_in("four", None, Some(id))}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32004);
    assert_eq!(
        v["error"]["message"],
        format!("Task {id} is in terminal state")
    );
    let v = call(
        &e,
        "SendStreamingMessage",
        json!({"message": user_in("four", None, Some(id))}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32004);
    // terminal: not cancelable, not subscribable (A2A §3.1.6: UnsupportedOperationError)
    assert_eq!(
        error_code(&e, "CancelTask", json!({"id": id})).await,
        -32002
    );
    assert_eq!(
        error_code(&e, "SubscribeToTask", json!({"id": id})).await,
        -32004
    );
    // interrupted tasks are not running either
    let other = send(&e, user("five")).await;
    let other_id = other["id"].as_str().unwrap();
    assert_eq!(
        error_code(&e, "CancelTask", json!({"id": other_id})).await,
        -32002
    );
    let v = call(&e, "SubscribeToTask", json!({"id": other_id})).await;
    assert_eq!(v["error"]["code"], -32001);
    assert_eq!(v["error"]["message"], "Task is not active");
}

#[tokio::test]
async fn return_immediately_then_cancel() {
    let e = engine();
    let t = send_waiting(&e, None).await;
    assert_eq!(state(&t), "TASK_STATE_SUBMITTED");
    let id = t["id"].as_str().unwrap();
    let canceled = result(&e, "CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert_eq!(text_of(&canceled["status"]["message"]), "Task canceled.");
    assert_eq!(canceled["status"]["message"]["role"], "ROLE_AGENT");
    // stays canceled: the stopped agent writes nothing more
    tokio::task::yield_now().await;
    let got = result(&e, "GetTask", json!({"id": id})).await;
    assert_eq!(state(&got), "TASK_STATE_CANCELED");
    assert_eq!(
        error_code(&e, "CancelTask", json!({"id": id})).await,
        -32002
    );
    let v = call(
        &e,
        "SendMessage",
        json!({"message": user_in("again", None, Some(id))}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32004);
}

#[tokio::test]
async fn busy_context_refuses_a_new_task_while_others_run() {
    let e = engine();
    let waiting = send_waiting(&e, Some("busy")).await;
    // another context runs meanwhile
    let other = send(&e, user_in("elsewhere", Some("free"), None)).await;
    assert_eq!(state(&other), "TASK_STATE_INPUT_REQUIRED");
    // a new message on the busy context: a new task, FAILED "Task is already working."
    let refused = send(&e, user_in("me too", Some("busy"), None)).await;
    assert_ne!(refused["id"], waiting["id"]);
    assert_eq!(refused["contextId"], "busy");
    assert_eq!(state(&refused), "TASK_STATE_FAILED");
    assert_eq!(
        text_of(&refused["status"]["message"]),
        "Task is already working."
    );
    assert_eq!(text_of(&refused["history"][0]), "me too");
    // streaming gets the same answer as one task event
    let events = open_stream(
        &e,
        "SendStreamingMessage",
        json!({"message": user_in("s", Some("busy"), None)}),
    )
    .await
    .rest()
    .await;
    assert_eq!(events.len(), 1);
    assert_eq!(state(&events[0]["result"]["task"]), "TASK_STATE_FAILED");
    // the waiting task was not disturbed
    let id = waiting["id"].as_str().unwrap();
    let still = result(&e, "GetTask", json!({"id": id})).await;
    assert_eq!(state(&still), "TASK_STATE_WORKING");
    result(&e, "CancelTask", json!({"id": id})).await;
    // once free, the context takes new tasks again
    let next = send(&e, user_in("now", Some("busy"), None)).await;
    assert_eq!(state(&next), "TASK_STATE_INPUT_REQUIRED");
}

#[tokio::test]
async fn a_message_to_a_running_task_waits_for_its_turn() {
    let e = engine();
    // The follow-up is sent while the first turn runs; it runs as the next turn.
    let params = json!({
        "message": user("[[slow:20]] first"),
        "configuration": {"returnImmediately": true},
    });
    let t = result(&e, "SendMessage", params).await["task"].clone();
    let id = t["id"].as_str().unwrap();
    let next = send(&e, user_in("[[complete]] next", None, Some(id))).await;
    assert_eq!(next["id"], id);
    assert_eq!(state(&next), "TASK_STATE_COMPLETED");
    let texts: Vec<String> = next["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(text_of)
        .collect();
    assert_eq!(
        texts,
        [
            "[[slow:20]] first",
            "echo: first",
            "[[complete]] next",
            "echo: next"
        ]
    );

    // A follow-up queued behind a turn that gets canceled is refused as terminal.
    let t = send_waiting(&e, None).await;
    let id = t["id"].as_str().unwrap().to_string();
    let e2 = Arc::clone(&e);
    let params = json!({"message": user_in("queued", None, Some(&id))});
    let queued = tokio::spawn(async move { call(&e2, "SendMessage", params).await });
    let mid = result(&e, "GetTask", json!({"id": id})).await;
    assert_ne!(state(&mid), "TASK_STATE_CANCELED");
    result(&e, "CancelTask", json!({"id": id})).await;
    let v = tokio::time::timeout(PATIENCE, queued)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v["error"]["code"], -32004, "{v}");
}

// ---- streaming ----

#[tokio::test]
async fn stream_order_and_framing() {
    let e = engine();
    let mut s = open_stream(
        &e,
        "SendStreamingMessage",
        json!({"message": user("[[chunks:4]] [[slow:2]] [[complete]] streamed")}),
    )
    .await;
    let mut events = Vec::new();
    while let Some(v) = s.next().await {
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], 7);
        events.push(v["result"].clone());
    }
    // task (SUBMITTED), WORKING, 4 artifact chunks, COMPLETED
    assert_eq!(events.len(), 7, "{events:#?}");
    let task = &events[0]["task"];
    assert_eq!(state(task), "TASK_STATE_SUBMITTED");
    assert_eq!(task["history"][0]["role"], "ROLE_USER");
    let id = task["id"].as_str().unwrap();
    assert_eq!(
        events[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(events[1]["statusUpdate"]["taskId"], id);
    let mut text = String::new();
    for (i, ev) in events[2..6].iter().enumerate() {
        let a = &ev["artifactUpdate"];
        assert_eq!(a["taskId"], id);
        assert_eq!(a["contextId"], task["contextId"]);
        assert_eq!(a.get("append").is_some(), i > 0, "{a}");
        assert_eq!(a.get("lastChunk").is_some(), i == 3, "{a}");
        assert_eq!(
            a["artifact"]["artifactId"],
            events[2]["artifactUpdate"]["artifact"]["artifactId"]
        );
        text.push_str(a["artifact"]["parts"][0]["text"].as_str().unwrap());
    }
    assert_eq!(text, "echo: streamed");
    let last = &events[6]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(text_of(&last["status"]["message"]), "echo: streamed");
    // The raw framing: CRLF-terminated data lines.
    let resp = e
        .handle(rpc(
            "SendStreamingMessage",
            json!({"message": user("[[chunks:1]] raw")}),
        ))
        .await;
    let raw = resp.into_body().collect().await.unwrap().to_bytes();
    let raw = std::str::from_utf8(&raw).unwrap();
    assert!(raw.starts_with("data: {"), "{raw}");
    assert!(raw.ends_with("}\r\n\r\n"), "{raw}");
    assert_eq!(raw.matches("data: ").count(), 4, "{raw}");
}

#[tokio::test]
async fn stream_is_live_and_cancel_ends_it() {
    let e = engine();
    let mut s = open_stream(
        &e,
        "SendStreamingMessage",
        json!({"message": user("[[slow:5]] [[chunks:2]] [[wait]] live")}),
    )
    .await;
    let first = s.next().await.unwrap();
    let id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    // Events arrive while the turn is still running.
    for _ in 0..3 {
        let ev = s.next().await.unwrap();
        assert!(
            ev["result"].get("statusUpdate").is_some()
                || ev["result"].get("artifactUpdate").is_some()
        );
    }
    let now = result(&e, "GetTask", json!({"id": id})).await;
    assert_eq!(state(&now), "TASK_STATE_WORKING");
    // A subscriber joins: it starts with the current task.
    let mut sub = open_stream(&e, "SubscribeToTask", json!({"id": id})).await;
    let snap = sub.next().await.unwrap();
    assert_eq!(snap["result"]["task"]["id"], id);
    assert_eq!(state(&snap["result"]["task"]), "TASK_STATE_WORKING");
    assert_eq!(
        snap["result"]["task"]["artifacts"][0]["parts"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    let canceled = result(&e, "CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    // both streams end with the CANCELED update
    for stream in [s, sub] {
        let rest = stream.rest().await;
        let last = rest.last().unwrap();
        assert_eq!(
            last["result"]["statusUpdate"]["status"]["state"],
            "TASK_STATE_CANCELED"
        );
        assert_eq!(
            text_of(&last["result"]["statusUpdate"]["status"]["message"]),
            "Task canceled."
        );
    }
}

#[tokio::test]
async fn subscriber_sees_the_whole_turn_in_order() {
    let e = engine();
    let params = json!({
        "message": user("[[slow:3]] [[chunks:3]] [[fail]] sub"),
        "configuration": {"returnImmediately": true},
    });
    let t = result(&e, "SendMessage", params).await["task"].clone();
    let id = t["id"].as_str().unwrap();
    let resp = e.handle(rpc("SubscribeToTask", json!({"id": id}))).await;
    if content_type(&resp) == "application/json" {
        // The turn already ended (a very slow machine): then it is not active.
        let v = body_json(resp.into_body()).await;
        assert_eq!(v["error"]["code"], -32001);
        return;
    }
    let events = Sse::new(resp.into_body()).rest().await;
    assert!(events[0]["result"].get("task").is_some());
    let last = &events.last().unwrap()["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(text_of(&last["status"]["message"]), agent::FAIL_TEXT);
    // no duplicates and nothing after the final state
    let chunk_count = events
        .iter()
        .filter(|v| v["result"].get("artifactUpdate").is_some())
        .count();
    let seen = result(&e, "GetTask", json!({"id": id})).await;
    let stored = seen["artifacts"][0]["parts"].as_array().map_or(0, Vec::len);
    let in_snapshot = events[0]["result"]["task"]["artifacts"][0]["parts"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(in_snapshot + chunk_count, stored);
    assert_eq!(stored, 3);
}

#[tokio::test]
async fn closing_a_stream_never_cancels_the_turn() {
    let e = engine();
    let mut s = open_stream(
        &e,
        "SendStreamingMessage",
        json!({"message": user("[[slow:5]] [[chunks:3]] [[complete]] bye")}),
    )
    .await;
    let first = s.next().await.unwrap();
    let id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    drop(s);
    let done = settle(&e, &id).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    assert_eq!(text_of(&done["status"]["message"]), "echo: bye");
}

// ---- ListTasks ----

#[tokio::test]
async fn list_tasks_pages_without_gaps_or_duplicates() {
    let e = engine();
    let mut made = Vec::new();
    for i in 0..7 {
        let t = send(
            &e,
            user_in(&format!("[[complete]] a{i}"), Some("ctx-a"), None),
        )
        .await;
        made.push(t["id"].as_str().unwrap().to_string());
    }
    for i in 0..3 {
        send(&e, user_in(&format!("b{i}"), Some("ctx-b"), None)).await;
    }
    let failed = send(&e, user_in("[[fail]] x", Some("ctx-b"), None)).await;

    // all, default page
    let all = result(&e, "ListTasks", json!({})).await;
    assert_eq!(all["totalSize"], 11);
    assert_eq!(all["pageSize"], 50);
    assert_eq!(all["nextPageToken"], "");
    let tasks = all["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 11);
    // newest first
    let stamps: Vec<u64> = tasks
        .iter()
        .map(|t| time::parse_rfc3339(t["status"]["timestamp"].as_str().unwrap()).unwrap())
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] >= w[1]), "{stamps:?}");
    assert_eq!(tasks[0]["id"], failed["id"]);
    // artifacts only on request
    assert!(tasks.iter().all(|t| t.get("artifacts").is_none()));

    // ctx-a in pages of 3: 3 + 3 + 1
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut sizes = Vec::new();
    loop {
        let page = result(
            &e,
            "ListTasks",
            json!({"contextId": "ctx-a", "pageSize": 3, "pageToken": token}),
        )
        .await;
        assert_eq!(page["totalSize"], 7);
        assert_eq!(page["pageSize"], 3);
        let ts = page["tasks"].as_array().unwrap();
        sizes.push(ts.len());
        seen.extend(ts.iter().map(|t| t["id"].as_str().unwrap().to_string()));
        token = page["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(sizes, [3, 3, 1]);
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 7);
    made.reverse();
    assert_eq!(seen, made, "newest first, no gaps");

    // filters
    let f = result(&e, "ListTasks", json!({"status": "TASK_STATE_FAILED"})).await;
    assert_eq!(f["totalSize"], 1);
    assert_eq!(f["tasks"][0]["id"], failed["id"]);
    let f = result(
        &e,
        "ListTasks",
        json!({"contextId": "ctx-b", "status": "TASK_STATE_INPUT_REQUIRED"}),
    )
    .await;
    assert_eq!(f["totalSize"], 3);
    let f = result(&e, "ListTasks", json!({"contextId": "nobody"})).await;
    assert_eq!(f["totalSize"], 0);
    assert_eq!(f["tasks"], json!([]));
    assert_eq!(f["nextPageToken"], "");
    let f = result(
        &e,
        "ListTasks",
        json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(f["totalSize"], 0);
    let f = result(
        &e,
        "ListTasks",
        json!({"statusTimestampAfter": "2000-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(f["totalSize"], 11);
    // includeArtifacts and historyLength
    let f = result(
        &e,
        "ListTasks",
        json!({"contextId": "ctx-a", "pageSize": 1, "includeArtifacts": true, "historyLength": 1}),
    )
    .await;
    let t = &f["tasks"][0];
    assert_eq!(t["artifacts"].as_array().map(Vec::len), Some(1));
    assert_eq!(t["history"].as_array().map(Vec::len), Some(1));
    let f = result(&e, "ListTasks", json!({"pageSize": 1, "historyLength": 0})).await;
    assert!(f["tasks"][0].get("history").is_none());

    // bad params
    for params in [
        json!({"pageSize": 0}),
        json!({"pageSize": 101}),
        json!({"pageToken": "not-a-token"}),
        json!({"status": "DONE"}),
        json!({"historyLength": -1}),
    ] {
        assert_eq!(
            error_code(&e, "ListTasks", params.clone()).await,
            -32602,
            "{params}"
        );
    }
}

#[tokio::test]
async fn the_store_is_bounded() {
    let e = Engine::with_limits(EngineConfig::default(), 4, store::MAX_BYTES);
    let mut ids = Vec::new();
    for i in 0..6 {
        let t = send(&e, user(&format!("n{i}"))).await;
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    let all = result(&e, "ListTasks", json!({})).await;
    assert_eq!(all["totalSize"], 4);
    // the oldest went first
    assert_eq!(
        error_code(&e, "GetTask", json!({"id": ids[0]})).await,
        -32001
    );
    assert_eq!(
        error_code(&e, "GetTask", json!({"id": ids[1]})).await,
        -32001
    );
    result(&e, "GetTask", json!({"id": ids[5]})).await;
}

/// Big messages: the store keeps what fits its byte budget (the oldest tasks go, whatever
/// their number), and a message that alone is bigger than the budget is refused (-32603)
/// without evicting anything.
#[tokio::test]
async fn the_store_is_bounded_by_bytes() {
    let text = "z".repeat(100_000);
    // One finished echo task of `text` holds the message and the echo three times (the
    // artifact, the agent's message in the history and as the status).
    let e = Engine::with_limits(EngineConfig::default(), 1_000, 1_000_000);
    let mut ids = Vec::new();
    for _ in 0..6 {
        let t = send(&e, user(&text)).await;
        assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    let all = result(&e, "ListTasks", json!({})).await;
    // About 400 KB each: two fit, and the newest turn adds its echo past the budget.
    let kept = all["totalSize"].as_u64().unwrap();
    assert!((2..=3).contains(&kept), "{}", all["totalSize"]);
    assert_eq!(
        error_code(&e, "GetTask", json!({"id": ids[0]})).await,
        -32001
    );
    result(&e, "GetTask", json!({"id": ids[5]})).await;
    let huge = user(&"y".repeat(1_100_000));
    assert_eq!(
        error_code(&e, "SendMessage", json!({ "message": huge })).await,
        -32603
    );
    result(&e, "GetTask", json!({"id": ids[5]})).await;
}

// ---- serve() over real sockets ----

async fn http1(
    addr: std::net::SocketAddr,
) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// `serve` on a free port: its address, the sender that stops it, and its task.
async fn serving() -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, engine(), async move {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx, server)
}

#[tokio::test]
async fn serve_over_http1_and_h2c() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (addr, stop_tx, server) = serving().await;

    let mut client = http1(addr).await;
    let req = |method: &str, path: &str, body: String| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("a2a-version", "1.0")
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(Bytes::from(body)))
            .unwrap()
    };
    let resp = client
        .send_request(req("GET", "/health", String::new()))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        body_json(resp.into_body()).await,
        json!({"status": "healthy"})
    );

    let send_body = json!({"jsonrpc": "2.0", "id": "s1", "method": "SendMessage",
                           "params": {"message": user("[[complete]] over the wire")}});
    let resp = client
        .send_request(req("POST", "/", send_body.to_string()))
        .await
        .unwrap();
    let v = body_json(resp.into_body()).await;
    assert_eq!(v["id"], "s1");
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // a stream over the same connection, read event by event
    let stream_body = json!({"jsonrpc": "2.0", "id": 9, "method": "SendStreamingMessage",
                             "params": {"message": user("[[chunks:2]] [[slow:1]] wire")}});
    let resp = client
        .send_request(req("POST", "/", stream_body.to_string()))
        .await
        .unwrap();
    assert_sse_headers(&resp);
    let events = Sse::new(resp.into_body()).rest().await;
    assert_eq!(events.len(), 5);
    assert!(events[0]["result"].get("task").is_some());
    assert_eq!(
        events[4]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    assert!(events.iter().all(|v| v["id"] == 9));

    // h2c with prior knowledge
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let resp = h2
        .send_request(
            Request::get("http://127.0.0.1/.well-known/agent-card.json")
                .body(http_body_util::Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(body_json(resp.into_body()).await["skills"][0]["id"], "echo");

    // a declared body over the cap is refused before it is read
    let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
    raw.write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 67108865\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    raw.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");

    stop_tx.send(()).unwrap();
    drop(client);
    drop(h2);
    tokio::time::timeout(PATIENCE, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Shutdown drops a connection still silent about its protocol at once and closes an idle
/// keep-alive one: the drain ends long before the first-bytes timeout or the drain limit
/// (10 s each), and none of the three is held open.
#[tokio::test]
async fn shutdown_drops_silent_connections_and_drains_idle_ones() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (addr, stop_tx, server) = serving().await;
    // Silent: connected, not a byte sent. Partial: half of HTTP/2's preface, then silence.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut partial = tokio::net::TcpStream::connect(addr).await.unwrap();
    partial.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    // Idle: one HTTP/1.1 request answered, the connection kept alive.
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    idle.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    tokio::time::sleep(Duration::from_millis(100)).await;

    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the drain waited on a connection with nothing running")
        .unwrap()
        .unwrap();
    for (name, conn) in [
        ("silent", &mut silent),
        ("partial", &mut partial),
        ("idle", &mut idle),
    ] {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(PATIENCE, conn.read_to_end(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(_))),
            "{name}: still open after shutdown: {read:?}"
        );
    }
}
