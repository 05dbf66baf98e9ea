//! A turn in flight through the proxy: the guard that keeps its context busy.

use std::sync::Arc;

use serde_json::Value;

use super::facts::Fact;
use super::forgotten::Kind;
use super::ids::Id;
use super::state::{Running, State, Unrelayable, Workspace};
use super::{Shared, UpstreamId};

/// A turn in flight: keeps its context busy until finished or dropped (client gone, error).
/// Owns a handle on the registry, so it can move into the task relaying the answer.
pub struct Turn {
    pub(super) shared: Arc<Shared>,
    pub(super) principal: String,
    /// `None` until the agent names the new context.
    pub(super) context: Option<Id>,
    pub(super) workspace: Option<String>,
    pub(super) upstream: Option<UpstreamId>,
}

impl Turn {
    /// The agent the context (or task) is bound to; `None` for a new context: pick one and
    /// call [`Turn::bind_upstream`].
    pub fn upstream(&self) -> Option<UpstreamId> {
        self.upstream
    }

    /// The context this turn runs on, once known.
    pub fn context_id(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// Records the agent chosen for a new context (affinity from the first byte sent, even
    /// if no answer is ever seen). An existing binding wins; returns the effective one.
    pub fn bind_upstream(&mut self, upstream: UpstreamId) -> UpstreamId {
        let bound = *self.upstream.get_or_insert(upstream);
        if let Some(c) = &self.context {
            if let Some(e) = self.shared.lock().contexts.get_mut(c) {
                e.upstream.get_or_insert(bound);
            }
        }
        bound
    }

    /// Learns from one answer of this turn (the unary result or each SSE event's `result`),
    /// like [`TaskRegistry::observe`](super::TaskRegistry::observe); in addition, a context the agent creates for this turn
    /// is bound to the turn's workspace and kept busy until the turn ends.
    /// `Err` when the answer names another caller's task or context (it must not be relayed).
    pub fn observe(&mut self, upstream: UpstreamId, result: &Value) -> Result<(), Unrelayable> {
        match Fact::read(result)? {
            Some(fact) => self.observe_fact(upstream, &fact),
            None => Ok(()),
        }
    }

    /// [`Turn::observe`] of what the shared store accepted already.
    pub(crate) fn observe_news(
        &mut self,
        upstream: UpstreamId,
        news: &crate::state::shared::News,
    ) -> Result<(), Unrelayable> {
        self.observe_fact(upstream, &Fact::from_news(news))?;
        self.shared
            .lock()
            .written(news.task.as_deref(), news.context.as_deref());
        Ok(())
    }

    fn observe_fact(&mut self, upstream: UpstreamId, fact: &Fact<'_>) -> Result<(), Unrelayable> {
        let fact = *fact;
        let shared = self.shared.clone();
        let mut st = shared.lock();
        // The tasks first: an answer refused for them adopts no context either.
        let known_task = st.check_tasks(&self.principal, upstream, &fact)?;
        self.upstream.get_or_insert(upstream);
        if self.context.is_none() {
            if let Some(c) = fact.context {
                self.adopt_context(&mut st, upstream, c);
            }
        }
        st.learn_checked(&self.principal, upstream, &fact, known_task)?;
        // This turn's answer names its task, even one known before (a new task is learned in
        // `learn` already); someone else's task or one from another context is not.
        if let (Some(t), Some(c)) = (fact.task, &self.context) {
            let ours = st
                .tasks
                .get_key_value(t)
                .filter(|(_, e)| *e.owner == *self.principal && e.context == *c)
                .map(|(k, _)| k.clone());
            if let Some(k) = ours {
                st.learn_running_task(c, &k);
            }
        }
        Ok(())
    }

    /// The agent named the context of a turn that started without one.
    fn adopt_context(&mut self, st: &mut State, upstream: UpstreamId, c: &str) {
        match st.contexts.get_key_value(c) {
            // Evicted from someone else: still theirs (as in `learn`, which then refuses the
            // answer); never adopted for this caller's new conversation.
            None if !st.forgotten.permits(Kind::Context, c, &self.principal) => {}
            None => {
                let running = Running {
                    turns: 1,
                    task: None,
                };
                let ws = Workspace::Bound(self.workspace.clone());
                match st.insert_context(c, &self.principal, Some(upstream), ws, Some(running)) {
                    Some(id) => {
                        st.pending_turns = st.pending_turns.saturating_sub(1);
                        self.context = Some(id);
                    }
                    None => st.counters.refused_full += 1,
                }
            }
            Some((k, e)) if *e.owner == *self.principal => {
                let k = k.clone();
                if let Some(e) = st.contexts.get_mut(c) {
                    if e.workspace == Workspace::Unbound {
                        e.workspace = Workspace::Bound(self.workspace.clone());
                    }
                }
                st.start_turn(c, None);
                st.pending_turns = st.pending_turns.saturating_sub(1);
                self.context = Some(k);
            }
            // Someone else's: `learn` counts and ignores it.
            Some(_) => {}
        }
    }

    /// Ends the turn (same as dropping it).
    pub fn finish(self) {}
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        match &self.context {
            Some(c) => st.end_turn(c),
            None => st.pending_turns = st.pending_turns.saturating_sub(1),
        }
    }
}
