//! Limits: keyed rate limiters (governor) and the throttle of failed authentications.
//! Knows nothing of A2A.

mod failures;

pub use failures::FailureThrottle;
