//! The updates of one key on both sides of a join, and the product of the two.
//!
//! Every pair of updates `(v1, t1, r1)`, `(v2, t2, r2)` contributes `(v1, v2)` at `t1 ∨ t2`
//! with diff `r1 * r2`. Small histories take the nested loop, each pair of values' products
//! added up by time before they leave (see [`nested_loop`]). Large ones are walked in
//! time order: each update meets the *already passed* updates of the other side, and those
//! passed updates are advanced to the frontier of the other side's remaining times and
//! consolidated whenever they have grown by half (the frontier of every suffix is computed
//! once, backwards, unless incomparable times would make that quadratic). Advancing does not
//! change any join with a remaining time (see
//! [`Lattice::advance_by`]), and after consolidation churn such as `+1 / -1` on the same value
//! disappears, so the work follows the size of the accumulated collections rather than the
//! product of the histories.

use columnar::Ref;
use ripple_updates::consolidate::{
    consolidate_pairs, consolidate_triples, consolidate_within_values,
};
use ripple_updates::{Antichain, AntichainRef, Data, Semigroup, Time};

/// Histories whose product is at most this large take the nested loop.
const NESTED_LOOP_PRODUCT: usize = 32;

/// The updates of one key on one side: values by index, `(value index, time, diff)` triples.
pub(crate) struct KeyUpdates<'a, V: Data, T, R> {
    pub(crate) vals: Vec<Ref<'a, V>>,
    pub(crate) updates: Vec<(u32, T, R)>,
}

impl<V: Data, T, R> Default for KeyUpdates<'_, V, T, R> {
    fn default() -> Self {
        Self {
            vals: Vec::new(),
            updates: Vec::new(),
        }
    }
}

impl<'a, V: Data, T: Time, R: Semigroup> KeyUpdates<'a, V, T, R> {
    pub(crate) fn clear(&mut self) {
        self.vals.clear();
        self.updates.clear();
    }

    /// Starts a new value; following `push_update`s belong to it.
    pub(crate) fn push_val(&mut self, val: Ref<'a, V>) {
        self.vals.push(val);
    }

    /// Adds an update of the latest value.
    pub(crate) fn push_update(&mut self, time: T, diff: R) {
        debug_assert!(!self.vals.is_empty());
        self.updates
            .push(((self.vals.len() - 1) as u32, time, diff));
    }

    pub(crate) fn len(&self) -> usize {
        self.updates.len()
    }

    /// The meet of the update times, if there are any.
    pub(crate) fn meet(&self) -> Option<T> {
        T::meet_of(self.updates.iter().map(|(_, time, _)| time))
    }

    /// Joins every time with `meet` and consolidates each value's updates (they stay grouped by
    /// value). Joins with times `>= meet` are unchanged, and the churn that advancing makes
    /// cancel (an edge added and removed before `meet`, say) no longer multiplies with the
    /// other side.
    pub(crate) fn advance_by(&mut self, meet: &T) {
        for update in self.updates.iter_mut() {
            update.1.join_assign(meet);
        }
        consolidate_within_values(&mut self.updates);
    }
}

/// Calls `emit(v1, v2, t, r)` for every pair of updates, or for an equivalent set of pairs:
/// `t` is `t1 ∨ t2` and `r` the sum of `multiply(r1, r2)` over the pairs of those two values
/// joined at `t`, never zero; returns the number of pairs visited. `pairs` is scratch.
pub(crate) fn key_product<'a, 'b, V1, V2, T, R1, R2, R3>(
    left: &mut KeyUpdates<'a, V1, T, R1>,
    right: &mut KeyUpdates<'b, V2, T, R2>,
    multiply: &impl Fn(&R1, &R2) -> R3,
    pairs: &mut Vec<(T, R3)>,
    emit: &mut impl FnMut(Ref<'a, V1>, Ref<'b, V2>, T, R3),
) -> usize
where
    V1: Data,
    V2: Data,
    T: Time,
    R1: Semigroup,
    R2: Semigroup,
    R3: Semigroup,
{
    if left.len().saturating_mul(right.len()) <= NESTED_LOOP_PRODUCT {
        nested_loop(left, right, multiply, pairs, emit);
        return left.len() * right.len();
    }
    walk_in_time_order(left, right, multiply, emit)
}

/// The product of two small histories, pairs of the same two values added up by time first.
/// A value whose updates cancel before the other side's update (a depth that held from one
/// outer time to another, against an edge added after both) meets it in pairs at one time
/// with opposite diffs: consolidated here, they never reach the output. In bfs that was about
/// a quarter of the join's output, which comes down close to what differential's join emits
/// through an output builder that consolidates; bfs ran a few percent faster at one update per
/// step and on big steps of a big graph, and within noise elsewhere (measurements:
/// docs/perf-notes.md, section "Join: history products").
fn nested_loop<'a, 'b, V1, V2, T, R1, R2, R3>(
    left: &KeyUpdates<'a, V1, T, R1>,
    right: &KeyUpdates<'b, V2, T, R2>,
    multiply: &impl Fn(&R1, &R2) -> R3,
    pairs: &mut Vec<(T, R3)>,
    emit: &mut impl FnMut(Ref<'a, V1>, Ref<'b, V2>, T, R3),
) where
    V1: Data,
    V2: Data,
    T: Time,
    R3: Semigroup,
{
    // Histories come grouped by value (from a cursor, or advanced within values), so each
    // run of one value meets each run of the other once.
    for lefts in left.updates.chunk_by(|a, b| a.0 == b.0) {
        let v1 = left.vals[lefts[0].0 as usize];
        for rights in right.updates.chunk_by(|a, b| a.0 == b.0) {
            let v2 = right.vals[rights[0].0 as usize];
            if lefts.len() == 1 && rights.len() == 1 {
                let ((_, t1, r1), (_, t2, r2)) = (&lefts[0], &rights[0]);
                emit(v1, v2, t1.join(t2), multiply(r1, r2));
                continue;
            }
            pairs.clear();
            for (_, t1, r1) in lefts {
                for (_, t2, r2) in rights {
                    pairs.push((t1.join(t2), multiply(r1, r2)));
                }
            }
            consolidate_pairs(pairs);
            for (time, diff) in pairs.drain(..) {
                emit(v1, v2, time, diff);
            }
        }
    }
}

fn walk_in_time_order<'a, 'b, V1, V2, T, R1, R2, R3>(
    left: &mut KeyUpdates<'a, V1, T, R1>,
    right: &mut KeyUpdates<'b, V2, T, R2>,
    multiply: &impl Fn(&R1, &R2) -> R3,
    emit: &mut impl FnMut(Ref<'a, V1>, Ref<'b, V2>, T, R3),
) -> usize
where
    V1: Data,
    V2: Data,
    T: Time,
    R1: Semigroup,
    R2: Semigroup,
    R3: Semigroup,
{
    left.updates.sort_by(|a, b| a.1.cmp(&b.1));
    right.updates.sort_by(|a, b| a.1.cmp(&b.1));
    let (lefts, rights) = (&left.updates, &right.updates);
    let left_frontiers = SuffixFrontiers::of(lefts);
    let right_frontiers = SuffixFrontiers::of(rights);
    // The passed updates of each side, and their length after the last consolidation.
    let mut passed_left: Vec<(u32, T, R1)> = Vec::new();
    let mut passed_right: Vec<(u32, T, R2)> = Vec::new();
    let (mut left_compacted, mut right_compacted) = (0, 0);
    let (mut l, mut r) = (0, 0);
    let mut work = 0;
    while l < lefts.len() || r < rights.len() {
        // Take the earlier head; any order extending the partial order of times works, and
        // the sort order of `T` is one.
        let take_left = r == rights.len() || (l < lefts.len() && lefts[l].1 <= rights[r].1);
        if take_left {
            let (v1, t1, r1) = &lefts[l];
            for (v2, t2, r2) in &passed_right {
                emit(
                    left.vals[*v1 as usize],
                    right.vals[*v2 as usize],
                    t1.join(t2),
                    multiply(r1, r2),
                );
            }
            work += passed_right.len() + 1;
            passed_left.push(lefts[l].clone());
            l += 1;
            if due(passed_left.len(), left_compacted, right_frontiers.is_some()) {
                compact(&mut passed_left, right_frontiers.as_ref(), rights, r);
                left_compacted = passed_left.len();
            }
        } else {
            let (v2, t2, r2) = &rights[r];
            for (v1, t1, r1) in &passed_left {
                emit(
                    left.vals[*v1 as usize],
                    right.vals[*v2 as usize],
                    t1.join(t2),
                    multiply(r1, r2),
                );
            }
            work += passed_left.len() + 1;
            passed_right.push(rights[r].clone());
            r += 1;
            if due(
                passed_right.len(),
                right_compacted,
                left_frontiers.is_some(),
            ) {
                compact(&mut passed_right, left_frontiers.as_ref(), lefts, l);
                right_compacted = passed_right.len();
            }
        }
    }
    work
}

/// Whether a passed side of `len` updates, `compacted` after its last consolidation, is due for
/// another. Every update it keeps is paired with each later update of the other side, and the
/// pairs that consolidation would have merged cancel only downstream (in bfs, several times
/// more output than after; see docs/perf-notes.md, section "Join: history products"), while a
/// consolidation costs a sort of the passed side. With the other side's frontiers at hand,
/// consolidating on every growth by half keeps the pairs few at a cost proportional to them;
/// without, each consolidation first scans the rest of the other side, so it waits for the
/// passed side to double.
fn due(len: usize, compacted: usize, frontiers_known: bool) -> bool {
    if frontiers_known {
        len > compacted + compacted / 2
    } else {
        len > 2 * compacted + 16
    }
}

/// The frontier (least times) of every suffix of a history sorted by time, for the walk's
/// consolidations: `frontier(k)` bounds every time in `updates[k..]`.
struct SuffixFrontiers<T> {
    /// The frontiers, one after the other, the last suffix's first.
    elements: Vec<T>,
    /// Suffix `k`'s frontier is `elements[bounds[k].0..bounds[k].1]`.
    bounds: Vec<(u32, u32)>,
}

impl<T: Time> SuffixFrontiers<T> {
    /// How many elements per update the frontiers may take in all before the walk gives up on
    /// them (times with many incomparable elements, such as `(i, n - i)`, would make them
    /// quadratic).
    const ELEMENTS_PER_UPDATE: usize = 4;

    /// The frontiers of the suffixes of `updates`, sorted by time in an order that extends the
    /// partial order; `None` if they would take too much space.
    fn of<V, R>(updates: &[(V, T, R)]) -> Option<Self> {
        let budget = Self::ELEMENTS_PER_UPDATE * updates.len() + 16;
        if updates.len() >= u32::MAX as usize / Self::ELEMENTS_PER_UPDATE {
            return None;
        }
        let mut elements: Vec<T> = Vec::with_capacity(updates.len() + 1);
        let mut bounds = vec![(0u32, 0u32); updates.len() + 1];
        // Walking backwards, suffix `k`'s frontier is its first time and those of suffix
        // `k + 1`'s frontier that the first time does not precede. No later time precedes an
        // earlier one in the sort order unless they are equal, so nothing else can drop out.
        for (k, (_, time, _)) in updates.iter().enumerate().rev() {
            let (from, to) = bounds[k + 1];
            let start = elements.len();
            elements.push(time.clone());
            for index in from as usize..to as usize {
                if !time.less_equal(&elements[index]) {
                    let element = elements[index].clone();
                    elements.push(element);
                }
            }
            if elements.len() > budget {
                return None;
            }
            bounds[k] = (start as u32, elements.len() as u32);
        }
        Some(Self { elements, bounds })
    }

    fn frontier(&self, k: usize) -> AntichainRef<'_, T> {
        let (from, to) = self.bounds[k];
        AntichainRef::new(&self.elements[from as usize..to as usize])
    }
}

/// Advances `passed` to the frontier of the other side's updates from `position` on (read from
/// `frontiers` when known), and consolidates it. Only joins with those remaining times are ever
/// taken again, and advancing preserves exactly those.
fn compact<T: Time, R: Semigroup, R2>(
    passed: &mut Vec<(u32, T, R)>,
    frontiers: Option<&SuffixFrontiers<T>>,
    other: &[(u32, T, R2)],
    position: usize,
) {
    let remaining = &other[position..];
    if remaining.is_empty() {
        // Nothing remains to meet these updates.
        passed.clear();
        return;
    }
    let scanned;
    let frontier = match frontiers {
        Some(frontiers) => frontiers.frontier(position),
        None => {
            let mut antichain = Antichain::new();
            for (_, time, _) in remaining {
                antichain.insert(time.clone());
            }
            scanned = antichain;
            scanned.borrow()
        }
    };
    for (_, time, _) in passed.iter_mut() {
        time.advance_by(frontier);
    }
    consolidate_triples(passed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ripple_updates::{Lattice, Product};
    use std::collections::BTreeMap;

    type P = Product<u64, u32>;

    /// A join's output: `(v1, v2, time, diff)` updates.
    type Output = Vec<(u64, u64, P, i64)>;

    /// The accumulated join output at every time of the grid `outers x inners`.
    fn accumulate_on(
        output: &[(u64, u64, P, i64)],
        outers: impl Iterator<Item = u64> + Clone,
        inners: impl Iterator<Item = u32> + Clone,
    ) -> BTreeMap<(u64, u64, P), i64> {
        let mut totals = BTreeMap::new();
        for outer in outers {
            for inner in inners.clone() {
                let at = Product::new(outer, inner);
                for (v1, v2, t, r) in output {
                    if timely::PartialOrder::less_equal(t, &at) {
                        *totals.entry((*v1, *v2, at)).or_insert(0) += r;
                    }
                }
            }
        }
        totals.retain(|_, r| *r != 0);
        totals
    }

    /// [`accumulate_on`] over the grid that covers the times of `updates()`.
    fn accumulate(output: &[(u64, u64, P, i64)]) -> BTreeMap<(u64, u64, P), i64> {
        accumulate_on(output, 0..6u64, 0..6u32)
    }

    /// Every pair of updates, by nested loop: the reference.
    fn nested_loop(vals: &[u64], left: &[(usize, P, i64)], right: &[(usize, P, i64)]) -> Output {
        let mut output = Vec::new();
        for (v1, t1, r1) in left {
            for (v2, t2, r2) in right {
                output.push((vals[*v1], vals[*v2], t1.join(t2), r1 * r2));
            }
        }
        output
    }

    /// The time-ordered walk's output.
    fn walked(vals: &[u64], left: &[(usize, P, i64)], right: &[(usize, P, i64)]) -> Output {
        let (mut l, mut r) = (history(vals, left), history(vals, right));
        let mut output = Vec::new();
        walk_in_time_order(
            &mut l,
            &mut r,
            &|r1: &i64, r2: &i64| r1 * r2,
            &mut |v1: &u64, v2: &u64, t, r| output.push((*v1, *v2, t, r)),
        );
        output
    }

    /// [`key_product`]'s output, with the histories grouped by value as a cursor gives them.
    fn joined(vals: &[u64], left: &[(usize, P, i64)], right: &[(usize, P, i64)]) -> Output {
        let (mut left, mut right) = (left.to_vec(), right.to_vec());
        left.sort_by_key(|(v, _, _)| *v);
        right.sort_by_key(|(v, _, _)| *v);
        let (mut l, mut r) = (history(vals, &left), history(vals, &right));
        let mut output = Vec::new();
        key_product(
            &mut l,
            &mut r,
            &|r1: &i64, r2: &i64| r1 * r2,
            &mut Vec::new(),
            &mut |v1: &u64, v2: &u64, t, r| output.push((*v1, *v2, t, r)),
        );
        output
    }

    fn history<'a>(vals: &'a [u64], updates: &[(usize, P, i64)]) -> KeyUpdates<'a, u64, P, i64> {
        let mut history = KeyUpdates::default();
        history.vals.extend(vals.iter());
        history
            .updates
            .extend(updates.iter().map(|(v, t, r)| (*v as u32, *t, *r)));
        history
    }

    fn updates() -> impl Strategy<Value = Vec<(usize, P, i64)>> {
        proptest::collection::vec(
            (
                0usize..3,
                (0u64..5, 0u32..5).prop_map(|(o, i)| Product::new(o, i)),
                prop_oneof![Just(1i64), Just(-1i64), Just(2i64)],
            ),
            0..60,
        )
    }

    /// A value that held from one time to a later one meets an update of the other side after
    /// both: the pairs cancel at one time and never leave the join.
    #[test]
    fn pairs_that_cancel_are_not_emitted() {
        let vals = [2u64, 183];
        let depth = [(0, Product::new(56, 2), 1), (0, Product::new(206, 2), -1)];
        let edge = [(1, Product::new(707, 2), 1)];
        assert_eq!(joined(&vals, &depth, &edge), vec![]);
        // Pairs at different times stay.
        let edge = [(1, Product::new(100, 2), 1)];
        assert_eq!(
            joined(&vals, &depth, &edge),
            vec![
                (2, 183, Product::new(100, 2), 1),
                (2, 183, Product::new(206, 2), -1)
            ]
        );
    }

    proptest! {
        /// The join of two histories (small ones by the nested loop, which adds up each pair of
        /// values' pairs by time) accumulates to the plain product at every time, and emits no
        /// zero diff.
        #[test]
        fn join_matches_the_product(
            left in proptest::collection::vec(
                (
                    0usize..3,
                    (0u64..5, 0u32..5).prop_map(|(o, i)| Product::new(o, i)),
                    prop_oneof![Just(1i64), Just(-1i64), Just(2i64)],
                ),
                0..8,
            ),
            right in updates(),
        ) {
            let vals = [10u64, 11, 12];
            let output = joined(&vals, &left, &right);
            prop_assert!(output.iter().all(|(_, _, _, r)| *r != 0));
            prop_assert_eq!(accumulate(&output), accumulate(&nested_loop(&vals, &left, &right)));
        }

        /// The walk and the nested loop agree at every time, for partially ordered times.
        #[test]
        fn walk_matches_nested_loop(left in updates(), right in updates()) {
            let vals = [10u64, 11, 12];
            prop_assert_eq!(
                accumulate(&walked(&vals, &left, &right)),
                accumulate(&nested_loop(&vals, &left, &right))
            );
        }

        /// Advancing one side by the meet of the other side's times and consolidating it leaves
        /// the join unchanged at every time, and leaves no zero diff and no repeated pair.
        #[test]
        fn advancing_by_the_other_sides_meet_keeps_the_join(left in updates(), mut right in updates()) {
            let vals = [10u64, 11, 12];
            // `advance_by` expects its updates grouped by value, as gathered from a cursor.
            right.sort_by_key(|(v, _, _)| *v);
            let expected = nested_loop(&vals, &left, &right);
            let l = history(&vals, &left);
            let mut r = history(&vals, &right);
            if let Some(meet) = l.meet() {
                r.advance_by(&meet);
                let mut seen = std::collections::BTreeSet::new();
                for (v, t, diff) in &r.updates {
                    prop_assert!(*diff != 0);
                    prop_assert!(timely::PartialOrder::less_equal(&meet, t));
                    prop_assert!(seen.insert((*v, *t)), "repeated pair");
                }
            }
            let mut joined = Vec::new();
            for (v1, t1, r1) in &l.updates {
                for (v2, t2, r2) in &r.updates {
                    joined.push((vals[*v1 as usize], vals[*v2 as usize], t1.join(t2), r1 * r2));
                }
            }
            prop_assert_eq!(accumulate(&joined), accumulate(&expected));
        }
    }

    proptest! {
        /// Each suffix's frontier holds exactly the least times of the suffix.
        #[test]
        fn suffix_frontiers_are_the_least_times(updates in updates()) {
            let mut updates = updates;
            updates.sort_by_key(|a| a.1);
            if let Some(frontiers) = SuffixFrontiers::of(&updates) {
                for k in 0..=updates.len() {
                    let mut expected = Antichain::new();
                    for (_, time, _) in &updates[k..] {
                        expected.insert(*time);
                    }
                    let mut expected: Vec<P> = expected.elements().to_vec();
                    let mut found: Vec<P> = frontiers.frontier(k).to_vec();
                    expected.sort();
                    found.sort();
                    prop_assert_eq!(found, expected, "suffix {}", k);
                }
            }
        }
    }

    #[test]
    fn incomparable_times_fall_back_to_scanning() {
        // Times (i, n - i) are pairwise incomparable: suffix frontiers would be quadratic.
        let n = 200u64;
        let times: Vec<(usize, P, i64)> = (0..n)
            .map(|i| {
                (
                    (i % 3) as usize,
                    Product::new(i, (n - i) as u32),
                    if i % 2 == 0 { 1 } else { -1 },
                )
            })
            .collect();
        let sorted: Vec<(usize, P, i64)> = {
            let mut sorted = times.clone();
            sorted.sort_by_key(|a| a.1);
            sorted
        };
        assert!(SuffixFrontiers::of(&sorted).is_none());
        let other: Vec<(usize, P, i64)> = (0..n)
            .map(|i| ((i % 2) as usize, Product::new(i / 2, (i % 7) as u32), 1))
            .collect();
        let vals = [10u64, 11, 12];
        let (outers, inners) = ((0..210u64).step_by(7), (0..210u32).step_by(11));
        assert_eq!(
            accumulate_on(
                &walked(&vals, &times, &other),
                outers.clone(),
                inners.clone()
            ),
            accumulate_on(&nested_loop(&vals, &times, &other), outers, inners)
        );
    }

    #[test]
    fn churn_is_not_quadratic() {
        // 2000 updates alternating +1/-1 on one value against the same on the other side: the
        // product is 4 million pairs, but the accumulated sides are empty or one update.
        let vals = [1u64];
        let churn: Vec<(usize, u64, i64)> = (0..2000)
            .map(|i| (0, i as u64, if i % 2 == 0 { 1 } else { -1 }))
            .collect();
        let mut left = KeyUpdates::<u64, u64, i64>::default();
        left.vals.extend(vals.iter());
        left.updates
            .extend(churn.iter().map(|(v, t, r)| (*v as u32, *t, *r)));
        let mut right = KeyUpdates::<u64, u64, i64>::default();
        right.vals.extend(vals.iter());
        right
            .updates
            .extend(churn.iter().map(|(v, t, r)| (*v as u32, *t + 1, *r)));
        let mut outputs = 0;
        let work = key_product(
            &mut left,
            &mut right,
            &|r1: &i64, r2: &i64| r1 * r2,
            &mut Vec::new(),
            &mut |_, _, _, _| outputs += 1,
        );
        assert!(work < 200_000, "walk did {work} units for a product of 4M");
    }
}
