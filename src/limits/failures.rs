//! Throttling repeated authentication failures from one client address. Each failure spends
//! from a per-address budget (governor, GCRA); once it is spent, the address is refused with
//! 429 *before* its credentials are looked at, until the budget refills, so a guesser learns
//! nothing from its next tries and cannot hammer the (expensive) password check.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Most addresses remembered as blocked; past this, expired entries are dropped first and,
/// if still full, the oldest block is forgotten (the governor budget still applies).
const MAX_BLOCKED: usize = 100_000;

pub struct FailureThrottle {
    budget: DefaultKeyedRateLimiter<IpAddr>,
    blocked: Mutex<HashMap<IpAddr, Instant>>,
    clock: DefaultClock,
}

impl FailureThrottle {
    pub fn new(per_minute: u32, burst: u32) -> FailureThrottle {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        FailureThrottle {
            budget: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            blocked: Mutex::new(HashMap::new()),
            clock: DefaultClock::default(),
        }
    }

    /// How long `ip` must still wait, if it is blocked now.
    pub fn retry_after(&self, ip: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        match blocked.get(&ip) {
            Some(until) if *until > now => Some(*until - now),
            Some(_) => {
                blocked.remove(&ip);
                None
            }
            None => None,
        }
    }

    /// Spends one failure of `ip`'s budget; returns how long it is blocked if the budget is
    /// now spent.
    pub fn record_failure(&self, ip: IpAddr) -> Option<Duration> {
        let wait = match self.budget.check_key(&ip) {
            Ok(()) => return None,
            Err(not_until) => not_until.wait_time_from(self.clock.now()),
        };
        let wait = wait.max(Duration::from_secs(1));
        let now = Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        if blocked.len() >= MAX_BLOCKED {
            blocked.retain(|_, until| *until > now);
            if blocked.len() >= MAX_BLOCKED {
                if let Some(oldest) = blocked.iter().min_by_key(|(_, u)| **u).map(|(k, _)| *k) {
                    blocked.remove(&oldest);
                }
            }
            self.budget.retain_recent();
        }
        blocked.insert(ip, now + wait);
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_the_burst_and_only_that_address() {
        let t = FailureThrottle::new(1, 3);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(t.record_failure(a), None);
            assert_eq!(t.retry_after(a), None);
        }
        let wait = t
            .record_failure(a)
            .expect("the fourth failure is over budget");
        assert!(wait >= Duration::from_secs(1));
        assert!(t.retry_after(a).is_some());
        assert_eq!(t.retry_after(b), None);
        assert_eq!(t.record_failure(b), None);
    }
}
