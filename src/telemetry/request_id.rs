//! Request ids: a random per-process prefix and a counter, so every request of every replica
//! gets a distinct id without a system call per request. The same id goes to the agent
//! (`X-Request-Id`) and into the request's log line, so the two can be joined.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static PREFIX: OnceLock<String> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The next request id: `<12 random base64url chars>-<counter in hex>`.
pub fn next() -> String {
    let prefix = PREFIX.get_or_init(|| {
        let mut token = crate::policy::random_token();
        token.truncate(12);
        token
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
