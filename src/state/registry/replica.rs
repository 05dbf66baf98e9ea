//! What a replica's registry needs when Redis holds the truth (`[state] backend = "redis"`):
//! the registry is then a bounded cache of facts that never change once written (who owns a
//! task or context, which agent serves it, the id a caller chose for a context), filled from
//! Redis ([`TaskRegistry::import_task`], [`TaskRegistry::import_context`]) and from answers;
//! what changes (busy contexts, states, listings) is asked of Redis each time.

use std::sync::Arc;

use serde_json::Value;

use super::facts::Fact;
use super::state::Workspace;
use super::token::{Cursor, Query};
use super::{present, Denial, ListPage, TaskRegistry, UpstreamId};
use crate::state::shared::News;

impl TaskRegistry {
    pub fn has_task(&self, id: &str) -> bool {
        self.shared.lock().tasks.contains_key(id)
    }

    pub fn has_context(&self, id: &str) -> bool {
        self.shared.lock().contexts.contains_key(id)
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

    /// Records a task Redis knows, unless this registry knows it already.
    pub fn import_task(
        &self,
        id: &str,
        owner: &str,
        context: &str,
        upstream: UpstreamId,
        state: &str,
        ts: u64,
    ) {
        let mut st = self.shared.lock();
        if st.tasks.contains_key(id) {
            return;
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
        }
    }

    /// Records a context Redis knows, unless this registry knows it already.
    /// `workspace`: `None` not bound yet.
    pub fn import_context(
        &self,
        id: &str,
        owner: &str,
        upstream: Option<UpstreamId>,
        workspace: Option<Option<String>>,
        client: Option<&str>,
    ) {
        let mut st = self.shared.lock();
        if st.contexts.contains_key(id) {
            return;
        }
        let ws = match workspace {
            None => Workspace::Unbound,
            Some(w) => Workspace::Bound(w),
        };
        if st.insert_context(id, owner, upstream, ws, None).is_none() {
            st.counters.refused_full += 1;
            return;
        }
        if let (Some(c), Some(e)) = (client, st.contexts.get_mut(id)) {
            if c != id {
                e.client = Some(Arc::from(c));
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
    /// order, at most `page_size + 1` (one more: there is a next page).
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
    ) -> ListPage {
        let more = rows.len() > page_size;
        rows.truncate(page_size);
        let next_page_token = match (more, rows.last()) {
            (true, Some((id, _, ts))) => self.shared.key.mint(
                &Query {
                    principal,
                    context,
                    status,
                    after,
                },
                &Cursor {
                    timestamp: *ts,
                    task_id: id.clone(),
                },
            ),
            _ => String::new(),
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
