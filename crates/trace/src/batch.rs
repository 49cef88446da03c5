//! Batches: immutable, indexed updates for an interval of times.
//!
//! A batch is a trie in columns: sorted distinct keys; for each key, its sorted distinct values;
//! for each value, its updates sorted by time, consolidated. Offsets link the levels
//! ([`OffsetList`]) and the `(time, diff)` pairs are dictionary-encoded ([`Histories`]).
//!
//! [`Batch`] is a reference-counted handle: cloning it never copies data, and a reader holding
//! a clone keeps the columns alive however the trace that produced it moves on.

use crate::columns::payload_bytes;
use crate::description::Description;
use crate::history::Histories;
use crate::offsets::OffsetList;
use crate::stored::{Pins, StoredBatch};
use crate::view::{check_view, BatchView};
use columnar::{Borrow, ContainerOf, Len};
use ripple_updates::{Antichain, PartialOrder, Update};
use std::rc::Rc;

/// The columns of a batch. Read through [`Batch`] and its cursors.
pub struct BatchData<U: Update> {
    pub(crate) keys: ContainerOf<U::Key>,
    /// Every [`KEY_FENCE`]-th key (keys `0`, `KEY_FENCE`, ...) of batches with at least
    /// [`FENCED_KEYS_MIN`] keys, empty otherwise: searches go through this small column first
    /// (see [`crate::cursor::BatchCursor::search_key`]).
    pub(crate) key_fences: ContainerOf<U::Key>,
    /// For key `i`, its values are `vals[key_ends.start(i)..key_ends.end(i)]`.
    pub(crate) key_ends: OffsetList,
    pub(crate) vals: ContainerOf<U::Val>,
    /// For value `j`, its updates are `histories[val_ends.start(j)..val_ends.end(j)]`.
    pub(crate) val_ends: OffsetList,
    pub(crate) histories: Histories<U::Time, U::Diff>,
    pub(crate) description: Description<U::Time>,
}

impl<U: Update> BatchData<U> {
    /// The columns, borrowed.
    #[inline]
    pub(crate) fn view(&self) -> BatchView<'_, U> {
        BatchView {
            keys: self.keys.borrow(),
            key_fences: self.key_fences.borrow(),
            key_ends: self.key_ends.view(),
            vals: self.vals.borrow(),
            val_ends: self.val_ends.view(),
            histories: self.histories.view(),
        }
    }
}

/// A shared, immutable batch of updates: its columns in memory, or in a batch file.
///
/// A handle to a stored batch carries its own *pins*: the blocks its cursors have read,
/// held until the handle drops, because every `Ref` a cursor hands out points into a block and
/// may live as long as the borrow of the handle. Cloning a stored batch's handle clones no
/// pins, so a reader's clone (a snapshot's) pins what that reader reads and no more, and the
/// spine's own handles pin nothing.
pub struct Batch<U: Update> {
    columns: Columns<U>,
}

enum Columns<U: Update> {
    Memory(Rc<BatchData<U>>),
    Stored(Rc<StoredBatch<U>>, Pins),
}

impl<U: Update> Clone for Batch<U> {
    fn clone(&self) -> Self {
        let columns = match &self.columns {
            Columns::Memory(data) => Columns::Memory(Rc::clone(data)),
            Columns::Stored(stored, _) => Columns::Stored(Rc::clone(stored), Pins::default()),
        };
        Self { columns }
    }
}

impl<U: Update> Batch<U> {
    pub(crate) fn from_data(data: BatchData<U>) -> Self {
        let batch = Self {
            columns: Columns::Memory(Rc::new(data)),
        };
        if cfg!(debug_assertions) {
            batch.check_invariants();
        }
        batch
    }

    /// The batch kept in `stored`'s file.
    pub(crate) fn from_stored(stored: StoredBatch<U>) -> Self {
        Self {
            columns: Columns::Stored(Rc::new(stored), Pins::default()),
        }
    }

    /// A batch with no updates, carrying only the progress `description` records.
    pub fn empty(description: Description<U::Time>) -> Self {
        Self::from_data(BatchData {
            keys: Default::default(),
            key_fences: Default::default(),
            key_ends: OffsetList::default(),
            vals: Default::default(),
            val_ends: OffsetList::default(),
            histories: Histories::default(),
            description,
        })
    }

    /// The same updates, described as covering `[lower, upper)` (which must contain this
    /// batch's interval), their times and `since` unchanged: what the union of this batch and
    /// an empty neighbour holds. `Err` gives the batch back when its columns are stored or
    /// shared with another handle.
    pub(crate) fn widened(
        mut self,
        lower: Antichain<U::Time>,
        upper: Antichain<U::Time>,
    ) -> Result<Self, Self> {
        let Columns::Memory(data) = &mut self.columns else {
            return Err(self);
        };
        let Some(data) = Rc::get_mut(data) else {
            return Err(self);
        };
        debug_assert!(PartialOrder::less_equal(&lower, &data.description.lower));
        debug_assert!(PartialOrder::less_equal(&data.description.upper, &upper));
        let since = std::mem::take(&mut data.description.since);
        data.description = Description::with_since(lower, upper, since);
        Ok(self)
    }

    /// The columns of an in-memory batch.
    #[inline(always)]
    pub(crate) fn memory(&self) -> Option<&BatchData<U>> {
        match &self.columns {
            Columns::Memory(data) => Some(data),
            Columns::Stored(..) => None,
        }
    }

    /// The file and this handle's pins of a stored batch.
    #[inline(always)]
    pub(crate) fn stored(&self) -> Option<(&StoredBatch<U>, &Pins)> {
        match &self.columns {
            Columns::Memory(_) => None,
            Columns::Stored(stored, pins) => Some((stored, pins)),
        }
    }

    /// This handle's pins, of a stored batch.
    pub(crate) fn pins_mut(&mut self) -> Option<&mut Pins> {
        match &mut self.columns {
            Columns::Memory(_) => None,
            Columns::Stored(_, pins) => Some(pins),
        }
    }

    /// True when the batch lives in a file rather than in memory.
    pub fn is_stored(&self) -> bool {
        self.stored().is_some()
    }

    /// The columns of an in-memory batch. Callers hold batches the engine built and never
    /// wrote out (a stored batch's columns are read through cursors, block by block).
    #[inline(always)]
    pub(crate) fn data(&self) -> &BatchData<U> {
        self.memory()
            .expect("an in-memory batch (stored batches are read through cursors)")
    }

    /// The columns of an in-memory batch, borrowed: what cursors read (see [`BatchView`]).
    /// `None` for a stored batch, whose columns are read block by block through a cursor.
    pub fn view(&self) -> Option<BatchView<'_, U>> {
        self.memory().map(BatchData::view)
    }

    /// The interval of times and the compaction frontier.
    pub fn description(&self) -> &Description<U::Time> {
        match &self.columns {
            Columns::Memory(data) => &data.description,
            Columns::Stored(stored, _) => stored.description(),
        }
    }

    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        match &self.columns {
            Columns::Memory(data) => data.histories.len(),
            Columns::Stored(stored, _) => stored.counts().updates,
        }
    }

    /// True when there are no updates.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of distinct keys.
    pub fn key_count(&self) -> usize {
        match &self.columns {
            Columns::Memory(data) => data.keys.len(),
            Columns::Stored(stored, _) => stored.counts().keys,
        }
    }

    /// The distinct keys of an in-memory batch, sorted: a column to probe other traces with.
    /// `None` for a stored batch (an arrangement over its budget sends those too), whose keys
    /// are in its blocks.
    pub fn keys(&self) -> Option<columnar::BorrowedOf<'_, U::Key>> {
        use columnar::Borrow;
        self.memory().map(|data| data.keys.borrow())
    }

    /// The number of distinct `(key, val)` pairs.
    pub fn val_count(&self) -> usize {
        match &self.columns {
            Columns::Memory(data) => data.vals.len(),
            Columns::Stored(stored, _) => stored.counts().vals,
        }
    }

    /// How many handles share these columns (this one included).
    pub fn handle_count(&self) -> usize {
        match &self.columns {
            Columns::Memory(data) => Rc::strong_count(data),
            Columns::Stored(stored, _) => Rc::strong_count(stored),
        }
    }

    /// Heap bytes held by the columns: their payload, plus the index vectors' capacity. Spare
    /// capacity of the payload columns is not counted (a big merge's key and value columns and
    /// big plain histories may keep up to a fifth; see `Builder::build`). A stored batch
    /// counts its file's index only; its blocks are the block cache's.
    pub fn heap_bytes(&self) -> usize {
        let data = match &self.columns {
            Columns::Memory(data) => data,
            Columns::Stored(stored, _) => return stored.index_bytes(),
        };
        payload_bytes::<U::Key>(&data.keys)
            + payload_bytes::<U::Key>(&data.key_fences)
            + data.key_ends.heap_bytes()
            + payload_bytes::<U::Val>(&data.vals)
            + data.val_ends.heap_bytes()
            + data.histories.heap_bytes()
    }

    /// Panics unless the batch is well formed: keys strictly increasing, each key with at
    /// least one value, values strictly increasing within a key, each value with at least one
    /// update, times strictly increasing within a value, no zero diff, every time inside the
    /// description (`lower <= t`, not `upper <= t`; only checked when `since == lower`, as
    /// advanced times may lie beyond `upper`), every time advanced by `since` (advancing it
    /// again changes nothing), and offsets covering every column exactly.
    pub fn check_invariants(&self) {
        match &self.columns {
            Columns::Memory(data) => check_view(data.view(), &data.description),
            Columns::Stored(stored, pins) => stored.check_invariants(pins),
        }
    }
}
