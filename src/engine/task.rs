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
/// What one task may hold (messages, artifacts and its status message, by [`held_bytes`]):
/// beyond it the oldest messages, then the oldest artifacts go first. The newest message and
/// the newest artifact are always kept, so one turn's own can go past it.
pub(crate) const MAX_TASK_BYTES: usize = 64 << 20;

/// What a JSON value holds in memory, about: its strings' and keys' bytes and a `Value`'s
/// size per node. Linear in the value (parsed values nest at most 128 deep).
pub(crate) fn held_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => NODE + s.len(),
        Value::Array(a) => NODE + a.iter().map(held_bytes).sum::<usize>(),
        Value::Object(m) => held_object_bytes(m),
        _ => NODE,
    }
}

/// [`held_bytes`] of an object.
pub(crate) fn held_object_bytes(m: &Map<String, Value>) -> usize {
    NODE + m
        .iter()
        .map(|(k, v)| NODE + k.len() + held_bytes(v))
        .sum::<usize>()
}

const NODE: usize = std::mem::size_of::<Value>();

/// A message or artifact a task keeps, with what it holds.
#[derive(Debug)]
pub(crate) struct Kept {
    pub value: Value,
    bytes: usize,
}

impl Kept {
    fn new(value: Value) -> Self {
        Self {
            bytes: held_bytes(&value),
            value,
        }
    }
}

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
    status_message: Option<Kept>,
    /// Status timestamp, microseconds since the epoch; also the ListTasks sort key.
    pub timestamp: u64,
    history: VecDeque<Kept>,
    artifacts: VecDeque<Kept>,
    /// What the three above hold, by [`held_bytes`].
    held: usize,
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
            held: 0,
        }
    }

    /// What the task holds (messages, artifacts, status message), by [`held_bytes`].
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    pub(crate) fn set_status_message(&mut self, message: Option<Value>) {
        if let Some(old) = self.status_message.take() {
            self.held -= old.bytes;
        }
        self.status_message = message.map(Kept::new);
        self.held += self.status_message.as_ref().map_or(0, |m| m.bytes);
    }

    pub(crate) fn push_history(&mut self, message: Value) {
        if self.history.len() >= MAX_HISTORY {
            self.pop_history();
        }
        let kept = Kept::new(message);
        self.held += kept.bytes;
        self.history.push_back(kept);
        self.trim();
    }

    fn pop_history(&mut self) {
        if let Some(old) = self.history.pop_front() {
            self.held -= old.bytes;
        }
    }

    fn pop_artifact(&mut self) {
        if let Some(old) = self.artifacts.pop_front() {
            self.held -= old.bytes;
        }
    }

    /// Holds the task to [`MAX_TASK_BYTES`]: the oldest messages go first, then the oldest
    /// artifacts; the newest of each stays.
    fn trim(&mut self) {
        while self.held > MAX_TASK_BYTES && self.history.len() > 1 {
            self.pop_history();
        }
        while self.held > MAX_TASK_BYTES && self.artifacts.len() > 1 {
            self.pop_artifact();
        }
    }

    /// Adds an artifact chunk: a new artifact, or (`append`) its parts added to the artifact
    /// with the same id, as the SDK task manager does.
    pub(crate) fn add_artifact(&mut self, artifact: &Value, append: bool) {
        let id = artifact.get("artifactId");
        if append {
            if let Some(existing) = self
                .artifacts
                .iter_mut()
                .find(|a| a.value.get("artifactId") == id)
            {
                let new_parts = artifact
                    .get("parts")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(parts) = existing
                    .value
                    .get_mut("parts")
                    .and_then(Value::as_array_mut)
                {
                    let added: usize = new_parts.iter().map(held_bytes).sum();
                    parts.extend(new_parts);
                    existing.bytes += added;
                    self.held += added;
                }
                self.trim();
                return;
            }
        }
        let mut dropped = 0;
        self.artifacts.retain(|a| {
            let keep = a.value.get("artifactId") != id;
            if !keep {
                dropped += a.bytes;
            }
            keep
        });
        self.held -= dropped;
        if self.artifacts.len() >= MAX_ARTIFACTS {
            self.pop_artifact();
        }
        let kept = Kept::new(artifact.clone());
        self.held += kept.bytes;
        self.artifacts.push_back(kept);
        self.trim();
    }

    /// `TaskStatus`.
    pub(crate) fn status_json(&self) -> Value {
        let mut status = Map::new();
        status.insert("state".into(), json!(self.state.as_str()));
        if let Some(m) = &self.status_message {
            status.insert("message".into(), m.value.clone());
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
            let h: Vec<Value> = self
                .history
                .iter()
                .skip(skip)
                .map(|m| m.value.clone())
                .collect();
            task.insert("history".into(), Value::Array(h));
        }
        let include = match artifacts {
            Artifacts::Omit => false,
            Artifacts::IfAny => !self.artifacts.is_empty(),
            Artifacts::Always => true,
        };
        if include {
            let a: Vec<Value> = self.artifacts.iter().map(|a| a.value.clone()).collect();
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
        assert_eq!(t.history.front().map(|m| &m.value), Some(&json!(5)));
        for i in 0..MAX_ARTIFACTS + 3 {
            t.add_artifact(&json!({"artifactId": i.to_string(), "parts": []}), false);
        }
        assert_eq!(t.artifacts.len(), MAX_ARTIFACTS);
    }

    /// What `held` says against a count made afresh.
    fn recount(t: &TaskRecord) -> usize {
        t.history
            .iter()
            .map(|m| held_bytes(&m.value))
            .sum::<usize>()
            + t.artifacts
                .iter()
                .map(|a| held_bytes(&a.value))
                .sum::<usize>()
            + t.status_message
                .as_ref()
                .map_or(0, |m| held_bytes(&m.value))
    }

    #[test]
    fn what_a_task_holds_is_counted_through_every_change() {
        let mut t = TaskRecord::new("t".into(), "c".into(), 0);
        let text = |n: usize| json!({"parts": [{"text": "x".repeat(n)}]});
        t.push_history(text(10));
        t.set_status_message(Some(text(20)));
        t.set_status_message(Some(text(5)));
        t.add_artifact(
            &json!({"artifactId": "a", "parts": [{"text": "abc"}]}),
            false,
        );
        t.add_artifact(
            &json!({"artifactId": "a", "parts": [{"text": "defg"}]}),
            true,
        );
        t.add_artifact(&json!({"artifactId": "b", "parts": []}), false);
        // The same id again replaces it.
        t.add_artifact(&json!({"artifactId": "a", "parts": [{"text": "h"}]}), false);
        // Appending to an artifact that is not there adds it.
        t.add_artifact(&json!({"artifactId": "c", "parts": [{"text": "ij"}]}), true);
        assert_eq!(t.held(), recount(&t));
        t.set_status_message(None);
        assert_eq!(t.held(), recount(&t));
        for i in 0..MAX_HISTORY + 2 {
            t.push_history(json!(i));
        }
        for i in 0..MAX_ARTIFACTS + 2 {
            t.add_artifact(&json!({"artifactId": i.to_string()}), false);
        }
        assert_eq!(t.held(), recount(&t));
        // A string's bytes count once, with a node per value and per member.
        let node = std::mem::size_of::<Value>();
        assert_eq!(held_bytes(&json!("abcd")), node + 4);
        assert_eq!(
            held_bytes(&json!({"k": [1, "xy"]})),
            4 * node + 1 + 2 + node
        );
    }

    /// Big messages: the task keeps the newest within [`MAX_TASK_BYTES`], never fewer than
    /// the newest message and the newest artifact, however big those are alone.
    #[test]
    fn a_task_holds_at_most_its_byte_budget_beyond_its_newest() {
        let mut t = TaskRecord::new("t".into(), "c".into(), 0);
        let big =
            |tag: usize| json!({"tag": tag, "parts": [{"text": "x".repeat(MAX_TASK_BYTES / 5)}]});
        for i in 0..12 {
            t.push_history(big(i));
            t.add_artifact(&json!({"artifactId": i.to_string(), "parts": [{"text": "y".repeat(MAX_TASK_BYTES / 5)}]}), false);
            assert!(t.held() <= MAX_TASK_BYTES, "{i}: {}", t.held());
            assert_eq!(t.held(), recount(&t));
        }
        assert_eq!(t.history.back().map(|m| &m.value["tag"]), Some(&json!(11)));
        assert_eq!(
            t.artifacts.back().map(|a| &a.value["artifactId"]),
            Some(&json!("11"))
        );
        assert!(t.history.len() + t.artifacts.len() <= 5);
        // One message bigger than the budget alone is kept, with the newest artifact.
        t.push_history(json!({"parts": [{"text": "z".repeat(MAX_TASK_BYTES + 1)}]}));
        assert_eq!((t.history.len(), t.artifacts.len()), (1, 1));
        assert_eq!(t.held(), recount(&t));
        // Appending to the newest artifact past the budget drops older messages, never it.
        let mut t = TaskRecord::new("t".into(), "c".into(), 0);
        t.push_history(json!("old"));
        t.push_history(json!("new"));
        t.add_artifact(&json!({"artifactId": "a", "parts": []}), false);
        t.add_artifact(
            &json!({"artifactId": "a", "parts": [{"text": "w".repeat(MAX_TASK_BYTES)}]}),
            true,
        );
        assert_eq!(t.history.len(), 1);
        assert_eq!(t.history.back().map(|m| &m.value), Some(&json!("new")));
        assert_eq!(t.artifacts.len(), 1);
        assert_eq!(t.held(), recount(&t));
    }
}
