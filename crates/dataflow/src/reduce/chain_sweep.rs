//! Reduce for one key whose times to examine form a chain: one sweep, no replay.
//!
//! Inside an iteration an interval usually covers one round of many outer times: the key's new
//! times are `(t₁, i), (t₂, i), ...` with `t₁ < t₂ < ...`, a chain, while its history also
//! holds times of later rounds, incomparable with the new ones. Those later times matter only
//! beyond the interval's `upper`, so the times to examine now are still a chain and a single
//! sweep settles them, as for totally ordered times. [`chain_sweep`] checks that shape and does
//! the sweep; any other shape goes to the general replay.
//!
//! Why the sweep is exact. Let `p₀` be the least new time: the new times `P` are a chain, so
//! every time whose output may change is at or after `p₀`, and the histories can be advanced
//! by it (joined with it) and consolidated without changing any accumulation that matters.
//! Then every update time is at or after `p₀`: the times before `upper` are examined (they
//! and `P` must form a chain, else the shape does not hold), those at or beyond it deferred.
//! A join of update times is before `upper` only if all its parts are, and then, the parts
//! being a chain, it is the greatest of them: the examined times are closed under join, and
//! every time beyond `upper` whose output may change is at or after a deferred one. An
//! examined time's accumulation is the updates at or before it in the chain: running sums.

use super::replay::advance_then_consolidate;
use super::visit::{Hooks, Sums, Visit};
use crate::recycle::recycle;
use columnar::Ref;
use ripple_updates::{Abelian, AntichainRef, Data, Semigroup, Time};

/// Buffers reused across keys.
pub(crate) struct ChainScratch<'a, V: Data, V2, T, R, R2> {
    /// The input history's updates before `upper`, sorted by time.
    input: Vec<(Ref<'a, V>, T, R)>,
    /// The output history's updates before `upper`, sorted by time.
    output: Vec<(V2, T, R2)>,
    /// The times to examine: the new times and the history times before `upper`.
    examine: Vec<T>,
    /// Times at or beyond `upper` that will need examining.
    deferred: Vec<T>,
    /// One examined time's corrections, added to the output accumulation after it.
    fixes: Vec<(V2, R2)>,
}

impl<V: Data, V2, T, R, R2> Default for ChainScratch<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            input: Vec::new(),
            output: Vec::new(),
            examine: Vec::new(),
            deferred: Vec::new(),
            fixes: Vec::new(),
        }
    }
}

impl<V: Data, V2, T, R, R2> ChainScratch<'_, V, V2, T, R, R2> {
    /// The same buffers for borrows of another lifetime (see [`crate::recycle`]); only the
    /// vectors of borrowed items are emptied.
    pub(crate) fn recycle<'b>(self) -> ChainScratch<'b, V, V2, T, R, R2> {
        ChainScratch {
            input: recycle(self.input),
            output: self.output,
            examine: self.examine,
            deferred: self.deferred,
            fixes: self.fixes,
        }
    }
}

/// Beyond this many items, lists made of sorted runs are sorted by merging the runs.
const RUNS_WORTH_MERGING: usize = 64;

/// Adds `diff` to `value`'s entry of `acc` (sorted by value, no zero diff), keeping it so.
pub(super) fn add_into<V: Ord, R: Semigroup>(acc: &mut Vec<(V, R)>, value: V, diff: &R) {
    match acc.binary_search_by(|probe| probe.0.cmp(&value)) {
        Ok(index) => {
            acc[index].1.plus_equals(diff);
            if acc[index].1.is_zero() {
                acc.remove(index);
            }
        }
        Err(index) => {
            if !diff.is_zero() {
                acc.insert(index, (value, diff.clone()));
            }
        }
    }
}

/// Sorts a history (sorted by time) by `upper`: its updates before it go to `before`, in
/// order, and their times to `examine`; the times at or beyond it go to `deferred`. A time
/// repeated in a row is placed, and checked against `upper`, once.
fn split_at_upper<V: Clone, T: Time, R: Clone>(
    history: &[(V, T, R)],
    upper: AntichainRef<'_, T>,
    examine: &mut Vec<T>,
    deferred: &mut Vec<T>,
    before: &mut Vec<(V, T, R)>,
) {
    before.clear();
    let mut previous: Option<(&T, bool)> = None;
    for update in history {
        let beyond = match previous {
            Some((time, beyond)) if *time == update.1 => beyond,
            _ => {
                let beyond = upper.less_equal(&update.1);
                if beyond {
                    deferred.push(update.1.clone());
                } else {
                    examine.push(update.1.clone());
                }
                previous = Some((&update.1, beyond));
                beyond
            }
        };
        if !beyond {
            before.push(update.clone());
        }
    }
}

pub(super) fn is_chain<T: Time>(sorted: &[T]) -> bool {
    sorted.windows(2).all(|pair| pair[0].less_equal(&pair[1]))
}

/// The corrections for one key's visit when its times to examine form a chain; returns
/// `false`, having emitted and deferred nothing, when they do not. `times` are the key's new
/// times, sorted and distinct, none at or beyond `upper`: those of the batch and those
/// deferred to this interval. The histories are left advanced by the least new time and
/// consolidated (as the replay would make them). Otherwise as
/// [`super::replay::replay_key`], whose corrections it matches.
pub(crate) fn chain_sweep<'a, V, V2, T, R, R2, L, E, D>(
    visit: &mut Visit<'_, 'a, V, V2, T, R, R2>,
    times: &[T],
    scratch: &mut ChainScratch<'a, V, V2, T, R, R2>,
    sums: &mut Sums<'a, V, V2, R, R2>,
    hooks: &mut Hooks<L, E, D>,
) -> bool
where
    V: Data,
    V2: Data,
    T: Time,
    R: Semigroup,
    R2: Semigroup + Abelian,
    L: FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    E: FnMut(&V2, &T, &R2),
    D: FnMut(&T),
{
    let Some(first) = times.first() else {
        // Nothing new: nothing can change.
        return true;
    };
    if !is_chain(times) {
        return false;
    }
    let (history, batch, output, upper) = visit.parts();
    debug_assert!(times.iter().all(|time| !upper.less_equal(time)));
    let ChainScratch {
        input,
        output: output_before,
        examine,
        deferred,
        fixes,
    } = scratch;
    examine.clear();
    deferred.clear();
    examine.extend_from_slice(times);
    advance_then_consolidate(history, first);
    advance_then_consolidate(output, first);
    split_at_upper(history, upper, examine, deferred, input);
    split_at_upper(output, upper, examine, deferred, output_before);
    // Sorted runs (the new times, then the input's and the output's): many times per key, as
    // in big steps, are cheaper merged by a stable sort than sorted afresh.
    if examine.len() > RUNS_WORTH_MERGING {
        examine.sort();
    } else {
        examine.sort_unstable();
    }
    examine.dedup();
    if !is_chain(examine) {
        return false;
    }

    // The sweep. The sort order extends the partial order and every time before `upper` is
    // examined, so each update enters the sums when the sweep reaches its time.
    // Sorted runs too, one per batch of the interval.
    if batch.len() > RUNS_WORTH_MERGING {
        batch.sort_by(|a, b| a.1.cmp(&b.1));
    } else {
        batch.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    }
    sums.clear();
    let (mut next_input, mut next_output, mut next_batch) = (0, 0, 0);
    for now in examine.iter() {
        // The sums stay consolidated as updates enter: no sorting per examined time.
        let mut changed = false;
        while let Some((val, _, diff)) = input.get(next_input).filter(|u| u.1 == *now) {
            add_into(&mut sums.input, *val, diff);
            next_input += 1;
            changed = true;
        }
        while let Some((val, _, diff)) = batch.get(next_batch).filter(|u| u.1 == *now) {
            add_into(&mut sums.input, *val, diff);
            next_batch += 1;
            changed = true;
        }
        while let Some((val, _, diff)) = output_before.get(next_output).filter(|u| u.1 == *now) {
            add_into(&mut sums.output, val.clone(), diff);
            next_output += 1;
            changed = true;
        }
        if !changed && now != first {
            // Nothing entered since the last examined time, whose corrections made the output
            // right for these same sums (a deferred time with no update of its own).
            continue;
        }
        fixes.clear();
        sums.correct(&mut hooks.logic, |val, diff| {
            (hooks.emit)(&val, now, &diff);
            fixes.push((val, diff));
        });
        // Corrections at `now` hold at every later examined time (they are a chain).
        for (val, diff) in fixes.drain(..) {
            add_into(&mut sums.output, val, &diff);
        }
    }
    debug_assert_eq!(next_input, input.len());
    debug_assert_eq!(next_batch, batch.len());
    debug_assert_eq!(next_output, output_before.len());

    hooks.defer_distinct(deferred);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use ripple_updates::{Antichain, Product};

    type Time = Product<u64, u32>;
    type Outcome = (bool, Vec<(u64, Time, i64)>, Vec<Time>);

    /// Runs `chain_sweep` with the least positive value as the reduction.
    fn run(
        history: &[(&u64, Time, i64)],
        batch: &[(&u64, Time, i64)],
        output: &[(u64, Time, i64)],
        upper: &Antichain<Time>,
    ) -> Outcome {
        let mut times: Vec<Time> = batch.iter().map(|u| u.1).collect();
        times.sort_unstable();
        times.dedup();
        let (mut emitted, mut deferred) = (Vec::new(), Vec::new());
        let accepted = chain_sweep(
            &mut Visit {
                history: &mut history.to_vec(),
                batch: &mut batch.to_vec(),
                output: &mut output.to_vec(),
                upper: upper.borrow(),
            },
            &times,
            &mut ChainScratch::<u64, u64, Time, i64, i64>::default(),
            &mut Sums::default(),
            &mut Hooks::new(
                |input: &[(&u64, i64)], out: &mut Vec<(u64, i64)>| {
                    if let Some((value, _)) = input.iter().find(|(_, r)| *r > 0) {
                        out.push((**value, 1));
                    }
                },
                |v: &u64, t: &Time, r: &i64| emitted.push((*v, *t, *r)),
                |t: &Time| deferred.push(*t),
            ),
        );
        (accepted, emitted, deferred)
    }

    /// The shape of a bfs interval with many outer times per step: the new depth arrives in
    /// round 1 of outer time 10; the history's later rounds are beyond `upper`.
    #[test]
    fn sweeps_a_round_and_defers_the_later_ones() {
        let (two, six, seven) = (2u64, 6u64, 7u64);
        let upper = Antichain::from_iter([Product::new(1, 2), Product::new(100, 0)]);
        let (accepted, emitted, deferred) = run(
            &[
                (&six, Product::new(0, 5), 8),
                (&seven, Product::new(0, 6), 2),
            ],
            &[(&two, Product::new(10, 1), 1)],
            &[(6, Product::new(0, 5), 1)],
            &upper,
        );
        assert!(accepted);
        assert_eq!(emitted, vec![(2, Product::new(10, 1), 1)]);
        assert_eq!(deferred, vec![Product::new(10, 5), Product::new(10, 6)]);
    }

    /// A later round's history time at or beyond `upper` is deferred once, joined with the
    /// least new time; new updates that undo each other are swept in order.
    #[test]
    fn undone_updates_are_swept_in_order() {
        let (five, six) = (5u64, 6u64);
        let upper = Antichain::from_iter([Product::new(1, 2), Product::new(100, 0)]);
        let (accepted, emitted, deferred) = run(
            &[(&six, Product::new(0, 5), 1)],
            &[
                (&five, Product::new(10, 1), 1),
                (&five, Product::new(20, 1), -1),
            ],
            &[(6, Product::new(0, 5), 1)],
            &upper,
        );
        assert!(accepted);
        assert_eq!(
            emitted,
            vec![(5, Product::new(10, 1), 1), (5, Product::new(20, 1), -1)]
        );
        assert_eq!(deferred, vec![Product::new(10, 5)]);
    }

    /// New times that are not a chain, or history times before `upper` incomparable with
    /// them, are left to the replay untouched.
    #[test]
    fn other_shapes_are_refused() {
        let one = 1u64;
        let upper = Antichain::from_elem(Product::new(100, 100));
        let (accepted, emitted, deferred) = run(
            &[],
            &[(&one, Product::new(5, 1), 1), (&one, Product::new(3, 2), 1)],
            &[],
            &upper,
        );
        assert!(!accepted && emitted.is_empty() && deferred.is_empty());
        let (accepted, emitted, deferred) = run(
            &[(&one, Product::new(0, 3), 1), (&one, Product::new(4, 0), 1)],
            &[(&one, Product::new(2, 1), 1)],
            &[],
            &upper,
        );
        assert!(!accepted && emitted.is_empty() && deferred.is_empty());
    }
}
