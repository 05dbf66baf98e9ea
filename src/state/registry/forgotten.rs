//! Who owned the contexts the registry evicted, compactly: a keyed 64-bit hash of the context
//! id mapped to a keyed hash of its owner, for several times as many contexts as the registry
//! holds. An evicted context can then be taken up again by its owner only; anyone else naming
//! it gets the same NotFound as for someone else's context. A hash collision can only refuse
//! a caller (fail closed), never admit one; the hash key is random per process, so collisions
//! cannot be aimed.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;

/// How many evicted contexts are remembered, per context the registry holds.
pub(super) const FORGOTTEN_PER_ENTRY: usize = 4;

#[derive(Debug)]
pub(super) struct Forgotten {
    hasher: RandomState,
    /// Context hash → (owner hash, the sequence number it was remembered with).
    /// (A B-tree: no whole-map rehash under the registry's lock, see `state.rs`.)
    owners: BTreeMap<u64, (u64, u64)>,
    /// Oldest first: (context hash, sequence number); stale pairs are skipped.
    order: VecDeque<(u64, u64)>,
    seq: u64,
    cap: usize,
}

impl Forgotten {
    pub fn new(cap: usize) -> Forgotten {
        Forgotten {
            hasher: RandomState::new(),
            owners: BTreeMap::new(),
            order: VecDeque::new(),
            seq: 0,
            cap: cap.max(1),
        }
    }

    fn hash(&self, s: &str) -> u64 {
        self.hasher.hash_one(s)
    }

    /// The context `id` of `owner` was evicted.
    pub fn remember(&mut self, id: &str, owner: &str) {
        let (key, who) = (self.hash(id), self.hash(owner));
        self.seq += 1;
        self.owners.insert(key, (who, self.seq));
        self.order.push_back((key, self.seq));
        while self.owners.len() > self.cap {
            let Some((old, seq)) = self.order.pop_front() else {
                break;
            };
            if self.owners.get(&old).is_some_and(|&(_, s)| s == seq) {
                self.owners.remove(&old);
            }
        }
        // Stale pairs (taken up again, or remembered anew) are dropped as they reach the front;
        // bound the queue too in case they pile up behind a long-lived one.
        if self.order.len() > 2 * self.cap {
            let owners = &self.owners;
            self.order
                .retain(|(k, s)| owners.get(k).is_some_and(|&(_, os)| os == *s));
        }
    }

    /// Whether `principal` may take up the context `id`: `false` when it was evicted from
    /// someone else.
    pub fn permits(&self, id: &str, principal: &str) -> bool {
        match self.owners.get(&self.hash(id)) {
            Some(&(who, _)) => who == self.hash(principal),
            None => true,
        }
    }

    /// The context `id` is in the registry again.
    pub fn forget(&mut self, id: &str) {
        self.owners.remove(&self.hash(id));
    }

    pub fn len(&self) -> usize {
        self.owners.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_takes_an_evicted_context_up_again() {
        let mut f = Forgotten::new(3);
        assert!(f.permits("c1", "alice"));
        f.remember("c1", "alice");
        assert!(f.permits("c1", "alice"));
        assert!(!f.permits("c1", "bob"));
        assert!(f.permits("c2", "bob"));
        f.forget("c1");
        assert!(f.permits("c1", "bob"));
    }

    #[test]
    fn the_oldest_are_dropped_beyond_the_bound() {
        let mut f = Forgotten::new(3);
        for i in 0..5 {
            f.remember(&format!("c{i}"), "alice");
        }
        assert_eq!(f.len(), 3);
        assert!(f.permits("c0", "bob") && f.permits("c1", "bob"));
        assert!(!f.permits("c2", "bob") && !f.permits("c4", "bob"));
        // Remembered anew: the newer owner counts, and the stale queue entry does not drop it.
        f.remember("c2", "bob");
        for i in 5..7 {
            f.remember(&format!("c{i}"), "alice");
        }
        assert!(f.permits("c2", "bob"), "c2 was remembered last for bob");
        assert!(!f.permits("c2", "alice"));
        assert!(f.order.len() <= 6);
    }
}
