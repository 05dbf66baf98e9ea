//! Inputs the fuzz targets (`fuzz/`) found, replayed through the crate's public API and, where
//! they can arrive over the wire, through the proxy. One test per finding.

mod common;

use common::*;
use http::{HeaderMap, HeaderValue};
use serde_json::json;

/// `trace_context`, 2026-11-30: a `tracestate` ending in a tab (`"tb7-00r=9551 \t"`) was
/// forwarded: the member check trimmed the tab away as optional white space, and the target's
/// property (a forwarded value is printable ASCII end to end) failed. Such a value is dropped
/// now (the `traceparent` still goes through).
const TAB_CRASH: &[u8] =
    b"00-4cf92f35776d9d0e0e47369d0e0e4736-00aa704f0ba902b7-01\x00tb7-00r=9551 \t";

#[test]
fn trace_context_tracestate_with_a_tab_is_dropped() {
    let (parent, state) = TAB_CRASH.split_at(TAB_CRASH.iter().position(|&b| b == 0).unwrap());
    let mut h = HeaderMap::new();
    h.insert("traceparent", HeaderValue::from_bytes(parent).unwrap());
    h.insert("tracestate", HeaderValue::from_bytes(&state[1..]).unwrap());
    let (out, trace_id) = a2a_edge::upstream::trace_context::forwardable(&h).unwrap();
    assert_eq!(trace_id, "4cf92f35776d9d0e0e47369d0e0e4736");
    let names: Vec<_> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["traceparent"]);
}

#[tokio::test]
async fn trace_context_tracestate_with_a_tab_never_reaches_the_agent() {
    let (up, proxy) = Proxy::with_recorder(Reply::Echo, ProxyOpts::default()).await;
    let mut c = proxy.client(Proto::H2).await;
    let mut h = rpc_headers();
    h.push((
        "traceparent",
        "00-4cf92f35776d9d0e0e47369d0e0e4736-00aa704f0ba902b7-01",
    ));
    h.push(("tracestate", "tb7-00r=9551 \t"));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":
        {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}})
    .to_string();
    let (status, _, _) = c.request("POST", "/", &h, body).await;
    assert_eq!(status, http::StatusCode::OK);
    let seen = up.rpc_requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].headers["traceparent"],
        "00-4cf92f35776d9d0e0e47369d0e0e4736-00aa704f0ba902b7-01"
    );
    assert!(seen[0].headers.get("tracestate").is_none());
}

/// `gate_request`, 2026-12-06: alice's message got task-0 from an agent that named no
/// context; bob's next message (a new context of his) got task-0 again, in ctx-1, from the
/// same careless agent, and the edge relayed it to bob: a new task without a context was
/// relayed without being recorded as anyone's. Now such an answer is not relayed
/// (`upstream.bad_response`): a task is shown to the caller it is recorded for, only.
#[tokio::test]
async fn a_new_task_without_a_context_is_not_relayed() {
    for entries in ["1000", "2"] {
        let (_up, p) = Proxy::with_recorder(
            Reply::Named,
            ProxyOpts {
                extra_policy: format!(
                    "{MALLORY_ENTRY}[limits]\nmax_registry_entries = {entries}\n"
                ),
                ..Default::default()
            },
        )
        .await;
        let mut c = p.client(Proto::H2).await;
        let v = rpc_as(
            &mut c,
            ALICE,
            "SendMessage",
            message("task-0 - INPUT_REQUIRED", json!({})),
        )
        .await;
        assert_eq!(
            v["error"]["data"][0]["reason"], "upstream.bad_response",
            "{entries}: {v}"
        );
        assert!(!v.to_string().contains("task-0"), "{entries}: {v}");
        // Shown to mallory in his context: his, and refused to alice from then on.
        let v = rpc_as(
            &mut c,
            MALLORY,
            "SendMessage",
            message("task-0 ctx-1 INPUT_REQUIRED", json!({})),
        )
        .await;
        assert_eq!(v["result"]["task"]["id"], "task-0", "{entries}: {v}");
        let v = rpc_as(
            &mut c,
            ALICE,
            "SendMessage",
            message("task-0 ctx-2 INPUT_REQUIRED", json!({})),
        )
        .await;
        assert!(
            !v.to_string().contains("task-0"),
            "{entries}: shown to alice: {v}"
        );
    }
}
