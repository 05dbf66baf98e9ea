//! The process's state: what outlives a policy. Built once per process; a reload hands the
//! new policy's settings to [`Budgets::carry`], which keeps every budget whose settings did
//! not change, so a SIGHUP resets no caller's rate, failure or concurrency budget.
//!
//! Today the state lives in this process (`[state] backend = "memory"`); the ownership
//! registry is still built by the server and handed to each gate (`upstream::registry`).
//! Shared state for replicas (Redis) is the next step (issue 14): it goes behind this module.

mod budgets;

pub use budgets::Budgets;
