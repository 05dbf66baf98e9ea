//! The registry's maps keyed by task or context id: an open-addressing table of one 64-bit
//! word per bucket (the id's keyed hash's high half and a slot number) over a slab that holds
//! the ids and their values.
//!
//! Why not a B-tree (what this was): a lookup walked down five or six nodes of a tree of 100k ids,
//! a cache miss or two each; the table finds an id in one or two buckets of one cache line,
//! and the id's text is read only where the hash's half matches (almost always the id
//! sought). A SendMessage that learns a new task and context into a full registry (and so
//! evicts a pair) took 20.5-20.7 us of the edge's own work instead of 25.6-26.1 (issue 16;
//! `benches/gate.rs`, `fresh_task`, two interleaved runs each).
//!
//! Why not a standard hash map: one that keeps inserting and removing (eviction) leaves
//! tombstones and rehashes itself whole every so many removals, under the registry's lock
//! (a hash map of this size once stalled every request for up to 170 ms). Here a removal
//! shifts the entries after it back (linear probing's backward-shift deletion), so there are
//! no tombstones and a table that only churns is never rebuilt. It grows by doubling while the
//! registry fills (at half full): a copy of the table's words (no id is read or hashed
//! again), once per doubling; the largest under the default 200,000 entries, at the
//! 131,073rd, took 3.8-6.1 ms here (once per map in a process's life; linear in the
//! entries, so some 0.3 s once on the way to a registry of 10,000,000). It never shrinks (the registry's bound is fixed at
//! start).
//!
//! The hash key is random per process, so nobody can line ids up to lengthen the probes, and
//! two ids whose hashes agree are still two keys (the text decides: exact, no fail-open or
//! fail-closed case).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use std::sync::Arc;

/// Shared id text: a task id lives in the map, the LRU and two indexes at once.
pub(super) type Id = Arc<str>;

/// A map from ids to `V`, in no meaningful order.
pub(super) struct IdMap<V> {
    hasher: RandomState,
    table: Table<(Id, V)>,
}

/// A hash table of entries `E` that the caller hashes and recognizes (its key is in the
/// entry): the index of buckets below, over a slab that holds the entries.
pub(super) struct Table<E> {
    index: Index,
    slab: Slab<E>,
}

impl<E> Table<E> {
    pub fn new() -> Table<E> {
        Table {
            index: Index::new(),
            slab: Slab {
                chunks: Vec::new(),
                free: Vec::new(),
            },
        }
    }

    pub fn len(&self) -> usize {
        self.index.len
    }

    /// The bucket and slot of the entry of hash `hash` that `is` recognizes.
    fn find(&self, hash: u64, is: impl Fn(&E) -> bool) -> Option<(usize, u32)> {
        let slab = &self.slab;
        self.index
            .find(hash, |slot| slab.get(slot).is_some_and(&is))
    }

    pub fn get(&self, hash: u64, is: impl Fn(&E) -> bool) -> Option<&E> {
        let (_, slot) = self.find(hash, is)?;
        self.slab.get(slot)
    }

    pub fn get_mut(&mut self, hash: u64, is: impl Fn(&E) -> bool) -> Option<&mut E> {
        let (_, slot) = self.find(hash, is)?;
        self.slab.get_mut(slot)
    }

    /// Adds an entry the table does not hold (the caller looked first); its slot.
    pub fn insert_new(&mut self, hash: u64, entry: E) -> u32 {
        let slot = self.slab.put(entry);
        self.index.insert(hash, slot);
        slot
    }

    pub fn remove(&mut self, hash: u64, is: impl Fn(&E) -> bool) -> Option<E> {
        let (at, slot) = self.find(hash, is)?;
        self.index.remove_at(at);
        self.slab.take(slot)
    }

    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = &E> {
        self.index.slots().filter_map(|s| self.slab.get(s))
    }
}

/// Buckets by hash: each word is `tag << 32 | (slot + 1)`, 0 for an empty bucket; `tag` is
/// the high 32 bits of the id's hash, and an id's first bucket is the tag's top `bits` bits
/// (so a bigger table places each word by its tag alone). At most half the buckets are full,
/// so every probe meets an empty one.
struct Index {
    words: Vec<u64>,
    bits: u32,
    len: usize,
}

/// The smallest table: 8 buckets.
const MIN_BITS: u32 = 3;

fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

impl Index {
    fn new() -> Index {
        Index {
            words: vec![0; 1 << MIN_BITS],
            bits: MIN_BITS,
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.words.len() - 1
    }

    /// The first bucket of a tag.
    fn home(&self, tag: u32) -> usize {
        (tag >> (32 - self.bits)) as usize
    }

    /// The bucket and slot of the entry whose hash is `hash` and for whose slot `is` says
    /// yes (the caller compares the id's text).
    fn find(&self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Option<(usize, u32)> {
        let tag = tag(hash);
        let mut at = self.home(tag);
        loop {
            let word = self.words[at];
            if word == 0 {
                return None;
            }
            if (word >> 32) as u32 == tag {
                let slot = (word as u32).wrapping_sub(1);
                if is(slot) {
                    return Some((at, slot));
                }
            }
            at = (at + 1) & self.mask();
        }
    }

    /// Adds an entry (the caller found none for its id).
    fn insert(&mut self, hash: u64, slot: u32) {
        // At most half full; past 2^32 buckets the tag has no more bits to place by (a
        // registry of two billion entries: fuller then, still correct).
        if (self.len + 1) * 2 > self.words.len() && self.bits < 32 {
            self.grow();
        }
        self.place(u64::from(tag(hash)) << 32 | u64::from(slot.wrapping_add(1)));
        self.len += 1;
    }

    fn place(&mut self, word: u64) {
        let mut at = self.home((word >> 32) as u32);
        while self.words[at] != 0 {
            at = (at + 1) & self.mask();
        }
        self.words[at] = word;
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.words);
        self.bits += 1;
        self.words = vec![0; 1 << self.bits];
        for word in old.into_iter().filter(|w| *w != 0) {
            self.place(word);
        }
    }

    /// Empties bucket `at` and moves back each entry after it (up to the next empty bucket)
    /// that may sit in the hole, so that every entry stays reachable from its first bucket
    /// without a tombstone.
    fn remove_at(&mut self, mut hole: usize) {
        let mask = self.mask();
        self.words[hole] = 0;
        self.len -= 1;
        let mut at = (hole + 1) & mask;
        loop {
            let word = self.words[at];
            if word == 0 {
                return;
            }
            let home = self.home((word >> 32) as u32);
            // It may move back to the hole when its first bucket is not after the hole
            // (cyclically): its distance from home is at least the hole's distance from it.
            if (at.wrapping_sub(home) & mask) >= (at.wrapping_sub(hole) & mask) {
                self.words[hole] = word;
                self.words[at] = 0;
                hole = at;
            }
            at = (at + 1) & mask;
        }
    }

    #[cfg(test)]
    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.words
            .iter()
            .filter(|w| **w != 0)
            .map(|w| (*w as u32).wrapping_sub(1))
    }
}

/// Values by slot number, in chunks of [`CHUNK`]; freed slots are reused first.
struct Slab<V> {
    chunks: Vec<Box<[Option<V>]>>,
    free: Vec<u32>,
}

const CHUNK: usize = 1024;

impl<V> Slab<V> {
    fn get(&self, slot: u32) -> Option<&V> {
        let s = slot as usize;
        self.chunks.get(s / CHUNK)?.get(s % CHUNK)?.as_ref()
    }

    fn get_mut(&mut self, slot: u32) -> Option<&mut V> {
        let s = slot as usize;
        self.chunks.get_mut(s / CHUNK)?.get_mut(s % CHUNK)?.as_mut()
    }

    /// Stores `value` in a free slot (a new chunk when none is free). A chunk never moves,
    /// so growing the slab copies nothing under the registry's lock.
    fn put(&mut self, value: V) -> u32 {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let first = self.chunks.len() * CHUNK;
                self.chunks.push((0..CHUNK).map(|_| None).collect());
                // Handed out lowest first.
                self.free
                    .extend((first + 1..first + CHUNK).rev().map(|s| s as u32));
                first as u32
            }
        };
        let s = slot as usize;
        self.chunks[s / CHUNK][s % CHUNK] = Some(value);
        slot
    }

    fn take(&mut self, slot: u32) -> Option<V> {
        let s = slot as usize;
        let taken = self.chunks.get_mut(s / CHUNK)?.get_mut(s % CHUNK)?.take();
        if taken.is_some() {
            self.free.push(slot);
        }
        taken
    }
}

impl<V> IdMap<V> {
    pub fn new() -> IdMap<V> {
        IdMap {
            hasher: RandomState::new(),
            table: Table::new(),
        }
    }

    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.get_key_value(id).is_some()
    }

    pub fn get(&self, id: &str) -> Option<&V> {
        self.get_key_value(id).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        let hash = self.hash(id);
        self.table
            .get_mut(hash, |(k, _)| **k == *id)
            .map(|(_, v)| v)
    }

    /// The stored id (the one `Arc` every index shares) and its value.
    pub fn get_key_value(&self, id: &str) -> Option<(&Id, &V)> {
        let hash = self.hash(id);
        self.table
            .get(hash, |(k, _)| **k == *id)
            .map(|(k, v)| (k, v))
    }

    pub fn insert(&mut self, id: Id, value: V) -> Option<V> {
        let hash = self.hash(&id);
        self.insert_hashed(hash, id, value)
    }

    fn insert_hashed(&mut self, hash: u64, id: Id, value: V) -> Option<V> {
        if let Some((_, old)) = self.table.get_mut(hash, |(k, _)| *k == id) {
            return Some(std::mem::replace(old, value));
        }
        self.table.insert_new(hash, (id, value));
        None
    }

    pub fn remove(&mut self, id: &str) -> Option<V> {
        let hash = self.hash(id);
        self.remove_hashed(hash, id)
    }

    fn remove_hashed(&mut self, hash: u64, id: &str) -> Option<V> {
        self.table.remove(hash, |(k, _)| **k == *id).map(|(_, v)| v)
    }

    /// The value of `id`, made with `V::default()` (and `id` stored) when there is none.
    pub fn entry_or_default(&mut self, id: Id) -> &mut V
    where
        V: Default,
    {
        let hash = self.hash(&id);
        let slot = match self.table.find(hash, |(k, _)| *k == id) {
            Some((_, slot)) => slot,
            None => self.table.insert_new(hash, (id, V::default())),
        };
        // Every slot in the index holds an entry (a slot number the slab handed out).
        let s = slot as usize;
        let entry = &mut self.table.slab.chunks[s / CHUNK][s % CHUNK];
        &mut entry.get_or_insert_with(|| (Arc::from(""), V::default())).1
    }

    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (&Id, &V)> {
        self.table.entries().map(|(k, v)| (k, v))
    }

    /// The value of `id` under a given hash (tests force collisions).
    #[cfg(test)]
    fn get_hashed(&self, hash: u64, id: &str) -> Option<&V> {
        self.table.get(hash, |(k, _)| **k == *id).map(|(_, v)| v)
    }
}

/// `map["id"]`, as for a `BTreeMap` (panics when absent): tests only.
#[cfg(test)]
impl<V> std::ops::Index<&str> for IdMap<V> {
    type Output = V;
    fn index(&self, id: &str) -> &V {
        self.get(id).expect("no such id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn behaves_as_a_map_of_ids() {
        let mut m: IdMap<u32> = IdMap::new();
        let ids: Vec<String> = (0..2000).map(|i| format!("task-{i:04}")).collect();
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(m.insert(Arc::from(id.as_str()), n as u32), None);
        }
        assert_eq!(m.len(), ids.len());
        // Every id is found by borrowed text, with the very Arc stored.
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(m.get(id), Some(&(n as u32)));
            let (k, _) = m.get_key_value(id).unwrap();
            assert_eq!(&**k, id.as_str());
        }
        // Look-alikes are other keys: a prefix, a longer id, another case, empty.
        for other in ["task-", "task-00000", "TASK-0001", "", "task-0001 "] {
            assert!(!m.contains_key(other), "{other:?}");
        }
        *m.get_mut("task-0007").unwrap() = 70;
        assert_eq!(m.get("task-0007"), Some(&70));
        assert_eq!(m.insert(Arc::from("task-0007"), 71), Some(70));
        assert_eq!(m.len(), ids.len());
        assert_eq!(m.remove("task-0007"), Some(71));
        assert_eq!(m.remove("task-0007"), None);
        assert!(!m.contains_key("task-0007"));
        *m.entry_or_default(Arc::from("fresh")) += 5;
        *m.entry_or_default(Arc::from("fresh")) += 5;
        assert_eq!(m.get("fresh"), Some(&10));
        assert_eq!(m.iter().count(), ids.len());
        assert_eq!(m.values().count(), ids.len());
    }

    #[test]
    fn slots_are_reused_and_chunks_added_only_when_full() {
        let mut m: IdMap<String> = IdMap::new();
        let n = CHUNK + 10;
        for i in 0..n {
            m.insert(Arc::from(format!("id-{i}").as_str()), format!("v{i}"));
        }
        assert_eq!(m.table.slab.chunks.len(), 2);
        for i in 0..n / 2 {
            assert_eq!(m.remove(&format!("id-{i}")), Some(format!("v{i}")));
        }
        assert_eq!(m.len(), n - n / 2);
        // As many again: the freed slots first, no third chunk.
        for i in n..n + n / 2 {
            m.insert(Arc::from(format!("id-{i}").as_str()), format!("v{i}"));
        }
        assert_eq!(m.table.slab.chunks.len(), 2);
        assert_eq!(m.len(), n);
        for i in n / 2..n + n / 2 {
            assert_eq!(m.get(&format!("id-{i}")), Some(&format!("v{i}")));
        }
        for i in 0..n / 2 {
            assert!(m.get(&format!("id-{i}")).is_none());
        }
        // Replacing a value keeps its slot; a removed id's slot holds nothing.
        assert_eq!(
            m.insert(Arc::from("id-1040"), "new".into()),
            Some("v1040".into())
        );
        assert_eq!(m.values().count(), n);
        assert_eq!(m.table.slab.free.len(), 2 * CHUNK - n);
    }

    #[test]
    fn equal_hashes_keep_ids_apart() {
        // Ids with one hash (a collision, forced): the text decides.
        let mut m: IdMap<u32> = IdMap::new();
        assert_eq!(m.insert_hashed(7 << 32, Arc::from("a"), 1), None);
        assert_eq!(m.insert_hashed(7 << 32, Arc::from("b"), 2), None);
        assert_eq!(m.insert_hashed(7 << 32, Arc::from("a"), 3), Some(1));
        let get = |m: &IdMap<u32>, h, id| m.get_hashed(h, id).copied();
        assert_eq!(get(&m, 7 << 32, "a"), Some(3));
        assert_eq!(get(&m, 7 << 32, "b"), Some(2));
        assert_eq!(get(&m, 7 << 32, "c"), None);
        // The same text under another hash (tag) is not found (lookups always hash alike).
        assert_eq!(get(&m, 8 << 32, "a"), None);
        assert_eq!(m.remove_hashed(7 << 32, "a"), Some(3));
        assert_eq!(get(&m, 7 << 32, "b"), Some(2));
    }

    /// The table against a model, with hashes from a handful of tags so that probes run long,
    /// clusters meet and wrap around the table's end, and removals shift entries back:
    /// every id stays found, every removed one stays gone, through growth and churn.
    #[test]
    fn clusters_and_removals_keep_every_id_reachable() {
        let mut rand = crate::state::registry::tests::xorshift(0x9e37_79b9_7f4a_7c15);
        for tags in [1u64, 3, 16, 1 << 20] {
            let mut m: IdMap<u64> = IdMap::new();
            let mut model = std::collections::HashMap::new();
            // A hash whose tag is one of `tags` values spread over the table (high bits),
            // including the very last bucket's.
            let hash_of = |n: u64| {
                let t = (n % tags).wrapping_mul(0x9e37_79b9) as u32;
                let t = if n % 7 == 0 { u32::MAX } else { t };
                u64::from(t) << 32 | (n & 0xffff_ffff)
            };
            for step in 0..20_000u64 {
                let n = rand(600);
                let id = format!("id-{n}");
                let h = hash_of(n);
                if rand(3) == 0 {
                    assert_eq!(
                        m.remove_hashed(h, &id),
                        model.remove(&n),
                        "{tags}: remove {id}"
                    );
                } else {
                    let old = m.insert_hashed(h, Arc::from(id.as_str()), step);
                    assert_eq!(old, model.insert(n, step), "{tags}: insert {id}");
                }
                assert_eq!(m.len(), model.len());
                if step % 997 == 0 {
                    for k in 0..600u64 {
                        let got = m.get_hashed(hash_of(k), &format!("id-{k}")).copied();
                        assert_eq!(got, model.get(&k).copied(), "{tags}: id-{k} at step {step}");
                    }
                    assert!(m.table.index.len * 2 <= m.table.index.words.len());
                    assert_eq!(m.table.index.slots().count(), model.len());
                }
            }
        }
    }
}
