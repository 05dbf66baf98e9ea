//! Bounded concurrency per principal: a request over its principal's maximum is refused at once,
//! never queued (a queue is where an abusive caller parks work at the expense of everyone else).
//!
//! Unary requests and streams are counted apart, each against its own maximum: a stream lives
//! for minutes, and a principal holding its streams open must still be able to call `GetTask` or
//! `CancelTask` to manage them. A maximum of 0 admits none of that kind (fail closed); "no limit"
//! is `usize::MAX`.
//!
//! Memory: a principal has an entry only while it holds a guard, so the table never outgrows the
//! requests in flight. The table is split into shards by a hash of the name so that principals
//! on different cores rarely meet on one lock; each critical section is a map lookup.

use std::collections::hash_map::{Entry, RandomState};
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::reason::{self, Reason};

const SHARDS: usize = 16;

#[derive(Default)]
struct Counts {
    in_flight: usize,
    streams: usize,
    /// The bytes all of the principal's streams may hold queued for it together, and its size
    /// (created with its first stream; queued frames keep it alive after the last guard is
    /// gone; made afresh for the next stream when a reload changed the size).
    stream_budget: Option<(Arc<tokio::sync::Semaphore>, usize)>,
}

impl Counts {
    fn of(&mut self, streaming: bool) -> &mut usize {
        if streaming {
            &mut self.streams
        } else {
            &mut self.in_flight
        }
    }
}

/// The counts, shared by every [`ConcurrencyLimits`] carried across reloads and by the guards.
struct Shared {
    hasher: RandomState,
    shards: [Mutex<HashMap<Box<str>, Counts>>; SHARDS],
}

impl Shared {
    fn shard(&self, principal: &str) -> MutexGuard<'_, HashMap<Box<str>, Counts>> {
        let i = (self.hasher.hash_one(principal) % SHARDS as u64) as usize;
        // A panic elsewhere while holding the lock left the counts consistent (every update is
        // one statement), so a poisoned lock is used as is rather than failing every request.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Per-principal maximum in-flight requests and open streams. Cloning shares the counts.
#[derive(Clone)]
pub struct ConcurrencyLimits {
    shared: Arc<Shared>,
    max_in_flight: usize,
    max_streams: usize,
    /// Size of each principal's shared stream budget; 0: none.
    stream_budget_bytes: usize,
}

impl ConcurrencyLimits {
    pub fn new(
        max_in_flight_per_principal: usize,
        max_streams_per_principal: usize,
    ) -> ConcurrencyLimits {
        ConcurrencyLimits {
            shared: Arc::new(Shared {
                hasher: RandomState::new(),
                shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            }),
            max_in_flight: max_in_flight_per_principal,
            max_streams: max_streams_per_principal,
            stream_budget_bytes: 0,
        }
    }

    /// Every principal's streams share a budget of `bytes` queued for it (0: no shared budget).
    pub fn with_stream_budget(mut self, bytes: usize) -> ConcurrencyLimits {
        self.stream_budget_bytes = bytes;
        self
    }

    /// New maxima over the same counts (a reload): what is in flight stays counted, so a
    /// principal at its maximum stays there; a lower maximum refuses the next request, and
    /// nothing admitted is cut.
    pub fn with_maxima(
        &self,
        max_in_flight_per_principal: usize,
        max_streams_per_principal: usize,
    ) -> ConcurrencyLimits {
        ConcurrencyLimits {
            shared: Arc::clone(&self.shared),
            max_in_flight: max_in_flight_per_principal,
            max_streams: max_streams_per_principal,
            stream_budget_bytes: self.stream_budget_bytes,
        }
    }

    /// A guard that releases on drop (also when a stream body is dropped mid-way: the lead moves
    /// the guard into the body); Err(reason "concurrency.in_flight" / reason::CONCURRENCY_STREAMS) when
    /// the principal is at its maximum. `streaming` selects which count is spent.
    pub fn acquire(&self, principal: &str, streaming: bool) -> Result<ConcurrencyGuard, Reason> {
        let (max, reason) = if streaming {
            (self.max_streams, reason::CONCURRENCY_STREAMS)
        } else {
            (self.max_in_flight, reason::CONCURRENCY_IN_FLIGHT)
        };
        if max == 0 {
            return Err(reason);
        }
        let mut shard = self.shared.shard(principal);
        let counts = match shard.get_mut(principal) {
            Some(counts) => {
                let n = counts.of(streaming);
                if *n >= max {
                    return Err(reason);
                }
                *n += 1;
                counts
            }
            None => {
                let mut counts = Counts::default();
                *counts.of(streaming) = 1;
                shard.entry(principal.into()).or_insert(counts)
            }
        };
        let bytes = self.stream_budget_bytes;
        let stream_budget = (streaming && bytes > 0).then(|| match &counts.stream_budget {
            Some((s, size)) if *size == bytes => (Arc::clone(s), bytes),
            _ => {
                let s = Arc::new(tokio::sync::Semaphore::new(bytes));
                counts.stream_budget = Some((Arc::clone(&s), bytes));
                (s, bytes)
            }
        });
        drop(shard);
        Ok(ConcurrencyGuard {
            shared: Arc::clone(&self.shared),
            principal: principal.into(),
            streaming,
            stream_budget,
        })
    }

    /// Unary (non-streaming) requests of `principal` in flight now.
    pub fn in_flight(&self, principal: &str) -> usize {
        self.count(principal, false)
    }

    /// Streams of `principal` open now.
    pub fn streams(&self, principal: &str) -> usize {
        self.count(principal, true)
    }

    /// Principals holding at least one guard (for metrics).
    pub fn active_principals(&self) -> usize {
        self.shared
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }

    fn count(&self, principal: &str, streaming: bool) -> usize {
        self.shared
            .shard(principal)
            .get_mut(principal)
            .map_or(0, |c| *c.of(streaming))
    }
}

impl fmt::Debug for ConcurrencyLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimits")
            .field("max_in_flight_per_principal", &self.max_in_flight)
            .field("max_streams_per_principal", &self.max_streams)
            .finish()
    }
}

/// One admitted request or stream; dropping it (wherever, on whichever thread) gives the slot
/// back. `Send + Sync + 'static`, so it can live inside a response body.
pub struct ConcurrencyGuard {
    shared: Arc<Shared>,
    principal: Box<str>,
    streaming: bool,
    stream_budget: Option<(Arc<tokio::sync::Semaphore>, usize)>,
}

impl ConcurrencyGuard {
    /// For a stream: the budget the principal's streams share, and its size.
    pub fn stream_budget(&self) -> Option<(Arc<tokio::sync::Semaphore>, usize)> {
        self.stream_budget.clone()
    }

    pub fn principal(&self) -> &str {
        &self.principal
    }

    pub fn is_streaming(&self) -> bool {
        self.streaming
    }
}

impl Drop for ConcurrencyGuard {
    fn drop(&mut self) {
        let mut shard = self.shared.shard(&self.principal);
        if let Entry::Occupied(mut e) = shard.entry(std::mem::take(&mut self.principal)) {
            let counts = e.get_mut();
            let n = counts.of(self.streaming);
            *n = n.saturating_sub(1);
            if counts.in_flight == 0 && counts.streams == 0 {
                e.remove();
            }
        }
    }
}

impl fmt::Debug for ConcurrencyGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyGuard")
            .field("principal", &self.principal)
            .field("streaming", &self.streaming)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_static<T: Send + Sync + 'static>() {}

    #[test]
    fn guard_is_send_and_static() {
        assert_send_static::<ConcurrencyGuard>();
        assert_send_static::<ConcurrencyLimits>();
    }

    /// New maxima keep the counts: what is in flight stays counted against them, and the
    /// old limits' guards release into the same counts.
    #[test]
    fn new_maxima_keep_the_counts() {
        let old = ConcurrencyLimits::new(2, 1).with_stream_budget(100);
        let a = old.acquire("alice", false).unwrap();
        let _b = old.acquire("alice", false).unwrap();
        let s = old.acquire("alice", true).unwrap();
        let (first_budget, size) = s.stream_budget().unwrap();
        assert_eq!(size, 100);
        // (in flight, streams, streaming?, admitted)
        let rows = [
            (2, 1, false, false),
            (3, 1, false, true),
            (1, 1, false, false),
            (2, 2, true, true),
            (2, 1, true, false),
        ];
        for (in_flight, streams, streaming, admitted) in rows {
            let new = old.with_maxima(in_flight, streams);
            assert_eq!(
                new.acquire("alice", streaming).is_ok(),
                admitted,
                "{in_flight} {streams} {streaming}"
            );
        }
        let new = old.with_maxima(2, 2).with_stream_budget(200);
        drop(a);
        assert_eq!(
            new.in_flight("alice"),
            1,
            "the old guard released into the counts"
        );
        let s2 = new.acquire("alice", true).unwrap();
        let (budget, size) = s2.stream_budget().unwrap();
        assert_eq!(size, 200, "a new size makes a new budget");
        assert!(!Arc::ptr_eq(&budget, &first_budget));
        let s3 = new.acquire("bob", true).unwrap();
        assert_eq!(s3.stream_budget().unwrap().1, 200);
        drop((s, s2, s3));
        assert_eq!(new.active_principals(), 1, "alice's _b is still in flight");
    }

    #[test]
    fn in_flight_and_streams_are_counted_separately() {
        // (max in flight, max streams, streaming?, admitted, refusal)
        let cases = [
            (2, 5, false, 2, reason::CONCURRENCY_IN_FLIGHT),
            (5, 2, true, 2, reason::CONCURRENCY_STREAMS),
            (1, 1, false, 1, reason::CONCURRENCY_IN_FLIGHT),
            (0, 3, false, 0, reason::CONCURRENCY_IN_FLIGHT),
            (3, 0, true, 0, reason::CONCURRENCY_STREAMS),
        ];
        for (max_in_flight, max_streams, streaming, admitted, reason) in cases {
            let limits = ConcurrencyLimits::new(max_in_flight, max_streams);
            let held: Vec<_> = (0..admitted)
                .map(|_| limits.acquire("alice", streaming).unwrap())
                .collect();
            assert_eq!(limits.acquire("alice", streaming).unwrap_err(), reason);
            // The other kind is still available while this one is full.
            let other_max = if streaming {
                max_in_flight
            } else {
                max_streams
            };
            let other: Vec<_> = (0..other_max)
                .map(|_| limits.acquire("alice", !streaming).unwrap())
                .collect();
            let (unary, streams) = if streaming {
                (other_max, admitted)
            } else {
                (admitted, other_max)
            };
            assert_eq!(limits.in_flight("alice"), unary);
            assert_eq!(limits.streams("alice"), streams);
            drop(held);
            drop(other);
            assert_eq!(limits.in_flight("alice"), 0);
            assert_eq!(limits.streams("alice"), 0);
            assert_eq!(limits.active_principals(), 0, "no entry left behind");
        }
    }

    #[test]
    fn a_dropped_guard_frees_its_slot() {
        let limits = ConcurrencyLimits::new(1, 1);
        let g = limits.acquire("alice", false).unwrap();
        assert_eq!(g.principal(), "alice");
        assert!(!g.is_streaming());
        assert!(limits.acquire("alice", false).is_err());
        drop(g);
        let _g = limits.acquire("alice", false).unwrap();
        assert_eq!(limits.in_flight("alice"), 1);
    }

    #[test]
    fn other_principals_are_unaffected() {
        let limits = ConcurrencyLimits::new(1, 1);
        let _a = limits.acquire("alice", false).unwrap();
        let _s = limits.acquire("alice", true).unwrap();
        assert!(limits.acquire("alice", false).is_err());
        assert!(limits.acquire("alice", true).is_err());
        for who in ["bob", "Alice", "alice ", ""] {
            let g = limits.acquire(who, false).expect(who);
            let s = limits.acquire(who, true).expect(who);
            assert_eq!(limits.in_flight(who), 1, "{who:?}");
            drop((g, s));
            assert_eq!(limits.in_flight(who), 0, "{who:?}");
        }
        assert_eq!(limits.in_flight("alice"), 1);
        assert_eq!(limits.streams("alice"), 1);
    }

    #[test]
    fn guards_moved_into_a_thread_are_released_there() {
        let limits = ConcurrencyLimits::new(2, 2);
        let guards: Vec<_> = (0..2)
            .map(|_| limits.acquire("alice", true).unwrap())
            .collect();
        assert!(limits.acquire("alice", true).is_err());
        std::thread::spawn(move || drop(guards)).join().unwrap();
        assert_eq!(limits.streams("alice"), 0);
        assert!(limits.acquire("alice", true).is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn guards_moved_into_a_task_are_released_when_it_ends_or_is_aborted() {
        let limits = ConcurrencyLimits::new(4, 1);
        // A "stream body" holding its guard, dropped mid-way by aborting its task.
        let guard = limits.acquire("alice", true).unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let stream = tokio::spawn(async move {
            let _guard = guard;
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        });
        started_rx.await.unwrap();
        assert_eq!(
            limits.acquire("alice", true).unwrap_err(),
            "concurrency.streams"
        );
        stream.abort();
        assert!(stream.await.unwrap_err().is_cancelled());
        assert_eq!(limits.streams("alice"), 0);

        // Unary requests finishing on other tasks, once told to.
        let (release, released) = tokio::sync::watch::channel(false);
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let guard = limits.acquire("alice", false).unwrap();
                let mut released = released.clone();
                tokio::spawn(async move {
                    let _ = released.wait_for(|r| *r).await;
                    drop(guard);
                })
            })
            .collect();
        assert_eq!(
            limits.acquire("alice", false).unwrap_err(),
            "concurrency.in_flight"
        );
        assert_eq!(limits.in_flight("alice"), 4);
        release.send_replace(true);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(limits.in_flight("alice"), 0);
        assert_eq!(limits.active_principals(), 0);
    }

    #[test]
    fn concurrent_acquires_never_exceed_the_maximum() {
        let limits = ConcurrencyLimits::new(3, 3);
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let limits = limits.clone();
                let peak = Arc::clone(&peak);
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        if let Ok(g) = limits.acquire("alice", false) {
                            let now = limits.in_flight("alice");
                            peak.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                            drop(g);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(peak.load(std::sync::atomic::Ordering::Relaxed) <= 3);
        assert_eq!(limits.in_flight("alice"), 0);
        assert_eq!(limits.active_principals(), 0);
    }
}
