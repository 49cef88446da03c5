//! Batches: immutable, indexed updates for an interval of times.
//!
//! A batch is a trie in columns: sorted distinct keys; for each key, its sorted distinct values;
//! for each value, its updates sorted by time, consolidated. Offsets link the levels
//! ([`OffsetList`]) and the `(time, diff)` pairs are dictionary-encoded ([`Histories`]).
//!
//! [`Batch`] is a reference-counted handle: cloning it never copies data, and a reader holding
//! a clone keeps the columns alive however the trace that produced it moves on.

use crate::columns::{payload_bytes, FENCED_KEYS_MIN, KEY_FENCE};
use crate::description::Description;
use crate::history::{Histories, HistoriesView};
use crate::offsets::{OffsetList, OffsetsView};
use columnar::{Borrow, BorrowedOf, Columnar, ContainerOf, Index, Len};
use ripple_updates::{Lattice, Semigroup, Update};
use std::cmp::Ordering;
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

/// The columns of a batch, borrowed: what a [`BatchCursor`](crate::BatchCursor) reads.
pub struct BatchView<'a, U: Update> {
    pub(crate) keys: BorrowedOf<'a, U::Key>,
    pub(crate) key_fences: BorrowedOf<'a, U::Key>,
    pub(crate) key_ends: OffsetsView<'a>,
    pub(crate) vals: BorrowedOf<'a, U::Val>,
    pub(crate) val_ends: OffsetsView<'a>,
    pub(crate) histories: HistoriesView<'a, U::Time, U::Diff>,
}

impl<U: Update> Clone for BatchView<'_, U> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<U: Update> Copy for BatchView<'_, U> {}

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

/// A shared, immutable batch of updates.
pub struct Batch<U: Update> {
    data: Rc<BatchData<U>>,
}

impl<U: Update> Clone for Batch<U> {
    fn clone(&self) -> Self {
        Self {
            data: Rc::clone(&self.data),
        }
    }
}

impl<U: Update> Batch<U> {
    pub(crate) fn from_data(data: BatchData<U>) -> Self {
        let batch = Self {
            data: Rc::new(data),
        };
        if cfg!(debug_assertions) {
            batch.check_invariants();
        }
        batch
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

    /// The columns, for cursors.
    #[inline(always)]
    pub(crate) fn data(&self) -> &BatchData<U> {
        &self.data
    }

    /// The columns, borrowed: what cursors read (see [`BatchView`]).
    pub fn view(&self) -> BatchView<'_, U> {
        self.data.view()
    }

    /// The interval of times and the compaction frontier.
    pub fn description(&self) -> &Description<U::Time> {
        &self.data.description
    }

    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.data.histories.len()
    }

    /// True when there are no updates.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of distinct keys.
    pub fn key_count(&self) -> usize {
        self.data.keys.len()
    }

    /// The distinct keys, sorted: a column to probe other traces with.
    pub fn keys(&self) -> columnar::BorrowedOf<'_, U::Key> {
        use columnar::Borrow;
        self.data.keys.borrow()
    }

    /// The number of distinct `(key, val)` pairs.
    pub fn val_count(&self) -> usize {
        self.data.vals.len()
    }

    /// How many handles share these columns (this one included).
    pub fn handle_count(&self) -> usize {
        Rc::strong_count(&self.data)
    }

    /// Heap bytes held by the columns: their payload, plus the index vectors' capacity. Spare
    /// capacity of the payload columns is not counted (a big merge's key and value columns and
    /// big plain histories may keep up to a fifth; see `Builder::build`).
    pub fn heap_bytes(&self) -> usize {
        let data = &*self.data;
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
        let data = &*self.data;
        let (keys, vals) = (data.keys.borrow(), data.vals.borrow());
        assert_eq!(data.key_ends.len(), keys.len(), "one value range per key");
        assert_eq!(
            data.key_ends.last_end(),
            vals.len(),
            "value ranges cover values"
        );
        assert_eq!(
            data.val_ends.len(),
            vals.len(),
            "one update range per value"
        );
        assert_eq!(
            data.val_ends.last_end(),
            data.histories.len(),
            "update ranges cover updates"
        );
        let fences = data.key_fences.borrow();
        let expected_fences = if keys.len() >= FENCED_KEYS_MIN {
            keys.len().div_ceil(KEY_FENCE)
        } else {
            0
        };
        assert_eq!(
            fences.len(),
            expected_fences,
            "one fence per {KEY_FENCE} keys"
        );
        for fence in 0..fences.len() {
            assert!(
                fences.get(fence) == keys.get(fence * KEY_FENCE),
                "fence {fence} is not key {}",
                fence * KEY_FENCE
            );
        }
        let unadvanced = data.description.since == data.description.lower;
        for key in 0..keys.len() {
            if key > 0 {
                assert_eq!(
                    keys.get(key - 1).cmp(&keys.get(key)),
                    Ordering::Less,
                    "keys not strictly increasing at {key}"
                );
            }
            let (start, end) = (data.key_ends.start(key), data.key_ends.end(key));
            assert!(start < end, "key {key} ({:?}) has no values", keys.get(key));
            for val in start..end {
                if val > start {
                    assert_eq!(
                        vals.get(val - 1).cmp(&vals.get(val)),
                        Ordering::Less,
                        "values of key {:?} not strictly increasing",
                        keys.get(key)
                    );
                }
                let (first, last) = (data.val_ends.start(val), data.val_ends.end(val));
                assert!(first < last, "value {val} has no updates");
                for update in first..last {
                    let (time, diff) = data.histories.get(update);
                    if update > first {
                        let (previous, _) = data.histories.get(update - 1);
                        assert_eq!(
                            previous.cmp(&time),
                            Ordering::Less,
                            "times of ({:?}, {:?}) not strictly increasing",
                            keys.get(key),
                            vals.get(val)
                        );
                    }
                    assert!(
                        !U::Diff::into_owned(diff).is_zero(),
                        "zero diff kept for ({:?}, {:?}, {time:?})",
                        keys.get(key),
                        vals.get(val)
                    );
                    let time = U::Time::into_owned(time);
                    let mut advanced = time.clone();
                    advanced.advance_by(data.description.since.borrow());
                    assert!(
                        advanced == time,
                        "time {time:?} of ({:?}, {:?}) not advanced by since {:?}",
                        keys.get(key),
                        vals.get(val),
                        data.description.since
                    );
                    if unadvanced {
                        assert!(
                            data.description.lower.less_equal(&time)
                                && !data.description.upper.less_equal(&time),
                            "time {time:?} outside [{:?}, {:?})",
                            data.description.lower,
                            data.description.upper
                        );
                    }
                }
            }
        }
    }
}
