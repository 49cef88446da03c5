//! Navigating several batches at once, as one: the cursor of a trace snapshot.
//!
//! [`TraceCursor`] keeps one [`BatchCursor`] per batch and the set of batches whose current key
//! (then value) is the least, so stepping touches only the batches at that key. Its batched
//! lookups live in [`crate::lookup`]. Times of a value
//! are reported batch by batch; readers accumulate them.

use crate::batch::Batch;
use crate::cursor::BatchCursor;
use columnar::{Columnar, Ref};
use ripple_updates::Update;
use std::cmp::Ordering;

/// A merged view of several batches' cursors.
pub struct TraceCursor<'a, U: Update> {
    pub(crate) cursors: Vec<BatchCursor<'a, U>>,
    /// Cursors whose current key is the least among valid ones.
    pub(crate) at_key: Vec<usize>,
    /// Of `at_key`, those whose current value is the least.
    at_val: Vec<usize>,
}

impl<'a, U: Update> TraceCursor<'a, U> {
    /// A cursor over `batches` (empty ones are skipped), at the least key.
    pub fn new(batches: &'a [Batch<U>]) -> Self {
        Self::with_cursors(batches, Batch::cursor)
    }

    /// A cursor over `batches` for batched lookups ([`crate::lookup`]) alone: its stored
    /// batches read no block until a lookup needs one (see [`Batch::lookup_cursor`]), so until
    /// the first lookup it may be at no key.
    pub fn for_lookups(batches: &'a [Batch<U>]) -> Self {
        Self::with_cursors(batches, Batch::lookup_cursor)
    }

    fn with_cursors(
        batches: &'a [Batch<U>],
        cursor: impl FnMut(&'a Batch<U>) -> BatchCursor<'a, U>,
    ) -> Self {
        // Sized up front: collected through the filter, the vector would grow step by step.
        let mut cursors = Vec::with_capacity(batches.len());
        cursors.extend(batches.iter().filter(|batch| !batch.is_empty()).map(cursor));
        // Sized once: at most every cursor is at the least key.
        let mut cursor = Self {
            at_key: Vec::with_capacity(cursors.len()),
            at_val: Vec::with_capacity(cursors.len()),
            cursors,
        };
        cursor.find_least_key();
        cursor
    }

    fn find_least_key(&mut self) {
        let cursors = self.cursors.iter().enumerate();
        collect_least(cursors.map(|(i, c)| (i, c.get_key())), &mut self.at_key);
        self.find_least_val();
    }

    pub(crate) fn find_least_val(&mut self) {
        if let [only] = self.at_key[..] {
            // One batch has the key (the common case): its value is the least, if any.
            self.at_val.clear();
            if self.cursors[only].val_valid() {
                self.at_val.push(only);
            }
            return;
        }
        let cursors = &self.cursors;
        let at_key = self.at_key.iter();
        collect_least(at_key.map(|&i| (i, cursors[i].get_val())), &mut self.at_val);
    }

    /// True while the cursor points at a key.
    #[inline]
    pub fn key_valid(&self) -> bool {
        !self.at_key.is_empty()
    }

    /// True while the cursor points at a value of the current key.
    #[inline]
    pub fn val_valid(&self) -> bool {
        !self.at_val.is_empty()
    }

    /// The current key, if any.
    #[inline]
    pub fn get_key(&self) -> Option<Ref<'a, U::Key>> {
        self.at_key.first().map(|&index| self.cursors[index].key())
    }

    /// The current value, if any.
    #[inline]
    pub fn get_val(&self) -> Option<Ref<'a, U::Val>> {
        self.at_val.first().map(|&index| self.cursors[index].val())
    }

    /// Calls `logic` with each `(time, diff)` of the current value, batch by batch.
    #[inline]
    pub fn map_times(&self, mut logic: impl FnMut(Ref<'a, U::Time>, Ref<'a, U::Diff>)) {
        for &index in &self.at_val {
            self.cursors[index].map_times(&mut logic);
        }
    }

    /// Calls `logic` with each `(value, time, diff)` of the current key, batch by batch: each
    /// batch's values in order, values not merged across batches. Leaves the current key's
    /// values consumed (reposition the cursor, as a lookup's next hit does, before reading on).
    // Out of line: LLVM's choice to inline it into the reduce operator flips with unrelated
    // edits there, and inlined it ran slightly more instructions (see docs/perf-notes.md,
    // section "Trace cursor: map_key_updates out of line").
    #[inline(never)]
    pub fn map_key_updates(
        &mut self,
        mut logic: impl FnMut(Ref<'a, U::Val>, Ref<'a, U::Time>, Ref<'a, U::Diff>),
    ) {
        for &index in &self.at_key {
            let cursor = &mut self.cursors[index];
            while let Some(val) = cursor.get_val() {
                cursor.map_times(|time, diff| logic(val, time, diff));
                cursor.step_val();
            }
        }
        self.at_val.clear();
    }

    /// Advances to the next key.
    pub fn step_key(&mut self) {
        for &index in &self.at_key {
            self.cursors[index].step_key();
        }
        self.find_least_key();
    }

    /// Advances to the first key `>= key`; never moves backwards.
    pub fn seek_key(&mut self, key: Ref<'_, U::Key>) {
        let key = U::Key::reborrow(key);
        for cursor in &mut self.cursors {
            cursor.seek_key(key);
        }
        self.find_least_key();
    }

    /// Advances to the next value of the current key.
    pub fn step_val(&mut self) {
        for &index in &self.at_val {
            self.cursors[index].step_val();
        }
        self.find_least_val();
    }

    /// Advances to the first value `>= val` of the current key.
    pub fn seek_val(&mut self, val: Ref<'_, U::Val>) {
        let val = U::Val::reborrow(val);
        for &index in &self.at_key {
            self.cursors[index].seek_val(val);
        }
        self.find_least_val();
    }

    /// Returns to the first key.
    pub fn rewind_keys(&mut self) {
        for cursor in &mut self.cursors {
            cursor.rewind_keys();
        }
        self.find_least_key();
    }

    /// Returns to the current key's first value.
    pub fn rewind_vals(&mut self) {
        for &index in &self.at_key {
            self.cursors[index].rewind_vals();
        }
        self.find_least_val();
    }
}

/// Replaces `least` with the indices of the least present items (all of them, on ties).
fn collect_least<T: Ord>(items: impl Iterator<Item = (usize, Option<T>)>, least: &mut Vec<usize>) {
    least.clear();
    let mut smallest: Option<T> = None;
    for (index, item) in items {
        let Some(item) = item else {
            continue;
        };
        let ordering = match &smallest {
            None => Ordering::Less,
            Some(smallest) => item.cmp(smallest),
        };
        match ordering {
            Ordering::Less => {
                smallest = Some(item);
                least.clear();
                least.push(index);
            }
            Ordering::Equal => least.push(index),
            Ordering::Greater => {}
        }
    }
}
