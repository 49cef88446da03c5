//! Reduce for one key whose times are partially ordered: replay the key's history in sorted
//! time order (a linear extension of the partial order).
//!
//! Three ideas keep the work near linear in the history:
//!
//! - **Advance by the meet.** Every time still to be examined is at least the meet of the
//!   times still to come, so a passed update's time can be joined with that meet without
//!   changing any accumulation we will still take. Passed updates then collapse: in an
//!   iteration, the updates of many earlier rounds become one update per iteration.
//! - **Lazy closure.** A time needs examining only if it is the join of a new time with other
//!   times. In sorted order a join is never before its parts, so joins are formed when their
//!   later part is reached, against the (small, advanced) passed updates only.
//! - **Interesting times only.** A time is examined (`logic` runs) only if it is a *seed* or at
//!   least a seed already reached; other history times just pass. Seeds are the new input
//!   updates (while they have not cancelled out: advanced by the meet, a change and its undoing
//!   vanish together), deferred times and synthesised joins. Only seeds join with the times
//!   that follow: a time at or after a seed brings nothing a seed does not (its joins with
//!   later times are reached through the seed's).
//! - **Consolidated histories.** The histories are advanced by the first meet and consolidated
//!   before the replay, so updates that cancel at their advanced time add no visit (and no
//!   deferred time).

use super::visit::{Hooks, Sums, Visit};
use crate::recycle::recycle;
use columnar::Ref;
use ripple_updates::consolidate::consolidate_within_values;
use ripple_updates::{Abelian, AntichainRef, Data, Semigroup, Time};

/// Buffers reused across keys.
pub(crate) struct ReplayScratch<'a, V: Data, V2, T, R, R2> {
    passed_input: Vec<(Ref<'a, V>, T, R)>,
    passed_batch: Vec<(Ref<'a, V>, T, R)>,
    passed_output: Vec<(V2, T, R2)>,
    seeds: Vec<T>,
    synthetic: Vec<T>,
    joins: Vec<T>,
    suffix_meets: [Vec<T>; 4],
}

impl<V: Data, V2, T, R, R2> Default for ReplayScratch<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            passed_input: Vec::new(),
            passed_batch: Vec::new(),
            passed_output: Vec::new(),
            seeds: Vec::new(),
            synthetic: Vec::new(),
            joins: Vec::new(),
            suffix_meets: Default::default(),
        }
    }
}

impl<V: Data, V2, T, R, R2> ReplayScratch<'_, V, V2, T, R, R2> {
    /// The same buffers for borrows of another lifetime (see [`crate::recycle`]); only the
    /// vectors of borrowed items are emptied.
    pub(crate) fn recycle<'b>(self) -> ReplayScratch<'b, V, V2, T, R, R2> {
        ReplayScratch {
            passed_input: recycle(self.passed_input),
            passed_batch: recycle(self.passed_batch),
            passed_output: self.passed_output,
            seeds: self.seeds,
            synthetic: self.synthetic,
            joins: self.joins,
            suffix_meets: self.suffix_meets,
        }
    }
}

/// `meets[i]` becomes the meet of the times of `items[i..]`.
fn suffix_meets<I, T: Time>(items: &[I], time: impl Fn(&I) -> &T, meets: &mut Vec<T>) {
    meets.clear();
    meets.extend(items.iter().map(|item| time(item).clone()));
    for index in (1..meets.len()).rev() {
        let later = meets[index].clone();
        meets[index - 1].meet_assign(&later);
    }
}

/// Adds `update` to `passed`, which is sorted by `(value, time)` with no zero diff and no
/// repeated pair, and stays so.
fn insert_passed<V: Ord, T: Time, R: Semigroup>(passed: &mut Vec<(V, T, R)>, update: (V, T, R)) {
    match passed.binary_search_by(|probe| (&probe.0, &probe.1).cmp(&(&update.0, &update.1))) {
        Ok(index) => {
            passed[index].2.plus_equals(&update.2);
            if passed[index].2.is_zero() {
                passed.remove(index);
            }
        }
        Err(index) => {
            if !update.2.is_zero() {
                passed.insert(index, update);
            }
        }
    }
}

/// Joins every time of `passed` (sorted by `(value, time)`, consolidated) with `meet` and
/// restores the order, adding up pairs that became equal. Joining leaves values in order, so
/// consolidating within each value's run suffices, and nothing moves if no time changed.
fn advance_passed<V: Ord, T: Time, R: Semigroup>(passed: &mut Vec<(V, T, R)>, meet: &T) {
    let mut changed = false;
    for update in passed.iter_mut() {
        if !meet.less_equal(&update.1) {
            update.1.join_assign(meet);
            changed = true;
        }
    }
    if changed {
        consolidate_within_values(passed);
    }
}

/// Groups by value, consolidates within each value's run (see [`consolidate_within_values`]),
/// then sorts by time. Histories arrive batch by batch, each batch's values in order: a stable
/// sort merges those runs (cheaper than merging the batches' values while reading them, whose
/// comparisons mispredicted). Advancing by the meet makes many of a value's times equal: the
/// updates that cancel vanish, and their times need no visit. One sort by `(time, value)`
/// with a linear consolidation instead sorts the updates before they shrink: it ran slower,
/// and once neighbours were added up as they are joined ([`advance_then_consolidate`]) it
/// executed slightly fewer instructions but ran no faster.
///
/// Consolidated, each value's run is sorted by time, so the sort by time merges one run per
/// value: a stable sort finds and merges them, where an unstable one partitions afresh. That
/// took a few percent off the time on big steps (where a visit sorts about a thousand
/// updates), and nothing on smaller ones (measurements: docs/perf-notes.md, section "Reduce:
/// replay sorting").
fn consolidate_values_then_sort<V: Ord, T: Time, R: Semigroup>(updates: &mut Vec<(V, T, R)>) {
    updates.sort_by(|a, b| a.0.cmp(&b.0));
    consolidate_within_values(updates);
    updates.sort_by(|a, b| a.1.cmp(&b.1));
}

/// Histories at least this long add up neighbours that joining makes equal before sorting.
/// In bfs on a small graph a visit's input history about halves once consolidated, and adding
/// up neighbours first took several percent off the time on mid-sized steps, within noise on
/// others. Shorter histories, as on bigger graphs, rarely collide, and the comparisons would
/// only add cost, which this bound keeps small. The bound was higher until bfs's depths went
/// round as the reduce's batches; lowered since, it measured slightly faster or within noise
/// (see `segments_pay_at`, retuned with it; measurements: docs/perf-notes.md, section
/// "Reduce: replay thresholds").
const ADD_AS_JOINED_MIN: usize = 4;

/// Joins every time of a key's history with `meet` (a time every time still to be examined
/// is at or after), then consolidates and sorts by time ([`consolidate_values_then_sort`]).
pub(crate) fn advance_then_consolidate<V: Ord + Clone, T: Time, R: Semigroup>(
    updates: &mut Vec<(V, T, R)>,
    meet: &T,
) {
    if updates.len() < ADD_AS_JOINED_MIN {
        for update in updates.iter_mut() {
            update.1.join_assign(meet);
        }
        consolidate_values_then_sort(updates);
        return;
    }
    join_and_add_neighbours(updates, meet);
    consolidate_values_then_sort(updates);
}

/// Joins every time of a history with `meet`, adding up neighbours that become equal (same
/// value and time) as it goes and dropping zero sums. Each batch's updates come sorted by value,
/// then time, so joining makes a value's colliding times neighbours (in an iteration, the
/// updates of one outer time at the rounds before the meet's), and what follows sees fewer
/// updates. Each update is cloned, joined and written to its place: against joining in place
/// and swapping kept updates down (no `Clone`), slightly less time in bfs on mid-sized and big
/// steps (see docs/perf-notes.md, section "Reduce: replay sorting"), at the price of a clone
/// per update where values own memory (the sweeps clone each update once more anyway).
pub(crate) fn join_and_add_neighbours<V: Eq + Clone, T: Time, R: Semigroup>(
    updates: &mut Vec<(V, T, R)>,
    meet: &T,
) {
    let mut kept: usize = 0;
    for index in 0..updates.len() {
        let mut update = updates[index].clone();
        update.1.join_assign(meet);
        match kept.checked_sub(1).map(|last| &mut updates[last]) {
            Some(last) if last.1 == update.1 && last.0 == update.0 => {
                last.2.plus_equals(&update.2);
                if last.2.is_zero() {
                    kept -= 1;
                }
            }
            _ => {
                updates[kept] = update;
                kept += 1;
            }
        }
    }
    updates.truncate(kept);
}

/// The accumulation at `now` of `passed` (sorted by `(value, time)`): per value, the sum of
/// the diffs at times `<= now`, sorted by value, zero sums left out. No sorting needed.
fn accumulate_passed<V: Clone + Eq, T: Time, R: Semigroup>(
    passed: &[(V, T, R)],
    now: &T,
    accumulation: &mut Vec<(V, R)>,
) {
    accumulation.clear();
    let mut index = 0;
    while index < passed.len() {
        let value = &passed[index].0;
        let mut sum: Option<R> = None;
        while index < passed.len() && passed[index].0 == *value {
            if passed[index].1.less_equal(now) {
                match &mut sum {
                    Some(sum) => sum.plus_equals(&passed[index].2),
                    None => sum = Some(passed[index].2.clone()),
                }
            }
            index += 1;
        }
        if let Some(sum) = sum.filter(|sum| !sum.is_zero()) {
            accumulation.push((value.clone(), sum));
        }
    }
}

/// The corrections for one key's visit (its histories advanced and consolidated in place),
/// `times` being the times deferred to this interval by earlier passes (sorted, distinct, none
/// at or beyond `upper`). Corrections at times before `upper` go to the hooks' `emit`; times
/// at or beyond `upper` that will need examining go to their `defer`.
pub(crate) fn replay_key<'a, V, V2, T, R, R2, L, E, D>(
    visit: &mut Visit<'_, 'a, V, V2, T, R, R2>,
    times: &[T],
    scratch: &mut ReplayScratch<'a, V, V2, T, R, R2>,
    sums: &mut Sums<'a, V, V2, R, R2>,
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
    let ReplayScratch {
        passed_input,
        passed_batch,
        passed_output,
        seeds,
        synthetic,
        joins,
        suffix_meets: [input_meets, batch_meets, output_meets, time_meets],
    } = scratch;
    let (history, batch, output, upper) = visit.parts();
    let meets = [&mut *input_meets, batch_meets, output_meets, time_meets];
    if !prepare::<V, V2, T, R, R2>(history, batch, output, times, meets) {
        return;
    }
    let (input, advanced) = (&*history, &*output);
    seeds.clear();
    // Sorted descending: the least synthetic time is last.
    synthetic.clear();
    passed_input.clear();
    passed_batch.clear();
    passed_output.clear();

    let (mut next_input, mut next_batch, mut next_output, mut next_time) = (0, 0, 0, 0);
    let mut meet: Option<T> = None;
    loop {
        let candidates = [
            input.get(next_input).map(|u| &u.1),
            batch.get(next_batch).map(|u| &u.1),
            advanced.get(next_output).map(|u| &u.1),
            times.get(next_time),
            synthetic.last(),
        ];
        let Some(now) = candidates.into_iter().flatten().min().cloned() else {
            break;
        };
        pass_at(&now, input, &mut next_input, |u| {
            insert_passed(passed_input, u.clone())
        });
        pass_at(&now, advanced, &mut next_output, |u| {
            insert_passed(passed_output, u.clone())
        });
        // New input updates seed the times at or after them for as long as they do not cancel
        // out (as passed updates advance, a change and its undoing meet and vanish).
        let seed = pass_at(&now, batch, &mut next_batch, |u| {
            insert_passed(passed_input, u.clone());
            insert_passed(passed_batch, u.clone());
        });
        // Deferred times and synthesised joins seed for good: nothing records why they came.
        let synthesised = std::iter::from_fn(|| synthetic.pop_if(|t| *t == now)).count() > 0;
        let deferred = times[next_time..].iter().take_while(|t| **t == now).count();
        next_time += deferred;
        let kept = synthesised || deferred > 0;
        let interesting = seed
            || kept
            || passed_batch.iter().any(|u| u.1.less_equal(&now))
            || seeds.iter().any(|t| t.less_equal(&now));

        if !upper.less_equal(&now) {
            // Any time joins with the seeds reached and the passed new updates; an interesting
            // time also with the other passed updates (it carries a seed into them).
            let (inputs, outputs) = if interesting {
                (&passed_input[..], &passed_output[..])
            } else {
                (&[][..], &[][..])
            };
            let ahead = (seeds.iter())
                .chain(passed_batch.iter().map(|u| &u.1))
                .chain(inputs.iter().map(|u| &u.1))
                .chain(outputs.iter().map(|u| &u.1));
            join_ahead(&now, ahead, upper, joins, synthetic, &mut hooks.defer);
            if kept {
                seeds.push(now.clone());
            }
            if interesting {
                accumulate_passed(passed_input, &now, &mut sums.input);
                accumulate_passed(passed_output, &now, &mut sums.output);
                sums.correct(&mut hooks.logic, |val, diff| {
                    (hooks.emit)(&val, &now, &diff);
                    insert_passed(passed_output, (val, now.clone(), diff));
                });
            }
        } else if interesting {
            (hooks.defer)(&now);
        }

        // Everything still to come is at least this meet.
        let rest = [
            input_meets.get(next_input),
            batch_meets.get(next_batch),
            output_meets.get(next_output),
            time_meets.get(next_time),
        ];
        let next_meet = T::meet_of(rest.into_iter().flatten().chain(synthetic.iter()));
        if next_meet.is_some() && meet != next_meet {
            meet = next_meet;
            let advanced = meet.as_ref().expect("checked above");
            advance_passed(passed_input, advanced);
            advance_passed(passed_batch, advanced);
            advance_passed(passed_output, advanced);
            advance_seeds(seeds, advanced);
        }
    }
}

/// Readies a replay: sorts the new updates by time, advances the histories by the meet of the
/// new times and consolidates them (only times at or after that meet are examined), and
/// computes the suffix meets of input, new updates, output and deferred times, in that order.
/// Returns false when there is no new time, and so nothing to replay.
fn prepare<V: Data, V2: Data, T: Time, R: Semigroup, R2: Semigroup>(
    history: &mut Vec<(Ref<'_, V>, T, R)>,
    batch: &mut [(Ref<'_, V>, T, R)],
    output: &mut Vec<(V2, T, R2)>,
    times: &[T],
    [input_meets, batch_meets, output_meets, time_meets]: [&mut Vec<T>; 4],
) -> bool {
    batch.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    suffix_meets(batch, |u| &u.1, batch_meets);
    suffix_meets(times, |t| t, time_meets);
    let first = batch_meets.first().into_iter().chain(time_meets.first());
    let Some(first_meet) = T::meet_of(first) else {
        return false;
    };
    advance_then_consolidate(history, &first_meet);
    advance_then_consolidate(output, &first_meet);
    suffix_meets(history, |u| &u.1, input_meets);
    suffix_meets(output, |u| &u.1, output_meets);
    true
}

/// Hands the updates of `list` from `next` on whose time is `now` to `pass`, moving `next`
/// past them; returns true if there were any.
fn pass_at<W, T: Time, R>(
    now: &T,
    list: &[(W, T, R)],
    next: &mut usize,
    mut pass: impl FnMut(&(W, T, R)),
) -> bool {
    let first = *next;
    while *next < list.len() && list[*next].1 == *now {
        pass(&list[*next]);
        *next += 1;
    }
    *next > first
}

/// The joins of `now` with the `times` that lie ahead of it (not at or before it): those at or
/// beyond `upper` go to `defer`, the others join `synthetic` (kept sorted descending, distinct,
/// so that the least is last). `joins` is scratch.
fn join_ahead<'t, T: Time + 't>(
    now: &T,
    times: impl Iterator<Item = &'t T>,
    upper: AntichainRef<'_, T>,
    joins: &mut Vec<T>,
    synthetic: &mut Vec<T>,
    defer: &mut impl FnMut(&T),
) {
    joins.clear();
    joins.extend(times.filter(|t| !t.less_equal(now)).map(|t| t.join(now)));
    joins.sort_unstable();
    joins.dedup();
    let before = synthetic.len();
    for join in joins.drain(..) {
        if upper.less_equal(&join) {
            defer(&join);
        } else {
            synthetic.push(join);
        }
    }
    if synthetic.len() > before {
        synthetic.sort_unstable_by(|a, b| b.cmp(a));
        synthetic.dedup();
    }
}

/// Advances the seeds reached to `meet`, keeping them sorted and distinct.
fn advance_seeds<T: Time>(seeds: &mut Vec<T>, meet: &T) {
    for time in seeds.iter_mut() {
        time.join_assign(meet);
    }
    seeds.sort_unstable();
    seeds.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ripple_updates::consolidate::consolidate_pairs;
    use ripple_updates::consolidate::consolidate_triples;
    use ripple_updates::{Lattice, PartialOrder, Product};

    type Time = Product<u64, u32>;

    fn updates() -> impl Strategy<Value = Vec<(u8, Time, i64)>> {
        proptest::collection::vec(
            (0u8..4, 0u64..4, 0u32..4, -2i64..3)
                .prop_map(|(v, outer, inner, r)| (v, Product::new(outer, inner), r)),
            0..40,
        )
    }

    fn passed_of(updates: &[(u8, Time, i64)]) -> Vec<(u8, Time, i64)> {
        let mut passed = Vec::new();
        for update in updates {
            insert_passed(&mut passed, *update);
        }
        passed
    }

    proptest! {
        /// The sorted passed list, its advance by a meet and its accumulations agree with
        /// sorting and consolidating from scratch.
        #[test]
        fn passed_updates_match_consolidation(
            updates in updates(),
            meet in (0u64..4, 0u32..4),
            now in (0u64..4, 0u32..4),
        ) {
            let mut expected = updates.clone();
            consolidate_triples(&mut expected);
            let mut passed = passed_of(&updates);
            prop_assert_eq!(&passed, &expected);

            let meet = Product::new(meet.0, meet.1);
            advance_passed(&mut passed, &meet);
            let mut advanced: Vec<_> =
                updates.iter().map(|(v, t, r)| (*v, t.join(&meet), *r)).collect();
            consolidate_triples(&mut advanced);
            prop_assert_eq!(&passed, &advanced);

            let now = Product::new(now.0, now.1);
            let mut accumulation = Vec::new();
            accumulate_passed(&passed, &now, &mut accumulation);
            let mut expected: Vec<(u8, i64)> = advanced
                .iter()
                .filter(|(_, t, _)| t.less_equal(&now))
                .map(|(v, _, r)| (*v, *r))
                .collect();
            consolidate_pairs(&mut expected);
            prop_assert_eq!(accumulation, expected);
        }

        /// Advancing and consolidating a history (no zero diffs, as traces hold none) gives
        /// its consolidated, advanced updates sorted by time, whether it comes as batches
        /// (runs sorted by value and time, where joining makes neighbours collide) or in any
        /// order, short or long.
        #[test]
        fn advanced_histories_match_consolidation(
            batches in proptest::collection::vec(updates(), 0..4),
            sorted in any::<bool>(),
            meet in (0u64..4, 0u32..4),
        ) {
            let mut history = Vec::new();
            for mut batch in batches {
                batch.retain(|update| update.2 != 0);
                if sorted {
                    consolidate_triples(&mut batch);
                }
                history.extend(batch);
            }
            let meet = Product::new(meet.0, meet.1);
            let mut expected: Vec<_> =
                history.iter().map(|(v, t, r)| (*v, t.join(&meet), *r)).collect();
            consolidate_triples(&mut expected);

            advance_then_consolidate(&mut history, &meet);
            prop_assert!(history.is_sorted_by(|a, b| a.1 <= b.1), "not sorted by time");
            history.sort_unstable_by_key(|a| (a.0, a.1));
            prop_assert_eq!(history, expected);
        }
    }
}
