//! The shape of an agent's answer to each forwarded method, held before anything is read of
//! it: a result is relayed only if it is its method's A2A 1.0 result (A2A §3, the proto's
//! `REQUIRED` members), not merely something that names no other caller's task.
//!
//! Two checks, both needed:
//! - **What it names.** The keys by which a result names tasks and contexts ([`NAMING`]) are
//!   the ones its shape allows: a task list in answer to a forwarded method, a Task beside a
//!   push config's `taskId`, or two of a `StreamResponse`'s members would be read as
//!   something else ([`super::facts`] reads any shape) or not at all.
//! - **What it is.** The members the proto marks `REQUIRED` are there with their JSON types,
//!   down to what a caller acts on: a Task's `id` and `status.state` (one of the eight task
//!   states), a Message's `messageId`, `role` and `parts`, an update's `taskId` and
//!   `contextId`, an artifact's `artifactId` and `parts`, a push config's `url`; the optional
//!   ids, when present, are strings; a status timestamp is RFC 3339; a Task's `history` and
//!   `artifacts` hold Messages and Artifacts. An answer naming nothing (`{}`, `{"ok":true}`,
//!   `null`) is no method's result but DeleteTaskPushNotificationConfig's.
//!
//! Deliberately not checked: the content of each Part (the agent's own business; the caller's
//! parts were checked on the way in), and members the proto does not require. Unknown
//! members are relayed (an agent of a later 1.x may add some). Enums are read as their
//! names, as every ProtoJSON writer writes them; a number is refused.

use serde_json::Value;

use super::facts::ENTITIES;
use crate::validate::request::TASK_STATES;

/// The keys of a result by which it names tasks and contexts (and `jsonrpc`: a response
/// nested in a result).
const NAMING: [&str; 11] = [
    "task",
    "statusUpdate",
    "artifactUpdate",
    "message",
    "id",
    "contextId",
    "taskId",
    "messageId",
    "tasks",
    "configs",
    "jsonrpc",
];

/// A Message's roles (A2A 1.0 `Role`, without `ROLE_UNSPECIFIED`: the member is required).
pub const ROLES: [&str; 2] = ["ROLE_USER", "ROLE_AGENT"];

/// The shape of a forwarded method's result in A2A 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// SendMessage: a `SendMessageResponse`, one of `task` and `message`.
    Send,
    /// A stream's event (SendStreamingMessage, SubscribeToTask): a `StreamResponse`, one of
    /// `task`, `message`, `statusUpdate` and `artifactUpdate`.
    Event,
    /// GetTask, CancelTask: a bare `Task`.
    Task,
    /// A `TaskPushNotificationConfig` (its own `id`, its task's `taskId`, its `url`).
    Config,
    /// ListTaskPushNotificationConfigs: `configs` (absent when there are none).
    Configs,
    /// DeleteTaskPushNotificationConfig: `null` or an object naming nothing (`{}`).
    Empty,
}

impl Shape {
    /// The shape of `method`'s answer; `None` for the methods whose answers are not a
    /// registry's business (ListTasks is never forwarded, the extended card names no task).
    pub fn of(method: crate::a2a::method::Method) -> Option<Shape> {
        use crate::a2a::method::Method as M;
        Some(match method {
            M::SendMessage => Shape::Send,
            M::SendStreamingMessage | M::SubscribeToTask => Shape::Event,
            M::GetTask | M::CancelTask => Shape::Task,
            M::CreateTaskPushNotificationConfig | M::GetTaskPushNotificationConfig => Shape::Config,
            M::ListTaskPushNotificationConfigs => Shape::Configs,
            M::DeleteTaskPushNotificationConfig => Shape::Empty,
            M::ListTasks | M::GetExtendedAgentCard => return None,
        })
    }

    /// Whether `result` is this shape's result: it names only what the shape may name, and
    /// holds what the shape requires (the module's two checks).
    pub fn holds(self, result: &Value) -> bool {
        self.names_as_it_may(result) && self.conforms(result)
    }

    /// The naming keys `result` holds ([`NAMING`]) are the ones the shape allows (what is
    /// inside them is [`Shape::conforms`]'s to check, and what they name the registry's).
    fn names_as_it_may(self, result: &Value) -> bool {
        let Some(obj) = result.as_object() else {
            return true;
        };
        let mut named = NAMING.iter().filter(|k| obj.contains_key(**k)).copied();
        let (first, second) = (named.next(), named.next());
        if first.is_none() {
            return true;
        }
        match self {
            Shape::Send => matches!(first, Some("task" | "message")) && second.is_none(),
            Shape::Event => {
                matches!(
                    first,
                    Some("task" | "statusUpdate" | "artifactUpdate" | "message")
                ) && second.is_none()
            }
            // (`NAMING` lists `id` before `contextId`)
            Shape::Task => {
                first == Some("id")
                    && matches!(second, None | Some("contextId"))
                    && named.next().is_none()
            }
            Shape::Config => {
                [first, second]
                    .into_iter()
                    .flatten()
                    .all(|k| k == "id" || k == "taskId")
                    && named.next().is_none()
            }
            Shape::Configs => first == Some("configs") && second.is_none(),
            Shape::Empty => false,
        }
    }

    /// `result` holds the members the shape's A2A 1.0 message requires, with their types.
    fn conforms(self, result: &Value) -> bool {
        match self {
            // (which of the four it may be is [`Shape::names_as_it_may`]'s to check)
            Shape::Send | Shape::Event => {
                let Some(obj) = result.as_object() else {
                    return false;
                };
                let mut present = ENTITIES.iter().filter_map(|k| Some((*k, obj.get(*k)?)));
                match (present.next(), present.next()) {
                    (Some(("task", entity)), None) => task(entity),
                    (Some(("message", entity)), None) => message(entity),
                    (Some(("statusUpdate", entity)), None) => status_update(entity),
                    (Some((_, entity)), None) => artifact_update(entity),
                    _ => false,
                }
            }
            Shape::Task => task(result),
            Shape::Config => config(result),
            Shape::Configs => {
                result.is_object()
                    && optional_list(result.get("configs"), config)
                    && optional_string(result.get("nextPageToken"))
            }
            Shape::Empty => result.is_null() || result.is_object(),
        }
    }
}

/// A `Task`: its `id` and `status`; `contextId` a string when present (the proto does not
/// require it); `history` Messages and `artifacts` Artifacts when present.
fn task(v: &Value) -> bool {
    v.is_object()
        && id(v.get("id"))
        && optional_string(v.get("contextId"))
        && status(v.get("status"))
        && optional_list(v.get("history"), message)
        && optional_list(v.get("artifacts"), artifact)
}

/// A `TaskStatus`: one of the task states; its `message` a Message, its `timestamp` RFC 3339,
/// when present.
fn status(v: Option<&Value>) -> bool {
    let Some(v) = v.filter(|v| v.is_object()) else {
        return false;
    };
    v.get("state")
        .and_then(Value::as_str)
        .is_some_and(|s| TASK_STATES.contains(&s))
        && v.get("message").map_or(true, message)
        && v.get("timestamp").map_or(true, |t| {
            t.as_str().and_then(crate::time::parse_rfc3339).is_some()
        })
}

/// A `Message`: `messageId`, `role` and `parts`; its ids strings when present.
fn message(v: &Value) -> bool {
    v.is_object()
        && id(v.get("messageId"))
        && v.get("role")
            .and_then(Value::as_str)
            .is_some_and(|r| ROLES.contains(&r))
        && v.get("parts").is_some_and(Value::is_array)
        && optional_string(v.get("contextId"))
        && optional_string(v.get("taskId"))
}

/// A `TaskStatusUpdateEvent`: `taskId`, `contextId`, `status`.
fn status_update(v: &Value) -> bool {
    v.is_object() && id(v.get("taskId")) && id(v.get("contextId")) && status(v.get("status"))
}

/// A `TaskArtifactUpdateEvent`: `taskId`, `contextId`, `artifact`.
fn artifact_update(v: &Value) -> bool {
    v.is_object()
        && id(v.get("taskId"))
        && id(v.get("contextId"))
        && v.get("artifact").is_some_and(artifact)
}

/// An `Artifact`: `artifactId` and `parts`.
fn artifact(v: &Value) -> bool {
    v.is_object() && id(v.get("artifactId")) && v.get("parts").is_some_and(Value::is_array)
}

/// A `TaskPushNotificationConfig`: its `url`; `id` and `taskId` strings when present.
fn config(v: &Value) -> bool {
    v.is_object()
        && id(v.get("url"))
        && optional_string(v.get("id"))
        && optional_string(v.get("taskId"))
}

/// A required identifier: a non-empty string.
fn id(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

fn optional_string(v: Option<&Value>) -> bool {
    v.map_or(true, Value::is_string)
}

/// Absent, or a list of what `each` accepts.
fn optional_list(v: Option<&Value>, each: fn(&Value) -> bool) -> bool {
    match v {
        None => true,
        Some(Value::Array(items)) => items.iter().all(each),
        Some(_) => false,
    }
}
