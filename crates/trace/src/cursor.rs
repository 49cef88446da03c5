//! Navigating one batch: key -> value -> `(time, diff)`, with borrowed items.
//!
//! A [`BatchCursor`] is three positions and the batch's borrowed columns: no allocation, and
//! every item it returns is a `Ref` pointing into the batch. It borrows the batch, so it cannot
//! outlive it; readers that must outlive a trace's changes hold [`crate::Batch`] handles.
//!
//! In a stored batch the columns in view are one block's: stepping past a block's last key
//! enters the next block, and seeks go to the block a key can be in by the file's index. Key
//! and value positions are the block's; [`BatchCursor::key_index`] is the key's index in the
//! whole batch, as in memory.

use crate::batch::Batch;
use crate::columns::{prefetch_item, KEY_FENCE};
use crate::history::HistoriesView;
use crate::stored::{Pins, Reads, StoredBatch};
use crate::view::BatchView;
use columnar::{Columnar, Index, Len, Ref};
use ripple_updates::search::gallop;
use ripple_updates::update::Row;
use ripple_updates::Update;
use std::cmp::Ordering;

/// A position in one batch.
pub struct BatchCursor<'a, U: Update> {
    view: BatchView<'a, U>,
    key: usize,
    val: usize,
    /// One past the current key's last value.
    val_end: usize,
    /// The index in the batch of the view's first key (0 in memory).
    base: usize,
    /// Of a stored batch: its file, the reading handle's pins and the block in view.
    blocks: Option<Blocks<'a, U>>,
}

/// The block "in view" of a lookup cursor that has read none (see [`Batch::lookup_cursor`]):
/// the block after it is block 0.
const UNOPENED: usize = usize::MAX;

/// Where a cursor of a stored batch reads its blocks.
struct Blocks<'a, U: Update> {
    stored: &'a StoredBatch<U>,
    pins: &'a Pins,
    /// The block in view ([`UNOPENED`] before the first).
    block: usize,
    /// Whether the blocks read are cached.
    reads: Reads,
}

impl<U: Update> Clone for Blocks<'_, U> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<U: Update> Copy for Blocks<'_, U> {}

impl<U: Update> Batch<U> {
    /// A cursor over this batch's updates, borrowing the batch (a stored batch's first block
    /// is read, and pinned in this handle).
    pub fn cursor(&self) -> BatchCursor<'_, U> {
        self.cursor_at(0)
    }

    /// A cursor for batched lookups ([`crate::lookup`]), which position it themselves: in a
    /// stored batch it reads no block until a lookup sends it to one, and until then it is
    /// at no key. In memory, the same as [`Batch::cursor`].
    pub fn lookup_cursor(&self) -> BatchCursor<'_, U> {
        self.unopened_cursor(Reads::Cached)
    }

    /// [`Batch::lookup_cursor`], its blocks read as `reads` says.
    fn unopened_cursor(&self, reads: Reads) -> BatchCursor<'_, U> {
        match self.stored() {
            None => BatchCursor::new(self.data().view()),
            Some((stored, pins)) => {
                let mut cursor = BatchCursor::new(stored.empty_view());
                cursor.blocks = Some(Blocks {
                    stored,
                    pins,
                    block: UNOPENED,
                    reads,
                });
                cursor
            }
        }
    }

    /// A cursor at key index `key` (at most the number of keys): in a stored batch, reads the
    /// block holding it and no other.
    pub fn cursor_at(&self, key: usize) -> BatchCursor<'_, U> {
        // A lookup cursor of a stored batch has no block in view: the key's is entered.
        let mut cursor = self.lookup_cursor();
        cursor.set_key_index(key);
        cursor
    }

    /// [`Batch::cursor_at`] for a reader that reads each block once, in order (a merge, a
    /// scan): in a stored batch, the blocks it reads are not cached (see `Reads::Passing`).
    pub fn scan_cursor_at(&self, key: usize) -> BatchCursor<'_, U> {
        let mut cursor = self.unopened_cursor(Reads::Passing);
        cursor.set_key_index(key);
        cursor
    }

    /// All updates as owned rows, in order (tests and tools; not a hot path).
    pub fn to_rows(&self) -> Vec<Row<U>> {
        let mut rows = Vec::with_capacity(self.len());
        self.extend_rows(&mut rows);
        rows
    }

    /// Appends all updates to `rows`, as owned rows, in order.
    pub(crate) fn extend_rows(&self, rows: &mut Vec<Row<U>>) {
        let mut cursor = self.cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                cursor.map_times(|time, diff| {
                    rows.push((
                        U::Key::into_owned(key),
                        U::Val::into_owned(val),
                        U::Time::into_owned(time),
                        U::Diff::into_owned(diff),
                    ))
                });
                cursor.step_val();
            }
            cursor.step_key();
        }
    }
}

impl<'a, U: Update> BatchView<'a, U> {
    /// A cursor over the columns, borrowing them.
    pub fn cursor(self) -> BatchCursor<'a, U> {
        BatchCursor::new(self)
    }

    /// The number of updates.
    pub fn len(&self) -> usize {
        self.histories.len()
    }

    /// True when there are no updates.
    pub fn is_empty(&self) -> bool {
        self.histories.is_empty()
    }
}

impl<U: Update> Clone for BatchCursor<'_, U> {
    fn clone(&self) -> Self {
        Self {
            blocks: self.blocks,
            ..*self
        }
    }
}

impl<'a, U: Update> BatchCursor<'a, U> {
    pub(crate) fn new(view: BatchView<'a, U>) -> Self {
        let mut cursor = Self {
            view,
            key: 0,
            val: 0,
            val_end: 0,
            base: 0,
            blocks: None,
        };
        cursor.enter_key();
        cursor
    }

    /// Puts block `block` of a stored batch in view, at key `key` of the block.
    #[cold]
    #[inline(never)]
    fn enter_block(&mut self, block: usize, key: usize) {
        let blocks = self.blocks.as_mut().expect("a stored batch's cursor");
        blocks.block = block;
        self.view = blocks.stored.view(blocks.pins, block, blocks.reads);
        self.base = blocks.stored.index().key_start(block);
        self.key = key;
    }

    /// In a stored batch, at the end of a block that is not the last: enters the next block.
    #[inline(always)]
    fn cross_block(&mut self) {
        if let Some(blocks) = &self.blocks {
            let next = blocks.block.wrapping_add(1);
            if self.key >= self.view.keys.len() && next < blocks.stored.block_count() {
                self.enter_block(next, 0);
            }
        }
    }

    /// Positions the value range at the current key's.
    #[inline(always)]
    fn enter_key(&mut self) {
        if self.key < self.view.keys.len() {
            self.val = self.view.key_ends.start(self.key);
            self.val_end = self.view.key_ends.end(self.key);
        } else {
            self.val = 0;
            self.val_end = 0;
        }
    }

    /// True while the cursor points at a key.
    #[inline(always)]
    pub fn key_valid(&self) -> bool {
        self.key < self.view.keys.len()
    }

    /// True while the cursor points at a value of the current key.
    #[inline(always)]
    pub fn val_valid(&self) -> bool {
        self.val < self.val_end
    }

    /// The current key. Only meaningful while `key_valid()`.
    #[inline(always)]
    pub fn key(&self) -> Ref<'a, U::Key> {
        self.view.keys.get(self.key)
    }

    /// The current value. Only meaningful while `val_valid()`.
    #[inline(always)]
    pub fn val(&self) -> Ref<'a, U::Val> {
        self.view.vals.get(self.val)
    }

    /// The current key, if any.
    #[inline(always)]
    pub fn get_key(&self) -> Option<Ref<'a, U::Key>> {
        self.key_valid().then(|| self.key())
    }

    /// The current value, if any.
    #[inline(always)]
    pub fn get_val(&self) -> Option<Ref<'a, U::Val>> {
        self.val_valid().then(|| self.val())
    }

    /// The index of the current key in the batch.
    #[inline(always)]
    pub fn key_index(&self) -> usize {
        self.base + self.key
    }

    /// Of a batch in memory, the view the cursor reads and the index of its current key in it
    /// (none for a stored batch, whose view is one block).
    #[inline(always)]
    pub(crate) fn memory_view(&self) -> Option<(BatchView<'a, U>, usize)> {
        self.blocks.is_none().then_some((self.view, self.key))
    }

    /// Moves to key index `key` of the batch (at most the number of keys) and its first value.
    #[inline(always)]
    pub fn set_key_index(&mut self, key: usize) {
        let local = key.wrapping_sub(self.base);
        if local >= self.view.keys.len() && self.blocks.is_some() {
            self.enter_key_of_batch(key);
        } else {
            debug_assert!(local <= self.view.keys.len());
            self.key = local;
        }
        self.enter_key();
    }

    /// [`Self::set_key_index`] for a key outside the block in view.
    #[cold]
    #[inline(never)]
    fn enter_key_of_batch(&mut self, key: usize) {
        let stored = self.blocks.expect("a stored batch's cursor").stored;
        debug_assert!(key <= stored.counts().keys);
        let block = stored.block_holding(key);
        self.enter_block(block, key - stored.index().key_start(block));
    }

    /// Calls `logic` with the time and diff of each update of the current value, in time order.
    #[inline]
    pub fn map_times(&self, logic: impl FnMut(Ref<'a, U::Time>, Ref<'a, U::Diff>)) {
        let (histories, range) = self.val_updates();
        histories.for_each_in(range, logic);
    }

    /// The histories of the cursor's batch and the range of the current value's updates in
    /// them (empty past the key's last value).
    #[inline]
    pub(crate) fn val_updates(
        &self,
    ) -> (&HistoriesView<'a, U::Time, U::Diff>, std::ops::Range<usize>) {
        if !self.val_valid() {
            return (&self.view.histories, 0..0);
        }
        let range = self.view.val_ends.start(self.val)..self.view.val_ends.end(self.val);
        (&self.view.histories, range)
    }

    /// Advances to the next key.
    #[inline]
    pub fn step_key(&mut self) {
        if self.key_valid() {
            self.key += 1;
            self.cross_block();
            self.enter_key();
        }
    }

    /// Advances to the first key `>= key`, galloping from the current position. Never moves
    /// backwards.
    #[inline]
    pub fn seek_key(&mut self, key: Ref<'_, U::Key>) {
        self.key = self.search_key(self.key, key);
        if self.key >= self.view.keys.len() && self.blocks.is_some() {
            self.seek_block(key);
        }
        self.enter_key();
    }

    /// In a stored batch, positions the cursor at the first key `>= key` of block `block`,
    /// whose key range must hold `key` (first `<= key <=` last, as the file's index says): the
    /// cursor then stops inside the block, as [`Self::seek_key`] would.
    pub(crate) fn seek_in_block(&mut self, block: usize, key: Ref<'_, U::Key>) {
        debug_assert!(self.blocks.is_some(), "a stored batch's cursor");
        self.enter_block(block, 0);
        self.key = self.search_key(0, key);
        debug_assert!(
            self.key < self.view.keys.len(),
            "seek_in_block past its block: the key is beyond the block's range"
        );
        self.enter_key();
    }

    /// [`Self::seek_key`] past the block in view: enters the block the key can be in, by the
    /// file's index, and searches it; at the end of the last block if none.
    #[cold]
    #[inline(never)]
    fn seek_block(&mut self, key: Ref<'_, U::Key>) {
        let blocks = self.blocks.expect("a stored batch's cursor");
        let count = blocks.stored.block_count();
        let next = blocks.block.wrapping_add(1);
        let block = blocks.stored.index().block_not_before(next, key);
        if block < count {
            self.enter_block(block, 0);
            self.key = self.search_key(0, key);
        } else if next < count {
            self.enter_block(count - 1, 0);
            self.key = self.view.keys.len();
        }
    }

    /// The first key index at or after `from` whose key is `>= target` (the key count if
    /// none). In a big batch the search gallops over the key fences first, which stay in
    /// cache, and then inside one block of 32 keys: a far target costs a few
    /// cache lines of keys instead of a miss at every step of a gallop over the whole column.
    #[inline]
    pub fn search_key(&self, from: usize, target: Ref<'_, U::Key>) -> usize {
        let (keys, fences) = (self.view.keys, self.view.key_fences);
        let target = U::Key::reborrow(target);
        let before = |index: usize| U::Key::reborrow(keys.get(index)) < target;
        if fences.is_empty() {
            return gallop(from, keys.len(), before);
        }
        debug_assert!(from <= keys.len());
        // Fence `j` is key `j * KEY_FENCE`. The first fence after `from`'s block that is not
        // before the target bounds the answer from above; the fence before it, from below.
        let next = gallop(from / KEY_FENCE + 1, fences.len(), |fence| {
            U::Key::reborrow(fences.get(fence)) < target
        });
        let low = from.max((next - 1) * KEY_FENCE);
        let high = (next * KEY_FENCE).min(keys.len());
        gallop(low, high, before)
    }

    /// Advances to the next value of the current key.
    #[inline]
    pub fn step_val(&mut self) {
        if self.val_valid() {
            self.val += 1;
        }
    }

    /// Advances to the first value `>= val` of the current key.
    #[inline]
    pub fn seek_val(&mut self, val: Ref<'_, U::Val>) {
        let vals = self.view.vals;
        let target = U::Val::reborrow(val);
        self.val = gallop(self.val, self.val_end, |index| {
            U::Val::reborrow(vals.get(index)).cmp(&target) == Ordering::Less
        });
    }

    /// Returns to the first key.
    pub fn rewind_keys(&mut self) {
        if self.blocks.is_some_and(|blocks| blocks.block != 0) {
            self.enter_block(0, 0);
        }
        self.key = 0;
        self.enter_key();
    }

    /// Returns to the current key's first value.
    pub fn rewind_vals(&mut self) {
        if self.key_valid() {
            self.val = self.view.key_ends.start(self.key);
        }
    }

    /// The number of key fences (0 for a batch too small to have them).
    pub(crate) fn fence_count(&self) -> usize {
        self.view.key_fences.len()
    }

    /// Fence `index`: key `index * KEY_FENCE`.
    #[inline(always)]
    pub(crate) fn fence_at(&self, index: usize) -> Ref<'a, U::Key> {
        self.view.key_fences.get(index)
    }

    /// Prefetches part of what reading key `key` will touch, for a read a little later (see
    /// [`crate::lookup::next_hit_key`]). The trie's levels depend on one another (a key's
    /// offset says where its values are, a value's where its updates are), so a prefetch of
    /// all of it at once would wait on the first two misses; instead, called for the same key
    /// with `stage` 0, 1 and 2 in turn, some keys apart, each stage reads only what an earlier
    /// one brought in: 0 the key's offset, 1 its first value and that value's offset, 2 the
    /// value's first update.
    #[inline]
    pub(crate) fn prefetch_key(&self, key: usize, stage: usize) {
        let data = &self.view;
        match stage {
            0 => data.key_ends.prefetch_start(key),
            1 => {
                let val = data.key_ends.start(key);
                prefetch_item::<U::Val>(data.vals, val, data.val_ends.len());
                data.val_ends.prefetch_start(val);
            }
            _ => {
                let val = data.key_ends.start(key);
                if val < data.val_ends.len() {
                    data.histories.prefetch(data.val_ends.start(val));
                }
            }
        }
    }

    /// The number of keys in the columns in view (the batch's, in memory; the block's, in a
    /// stored batch).
    pub fn key_count(&self) -> usize {
        self.view.keys.len()
    }

    /// The stored batch this cursor reads, if it is one.
    pub(crate) fn stored(&self) -> Option<&'a StoredBatch<U>> {
        self.blocks.map(|blocks| blocks.stored)
    }

    /// The columns of block `block` of the stored batch this cursor reads, pinned in its
    /// handle (the cursor's position does not change).
    pub(crate) fn block_view(&self, block: usize) -> BatchView<'a, U> {
        let blocks = self.blocks.expect("a stored batch's cursor");
        blocks.stored.view(blocks.pins, block, blocks.reads)
    }

    /// Key `index` of the columns in view.
    #[inline(always)]
    pub fn key_at(&self, index: usize) -> Ref<'a, U::Key> {
        self.view.keys.get(index)
    }
}

#[cfg(test)]
mod tests {
    use crate::columns::{FENCED_KEYS_MIN, KEY_FENCE};
    use crate::{Batch, Builder, Description};
    use proptest::prelude::*;
    use ripple_updates::Antichain;

    /// A batch of the keys `keys` (sorted, distinct), one update each.
    fn batch_of(keys: &[u64]) -> Batch<(u64, u64, u64, i64)> {
        let mut builder = Builder::new();
        for key in keys {
            builder.push(key, &0, &0, &1);
        }
        builder.done(Description::new(
            Antichain::from_elem(0),
            Antichain::from_elem(1),
        ))
    }

    proptest! {
        /// Through the fences of a big batch or directly in a small one, a key search finds
        /// the first key at or after its start that is not below the target.
        #[test]
        fn key_search_finds_the_first_key_not_below(
            len in prop_oneof![0usize..100, FENCED_KEYS_MIN..FENCED_KEYS_MIN + 3 * KEY_FENCE],
            gaps in proptest::collection::vec(1u64..4, 1..8),
            searches in proptest::collection::vec((0usize..5000, 0u64..20_000), 1..40),
        ) {
            let keys: Vec<u64> = (0..len as u64).map(|i| i * 3 + gaps[i as usize % gaps.len()]).collect();
            let batch = batch_of(&keys);
            let cursor = batch.cursor();
            for (from, target) in searches {
                let from = from.min(len);
                let expected = from + keys[from..].partition_point(|key| *key < target);
                prop_assert_eq!(cursor.search_key(from, &target), expected, "from {} to {}", from, target);
            }
        }
    }

    /// Batches of at least `FENCED_KEYS_MIN` keys carry fences (checked in debug builds by
    /// `check_invariants`), smaller ones none.
    #[test]
    fn only_big_batches_have_fences() {
        let small: Vec<u64> = (0..FENCED_KEYS_MIN as u64 - 1).collect();
        assert!(batch_of(&small).data().key_fences.is_empty());
        let big: Vec<u64> = (0..FENCED_KEYS_MIN as u64 + 1).collect();
        let big = batch_of(&big);
        big.check_invariants();
        assert_eq!(big.data().key_fences.len(), FENCED_KEYS_MIN / KEY_FENCE + 1);
    }
}
