//! The process's state: what outlives a policy. Built once per process; a reload hands the
//! new policy's settings to [`Budgets::carry`], which keeps every budget whose settings did
//! not change, so a SIGHUP resets no caller's rate, failure or concurrency budget.
//!
//! Today the state lives in this process (`[state] backend = "memory"`); the ownership
//! registry is still built by the server and handed to each gate (`upstream::registry`).
//! Shared state for replicas (Redis) is the next step (issue 14): it goes behind this module.

mod budgets;
pub mod registry;
pub mod redis;

use std::sync::Arc;

pub use budgets::{Budgets, Refused};

use crate::telemetry::metrics::Metrics;
use crate::state::registry::TaskRegistry;
use crate::upstream::LocalAgent;

/// What the process builds once and hands to every policy's gate.
#[derive(Clone)]
pub struct Process {
    /// Who owns which task and context.
    pub registry: TaskRegistry,
    pub metrics: Arc<Metrics>,
    /// The embedded task engine (its tasks outlive reloads).
    pub local_agent: Option<Arc<dyn LocalAgent>>,
    /// `[state] backend = "redis"`: the shared store.
    pub shared: Option<Arc<redis::RedisStore>>,
}
