//! The registry's maps keyed by task or context id: ordered by a keyed 64-bit hash of the id
//! first and by the id's text only between equal hashes. A lookup then compares integers held
//! in the B-tree's own nodes; keyed by the `Arc<str>` alone, every comparison on the way down
//! a tree of 100k ids followed a pointer to the id's text (a cache miss each: about a tenth
//! of the edge's CPU per new task, issue 16). Two ids with the same hash are still two keys
//! (exact, no fail-open or fail-closed case), and the hash key is random per process, so
//! nobody can line ids up to make the text comparisons many. Still a B-tree, for the reason
//! in `state.rs`: no whole-map rehash under the registry's lock.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::btree_map::Entry;
use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::BuildHasher;

use std::sync::Arc;

/// Shared id text: a task id lives in the map, the LRU and two indexes at once.
pub(super) type Id = Arc<str>;

/// What a key and a lookup have in common: the hash, then the text.
trait Probe {
    fn hash(&self) -> u64;
    fn text(&self) -> &str;
}

/// A stored key: the id and its hash.
#[derive(Debug)]
struct Key {
    hash: u64,
    id: Id,
}

/// A lookup by borrowed text (no `Arc` made).
struct Look<'a> {
    hash: u64,
    text: &'a str,
}

impl Probe for Key {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn text(&self) -> &str {
        &self.id
    }
}

impl Probe for Look<'_> {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn text(&self) -> &str {
        self.text
    }
}

impl<'a> Borrow<dyn Probe + 'a> for Key {
    fn borrow(&self) -> &(dyn Probe + 'a) {
        self
    }
}

impl Ord for dyn Probe + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.hash()
            .cmp(&other.hash())
            .then_with(|| self.text().cmp(other.text()))
    }
}
impl PartialOrd for dyn Probe + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for dyn Probe + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for dyn Probe + '_ {}

// The stored keys order exactly as their borrowed form does (BTreeMap's `Borrow` contract).
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        (self as &dyn Probe).cmp(other as &dyn Probe)
    }
}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        (self as &dyn Probe) == (other as &dyn Probe)
    }
}
impl Eq for Key {}

/// A map from ids to `V`, in no meaningful order. The tree holds the keys and 4-byte slot
/// numbers; the values sit in a slab of fixed-size chunks. Small tree nodes (a task's entry
/// inline made a node about 1.3 KiB, its child pointers past the values) mean fewer cache
/// lines per level on the way down, and a chunk never moves, so growing the slab copies
/// nothing under the registry's lock.
pub(super) struct IdMap<V> {
    hasher: RandomState,
    index: BTreeMap<Key, u32>,
    slab: Slab<V>,
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

    /// Stores `value` in a free slot (a new chunk when none is free).
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
            index: BTreeMap::new(),
            slab: Slab {
                chunks: Vec::new(),
                free: Vec::new(),
            },
        }
    }

    fn look<'a>(&self, text: &'a str) -> Look<'a> {
        Look {
            hash: self.hasher.hash_one(text),
            text,
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.index.contains_key(&self.look(id) as &dyn Probe)
    }

    pub fn get(&self, id: &str) -> Option<&V> {
        let slot = *self.index.get(&self.look(id) as &dyn Probe)?;
        self.slab.get(slot)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        let look = self.look(id);
        let slot = *self.index.get(&look as &dyn Probe)?;
        self.slab.get_mut(slot)
    }

    /// The stored id (the one `Arc` every index shares) and its value.
    pub fn get_key_value(&self, id: &str) -> Option<(&Id, &V)> {
        let (k, slot) = self.index.get_key_value(&self.look(id) as &dyn Probe)?;
        Some((&k.id, self.slab.get(*slot)?))
    }

    pub fn insert(&mut self, id: Id, value: V) -> Option<V> {
        let hash = self.hasher.hash_one(&*id);
        match self.index.entry(Key { hash, id }) {
            Entry::Occupied(e) => self
                .slab
                .get_mut(*e.get())
                .map(|old| std::mem::replace(old, value)),
            Entry::Vacant(e) => {
                e.insert(self.slab.put(value));
                None
            }
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<V> {
        let look = self.look(id);
        let slot = self.index.remove(&look as &dyn Probe)?;
        self.slab.take(slot)
    }

    /// The value of `id`, made with `V::default()` (and `id` stored) when there is none.
    pub fn entry_or_default(&mut self, id: Id) -> &mut V
    where
        V: Default,
    {
        let hash = self.hasher.hash_one(&*id);
        let slot = match self.index.entry(Key { hash, id }) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => *e.insert(self.slab.put(V::default())),
        };
        // Every slot in the index holds a value (a slot number the slab handed out).
        let s = slot as usize;
        self.slab.chunks[s / CHUNK][s % CHUNK].get_or_insert_with(V::default)
    }

    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.index.values().filter_map(|s| self.slab.get(*s))
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (&Id, &V)> {
        self.index
            .iter()
            .filter_map(|(k, s)| Some((&k.id, self.slab.get(*s)?)))
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
        assert_eq!(m.slab.chunks.len(), 2);
        for i in 0..n / 2 {
            assert_eq!(m.remove(&format!("id-{i}")), Some(format!("v{i}")));
        }
        assert_eq!(m.len(), n - n / 2);
        // As many again: the freed slots first, no third chunk.
        for i in n..n + n / 2 {
            m.insert(Arc::from(format!("id-{i}").as_str()), format!("v{i}"));
        }
        assert_eq!(m.slab.chunks.len(), 2);
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
        assert_eq!(m.slab.free.len(), 2 * CHUNK - n);
    }

    #[test]
    fn equal_hashes_keep_ids_apart() {
        // Keys with one hash (a collision, forced): the text decides, both directions.
        let a = Key {
            hash: 7,
            id: Arc::from("a"),
        };
        let b = Key {
            hash: 7,
            id: Arc::from("b"),
        };
        assert_eq!(a.cmp(&b), Ordering::Less);
        assert_eq!(b.cmp(&a), Ordering::Greater);
        assert_ne!(a, b);
        let mut map = BTreeMap::new();
        map.insert(a, 1);
        map.insert(b, 2);
        let look = |text| Look { hash: 7, text };
        assert_eq!(map.get(&look("a") as &dyn Probe), Some(&1));
        assert_eq!(map.get(&look("b") as &dyn Probe), Some(&2));
        assert_eq!(map.get(&look("c") as &dyn Probe), None);
        // The same text under another hash is not found (lookups always hash alike).
        assert_eq!(map.get(&Look { hash: 8, text: "a" } as &dyn Probe), None);
    }
}
