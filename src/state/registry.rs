//! Who owns which task and context, and which agent serves it.
//!
//! The agents behind the proxy see one credential, so to them every caller is the same owner
//! (iac-code-upstream.md §3). This registry is what keeps callers apart: it is fed from requests
//! ([`TaskRegistry::begin_turn`]) and from answers ([`TaskRegistry::observe`],
//! [`Turn::observe`]), and the gate asks it before anything task- or context-addressed reaches
//! an agent. It is pure and in memory: no I/O, one lock, nothing awaits while holding it.
//! With `[state] backend = "redis"` it is the replica's cache of the facts that do not change
//! while Redis keeps them, each trusted no longer than that (`replica.rs`), and Redis decides
//! ([`crate::state::ownership`]).
//!
//! Decisions:
//! - **No existence oracle.** An unknown task and someone else's task give the same
//!   [`Denial::NotFound`]; so does someone else's context. Ownership is never re-assigned: an
//!   agent answering one caller with another caller's task or context id is ignored, counted
//!   (`foreign_ignored`) and logged.
//! - **Workspaces** bind at a context's first turn through the proxy, and `None` (no cwd named,
//!   i.e. the agent's default directory) is a value of its own: a later turn naming another
//!   value, `None` included, gets [`Denial::WorkspaceMismatch`]. A context first learned from an
//!   answer (no turn named it yet) binds at its next turn.
//! - **Busy contexts.** While a turn runs on a context (a [`Turn`] is alive), another message on
//!   it gets [`Denial::ContextBusy`] unless it carries that turn's own task id (the agent queues
//!   it). A turn whose task is not known yet (no answer seen) admits no follow-up.
//! - **Follow-ups** with only a `taskId` are checked against (and routed to) the task's context
//!   and agent; a `contextId` that differs from the task's gives [`Denial::ContextMismatch`].
//! - **Bounds.** At most `max_entries` tasks and, separately, `max_entries` contexts. When full,
//!   the least recently used entry is evicted: for tasks, those last reported finished (or in
//!   any state but SUBMITTED/WORKING) before those the agent was still working on; entries
//!   pinned by a running turn are never evicted. At most `max_entries` turns may be in flight
//!   (each running context, or turn still waiting for the agent to name its new context,
//!   counts once); beyond that a turn that would add one gets [`Denial::Full`] (a capacity
//!   error, not a busy context: the caller did nothing wrong), checked before ownership so
//!   that it cannot tell someone else's context from an unknown one. Hence a new context
//!   always finds room. An answer that would need room when everything is pinned is not
//!   recorded (`refused_full`), which fails closed: its owner then gets NotFound too.
//! - **ListTasks** pages are keyset pages over `(status timestamp, task id)`, both descending;
//!   see [`TaskRegistry::list`].
//!
//! Eviction keeps who owned a context, compactly ([`forgotten`]: keyed 64-bit hashes, a few
//! dozen bytes per context, for `4 × max_entries` evicted contexts): only its owner may take an evicted
//! context up again. Known limit: beyond that memory, the oldest evicted context ids are
//! unknown again and the next caller to name one reserves it. Size `max_entries` well above
//! the working set and alert on `evicted_contexts`. With `redis` the registry is a cache of
//! what Redis decides (`replica.rs`): an evicted id is asked of Redis again when named, and
//! no owner is remembered for it.

#![forbid(unsafe_code)]

mod facts;
mod forgotten;
mod ids;
mod lists;
mod replica;
mod shape;
mod sorted;
mod state;
mod token;
mod turn;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::a2a::RpcError;
use crate::reason::{self, Reason};
use crate::telemetry::metrics::RegistryStats;
use facts::{Fact, MAX_OBSERVED_ID_LEN};
use forgotten::Kind;
use ids::Id;
pub use shape::{Shape, ROLES};
pub use state::Unrelayable;
use state::{Running, State, Workspace};
use token::{Cursor, Query, TokenKey};
pub use turn::Turn;

/// What the registry learns from one result (its facts, and which shapes it holds, printed):
/// for tests and fuzz targets that compare two readings of an answer.
#[doc(hidden)]
pub fn facts_of(result: &Value) -> String {
    use Shape::*;
    let shapes = [Send, Event, Task, Config, Configs, Empty].map(|s| s.holds(result));
    format!("{:?} {shapes:?}", Fact::read(result))
}

/// Whether a context id is shaped like the edge's alias of a caller's context (`c-` and 32
/// hex digits): only such ids can be rewritten by [`TaskRegistry::client_view`].
pub fn is_context_alias(id: &str) -> bool {
    id.len() == 34 && id.starts_with("c-") && id[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// Index of an agent in the fleet.
pub type UpstreamId = usize;

/// Why the registry refuses a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// The task (or context) does not exist or belongs to someone else: JSON-RPC -32001,
    /// identical in both cases.
    NotFound,
    /// The context is bound to another workspace.
    WorkspaceMismatch,
    /// A turn on this context is running through the proxy.
    ContextBusy,
    /// The message's `contextId` is not the context of its `taskId` (the caller's own task).
    ContextMismatch,
    /// A ListTasks page token that this registry did not mint for this caller and query.
    InvalidToken,
    /// As many turns are in flight as the registry may track; try again later.
    Full,
}

impl Denial {
    /// Low-cardinality reason code (ErrorInfo, metrics, audit).
    pub fn reason(&self) -> Reason {
        match self {
            Denial::NotFound => reason::TASK_NOT_FOUND,
            Denial::WorkspaceMismatch => reason::CONTEXT_WORKSPACE_MISMATCH,
            Denial::ContextBusy => reason::CONTEXT_BUSY,
            Denial::ContextMismatch => reason::CONTEXT_TASK_MISMATCH,
            Denial::InvalidToken => reason::LIST_PAGE_TOKEN,
            Denial::Full => reason::REGISTRY_FULL,
        }
    }

    /// The JSON-RPC error a caller gets (a suggestion the gate may override).
    pub fn rpc_error(&self) -> RpcError {
        let reason = self.reason();
        match self {
            Denial::NotFound => RpcError::task_not_found(),
            Denial::WorkspaceMismatch => {
                RpcError::invalid_params("A2A context belongs to a different workspace", reason)
            }
            Denial::ContextBusy => RpcError::invalid_params("Task is already working.", reason),
            Denial::ContextMismatch => RpcError::invalid_params(
                "The message's contextId is not the context of its task",
                reason,
            ),
            Denial::InvalidToken => RpcError::invalid_params("Invalid page token", reason),
            Denial::Full => RpcError::internal(reason),
        }
    }
}

/// One ListTasks page of the caller's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// Task ids with the agent that holds each, in order.
    pub tasks: Vec<(String, UpstreamId)>,
    /// `""` on the last page.
    pub next_page_token: String,
    /// How many tasks match the filters in all (not only after the cursor).
    pub total_size: usize,
    /// Each listed task's timestamp, and the query, to resume after any task of the page
    /// ([`TaskRegistry::token_after`]).
    timestamps: Vec<u64>,
    query: (String, String, String, u64),
}

struct Shared {
    state: Mutex<State>,
    key: TokenKey,
    /// Upstream names by id: an id names the same agent (by policy name) across reloads.
    upstream_names: Mutex<Vec<String>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update keeps the state consistent before anything could panic; a poisoned
        // lock still guards consistent data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The task and context registry. Cheap to clone (shared).
#[derive(Clone)]
pub struct TaskRegistry {
    shared: Arc<Shared>,
}

/// ListTasks filters as pages are keyed by: `""` for none (empty strings and
/// `TASK_STATE_UNSPECIFIED` mean no filter).
pub(crate) fn list_filters<'a>(
    context_id: Option<&'a str>,
    status: Option<&'a str>,
) -> (&'a str, &'a str) {
    let context = present(context_id).unwrap_or("");
    let status = present(status)
        .filter(|s| *s != "TASK_STATE_UNSPECIFIED")
        .unwrap_or("");
    (context, status)
}

/// Proto3 strings: empty means absent.
fn present(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

impl TaskRegistry {
    /// A registry holding at most `max_entries` tasks and `max_entries` contexts (at least 1),
    /// with a fresh random page-token key.
    pub fn new(max_entries: usize) -> TaskRegistry {
        Self::with_key(max_entries, None)
    }

    /// A registry whose page tokens and context aliases are keyed by `secret` (the same on
    /// every replica and across restarts: `state.page_token_secret_env`); random without one.
    pub fn with_key(max_entries: usize, secret: Option<&str>) -> TaskRegistry {
        TaskRegistry {
            shared: Arc::new(Shared {
                state: Mutex::new(State::new(max_entries)),
                upstream_names: Mutex::new(Vec::new()),
                key: match secret {
                    Some(s) => TokenKey::from_secret(s.as_bytes()),
                    None => TokenKey::generate(),
                },
            }),
        }
    }

    /// Before forwarding SendMessage/SendStreamingMessage: checks ownership, workspace and
    /// busy state, and reserves the context. `workspace` is the normalized cwd (`None` when
    /// the request names none). An unknown client-chosen `context_id` is reserved for
    /// `principal` with no agent yet ([`Turn::bind_upstream`] sets it). The returned [`Turn`]
    /// keeps the context busy until it is finished or dropped.
    pub fn begin_turn(
        &self,
        principal: &str,
        task_id: Option<&str>,
        context_id: Option<&str>,
        workspace: Option<&str>,
    ) -> Result<Turn, Denial> {
        self.begin_turn_as(principal, task_id, context_id, workspace, false)
    }

    /// [`TaskRegistry::begin_turn`]; with `shared` the workspace, busy and forgotten-owner
    /// checks were made by the shared store already (this registry is then a cache of
    /// immutable facts: owners, agents), and only ownership and room are checked here.
    pub(crate) fn begin_turn_as(
        &self,
        principal: &str,
        task_id: Option<&str>,
        context_id: Option<&str>,
        workspace: Option<&str>,
        shared: bool,
    ) -> Result<Turn, Denial> {
        let task_id = present(task_id);
        let context_id = present(context_id);
        let mut st = self.shared.lock();

        // The task, when named, must be the caller's; it decides context and agent.
        let mut task: Option<(Id, Id, UpstreamId)> = None;
        if let Some(t) = task_id {
            match st.tasks.get_key_value(t) {
                Some((k, e)) if &*e.owner == principal => {
                    task = Some((k.clone(), e.context.clone(), e.upstream));
                }
                _ => return Err(Denial::NotFound),
            }
        }
        let context: Option<String> = match (context_id, &task) {
            (Some(c), Some((_, tc, _))) if c != &**tc => return Err(Denial::ContextMismatch),
            (Some(c), _) => Some(c.to_owned()),
            (None, Some((_, tc, _))) => Some(tc.to_string()),
            (None, None) => None,
        };
        let workspace_owned = workspace.map(str::to_owned);

        let Some(c) = context else {
            // A new context, named by the agent's answer ([`Turn::observe`]).
            if !st.has_turn_room() {
                return Err(Self::full(&mut st));
            }
            st.pending_turns += 1;
            return Ok(self.turn(principal, None, workspace_owned, None));
        };
        if c.len() > MAX_OBSERVED_ID_LEN {
            return Err(Denial::NotFound);
        }
        let task_key = task.as_ref().map(|(k, _, _)| k.clone());
        let task_upstream = task.as_ref().map(|(_, _, u)| *u);

        // Room first: only a follow-up on the caller's running task adds no turn in flight.
        // Checking before ownership keeps Full from telling "unknown" from "someone else's".
        let follow_up = st.contexts.get(c.as_str()).is_some_and(|e| {
            *e.owner == *principal
                && e.running
                    .as_ref()
                    .and_then(|r| r.task.as_deref())
                    .is_some_and(|rt| Some(rt) == task_id)
        });
        if !follow_up && !st.has_turn_room() {
            return Err(Self::full(&mut st));
        }

        let Some((key, e)) = st.contexts.get_key_value(c.as_str()) else {
            // Evicted from someone else: as if it were still theirs.
            if !shared && !st.forgotten.permits(Kind::Context, &c, principal) {
                return Err(Denial::NotFound);
            }
            // Unknown: reserve it for the caller (also when its entry was evicted but the
            // caller's task still names it).
            let running = Running {
                turns: 1,
                task: task_key,
            };
            let ws = Workspace::Bound(workspace_owned.clone());
            return match st.insert_context(&c, principal, task_upstream, ws, Some(running)) {
                Some(id) => Ok(self.turn(principal, Some(id), workspace_owned, task_upstream)),
                None => Err(Self::full(&mut st)),
            };
        };
        if *e.owner != *principal {
            return Err(Denial::NotFound);
        }
        if let Workspace::Bound(bound) = &e.workspace {
            if bound.as_deref() != workspace && !shared {
                return Err(Denial::WorkspaceMismatch);
            }
        }
        if e.running.is_some() && !follow_up && !shared {
            return Err(Denial::ContextBusy);
        }
        let (key, upstream) = (key.clone(), task_upstream.or(e.upstream));
        if let Some(e) = st.contexts.get_mut(c.as_str()) {
            e.workspace = Workspace::Bound(workspace_owned.clone());
        }
        st.start_turn(&c, task_key);
        Ok(self.turn(principal, Some(key), workspace_owned, upstream))
    }

    fn full(st: &mut State) -> Denial {
        st.counters.refused_full += 1;
        tracing::warn!(event = "registry_full", max = st.max as u64);
        Denial::Full
    }

    fn turn(
        &self,
        principal: &str,
        context: Option<Id>,
        workspace: Option<String>,
        upstream: Option<UpstreamId>,
    ) -> Turn {
        Turn {
            shared: self.shared.clone(),
            principal: principal.to_owned(),
            context,
            workspace,
            upstream,
        }
    }

    /// For GetTask, CancelTask, SubscribeToTask and the push-config methods: the agent that
    /// holds the caller's task, or NotFound when it is unknown or someone else's.
    pub fn authorize_task(&self, principal: &str, task_id: &str) -> Result<UpstreamId, Denial> {
        let mut st = self.shared.lock();
        let (upstream, context) = match st.tasks.get(task_id) {
            Some(e) if &*e.owner == principal => (e.upstream, e.context.clone()),
            _ => return Err(Denial::NotFound),
        };
        st.touch_task(task_id);
        st.touch_context(&context);
        Ok(upstream)
    }

    /// Learns from a JSON-RPC `result` (or an SSE event's): a StreamResponse, a
    /// SendMessageResponse, or a bare Task. New tasks and contexts are bound to `principal`
    /// and `upstream`; known ones keep their owner and agent. For the events of a turn's own
    /// answer prefer [`Turn::observe`], which also binds a context the agent just created to
    /// the turn's workspace and keeps it busy.
    /// `Err` when the answer names another caller's task or context (it must not be relayed).
    pub fn observe(
        &self,
        principal: &str,
        upstream: UpstreamId,
        result: &Value,
    ) -> Result<(), Unrelayable> {
        match Fact::read(result)? {
            Some(fact) => self.shared.lock().learn(principal, upstream, &fact),
            None => Ok(()),
        }
    }

    /// The task `result` proves exists (a Task's id, an update's `taskId`; not a Message's
    /// `taskId`), when it names one in a shape the registry reads.
    pub fn task_named(result: &Value) -> Option<&str> {
        Fact::read(result).ok()??.task
    }

    /// Whether `result` names no task but `task`: the answer to a request addressed to one
    /// task (GetTask, CancelTask, SubscribeToTask's events, a push config's methods) is about
    /// that task or about none. A shape [`TaskRegistry::observe`] refuses passes here (it is
    /// refused there).
    pub fn names_only_task(result: &Value, task: &str) -> bool {
        match Fact::read(result) {
            Ok(Some(f)) => [f.task, f.referenced_task]
                .into_iter()
                .flatten()
                .all(|t| t == task),
            _ => true,
        }
    }

    /// What `result` names that Redis must be asked of before the answer is judged (with
    /// `redis`): tasks (a Task or an update without its `contextId`, a Message's or a push
    /// config's `taskId`) this registry does not know or no longer trusts, and a task or
    /// context it knows but no longer trusts (Redis may have forgotten it, and someone else
    /// claimed the id since). `(tasks, contexts)`.
    pub fn untrusted_named(&self, result: &Value) -> (Vec<String>, Vec<String>) {
        let Ok(Some(fact)) = Fact::read(result) else {
            return (Vec::new(), Vec::new());
        };
        let st = self.shared.lock();
        let now = st.now();
        let task = |t: &&str| match st.tasks.get(t) {
            Some(e) => now >= e.until,
            None => fact.context.is_none() || Some(*t) == fact.referenced_task,
        };
        let tasks = [fact.task, fact.referenced_task]
            .into_iter()
            .flatten()
            .filter(task)
            .map(str::to_string)
            .collect();
        let contexts = fact
            .context
            .filter(|c| st.contexts.get(c).is_some_and(|e| now >= e.until))
            .map(str::to_string)
            .into_iter()
            .collect();
        (tasks, contexts)
    }

    /// Checks the tasks `news` names against this registry (their owners, an evicted
    /// one's too), learning nothing: with `redis`, before it is written, so that an answer
    /// this replica refuses (a Message naming another caller's task) leaves nothing in Redis.
    pub(crate) fn check_news(
        &self,
        principal: &str,
        upstream: UpstreamId,
        news: &crate::state::shared::News,
    ) -> Result<(), Unrelayable> {
        self.shared
            .lock()
            .check_tasks(principal, upstream, &Fact::from_news(news))
            .map(|_| ())
    }

    /// [`TaskRegistry::observe`] of what the shared store accepted already.
    pub(crate) fn observe_news(
        &self,
        principal: &str,
        upstream: UpstreamId,
        news: &crate::state::shared::News,
    ) -> Result<(), Unrelayable> {
        let mut st = self.shared.lock();
        st.learn(principal, upstream, &Fact::from_news(news))?;
        st.written(news.task.as_deref(), news.context.as_deref());
        Ok(())
    }

    /// The caller's tasks for ListTasks, newest status first (timestamp, then task id, both
    /// descending), `page_size` (at least 1; the gate validates 1..=100 and the default)
    /// after `page_token`. `context_id`/`status` filter; empty strings and
    /// `TASK_STATE_UNSPECIFIED` mean no filter. A token is valid only for the caller and the
    /// filters it was minted for ([`Denial::InvalidToken`] otherwise, also when tampered or
    /// truncated), and for this process's lifetime.
    ///
    /// Paging is by keyset: the token carries the last task's `(timestamp, id)` and the next
    /// page starts strictly after it. While the set does not change, pages have no gaps and no
    /// duplicates. When it does: a task created or updated since (newer timestamp) sorts
    /// before the cursor and is not on later pages (the caller sees it on a fresh listing); a
    /// task whose timestamp moves from before the cursor to after it appears twice; an
    /// evicted task disappears. The cursor itself stays valid even if its task is gone.
    pub fn list(
        &self,
        principal: &str,
        context_id: Option<&str>,
        status: Option<&str>,
        page_size: usize,
        page_token: Option<&str>,
    ) -> Result<ListPage, Denial> {
        self.list_after(principal, context_id, status, 0, page_size, page_token)
    }

    /// [`TaskRegistry::list`] of the tasks whose status timestamp is after `after`
    /// (microseconds; 0: no filter; `statusTimestampAfter`). A task without a timestamp is
    /// not after any time.
    pub fn list_after(
        &self,
        principal: &str,
        context_id: Option<&str>,
        status: Option<&str>,
        after: u64,
        page_size: usize,
        page_token: Option<&str>,
    ) -> Result<ListPage, Denial> {
        let (context, status) = list_filters(context_id, status);
        let page_size = page_size.max(1);
        let cursor = self.open_cursor(principal, context, status, after, page_token)?;
        let st = self.shared.lock();
        // The one ordered set that holds exactly the tasks asked for (lists.rs): the caller's
        // or its context's, all or one state's.
        let lists = if context.is_empty() {
            st.by_principal.get(principal)
        } else {
            st.context_lists(context, principal)
        };
        let Some(lists) = lists else {
            drop(st);
            return Ok(self.page_from_rows(
                principal,
                context,
                status,
                after,
                Vec::new(),
                page_size,
                0,
                None,
            ));
        };
        let total_size = lists.count(status, after);
        // One more than the page: then there is a next page.
        let rows: Vec<_> = lists
            .page(
                status,
                after,
                cursor.as_ref().map(|(t, i)| (*t, i.as_str())),
                page_size + 1,
            )
            .into_iter()
            .map(|(ts, id)| {
                let upstream = st.tasks.get(&id).map_or(0, |t| t.upstream);
                (id.to_string(), upstream, ts)
            })
            .collect();
        drop(st);
        Ok(self.page_from_rows(
            principal, context, status, after, rows, page_size, total_size, None,
        ))
    }

    /// A page token that resumes right after the page's task `index` (a page cut short).
    pub fn token_after(&self, page: &ListPage, index: usize) -> String {
        let (Some((task_id, _)), Some(timestamp)) =
            (page.tasks.get(index), page.timestamps.get(index))
        else {
            return String::new();
        };
        let query = Query {
            principal: &page.query.0,
            context: &page.query.1,
            status: &page.query.2,
            after: page.query.3,
        };
        self.shared.key.mint(
            &query,
            &Cursor {
                timestamp: *timestamp,
                task_id: task_id.clone(),
            },
        )
    }

    /// The context id the agent is sent for the `contextId` a caller names: the caller's own
    /// context by the agent's id as it is; any other id (new, or someone else's) becomes the
    /// caller's alias of it ([`TokenKey::context_alias`]), so a caller can neither learn which
    /// ids are taken nor take a name another caller will use. Answers are mapped back with
    /// [`TaskRegistry::client_view`]. A context of the caller's that was evicted is still
    /// its own by its id (its tasks are still listed there, or its owner is remembered), so
    /// the caller goes on in that conversation rather than starting a new one under an alias.
    pub fn agent_context(&self, principal: &str, client_id: &str) -> String {
        let st = self.shared.lock();
        let own = match st.contexts.get(client_id) {
            Some(e) => &*e.owner == principal && e.client.is_none(),
            None => {
                st.context_lists(client_id, principal).is_some()
                    || st.forgotten.owned_by(Kind::Context, client_id, principal)
            }
        };
        if own {
            client_id.to_string()
        } else {
            self.shared.key.context_alias(principal, client_id)
        }
    }

    /// The agent's id of the context of the caller's task `task_id`, if it is the caller's.
    pub fn task_context(&self, principal: &str, task_id: &str) -> Option<String> {
        let st = self.shared.lock();
        st.tasks
            .get(task_id)
            .filter(|e| &*e.owner == principal)
            .map(|e| e.context.to_string())
    }

    /// Records that the agent's context `agent_id` is the caller's `client_id` (after the
    /// caller's turn reserved it).
    pub fn name_context(&self, principal: &str, agent_id: &str, client_id: &str) {
        let mut st = self.shared.lock();
        if let Some(e) = st.contexts.get_mut(agent_id) {
            if &*e.owner == principal && agent_id != client_id {
                e.client = Some(Arc::from(client_id));
            }
        }
    }

    /// Rewrites, in an answer to `principal`, every `contextId` that is the caller's alias
    /// back to the id the caller chose. The answer is walked without the registry's lock
    /// (answers can be large); the lock is taken once, to look up the ids found.
    pub fn client_view(&self, principal: &str, answer: &mut Value) {
        fn each(v: &mut Value, depth: usize, f: &mut dyn FnMut(&mut String)) {
            if depth > 128 {
                return;
            }
            match v {
                Value::Object(map) => {
                    for (k, v) in map.iter_mut() {
                        match v {
                            Value::String(id) if k == "contextId" => f(id),
                            _ => each(v, depth + 1, f),
                        }
                    }
                }
                Value::Array(items) => items.iter_mut().for_each(|i| each(i, depth + 1, f)),
                _ => {}
            }
        }
        let mut found: Vec<String> = Vec::new();
        each(answer, 0, &mut |id| {
            if is_context_alias(id) && !found.iter().any(|f| f == id) && found.len() < 64 {
                found.push(id.clone());
            }
        });
        if found.is_empty() {
            return;
        }
        let mapped: Vec<(String, Id)> = {
            let st = self.shared.lock();
            found
                .into_iter()
                .filter_map(|id| {
                    let client = st
                        .contexts
                        .get(id.as_str())
                        .filter(|e| &*e.owner == principal)
                        .and_then(|e| e.client.clone())?;
                    Some((id, client))
                })
                .collect()
        };
        if mapped.is_empty() {
            return;
        }
        each(answer, 0, &mut |id| {
            if let Some((_, client)) = mapped.iter().find(|(a, _)| a == id) {
                *id = client.to_string();
            }
        });
    }

    /// What the registry knows of one of the caller's tasks, as a minimal Task (id, context,
    /// state): listed in place of a task too large to list whole.
    pub fn task_summary(&self, principal: &str, task_id: &str) -> Option<Value> {
        let st = self.shared.lock();
        let e = st.tasks.get(task_id).filter(|e| &*e.owner == principal)?;
        let mut status = serde_json::Map::new();
        if !e.state.is_empty() {
            status.insert("state".into(), Value::from(&*e.state));
        }
        // The context by the id the caller chose, when it did.
        let context = st
            .contexts
            .get(&e.context)
            .and_then(|c| c.client.clone())
            .unwrap_or_else(|| e.context.clone());
        Some(serde_json::json!({"id": task_id, "contextId": &*context, "status": status}))
    }

    /// The id of the agent named `name` (policy `upstreams[].name`): the same for the life of
    /// the registry, whatever a reload does to the order of the upstreams, so that a context
    /// stays with its agent after a reload, and a removed agent's ids are never reused.
    pub fn upstream_id(&self, name: &str) -> UpstreamId {
        let mut names = self
            .shared
            .upstream_names
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match names.iter().position(|n| n == name) {
            Some(id) => id,
            None => {
                names.push(name.to_string());
                names.len() - 1
            }
        }
    }

    pub fn stats(&self) -> RegistryStats {
        let st = self.shared.lock();
        let (forgotten_contexts, forgotten_tasks) = st.forgotten.len();
        RegistryStats {
            tasks: st.tasks.len(),
            contexts: st.contexts.len(),
            running_contexts: st.running_contexts,
            pending_turns: st.pending_turns,
            foreign_ignored: st.counters.foreign_ignored,
            evicted_tasks: st.counters.evicted_tasks,
            evicted_contexts: st.counters.evicted_contexts,
            forgotten_contexts,
            forgotten_tasks,
            refused_full: st.counters.refused_full,
        }
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        self.shared.lock().check_invariants();
    }
}
