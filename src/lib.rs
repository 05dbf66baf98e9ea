//! a2a-edge: a security-hardened edge proxy for A2A 1.0 agents.
//!
//! The request's way through is in [`gate`]; each module owns one concern (see DESIGN.md).
#![forbid(unsafe_code)]
// The crate's docs are its maintainers' (`cargo doc --document-private-items`): they link the
// private items that explain a public one.
#![allow(rustdoc::private_intra_doc_links)]
// No unwrap()/expect() outside tests: every failure is a clear error, never a panic.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod a2a;
pub mod auth;
pub mod authz;
pub mod body;
pub mod card;
pub mod crypto;
pub mod engine;
pub mod gate;
pub mod limits;
pub mod policy;
pub mod reason;
pub mod runtime;
pub mod server;
mod sniff;
pub mod state;
pub mod stream_body;
pub mod telemetry;
pub mod time;
pub mod tls;
pub mod upstream;
pub mod validate;
pub mod write_stall;
