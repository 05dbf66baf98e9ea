//! JSON-RPC: the envelope, the `A2A-Version` check, and one function per A2A method.
//! Every JSON-RPC error is HTTP 200 `application/json`, including those of streaming methods
//! that fail before their stream starts.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::agent::{self, Plan};
use super::store::{Begin, Events, NewMessage, Store};
use super::{params, stream, task, Engine};
use crate::a2a::{error_body, result_body, Method, RpcError, RpcRequest};
use crate::body::{json_response, BoxBody};
use crate::reason;

/// How long a new message waits for its busy context before it is refused (as iac-code).
const CONTEXT_WAIT: Duration = Duration::from_secs(1);
/// Longest `A2A-Version` value echoed back in an error.
const MAX_ECHOED_VERSION: usize = 16;

/// Answers one JSON-RPC request body.
pub(crate) async fn handle(
    engine: &Arc<Engine>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response<BoxBody> {
    let req = match RpcRequest::parse(body) {
        Ok(r) => r,
        Err(e) => return reply(&e.id, Err(*e.error)),
    };
    if let Err(e) = check_version(headers) {
        return reply(&req.id, Err(e));
    }
    let RpcRequest { id, method, params } = req;
    let store = &engine.store;
    match method {
        Method::SendMessage => send_message(store, id, &params, false).await,
        Method::SendStreamingMessage => send_message(store, id, &params, true).await,
        Method::GetTask => {
            let r = params::get_params(&params).and_then(|(task_id, history)| {
                store
                    .get(task_id, history)
                    .ok_or_else(RpcError::task_not_found)
            });
            reply(&id, r)
        }
        Method::ListTasks => reply(&id, params::list_params(&params).map(|q| store.list(&q))),
        Method::CancelTask => reply(
            &id,
            params::req_string(&params, "id").and_then(|t| store.cancel(t)),
        ),
        Method::SubscribeToTask => {
            match params::req_string(&params, "id").and_then(|t| store.subscribe(t)) {
                Ok((snapshot, events)) => stream::relay(id, json!({ "task": snapshot }), events),
                Err(e) => reply(&id, Err(e)),
            }
        }
        Method::CreateTaskPushNotificationConfig
        | Method::GetTaskPushNotificationConfig
        | Method::ListTaskPushNotificationConfigs
        | Method::DeleteTaskPushNotificationConfig => {
            reply(&id, Err(RpcError::push_not_supported()))
        }
        Method::GetExtendedAgentCard => reply(&id, Ok(super::card::extended(&engine.card))),
    }
}

/// A JSON-RPC response (HTTP 200, `application/json`).
fn reply(id: &Value, r: Result<Value, RpcError>) -> Response<BoxBody> {
    let body = match r {
        Ok(v) => result_body(id, v),
        Err(e) => error_body(id, &e),
    };
    json_response(StatusCode::OK, body)
}

/// `A2A-Version`: missing or empty means 0.3; any `1[.x[.y…]]` (optionally `v1…`) is accepted.
/// With repeated headers the first wins (as the SDK).
pub(crate) fn check_version(headers: &HeaderMap) -> Result<(), RpcError> {
    let shown = match headers.get("a2a-version").map(|v| v.to_str()) {
        None => "0.3",
        Some(Ok(v)) if v.trim().is_empty() => "0.3",
        Some(Ok(v)) if version_accepted(v) => return Ok(()),
        Some(Ok(v))
            if v.len() <= MAX_ECHOED_VERSION && v.bytes().all(|b| (0x20..0x7f).contains(&b)) =>
        {
            v
        }
        Some(_) => "invalid",
    };
    Err(RpcError::version_not_supported(shown))
}

fn version_accepted(v: &str) -> bool {
    let v = v.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let mut parts = v.split('.');
    let major = parts.next().unwrap_or("");
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    numeric(major) && major.parse::<u64>() == Ok(1) && parts.all(numeric)
}

/// Keeps the `n` most recent history messages of a rendered task.
fn limit_history(mut task: Value, n: Option<usize>) -> Value {
    if let (Some(n), Some(obj)) = (n, task.as_object_mut()) {
        if n == 0 {
            obj.remove("history");
        } else if let Some(Value::Array(h)) = obj.get_mut("history") {
            let extra = h.len().saturating_sub(n);
            h.drain(..extra);
        }
    }
    task
}

/// What a user message led to.
enum Outcome {
    /// A turn is running; the agent was spawned.
    Started {
        task_id: String,
        snapshot: Value,
        events: Events,
        done: watch::Receiver<()>,
    },
    /// A FAILED task: the context stayed busy.
    Refused(Value),
}

/// Starts a turn, waiting for a busy task (its turn to end) or a busy context (a little).
/// The agent is spawned right after the turn is created, with no await between, so a caller
/// that goes away never leaves a turn without its agent.
async fn begin(store: &Arc<Store>, m: NewMessage<'_>, plan: Plan) -> Result<Outcome, RpcError> {
    let mut refuse_if_busy = false;
    loop {
        match store.begin_turn(m, refuse_if_busy)? {
            Begin::Started(s) => {
                let done = s.turn.stop.clone();
                let task_id = s.turn.task_id.clone();
                tokio::spawn(agent::run(Arc::clone(store), s.turn, plan));
                return Ok(Outcome::Started {
                    task_id,
                    snapshot: s.snapshot,
                    events: s.events,
                    done,
                });
            }
            Begin::Refused(task) => return Ok(Outcome::Refused(task)),
            // The task's turn ends (the run is dropped): try again.
            Begin::TaskBusy(mut rx) => {
                let _ = rx.changed().await;
            }
            Begin::ContextBusy(mut rx) => {
                let _ = tokio::time::timeout(CONTEXT_WAIT, rx.changed()).await;
                refuse_if_busy = true;
            }
        }
    }
}

/// SendMessage and SendStreamingMessage.
async fn send_message(
    store: &Arc<Store>,
    id: Value,
    params: &Map<String, Value>,
    streaming: bool,
) -> Response<BoxBody> {
    let p = match params::send_params(params) {
        Ok(p) => p,
        Err(e) => return reply(&id, Err(e)),
    };
    let plan = agent::plan(&agent::message_text(&p.message));
    let m = NewMessage {
        message: &p.message,
        task_id: p.task_id.as_deref(),
        context_id: p.context_id.as_deref(),
    };
    if plan.message_only {
        let context_id = match store.reply_context(m) {
            Ok(c) => c,
            Err(e) => return reply(&id, Err(e)),
        };
        let message = task::agent_message(&context_id, p.task_id.as_deref(), &plan.echo);
        let result = json!({ "message": message });
        return if streaming {
            stream::single(&id, result)
        } else {
            reply(&id, Ok(result))
        };
    }
    let outcome = match begin(store, m, plan).await {
        Ok(o) => o,
        Err(e) => return reply(&id, Err(e)),
    };
    match outcome {
        Outcome::Refused(task) if streaming => stream::single(&id, json!({ "task": task })),
        Outcome::Refused(task) => reply(&id, Ok(json!({ "task": limit_history(task, p.history) }))),
        Outcome::Started {
            snapshot, events, ..
        } if streaming => stream::relay(id, json!({ "task": snapshot }), events),
        Outcome::Started {
            task_id,
            snapshot,
            events,
            mut done,
        } => {
            drop(events);
            if p.return_immediately {
                return reply(
                    &id,
                    Ok(json!({ "task": limit_history(snapshot, p.history) })),
                );
            }
            // Resolves when the turn is over (the run is dropped); nothing is ever sent.
            let _ = done.changed().await;
            let r = store
                .get(&task_id, p.history)
                .map(|t| json!({ "task": t }))
                .ok_or_else(|| RpcError::internal(reason::ENGINE_TASK_EVICTED));
            reply(&id, r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_table() {
        let cases: &[(Option<&str>, Option<&str>)] = &[
            (Some("1.0"), None),
            (Some("1"), None),
            (Some("1.1"), None),
            (Some("1.0.7"), None),
            (Some("v1.0"), None),
            (Some("01.0"), None),
            (Some(" 1.0 "), None),
            (None, Some("'0.3'")),
            (Some(""), Some("'0.3'")),
            (Some("0.3"), Some("'0.3'")),
            (Some("2.0"), Some("'2.0'")),
            (Some("abc"), Some("'abc'")),
            (Some("1.0, 0.3"), Some("'1.0, 0.3'")),
            (Some("1."), Some("'1.'")),
            (Some("11.0"), Some("'11.0'")),
            (Some("99999999999999999999999"), Some("'invalid'")),
        ];
        for (value, err) in cases {
            let mut h = HeaderMap::new();
            if let Some(v) = value {
                h.insert("a2a-version", v.parse().unwrap());
            }
            match (check_version(&h), err) {
                (Ok(()), None) => {}
                (Err(e), Some(shown)) => {
                    assert_eq!(e.code, -32009);
                    assert!(e.message.contains(shown), "{value:?}: {}", e.message);
                }
                (got, want) => panic!("{value:?}: got {got:?}, want {want:?}"),
            }
        }
        let mut h = HeaderMap::new();
        h.insert(
            "a2a-version",
            http::HeaderValue::from_bytes(b"\xff1.0").unwrap(),
        );
        assert!(check_version(&h).unwrap_err().message.contains("'invalid'"));
        // the first of repeated headers wins
        let mut h = HeaderMap::new();
        h.append("a2a-version", "1.0".parse().unwrap());
        h.append("a2a-version", "0.3".parse().unwrap());
        assert!(check_version(&h).is_ok());
    }

    #[test]
    fn history_limit() {
        let t = json!({"id":"t","history":[1,2,3]});
        assert_eq!(limit_history(t.clone(), None)["history"], json!([1, 2, 3]));
        assert_eq!(limit_history(t.clone(), Some(2))["history"], json!([2, 3]));
        assert_eq!(
            limit_history(t.clone(), Some(9))["history"],
            json!([1, 2, 3])
        );
        assert!(limit_history(t, Some(0)).get("history").is_none());
    }
}
