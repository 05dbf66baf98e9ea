//! The task store: every task in memory, the turn in progress on each, who is listening to it,
//! the state machine (who may start, update, end or cancel a turn), contexts, and ListTasks
//! paging.
//!
//! One lock guards everything. Every change of a task is made and broadcast to its listeners
//! under that lock, so a subscriber that takes a snapshot and subscribes under the same lock
//! sees every later event exactly once. Nothing awaits while holding it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::events::{self, Update, Writer};
use super::ids;
use super::task::{agent_message, Artifacts, TaskRecord, TaskState};
use crate::a2a::RpcError;
use crate::reason;
use crate::time;

/// Tasks kept in memory; beyond this the oldest finished ones are evicted.
pub(crate) const MAX_TASKS: usize = 10_000;
/// The agent text of a task refused because its context is busy (as iac-code).
pub(crate) const ALREADY_WORKING: &str = "Task is already working.";
/// The agent text of a canceled task (as iac-code).
pub(crate) const CANCELED_TEXT: &str = "Task canceled.";

pub(crate) use super::events::Events;

/// The turn in progress on a task. Dropping it ends the turn for everybody: listeners see
/// their channel close, and whoever waits on `stop` (the agent, blocked callers) wakes up.
struct Run {
    turn: u64,
    events: Writer,
    stop: watch::Sender<()>,
}

struct Entry {
    task: TaskRecord,
    run: Option<Run>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    /// (status timestamp, task id): the ListTasks order (read backwards) and the eviction order.
    order: BTreeSet<(u64, String)>,
    /// Context id → ids of its tasks with a turn in progress.
    running: HashMap<String, Vec<String>>,
    /// The last timestamp given out; timestamps are strictly increasing.
    clock: u64,
    turns: u64,
}

impl Inner {
    fn tick(&mut self) -> u64 {
        self.clock = time::now_micros().max(self.clock + 1);
        self.clock
    }
}

/// What the agent of a turn holds: which task and turn it works on, and a receiver that
/// wakes up when the turn is over (canceled, or ended by the agent itself).
#[derive(Debug)]
pub(crate) struct Turn {
    pub task_id: String,
    pub context_id: String,
    turn: u64,
    pub stop: watch::Receiver<()>,
}

/// A turn that was started: the task as it is now (SUBMITTED) and the events that follow.
#[derive(Debug)]
pub(crate) struct Started {
    pub turn: Turn,
    pub snapshot: Value,
    pub events: Events,
}

/// The answer to a new message.
#[derive(Debug)]
pub(crate) enum Begin {
    Started(Started),
    /// A new task, already FAILED with "Task is already working.": the context stayed busy.
    Refused(Value),
    /// The message continues a task whose turn is still in progress: wait, then try again.
    TaskBusy(watch::Receiver<()>),
    /// The context has a turn in progress: wait a little, then try again (refusing if busy).
    ContextBusy(watch::Receiver<()>),
}

/// The turn is over (canceled); the agent must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// A user message addressed to the engine, already checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewMessage<'a> {
    pub message: &'a Map<String, Value>,
    pub task_id: Option<&'a str>,
    pub context_id: Option<&'a str>,
}

/// A checked ListTasks request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListQuery {
    pub context_id: Option<String>,
    pub status: Option<TaskState>,
    pub page_size: usize,
    /// The key of the last task of the previous page.
    pub after: Option<(u64, String)>,
    pub history: Option<usize>,
    pub include_artifacts: bool,
    /// Only tasks whose status timestamp is at or after this (microseconds).
    pub since: Option<u64>,
}

/// The in-memory task store.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    max_tasks: usize,
}

fn task_not_active() -> RpcError {
    RpcError {
        message: "Task is not active".into(),
        ..RpcError::task_not_found()
    }
}

fn at_capacity() -> RpcError {
    RpcError::new(
        crate::a2a::code::INTERNAL_ERROR,
        "Too many tasks in progress",
        reason::INTERNAL_ERROR,
    )
}

fn terminal(id: &str) -> RpcError {
    RpcError::unsupported_operation(format!("Task {id} is in terminal state"))
}

fn context_mismatch() -> RpcError {
    RpcError::invalid_params(
        "contextId does not match the context of the task",
        reason::INVALID_PARAMS,
    )
}

/// Moves a task to a new status timestamp, keeping the order index right.
fn retime(order: &mut BTreeSet<(u64, String)>, task: &mut TaskRecord, ts: u64) {
    order.remove(&(task.timestamp, task.id.clone()));
    task.timestamp = ts;
    order.insert((ts, task.id.clone()));
}

fn broadcast(entry: &Entry, result: Value, last: bool) {
    if let Some(run) = &entry.run {
        // No listener is not an error.
        run.events.send(Update { result, last });
    }
}

/// Ends the turn of `entry` after its final status was set: the final event goes out, then
/// the run is dropped (closing every listener and waking every waiter).
fn end_turn(entry: &mut Entry, running: &mut HashMap<String, Vec<String>>) {
    debug_assert!(!entry.task.state.is_running());
    broadcast(entry, entry.task.status_update(), true);
    entry.run = None;
    if let Some(ids) = running.get_mut(&entry.task.context_id) {
        ids.retain(|id| *id != entry.task.id);
        if ids.is_empty() {
            running.remove(&entry.task.context_id);
        }
    }
}

/// The entry of a turn, if that turn is still the one in progress.
fn current<'a>(
    tasks: &'a mut HashMap<String, Entry>,
    turn: &Turn,
) -> Result<&'a mut Entry, Stopped> {
    match tasks.get_mut(&turn.task_id) {
        Some(e) if e.run.as_ref().is_some_and(|r| r.turn == turn.turn) => Ok(e),
        _ => Err(Stopped),
    }
}

/// The user message as stored: the caller's message with taskId and contextId filled in.
fn stored_message(message: &Map<String, Value>, task_id: &str, context_id: &str) -> Value {
    let mut m = message.clone();
    m.insert("taskId".into(), json!(task_id));
    m.insert("contextId".into(), json!(context_id));
    Value::Object(m)
}

pub(crate) fn encode_page_token(key: &(u64, String)) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", key.0, key.1))
}

pub(crate) fn decode_page_token(token: &str) -> Option<(u64, String)> {
    let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (ts, id) = text.split_once(':')?;
    if id.is_empty() || ts.is_empty() || !ts.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((ts.parse().ok()?, id.to_string()))
}

impl Store {
    pub(crate) fn new(max_tasks: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_tasks: max_tasks.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere leaves the maps consistent (each change is a few field writes).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of tasks held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Starts a turn for a user message, or says why not yet / not at all.
    /// `refuse_if_busy`: a context that is still busy yields a FAILED task instead of a wait.
    pub(crate) fn begin_turn(
        &self,
        m: NewMessage<'_>,
        refuse_if_busy: bool,
    ) -> Result<Begin, RpcError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let (task_id, context_id) = match m.task_id {
            Some(tid) => {
                let entry = inner.tasks.get(tid).ok_or_else(RpcError::task_not_found)?;
                if m.context_id.is_some_and(|c| c != entry.task.context_id) {
                    return Err(context_mismatch());
                }
                if entry.task.state.is_terminal() {
                    return Err(terminal(tid));
                }
                if let Some(run) = &entry.run {
                    return Ok(Begin::TaskBusy(run.stop.subscribe()));
                }
                // Interrupted (INPUT_REQUIRED / AUTH_REQUIRED): a new turn on the same task.
                (tid.to_string(), entry.task.context_id.clone())
            }
            None => {
                let context_id = m.context_id.map_or_else(ids::uuid_v4, str::to_string);
                let busy_with = inner
                    .running
                    .get(&context_id)
                    .and_then(|ids| ids.first())
                    .and_then(|id| inner.tasks.get(id))
                    .and_then(|e| e.run.as_ref());
                if let Some(run) = busy_with {
                    if !refuse_if_busy {
                        return Ok(Begin::ContextBusy(run.stop.subscribe()));
                    }
                    return self
                        .refuse(inner, m.message, &context_id)
                        .map(Begin::Refused);
                }
                self.make_room(inner)?;
                let task_id = ids::uuid_v4();
                let ts = inner.tick();
                inner.order.insert((ts, task_id.clone()));
                let task = TaskRecord::new(task_id.clone(), context_id.clone(), ts);
                inner
                    .tasks
                    .insert(task_id.clone(), Entry { task, run: None });
                (task_id, context_id)
            }
        };

        let ts = inner.tick();
        inner.turns += 1;
        let turn_no = inner.turns;
        let Inner {
            tasks,
            order,
            running,
            ..
        } = inner;
        let entry = tasks
            .get_mut(&task_id)
            .ok_or_else(RpcError::task_not_found)?;
        entry
            .task
            .push_history(stored_message(m.message, &task_id, &context_id));
        entry.task.state = TaskState::Submitted;
        entry.task.status_message = None;
        retime(order, &mut entry.task, ts);
        let (events_tx, events) = events::log();
        let (stop_tx, stop) = watch::channel(());
        entry.run = Some(Run {
            turn: turn_no,
            events: events_tx,
            stop: stop_tx,
        });
        running
            .entry(context_id.clone())
            .or_default()
            .push(task_id.clone());
        let snapshot = entry.task.to_json(None, Artifacts::IfAny);
        Ok(Begin::Started(Started {
            turn: Turn {
                task_id,
                context_id,
                turn: turn_no,
                stop,
            },
            snapshot,
            events,
        }))
    }

    /// A new task, FAILED at once because its context is busy (iac-code's answer).
    fn refuse(
        &self,
        inner: &mut Inner,
        message: &Map<String, Value>,
        context_id: &str,
    ) -> Result<Value, RpcError> {
        self.make_room(inner)?;
        let task_id = ids::uuid_v4();
        let ts = inner.tick();
        let mut task = TaskRecord::new(task_id.clone(), context_id.to_string(), ts);
        task.push_history(stored_message(message, &task_id, context_id));
        let reply = agent_message(context_id, Some(&task_id), ALREADY_WORKING);
        task.push_history(reply.clone());
        task.status_message = Some(reply);
        task.state = TaskState::Failed;
        let snapshot = task.to_json(None, Artifacts::IfAny);
        inner.order.insert((ts, task_id.clone()));
        inner.tasks.insert(task_id, Entry { task, run: None });
        Ok(snapshot)
    }

    /// Evicts the oldest tasks without a turn in progress until one more fits.
    fn make_room(&self, inner: &mut Inner) -> Result<(), RpcError> {
        while inner.tasks.len() >= self.max_tasks {
            let victim = inner
                .order
                .iter()
                .find(|(_, id)| inner.tasks.get(id).is_some_and(|e| e.run.is_none()))
                .cloned();
            let Some(key) = victim else {
                return Err(at_capacity());
            };
            inner.order.remove(&key);
            inner.tasks.remove(&key.1);
        }
        Ok(())
    }

    /// For a reply that creates no task: checks the task a message refers to (as for a turn)
    /// and returns the context the reply belongs to.
    pub(crate) fn reply_context(&self, m: NewMessage<'_>) -> Result<String, RpcError> {
        let Some(tid) = m.task_id else {
            return Ok(m.context_id.map_or_else(ids::uuid_v4, str::to_string));
        };
        let inner = self.lock();
        let entry = inner.tasks.get(tid).ok_or_else(RpcError::task_not_found)?;
        if m.context_id.is_some_and(|c| c != entry.task.context_id) {
            return Err(context_mismatch());
        }
        if entry.task.state.is_terminal() {
            return Err(terminal(tid));
        }
        Ok(entry.task.context_id.clone())
    }

    /// The agent started working.
    pub(crate) fn set_working(&self, turn: &Turn) -> Result<(), Stopped> {
        let mut guard = self.lock();
        let ts = guard.tick();
        let Inner { tasks, order, .. } = &mut *guard;
        let entry = current(tasks, turn)?;
        entry.task.state = TaskState::Working;
        entry.task.status_message = None;
        retime(order, &mut entry.task, ts);
        broadcast(entry, entry.task.status_update(), false);
        Ok(())
    }

    /// The agent produced a chunk of an artifact.
    pub(crate) fn artifact_chunk(
        &self,
        turn: &Turn,
        artifact: &Value,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), Stopped> {
        let mut guard = self.lock();
        let entry = current(&mut guard.tasks, turn)?;
        entry.task.add_artifact(artifact, append);
        let ev = entry.task.artifact_update(artifact, append, last_chunk);
        broadcast(entry, ev, false);
        Ok(())
    }

    /// The agent ends its turn in `state` (terminal or interrupted) with an agent message.
    pub(crate) fn finish(&self, turn: &Turn, state: TaskState, text: &str) -> Result<(), Stopped> {
        let mut guard = self.lock();
        let ts = guard.tick();
        let Inner {
            tasks,
            order,
            running,
            ..
        } = &mut *guard;
        let entry = current(tasks, turn)?;
        let reply = agent_message(&turn.context_id, Some(&turn.task_id), text);
        entry.task.push_history(reply.clone());
        entry.task.status_message = Some(reply);
        entry.task.state = state;
        retime(order, &mut entry.task, ts);
        end_turn(entry, running);
        Ok(())
    }

    /// CancelTask: ends the turn in progress with CANCELED.
    pub(crate) fn cancel(&self, id: &str) -> Result<Value, RpcError> {
        let mut guard = self.lock();
        let ts = guard.tick();
        let Inner {
            tasks,
            order,
            running,
            ..
        } = &mut *guard;
        let entry = tasks.get_mut(id).ok_or_else(RpcError::task_not_found)?;
        if entry.run.is_none() {
            return Err(RpcError::task_not_cancelable());
        }
        let reply = agent_message(&entry.task.context_id, Some(id), CANCELED_TEXT);
        entry.task.push_history(reply.clone());
        entry.task.status_message = Some(reply);
        entry.task.state = TaskState::Canceled;
        retime(order, &mut entry.task, ts);
        end_turn(entry, running);
        Ok(entry.task.to_json(None, Artifacts::IfAny))
    }

    /// SubscribeToTask: the task now and its later events, if a turn is in progress.
    pub(crate) fn subscribe(&self, id: &str) -> Result<(Value, Events), RpcError> {
        let inner = self.lock();
        let entry = inner.tasks.get(id).ok_or_else(RpcError::task_not_found)?;
        // A2A §3.1.6: a task in a terminal state is UnsupportedOperationError; one whose
        // turn is over but may go on (interrupted) is not active, as iac-code answers.
        if entry.task.state.is_terminal() {
            return Err(terminal(id));
        }
        let run = entry.run.as_ref().ok_or_else(task_not_active)?;
        Ok((
            entry.task.to_json(None, Artifacts::IfAny),
            run.events.subscribe(),
        ))
    }

    /// GetTask.
    pub(crate) fn get(&self, id: &str, history: Option<usize>) -> Option<Value> {
        let inner = self.lock();
        inner
            .tasks
            .get(id)
            .map(|e| e.task.to_json(history, Artifacts::IfAny))
    }

    /// ListTasks: newest status first (then task id, descending), one page after `q.after`.
    pub(crate) fn list(&self, q: &ListQuery) -> Value {
        let inner = self.lock();
        let artifacts = if q.include_artifacts {
            Artifacts::Always
        } else {
            Artifacts::Omit
        };
        let mut total: u64 = 0;
        let mut page: Vec<&(u64, String)> = Vec::new();
        let mut more = false;
        for key in inner.order.iter().rev() {
            let Some(entry) = inner.tasks.get(&key.1) else {
                continue;
            };
            let t = &entry.task;
            if q.context_id.as_ref().is_some_and(|c| *c != t.context_id)
                || q.status.is_some_and(|s| s != t.state)
                || q.since.is_some_and(|s| t.timestamp < s)
            {
                continue;
            }
            total += 1;
            if q.after.as_ref().is_some_and(|after| key >= after) {
                continue;
            }
            if page.len() < q.page_size {
                page.push(key);
            } else {
                more = true;
            }
        }
        let next = match page.last() {
            Some(key) if more => encode_page_token(key),
            _ => String::new(),
        };
        let tasks: Vec<Value> = page
            .iter()
            .filter_map(|key| inner.tasks.get(&key.1))
            .map(|e| e.task.to_json(q.history, artifacts))
            .collect();
        json!({
            "tasks": tasks,
            "nextPageToken": next,
            "pageSize": q.page_size,
            "totalSize": total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Map<String, Value> {
        match json!({"messageId": ids::uuid_v4(), "role": "ROLE_USER", "parts": [{"text": text}]}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn start(store: &Store, m: &Map<String, Value>, ctx: Option<&str>) -> Started {
        let nm = NewMessage {
            message: m,
            task_id: None,
            context_id: ctx,
        };
        match store.begin_turn(nm, false).unwrap() {
            Begin::Started(s) => s,
            other => panic!("not started: {other:?}"),
        }
    }

    #[test]
    fn page_tokens_round_trip_and_reject_garbage() {
        let key = (123u64, "abc-def".to_string());
        assert_eq!(decode_page_token(&encode_page_token(&key)), Some(key));
        for bad in [
            "",
            "!!!",
            "YWJj",
            &URL_SAFE_NO_PAD.encode("x:y"),
            &URL_SAFE_NO_PAD.encode("1:"),
        ] {
            assert_eq!(decode_page_token(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn evicts_oldest_finished_tasks_and_refuses_when_all_run() {
        let store = Store::new(3);
        let m = msg("x");
        let first = start(&store, &m, None);
        store
            .finish(&first.turn, TaskState::Completed, "done")
            .unwrap();
        let _a = start(&store, &m, None);
        let _b = start(&store, &m, None);
        // Full: the finished first task makes room.
        let _c = start(&store, &m, None);
        assert_eq!(store.len(), 3);
        assert!(store.get(&first.turn.task_id, None).is_none());
        // Full and all running: refused.
        let nm = NewMessage {
            message: &m,
            task_id: None,
            context_id: None,
        };
        let err = store.begin_turn(nm, false).unwrap_err();
        assert_eq!(err.code, -32603);
    }

    #[test]
    fn a_stale_turn_cannot_write() {
        let store = Store::new(10);
        let m = msg("x");
        let s = start(&store, &m, None);
        store.cancel(&s.turn.task_id).unwrap();
        assert_eq!(store.set_working(&s.turn), Err(Stopped));
        assert_eq!(
            store.finish(&s.turn, TaskState::Completed, "late"),
            Err(Stopped)
        );
        let t = store.get(&s.turn.task_id, None).unwrap();
        assert_eq!(t["status"]["state"], "TASK_STATE_CANCELED");
    }
}
