//! Sorting rows whose key is a primitive integer: a radix sort by the key's bytes, then a
//! comparison sort within each run of equal keys.
//!
//! Comparison sorts spend most of their time on the key: on rows shaped like bfs's (`u32` key
//! and value, `Product<u64, u32>` time, `i64` diff), distributing the rows by the key's varying
//! bytes (least significant first, each pass stable; bytes all keys share are skipped) and then
//! sorting each run of equal keys by value and time takes about half the time per row of a
//! pattern-defeating quicksort, for small batches and big ones alike (an earlier attempt that
//! spread *every* significant bit of the row over seven byte passes lost to the comparison
//! sort). The runs are short where keys are many and the batches small, the common case in
//! iterations: in bfs on a small graph it raised throughput a few percent, and on a big graph
//! it was within noise. In `batcher-bench` it raised the throughput of mixed input by a
//! quarter or more; input already sorted skips the passes but pays several percent for the
//! pass that finds it so, and the scratch copy shows slightly in the peak heap. See
//! docs/perf-notes.md, section "Radix sort".
//!
//! Rust has no specialisation, so the key types that qualify are found by [`TypeId`] at
//! compile time: each qualifying type gets its own instance of the sort, in which
//! the downcast from the generic key is a constant check that the optimiser removes.

use std::any::{Any, TypeId};
use std::cmp::Ordering;

/// Below this many rows an insertion sort is as fast and needs no scratch buffer.
const RADIX_MIN_ROWS: usize = 32;

/// Above this many bytes of rows the comparison sort stays: the radix sort's scratch copy
/// doubles the memory the rows occupy. 16 MiB is the merge batcher's largest form (eight 2 MiB
/// chunks, and at most an eighth of what the batcher and its trace hold), so every form of
/// plain rows takes the radix sort. A lower bound left the big forms of bfs on a big graph
/// (the load's, and the loop's join output on big steps) to the comparison sort, a third of
/// the arrange's time there; at this bound the load and the steps ran faster, with less peak
/// resident memory. See docs/perf-notes.md, section "Radix sort: size bound".
const RADIX_MAX_BYTES: usize = 16 << 20;

/// Sorts `rows` by `key`, then by `rest` within equal keys, with a radix sort by the key when
/// the key type is a primitive integer and the rows are neither very few nor very many bytes;
/// returns `false`, having left `rows` alone, otherwise. The order matches
/// `sort_unstable_by(|a, b| key(a).cmp(key(b)).then_with(|| rest(a, b)))`, up to the order of
/// rows that compare equal.
pub fn sort_by_integer_key<R: Clone, K: 'static>(
    rows: &mut Vec<R>,
    key: impl Fn(&R) -> &K,
    rest: impl Fn(&R, &R) -> Ordering,
) -> bool {
    if rows.len() < RADIX_MIN_ROWS || std::mem::size_of_val(rows.as_slice()) > RADIX_MAX_BYTES {
        return false;
    }
    // The image of each integer type is an unsigned integer in the same order: signed types
    // have their sign bit flipped, so negative keys come first.
    macro_rules! by_image {
        ($type:ty, $image:expr) => {
            if TypeId::of::<K>() == TypeId::of::<$type>() {
                let image = |row: &R| {
                    let key: &dyn Any = key(row);
                    let key = *key
                        .downcast_ref::<$type>()
                        .expect("the key's type was checked");
                    $image(key)
                };
                sort_by_key_image(rows, image, rest);
                return true;
            }
        };
    }
    by_image!(u8, u64::from);
    by_image!(u16, u64::from);
    by_image!(u32, u64::from);
    by_image!(u64, |key: u64| key);
    by_image!(usize, |key: usize| key as u64);
    by_image!(i32, |key: i32| u64::from((key as u32) ^ (1 << 31)));
    by_image!(i64, |key: i64| (key as u64) ^ (1 << 63));
    by_image!(isize, |key: isize| (key as u64) ^ (1 << 63));
    false
}

/// Sorts `rows` by `image` (an order-preserving `u64` of the key) with a stable LSD radix sort
/// over the bytes in which some images differ, then each run of equal images by `rest`.
fn sort_by_key_image<R: Clone>(
    rows: &mut Vec<R>,
    image: impl Fn(&R) -> u64,
    rest: impl Fn(&R, &R) -> Ordering,
) {
    let (mut any, mut all) = (0u64, u64::MAX);
    let (mut previous, mut ascending) = (0u64, true);
    for row in rows.iter() {
        let bits = image(row);
        any |= bits;
        all &= bits;
        ascending &= previous <= bits;
        previous = bits;
    }
    // Bits set in some images and clear in others: only their bytes need a pass. Keys already
    // in order need none (a comparison sort notices sorted input in one pass too).
    let varying = if ascending { 0 } else { any ^ all };
    let mut scratch: Vec<R> = Vec::new();
    for shift in (0..64).step_by(8) {
        if (varying >> shift) & 0xff == 0 {
            continue;
        }
        let digit = |row: &R| ((image(row) >> shift) & 0xff) as usize;
        let mut starts = [0usize; 256];
        for row in rows.iter() {
            starts[digit(row)] += 1;
        }
        let mut sum = 0;
        for start in starts.iter_mut() {
            let count = *start;
            *start = sum;
            sum += count;
        }
        if scratch.is_empty() {
            // Every slot is overwritten below; the copy only gives the vector its length
            // without `unsafe`.
            scratch.extend_from_slice(rows);
        }
        for row in rows.iter() {
            let slot = &mut starts[digit(row)];
            scratch[*slot] = row.clone();
            *slot += 1;
        }
        std::mem::swap(rows, &mut scratch);
    }
    for run in rows.chunk_by_mut(|a, b| image(a) == image(b)) {
        if run.len() > 1 {
            run.sort_unstable_by(&rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Sorts with the radix path when it applies, else as the fallback would; returns whether
    /// the radix path ran.
    fn sort<K: Ord + Clone + 'static>(rows: &mut Vec<(K, u8, i8)>) -> bool {
        sort_by_integer_key(rows, |row| &row.0, |a, b| a.1.cmp(&b.1))
    }

    fn check<K: Ord + Clone + std::fmt::Debug + 'static>(
        rows: Vec<(K, u8, i8)>,
    ) -> Result<(), TestCaseError> {
        let mut expected = rows.clone();
        expected.sort();
        let mut actual = rows;
        let radix = sort(&mut actual);
        // Rows equal in key and value may come in either order: compare them as sorted.
        actual.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)).then(a.2.cmp(&b.2)));
        prop_assert_eq!(&actual, &expected);
        prop_assert_eq!(radix, actual.len() >= RADIX_MIN_ROWS);
        Ok(())
    }

    proptest! {
        #[test]
        fn u32_keys_sort_as_a_comparison_sort(rows in proptest::collection::vec((any::<u32>(), 0u8..4, any::<i8>()), 0..300)) {
            check(rows)?;
        }

        /// Keys sharing their high bytes (passes skipped) and few distinct keys (long runs).
        #[test]
        fn narrow_u64_keys_sort(rows in proptest::collection::vec(((0u64..300).prop_map(|k| k + (7 << 40)), any::<u8>(), any::<i8>()), 0..300)) {
            check(rows)?;
        }

        /// Negative keys come first.
        #[test]
        fn signed_keys_sort(rows in proptest::collection::vec((any::<i64>(), 0u8..4, any::<i8>()), 0..300), small in proptest::collection::vec((-3i32..3, 0u8..4, any::<i8>()), 0..300)) {
            check(rows)?;
            check(small)?;
        }
    }

    /// Keys in order skip the radix passes; each key's rows must still be sorted.
    #[test]
    fn keys_in_order_still_sort_within_keys() {
        let mut rows: Vec<(u32, u8, i8)> =
            (0..200u32).map(|i| (i / 5, (7 * i % 5) as u8, 0)).collect();
        assert!(sort(&mut rows));
        let mut expected = rows.clone();
        expected.sort();
        assert_eq!(rows, expected);
    }

    #[test]
    fn other_key_types_are_left_alone() {
        let mut rows: Vec<((u32, u32), u8, i8)> = (0..100).map(|i| ((i % 7, i), 0, 0)).collect();
        let before = rows.clone();
        assert!(!sort_by_integer_key(
            &mut rows,
            |row| &row.0,
            |a, b| a.1.cmp(&b.1)
        ));
        assert_eq!(rows, before);
    }

    #[test]
    fn large_inputs_are_left_to_the_comparison_sort() {
        let rows = RADIX_MAX_BYTES / std::mem::size_of::<(u64, u8, i8)>() + 1;
        let mut rows: Vec<(u64, u8, i8)> = (0..rows as u64).rev().map(|i| (i, 0, 0)).collect();
        assert!(!sort(&mut rows));
        assert_eq!(rows[0].0, rows.len() as u64 - 1, "left as it was");
    }
}
