//! Each caller's tasks are its own: through the proxy (real TLS, the embedded engine), a
//! second principal cannot read, cancel, subscribe to, configure or continue the first one's
//! tasks and contexts, and gets exactly the error of a task that does not exist. ListTasks
//! shows only the caller's tasks, paged without gaps or duplicates.

mod common;

use std::collections::HashSet;

use common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn another_principal_cannot_touch_a_task_or_context() {
    let p = Proxy::start(ProxyOpts {
        extra_policy: MALLORY_ENTRY.into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H2).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] mine", json!({"contextId": "ctx-alice"})),
    )
    .await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(v["result"]["task"]["contextId"], "ctx-alice");
    let absent = rpc_as(&mut c, MALLORY, "GetTask", json!({"id": "no-such-task"})).await;
    assert_eq!(absent["error"]["code"], -32001);
    let cases: Vec<(&str, Value)> = vec![
        ("GetTask", json!({"id": task})),
        ("CancelTask", json!({"id": task})),
        ("SubscribeToTask", json!({"id": task})),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": "https://hooks.example.com/x"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": task, "id": "x"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": "x"}),
        ),
        (
            "SendMessage",
            message("follow-up on her task", json!({"taskId": task})),
        ),
    ];
    for (method, params) in cases {
        let v = rpc_as(&mut c, MALLORY, method, params).await;
        // Exactly the answer for a task that does not exist: no existence oracle.
        assert_eq!(v["error"], absent["error"], "{method}: {v}");
    }
    // Mallory's ListTasks shows nothing of Alice's.
    let v = rpc_as(&mut c, MALLORY, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["tasks"], json!([]), "{v}");
    assert_eq!(v["result"]["totalSize"], 0);
    // Naming her context id gives Mallory a context of his own under that name (the agent
    // knows it by Mallory's alias): nothing of hers, and no sign that the name was taken.
    let v = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        message(
            "[[input]] join her context",
            json!({"contextId": "ctx-alice"}),
        ),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "ctx-alice", "{v}");
    assert_ne!(v["result"]["task"]["id"], task.as_str());
    let his = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert!(!v.to_string().contains("mine"), "her history leaked: {v}");
    let v = rpc_as(
        &mut c,
        MALLORY,
        "ListTasks",
        json!({"contextId": "ctx-alice"}),
    )
    .await;
    assert_eq!(v["result"]["tasks"][0]["id"], his.as_str(), "{v}");
    assert_eq!(v["result"]["totalSize"], 1);
    // Alice still has it, untouched.
    let v = rpc_as(&mut c, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(
        v["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{v}"
    );
    let v = rpc_as(&mut c, ALICE, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 1);
}

#[tokio::test]
async fn context_rules_are_enforced_at_the_edge() {
    let dir = TempDir::new("isolation-ws");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let p = Proxy::start(ProxyOpts {
        extra_policy: format!(
            "[workspace]\nallowed_roots = [{:?}]\n",
            dir.path().display().to_string()
        ),
        ..Default::default()
    })
    .await;
    let cwd = |d: &std::path::Path| json!({"metadata": {"iac_code": {"cwd": std::fs::canonicalize(d).unwrap()}}});
    let mut c = p.client(Proto::H1).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message(
            "first",
            json!({"contextId": "ctx-ws"})
                .as_object()
                .unwrap()
                .clone()
                .into_iter()
                .chain(cwd(&a).as_object().unwrap().clone())
                .collect::<serde_json::Map<_, _>>()
                .into(),
        ),
    )
    .await;
    assert!(v["result"]["task"].is_object(), "{v}");
    // The same context in another workspace is refused before any agent sees it.
    let mut other = json!({"contextId": "ctx-ws"});
    other
        .as_object_mut()
        .unwrap()
        .extend(cwd(&b).as_object().unwrap().clone());
    let v = rpc_as(&mut c, ALICE, "SendMessage", message("second", other)).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "context.workspace_mismatch",
        "{v}"
    );
    // A running turn keeps its context busy; a different context runs at the same time.
    let mut streaming = p.client(Proto::H2).await;
    let resp = streaming
        .rpc_stream(
            "SendStreamingMessage",
            message("[[wait]] busy", json!({"contextId": "ctx-busy"})),
        )
        .await;
    let mut events = EventReader::new(resp);
    let (_, first) = events.next().await.unwrap();
    let running = first["result"]["task"]["id"].as_str().unwrap().to_string();
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("me too", json!({"contextId": "ctx-busy"})),
    )
    .await;
    assert_eq!(v["error"]["message"], "Task is already working.", "{v}");
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("elsewhere", json!({"contextId": "ctx-free"})),
    )
    .await;
    assert!(v["result"]["task"].is_object(), "{v}");
    let v = rpc_as(&mut c, ALICE, "CancelTask", json!({"id": running})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    let _ = events.rest().await;
    // Once the turn is over, the context takes messages again.
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("now", json!({"contextId": "ctx-busy"})),
    )
    .await;
    assert!(v["result"]["task"].is_object(), "{v}");
}

#[tokio::test]
async fn list_tasks_pages_only_the_callers_tasks_without_gaps_or_duplicates() {
    let p = Proxy::start(ProxyOpts {
        extra_policy: MALLORY_ENTRY.into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H2).await;
    let mut mine = HashSet::new();
    for i in 0..23 {
        let v = rpc_as(
            &mut c,
            ALICE,
            "SendMessage",
            message(&format!("[[chunks:1]] {i}"), json!({})),
        )
        .await;
        mine.insert(v["result"]["task"]["id"].as_str().unwrap().to_string());
        let _ = rpc_as(
            &mut c,
            MALLORY,
            "SendMessage",
            message("[[chunks:1]] hers", json!({})),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut last_ts = None::<String>;
    loop {
        let mut params = json!({"pageSize": 5});
        if !token.is_empty() {
            params["pageToken"] = json!(token);
        }
        let v = rpc_as(&mut c, ALICE, "ListTasks", params).await;
        let r = &v["result"];
        assert_eq!(r["totalSize"], 23, "{v}");
        for t in r["tasks"].as_array().unwrap() {
            let ts = t["status"]["timestamp"].as_str().unwrap().to_string();
            if let Some(prev) = &last_ts {
                assert!(ts <= *prev, "ordered by status timestamp, newest first");
            }
            last_ts = Some(ts);
            assert!(
                t.get("artifacts").is_none(),
                "artifacts only with includeArtifacts"
            );
            seen.push(t["id"].as_str().unwrap().to_string());
        }
        token = r["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), 23);
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), mine);
    // Tokens are tamper-proof and bound to their caller.
    let v = rpc_as(&mut c, ALICE, "ListTasks", json!({"pageSize": 5})).await;
    let token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
    let v = rpc_as(
        &mut c,
        MALLORY,
        "ListTasks",
        json!({"pageSize": 5, "pageToken": token}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let mut tampered = token.clone().into_bytes();
    let i = tampered.len() / 2;
    tampered[i] = if tampered[i] == b'A' { b'B' } else { b'A' };
    let v = rpc_as(
        &mut c,
        ALICE,
        "ListTasks",
        json!({"pageSize": 5, "pageToken": String::from_utf8(tampered).unwrap()}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let v = rpc_as(
        &mut c,
        ALICE,
        "ListTasks",
        json!({"includeArtifacts": true, "pageSize": 1}),
    )
    .await;
    assert!(v["result"]["tasks"][0]["artifacts"].is_array(), "{v}");
}

/// `referenceTaskIds` may name only the caller's own tasks: another caller's task is refused
/// exactly like an unknown one, before any agent sees the message.
#[tokio::test]
async fn referenced_tasks_must_be_the_callers() {
    let p = Proxy::start(ProxyOpts {
        extra_policy: MALLORY_ENTRY.into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H1).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] hers", json!({})),
    )
    .await;
    let hers = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let v = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        message("[[input]] his", json!({})),
    )
    .await;
    let his = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let unknown = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        message("x", json!({"referenceTaskIds": ["no-such-task"]})),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
    for refs in [json!([hers]), json!([his, hers]), json!([hers, his])] {
        let v = rpc_as(
            &mut c,
            MALLORY,
            "SendMessage",
            message("x", json!({"referenceTaskIds": refs})),
        )
        .await;
        assert_eq!(v["error"], unknown["error"], "{refs}: {v}");
    }
    let v = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        message("[[input]] mine", json!({"referenceTaskIds": [his]})),
    )
    .await;
    assert!(v.get("result").is_some(), "his own reference: {v}");
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] mine", json!({"referenceTaskIds": [hers]})),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
}

/// An agent that names the ids it is told ([`Reply::Named`]) behind an edge with Mallory as
/// a second caller and these policy lines; Alice's task `t-a1` (context `c-a1`) made through
/// a client of `proto`, which is returned.
async fn alice_has_a_task(extra: &str, proto: Proto) -> (RecordingUpstream, Proxy, Client) {
    let (up, p) = Proxy::with_recorder(
        Reply::Named,
        ProxyOpts {
            extra_policy: format!("{MALLORY_ENTRY}{extra}"),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(proto).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("t-a1 c-a1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    (up, p, c)
}

/// A push config given with a message (`configuration.taskPushNotificationConfig`) names
/// its task like any other field: another caller's task there is refused with the error of
/// a task that does not exist, before any agent sees it (an agent honouring the config would
/// send that task's updates to the caller's URL); the caller's own task passes.
#[tokio::test]
async fn a_push_config_sent_with_a_message_names_only_the_callers_task() {
    let (up, _p, mut c) = alice_has_a_task("", Proto::H2).await;
    let with_push = |text: &str, task: &str| {
        let mut m = message(text, json!({}));
        m["configuration"] = json!({"taskPushNotificationConfig":
            {"taskId": task, "url": "https://hooks.example.com/x"}});
        m
    };
    let before = up.seen.lock().unwrap().len();
    let absent = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        with_push("t-m1 c-m1", "no-such"),
    )
    .await;
    assert_eq!(absent["error"]["code"], -32001, "{absent}");
    let v = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        with_push("t-m1 c-m1", "t-a1"),
    )
    .await;
    assert_eq!(v["error"], absent["error"], "{v}");
    assert_eq!(
        up.seen.lock().unwrap().len(),
        before,
        "a refused request reached the agent"
    );
    let v = rpc_as(&mut c, ALICE, "SendMessage", with_push("t-a2 c-a1", "t-a1")).await;
    assert_eq!(v["result"]["task"]["id"], "t-a2", "her own task: {v}");
}

/// With `resolve_names`, a push callback's host is looked up only once the task the callback
/// is for is known to be the caller's: a request naming a task that does not exist or is
/// another caller's gets the same task-not-found whatever the name resolves to (before, the
/// lookup ran first: a caller with no task at all learned, from `push.resolve_failed` or a
/// private address's kind, what the edge's resolver answers for any name). The caller's own
/// task is looked up as before.
#[tokio::test]
async fn a_push_callback_is_looked_up_only_for_the_callers_own_task() {
    let (up, _p, mut c) = alice_has_a_task("[a2a.push]\nresolve_names = true\n", Proto::H1).await;
    // (a public name that resolves to nothing: IANA's example.com has no such host)
    let url = "https://no-such-host.example.com/x";
    let create = |task: &str| json!({"taskId": task, "url": url});
    let inline = |task: &str| {
        let mut m = message("t-m1 c-m1", json!({}));
        m["configuration"] = json!({"taskPushNotificationConfig": {"taskId": task, "url": url}});
        m
    };
    let before = up.seen.lock().unwrap().len();
    // (a new turn's inline config naming no task, its message referring to Alice's)
    let mut referring = message("t-m1 c-m1", json!({}));
    referring["configuration"] = json!({"taskPushNotificationConfig": {"url": url}});
    referring["message"]["referenceTaskIds"] = json!(["t-a1"]);
    let rows = [
        ("CreateTaskPushNotificationConfig", create("no-such")),
        ("CreateTaskPushNotificationConfig", create("t-a1")),
        ("SendMessage", inline("no-such")),
        ("SendMessage", inline("t-a1")),
        ("SendMessage", referring),
    ];
    for (method, params) in rows {
        let v = rpc_as(&mut c, MALLORY, method, params.clone()).await;
        assert_eq!(v["error"]["code"], -32001, "{method} {params}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
            "{method} {params}: {v}"
        );
    }
    assert_eq!(
        up.seen.lock().unwrap().len(),
        before,
        "a refused request reached the agent"
    );
    // Alice's own task: the name is looked up (refused where the resolver answers it with
    // nothing, as DNS does; a resolver that makes up an answer would let it through).
    let v = rpc_as(
        &mut c,
        ALICE,
        "CreateTaskPushNotificationConfig",
        create("t-a1"),
    )
    .await;
    let reason = v["error"]["data"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason == "push.resolve_failed" || v.get("result").is_some(),
        "her own task: {v}"
    );
}

/// A context id a caller chooses is its own name: another caller who used the same name first
/// neither blocks it nor learns of it. The agent knows each such context by an alias per
/// caller (`c-` and 32 hex digits); the caller sees its own name in every answer.
#[tokio::test]
async fn client_chosen_context_ids_cannot_be_squatted_or_probed() {
    let p = Proxy::start(ProxyOpts {
        extra_policy: MALLORY_ENTRY.into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H1).await;
    // Mallory takes the name first.
    let v = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        message("[[input]] squat", json!({"contextId": "release-plan"})),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "release-plan", "{v}");
    // Alice uses it too: her own context, no -32001.
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] mine", json!({"contextId": "release-plan"})),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "release-plan", "{v}");
    let hers = v["result"]["task"]["id"].as_str().unwrap().to_string();
    // Follow-ups on the name stay in each caller's own context.
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message(
            "[[input]] again",
            json!({"contextId": "release-plan", "taskId": hers}),
        ),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let v = rpc_as(&mut c, ALICE, "GetTask", json!({"id": hers})).await;
    assert_eq!(v["result"]["contextId"], "release-plan");
    assert!(!v.to_string().contains("squat"), "{v}");

    // What the agent sees: one alias per caller for the same name; an agent-chosen id as is.
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: MALLORY_ENTRY.into(),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(Proto::H2).await;
    for token in [ALICE, MALLORY, ALICE] {
        rpc_as(
            &mut c,
            token,
            "SendMessage",
            message("x", json!({"contextId": "release-plan"})),
        )
        .await;
    }
    let seen: Vec<String> = up
        .rpc_requests()
        .iter()
        .map(|r| {
            let b: Value = serde_json::from_slice(&r.body).unwrap();
            b["params"]["message"]["contextId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(seen.len(), 3);
    for id in &seen {
        assert!(id.starts_with("c-") && id.len() == 34, "{id}");
        assert!(id[2..].bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    assert_ne!(seen[0], seen[1], "one alias per caller");
    assert_eq!(
        seen[0], seen[2],
        "the same alias for the same caller and name"
    );
}
