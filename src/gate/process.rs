//! What the process builds once and hands to every policy's gate: the state that outlives a
//! reload ([`crate::state`]), the metrics, and the agent in the process.

use std::sync::Arc;

use crate::state::ownership::Ownership;
use crate::state::{redis, registry};
use crate::telemetry::metrics::Metrics;
use crate::upstream::LocalAgent;

/// What the process builds once and hands to every policy's gate.
#[derive(Clone)]
pub struct Process {
    /// Who owns which task and context (this process's registry, or Redis with its cache).
    pub owners: Ownership,
    pub metrics: Arc<Metrics>,
    /// The embedded task engine (its tasks outlive reloads).
    pub local_agent: Option<Arc<dyn LocalAgent>>,
    /// `[state] backend = "redis"`: the shared store.
    pub shared: Option<Arc<redis::RedisStore>>,
}

impl Process {
    /// A process whose state is in memory (a registry of `max_entries`) and whose one agent
    /// is `agent`, in the process: what drives a gate without sockets (tests, the `gate`
    /// bench, the `gate_request` fuzz target).
    pub fn in_memory(max_entries: usize, agent: Arc<dyn LocalAgent>) -> Process {
        Process {
            owners: Ownership::new(registry::TaskRegistry::new(max_entries), None),
            metrics: Arc::new(Metrics::new()),
            local_agent: Some(agent),
            shared: None,
        }
    }
}
