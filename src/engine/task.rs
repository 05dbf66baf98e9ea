//! One task as the engine keeps it, its states, and its ProtoJSON shapes (Task, TaskStatus,
//! Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent). Default-valued fields are left out,
//! as proto3 does.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use super::ids;
use crate::time;

/// Messages kept per task; the oldest go first.
pub(crate) const MAX_HISTORY: usize = 1_000;
/// Artifacts kept per task; the oldest go first.
pub(crate) const MAX_ARTIFACTS: usize = 100;

/// `TaskState` of A2A 1.0 (proto enum `lf.a2a.v1.TaskState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TaskState {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
    Rejected,
    AuthRequired,
}

impl TaskState {
    const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// The proto enum number.
    fn number(self) -> i64 {
        match self {
            TaskState::Submitted => 1,
            TaskState::Working => 2,
            TaskState::Completed => 3,
            TaskState::Failed => 4,
            TaskState::Canceled => 5,
            TaskState::InputRequired => 6,
            TaskState::Rejected => 7,
            TaskState::AuthRequired => 8,
        }
    }

    /// Reads a ProtoJSON enum value (name or number). `Ok(None)` is UNSPECIFIED (or null).
    pub(crate) fn from_json(v: &Value) -> Result<Option<TaskState>, ()> {
        match v {
            Value::Null => Ok(None),
            Value::String(s) if s == "TASK_STATE_UNSPECIFIED" => Ok(None),
            Value::String(s) => Self::ALL
                .into_iter()
                .find(|t| t.as_str() == s)
                .map(Some)
                .ok_or(()),
            Value::Number(n) => match n.as_i64() {
                Some(0) => Ok(None),
                Some(k) => Self::ALL
                    .into_iter()
                    .find(|t| t.number() == k)
                    .map(Some)
                    .ok_or(()),
                None => Err(()),
            },
            _ => Err(()),
        }
    }

    /// SUBMITTED or WORKING: a turn is in progress.
    pub(crate) fn is_running(self) -> bool {
        matches!(self, TaskState::Submitted | TaskState::Working)
    }

    /// COMPLETED, FAILED, CANCELED or REJECTED: the task takes no more messages.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }
}

/// Whether a rendered task carries its artifacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Artifacts {
    /// Left out (ListTasks without `includeArtifacts`).
    Omit,
    /// Present when there is at least one (GetTask, SendMessage, stream snapshots).
    IfAny,
    /// Always present, `[]` when there are none (ListTasks with `includeArtifacts`).
    Always,
}

/// A task and its state. The running turn (if any) is kept by the store beside it.
#[derive(Debug)]
pub(crate) struct TaskRecord {
    pub id: String,
    pub context_id: String,
    pub state: TaskState,
    pub status_message: Option<Value>,
    /// Status timestamp, microseconds since the epoch; also the ListTasks sort key.
    pub timestamp: u64,
    pub history: VecDeque<Value>,
    pub artifacts: VecDeque<Value>,
}

impl TaskRecord {
    pub(crate) fn new(id: String, context_id: String, timestamp: u64) -> Self {
        Self {
            id,
            context_id,
            state: TaskState::Submitted,
            status_message: None,
            timestamp,
            history: VecDeque::new(),
            artifacts: VecDeque::new(),
        }
    }

    pub(crate) fn push_history(&mut self, message: Value) {
        if self.history.len() >= MAX_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(message);
    }

    /// Adds an artifact chunk: a new artifact, or (`append`) its parts added to the artifact
    /// with the same id, as the SDK task manager does.
    pub(crate) fn add_artifact(&mut self, artifact: &Value, append: bool) {
        let id = artifact.get("artifactId");
        if append {
            if let Some(existing) = self
                .artifacts
                .iter_mut()
                .find(|a| a.get("artifactId") == id)
            {
                let new_parts = artifact
                    .get("parts")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(parts) = existing.get_mut("parts").and_then(Value::as_array_mut) {
                    parts.extend(new_parts);
                }
                return;
            }
        }
        self.artifacts.retain(|a| a.get("artifactId") != id);
        if self.artifacts.len() >= MAX_ARTIFACTS {
            self.artifacts.pop_front();
        }
        self.artifacts.push_back(artifact.clone());
    }

    /// `TaskStatus`.
    pub(crate) fn status_json(&self) -> Value {
        let mut status = Map::new();
        status.insert("state".into(), json!(self.state.as_str()));
        if let Some(m) = &self.status_message {
            status.insert("message".into(), m.clone());
        }
        status.insert(
            "timestamp".into(),
            json!(time::format_rfc3339(self.timestamp)),
        );
        Value::Object(status)
    }

    /// `Task`, with at most `history` most recent messages (all when `None`).
    pub(crate) fn to_json(&self, history: Option<usize>, artifacts: Artifacts) -> Value {
        let mut task = Map::new();
        task.insert("id".into(), json!(self.id));
        task.insert("contextId".into(), json!(self.context_id));
        task.insert("status".into(), self.status_json());
        let keep = history.unwrap_or(usize::MAX).min(self.history.len());
        if keep > 0 {
            let skip = self.history.len() - keep;
            let h: Vec<Value> = self.history.iter().skip(skip).cloned().collect();
            task.insert("history".into(), Value::Array(h));
        }
        let include = match artifacts {
            Artifacts::Omit => false,
            Artifacts::IfAny => !self.artifacts.is_empty(),
            Artifacts::Always => true,
        };
        if include {
            let a: Vec<Value> = self.artifacts.iter().cloned().collect();
            task.insert("artifacts".into(), Value::Array(a));
        }
        Value::Object(task)
    }

    /// `StreamResponse` with a `TaskStatusUpdateEvent` for the current status.
    pub(crate) fn status_update(&self) -> Value {
        json!({"statusUpdate": {
            "taskId": self.id,
            "contextId": self.context_id,
            "status": self.status_json(),
        }})
    }

    /// `StreamResponse` with a `TaskArtifactUpdateEvent`.
    pub(crate) fn artifact_update(
        &self,
        artifact: &Value,
        append: bool,
        last_chunk: bool,
    ) -> Value {
        let mut ev = Map::new();
        ev.insert("taskId".into(), json!(self.id));
        ev.insert("contextId".into(), json!(self.context_id));
        ev.insert("artifact".into(), artifact.clone());
        if append {
            ev.insert("append".into(), json!(true));
        }
        if last_chunk {
            ev.insert("lastChunk".into(), json!(true));
        }
        json!({ "artifactUpdate": ev })
    }
}

/// An agent `Message` with one text part. `task_id` is left out for a bare message reply.
pub(crate) fn agent_message(context_id: &str, task_id: Option<&str>, text: &str) -> Value {
    let mut m = Map::new();
    m.insert("messageId".into(), json!(ids::uuid_v4()));
    m.insert("contextId".into(), json!(context_id));
    if let Some(t) = task_id {
        m.insert("taskId".into(), json!(t));
    }
    m.insert("role".into(), json!("ROLE_AGENT"));
    m.insert("parts".into(), json!([{ "text": text }]));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_numbers_and_classes() {
        for s in TaskState::ALL {
            assert_eq!(TaskState::from_json(&json!(s.as_str())), Ok(Some(s)));
            assert_eq!(TaskState::from_json(&json!(s.number())), Ok(Some(s)));
            // exactly one class each
            let classes = [
                s.is_running(),
                s.is_terminal(),
                matches!(s, TaskState::InputRequired | TaskState::AuthRequired),
            ];
            assert_eq!(classes.iter().filter(|c| **c).count(), 1, "{s:?}");
        }
        assert_eq!(
            TaskState::from_json(&json!("TASK_STATE_UNSPECIFIED")),
            Ok(None)
        );
        assert_eq!(TaskState::from_json(&json!(0)), Ok(None));
        assert_eq!(TaskState::from_json(&Value::Null), Ok(None));
        for bad in [
            json!("working"),
            json!(9),
            json!(1.5),
            json!(true),
            json!([]),
        ] {
            assert_eq!(TaskState::from_json(&bad), Err(()), "{bad}");
        }
    }

    #[test]
    fn renders_proto3_shapes() {
        let mut t = TaskRecord::new("t1".into(), "c1".into(), 0);
        let v = t.to_json(None, Artifacts::IfAny);
        assert_eq!(
            v,
            json!({"id":"t1","contextId":"c1",
                   "status":{"state":"TASK_STATE_SUBMITTED","timestamp":"1970-01-01T00:00:00.000000Z"}})
        );
        assert_eq!(t.to_json(None, Artifacts::Always)["artifacts"], json!([]));
        for i in 0..3 {
            t.push_history(json!({ "messageId": format!("m{i}") }));
        }
        let v = t.to_json(Some(2), Artifacts::Omit);
        assert_eq!(v["history"], json!([{"messageId":"m1"},{"messageId":"m2"}]));
        assert!(t.to_json(Some(0), Artifacts::Omit).get("history").is_none());

        let a = json!({"artifactId":"a","parts":[{"text":"x"}]});
        t.add_artifact(&a, false);
        t.add_artifact(&json!({"artifactId":"a","parts":[{"text":"y"}]}), true);
        let v = t.to_json(None, Artifacts::IfAny);
        assert_eq!(
            v["artifacts"],
            json!([{"artifactId":"a","parts":[{"text":"x"},{"text":"y"}]}])
        );
        assert!(t.to_json(None, Artifacts::Omit).get("artifacts").is_none());

        let ev = t.artifact_update(&a, false, true);
        assert_eq!(ev["artifactUpdate"].get("append"), None);
        assert_eq!(ev["artifactUpdate"]["lastChunk"], true);

        let m = agent_message("c1", None, "hi");
        assert_eq!(m["role"], "ROLE_AGENT");
        assert!(m.get("taskId").is_none());
        assert_eq!(m["parts"], json!([{"text":"hi"}]));
    }

    #[test]
    fn history_and_artifacts_are_bounded() {
        let mut t = TaskRecord::new("t".into(), "c".into(), 0);
        for i in 0..MAX_HISTORY + 5 {
            t.push_history(json!(i));
        }
        assert_eq!(t.history.len(), MAX_HISTORY);
        assert_eq!(t.history.front(), Some(&json!(5)));
        for i in 0..MAX_ARTIFACTS + 3 {
            t.add_artifact(&json!({"artifactId": i.to_string(), "parts": []}), false);
        }
        assert_eq!(t.artifacts.len(), MAX_ARTIFACTS);
    }
}
