//! The heart of reduce, for one key and without timely: given the key's input and output
//! histories and the times that need attention, produce the output corrections.
//!
//! The output at time `t` must equal `logic(accumulated input at t)`. The accumulated input
//! only changes at times that are joins of input times, so for a set of *new* times (new input
//! updates, and times deferred by earlier passes) the times to examine are their closure under
//! join with the key's other input and output times. Times in `[lower, upper)` are examined now,
//! in an order that extends the partial order (so corrections at earlier times are seen by
//! later ones); times at or beyond `upper` are deferred.
//!
//! Totally ordered histories (the common case outside iterations) take a single sweep: the
//! accumulations grow as the times advance, so each update is added once. Partially ordered
//! histories whose times to examine in the interval still form a chain (the common case
//! inside iterations) take a single sweep too, in [`super::chain_sweep`], or, when long, in
//! [`super::segmented_sweep`], which puts only the stretches it must visit in time order. Any other
//! shape is replayed in [`super::replay`], which forms the join closure lazily and collapses
//! passed updates by the meet of the times still to come.

use super::chain_sweep::{chain_sweep, ChainScratch};
use super::replay::{replay_key, ReplayScratch};
use super::segmented_sweep::{segmented_sweep, segments_pay, SegmentScratch};
use super::visit::{Hooks, Sums, Visit};
use columnar::Ref;
use ripple_updates::consolidate::consolidate_pairs;
use ripple_updates::{Abelian, Data, Semigroup, Time};

/// Reusable buffers for [`reduce_key`].
pub(crate) struct KeyScratch<'a, V: Data, V2, T, R, R2> {
    sums: Sums<'a, V, V2, R, R2>,
    times: Vec<T>,
    deferred: Vec<T>,
    all_times: Vec<T>,
    chain: ChainScratch<'a, V, V2, T, R, R2>,
    segments: SegmentScratch<'a, V, V2, T, R, R2>,
    replay: ReplayScratch<'a, V, V2, T, R, R2>,
}

impl<V: Data, V2, T, R, R2> Default for KeyScratch<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            sums: Sums::default(),
            times: Vec::new(),
            deferred: Vec::new(),
            all_times: Vec::new(),
            chain: ChainScratch::default(),
            segments: SegmentScratch::default(),
            replay: ReplayScratch::default(),
        }
    }
}

impl<V: Data, V2, T, R, R2> KeyScratch<'_, V, V2, T, R, R2> {
    /// The same buffers for borrows of another lifetime (see [`crate::recycle`]): the
    /// operator keeps them from one activation to the next. The vectors of borrowed items are
    /// emptied; the others keep the last key's items, which their next use clears first.
    pub(crate) fn recycle<'b>(self) -> KeyScratch<'b, V, V2, T, R, R2> {
        KeyScratch {
            sums: self.sums.recycle(),
            times: self.times,
            deferred: self.deferred,
            all_times: self.all_times,
            chain: self.chain.recycle(),
            segments: self.segments.recycle(),
            replay: self.replay.recycle(),
        }
    }
}

/// The corrections for one key's visit: `deferred` lists the times earlier passes deferred to
/// this interval (none at or beyond `upper`). Corrections at times in the interval go to the
/// hooks' `emit`; times at or beyond `upper` that will need examining go to their `defer`.
// Called from one place, the operator's loop over keys. LLVM's choice to inline it there
// flips with unrelated edits to the operator; the hint keeps it, which saves a fraction of a
// percent of bfs's instructions (see docs/perf-notes.md, section "Reduce: inlining reduce_key").
#[inline]
pub(crate) fn reduce_key<'a, V, V2, T, R, R2, L, E, D>(
    visit: &mut Visit<'_, 'a, V, V2, T, R, R2>,
    deferred: &[T],
    scratch: &mut KeyScratch<'a, V, V2, T, R, R2>,
    hooks: &mut Hooks<L, E, D>,
) where
    V: Data,
    V2: Data,
    T: Time,
    R: Semigroup,
    R2: Semigroup + Abelian,
    L: FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    E: FnMut(&V2, &T, &R2),
    D: FnMut(&T),
{
    // The new times: deferred ones and those of the new updates.
    let times = &mut scratch.times;
    times.clear();
    times.extend_from_slice(deferred);
    times.extend(visit.batch.iter().map(|u| u.1.clone()));
    times.sort_unstable();
    times.dedup();
    // A time incomparable with the first new time settles it without sorting anything: the
    // common case inside iterations. (`times` covers the new updates' times.)
    let partial = has_incomparable(visit.history, visit.output, times)
        || !is_totally_ordered(visit.history, visit.output, times, &mut scratch.all_times);
    if partial {
        // Usually the times to examine still form a chain (see `super::chain_sweep`); histories
        // that are not short sort only the stretches that can change (`super::segmented_sweep`).
        let (new_times, sums) = (&scratch.times, &mut scratch.sums);
        let history_len = visit.history.len() + visit.output.len();
        let swept = if segments_pay(history_len) {
            segmented_sweep(
                visit,
                new_times,
                deferred,
                &mut scratch.segments,
                sums,
                hooks,
            )
        } else {
            chain_sweep(visit, new_times, &mut scratch.chain, sums, hooks)
        };
        if swept {
            return;
        }
        let deferred_sorted = &mut scratch.deferred;
        deferred_sorted.clear();
        deferred_sorted.extend_from_slice(deferred);
        deferred_sorted.sort_unstable();
        deferred_sorted.dedup();
        replay_key(visit, deferred_sorted, &mut scratch.replay, sums, hooks);
        return;
    }
    let (input, batch, output, upper) = visit.parts();
    input.append(batch);
    input.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    output.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    // Joins are maxima, so the closure adds the history times after the first new time:
    // compaction can advance old updates to times that have not been examined yet.
    if let Some(first) = times.first().cloned() {
        times.extend(
            input
                .iter()
                .map(|(_, t, _)| t)
                .chain(output.iter().map(|(_, t, _)| t))
                .filter(|t| first.less_equal(t))
                .cloned(),
        );
        // Three sorted runs (the new times, then those of `input` and of `output`): the stable
        // sort finds the runs and merges them, where the unstable one sorted them afresh.
        times.sort();
        times.dedup();
    }
    times.retain(|time| {
        let later = upper.less_equal(time);
        if later {
            (hooks.defer)(time);
        }
        !later
    });

    // One sweep: the accumulations only grow as the times advance. `output` stays sorted by
    // time: corrections are appended at the time being examined, after every earlier one.
    let sums = &mut scratch.sums;
    sums.clear();
    let (mut next_input, mut next_output) = (0, 0);
    for time in scratch.times.iter() {
        while next_input < input.len() && input[next_input].1.less_equal(time) {
            sums.input
                .push((input[next_input].0, input[next_input].2.clone()));
            next_input += 1;
        }
        while next_output < output.len() && output[next_output].1.less_equal(time) {
            sums.output
                .push((output[next_output].0.clone(), output[next_output].2.clone()));
            next_output += 1;
        }
        consolidate_pairs(&mut sums.input);
        consolidate_pairs(&mut sums.output);

        let before = output.len();
        sums.correct(&mut hooks.logic, |val, diff| {
            output.push((val, time.clone(), diff));
        });
        for (val, time, diff) in &output[before..] {
            (hooks.emit)(val, time, diff);
        }
    }
}

/// Whether some time of the lists is incomparable with the first of `times` (a quick, partial
/// test: `false` does not mean the times are totally ordered).
fn has_incomparable<A, B, T: Time, R, R2>(
    input: &[(A, T, R)],
    output: &[(B, T, R2)],
    times: &[T],
) -> bool {
    let Some(first) = times.first() else {
        return false;
    };
    let incomparable = |t: &T| !t.less_equal(first) && !first.less_equal(t);
    times.iter().any(incomparable)
        || input.iter().any(|u| incomparable(&u.1))
        || output.iter().any(|u| incomparable(&u.1))
}

/// Whether the times of the three lists are totally ordered (`chain` is scratch).
fn is_totally_ordered<A, B, T: Time, R, R2>(
    input: &[(A, T, R)],
    output: &[(B, T, R2)],
    times: &[T],
    chain: &mut Vec<T>,
) -> bool {
    chain.clear();
    chain.extend(input.iter().map(|u| u.1.clone()));
    chain.extend(output.iter().map(|u| u.1.clone()));
    chain.extend_from_slice(times);
    chain.sort_unstable();
    chain.dedup();
    chain.windows(2).all(|pair| pair[0].less_equal(&pair[1]))
}

#[cfg(test)]
mod tests {
    use super::super::totals::{Cover, KeyTotal, Totals};
    use super::*;
    use proptest::prelude::*;
    use ripple_updates::{Antichain, Product};
    use std::collections::BTreeMap;

    /// The reduction under test: the number of distinct values with positive multiplicity.
    fn logic(input: &[(&u64, i64)], output: &mut Vec<(u64, i64)>) {
        let positive = input.iter().filter(|(_, r)| *r > 0).count() as u64;
        output.push((positive, 1));
    }

    /// Runs `reduce_key` interval by interval (`uppers`, then the empty frontier) the way the
    /// operator does, and checks the output at every time of `grid` against `logic` applied to
    /// the accumulated input. With `totals`, each interval takes the key's totals as the
    /// operator does (whatever the histories' length) and the next one reads them instead of
    /// the histories when they cover its new times.
    fn check<T: Time>(
        updates: &[(u64, T, i64)],
        uppers: &[Antichain<T>],
        grid: &[T],
        totals: bool,
    ) -> Result<(), TestCaseError> {
        let vals: Vec<u64> = updates.iter().map(|(v, _, _)| *v).collect();
        let mut output: Vec<(u64, T, i64)> = Vec::new();
        let mut deferred: Vec<T> = Vec::new();
        let mut lower = Antichain::from_elem(T::minimum());
        let mut kept = Totals::<u64, u64, T, i64, u64, i64>::default();
        for upper in uppers
            .iter()
            .cloned()
            .chain(std::iter::once(Antichain::new()))
        {
            // Updates in [lower, upper) are new; the history is everything before lower,
            // compacted to `lower` as in the operator's traces.
            let in_interval = |t: &T| lower.less_equal(t) && !upper.less_equal(t);
            let mut history: Vec<(&u64, T, i64)> = updates
                .iter()
                .zip(&vals)
                .filter(|((_, t, _), _)| !lower.less_equal(t))
                .map(|((_, t, r), v)| {
                    let mut t = t.clone();
                    t.advance_by(lower.borrow());
                    (v, t, *r)
                })
                .collect();
            // In the generated order: the operator reads histories batch by batch, so values
            // come in no particular order.
            let mut batch: Vec<(&u64, T, i64)> = updates
                .iter()
                .zip(&vals)
                .filter(|((_, t, _), _)| in_interval(t))
                .map(|((_, t, r), v)| (v, t.clone(), *r))
                .collect();
            let mut compacted_output = output.clone();
            for update in compacted_output.iter_mut() {
                update.1.advance_by(lower.borrow());
            }
            // Newest first, values in no particular order.
            compacted_output.reverse();
            let mut produced = Vec::new();
            // As the operator does: deferred times still beyond `upper` wait for a later
            // interval; only the due ones are passed.
            let (due, mut later): (Vec<T>, Vec<T>) =
                deferred.iter().cloned().partition(|t| !upper.less_equal(t));
            let cover = kept.cover(&mut kept.cursor(&lower), &0, &batch, &due);
            if let Cover::Sums(index) = cover {
                history.clear();
                compacted_output.clear();
                kept.fill(index, &mut history, &mut compacted_output);
            }
            // Fresh each interval: its borrows end with the totals they read.
            let mut scratch = KeyScratch::<u64, u64, T, i64, i64>::default();
            let mut total = KeyTotal::default();
            // Short histories too: a bound alone first, whatever the length.
            let cover = match cover {
                Cover::Nothing => Cover::Bound,
                other => other,
            };
            let totalled = totals
                && total.begin(
                    &history,
                    &batch,
                    &compacted_output,
                    &due,
                    upper.borrow(),
                    cover,
                );
            let visit = &mut Visit {
                history: &mut history,
                batch: &mut batch,
                output: &mut compacted_output,
                upper: upper.borrow(),
            };
            let hooks = &mut Hooks::new(
                logic,
                |v: &u64, t: &T, r: &i64| produced.push((*v, t.clone(), *r)),
                |t: &T| later.push(t.clone()),
            );
            reduce_key(visit, &due, &mut scratch, hooks);
            let mut next = Totals::default();
            next.restart(&upper);
            if totalled {
                total.finish(&produced, logic);
                next.push(&0, &total);
            }
            kept = next;
            for (_, t, _) in &produced {
                prop_assert!(
                    in_interval(t),
                    "output at {t:?} outside [{lower:?}, {upper:?})"
                );
            }
            output.extend(produced);
            deferred = later;
            lower = upper;
        }
        for time in grid {
            let mut input: BTreeMap<u64, i64> = BTreeMap::new();
            for (v, t, r) in updates {
                if t.less_equal(time) {
                    *input.entry(*v).or_default() += r;
                }
            }
            let accumulated: Vec<(&u64, i64)> = input
                .iter()
                .filter(|(_, r)| **r != 0)
                .map(|(v, r)| (v, *r))
                .collect();
            let mut expected = Vec::new();
            if !accumulated.is_empty() {
                logic(&accumulated, &mut expected);
            }
            let mut actual: BTreeMap<u64, i64> = BTreeMap::new();
            for (v, t, r) in &output {
                if t.less_equal(time) {
                    *actual.entry(*v).or_default() += r;
                }
            }
            actual.retain(|_, r| *r != 0);
            let expected: BTreeMap<u64, i64> = expected.into_iter().collect();
            prop_assert_eq!(actual, expected, "at {:?}", time);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn partially_ordered_times(updates in proptest::collection::vec(
            (0u64..3, (0u64..4, 0u32..4).prop_map(|(o, i)| Product::new(o, i)), prop_oneof![Just(1i64), Just(-1)]),
            0..24,
        )) {
            let uppers: Vec<Antichain<Product<u64, u32>>> = (1..4u64)
                .flat_map(|o| (1..4u32).map(move |i| Antichain::from_iter([Product::new(o - 1, i), Product::new(o, 0)])))
                .collect();
            let grid: Vec<_> = (0..5u64).flat_map(|o| (0..5u32).map(move |i| Product::new(o, i))).collect();
            check(&updates, &uppers, &grid, false)?;
            check(&updates, &uppers, &grid, true)?;
        }

        /// Intervals as `iterate` makes them with big steps: one round at a time for all the
        /// outer times of a step (three per step here). New times then mostly form a chain
        /// while the histories hold later rounds, the shape `super::chain_sweep` sweeps.
        #[test]
        fn rounds_of_many_outer_times(updates in proptest::collection::vec(
            (0u64..3, (0u64..6, 0u32..6).prop_map(|(o, i)| Product::new(o, i)), prop_oneof![Just(1i64), Just(-1)]),
            0..30,
        )) {
            let staircase = |step: u64, round: u32| {
                Antichain::from_iter([Product::new(3 * step, round), Product::new(3 * step + 3, 0)])
            };
            let uppers: Vec<Antichain<Product<u64, u32>>> = (0..2u64)
                .flat_map(|step| (1..5u32).map(move |round| staircase(step, round)))
                .chain(std::iter::once(Antichain::from_elem(Product::new(6, 0))))
                .collect();
            let grid: Vec<_> = (0..7u64).flat_map(|o| (0..7u32).map(move |i| Product::new(o, i))).collect();
            check(&updates, &uppers, &grid, false)?;
            check(&updates, &uppers, &grid, true)?;
        }

        /// One outer time and many rounds, each its own interval: the shape of a long
        /// iteration (totals cover nearly every visit).
        #[test]
        fn rounds_of_one_outer_time(updates in proptest::collection::vec(
            (0u64..3, (0u64..4, 0u32..10).prop_map(|(o, i)| Product::new(o / 3, i)), prop_oneof![Just(1i64), Just(-1)]),
            0..30,
        )) {
            let uppers: Vec<Antichain<Product<u64, u32>>> = (1..11u32)
                .map(|round| Antichain::from_iter([Product::new(0, round), Product::new(1, 0)]))
                .collect();
            let grid: Vec<_> = (0..2u64).flat_map(|o| (0..11u32).map(move |i| Product::new(o, i))).collect();
            check(&updates, &uppers, &grid, false)?;
            check(&updates, &uppers, &grid, true)?;
        }

        #[test]
        fn totally_ordered_times(updates in proptest::collection::vec((0u64..3, 0u64..12, prop_oneof![Just(1i64), Just(-1)]), 0..40)) {
            let uppers: Vec<Antichain<u64>> = [2u64, 3, 7, 8, 11].iter().map(|u| Antichain::from_elem(*u)).collect();
            let grid: Vec<u64> = (0..13).collect();
            check(&updates, &uppers, &grid, false)?;
            check(&updates, &uppers, &grid, true)?;
        }
    }
}
