//! Who owns which task and context: the one interface the gate asks, whatever the backend.
//!
//! - `memory`: the process's [`TaskRegistry`] decides everything (no I/O).
//! - `redis`: Redis decides ([`SharedOwners`]), atomically across replicas; the registry is
//!   this replica's bounded cache of the facts that do not change while Redis keeps them
//!   (owners, agents, the ids callers chose), each trusted no longer than Redis may keep it.
//!   A request's ids missing from the cache (or no longer trusted) are fetched in one round
//!   trip ([`Ownership::prefetch`]); a turn on a named context is one round trip (claim, workspace,
//!   busy lease); an answer that teaches something new is written before it is relayed (one
//!   round trip), so a caller that learns a task id from one replica finds it on every other.
//!   Redis unreachable: [`Refusal::Unavailable`], never a decision without it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::redis::StateUnavailable;
use super::registry::{Denial, ListPage, TaskRegistry, Turn, Unrelayable, UpstreamId};
use super::shared::{SharedOwners, TurnVerdict};
use crate::reason::{self, Reason};

/// What must be written before an answer is relayed; `Err` is the reason it must not be.
pub type Pending = Pin<Box<dyn Future<Output = Result<(), Reason>> + Send>>;

/// An observation's outcome, its write awaited (inside another write).
async fn written(observed: Result<Option<Pending>, Unrelayable>) -> Result<(), Reason> {
    match observed {
        Err(u) => Err(u.reason()),
        Ok(None) => Ok(()),
        Ok(Some(write)) => write.await,
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Denied(Denial),
    /// The shared store did not answer in time.
    Unavailable,
}

impl From<StateUnavailable> for Refusal {
    fn from(_: StateUnavailable) -> Refusal {
        Refusal::Unavailable
    }
}

/// The caller's error when the shared store did not answer: -32603 with
/// [`reason::STATE_UNAVAILABLE`] (nothing is decided without the store).
pub fn state_unavailable() -> crate::a2a::RpcError {
    crate::a2a::RpcError::new(
        crate::a2a::code::INTERNAL_ERROR,
        STATE_UNAVAILABLE_MESSAGE,
        reason::STATE_UNAVAILABLE,
    )
}

/// Its message.
pub const STATE_UNAVAILABLE_MESSAGE: &str = "Shared state unavailable";

/// At most this many ids of one request are fetched; the others count as unknown. More than
/// a valid request names (a task, 64 `referenceTaskIds`, a push config's task): every id it
/// names is confirmed, none is decided from what the cache no longer trusts.
const MAX_PREFETCH: usize = 128;

#[derive(Clone)]
pub struct Ownership {
    local: TaskRegistry,
    shared: Option<Arc<SharedOwners>>,
}

impl Ownership {
    pub fn new(local: TaskRegistry, shared: Option<Arc<SharedOwners>>) -> Ownership {
        if let Some(s) = &shared {
            local.trust_for(s.retention, s.store.timeout() + Duration::from_secs(1));
        }
        Ownership { local, shared }
    }

    /// The process's registry (with `redis`: its cache).
    pub fn registry(&self) -> &TaskRegistry {
        &self.local
    }

    /// Whether the truth is in Redis (else [`Ownership::prefetch`] has nothing to do).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Makes the cache know what Redis knows of these ids (no-op with `memory`, and for ids
    /// the cache knows and still trusts). Each context id is fetched with the caller's alias
    /// of it, unless the cache trusts that the id is the caller's own context (a follow-up
    /// turn by context id then asks Redis nothing before its TURN).
    pub async fn prefetch(
        &self,
        principal: &str,
        tasks: &[&str],
        contexts: &[&str],
    ) -> Result<(), Refusal> {
        if self.shared.is_none() {
            return Ok(());
        }
        let mut wanted: Vec<String> = Vec::new();
        for c in contexts
            .iter()
            .filter(|c| !c.is_empty())
            .take(MAX_PREFETCH / 2)
        {
            // (the alias the caller's id may stand for, unless it is the caller's own id)
            let alias = (!self.local.owns_as_named(principal, c))
                .then(|| self.local.context_alias(principal, c));
            for id in std::iter::once(c.to_string()).chain(alias) {
                if !wanted.contains(&id) {
                    wanted.push(id);
                }
            }
        }
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let tasks = self.local.untrusted_tasks(tasks, MAX_PREFETCH);
        let contexts = self.local.untrusted_contexts(&wanted, MAX_PREFETCH);
        self.confirm(tasks, contexts).await
    }

    /// Asks Redis of ids the cache does not know or no longer trusts (one round trip; none
    /// when there are none): what it holds is imported (replacing what the cache knew
    /// otherwise), what it no longer holds is forgotten here too (its retention ended).
    async fn confirm(&self, tasks: Vec<String>, contexts: Vec<String>) -> Result<(), Refusal> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        if tasks.is_empty() && contexts.is_empty() {
            return Ok(());
        }
        let (found_tasks, found_contexts) = shared.fetch(&tasks, &contexts).await?;
        let gone_tasks: Vec<&str> = tasks
            .iter()
            .filter(|t| !found_tasks.iter().any(|(id, _, _)| id == *t))
            .map(String::as_str)
            .collect();
        let gone_contexts: Vec<&str> = contexts
            .iter()
            .filter(|c| !found_contexts.iter().any(|(id, _)| id == *c))
            .map(String::as_str)
            .collect();
        self.local.forget_unconfirmed(&gone_tasks, &gone_contexts);
        for (id, t, ctx) in &found_tasks {
            if let Some(c) = ctx {
                self.import_context(&t.context, c);
            }
            let upstream = self.local.upstream_id(&t.agent);
            self.local
                .import_task(id, &t.owner, &t.context, upstream, &t.state, t.ts, t.valid);
        }
        for (id, c) in &found_contexts {
            self.import_context(id, c);
        }
        Ok(())
    }

    fn import_context(&self, id: &str, c: &super::shared::ContextRecord) {
        let upstream = c.agent.as_deref().map(|a| self.local.upstream_id(a));
        self.local.import_context(
            id,
            &c.owner,
            upstream,
            c.workspace.clone(),
            c.client.as_deref(),
            c.valid,
        );
    }

    /// Begins a SendMessage turn (see [`TaskRegistry::begin_turn`]); with `redis` the context
    /// is claimed, checked and leased in Redis first. `client` is the id the caller chose
    /// for the context, when the agent knows it by an alias. `streaming`: the answer is a
    /// stream; a unary turn on a new context takes no lease (nobody knows the context before
    /// its one answer, and the turn ends with it), which saves two round trips. `pick`: the
    /// agent a context no agent serves yet goes to, asked only for a context named with
    /// `redis` (bound to it in Redis now).
    #[allow(clippy::too_many_arguments)]
    pub async fn begin_turn(
        &self,
        principal: &str,
        task: Option<&str>,
        context: Option<&str>,
        workspace: Option<&str>,
        client: Option<&str>,
        streaming: bool,
        pick: impl FnOnce() -> Option<UpstreamId>,
    ) -> Result<OwnedTurn, Refusal> {
        let (task, context) = (
            task.filter(|s| !s.is_empty()),
            context.filter(|s| !s.is_empty()),
        );
        let Some(shared) = &self.shared else {
            let turn = self
                .local
                .begin_turn(principal, task, context, workspace)
                .map_err(Refusal::Denied)?;
            return Ok(self.owned(principal, turn, None, None, workspace));
        };
        let Some(c) = context else {
            // A new context: the agent names it, and the answer claims and leases it.
            let turn = self
                .local
                .begin_turn_as(principal, task, None, workspace, true)
                .map_err(Refusal::Denied)?;
            let lease = streaming.then(|| Lease::start(shared.clone()));
            return Ok(self.owned(principal, turn, lease, None, workspace));
        };
        // The script may lease the context and its answer be lost (an error, or this request
        // dropped while it waits: the caller left): then the lease is released (nothing
        // happens if there was none), or the caller's own context stays busy for the whole
        // lease.
        let (mut asking, token) = Unanswered::new_token(shared, c);
        // The lease runs from when it was asked for at the latest.
        let asked = Instant::now();
        let pick = pick().and_then(|id| self.local.upstream_name(id));
        let verdict = shared
            .turn(
                c,
                principal,
                task,
                workspace,
                &token,
                client,
                pick.as_deref(),
            )
            .await?;
        // Answered: a lease taken is the turn's from here on, else there is none.
        asking.token = None;
        let (lease, agent) = match verdict {
            TurnVerdict::Leased(agent) => (
                Some(Lease::with_token(shared.clone(), c, asked, token)),
                agent,
            ),
            // A follow-up holds the context too, with a lease of its own (`bf:`): it
            // stays busy while the agent works on this message, after the turn it
            // follows has ended.
            TurnVerdict::FollowUp(agent) => (
                Some(Lease::with_token(shared.clone(), c, asked, token)),
                agent,
            ),
            TurnVerdict::NotFound => return Err(Refusal::Denied(Denial::NotFound)),
            TurnVerdict::WorkspaceMismatch => {
                return Err(Refusal::Denied(Denial::WorkspaceMismatch))
            }
            TurnVerdict::ContextMismatch => return Err(Refusal::Denied(Denial::ContextMismatch)),
            TurnVerdict::Busy => return Err(Refusal::Denied(Denial::ContextBusy)),
        };
        // A refusal here drops the lease (released).
        let turn = self
            .local
            .begin_turn_as(principal, task, Some(c), workspace, true)
            .map_err(Refusal::Denied)?;
        let agent = agent.map(|a| self.local.upstream_id(&a));
        Ok(self.owned(principal, turn, lease, agent, workspace))
    }

    fn owned(
        &self,
        principal: &str,
        turn: Turn,
        lease: Option<Lease>,
        agent: Option<UpstreamId>,
        workspace: Option<&str>,
    ) -> OwnedTurn {
        OwnedTurn {
            // What Redis says serves the context (or task) wins over this cache.
            upstream: agent.or(turn.upstream()),
            turn: Arc::new(Mutex::new(turn)),
            lease: lease.map(Arc::new),
            principal: principal.to_string(),
            workspace: workspace.map(str::to_string),
            owners: self.clone(),
        }
    }

    /// Learns from an answer to a task-addressed request (GetTask, CancelTask, ...): with
    /// `redis`, the owners of the tasks it names without a context are fetched first, and
    /// what is new is written before it is relayed ([`Pending`]).
    pub fn observe(
        &self,
        principal: &str,
        upstream: UpstreamId,
        result: &Value,
    ) -> Result<Option<Pending>, Unrelayable> {
        if self.shared.is_none() {
            return self
                .local
                .observe(principal, upstream, result)
                .map(|_| None);
        }
        let (tasks, contexts) = self.local.untrusted_named(result);
        if tasks.is_empty() && contexts.is_empty() {
            return self.observe_known(principal, upstream, result);
        }
        let (owners, principal, result) = (self.clone(), principal.to_string(), result.clone());
        Ok(Some(Box::pin(async move {
            owners
                .confirm(tasks, contexts)
                .await
                .map_err(|_| reason::STATE_UNAVAILABLE)?;
            written(owners.observe_known(&principal, upstream, &result)).await
        })))
    }

    /// [`Ownership::observe`] once this replica's cache knows every task the answer names.
    fn observe_known(
        &self,
        principal: &str,
        upstream: UpstreamId,
        result: &Value,
    ) -> Result<Option<Pending>, Unrelayable> {
        let Some(shared) = &self.shared else {
            return self
                .local
                .observe(principal, upstream, result)
                .map(|_| None);
        };
        let Some(news) = self.local.news(result) else {
            return self
                .local
                .observe(principal, upstream, result)
                .map(|_| None);
        };
        // Refused here, nothing is written (Redis's script checks what it writes, not the
        // tasks a Message only refers to).
        self.local.check_news(principal, upstream, &news)?;
        let (shared, local) = (shared.clone(), self.local.clone());
        let principal = principal.to_string();
        let agent = self.local.upstream_name(upstream).unwrap_or_default();
        Ok(Some(Box::pin(async move {
            match shared
                .learn(&principal, &agent, &news, None, None, None)
                .await
            {
                Err(StateUnavailable) => Err(reason::STATE_UNAVAILABLE),
                Ok(false) => Err(reason::UPSTREAM_FOREIGN_TASK),
                Ok(true) => local
                    .observe_news(&principal, upstream, &news)
                    .map_err(Unrelayable::reason),
            }
        })))
    }

    /// [`Ownership::observe`], awaited.
    pub async fn learn(
        &self,
        principal: &str,
        upstream: UpstreamId,
        result: &Value,
    ) -> Result<(), Reason> {
        written(self.observe(principal, upstream, result)).await
    }

    /// A ListTasks page (see [`TaskRegistry::list`]); with `redis`, read from Redis.
    /// `after`: `statusTimestampAfter` in microseconds (0: none).
    pub async fn list(
        &self,
        principal: &str,
        context_id: Option<&str>,
        status: Option<&str>,
        after: u64,
        page_size: usize,
        page_token: Option<&str>,
    ) -> Result<ListPage, Refusal> {
        let Some(shared) = &self.shared else {
            return self
                .local
                .list_after(principal, context_id, status, after, page_size, page_token)
                .map_err(Refusal::Denied);
        };
        let (context, status) = super::registry::list_filters(context_id, status);
        let page_size = page_size.max(1);
        let cursor = self
            .local
            .open_cursor(principal, context, status, after, page_token)
            .map_err(Refusal::Denied)?;
        let cursor_ref = cursor.as_ref().map(|(ts, id)| (*ts, id.as_str()));
        let listed = shared
            .list(principal, context, status, after, cursor_ref, page_size)
            .await?;
        let rows = listed
            .rows
            .into_iter()
            .map(|r| {
                let upstream = self.local.upstream_id(&r.agent);
                if r.context_owned {
                    self.local.import_context(
                        &r.context,
                        principal,
                        Some(upstream),
                        None,
                        r.client_context.as_deref(),
                        r.valid,
                    );
                }
                self.local.import_task(
                    &r.task, principal, &r.context, upstream, &r.state, r.ts, r.valid,
                );
                (r.task, upstream, r.ts)
            })
            .collect();
        Ok(self.local.page_from_rows(
            principal,
            context,
            status,
            after,
            rows,
            page_size,
            listed.total,
            listed.stopped,
        ))
    }
}

/// Ends a turn where its answer's relay does not: the edge answers an error instead of the
/// agent ([`OwnedTurn::ender`]).
pub struct TurnEnd(Option<Arc<Lease>>);

impl TurnEnd {
    /// [`OwnedTurn::end`].
    pub fn end(&self) -> Option<Pending> {
        let end = self.0.as_ref()?.release_now();
        Some(Box::pin(async move {
            end.await;
            Ok(())
        }))
    }
}

/// A turn in flight (see [`Turn`]); with `redis`, it also holds the context's busy lease.
/// A clone is the same turn (and lease).
#[derive(Clone)]
pub struct OwnedTurn {
    turn: Arc<Mutex<Turn>>,
    lease: Option<Arc<Lease>>,
    upstream: Option<UpstreamId>,
    principal: String,
    workspace: Option<String>,
    owners: Ownership,
}

impl OwnedTurn {
    /// The agent the context (or task) is bound to; `None`: pick one and bind it.
    pub fn upstream(&self) -> Option<UpstreamId> {
        self.upstream
    }

    pub fn bind_upstream(&mut self, upstream: UpstreamId) -> UpstreamId {
        let bound = self.lock().bind_upstream(upstream);
        self.upstream = Some(bound);
        bound
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Turn> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Learns from one answer of this turn (see [`Turn::observe`]); with `redis`, the owners
    /// of the tasks it names without a context are fetched first, what is new is written
    /// before it is relayed, and a context the agent names for this turn is leased.
    /// An answer after the one that ended the turn (an agent that goes on: iac-code does
    /// after a provider error's FAILED) takes the context's lease again first, or ends the
    /// turn with `context.lease_lost` when another turn has begun on it meanwhile.
    pub fn observe(
        &mut self,
        upstream: UpstreamId,
        result: &Value,
    ) -> Result<Option<Pending>, Unrelayable> {
        self.observe_as(upstream, result, false)
    }

    /// [`OwnedTurn::observe`]; `last`: the turn's last answer ([`OwnedTurn::observe_held`]).
    fn observe_as(
        &mut self,
        upstream: UpstreamId,
        result: &Value,
        last: bool,
    ) -> Result<Option<Pending>, Unrelayable> {
        let released = self.lease.as_ref().filter(|l| l.is_released());
        let retake =
            released.and_then(|l| l.retake(TaskRegistry::task_named(result).unwrap_or("")));
        let Some(retake) = retake else {
            return self.observe_held(upstream, result, last);
        };
        let (mut turn, result) = (self.clone(), result.clone());
        Ok(Some(Box::pin(async move {
            retake.await?;
            written(turn.observe_held(upstream, &result, last)).await
        })))
    }

    /// [`OwnedTurn::observe`] while the turn holds its lease (or has released it for good);
    /// `last`: the turn's last answer, whose write releases the lease too.
    fn observe_held(
        &mut self,
        upstream: UpstreamId,
        result: &Value,
        last: bool,
    ) -> Result<Option<Pending>, Unrelayable> {
        if self.owners.shared.is_none() {
            return self.lock().observe(upstream, result).map(|_| None);
        }
        // The context's lease was lost: another turn may run on it, so this one ends (its
        // answers are no longer one turn's at a time).
        if self.lease.as_ref().is_some_and(|l| *l.inner.lost.borrow()) {
            return Err(Unrelayable::LeaseLost);
        }
        let (tasks, contexts) = self.owners.local.untrusted_named(result);
        if tasks.is_empty() && contexts.is_empty() {
            return self.observe_known(upstream, result, last);
        }
        let (mut turn, result) = (self.clone(), result.clone());
        Ok(Some(Box::pin(async move {
            turn.owners
                .confirm(tasks, contexts)
                .await
                .map_err(|_| reason::STATE_UNAVAILABLE)?;
            written(turn.observe_known(upstream, &result, last)).await
        })))
    }

    /// [`OwnedTurn::observe`] of a turn's last answer (a unary answer, or the event that ends a
    /// stream's turn: [`crate::a2a::ends_turn`]): with `redis`, the context's busy lease is
    /// released before the answer is relayed: in the script that writes what the answer
    /// teaches (whose failure refuses the answer), else by a RELEASE of its own (a try Redis
    /// leaves unanswered is repeated in the background, and the answer goes out). So a
    /// follow-up sent the moment the answer arrives, through any replica, does not find the
    /// context busy with the turn it follows (the memory backend lets such a follow-up
    /// through too). One that comes after the lease was released (the agent went on, and
    /// ends again) takes it again first, as [`OwnedTurn::observe`] does.
    pub fn observe_last(
        &mut self,
        upstream: UpstreamId,
        result: &Value,
    ) -> Result<Option<Pending>, Unrelayable> {
        let pending = self.observe_as(upstream, result, true)?;
        let Some(lease) = self.lease.clone() else {
            return Ok(pending);
        };
        Ok(Some(Box::pin(async move {
            if let Some(p) = pending {
                p.await?;
            }
            lease.release_now().await;
            Ok(())
        })))
    }

    /// The turn's last answer is an error (the agent's, or the edge's instead of one): with
    /// `redis`, the context's busy lease is released before it is relayed, as after
    /// [`OwnedTurn::observe_last`]. `None` without a lease.
    pub fn end(&self) -> Option<Pending> {
        self.ender().end()
    }

    /// What ends this turn from outside its answer's relay ([`OwnedTurn::end`]).
    pub fn ender(&self) -> TurnEnd {
        TurnEnd(self.lease.clone())
    }

    /// Resolves when this turn's busy lease is lost ([`LeaseInner::lost`]), so that a stream
    /// ends then, not at its agent's next answer; `None` when the turn holds no lease.
    pub fn lease_lost(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        let mut lost = self.lease.as_ref()?.inner.lost.subscribe();
        Some(async move {
            // An error: the lease was dropped (the turn ended) without being lost.
            if lost.wait_for(|lost| *lost).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    /// [`OwnedTurn::observe`] once this replica's cache knows every task the answer names.
    /// `last`: the turn's last answer: its write releases the turn's lease first, in the same
    /// script (one round trip where the release would be one more), and leases nothing.
    fn observe_known(
        &mut self,
        upstream: UpstreamId,
        result: &Value,
        last: bool,
    ) -> Result<Option<Pending>, Unrelayable> {
        let Some(shared) = self.owners.shared.clone() else {
            return self.lock().observe(upstream, result).map(|_| None);
        };
        let Some(news) = self.owners.local.news(result) else {
            return self.lock().observe(upstream, result).map(|_| None);
        };
        // Refused here, nothing is written (as in `Ownership::observe_known`).
        self.owners
            .local
            .check_news(&self.principal, upstream, &news)?;
        let turn = self.turn.clone();
        let lease = self.lease.clone();
        let principal = self.principal.clone();
        // A context the answer did not name (inferred from its known task) is not adopted.
        let adopting = self.lock().context_id().is_none() && !news.inferred_context;
        let workspace = self.workspace.clone();
        let agent = self
            .owners
            .local
            .upstream_name(upstream)
            .unwrap_or_default();
        Ok(Some(Box::pin(async move {
            // Taken when the write runs: a write dropped before it leaves the lease to the
            // turn's end.
            let release = match lease.as_ref().filter(|_| last) {
                Some(l) => {
                    let release = l.take_release();
                    // The answer that ends the turn names its new context: the context the
                    // agent may go on in ([`Lease::retake`]).
                    if let (None, true, Some(c)) = (&release, adopting, &news.context) {
                        l.released_on(c);
                    }
                    release
                }
                None => None,
            };
            // The turn's lease goes with what the answer teaches about the turn's own
            // context (its task is written into the lease; a follow-up takes the lease once
            // the turn it follows released it) or one the turn adopts (leased to it), none
            // once the turn's last answer released it. Another context the agent names (its
            // own id for the conversation the caller named) is not the turn's: leased, it
            // would be neither renewed nor released, and stay busy after the turn (the
            // memory backend keeps only the turn's own context busy too).
            let token = lease
                .as_ref()
                .filter(|l| !l.is_released())
                .filter(|l| adopting || news.context.as_deref().is_some_and(|c| l.holds(c)))
                .map(|l| l.inner.token());
            // Only a context the agent names for this turn is bound to its workspace here
            // (a named one was bound when the turn began).
            let bind = adopting.then_some(workspace.as_deref());
            // A context adopted is leased from when it was asked for at the latest.
            let asked = Instant::now();
            // The script may lease the context (or release it) and its answer be lost (an
            // error, or this write dropped with its request): the lease is released then.
            let (context, taking) = match &release {
                Some((context, token)) => (context.clone(), Some(token.clone())),
                None => (
                    news.context.clone().unwrap_or_default(),
                    token.clone().filter(|_| news.context.is_some()),
                ),
            };
            let mut asking = Unanswered {
                owners: shared.clone(),
                context,
                token: taking,
            };
            let releasing = release.as_ref().map(|(c, t)| (c.as_str(), t.as_str()));
            let learned = shared
                .learn(&principal, &agent, &news, token.as_deref(), bind, releasing)
                .await;
            if learned.is_ok() {
                asking.token = None;
            }
            match learned {
                Err(StateUnavailable) => Err(reason::STATE_UNAVAILABLE),
                Ok(false) => Err(reason::UPSTREAM_FOREIGN_TASK),
                Ok(true) => {
                    if let (Some(l), Some(c), false) =
                        (&lease, &news.context, news.inferred_context)
                    {
                        l.adopt(c, asked);
                    }
                    turn.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .observe_news(upstream, &news)
                        .map_err(Unrelayable::reason)
                }
            }
        })))
    }
}

struct LeaseInner {
    /// The lease's token in Redis (a new one when the lease is taken again:
    /// [`Lease::retake`]).
    token: Mutex<String>,
    /// The context (`None` until the agent names the turn's new one), and when the last
    /// round trip that Redis answered holding the lease for this turn was sent (the take,
    /// then each renewal): the lease runs out in Redis one `busy_lease_ms` after it at the
    /// latest.
    held: Mutex<Option<(String, Instant)>>,
    /// Set once the lease is no longer this turn's: a renewal found it gone or someone
    /// else's (a failover or an eviction dropped it), or renewals failed (Redis unreachable)
    /// until it ran out. Another turn may run on the context now.
    lost: watch::Sender<bool>,
    /// Set once the turn's last answer released the lease ([`Lease::release_now`]); cleared
    /// when the agent goes on and the lease is taken again ([`Lease::retake`]).
    released: AtomicBool,
    /// The context the lease was released on, while it is released.
    released_on: Mutex<Option<String>>,
}

impl LeaseInner {
    fn token(&self) -> String {
        self.token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The lease is no longer this turn's: it ends at once if it streams
    /// (`OwnedTurn::lease_lost`), else at its answer (`OwnedTurn::observe`).
    fn set_lost(&self, context: &str) {
        tracing::warn!(event = "lease_lost", context);
        self.lost.send_replace(true);
    }
}

/// A script that may take or release a lease (TURN, RETAKE, a LEARN that leases a context
/// or releases the turn's lease), whose answer has not come: dropped before it is answered
/// (an error, or the request dropped while it waits), the lease is released (best effort;
/// tried again for a while: [`SharedOwners::release_unanswered`]).
struct Unanswered {
    owners: Arc<SharedOwners>,
    context: String,
    /// `None` once answered.
    token: Option<String>,
}

impl Unanswered {
    /// A new lease token, to be asked for on `context`: released unless answered.
    fn new_token(owners: &Arc<SharedOwners>, context: &str) -> (Unanswered, String) {
        let token = crate::crypto::random_token();
        let asking = Unanswered {
            owners: owners.clone(),
            context: context.to_string(),
            token: Some(token.clone()),
        };
        (asking, token)
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        let (Some(token), Ok(rt)) = (self.token.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (owners, context) = (self.owners.clone(), std::mem::take(&mut self.context));
        rt.spawn(async move { owners.release_unanswered(&context, &token).await });
    }
}

/// A context's busy lease in Redis: renewed every third of `busy_lease_ms` while held,
/// released when dropped (the turn ended); a replica that dies stops renewing it.
pub struct Lease {
    owners: Arc<SharedOwners>,
    inner: Arc<LeaseInner>,
    /// Renews the lease while it is held ([`renew_while_held`]).
    renewer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Lease {
    /// A lease on a context the agent names later (taken by the answer that names it).
    fn start(owners: Arc<SharedOwners>) -> Lease {
        Self::with_token(owners, "", Instant::now(), crate::crypto::random_token())
    }

    /// The lease `token` on `context`, asked for at `asked`.
    fn with_token(
        owners: Arc<SharedOwners>,
        context: &str,
        asked: Instant,
        token: String,
    ) -> Lease {
        let inner = Arc::new(LeaseInner {
            token: Mutex::new(token),
            held: Mutex::new(Some((context.to_string(), asked)).filter(|(c, _)| !c.is_empty())),
            lost: watch::Sender::new(false),
            released: AtomicBool::new(false),
            released_on: Mutex::new(None),
        });
        let renewer = renew_while_held(owners.clone(), inner.clone());
        Lease {
            owners,
            inner,
            renewer: Mutex::new(Some(renewer)),
        }
    }

    /// The agent named the turn's new context, leased by the write asked for at `asked`.
    fn adopt(&self, context: &str, asked: Instant) {
        let mut held = self
            .inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if held.is_none() && !self.is_released() {
            *held = Some((context.to_string(), asked));
        }
    }

    /// Whether the lease is held on `context` (the turn's own).
    fn holds(&self, context: &str) -> bool {
        self.inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|(c, _)| c == context)
    }

    fn is_released(&self) -> bool {
        self.inner.released.load(Ordering::Relaxed)
    }

    /// The lease is this turn's no more: its renewals stop, and the turn takes the context
    /// no more (until [`Lease::retake`]). The context and token to release in Redis, when it
    /// held one.
    fn take_release(&self) -> Option<(String, String)> {
        self.stop_renewing();
        self.inner.released.store(true, Ordering::Relaxed);
        let held = self
            .inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let (context, _) = held?;
        // A lost lease is someone else's now, or gone: nothing to release (nor take again).
        if *self.inner.lost.borrow() {
            return None;
        }
        self.released_on(&context);
        Some((context, self.inner.token()))
    }

    /// The context a released lease may be taken again on ([`Lease::retake`]).
    fn released_on(&self, context: &str) {
        *self
            .inner
            .released_on
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(context.to_string());
    }

    fn stop_renewing(&self) {
        let renewer = self
            .renewer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(r) = renewer {
            r.abort();
        }
    }

    /// The agent goes on after the turn's last answer released the lease (with `task`):
    /// takes it again, under a new token (a release of the old one still being tried cannot
    /// end it), and renews it again. Resolves to `context.lease_lost` (the lease set lost)
    /// when another turn holds the context now, `state.unavailable` when Redis does not
    /// answer (a lease it may have taken is released behind it). `None` while the lease is
    /// held, once it is lost, or when it was released before the turn named a context.
    fn retake(self: &Arc<Self>, task: &str) -> Option<Pending> {
        if !self.is_released() || *self.inner.lost.borrow() {
            return None;
        }
        let context = self
            .inner
            .released_on
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let (lease, task) = (self.clone(), task.to_string());
        Some(Box::pin(async move {
            let owners = lease.owners.clone();
            let (mut asking, token) = Unanswered::new_token(&owners, &context);
            let asked = Instant::now();
            let old = lease.inner.token();
            let taken = owners.retake(&context, &token, &old, &task).await;
            if taken.is_ok() {
                asking.token = None;
            }
            match taken {
                Err(StateUnavailable) => Err(reason::STATE_UNAVAILABLE),
                Ok(false) => {
                    lease.inner.set_lost(&context);
                    Err(reason::CONTEXT_LEASE_LOST)
                }
                Ok(true) => {
                    let inner = &lease.inner;
                    *inner.token.lock().unwrap_or_else(PoisonError::into_inner) = token;
                    *inner.held.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some((context, asked));
                    *inner
                        .released_on
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = None;
                    inner.released.store(false, Ordering::Relaxed);
                    let renewer = renew_while_held(owners, inner.clone());
                    *lease.renewer.lock().unwrap_or_else(PoisonError::into_inner) = Some(renewer);
                    Ok(())
                }
            }
        }))
    }
}

impl Lease {
    /// Releases the lease now (not when dropped), resolving once Redis has answered the
    /// first try; its renewals stop, and the turn takes the context no more. The release
    /// runs in a task of its own: a caller that leaves meanwhile does not cancel it.
    fn release_now(&self) -> impl Future<Output = ()> + Send + 'static {
        let first = self.take_release().map(|(c, token)| {
            let rt = tokio::runtime::Handle::current();
            spawn_release(&rt, self.owners.clone(), c, token)
        });
        async move {
            if let Some(first) = first {
                let _ = first.await;
            }
        }
    }
}

/// Releases the lease `token` holds on `context`, in a task of its own on `rt`: the receiver
/// resolves once Redis has answered the first try; one it left unanswered is tried again
/// ([`SharedOwners::release_unanswered`]: Redis may still take it late).
fn spawn_release(
    rt: &tokio::runtime::Handle,
    owners: Arc<SharedOwners>,
    context: String,
    token: String,
) -> tokio::sync::oneshot::Receiver<()> {
    let (answered, first) = tokio::sync::oneshot::channel();
    rt.spawn(async move {
        let outcome = owners.release(&context, &token).await;
        let _ = answered.send(());
        if outcome.is_err() {
            owners.release_unanswered(&context, &token).await;
        }
    });
    first
}

/// Renews a lease every third of `busy_lease_ms` while it is held; sets it lost when a
/// renewal finds it gone or someone else's, or renewals fail until it runs out.
fn renew_while_held(
    owners: Arc<SharedOwners>,
    inner: Arc<LeaseInner>,
) -> tokio::task::JoinHandle<()> {
    let (o, i) = (owners, inner);
    tokio::spawn(async move {
        let every = (o.lease / 3).max(Duration::from_millis(50));
        let mut next = Instant::now() + every;
        loop {
            let held = i
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            // Past `deadline` the lease has run out in Redis (renewals failing, Redis
            // away or slow, as a dead replica's does): another turn may have begun, so
            // the wait for the next renewal, or for its answer, ends there.
            let deadline = held.as_ref().map(|(_, confirmed)| *confirmed + o.lease);
            let until = deadline.map_or(next, |d| d.min(next));
            tokio::time::sleep_until(until).await;
            let Some((c, _)) = held else {
                next += every;
                continue;
            };
            let ran_out = || deadline.is_some_and(|d| Instant::now() >= d);
            let asked = Instant::now();
            let lost = ran_out()
                || match tokio::time::timeout_at(
                    deadline.unwrap_or(asked + o.lease),
                    o.renew(&c, &i.token()),
                )
                .await
                {
                    Ok(Ok(true)) => {
                        if let Some((_, at)) = i
                            .held
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .as_mut()
                        {
                            *at = asked;
                        }
                        false
                    }
                    // Gone or someone else's.
                    Ok(Ok(false)) => true,
                    // Unanswered: lost once the lease has run out.
                    Ok(Err(StateUnavailable)) => ran_out(),
                    Err(_) => true,
                };
            if lost {
                i.set_lost(&c);
                return;
            }
            next = asked + every;
        }
    })
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop_renewing();
        let context = self
            .inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .map(|(c, _)| c);
        let (Some(c), Ok(rt)) = (context, tokio::runtime::Handle::try_current()) else {
            return;
        };
        // (nobody waits for its answer)
        drop(spawn_release(
            &rt,
            self.owners.clone(),
            c,
            self.inner.token(),
        ));
    }
}
