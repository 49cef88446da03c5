//! Batches: immutable, indexed updates for an interval of times.
//!
//! A batch is a trie in columns: sorted distinct keys; for each key, its sorted distinct values;
//! for each value, its updates sorted by time, consolidated. Offsets link the levels
//! ([`OffsetList`]) and the `(time, diff)` pairs are dictionary-encoded ([`Histories`]).
//!
//! [`Batch`] is a reference-counted handle: cloning it never copies data, and a reader holding
//! a clone keeps the columns alive however the trace that produced it moves on.

use crate::builder::Builder;
use crate::cursor::BatchCursor;
use crate::description::Description;
use crate::history::Histories;
use crate::offsets::OffsetList;
use columnar::{AsBytes, Borrow, Columnar, Container, ContainerOf, Index, Len, Push};
use ripple_updates::consolidate::consolidate_pairs;
use ripple_updates::update::Row;
use ripple_updates::{Antichain, Lattice, Semigroup, Time, Update};
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

    /// A cursor over this batch's updates, borrowing the batch.
    pub fn cursor(&self) -> BatchCursor<'_, U> {
        BatchCursor::new(self.data())
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

    /// This batch with every time `t` replaced by `map(t)` and its description's frontiers
    /// mapped the same way; updates whose time `map` drops (returns `None` for) are left out.
    /// `map` must be monotone in the partial order, so that the mapped description still
    /// bounds the mapped times (the feedback of an iteration, advancing times by a round).
    ///
    /// When `map` keeps every time and their order within each value (a round counter's
    /// increment does), only the stored `(time, diff)` pairs are rewritten and the other
    /// columns copied; otherwise each value's mapped updates are sorted and consolidated anew.
    pub fn map_times(&self, mut map: impl FnMut(&U::Time) -> Option<U::Time>) -> Batch<U> {
        let data = &*self.data;
        let mut frontier = |antichain: &Antichain<U::Time>| -> Antichain<U::Time> {
            antichain.iter().filter_map(&mut map).collect()
        };
        let description = Description::with_since(
            frontier(&data.description.lower),
            frontier(&data.description.upper),
            frontier(&data.description.since),
        );
        let histories = data
            .histories
            .map_times(&mut map)
            .filter(|histories| ordered_within_values(histories, &data.val_ends));
        match histories {
            Some(histories) => Self::from_data(BatchData {
                keys: exact_copy::<U::Key>(&data.keys),
                key_fences: exact_copy::<U::Key>(&data.key_fences),
                key_ends: data.key_ends.clone(),
                vals: exact_copy::<U::Val>(&data.vals),
                val_ends: data.val_ends.clone(),
                histories,
                description,
            }),
            None => self.map_times_rebuilding(map, description),
        }
    }

    /// [`Self::map_times`] for maps that drop or reorder times: value by value, the mapped
    /// updates sorted by time and consolidated.
    fn map_times_rebuilding(
        &self,
        mut map: impl FnMut(&U::Time) -> Option<U::Time>,
        description: Description<U::Time>,
    ) -> Batch<U> {
        let mut builder = Builder::<U>::new();
        let mut history: Vec<(U::Time, U::Diff)> = Vec::new();
        let mut cursor = self.cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                history.clear();
                cursor.map_times(|time, diff| {
                    if let Some(time) = map(&U::Time::into_owned(time)) {
                        history.push((time, U::Diff::into_owned(diff)));
                    }
                });
                consolidate_pairs(&mut history);
                if !history.is_empty() {
                    builder.push_history(key, val, &history);
                }
                cursor.step_val();
            }
            cursor.step_key();
        }
        builder.done(description)
    }

    /// All updates as owned rows, in order (tests and tools; not a hot path).
    pub fn to_rows(&self) -> Vec<Row<U>> {
        let mut rows = Vec::with_capacity(self.len());
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
        rows
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

/// Keys between fences: a search that has found its block among the fences ends with a short
/// gallop inside a few cache lines of keys.
pub(crate) const KEY_FENCE: usize = 32;

/// Batches with fewer keys have no fences: their key column stays in cache anyway, and
/// searching it directly costs less than a second column.
pub(crate) const FENCED_KEYS_MIN: usize = 4096;

/// True when the times of each value (the updates `val_ends.start(j)..val_ends.end(j)`) are
/// strictly increasing, as a batch keeps them.
fn ordered_within_values<T: Time, R: Semigroup>(
    histories: &Histories<T, R>,
    val_ends: &OffsetList,
) -> bool {
    (0..val_ends.len()).all(|val| {
        let (start, end) = (val_ends.start(val), val_ends.end(val));
        (start + 1..end).all(|update| histories.get(update - 1).0 < histories.get(update).0)
    })
}

/// The key fences of a batch with keys `keys` (see [`BatchData::key_fences`]).
pub(crate) fn fences_of<K: Columnar>(keys: &ContainerOf<K>) -> ContainerOf<K> {
    let keys = keys.borrow();
    let mut fences = ContainerOf::<K>::default();
    if keys.len() >= FENCED_KEYS_MIN {
        for key in (0..keys.len()).step_by(KEY_FENCE) {
            fences.push(keys.get(key));
        }
    }
    fences
}

/// Asks the processor to start loading the cache lines that hold item `index` of `container`
/// (of `len` items), so that a read of it a little later does not wait for memory. Each of the
/// container's slices is touched at `index` times its average width per item: exact for
/// fixed-width columns, a guess for variable-width bytes; a hint either way.
#[inline]
pub(crate) fn prefetch_item<C: Columnar>(container: &ContainerOf<C>, index: usize, len: usize) {
    if index >= len {
        return;
    }
    for (_align, bytes) in container.borrow().as_bytes() {
        let width = bytes.len() / len;
        if let Some(item) = bytes.get(width * index..) {
            prefetch(item.as_ptr());
        }
    }
}

/// A prefetch hint for the cache line holding `pointer` (nothing on other architectures).
#[inline(always)]
fn prefetch(pointer: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch neither reads nor writes memory from the program's point of view (it
    // cannot fault, whatever the address), and SSE, which it needs, is part of every x86_64
    // processor. Callers pass a pointer into a slice (or one past its end) all the same.
    // Exercised by `prefetch_tests` below and by every batched lookup into a fenced batch.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(pointer.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = pointer;
}

/// The payload bytes of a columnar container: its slices, as stored.
pub(crate) fn payload_bytes<C: Columnar>(container: &ContainerOf<C>) -> usize {
    container
        .borrow()
        .as_bytes()
        .map(|(_align, bytes)| bytes.len())
        .sum()
}

/// A copy of `container` whose allocations are exactly its contents: builders grow their
/// columns by doubling, and a batch lives long, so the slack is worth one copy (columns sized
/// exactly for a big batch in advance skip it; see `Builder::build`).
pub(crate) fn exact_copy<C: Columnar>(container: &ContainerOf<C>) -> ContainerOf<C> {
    let borrowed = container.borrow();
    let mut exact = <ContainerOf<C> as Container>::with_capacity_for(std::iter::once(borrowed));
    exact.extend_from_self(borrowed, 0..borrowed.len());
    exact
}

#[cfg(test)]
mod prefetch_tests {
    use super::prefetch_item;
    use columnar::{Columnar, ContainerOf, Push};

    fn column<C: Columnar>(items: &[C]) -> ContainerOf<C> {
        let mut column = ContainerOf::<C>::default();
        for item in items {
            column.push(item);
        }
        column
    }

    /// Prefetching any index of fixed- and variable-width columns, past the end and of empty
    /// columns included, is a hint that leaves the columns as they were.
    #[test]
    fn prefetches_any_index_and_changes_nothing() {
        let numbers: Vec<(u64, u32)> = (0..1000).map(|i| (i * 3, i as u32)).collect();
        let strings: Vec<String> = (0..300).map(|i| "x".repeat(i % 50)).collect();
        let (number_column, string_column) = (column(&numbers), column(&strings));
        let empty = column::<u64>(&[]);
        for index in [0, 1, 299, 300, 999, 1000, 5000] {
            prefetch_item::<(u64, u32)>(&number_column, index, numbers.len());
            prefetch_item::<String>(&string_column, index, strings.len());
            prefetch_item::<u64>(&empty, index, 0);
        }
        assert_eq!(number_column, column(&numbers));
        assert_eq!(string_column, column(&strings));
    }
}
