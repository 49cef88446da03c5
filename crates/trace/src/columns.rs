//! Column helpers shared by the batch's levels: key fences, prefetch hints, payload sizes and
//! exact copies of columnar containers.
//!
//! They sit apart from [`crate::batch`] so that the columns a batch is made of (offsets,
//! histories) and the readers of a batch (cursors, lookups) can use them without importing
//! the batch.

use columnar::{AsBytes, Borrow, BorrowedOf, Columnar, Container, ContainerOf, Index, Len, Push};

/// Keys between fences: a search that has found its block among the fences ends with a short
/// gallop inside a few cache lines of keys.
pub(crate) const KEY_FENCE: usize = 32;

/// Batches with fewer keys have no fences: their key column stays in cache anyway, and
/// searching it directly costs less than a second column.
pub(crate) const FENCED_KEYS_MIN: usize = 4096;

/// The key fences of a batch with keys `keys` (see `BatchData::key_fences`).
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

/// Asks the processor to start loading the cache lines that hold item `index` of the borrowed
/// column `column` (of `len` items), so that a read of it a little later does not wait for
/// memory. Each of the column's slices is touched at `index` times its average width per item:
/// exact for fixed-width columns, a guess for variable-width bytes; a hint either way.
#[inline]
pub(crate) fn prefetch_item<'a, C: Columnar>(column: BorrowedOf<'a, C>, index: usize, len: usize) {
    if index >= len {
        return;
    }
    for (_align, bytes) in column.as_bytes() {
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
    use columnar::{Borrow, Columnar, ContainerOf, Push};

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
            prefetch_item::<(u64, u32)>(number_column.borrow(), index, numbers.len());
            prefetch_item::<String>(string_column.borrow(), index, strings.len());
            prefetch_item::<u64>(empty.borrow(), index, 0);
        }
        assert_eq!(number_column, column(&numbers));
        assert_eq!(string_column, column(&strings));
    }
}
