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
use super::task::{agent_message, held_object_bytes, Artifacts, TaskRecord, TaskState};
use crate::a2a::RpcError;
use crate::reason;
use crate::time;

/// Tasks kept in memory; beyond this the oldest finished ones are evicted.
pub(crate) const MAX_TASKS: usize = 10_000;
/// What all tasks may hold together (by [`held_bytes`]) before a new turn begins: beyond it
/// the oldest finished tasks are evicted, and with none left a new turn is refused. Turns in
/// progress can go past it by what they add (each at most its own message's echo, a few
/// times over).
pub(crate) const MAX_BYTES: usize = 256 << 20;
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
    /// What all tasks hold, the sum of their [`TaskRecord::held`].
    held: usize,
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
    max_bytes: usize,
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

/// Changes a task, keeping the store's count of what all tasks hold.
fn change<R>(held: &mut usize, task: &mut TaskRecord, f: impl FnOnce(&mut TaskRecord) -> R) -> R {
    let before = task.held();
    let r = f(task);
    *held = *held - before + task.held();
    r
}

/// Sets a task's agent message: in its history and as its status message.
fn reply_with(task: &mut TaskRecord, reply: Value) {
    task.push_history(reply.clone());
    task.set_status_message(Some(reply));
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
    pub(crate) fn new(max_tasks: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_tasks: max_tasks.max(1),
            max_bytes,
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

    /// What all tasks hold, and the same counted afresh.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (
            inner.held,
            inner.tasks.values().map(|e| e.task.held()).sum(),
        )
    }

    /// Starts a turn for a user message, or says why not yet / not at all.
    /// `refuse_if_busy`: a context that is still busy yields a FAILED task instead of a wait.
    pub(crate) fn begin_turn(
        &self,
        m: NewMessage<'_>,
        refuse_if_busy: bool,
    ) -> Result<Begin, RpcError> {
        let incoming = held_object_bytes(m.message);
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
                let context_id = entry.task.context_id.clone();
                self.make_room(inner, 0, incoming, Some(tid))?;
                (tid.to_string(), context_id)
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
                        .refuse(inner, m.message, &context_id, incoming)
                        .map(Begin::Refused);
                }
                self.make_room(inner, 1, incoming, None)?;
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
            held,
            ..
        } = inner;
        let entry = tasks
            .get_mut(&task_id)
            .ok_or_else(RpcError::task_not_found)?;
        change(held, &mut entry.task, |t| {
            t.push_history(stored_message(m.message, &task_id, &context_id));
            t.set_status_message(None);
        });
        entry.task.state = TaskState::Submitted;
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
        incoming: usize,
    ) -> Result<Value, RpcError> {
        self.make_room(inner, 1, incoming, None)?;
        let task_id = ids::uuid_v4();
        let ts = inner.tick();
        let mut task = TaskRecord::new(task_id.clone(), context_id.to_string(), ts);
        task.push_history(stored_message(message, &task_id, context_id));
        reply_with(
            &mut task,
            agent_message(context_id, Some(&task_id), ALREADY_WORKING),
        );
        task.state = TaskState::Failed;
        let snapshot = task.to_json(None, Artifacts::IfAny);
        inner.held += task.held();
        inner.order.insert((ts, task_id.clone()));
        inner.tasks.insert(task_id, Entry { task, run: None });
        Ok(snapshot)
    }

    /// Evicts the oldest tasks without a turn in progress (but `keep`) until `tasks` more
    /// tasks and `bytes` more bytes fit.
    fn make_room(
        &self,
        inner: &mut Inner,
        tasks: usize,
        bytes: usize,
        keep: Option<&str>,
    ) -> Result<(), RpcError> {
        if bytes > self.max_bytes {
            // Nothing evicted could make it fit.
            return Err(at_capacity());
        }
        while inner.tasks.len() + tasks > self.max_tasks
            || inner.held.saturating_add(bytes) > self.max_bytes
        {
            let victim = inner
                .order
                .iter()
                .find(|(_, id)| {
                    keep != Some(id.as_str())
                        && inner.tasks.get(id).is_some_and(|e| e.run.is_none())
                })
                .cloned();
            let Some(key) = victim else {
                return Err(at_capacity());
            };
            inner.order.remove(&key);
            if let Some(gone) = inner.tasks.remove(&key.1) {
                inner.held -= gone.task.held();
            }
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
        let Inner {
            tasks, order, held, ..
        } = &mut *guard;
        let entry = current(tasks, turn)?;
        entry.task.state = TaskState::Working;
        change(held, &mut entry.task, |t| t.set_status_message(None));
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
        let Inner { tasks, held, .. } = &mut *guard;
        let entry = current(tasks, turn)?;
        change(held, &mut entry.task, |t| t.add_artifact(artifact, append));
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
            held,
            ..
        } = &mut *guard;
        let entry = current(tasks, turn)?;
        let reply = agent_message(&turn.context_id, Some(&turn.task_id), text);
        change(held, &mut entry.task, |t| reply_with(t, reply));
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
            held,
            ..
        } = &mut *guard;
        let entry = tasks.get_mut(id).ok_or_else(RpcError::task_not_found)?;
        if entry.run.is_none() {
            return Err(RpcError::task_not_cancelable());
        }
        let reply = agent_message(&entry.task.context_id, Some(id), CANCELED_TEXT);
        change(held, &mut entry.task, |t| reply_with(t, reply));
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
        let store = Store::new(3, MAX_BYTES);
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
        let store = Store::new(10, MAX_BYTES);
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

    /// A message of about `n` bytes.
    fn big(n: usize) -> Map<String, Value> {
        msg(&"b".repeat(n))
    }

    fn ended(store: &Store, m: &Map<String, Value>) -> String {
        let s = start(store, m, None);
        store.finish(&s.turn, TaskState::Completed, "done").unwrap();
        s.turn.task_id
    }

    /// Past its byte budget the store evicts its oldest finished tasks before a new turn
    /// (whatever their number), never the task a message continues, and refuses a turn
    /// when only turns in progress hold the bytes.
    #[test]
    fn evicts_by_bytes_and_refuses_when_running_turns_hold_them() {
        let m = big(3_000);
        // What one finished task of `m` holds; the budget fits three and a half.
        let probe = Store::new(100, MAX_BYTES);
        ended(&probe, &m);
        let one = probe.held().0;
        let budget = 3 * one + one / 2;
        let store = Store::new(100, budget);
        let first = ended(&store, &m);
        let second = ended(&store, &m);
        let third = ended(&store, &m);
        assert_eq!(store.len(), 3);
        // A fourth does not fit beside three: the oldest goes.
        let fourth = ended(&store, &m);
        assert!(store.get(&first, None).is_none());
        for id in [&second, &third, &fourth] {
            assert!(store.get(id, None).is_some());
        }
        let (held, recounted) = store.held();
        assert_eq!(held, recounted);
        assert!(held <= budget, "{held}");

        // An interrupted task continued: room is made from the others, not from it.
        let s = start(&store, &big(10), None);
        store
            .finish(&s.turn, TaskState::InputRequired, "more?")
            .unwrap();
        let again = NewMessage {
            message: &m,
            task_id: Some(&s.turn.task_id),
            context_id: None,
        };
        let Begin::Started(cont) = store.begin_turn(again, false).unwrap() else {
            panic!("not continued");
        };
        assert!(store.get(&second, None).is_none());
        let t = store.get(&s.turn.task_id, None).unwrap();
        assert_eq!(t["history"].as_array().map(Vec::len), Some(3));

        // Turns in progress take the budget: every finished task goes, then a turn is refused.
        let mut running = Vec::new();
        let err = loop {
            let nm = NewMessage {
                message: &m,
                task_id: None,
                context_id: None,
            };
            match store.begin_turn(nm, false) {
                Ok(Begin::Started(s)) if running.len() < 10 => running.push(s),
                Ok(other) => panic!("never refused: {other:?}"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.code, -32603);
        assert_eq!(store.len(), running.len() + 1);
        // Turns end: their tasks can make room again.
        for s in &running {
            store.cancel(&s.turn.task_id).unwrap();
        }
        store.cancel(&cont.turn.task_id).unwrap();
        ended(&store, &m);
        let (held, recounted) = store.held();
        assert_eq!(held, recounted);
    }

    /// A message bigger than the whole budget is refused rather than evicting everything.
    #[test]
    fn a_message_bigger_than_the_budget_is_refused() {
        let store = Store::new(100, 10_000);
        let kept = ended(&store, &big(100));
        let nm = NewMessage {
            message: &big(10_000),
            task_id: None,
            context_id: None,
        };
        assert_eq!(store.begin_turn(nm, false).unwrap_err().code, -32603);
        assert!(store.get(&kept, None).is_some());
    }
}
