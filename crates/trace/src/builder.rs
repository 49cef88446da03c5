//! Building a batch from updates already sorted by `(key, val, time)` and consolidated.
//!
//! The merge batcher's sealed chains and the spine's merges both produce updates in that order,
//! so the builder never sorts: it appends, opening a new key or value when it changes.

use crate::batch::{Batch, BatchData};
use crate::columns::{exact_copy, fences_of, payload_bytes};
use crate::cursor::BatchCursor;
use crate::description::Description;
use crate::history::{HistoriesBuilder, HistoriesView};
use crate::offsets::OffsetList;
use crate::view::BatchView;
use columnar::{Borrow, Clear, Columnar, Container, ContainerOf, Index, Len, Push, Ref};
use ripple_updates::{AntichainRef, Lattice, Update, UpdatesView};
use std::ops::Range;

/// Appends sorted, consolidated updates; [`Builder::done`] turns them into a [`Batch`].
pub struct Builder<U: Update> {
    keys: ContainerOf<U::Key>,
    key_ends: OffsetList,
    vals: ContainerOf<U::Val>,
    val_ends: OffsetList,
    histories: HistoriesBuilder<U::Time, U::Diff>,
    /// The room [`Builder::expect_merge`] gave the key and value columns, when it sized them
    /// exactly (none otherwise): columns that come out mostly full go to a big batch as they
    /// are.
    reserved: [Reserved; 2],
}

impl<U: Update> Default for Builder<U> {
    fn default() -> Self {
        Self {
            keys: Default::default(),
            key_ends: OffsetList::default(),
            vals: Default::default(),
            val_ends: OffsetList::default(),
            histories: HistoriesBuilder::default(),
            reserved: [Reserved::default(); 2],
        }
    }
}

/// The room a column was given: items and payload bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Reserved {
    items: usize,
    bytes: usize,
}

impl Reserved {
    fn of<C: Columnar>(columns: &[&ContainerOf<C>]) -> Self {
        Self {
            items: columns.iter().map(|column| column.borrow().len()).sum(),
            bytes: columns
                .iter()
                .map(|column| payload_bytes::<C>(column))
                .sum(),
        }
    }

    /// Whether `column`, given exactly this room, fills at least four-fifths of it in items
    /// and in bytes (variable-width values can leave bytes empty while items fill up).
    fn mostly_filled_by<C: Columnar>(&self, column: &ContainerOf<C>) -> bool {
        let (items, bytes) = (column.borrow().len(), payload_bytes::<C>(column));
        self.items > 0
            && items <= self.items
            && bytes <= self.bytes
            && items * 5 >= self.items * 4
            && bytes * 5 >= self.bytes * 4
    }
}

impl<U: Update> Builder<U> {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of updates pushed.
    pub fn len(&self) -> usize {
        self.histories.len()
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.histories.is_empty()
    }

    /// Announces that the batch will hold at most about `updates` updates, so that big batches
    /// are built in buffers allocated once at that size (see [`HistoriesBuilder::expect`]).
    pub fn expect(&mut self, updates: usize) {
        self.histories.expect(updates);
    }

    /// Announces a merge of `older` and `newer`: the batch will hold at most their keys,
    /// values and updates together. The key and value columns get that room at once (grown by
    /// doubling instead, their copies were a few percent of the spine's merge work); an empty
    /// builder gets columns of exactly that room, which a big batch may then keep (see
    /// [`Builder::build`]).
    pub fn expect_merge(&mut self, older: &Batch<U>, newer: &Batch<U>) {
        self.expect(older.len() + newer.len());
        let (Some(older), Some(newer)) = (older.memory(), newer.memory()) else {
            // A stored input's columns are not at hand: the columns grow by doubling.
            return;
        };
        let keys = [older.keys.borrow(), newer.keys.borrow()];
        let vals = [older.vals.borrow(), newer.vals.borrow()];
        if self.is_empty() && self.keys.borrow().is_empty() {
            self.keys = <ContainerOf<U::Key> as Container>::with_capacity_for(keys.into_iter());
            self.vals = <ContainerOf<U::Val> as Container>::with_capacity_for(vals.into_iter());
            self.reserved = [
                Reserved::of::<U::Key>(&[&older.keys, &newer.keys]),
                Reserved::of::<U::Val>(&[&older.vals, &newer.vals]),
            ];
        } else {
            self.keys.reserve_for(keys.into_iter());
            self.vals.reserve_for(vals.into_iter());
            self.reserved = [Reserved::default(); 2];
        }
    }

    /// Appends one update. Updates must arrive sorted strictly by `(key, val, time)`, with
    /// non-zero diffs (checked when the batch is built in debug builds).
    #[inline]
    pub fn push(
        &mut self,
        key: Ref<'_, U::Key>,
        val: Ref<'_, U::Val>,
        time: &U::Time,
        diff: &U::Diff,
    ) {
        let new_key = self.is_new_key(key);
        if new_key || self.is_new_val(val) {
            self.start_val(key, val, new_key);
        }
        self.histories.push(time, diff);
    }

    /// Appends the history of one value: `history` (sorted by time, non-zero diffs, not
    /// empty) at `(key, val)`, which must come after everything pushed so far. Equivalent to
    /// pushing each update, without comparing the key and value once per update.
    #[inline]
    pub fn push_history(
        &mut self,
        key: Ref<'_, U::Key>,
        val: Ref<'_, U::Val>,
        history: &[(U::Time, U::Diff)],
    ) {
        debug_assert!(!history.is_empty(), "a value's history holds updates");
        self.open_val(key, val);
        for (time, diff) in history {
            self.histories.push(time, diff);
        }
    }

    /// Opens value `val` of `key`, which must come after everything pushed so far, for
    /// [`Builder::push_to_val`] to fill (with at least one update; merges copy a value from an
    /// input with `extend_val`).
    #[inline]
    pub fn open_val(&mut self, key: Ref<'_, U::Key>, val: Ref<'_, U::Val>) {
        let new_key = self.is_new_key(key);
        debug_assert!(
            new_key || self.is_new_val(val),
            "values must arrive in order, once each"
        );
        self.start_val(key, val, new_key);
    }

    /// Appends an update to the value opened last: times in order, non-zero diffs.
    #[inline(always)]
    pub fn push_to_val(&mut self, time: &U::Time, diff: &U::Diff) {
        self.histories.push(time, diff);
    }

    /// Appends updates `range` of `histories` (sorted by time, non-zero diffs, as a batch's
    /// value holds them) to the value opened last.
    #[inline]
    pub(crate) fn extend_val(
        &mut self,
        histories: &HistoriesView<'_, U::Time, U::Diff>,
        range: std::ops::Range<usize>,
    ) {
        self.histories.extend_from(histories, range);
    }

    /// Copies the current key of `cursor`, `key`, as it is, steps past it, and returns the
    /// number of updates copied.
    pub(crate) fn copy_key<'a>(
        &mut self,
        key: Ref<'a, U::Key>,
        cursor: &mut BatchCursor<'a, U>,
    ) -> usize {
        let mut read = 0;
        while let Some(val) = cursor.get_val() {
            read += self.copy_val(key, val, cursor);
        }
        cursor.step_key();
        read
    }

    /// Copies keys `keys` of `view` with their values and histories (sorted and consolidated,
    /// as a batch holds them), and returns the number of updates copied. The first must come
    /// after every key pushed so far; the last stays open, as a pushed key does. With
    /// `advance_by`, each time is advanced by it: the caller vouches that every value of those
    /// keys has a single update, so that no two times of a value can collide or swap. Column
    /// by column: a merge copies runs of keys that the other input has nothing between, and
    /// key by key each cost the opening and closing of every key and value.
    pub(crate) fn copy_keys(
        &mut self,
        view: &BatchView<'_, U>,
        keys: Range<usize>,
        advance_by: Option<AntichainRef<'_, U::Time>>,
    ) -> usize {
        debug_assert!(keys.start < keys.end && keys.end <= view.keys.len());
        debug_assert!(
            self.is_new_key(view.keys.get(keys.start)),
            "keys must arrive in order"
        );
        let vals = view.key_ends.start(keys.start)..view.key_ends.end(keys.end - 1);
        let updates = view.val_ends.start(vals.start)..view.val_ends.end(vals.end - 1);
        self.close_key();
        let (vals_base, updates_base) = (self.vals.len(), self.histories.len());
        self.keys.extend_from_self(view.keys, keys.clone());
        for key in keys.start..keys.end - 1 {
            self.key_ends
                .push(vals_base + view.key_ends.end(key) - vals.start);
        }
        self.vals.extend_from_self(view.vals, vals.clone());
        for val in vals.start..vals.end - 1 {
            self.val_ends
                .push(updates_base + view.val_ends.end(val) - updates.start);
        }
        let copied = updates.len();
        match advance_by {
            None => self.histories.extend_from(&view.histories, updates),
            Some(since) => {
                debug_assert_eq!(copied, vals.len(), "advanced values hold one update each");
                self.histories
                    .extend_mapped(&view.histories, updates, |time| time.advance_by(since));
            }
        }
        copied
    }

    /// Copies the current value `val` of `cursor` (whose key is `key`) as it is, steps past
    /// it, and returns the number of updates copied.
    #[inline(always)]
    pub(crate) fn copy_val<'a>(
        &mut self,
        key: Ref<'a, U::Key>,
        val: Ref<'a, U::Val>,
        cursor: &mut BatchCursor<'a, U>,
    ) -> usize {
        self.open_val(key, val);
        let (histories, updates) = cursor.val_updates();
        debug_assert!(!updates.is_empty(), "a value's history holds updates");
        let read = updates.len();
        self.extend_val(histories, updates);
        cursor.step_val();
        read
    }

    /// Appends the sorted, consolidated updates of `view` (a chunk of a sealed chain).
    pub fn push_view(&mut self, view: UpdatesView<'_, U>) {
        for index in 0..view.len() {
            let time = U::Time::into_owned(view.time(index));
            let diff = U::Diff::into_owned(view.diff(index));
            self.push(view.key(index), view.val(index), &time, &diff);
        }
    }

    /// The last key pushed, if any.
    pub fn last_key(&self) -> Option<Ref<'_, U::Key>> {
        let keys = self.keys.borrow();
        (!keys.is_empty()).then(|| keys.get(keys.len() - 1))
    }

    /// Starts value `val`, of a new key `key` if `new_key` (closing the previous one) or else of
    /// the current key (closing its previous value).
    #[inline(always)]
    fn start_val(&mut self, key: Ref<'_, U::Key>, val: Ref<'_, U::Val>, new_key: bool) {
        if new_key {
            self.close_key();
            self.keys.push(key);
        } else {
            self.val_ends.push(self.histories.len());
        }
        self.vals.push(val);
    }

    /// True when `key` differs from the last key pushed (or none was).
    #[inline(always)]
    fn is_new_key(&self, key: Ref<'_, U::Key>) -> bool {
        let keys = self.keys.borrow();
        keys.is_empty() || U::Key::reborrow(keys.get(keys.len() - 1)) != U::Key::reborrow(key)
    }

    #[inline(always)]
    fn is_new_val(&self, val: Ref<'_, U::Val>) -> bool {
        let vals = self.vals.borrow();
        U::Val::reborrow(vals.get(vals.len() - 1)) != U::Val::reborrow(val)
    }

    /// Closes the open value and key, if any.
    fn close_key(&mut self) {
        if !self.keys.is_empty() {
            self.val_ends.push(self.histories.len());
            self.key_ends.push(self.vals.len());
        }
    }

    /// The batch of everything pushed, described by `description`.
    pub fn done(mut self, description: Description<U::Time>) -> Batch<U> {
        self.build(description)
    }

    /// The batch of everything pushed, described by `description`, with exact allocations, but
    /// for a big batch's offsets (shrunk in place) and the key and value columns of a big merge
    /// that fill at least four-fifths of the room [`Builder::expect_merge`] gave them (kept as
    /// they are). The builder is left empty for the next batch and, unless this one was large,
    /// keeps its buffers: operators that build many small batches (one per step and iteration) then
    /// allocate only the batch itself, not the doubling buffers behind it.
    pub fn build(&mut self, description: Description<U::Time>) -> Batch<U> {
        self.close_key();
        // Buffers sized for a big expectation go with the batch even if it came out small.
        let sized_big = self.histories.expected() > REUSE_UPDATES_MAX;
        let histories = self.histories.build();
        if histories.len() > REUSE_UPDATES_MAX || sized_big {
            // Keeping the buffers of a big batch would hold its size for nothing, so they go
            // with the batch when that wastes little: the offsets (plain vectors, whose big
            // allocations shrink in place) always, the key and value columns when a merge
            // sized them and they came out at least four-fifths full. Copying them was a few
            // percent of bfs's samples on big steps over a big graph, and briefly held the
            // columns twice (see docs/perf-notes.md, section "Batch builder: keeping columns").
            let [reserved_keys, reserved_vals] = self.reserved;
            let taken = std::mem::take(self);
            let data = BatchData {
                key_fences: fences_of::<U::Key>(&taken.keys),
                keys: keep_if_full::<U::Key>(taken.keys, reserved_keys),
                key_ends: taken.key_ends.shrunk(),
                vals: keep_if_full::<U::Val>(taken.vals, reserved_vals),
                val_ends: taken.val_ends.shrunk(),
                histories,
                description,
            };
            return Batch::from_data(data);
        }
        let data = BatchData {
            key_fences: fences_of::<U::Key>(&self.keys),
            keys: exact_copy::<U::Key>(&self.keys),
            key_ends: self.key_ends.exact_copy(),
            vals: exact_copy::<U::Val>(&self.vals),
            val_ends: self.val_ends.exact_copy(),
            histories,
            description,
        };
        self.keys.clear();
        self.key_ends.clear();
        self.vals.clear();
        self.val_ends.clear();
        self.reserved = [Reserved::default(); 2];
        Batch::from_data(data)
    }
}

/// `column` as it is if [`Builder::expect_merge`] sized it exactly and it fills at least
/// four-fifths of that room (so at most a fifth is slack), else an exact copy.
fn keep_if_full<C: Columnar>(column: ContainerOf<C>, reserved: Reserved) -> ContainerOf<C> {
    if reserved.mostly_filled_by::<C>(&column) {
        column
    } else {
        exact_copy::<C>(&column)
    }
}

/// A builder keeps its buffers for the next batch only after batches of at most this many
/// updates (about 10 KiB of buffers for 4-word updates). Kept buffers are most of what a small
/// dataflow holds beyond its data; merges of a few hundred updates are rare enough that
/// growing their buffers afresh costs next to nothing (docs/perf-notes.md, section "Batch
/// builder: buffers kept").
const REUSE_UPDATES_MAX: usize = 1 << 8;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ripple_updates::consolidate::consolidate_rows;
    use ripple_updates::Antichain;

    type U = (u64, u64, u64, i64);

    fn description(upper: u64) -> Description<u64> {
        Description::new(Antichain::from_elem(0), Antichain::from_elem(upper))
    }

    fn push_all(builder: &mut Builder<U>, rows: &[(u64, u64, u64, i64)]) {
        for (k, v, t, r) in rows {
            builder.push(k, v, t, r);
        }
    }

    /// A merge's builder hands its key and value columns to a big batch when they fill most of
    /// the room it gave them (the very allocations go with the batch), and copies them exactly
    /// when consolidation left little, or when the builder was not empty to size them: the
    /// batch holds the same updates either way, and never more than a fifth of room to spare.
    #[test]
    fn merge_columns_go_with_big_batches_when_mostly_full() {
        // Key `k` has `1 + k % 3` values, so that neither offset list is uniform.
        let rows = |keys: std::ops::Range<u64>, diff: i64| -> Vec<(u64, u64, u64, i64)> {
            keys.flat_map(|k| (0..1 + k % 3).map(move |v| (k, v, 1, diff)))
                .collect()
        };
        let built = |rows: &[(u64, u64, u64, i64)]| {
            let mut builder = Builder::<U>::new();
            push_all(&mut builder, rows);
            builder.done(description(10))
        };
        let older = built(&rows(0..2_000, 1));
        let mut reused = Builder::<U>::new();
        for (newer_rows, kept_keys, moved) in [
            (rows(2_000..2_400, 1), 2_400, true), // disjoint: 2,400 of 2,400 keys reserved
            (rows(0..1_900, -1), 100, false),     // cancelling: 100 of 3,900
        ] {
            let newer = built(&newer_rows);
            let mut all = older.to_rows();
            all.extend_from_slice(&newer_rows);
            consolidate_rows::<U>(&mut all);
            // A fresh builder, and one reused after a small batch: both are empty, so both
            // size their columns exactly.
            push_all(&mut reused, &all[..10]);
            reused.build(description(10));
            for builder in [&mut Builder::<U>::new(), &mut reused] {
                builder.expect_merge(&older, &newer);
                push_all(builder, &all);
                let columns = (builder.keys.as_ptr(), builder.vals.as_ptr());
                let merged = builder.build(description(10));
                assert!(builder.is_empty());
                assert_eq!(merged.to_rows(), all);
                let (keys, vals) = (&merged.data().keys, &merged.data().vals);
                assert_eq!(keys.len(), kept_keys);
                assert_eq!((keys.as_ptr(), vals.as_ptr()) == columns, moved);
                for (capacity, len) in
                    [(keys.capacity(), keys.len()), (vals.capacity(), vals.len())]
                {
                    assert!(capacity * 4 <= len * 5, "{capacity} for {len}");
                }
            }
        }
        // A builder holding updates already is not sized exactly: its columns are copied.
        let mut started = Builder::<U>::new();
        started.push(&0, &0, &0, &1);
        let newer = built(&rows(2_000..2_400, 1));
        started.expect_merge(&older, &newer);
        // After the key 0 pushed, every key one further on.
        let all: Vec<_> = (older.to_rows().into_iter())
            .chain(newer.to_rows())
            .map(|(k, v, t, r)| (k + 1, v, t, r))
            .collect();
        push_all(&mut started, &all);
        let columns = started.keys.as_ptr();
        let merged = started.build(description(10));
        assert_ne!(merged.data().keys.as_ptr(), columns);
        assert_eq!(merged.data().keys.capacity(), merged.data().keys.len());
    }

    proptest! {
        /// Runs of keys copied whole from a batch (`copy_keys`) into an empty builder, right
        /// after another copy, or after keys pushed one by one, and pushes after them, build
        /// the batch that pushing every update builds: the copied keys' offsets are rebased onto
        /// what the builder held, and the last copied key stays open for the pushes after it.
        /// With `expect` the histories go to the plain stage, and big sources to the large
        /// batch path.
        #[test]
        fn copied_runs_of_keys_build_what_pushes_build(
            source in proptest::collection::vec((0u64..400, 0u64..4, 0u64..8, -2i64..3), 1..1500),
            runs in proptest::collection::vec((0u64..401, any::<bool>(), any::<bool>()), 0..8),
            expect in any::<bool>(),
        ) {
            let mut source = source;
            consolidate_rows::<U>(&mut source);
            prop_assume!(!source.is_empty());
            // Key `k` of the source becomes `2k + 1`: a key `2k` pushed before a run of keys
            // from `k` on comes before them and after the runs before.
            let shifted = |(k, v, t, r): (u64, u64, u64, i64)| (2 * k + 1, v, t, r);
            let batch = {
                let mut builder = Builder::<U>::new();
                let rows: Vec<_> = source.iter().copied().map(shifted).collect();
                push_all(&mut builder, &rows);
                builder.done(description(10))
            };
            let view = batch.view().expect("in memory");
            let keys: Vec<u64> = source.iter().map(|row| row.0).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            let mut builder = Builder::<U>::new();
            if expect {
                builder.expect(2 * source.len() + 2 * runs.len() + 1);
            }
            let mut expected: Vec<(u64, u64, u64, i64)> = Vec::new();
            let mut runs = runs;
            runs.sort_unstable();
            runs.push((401, true, false));
            let mut from = 0;
            for (cut, copy, marker) in runs {
                let end = keys.partition_point(|&key| key < cut);
                if end <= from {
                    continue;
                }
                let range = from..end;
                from = end;
                let rows: Vec<_> = source
                    .iter()
                    .copied()
                    .filter(|(k, ..)| (keys[range.start]..=keys[range.end - 1]).contains(k))
                    .map(shifted)
                    .collect();
                if marker {
                    let key = 2 * keys[range.start];
                    builder.push(&key, &0, &0, &1);
                    expected.push((key, 0, 0, 1));
                }
                if copy {
                    prop_assert_eq!(builder.copy_keys(&view, range, None), rows.len());
                } else {
                    push_all(&mut builder, &rows);
                }
                Extend::extend(&mut expected, rows);
            }
            // A push after the last run goes to its open key.
            let last = expected[expected.len() - 1];
            builder.push(&last.0, &9, &0, &1);
            expected.push((last.0, 9, 0, 1));
            prop_assert_eq!(builder.done(description(10)).to_rows(), expected);
        }

        /// Keys whose values hold one update each, copied in one or two runs with their times
        /// advanced (`copy_keys` with `advance_by`, as merges copy an older batch's keys), with
        /// a key pushed between the runs or not, build what pushing the advanced updates
        /// builds.
        #[test]
        fn copied_keys_of_single_updates_advance_their_times(
            source in proptest::collection::btree_map(
                (0u64..300, 0u64..4),
                (0u64..8, prop_oneof![-2i64..0, 1i64..3]),
                1..600,
            ),
            cut in 0u64..301,
            since in 0u64..9,
            marker in any::<bool>(),
        ) {
            // Key `k` of the source becomes `2k + 1`, so that key `2k` fits before it.
            let rows: Vec<_> = source.into_iter().map(|((k, v), (t, r))| (2 * k + 1, v, t, r)).collect();
            let batch = {
                let mut builder = Builder::<U>::new();
                push_all(&mut builder, &rows);
                builder.done(description(10))
            };
            let view = batch.view().expect("in memory");
            let keys: Vec<u64> = rows.iter().map(|row| row.0).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            let split = keys.partition_point(|&key| key < 2 * cut + 1);
            let frontier = Antichain::from_elem(since);
            let mut builder = Builder::<U>::new();
            let mut expected: Vec<(u64, u64, u64, i64)> = Vec::new();
            for range in [0..split, split..keys.len()] {
                if range.is_empty() {
                    continue;
                }
                if marker && range.start > 0 {
                    let key = keys[range.start] - 1;
                    builder.push(&key, &0, &9, &1);
                    expected.push((key, 0, 9, 1));
                }
                builder.copy_keys(&view, range.clone(), Some(frontier.borrow()));
                Extend::extend(
                    &mut expected,
                    rows.iter()
                        .filter(|row| (keys[range.start]..=keys[range.end - 1]).contains(&row.0))
                        .map(|&(k, v, t, r)| (k, v, t.max(since), r)),
                );
            }
            prop_assert_eq!(builder.done(description(10)).to_rows(), expected);
        }

        /// A builder reused across batches (small ones that keep its buffers, large ones that
        /// release them) builds each batch exactly as a fresh builder does.
        #[test]
        fn a_reused_builder_builds_what_a_fresh_one_does(
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec((0u64..50, 0u64..4, 0u64..8, -2i64..3), 0..40),
                    0usize..3,
                ),
                1..8,
            )
        ) {
            let mut reused = Builder::<U>::new();
            for (rows, repeat) in batches {
                // Some batches exceed the reuse limit, so the builder also starts over.
                let mut rows: Vec<_> = rows
                    .iter()
                    .flat_map(|&(k, v, t, r)| {
                        (0..1 + repeat as u64 * 40).map(move |i| (k + 100 * i, v, t, r))
                    })
                    .collect();
                consolidate_rows::<U>(&mut rows);
                let mut fresh = Builder::<U>::new();
                push_all(&mut fresh, &rows);
                push_all(&mut reused, &rows);
                let expected = fresh.done(description(10));
                let built = reused.build(description(10));
                prop_assert!(reused.is_empty());
                prop_assert_eq!(built.to_rows(), expected.to_rows());
                prop_assert_eq!(built.to_rows(), rows);
                prop_assert_eq!(built.heap_bytes(), expected.heap_bytes());
            }
        }
    }
}
