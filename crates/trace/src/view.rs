//! A batch's columns, borrowed: what cursors read, whether the columns live in a batch's
//! vectors or in a block read from a file.

use crate::columns::{FENCED_KEYS_MIN, KEY_FENCE};
use crate::description::Description;
use crate::history::HistoriesView;
use crate::offsets::OffsetsView;
use columnar::{BorrowedOf, Columnar, Index, Len};
use ripple_updates::{Lattice, Semigroup, Update};
use std::cmp::Ordering;

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

/// [`Batch::check_invariants`] for the columns `view` of a batch (or of a block of one)
/// described by `description`.
pub(crate) fn check_view<U: Update>(view: BatchView<'_, U>, description: &Description<U::Time>) {
    let (keys, vals) = (view.keys, view.vals);
    assert_eq!(view.key_ends.len(), keys.len(), "one value range per key");
    assert_eq!(
        view.key_ends.last_end(),
        vals.len(),
        "value ranges cover values"
    );
    assert_eq!(
        view.val_ends.len(),
        vals.len(),
        "one update range per value"
    );
    assert_eq!(
        view.val_ends.last_end(),
        view.histories.len(),
        "update ranges cover updates"
    );
    let fences = view.key_fences;
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
    let unadvanced = description.since == description.lower;
    for key in 0..keys.len() {
        if key > 0 {
            assert_eq!(
                keys.get(key - 1).cmp(&keys.get(key)),
                Ordering::Less,
                "keys not strictly increasing at {key}"
            );
        }
        let (start, end) = (view.key_ends.start(key), view.key_ends.end(key));
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
            let (first, last) = (view.val_ends.start(val), view.val_ends.end(val));
            assert!(first < last, "value {val} has no updates");
            for update in first..last {
                let (time, diff) = view.histories.get(update);
                if update > first {
                    let (previous, _) = view.histories.get(update - 1);
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
                advanced.advance_by(description.since.borrow());
                assert!(
                    advanced == time,
                    "time {time:?} of ({:?}, {:?}) not advanced by since {:?}",
                    keys.get(key),
                    vals.get(val),
                    description.since
                );
                if unadvanced {
                    assert!(
                        description.lower.less_equal(&time) && !description.upper.less_equal(&time),
                        "time {time:?} outside [{:?}, {:?})",
                        description.lower,
                        description.upper
                    );
                }
            }
        }
    }
}
