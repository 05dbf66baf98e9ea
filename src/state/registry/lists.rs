//! The ListTasks indexes of one owner (or of one owner's context): all its tasks, and the
//! same tasks per state, each ordered by `(status timestamp, task id)`.
//!
//! Every query ListTasks can ask (a context or not, a state or not) is then one ordered set
//! read backwards: a page touches only the tasks it returns, and `totalSize` is the set's
//! length (or, with `statusTimestampAfter`, two binary searches and a sum of chunk lengths in
//! the large form's sorted chunks, [`super::sorted`]; no task looked up). Filtering one big index instead looked up every task of the caller under the
//! registry's lock: 70-150 ms with 200,000 tasks, during which every other request waited.
//!
//! Most contexts hold one task or a few, and a B-tree takes room for eleven entries from its
//! first: two trees and a map of trees per context were 1.7 KiB per context, 340 MB for the
//! default 200,000 one-task contexts. Up to [`SMALL`] tasks are therefore one sorted vector
//! of exactly their number (each entry with its state), read by filtering it; the large
//! form (one sorted set of all, one per state) comes with the next task, and goes again when
//! the lists are down to [`SMALL`] / 4.

use std::collections::BTreeMap;

use super::ids::Id;
use super::sorted::Sorted;

/// Tasks held in the small form at most.
pub(super) const SMALL: usize = 16;

/// One owner's (or one owner's context's) tasks, for listing.
pub(super) enum Lists {
    /// `(ts, id, state)` ascending by `(ts, id)`; at most [`SMALL`], capacity exact.
    Small(Vec<(u64, Id, Id)>),
    Large(Box<Trees>),
}

/// The large form: all tasks, and the tasks per state.
#[derive(Default)]
pub(super) struct Trees {
    all: Sorted,
    by_state: BTreeMap<Id, Sorted>,
}

impl Default for Lists {
    fn default() -> Self {
        Lists::Small(Vec::new())
    }
}

impl Trees {
    /// The tasks in `state` (`""`: any state), if there are any.
    fn select(&self, state: &str) -> Option<&Sorted> {
        if state.is_empty() {
            Some(&self.all)
        } else {
            self.by_state.get(state)
        }
    }

    fn insert(&mut self, ts: u64, id: &Id, state: &Id) {
        self.all.insert(ts, id);
        self.by_state
            .entry(state.clone())
            .or_default()
            .insert(ts, id);
    }
}

impl Lists {
    pub fn insert(&mut self, ts: u64, id: &Id, state: &Id) {
        match self {
            Lists::Small(v) if v.len() < SMALL => {
                let at = v.partition_point(|(t, i, _)| (*t, i) < (ts, id));
                if v.get(at).is_some_and(|(t, i, _)| (*t, i) == (ts, id)) {
                    return;
                }
                v.reserve_exact(1);
                v.insert(at, (ts, id.clone(), state.clone()));
            }
            Lists::Small(v) => {
                let mut trees = Trees::default();
                for (t, i, s) in v.drain(..) {
                    trees.insert(t, &i, &s);
                }
                trees.insert(ts, id, state);
                *self = Lists::Large(Box::new(trees));
            }
            Lists::Large(trees) => trees.insert(ts, id, state),
        }
    }

    pub fn remove(&mut self, ts: u64, id: &Id, state: &str) {
        match self {
            Lists::Small(v) => {
                let at = v.partition_point(|(t, i, _)| (*t, i) < (ts, id));
                if v.get(at).is_some_and(|(t, i, _)| (*t, i) == (ts, id)) {
                    v.remove(at);
                    v.shrink_to_fit();
                }
            }
            Lists::Large(trees) => {
                trees.all.remove(ts, id);
                if let Some(set) = trees.by_state.get_mut(state) {
                    set.remove(ts, id);
                    if set.is_empty() {
                        trees.by_state.remove(state);
                    }
                }
                if trees.all.len() <= SMALL / 4 {
                    let mut v = Vec::with_capacity(trees.all.len());
                    for (s, set) in &trees.by_state {
                        v.extend(set.iter().map(|(t, i)| (*t, i.clone(), s.clone())));
                    }
                    v.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
                    *self = Lists::Small(v);
                }
            }
        }
    }

    /// The oldest task (by `(ts, id)`) for which `keep` holds, among the `look` oldest.
    pub fn oldest_where(&self, look: usize, mut keep: impl FnMut(&Id) -> bool) -> Option<&Id> {
        match self {
            Lists::Small(v) => v.iter().take(look).map(|(_, i, _)| i).find(|i| keep(i)),
            Lists::Large(trees) => trees
                .all
                .iter()
                .take(look)
                .map(|(_, i)| i)
                .find(|i| keep(i)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match self {
            Lists::Small(v) => v.len(),
            Lists::Large(trees) => trees.all.len(),
        }
    }

    /// How many tasks in `state` (`""`: any) have a timestamp after `after` (0: all of
    /// them): the length of a set, or a walk of its newest end; no task is looked up.
    pub fn count(&self, state: &str, after: u64) -> usize {
        match self {
            Lists::Small(v) => v
                .iter()
                .filter(|(t, _, s)| {
                    (state.is_empty() || **s == *state) && (after == 0 || *t > after)
                })
                .count(),
            Lists::Large(trees) => {
                let Some(set) = trees.select(state) else {
                    return 0;
                };
                match after {
                    0 => set.len(),
                    _ => after.checked_add(1).map_or(0, |from| set.count_from(from)),
                }
            }
        }
    }

    /// Up to `limit` tasks in `state` (`""`: any), newest first, from right below `before`
    /// (a cursor's `(ts, id)`; `None`: the newest), stopping at the first whose timestamp is
    /// not after `after` (0: no such bound).
    pub fn page(
        &self,
        state: &str,
        after: u64,
        before: Option<(u64, &str)>,
        limit: usize,
    ) -> Vec<(u64, Id)> {
        let below = |t: u64, i: &Id| before.map_or(true, |(bt, bi)| (t, &**i) < (bt, bi));
        let newer = |t: u64| after == 0 || t > after;
        match self {
            Lists::Small(v) => v
                .iter()
                .rev()
                .filter(|(t, i, s)| below(*t, i) && (state.is_empty() || **s == *state))
                .take_while(|(t, _, _)| newer(*t))
                .take(limit)
                .map(|(t, i, _)| (*t, i.clone()))
                .collect(),
            Lists::Large(trees) => {
                let Some(set) = trees.select(state) else {
                    return Vec::new();
                };
                set.rev_below(before)
                    .take_while(|(t, _)| newer(*t))
                    .take(limit)
                    .map(|(t, i)| (*t, i.clone()))
                    .collect()
            }
        }
    }

    /// Whether the task is indexed under this state (invariant checks).
    #[cfg(test)]
    pub fn holds(&self, ts: u64, id: &Id, state: &str) -> bool {
        match self {
            Lists::Small(v) => v
                .iter()
                .any(|(t, i, s)| (*t, i) == (ts, id) && **s == *state),
            Lists::Large(trees) => {
                trees.all.contains(ts, id)
                    && trees
                        .by_state
                        .get(state)
                        .is_some_and(|s| s.contains(ts, id))
            }
        }
    }

    /// Entries in all the per-state sets together (invariant checks: each task once), and
    /// whether the form fits the size (small up to [`SMALL`], large above [`SMALL`] / 4).
    #[cfg(test)]
    pub fn check(&self) {
        match self {
            Lists::Small(v) => {
                assert!(v.len() <= SMALL);
                assert_eq!(v.capacity(), v.len());
                assert!(v.windows(2).all(|w| (w[0].0, &w[0].1) < (w[1].0, &w[1].1)));
            }
            Lists::Large(trees) => {
                assert!(trees.all.len() > SMALL / 4);
                let by_state: usize = trees.by_state.values().map(Sorted::len).sum();
                assert_eq!(by_state, trees.all.len());
                assert!(trees.by_state.values().all(|s| !s.is_empty()));
                trees.all.check();
                trees.by_state.values().for_each(Sorted::check);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Lists` against a plain vector through growth past [`SMALL`] into the trees and
    /// shrinking back below [`SMALL`] / 4: after every change, every count and every page
    /// (all states, time bounds, cursors, sizes) equals a filter of the vector.
    #[test]
    fn every_form_answers_as_a_filter_over_its_tasks() {
        let states: Vec<Id> = ["", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "odd"]
            .iter()
            .map(|s| Id::from(*s))
            .collect();
        let mut next = super::super::tests::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut lists = Lists::default();
        let mut model: Vec<(u64, Id, Id)> = Vec::new();
        let (mut larges, mut smalls_after_large) = (0, 0);
        // Grow to 40 tasks, shrink to none, twice; timestamps drawn from few values (ties).
        let plan: Vec<bool> = [[true; 40], [false; 40], [true; 40], [false; 40]].concat();
        for (step, grow) in plan.into_iter().enumerate() {
            if grow {
                let (ts, id) = (next(12), Id::from(format!("t{step:03}").as_str()));
                let state = states[next(states.len() as u64) as usize].clone();
                lists.insert(ts, &id, &state);
                model.push((ts, id, state));
            } else {
                let at = next(model.len() as u64) as usize;
                let (ts, id, state) = model.swap_remove(at);
                lists.remove(ts, &id, &state);
            }
            lists.check();
            assert_eq!(lists.len(), model.len());
            match &lists {
                Lists::Large(_) => larges += 1,
                Lists::Small(_) if larges > 0 => smalls_after_large += 1,
                Lists::Small(_) => {}
            }
            let mut sorted = model.clone();
            sorted.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
            let cursors: Vec<Option<(u64, &str)>> = [None]
                .into_iter()
                .chain(sorted.iter().step_by(3).map(|(t, i, _)| Some((*t, &**i))))
                .chain([Some((5, "t5")), Some((u64::MAX, "")), Some((0, ""))])
                .collect();
            for state in [
                "",
                "TASK_STATE_WORKING",
                "TASK_STATE_COMPLETED",
                "odd",
                "none",
            ] {
                for after in [0u64, 1, 5, 11, u64::MAX] {
                    let want: Vec<(u64, Id)> = sorted
                        .iter()
                        .filter(|(_, _, s)| state.is_empty() || **s == *state)
                        .filter(|(t, _, _)| after == 0 || *t > after)
                        .map(|(t, i, _)| (*t, i.clone()))
                        .collect();
                    assert_eq!(
                        lists.count(state, after),
                        want.len(),
                        "{step} {state} {after}"
                    );
                    for before in &cursors {
                        for limit in [1usize, 3, 100] {
                            let want: Vec<(u64, Id)> = want
                                .iter()
                                .filter(|(t, i)| {
                                    before.map_or(true, |(bt, bi)| (*t, &**i) < (bt, bi))
                                })
                                .take(limit)
                                .cloned()
                                .collect();
                            assert_eq!(
                                lists.page(state, after, *before, limit),
                                want,
                                "{step} {state} {after} {before:?} {limit}"
                            );
                        }
                    }
                }
            }
        }
        assert!(lists.is_empty());
        assert!(
            larges > 0 && smalls_after_large > 0,
            "{larges} {smalls_after_large}"
        );
    }

    /// A context's one task costs one entry of exactly its size, no tree.
    #[test]
    fn one_task_is_one_exact_entry() {
        let mut lists = Lists::default();
        let (id, state) = (Id::from("t"), Id::from("TASK_STATE_WORKING"));
        lists.insert(7, &id, &state);
        lists.insert(7, &id, &state);
        match &lists {
            Lists::Small(v) => assert_eq!((v.len(), v.capacity()), (1, 1)),
            Lists::Large(_) => panic!("a tree for one task"),
        }
        assert_eq!(std::mem::size_of::<Lists>(), 24);
    }
}
