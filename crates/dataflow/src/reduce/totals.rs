//! Totals: for some keys of the last activation, the sums by value of every update the input
//! and output traces hold for the key through that activation's `upper`, with a bound: the
//! join of all their times. The next activation visits such a key without reading its
//! histories when every new time it has (new updates and due deferred times) is at or after
//! the bound: at each time it examines then (joins of those times with history times, so at or
//! after the bound too), every stored update is in the accumulation, so the sums stand in for
//! the histories, as updates at the bound.
//!
//! This is what keeps long iteration histories cheap. On a path whose node ids follow the path,
//! `cc` changes node `k`'s label at each of `k` rounds of one outer time; reading the key's
//! whole history at every round is quadratic per key, cubic in all, where the sums make each
//! round's visit as long as its new updates (measurements: docs/perf-notes.md, section "Reduce:
//! totals"). Where a key's history holds later rounds of earlier outer times (bfs after its
//! first step), the bound is ahead of the new times and the key is read as before.
//!
//! Why the sums stay right:
//! - Totals are made anew by every activation, for the keys it visits, and serve only the
//!   next interval: what the traces hold for such a key through that interval's `lower` is what
//!   the visit read (its history, the interval's new updates in the trace, and its own output),
//!   only compacted since. A key an activation does not visit has no totals in the next one.
//! - Compaction since then advanced times only by frontiers at or before the new times: a
//!   stored time `h` at or before the bound stays at or before every time examined.
//! - The output sums are `logic` of the input sums: the bound is kept only when it is not
//!   beyond the activation's `upper` (complete) and at or after a new time of the visit (so at
//!   or after the compaction frontier), where the operator's output is right by construction
//!   and both accumulations are the whole sums.
//!
//! Short histories are read as before: the sums would cost about what reading them does.

use crate::recycle::recycle;
use columnar::{Borrow, Columnar, Index, Push, Ref};
use ripple_updates::consolidate::consolidate_pairs;
use ripple_updates::search::gallop;
use ripple_updates::{Antichain, AntichainRef, Data, Semigroup, Time};

/// Histories shorter than this (input and output updates together) are not summed: reading
/// them at the next visit costs about what the sums would.
pub(super) const TOTALS_MIN: usize = 32;

/// The totals taken in one activation, by key.
pub(super) struct Totals<K: Data, V: Data, T, R, V2, R2> {
    /// The `upper` of the activation that took them: they serve only the interval starting
    /// there.
    through: Antichain<T>,
    /// Sorted and distinct.
    keys: Vec<K>,
    bounds: Vec<T>,
    /// Per key, whether it has sums or only a bound.
    summed: Vec<bool>,
    /// Per key, where its input sums end in `values` and `diffs`.
    input_ends: Vec<usize>,
    values: <V as Columnar>::Container,
    diffs: Vec<R>,
    /// Per key, where its output sums end in `output`.
    output_ends: Vec<usize>,
    output: Vec<(V2, R2)>,
}

impl<K: Data, V: Data, T, R, V2, R2> Default for Totals<K, V, T, R, V2, R2> {
    fn default() -> Self {
        Self {
            through: Antichain::new(),
            keys: Vec::new(),
            bounds: Vec::new(),
            summed: Vec::new(),
            input_ends: Vec::new(),
            values: Default::default(),
            diffs: Vec::new(),
            output_ends: Vec::new(),
            output: Vec::new(),
        }
    }
}

impl<K: Data, V: Data, T: Time, R: Semigroup, V2: Data, R2: Semigroup> Totals<K, V, T, R, V2, R2> {
    /// Empties them, for the totals of the activation ending at `through`.
    pub(super) fn restart(&mut self, through: &Antichain<T>) {
        self.through.clone_from(through);
        self.keys.clear();
        self.bounds.clear();
        self.summed.clear();
        self.input_ends.clear();
        columnar::Clear::clear(&mut self.values);
        self.diffs.clear();
        self.output_ends.clear();
        self.output.clear();
    }

    /// Adds `key`'s totals (keys must come in increasing order).
    pub(super) fn push(&mut self, key: &K, total: &KeyTotal<'_, V, T, R, V2, R2>) {
        debug_assert!(self.keys.last().is_none_or(|last| last < key));
        self.keys.push(key.clone());
        self.bounds.push(total.bound.clone());
        self.summed.push(total.summed);
        if total.summed {
            for (value, diff) in total.input.iter() {
                self.values.push(*value);
                self.diffs.push(diff.clone());
            }
            self.output.extend_from_slice(&total.output);
        }
        self.input_ends.push(self.diffs.len());
        self.output_ends.push(self.output.len());
    }

    /// A cursor for the activation whose interval begins at `lower`: it finds nothing unless
    /// these totals were taken by the activation just before.
    pub(super) fn cursor(&self, lower: &Antichain<T>) -> TotalsCursor {
        let len = if self.through == *lower {
            self.keys.len()
        } else {
            0
        };
        TotalsCursor { len, next: 0 }
    }

    /// What `key`'s totals offer, given its new times (`new` updates' times and `due` times):
    /// see [`Cover`]. Keys must be asked in increasing order, through the `cursor` of this
    /// activation.
    pub(super) fn cover<W, D>(
        &self,
        cursor: &mut TotalsCursor,
        key: &K,
        new: &[(W, T, D)],
        due: &[T],
    ) -> Cover {
        let keys = &self.keys;
        let index = gallop(cursor.next, cursor.len, |index| keys[index] < *key);
        cursor.next = index;
        if index == cursor.len || keys[index] != *key {
            return Cover::Nothing;
        }
        let bound = &self.bounds[index];
        let after = |time: &T| bound.less_equal(time);
        if !(new.iter().all(|update| after(&update.1)) && due.iter().all(after)) {
            Cover::Nothing
        } else if self.summed[index] {
            Cover::Sums(index)
        } else {
            Cover::Bound
        }
    }

    /// Appends totals `index` as histories: each sum an update at the bound.
    pub(super) fn fill<'t>(
        &'t self,
        index: usize,
        history: &mut Vec<(Ref<'t, V>, T, R)>,
        output: &mut Vec<(V2, T, R2)>,
    ) {
        let bound = &self.bounds[index];
        let values = self.values.borrow();
        let inputs = index.checked_sub(1).map_or(0, |i| self.input_ends[i])..self.input_ends[index];
        for position in inputs {
            let diff = self.diffs[position].clone();
            history.push((values.get(position), bound.clone(), diff));
        }
        let outputs =
            index.checked_sub(1).map_or(0, |i| self.output_ends[i])..self.output_ends[index];
        for (value, diff) in &self.output[outputs] {
            output.push((value.clone(), bound.clone(), diff.clone()));
        }
    }
}

/// What the last activation's totals offer a key about to be visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cover {
    /// Nothing that covers its new times: read its histories.
    Nothing,
    /// A bound that covers them, without sums: read its histories, and sum them for the next
    /// activation. Sums are made only for keys whose bound proved to cover, as they do where
    /// one outer time runs many rounds; elsewhere (bfs after its first step) bounds rarely
    /// cover, and summing every long history would cost more than the few visits it saves.
    Bound,
    /// Sums whose bound covers them (their index): they stand in for the histories.
    Sums(usize),
}

/// Where an activation is in the last one's totals: keys are visited in increasing order.
pub(super) struct TotalsCursor {
    /// How many of the keys may be used.
    len: usize,
    /// The first key not yet passed.
    next: usize,
}

/// One key's totals in the making, over a visit: [`KeyTotal::begin`] before the sweep (which
/// may rewrite the histories), [`KeyTotal::finish`] after it.
pub(super) struct KeyTotal<'a, V: Data, T, R, V2, R2> {
    bound: T,
    /// Whether `input` and `output` are made, or only the bound.
    summed: bool,
    /// The input sums, consolidated and sorted by value.
    input: Vec<(Ref<'a, V>, R)>,
    /// The output sums: `logic` of `input`.
    output: Vec<(V2, R2)>,
}

impl<V: Data, T: Time, R, V2, R2> Default for KeyTotal<'_, V, T, R, V2, R2> {
    fn default() -> Self {
        Self {
            bound: T::minimum(),
            summed: false,
            input: Vec::new(),
            output: Vec::new(),
        }
    }
}

impl<'a, V: Data, T: Time, R: Semigroup, V2: Data, R2: Semigroup> KeyTotal<'a, V, T, R, V2, R2> {
    /// The same buffers for borrows of another lifetime (see `crate::recycle`).
    pub(super) fn recycle<'b>(self) -> KeyTotal<'b, V, T, R, V2, R2> {
        KeyTotal {
            bound: self.bound,
            summed: self.summed,
            input: recycle(self.input),
            output: self.output,
        }
    }

    /// Starts the key's totals from its histories, new updates and due times, as read for the
    /// visit, given what the last totals offered (`cover`): sums where they covered the new
    /// times, a bound alone for a long history otherwise. The bound is the join of the new
    /// times, kept only when every history time is at or before it: the shape of a key whose
    /// rounds run in order, and a test that stops at the first later time, where histories hold
    /// later rounds of earlier outer times. False when there is nothing worth keeping (a short
    /// history nothing covered) or nothing can be kept (a history time after the new ones, or a
    /// bound not complete before `upper`).
    pub(super) fn begin(
        &mut self,
        history: &[(Ref<'a, V>, T, R)],
        new: &[(Ref<'a, V>, T, R)],
        output: &[(V2, T, R2)],
        due: &[T],
        upper: AntichainRef<'_, T>,
        cover: Cover,
    ) -> bool {
        let short = history.len() + output.len() < TOTALS_MIN;
        if (short && cover == Cover::Nothing) || (new.is_empty() && due.is_empty()) {
            return false;
        }
        let mut bound = T::minimum();
        for (_, time, _) in new {
            bound.join_assign(time);
        }
        for time in due {
            bound.join_assign(time);
        }
        if upper.less_equal(&bound)
            || !history.iter().all(|(_, time, _)| time.less_equal(&bound))
            || !output.iter().all(|(_, time, _)| time.less_equal(&bound))
        {
            return false;
        }
        self.bound = bound;
        self.summed = cover != Cover::Nothing;
        self.input.clear();
        if !self.summed {
            return true;
        }
        let updates = history.iter().chain(new);
        let sums = updates.map(|(value, _, diff)| (*value, diff.clone()));
        Extend::extend(&mut self.input, sums);
        consolidate_pairs(&mut self.input);
        true
    }

    /// Completes the totals after the visit, whose `corrections` are all at or before the
    /// bound: every time a visit examines is a join of new or due times and history times, all
    /// at or before it.
    pub(super) fn finish(
        &mut self,
        corrections: &[(V2, T, R2)],
        logic: impl FnOnce(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    ) {
        debug_assert!(
            corrections
                .iter()
                .all(|(_, time, _)| time.less_equal(&self.bound)),
            "a correction after the bound {:?}",
            self.bound
        );
        self.output.clear();
        if self.summed && !self.input.is_empty() {
            logic(&self.input, &mut self.output);
            consolidate_pairs(&mut self.output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ripple_updates::Product;

    type Time = Product<u64, u32>;

    fn at(round: u32) -> Time {
        Product::new(0, round)
    }

    fn min(input: &[(&u64, i64)], output: &mut Vec<(u64, i64)>) {
        output.push((*input[0].0, 1));
    }

    /// A key's totals after round 3 stand in for its histories at later rounds of the same
    /// outer time, not at another outer time, nor for another key or another interval.
    #[test]
    fn totals_cover_later_rounds_only() {
        // Long enough to be kept.
        let values: Vec<u64> = (0..TOTALS_MIN as u64).collect();
        let history: Vec<(&u64, Time, i64)> = (0..TOTALS_MIN)
            .map(|i| (&values[TOTALS_MIN - 1 - i], at(i as u32 % 3), 1))
            .collect();
        let new = vec![(&values[0], at(3), 1i64)];
        let output: Vec<(u64, Time, i64)> = vec![(1, at(0), 1), (1, at(2), -1), (0, at(2), 1)];
        let upper = Antichain::from_iter([at(4), Product::new(1, 0)]);
        let mut total = KeyTotal::default();
        // A bound first, then, when it covers, sums.
        let later = vec![(&values[3], at(5), 1i64)];
        let mut totals = Totals::<u64, u64, Time, i64, u64, i64>::default();
        let mut cover = Cover::Nothing;
        for summed in [false, true] {
            assert!(total.begin(&history, &new, &output, &[], upper.borrow(), cover));
            total.finish(&[], min);
            totals.restart(&upper);
            totals.push(&7, &total);
            cover = totals.cover(&mut totals.cursor(&upper), &7, &later, &[]);
            assert_eq!(matches!(cover, Cover::Sums(_)), summed, "{cover:?}");
        }

        let mut cursor = totals.cursor(&upper);
        assert_eq!(totals.cover(&mut cursor, &6, &later, &[]), Cover::Nothing);
        let Cover::Sums(index) = totals.cover(&mut cursor, &7, &later, &[]) else {
            panic!("round 5 is after the bound")
        };
        let (mut filled, mut filled_output) = (Vec::new(), Vec::new());
        totals.fill(index, &mut filled, &mut filled_output);
        // Every value once, its own diff plus the new update's for 0.
        assert_eq!(filled.len(), TOTALS_MIN);
        assert!(filled.iter().all(|(_, time, _)| *time == at(3)));
        assert_eq!(filled[0], (&0, at(3), 2));
        assert_eq!(filled_output, vec![(0, at(3), 1)]);

        let early = [(&values[3], at(2), 1i64)];
        let cover = |lower: &Antichain<Time>, new: &[(&u64, Time, i64)], due: &[Time]| {
            totals.cover(&mut totals.cursor(lower), &7, new, due)
        };
        assert_eq!(cover(&upper, &early, &[]), Cover::Nothing);
        assert_eq!(cover(&upper, &later, &[Product::new(1, 0)]), Cover::Nothing);
        let elsewhere = Antichain::from_iter([at(5), Product::new(1, 0)]);
        assert_eq!(cover(&elsewhere, &later, &[]), Cover::Nothing);
    }

    /// Short histories are not kept unless a bound covered them; a bound beyond `upper` (here
    /// the join of new times of two outer times) is not kept.
    #[test]
    fn short_or_incomplete_totals_are_not_kept() {
        let value = 1u64;
        let history = vec![(&value, at(0), 1i64)];
        let new = vec![(&value, at(1), 1i64)];
        let upper = Antichain::from_iter([at(2), Product::new(1, 0)]);
        let mut total = KeyTotal::<u64, Time, i64, u64, i64>::default();
        assert!(!total.begin(&history, &new, &[], &[], upper.borrow(), Cover::Nothing));
        assert!(total.begin(&history, &new, &[], &[], upper.borrow(), Cover::Bound));
        let beyond = [(&value, at(1), 1i64), (&value, Product::new(1, 0), 1)];
        assert!(!total.begin(&history, &beyond, &[], &[], upper.borrow(), Cover::Bound));
        assert!(!total.begin(&history, &[], &[], &[], upper.borrow(), Cover::Bound));
    }
}
