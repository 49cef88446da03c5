//! What one key's visit is made of, whichever sweep takes it ([`super::key`]'s total-order
//! sweep, [`super::chain_sweep`], [`super::segmented_sweep`], [`super::replay`]): the key's histories and
//! the interval's upper bound ([`Visit`]), the accumulations at the time being examined and the
//! corrections they call for ([`Sums`]), and where the results go ([`Hooks`]).

use crate::recycle::recycle;
use columnar::Ref;
use ripple_updates::consolidate::consolidate_pairs;
use ripple_updates::{Abelian, AntichainRef, Data, Semigroup};

/// One key's histories for an interval `[lower, upper)`. The sweeps may reorder, advance and
/// consolidate all three lists in place. A sweep that refuses the key and hands it to the
/// replay must leave every accumulation at or after the least new time as it was (joining with
/// that time and adding up equal updates do); otherwise the contents are unspecified afterwards.
pub(crate) struct Visit<'v, 'a, V: Data, V2, T, R, R2> {
    /// The input history through the interval's lower bound, in any order (the operator reads
    /// it batch by batch).
    pub history: &'v mut Vec<(Ref<'a, V>, T, R)>,
    /// The new input updates, inside the interval.
    pub batch: &'v mut Vec<(Ref<'a, V>, T, R)>,
    /// The output history, in any order.
    pub output: &'v mut Vec<(V2, T, R2)>,
    /// Times at or beyond it are deferred, not examined.
    pub upper: AntichainRef<'v, T>,
}

/// A visit taken apart: input history, new updates, output history, `upper`.
type Parts<'p, 'v, 'a, V, V2, T, R, R2> = (
    &'p mut Vec<(Ref<'a, V>, T, R)>,
    &'p mut Vec<(Ref<'a, V>, T, R)>,
    &'p mut Vec<(V2, T, R2)>,
    AntichainRef<'v, T>,
);

impl<'v, 'a, V: Data, V2, T, R, R2> Visit<'v, 'a, V, V2, T, R, R2> {
    pub(crate) fn parts(&mut self) -> Parts<'_, 'v, 'a, V, V2, T, R, R2> {
        (self.history, self.batch, self.output, self.upper)
    }
}

/// Where a visit's results go.
pub(crate) struct Hooks<L, E, D> {
    /// The reduction: pushes a key's output `(value, diff)` pairs for its accumulated input
    /// (consolidated, sorted by value, never empty).
    pub logic: L,
    /// Takes each correction `(value, time, diff)`, at a time inside the interval.
    pub emit: E,
    /// Takes each time at or beyond `upper` that will need examining.
    pub defer: D,
}

impl<L, E, D> Hooks<L, E, D> {
    /// The bounds here give closures written in place their argument types (`W` is the
    /// sweeps' `Ref<'a, V>`, named directly so that it can be inferred).
    pub(crate) fn new<W, V2, T, R, R2>(logic: L, emit: E, defer: D) -> Self
    where
        L: FnMut(&[(W, R)], &mut Vec<(V2, R2)>),
        E: FnMut(&V2, &T, &R2),
        D: FnMut(&T),
    {
        Self { logic, emit, defer }
    }

    /// Defers each of `times` once, in order (`times` is sorted and deduplicated in place).
    pub(crate) fn defer_distinct<T: Ord>(&mut self, times: &mut Vec<T>)
    where
        D: FnMut(&T),
    {
        times.sort_unstable();
        times.dedup();
        for time in times.iter() {
            (self.defer)(time);
        }
    }
}

/// The accumulations at the time being examined, each consolidated and sorted by value.
pub(crate) struct Sums<'a, V: Data, V2, R, R2> {
    /// The input accumulated there.
    pub input: Vec<(Ref<'a, V>, R)>,
    /// The output accumulated there.
    pub output: Vec<(V2, R2)>,
    /// What `logic` makes of `input`.
    desired: Vec<(V2, R2)>,
}

impl<V: Data, V2, R, R2> Default for Sums<'_, V, V2, R, R2> {
    fn default() -> Self {
        Self {
            input: Vec::new(),
            output: Vec::new(),
            desired: Vec::new(),
        }
    }
}

impl<V: Data, V2, R, R2> Sums<'_, V, V2, R, R2> {
    /// The same buffers for borrows of another lifetime (see [`crate::recycle`]); only the
    /// vectors of borrowed items are emptied.
    pub(crate) fn recycle<'b>(self) -> Sums<'b, V, V2, R, R2> {
        Sums {
            input: recycle(self.input),
            output: self.output,
            desired: self.desired,
        }
    }
}

impl<'a, V: Data, V2: Data, R: Semigroup, R2: Semigroup + Abelian> Sums<'a, V, V2, R, R2> {
    pub(crate) fn clear(&mut self) {
        self.input.clear();
        self.output.clear();
    }

    /// Runs `logic` on the input sums and calls `correct(value, diff)` with what the output
    /// sums lack of its result (`desired - output`, per value, zeros left out). The output
    /// sums are left as they were: the sweeps add the corrections where their order allows.
    pub(crate) fn correct(
        &mut self,
        logic: &mut impl FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
        correct: impl FnMut(V2, R2),
    ) {
        self.desired.clear();
        if !self.input.is_empty() {
            logic(&self.input, &mut self.desired);
            consolidate_pairs(&mut self.desired);
        }
        corrections(&self.desired, &self.output, correct);
    }
}

/// Calls `correct(value, diff)` for each value whose diff in `desired` differs from `current`
/// (both consolidated, sorted by value), with `desired - current`.
fn corrections<V2: Data, R2: Semigroup + Abelian>(
    desired: &[(V2, R2)],
    current: &[(V2, R2)],
    mut correct: impl FnMut(V2, R2),
) {
    let (mut d, mut c) = (0, 0);
    while d < desired.len() || c < current.len() {
        let order = match (desired.get(d), current.get(c)) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                correct(desired[d].0.clone(), desired[d].1.clone());
                d += 1;
            }
            std::cmp::Ordering::Greater => {
                let mut diff = current[c].1.clone();
                diff.negate();
                correct(current[c].0.clone(), diff);
                c += 1;
            }
            std::cmp::Ordering::Equal => {
                let mut diff = current[c].1.clone();
                diff.negate();
                diff.plus_equals(&desired[d].1);
                if !diff.is_zero() {
                    correct(desired[d].0.clone(), diff);
                }
                d += 1;
                c += 1;
            }
        }
    }
}
