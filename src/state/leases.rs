//! Rate tokens taken from the shared store a few at a time (`[state] rate_lease_max`,
//! `rate_lease_ms`): a replica that spends a principal's budget fast takes the next tokens
//! in one round trip and spends them locally, instead of one round trip per request.
//!
//! Every token is taken from the shared budget before it admits a request, so the replicas
//! together never admit more than the budget holds; a lease only brings tokens forward by
//! at most its lifetime. Its size adapts: a lease starts at one token (a caller below its
//! rate costs one round trip per request, exactly as without leases), doubles each time the
//! last one was used up before it expired, and falls back to what was actually used when
//! one expires with tokens left; those go back to the shared budget with the next ask, so a
//! caller that keeps sending loses none (at most `max - 1` tokens per replica are out of the
//! budget while a lease lives, or until its caller's next request after it expired). Only
//! as many go back as the budget has not refilled since: once it has refilled past what was
//! taken up to the lease (its TAT then), it has been full, and tokens given back on top of
//! what was spent since would let the caller past its burst. No lease takes more than a
//! quarter of the burst or what the rate refills within the lifetime, so small budgets stay
//! exact and several replicas share a burst.
//!
//! While one request asks for a principal's next lease, the others of its table that find
//! the lease spent wait for its grant (at most one store timeout), then take from it, or ask
//! for one token each.
//!
//! One table per worker thread (no lock is contended), each bounded by [`MAX_ENTRIES`]; when
//! a table is full, expired leases are dropped (at most once per lifetime) and a principal
//! that finds no room is served one token at a time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::limits::rate::Rate;

/// Leases one worker's table holds at most.
pub const MAX_ENTRIES: usize = 16_384;

#[derive(Debug)]
struct Lease {
    /// Tokens still to spend.
    left: u32,
    /// Tokens this lease was granted.
    size: u32,
    until: Instant,
    /// When the budget has refilled past what was taken up to this lease (the TAT its grant
    /// left, on this replica's clock): from then on, its unspent tokens were refilled anyway.
    full_at: Instant,
    /// The rate it was taken at (a reload that changes the rate drops it).
    rate: (u64, u32),
    /// When a request of this table was told to ask for the next lease, until its grant:
    /// meanwhile the others ask for one token each, not each for the doubled size (which
    /// took many times what they spent out of the budget at once).
    asking: Option<Instant>,
    /// Changes (or closes, the lease replaced) when an ask ends: requests waiting for it
    /// ([`RateLeases::grants`]) look again.
    grants: watch::Sender<()>,
}

struct Table {
    leases: HashMap<String, Lease>,
    last_purge: Option<Instant>,
}

pub struct RateLeases {
    max: u32,
    lifetime: Duration,
    tables: Box<[Mutex<Table>]>,
}

/// An ask for the next lease under way, in the table it began in (a request's task may
/// resume on another worker thread after the store answers: the grant goes where the ask
/// was made, or that table's waiters would each wait out the store's timeout for a lifetime).
/// Dropped without [`Asking::granted`] (refused, failed, or the request itself dropped
/// while it waited), the ask ends failed: the next request that finds the lease spent asks.
pub struct Asking<'a> {
    leases: &'a RateLeases,
    table: usize,
    key: &'a str,
    ended: bool,
}

impl Asking<'_> {
    /// The store granted `granted` tokens (one of them for this request) of those asked.
    /// `full_at`: no later than when the budget has refilled past them (the store's TAT,
    /// counted from when the ask was sent).
    pub fn granted(mut self, rate: Rate, granted: u32, now: Instant, full_at: Instant) {
        self.ended = true;
        self.leases
            .granted_in(self.table, self.key, rate, granted, now, full_at);
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.leases.ask_failed_in(self.table, self.key);
        }
    }
}

/// What to do for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Admitted from a lease: no round trip.
    Leased,
    /// Ask the store for up to `.0` tokens (holding [`RateLeases::asking`] until it answers),
    /// giving back `.1` it had granted that expired unspent.
    Ask(u32, u32),
    /// Another request is asking for the next lease: wait for its grant ([`RateLeases::grants`])
    /// and look again, or take this request's one token from the store, leaving the lease
    /// alone.
    One,
}

impl RateLeases {
    /// `max` = 1 turns leasing off. `tables`: one per worker thread (`crate::runtime::slot`).
    pub fn new(max: u32, lifetime: Duration, tables: usize) -> RateLeases {
        RateLeases {
            max: max.max(1),
            lifetime,
            tables: (0..tables.max(1))
                .map(|_| {
                    Mutex::new(Table {
                        leases: HashMap::new(),
                        last_purge: None,
                    })
                })
                .collect(),
        }
    }

    /// The largest lease `rate` allows: a quarter of its burst, what it refills within the
    /// lifetime, and the configured maximum; at least 1.
    pub fn cap(&self, rate: Rate) -> u32 {
        let refill = (rate.per_second * self.lifetime.as_secs_f64()).floor();
        let refill = if refill >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            refill as u32
        };
        self.max.min(rate.burst / 4).min(refill).max(1)
    }

    /// The calling thread's table.
    fn here(&self) -> usize {
        crate::runtime::slot(self.tables.len())
    }

    fn table(&self) -> &Mutex<Table> {
        &self.tables[self.here()]
    }

    /// The ask a [`Take::Ask`] just told this request to make (on this thread, nothing awaited
    /// in between), to be ended with [`Asking::granted`], or failed by dropping it.
    pub fn asking<'a>(&'a self, key: &'a str) -> Asking<'a> {
        Asking {
            leases: self,
            table: self.here(),
            key,
            ended: false,
        }
    }

    /// One token of `key`'s lease at `rate`, or how many to ask the store for.
    pub fn take(&self, key: &str, rate: Rate, now: Instant) -> Take {
        let cap = self.cap(rate);
        if cap == 1 {
            return Take::Ask(1, 0);
        }
        let Ok(mut table) = self.table().lock() else {
            return Take::Ask(1, 0);
        };
        let Some(lease) = table.leases.get_mut(key) else {
            return Take::Ask(1, 0);
        };
        if lease.rate != (rate.interval_us(), rate.burst) {
            table.leases.remove(key);
            return Take::Ask(1, 0);
        }
        if lease.left > 0 && now < lease.until {
            lease.left -= 1;
            return Take::Leased;
        }
        // (an ask that never came back, its store gone, is forgotten after a lifetime)
        if lease.asking.is_some_and(|at| now < at + self.lifetime) {
            return Take::One;
        }
        let next = if lease.left == 0 {
            lease.size.saturating_mul(2)
        } else {
            lease.size.saturating_sub(lease.left)
        };
        // Tokens left when a lease expires go back with the next ask: a caller that keeps
        // sending loses none of its budget to leases. As many as the budget has not refilled
        // since (one per interval until `full_at`): the others it has refilled already (to its
        // burst at most), and giving them back on top of what was spent since would let the
        // caller past its burst.
        let left = std::mem::take(&mut lease.left);
        let unrefilled = lease.full_at.saturating_duration_since(now).as_micros()
            / u128::from(rate.interval_us().max(1));
        let refund = u32::try_from(unrefilled).map_or(left, |n| left.min(n));
        lease.asking = Some(now);
        Take::Ask(next.clamp(1, cap), refund)
    }

    /// [`Asking::granted`] in this thread's table.
    #[cfg(test)]
    pub fn granted(&self, key: &str, rate: Rate, granted: u32, now: Instant, full_at: Instant) {
        self.granted_in(self.here(), key, rate, granted, now, full_at);
    }

    fn granted_in(
        &self,
        table: usize,
        key: &str,
        rate: Rate,
        granted: u32,
        now: Instant,
        full_at: Instant,
    ) {
        if self.cap(rate) == 1 {
            return;
        }
        let Ok(mut table) = self.tables[table].lock() else {
            return;
        };
        let lease = Lease {
            left: granted.saturating_sub(1),
            size: granted.max(1),
            until: now + self.lifetime,
            full_at,
            rate: (rate.interval_us(), rate.burst),
            asking: None,
            grants: watch::Sender::new(()),
        };
        if let Some(old) = table.leases.get_mut(key) {
            // Requests that found the lease spent at once each asked: what they were granted
            // adds up (no token taken from the budget is dropped while the lease lives).
            if old.rate == lease.rate && now < old.until && old.left > 0 {
                old.left = old.left.saturating_add(lease.left);
                old.size = old.size.saturating_add(lease.size);
                old.until = lease.until;
                // (the earlier: what goes back is never more than either grant's)
                old.full_at = old.full_at.min(lease.full_at);
            } else {
                // (the same `grants`: those waiting on it are told below)
                let Lease {
                    left,
                    size,
                    until,
                    full_at,
                    rate,
                    ..
                } = lease;
                (old.left, old.size, old.until, old.full_at, old.rate) =
                    (left, size, until, full_at, rate);
            }
            // (the ask came back: those waiting for it look again)
            old.asking = None;
            old.grants.send_replace(());
            return;
        }
        if table.leases.len() >= MAX_ENTRIES {
            let due = table
                .last_purge
                .map_or(true, |at| now.duration_since(at) >= self.lifetime);
            if !due {
                return;
            }
            table.last_purge = Some(now);
            table.leases.retain(|_, l| now < l.until);
            if table.leases.len() >= MAX_ENTRIES {
                return;
            }
        }
        table.leases.insert(key.to_string(), lease);
    }

    /// An [`Asking`] dropped in this thread's table.
    #[cfg(test)]
    pub fn ask_failed(&self, key: &str) {
        self.ask_failed_in(self.here(), key);
    }

    fn ask_failed_in(&self, table: usize, key: &str) {
        if let Ok(mut table) = self.tables[table].lock() {
            if let Some(lease) = table.leases.get_mut(key) {
                lease.asking = None;
                lease.grants.send_replace(());
            }
        }
    }

    /// Changes when the ask running for `key`'s next lease ends (granted, refused, failed):
    /// subscribed before a [`RateLeases::take`] that says [`Take::One`], so that a grant in
    /// between is not missed. `None`: no lease.
    pub fn grants(&self, key: &str) -> Option<watch::Receiver<()>> {
        let table = self.table().lock().ok()?;
        table.leases.get(key).map(|l| l.grants.subscribe())
    }

    /// Leases held by the calling thread's table.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.table().lock().map_or(0, |t| t.leases.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Rate = Rate {
        per_second: 100_000.0,
        burst: 100_000,
    };

    /// A budget spent far ahead of its refill (a minute) at `t`: tokens given back count whole.
    fn ahead(t: Instant) -> Instant {
        t + Duration::from_secs(60)
    }

    #[test]
    fn the_cap_keeps_small_budgets_exact() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        // (per second, burst, cap)
        let rows = [
            (100_000.0, 100_000, 64),
            (10.0, 20, 1),
            (100.0, 1000, 10),
            (1000.0, 8, 2),
            (1000.0, 3, 1),
            (0.01, 4, 1),
            (1e30, u32::MAX, 64),
        ];
        for (per_second, burst, cap) in rows {
            assert_eq!(
                l.cap(Rate { per_second, burst }),
                cap,
                "{per_second} {burst}"
            );
        }
        let off = RateLeases::new(1, Duration::from_millis(100), 1);
        assert_eq!(off.cap(FAST), 1);
        assert_eq!(off.take("p", FAST, Instant::now()), Take::Ask(1, 0));
        off.granted("p", FAST, 1, Instant::now(), ahead(Instant::now()));
        assert_eq!(off.held(), 0);
    }

    #[test]
    fn a_lease_grows_while_used_up_and_shrinks_to_what_was_used() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        let t0 = Instant::now();
        assert_eq!(l.take("p", FAST, t0), Take::Ask(1, 0));
        l.granted("p", FAST, 1, t0, ahead(t0));
        // used up at once: double, double, ... up to the cap
        let mut want = 2;
        for _ in 0..8 {
            assert_eq!(l.take("p", FAST, t0), Take::Ask(want.min(64), 0));
            l.granted("p", FAST, want.min(64), t0, ahead(t0));
            for _ in 1..want.min(64) {
                assert_eq!(l.take("p", FAST, t0), Take::Leased);
            }
            want *= 2;
        }
        // 64 granted, 10 used, then it expires: the next one asks for what was used
        assert_eq!(l.take("p", FAST, t0), Take::Ask(64, 0));
        l.granted("p", FAST, 64, t0, ahead(t0));
        for _ in 0..9 {
            assert_eq!(l.take("p", FAST, t0), Take::Leased);
        }
        let later = t0 + Duration::from_millis(100);
        assert_eq!(l.take("p", FAST, later), Take::Ask(10, 54));
        // fewer granted than asked (the budget is nearly spent): that is the lease
        l.granted("p", FAST, 3, later, ahead(later));
        assert_eq!(l.take("p", FAST, later), Take::Leased);
        assert_eq!(l.take("p", FAST, later), Take::Leased);
        assert_eq!(l.take("p", FAST, later), Take::Ask(6, 0));
    }

    #[test]
    fn grants_that_race_add_up() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        let t0 = Instant::now();
        l.granted("p", FAST, 8, t0, ahead(t0));
        l.granted("p", FAST, 8, t0, ahead(t0));
        for _ in 0..14 {
            assert_eq!(l.take("p", FAST, t0), Take::Leased);
        }
        assert_eq!(l.take("p", FAST, t0), Take::Ask(32, 0));
        // merged grants, partly used, expire: the next asks for what was used
        l.granted("p", FAST, 4, t0, ahead(t0));
        l.granted("p", FAST, 4, t0, ahead(t0));
        assert_eq!(l.take("p", FAST, t0), Take::Leased);
        let expired = t0 + Duration::from_millis(100);
        assert_eq!(l.take("p", FAST, expired), Take::Ask(3, 5));
        // an expired lease is replaced, not added to
        let later = t0 + Duration::from_millis(100);
        l.granted("p", FAST, 2, later, ahead(later));
        assert_eq!(l.take("p", FAST, later), Take::Leased);
        assert_eq!(l.take("p", FAST, later), Take::Ask(4, 0));
    }

    #[test]
    fn what_goes_back_is_only_what_the_budget_has_not_refilled() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        // one token every 10 µs (FAST); the budget refills past the grant 50 µs after t0
        let t0 = Instant::now();
        let full_at = t0 + Duration::from_micros(50);
        l.granted("p", FAST, 8, t0, full_at);
        assert_eq!(l.take("p", FAST, t0), Take::Leased);
        // 6 left when it expires: the budget has refilled past it, nothing goes back
        let expired = t0 + Duration::from_millis(100);
        assert_eq!(l.take("p", FAST, expired), Take::Ask(2, 0));
        // a budget spent far ahead (other leases, other replicas): what is left goes back,
        // up to what it has not refilled by then (30 µs: 3 tokens)
        l.granted("p", FAST, 8, t0, expired + Duration::from_micros(30));
        assert_eq!(l.take("p", FAST, t0), Take::Leased);
        assert_eq!(l.take("p", FAST, expired), Take::Ask(2, 3));
        l.granted("p", FAST, 8, t0, expired + Duration::from_secs(1));
        assert_eq!(l.take("p", FAST, expired), Take::Ask(1, 7));
        // merged grants give back no more than the earlier's allows
        l.granted("p", FAST, 4, t0, expired + Duration::from_secs(1));
        l.granted("p", FAST, 4, t0, expired + Duration::from_micros(20));
        assert_eq!(l.take("p", FAST, expired), Take::Ask(2, 2));
    }

    /// Requests that find the lease spent while one of them is asking for the next ask for
    /// one token each (not each for the doubled lease: twenty at once took twenty times what
    /// they spent out of the budget); an ask that never came back is forgotten after a
    /// lifetime.
    #[test]
    fn while_one_asks_for_the_next_lease_the_others_take_one_token_each() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        let t0 = Instant::now();
        l.granted("p", FAST, 8, t0, ahead(t0));
        for _ in 0..7 {
            assert_eq!(l.take("p", FAST, t0), Take::Leased);
        }
        assert_eq!(l.take("p", FAST, t0), Take::Ask(16, 0));
        let mut waiting = l.grants("p").expect("a lease");
        for _ in 0..5 {
            assert_eq!(l.take("p", FAST, t0), Take::One);
        }
        assert!(!waiting.has_changed().unwrap());
        // the lease comes: those waiting look again, spend from it, and the next ask is one
        l.granted("p", FAST, 16, t0, ahead(t0));
        assert!(waiting.has_changed().unwrap());
        waiting.mark_unchanged();
        for _ in 0..15 {
            assert_eq!(l.take("p", FAST, t0), Take::Leased);
        }
        assert_eq!(l.take("p", FAST, t0), Take::Ask(32, 0));
        assert_eq!(l.take("p", FAST, t0), Take::One);
        // the ask was refused (or the store did not answer): the next request asks
        l.ask_failed("p");
        assert!(waiting.has_changed().unwrap());
        assert_eq!(l.take("p", FAST, t0), Take::Ask(32, 0));
        // an ask that never came back is forgotten after a lifetime
        let lost = t0 + Duration::from_millis(100);
        assert_eq!(l.take("p", FAST, lost), Take::Ask(32, 0));
        // an asker granted a single token (all it asked, or all there was) ends its ask
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        l.granted("p", FAST, 2, t0, ahead(t0));
        let expired = t0 + Duration::from_millis(100);
        assert_eq!(l.take("p", FAST, expired), Take::Ask(1, 1));
        let waiting = l.grants("p").expect("a lease");
        l.granted("p", FAST, 1, expired, ahead(t0));
        assert!(waiting.has_changed().unwrap());
        assert_eq!(l.take("p", FAST, expired), Take::Ask(2, 0));
    }

    /// An ask ends in the table it began in, whichever thread ends it; dropped unanswered
    /// (its request dropped while it waited), it ends failed: the next request asks instead
    /// of waiting for a grant that never comes.
    #[test]
    fn an_ask_ends_where_it_began_and_when_dropped() {
        let l = RateLeases::new(64, Duration::from_millis(100), 2);
        let t0 = Instant::now();
        l.granted_in(0, "p", FAST, 2, t0, ahead(t0));
        // (on table 0: this test's thread is no worker)
        assert_eq!(l.take("p", FAST, t0), Take::Leased);
        assert_eq!(l.take("p", FAST, t0), Take::Ask(4, 0));
        let asking = l.asking("p");
        let waiting = l.grants("p").expect("a lease");
        assert_eq!(l.take("p", FAST, t0), Take::One);
        drop(asking);
        assert!(waiting.has_changed().unwrap());
        assert_eq!(l.take("p", FAST, t0), Take::Ask(4, 0));
        // ended on another thread: in the table it began in, none other
        let asking = l.asking("p");
        let elsewhere = Asking {
            leases: &l,
            table: 1,
            key: "p",
            ended: false,
        };
        drop(elsewhere);
        assert_eq!(l.take("p", FAST, t0), Take::One);
        asking.granted(FAST, 4, t0, ahead(t0));
        assert!(l.tables[1].lock().unwrap().leases.is_empty());
        for _ in 0..3 {
            assert_eq!(l.take("p", FAST, t0), Take::Leased);
        }
    }

    #[test]
    fn another_rate_or_another_key_gets_nothing_of_a_lease() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        let t0 = Instant::now();
        l.granted("alice", FAST, 32, t0, ahead(t0));
        assert_eq!(l.take("bob", FAST, t0), Take::Ask(1, 0));
        assert_eq!(l.take("alice\u{1f}x", FAST, t0), Take::Ask(1, 0));
        let slower = Rate {
            per_second: 50_000.0,
            burst: 100_000,
        };
        assert_eq!(l.take("alice", slower, t0), Take::Ask(1, 0));
        // the old lease is gone for the old rate too
        assert_eq!(l.take("alice", FAST, t0), Take::Ask(1, 0));
    }

    #[test]
    fn the_table_is_bounded() {
        let l = RateLeases::new(64, Duration::from_millis(100), 1);
        let t0 = Instant::now();
        for i in 0..MAX_ENTRIES + 100 {
            l.granted(&format!("p{i}"), FAST, 8, t0, ahead(t0));
        }
        assert_eq!(l.held(), MAX_ENTRIES);
        // full of live leases: a newcomer is served a token at a time
        assert_eq!(l.take("newcomer", FAST, t0), Take::Ask(1, 0));
        // once they have expired, the next grant makes room
        let later = t0 + Duration::from_millis(150);
        l.granted("newcomer", FAST, 8, later, ahead(later));
        assert_eq!(l.held(), 1);
        assert_eq!(l.take("newcomer", FAST, later), Take::Leased);
    }
}
