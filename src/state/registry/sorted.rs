//! One big ordered set of `(status timestamp, task id)`: a list's large form
//! ([`super::lists`]). Sorted chunks of at most [`CHUNK`] entries rather than a B-tree, for
//! one query a B-tree answers by walking: how many entries are newer than a timestamp
//! (`statusTimestampAfter`'s `totalSize`). Here that is two binary searches and a sum of the
//! lengths of the chunks after the first match (one per [`CHUNK`] / 2 entries at least); a
//! B-tree's range walk read every newer entry under the registry's lock (2.3 ms at 200,000).
//! Inserting costs a move of at most a chunk's entries (none for the newest task, the usual
//! one: timestamps grow).

use super::ids::Id;

/// Entries per chunk at most; a full chunk splits in two halves, and a chunk under a
/// quarter of it joins a neighbour that has room. Small in tests, so that they split.
const CHUNK: usize = if cfg!(test) { 4 } else { 256 };

#[derive(Default)]
pub(super) struct Sorted {
    /// Ascending; none empty; each chunk's entries below the next chunk's.
    chunks: Vec<Vec<(u64, Id)>>,
    len: usize,
}

fn key(e: &(u64, Id)) -> (u64, &str) {
    (e.0, &*e.1)
}

impl Sorted {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk where `k` is or would go: the first whose last entry is not below it (the
    /// last chunk when `k` is above all).
    fn chunk_of(&self, k: (u64, &str)) -> usize {
        self.chunks
            .partition_point(|c| c.last().is_some_and(|e| key(e) < k))
            .min(self.chunks.len().saturating_sub(1))
    }

    /// Adds the entry; false when it was there.
    pub fn insert(&mut self, ts: u64, id: &Id) -> bool {
        let k = (ts, &**id);
        if self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(1));
        }
        let ci = self.chunk_of(k);
        let chunk = &mut self.chunks[ci];
        let at = chunk.partition_point(|e| key(e) < k);
        if chunk.get(at).is_some_and(|e| key(e) == k) {
            return false;
        }
        chunk.insert(at, (ts, id.clone()));
        self.len += 1;
        if chunk.len() > CHUNK {
            let upper = chunk.split_off(chunk.len() / 2);
            // The lower half is rarely written again (timestamps grow): no room kept there.
            chunk.shrink_to_fit();
            self.chunks.insert(ci + 1, upper);
        }
        true
    }

    /// Removes the entry; false when it was not there.
    pub fn remove(&mut self, ts: u64, id: &str) -> bool {
        let k = (ts, id);
        if self.chunks.is_empty() {
            return false;
        }
        let ci = self.chunk_of(k);
        let chunk = &mut self.chunks[ci];
        let at = chunk.partition_point(|e| key(e) < k);
        if !chunk.get(at).is_some_and(|e| key(e) == k) {
            return false;
        }
        chunk.remove(at);
        self.len -= 1;
        let n = chunk.len();
        if n == 0 {
            self.chunks.remove(ci);
        } else if n < CHUNK / 4 {
            // Into a neighbour with room for it: a small chunk stays only between nearly
            // full ones, so the chunks stay few (counting sums their lengths).
            let fits = |j: usize| self.chunks.get(j).is_some_and(|c| c.len() + n <= CHUNK);
            if fits(ci + 1) {
                let next = self.chunks.remove(ci + 1);
                self.chunks[ci].extend(next);
            } else if ci > 0 && fits(ci - 1) {
                let this = self.chunks.remove(ci);
                self.chunks[ci - 1].extend(this);
            }
        }
        true
    }

    #[cfg(test)]
    pub fn contains(&self, ts: u64, id: &str) -> bool {
        let k = (ts, id);
        self.chunks
            .get(self.chunk_of(k))
            .is_some_and(|c| c.binary_search_by(|e| key(e).cmp(&k)).is_ok())
    }

    /// How many entries have a timestamp of `from` or later.
    pub fn count_from(&self, from: u64) -> usize {
        let k = (from, "");
        let ci = self.chunk_of(k);
        let Some(chunk) = self.chunks.get(ci) else {
            return 0;
        };
        let first = chunk.len() - chunk.partition_point(|e| key(e) < k);
        first + self.chunks[ci + 1..].iter().map(Vec::len).sum::<usize>()
    }

    /// Ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &(u64, Id)> {
        self.chunks.iter().flatten()
    }

    /// Descending, from right below `before` (`None`: the newest).
    pub fn rev_below(&self, before: Option<(u64, &str)>) -> impl Iterator<Item = &(u64, Id)> {
        let (ci, at) = match before {
            Some(k) if !self.chunks.is_empty() => {
                let ci = self.chunk_of(k);
                (ci, self.chunks[ci].partition_point(|e| key(e) < k))
            }
            _ => (self.chunks.len(), 0),
        };
        let whole = self.chunks[..ci].iter().flatten();
        let part = self.chunks.get(ci).map_or(&[][..], |c| &c[..at]);
        whole.chain(part.iter()).rev()
    }

    /// Invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        assert_eq!(self.chunks.iter().map(Vec::len).sum::<usize>(), self.len);
        assert!(self
            .chunks
            .iter()
            .all(|c| !c.is_empty() && c.len() <= CHUNK));
        let all: Vec<(u64, &str)> = self.iter().map(key).collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Against a `BTreeSet` through growth, splits, merges and emptying: after every change,
    /// length, membership, every count and every descending walk from every cursor agree.
    #[test]
    fn answers_as_a_btree_set_does() {
        let mut next = super::super::tests::xorshift(0x2545_f491_4f6c_dd1d);
        let mut sorted = Sorted::default();
        let mut model: BTreeSet<(u64, Id)> = BTreeSet::new();
        let ids: Vec<Id> = (0..60)
            .map(|i| Id::from(format!("t{i:02}").as_str()))
            .collect();
        let plan: Vec<bool> = [[true; 50], [false; 50], [true; 50], [false; 50]].concat();
        for (step, grow) in plan.into_iter().enumerate() {
            // Timestamps from few values (ties), ids from a few more: duplicates happen.
            let (ts, id) = (next(10), ids[next(ids.len() as u64) as usize].clone());
            if grow {
                assert_eq!(
                    sorted.insert(ts, &id),
                    model.insert((ts, id.clone())),
                    "{step}"
                );
            } else if let Some(e) = model
                .iter()
                .nth(next(model.len().max(1) as u64) as usize)
                .cloned()
            {
                assert!(sorted.remove(e.0, &e.1), "{step}");
                model.remove(&e);
                assert!(!sorted.remove(e.0, &e.1), "{step}: removed twice");
            }
            assert!(!sorted.remove(ts, "absent"));
            sorted.check();
            assert_eq!(sorted.len(), model.len());
            assert_eq!(sorted.is_empty(), model.is_empty());
            let all: Vec<(u64, Id)> = sorted.iter().cloned().collect();
            assert!(all.iter().eq(model.iter()), "{step}");
            for from in 0..=11 {
                let want = model.iter().filter(|(t, _)| *t >= from).count();
                assert_eq!(sorted.count_from(from), want, "{step} from {from}");
            }
            let cursors = [None, Some((0, "")), Some((u64::MAX, "")), Some((5, "t30"))]
                .into_iter()
                .chain(model.iter().map(|(t, i)| Some((*t, &**i))));
            for before in cursors {
                let want: Vec<&(u64, Id)> = model
                    .iter()
                    .rev()
                    .filter(|(t, i)| before.map_or(true, |b| (*t, &**i) < b))
                    .collect();
                let got: Vec<&(u64, Id)> = sorted.rev_below(before).collect();
                assert_eq!(got, want, "{step} {before:?}");
            }
            for (t, i) in &model {
                assert!(sorted.contains(*t, i));
            }
            assert!(!sorted.contains(ts, "absent"));
        }
        assert!(sorted.is_empty());
    }
}
