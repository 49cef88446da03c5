//! Building a batch from updates already sorted by `(key, val, time)` and consolidated.
//!
//! The merge batcher's sealed chains and the spine's merges both produce updates in that order,
//! so the builder never sorts: it appends, opening a new key or value when it changes.

use crate::batch::{exact_copy, Batch, BatchData};
use crate::description::Description;
use crate::history::HistoriesBuilder;
use crate::offsets::OffsetList;
use columnar::{Borrow, Columnar, ContainerOf, Index, Len, Push, Ref};
use ripple_updates::{Update, UpdatesView};

/// Appends sorted, consolidated updates; [`Builder::done`] turns them into a [`Batch`].
pub struct Builder<U: Update> {
    keys: ContainerOf<U::Key>,
    key_ends: OffsetList,
    vals: ContainerOf<U::Val>,
    val_ends: OffsetList,
    histories: HistoriesBuilder<U::Time, U::Diff>,
}

impl<U: Update> Default for Builder<U> {
    fn default() -> Self {
        Self {
            keys: Default::default(),
            key_ends: OffsetList::default(),
            vals: Default::default(),
            val_ends: OffsetList::default(),
            histories: HistoriesBuilder::default(),
        }
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
        if self.is_new_key(key) {
            self.close_key();
            self.keys.push(key);
            self.vals.push(val);
        } else if self.is_new_val(val) {
            self.val_ends.push(self.histories.len());
            self.vals.push(val);
        }
        self.histories.push(time, diff);
    }

    /// Appends the sorted, consolidated updates of `view` (a chunk of a sealed chain).
    pub fn push_view(&mut self, view: UpdatesView<'_, U>) {
        for index in 0..view.len() {
            let time = U::Time::into_owned(view.time(index));
            let diff = U::Diff::into_owned(view.diff(index));
            self.push(view.key(index), view.val(index), &time, &diff);
        }
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
        self.close_key();
        self.key_ends.shrink_to_fit();
        self.val_ends.shrink_to_fit();
        Batch::from_data(BatchData {
            keys: exact_copy::<U::Key>(self.keys),
            key_ends: self.key_ends,
            vals: exact_copy::<U::Val>(self.vals),
            val_ends: self.val_ends,
            histories: self.histories.finish(),
            description,
        })
    }
}
