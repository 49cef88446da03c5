//! Navigating one batch: key -> value -> `(time, diff)`, with borrowed items.
//!
//! A [`BatchCursor`] is three positions and the batch's borrowed columns: no allocation, and
//! every item it returns is a `Ref` pointing into the batch. It borrows the batch, so it cannot
//! outlive it; readers that must outlive a trace's changes hold [`crate::Batch`] handles.

use crate::batch::BatchData;
use columnar::{Borrow, BorrowedOf, Columnar, Index, Len, Ref};
use ripple_updates::Update;
use std::cmp::Ordering;

/// A position in one batch.
pub struct BatchCursor<'a, U: Update> {
    data: &'a BatchData<U>,
    keys: BorrowedOf<'a, U::Key>,
    vals: BorrowedOf<'a, U::Val>,
    key: usize,
    val: usize,
    /// One past the current key's last value.
    val_end: usize,
}

impl<U: Update> Clone for BatchCursor<'_, U> {
    fn clone(&self) -> Self {
        Self { ..*self }
    }
}

/// The first index in `[start, end)` at which `before` is false, given that `before` is true
/// on a prefix of the range and false after it. Steps 1, 2, 4, ... from `start`, then halves:
/// about `2 log d` probes to land `d` places away, so walking forward in small steps is cheap.
#[inline]
pub(crate) fn gallop(mut start: usize, end: usize, before: impl Fn(usize) -> bool) -> usize {
    if start >= end || !before(start) {
        return start;
    }
    // Invariant: before(start) holds.
    let mut step = 1;
    while start + step < end && before(start + step) {
        start += step;
        step <<= 1;
    }
    // The answer is in (start, min(start + step, end)].
    let mut step = step >> 1;
    while step > 0 {
        if start + step < end && before(start + step) {
            start += step;
        }
        step >>= 1;
    }
    start + 1
}

impl<'a, U: Update> BatchCursor<'a, U> {
    pub(crate) fn new(data: &'a BatchData<U>) -> Self {
        let mut cursor = Self {
            data,
            keys: data.keys.borrow(),
            vals: data.vals.borrow(),
            key: 0,
            val: 0,
            val_end: 0,
        };
        cursor.enter_key();
        cursor
    }

    /// Positions the value range at the current key's.
    #[inline(always)]
    fn enter_key(&mut self) {
        if self.key < self.keys.len() {
            self.val = self.data.key_ends.start(self.key);
            self.val_end = self.data.key_ends.end(self.key);
        } else {
            self.val = 0;
            self.val_end = 0;
        }
    }

    /// True while the cursor points at a key.
    #[inline(always)]
    pub fn key_valid(&self) -> bool {
        self.key < self.keys.len()
    }

    /// True while the cursor points at a value of the current key.
    #[inline(always)]
    pub fn val_valid(&self) -> bool {
        self.val < self.val_end
    }

    /// The current key. Only meaningful while `key_valid()`.
    #[inline(always)]
    pub fn key(&self) -> Ref<'a, U::Key> {
        self.keys.get(self.key)
    }

    /// The current value. Only meaningful while `val_valid()`.
    #[inline(always)]
    pub fn val(&self) -> Ref<'a, U::Val> {
        self.vals.get(self.val)
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
        self.key
    }

    /// Moves to key index `key` (at most the number of keys) and its first value.
    #[inline(always)]
    pub fn set_key_index(&mut self, key: usize) {
        debug_assert!(key <= self.keys.len());
        self.key = key;
        self.enter_key();
    }

    /// Calls `logic` with the time and diff of each update of the current value, in time order.
    #[inline]
    pub fn map_times(&self, mut logic: impl FnMut(Ref<'a, U::Time>, Ref<'a, U::Diff>)) {
        if !self.val_valid() {
            return;
        }
        let histories = &self.data.histories;
        for update in self.data.val_ends.start(self.val)..self.data.val_ends.end(self.val) {
            let (time, diff) = histories.get(update);
            logic(time, diff);
        }
    }

    /// Advances to the next key.
    #[inline]
    pub fn step_key(&mut self) {
        if self.key_valid() {
            self.key += 1;
            self.enter_key();
        }
    }

    /// Advances to the first key `>= key`, galloping from the current position. Never moves
    /// backwards.
    #[inline]
    pub fn seek_key(&mut self, key: Ref<'_, U::Key>) {
        let keys = self.keys;
        let target = U::Key::reborrow(key);
        self.key = gallop(self.key, keys.len(), |index| {
            U::Key::reborrow(keys.get(index)).cmp(&target) == Ordering::Less
        });
        self.enter_key();
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
        let vals = self.vals;
        let target = U::Val::reborrow(val);
        self.val = gallop(self.val, self.val_end, |index| {
            U::Val::reborrow(vals.get(index)).cmp(&target) == Ordering::Less
        });
    }

    /// Returns to the first key.
    pub fn rewind_keys(&mut self) {
        self.key = 0;
        self.enter_key();
    }

    /// Returns to the current key's first value.
    pub fn rewind_vals(&mut self) {
        if self.key_valid() {
            self.val = self.data.key_ends.start(self.key);
        }
    }

    /// The number of keys in the batch.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Key `index` of the batch.
    #[inline(always)]
    pub fn key_at(&self, index: usize) -> Ref<'a, U::Key> {
        self.keys.get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::gallop;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn gallop_finds_the_boundary(len in 0usize..300, boundary in 0usize..300, start in 0usize..300) {
            let boundary = boundary.min(len);
            let start = start.min(len);
            let found = gallop(start, len, |i| i < boundary);
            prop_assert_eq!(found, boundary.max(start));
        }
    }
}
