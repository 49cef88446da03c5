//! Blocks: a batch's columns as one run of 8-byte words, and back.
//!
//! A block is the unit a batch file stores and a block cache holds: the columns of a batch (or
//! of a run of its keys, built as a batch of its own) laid out by `columnar`'s indexed encoding,
//! one slice per leaf column, each aligned to 8 bytes. Reading a block copies nothing:
//! [`decode`] checks the layout and hands out a [`BatchView`] whose columns point into the
//! words, which a [`crate::BatchCursor`] reads like the columns of any batch.
//!
//! [`decode`] checks the layout: the slices match the column types, each level's offsets are
//! non-decreasing and end at the next level's length, the key fences are the ones the key
//! count calls for, and every pair index names a stored pair. With fixed-width keys, values,
//! times and diffs that keeps every later read of the view in bounds, whatever the words hold.
//! It does not look inside variable-width columns (a string column's own bounds are
//! `columnar`'s, which it does not check), nor re-check the order of keys, values and times,
//! which the encoded batch guaranteed: words must be vouched for by a checksum before they are
//! decoded, as a batch file's blocks are.

use crate::columns::{FENCED_KEYS_MIN, KEY_FENCE};
use crate::history::HistoriesView;
use crate::offsets::OffsetsView;
use crate::view::BatchView;
use columnar::bytes::indexed;
use columnar::{Borrow, BorrowedOf, Columnar, ContainerOf, FromBytes, Len};
use ripple_updates::Update;

/// A block's columns in encoding order: keys and key fences; the keys' value offsets
/// (`[len, uniform, stride]`, narrow ends, wide ends); values; the values' update offsets;
/// the histories (`[len, encoding]`, times, diffs, `u8` and `u16` pair indices).
type Encoded<'a, U> = (
    (
        BorrowedOf<'a, <U as Update>::Key>,
        BorrowedOf<'a, <U as Update>::Key>,
    ),
    (&'a [u64], &'a [u32], &'a [u64]),
    BorrowedOf<'a, <U as Update>::Val>,
    (&'a [u64], &'a [u32], &'a [u64]),
    (
        &'a [u64],
        BorrowedOf<'a, <U as Update>::Time>,
        BorrowedOf<'a, <U as Update>::Diff>,
        &'a [u8],
        &'a [u16],
    ),
);

/// Appends the block of `view`'s columns to `words`.
pub fn encode<U: Update>(view: BatchView<'_, U>, words: &mut Vec<u64>) {
    let (key_meta, key_narrow, key_wide) = view.key_ends.parts();
    let (val_meta, val_narrow, val_wide) = view.val_ends.parts();
    let (history_meta, times, diffs, narrow8, narrow16) = view.histories.parts();
    // The header words live here, the columns in the batch: one lifetime for all, this one.
    let encoded: Encoded<'_, U> = (
        (short::<U::Key>(view.keys), short::<U::Key>(view.key_fences)),
        (&key_meta[..], key_narrow, key_wide),
        short::<U::Val>(view.vals),
        (&val_meta[..], val_narrow, val_wide),
        (
            &history_meta[..],
            short::<U::Time>(times),
            short::<U::Diff>(diffs),
            narrow8,
            narrow16,
        ),
    );
    indexed::encode(words, &encoded);
}

/// `column` for a shorter borrow.
fn short<'b, 'a: 'b, C: Columnar>(column: BorrowedOf<'a, C>) -> BorrowedOf<'b, C> {
    <ContainerOf<C> as Borrow>::reborrow(column)
}

/// The columns a block holds, pointing into `words`; an error saying what is wrong when the
/// words are not a block of `U`'s columns (see the module documentation for what is checked).
pub fn decode<U: Update>(words: &[u64]) -> Result<BatchView<'_, U>, String> {
    indexed::validate::<Encoded<'_, U>>(words)?;
    view_of(words, true)
}

/// [`decode`] for words that [`decode`] accepted before (a cached block entered again): skips
/// the checks that allocate (the slices' layout) or read every offset and pair index, and
/// keeps those that cost a few comparisons.
pub fn decode_validated<U: Update>(words: &[u64]) -> Result<BatchView<'_, U>, String> {
    view_of(words, false)
}

/// The view of a block's words, its offsets and pair indices scanned if `scan`.
fn view_of<U: Update>(words: &[u64], scan: bool) -> Result<BatchView<'_, U>, String> {
    let store = indexed::DecodedStore::new(words);
    let (
        (keys, key_fences),
        (key_meta, key_narrow, key_wide),
        vals,
        (val_meta, val_narrow, val_wide),
        (history_meta, times, diffs, narrow8, narrow16),
    ) = <Encoded<'_, U> as FromBytes>::from_store(&store, &mut 0);
    let histories = HistoriesView::from_parts(history_meta, times, diffs, narrow8, narrow16, scan)?;
    let val_ends = OffsetsView::from_parts(val_meta, val_narrow, val_wide, histories.len(), scan)?;
    let key_ends = OffsetsView::from_parts(key_meta, key_narrow, key_wide, vals.len(), scan)?;
    if key_ends.len() != keys.len() || val_ends.len() != vals.len() {
        return Err(format!(
            "{} keys with {} value ranges, {} values with {} update ranges",
            keys.len(),
            key_ends.len(),
            vals.len(),
            val_ends.len()
        ));
    }
    let fences = if keys.len() >= FENCED_KEYS_MIN {
        keys.len().div_ceil(KEY_FENCE)
    } else {
        0
    };
    if key_fences.len() != fences {
        return Err(format!(
            "{} key fences for {} keys, expected {fences}",
            key_fences.len(),
            keys.len()
        ));
    }
    Ok(BatchView {
        keys,
        key_fences,
        key_ends,
        vals,
        val_ends,
        histories,
    })
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};
    use crate::{Batch, Builder, Description};
    use proptest::prelude::*;
    use ripple_updates::{Antichain, Product};

    type U = (String, u64, Product<u64, u32>, i64);
    type Fixed = (u64, u64, Product<u64, u32>, i64);

    /// A batch of `rows` (any order; consolidated here).
    fn batch_of(mut rows: Vec<(String, u64, Product<u64, u32>, i64)>) -> Batch<U> {
        rows.sort();
        rows.dedup_by(|b, a| {
            let same = (&a.0, a.1, a.2) == (&b.0, b.1, b.2);
            if same {
                a.3 += b.3;
            }
            same
        });
        rows.retain(|row| row.3 != 0);
        let mut builder = Builder::new();
        for (key, val, time, diff) in &rows {
            builder.push(key.as_bytes(), val, time, diff);
        }
        let upper = Antichain::from_elem(Product::new(u64::MAX, 0));
        builder.done(Description::new(
            Antichain::from_elem(Default::default()),
            upper,
        ))
    }

    fn rows() -> impl Strategy<Value = Vec<(String, u64, Product<u64, u32>, i64)>> {
        let key = prop_oneof![Just(String::new()), "[a-c]{1,3}", "[a-z]{0,12}"];
        let time = (0u64..4, 0u32..3).prop_map(|(outer, round)| Product::new(outer, round));
        proptest::collection::vec((key, 0u64..5, time, -2i64..3), 0..300)
    }

    /// Every read of a decoded block sees the batch: its rows in order.
    fn rows_of_view(words: &[u64]) -> Vec<(String, u64, Product<u64, u32>, i64)> {
        let mut rows = Vec::new();
        let mut cursor = decode::<U>(words).expect("a block of U").cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                cursor.map_times(|time, diff| {
                    rows.push((
                        String::from_utf8_lossy(key).into_owned(),
                        *val,
                        Product::new(*time.outer, *time.inner),
                        *diff,
                    ))
                });
                cursor.step_val();
            }
            cursor.step_key();
        }
        rows
    }

    proptest! {
        #[test]
        fn blocks_round_trip(rows in rows()) {
            let batch = batch_of(rows);
            let mut words = Vec::new();
            encode(batch.view().expect("in memory"), &mut words);
            prop_assert_eq!(rows_of_view(&words), batch.to_rows());
        }

        /// Words of fixed-width columns changed anywhere decode to an error or to a view that
        /// reads without a panic.
        #[test]
        fn damaged_blocks_never_panic(rows in rows(), damage in proptest::collection::vec((any::<usize>(), any::<u64>()), 1..4)) {
            let mut builder = Builder::<Fixed>::new();
            for (index, (_, val, time, diff)) in batch_of(rows).to_rows().into_iter().enumerate() {
                builder.push(&(index as u64), &val, &time, &diff);
            }
            let batch = builder.done(Description::new(
                Antichain::from_elem(Default::default()),
                Antichain::from_elem(Product::new(u64::MAX, 0)),
            ));
            let mut words = Vec::new();
            encode(batch.view().expect("in memory"), &mut words);
            for (at, value) in damage {
                let at = at % words.len();
                words[at] ^= value;
            }
            if let Ok(view) = decode::<Fixed>(&words) {
                let mut cursor = view.cursor();
                while let Some(_key) = cursor.get_key() {
                    while let Some(_val) = cursor.get_val() {
                        cursor.map_times(|_time, _diff| {});
                        cursor.step_val();
                    }
                    cursor.step_key();
                }
            }
        }
    }

    /// A big batch's block keeps its fences and its dictionary-encoded histories.
    #[test]
    fn fences_and_dictionaries_round_trip() {
        let rows = (0..20_000u64)
            .map(|i| (format!("{i:06}"), i % 7, Product::new(i % 3, 0), 1))
            .collect();
        let batch = batch_of(rows);
        let mut words = Vec::new();
        encode(batch.view().expect("in memory"), &mut words);
        let view = decode::<U>(&words).expect("a block of U");
        assert!(columnar::Len::len(&view.key_fences) > 0);
        assert_eq!(rows_of_view(&words), batch.to_rows());
        assert!(decode::<U>(&words[..words.len() / 2]).is_err());
        assert!(decode::<(u64, u64, u64, i64)>(&words).is_err());
    }
}
