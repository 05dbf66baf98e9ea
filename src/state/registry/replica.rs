//! What a replica's registry needs when Redis holds the truth (`[state] backend = "redis"`):
//! the registry is then a bounded cache of facts that do not change while Redis keeps them
//! (who owns a task or context, which agent serves it, the id a caller chose for a context),
//! filled from Redis ([`TaskRegistry::import_task`], [`TaskRegistry::import_context`]) and
//! from answers; what changes (busy contexts, states, listings) is asked of Redis each time.
//! Redis forgets an id `task_retention_ms` after its last write, and then whoever names it
//! next claims it: so an entry is trusted only as long as Redis may still hold it (the
//! retention after this replica wrote it, the key's TTL when it was read), then asked again
//! ([`TaskRegistry::untrusted_tasks`]); what Redis no longer holds is forgotten, what it holds as
//! another caller's replaces what was known.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::facts::Fact;
use super::state::{State, Workspace};
use super::token::{Cursor, Query};
use super::{present, Denial, ListPage, TaskRegistry, UpstreamId};
use crate::state::shared::News;

impl TaskRegistry {
    /// With `redis`: entries are trusted for as long as Redis keeps them after the write or
    /// read that confirmed them (Redis forgets an id `retention` after its last write), less
    /// `margin`, then asked of Redis again.
    pub fn trust_for(&self, retention: Duration, margin: Duration) {
        self.shared.lock().trust_for(retention, margin);
    }

    /// Whether this registry knows task `id` and may still trust what it knows (tests).
    #[cfg(test)]
    pub fn trusts_task(&self, id: &str) -> bool {
        self.untrusted_tasks(&[id], 1).is_empty()
    }

    /// [`TaskRegistry::trusts_task`] for a context (tests).
    #[cfg(test)]
    pub fn trusts_context(&self, id: &str) -> bool {
        self.untrusted_contexts(&[id], 1).is_empty()
    }

    /// The alias the agent knows `client_id` by for `principal` (see [`TaskRegistry::agent_context`]).
    pub fn context_alias(&self, principal: &str, client_id: &str) -> String {
        self.shared.key.context_alias(principal, client_id)
    }

    /// The policy name of the agent with id `id`.
    pub fn upstream_name(&self, id: UpstreamId) -> Option<String> {
        self.shared
            .upstream_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Records a task as Redis holds it (its state and timestamp too), trusted for `valid`
    /// (what Redis keeps it still; zero: asked again at its next use). A task this registry knows as another caller's, in
    /// another context or at another agent (Redis forgot it and someone claimed the id since)
    /// is replaced, also while a turn runs on it here (it is no longer that turn's).
    #[allow(clippy::too_many_arguments)]
    pub fn import_task(
        &self,
        id: &str,
        owner: &str,
        context: &str,
        upstream: UpstreamId,
        state: &str,
        ts: u64,
        valid: Duration,
    ) {
        let mut st = self.shared.lock();
        let until = st.until_after(valid);
        match st.tasks.get_mut(id) {
            Some(t) if *t.owner == *owner && *t.context == *context && t.upstream == upstream => {
                t.until = until;
                // Redis's state is the last any replica learned: a stale one kept here would
                // hide the next answer's state as no news, and Redis would keep the older one.
                st.update_task(id, Some(state), Some(ts));
                return;
            }
            Some(_) => {
                st.release_task(id);
                st.drop_task(id);
            }
            None => {}
        }
        let context: Arc<str> = match st.contexts.get_key_value(context) {
            Some((k, _)) => k.clone(),
            None => Arc::from(context),
        };
        if st
            .insert_task(id, owner, upstream, context, state, ts)
            .is_none()
        {
            st.counters.refused_full += 1;
            return;
        }
        if let Some(t) = st.tasks.get_mut(id) {
            t.until = until;
        }
    }

    /// Records a context as Redis holds it (see [`TaskRegistry::import_task`]; one a turn
    /// runs on here is rewritten in place). `workspace`: `None` not bound yet.
    pub fn import_context(
        &self,
        id: &str,
        owner: &str,
        upstream: Option<UpstreamId>,
        workspace: Option<Option<String>>,
        client: Option<&str>,
        valid: Duration,
    ) {
        let mut st = self.shared.lock();
        let until = st.until_after(valid);
        let ws = match workspace {
            None => Workspace::Unbound,
            Some(w) => Workspace::Bound(w),
        };
        match st.contexts.get_mut(id) {
            Some(c) if *c.owner == *owner => {
                // Redis's agent, once it has one (a context reserved here has none yet).
                if upstream.is_some() {
                    c.upstream = upstream;
                }
                c.until = until;
                return;
            }
            Some(_) => {
                st.drop_context(id);
                if st.contexts.contains_key(id) {
                    return st.reassign_context(id, owner, upstream, ws, client, until);
                }
            }
            None => {}
        }
        if st.insert_context(id, owner, upstream, ws, None).is_none() {
            st.counters.refused_full += 1;
            return;
        }
        if let Some(e) = st.contexts.get_mut(id) {
            e.until = until;
            if let Some(c) = client.filter(|c| *c != id) {
                e.client = Some(Arc::from(c));
            }
        }
    }

    /// The ids of `ids` this registry does not know or no longer trusts (with `redis`: to be
    /// asked of Redis), at most `cap`.
    pub fn untrusted_tasks(&self, ids: &[&str], cap: usize) -> Vec<String> {
        self.untrusted(ids, cap, |st, id| st.tasks.get(id).map(|e| e.until))
    }

    /// [`TaskRegistry::untrusted_tasks`] for contexts.
    pub fn untrusted_contexts(&self, ids: &[&str], cap: usize) -> Vec<String> {
        self.untrusted(ids, cap, |st, id| st.contexts.get(id).map(|e| e.until))
    }

    /// Whether this registry trusts that `context` is `principal`'s under that very id (not
    /// a context it knows by another name): then the id is no alias of the caller's
    /// ([`TaskRegistry::agent_context`] keeps it), and Redis need not be asked of one.
    pub fn owns_as_named(&self, principal: &str, context: &str) -> bool {
        let st = self.shared.lock();
        st.contexts
            .get(context)
            .is_some_and(|e| st.trusted(e.until) && *e.owner == *principal && e.client.is_none())
    }

    /// The ids whose entry (`until`: its deadline, if known) is missing or past it: under
    /// one lock and one reading of the clock, copying only those.
    fn untrusted(
        &self,
        ids: &[&str],
        cap: usize,
        until: impl Fn(&State, &str) -> Option<u32>,
    ) -> Vec<String> {
        let st = self.shared.lock();
        let now = st.now();
        ids.iter()
            .filter(|id| !id.is_empty() && !until(&st, id).is_some_and(|u| now < u))
            .take(cap)
            .map(|id| id.to_string())
            .collect()
    }

    /// Forgets what Redis was asked of and no longer holds (its retention ended): tasks and
    /// contexts this registry no longer trusts, unless a turn runs on them here. Nothing of
    /// their owners is remembered: as in Redis, whoever names such an id next claims it.
    pub fn forget_unconfirmed(&self, tasks: &[&str], contexts: &[&str]) {
        let mut st = self.shared.lock();
        for t in tasks {
            if st.tasks.get(t).is_some_and(|e| !st.trusted(e.until)) {
                st.drop_task(t);
            }
        }
        for c in contexts {
            if st.contexts.get(c).is_some_and(|e| !st.trusted(e.until)) {
                st.drop_context(c);
            }
        }
    }

    /// What `result` teaches that this registry does not know yet (a new task or context, a
    /// new state or timestamp): what must be written to the shared store before the answer is
    /// relayed. `None` when nothing is new (or the answer names no context and no task this
    /// registry knows: a known task's new state is news in its own context, as the memory
    /// backend records it).
    pub fn news(&self, result: &Value) -> Option<News> {
        let fact = Fact::read(result).ok()??;
        let st = self.shared.lock();
        let context: &str = match fact.context {
            Some(c) => c,
            None => &st.tasks.get(fact.task?)?.context,
        };
        let new_context = !st.contexts.contains_key(context);
        let changed = match fact.task.map(|t| st.tasks.get(t)) {
            None => false,
            Some(None) => true,
            Some(Some(t)) => {
                fact.state.is_some_and(|s| *t.state != *s)
                    || fact.timestamp.is_some_and(|ts| ts != t.ts)
            }
        };
        if !new_context && !changed {
            return None;
        }
        Some(News {
            context: Some(context.to_string()),
            task: fact.task.map(str::to_string),
            state: fact.state.map(str::to_string),
            ts: fact.timestamp,
            referenced: fact.referenced_task.map(str::to_string),
            inferred_context: fact.context.is_none(),
        })
    }

    /// Opens a ListTasks page token for this caller and query: the cursor, if any.
    pub fn open_cursor(
        &self,
        principal: &str,
        context: &str,
        status: &str,
        after: u64,
        token: Option<&str>,
    ) -> Result<Option<(u64, String)>, Denial> {
        let Some(t) = present(token) else {
            return Ok(None);
        };
        let query = Query {
            principal,
            context,
            status,
            after,
        };
        let c = self
            .shared
            .key
            .open(&query, t)
            .ok_or(Denial::InvalidToken)?;
        Ok(Some((c.timestamp, c.task_id)))
    }

    /// A page from rows read elsewhere (the shared store): `rows` are `(task, agent, ts)` in
    /// order, at most `page_size + 1` (one more: there is a next page). `stopped`: where the
    /// store ended the page early (`(timestamp, task id)`), the next page's cursor.
    #[allow(clippy::too_many_arguments)]
    pub fn page_from_rows(
        &self,
        principal: &str,
        context: &str,
        status: &str,
        after: u64,
        mut rows: Vec<(String, UpstreamId, u64)>,
        page_size: usize,
        total_size: usize,
        stopped: Option<(u64, String)>,
    ) -> ListPage {
        let more = rows.len() > page_size;
        rows.truncate(page_size);
        let next = match (more, rows.last(), stopped) {
            (true, Some((id, _, ts)), _) => Some((*ts, id.clone())),
            (false, _, Some(stop)) => Some(stop),
            _ => None,
        };
        let next_page_token = match next {
            Some((ts, id)) => self.shared.key.mint(
                &Query {
                    principal,
                    context,
                    status,
                    after,
                },
                &Cursor {
                    timestamp: ts,
                    task_id: id,
                },
            ),
            None => String::new(),
        };
        let timestamps = rows.iter().map(|r| r.2).collect();
        ListPage {
            tasks: rows.into_iter().map(|(id, u, _)| (id, u)).collect(),
            next_page_token,
            total_size,
            timestamps,
            query: (
                principal.to_string(),
                context.to_string(),
                status.to_string(),
                after,
            ),
        }
    }
}
