//! What a JSON-RPC result or an SSE event's `result` says about tasks and contexts.
//!
//! Only single-object shapes are read: a `StreamResponse` (`task`, `message`, `statusUpdate`,
//! `artifactUpdate`), a `SendMessageResponse` (`task` or `message`, the same keys) and a bare
//! `Task` (GetTask, CancelTask); of a push config or a list of them, the task they name. A
//! `ListTasks` result (`tasks: [...]`) is deliberately ignored:
//! an agent behind the proxy sees one owner for everybody, so its list holds other callers'
//! tasks, and learning from it would hand them to whoever asked. Since any shape is read,
//! an answer is first held to its method's [`super::Shape`] (a task list in answer to a
//! forwarded method, or a Task beside a push config's `taskId`, is refused before it is read).

use serde_json::Value;

/// Ids longer than this from an agent are never recorded: an answer naming a task (or a push
/// config's task) by one is refused (fail closed); a longer context id is no one's. Client
/// ids are capped at 128 by the validator; agents use UUIDs.
pub(super) const MAX_OBSERVED_ID_LEN: usize = 256;
/// Longer state strings are not kept (the proto names are at most 25 bytes).
const MAX_STATE_LEN: usize = 64;

/// The keys of the entities a result may hold, one at most.
pub(super) const ENTITIES: [&str; 4] = ["task", "statusUpdate", "artifactUpdate", "message"];

/// A result that names a task in a shape the registry cannot check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed;

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
            // As the answer said it: a context inferred from the task is not the answer's.
            context: news.context.as_deref().filter(|_| !news.inferred_context),
            state: news.state.as_deref(),
            timestamp: news.ts,
            referenced_task: news.referenced.as_deref(),
        }
    }

    /// Reads one result. `Ok(None)` for shapes that teach nothing (errors, task lists,
    /// junk); `Err` for a result that names a task without saying which (a `task` or an
    /// update that is not an object or has no usable id), holds two of `task`, `message`,
    /// `statusUpdate` and `artifactUpdate` (a oneof in A2A) or lists push configs of two
    /// tasks: such an answer cannot be checked, so it is not relayed.
    pub fn read(result: &'a Value) -> Result<Option<Fact<'a>>, Malformed> {
        let Some(obj) = result.as_object() else {
            return Ok(None);
        };
        // Tolerate a whole JSON-RPC response being passed instead of its `result`.
        if obj.contains_key("jsonrpc") {
            return obj.get("result").map_or(Ok(None), Fact::read);
        }
        let mut entities = ENTITIES.iter().filter_map(|k| Some((*k, obj.get(*k)?)));
        if let Some((key, entity)) = entities.next() {
            if entities.next().is_some() {
                return Err(Malformed);
            }
            return match key {
                "task" => Fact::task(entity),
                "statusUpdate" => Fact::update(entity, true),
                "artifactUpdate" => Fact::update(entity, false),
                _ => Ok(Fact::message(entity)),
            };
        }
        if obj.contains_key("messageId") {
            return Ok(Fact::message(result));
        }
        // A push config: its `id` is the config's; it names its task in `taskId`.
        if obj.contains_key("taskId") {
            return Ok(config_task(obj.get("taskId"))?.map(|t| Fact {
                referenced_task: Some(t),
                ..Fact::default()
            }));
        }
        // A list of push configs (ListTaskPushNotificationConfigs): the one task they name.
        // An agent may answer with other tasks' configs (one that ignores the request's
        // `taskId`): entries naming two tasks cannot be one caller's list.
        if let Some(Value::Array(configs)) = obj.get("configs") {
            // (a config naming its task by an id no one could record: refused, not skipped)
            let mut named = configs
                .iter()
                .filter_map(|c| config_task(c.get("taskId")).transpose());
            let Some(first) = named.next().transpose()? else {
                return Ok(None);
            };
            for t in named {
                if t? != first {
                    return Err(Malformed);
                }
            }
            return Ok(Some(Fact {
                referenced_task: Some(first),
                ..Fact::default()
            }));
        }
        // A bare Task (GetTask, CancelTask), whatever else it lacks.
        if obj.contains_key("id") && !obj.contains_key("tasks") {
            return Fact::task(result);
        }
        Ok(None)
    }

    /// A Task: its `id` is required (a usable one: see [`task_id`]); its `contextId` may be
    /// missing (then only a task the registry knows is relayed: `State::learn_checked`).
    fn task(task: &'a Value) -> Result<Option<Fact<'a>>, Malformed> {
        let t = task_id(task.get("id"))?;
        let (state, timestamp) = status(task.get("status"));
        Ok(Some(Fact {
            task: Some(t),
            context: id(task.get("contextId")),
            state,
            timestamp,
            referenced_task: None,
        }))
    }

    fn update(update: &'a Value, has_status: bool) -> Result<Option<Fact<'a>>, Malformed> {
        let t = task_id(update.get("taskId"))?;
        let (state, timestamp) = if has_status {
            status(update.get("status"))
        } else {
            (None, None)
        };
        Ok(Some(Fact {
            task: Some(t),
            context: id(update.get("contextId")),
            state,
            timestamp,
            referenced_task: None,
        }))
    }

    fn message(message: &'a Value) -> Option<Fact<'a>> {
        let message = message.as_object()?;
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

/// A task's id where one is required: `Err` unless a non-empty string of at most
/// [`MAX_OBSERVED_ID_LEN`] bytes. A longer one could never be recorded (nor named by a
/// request, whose ids are shorter): read as none, it dropped the whole fact, the answer's
/// `contextId` with it, and an answer naming another caller's context was relayed unchecked.
fn task_id(v: Option<&Value>) -> Result<&str, Malformed> {
    match v.and_then(Value::as_str) {
        Some(t) if !t.is_empty() && t.len() <= MAX_OBSERVED_ID_LEN => Ok(t),
        _ => Err(Malformed),
    }
}

/// A push config's task: `None` unless a non-empty string; `Err` when longer than
/// [`MAX_OBSERVED_ID_LEN`] (a task no one could own: the answer is refused, not relayed with
/// the config unchecked).
fn config_task(v: Option<&Value>) -> Result<Option<&str>, Malformed> {
    match v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(t) if t.len() > MAX_OBSERVED_ID_LEN => Err(Malformed),
        t => Ok(t),
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
