//! A consistent view of a trace: its batches at one moment, held by reference count.
//!
//! A [`TraceSnapshot`] owns handles to the batches, so it stays valid however the trace merges
//! and compacts afterwards: the old batches live until the last snapshot holding them drops.
//! Cursors borrow the snapshot.

use crate::batch::Batch;
use crate::lookup::{LookupScratch, ValCursor};
use crate::trace_cursor::TraceCursor;
use columnar::Columnar;
use ripple_updates::update::Row;
use ripple_updates::{Antichain, PartialOrder, Semigroup, Update};

/// The batches of a trace, oldest first, with contiguous descriptions.
pub struct TraceSnapshot<U: Update> {
    batches: Vec<Batch<U>>,
}

impl<U: Update> Clone for TraceSnapshot<U> {
    fn clone(&self) -> Self {
        Self {
            batches: self.batches.clone(),
        }
    }
}

impl<U: Update> TraceSnapshot<U> {
    /// A snapshot of `batches`, which must be oldest first with contiguous descriptions.
    pub fn new(batches: Vec<Batch<U>>) -> Self {
        for pair in batches.windows(2) {
            assert_eq!(
                pair[0].description().upper,
                pair[1].description().lower,
                "batches of a snapshot must be contiguous"
            );
        }
        Self { batches }
    }

    /// The batches, oldest first.
    pub fn batches(&self) -> &[Batch<U>] {
        &self.batches
    }

    /// True when some batch is stored (its reader pins blocks).
    pub fn has_stored(&self) -> bool {
        self.batches.iter().any(Batch::is_stored)
    }

    /// Lets go of this snapshot's pins of stored blocks. A reader that has finished with the
    /// blocks it read (a join between two runs of probes, which move forward) keeps no more
    /// of them in memory than the block cache does; they are read again if needed. Takes
    /// `&mut`, so no reference into a block can be alive.
    pub fn unpin_all(&mut self) {
        for batch in &mut self.batches {
            let blocks = batch.block_count();
            batch.unpin(0..blocks);
        }
    }

    /// The batches, oldest first, taken out of the snapshot (to split or cut it without
    /// cloning the handles again).
    pub fn into_batches(self) -> Vec<Batch<U>> {
        self.batches
    }

    /// The total number of updates.
    pub fn len(&self) -> usize {
        self.batches.iter().map(Batch::len).sum()
    }

    /// True when no batch holds an update.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The upper frontier of the newest batch, or `None` without batches.
    pub fn upper(&self) -> Option<&Antichain<U::Time>> {
        self.batches.last().map(|batch| &batch.description().upper)
    }

    /// A cursor over all batches as one.
    pub fn cursor(&self) -> TraceCursor<'_, U> {
        TraceCursor::new(&self.batches)
    }

    /// A cursor for batched lookups alone (see [`TraceCursor::for_lookups`]).
    pub fn lookup_cursor(&self) -> TraceCursor<'_, U> {
        TraceCursor::for_lookups(&self.batches)
    }

    /// Finds each of `probes` (sorted) in every batch, one forward pass per batch, and calls
    /// `found(probe_index, values)` for each probe present in some batch, in probe order. See
    /// [`crate::lookup`].
    pub fn lookup<'s, 'p, P>(
        &'s self,
        probes: P,
        scratch: &mut LookupScratch,
        found: impl FnMut(usize, &mut ValCursor<'_, 's, U>),
    ) where
        P: columnar::Index<Ref = columnar::Ref<'p, U::Key>> + columnar::Len + Copy,
    {
        self.lookup_cursor().lookup(probes, scratch, found)
    }

    /// The accumulated collection at `time`: every `(key, val)` with the sum of its diffs at
    /// times `<= time`, zero sums dropped, sorted (tests and tools; not a hot path).
    pub fn accumulate_at(&self, time: &U::Time) -> Vec<(U::Key, U::Val, U::Diff)> {
        let mut out = Vec::new();
        let mut cursor = self.cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                let mut sum: Option<U::Diff> = None;
                cursor.map_times(|t, r| {
                    if U::Time::into_owned(t).less_equal(time) {
                        match &mut sum {
                            None => sum = Some(U::Diff::into_owned(r)),
                            Some(sum) => sum.plus_equals_ref(r),
                        }
                    }
                });
                if let Some(sum) = sum.filter(|sum| !sum.is_zero()) {
                    out.push((U::Key::into_owned(key), U::Val::into_owned(val), sum));
                }
                cursor.step_val();
            }
            cursor.step_key();
        }
        out
    }

    /// All updates of all batches as owned rows, batch by batch (tests and tools).
    pub fn to_rows(&self) -> Vec<Row<U>> {
        self.batches.iter().flat_map(Batch::to_rows).collect()
    }
}
