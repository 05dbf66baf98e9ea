//! The process's state: what outlives a policy. Built once per process; a reload hands the
//! new policy's settings to [`Budgets::carry`], which keeps every rate limiter whose own rate
//! did not change, the failure throttle's blocks and the concurrency counts, so a SIGHUP
//! resets no caller's budget that it did not itself change.
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

pub use budgets::{BudgetSettings, Budgets, Refused};
