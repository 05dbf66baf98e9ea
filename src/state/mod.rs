//! The process's state: what outlives a policy. Built once per process; a reload hands the
//! new policy's settings to [`Budgets::carry`], which keeps every budget whose settings did
//! not change, so a SIGHUP resets no caller's rate, failure or concurrency budget.
//!
//! - [`ownership`]: who owns which task and context, the one interface the gate asks;
//!   `memory` is the process's [`registry`], `redis` is [`shared`] with the registry as cache.
//! - [`budgets`]: rates, the failure throttle and concurrency (local or GCRA in [`redis`]).

mod budgets;
mod leases;
pub mod ownership;
pub mod redis;
pub mod registry;
pub mod shared;

use std::sync::Arc;

pub use budgets::{Budgets, Refused};

use crate::telemetry::metrics::Metrics;
use crate::upstream::LocalAgent;
use ownership::Ownership;

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
