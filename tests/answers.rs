//! What reaches callers from a hostile agent: answers naming another caller's task are
//! refused (JSON and SSE); every answer is shaped as the answer to the caller's request (its
//! id, one object); an error ends a stream; error text is cleaned for every code; a stream
//! to a caller that does not read holds bounded memory and ends.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const MALLORY: &str = "[[auth.bearer]]\nprincipal = \"mallory\"\ntoken_sha256 = \"6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754\"\n";
const ALICE_TOKEN: &str = "Bearer test-token-0123456789";
const MALLORY_TOKEN: &str = "Bearer other-token";

async fn rpc_as(c: &mut Client, token: &str, method: &str, params: Value) -> (Value, String) {
    let body = json!({"jsonrpc": "2.0", "id": "mine-7", "method": method, "params": params});
    let headers = [
        ("authorization", token),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    let (_, _, rb) = c.request("POST", "/", &headers, body.to_string()).await;
    let text = String::from_utf8_lossy(&rb).into_owned();
    (serde_json::from_str(&text).unwrap(), text)
}

/// An edge with Mallory as a second caller, in front of an agent that answers `reply`.
async fn with_mallory(reply: Reply) -> (RecordingUpstream, Proxy) {
    let opts = ProxyOpts {
        extra_policy: MALLORY.into(),
        ..Default::default()
    };
    Proxy::with_recorder(reply, opts).await
}

/// Alice's SendMessage over `proto` to an agent that answers `raw`: the answer and its text.
async fn answer_to(raw: &'static str, proto: Proto) -> (Value, String) {
    let (_up, p) = Proxy::with_recorder(Reply::Raw(raw), ProxyOpts::default()).await;
    let mut c = p.client(proto).await;
    rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("hi")).await
}

/// The events of a SendStreamingMessage, over each protocol, to an agent that streams `raw`.
async fn streamed_from(raw: &'static str) -> Vec<(Proto, Vec<(Option<String>, Value)>)> {
    let (_up, p) = Proxy::with_recorder(Reply::RawStream(raw), ProxyOpts::default()).await;
    let mut out = Vec::new();
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let events = EventReader::new(c.rpc_stream("SendStreamingMessage", message("hi")).await)
            .rest()
            .await;
        out.push((proto, events));
    }
    out
}

fn message(text: &str) -> Value {
    json!({"message": {"messageId": format!("m-{}", a2a_edge::policy::random_token()),
        "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// Every SendMessage is answered with the same task, as an agent that mixes callers up would.
const SHARED_TASK: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"task":{"id":"t-alice","contextId":"c-alice","status":{"state":"TASK_STATE_INPUT_REQUIRED"},"history":[{"messageId":"h1","role":"ROLE_USER","parts":[{"text":"alice's private plan"}]}]}}}"#;

#[tokio::test]
async fn an_answer_naming_another_callers_task_is_refused() {
    let (_up, p) = with_mallory(Reply::Raw(SHARED_TASK)).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("mine")).await;
        assert_eq!(v["result"]["task"]["id"], "t-alice", "{v}");
        let (v, text) = rpc_as(&mut c, MALLORY_TOKEN, "SendMessage", message("his")).await;
        // InvalidAgentResponseError (A2A §5.4): the agent's answer is not one for this caller.
        assert_eq!(v["error"]["code"], -32006, "{v}");
        assert_eq!(v["error"]["data"][0]["reason"], "upstream.foreign_task");
        assert!(
            !text.contains("private plan") && !text.contains("t-alice"),
            "{text}"
        );
        // Alice still gets hers.
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("more")).await;
        assert_eq!(v["result"]["task"]["id"], "t-alice", "{v}");
        // (A GetTask answered with SendMessage's shape, `{"task": ...}`, is refused.)
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "GetTask", json!({"id": "t-alice"})).await;
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{v}"
        );
    }
}

const SHARED_STREAM: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"task\":{\"id\":\"t-alice\",\"contextId\":\"c-alice\",\"status\":{\"state\":\"TASK_STATE_WORKING\"},\"history\":[{\"messageId\":\"h1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"alice's private plan\"}]}]}}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t-alice\",\"contextId\":\"c-alice\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}}\n\n";

#[tokio::test]
async fn a_stream_naming_another_callers_task_ends_with_an_error() {
    let (_up, p) = with_mallory(Reply::RawStream(SHARED_STREAM)).await;
    let mut c = p.client(Proto::H2).await;
    let events = EventReader::new(c.rpc_stream("SendStreamingMessage", message("mine")).await)
        .rest()
        .await;
    assert_eq!(events.len(), 2, "alice gets her stream: {events:?}");
    // Mallory, on his own connection, with his own token.
    let body = json!({"jsonrpc": "2.0", "id": "s2", "method": "SendStreamingMessage", "params": message("his")});
    let headers = [
        ("authorization", MALLORY_TOKEN),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
        ("accept", "text/event-stream"),
    ];
    let (status, _, raw) = c.request("POST", "/", &headers, body.to_string()).await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("event: error"), "{text}");
    assert!(text.contains("upstream.foreign_task"), "{text}");
    assert!(
        !text.contains("private plan") && !text.contains("t-alice"),
        "{text}"
    );
}

#[tokio::test]
async fn answers_take_the_shape_of_the_callers_request() {
    // (agent's JSON answer, what the caller must get: result kept or error reason; the
    // result a Message beside a member A2A does not know, relayed as it is)
    let cases: Vec<(&'static str, Result<(), &str>)> = vec![
        (
            r#"{"jsonrpc":"1.0","id":{id},"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true},"extra":"x"}"#,
            Ok(()),
        ),
        // A result for another request (JSON-RPC 2.0 §5: the id must be the request's): an
        // agent that mixed up concurrent answers. Both passes refuse it.
        (
            r#"{"jsonrpc":"2.0","id":999,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"someone-else","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true},"extra":"x"}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"someone-else","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true,"note":"/etc/x"},"error":null}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Err("upstream.bad_response"),
        ),
        // The id twice: the last counts, as serde_json keeps it.
        (
            r#"{"jsonrpc":"2.0","id":{id},"id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":{id},"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Ok(()),
        ),
        (
            r#"[{"jsonrpc":"2.0","id":{id},"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}]"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{id}}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{id},"result":{},"error":{"code":-32001,"message":"x"}}"#,
            Err("upstream.bad_response"),
        ),
        (r#""just a string""#, Err("upstream.bad_response")),
        // A key twice: the caller gets it once (the last, as the full pass keeps it), never
        // the agent's bytes with both (the fast pass takes no answer with a duplicate key).
        (
            r#"{"jsonrpc":"2.0","id":{id},"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":false,"echo":true}}"#,
            Ok(()),
        ),
        // What the full pass would refuse in a member it drops, the fast pass refuses too
        // (found by the answer_fast fuzz target: serde_json skips such members unchecked).
        (
            r#"{"jsonrpc":"2.0","id":{id},"x":"\ud800","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Err("upstream.bad_response"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{id},"x":[1e999],"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"echo":true}}"#,
            Err("upstream.bad_response"),
        ),
    ];
    for (raw, want) in cases {
        let (v, text) = answer_to(raw, Proto::H1).await;
        assert_eq!(v["id"], "mine-7", "{raw}: {v}");
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(v.is_object());
        match want {
            Ok(()) => {
                let message = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": []});
                assert_eq!(
                    v["result"],
                    json!({"message": message, "echo": true}),
                    "{raw}: {v}"
                );
                assert!(v.get("extra").is_none(), "{v}");
                assert_eq!(text.matches("echo").count(), 1, "{raw}: {text}");
            }
            Err(reason) => {
                assert_eq!(v["error"]["data"][0]["reason"], reason, "{raw}: {v}");
                assert_eq!(v["error"]["code"], -32006, "{raw}: {v}");
            }
        }
    }
}

/// An agent's answer the edge must rebuild (here: it echoes a denied metadata key) holds at most
/// `a2a.max_json_values` values, like a request: one of small values past it is refused
/// (-32006 upstream.bad_response) instead of becoming a tree many times its size; the same
/// answer needing no cleaning is refused too (the bound holds on both passes).
#[tokio::test]
async fn an_answer_of_too_many_values_is_refused() {
    let answer = |extra: &str, n: usize| -> &'static str {
        Box::leak(
            format!(
                r#"{{"jsonrpc":"2.0","id":{{id}},"result":{{"message":{{"messageId":"m","role":"ROLE_AGENT"{extra},"parts":[{{"data":{{"a":[{}]}}}}]}}}}}}"#,
                vec!["0"; n].join(",")
            )
            .into_boxed_str(),
        )
    };
    for note in ["", r#","metadata":{"iac_code.llm_headers":{"A":"b"}}"#] {
        let (v, _) = answer_to(answer(note, 1 << 20), Proto::H2).await;
        assert_eq!(v["error"]["code"], -32006, "{note}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{note}"
        );
        // Within the bound: relayed (the values of the envelope and message are counted).
        let (v, text) = answer_to(answer(note, (1 << 20) - 64), Proto::H2).await;
        assert_eq!(
            v["result"]["message"]["parts"][0]["data"]["a"][0], 0,
            "{note}"
        );
        assert!(!text.contains(r#"{"A":"b"}"#), "{note}: {}", &text[..200]);
    }
}

/// An agent's error may carry a `null` id or none (it could not read the request): its code
/// reaches the caller under the caller's id; an error for another id is another request's.
#[tokio::test]
async fn an_agent_error_without_the_id_keeps_its_code() {
    for raw in [
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32001,"message":"x"}}"#,
    ] {
        let (v, _) = answer_to(raw, Proto::H2).await;
        assert_eq!(v["id"], "mine-7", "{raw}: {v}");
        assert_eq!(v["error"]["code"], -32001, "{raw}: {v}");
    }
    let raw = r#"{"jsonrpc":"2.0","id":"other","error":{"code":-32001,"message":"x"}}"#;
    let (v, _) = answer_to(raw, Proto::H2).await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.bad_response",
        "{v}"
    );
}

#[tokio::test]
async fn agent_errors_are_cleaned_for_every_code() {
    const LEAKY: &str = r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32001,"message":"no task at /home/agent/.secrets token=abc","data":[{"leak":"/etc/shadow"},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"path":"/home/agent/.secrets"}}]}}"#;
    let (v, text) = answer_to(LEAKY, Proto::H2).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    assert_eq!(v["error"]["message"], "Task not found");
    assert_eq!(v["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    for secret in ["/home/agent", "token=abc", "/etc/shadow"] {
        assert!(!text.contains(secret), "{secret}: {text}");
    }
}

#[tokio::test]
async fn an_error_event_ends_the_stream() {
    const RAW: &str = "event: error\ndata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{\"code\":-32603,\"message\":\"boom at /srv/agent/x.py\"}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t1\",\"contextId\":\"c1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"},\"metadata\":{\"after\":\"the error\"}}}}\n\n";
    for (proto, events) in streamed_from(RAW).await {
        assert_eq!(events.len(), 1, "{proto:?}: {events:?}");
        assert_eq!(events[0].0.as_deref(), Some("error"));
        assert_eq!(events[0].1["id"], "s1");
        assert_eq!(events[0].1["error"]["message"], "Internal error");
    }
}

/// An `event: error` frame around a result (no error) is no answer the caller can read: the
/// stream ends with `upstream.bad_stream`, the result not relayed.
#[tokio::test]
async fn an_error_frame_around_a_result_ends_the_stream() {
    const RAW: &str = "event: error\ndata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t1\",\"contextId\":\"c1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n";
    for (proto, events) in streamed_from(RAW).await {
        assert_eq!(events.len(), 1, "{proto:?}: {events:?}");
        assert_eq!(events[0].0.as_deref(), Some("error"), "{proto:?}");
        assert!(events[0].1.get("result").is_none(), "{proto:?}: {events:?}");
        assert_eq!(
            events[0].1["error"]["data"][0]["reason"], "upstream.bad_stream",
            "{proto:?}: {events:?}"
        );
    }
}

/// An agent that answers a method the caller did not ask a stream of (SendMessage, GetTask)
/// with `text/event-stream` is refused (-32006 `upstream.bad_response`): it would otherwise
/// hand the caller a stream it did not ask for, held outside the stream limits.
#[tokio::test]
async fn a_stream_for_a_method_that_is_not_streamed_is_refused() {
    const RAW: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"task\":{\"id\":\"t1\",\"contextId\":\"c1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n";
    let (_up, p) = Proxy::with_recorder(Reply::RawStream(RAW), ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("hi")).await;
        assert_eq!(v["error"]["code"], -32006, "{proto:?}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{v}"
        );
        // The streamed method still gets its stream.
        let events = EventReader::new(c.rpc_stream("SendStreamingMessage", message("hi")).await)
            .rest()
            .await;
        assert_eq!(events.len(), 1, "{proto:?}: {events:?}");
        assert_eq!(events[0].1["result"]["task"]["id"], "t1", "{proto:?}");
    }
}

/// An agent's error of one of A2A's codes that came without an ErrorInfo reaches the caller
/// with the one A2A gives that code (as the edge's own errors carry it), in an answer and in
/// a stream's error event; a JSON-RPC code that is not A2A's stays without.
#[tokio::test]
async fn a2a_errors_without_error_info_get_a2as_own() {
    let info = |reason: &str| {
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason, "domain": "a2a-protocol.org", "metadata": {}}])
    };
    const BARE: &str =
        r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32004,"message":"not here, see /srv/x"}}"#;
    let (v, _) = answer_to(BARE, Proto::H2).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
    assert_eq!(v["error"]["data"], info("UNSUPPORTED_OPERATION"), "{v}");

    const PLAIN: &str = r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32602,"message":"bad"}}"#;
    let (v, _) = answer_to(PLAIN, Proto::H2).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(v["error"].get("data").is_none(), "{v}");

    const RAW: &str = "event: error\ndata: {\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{\"code\":-32001,\"message\":\"gone\"}}\n\n";
    for (proto, events) in streamed_from(RAW).await {
        assert_eq!(events.len(), 1, "{proto:?}: {events:?}");
        assert_eq!(
            events[0].1["error"]["code"], -32001,
            "{proto:?}: {events:?}"
        );
        assert_eq!(
            events[0].1["error"]["data"],
            info("TASK_NOT_FOUND"),
            "{proto:?}: {events:?}"
        );
    }
}

/// Streams to callers that never read: what they hold is bounded by the byte budgets, and a
/// caller that takes nothing for the idle timeout is dropped, its slot freed.
#[tokio::test]
async fn a_caller_that_does_not_read_is_bounded_and_dropped() {
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (_up, p) = Proxy::with_recorder(
        Reply::Flood(closed.clone()),
        ProxyOpts {
            extra_policy: "[limits]\nstream_idle_timeout_ms = 1500\nstream_keepalive_ms = 200\nstream_buffer_bytes = 4096\nmax_streams_per_principal = 1\n".into(),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(Proto::H2).await;
    // Open the stream and never read its body.
    let resp = c.rpc_stream("SendStreamingMessage", message("hi")).await;
    assert_eq!(resp.status(), 200);
    // The only stream slot is taken while the relay waits on the silent reader...
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut other = p.client(Proto::H1).await;
    let busy = other
        .rpc_stream("SendStreamingMessage", message("second"))
        .await;
    assert_eq!(busy.status(), 429);
    // ... and given back once the reader stalled past the idle timeout: the agent's stream is
    // closed too.
    until_set(
        &closed,
        Duration::from_secs(10),
        "the stalled stream was not ended",
    )
    .await;
    let again = other
        .rpc_stream("SendStreamingMessage", message("third"))
        .await;
    assert_eq!(again.status(), 200);
    drop(resp);
}

/// A follow-up that names only its task reaches the agent with the task's context (agents
/// refuse a task sent with another context, and would make one up).
#[tokio::test]
async fn a_follow_up_by_task_id_names_its_context() {
    let (up, p) = Proxy::with_recorder(Reply::Raw(SHARED_TASK), ProxyOpts::default()).await;
    let mut c = p.client(Proto::H1).await;
    let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("first")).await;
    assert_eq!(v["result"]["task"]["id"], "t-alice", "{v}");
    let mut follow = message("again");
    follow["message"]["taskId"] = json!("t-alice");
    let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", follow).await;
    assert!(v.get("result").is_some(), "{v}");
    let last = up.rpc_requests().pop().unwrap();
    let body: Value = serde_json::from_slice(&last.body).unwrap();
    assert_eq!(body["params"]["message"]["contextId"], "c-alice", "{body}");
    assert_eq!(body["params"]["message"]["taskId"], "t-alice");
}

/// An agent that names whatever ids the message's text gives ([`Reply::Named`]) behind an
/// edge whose registry holds two tasks and two contexts (so a third evicts), Mallory a caller.
async fn named_agent_and_two_entries() -> (RecordingUpstream, Proxy) {
    Proxy::with_recorder(
        Reply::Named,
        ProxyOpts {
            extra_policy: format!("{MALLORY}[limits]\nmax_registry_entries = 2\n"),
            ..Default::default()
        },
    )
    .await
}

/// A SendMessage of `text`, in `context` when given.
fn send(text: &str, context: Option<&str>) -> Value {
    let mut m = message(text);
    if let Some(ctx) = context {
        m["message"]["contextId"] = json!(ctx);
    }
    m
}

/// A context the registry evicted stays its owner's: an agent answering another caller's new
/// conversation with it is refused (as for a live one), that caller cannot then name it,
/// and its owner takes it up again. The registry holds two contexts here.
#[tokio::test]
async fn an_evicted_context_named_in_another_callers_answer_is_refused() {
    let (up, p) = named_agent_and_two_entries().await;
    let mut c = p.client(Proto::H1).await;
    for (task, ctx) in [("t-a1", "c-a1"), ("t-a2", "c-a2"), ("t-a3", "c-a3")] {
        let (v, _) = rpc_as(
            &mut c,
            ALICE_TOKEN,
            "SendMessage",
            send(&format!("{task} {ctx}"), None),
        )
        .await;
        assert_eq!(v["result"]["task"]["contextId"], ctx, "{v}");
    }
    // c-a1 is evicted now (two contexts at most): Mallory's new conversation answered with it.
    let (v, text) = rpc_as(
        &mut c,
        MALLORY_TOKEN,
        "SendMessage",
        send("t-m1 c-a1", None),
    )
    .await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert!(!text.contains("c-a1") && !text.contains("t-m1"), "{text}");
    // Mallory cannot name it either; Alice can, and the agent's answer in it is hers.
    let (v, _) = rpc_as(
        &mut c,
        MALLORY_TOKEN,
        "SendMessage",
        send("t-m2 c-a1", Some("c-a1")),
    )
    .await;
    assert!(v.get("error").is_some(), "{v}");
    let (v, _) = rpc_as(
        &mut c,
        ALICE_TOKEN,
        "SendMessage",
        send("t-a4 c-a1", Some("c-a1")),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "c-a1", "{v}");
    // The agent was sent the conversation by its own id, not a new alias of it: Alice goes
    // on in the same conversation.
    let sent: Value = serde_json::from_slice(&up.rpc_requests().pop().unwrap().body).unwrap();
    assert_eq!(sent["params"]["message"]["contextId"], "c-a1", "{sent}");
    let (v, _) = rpc_as(&mut c, MALLORY_TOKEN, "GetTask", json!({"id": "t-m1"})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
}

/// A task the registry evicted stays its owner's: an agent naming it in another caller's
/// answer (in a new context) is refused, and that caller cannot then address it (no push
/// config of hers reaches the agent). The registry holds two tasks here.
#[tokio::test]
async fn an_evicted_task_named_in_another_callers_answer_is_refused() {
    let (up, p) = named_agent_and_two_entries().await;
    let mut c = p.client(Proto::H1).await;
    for (text, context) in [
        ("t-a1 c-a1", None),
        ("t-a2 c-a1", Some("c-a1")),
        ("t-a3 c-a1", Some("c-a1")),
    ] {
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", send(text, context)).await;
        assert_eq!(v["result"]["task"]["contextId"], "c-a1", "{v}");
    }
    // t-a1 is evicted now (two tasks at most): Mallory's new conversation answered with it.
    let (v, text) = rpc_as(
        &mut c,
        MALLORY_TOKEN,
        "SendMessage",
        send("t-a1 c-m1", None),
    )
    .await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.foreign_task",
        "{v}"
    );
    assert!(!text.contains("t-a1"), "{text}");
    // So she cannot address it: nothing of hers naming it reaches the agent.
    let seen_before = up.seen.lock().unwrap().len();
    let config = json!({"taskId": "t-a1", "url": "https://hooks.example.com/m"});
    for (method, params) in [
        ("GetTask", json!({"id": "t-a1"})),
        ("CreateTaskPushNotificationConfig", config),
        ("CancelTask", json!({"id": "t-a1"})),
    ] {
        let (v, _) = rpc_as(&mut c, MALLORY_TOKEN, method, params).await;
        assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
    }
    assert_eq!(
        up.seen.lock().unwrap().len(),
        seen_before,
        "a refused request reached the agent"
    );
}

/// An answer naming another caller's task without saying its context, or holding two of
/// task, message and the updates (a oneof), cannot be checked like the others: refused
/// (-32006), not relayed.
#[tokio::test]
async fn answers_naming_a_task_in_a_shape_that_cannot_be_checked_are_refused() {
    let (_up, p) = with_mallory(Reply::Named).await;
    let mut c = p.client(Proto::H1).await;
    let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("t-a1 c-a1")).await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    // Alice's own task without its context: hers, relayed.
    let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("t-a1 -")).await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    // The same answer to Mallory: refused.
    let (v, text) = rpc_as(&mut c, MALLORY_TOKEN, "SendMessage", message("t-a1 -")).await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.foreign_task",
        "{v}"
    );
    assert!(!text.contains("t-a1"), "{text}");
    // A task id longer than any the edge records (or a request names), in Alice's context:
    // refused, not relayed as nobody's with its context unchecked.
    let long = format!("{} c-a1", "x".repeat(300));
    let (v, text) = rpc_as(&mut c, MALLORY_TOKEN, "SendMessage", message(&long)).await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.bad_response",
        "{v}"
    );
    assert!(!text.contains("c-a1"), "{text}");

    let two = r#"{"jsonrpc":"2.0","id":{id},"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}},"artifactUpdate":{"taskId":"t-2","contextId":"c-2","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}}"#;
    let null_task = r#"{"jsonrpc":"2.0","id":{id},"result":{"task":null}}"#;
    for raw in [two, null_task] {
        let (v, _) = answer_to(raw, Proto::H2).await;
        assert_eq!(v["error"]["code"], -32006, "{raw}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{raw}: {v}"
        );
    }
}

/// Results shaped so that they read as something other than the method's answer (a task
/// list, a bare Task without an id, a Task beside a `taskId` or a `messageId`): none
/// carries a task the registry would have checked, so each is refused (-32006
/// upstream.bad_response), over both protocols and as a stream's event, and its content
/// never reaches the caller.
#[tokio::test]
async fn answers_shaped_as_another_method_s_are_refused() {
    const LISTED: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"tasks":[{"id":"t-alice","contextId":"c-alice","history":[{"messageId":"h1","role":"ROLE_USER","parts":[{"text":"alice's private plan"}]}]}]}}"#;
    const NO_ID: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"contextId":"c-alice","history":[{"messageId":"h1","role":"ROLE_USER","parts":[{"text":"alice's private plan"}]}]}}"#;
    const BESIDE_TASK_ID: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"taskId":"t-mine","id":"t-alice","contextId":"c-alice","history":[{"messageId":"h1","role":"ROLE_USER","parts":[{"text":"alice's private plan"}]}]}}"#;
    const BESIDE_MESSAGE_ID: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"messageId":"m","id":"t-alice","history":[{"messageId":"h1","role":"ROLE_USER","parts":[{"text":"alice's private plan"}]}]}}"#;
    const LISTED_EVENT: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"tasks\":[{\"id\":\"t-alice\",\"contextId\":\"c-alice\",\"history\":[{\"messageId\":\"h1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"alice's private plan\"}]}]}]}}\n\n";
    for raw in [LISTED, NO_ID, BESIDE_TASK_ID, BESIDE_MESSAGE_ID] {
        for proto in PROTOS {
            let (v, text) = answer_to(raw, proto).await;
            assert_eq!(v["error"]["code"], -32006, "{proto:?} {raw}: {v}");
            assert_eq!(
                v["error"]["data"][0]["reason"], "upstream.bad_response",
                "{proto:?} {raw}: {v}"
            );
            assert!(!text.contains("private plan"), "{text}");
        }
    }
    for (proto, events) in streamed_from(LISTED_EVENT).await {
        assert_eq!(events.len(), 1, "{proto:?}: {events:?}");
        assert_refused_event(&events[0], &format!("{proto:?}"));
    }
}

/// An `event: error` frame refusing the agent's event (-32006 upstream.bad_response) that
/// carries nothing of it (its text: `private plan`).
fn assert_refused_event((name, v): &(Option<String>, Value), at: &str) {
    assert_eq!(name.as_deref(), Some("error"), "{at}: {v}");
    assert_eq!(v["error"]["code"], -32006, "{at}: {v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "upstream.bad_response",
        "{at}: {v}"
    );
    assert!(!v.to_string().contains("private plan"), "{at}: {v}");
}

/// With `a2a.redact_paths`, paths in an agent's answer are hidden, but the caller's own
/// JSON-RPC id comes back as it was sent, even one that looks like a path (in a unary
/// answer and in each event of a stream).
#[tokio::test]
async fn redacted_paths_leave_the_callers_id_alone() {
    const STREAM: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t-p\",\"contextId\":\"c-p\",\"status\":{\"state\":\"TASK_STATE_WORKING\",\"message\":{\"messageId\":\"m\",\"role\":\"ROLE_AGENT\",\"parts\":[{\"text\":\"wrote /srv/ws/a/main.tf\"}]}}}}}\n\n";
    const ANSWER: &str = r#"{"jsonrpc":"2.0","id":{id},"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"wrote /srv/ws/a/main.tf"}]}}}"#;
    let opts = || ProxyOpts {
        extra_policy: "[a2a]\nredact_paths = true\n".into(),
        ..Default::default()
    };
    let id = "/srv/requests/42";
    let headers = [
        ("authorization", ALICE_TOKEN),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
        ("accept", "text/event-stream"),
    ];
    let (_up, p) = Proxy::with_recorder(Reply::Raw(ANSWER), opts()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let body =
            json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": message("hi")});
        let (_, _, raw) = c
            .request("POST", "/", &headers[..3], body.to_string())
            .await;
        let v: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(v["id"], id, "{proto:?}: {v}");
        assert_eq!(
            v["result"]["message"]["parts"][0]["text"], "wrote [PATH]",
            "{proto:?}: {v}"
        );
    }
    let (_up, p) = Proxy::with_recorder(Reply::RawStream(STREAM), opts()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "SendStreamingMessage", "params": message("hi")});
        let (_, _, raw) = c.request("POST", "/", &headers, body.to_string()).await;
        let text = String::from_utf8_lossy(&raw);
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or_else(|| panic!("{proto:?}: {text}"));
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["id"], id, "{proto:?}: {v}");
        assert!(text.contains("wrote [PATH]"), "{proto:?}: {text}");
    }
}

/// An agent that lists push configs of tasks other than the one asked for: a list with
/// another caller's config is refused (-32006), its URL never relayed; the owner's own list
/// is relayed.
#[tokio::test]
async fn a_push_config_list_with_another_callers_config_is_refused() {
    let (_up, p) = with_mallory(Reply::Named).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("t-a1 c-a1")).await;
        assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
        let (v, _) = rpc_as(&mut c, MALLORY_TOKEN, "SendMessage", message("t-m1 c-m1")).await;
        assert_eq!(v["result"]["task"]["id"], "t-m1", "{v}");
        let list = |t: &str| json!({"taskId": t});
        let (v, _) = rpc_as(
            &mut c,
            ALICE_TOKEN,
            "ListTaskPushNotificationConfigs",
            list("t-a1"),
        )
        .await;
        assert_eq!(
            v["result"]["configs"][1]["url"], "https://hooks.example/t-a1",
            "{v}"
        );
        let (v, text) = rpc_as(
            &mut c,
            MALLORY_TOKEN,
            "ListTaskPushNotificationConfigs",
            list("t-m1"),
        )
        .await;
        assert_eq!(v["error"]["code"], -32006, "{v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{v}"
        );
        assert!(!text.contains("t-a1"), "{text}");
    }
}

/// ListTasks reads each listed task from the agent: an answer that is not the task asked
/// for (here a SendMessage-shaped `{"task": t}` of another id) is not learned from nor
/// listed; the page shows what the edge knows of the task instead.
#[tokio::test]
async fn a_listed_tasks_read_answered_with_another_task_is_not_learned() {
    let (_up, p) = Proxy::with_recorder(Reply::Named, ProxyOpts::default()).await;
    let mut c = p.client(Proto::H2).await;
    let (v, _) = rpc_as(
        &mut c,
        ALICE_TOKEN,
        "SendMessage",
        message("t-a1 c-a1 WORKING"),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 1, "{v}");
    let listed = &v["result"]["tasks"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(listed[0]["id"], "t-a1", "{v}");
    assert_eq!(listed[0]["contextId"], "c-a1", "{v}");
    assert_eq!(listed[0]["status"]["state"], "TASK_STATE_WORKING", "{v}");
    // The other task the agent named was not handed to Alice.
    let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "GetTask", json!({"id": "t"})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
}

/// The answer to a request addressed to one task (GetTask, CancelTask, a push config's)
/// must be about that task: one about another (here a new task the agent names) is
/// refused (-32006 upstream.bad_response) and nothing is learned from it.
#[tokio::test]
async fn an_answer_about_another_task_than_the_one_asked_for_is_refused() {
    let (_up, p) = Proxy::with_recorder(Reply::Named, ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("t-a1 c-a1")).await;
        assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
        for method in ["GetTask", "CancelTask"] {
            let (v, text) = rpc_as(&mut c, ALICE_TOKEN, method, json!({"id": "t-a1"})).await;
            assert_eq!(v["error"]["code"], -32006, "{method}: {v}");
            assert_eq!(
                v["error"]["data"][0]["reason"], "upstream.bad_response",
                "{v}"
            );
            assert!(!text.contains("\"t\""), "{text}");
        }
        // The task it named instead was not handed to Alice.
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "GetTask", json!({"id": "t"})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
        // A push config list of the task asked for and another (`t-a1`): refused too.
        let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("t-a2 c-a1")).await;
        assert_eq!(v["result"]["task"]["id"], "t-a2", "{v}");
        let (v, _) = rpc_as(
            &mut c,
            ALICE_TOKEN,
            "ListTaskPushNotificationConfigs",
            json!({"taskId": "t-a2"}),
        )
        .await;
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{v}"
        );
    }
}

/// An honest agent that pretty-prints its JSON over several `data:` lines (a blank one too,
/// and CRLF or CR line ends): the caller gets every event whole, each line of it a field, its
/// data the agent's JSON. The edge changes nothing in these answers, so it relays their
/// bytes as they came (the fast pass), line breaks included, inside its own `data:` line.
#[tokio::test]
async fn a_pretty_printed_stream_reaches_the_caller_whole() {
    const RAW: &str = concat!(
        "data: {\"jsonrpc\": \"2.0\",\n",
        "data:  \"id\": {id},\n",
        "data:  \"result\": {\"task\": {\n",
        "data:   \"id\": \"t-pretty\", \"contextId\": \"c-pretty\",\n",
        "data:\n",
        "data:   \"status\": {\"state\": \"TASK_STATE_WORKING\"}}}}\n",
        "\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"statusUpdate\":{\"taskId\":\"t-pretty\",\r\n",
        "data: \"contextId\":\"c-pretty\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}}\r\n\r\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":{id},\r",
        "data: \"result\":{\"statusUpdate\":{\"taskId\":\"t-pretty\",\"contextId\":\"c-pretty\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\r\r",
    );
    use http_body_util::BodyExt;
    let (_up, p) = Proxy::with_recorder(Reply::RawStream(RAW), ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let resp = c.rpc_stream("SendStreamingMessage", message("hi")).await;
        let bytes = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect())
            .await
            .expect("the stream ended")
            .unwrap()
            .to_bytes();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        // Every line is a field or a comment; the events are split by the edge's CRLF CRLF.
        let events: Vec<&str> = text.split("\r\n\r\n").filter(|e| !e.is_empty()).collect();
        for event in &events {
            for line in event.split("\r\n") {
                assert!(
                    ["data: ", "event: ", ":"]
                        .iter()
                        .any(|f| line.starts_with(f))
                        && !line.contains(['\r', '\n']),
                    "{proto:?}: a line that is no field: {line:?} in {text:?}"
                );
            }
        }
        let mut decoder = a2a_edge::a2a::sse::SseDecoder::new(1 << 20);
        let decoded = decoder.push(&bytes).unwrap();
        assert_eq!(decoder.pending(), 0, "{proto:?}: {text:?}");
        let answers: Vec<Value> = decoded
            .iter()
            .filter_map(|ev| ev.data.as_deref())
            .map(|d| {
                serde_json::from_str(d)
                    .unwrap_or_else(|e| panic!("{proto:?}: {e}: {d:?} in {text:?}"))
            })
            .collect();
        assert_eq!(answers.len(), 3, "{proto:?}: {text:?}");
        assert!(decoded.iter().all(|ev| ev.event.is_none()), "{text:?}");
        assert_eq!(answers[0]["id"], "s1");
        assert_eq!(answers[0]["result"]["task"]["id"], "t-pretty");
        assert_eq!(
            answers[0]["result"]["task"]["status"]["state"],
            "TASK_STATE_WORKING"
        );
        for (answer, state) in answers[1..]
            .iter()
            .zip(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"])
        {
            assert_eq!(answer["id"], "s1");
            assert_eq!(answer["result"]["statusUpdate"]["status"]["state"], state);
        }
    }
}

/// A streaming method is answered with a stream (A2A §3.1.2, §9.4.2): an agent that answers
/// SendStreamingMessage with one JSON result has it relayed as the stream's one event, to
/// callers over both protocols; a JSON error stays a JSON error.
#[tokio::test]
async fn a_streaming_methods_json_result_is_relayed_as_one_event() {
    let (_up, p) = Proxy::with_recorder(Reply::Raw(SHARED_TASK), ProxyOpts::default()).await;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let resp = c.rpc_stream("SendStreamingMessage", message("hi")).await;
        assert_eq!(resp.status(), 200);
        let media = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(media.starts_with("text/event-stream"), "{proto:?}: {media}");
        let events = EventReader::new(resp).rest().await;
        assert_eq!(events.len(), 1, "{proto:?}: {events:?}");
        assert_eq!(events[0].0, None, "{proto:?}: {events:?}");
        assert_eq!(
            events[0].1["result"]["task"]["id"], "t-alice",
            "{proto:?}: {events:?}"
        );
    }
    const ERROR: &str = r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32001,"message":"gone"}}"#;
    let (_up, p) = Proxy::with_recorder(Reply::Raw(ERROR), ProxyOpts::default()).await;
    let mut c = p.client(Proto::H2).await;
    let resp = c.rpc_stream("SendStreamingMessage", message("hi")).await;
    let media = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(media.starts_with("application/json"), "{media}");
}

/// An answer that is not its method's A2A 1.0 result (naming nothing, or missing a member
/// the proto requires, or holding it in another type or spelling) is refused (-32006
/// upstream.bad_response), over both protocols, whether the edge relays the agent's bytes
/// (fast pass) or rebuilds the answer (here: metadata to redact beside it); nothing of it
/// reaches the caller, and a task it names is not learned (a GetTask of it is NotFound and
/// never reaches the agent).
#[tokio::test]
async fn answers_that_are_not_their_methods_result_are_refused() {
    const PLAN: &str = "private plan";
    let said = json!([{"text": PLAN}]);
    let history = json!([{"messageId": "h1", "role": "ROLE_USER", "parts": said}]);
    let working = json!({"state": "TASK_STATE_WORKING"});
    // (what is wrong, the result)
    let rows: Vec<(&str, Value)> = vec![
        ("an empty object", json!({})),
        (
            "an object naming nothing",
            json!({"echo": true, "note": PLAN}),
        ),
        ("null", Value::Null),
        ("a string", json!(PLAN)),
        (
            "a list",
            json!([{"task": {"id": "t-x", "status": working, "history": history}}]),
        ),
        (
            "a task without status",
            json!({"task": {"id": "t-x", "contextId": "c-x", "history": history}}),
        ),
        (
            "a task with A2A 0.3's state",
            json!({"task": {"id": "t-x", "contextId": "c-x", "status": {"state": "completed"}, "history": history}}),
        ),
        (
            "a task with a numeric state",
            json!({"task": {"id": "t-x", "contextId": "c-x", "status": {"state": 3}, "history": history}}),
        ),
        (
            "a task whose history holds junk",
            json!({"task": {"id": "t-x", "contextId": "c-x", "status": working, "history": [{"text": PLAN}]}}),
        ),
        (
            "a task whose status message has no role",
            json!({"task": {"id": "t-x", "contextId": "c-x", "status": {"state": "TASK_STATE_WORKING", "message": {"messageId": "m", "parts": said}}}}),
        ),
        (
            "a message without role",
            json!({"message": {"messageId": "m", "parts": said}}),
        ),
        (
            "a message without messageId",
            json!({"message": {"role": "ROLE_AGENT", "parts": said}}),
        ),
        (
            "a message whose parts are no list",
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": {"text": PLAN}}}),
        ),
        (
            "a message with a numeric role",
            json!({"message": {"messageId": "m", "role": 2, "parts": said}}),
        ),
    ];
    for (what, result) in rows {
        let mut variants = vec![("fast", result.clone())];
        if let Value::Object(obj) = &result {
            let mut rebuilt = obj.clone();
            rebuilt.insert(
                "metadata".into(),
                json!({"iac_code": {"iac_code_api_key": "sk-agent"}}),
            );
            variants.push(("full", Value::Object(rebuilt)));
        }
        for (pass, result) in variants {
            let raw = json!({"jsonrpc": "2.0", "id": "{id}", "result": result})
                .to_string()
                .replace("\"{id}\"", "{id}");
            let raw: &'static str = Box::leak(raw.into_boxed_str());
            let (up, p) = Proxy::with_recorder(Reply::Raw(raw), ProxyOpts::default()).await;
            for proto in PROTOS {
                let mut c = p.client(proto).await;
                let (v, text) = rpc_as(&mut c, ALICE_TOKEN, "SendMessage", message("hi")).await;
                let at = format!("{what} ({pass} pass, {proto:?})");
                assert_eq!(v["error"]["code"], -32006, "{at}: {v}");
                assert_eq!(
                    v["error"]["data"][0]["reason"], "upstream.bad_response",
                    "{at}: {v}"
                );
                assert!(
                    !text.contains(PLAN) && !text.contains("sk-agent"),
                    "{at}: {text}"
                );
                let (v, _) = rpc_as(&mut c, ALICE_TOKEN, "GetTask", json!({"id": "t-x"})).await;
                assert_eq!(v["error"]["code"], -32001, "{at}: {v}");
            }
            let methods: Vec<String> = up
                .rpc_requests()
                .iter()
                .map(|r| {
                    let body: Value = serde_json::from_slice(&r.body).unwrap();
                    body["method"].as_str().unwrap_or("").to_string()
                })
                .collect();
            assert_eq!(
                methods,
                ["SendMessage", "SendMessage"],
                "{what} ({pass} pass)"
            );
        }
    }
}

/// A stream's event that is not a `StreamResponse` A2A 1.0 allows (naming nothing, an update
/// without its `contextId`, an artifact without its `artifactId`) ends the stream with an
/// error event (-32006 upstream.bad_response), over both protocols; what came before it is
/// relayed, nothing of it.
#[tokio::test]
async fn a_stream_event_that_is_no_stream_response_ends_the_stream() {
    const FIRST: &str = r#"data: {"jsonrpc":"2.0","id":{id},"result":{"task":{"id":"t-s","contextId":"c-s","status":{"state":"TASK_STATE_WORKING"}}}}"#;
    let rows = [
        ("naming nothing", r#"{"note":"private plan"}"#),
        ("an empty object", "{}"),
        (
            "an update without its contextId",
            r#"{"statusUpdate":{"taskId":"t-s","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"private plan"}]}}}}"#,
        ),
        (
            "an artifact without its id",
            r#"{"artifactUpdate":{"taskId":"t-s","contextId":"c-s","artifact":{"parts":[{"text":"private plan"}]}}}"#,
        ),
        (
            "an update without status",
            r#"{"statusUpdate":{"taskId":"t-s","contextId":"c-s","note":"private plan"}}"#,
        ),
    ];
    for (what, result) in rows {
        let raw = format!(
            "{FIRST}\n\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{{id}},\"result\":{result}}}\n\n"
        );
        let raw: &'static str = Box::leak(raw.into_boxed_str());
        for (proto, events) in streamed_from(raw).await {
            assert_eq!(events.len(), 2, "{what} {proto:?}: {events:?}");
            assert_eq!(
                events[0].1["result"]["task"]["id"], "t-s",
                "{what} {proto:?}"
            );
            assert_refused_event(&events[1], &format!("{what} {proto:?}"));
        }
    }
}

/// iac-code sends a provider error as `TASK_STATE_FAILED` in the middle of a turn's stream,
/// then goes on with WORKING updates and ends with INPUT_REQUIRED (iac-code-upstream.md
/// §12, `stream_ERR400.raw`). A2A §3.1.2 says a stream closes at a terminal state, but the
/// edge relays what its agent sends until the agent ends the stream: every event reaches
/// the caller, over both protocols.
#[tokio::test]
async fn a_failed_state_in_the_middle_of_a_stream_does_not_end_it() {
    let ev = |result: &str| {
        format!("data: {{\"jsonrpc\":\"2.0\",\"id\":{{id}},\"result\":{result}}}\n\n")
    };
    let update = |state: &str| {
        ev(&format!(
            r#"{{"statusUpdate":{{"taskId":"t-e","contextId":"c-e","status":{{"state":"TASK_STATE_{state}"}}}}}}"#
        ))
    };
    let raw = [
        ev(r#"{"task":{"id":"t-e","contextId":"c-e","status":{"state":"TASK_STATE_SUBMITTED"}}}"#),
        update("FAILED"),
        update("WORKING"),
        update("INPUT_REQUIRED"),
    ]
    .concat();
    for (proto, events) in streamed_from(Box::leak(raw.into_boxed_str())).await {
        let states: Vec<&Value> = events
            .iter()
            .map(|(_, v)| {
                let r = &v["result"];
                if r["task"].is_object() {
                    &r["task"]["status"]["state"]
                } else {
                    &r["statusUpdate"]["status"]["state"]
                }
            })
            .collect();
        assert_eq!(
            states,
            [
                "TASK_STATE_SUBMITTED",
                "TASK_STATE_FAILED",
                "TASK_STATE_WORKING",
                "TASK_STATE_INPUT_REQUIRED"
            ],
            "{proto:?}: {events:?}"
        );
    }
}
