//! Log lines anyone can make the edge write before proving anything: by opening connections
//! (a refused connection, a failed or timed-out TLS handshake), and by sending requests that
//! prove no credential (refused before or by authentication: 404, 405, 401, the client
//! address's 429; the public routes; `anonymous` callers where they are allowed). Each kind has its own budget of at most
//! [`PER_SECOND`] lines a second after a burst of [`BURST`], so that a flood of them cannot
//! fill the log buffer ([`super::sink`]) and crowd out the lines of callers who got in
//! (their requests, audit lines). A line written after some were left out says how many
//! (`suppressed`); the metrics count every one of them regardless.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// Lines a second of each budget, in the long run...
pub const PER_SECOND: u32 = 50;
/// ... and at once.
pub const BURST: u32 = 200;

/// One budget of lines and the count of those it left out.
pub struct Sampled {
    limiter: DefaultDirectRateLimiter,
    suppressed: AtomicU64,
}

impl Sampled {
    pub fn new(per_second: NonZeroU32, burst: NonZeroU32) -> Sampled {
        Sampled {
            limiter: RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst)),
            suppressed: AtomicU64::new(0),
        }
    }

    /// [`PER_SECOND`] after a burst of [`BURST`].
    fn default_budget() -> Sampled {
        Sampled::new(
            NonZeroU32::new(PER_SECOND).unwrap_or(NonZeroU32::MIN),
            NonZeroU32::new(BURST).unwrap_or(NonZeroU32::MIN),
        )
    }

    /// `Some(n)` when a line may be written now, `n` the lines left out since the last one
    /// written; `None` when this one is left out (and counted).
    pub fn admit(&self) -> Option<u64> {
        if self.limiter.check().is_ok() {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// The process's budget of connection lines.
pub fn connections() -> &'static Sampled {
    static LINES: OnceLock<Sampled> = OnceLock::new();
    LINES.get_or_init(Sampled::default_budget)
}

/// The process's budget of request lines without a proven credential (no principal, or
/// `anonymous`).
pub fn unproven_requests() -> &'static Sampled {
    static LINES: OnceLock<Sampled> = OnceLock::new();
    LINES.get_or_init(Sampled::default_budget)
}

/// Writes a connection line (`tracing::info!` with these fields) within the process's budget;
/// the first line after some were left out carries `suppressed` (how many).
macro_rules! connection_line {
    ($($field:tt)*) => {
        if let Some(suppressed) = $crate::telemetry::sampled::connections().admit() {
            let suppressed = (suppressed > 0).then_some(suppressed);
            ::tracing::info!($($field)*, suppressed);
        }
    };
}
pub(crate) use connection_line;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_burst_are_left_out_and_counted() {
        let s = Sampled::new(
            NonZeroU32::MIN,
            NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN),
        );
        let admitted: Vec<Option<u64>> = (0..10).map(|_| s.admit()).collect();
        assert_eq!(&admitted[..3], &[Some(0), Some(0), Some(0)]);
        assert!(admitted[3..].iter().all(Option::is_none), "{admitted:?}");
        assert_eq!(s.suppressed.load(Ordering::Relaxed), 7);
    }
}
