//! Merging two adjacent batches into one, a bounded amount of work at a time.
//!
//! The spine merges batches in the background of inserts: each insert grants some fuel, and a
//! [`Merge`] spends it key by key (a run of keys that one input holds alone, column by column),
//! keeping its positions between calls. While merging, times
//! are advanced by the logical compaction frontier (`since`) and updates whose times become
//! equal are consolidated, which is how a trace's memory follows its contents rather than its
//! history.
//!
//! A merge builds its batch in memory ([`Merge::new`]) or writes it to a batch file as it goes
//! ([`Merge::to_file`]), a block at a time: merging stored batches then holds a block of each
//! input and one of the output, whatever their sizes.

use crate::batch::Batch;
use crate::builder::Builder;
use crate::cursor::BatchCursor;
use crate::description::Description;
use crate::writer::BatchWriter;
use columnar::{Columnar, Len, Ref};
use ripple_storage::Storage;
use ripple_updates::search::gallop;
use ripple_updates::{AntichainRef, Lattice, Update};
use std::cmp::Ordering;
use std::sync::Arc;

/// Where a merge's updates go. (The builder stays inline, the larger variant: it takes every
/// push of a merge in memory, and the spine boxes its merges anyway.)
#[allow(clippy::large_enum_variant)]
enum Output<U: Update> {
    /// A builder of the whole batch in memory.
    Memory(Builder<U>),
    /// A batch file of `storage`, numbered `id`, written block by block.
    File {
        writer: Box<BatchWriter<U>>,
        storage: Arc<Storage>,
        id: u64,
        name: String,
    },
}

impl<U: Update> Output<U> {
    /// Lets `push` append the merged values of `key` (see [`BatchWriter::push_key`]). A file
    /// that cannot be written ends the worker with the error (see [`Storage::fail`]).
    #[inline]
    fn push_key<R>(&mut self, key: Ref<'_, U::Key>, push: impl FnOnce(&mut Builder<U>) -> R) -> R {
        match self {
            Output::Memory(builder) => push(builder),
            Output::File {
                writer, storage, ..
            } => match writer.push_key(key, push) {
                Ok(result) => result,
                Err(error) => storage.fail(error),
            },
        }
    }
}

/// A merge of an older and a newer batch, in progress.
pub struct Merge<U: Update> {
    older: Batch<U>,
    newer: Batch<U>,
    /// Next key to merge in each input.
    older_key: usize,
    newer_key: usize,
    /// Of stored inputs, the first block the input's handle may still pin: the merge reads
    /// through its own handles and keeps only each one's current block between calls.
    pinned_from: [usize; 2],
    output: Output<U>,
    description: Description<U::Time>,
    /// The times and diffs of one value, advanced.
    scratch: Vec<(U::Time, U::Diff)>,
    /// Whether advancing by `since` may move some time of `older` (of `newer`). Inside an
    /// iteration most batches lie wholly after the frontier's meet, and their times are copied
    /// as they are.
    advance: [bool; 2],
}

/// How many keys a merge with a stored input takes between lettings go of its pins.
const STORED_SLICE_KEYS: usize = 1 << 12;

impl<U: Update> Merge<U> {
    /// Starts merging `older` with `newer`, which must follow it (`older.upper == newer.lower`),
    /// advancing times by `since`.
    pub fn new(older: Batch<U>, newer: Batch<U>, since: AntichainRef<'_, U::Time>) -> Self {
        Self::with_builder(older, newer, since, Builder::new())
    }

    /// Like [`Merge::new`], building into `builder` (empty; see [`Merge::finish`]).
    pub fn with_builder(
        older: Batch<U>,
        newer: Batch<U>,
        since: AntichainRef<'_, U::Time>,
        mut builder: Builder<U>,
    ) -> Self {
        debug_assert!(builder.is_empty(), "a merge starts with an empty builder");
        builder.expect_merge(&older, &newer);
        Self::with_output(older, newer, since, Output::Memory(builder))
    }

    /// Like [`Merge::new`], writing the merged batch to a new file of `storage` as it goes,
    /// a block at a time; the batch [`Merge::finish`] returns is stored (or empty). A file
    /// that cannot be written ends the worker with the error (see [`Storage::fail`]).
    pub fn to_file(
        older: Batch<U>,
        newer: Batch<U>,
        since: AntichainRef<'_, U::Time>,
        storage: &Arc<Storage>,
    ) -> Self {
        let (id, name) = storage.new_file();
        let settings = storage.settings();
        let writer = BatchWriter::new(
            storage.store(),
            &name,
            settings.block_updates,
            settings.filters,
        );
        let writer = writer.unwrap_or_else(|error| storage.fail(error));
        let output = Output::File {
            writer: Box::new(writer),
            storage: Arc::clone(storage),
            id,
            name,
        };
        Self::with_output(older, newer, since, output)
    }

    fn with_output(
        older: Batch<U>,
        newer: Batch<U>,
        since: AntichainRef<'_, U::Time>,
        output: Output<U>,
    ) -> Self {
        assert_eq!(
            older.description().upper,
            newer.description().lower,
            "merged batches must be adjacent"
        );
        let advance = [&older, &newer].map(|batch| advancing_may_move(batch.description(), since));
        let description = Description::with_since(
            older.description().lower.clone(),
            newer.description().upper.clone(),
            since.to_owned(),
        );
        Self {
            older,
            newer,
            older_key: 0,
            newer_key: 0,
            pinned_from: [0, 0],
            output,
            description,
            scratch: Vec::new(),
            advance,
        }
    }

    /// The two inputs, older first; they stay readable until the merge completes.
    pub fn inputs(&self) -> [&Batch<U>; 2] {
        [&self.older, &self.newer]
    }

    /// Merges keys until `fuel` (in updates) is spent or the inputs are exhausted. Returns true
    /// when the merge is complete. Work stops only between keys, so `fuel` may go negative, by
    /// less than one key's updates.
    pub fn work(&mut self, fuel: &mut isize) -> bool {
        let Self {
            older,
            newer,
            older_key,
            newer_key,
            pinned_from,
            output,
            description,
            scratch,
            advance,
        } = self;
        let since = description.since.borrow();
        // A stored input is merged a slice of keys at a time, its pins let go between slices:
        // a merge's fuel (all of it, when the merge is finished at once) would otherwise pin
        // every block it reads.
        let slice_keys = if older.is_stored() || newer.is_stored() {
            STORED_SLICE_KEYS
        } else {
            usize::MAX
        };
        loop {
            // Of the blocks the inputs' handles pinned so far, only the current ones are kept:
            // a merge of stored batches holds a block of each at a time, and does not read the
            // one it stopped in again.
            for (input, (key, from)) in [&mut *older, &mut *newer].into_iter().zip(
                [*older_key, *newer_key]
                    .into_iter()
                    .zip(pinned_from.iter_mut()),
            ) {
                let current = input.block_of_key(key);
                input.unpin(*from..current);
                *from = current;
            }
            let mut a = older.scan_cursor_at(*older_key);
            let mut b = newer.scan_cursor_at(*newer_key);
            let mut slice = slice_keys;
            while *fuel > 0 && slice > 0 {
                let (key, from_a, from_b) = match (a.get_key(), b.get_key()) {
                    (None, None) => break,
                    (Some(ka), None) => (ka, true, false),
                    (None, Some(kb)) => (kb, false, true),
                    (Some(ka), Some(kb)) => match ka.cmp(&kb) {
                        Ordering::Less => (ka, true, false),
                        Ordering::Greater => (kb, false, true),
                        Ordering::Equal => (ka, true, true),
                    },
                };
                if from_a != from_b {
                    let (run, other, moves) = if from_a {
                        (&mut a, b.get_key(), advance[0])
                    } else {
                        (&mut b, a.get_key(), advance[1])
                    };
                    let advance_by = moves.then_some(since);
                    if let Some(copied) = copy_run(output, run, other, *fuel, advance_by) {
                        *fuel -= copied.max(1) as isize;
                        slice -= 1;
                        continue;
                    }
                }
                let inputs = (from_a.then_some(&mut a), from_b.then_some(&mut b));
                let spent = output.push_key(key, |builder| {
                    merge_key(builder, scratch, since, *advance, inputs.0, inputs.1)
                });
                *fuel -= spent.max(1) as isize;
                slice -= 1;
            }
            *older_key = a.key_index();
            *newer_key = b.key_index();
            let done = !a.key_valid() && !b.key_valid();
            if done || *fuel <= 0 {
                return done;
            }
        }
    }

    /// Completes the merge, however much work remains, and returns the merged batch.
    pub fn complete(self) -> Batch<U> {
        self.finish().0
    }

    /// Like [`Merge::complete`], also returning the emptied builder of a merge in memory, for
    /// another merge.
    pub fn finish(mut self) -> (Batch<U>, Option<Builder<U>>) {
        let mut fuel = isize::MAX;
        while !self.work(&mut fuel) {
            fuel = isize::MAX;
        }
        let Self {
            older,
            newer,
            output,
            description,
            ..
        } = self;
        // The inputs go before the batch is built: building may copy the merged columns into
        // exact allocations, and an input nobody else holds (the result of an earlier step of
        // a fold) need not be alive beside both copies.
        drop((older, newer));
        match output {
            Output::Memory(mut builder) => (builder.build(description), Some(builder)),
            Output::File {
                writer,
                storage,
                id,
                name,
            } => {
                // Everything cancelled: no file (the writer, dropped, leaves none).
                if writer.key_count() == 0 {
                    return (Batch::empty(description), None);
                }
                let stored = writer
                    .finish(&description)
                    .and_then(|bytes| Batch::open_written(&storage, id, name, bytes));
                (stored.unwrap_or_else(|error| storage.fail(error)), None)
            }
        }
    }
}

/// Whether advancing by `since` may move a time of a batch described by `description`. Each of
/// its times is at or after an element of `lower`, and at or after the meet of its `since` (a
/// merge joined it with that meet; a new batch has `since == lower`, and a batch widened over
/// empty neighbours keeps the `since` it had): if advancing leaves all
/// of either alone, it leaves the times alone ([`Lattice::advance_leaves_after`]). Inside an
/// iteration that holds for the batches of the current round of outer times, and for older
/// batches merged once since that round began, which no longer need rewriting at every merge.
pub(crate) fn advancing_may_move<T: ripple_updates::Time>(
    description: &Description<T>,
    since: AntichainRef<'_, T>,
) -> bool {
    // An empty `since` vouches for nothing: advancing by it leaves times as they were.
    !(T::advance_leaves_after(description.lower.borrow(), since)
        || (!description.since.is_empty()
            && T::advance_leaves_after(description.since.borrow(), since)))
}

/// Copies the keys of `run`, from its current one up to the first not before `other` (all
/// the rest without one), into a builder in memory column by column, and steps past them: as
/// many as `fuel` updates pay for, and at least one key, so that a run spends no more than a
/// key at a time would. Without `advance_by` the keys are copied as they are; with it, only
/// keys whose values hold a single update each are copied, their times advanced by it (one
/// update per value cannot collide with another or move past it, so nothing needs sorting or
/// consolidating; between rounds of an iteration and between small steps most values of an
/// older batch are of that kind). Returns the updates copied, or `None` where keys go one by
/// one: to a file, from a stored batch, or when advancing and the current key has a value of
/// several updates. The caller vouches that the current key comes before `other`, and without
/// `advance_by` that advancing leaves the run's times alone.
fn copy_run<U: Update>(
    output: &mut Output<U>,
    run: &mut BatchCursor<'_, U>,
    other: Option<Ref<'_, U::Key>>,
    fuel: isize,
    advance_by: Option<AntichainRef<'_, U::Time>>,
) -> Option<usize> {
    let Output::Memory(builder) = output else {
        return None;
    };
    let (view, at) = run.memory_view()?;
    // The values and updates of keys `at..=key`; offsets only grow, so the keys that fit are
    // a prefix, and so are those whose values hold one update each (as many updates as
    // values).
    let first_val = view.key_ends.start(at);
    let first = view.val_ends.start(first_val);
    let vals_through = |key: usize| view.key_ends.end(key) - first_val;
    let through = |key: usize| view.val_ends.end(view.key_ends.end(key) - 1) - first;
    if advance_by.is_some() && through(at) != vals_through(at) {
        return None;
    }
    let end = match other {
        Some(other) => run.search_key(at + 1, other),
        None => view.keys.len(),
    };
    let budget = usize::try_from(fuel).unwrap_or(0);
    let end = if advance_by.is_some() {
        gallop(at + 1, end, |key| {
            through(key) <= budget && through(key) == vals_through(key)
        })
    } else {
        gallop(at + 1, end, |key| through(key) <= budget)
    };
    let copied = builder.copy_keys(&view, at..end, advance_by);
    run.set_key_index(end);
    Some(copied)
}

/// Merges the current key of `a` and/or `b` (both at the same key when both are given) into
/// `builder`, steps past it, and returns the number of input updates read. `advance` says, for
/// `a` and `b`, whether advancing by `since` may move their times.
fn merge_key<'a, U: Update>(
    builder: &mut Builder<U>,
    scratch: &mut Vec<(U::Time, U::Diff)>,
    since: AntichainRef<'_, U::Time>,
    advance: [bool; 2],
    mut a: Option<&mut BatchCursor<'a, U>>,
    mut b: Option<&mut BatchCursor<'a, U>>,
) -> usize {
    let key = a
        .as_ref()
        .or(b.as_ref())
        .and_then(|cursor| cursor.get_key())
        .expect("merge_key called at a key");
    // A key of one input whose times advancing leaves alone is copied as it is: its values are
    // in order and their histories sorted and consolidated already.
    match (a.as_deref_mut(), b.as_deref_mut()) {
        (Some(cursor), None) if !advance[0] => return builder.copy_key(key, cursor),
        (None, Some(cursor)) if !advance[1] => return builder.copy_key(key, cursor),
        _ => {}
    }
    let mut read = 0;
    loop {
        let va = a.as_ref().and_then(|cursor| cursor.get_val());
        let vb = b.as_ref().and_then(|cursor| cursor.get_val());
        let (val, from_a, from_b): (Ref<'a, U::Val>, bool, bool) = match (va, vb) {
            (None, None) => break,
            (Some(va), None) => (va, true, false),
            (None, Some(vb)) => (vb, false, true),
            (Some(va), Some(vb)) => match va.cmp(&vb) {
                Ordering::Less => (va, true, false),
                Ordering::Greater => (vb, false, true),
                Ordering::Equal => (va, true, true),
            },
        };
        // A value of one input whose times stay put is sorted and consolidated already:
        // copied as it is, without the round trip through `scratch`.
        let alone = match (from_a, from_b) {
            (true, false) if !advance[0] => a.as_deref_mut(),
            (false, true) if !advance[1] => b.as_deref_mut(),
            _ => None,
        };
        if let Some(cursor) = alone {
            read += builder.copy_val(key, val, cursor);
            continue;
        }
        scratch.clear();
        let mut advanced = false;
        if from_a {
            let cursor = a.as_deref_mut().expect("value came from a");
            gather(cursor, since, advance[0], scratch, &mut advanced);
        }
        if from_b {
            let cursor = b.as_deref_mut().expect("value came from b");
            gather(cursor, since, advance[1], scratch, &mut advanced);
        }
        read += scratch.len();
        // One input's history is already sorted and consolidated; only advancing times or
        // interleaving two histories can unsort it or make times collide.
        if advanced || (from_a && from_b) {
            ripple_updates::consolidate::consolidate_pairs(scratch);
        }
        if !scratch.is_empty() {
            builder.push_history(key, val, scratch);
        }
    }
    if let Some(a) = a {
        a.step_key();
    }
    if let Some(b) = b {
        b.step_key();
    }
    read
}

/// Appends the current value's history, times advanced by `since` (unless `advance` says that
/// leaves them as they are), and steps to the next value.
fn gather<U: Update>(
    cursor: &mut BatchCursor<'_, U>,
    since: AntichainRef<'_, U::Time>,
    advance: bool,
    scratch: &mut Vec<(U::Time, U::Diff)>,
    advanced: &mut bool,
) {
    // Two loops rather than one with the test inside: the compiler does not hoist it out of
    // the per-encoding loops of `map_times`, and the one loop cost a percent or two more of
    // bfs's instructions (see docs/perf-notes.md, section "Merge: gathering times").
    if !advance {
        cursor.map_times(|time, diff| {
            scratch.push((U::Time::into_owned(time), U::Diff::into_owned(diff)));
        });
        cursor.step_val();
        return;
    }
    cursor.map_times(|time, diff| {
        let original = U::Time::into_owned(time);
        let mut time = original.clone();
        time.advance_by(since);
        *advanced |= time != original;
        scratch.push((time, U::Diff::into_owned(diff)));
    });
    cursor.step_val();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ripple_updates::consolidate::consolidate_rows;
    use ripple_updates::Antichain;
    use timely::order::Product;

    type P = Product<u64, u32>;
    type U = (u64, u64, P, i64);

    /// Rows as `(key, val, round, iteration, diff)`, rounds offset by `lower`.
    type Raw = Vec<(u64, u64, u64, u32, i64)>;
    type Rows = Vec<(u64, u64, P, i64)>;

    fn frontier(elements: &[(u64, u32)]) -> Antichain<P> {
        Antichain::from(
            elements
                .iter()
                .map(|&(round, iteration)| Product::new(round, iteration))
                .collect::<Vec<_>>(),
        )
    }

    /// A batch of `raw` for rounds `[lower, lower + 4)`.
    fn batch(raw: &Raw, lower: u64) -> (Batch<U>, Rows) {
        let mut rows: Vec<_> = raw
            .iter()
            .map(|&(k, v, round, iteration, r)| (k, v, Product::new(lower + round, iteration), r))
            .collect();
        consolidate_rows::<U>(&mut rows);
        let mut builder = Builder::<U>::new();
        for (k, v, t, r) in &rows {
            builder.push(k, v, t, r);
        }
        let description = Description::new(frontier(&[(lower, 0)]), frontier(&[(lower + 4, 0)]));
        (builder.done(description), rows)
    }

    /// Merges in steps of `fuel`, as a spine's inserts would, checking that no step spends
    /// more than its fuel and one key's updates (runs of keys copied whole included).
    fn merge(older: Batch<U>, newer: Batch<U>, since: &Antichain<P>, fuel: isize) -> Batch<U> {
        let widest = [&older, &newer]
            .iter()
            .flat_map(|batch| {
                let mut per_key = std::collections::BTreeMap::<u64, isize>::new();
                for (key, ..) in batch.to_rows() {
                    *per_key.entry(key).or_default() += 1;
                }
                per_key.into_values()
            })
            .max()
            .unwrap_or(0);
        let mut merge = Merge::new(older, newer, since.borrow());
        let mut budget = fuel;
        loop {
            let done = merge.work(&mut budget);
            // Both inputs' updates of one key at most, past the fuel.
            assert!(budget > -2 * widest, "spent {} of {fuel}", fuel - budget);
            if done {
                break;
            }
            budget = fuel;
        }
        merge.complete()
    }

    /// The rows a merge must hold: all of them, times advanced by `since`, consolidated.
    fn advanced(rows: &[(u64, u64, P, i64)], since: &Antichain<P>) -> Rows {
        let mut rows: Vec<_> = rows
            .iter()
            .map(|&(k, v, mut t, r)| {
                t.advance_by(since.borrow());
                (k, v, t, r)
            })
            .collect();
        consolidate_rows::<U>(&mut rows);
        rows
    }

    /// Rows over many keys (values mostly of one or two updates), or over a few keys whose
    /// values hold many (the column-by-column copy of long values).
    fn raw() -> impl Strategy<Value = Raw> {
        prop_oneof![
            proptest::collection::vec((0u64..40, 0u64..3, 0u64..4, 0u32..3, -2i64..3), 0..80),
            proptest::collection::vec((0u64..4, 0u64..2, 0u64..4, 0u32..3, -2i64..3), 0..80),
        ]
    }

    /// A batch's times need advancing unless its lower bound or its `since` lies after the
    /// new frontier's meet.
    #[test]
    fn advancing_moves_only_batches_before_the_meet() {
        // The frontier inside round 10's iteration 3: its meet is (10, 0).
        let since = frontier(&[(10, 3), (11, 0)]);
        let fresh = |lower: &[(u64, u32)]| Description::new(frontier(lower), frontier(&[(30, 30)]));
        // Round 10's own batches: left alone.
        assert!(!advancing_may_move(
            &fresh(&[(10, 1), (11, 0)]),
            since.borrow()
        ));
        assert!(!advancing_may_move(&fresh(&[(10, 0)]), since.borrow()));
        // A batch from round 9: its outer times move to 10.
        assert!(advancing_may_move(&fresh(&[(9, 5)]), since.borrow()));
        // The same, already merged at a frontier whose meet was (10, 0): left alone.
        let merged = |since: &[(u64, u32)]| {
            Description::with_since(frontier(&[(0, 0)]), frontier(&[(30, 30)]), frontier(since))
        };
        assert!(!advancing_may_move(
            &merged(&[(10, 1), (11, 0)]),
            since.borrow()
        ));
        // Merged when the meet was (9, 0): moves.
        assert!(advancing_may_move(
            &merged(&[(9, 4), (10, 0)]),
            since.borrow()
        ));
    }

    proptest! {
        /// Three batches merged pairwise, the second merge with the same `since` as the first or
        /// a later one, one or several elements, in steps of any fuel: the result is always the
        /// union with times advanced by `since`, consolidated, and its times advanced already
        /// (`check_invariants` runs on every build in debug builds).
        #[test]
        fn merges_hold_the_advanced_union(
            first in raw(),
            second in raw(),
            third in raw(),
            since in proptest::collection::vec((0u64..9, 0u32..3), 1..3),
            later in proptest::option::of((4u64..12, 0u32..3)),
            fuel in 1isize..40,
        ) {
            let since = frontier(&since);
            let (first, mut rows) = batch(&first, 0);
            let (second, second_rows) = batch(&second, 4);
            let (third, third_rows) = batch(&third, 8);
            rows.extend(second_rows);
            let merged = merge(first, second, &since, fuel);
            prop_assert_eq!(merged.to_rows(), advanced(&rows, &since));
            rows.extend(third_rows);
            let since = match later {
                // Compaction only moves forward: each element joined with a later time.
                Some((round, iteration)) => frontier(
                    &since
                        .iter()
                        .map(|t| t.join(&Product::new(round, iteration)))
                        .map(|t| (t.outer, t.inner))
                        .collect::<Vec<_>>(),
                ),
                None => since,
            };
            let merged = merge(merged, third, &since, fuel);
            prop_assert_eq!(merged.to_rows(), advanced(&rows, &since));
        }
    }
}
