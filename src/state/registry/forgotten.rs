//! Who owned the tasks and contexts the registry evicted, compactly: a keyed 64-bit hash of
//! the id (its lowest bit says which kind) mapped to a keyed hash of its owner, for several
//! times as many ids as the registry holds. An evicted task or context can then be taken up
//! again by its owner only: an agent naming it in someone else's answer is refused, and
//! anyone else naming a context gets the same NotFound as for someone else's. A hash
//! collision can only refuse a caller (fail closed), never admit one; the hash key is random
//! per process, so collisions cannot be aimed.
//!
//! The records are a hash table like the registry's maps by id (`ids.rs`): `permits` is
//! asked for every new task and context and almost always misses, one or two buckets instead
//! of a B-tree's descent (3.2 us less per new task and context here). Its doublings while it
//! fills copy its words once each; the largest under the default bound (800,000 records),
//! at the 524,289th, took 15-16 ms once in a process's life. Full, it holds about 14 MB more
//! than the B-tree did (computed: 16 MiB of buckets and 32-byte slab entries).

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;

use super::ids::Table;

/// How many evicted ids (tasks and contexts together) are remembered, per entry the
/// registry holds of each.
pub(super) const FORGOTTEN_PER_ENTRY: usize = 4;

/// What an evicted id named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Context = 0,
    Task = 1,
}

pub(super) struct Forgotten {
    hasher: RandomState,
    /// (Id hash (kind in its lowest bit), owner hash, the sequence number it was remembered
    /// with), by the id's hash: a table that is never rebuilt while it churns (`ids.rs`).
    owners: Table<(u64, u64, u64)>,
    /// Oldest first: (id hash, sequence number); stale pairs are skipped.
    order: VecDeque<(u64, u64)>,
    seq: u64,
    cap: usize,
    /// How many of `owners` are tasks.
    tasks: usize,
}

impl Forgotten {
    pub fn new(cap: usize) -> Forgotten {
        Forgotten {
            hasher: RandomState::new(),
            owners: Table::new(),
            order: VecDeque::new(),
            seq: 0,
            cap: cap.max(1),
            tasks: 0,
        }
    }

    fn key(&self, kind: Kind, id: &str) -> u64 {
        (self.hasher.hash_one(id) & !1) | kind as u64
    }

    /// The owner's hash and sequence number of `key`.
    fn get(&self, key: u64) -> Option<(u64, u64)> {
        let (_, who, seq) = self.owners.get(key, |e| e.0 == key)?;
        Some((*who, *seq))
    }

    fn insert(&mut self, key: u64, who: u64, seq: u64) {
        if let Some(e) = self.owners.get_mut(key, |e| e.0 == key) {
            *e = (key, who, seq);
            return;
        }
        self.owners.insert_new(key, (key, who, seq));
        if key & 1 == Kind::Task as u64 {
            self.tasks += 1;
        }
    }

    fn remove(&mut self, key: u64) {
        if self.owners.remove(key, |e| e.0 == key).is_some() && key & 1 == Kind::Task as u64 {
            self.tasks -= 1;
        }
    }

    /// The `kind` `id` of `owner` was evicted.
    pub fn remember(&mut self, kind: Kind, id: &str, owner: &str) {
        let (key, who) = (self.key(kind, id), self.hasher.hash_one(owner));
        self.seq += 1;
        self.insert(key, who, self.seq);
        self.order.push_back((key, self.seq));
        while self.owners.len() > self.cap {
            let Some((old, seq)) = self.order.pop_front() else {
                break;
            };
            if self.get(old).is_some_and(|(_, s)| s == seq) {
                self.remove(old);
            }
        }
        // Stale pairs (taken up again, or remembered anew) are dropped as they reach the front;
        // bound the queue too in case they pile up behind a long-lived one.
        if self.order.len() > 2 * self.cap {
            let mut order = std::mem::take(&mut self.order);
            order.retain(|(k, s)| self.get(*k).is_some_and(|(_, os)| os == *s));
            self.order = order;
        }
    }

    /// Whether `principal` may take up the `kind` `id`: `false` when it was evicted from
    /// someone else.
    pub fn permits(&self, kind: Kind, id: &str, principal: &str) -> bool {
        match self.get(self.key(kind, id)) {
            Some((who, _)) => who == self.hasher.hash_one(principal),
            None => true,
        }
    }

    /// Whether the `kind` `id` was evicted from `principal` (and is remembered so).
    pub fn owned_by(&self, kind: Kind, id: &str, principal: &str) -> bool {
        self.get(self.key(kind, id))
            .is_some_and(|(who, _)| who == self.hasher.hash_one(principal))
    }

    /// The `kind` `id` is in the registry again.
    pub fn forget(&mut self, kind: Kind, id: &str) {
        self.remove(self.key(kind, id));
    }

    /// How many evicted (contexts, tasks) have their owner remembered.
    pub fn len(&self) -> (usize, usize) {
        (self.owners.len() - self.tasks, self.tasks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_takes_an_evicted_context_up_again() {
        let mut f = Forgotten::new(3);
        assert!(f.permits(Kind::Context, "c1", "alice"));
        f.remember(Kind::Context, "c1", "alice");
        assert!(f.permits(Kind::Context, "c1", "alice"));
        assert!(!f.permits(Kind::Context, "c1", "bob"));
        assert!(f.permits(Kind::Context, "c2", "bob"));
        f.forget(Kind::Context, "c1");
        assert!(f.permits(Kind::Context, "c1", "bob"));
    }

    #[test]
    fn the_oldest_are_dropped_beyond_the_bound() {
        let mut f = Forgotten::new(3);
        for i in 0..5 {
            f.remember(Kind::Context, &format!("c{i}"), "alice");
        }
        assert_eq!(f.len(), (3, 0));
        assert!(f.permits(Kind::Context, "c0", "bob") && f.permits(Kind::Context, "c1", "bob"));
        assert!(!f.permits(Kind::Context, "c2", "bob") && !f.permits(Kind::Context, "c4", "bob"));
        // Remembered anew: the newer owner counts, and the stale queue entry does not drop it.
        f.remember(Kind::Context, "c2", "bob");
        for i in 5..7 {
            f.remember(Kind::Context, &format!("c{i}"), "alice");
        }
        assert!(
            f.permits(Kind::Context, "c2", "bob"),
            "c2 was remembered last for bob"
        );
        assert!(!f.permits(Kind::Context, "c2", "alice"));
        assert!(f.order.len() <= 6);
    }

    #[test]
    fn tasks_and_contexts_of_one_id_are_apart() {
        let mut f = Forgotten::new(4);
        f.remember(Kind::Task, "x", "alice");
        assert!(!f.permits(Kind::Task, "x", "bob"));
        assert!(
            f.permits(Kind::Context, "x", "bob"),
            "a task's record is not a context's"
        );
        f.remember(Kind::Context, "x", "bob");
        assert_eq!(f.len(), (1, 1));
        assert!(!f.permits(Kind::Context, "x", "alice"));
        assert!(f.permits(Kind::Task, "x", "alice"));
        f.forget(Kind::Task, "x");
        assert_eq!(f.len(), (1, 0));
        assert!(f.permits(Kind::Task, "x", "bob"));
        // The bound counts both kinds; the counts follow what is dropped.
        for i in 0..6 {
            f.remember(Kind::Task, &format!("t{i}"), "alice");
        }
        assert_eq!(f.len(), (0, 4));
        assert!(f.permits(Kind::Task, "t1", "bob") && !f.permits(Kind::Task, "t2", "bob"));
    }
}
