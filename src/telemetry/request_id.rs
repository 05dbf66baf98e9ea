//! Request ids: a random per-process prefix and a counter, so every request of every replica
//! gets a distinct id without a system call per request. The same id goes to the agent
//! (`X-Request-Id`) and into the request's log line, so the two can be joined.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static PREFIX: OnceLock<String> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Draws the per-process prefix (at start-up, so that no request waits for the random
/// number generator).
pub fn init() {
    let _ = next();
}

/// The next request id: `<12 random letters and digits>-<counter in hex>`.
pub fn next() -> String {
    let prefix = PREFIX.get_or_init(|| {
        // Letters and digits only, so the id splits at its one '-'.
        crate::crypto::random_token()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(12)
            .collect()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{n:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_header_safe() {
        let a = next();
        let b = next();
        assert_ne!(a, b);
        let (pa, _) = a.split_once('-').unwrap();
        assert!(b.starts_with(pa), "one prefix per process: {a} {b}");
        assert_eq!(pa.len(), 12);
        for id in [a, b] {
            assert!(http::HeaderValue::from_str(&id).is_ok());
            assert!(id
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        }
    }
}
