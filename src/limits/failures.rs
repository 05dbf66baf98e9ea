//! Throttling repeated authentication failures from one client address. Each failure spends
//! from a per-address budget (governor, GCRA); once it is spent, the address is refused with
//! 429 *before* its credentials are looked at, until the budget refills, so a guesser learns
//! nothing from its next tries and cannot hammer the (expensive) password check.
//!
//! Addresses are keyed as the rate limiter keys them ([`client_key`]: IPv6 by prefix, /64 by
//! default), so rotating addresses inside one prefix buys no fresh budget. Memory is bounded:
//! the budgets sweep themselves like every keyed limiter, and the blocked map drops expired
//! entries every [`SWEEP_EVERY`] failures (and shrinks), so a wave of failing addresses leaves
//! nothing behind once their blocks expire.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::Quota;

use super::rate::{client_key, ipv6_prefix_len, Keyed, SWEEP_EVERY};

/// Most addresses remembered as blocked; past this, expired entries are dropped first and,
/// if still full, the blocks that end soonest are forgotten, a sixteenth at once (the governor
/// budget still applies to them).
const MAX_BLOCKED: usize = 100_000;

/// Makes room in a full blocked map: the expired entries go, and if it is still full, the
/// sixteenth of the blocks that end soonest. One pass over the map is paid once per
/// `MAX_BLOCKED / 16` new blocks, not once per failure: a map kept full by addresses from a
/// large IPv6 range made every failure scan it twice under the lock.
fn make_room(blocked: &mut HashMap<IpAddr, Instant>, now: Instant) {
    if blocked.len() < MAX_BLOCKED {
        return;
    }
    blocked.retain(|_, until| *until > now);
    if blocked.len() < MAX_BLOCKED {
        return;
    }
    let mut ends: Vec<Instant> = blocked.values().copied().collect();
    let (_, &mut cut, _) = ends.select_nth_unstable(MAX_BLOCKED / 16);
    blocked.retain(|_, until| *until > cut);
}

pub struct FailureThrottle {
    budget: Keyed<IpAddr>,
    blocked: Mutex<HashMap<IpAddr, Instant>>,
    failures: AtomicUsize,
    /// Counts the blocks set (here or from a shared store): see [`FailureThrottle::blocks`].
    blocks: AtomicUsize,
    ipv6_prefix: u8,
}

impl FailureThrottle {
    /// `ipv6_prefix`: how IPv6 callers are grouped (0: the rate limiter's default, /64).
    pub fn new(per_minute: u32, burst: u32, ipv6_prefix: u8) -> FailureThrottle {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        FailureThrottle {
            budget: Keyed::new(Quota::per_minute(per_minute).allow_burst(burst)),
            blocked: Mutex::new(HashMap::new()),
            failures: AtomicUsize::new(0),
            blocks: AtomicUsize::new(0),
            ipv6_prefix,
        }
    }

    /// A throttle with new settings that keeps `previous`'s blocks (a reload: a blocked
    /// guesser stays blocked); the budgets start afresh under the new rate. An IPv6 block is
    /// kept under the new prefix when that is as coarse or coarser (the block then covers the
    /// whole new prefix: fail closed) and dropped when it is finer (one old prefix spans many
    /// new ones).
    pub fn carry(
        per_minute: u32,
        burst: u32,
        ipv6_prefix: u8,
        previous: &FailureThrottle,
    ) -> FailureThrottle {
        let throttle = FailureThrottle::new(per_minute, burst, ipv6_prefix);
        let coarser = ipv6_prefix_len(ipv6_prefix) <= ipv6_prefix_len(previous.ipv6_prefix);
        let now = Instant::now();
        let kept: HashMap<IpAddr, Instant> = previous
            .blocked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(key, until)| **until > now && (key.is_ipv4() || coarser))
            .map(|(key, until)| (client_key(*key, ipv6_prefix), *until))
            .collect();
        *throttle.blocked.lock().unwrap_or_else(|p| p.into_inner()) = kept;
        throttle
            .blocks
            .store(previous.blocks.load(Ordering::Acquire), Ordering::Release);
        throttle
    }

    /// How long `ip` must still wait, if it is blocked now.
    pub fn retry_after(&self, ip: IpAddr) -> Option<Duration> {
        let key = client_key(ip, self.ipv6_prefix);
        let now = Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        match blocked.get(&key) {
            Some(until) if *until > now => Some(*until - now),
            Some(_) => {
                blocked.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Spends one failure of `ip`'s budget; returns how long it is blocked if the budget is
    /// now spent.
    pub fn record_failure(&self, ip: IpAddr) -> Option<Duration> {
        let key = client_key(ip, self.ipv6_prefix);
        let swept = self.failures.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == 0;
        let outcome = self.budget.check(&key);
        let now = Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        if swept {
            let before = blocked.len();
            blocked.retain(|_, until| *until > now);
            if blocked.len() < before / 2 {
                blocked.shrink_to_fit();
            }
        }
        let wait = match outcome {
            Ok(()) => return None,
            Err(wait) => wait.max(Duration::from_secs(1)),
        };
        make_room(&mut blocked, now);
        blocked.insert(key, now + wait);
        self.blocks.fetch_add(1, Ordering::Release);
        Some(wait)
    }

    /// How many blocks were set so far: a request whose credential was checked while this
    /// changed looks again whether its address is blocked now (the check can wait: for a
    /// password check's turn, or for a key set), so that one guess of a wave sent at once
    /// is not let through after the wave's failures spent the budget.
    pub fn blocks(&self) -> usize {
        self.blocks.load(Ordering::Acquire)
    }

    /// Records that `ip` is blocked for `wait` (its budget was spent elsewhere: a shared store).
    pub fn block(&self, ip: IpAddr, wait: Duration) {
        let key = client_key(ip, self.ipv6_prefix);
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        make_room(&mut blocked, now);
        blocked.insert(key, now + wait);
        self.blocks.fetch_add(1, Ordering::Release);
    }

    /// Addresses (or prefixes) with a budget or a block held now.
    pub fn tracked(&self) -> (usize, usize) {
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner()).len();
        (self.budget.len(), blocked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_the_burst_and_only_that_address() {
        let t = FailureThrottle::new(1, 3, 0);
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

    #[test]
    fn ipv6_callers_share_their_prefix() {
        // (prefix, first address, second address, the second is blocked by the first's failures)
        let rows = [
            (
                0,
                "2001:db8:1:2::1",
                "2001:db8:1:2:ffff:ffff:ffff:fffe",
                true,
            ),
            (0, "2001:db8:1:2::1", "2001:db8:1:3::1", false),
            (0, "::ffff:192.0.2.7", "192.0.2.7", true),
            (48, "2001:db8:1:2::1", "2001:db8:1:ffff::1", true),
            (48, "2001:db8:1::1", "2001:db8:2::1", false),
            (128, "2001:db8::1", "2001:db8::2", false),
        ];
        for (prefix, a, b, shared) in rows {
            let t = FailureThrottle::new(1, 2, prefix);
            let (a, b): (IpAddr, IpAddr) = (a.parse().unwrap(), b.parse().unwrap());
            for _ in 0..3 {
                t.record_failure(a);
            }
            assert!(t.retry_after(a).is_some());
            assert_eq!(t.retry_after(b).is_some(), shared, "/{prefix} {a} {b}");
        }
        // 300 wrong credentials rotated inside one /64: blocked after the burst.
        let t = FailureThrottle::new(30, 10, 0);
        let blocked = (0..300u16)
            .filter(|i| {
                let ip: IpAddr = format!("2001:db8:5:6::{i:x}").parse().unwrap();
                t.retry_after(ip).is_some() || t.record_failure(ip).is_some()
            })
            .count();
        assert!(blocked >= 289, "{blocked} of 300 refused");
    }

    /// New throttle settings keep the blocks: IPv4 always, IPv6 under a prefix as coarse
    /// or coarser (then covering the whole new prefix), not under a finer one.
    #[test]
    fn a_carried_throttle_keeps_its_blocks() {
        // (old prefix, new prefix, blocked address, address asked, still blocked)
        let rows = [
            (0, 0, "192.0.2.1", "192.0.2.1", true),
            (0, 48, "192.0.2.1", "192.0.2.1", true),
            (0, 0, "2001:db8:1:2::1", "2001:db8:1:2::9", true),
            (64, 48, "2001:db8:1:2::1", "2001:db8:1:7::1", true),
            (48, 48, "2001:db8:1:2::1", "2001:db8:2::1", false),
            (48, 64, "2001:db8:1:2::1", "2001:db8:1:2::1", false),
            (0, 0, "192.0.2.1", "192.0.2.2", false),
        ];
        for (old, new, blocked, asked, still) in rows {
            let t = FailureThrottle::new(1, 1, old);
            let ip: IpAddr = blocked.parse().unwrap();
            t.record_failure(ip);
            assert!(t.record_failure(ip).is_some());
            let carried = FailureThrottle::carry(2, 5, new, &t);
            let asked: IpAddr = asked.parse().unwrap();
            assert_eq!(
                carried.retry_after(asked).is_some(),
                still,
                "/{old} -> /{new}: {blocked} blocked, {asked} asked"
            );
            assert_eq!(carried.blocks(), t.blocks(), "the count of blocks goes on");
        }
    }

    /// A blocked map kept full of live blocks forgets the sixteenth that ends soonest at once
    /// (so the next sixteenth of new blocks costs no pass over it), keeps the later ones, and
    /// takes every new block: from a failure and from a shared store alike.
    #[test]
    fn a_full_blocked_map_makes_room_a_sixteenth_at_once() {
        let t = FailureThrottle::new(1, 1, 0);
        let now = Instant::now();
        let ip = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        {
            let mut blocked = t.blocked.lock().unwrap();
            for i in 0..MAX_BLOCKED as u32 {
                // (the lower the address, the sooner its block ends)
                blocked.insert(ip(i), now + Duration::from_secs(600 + u64::from(i)));
            }
        }
        let late = ip(MAX_BLOCKED as u32 - 1);
        let newcomer = ip(MAX_BLOCKED as u32 + 1);
        t.record_failure(newcomer);
        assert!(t.record_failure(newcomer).is_some(), "blocked");
        let left = t.tracked().1;
        let sixteenth = MAX_BLOCKED / 16;
        assert!(
            (MAX_BLOCKED - sixteenth..=MAX_BLOCKED - sixteenth + 1).contains(&left),
            "{left}"
        );
        assert!(t.retry_after(newcomer).is_some());
        assert!(t.retry_after(late).is_some(), "a later block is kept");
        assert!(t.retry_after(ip(0)).is_none(), "the soonest is forgotten");
        // Until the map is full again, new blocks only add.
        for i in 0..100 {
            t.block(ip(MAX_BLOCKED as u32 + 10 + i), Duration::from_secs(60));
        }
        assert_eq!(t.tracked().1, left + 100);
        // A shared store's block into a full map is taken too.
        {
            let mut blocked = t.blocked.lock().unwrap();
            for i in 0..(MAX_BLOCKED - blocked.len()) as u32 {
                blocked.insert(
                    ip(2 * MAX_BLOCKED as u32 + i),
                    now + Duration::from_secs(900),
                );
            }
        }
        let shared = ip(4 * MAX_BLOCKED as u32);
        t.block(shared, Duration::from_secs(60));
        assert!(t.retry_after(shared).is_some(), "taken into a full map");
        assert!(t.tracked().1 < MAX_BLOCKED);
    }

    #[test]
    fn expired_blocks_are_swept() {
        // One failure blocks for a second; 20k addresses, then the blocks expire.
        let t = FailureThrottle::new(60, 1, 0);
        for i in 0..20_000u32 {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            t.record_failure(ip);
            t.record_failure(ip);
        }
        let (_, blocked) = t.tracked();
        assert!(blocked >= 19_000, "{blocked}");
        std::thread::sleep(Duration::from_millis(1100));
        for i in 0..(2 * SWEEP_EVERY as u32) {
            t.record_failure(IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i)));
        }
        let (_, blocked) = t.tracked();
        assert!(
            blocked < 2 * SWEEP_EVERY,
            "{blocked} blocks left after they expired"
        );
    }
}
