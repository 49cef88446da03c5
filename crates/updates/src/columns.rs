//! Columnar containers of updates: [`Updates`] owns four columns, [`UpdatesView`] borrows them.
//!
//! Each column is the `columnar` container of its type (`Vec<u64>` for `u64`, offsets plus bytes
//! for `String`, one container per field for tuples and derived structs), so a range of updates
//! copies as one slice copy per leaf column, and comparisons of primitive keys read plain slices.
//!
//! Invariants: all four columns have the same length. Nothing here requires the updates to be
//! sorted; chunks and batches, which do, check it with [`UpdatesView::check_sorted_consolidated`].

use crate::strings::{strings_mut, StringColumn};
use crate::update::{Row, Update};
use columnar::{
    AsBytes, Borrow, BorrowedOf, Columnar, Container, ContainerOf, Index, Len, Push, Ref,
};
use std::cmp::Ordering;
use std::fmt;
use std::ops::Range;

/// Updates stored column by column.
pub struct Updates<U: Update> {
    /// The key of each update.
    pub keys: ContainerOf<U::Key>,
    /// The value of each update.
    pub vals: ContainerOf<U::Val>,
    /// The time of each update.
    pub times: ContainerOf<U::Time>,
    /// The diff of each update.
    pub diffs: ContainerOf<U::Diff>,
}

impl<U: Update> Default for Updates<U> {
    fn default() -> Self {
        Self {
            keys: Default::default(),
            vals: Default::default(),
            times: Default::default(),
            diffs: Default::default(),
        }
    }
}

impl<U: Update> Clone for Updates<U> {
    fn clone(&self) -> Self {
        Self {
            keys: self.keys.clone(),
            vals: self.vals.clone(),
            times: self.times.clone(),
            diffs: self.diffs.clone(),
        }
    }
}

impl<U: Update> fmt::Debug for Updates<U>
where
    for<'a> Ref<'a, U::Diff>: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = self.view();
        f.debug_list()
            .entries(
                (0..view.len()).map(|i| (view.key(i), view.val(i), view.time(i), view.diff(i))),
            )
            .finish()
    }
}

impl<U: Update> Updates<U> {
    /// An empty container with exactly enough capacity to hold a copy of all of `view`.
    pub fn with_capacity_for(view: UpdatesView<'_, U>) -> Self {
        let mut updates = Self::default();
        updates.keys.reserve_for(std::iter::once(view.keys));
        updates.vals.reserve_for(std::iter::once(view.vals));
        updates.times.reserve_for(std::iter::once(view.times));
        updates.diffs.reserve_for(std::iter::once(view.diffs));
        updates
    }

    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.diffs.len()
    }

    /// True when there are no updates.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Borrows the columns for reading.
    #[inline(always)]
    pub fn view(&self) -> UpdatesView<'_, U> {
        UpdatesView {
            keys: self.keys.borrow(),
            vals: self.vals.borrow(),
            times: self.times.borrow(),
            diffs: self.diffs.borrow(),
        }
    }

    /// Appends an owned update.
    #[inline]
    pub fn push(&mut self, key: &U::Key, val: &U::Val, time: &U::Time, diff: &U::Diff) {
        self.keys.push(key);
        self.vals.push(val);
        self.times.push(time);
        self.diffs.push(diff);
    }

    /// Appends update `index` of `view`.
    #[inline(always)]
    pub fn push_from(&mut self, view: UpdatesView<'_, U>, index: usize) {
        self.keys.push(view.keys.get(index));
        self.vals.push(view.vals.get(index));
        self.times.push(view.times.get(index));
        self.diffs.push(view.diffs.get(index));
    }

    /// Appends the key, value and time of update `index` of `view`, with diff `diff`.
    #[inline(always)]
    pub fn push_from_with_diff(&mut self, view: UpdatesView<'_, U>, index: usize, diff: &U::Diff) {
        self.keys.push(view.keys.get(index));
        self.push_from_with_diff_after_key(view, index, diff);
    }

    /// The value, time and diff of [`Updates::push_from_with_diff`], for callers that append
    /// the key themselves.
    #[inline(always)]
    pub fn push_from_with_diff_after_key(
        &mut self,
        view: UpdatesView<'_, U>,
        index: usize,
        diff: &U::Diff,
    ) {
        self.vals.push(view.vals.get(index));
        self.times.push(view.times.get(index));
        self.diffs.push(diff);
    }

    /// Appends update `i` of `a` if `take_a`, else update `j` of `b`. Both indices must be in
    /// bounds. Each column reads both candidates and selects, so the merge's unpredictable
    /// choice between its inputs compiles to conditional moves instead of a branch
    /// (`select_unpredictable` asks for that; a plain `if` on a two-word `Ref` such as a
    /// string's became a branch).
    #[inline(always)]
    pub fn push_either<'a>(
        &mut self,
        a: UpdatesView<'a, U>,
        i: usize,
        b: UpdatesView<'a, U>,
        j: usize,
        take_a: bool,
    ) {
        use std::hint::select_unpredictable as select;
        self.keys.push(select(take_a, a.keys.get(i), b.keys.get(j)));
        self.push_either_after_key(a, i, b, j, take_a);
    }

    /// The value, time and diff of [`Updates::push_either`], for callers that append the key
    /// themselves.
    #[inline(always)]
    pub fn push_either_after_key<'a>(
        &mut self,
        a: UpdatesView<'a, U>,
        i: usize,
        b: UpdatesView<'a, U>,
        j: usize,
        take_a: bool,
    ) {
        use std::hint::select_unpredictable as select;
        self.vals.push(select(take_a, a.vals.get(i), b.vals.get(j)));
        self.times
            .push(select(take_a, a.times.get(i), b.times.get(j)));
        self.diffs
            .push(select(take_a, a.diffs.get(i), b.diffs.get(j)));
    }

    /// Appends owned rows, one pass per column.
    #[inline]
    pub fn extend_from_rows(&mut self, rows: &[Row<U>]) {
        self.keys.extend(rows.iter().map(|row| &row.0));
        self.vals.extend(rows.iter().map(|row| &row.1));
        self.times.extend(rows.iter().map(|row| &row.2));
        self.diffs.extend(rows.iter().map(|row| &row.3));
    }

    /// Appends owned rows in reverse order, one pass per column.
    #[inline]
    pub fn extend_from_rows_reversed(&mut self, rows: &[Row<U>]) {
        self.keys.extend(rows.iter().rev().map(|row| &row.0));
        self.vals.extend(rows.iter().rev().map(|row| &row.1));
        self.times.extend(rows.iter().rev().map(|row| &row.2));
        self.diffs.extend(rows.iter().rev().map(|row| &row.3));
    }

    /// Appends `view[range]`, one bulk copy per leaf column.
    #[inline]
    pub fn extend_from(&mut self, view: UpdatesView<'_, U>, range: Range<usize>) {
        debug_assert!(
            range.end <= view.len(),
            "range {range:?} beyond view of {}",
            view.len()
        );
        if range.is_empty() {
            return;
        }
        self.keys.extend_from_self(view.keys, range.clone());
        self.vals.extend_from_self(view.vals, range.clone());
        self.times.extend_from_self(view.times, range.clone());
        self.diffs.extend_from_self(view.diffs, range);
    }

    /// Appends the updates of `view` at `indices`, in that order, one pass per column.
    ///
    /// For scattered selections (short runs) this beats one [`Updates::extend_from`] per run:
    /// each column is a single gather loop, with no per-run call and no branch on the data.
    #[inline]
    pub fn extend_gather(&mut self, view: UpdatesView<'_, U>, indices: &[u32]) {
        self.gather_keys_vals_times(view, indices);
        self.diffs
            .extend(indices.iter().map(|i| view.diffs.get(*i as usize)));
    }

    /// Appends the keys, values and times of `view` at `indices` with the diffs `diffs` (one
    /// per index), one pass per column: how sorted survivors of a consolidation are written.
    #[inline]
    pub fn extend_gather_with_diffs(
        &mut self,
        view: UpdatesView<'_, U>,
        indices: &[u32],
        diffs: &[U::Diff],
    ) {
        assert_eq!(indices.len(), diffs.len(), "one diff per index");
        self.gather_keys_vals_times(view, indices);
        self.diffs.extend(diffs.iter());
    }

    /// The key, value and time columns of [`Updates::extend_gather`]. String keys are copied
    /// by [`StringColumn::push_to`], which does not branch on their lengths.
    #[inline(always)]
    fn gather_keys_vals_times(&mut self, view: UpdatesView<'_, U>, indices: &[u32]) {
        let at = |i: &u32| *i as usize;
        match (
            StringColumn::of::<U::Key>(view.keys),
            strings_mut(&mut self.keys),
        ) {
            (Some(keys), Some(into)) => {
                for index in indices {
                    keys.push_to(at(index), into);
                }
            }
            _ => self
                .keys
                .extend(indices.iter().map(|i| view.keys.get(at(i)))),
        }
        self.vals
            .extend(indices.iter().map(|i| view.vals.get(at(i))));
        self.times
            .extend(indices.iter().map(|i| view.times.get(at(i))));
    }

    /// Reserves room for `copies` more copies of the current contents, slice by slice.
    ///
    /// This is how a buffer is sized for a chunk without knowing its types: after a sample of
    /// updates, reserve that many times the sample. For a buffer whose capacity is at most twice
    /// its length and `copies >= 3`, each slice's capacity becomes exactly `copies + 1` times its
    /// length (`Vec::reserve` allocates exactly what is asked once that exceeds double).
    pub fn reserve_copies(&mut self, copies: usize) {
        /// Moves `column` into a new allocation sized for `copies + 1` times its contents:
        /// one allocation and one copy of the sample, where a clone-then-reserve takes two.
        fn resize<C: Container>(column: &mut C, copies: usize) {
            let sample = std::mem::take(column);
            let len = sample.len();
            let mut sized = C::default();
            sized.reserve_for(std::iter::repeat_n(sample.borrow(), copies + 1));
            sized.extend_from_self(sample.borrow(), 0..len);
            *column = sized;
        }
        resize(&mut self.keys, copies);
        resize(&mut self.vals, copies);
        resize(&mut self.times, copies);
        resize(&mut self.diffs, copies);
    }

    /// Reserves room for `copies` copies of `sample`, slice by slice: on an empty buffer, one
    /// allocation per slice of exactly that size (`Vec::reserve` from empty is exact).
    pub fn reserve_for_copies(&mut self, sample: UpdatesView<'_, U>, copies: usize) {
        self.keys
            .reserve_for(std::iter::repeat_n(sample.keys, copies));
        self.vals
            .reserve_for(std::iter::repeat_n(sample.vals, copies));
        self.times
            .reserve_for(std::iter::repeat_n(sample.times, copies));
        self.diffs
            .reserve_for(std::iter::repeat_n(sample.diffs, copies));
    }

    /// Removes all updates, keeping the allocations.
    pub fn clear(&mut self) {
        columnar::Clear::clear(&mut self.keys);
        columnar::Clear::clear(&mut self.vals);
        columnar::Clear::clear(&mut self.times);
        columnar::Clear::clear(&mut self.diffs);
    }

    /// The size of the columns' payload in bytes, as serialized (each slice padded to 8 bytes).
    pub fn byte_len(&self) -> usize {
        self.view().byte_len()
    }

    /// Builds a container from owned rows (tests and tools; not a hot path).
    pub fn from_rows<'r>(rows: impl IntoIterator<Item = &'r Row<U>>) -> Self {
        let mut updates = Self::default();
        for (k, v, t, r) in rows {
            updates.push(k, v, t, r);
        }
        updates
    }

    /// Copies the updates out as owned rows (tests and tools; not a hot path).
    pub fn to_rows(&self) -> Vec<Row<U>> {
        let view = self.view();
        (0..view.len()).map(|i| view.row(i)).collect()
    }
}

/// Borrowed columns of updates. `Copy`, so it is passed by value.
pub struct UpdatesView<'a, U: Update> {
    /// Borrowed keys.
    pub keys: BorrowedOf<'a, U::Key>,
    /// Borrowed values.
    pub vals: BorrowedOf<'a, U::Val>,
    /// Borrowed times.
    pub times: BorrowedOf<'a, U::Time>,
    /// Borrowed diffs.
    pub diffs: BorrowedOf<'a, U::Diff>,
}

impl<U: Update> Clone for UpdatesView<'_, U> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<U: Update> Copy for UpdatesView<'_, U> {}

impl<'a, U: Update> UpdatesView<'a, U> {
    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.diffs.len()
    }

    /// True when there are no updates.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key of update `index`.
    #[inline(always)]
    pub fn key(&self, index: usize) -> Ref<'a, U::Key> {
        self.keys.get(index)
    }

    /// The value of update `index`.
    #[inline(always)]
    pub fn val(&self, index: usize) -> Ref<'a, U::Val> {
        self.vals.get(index)
    }

    /// The time of update `index`.
    #[inline(always)]
    pub fn time(&self, index: usize) -> Ref<'a, U::Time> {
        self.times.get(index)
    }

    /// The diff of update `index`.
    #[inline(always)]
    pub fn diff(&self, index: usize) -> Ref<'a, U::Diff> {
        self.diffs.get(index)
    }

    /// Update `index` as an owned row.
    pub fn row(&self, index: usize) -> Row<U> {
        (
            U::Key::into_owned(self.key(index)),
            U::Val::into_owned(self.val(index)),
            U::Time::into_owned(self.time(index)),
            U::Diff::into_owned(self.diff(index)),
        )
    }

    /// Compares `(key, val, time)` of update `index` with that of update `other_index` of `other`.
    ///
    /// String keys compare through [`StringColumn::cmp_at`], without a `memcmp` call.
    #[inline(always)]
    pub fn cmp_at(&self, index: usize, other: &Self, other_index: usize) -> Ordering {
        let keys = match (
            StringColumn::of::<U::Key>(self.keys),
            StringColumn::of::<U::Key>(other.keys),
        ) {
            (Some(keys), Some(other_keys)) => keys.cmp_at(index, &other_keys, other_index),
            _ => self.key(index).cmp(&other.key(other_index)),
        };
        match keys {
            Ordering::Equal => self.cmp_after_key_at(index, other, other_index),
            ordering => ordering,
        }
    }

    /// Compares `(val, time)` of update `index` with that of update `other_index` of `other`:
    /// [`UpdatesView::cmp_at`] for callers that compared the keys themselves.
    #[inline(always)]
    pub fn cmp_after_key_at(&self, index: usize, other: &Self, other_index: usize) -> Ordering {
        match self.val(index).cmp(&other.val(other_index)) {
            Ordering::Equal => self.time(index).cmp(&other.time(other_index)),
            ordering => ordering,
        }
    }

    /// The size of the columns' payload in bytes, as serialized (each slice padded to 8 bytes).
    pub fn byte_len(&self) -> usize {
        let mut bytes = 0;
        self.for_each_slice_len(|len| bytes += len.next_multiple_of(8));
        bytes
    }

    /// Calls `logic` with the byte length of each leaf slice, keys first, diffs last.
    ///
    /// A container allocated by [`Updates::with_capacity_for`] has exactly these capacities, which
    /// is what lets the batcher recycle a container only where the new contents fit.
    pub fn for_each_slice_len(&self, mut logic: impl FnMut(usize)) {
        fn slices<'b>(column: &impl AsBytes<'b>, logic: &mut impl FnMut(usize)) {
            for (_align, bytes) in column.as_bytes() {
                logic(bytes.len());
            }
        }
        slices(&self.keys, &mut logic);
        slices(&self.vals, &mut logic);
        slices(&self.times, &mut logic);
        slices(&self.diffs, &mut logic);
    }

    /// Panics unless the updates are sorted strictly by `(key, val, time)` and no diff is zero.
    ///
    /// Strictness means no two updates share a `(key, val, time)`: that is consolidation.
    pub fn check_sorted_consolidated(&self) {
        for index in 0..self.len() {
            if index > 0 {
                assert_eq!(
                    self.cmp_at(index - 1, self, index),
                    Ordering::Less,
                    "updates not strictly sorted at {index}: ({:?}, {:?}, {:?}) then ({:?}, {:?}, {:?})",
                    self.key(index - 1),
                    self.val(index - 1),
                    self.time(index - 1),
                    self.key(index),
                    self.val(index),
                    self.time(index),
                );
            }
            assert!(
                !<U::Diff as crate::Semigroup>::is_zero(&U::Diff::into_owned(self.diff(index))),
                "zero diff kept at {index}: ({:?}, {:?}, {:?})",
                self.key(index),
                self.val(index),
                self.time(index),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Updates;
    use crate::update::Row;
    use proptest::prelude::*;

    type StrU = (String, u64, u64, i64);

    proptest! {
        /// A gather appends exactly the rows at the indices, in index order.
        #[test]
        fn gather_copies_the_selected_rows(
            rows in proptest::collection::vec(("[a-z]{0,12}", 0u64..9, 0u64..4, -3i64..4), 1..60),
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..80),
        ) {
            let rows: Vec<Row<StrU>> = rows;
            let source = Updates::<StrU>::from_rows(rows.iter());
            let indices: Vec<u32> = picks.iter().map(|pick| pick.index(rows.len()) as u32).collect();
            let mut gathered = Updates::<StrU>::default();
            gathered.extend_gather(source.view(), &indices);
            let expected: Vec<Row<StrU>> = indices.iter().map(|&i| rows[i as usize].clone()).collect();
            prop_assert_eq!(gathered.to_rows(), expected);
        }

        /// Reserving copies of a sample makes room for that many copies without reallocating.
        #[test]
        fn reserve_for_copies_holds_the_copies(
            rows in proptest::collection::vec(("[a-z]{0,12}", 0u64..9, 0u64..4, -3i64..4), 1..8),
            copies in 1usize..20,
        ) {
            let rows: Vec<Row<StrU>> = rows;
            let sample = Updates::<StrU>::from_rows(rows.iter());
            let mut reserved = Updates::<StrU>::default();
            reserved.reserve_for_copies(sample.view(), copies);
            let before = (reserved.vals.capacity(), reserved.times.capacity(), reserved.diffs.capacity());
            for _ in 0..copies {
                reserved.extend_from(sample.view(), 0..sample.len());
            }
            prop_assert_eq!(before, (reserved.vals.capacity(), reserved.times.capacity(), reserved.diffs.capacity()));
            prop_assert_eq!(reserved.len(), copies * rows.len());
        }
    }
}
