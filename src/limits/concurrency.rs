//! Bounded concurrency per principal: a request over its principal's maximum is refused at once,
//! never queued (a queue is where an abusive caller parks work at the expense of everyone else).
//!
//! Unary requests and streams are counted apart, each against its own maximum: a stream lives
//! for minutes, and a principal holding its streams open must still be able to call `GetTask` or
//! `CancelTask` to manage them. A maximum of 0 admits none of that kind (fail closed); "no limit"
//! is `usize::MAX`.
//!
//! What requests hold while they are read and checked (their bodies, and the JSON trees parsed
//! from them) is bounded too, in bytes: per principal and for all principals together
//! ([`ConcurrencyLimits::reserve`]). A request count alone bounds nothing here: one caller's
//! requests may each hold a 32 MiB body and a tree of 100 MB and more. So do the agents'
//! answers to them (a 64 MiB answer, written again, and a tree where one is built), the tasks
//! a ListTasks page reads and a stream's events while each is checked: they grow the same
//! reservations ([`RequestBytes::grow`], [`RequestBytes::answering`]).
//!
//! Memory: a principal has an entry only while it holds a guard, so the table never outgrows the
//! requests in flight. The table is split into shards by a hash of the name so that principals
//! on different cores rarely meet on one lock; each critical section is a map lookup.

use std::collections::hash_map::{Entry, RandomState};
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::reason::{self, Reason};

const SHARDS: usize = 16;

#[derive(Default)]
struct Counts {
    in_flight: usize,
    streams: usize,
    /// What the principal's requests being read and checked hold ([`RequestBytes`]).
    request_bytes: usize,
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

    /// Nothing held: the entry can go.
    fn idle(&self) -> bool {
        self.in_flight == 0 && self.streams == 0 && self.request_bytes == 0
    }
}

/// The counts, shared by every [`ConcurrencyLimits`] carried across reloads and by the guards.
struct Shared {
    hasher: RandomState,
    shards: [Mutex<HashMap<Box<str>, Counts>>; SHARDS],
    /// What all principals' requests being read and checked hold.
    request_bytes: AtomicUsize,
}

impl Shared {
    fn shard(&self, principal: &str) -> MutexGuard<'_, HashMap<Box<str>, Counts>> {
        let i = (self.hasher.hash_one(principal) % SHARDS as u64) as usize;
        // A panic elsewhere while holding the lock left the counts consistent (every update is
        // one statement), so a poisoned lock is used as is rather than failing every request.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives back what a guard held of `principal`'s counts (`give`), and the entry with the
    /// last of it.
    fn release(&self, principal: Box<str>, give: impl FnOnce(&mut Counts)) {
        let mut shard = self.shard(&principal);
        if let Entry::Occupied(mut e) = shard.entry(principal) {
            give(e.get_mut());
            if e.get().idle() {
                e.remove();
            }
        }
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
    /// What one principal's requests being read and checked may hold, and all principals'.
    request_budget: RequestBudget,
}

/// `limits.request_bytes_per_principal` and `limits.request_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RequestBudget {
    per_principal: usize,
    total: usize,
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
                request_bytes: AtomicUsize::new(0),
            }),
            max_in_flight: max_in_flight_per_principal,
            max_streams: max_streams_per_principal,
            stream_budget_bytes: 0,
            request_budget: RequestBudget {
                per_principal: usize::MAX,
                total: usize::MAX,
            },
        }
    }

    /// What one principal's requests being read and checked may hold together
    /// (`per_principal` bytes), and all principals' (`total`).
    pub fn with_request_budget(mut self, per_principal: usize, total: usize) -> ConcurrencyLimits {
        self.request_budget = RequestBudget {
            per_principal,
            total,
        };
        self
    }

    /// Reserves `bytes` for a request of `principal` being read and checked (its body, the
    /// tree parsed from it: [`RequestBytes::grow`]), held until the reservation is dropped.
    /// Refused at once, never queued: `concurrency.request_bytes` past the principal's budget,
    /// `overload.request_bytes` past everyone's.
    pub fn reserve(&self, principal: &str, bytes: usize) -> Result<RequestBytes, Reason> {
        let mut reserved = self.reservation(principal);
        reserved.grow(bytes)?;
        Ok(reserved)
    }

    /// An empty reservation for a request of `principal`, to grow as it is read and parsed.
    pub fn reservation(&self, principal: &str) -> RequestBytes {
        RequestBytes {
            shared: Arc::clone(&self.shared),
            principal: principal.into(),
            budget: self.request_budget,
            bytes: 0,
            lone: false,
            parts: None,
            part_of: None,
        }
    }

    /// Whether `bytes` more would fit `principal`'s request budget and everyone's now, without
    /// reserving them (a body's declared length: one that cannot fit is refused before it is
    /// read, and one that can is reserved only as it arrives, so that a caller that declares
    /// much and sends little holds no budget it does not use).
    pub fn has_room(&self, principal: &str, bytes: usize) -> Result<(), Reason> {
        let held = self
            .shared
            .shard(principal)
            .get(principal)
            .map_or(0, |c| c.request_bytes);
        if held.saturating_add(bytes) > self.request_budget.per_principal {
            return Err(reason::CONCURRENCY_REQUEST_BYTES);
        }
        let total = self.shared.request_bytes.load(Ordering::Acquire);
        if total.saturating_add(bytes) > self.request_budget.total {
            return Err(reason::OVERLOAD_REQUEST_BYTES);
        }
        Ok(())
    }

    /// What `principal`'s requests being read and checked hold now.
    pub fn request_bytes(&self, principal: &str) -> usize {
        self.shared
            .shard(principal)
            .get(principal)
            .map_or(0, |c| c.request_bytes)
    }

    /// What all principals' requests being read and checked hold now.
    pub fn request_bytes_total(&self) -> usize {
        self.shared.request_bytes.load(Ordering::Relaxed)
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
            request_budget: self.request_budget,
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
        let streaming = self.streaming;
        self.shared
            .release(std::mem::take(&mut self.principal), |counts| {
                let n = counts.of(streaming);
                *n = n.saturating_sub(1);
            });
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

/// What the JSON tree parsed from a request body of `body` bytes and `values` values is
/// reckoned to hold, for the request budgets: its strings (at most the body's bytes) and 192
/// bytes a value (measured: 72 for an array's item, about 103 for an object's member counted
/// as two, up to 180 for an array of one item with its container's room).
pub fn reckoned_tree(body: usize, values: usize) -> usize {
    body.saturating_add(values.saturating_mul(TREE_BYTES_PER_VALUE))
}

const TREE_BYTES_PER_VALUE: usize = 192;

/// The most values a tree parsed from `body` bytes may hold within `room` bytes, reckoned as
/// [`reckoned_tree`] does.
pub fn values_within(room: usize, body: usize) -> usize {
    room.saturating_sub(body) / TREE_BYTES_PER_VALUE
}

/// The most a request within `max_body_bytes` and `max_json_values` is reckoned to hold: its
/// body's buffer (at most the cap) and its tree.
pub fn largest_request(max_body_bytes: usize, max_json_values: usize) -> usize {
    max_body_bytes.saturating_add(reckoned_tree(max_body_bytes, max_json_values))
}

/// Bytes reserved for one request being read and checked ([`ConcurrencyLimits::reserve`]);
/// dropping it gives them back.
pub struct RequestBytes {
    shared: Arc<Shared>,
    principal: Box<str>,
    /// The budgets in force when it was made (a reload does not change a request's).
    budget: RequestBudget,
    bytes: usize,
    /// It may grow past its caller's own budget while it is all the caller holds
    /// ([`RequestBytes::answering`]), its parts handed off included.
    lone: bool,
    /// What its parts handed off ([`RequestBytes::hand_off`]) still hold: theirs is its own when
    /// it asks whether it is all the caller holds. Changed under the caller's shard lock.
    parts: Option<Arc<AtomicUsize>>,
    /// For a part handed off: its reservation's `parts`, which it leaves as it gives back.
    part_of: Option<Arc<AtomicUsize>>,
}

impl RequestBytes {
    /// Reserves `more` bytes besides those held (the tree parsed from the body); refused as
    /// [`ConcurrencyLimits::reserve`] is, and then what was held stays held.
    pub fn grow(&mut self, more: usize) -> Result<(), Reason> {
        if more == 0 {
            // (nothing to count: and no entry that nothing would take out)
            return Ok(());
        }
        // The caller's own budget first: past both, it is over its share.
        let mut shard = self.shared.shard(&self.principal);
        let held = shard.get(&*self.principal).map_or(0, |c| c.request_bytes);
        let alone = self.lone && held == self.bytes + self.parts();
        let mine = held
            .checked_add(more)
            .filter(|&m| m <= self.budget.per_principal || alone)
            .ok_or(reason::CONCURRENCY_REQUEST_BYTES)?;
        let total = self.budget.total;
        self.shared
            .request_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                n.checked_add(more).filter(|&m| m <= total)
            })
            .map_err(|_| reason::OVERLOAD_REQUEST_BYTES)?;
        set_request_bytes(&mut shard, &self.principal, mine);
        self.bytes += more;
        if let Some(p) = &self.part_of {
            p.fetch_add(more, Ordering::AcqRel);
        }
        Ok(())
    }

    /// The bytes it holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// From now on it may grow past its caller's own budget while it is all the caller holds
    /// (everyone's budget still binds): for an agent's answer, which the agent has acted on,
    /// refused for the caller's budget only while the caller's other requests hold it, so
    /// that a caller with one request at a time always gets its answer.
    pub fn answering(&mut self) {
        self.lone = true;
    }

    /// An empty reservation of the same caller and budgets (for work beside this one's:
    /// [`RequestBytes::absorb`] takes it in).
    pub fn sibling(&self) -> RequestBytes {
        RequestBytes {
            shared: Arc::clone(&self.shared),
            principal: self.principal.clone(),
            budget: self.budget,
            bytes: 0,
            lone: false,
            parts: None,
            part_of: None,
        }
    }

    /// What its parts handed off still hold.
    fn parts(&self) -> usize {
        self.parts.as_ref().map_or(0, |p| p.load(Ordering::Acquire))
    }

    /// A part handed off gives back `less` of its bytes (under the caller's shard lock).
    fn leave_parts(&self, less: usize) {
        if let Some(p) = &self.part_of {
            p.fetch_sub(less, Ordering::AcqRel);
        }
    }

    /// The caller's own budget (`limits.request_bytes_per_principal` when it was made).
    pub fn per_principal(&self) -> usize {
        self.budget.per_principal
    }

    /// How many more bytes would fit now (the caller's budget and everyone's), and the reason
    /// a request for more would be refused.
    pub fn room(&self) -> (usize, Reason) {
        let shard = self.shared.shard(&self.principal);
        let held = shard.get(&*self.principal).map_or(0, |c| c.request_bytes);
        // (its parts change under the lock too)
        let alone = self.lone && held == self.bytes + self.parts();
        drop(shard);
        let mine = match alone {
            true => usize::MAX,
            false => self.budget.per_principal.saturating_sub(held),
        };
        let all = self
            .budget
            .total
            .saturating_sub(self.shared.request_bytes.load(Ordering::Acquire));
        match mine <= all {
            true => (mine, reason::CONCURRENCY_REQUEST_BYTES),
            false => (all, reason::OVERLOAD_REQUEST_BYTES),
        }
    }

    /// Holds `bytes` from now: grown to them (refused as [`RequestBytes::grow`] is) or
    /// shrunk.
    pub fn resize(&mut self, bytes: usize) -> Result<(), Reason> {
        match bytes.checked_sub(self.bytes) {
            Some(more) => self.grow(more),
            None => {
                self.shrink_to(bytes);
                Ok(())
            }
        }
    }

    /// Gives back what it holds beyond `keep` bytes.
    pub fn shrink_to(&mut self, keep: usize) {
        let Some(less) = self.bytes.checked_sub(keep).filter(|&n| n > 0) else {
            return;
        };
        let mut shard = self.shared.shard(&self.principal);
        self.bytes -= less;
        self.gave_back(&mut shard, less);
    }

    /// Counts `less` of its bytes as given back (its own count already lowered), under the
    /// caller's shard lock (`shard`).
    fn gave_back(&self, shard: &mut HashMap<Box<str>, Counts>, less: usize) {
        self.shared.request_bytes.fetch_sub(less, Ordering::AcqRel);
        self.leave_parts(less);
        let idle = match shard.get_mut(&*self.principal) {
            Some(c) => {
                c.request_bytes = c.request_bytes.saturating_sub(less);
                c.idle()
            }
            None => false,
        };
        if idle {
            shard.remove(&*self.principal);
        }
    }

    /// Moves what it holds into a reservation of its own (for work that may outlive this
    /// one's holder: a check on a blocking thread goes on after its request is dropped, and
    /// holds the tree until it ends); [`RequestBytes::absorb`] takes it back.
    pub fn take(&mut self) -> RequestBytes {
        let bytes = std::mem::take(&mut self.bytes);
        self.leave_parts(bytes);
        let mut moved = self.sibling();
        (moved.bytes, moved.lone) = (bytes, self.lone);
        moved
    }

    /// Moves `bytes` of what it holds (all it holds, if less) into a part of its own,
    /// charged nothing more, which gives them back when dropped, and gives back the rest: for
    /// the part of a request that goes its own way once the rest is done with (the copy sent
    /// to the agent, given back when the connection has taken it). While the part holds them
    /// they count as this one's when it asks whether it is all the caller holds
    /// ([`RequestBytes::answering`]).
    pub fn hand_off(&mut self, bytes: usize) -> RequestBytes {
        let moved = bytes.min(self.bytes);
        let parts = Arc::clone(self.parts.get_or_insert_with(Arc::default));
        // (under the shard lock, as every change of what the caller holds)
        let mut shard = self.shared.shard(&self.principal);
        let rest = self.bytes - moved;
        self.bytes = 0;
        parts.fetch_add(moved, Ordering::AcqRel);
        // (a part's part: what moves on is no longer this one's)
        self.leave_parts(moved);
        if rest > 0 {
            self.gave_back(&mut shard, rest);
        }
        drop(shard);
        let mut part = self.sibling();
        (part.bytes, part.part_of) = (moved, Some(parts));
        part
    }

    /// Takes back what [`RequestBytes::take`] moved out (`other` holds nothing then).
    pub fn absorb(&mut self, mut other: RequestBytes) {
        let bytes = std::mem::take(&mut other.bytes);
        other.leave_parts(bytes);
        self.bytes += bytes;
    }
}

/// Sets what `principal`'s requests hold in its shard (an entry made where it has none).
fn set_request_bytes(shard: &mut HashMap<Box<str>, Counts>, principal: &str, bytes: usize) {
    match shard.get_mut(principal) {
        Some(c) => c.request_bytes = bytes,
        None => {
            let c = Counts {
                request_bytes: bytes,
                ..Counts::default()
            };
            shard.insert(principal.into(), c);
        }
    }
}

impl Drop for RequestBytes {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        self.shared
            .request_bytes
            .fetch_sub(self.bytes, Ordering::AcqRel);
        let bytes = self.bytes;
        let part_of = self.part_of.take();
        self.shared
            .release(std::mem::take(&mut self.principal), |counts| {
                counts.request_bytes = counts.request_bytes.saturating_sub(bytes);
                if let Some(p) = part_of {
                    p.fetch_sub(bytes, Ordering::AcqRel);
                }
            });
    }
}

impl fmt::Debug for RequestBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBytes")
            .field("principal", &self.principal)
            .field("bytes", &self.bytes)
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

    /// Request bytes: a principal's reservations together within its budget, everyone's
    /// within the total; a refused reservation or growth takes nothing; dropped, they give
    /// back all they held, and no entry stays behind.
    #[test]
    fn request_bytes_are_bounded_per_principal_and_in_all() {
        let limits = ConcurrencyLimits::new(8, 8).with_request_budget(100, 150);
        // (who, bytes, refusal)
        let rows: [(&str, usize, Option<Reason>); 9] = [
            ("alice", 60, None),
            ("alice", 41, Some(reason::CONCURRENCY_REQUEST_BYTES)),
            ("alice", 40, None),
            ("alice", 1, Some(reason::CONCURRENCY_REQUEST_BYTES)),
            ("bob", 51, Some(reason::OVERLOAD_REQUEST_BYTES)),
            ("bob", 50, None),
            ("carol", 1, Some(reason::OVERLOAD_REQUEST_BYTES)),
            ("carol", 0, None),
            ("bob", usize::MAX, Some(reason::CONCURRENCY_REQUEST_BYTES)),
        ];
        let mut held = Vec::new();
        for (n, (who, bytes, refusal)) in rows.into_iter().enumerate() {
            match limits.reserve(who, bytes) {
                Ok(r) => {
                    assert_eq!(refusal, None, "row {n}");
                    assert_eq!(r.bytes(), bytes);
                    held.push(r);
                }
                Err(reason) => assert_eq!(Some(reason), refusal, "row {n}"),
            }
        }
        assert_eq!(limits.request_bytes("alice"), 100);
        assert_eq!(limits.request_bytes("bob"), 50);
        assert_eq!(limits.request_bytes_total(), 150);
        // Growing: refused past either budget, and then it holds what it held.
        let [alice_60, alice_40, mut bob, carol] = <[RequestBytes; 4]>::try_from(held).unwrap();
        assert_eq!((&*bob.principal, bob.bytes()), ("bob", 50));
        assert_eq!(bob.grow(1), Err(reason::OVERLOAD_REQUEST_BYTES));
        drop(alice_60);
        assert_eq!(limits.request_bytes_total(), 90);
        assert_eq!(bob.grow(51), Err(reason::CONCURRENCY_REQUEST_BYTES));
        assert_eq!(
            limits.request_bytes_total(),
            90,
            "a refused growth takes nothing"
        );
        assert_eq!(bob.grow(50), Ok(()));
        assert_eq!((bob.bytes(), limits.request_bytes("bob")), (100, 100));
        assert_eq!(limits.request_bytes_total(), 140);
        drop((alice_40, bob, carol));
        assert_eq!(limits.request_bytes_total(), 0);
        assert_eq!(limits.active_principals(), 0, "no entry left behind");
        // A slot and a reservation share the principal's entry: it goes with the last.
        let slot = limits.acquire("dave", false).unwrap();
        let r = limits.reserve("dave", 10).unwrap();
        drop(slot);
        assert_eq!(limits.request_bytes("dave"), 10);
        drop(r);
        assert_eq!(limits.active_principals(), 0);
        // Room is asked without reserving: the caller's budget first, then everyone's.
        let r = limits.reserve("gus", 60).unwrap();
        // (who, bytes, refusal)
        let rooms: [(&str, usize, Option<Reason>); 5] = [
            ("gus", 40, None),
            ("gus", 41, Some(reason::CONCURRENCY_REQUEST_BYTES)),
            ("hal", 90, None),
            ("hal", 91, Some(reason::OVERLOAD_REQUEST_BYTES)),
            ("hal", usize::MAX, Some(reason::CONCURRENCY_REQUEST_BYTES)),
        ];
        for (who, bytes, refusal) in rooms {
            assert_eq!(limits.has_room(who, bytes).err(), refusal, "{who} {bytes}");
        }
        assert_eq!(limits.request_bytes_total(), 60, "asking reserves nothing");
        assert_eq!(limits.active_principals(), 1);
        // A share taken away (to a blocking check) stays counted until it is dropped or
        // taken back.
        let mut r = r;
        let share = r.take();
        assert_eq!((r.bytes(), share.bytes()), (0, 60));
        assert_eq!(limits.request_bytes("gus"), 60);
        drop(r);
        assert_eq!(limits.request_bytes("gus"), 60, "the share still holds it");
        let mut back = limits.reserve("gus", 0).unwrap();
        back.absorb(share);
        assert_eq!(back.bytes(), 60);
        drop(back);
        assert_eq!(limits.request_bytes_total(), 0);
        assert_eq!(limits.active_principals(), 0);
        // New maxima (a reload) keep what is held, and a reservation keeps its own budget.
        let r = limits.reserve("erin", 100).unwrap();
        let tighter = limits.with_maxima(8, 8).with_request_budget(50, 60);
        assert_eq!(tighter.request_bytes("erin"), 100);
        assert_eq!(
            tighter.reserve("frank", 1).unwrap_err(),
            reason::OVERLOAD_REQUEST_BYTES
        );
        drop(r);
        assert!(tighter.reserve("frank", 50).is_ok());
    }

    /// A reservation's room is the smaller of the caller's and everyone's, its siblings
    /// count against the same caller, a shrunk reservation gives back what it does not
    /// keep, and a part handed off is given back with it.
    #[test]
    fn a_reservation_has_room_siblings_and_shrinks() {
        let limits = ConcurrencyLimits::new(8, 8).with_request_budget(100, 150);
        let _bob = limits.reserve("bob", 30).unwrap();
        let mut r = limits.reserve("alice", 40).unwrap();
        assert_eq!(r.room(), (60, reason::CONCURRENCY_REQUEST_BYTES));
        assert_eq!(r.per_principal(), 100);
        let mut share = r.sibling();
        assert_eq!(share.bytes(), 0);
        assert_eq!(share.grow(61), Err(reason::CONCURRENCY_REQUEST_BYTES));
        assert_eq!(share.grow(50), Ok(()));
        assert_eq!((r.bytes(), limits.request_bytes("alice")), (40, 90));
        assert_eq!(r.room(), (10, reason::CONCURRENCY_REQUEST_BYTES));
        r.absorb(share);
        assert_eq!((r.bytes(), limits.request_bytes("alice")), (90, 90));
        // Shrunk: what it keeps stays held, the rest is everyone's again.
        r.shrink_to(60);
        r.shrink_to(95);
        assert_eq!((r.bytes(), limits.request_bytes("alice")), (60, 60));
        assert_eq!(limits.request_bytes_total(), 90);
        // Everyone's is the smaller room (150 - 90 = 60 left, carol's own 100).
        let carol = limits.reservation("carol");
        assert_eq!(carol.room(), (60, reason::OVERLOAD_REQUEST_BYTES));
        // Handed off: part of what it holds goes its own way, charged nothing more, and is
        // given back with it (at most what it holds); the rest is given back at once.
        let part = r.hand_off(25);
        assert_eq!((r.bytes(), part.bytes()), (0, 25));
        assert_eq!(limits.request_bytes("alice"), 25);
        drop(part);
        assert_eq!((r.bytes(), limits.request_bytes("alice")), (0, 0));
        r.grow(35).unwrap();
        assert_eq!(r.hand_off(50).bytes(), 35);
        assert_eq!((r.bytes(), limits.request_bytes("alice")), (0, 0));
        r.grow(60).unwrap();
        r.shrink_to(0);
        assert_eq!(limits.request_bytes("alice"), 0);
        // An answer's reservation may pass its caller's own budget while it is all the
        // caller holds (everyone's still binds), and not while another request holds some.
        let mut answer = limits.reservation("dora");
        answer.answering();
        assert_eq!(answer.room(), (120, reason::OVERLOAD_REQUEST_BYTES));
        assert_eq!(answer.grow(121), Err(reason::OVERLOAD_REQUEST_BYTES));
        assert_eq!(answer.grow(60), Ok(()));
        assert_eq!(answer.grow(41), Ok(()), "past dora's 100, alone");
        answer.shrink_to(10);
        let other = limits.reserve("dora", 5).unwrap();
        assert_eq!(answer.room(), (85, reason::CONCURRENCY_REQUEST_BYTES));
        assert_eq!(answer.grow(86), Err(reason::CONCURRENCY_REQUEST_BYTES));
        drop((answer, other));
        // A part handed off counts as its reservation's own when it asks whether it is all
        // the caller holds (an answer that starts while its request's copy is still sent).
        let mut request = limits.reserve("erin", 30).unwrap();
        let copy = request.hand_off(20);
        request.answering();
        assert_eq!(
            request.grow(90),
            Ok(()),
            "past erin's 100, alone with its part"
        );
        request.shrink_to(0);
        request.grow(10).unwrap();
        let other = limits.reserve("erin", 5).unwrap();
        assert_eq!(request.grow(70), Err(reason::CONCURRENCY_REQUEST_BYTES));
        drop((copy, other));
        assert_eq!(limits.request_bytes("erin"), 10);
        assert_eq!(request.grow(95), Ok(()), "alone again");
        drop(request);
        drop((r, carol, _bob));
        assert_eq!(limits.request_bytes_total(), 0);
        assert_eq!(limits.active_principals(), 0, "no entry left behind");
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
