//! The chain sweep for keys whose histories are not short: only the stretches where the output
//! can change are put in time order.
//!
//! In an iteration over big steps a key's history holds the changes of the step's earlier
//! rounds at thousands of outer times, all re-read at every round (in bfs on big steps, about a
//! thousand updates per visit). [`super::chain_sweep`] sorts them all by time to sweep them, yet
//! most lie where nothing new can change the output: the new times `t₀ < t₁ < ...` (a chain)
//! cut the history into *segments*, the times strictly between `tₖ` and `tₖ₊₁` (after the last
//! one for the last segment), and in most segments the sweep has nothing to correct (in bfs
//! there, most of the history's updates lie in such segments; see docs/perf-notes.md, section
//! "Reduce: segmented sweep", for this module's measurements).
//!
//! Which segments. Let `I(h)` and `O(h)` be the input and output accumulated at `h` from the
//! traces through the interval's lower bound (the interval's new updates left out). Every time
//! before `upper` where `f(I(h))` may differ from `O(h)` is at or after a deferred time due in
//! this interval (that is the invariant that lets the operator skip keys without news, and
//! what deferring maintains). Take `h` inside segment `k`: the new times at or before it are
//! `t₀ ..= tₖ`. If the batch's updates at those times add up to nothing value by value, the
//! corrections made so far (all at times at or before `tₖ`) add up to nothing too, and none of
//! `t₀ ..= tₖ` is a due deferred time, then the accumulations at `h` are `I(h)` and `O(h)`,
//! which agree: `h` needs no visit.
//! Such a segment's updates only enter the sums, in any order. The others are sorted and swept
//! as in [`super::chain_sweep`]. Updates are bucketed by segment, then placed in one counting pass.
//! The segment is found by stepping through the new times one by one, forward from the
//! previous update's segment, or from the first when the times go back (a value's updates in
//! a batch come in time order); only updates in the last segment, or outside their segment's
//! bounds, are compared with `upper` (an update at or before a new time is before it). That
//! measured faster than a binary search from any segment the update's time does not fit and a
//! comparison with `upper` for every update, by a few percent, up to about a tenth on the
//! biggest steps; a few steps followed by a binary or galloping search were slower on big
//! steps too: steps are short and predictable, and searches are not. A key with `v` values
//! and `n` new times may step `v * n` times, no more than the sweep's `n` evaluations of up
//! to `v` values. (Reusing the previous segment at all, with a stable sort for the updates
//! beyond `upper`, took a few percent off the time on big steps.)
//!
//! The shape is checked as it is used: every update must lie between its segment's bounds
//! (`tₖ <= h <= tₖ₊₁` in the partial order), which makes the new times' joins with the
//! history the segments' own times, and a swept segment's times must form a chain. Otherwise
//! nothing is emitted or deferred (corrections are held until the end) and the replay takes
//! the key. Histories are not sorted before the sweep, only joined with `t₀`, which adds up
//! the neighbours it makes equal (a batch's updates of one value and outer time at earlier
//! rounds: in bfs, a large share of the bucketed updates and most of those beyond `upper`).
//! Other updates that cancel enter the sums and leave them unchanged, costing only a visit in
//! a swept segment; the updates of a new time's bucket and of a skipped segment enter the sums
//! together, so there neighbours of equal value are added up before the search for their
//! place. Updates at or beyond `upper` are consolidated, so that only times whose updates do
//! not cancel are deferred, as the full chain sweep defers them.

use super::chain_sweep::{add_into, is_chain};
use super::replay::join_and_add_neighbours;
use super::visit::{Hooks, Sums, Visit};
use crate::recycle::recycle;
use columnar::Ref;
use ripple_updates::consolidate::consolidate_within_values;
use ripple_updates::{Abelian, AntichainRef, Data, Semigroup, Time};
use std::ops::Range;

/// Whether a key's visit takes the segmented sweep ([`segments_pay_at`]); in this crate's unit
/// tests every non-empty history does, so the interval-by-interval checks of `reduce_key` run
/// it, while the full sweep keeps its own tests and the integration tests.
pub(crate) fn segments_pay(history_len: usize) -> bool {
    if cfg!(test) {
        return history_len > 0;
    }
    segments_pay_at(history_len)
}

/// Whether histories (input and output together) of `history_len` updates take the segmented
/// sweep: at 16 updates or more.
///
/// Shorter histories shrink a lot when consolidated, which the full sweep's sort does and this
/// sweep does only in part (it adds up the neighbours that joining makes equal). The bound was
/// higher until whole compactions in the spine shortened the histories of past steps and left
/// mostly the current step's, which this sweep skips where nothing new happened; it came down
/// again once bfs's depths went round as the reduce's own batches (an `ArrangedVariable`) and
/// its arrangements held their meets, together with the bound from which [`super::replay`]
/// adds up neighbours. Each lowering gained a few percent in bfs on mid-sized steps and was
/// within noise elsewhere on a small graph (the second within noise or a small loss on a big
/// graph), while sweeping every history lost on small steps (measurements: docs/perf-notes.md,
/// section "Reduce: segmented sweep threshold").
fn segments_pay_at(history_len: usize) -> bool {
    history_len >= 16
}

/// One side's updates (input or output history) grouped by segment.
struct Buckets<W, T, R> {
    /// The updates before `upper`, bucket after bucket, each bucket in its original order.
    updates: Vec<(W, T, R)>,
    /// Bucket `b` is `updates[starts[b]..starts[b + 1]]`: bucket `2k` holds the updates at
    /// `tₖ`, bucket `2k + 1` those of segment `k`.
    starts: Vec<usize>,
    /// The updates at or beyond `upper`.
    beyond: Vec<(W, T, R)>,
}

impl<W, T, R> Default for Buckets<W, T, R> {
    fn default() -> Self {
        Self {
            updates: Vec::new(),
            starts: Vec::new(),
            beyond: Vec::new(),
        }
    }
}

impl<W, T, R> Buckets<W, T, R> {
    /// The same buffers for items of another lifetime (see [`crate::recycle`]).
    fn recycle<W2>(self) -> Buckets<W2, T, R> {
        Buckets {
            updates: recycle(self.updates),
            starts: self.starts,
            beyond: recycle(self.beyond),
        }
    }
}

impl<W: Clone, T: Time, R: Clone> Buckets<W, T, R> {
    /// Buckets `history` (each time at or after `times[0]`); `false` if some update before
    /// `upper` lies outside its segment's bounds. `ids`, `order` and `next_free` are scratch.
    fn fill(
        &mut self,
        history: &[(W, T, R)],
        times: &[T],
        upper: AntichainRef<'_, T>,
        [ids, order]: [&mut Vec<u32>; 2],
        next_free: &mut Vec<usize>,
    ) -> bool {
        const BEYOND: u32 = u32::MAX;
        let buckets = 2 * times.len();
        self.updates.clear();
        self.beyond.clear();
        self.starts.clear();
        self.starts.resize(buckets + 1, 0);
        ids.clear();
        // Histories come batch by batch, each batch's updates of a value in time order, so an
        // update's time often repeats the previous one's, or lies in the same segment or a
        // later one: the search for its segment goes forward from the previous update's, and
        // starts over only where the times go back (the next value).
        let mut previous: Option<(&T, u32)> = None;
        let mut segment = 0;
        let last = times.len() - 1;
        for update in history {
            let bucket = match previous.filter(|(time, _)| **time == update.1) {
                Some((_, bucket)) => bucket,
                None => {
                    // The last new time at or before this one in the sort order.
                    if update.1 < times[segment] {
                        if update.1 < times[0] {
                            return false;
                        }
                        segment = 0;
                    }
                    while segment < last && times[segment + 1] <= update.1 {
                        segment += 1;
                    }
                    if update.1 == times[segment] {
                        // A new time is before `upper`.
                        2 * segment as u32
                    } else if segment < last
                        && times[segment].less_equal(&update.1)
                        && update.1.less_equal(&times[segment + 1])
                    {
                        // Before `upper` too, being before a new time.
                        2 * segment as u32 + 1
                    } else if upper.less_equal(&update.1) {
                        BEYOND
                    } else if segment == last && times[segment].less_equal(&update.1) {
                        2 * segment as u32 + 1
                    } else {
                        return false;
                    }
                }
            };
            previous = Some((&update.1, bucket));
            ids.push(bucket);
            if bucket == BEYOND {
                self.beyond.push(update.clone());
            } else {
                self.starts[bucket as usize + 1] += 1;
            }
        }
        for bucket in 0..buckets {
            self.starts[bucket + 1] += self.starts[bucket];
        }
        // Counting sort: each update goes to the next free place of its bucket.
        next_free.clear();
        next_free.extend_from_slice(&self.starts[..buckets]);
        order.clear();
        order.resize(self.starts[buckets], 0);
        for (index, &bucket) in ids.iter().enumerate() {
            if bucket != BEYOND {
                order[next_free[bucket as usize]] = index as u32;
                next_free[bucket as usize] += 1;
            }
        }
        self.updates
            .extend(order.iter().map(|&index| history[index as usize].clone()));
        true
    }

    fn bucket(&self, bucket: usize) -> Range<usize> {
        self.starts[bucket]..self.starts[bucket + 1]
    }
}

/// Adds each update's `(value, diff)` to `acc` (sorted by value, no zero diff), keeping it so.
/// Neighbours with equal values are added up first, sparing a search each: a bucket keeps the
/// order the history came in, batch by batch and within a batch by value.
fn add_all<W: Ord + Clone, T, R: Semigroup>(acc: &mut Vec<(W, R)>, updates: &[(W, T, R)]) {
    let mut index = 0;
    while let Some((value, _, diff)) = updates.get(index) {
        let mut sum = diff.clone();
        index += 1;
        while let Some((_, _, diff)) = updates.get(index).filter(|u| u.0 == *value) {
            sum.plus_equals(diff);
            index += 1;
        }
        add_into(acc, value.clone(), &sum);
    }
}

/// Appends to `times` the times of `updates` whose updates there do not cancel (`updates` is
/// scratch, left consolidated). They come as runs sorted by value (one per batch read), which a
/// stable sort by value, then time, merges.
fn surviving_times<W: Ord, T: Time, R: Semigroup>(
    updates: &mut Vec<(W, T, R)>,
    times: &mut Vec<T>,
) {
    updates.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    consolidate_within_values(updates);
    times.extend(updates.iter().map(|update| update.1.clone()));
}

/// Buffers reused across keys.
pub(crate) struct SegmentScratch<'a, V: Data, V2, T, R, R2> {
    input: Buckets<Ref<'a, V>, T, R>,
    output: Buckets<V2, T, R2>,
    ids: Vec<u32>,
    order: Vec<u32>,
    next_free: Vec<usize>,
    /// Per value, the sum of the batch's updates swept so far.
    batch_sum: Vec<(Ref<'a, V>, R)>,
    /// Per value, the sum of the corrections made so far.
    fixes_sum: Vec<(V2, R2)>,
    /// One evaluation's corrections.
    fixes: Vec<(V2, R2)>,
    /// The corrections, emitted once the whole key has been swept.
    emitted: Vec<(V2, T, R2)>,
    deferred: Vec<T>,
}

impl<V: Data, V2, T, R, R2> Default for SegmentScratch<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            input: Buckets::default(),
            output: Buckets::default(),
            ids: Vec::new(),
            order: Vec::new(),
            next_free: Vec::new(),
            batch_sum: Vec::new(),
            fixes_sum: Vec::new(),
            fixes: Vec::new(),
            emitted: Vec::new(),
            deferred: Vec::new(),
        }
    }
}

impl<V: Data, V2, T, R, R2> SegmentScratch<'_, V, V2, T, R, R2> {
    /// The same buffers for borrows of another lifetime (see [`crate::recycle`]); only the
    /// vectors of borrowed items are emptied.
    pub(crate) fn recycle<'b>(self) -> SegmentScratch<'b, V, V2, T, R, R2> {
        SegmentScratch {
            input: self.input.recycle(),
            output: self.output,
            ids: self.ids,
            order: self.order,
            next_free: self.next_free,
            batch_sum: recycle(self.batch_sum),
            fixes_sum: self.fixes_sum,
            fixes: self.fixes,
            emitted: self.emitted,
            deferred: self.deferred,
        }
    }
}

/// The running state of one key's sweep.
struct Sweep<'s, 'a, V: Data, V2, T, R, R2> {
    sums: &'s mut Sums<'a, V, V2, R, R2>,
    fixes_sum: &'s mut Vec<(V2, R2)>,
    fixes: &'s mut Vec<(V2, R2)>,
    emitted: &'s mut Vec<(V2, T, R2)>,
}

impl<'a, V: Data, V2: Data, T: Time, R: Semigroup, R2: Semigroup + Abelian>
    Sweep<'_, 'a, V, V2, T, R, R2>
{
    /// Makes the output at `now` what `logic` says of the input accumulated there.
    fn evaluate(
        &mut self,
        now: &T,
        logic: &mut impl FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    ) {
        self.fixes.clear();
        let fixes = &mut *self.fixes;
        self.sums
            .correct(logic, |val, diff| fixes.push((val, diff)));
        // Corrections at `now` hold at every later time of the sweep (a chain).
        for (val, diff) in self.fixes.drain(..) {
            self.emitted.push((val.clone(), now.clone(), diff.clone()));
            add_into(self.fixes_sum, val.clone(), &diff);
            add_into(&mut self.sums.output, val, &diff);
        }
    }

    /// Evaluates at each time of a segment's input and output updates, in time order, each
    /// update entering the sums at its time. Returns false if the times are not a chain (the
    /// sweep does not apply).
    fn walk_segment(
        &mut self,
        segment_in: &mut [(Ref<'a, V>, T, R)],
        segment_out: &mut [(V2, T, R2)],
        logic: &mut impl FnMut(&[(Ref<'a, V>, R)], &mut Vec<(V2, R2)>),
    ) -> bool {
        segment_in.sort_by(|a, b| a.1.cmp(&b.1));
        segment_out.sort_by(|a, b| a.1.cmp(&b.1));
        let (mut next_in, mut next_out) = (0, 0);
        let mut previous: Option<&T> = None;
        loop {
            let time = match (segment_in.get(next_in), segment_out.get(next_out)) {
                (Some(a), Some(b)) => std::cmp::min(&a.1, &b.1),
                (Some(a), None) => &a.1,
                (None, Some(b)) => &b.1,
                (None, None) => return true,
            };
            if previous.is_some_and(|previous| !previous.less_equal(time)) {
                return false;
            }
            previous = Some(time);
            while let Some((val, _, diff)) = segment_in.get(next_in).filter(|u| u.1 == *time) {
                add_into(&mut self.sums.input, *val, diff);
                next_in += 1;
            }
            while let Some((val, _, diff)) = segment_out.get(next_out).filter(|u| u.1 == *time) {
                add_into(&mut self.sums.output, val.clone(), diff);
                next_out += 1;
            }
            self.evaluate(time, logic);
        }
    }
}

/// As [`super::chain_sweep::chain_sweep`], for histories that are not short (see [`segments_pay`]);
/// `due` are the key's deferred times due in this interval (among `times`, in any order). The
/// histories are left joined with the least new time, the neighbours that joining makes equal
/// added up (zero sums dropped), in their order otherwise: neither sorted nor fully
/// consolidated.
pub(crate) fn segmented_sweep<'a, V, V2, T, R, R2, L, E, D>(
    visit: &mut Visit<'_, 'a, V, V2, T, R, R2>,
    times: &[T],
    due: &[T],
    scratch: &mut SegmentScratch<'a, V, V2, T, R, R2>,
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
        return true;
    };
    if !is_chain(times) {
        return false;
    }
    debug_assert!(due.iter().all(|time| times.binary_search(time).is_ok()));
    let (history, batch, output, upper) = visit.parts();
    // Every time to examine is at or after `first`: joining keeps the accumulations there.
    join_and_add_neighbours(history, first);
    join_and_add_neighbours(output, first);
    let SegmentScratch {
        input,
        output: outputs,
        ids,
        order,
        next_free,
        batch_sum,
        fixes_sum,
        fixes,
        emitted,
        deferred,
    } = scratch;
    if !input.fill(history, times, upper, [ids, order], next_free)
        || !outputs.fill(output, times, upper, [ids, order], next_free)
    {
        return false;
    }
    batch.sort_by(|a, b| a.1.cmp(&b.1));

    sums.clear();
    batch_sum.clear();
    fixes_sum.clear();
    emitted.clear();
    let mut sweep: Sweep<'_, 'a, V, V2, T, R, R2> = Sweep {
        sums,
        fixes_sum,
        fixes,
        emitted,
    };
    let mut next_batch = 0;
    // The new times are a chain: once the sweep reaches the least due time, every later
    // time is at or after it. (`due` need not be sorted.)
    let first_due = due.iter().min();
    for (k, now) in times.iter().enumerate() {
        add_all(&mut sweep.sums.input, &input.updates[input.bucket(2 * k)]);
        while let Some((val, _, diff)) = batch.get(next_batch).filter(|u| u.1 == *now) {
            add_into(&mut sweep.sums.input, *val, diff);
            add_into(batch_sum, *val, diff);
            next_batch += 1;
        }
        add_all(
            &mut sweep.sums.output,
            &outputs.updates[outputs.bucket(2 * k)],
        );
        let due_passed = first_due.is_some_and(|due| due <= now);
        sweep.evaluate(now, &mut hooks.logic);

        let (inside, outside) = (input.bucket(2 * k + 1), outputs.bucket(2 * k + 1));
        // After the evaluation at `tₖ`, cancelled new updates and no due time imply cancelled
        // corrections (the output there is back to `O(tₖ)`); testing all three keeps the skip
        // to exactly the case the module documentation argues.
        if batch_sum.is_empty() && sweep.fixes_sum.is_empty() && !due_passed {
            // Nothing new reaches this segment: its updates only enter the sums.
            add_all(&mut sweep.sums.input, &input.updates[inside]);
            add_all(&mut sweep.sums.output, &outputs.updates[outside]);
            continue;
        }
        let (segment_in, segment_out) = (&mut input.updates[inside], &mut outputs.updates[outside]);
        if !sweep.walk_segment(segment_in, segment_out, &mut hooks.logic) {
            return false;
        }
    }
    debug_assert_eq!(next_batch, batch.len());

    // Times at or beyond `upper` whose updates do not cancel need examining later.
    deferred.clear();
    surviving_times(&mut input.beyond, deferred);
    surviving_times(&mut outputs.beyond, deferred);
    for (val, time, diff) in emitted.iter() {
        (hooks.emit)(val, time, diff);
    }
    hooks.defer_distinct(deferred);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::chain_sweep::{chain_sweep, ChainScratch};
    use crate::reduce::replay::{replay_key, ReplayScratch};
    use proptest::prelude::*;
    use ripple_updates::consolidate::consolidate_triples;
    use ripple_updates::{Antichain, Product};

    type Time = Product<u64, u32>;
    type Emitted = Vec<(u64, Time, i64)>;

    fn least_positive(input: &[(&u64, i64)], output: &mut Vec<(u64, i64)>) {
        if let Some((value, _)) = input.iter().find(|(_, r)| *r > 0) {
            output.push((**value, 1));
        }
    }

    type Updates<'a> = Vec<(&'a u64, Time, i64)>;

    /// The replay's consolidated corrections and sorted deferred times for a visit.
    fn replayed<'a>(
        mut history: Updates<'a>,
        mut batch: Updates<'a>,
        mut output: Emitted,
        upper: &Antichain<Time>,
    ) -> (Emitted, Vec<Time>) {
        let (mut emitted, mut deferred) = (Vec::new(), Vec::new());
        let visit: &mut Visit<'_, '_, u64, u64, Time, i64, i64> = &mut Visit {
            history: &mut history,
            batch: &mut batch,
            output: &mut output,
            upper: upper.borrow(),
        };
        let hooks = &mut Hooks::new(
            least_positive,
            |v: &u64, t: &Time, r: &i64| emitted.push((*v, *t, *r)),
            |t: &Time| deferred.push(*t),
        );
        let (scratch, sums) = (&mut ReplayScratch::default(), &mut Sums::default());
        replay_key(visit, &[], scratch, sums, hooks);
        consolidate_triples(&mut emitted);
        deferred.sort_unstable();
        (emitted, deferred)
    }

    /// The output history that agrees with `history` at every time: the replay's corrections
    /// for it as new updates, with nothing before and nothing deferred.
    fn consistent_output(history: &[(&u64, Time, i64)]) -> Emitted {
        let unbounded = Antichain::new();
        let (emitted, deferred) = replayed(Vec::new(), history.to_vec(), Vec::new(), &unbounded);
        assert!(deferred.is_empty(), "nothing is beyond an empty upper");
        emitted
    }

    /// One key's visit in round `round` of outer times `start..end`: the history lies before
    /// the interval (earlier outer times, or earlier rounds of these), the new updates and the
    /// due times in the round, and `upper` lets the round's times in.
    #[derive(Debug, Clone)]
    struct Case {
        history: Vec<(u64, Time, i64)>,
        batch: Vec<(u64, Time, i64)>,
        due: Vec<Time>,
        upper: Antichain<Time>,
    }

    fn cases() -> impl Strategy<Value = Case> {
        (1u64..4, 2u64..20, 1u32..4).prop_flat_map(|(start, span, round)| {
            let end = start + span;
            let value = 0u64..4;
            let diff = prop_oneof![Just(-1i64), Just(1i64)];
            let before = prop_oneof![
                (0..start, 0..round + 3).prop_map(|(t, i)| Product::new(t, i)),
                (start..end, 0..round).prop_map(|(t, i)| Product::new(t, i)),
            ];
            let now = (start..end).prop_map(move |t| Product::new(t, round));
            (
                proptest::collection::vec((value.clone(), before, diff.clone()), 0..80),
                proptest::collection::vec((value, now.clone(), diff), 0..6),
                proptest::collection::vec(now, 0..2),
            )
                .prop_map(move |(history, batch, due)| Case {
                    history,
                    batch,
                    due,
                    upper: Antichain::from_iter([
                        Product::new(start, round + 1),
                        Product::new(end, 0),
                    ]),
                })
        })
    }

    /// What a sweep made of a visit: accepted, consolidated corrections, deferred times.
    type Outcome = (bool, Emitted, Vec<Time>);

    fn run(case: &Case, segmented: bool) -> Outcome {
        let history: Vec<(&u64, Time, i64)> =
            case.history.iter().map(|(v, t, r)| (v, *t, *r)).collect();
        // The output trace holds what earlier intervals emitted: the consistent output before
        // the interval's lower bound. Where that leaves it wrong inside the interval, a due
        // time says so (as deferring does in the operator); beyond `upper`, later ones would.
        let lower = Antichain::from_iter(
            case.upper
                .iter()
                .map(|t| Product::new(t.outer, t.inner.saturating_sub(1))),
        );
        let (mut output, mut due) = (Vec::new(), case.due.clone());
        for (v, t, r) in consistent_output(&history) {
            if !lower.less_equal(&t) {
                output.push((v, t, r));
            } else if !case.upper.less_equal(&t) {
                due.push(t);
            }
        }
        let mut batch: Vec<(&u64, Time, i64)> =
            case.batch.iter().map(|(v, t, r)| (v, *t, *r)).collect();
        due.sort_unstable();
        due.dedup();
        let mut times: Vec<Time> = batch.iter().map(|u| u.1).chain(due.clone()).collect();
        times.sort_unstable();
        times.dedup();
        let (mut emitted, mut deferred) = (Vec::new(), Vec::new());
        let mut visit = Visit {
            history: &mut history.clone(),
            batch: &mut batch,
            output: &mut output.clone(),
            upper: case.upper.borrow(),
        };
        let mut hooks = Hooks::new(
            least_positive,
            |v: &u64, t: &Time, r: &i64| emitted.push((*v, *t, *r)),
            |t: &Time| deferred.push(*t),
        );
        let sums = &mut Sums::default();
        let accepted = if segmented {
            let scratch = &mut SegmentScratch::<u64, u64, Time, i64, i64>::default();
            segmented_sweep(&mut visit, &times, &due, scratch, sums, &mut hooks)
        } else {
            let scratch = &mut ChainScratch::<u64, u64, Time, i64, i64>::default();
            chain_sweep(&mut visit, &times, scratch, sums, &mut hooks)
        };
        consolidate_triples(&mut emitted);
        deferred.sort_unstable();
        (accepted, emitted, deferred)
    }

    #[test]
    fn histories_of_16_updates_or_more_take_segments() {
        assert!(!segments_pay_at(0));
        assert!(!segments_pay_at(15));
        assert!(segments_pay_at(16));
        assert!(segments_pay_at(1000));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// On visits of the shape an iteration makes, the segmented sweep takes every key and
        /// makes the corrections and deferrals of the full chain sweep (which matches the
        /// replay), although it visits only the segments that new updates, corrections or
        /// deferred times reach.
        #[test]
        fn segments_match_the_full_sweep(case in cases()) {
            let segmented = run(&case, true);
            let full = run(&case, false);
            prop_assert!(full.0, "the full sweep refused a chain");
            prop_assert_eq!(segmented, full);
        }
    }

    /// Shapes that are not a chain are refused, with nothing emitted or deferred: two new
    /// times incomparable with each other, a swept segment whose times are not a chain, an
    /// update outside its segment's bounds.
    #[test]
    fn other_shapes_are_refused() {
        let case = Case {
            history: vec![(1, Product::new(0, 0), 1)],
            batch: vec![(2, Product::new(5, 1), 1), (3, Product::new(3, 2), 1)],
            due: Vec::new(),
            upper: Antichain::from_elem(Product::new(100, 100)),
        };
        assert_eq!(run(&case, true), (false, Vec::new(), Vec::new()));
        // A segment to sweep whose times are not a chain: (5, 3) and (6, 1).
        let case = Case {
            history: vec![(1, Product::new(6, 1), 1), (2, Product::new(5, 3), 1)],
            batch: vec![(0, Product::new(5, 1), 1)],
            due: Vec::new(),
            upper: Antichain::from_elem(Product::new(100, 100)),
        };
        assert_eq!(run(&case, true), (false, Vec::new(), Vec::new()));
        // An update between two new times in the sort order but not before the later one.
        let case = Case {
            history: vec![(1, Product::new(5, 3), 1)],
            batch: vec![(0, Product::new(2, 1), 1), (0, Product::new(8, 1), -1)],
            due: Vec::new(),
            upper: Antichain::from_elem(Product::new(100, 100)),
        };
        assert_eq!(run(&case, true), (false, Vec::new(), Vec::new()));
    }

    /// A refusal found after joining (an update outside its segment's bounds) hands the replay
    /// histories it treats as it treats the fresh ones: the same corrections and deferred times,
    /// although joining has added up (and here cancelled) two of the updates.
    #[test]
    fn the_replay_takes_a_refused_key_as_it_came() {
        let p = Product::new;
        let (three, four, five, seven) = (3u64, 4u64, 5u64, 7u64);
        // Seven's updates both join to (2, 1), with opposite diffs; three's, at (2, 5), lies
        // between the new times (2, 1) and (5, 1) in the sort order but not before (5, 1).
        let history = vec![
            (&seven, p(2, 0), 1),
            (&seven, p(2, 1), -1),
            (&three, p(2, 5), 1),
        ];
        let batch = vec![(&four, p(2, 1), 1), (&five, p(5, 1), 1)];
        let output: Emitted = vec![(4, p(2, 3), 1)];
        let upper = Antichain::from_elem(p(10, 0));
        let fresh = replayed(history.clone(), batch.clone(), output.clone(), &upper);
        assert!(!fresh.0.is_empty(), "the case should need corrections");

        let (mut joined, mut refused_batch, mut refused_output) = (history, batch, output);
        let visit: &mut Visit<'_, '_, u64, u64, Time, i64, i64> = &mut Visit {
            history: &mut joined,
            batch: &mut refused_batch,
            output: &mut refused_output,
            upper: upper.borrow(),
        };
        let hooks = &mut Hooks::new(
            least_positive,
            |_: &u64, _: &Time, _: &i64| panic!("a refused key emits nothing"),
            |_: &Time| panic!("a refused key defers nothing"),
        );
        let times = [p(2, 1), p(5, 1)];
        let scratch = &mut SegmentScratch::default();
        assert!(!segmented_sweep(
            visit,
            &times,
            &[],
            scratch,
            &mut Sums::default(),
            hooks
        ));
        assert_eq!(
            joined,
            vec![(&three, p(2, 5), 1)],
            "joined, seven's updates cancelled"
        );
        let after = replayed(joined, refused_batch, refused_output, &upper);
        assert_eq!(after, fresh);
    }
}
