use std::collections::HashSet;

use serde_json::{json, Value};

use super::*;

const A: &str = "bearer:alice";
const B: &str = "bearer:bob";

/// (first, second, outcome) rows of the turn tables.
type Row<'a> = (Option<&'a str>, Option<&'a str>, Result<(), Denial>);

/// A seeded xorshift generator: `next(n)` draws from `0..n`, the same sequence every run.
pub(super) fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

fn stamp(micros: u64) -> String {
    crate::time::format_rfc3339(micros)
}

fn bare_task(id: &str, ctx: &str, state: &str, ts: Option<u64>) -> Value {
    let mut status = json!({ "state": state });
    if let Some(ts) = ts {
        status["timestamp"] = json!(stamp(ts));
    }
    json!({
        "id": id, "contextId": ctx, "status": status,
        "history": [{"messageId": "m1", "contextId": ctx, "taskId": id,
                     "role": "ROLE_USER", "parts": [{"text": "hi"}]}]
    })
}

fn task(id: &str, ctx: &str, state: &str, ts: Option<u64>) -> Value {
    json!({ "task": bare_task(id, ctx, state, ts) })
}

fn status_update(id: &str, ctx: &str, state: &str, ts: Option<u64>) -> Value {
    let mut status = json!({ "state": state });
    if let Some(ts) = ts {
        status["timestamp"] = json!(stamp(ts));
    }
    json!({ "statusUpdate": { "taskId": id, "contextId": ctx, "status": status } })
}

fn artifact_update(id: &str, ctx: &str) -> Value {
    json!({ "artifactUpdate": { "taskId": id, "contextId": ctx, "lastChunk": true,
        "artifact": { "artifactId": "a1", "parts": [{ "text": "x" }] } } })
}

fn message(ctx: &str, task: Option<&str>) -> Value {
    let mut m = json!({ "messageId": "m2", "contextId": ctx, "role": "ROLE_AGENT",
                        "parts": [{ "text": "hello" }] });
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    json!({ "message": m })
}

/// Tasks as `list` returns them, ids only.
fn ids(page: &ListPage) -> Vec<&str> {
    page.tasks.iter().map(|(id, _)| id.as_str()).collect()
}

fn list_all(reg: &TaskRegistry, who: &str) -> Vec<String> {
    let page = reg.list(who, None, None, 100, None).expect("list");
    page.tasks.into_iter().map(|(id, _)| id).collect()
}

#[test]
fn registry_and_turn_are_shareable() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<TaskRegistry>();
    send_sync::<Turn>();
}

/// Someone else's task or context is refused exactly like one that does not exist, for every
/// task-addressed method and for messages.
#[test]
fn principals_are_isolated_without_an_existence_oracle() {
    let reg = TaskRegistry::new(100);
    reg.observe(
        A,
        2,
        &task("t-a", "c-a", "TASK_STATE_INPUT_REQUIRED", Some(10)),
    )
    .unwrap();
    assert_eq!(reg.authorize_task(A, "t-a"), Ok(2));

    // (method, task id): GetTask, CancelTask, SubscribeToTask and the push-config methods all
    // go through authorize_task.
    let methods = [
        "GetTask",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ];
    for method in methods {
        for id in ["t-a", "absent"] {
            assert_eq!(
                reg.authorize_task(B, id),
                Err(Denial::NotFound),
                "{method} {id}"
            );
        }
    }

    // Messages: (task id, context id, workspace) → NotFound for B, whether A's or absent.
    let rows: [(Option<&str>, Option<&str>, Option<&str>); 8] = [
        (Some("t-a"), None, None),
        (Some("t-a"), Some("c-a"), None),
        (Some("t-a"), Some("c-a"), Some("/w")),
        (None, Some("c-a"), None),
        (None, Some("c-a"), Some("/w")),
        (Some("absent"), None, None),
        (Some("absent"), Some("c-a"), None),
        (Some("absent"), Some("c-b"), None),
    ];
    for (t, c, w) in rows {
        let got = reg.begin_turn(B, t, c, w).map(|_| ());
        assert_eq!(got, Err(Denial::NotFound), "B {t:?} {c:?} {w:?}");
    }
    // B's own, unknown context works and becomes B's.
    assert!(reg.begin_turn(B, None, Some("c-b2"), None).is_ok());
    assert_eq!(
        reg.begin_turn(A, None, Some("c-b2"), None).map(|_| ()),
        Err(Denial::NotFound)
    );

    // Listing: B sees nothing of A's, with or without A's context as a filter.
    for ctx in [None, Some("c-a")] {
        let page = reg.list(B, ctx, None, 50, None).expect("list");
        assert!(page.tasks.is_empty(), "{ctx:?}");
        assert_eq!(page.total_size, 0);
    }
    assert_eq!(list_all(&reg, A), vec!["t-a"]);
    reg.check_invariants();
}

#[test]
fn an_unknown_client_context_is_reserved_for_its_first_user() {
    let reg = TaskRegistry::new(100);
    let turn = reg
        .begin_turn(A, None, Some("chosen"), None)
        .expect("reserve");
    assert_eq!(turn.upstream(), None);
    assert_eq!(turn.context_id(), Some("chosen"));
    // While running and after: B cannot share it, and gets NotFound, not Busy.
    assert_eq!(
        reg.begin_turn(B, None, Some("chosen"), None).map(|_| ()),
        Err(Denial::NotFound)
    );
    turn.finish();
    assert_eq!(
        reg.begin_turn(B, None, Some("chosen"), None).map(|_| ()),
        Err(Denial::NotFound)
    );
    assert!(reg.begin_turn(A, None, Some("chosen"), None).is_ok());
    // Answers from an agent cannot hand it to B either.
    reg.observe(B, 1, &task("t-b", "chosen", "TASK_STATE_WORKING", None))
        .unwrap_err();
    assert_eq!(reg.authorize_task(B, "t-b"), Err(Denial::NotFound));
    assert_eq!(reg.stats().foreign_ignored, 1);
    reg.check_invariants();
}

#[test]
fn workspace_binds_at_first_use_and_none_is_a_value() {
    // (first workspace, second workspace, second outcome)
    let rows: [Row; 6] = [
        (Some("/w/a"), Some("/w/a"), Ok(())),
        (Some("/w/a"), Some("/w/b"), Err(Denial::WorkspaceMismatch)),
        (Some("/w/a"), None, Err(Denial::WorkspaceMismatch)),
        (None, Some("/w/a"), Err(Denial::WorkspaceMismatch)),
        (None, None, Ok(())),
        (Some("/w/a"), Some("/w/a/"), Err(Denial::WorkspaceMismatch)), // normalized by the gate
    ];
    for (first, second, want) in rows {
        let reg = TaskRegistry::new(10);
        reg.begin_turn(A, None, Some("c"), first)
            .expect("first")
            .finish();
        let got = reg.begin_turn(A, None, Some("c"), second).map(|_| ());
        assert_eq!(got, want, "{first:?} then {second:?}");
        // A refused turn changes nothing: the first binding still holds.
        assert!(reg.begin_turn(A, None, Some("c"), first).is_ok());
        reg.check_invariants();
    }

    // A context learned from an answer binds at its first turn through the proxy.
    let reg = TaskRegistry::new(10);
    reg.observe(
        A,
        0,
        &task("t", "learned", "TASK_STATE_INPUT_REQUIRED", None),
    )
    .unwrap();
    reg.begin_turn(A, None, Some("learned"), Some("/x"))
        .expect("binds")
        .finish();
    assert_eq!(
        reg.begin_turn(A, None, Some("learned"), Some("/y"))
            .map(|_| ()),
        Err(Denial::WorkspaceMismatch)
    );
    // A follow-up naming only the task is checked against the task's context.
    assert_eq!(
        reg.begin_turn(A, Some("t"), None, Some("/y")).map(|_| ()),
        Err(Denial::WorkspaceMismatch)
    );
    assert!(reg.begin_turn(A, Some("t"), None, Some("/x")).is_ok());
}

#[test]
fn a_running_turn_makes_its_context_busy_except_for_its_own_task() {
    let reg = TaskRegistry::new(100);
    reg.observe(
        A,
        1,
        &task("old", "c1", "TASK_STATE_INPUT_REQUIRED", Some(1)),
    )
    .unwrap();
    let mut first = reg.begin_turn(A, None, Some("c1"), None).expect("first");
    assert_eq!(first.upstream(), Some(1));
    // Before the agent names the turn's task, nothing else may run on c1.
    assert_eq!(
        reg.begin_turn(A, Some("old"), Some("c1"), None).map(|_| ()),
        Err(Denial::ContextBusy)
    );
    first
        .observe(1, &task("run", "c1", "TASK_STATE_SUBMITTED", Some(2)))
        .unwrap();

    // (task id, context id, outcome) while `run` is running on c1.
    let rows: [Row; 6] = [
        (None, Some("c1"), Err(Denial::ContextBusy)),
        (Some("old"), Some("c1"), Err(Denial::ContextBusy)),
        (Some("old"), None, Err(Denial::ContextBusy)),
        (Some("run"), Some("c1"), Ok(())),
        (Some("run"), None, Ok(())),
        (None, Some("c2"), Ok(())), // other contexts run concurrently
    ];
    for (t, c, want) in rows {
        let got = reg.begin_turn(A, t, c, None).map(|turn| {
            if t == Some("run") {
                assert_eq!(turn.upstream(), Some(1), "routed to the task's agent");
            }
        });
        assert_eq!(got, want, "{t:?} {c:?}");
    }

    // A follow-up on the running task keeps the context busy after the first turn ends.
    let follow = reg
        .begin_turn(A, Some("run"), None, None)
        .expect("follow-up");
    drop(first);
    assert_eq!(
        reg.begin_turn(A, None, Some("c1"), None).map(|_| ()),
        Err(Denial::ContextBusy)
    );
    drop(follow);
    assert!(reg.begin_turn(A, None, Some("c1"), None).is_ok());
    assert_eq!(reg.stats().running_contexts, 0);
    reg.check_invariants();
}

#[test]
fn the_task_and_the_message_context_must_agree() {
    let reg = TaskRegistry::new(10);
    reg.observe(A, 0, &task("t1", "c1", "TASK_STATE_INPUT_REQUIRED", None))
        .unwrap();
    reg.observe(A, 0, &task("t2", "c2", "TASK_STATE_INPUT_REQUIRED", None))
        .unwrap();
    for ctx in ["c2", "unknown"] {
        assert_eq!(
            reg.begin_turn(A, Some("t1"), Some(ctx), None).map(|_| ()),
            Err(Denial::ContextMismatch),
            "{ctx}"
        );
    }
    // B learns nothing: NotFound comes first.
    assert_eq!(
        reg.begin_turn(B, Some("t1"), Some("c2"), None).map(|_| ()),
        Err(Denial::NotFound)
    );
    // Empty strings are proto3 defaults: absent.
    assert!(reg.begin_turn(A, Some("t1"), Some(""), None).is_ok());
    assert!(reg.begin_turn(A, Some(""), Some("c2"), None).is_ok());
}

#[test]
fn dropping_or_finishing_a_turn_releases_the_context() {
    let reg = TaskRegistry::new(10);
    for end in ["drop", "finish", "drop after observe"] {
        let mut turn = reg.begin_turn(A, None, Some("c"), None).expect(end);
        assert_eq!(reg.stats().running_contexts, 1, "{end}");
        match end {
            "drop" => drop(turn),
            "finish" => turn.finish(),
            _ => {
                turn.observe(0, &task("t", "c", "TASK_STATE_WORKING", None))
                    .unwrap();
                drop(turn);
            }
        }
        assert_eq!(reg.stats().running_contexts, 0, "{end}");
        reg.check_invariants();
    }
    // A turn that never learned its context leaves no pending count behind.
    drop(reg.begin_turn(A, None, None, None).expect("pending"));
    assert_eq!(reg.stats().pending_turns, 0);
}

#[test]
fn a_context_the_agent_creates_belongs_to_the_turn() {
    let reg = TaskRegistry::new(10);
    let mut turn = reg.begin_turn(A, None, None, Some("/w")).expect("new");
    assert_eq!(turn.upstream(), None);
    assert_eq!(reg.stats().pending_turns, 1);
    assert_eq!(turn.bind_upstream(3), 3);
    turn.observe(3, &task("t", "agent-ctx", "TASK_STATE_SUBMITTED", None))
        .unwrap();
    turn.observe(
        3,
        &status_update("t", "agent-ctx", "TASK_STATE_WORKING", Some(5)),
    )
    .unwrap();
    assert_eq!(turn.context_id(), Some("agent-ctx"));
    assert_eq!(reg.stats().pending_turns, 0);
    assert_eq!(reg.stats().running_contexts, 1);

    // Busy, with the task's own follow-up allowed; other callers get NotFound.
    assert_eq!(
        reg.begin_turn(A, None, Some("agent-ctx"), Some("/w"))
            .map(|_| ()),
        Err(Denial::ContextBusy)
    );
    let follow = reg
        .begin_turn(A, Some("t"), Some("agent-ctx"), Some("/w"))
        .expect("own task");
    assert_eq!(follow.upstream(), Some(3));
    drop(follow);
    assert_eq!(
        reg.begin_turn(B, None, Some("agent-ctx"), Some("/w"))
            .map(|_| ()),
        Err(Denial::NotFound)
    );
    drop(turn);
    // Bound to the turn's workspace and agent.
    assert_eq!(
        reg.begin_turn(A, None, Some("agent-ctx"), Some("/other"))
            .map(|_| ()),
        Err(Denial::WorkspaceMismatch)
    );
    let next = reg
        .begin_turn(A, None, Some("agent-ctx"), Some("/w"))
        .expect("free again");
    assert_eq!(next.upstream(), Some(3));
    assert_eq!(reg.authorize_task(A, "t"), Ok(3));
    reg.check_invariants();
}

#[test]
fn a_reserved_context_keeps_its_first_agent() {
    let reg = TaskRegistry::new(10);
    let mut turn = reg.begin_turn(A, None, Some("c"), None).expect("reserve");
    assert_eq!(turn.bind_upstream(4), 4);
    assert_eq!(turn.bind_upstream(5), 4, "an existing binding wins");
    drop(turn);
    // Even an answer from another agent does not move it.
    reg.observe(A, 6, &message("c", None)).unwrap();
    let turn = reg.begin_turn(A, None, Some("c"), None).expect("again");
    assert_eq!(turn.upstream(), Some(4));
}

/// Results that name a task in a shape the registry cannot check, or another caller's task
/// without saying its context: refused (nothing learned, the answer not relayed), also after
/// the task was evicted.
#[test]
fn answers_that_cannot_be_checked_or_name_anothers_task_are_refused() {
    let alices = || task("ta", "ca", "TASK_STATE_COMPLETED", Some(1));
    let history = json!([{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "secret"}]}]);
    // (name, result, why)
    let rows: Vec<(&str, Value, Unrelayable)> = vec![
        (
            "Task without an id",
            json!({"task": {"contextId": "cb"}}),
            Unrelayable::Malformed,
        ),
        (
            "Task with an empty id",
            task("", "cb", "TASK_STATE_WORKING", None),
            Unrelayable::Malformed,
        ),
        (
            "Task with a numeric id",
            json!({"task": {"id": 7, "contextId": "cb"}}),
            Unrelayable::Malformed,
        ),
        ("null task", json!({"task": null}), Unrelayable::Malformed),
        (
            "task as text",
            json!({"task": "ta"}),
            Unrelayable::Malformed,
        ),
        (
            "update without a taskId",
            json!({"statusUpdate": {"contextId": "cb"}}),
            Unrelayable::Malformed,
        ),
        (
            "null update beside a message",
            json!({"statusUpdate": {"taskId": "ta", "contextId": "ca"}, "task": null}),
            Unrelayable::Malformed,
        ),
        (
            "two entities",
            json!({"task": {"id": "tb", "contextId": "cb"},
                   "artifactUpdate": {"taskId": "ta", "contextId": "ca"}}),
            Unrelayable::Malformed,
        ),
        (
            "bare Task without an id",
            json!({"id": null, "status": {}}),
            Unrelayable::Malformed,
        ),
        (
            "Alice's task without its context",
            json!({"id": "ta", "status": {"state": "TASK_STATE_WORKING"}, "history": history}),
            Unrelayable::Foreign,
        ),
        (
            "Alice's task, bare id only",
            json!({"id": "ta"}),
            Unrelayable::Foreign,
        ),
        (
            "update of Alice's task without its context",
            json!({"artifactUpdate": {"taskId": "ta", "artifact": {"parts": []}}}),
            Unrelayable::Foreign,
        ),
        (
            "push config of Alice's task",
            json!({"id": "cfg", "taskId": "ta", "url": "https://hooks.example/a"}),
            Unrelayable::Foreign,
        ),
        (
            "push config list of Alice's task",
            json!({"configs": [{"id": "cfg", "taskId": "ta", "url": "https://hooks.example/a"}]}),
            Unrelayable::Foreign,
        ),
        (
            "push config list: Bob's task, then Alice's",
            json!({"configs": [
                {"id": "c1", "taskId": "tb", "url": "https://hooks.example/b"},
                {"id": "c2", "url": "https://hooks.example/none"},
                {"id": "c3", "taskId": "ta", "url": "https://hooks.example/a"}]}),
            Unrelayable::Malformed,
        ),
    ];
    for evict in [false, true] {
        for (name, result, why) in &rows {
            let reg = TaskRegistry::new(2);
            reg.observe(A, 0, &alices()).unwrap();
            reg.observe(B, 0, &task("tb", "cb", "TASK_STATE_COMPLETED", Some(2)))
                .unwrap();
            if evict {
                // Two more of Alice's tasks in her context push `ta` out.
                for (i, t) in ["ta2", "ta3"].iter().enumerate() {
                    reg.observe(
                        A,
                        0,
                        &task(t, "ca", "TASK_STATE_COMPLETED", Some(3 + i as u64)),
                    )
                    .unwrap();
                }
                assert_eq!(
                    reg.authorize_task(A, "ta"),
                    Err(Denial::NotFound),
                    "evicted"
                );
            }
            let before = reg.stats();
            assert_eq!(
                reg.observe(B, 0, result),
                Err(*why),
                "{name} (evicted: {evict})"
            );
            let mut turn = reg.begin_turn(B, None, None, None).expect("turn");
            assert_eq!(
                turn.observe(0, result),
                Err(*why),
                "{name} in a turn (evicted: {evict})"
            );
            drop(turn);
            let after = reg.stats();
            assert_eq!(
                (after.tasks, after.contexts),
                (before.tasks, before.contexts),
                "{name}: nothing learned"
            );
            assert_eq!(reg.authorize_task(B, "ta"), Err(Denial::NotFound), "{name}");
            reg.check_invariants();
        }
    }
}

/// An evicted task stays its owner's: an agent naming it in another caller's answer, in a
/// context of theirs or a new one, is refused; its owner may see it learned again.
#[test]
fn an_evicted_task_is_not_handed_to_another_caller() {
    let reg = TaskRegistry::new(2);
    reg.observe(A, 0, &task("ta", "ca", "TASK_STATE_COMPLETED", Some(1)))
        .unwrap();
    for i in 0..2 {
        let t = format!("ta{i}");
        reg.observe(A, 0, &task(&t, "ca", "TASK_STATE_COMPLETED", Some(2 + i)))
            .unwrap();
    }
    reg.observe(B, 0, &task("tb", "cb", "TASK_STATE_COMPLETED", Some(9)))
        .unwrap();
    assert_eq!(
        reg.authorize_task(A, "ta"),
        Err(Denial::NotFound),
        "evicted"
    );
    assert_eq!(reg.stats().forgotten_tasks, 2);
    for (name, result) in [
        (
            "in Bob's context",
            task("ta", "cb", "TASK_STATE_WORKING", Some(10)),
        ),
        (
            "in a new context",
            task("ta", "cnew", "TASK_STATE_WORKING", Some(10)),
        ),
        (
            "as an update",
            status_update("ta", "cb", "TASK_STATE_WORKING", Some(10)),
        ),
        ("named by a message", message("cb", Some("ta"))),
    ] {
        assert_eq!(
            reg.observe(B, 0, &result),
            Err(Unrelayable::Foreign),
            "{name}"
        );
        let mut turn = reg.begin_turn(B, None, None, None).expect("turn");
        assert_eq!(
            turn.observe(0, &result),
            Err(Unrelayable::Foreign),
            "{name}: turn"
        );
        drop(turn);
        assert_eq!(reg.authorize_task(B, "ta"), Err(Denial::NotFound), "{name}");
    }
    // Its owner's agent names it again: learned for her, and no longer remembered as evicted.
    reg.observe(A, 0, &task("ta", "ca", "TASK_STATE_WORKING", Some(11)))
        .unwrap();
    assert_eq!(reg.authorize_task(A, "ta"), Ok(0));
    reg.check_invariants();
}

/// A list of push configs of the caller's own task (or naming none) is relayed.
#[test]
fn push_config_lists_of_the_callers_task_are_relayed() {
    let reg = TaskRegistry::new(8);
    reg.observe(A, 0, &task("ta", "ca", "TASK_STATE_WORKING", Some(1)))
        .unwrap();
    reg.observe(B, 0, &task("tb", "cb", "TASK_STATE_WORKING", Some(2)))
        .unwrap();
    for result in [
        json!({"configs": []}),
        json!({"configs": [{"id": "c1", "url": "https://hooks.example/b"}]}),
        json!({"configs": [{"id": "c1", "taskId": "tb", "url": "https://hooks.example/b"},
                           {"id": "c2", "taskId": "tb", "url": "https://hooks.example/c"}],
               "nextPageToken": ""}),
        json!({"configs": [{"id": "c1", "taskId": "unknown", "url": "https://hooks.example/b"}]}),
    ] {
        assert!(reg.observe(B, 0, &result).is_ok(), "{result}");
    }
}

/// Each result shape: what it teaches (task recorded?, context recorded?).
#[test]
fn observe_reads_every_result_shape() {
    let envelope = json!({"jsonrpc": "2.0", "id": 1,
        "result": task("t", "c", "TASK_STATE_WORKING", Some(7))});
    let list = json!({"tasks": [bare_task("t", "c", "TASK_STATE_WORKING", Some(7))],
        "nextPageToken": "", "pageSize": 50, "totalSize": 1});
    let error = json!({"jsonrpc": "2.0", "id": 1,
        "error": {"code": -32001, "message": "Task not found"}});
    let bare_message = json!({"messageId": "m", "contextId": "c", "role": "ROLE_AGENT",
        "parts": [{"text": "x"}]});
    let long = "x".repeat(300);
    // (name, result, task known, context known, state, timestamp)
    let rows: Vec<(&str, Value, bool, bool, &str, u64)> = vec![
        (
            "bare Task",
            bare_task("t", "c", "TASK_STATE_COMPLETED", Some(9)),
            true,
            true,
            "TASK_STATE_COMPLETED",
            9,
        ),
        (
            "{task}",
            task("t", "c", "TASK_STATE_SUBMITTED", None),
            true,
            true,
            "TASK_STATE_SUBMITTED",
            0,
        ),
        ("{message}", message("c", None), false, true, "", 0),
        (
            "{message} naming a task",
            message("c", Some("t")),
            false,
            true,
            "",
            0,
        ),
        ("bare Message", bare_message, false, true, "", 0),
        (
            "statusUpdate",
            status_update("t", "c", "TASK_STATE_WORKING", Some(8)),
            true,
            true,
            "TASK_STATE_WORKING",
            8,
        ),
        (
            "artifactUpdate",
            artifact_update("t", "c"),
            true,
            true,
            "",
            0,
        ),
        (
            "JSON-RPC envelope",
            envelope,
            true,
            true,
            "TASK_STATE_WORKING",
            7,
        ),
        ("ListTasks result", list, false, false, "", 0),
        ("error", error, false, false, "", 0),
        ("not an object", json!(["t", "c"]), false, false, "", 0),
        (
            "bad timestamp",
            json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "yesterday"}}}),
            true,
            true,
            "TASK_STATE_WORKING",
            0,
        ),
    ];
    // A new task the answer names no context for cannot be recorded as the caller's: not
    // relayed (shown to this caller, it would still be free for the next one).
    for (name, result) in [
        (
            "update, no context",
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}),
        ),
        (
            "task, no context",
            json!({"task": {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}}),
        ),
        (
            "bare task, no context",
            json!({"id": "t", "status": {"state": "TASK_STATE_WORKING"}}),
        ),
        // (an id no one could record nor name: refused, its context unchecked otherwise)
        ("overlong id", task(&long, "c", "TASK_STATE_WORKING", None)),
        (
            "overlong update id",
            json!({"statusUpdate": {"taskId": long, "contextId": "c"}}),
        ),
        ("overlong bare id", json!({"id": long, "contextId": "c"})),
        (
            "overlong push config task",
            json!({"id": "cfg", "taskId": long, "url": "https://h.example.com/"}),
        ),
        (
            "configs, one with an overlong task",
            json!({"configs": [
                {"id": "a", "taskId": "t", "url": "https://h.example.com/"},
                {"id": "b", "taskId": long, "url": "https://h.example.com/"}]}),
        ),
    ] {
        let reg = TaskRegistry::new(10);
        assert!(reg.observe(A, 7, &result).is_err(), "{name}");
        assert!(reg.authorize_task(A, "t").is_err(), "{name}");
        assert!(reg.authorize_task(B, "t").is_err(), "{name}");
        reg.check_invariants();
    }
    for (name, result, task_known, context_known, state, ts) in rows {
        let reg = TaskRegistry::new(10);
        reg.observe(A, 7, &result).unwrap();
        let got = reg.authorize_task(A, "t");
        assert_eq!(got.is_ok(), task_known, "{name}: task");
        if task_known {
            assert_eq!(got, Ok(7), "{name}: upstream");
            let page = reg.list(A, None, Some(state).filter(|s| !s.is_empty()), 10, None);
            assert_eq!(ids(&page.expect("list")), vec!["t"], "{name}: state");
            let st = reg.shared.lock();
            assert_eq!(st.tasks["t"].ts, ts, "{name}: timestamp");
            assert_eq!(&*st.tasks["t"].state, state, "{name}: state");
        }
        let st = reg.shared.lock();
        assert_eq!(
            st.contexts.contains_key("c"),
            context_known,
            "{name}: context"
        );
        if context_known {
            assert_eq!(&*st.contexts["c"].owner, A, "{name}: owner");
            assert_eq!(
                st.contexts["c"].upstream,
                Some(7),
                "{name}: context upstream"
            );
        }
        drop(st);
        reg.check_invariants();
    }
}

#[test]
fn observe_never_reassigns_and_keeps_the_last_timestamp() {
    let reg = TaskRegistry::new(10);
    reg.observe(A, 0, &task("t1", "c1", "TASK_STATE_WORKING", Some(100)))
        .unwrap();
    // (who, upstream, result): each must be ignored.
    let foreign = [
        (
            B,
            1,
            status_update("t1", "c1", "TASK_STATE_CANCELED", Some(900)),
        ),
        (B, 1, task("t1", "c1", "TASK_STATE_CANCELED", Some(900))),
        (B, 1, artifact_update("t1", "c1")),
        (B, 1, task("t-new", "c1", "TASK_STATE_WORKING", Some(900))), // A's context
        (B, 1, task("t1", "c-b", "TASK_STATE_WORKING", Some(900))),   // A's task elsewhere
        (A, 1, task("t1", "c-other", "TASK_STATE_WORKING", Some(900))), // task moved context
        (B, 1, message("c1", None)),
    ];
    for (n, (who, up, result)) in foreign.iter().enumerate() {
        assert!(reg.observe(who, *up, result).is_err(), "row {n}");
        assert_eq!(reg.stats().foreign_ignored, n as u64 + 1, "row {n}");
    }
    assert_eq!(reg.authorize_task(A, "t1"), Ok(0));
    assert_eq!(reg.authorize_task(B, "t1"), Err(Denial::NotFound));
    assert_eq!(reg.authorize_task(B, "t-new"), Err(Denial::NotFound));
    assert_eq!(reg.authorize_task(A, "t-new"), Err(Denial::NotFound));
    let st = reg.shared.lock();
    assert_eq!(
        (&*st.tasks["t1"].state, st.tasks["t1"].ts),
        ("TASK_STATE_WORKING", 100)
    );
    assert!(
        !st.contexts.contains_key("c-b"),
        "nothing recorded from a foreign answer"
    );
    drop(st);

    // The owner's own updates apply; a status without timestamp keeps the last one.
    reg.observe(
        A,
        5,
        &status_update("t1", "c1", "TASK_STATE_INPUT_REQUIRED", None),
    )
    .unwrap();
    let st = reg.shared.lock();
    assert_eq!(
        (
            &*st.tasks["t1"].state,
            st.tasks["t1"].ts,
            st.tasks["t1"].upstream
        ),
        ("TASK_STATE_INPUT_REQUIRED", 100, 0)
    );
    drop(st);
    reg.check_invariants();
}

#[test]
fn list_orders_newest_first_and_filters() {
    let reg = TaskRegistry::new(100);
    // (id, context, state, timestamp)
    let rows = [
        ("a", "c1", "TASK_STATE_COMPLETED", 10),
        ("b", "c1", "TASK_STATE_WORKING", 30),
        ("c", "c2", "TASK_STATE_WORKING", 20),
        ("d", "c2", "TASK_STATE_FAILED", 30),
        ("e", "c1", "TASK_STATE_WORKING", 0),
    ];
    for (id, ctx, state, ts) in rows {
        reg.observe(A, 0, &task(id, ctx, state, Some(ts).filter(|t| *t > 0)))
            .unwrap();
    }
    reg.observe(B, 1, &task("z", "cb", "TASK_STATE_WORKING", Some(99)))
        .unwrap();

    // (context, status, expected ids)
    let cases: [(Option<&str>, Option<&str>, &[&str]); 9] = [
        (None, None, &["d", "b", "c", "a", "e"]),
        (Some(""), Some(""), &["d", "b", "c", "a", "e"]),
        (
            None,
            Some("TASK_STATE_UNSPECIFIED"),
            &["d", "b", "c", "a", "e"],
        ),
        (Some("c1"), None, &["b", "a", "e"]),
        (Some("c2"), None, &["d", "c"]),
        (None, Some("TASK_STATE_WORKING"), &["b", "c", "e"]),
        (Some("c1"), Some("TASK_STATE_WORKING"), &["b", "e"]),
        (Some("cb"), None, &[]),
        (Some("nowhere"), Some("TASK_STATE_WORKING"), &[]),
    ];
    for (ctx, status, want) in cases {
        let page = reg.list(A, ctx, status, 50, None).expect("list");
        assert_eq!(ids(&page), want, "{ctx:?} {status:?}");
        assert_eq!(page.total_size, want.len(), "{ctx:?} {status:?}");
        assert_eq!(page.next_page_token, "");
    }
    // A status change moves a task in the order.
    reg.observe(
        A,
        0,
        &status_update("a", "c1", "TASK_STATE_WORKING", Some(40)),
    )
    .unwrap();
    assert_eq!(list_all(&reg, A), vec!["a", "d", "b", "c", "e"]);
    // Each entry carries its agent.
    assert_eq!(
        reg.list(B, None, None, 5, None).expect("b").tasks,
        vec![("z".to_owned(), 1)]
    );
    reg.check_invariants();
}

#[test]
fn paging_through_250_tasks_has_no_gaps_or_duplicates() {
    let reg = TaskRegistry::new(1000);
    for i in 0..250u64 {
        // Ties on the timestamp (three per value) exercise the id order.
        let ctx = format!("c{}", i % 4);
        reg.observe(
            A,
            (i % 3) as usize,
            &task(
                &format!("t{i:03}"),
                &ctx,
                "TASK_STATE_WORKING",
                Some(1 + i / 3),
            ),
        )
        .unwrap();
        reg.observe(
            B,
            0,
            &task(&format!("b{i:03}"), "cb", "TASK_STATE_WORKING", Some(1 + i)),
        )
        .unwrap();
    }
    let full: Vec<String> = {
        let st = reg.shared.lock();
        let mut v: Vec<(u64, String)> = st
            .tasks
            .iter()
            .filter(|(_, t)| &*t.owner == A)
            .map(|(id, t)| (t.ts, id.to_string()))
            .collect();
        v.sort();
        v.reverse();
        v.into_iter().map(|(_, id)| id).collect()
    };
    assert_eq!(full.len(), 250);

    for (ctx, expected) in [(None, 250usize), (Some("c1"), 63)] {
        for size in [1usize, 7, 100] {
            let mut seen = Vec::new();
            let mut token: Option<String> = None;
            let mut pages = 0;
            loop {
                let page = reg
                    .list(A, ctx, None, size, token.as_deref())
                    .expect("page");
                assert_eq!(page.total_size, expected);
                assert!(page.tasks.len() <= size);
                seen.extend(page.tasks.into_iter().map(|(id, _)| id));
                pages += 1;
                if page.next_page_token.is_empty() {
                    break;
                }
                token = Some(page.next_page_token);
                assert!(pages <= 250, "paging does not end");
            }
            let want: Vec<String> = full
                .iter()
                .filter(|id| {
                    ctx.is_none() || {
                        let n: u64 = id[1..].parse().expect("n");
                        n % 4 == 1
                    }
                })
                .cloned()
                .collect();
            assert_eq!(seen, want, "ctx {ctx:?} size {size}");
            let unique: HashSet<&String> = seen.iter().collect();
            assert_eq!(unique.len(), seen.len());
            assert_eq!(pages, expected.div_ceil(size), "ctx {ctx:?} size {size}");
        }
    }
}

#[test]
fn page_tokens_are_bound_and_tamper_proof() {
    let reg = TaskRegistry::new(100);
    for i in 0..10u64 {
        reg.observe(
            A,
            0,
            &task(&format!("t{i}"), "c", "TASK_STATE_WORKING", Some(i + 1)),
        )
        .unwrap();
    }
    let first = reg.list(A, None, None, 3, None).expect("first");
    let token = first.next_page_token.clone();
    assert!(!token.is_empty());
    assert!(token
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    // Opaque: base64url of version, timestamp, the cursor's id and a 32-byte tag; the id is
    // not readable where it sits (its bytes share base64 groups with the timestamp and the
    // tag), and the owner is not carried at all. (Not `!token.contains("t6")`: the tag's 43
    // random characters hold any two-character string about one time in a hundred.)
    assert!(token.len() >= 43 + 12, "{token}");
    assert!(!token[..15].contains("t6"), "opaque: {token}");
    assert!(
        !token.contains("alice"),
        "the owner is not carried: {token}"
    );
    assert_eq!(
        ids(&reg.list(A, None, None, 3, Some(&token)).expect("own")),
        vec!["t6", "t5", "t4"]
    );

    let mut bad: Vec<(String, String)> = Vec::new();
    for i in 0..token.len() {
        let mut b = token.clone().into_bytes();
        b[i] = if b[i] == b'A' { b'B' } else { b'A' };
        bad.push((format!("flip {i}"), String::from_utf8(b).expect("ascii")));
    }
    for cut in [1, 2, 10, 43, token.len() - 1] {
        bad.push((format!("truncated to {cut}"), token[..cut].to_owned()));
    }
    bad.push(("extended".into(), format!("{token}AA")));
    bad.push(("padded".into(), format!("{token}=")));
    bad.push((
        "standard base64".into(),
        token.replace('-', "+").replace('_', "/") + "+",
    ));
    bad.push(("garbage".into(), "not a token!".into()));
    bad.push(("huge".into(), "A".repeat(10_000)));
    let other = TaskRegistry::new(100);
    other
        .observe(A, 0, &task("t1", "c", "TASK_STATE_WORKING", Some(1)))
        .unwrap();
    other
        .observe(A, 0, &task("t2", "c", "TASK_STATE_WORKING", Some(2)))
        .unwrap();
    let foreign_key = other
        .list(A, None, None, 1, None)
        .expect("other")
        .next_page_token;
    bad.push(("another registry's".into(), foreign_key));
    for (name, t) in &bad {
        assert_eq!(
            reg.list(A, None, None, 3, Some(t)),
            Err(Denial::InvalidToken),
            "{name}"
        );
    }
    // Another principal, or another query, cannot use it.
    let misuse: [(&str, Option<&str>, Option<&str>); 4] = [
        (B, None, None),
        (A, Some("c"), None),
        (A, None, Some("TASK_STATE_WORKING")),
        (A, Some("other"), None),
    ];
    for (who, ctx, status) in misuse {
        assert_eq!(
            reg.list(who, ctx, status, 3, Some(&token)),
            Err(Denial::InvalidToken),
            "{who} {ctx:?} {status:?}"
        );
    }
    // The empty token is the first page.
    assert_eq!(reg.list(A, None, None, 3, Some("")).expect("empty"), first);
}

#[test]
fn eviction_respects_the_bound_and_spares_running_turns() {
    let reg = TaskRegistry::new(10);
    // A turn running on c0 with its task t0 is pinned.
    let mut turn = reg.begin_turn(A, None, Some("c0"), None).expect("c0");
    turn.observe(0, &task("t0", "c0", "TASK_STATE_WORKING", Some(1)))
        .unwrap();
    for i in 1..40u64 {
        let state = if i % 2 == 0 {
            "TASK_STATE_WORKING"
        } else {
            "TASK_STATE_COMPLETED"
        };
        reg.observe(
            A,
            0,
            &task(&format!("t{i}"), &format!("c{i}"), state, Some(i + 1)),
        )
        .unwrap();
        reg.check_invariants();
        let s = reg.stats();
        assert!(s.tasks <= 10 && s.contexts <= 10, "{s:?}");
    }
    assert_eq!(reg.authorize_task(A, "t0"), Ok(0), "pinned task kept");
    assert_eq!(
        reg.begin_turn(A, None, Some("c0"), None).map(|_| ()),
        Err(Denial::ContextBusy),
        "pinned context kept, still busy"
    );
    // The most recent ones stay; finished ones went before working ones.
    assert!(reg.authorize_task(A, "t39").is_ok());
    let kept = list_all(&reg, A);
    assert_eq!(kept.len(), 10);
    let working = kept
        .iter()
        .filter(|id| id.as_str() == "t0" || id[1..].parse::<u64>().expect("n") % 2 == 0)
        .count();
    assert!(working >= 9, "working tasks are evicted last: {kept:?}");
    let s = reg.stats();
    assert_eq!(s.evicted_tasks, 30);
    assert_eq!(s.evicted_contexts, 30);
    drop(turn);
    reg.check_invariants();
}

/// A caller that fills the registry evicts its own entries, not those of callers who hold
/// fewer: Mallory's forty new tasks (each in a new context) leave Alice's two, and their
/// contexts, in place; Mallory's oldest go. A caller holding fewer than the least recently
/// used entry's owner still evicts that entry (the bound holds).
#[test]
fn a_caller_that_fills_the_registry_evicts_its_own() {
    const M: &str = "bearer:mallory";
    let reg = TaskRegistry::new(8);
    for (i, ts) in [(1, 1), (2, 2)] {
        reg.observe(
            A,
            0,
            &task(
                &format!("ta{i}"),
                &format!("ca{i}"),
                "TASK_STATE_COMPLETED",
                Some(ts),
            ),
        )
        .unwrap();
    }
    for i in 0..40u64 {
        reg.observe(
            M,
            0,
            &task(
                &format!("tm{i}"),
                &format!("cm{i}"),
                "TASK_STATE_COMPLETED",
                Some(10 + i),
            ),
        )
        .unwrap();
        reg.check_invariants();
    }
    assert_eq!(list_all(&reg, A), ["ta2", "ta1"]);
    let mallory = list_all(&reg, M);
    assert_eq!(mallory.len(), 6, "{mallory:?}");
    assert_eq!(mallory[0], "tm39", "her newest stay: {mallory:?}");
    assert_eq!(mallory[5], "tm34", "her oldest went: {mallory:?}");
    {
        let st = reg.shared.lock();
        for c in ["ca1", "ca2", "cm39", "cm34"] {
            assert!(st.contexts.contains_key(c), "{c} kept");
        }
        assert!(!st.contexts.contains_key("cm33"), "cm33 evicted");
    }
    // Bob, holding none, evicts the least recently used entry, whoever's (Alice's oldest).
    reg.observe(B, 0, &task("tb", "cb", "TASK_STATE_COMPLETED", Some(100)))
        .unwrap();
    reg.check_invariants();
    assert_eq!(list_all(&reg, A), ["ta2"]);
    assert_eq!(list_all(&reg, M).len(), 6);
    let s = reg.stats();
    assert_eq!((s.tasks, s.contexts), (8, 8));
}

#[test]
fn an_evicted_context_stays_its_owners() {
    let reg = TaskRegistry::new(2);
    reg.observe(A, 0, &task("ta", "ca", "TASK_STATE_COMPLETED", Some(1)))
        .unwrap();
    for i in 0..3 {
        reg.observe(
            B,
            0,
            &task(
                &format!("tb{i}"),
                &format!("cb{i}"),
                "TASK_STATE_COMPLETED",
                Some(2 + i),
            ),
        )
        .unwrap();
    }
    reg.check_invariants();
    let s = reg.stats();
    assert!(
        s.evicted_contexts >= 2 && s.forgotten_contexts >= 2,
        "{s:?}"
    );
    // Someone else naming A's evicted context gets what they get for A's live one.
    assert_eq!(
        reg.begin_turn(B, None, Some("ca"), None).map(|_| ()),
        Err(Denial::NotFound)
    );
    // An agent answering B with A's evicted context is ignored, not recorded for B.
    let foreign = reg.stats().foreign_ignored;
    reg.observe(B, 0, &task("tx", "ca", "TASK_STATE_COMPLETED", Some(9)))
        .unwrap_err();
    assert_eq!(reg.stats().foreign_ignored, foreign + 1);
    assert_eq!(reg.authorize_task(B, "tx"), Err(Denial::NotFound));
    // The same in a turn of B's that started without a context: the agent naming A's
    // evicted context as the turn's new one is refused, not adopted for B.
    let mut turn = reg
        .begin_turn(B, None, None, None)
        .expect("a new conversation");
    turn.observe(0, &task("ty", "ca", "TASK_STATE_WORKING", Some(10)))
        .unwrap_err();
    assert_eq!(turn.context_id(), None);
    drop(turn);
    assert_eq!(reg.authorize_task(B, "ty"), Err(Denial::NotFound));
    assert_eq!(
        reg.begin_turn(B, None, Some("ca"), None).map(|_| ()),
        Err(Denial::NotFound)
    );
    reg.check_invariants();
    // A takes it up again, and then it is A's like any live context.
    let turn = reg.begin_turn(A, None, Some("ca"), None).expect("owner");
    drop(turn);
    assert_eq!(
        reg.begin_turn(B, None, Some("ca"), None).map(|_| ()),
        Err(Denial::NotFound)
    );
    reg.check_invariants();
}

#[test]
fn a_registry_full_of_running_turns_refuses_new_ones() {
    let reg = TaskRegistry::new(2);
    let t1 = reg.begin_turn(A, None, Some("c1"), None).expect("c1");
    let mut t2 = reg.begin_turn(A, None, None, None).expect("pending");
    // (task, context): every turn that would add one more in flight is refused.
    let rows: [(Option<&str>, Option<&str>); 3] =
        [(None, None), (None, Some("c3")), (None, Some("c4"))];
    for (t, c) in rows {
        assert_eq!(
            reg.begin_turn(B, t, c, None).map(|_| ()),
            Err(Denial::Full),
            "{c:?}"
        );
    }
    // The pending turn still finds room for the context the agent creates.
    t2.observe(0, &task("x", "agent-ctx", "TASK_STATE_WORKING", None))
        .unwrap();
    assert_eq!(t2.context_id(), Some("agent-ctx"));
    // A follow-up on a running task adds nothing and passes.
    let follow = reg.begin_turn(A, Some("x"), None, None).expect("follow-up");
    // Full does not tell someone else's context from an unknown one; the owner's new turn
    // on a free context needs room too.
    for (who, c) in [(B, "c1"), (B, "agent-ctx"), (B, "unknown"), (A, "c1")] {
        assert_eq!(
            reg.begin_turn(who, None, Some(c), None).map(|_| ()),
            Err(Denial::Full),
            "{who} {c}"
        );
    }
    // Task ids are checked first, and alike.
    for t in ["x", "absent"] {
        assert_eq!(
            reg.begin_turn(B, Some(t), None, None).map(|_| ()),
            Err(Denial::NotFound),
            "{t}"
        );
    }
    // An answer needing a third context while both are pinned is not recorded, so not
    // relayed (unrecorded, it would be free for the next caller it is named to).
    assert!(matches!(
        reg.observe(B, 0, &task("y", "c-b", "TASK_STATE_WORKING", None)),
        Err(Unrelayable::Full)
    ));
    assert_eq!(reg.authorize_task(B, "y"), Err(Denial::NotFound));
    drop((t1, t2, follow));
    assert!(reg.begin_turn(B, None, Some("c3"), None).is_ok());
    assert!(reg.stats().refused_full >= 4);
    reg.check_invariants();
}

#[test]
fn denials_render_as_a2a_errors() {
    let rows = [
        (Denial::NotFound, -32001, "TASK_NOT_FOUND"),
        (
            Denial::WorkspaceMismatch,
            -32602,
            "context.workspace_mismatch",
        ),
        (Denial::ContextBusy, -32602, "context.busy"),
        (Denial::ContextMismatch, -32602, "context.task_mismatch"),
        (Denial::InvalidToken, -32602, "list.page_token"),
        (Denial::Full, -32603, "registry.full"),
    ];
    for (d, code, reason) in rows {
        let e = d.rpc_error();
        assert_eq!((e.code, e.reason.as_str()), (code, reason), "{d:?}");
    }
    assert_eq!(
        Denial::ContextBusy.rpc_error().message,
        "Task is already working."
    );
}

#[test]
fn a_turn_learns_its_task_from_its_own_answers_only() {
    let reg = TaskRegistry::new(10);
    reg.observe(
        A,
        0,
        &task("old", "c", "TASK_STATE_INPUT_REQUIRED", Some(1)),
    )
    .unwrap();
    reg.observe(
        A,
        0,
        &task("elsewhere", "c2", "TASK_STATE_INPUT_REQUIRED", Some(1)),
    )
    .unwrap();
    let mut turn = reg.begin_turn(A, None, Some("c"), None).expect("turn");
    // Another context's task in this turn's answers teaches nothing about this context.
    turn.observe(
        0,
        &status_update("elsewhere", "c2", "TASK_STATE_WORKING", None),
    )
    .unwrap();
    assert_eq!(
        reg.begin_turn(A, Some("old"), None, None).map(|_| ()),
        Err(Denial::ContextBusy)
    );
    // The agent continues the known task in this turn: its follow-ups pass.
    turn.observe(0, &status_update("old", "c", "TASK_STATE_WORKING", Some(2)))
        .unwrap();
    assert!(reg.begin_turn(A, Some("old"), None, None).is_ok());
    assert_eq!(
        reg.begin_turn(A, Some("elsewhere"), Some("c2"), None)
            .map(|_| ()),
        Ok(())
    );
    drop(turn);
    reg.check_invariants();
}

#[test]
fn concurrent_turns_on_one_context_admit_exactly_one() {
    let reg = TaskRegistry::new(100);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (reg, barrier) = (reg.clone(), barrier.clone());
            std::thread::spawn(move || {
                let who = if i % 2 == 0 { A } else { B };
                barrier.wait();
                let got = reg.begin_turn(who, None, Some("shared"), None);
                // Hold the turn until every thread has tried.
                barrier.wait();
                got.map(|_| ())
            })
        })
        .collect();
    let results: Vec<Result<(), Denial>> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(results
        .iter()
        .all(|r| matches!(r, Ok(()) | Err(Denial::ContextBusy) | Err(Denial::NotFound))));
    assert_eq!(reg.stats().running_contexts, 0);
    reg.check_invariants();
}

#[test]
fn list_after_a_time_keeps_only_newer_statuses_and_binds_the_token() {
    let reg = TaskRegistry::new(100);
    for (id, ts) in [
        ("t10", Some(10)),
        ("t20", Some(20)),
        ("t30", Some(30)),
        ("t40", Some(40)),
        ("none", None),
    ] {
        reg.observe(A, 0, &task(id, "c", "TASK_STATE_WORKING", ts))
            .unwrap();
    }
    // (after, expected ids newest first)
    let cases: [(u64, &[&str]); 5] = [
        (0, &["t40", "t30", "t20", "t10", "none"]),
        (9, &["t40", "t30", "t20", "t10"]),
        (10, &["t40", "t30", "t20"]),
        (39, &["t40"]),
        (40, &[]),
    ];
    for (after, want) in cases {
        let page = reg.list_after(A, None, None, after, 50, None).unwrap();
        assert_eq!(ids(&page), want, "after {after}");
        assert_eq!(page.total_size, want.len(), "after {after}");
        let in_ctx = reg.list_after(A, Some("c"), None, after, 50, None).unwrap();
        assert_eq!(ids(&in_ctx), want, "after {after}, context");
    }
    // Paged: no gap, no duplicate, and the token is only good for the same filter.
    let first = reg.list_after(A, None, None, 15, 2, None).unwrap();
    assert_eq!(ids(&first), ["t40", "t30"]);
    let next = reg
        .list_after(A, None, None, 15, 2, Some(&first.next_page_token))
        .unwrap();
    assert_eq!(ids(&next), ["t20"]);
    assert!(next.next_page_token.is_empty());
    for other in [0, 14, 16] {
        assert_eq!(
            reg.list_after(A, None, None, other, 2, Some(&first.next_page_token))
                .unwrap_err(),
            Denial::InvalidToken,
            "after {other}"
        );
    }
}

/// Every ListTasks query (context or not, state or not, after a time or not, every page
/// size) lists exactly what filtering all the registry's tasks by hand gives, in order, with
/// the same total, after a mix of new tasks, state and timestamp changes, ties, two owners
/// and evictions.
#[test]
fn every_list_query_matches_a_filter_over_all_tasks() {
    const STATES: [&str; 4] = [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
    ];
    let reg = TaskRegistry::new(150);
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    for step in 0..600u64 {
        let who = if next(4) == 0 { B } else { A };
        // Task ids are drawn from a small pool: many answers update a task already known.
        let id = format!("t{}{}", if who == A { "a" } else { "b" }, next(220));
        let ctx = format!("c{}{}", if who == A { "a" } else { "b" }, next(5));
        let state = STATES[next(4) as usize];
        let ts = (next(3) != 0).then(|| 1 + next(80));
        let answer = match next(3) {
            0 => status_update(&id, &ctx, state, ts),
            _ => task(&id, &ctx, state, ts),
        };
        let _ = reg.observe(who, (step % 2) as usize, &answer);
    }
    reg.check_invariants();
    assert!(reg.stats().evicted_tasks > 0);
    let all: Vec<(String, String, String, String, u64)> = {
        let st = reg.shared.lock();
        st.tasks
            .iter()
            .map(|(id, t)| {
                let ctx = st
                    .contexts
                    .iter()
                    .find(|(c, _)| Arc::ptr_eq(c, &t.context))
                    .map_or_else(|| t.context.to_string(), |(c, _)| c.to_string());
                (
                    id.to_string(),
                    t.owner.to_string(),
                    ctx,
                    t.state.to_string(),
                    t.ts,
                )
            })
            .collect()
    };
    assert!(all.len() > 100, "{}", all.len());
    let mut contexts: Vec<Option<String>> = all.iter().map(|r| Some(r.2.clone())).collect();
    contexts.sort();
    contexts.dedup();
    contexts.extend([None, Some("c-unknown".into())]);
    let statuses = [None, Some("TASK_STATE_UNSPECIFIED")]
        .into_iter()
        .chain(STATES.iter().map(|s| Some(*s)))
        .chain([Some("TASK_STATE_REJECTED")]);
    let statuses: Vec<Option<&str>> = statuses.collect();
    let mut queries = 0;
    for who in [A, B] {
        for ctx in &contexts {
            for status in &statuses {
                for after in [0u64, 1, 40, 79, 1000] {
                    let mut want: Vec<&(String, String, String, String, u64)> = all
                        .iter()
                        .filter(|r| r.1 == who)
                        .filter(|r| ctx.as_ref().is_none_or(|c| r.2 == *c))
                        .filter(|r| {
                            status.is_none_or(|s| s == "TASK_STATE_UNSPECIFIED" || r.3 == s)
                        })
                        .filter(|r| after == 0 || r.4 > after)
                        .collect();
                    want.sort_by(|x, y| (y.4, &y.0).cmp(&(x.4, &x.0)));
                    let want: Vec<&str> = want.iter().map(|r| r.0.as_str()).collect();
                    for size in [1usize, 7, 500] {
                        let (mut got, mut token) = (Vec::new(), None::<String>);
                        loop {
                            let page = reg
                                .list_after(
                                    who,
                                    ctx.as_deref(),
                                    *status,
                                    after,
                                    size,
                                    token.as_deref(),
                                )
                                .unwrap();
                            assert_eq!(
                                page.total_size,
                                want.len(),
                                "{who} {ctx:?} {status:?} {after}"
                            );
                            assert!(page.tasks.len() <= size);
                            got.extend(page.tasks.iter().map(|(id, _)| id.clone()));
                            if page.next_page_token.is_empty() {
                                break;
                            }
                            token = Some(page.next_page_token);
                        }
                        assert_eq!(got, want, "{who} {ctx:?} {status:?} {after} {size}");
                        queries += 1;
                    }
                }
            }
        }
    }
    assert!(queries > 1000, "{queries}");
}

/// The answer to a request addressed to one task names that task or none.
#[test]
fn an_answer_names_only_the_task_asked_for() {
    // (result, about task "t" only?)
    let rows = [
        (json!({"id": "t", "contextId": "c"}), true),
        (json!({"id": "u", "contextId": "c"}), false),
        (json!({"task": {"id": "u", "contextId": "c"}}), false),
        (
            json!({"statusUpdate": {"taskId": "t", "contextId": "c"}}),
            true,
        ),
        (json!({"artifactUpdate": {"taskId": "u"}}), false),
        (json!({"message": {"messageId": "m", "taskId": "u"}}), false),
        (
            json!({"message": {"messageId": "m", "contextId": "c"}}),
            true,
        ),
        (
            json!({"id": "cfg", "taskId": "t", "url": "https://h/x"}),
            true,
        ),
        (
            json!({"id": "cfg", "taskId": "u", "url": "https://h/x"}),
            false,
        ),
        (json!({"configs": [{"taskId": "t"}, {"taskId": "t"}]}), true),
        (json!({"configs": [{"taskId": "u"}]}), false),
        (json!({"configs": []}), true),
        (Value::Null, true),
        (json!({}), true),
        // Refused by `observe` as a shape that cannot be checked, not here.
        (json!({"task": null}), true),
    ];
    for (result, only) in rows {
        assert_eq!(
            TaskRegistry::names_only_task(&result, "t"),
            only,
            "{result}"
        );
    }
}

/// A task read again from Redis takes Redis's state and timestamp (another replica learned
/// them): the next answer with the state this replica had is news again, so Redis never
/// keeps a state older than the agent's last answer; ListTasks by state sees Redis's.
#[test]
fn a_task_read_again_from_redis_takes_its_state() {
    let secs = std::time::Duration::from_secs;
    let reg = TaskRegistry::new(8);
    reg.trust_for(secs(10), secs(1));
    reg.import_context("c", A, Some(0), None, None, secs(30));
    reg.import_task("t", A, "c", 0, "TASK_STATE_WORKING", 2, secs(0));
    let working = task("t", "c", "TASK_STATE_WORKING", None);
    assert!(reg.news(&working).is_none(), "nothing new yet");
    // Another replica relayed INPUT_REQUIRED; this one reads the task again.
    reg.import_task("t", A, "c", 0, "TASK_STATE_INPUT_REQUIRED", 3, secs(30));
    let news = reg.news(&working).expect("WORKING is news again");
    assert_eq!(news.state.as_deref(), Some("TASK_STATE_WORKING"));
    assert!(reg
        .news(&task("t", "c", "TASK_STATE_INPUT_REQUIRED", Some(3)))
        .is_none());
    assert!(reg
        .news(&task("t", "c", "TASK_STATE_INPUT_REQUIRED", Some(4)))
        .is_some());
}

/// With `redis` the registry is a cache that trusts an entry only as long as Redis may
/// still hold it: what it learned for the retention, what it read for the TTL Redis gave.
/// Then it is asked again: what Redis no longer holds is forgotten (not remembered as
/// evicted: whoever names it next claims it, as in Redis), what Redis holds as another's
/// replaces it, unless a turn runs on it here.
#[test]
fn a_cache_of_redis_trusts_an_entry_no_longer_than_redis_keeps_it() {
    let secs = std::time::Duration::from_secs;
    let reg = TaskRegistry::new(8);
    let age = |s: u64| reg.shared.lock().age(secs(s));
    // Memory: trusted for ever.
    reg.observe(A, 0, &task("tm", "cm", "TASK_STATE_COMPLETED", Some(1)))
        .unwrap();
    age(1_000_000);
    assert!(reg.trusts_task("tm") && reg.trusts_context("cm"));

    let reg = TaskRegistry::new(8);
    let age = |s: u64| reg.shared.lock().age(secs(s));
    reg.trust_for(secs(10), secs(1));
    reg.observe(A, 0, &task("ta", "ca", "TASK_STATE_COMPLETED", Some(1)))
        .unwrap();
    reg.import_task("tr", A, "ca", 0, "TASK_STATE_WORKING", 2, secs(4));
    reg.import_context("cr", A, Some(0), None, None, secs(4));
    reg.import_task("tl", A, "ca", 0, "TASK_STATE_WORKING", 3, secs(0));
    let trusted = |ids: [&str; 3]| {
        [
            reg.trusts_task(ids[0]),
            reg.trusts_task(ids[1]),
            reg.trusts_task(ids[2]),
        ]
    };
    // Read with no TTL left (the key expired as it was read): not trusted beyond that.
    assert_eq!(trusted(["ta", "tr", "tl"]), [true, true, false]);
    age(5);
    assert_eq!(trusted(["ta", "tr", "tl"]), [true, false, false]);
    assert!(reg.trusts_context("ca") && !reg.trusts_context("cr"));
    age(6);
    assert_eq!(trusted(["ta", "tr", "tl"]), [false, false, false]);
    // An answer naming them now is judged only after Redis is asked.
    let (tasks, contexts) = reg.untrusted_named(&task("ta", "ca", "TASK_STATE_WORKING", None));
    assert_eq!(
        (tasks, contexts),
        (vec!["ta".to_string()], vec!["ca".to_string()])
    );
    // Redis read again: a TTL renews the trust; one held by another caller replaces it.
    reg.import_task("tr", A, "ca", 0, "TASK_STATE_WORKING", 2, secs(30));
    assert!(reg.trusts_task("tr"));
    assert_eq!(reg.authorize_task(A, "tr"), Ok(0));
    // At another agent in Redis: Redis's agent is the one asked from now on.
    reg.import_task("tr", A, "ca", 1, "TASK_STATE_WORKING", 2, secs(30));
    assert_eq!(reg.authorize_task(A, "tr"), Ok(1));
    reg.import_task("ta", B, "cb", 0, "TASK_STATE_WORKING", 4, secs(30));
    assert_eq!(reg.authorize_task(A, "ta"), Err(Denial::NotFound));
    assert_eq!(reg.authorize_task(B, "ta"), Ok(0));
    assert!(!list_all(&reg, A).contains(&"ta".to_string()));
    assert_eq!(list_all(&reg, B), vec!["ta".to_string()]);
    reg.import_context("cr", B, Some(0), None, None, secs(30));
    assert_eq!(
        reg.observe(A, 0, &task("tx", "cr", "TASK_STATE_WORKING", None)),
        Err(Unrelayable::Foreign)
    );
    // Gone from Redis: forgotten here, and claimed by whoever names it next (not refused as
    // an evicted id of its first owner would be).
    reg.forget_unconfirmed(&["tl", "tr"], &["ca"]);
    assert_eq!(reg.authorize_task(A, "tl"), Err(Denial::NotFound));
    assert!(reg.trusts_task("tr"), "trusted still: not forgotten");
    assert!(!reg.trusts_context("ca") && !reg.shared.lock().contexts.contains_key("ca"));
    reg.observe(B, 0, &task("tl", "ca", "TASK_STATE_WORKING", Some(5)))
        .unwrap();
    assert_eq!(reg.authorize_task(B, "tl"), Ok(0));
    reg.check_invariants();

    // Written by this replica (an answer's news Redis accepted): trusted the retention again.
    reg.import_task("tw", A, "cw", 0, "TASK_STATE_WORKING", 3, secs(3));
    reg.import_context("cw", A, Some(0), None, None, secs(3));
    age(5);
    assert!(!reg.trusts_task("tw") && !reg.trusts_context("cw"));
    let news = crate::state::shared::News {
        context: Some("cw".into()),
        task: Some("tw".into()),
        state: Some("TASK_STATE_COMPLETED".into()),
        ..Default::default()
    };
    reg.observe_news(A, 0, &news).unwrap();
    assert!(reg.trusts_task("tw") && reg.trusts_context("cw"));
    age(9);
    assert!(
        !reg.trusts_task("tw"),
        "trusted past the retention less the margin"
    );

    // A running turn's task and context are not forgotten while it runs; held by another
    // caller in Redis, they are theirs here too (the task no longer the turn's, the context
    // rewritten in place), also for the turn's own answers.
    let mut turn = reg.begin_turn(A, None, Some("crun"), None).expect("turn");
    turn.observe(0, &task("trun", "crun", "TASK_STATE_WORKING", Some(6)))
        .unwrap();
    age(11);
    reg.forget_unconfirmed(&["trun"], &["crun"]);
    assert_eq!(reg.authorize_task(A, "trun"), Ok(0));
    reg.import_task("trun", B, "cb", 0, "TASK_STATE_WORKING", 7, secs(30));
    reg.import_context("crun", B, Some(0), None, None, secs(30));
    assert_eq!(reg.authorize_task(A, "trun"), Err(Denial::NotFound));
    assert_eq!(reg.authorize_task(B, "trun"), Ok(0));
    assert!(reg.trusts_task("trun") && reg.trusts_context("crun"));
    assert_eq!(
        turn.observe(0, &task("trun", "crun", "TASK_STATE_COMPLETED", Some(8))),
        Err(Unrelayable::Foreign)
    );
    assert!(list_all(&reg, B).contains(&"trun".to_string()));
    assert!(!list_all(&reg, A).contains(&"trun".to_string()));
    reg.check_invariants();
    drop(turn);
    reg.check_invariants();
}

/// With `redis` an id the cache evicted is not remembered as its owner's (Redis decides,
/// and may have forgotten it and let someone else claim it since): the cache takes it from
/// whoever Redis says owns it. With `memory` the evicted owner is remembered.
#[test]
fn a_cache_of_redis_remembers_no_evicted_owners() {
    for (shared, remembered) in [(false, (1, 1)), (true, (0, 0))] {
        let reg = TaskRegistry::new(1);
        if shared {
            reg.trust_for(
                std::time::Duration::from_secs(60),
                std::time::Duration::from_secs(1),
            );
        }
        reg.observe(A, 0, &task("ta", "ca", "TASK_STATE_COMPLETED", Some(1)))
            .unwrap();
        reg.observe(A, 0, &task("ta2", "ca2", "TASK_STATE_COMPLETED", Some(2)))
            .unwrap();
        let stats = reg.stats();
        assert_eq!(
            (stats.forgotten_contexts, stats.forgotten_tasks),
            remembered,
            "shared: {shared}"
        );
        let taken = reg.observe(B, 0, &task("ta", "cb", "TASK_STATE_WORKING", Some(3)));
        match shared {
            false => assert_eq!(taken, Err(Unrelayable::Foreign)),
            true => assert_eq!(taken, Ok(())),
        }
        reg.check_invariants();
    }
}

/// Each forwarded method's answer is held to its shape before the registry reads it: a
/// result whose keys make it read as another shape (a task list, a bare Task without an id,
/// a Task beside a `taskId` or a `messageId`, two entities) does not hold, nor does one
/// naming nothing (no method but a delete answers with nothing).
#[test]
fn each_methods_answer_is_held_to_its_shape() {
    use crate::a2a::method::Method as M;
    let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
    let message = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": []});
    let update =
        json!({"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
    let artifact =
        json!({"taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": []}});
    let rows: Vec<(Shape, Value, bool)> = vec![
        (Shape::Send, json!({"task": task}), true),
        (Shape::Send, json!({"message": message}), true),
        (Shape::Send, json!({"task": task, "other": 1}), true),
        (Shape::Send, json!({"statusUpdate": update}), false),
        (
            Shape::Send,
            json!({"task": task, "message": message}),
            false,
        ),
        (Shape::Send, task.clone(), false),
        (Shape::Send, json!({"tasks": [task]}), false),
        (Shape::Send, json!({"task": task, "tasks": []}), false),
        (Shape::Send, json!({"task": task, "id": "t-other"}), false),
        (
            Shape::Send,
            json!({"message": message, "taskId": "t"}),
            false,
        ),
        (Shape::Send, json!({"contextId": "c", "history": []}), false),
        (
            Shape::Send,
            json!({"jsonrpc": "2.0", "result": {"task": task}}),
            false,
        ),
        // Naming nothing: no method's answer but a delete's.
        (Shape::Send, json!({}), false),
        (Shape::Send, json!({"echo": true}), false),
        (Shape::Send, Value::Null, false),
        (Shape::Send, json!([{"task": task}]), false),
        (Shape::Event, json!({}), false),
        (Shape::Event, json!({"echo": true}), false),
        (Shape::Task, json!({"history": []}), false),
        (Shape::Task, json!({}), false),
        (Shape::Config, json!({}), false),
        (Shape::Configs, Value::Null, false),
        (Shape::Configs, json!({}), true),
        (Shape::Event, json!({"task": task}), true),
        (Shape::Event, json!({"message": message}), true),
        (Shape::Event, json!({"statusUpdate": update}), true),
        (Shape::Event, json!({"artifactUpdate": artifact}), true),
        (Shape::Event, json!({"artifactUpdate": update}), false),
        (Shape::Event, json!({"statusUpdate": artifact}), false),
        (
            Shape::Event,
            json!({"statusUpdate": update, "artifactUpdate": artifact}),
            false,
        ),
        (
            Shape::Event,
            json!({"statusUpdate": update, "taskId": "t"}),
            false,
        ),
        (Shape::Event, json!({"tasks": [task]}), false),
        (Shape::Event, update.clone(), false),
        (Shape::Task, task.clone(), true),
        (
            Shape::Task,
            json!({"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}),
            true,
        ),
        (Shape::Task, json!({"id": "t"}), false),
        (Shape::Task, json!({"contextId": "c", "history": []}), false),
        (Shape::Task, json!({"id": "t", "taskId": "t-mine"}), false),
        (
            Shape::Task,
            json!({"taskId": "t-mine", "id": "t", "contextId": "c"}),
            false,
        ),
        (Shape::Task, json!({"id": "t", "messageId": "m"}), false),
        (Shape::Task, json!({"id": "t", "tasks": []}), false),
        (Shape::Task, json!({"task": task}), false),
        (Shape::Task, json!({"tasks": [task]}), false),
        (Shape::Task, json!({"id": "t", "configs": []}), false),
        (
            Shape::Config,
            json!({"id": "p", "taskId": "t", "url": "https://h/"}),
            true,
        ),
        (
            Shape::Config,
            json!({"taskId": "t", "url": "https://h/"}),
            true,
        ),
        (Shape::Config, json!({"taskId": "t"}), false),
        (
            Shape::Config,
            json!({"id": "p", "taskId": "t", "contextId": "c"}),
            false,
        ),
        (
            Shape::Config,
            json!({"id": "p", "taskId": "t", "messageId": "m"}),
            false,
        ),
        (Shape::Config, json!({"task": task}), false),
        (
            Shape::Configs,
            json!({"configs": [{"id": "p", "taskId": "t", "url": "https://h/"}]}),
            true,
        ),
        (
            Shape::Configs,
            json!({"configs": [{"id": "p", "taskId": "t"}]}),
            false,
        ),
        (Shape::Configs, json!({"nextPageToken": ""}), true),
        (Shape::Configs, json!({"configs": [], "taskId": "t"}), false),
        (
            Shape::Configs,
            json!({"configs": [], "tasks": [task]}),
            false,
        ),
        (Shape::Empty, json!({}), true),
        (Shape::Empty, Value::Null, true),
        (Shape::Empty, json!({"task": task}), false),
        (Shape::Empty, json!({"tasks": [task]}), false),
        (Shape::Empty, json!("x"), false),
        (Shape::Empty, json!([]), false),
    ];
    for (shape, result, holds) in &rows {
        assert_eq!(shape.holds(result), *holds, "{shape:?}: {result}");
    }
    // Every forwarded method has its shape.
    for (m, want) in [
        (M::SendMessage, Some(Shape::Send)),
        (M::SendStreamingMessage, Some(Shape::Event)),
        (M::SubscribeToTask, Some(Shape::Event)),
        (M::GetTask, Some(Shape::Task)),
        (M::CancelTask, Some(Shape::Task)),
        (M::CreateTaskPushNotificationConfig, Some(Shape::Config)),
        (M::GetTaskPushNotificationConfig, Some(Shape::Config)),
        (M::ListTaskPushNotificationConfigs, Some(Shape::Configs)),
        (M::DeleteTaskPushNotificationConfig, Some(Shape::Empty)),
        (M::ListTasks, None),
        (M::GetExtendedAgentCard, None),
    ] {
        assert_eq!(Shape::of(m), want, "{m}");
    }
}

/// What each shape requires of its A2A 1.0 message (the proto's `REQUIRED` members, with
/// their JSON types): a result missing one, or holding it in another type or spelling (an
/// enum's number, a lowercase state, an empty id), does not hold; members the proto does not
/// know are relayed.
#[test]
fn each_shape_holds_the_members_a2a_requires() {
    let working = json!({"state": "TASK_STATE_WORKING"});
    let task = |f: &dyn Fn(&mut Value)| {
        let mut t = json!({"id": "t", "contextId": "c", "status": working});
        f(&mut t);
        t
    };
    let message = |f: &dyn Fn(&mut Value)| {
        let mut m = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]});
        f(&mut m);
        m
    };
    let update = |f: &dyn Fn(&mut Value)| {
        let mut u = json!({"taskId": "t", "contextId": "c", "status": working});
        f(&mut u);
        u
    };
    let artifact = |f: &dyn Fn(&mut Value)| {
        let mut a = json!({"taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}});
        f(&mut a);
        a
    };
    let config = |f: &dyn Fn(&mut Value)| {
        let mut c = json!({"id": "p", "taskId": "t", "url": "https://hooks.example.com/x"});
        f(&mut c);
        c
    };
    let remove =
        |k: &'static str| move |v: &mut Value| drop(v.as_object_mut().map(|o| o.remove(k)));
    let set = |k: &'static str, x: Value| move |v: &mut Value| v[k] = x.clone();
    let same = |_: &mut Value| {};
    let rows: Vec<(&str, Shape, Value, bool)> = vec![
        ("a whole task", Shape::Task, task(&same), true),
        (
            "unknown members",
            Shape::Task,
            task(&set("x-later", json!({"a": 1}))),
            true,
        ),
        (
            "no contextId (optional)",
            Shape::Task,
            task(&remove("contextId")),
            true,
        ),
        ("no id", Shape::Task, task(&remove("id")), false),
        ("empty id", Shape::Task, task(&set("id", json!(""))), false),
        ("numeric id", Shape::Task, task(&set("id", json!(7))), false),
        (
            "contextId a number",
            Shape::Task,
            task(&set("contextId", json!(1))),
            false,
        ),
        (
            "contextId null",
            Shape::Task,
            task(&set("contextId", Value::Null)),
            false,
        ),
        ("no status", Shape::Task, task(&remove("status")), false),
        (
            "status a string",
            Shape::Task,
            task(&set("status", json!("TASK_STATE_WORKING"))),
            false,
        ),
        (
            "status without state",
            Shape::Task,
            task(&set("status", json!({}))),
            false,
        ),
        (
            "state a number",
            Shape::Task,
            task(&set("status", json!({"state": 2}))),
            false,
        ),
        (
            "state lowercase (0.3)",
            Shape::Task,
            task(&set("status", json!({"state": "working"}))),
            false,
        ),
        (
            "state unspecified",
            Shape::Task,
            task(&set("status", json!({"state": "TASK_STATE_UNSPECIFIED"}))),
            false,
        ),
        (
            "state unknown",
            Shape::Task,
            task(&set("status", json!({"state": "TASK_STATE_DONE"}))),
            false,
        ),
        (
            "timestamp",
            Shape::Task,
            task(&set(
                "status",
                json!({"state": "TASK_STATE_WORKING", "timestamp": "2026-12-06T06:00:00.123456Z"}),
            )),
            true,
        ),
        (
            "timestamp not RFC 3339",
            Shape::Task,
            task(&set(
                "status",
                json!({"state": "TASK_STATE_WORKING", "timestamp": "yesterday"}),
            )),
            false,
        ),
        (
            "timestamp a number",
            Shape::Task,
            task(&set(
                "status",
                json!({"state": "TASK_STATE_WORKING", "timestamp": 1}),
            )),
            false,
        ),
        (
            "status message",
            Shape::Task,
            task(&set(
                "status",
                json!({"state": "TASK_STATE_WORKING", "message": message(&same)}),
            )),
            true,
        ),
        (
            "status message without role",
            Shape::Task,
            task(&set(
                "status",
                json!({"state": "TASK_STATE_WORKING", "message": message(&remove("role"))}),
            )),
            false,
        ),
        (
            "history",
            Shape::Task,
            task(&set(
                "history",
                json!([message(&same), message(&set("role", json!("ROLE_USER")))]),
            )),
            true,
        ),
        (
            "history with junk",
            Shape::Task,
            task(&set("history", json!([message(&same), {"x": 1}]))),
            false,
        ),
        (
            "history an object",
            Shape::Task,
            task(&set("history", json!({}))),
            false,
        ),
        (
            "artifacts",
            Shape::Task,
            task(&set("artifacts", json!([{"artifactId": "a", "parts": []}]))),
            true,
        ),
        (
            "artifact without id",
            Shape::Task,
            task(&set("artifacts", json!([{"parts": []}]))),
            false,
        ),
        (
            "artifact parts an object",
            Shape::Task,
            task(&set("artifacts", json!([{"artifactId": "a", "parts": {}}]))),
            false,
        ),
        (
            "a message",
            Shape::Send,
            json!({"message": message(&same)}),
            true,
        ),
        ("a task", Shape::Send, json!({"task": task(&same)}), true),
        (
            "a task without status",
            Shape::Send,
            json!({"task": task(&remove("status"))}),
            false,
        ),
        (
            "no messageId",
            Shape::Send,
            json!({"message": message(&remove("messageId"))}),
            false,
        ),
        (
            "role a number",
            Shape::Send,
            json!({"message": message(&set("role", json!(2)))}),
            false,
        ),
        (
            "role lowercase",
            Shape::Send,
            json!({"message": message(&set("role", json!("agent")))}),
            false,
        ),
        (
            "role unspecified",
            Shape::Send,
            json!({"message": message(&set("role", json!("ROLE_UNSPECIFIED")))}),
            false,
        ),
        (
            "no parts",
            Shape::Send,
            json!({"message": message(&remove("parts"))}),
            false,
        ),
        (
            "parts a string",
            Shape::Send,
            json!({"message": message(&set("parts", json!("hi")))}),
            false,
        ),
        (
            "message taskId a number",
            Shape::Send,
            json!({"message": message(&set("taskId", json!(1)))}),
            false,
        ),
        (
            "message a string",
            Shape::Send,
            json!({"message": "hi"}),
            false,
        ),
        ("task null", Shape::Send, json!({"task": null}), false),
        (
            "status update",
            Shape::Event,
            json!({"statusUpdate": update(&same)}),
            true,
        ),
        (
            "update without contextId",
            Shape::Event,
            json!({"statusUpdate": update(&remove("contextId"))}),
            false,
        ),
        (
            "update without taskId",
            Shape::Event,
            json!({"statusUpdate": update(&remove("taskId"))}),
            false,
        ),
        (
            "update without status",
            Shape::Event,
            json!({"statusUpdate": update(&remove("status"))}),
            false,
        ),
        (
            "update state lowercase",
            Shape::Event,
            json!({"statusUpdate": update(&set("status", json!({"state": "completed"})))}),
            false,
        ),
        (
            "artifact update",
            Shape::Event,
            json!({"artifactUpdate": artifact(&same)}),
            true,
        ),
        (
            "artifact update without artifact",
            Shape::Event,
            json!({"artifactUpdate": artifact(&remove("artifact"))}),
            false,
        ),
        (
            "artifact update without contextId",
            Shape::Event,
            json!({"artifactUpdate": artifact(&remove("contextId"))}),
            false,
        ),
        (
            "artifact update, artifact without parts",
            Shape::Event,
            json!({"artifactUpdate": artifact(&set("artifact", json!({"artifactId": "a"})))}),
            false,
        ),
        (
            "event message",
            Shape::Event,
            json!({"message": message(&same)}),
            true,
        ),
        (
            "event task",
            Shape::Event,
            json!({"task": task(&same)}),
            true,
        ),
        ("a config", Shape::Config, config(&same), true),
        (
            "config without url",
            Shape::Config,
            config(&remove("url")),
            false,
        ),
        (
            "config url empty",
            Shape::Config,
            config(&set("url", json!(""))),
            false,
        ),
        (
            "config url a number",
            Shape::Config,
            config(&set("url", json!(1))),
            false,
        ),
        (
            "config id a number",
            Shape::Config,
            config(&set("id", json!(1))),
            false,
        ),
        (
            "config without ids",
            Shape::Config,
            json!({"url": "https://hooks.example.com/x"}),
            true,
        ),
        (
            "configs",
            Shape::Configs,
            json!({"configs": [config(&same)], "nextPageToken": "n"}),
            true,
        ),
        (
            "configs, one without url",
            Shape::Configs,
            json!({"configs": [config(&same), config(&remove("url"))]}),
            false,
        ),
        (
            "configs an object",
            Shape::Configs,
            json!({"configs": config(&same)}),
            false,
        ),
        (
            "page token a number",
            Shape::Configs,
            json!({"configs": [], "nextPageToken": 1}),
            false,
        ),
        (
            "configs a list",
            Shape::Configs,
            json!([config(&same)]),
            false,
        ),
    ];
    for (what, shape, result, holds) in &rows {
        assert_eq!(shape.holds(result), *holds, "{what}: {shape:?} {result}");
    }
}

/// A page the shared store ended early (having passed over expired entries) carries a
/// token that goes on where the store stopped, good for that caller and query only; a page
/// with one row more than its size goes on after its last row; the last page has none.
#[test]
fn a_page_the_store_ended_early_goes_on_where_it_stopped() {
    let reg = TaskRegistry::new(100);
    let row = |id: &str, ts: u64| (id.to_string(), 0, ts);
    let stop = Some((7, "t7".to_string()));
    type Case<'a> = (
        Vec<(String, UpstreamId, u64)>,
        usize,
        Option<(u64, String)>,
        &'a [&'a str],
        Option<(u64, &'a str)>,
    );
    let cases: [Case; 5] = [
        (
            vec![row("t9", 9)],
            5,
            stop.clone(),
            &["t9"],
            Some((7, "t7")),
        ),
        (vec![], 5, stop.clone(), &[], Some((7, "t7"))),
        (
            vec![row("t9", 9), row("t8", 8)],
            1,
            stop.clone(),
            &["t9"],
            Some((9, "t9")),
        ),
        (
            vec![row("t9", 9), row("t8", 8)],
            1,
            None,
            &["t9"],
            Some((9, "t9")),
        ),
        (vec![row("t9", 9)], 5, None, &["t9"], None),
    ];
    for (rows, size, stopped, want, cursor) in cases {
        let page = reg.page_from_rows(A, "", "", 0, rows, size, 40, stopped);
        assert_eq!(ids(&page), want);
        assert_eq!(page.total_size, 40);
        let Some((ts, id)) = cursor else {
            assert_eq!(page.next_page_token, "");
            continue;
        };
        let opened = reg.open_cursor(A, "", "", 0, Some(&page.next_page_token));
        assert_eq!(opened, Ok(Some((ts, id.to_string()))));
        for (who, ctx) in [(B, ""), (A, "ctx")] {
            assert!(reg
                .open_cursor(who, ctx, "", 0, Some(&page.next_page_token))
                .is_err());
        }
    }
}
