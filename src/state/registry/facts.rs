//! What a JSON-RPC result or an SSE event's `result` says about tasks and contexts.
//!
//! Only single-object shapes are read: a `StreamResponse` (`task`, `message`, `statusUpdate`,
//! `artifactUpdate`), a `SendMessageResponse` (`task` or `message`, the same keys) and a bare
//! `Task` (GetTask, CancelTask). A `ListTasks` result (`tasks: [...]`) is deliberately ignored:
//! an agent behind the proxy sees one owner for everybody, so its list holds other callers'
//! tasks, and learning from it would hand them to whoever asked.

use serde_json::Value;

/// Ids longer than this from an agent are not recorded (the owner then gets NotFound: fail
/// closed). Client ids are capped at 128 by the validator; agents use UUIDs.
pub(super) const MAX_OBSERVED_ID_LEN: usize = 256;
/// Longer state strings are not kept (the proto names are at most 25 bytes).
const MAX_STATE_LEN: usize = 64;

/// One observation. `task` is set only for shapes that prove a task exists (Task, status and
/// artifact updates); a Message's `taskId` only refers to one and never creates it.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
pub(super) struct Fact<'a> {
    pub task: Option<&'a str>,
    pub context: Option<&'a str>,
    /// `status.state`, when present.
    pub state: Option<&'a str>,
    /// `status.timestamp` in microseconds, when present and valid RFC 3339.
    pub timestamp: Option<u64>,
    /// A Message's `taskId`: touched when known, never created.
    pub referenced_task: Option<&'a str>,
}

impl<'a> Fact<'a> {
    /// What the shared store accepted ([`crate::state::shared::News`]).
    pub fn from_news(news: &'a crate::state::shared::News) -> Fact<'a> {
        Fact {
            task: news.task.as_deref(),
            context: news.context.as_deref(),
            state: news.state.as_deref(),
            timestamp: news.ts,
            referenced_task: None,
        }
    }

    /// Reads one result. Returns `None` for shapes that teach nothing (errors, lists, junk).
    pub fn read(result: &'a Value) -> Option<Fact<'a>> {
        let obj = result.as_object()?;
        // Tolerate a whole JSON-RPC response being passed instead of its `result`.
        if obj.contains_key("jsonrpc") {
            return obj.get("result").and_then(Fact::read);
        }
        if let Some(task) = obj.get("task") {
            return Fact::task(task);
        }
        if let Some(update) = obj.get("statusUpdate") {
            return Fact::update(update, true);
        }
        if let Some(update) = obj.get("artifactUpdate") {
            return Fact::update(update, false);
        }
        if let Some(message) = obj.get("message") {
            return Fact::message(message);
        }
        if obj.contains_key("messageId") {
            return Fact::message(result);
        }
        if obj.contains_key("id") && !obj.contains_key("tasks") {
            return Fact::task(result);
        }
        None
    }

    fn task(task: &'a Value) -> Option<Fact<'a>> {
        let (state, timestamp) = status(task.get("status"));
        Some(Fact {
            task: Some(id(task.get("id"))?),
            context: Some(id(task.get("contextId"))?),
            state,
            timestamp,
            referenced_task: None,
        })
    }

    fn update(update: &'a Value, has_status: bool) -> Option<Fact<'a>> {
        let (state, timestamp) = if has_status {
            status(update.get("status"))
        } else {
            (None, None)
        };
        Some(Fact {
            task: Some(id(update.get("taskId"))?),
            context: Some(id(update.get("contextId"))?),
            state,
            timestamp,
            referenced_task: None,
        })
    }

    fn message(message: &'a Value) -> Option<Fact<'a>> {
        let context = id(message.get("contextId"));
        let referenced_task = id(message.get("taskId"));
        if context.is_none() && referenced_task.is_none() {
            return None;
        }
        Some(Fact {
            context,
            referenced_task,
            ..Fact::default()
        })
    }
}

/// A usable id: a non-empty string of bounded length.
fn id(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= MAX_OBSERVED_ID_LEN)
}

fn status(v: Option<&Value>) -> (Option<&str>, Option<u64>) {
    let Some(status) = v else {
        return (None, None);
    };
    let state = status
        .get("state")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= MAX_STATE_LEN);
    let timestamp = status
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(crate::time::parse_rfc3339);
    (state, timestamp)
}
