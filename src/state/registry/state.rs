//! The registry's data under its one lock: tasks, contexts, the ListTasks indexes and the
//! eviction order. Every method keeps these invariants:
//!
//! - each task is in `by_principal[owner]` and in its context's lists of that owner under
//!   `(ts, id)` with its state (lists.rs);
//! - an entry is in its LRU map exactly when it is not pinned (`lru` is `Some`);
//! - a context is pinned while a turn runs on it, a task while it is a running turn's task;
//! - `running_contexts` counts contexts with `running` set.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::facts::Fact;
use super::forgotten::{Forgotten, Kind, FORGOTTEN_PER_ENTRY};
use super::ids::{Id, IdMap};
use super::lists::Lists;
use super::UpstreamId;

/// Why an agent's answer must not reach the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrelayable {
    /// It names another caller's task or context (also one evicted from them).
    Foreign,
    /// It names a task in a shape that cannot be checked ([`super::facts::Fact::read`]).
    Malformed,
    /// The turn's busy lease in Redis was lost (another turn may run on its context now):
    /// the turn ends at its next answer (a stream sooner: `OwnedTurn::lease_lost`).
    LeaseLost,
    /// A new task or context it names cannot be recorded (every entry pinned by a running
    /// turn): relayed unrecorded, it would be free for the next caller it is named to.
    Full,
}

impl Unrelayable {
    /// The caller's error's reason (-32006 for the agent's answers, -32603 for a lost lease).
    pub fn reason(self) -> crate::reason::Reason {
        match self {
            Unrelayable::Foreign => crate::reason::UPSTREAM_FOREIGN_TASK,
            Unrelayable::Malformed => crate::reason::UPSTREAM_BAD_RESPONSE,
            Unrelayable::LeaseLost => crate::reason::CONTEXT_LEASE_LOST,
            Unrelayable::Full => crate::reason::REGISTRY_FULL,
        }
    }
}

impl From<super::facts::Malformed> for Unrelayable {
    fn from(_: super::facts::Malformed) -> Unrelayable {
        Unrelayable::Malformed
    }
}

/// A context's workspace, bound by the first turn that runs on it through the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Workspace {
    /// Learned from an agent's answer only (no turn through the proxy named it yet).
    Unbound,
    /// `None` is a value of its own: the agent's default directory.
    Bound(Option<String>),
}

pub(super) struct TaskEntry {
    pub owner: Id,
    pub upstream: UpstreamId,
    pub context: Id,
    /// Last known `status.state` (`""` when never seen); the A2A states' names are shared
    /// by every task ([`SharedState::state_id`]).
    pub state: Id,
    /// Last known `status.timestamp`, microseconds (0 when never seen).
    pub ts: u64,
    /// Position in `task_lru`; `None` while pinned.
    lru: Option<(u8, u64)>,
    /// Trusted until this second of [`State::now`] ([`State::trusted`]).
    pub until: u32,
}

pub(super) struct ContextEntry {
    pub owner: Id,
    /// The id the caller chose for it, when the agent knows it by the caller's alias
    /// ([`super::TaskRegistry::agent_context`]); `None`: the agent's own id.
    pub client: Option<Id>,
    pub upstream: Option<UpstreamId>,
    pub workspace: Workspace,
    pub running: Option<Running>,
    /// Position in `context_lru`; `None` while a turn runs.
    lru: Option<u64>,
    /// Trusted until this second of [`State::now`] ([`State::trusted`]).
    pub until: u32,
}

/// The turns in flight on a context: the first one, plus follow-ups that carry its task id.
pub(super) struct Running {
    pub turns: usize,
    /// The task the turn works on, once known (named by the request or first seen in answers).
    pub task: Option<Id>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counters {
    pub foreign_ignored: u64,
    pub evicted_tasks: u64,
    pub evicted_contexts: u64,
    pub refused_full: u64,
}

pub(super) struct State {
    pub max: usize,
    tick: u64,
    /// The registry's clock ([`State::now`]), and how long Redis keeps an entry after the
    /// write or read that confirmed it: `None` with `memory` (trusted for ever); with
    /// `redis`, the retention and the margin taken off every deadline ([`State::trust_for`]).
    clock: Instant,
    trust: Option<(Duration, Duration)>,
    // The maps by id are hash tables that never rebuild themselves while they churn
    // (`ids.rs`: no tombstones; a standard hash map of 100k+ entries that keeps inserting and
    // removing rehashed itself whole every few ten thousand inserts, under the registry's one
    // lock, which stalled every request for up to 170 ms under load); their hashes are keyed,
    // so ids aimed at one another gain an attacker nothing. The orders below are B-trees.
    pub tasks: IdMap<TaskEntry>,
    pub contexts: IdMap<ContextEntry>,
    /// Evictable tasks by (tier, last use): finished ones (tier 0) go before those the agent
    /// last reported as submitted or working (tier 1).
    task_lru: BTreeMap<(u8, u64), Id>,
    /// Contexts without a running turn, by last use.
    context_lru: BTreeMap<u64, Id>,
    /// Per principal, `(status timestamp, task id)` ascending, all and per state; read
    /// backwards for ListTasks.
    pub by_principal: BTreeMap<Id, Lists>,
    /// Per context id, its owners' lists: almost always one owner (a context's id may
    /// outlive its owner's memory of it, see the module note: tasks of two owners may then
    /// share one). A vector of exactly its length: a map took room for eleven.
    pub by_context: IdMap<Vec<(Id, Lists)>>,
    /// How many contexts each owner holds (for [`State::context_victim`]).
    contexts_of: BTreeMap<Id, usize>,
    /// The A2A task states' names, one `Arc` each for every task in that state.
    known_states: Vec<Id>,
    pub running_contexts: usize,
    /// Owners of evicted contexts: only they may take them up again.
    pub forgotten: Forgotten,
    /// Turns that started without a context: each may still create one.
    pub pending_turns: usize,
    pub counters: Counters,
}

/// How far a search for the inserting owner's own entry to evict looks (bounded work: past
/// it, the least recently used entry goes, as before).
const EVICTION_LOOK: usize = 256;

/// Tier 1 (evicted last): the agent was still working on it when last heard of.
fn tier(state: &str) -> u8 {
    match state {
        "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING" => 1,
        _ => 0,
    }
}

impl State {
    pub fn new(max: usize) -> State {
        State {
            max: max.max(1),
            tick: 0,
            clock: Instant::now(),
            trust: None,
            tasks: IdMap::new(),
            contexts: IdMap::new(),
            task_lru: BTreeMap::new(),
            context_lru: BTreeMap::new(),
            by_principal: BTreeMap::new(),
            by_context: IdMap::new(),
            contexts_of: BTreeMap::new(),
            // The A2A states' names, and "" (never seen).
            known_states: std::iter::once("")
                .chain(crate::validate::request::TASK_STATES)
                .map(Id::from)
                .collect(),
            running_contexts: 0,
            forgotten: Forgotten::new(max.max(1).saturating_mul(FORGOTTEN_PER_ENTRY)),
            pending_turns: 0,
            counters: Counters::default(),
        }
    }

    /// With `redis`: Redis keeps what is written `retention` after the write, and an entry
    /// is trusted until then less `margin` (the time between Redis's write or read and this
    /// registry's entry: at most the round trip's timeout, and a second for Redis's wall
    /// clock), rounded down to whole seconds: never after Redis may have forgotten it.
    pub fn trust_for(&mut self, retention: Duration, margin: Duration) {
        self.trust = Some((retention, margin));
    }

    /// Whole seconds since the registry began.
    pub fn now(&self) -> u32 {
        u32::try_from(self.clock.elapsed().as_secs()).unwrap_or(u32::MAX - 1)
    }

    /// The second of [`State::now`] until which an entry Redis keeps `valid` more is
    /// trusted ([`State::trust_for`]); with `memory`, for ever.
    pub fn until_after(&self, valid: Duration) -> u32 {
        let Some((_, margin)) = self.trust else {
            return u32::MAX;
        };
        let secs = (self.clock.elapsed() + valid)
            .saturating_sub(margin)
            .as_secs();
        u32::try_from(secs)
            .unwrap_or(u32::MAX - 1)
            .min(u32::MAX - 1)
    }

    /// Whether an entry trusted until `until` is trusted now: `false` once the shared store
    /// may have forgotten it (it is asked again then).
    pub fn trusted(&self, until: u32) -> bool {
        self.now() < until
    }

    /// Moves the registry's clock `d` ahead (tests).
    #[cfg(test)]
    pub fn age(&mut self, d: Duration) {
        if let Some(earlier) = self.clock.checked_sub(d) {
            self.clock = earlier;
        }
    }

    /// Remembers whose an evicted id was ([`Forgotten`]), with `memory` only: with `redis`
    /// the cache is not the truth, and an id it evicted is asked of Redis like any it never
    /// knew (remembering it here would refuse an id Redis forgot and someone claimed since).
    fn remember_evicted(&mut self, kind: Kind, id: &str, owner: &str) {
        if self.trust.is_none() {
            self.forgotten.remember(kind, id, owner);
        }
    }

    /// Until when a new entry is trusted: the retention after the write that made it.
    fn new_until(&self) -> u32 {
        match self.trust {
            None => u32::MAX,
            Some((retention, _)) => self.until_after(retention),
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// One shared `Arc` per principal name while it owns anything.
    fn principal_id(&self, principal: &str) -> Id {
        match self.by_principal.get_key_value(principal) {
            Some((k, _)) => k.clone(),
            None => match self.contexts_of.get_key_value(principal) {
                Some((k, _)) => k.clone(),
                None => Arc::from(principal),
            },
        }
    }

    /// One more context of `owner` (`true`) or one fewer.
    fn count_context(&mut self, owner: &Id, more: bool) {
        if more {
            *self.contexts_of.entry(owner.clone()).or_default() += 1;
        } else if let Some(n) = self.contexts_of.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.contexts_of.remove(owner);
            }
        }
    }

    /// The task to evict for a new one of `owner`: the least recently used, unless its owner
    /// holds fewer tasks than `owner` does; then `owner`'s own oldest one (by status time;
    /// not one a turn pins). So no caller pushes out the tasks of one who holds fewer than
    /// it: a caller that fills the registry evicts its own, and the others keep theirs.
    fn task_victim(&self, owner: &str) -> Option<Id> {
        let lru = self.task_lru.first_key_value().map(|(_, v)| v.clone())?;
        let held = |o: &str| self.by_principal.get(o).map_or(0, Lists::len);
        let theirs = self.tasks.get(&lru).map(|t| t.owner.clone())?;
        if *theirs == *owner || held(&theirs) >= held(owner) {
            return Some(lru);
        }
        let own = self.by_principal.get(owner).and_then(|lists| {
            lists.oldest_where(EVICTION_LOOK, |id| {
                self.tasks.get(id).is_some_and(|t| t.lru.is_some())
            })
        });
        Some(own.cloned().unwrap_or(lru))
    }

    /// As [`State::task_victim`], for contexts: `owner`'s own least recently used context
    /// when the least recently used one's owner holds fewer contexts than `owner` (looked
    /// for among the [`EVICTION_LOOK`] least recently used).
    fn context_victim(&self, owner: &str) -> Option<Id> {
        let (_, lru) = self.context_lru.first_key_value()?;
        let held = |o: &str| self.contexts_of.get(o).copied().unwrap_or(0);
        let theirs = &self.contexts.get(lru)?.owner;
        if **theirs == *owner || held(theirs) >= held(owner) {
            return Some(lru.clone());
        }
        let own = self
            .context_lru
            .values()
            .take(EVICTION_LOOK)
            .find(|id| self.contexts.get(id).is_some_and(|c| *c.owner == *owner));
        Some(own.unwrap_or(lru).clone())
    }

    /// `state` as an `Id`: the shared one of an A2A state's name, else a new one.
    fn state_id(&self, state: &str) -> Id {
        match self.known_states.iter().find(|s| ***s == *state) {
            Some(s) => s.clone(),
            None => Id::from(state),
        }
    }

    /// The lists of `owner`'s tasks in `context`.
    pub fn context_lists(&self, context: &str, owner: &str) -> Option<&Lists> {
        self.by_context
            .get(context)?
            .iter()
            .find(|(o, _)| **o == *owner)
            .map(|(_, lists)| lists)
    }

    /// Room for one more turn-in-flight (a running context or a turn awaiting its context).
    pub fn has_turn_room(&self) -> bool {
        self.running_contexts + self.pending_turns < self.max
    }

    // ---- tasks ----

    /// Records a new task; evicts the least recently used unpinned one when full. `None` when
    /// every task is pinned (nothing recorded).
    pub fn insert_task(
        &mut self,
        id: &str,
        owner: &str,
        upstream: UpstreamId,
        context: Id,
        state: &str,
        ts: u64,
    ) -> Option<Id> {
        if self.tasks.len() >= self.max {
            let victim = self.task_victim(owner)?;
            if let Some(gone) = self.remove_task(&victim) {
                self.remember_evicted(Kind::Task, &victim, &gone.owner);
            }
            self.counters.evicted_tasks += 1;
        }
        self.forgotten.forget(Kind::Task, id);
        let id: Id = Arc::from(id);
        let owner = self.principal_id(owner);
        let state = self.state_id(state);
        let key = (tier(&state), self.next_tick());
        self.task_lru.insert(key, id.clone());
        self.index(&owner, &context, ts, &id, &state);
        let until = self.new_until();
        self.tasks.insert(
            id.clone(),
            TaskEntry {
                owner,
                upstream,
                context,
                state,
                ts,
                lru: Some(key),
                until,
            },
        );
        Some(id)
    }

    /// Takes out an unpinned task the shared store no longer holds as it is here, without
    /// remembering its owner (the store lets whoever names the id next claim it).
    pub fn drop_task(&mut self, id: &str) {
        let Some((k, t)) = self.tasks.get_key_value(id) else {
            return;
        };
        if t.lru.is_some() {
            let k = k.clone();
            self.remove_task(&k);
        }
    }

    /// Redis has just written these (an answer's news, after this registry checked them): a
    /// write keeps them the retention from then, so they are trusted that long again.
    pub fn written(&mut self, task: Option<&str>, context: Option<&str>) {
        let until = self.new_until();
        if let Some(t) = task.and_then(|t| self.tasks.get_mut(t)) {
            t.until = until;
        }
        if let Some(c) = context.and_then(|c| self.contexts.get_mut(c)) {
            c.until = until;
        }
    }

    /// A task a running turn pins, that Redis holds as someone else's (Redis forgot it and
    /// someone claimed the id since): no longer the turn's (its context's running task is
    /// cleared, the task unpinned), so that [`State::drop_task`] can take it out.
    pub fn release_task(&mut self, id: &str) {
        let Some(t) = self.tasks.get(id) else {
            return;
        };
        if t.lru.is_some() {
            return;
        }
        let context = t.context.clone();
        if let Some(r) = self
            .contexts
            .get_mut(&context)
            .and_then(|c| c.running.as_mut())
        {
            if r.task.as_deref() == Some(id) {
                r.task = None;
            }
        }
        self.unpin_task(id);
    }

    /// A context a turn runs on, that Redis holds as `owner`'s (see [`State::release_task`]):
    /// rewritten in place as Redis holds it, so that it is refused to its former owner (the
    /// turn's own answers naming it included); the turn ends as any other.
    pub fn reassign_context(
        &mut self,
        id: &str,
        owner: &str,
        upstream: Option<UpstreamId>,
        workspace: Workspace,
        client: Option<&str>,
        until: u32,
    ) {
        let owner = self.principal_id(owner);
        let before = self.contexts.get(id).map(|c| c.owner.clone());
        if let Some(before) = before {
            self.count_context(&before, false);
            self.count_context(&owner, true);
        }
        if let Some(c) = self.contexts.get_mut(id) {
            c.owner = owner;
            c.upstream = upstream;
            c.workspace = workspace;
            c.client = client.filter(|c| *c != id).map(Id::from);
            c.until = until;
        }
    }

    /// [`State::drop_task`] for a context without a running turn.
    pub fn drop_context(&mut self, id: &str) {
        let Some(c) = self.contexts.get(id) else {
            return;
        };
        if let Some(key) = c.lru {
            self.context_lru.remove(&key);
            if let Some(gone) = self.contexts.remove(id) {
                self.count_context(&gone.owner, false);
            }
        }
    }

    fn remove_task(&mut self, id: &Id) -> Option<TaskEntry> {
        let t = self.tasks.remove(id)?;
        if let Some(key) = t.lru {
            self.task_lru.remove(&key);
        }
        self.unindex(&t.owner, &t.context, t.ts, id, &t.state);
        Some(t)
    }

    /// Takes a task out of its owner's and its context's lists.
    fn unindex(&mut self, owner: &Id, context: &Id, ts: u64, id: &Id, state: &str) {
        if let Some(lists) = self.by_principal.get_mut(owner) {
            lists.remove(ts, id, state);
            if lists.is_empty() {
                self.by_principal.remove(owner);
            }
        }
        if let Some(owners) = self.by_context.get_mut(context) {
            if let Some(at) = owners.iter().position(|(o, _)| o == owner) {
                owners[at].1.remove(ts, id, state);
                if owners[at].1.is_empty() {
                    owners.swap_remove(at);
                    owners.shrink_to_fit();
                }
            }
            if owners.is_empty() {
                self.by_context.remove(context);
            }
        }
    }

    /// Puts a task in its owner's and its context's lists.
    fn index(&mut self, owner: &Id, context: &Id, ts: u64, id: &Id, state: &Id) {
        self.by_principal
            .entry(owner.clone())
            .or_default()
            .insert(ts, id, state);
        let owners = self.by_context.entry_or_default(context.clone());
        match owners.iter_mut().find(|(o, _)| o == owner) {
            Some((_, lists)) => lists.insert(ts, id, state),
            None => {
                let mut lists = Lists::default();
                lists.insert(ts, id, state);
                owners.reserve_exact(1);
                owners.push((owner.clone(), lists));
            }
        }
    }

    /// Marks a use (no effect on a pinned task: it is re-queued when unpinned).
    pub fn touch_task(&mut self, id: &str) {
        let tick = self.next_tick();
        let Some(t) = self.tasks.get_mut(id) else {
            return;
        };
        if let Some(old) = t.lru {
            if let Some(k) = self.task_lru.remove(&old) {
                let key = (tier(&t.state), tick);
                self.task_lru.insert(key, k);
                t.lru = Some(key);
            }
        }
    }

    /// Applies a status seen in an answer: the state when given, the timestamp when given
    /// (otherwise the last known one stays), keeping the indexes and the tier in step.
    pub fn update_task(&mut self, id: &str, state: Option<&str>, ts: Option<u64>) {
        let state = state.map(|s| self.state_id(s));
        let Some(t) = self.tasks.get_mut(id) else {
            return;
        };
        let new_state = state.filter(|s| t.state != *s);
        let new_ts = ts.filter(|ts| *ts != t.ts);
        if new_state.is_some() || new_ts.is_some() {
            // The task moves within its lists (a new timestamp) or between their per-state
            // sets (a new state): out under the old keys, in under the new.
            let (owner, context, old_ts) = (t.owner.clone(), t.context.clone(), t.ts);
            let old_state = match new_state {
                Some(s) => std::mem::replace(&mut t.state, s),
                None => t.state.clone(),
            };
            t.ts = new_ts.unwrap_or(old_ts);
            let (ts, state) = (t.ts, t.state.clone());
            let id: Id = match self.tasks.get_key_value(id) {
                Some((k, _)) => k.clone(),
                None => return,
            };
            self.unindex(&owner, &context, old_ts, &id, &old_state);
            self.index(&owner, &context, ts, &id, &state);
        }
        self.touch_task(id);
    }

    fn pin_task(&mut self, id: &str) {
        if let Some(t) = self.tasks.get_mut(id) {
            if let Some(key) = t.lru.take() {
                self.task_lru.remove(&key);
            }
        }
    }

    fn unpin_task(&mut self, id: &str) {
        let tick = self.next_tick();
        let Some((k, t)) = self.tasks.get_key_value(id) else {
            return;
        };
        if t.lru.is_some() {
            return;
        }
        let (k, key) = (k.clone(), (tier(&t.state), tick));
        self.task_lru.insert(key, k);
        if let Some(t) = self.tasks.get_mut(id) {
            t.lru = Some(key);
        }
    }

    // ---- contexts ----

    /// Records a new context, running one turn when `running` is given. Evicts the least
    /// recently used context without a turn when full; `None` when there is none.
    pub fn insert_context(
        &mut self,
        id: &str,
        owner: &str,
        upstream: Option<UpstreamId>,
        workspace: Workspace,
        running: Option<Running>,
    ) -> Option<Id> {
        if self.contexts.len() >= self.max {
            let victim = self.context_victim(owner)?;
            if let Some(gone) = self.contexts.remove(&victim) {
                if let Some(key) = gone.lru {
                    self.context_lru.remove(&key);
                }
                self.count_context(&gone.owner, false);
                self.remember_evicted(Kind::Context, &victim, &gone.owner);
            }
            self.counters.evicted_contexts += 1;
        }
        self.forgotten.forget(Kind::Context, id);
        let id: Id = Arc::from(id);
        let owner = self.principal_id(owner);
        self.count_context(&owner, true);
        let lru = if running.is_some() {
            self.running_contexts += 1;
            None
        } else {
            let tick = self.next_tick();
            self.context_lru.insert(tick, id.clone());
            Some(tick)
        };
        let pinned_task = running.as_ref().and_then(|r| r.task.clone());
        let until = self.new_until();
        self.contexts.insert(
            id.clone(),
            ContextEntry {
                owner,
                client: None,
                upstream,
                workspace,
                running,
                lru,
                until,
            },
        );
        if let Some(t) = pinned_task {
            self.pin_task(&t);
        }
        Some(id)
    }

    pub fn touch_context(&mut self, id: &str) {
        let tick = self.next_tick();
        let Some(c) = self.contexts.get_mut(id) else {
            return;
        };
        if let Some(old) = c.lru {
            if let Some(k) = self.context_lru.remove(&old) {
                self.context_lru.insert(tick, k);
                c.lru = Some(tick);
            }
        }
    }

    /// One more turn on a known context; the first one pins it (and its task, when named).
    pub fn start_turn(&mut self, id: &str, task: Option<Id>) {
        let Some(c) = self.contexts.get_mut(id) else {
            return;
        };
        match &mut c.running {
            Some(r) => r.turns += 1,
            None => {
                c.running = Some(Running {
                    turns: 1,
                    task: task.clone(),
                });
                if let Some(key) = c.lru.take() {
                    self.context_lru.remove(&key);
                }
                self.running_contexts += 1;
                if let Some(t) = task {
                    self.pin_task(&t);
                }
            }
        }
    }

    /// One turn less; the last one unpins the context and its task.
    pub fn end_turn(&mut self, id: &str) {
        let tick = self.next_tick();
        let Some((k, c)) = self.contexts.get_key_value(id) else {
            return;
        };
        let k = k.clone();
        let last = match &c.running {
            Some(r) => r.turns <= 1,
            None => return,
        };
        let Some(c) = self.contexts.get_mut(id) else {
            return;
        };
        if !last {
            if let Some(r) = &mut c.running {
                r.turns -= 1;
            }
            return;
        }
        let task = c.running.take().and_then(|r| r.task);
        c.lru = Some(tick);
        self.context_lru.insert(tick, k);
        self.running_contexts -= 1;
        if let Some(t) = task {
            self.unpin_task(&t);
        }
    }

    /// A running context learns its task from the agent's first answer naming one.
    pub fn learn_running_task(&mut self, context: &str, task: &Id) {
        let Some(c) = self.contexts.get_mut(context) else {
            return;
        };
        if let Some(r) = &mut c.running {
            if r.task.is_none() {
                r.task = Some(task.clone());
                self.pin_task(task);
            }
        }
    }

    // ---- answers ----

    /// Records one observation for `principal`, never re-assigning anything. `Err` when the
    /// answer names another caller's task or context (also one evicted from them): nothing is
    /// learned, and the answer must not reach this caller.
    pub fn learn(
        &mut self,
        principal: &str,
        upstream: UpstreamId,
        fact: &Fact<'_>,
    ) -> Result<(), Unrelayable> {
        let known_task = self.check_tasks(principal, upstream, fact)?;
        self.learn_checked(principal, upstream, fact, known_task)
    }

    /// The tasks an answer names, checked before anything is touched: a known task must be
    /// the caller's and stay in its context (when the answer names one), an evicted one must
    /// have been the caller's. `Ok(true)`: the fact's task is known (and the caller's).
    pub fn check_tasks(
        &mut self,
        principal: &str,
        upstream: UpstreamId,
        fact: &Fact<'_>,
    ) -> Result<bool, Unrelayable> {
        let known_task = match fact.task {
            None => false,
            Some(t) => match self.tasks.get(t) {
                Some(e)
                    if *e.owner == *principal
                        && fact.context.map_or(true, |c| *e.context == *c) =>
                {
                    true
                }
                Some(_) => return Err(self.foreign(upstream, "task")),
                None if !self.forgotten.permits(Kind::Task, t, principal) => {
                    return Err(self.foreign(upstream, "task"))
                }
                None => false,
            },
        };
        if let Some(t) = fact.referenced_task {
            match self.tasks.get(t) {
                Some(e) if *e.owner == *principal => {}
                Some(_) => return Err(self.foreign(upstream, "task")),
                None if !self.forgotten.permits(Kind::Task, t, principal) => {
                    return Err(self.foreign(upstream, "task"))
                }
                None => {}
            }
        }
        Ok(known_task)
    }

    /// [`State::learn`] after [`State::check_tasks`] (`known_task`: what it returned).
    pub fn learn_checked(
        &mut self,
        principal: &str,
        upstream: UpstreamId,
        fact: &Fact<'_>,
        known_task: bool,
    ) -> Result<(), Unrelayable> {
        let context: Option<Id> = match fact.context {
            None => None,
            Some(c) => match self.contexts.get_mut(c) {
                Some(e) if &*e.owner != principal => return Err(self.foreign(upstream, "context")),
                Some(e) => {
                    // A context reserved before any agent answered is bound by its first answer.
                    e.upstream.get_or_insert(upstream);
                    self.touch_context(c);
                    self.contexts.get_key_value(c).map(|(k, _)| k.clone())
                }
                // Evicted from someone else: theirs still, as far as this caller goes.
                None if !self.forgotten.permits(Kind::Context, c, principal) => {
                    return Err(self.foreign(upstream, "context"))
                }
                None => {
                    let id =
                        self.insert_context(c, principal, Some(upstream), Workspace::Unbound, None);
                    if id.is_none() {
                        self.counters.refused_full += 1;
                        return Err(Unrelayable::Full);
                    }
                    id
                }
            },
        };
        match (fact.task, &context) {
            (Some(t), _) if known_task => self.update_task(t, fact.state, fact.timestamp),
            // A new task the answer names no context for cannot be recorded as the caller's
            // (a task lives in a context): relayed, it would be shown to this caller and
            // still be free for the next one the agent names it to. Not relayed.
            (Some(_), None) => return Err(Unrelayable::Malformed),
            (Some(t), Some(ctx)) => {
                let state = fact.state.unwrap_or("");
                let ts = fact.timestamp.unwrap_or(0);
                match self.insert_task(t, principal, upstream, ctx.clone(), state, ts) {
                    Some(id) => self.learn_running_task(ctx, &id),
                    None => {
                        self.counters.refused_full += 1;
                        return Err(Unrelayable::Full);
                    }
                }
            }
            _ => {}
        }
        if let Some(t) = fact.referenced_task {
            self.touch_task(t);
        }
        Ok(())
    }

    fn foreign(&mut self, upstream: UpstreamId, kind: &'static str) -> Unrelayable {
        self.counters.foreign_ignored += 1;
        tracing::warn!(event = "registry_foreign_id", upstream, kind);
        Unrelayable::Foreign
    }

    #[cfg(test)]
    pub fn check_invariants(&self) {
        let mut contexts_of = BTreeMap::<Id, usize>::new();
        for c in self.contexts.values() {
            *contexts_of.entry(c.owner.clone()).or_default() += 1;
        }
        assert_eq!(contexts_of, self.contexts_of, "contexts counted per owner");
        assert!(self.tasks.len() <= self.max, "tasks over the bound");
        assert!(self.contexts.len() <= self.max, "contexts over the bound");
        let unpinned = self.tasks.values().filter(|t| t.lru.is_some()).count();
        assert_eq!(unpinned, self.task_lru.len());
        let free = self.contexts.values().filter(|c| c.lru.is_some()).count();
        assert_eq!(free, self.context_lru.len());
        let running = self
            .contexts
            .values()
            .filter(|c| c.running.is_some())
            .count();
        assert_eq!(running, self.running_contexts);
        assert_eq!(running + free, self.contexts.len());
        for lists in self.by_principal.values().chain(
            self.by_context
                .values()
                .flat_map(|owners| owners.iter().map(|(_, lists)| lists)),
        ) {
            assert!(!lists.is_empty());
            lists.check();
        }
        for owners in self.by_context.values() {
            assert_eq!(owners.capacity(), owners.len());
        }
        let indexed: usize = self.by_principal.values().map(Lists::len).sum();
        assert_eq!(indexed, self.tasks.len());
        let indexed: usize = self
            .by_context
            .values()
            .flat_map(|owners| owners.iter().map(|(_, lists)| lists.len()))
            .sum();
        assert_eq!(indexed, self.tasks.len());
        for (id, t) in self.tasks.iter() {
            assert!(self.by_principal[&t.owner].holds(t.ts, id, &t.state));
            let indexed = self.context_lists(&t.context, &t.owner);
            assert!(indexed.is_some_and(|l| l.holds(t.ts, id, &t.state)));
        }
        // A task is pinned exactly while a running context names it as its turn's task.
        let running_tasks: Vec<&Id> = self
            .contexts
            .values()
            .filter_map(|c| c.running.as_ref()?.task.as_ref())
            .collect();
        for (id, t) in self.tasks.iter() {
            let named = running_tasks.iter().filter(|r| ***r == *id).count();
            assert_eq!(named, usize::from(t.lru.is_none()), "pinned task {id}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two owners' tasks under one context id (reachable once the forgotten owners' memory
    /// overflowed, see the module note): each owner's lists of the context hold its own tasks
    /// only, and the context's entry goes with the last task of the last owner.
    #[test]
    fn two_owners_of_one_context_id_keep_separate_lists() {
        let mut st = State::new(16);
        let ctx: Id = Id::from("c-shared");
        let a1 = st.insert_task("a1", "alice", 0, ctx.clone(), "TASK_STATE_WORKING", 10);
        let b1 = st.insert_task("b1", "bob", 0, ctx.clone(), "TASK_STATE_COMPLETED", 20);
        let a2 = st.insert_task("a2", "alice", 0, ctx.clone(), "TASK_STATE_COMPLETED", 30);
        st.check_invariants();
        let ids = |st: &State, owner: &str| -> Vec<String> {
            st.context_lists("c-shared", owner)
                .map(|l| l.page("", 0, None, 10))
                .unwrap_or_default()
                .into_iter()
                .map(|(_, id)| id.to_string())
                .collect()
        };
        assert_eq!(ids(&st, "alice"), ["a2", "a1"]);
        assert_eq!(ids(&st, "bob"), ["b1"]);
        assert_eq!(st.by_context.get("c-shared").map(Vec::len), Some(2));
        st.update_task("b1", Some("TASK_STATE_FAILED"), Some(40));
        st.check_invariants();
        let bob = st.context_lists("c-shared", "bob");
        assert_eq!(bob.map(|l| l.count("TASK_STATE_FAILED", 0)), Some(1));
        assert_eq!(bob.map(|l| l.count("TASK_STATE_COMPLETED", 0)), Some(0));
        for id in [b1, a1] {
            st.remove_task(&id.unwrap());
            st.check_invariants();
        }
        assert_eq!(ids(&st, "alice"), ["a2"]);
        assert!(st.context_lists("c-shared", "bob").is_none());
        assert_eq!(st.by_context.get("c-shared").map(Vec::len), Some(1));
        st.remove_task(&a2.unwrap());
        st.check_invariants();
        assert!(st.by_context.get("c-shared").is_none());
    }
}
