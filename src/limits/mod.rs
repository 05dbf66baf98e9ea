//! Limits: keyed rate limiters (governor) and the throttle of failed authentications.
//! Knows nothing of A2A.

pub mod concurrency;
pub mod connections;
mod failures;
pub mod network;
pub mod rate;

pub use failures::FailureThrottle;
