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
//! Totally ordered histories (the common case) take a single sweep: the accumulations grow as
//! the times advance, so each update is added once. Partially ordered histories accumulate
//! each examined time from scratch.

use columnar::Ref;
use ripple_updates::consolidate::consolidate_pairs;
use ripple_updates::{Abelian, AntichainRef, Data, Semigroup, Time};

/// Reusable buffers for [`reduce_key`].
pub(crate) struct KeyScratch<'a, V: Data, V2, T, R, R2> {
    input_acc: Vec<(Ref<'a, V>, R)>,
    output_acc: Vec<(V2, R2)>,
    desired: Vec<(V2, R2)>,
    times: Vec<T>,
}

impl<V: Data, V2, T, R, R2> Default for KeyScratch<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            input_acc: Vec::new(),
            output_acc: Vec::new(),
            desired: Vec::new(),
            times: Vec::new(),
        }
    }
}

/// One key's reduction over the interval `[lower, upper)`.
///
/// - `input`: the key's input updates (all of them, any order);
/// - `output`: the key's output updates so far;
/// - `new_times`: the times that need attention (new input times, deferred times);
/// - `logic(input, output)`: the user's reduction of the accumulated input (sorted by value,
///   non-zero diffs) into output values;
/// - `emit(val, time, diff)`: called with each output correction, in time order;
/// - `defer(time)`: called with each time at or beyond `upper` that needs attention later.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_key<'a, V, V2, T, R, R2>(
    input: &mut [(Ref<'a, V>, T, R)],
    output: &mut Vec<(V2, T, R2)>,
    new_times: &[T],
    upper: AntichainRef<'_, T>,
    scratch: &mut KeyScratch<'a, V, V2, T, R, R2>,
    logic: &mut impl FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    emit: &mut impl FnMut(&V2, &T, &R2),
    defer: &mut impl FnMut(&T),
) where
    V: Data,
    V2: Data,
    T: Time,
    R: Semigroup,
    R2: Semigroup + Abelian,
{
    input.sort_by(|a, b| a.1.cmp(&b.1));
    output.sort_by(|a, b| a.1.cmp(&b.1));
    let times = &mut scratch.times;
    times.clear();
    times.extend_from_slice(new_times);
    times.sort();
    times.dedup();

    let total = is_totally_ordered(input, output, times);
    if total {
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
            times.sort();
            times.dedup();
        }
    } else {
        close_under_join(times, input, output, upper);
    }
    // `times` is sorted: a linear extension of the partial order.
    times.retain(|time| {
        let later = upper.less_equal(time);
        if later {
            defer(time);
        }
        !later
    });

    // `output` stays sorted by time: corrections are appended at the time being examined,
    // which is after every earlier output time.
    let (mut next_input, mut next_output) = (0, 0);
    for index in 0..scratch.times.len() {
        let time = scratch.times[index].clone();
        // The accumulated input and output at `time`.
        if total {
            while next_input < input.len() && input[next_input].1.less_equal(&time) {
                scratch
                    .input_acc
                    .push((input[next_input].0, input[next_input].2.clone()));
                next_input += 1;
            }
            while next_output < output.len() && output[next_output].1.less_equal(&time) {
                scratch
                    .output_acc
                    .push((output[next_output].0.clone(), output[next_output].2.clone()));
                next_output += 1;
            }
        } else {
            scratch.input_acc.clear();
            scratch.input_acc.extend(
                input
                    .iter()
                    .filter(|(_, t, _)| t.less_equal(&time))
                    .map(|(v, _, r)| (*v, r.clone())),
            );
            scratch.output_acc.clear();
            scratch.output_acc.extend(
                output
                    .iter()
                    .filter(|(_, t, _)| t.less_equal(&time))
                    .map(|(v, _, r)| (v.clone(), r.clone())),
            );
        }
        consolidate_pairs(&mut scratch.input_acc);
        consolidate_pairs(&mut scratch.output_acc);

        scratch.desired.clear();
        if !scratch.input_acc.is_empty() {
            logic(&scratch.input_acc, &mut scratch.desired);
            consolidate_pairs(&mut scratch.desired);
        }

        // Emit desired - current, merging the two sorted lists.
        let before = output.len();
        let (desired, current) = (&scratch.desired, &scratch.output_acc);
        let (mut d, mut c) = (0, 0);
        while d < desired.len() || c < current.len() {
            let order = match (desired.get(d), current.get(c)) {
                (Some(x), Some(y)) => x.0.cmp(&y.0),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, _) => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    output.push((desired[d].0.clone(), time.clone(), desired[d].1.clone()));
                    d += 1;
                }
                std::cmp::Ordering::Greater => {
                    let mut diff = current[c].1.clone();
                    diff.negate();
                    output.push((current[c].0.clone(), time.clone(), diff));
                    c += 1;
                }
                std::cmp::Ordering::Equal => {
                    let mut diff = current[c].1.clone();
                    diff.negate();
                    diff.plus_equals(&desired[d].1);
                    if !diff.is_zero() {
                        output.push((desired[d].0.clone(), time.clone(), diff));
                    }
                    d += 1;
                    c += 1;
                }
            }
        }
        for (val, time, diff) in &output[before..] {
            emit(val, time, diff);
        }
    }
    scratch.input_acc.clear();
    scratch.output_acc.clear();
}

/// True when every input, output and new time is comparable with every other: then sorted
/// order is the partial order, and accumulations can sweep.
fn is_totally_ordered<A, B, T: Time, R, R2>(
    input: &[(A, T, R)],
    output: &[(B, T, R2)],
    times: &[T],
) -> bool {
    let mut all: Vec<&T> = input
        .iter()
        .map(|(_, t, _)| t)
        .chain(output.iter().map(|(_, t, _)| t))
        .chain(times.iter())
        .collect();
    all.sort();
    all.windows(2).all(|pair| pair[0].less_equal(pair[1]))
}

/// Adds to `times` (sorted, deduplicated) every join of its elements with input and output
/// times, keeping it sorted; joins at or beyond `upper` are kept (to be deferred) but not
/// expanded further, as everything they generate is beyond `upper` too.
fn close_under_join<A, B, T: Time, R, R2>(
    times: &mut Vec<T>,
    input: &[(A, T, R)],
    output: &[(B, T, R2)],
    upper: AntichainRef<'_, T>,
) {
    let mut others: Vec<T> = input
        .iter()
        .map(|(_, t, _)| t.clone())
        .chain(output.iter().map(|(_, t, _)| t.clone()))
        .chain(times.iter().cloned())
        .collect();
    others.sort();
    others.dedup();
    let mut known: std::collections::BTreeSet<T> = times.iter().cloned().collect();
    let mut work: Vec<T> = times.clone();
    while let Some(time) = work.pop() {
        if upper.less_equal(&time) {
            continue;
        }
        for other in &others {
            let joined = time.join(other);
            if !known.contains(&joined) {
                known.insert(joined.clone());
                work.push(joined);
            }
        }
    }
    times.clear();
    times.extend(known);
}

#[cfg(test)]
mod tests {
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
    /// the accumulated input.
    fn check<T: Time>(
        updates: &[(u64, T, i64)],
        uppers: &[Antichain<T>],
        grid: &[T],
    ) -> Result<(), TestCaseError> {
        let vals: Vec<u64> = updates.iter().map(|(v, _, _)| *v).collect();
        let mut output: Vec<(u64, T, i64)> = Vec::new();
        let mut deferred: Vec<T> = Vec::new();
        let mut lower = Antichain::from_elem(T::minimum());
        let mut scratch = KeyScratch::<u64, u64, T, i64, i64>::default();
        for upper in uppers
            .iter()
            .cloned()
            .chain(std::iter::once(Antichain::new()))
        {
            // Updates in [lower, upper) are new; the history is everything before upper.
            let in_interval = |t: &T| lower.less_equal(t) && !upper.less_equal(t);
            let mut new_times: Vec<T> = updates
                .iter()
                .filter(|(_, t, _)| in_interval(t))
                .map(|(_, t, _)| t.clone())
                .collect();
            new_times.append(&mut deferred);
            let mut history: Vec<(&u64, T, i64)> = updates
                .iter()
                .zip(&vals)
                .filter(|((_, t, _), _)| !upper.less_equal(t))
                .map(|((_, t, r), v)| (v, t.clone(), *r))
                .collect();
            let mut produced = Vec::new();
            let mut later = Vec::new();
            reduce_key(
                &mut history,
                &mut output,
                &new_times,
                upper.borrow(),
                &mut scratch,
                &mut |input, out| logic(input, out),
                &mut |v, t, r| produced.push((*v, t.clone(), *r)),
                &mut |t| later.push(t.clone()),
            );
            for (_, t, _) in &produced {
                prop_assert!(
                    in_interval(t),
                    "output at {t:?} outside [{lower:?}, {upper:?})"
                );
            }
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
            check(&updates, &uppers, &grid)?;
        }

        #[test]
        fn totally_ordered_times(updates in proptest::collection::vec((0u64..3, 0u64..12, prop_oneof![Just(1i64), Just(-1)]), 0..40)) {
            let uppers: Vec<Antichain<u64>> = [2u64, 3, 7, 8, 11].iter().map(|u| Antichain::from_elem(*u)).collect();
            let grid: Vec<u64> = (0..13).collect();
            check(&updates, &uppers, &grid)?;
        }
    }
}
