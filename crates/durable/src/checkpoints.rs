//! An input collection's checkpoints: the changes fed since the last one, written as batch
//! files at the next, and the snapshot the files make together.
//!
//! The snapshot of a checkpoint at frontier `F` is the input collection compacted to `F`:
//! batch files of `(data, (), time, diff)` whose diffs, summed per datum across files, give
//! the collection at time `F - 1`. A file holds the changes of the times `[lower, upper)` of
//! its description, consolidated and all moved to time `upper - 1` (its `since`). A checkpoint
//! writes only what was fed since the one before (in parts of [`PART_UPDATES`] if a step is
//! big, so that a load is not held twice in memory), then merges files so that the snapshot
//! stays within about a quarter of its live size on disk, and commits the manifest.
//!
//! Rehydration ([`Checkpoints::replay`]) reads the files back; the dataflow recomputes every
//! operator's state from them (operator state is never stored).

use crate::error::DurableError;
use crate::manifest::{Manifest, SnapshotFile};
use crate::state::StateDir;
use columnar::Columnar;
use ripple_storage::Storage;
use ripple_trace::{Batch, BatchCursor, Description};
use ripple_updates::{Antichain, Data, Updates};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A snapshot file's update: a datum of the collection, at a time, with a multiplicity.
pub type SnapshotUpdate<D> = (D, (), u64, i64);

/// Changes held in memory before a part of the next checkpoint is written.
pub const PART_UPDATES: usize = 1 << 22;

/// Keys merged between lettings go of the inputs' pinned blocks.
const SLICE_KEYS: usize = 1 << 12;

/// A snapshot is merged whole once the files after its first hold this fraction of the
/// first's updates (the space on disk stays within about 1.25x of the merged size).
const MERGE_ALL_FRACTION: u64 = 4;

/// What a checkpoint wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Bytes of the batch files of the changes since the previous checkpoint.
    pub new_bytes: u64,
    /// Bytes of the files merges wrote.
    pub merged_bytes: u64,
    /// Files in the snapshot after the checkpoint, and their bytes.
    pub files: usize,
    pub snapshot_bytes: u64,
}

/// An input collection's checkpoints in a state directory (see the module documentation).
pub struct Checkpoints<D: Data> {
    state: StateDir,
    /// The files of the snapshot, and the parts written since the last commit, oldest first.
    files: Vec<SnapshotFile>,
    /// The frontier of the last checkpoint: changes recorded since are at this time or later.
    covered: u64,
    /// Changes recorded since the last part was written, and their greatest time.
    pending: Vec<(D, i64)>,
    pending_max: Option<u64>,
    /// Bytes of the parts written since the last commit.
    parts_bytes: u64,
    /// Pending changes that make a part.
    part_updates: usize,
    /// The files written since the last commit (parts, merges), some merged away since.
    written: Vec<String>,
}

impl<D: Data> Checkpoints<D> {
    /// The checkpoints of the state directory `state` (which may hold none yet).
    pub fn new(state: StateDir) -> Self {
        let (files, covered) = state.manifest().map_or((Vec::new(), 0), |manifest| {
            (manifest.files.clone(), manifest.frontier)
        });
        Self {
            state,
            files,
            covered,
            pending: Vec::new(),
            pending_max: None,
            parts_bytes: 0,
            part_updates: PART_UPDATES,
            written: Vec::new(),
        }
    }

    /// Writes a part once `updates` changes are pending (at least 1; [`PART_UPDATES`] by
    /// default).
    pub fn set_part_updates(&mut self, updates: usize) {
        self.part_updates = updates.max(1);
    }

    /// The snapshot's files now (with parts written since the last commit).
    pub fn files(&self) -> &[SnapshotFile] {
        &self.files
    }

    /// The state directory.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// The last checkpoint committed, if any.
    pub fn last(&self) -> Option<&Manifest> {
        self.state.manifest()
    }

    /// Records a change fed to the collection, at `time`, at or after the last checkpoint's
    /// frontier. A part is written when enough changes are held.
    pub fn record(&mut self, data: D, time: u64, diff: i64) -> Result<(), DurableError> {
        debug_assert!(time >= self.covered, "a change before the last checkpoint");
        self.pending.push((data, diff));
        self.pending_max = Some(self.pending_max.map_or(time, |max| max.max(time)));
        if self.pending.len() >= self.part_updates {
            self.write_part()?;
        }
        Ok(())
    }

    /// Commits a checkpoint at `frontier`: every change at a time below it has been recorded,
    /// none at or after it. `meta` goes into the manifest; `before_rename` runs after every
    /// file is written and before the manifest's rename (a test's crash point).
    pub fn checkpoint(
        &mut self,
        frontier: u64,
        meta: BTreeMap<String, String>,
        before_rename: impl FnOnce(),
    ) -> Result<CheckpointStats, DurableError> {
        if let Some(time) = self.pending_max.filter(|max| *max >= frontier) {
            return Err(DurableError::Early { frontier, time });
        }
        assert!(frontier >= self.covered, "checkpoints move forward");
        self.write_part()?;
        let new_bytes = std::mem::take(&mut self.parts_bytes);
        let merged_bytes = self.merge()?;
        let manifest = Manifest {
            frontier,
            files: self.files.clone(),
            meta,
        };
        self.state.commit(manifest, &self.written, before_rename)?;
        self.written.clear();
        self.covered = frontier;
        Ok(CheckpointStats {
            new_bytes,
            merged_bytes,
            files: self.files.len(),
            snapshot_bytes: self.files.iter().map(|file| file.bytes).sum(),
        })
    }

    /// Calls `push` with each datum of the last checkpoint's snapshot and its multiplicity
    /// (a datum may come more than once, from several files; the sums are the collection).
    pub fn replay(&self, mut push: impl FnMut(D, i64)) -> Result<(), DurableError> {
        let storage = self.state.storage();
        let live = self.last().map_or(&[][..], |manifest| &manifest.files[..]);
        for file in live {
            let batch = Batch::<SnapshotUpdate<D>>::open_file(storage, &file.name)?;
            guarded(storage, || {
                batch.for_each_key_run(|cursor, keys| {
                    for index in 0..keys {
                        let diff = key_diff(cursor);
                        push(D::into_owned(cursor.key()), diff);
                        if index + 1 < keys {
                            cursor.step_key();
                        }
                    }
                })
            })?;
        }
        Ok(())
    }

    /// Writes the pending changes, consolidated, as a batch file of the snapshot.
    fn write_part(&mut self) -> Result<(), DurableError> {
        let Some(max) = self.pending_max.take() else {
            return Ok(());
        };
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut updates = Updates::<SnapshotUpdate<D>>::default();
        for run in pending.chunk_by(|a, b| a.0 == b.0) {
            let diff: i64 = run.iter().map(|(_, diff)| diff).sum();
            if diff != 0 {
                updates.push(&run[0].0, &(), &max, &diff);
            }
        }
        drop(pending);
        let description = Description::with_since(
            Antichain::from_elem(self.covered),
            Antichain::from_elem(max + 1),
            Antichain::from_elem(max),
        );
        let written = Batch::write_sorted(self.state.storage(), &description, [updates])?;
        if let Some(file) = self.keep(&written)? {
            self.parts_bytes += file.bytes;
            self.files.push(file);
        }
        Ok(())
    }

    /// The file of `batch` as a file of the snapshot, kept when the batch drops; `None` for
    /// a batch of no updates (which has no file).
    fn keep(
        &mut self,
        batch: &Batch<SnapshotUpdate<D>>,
    ) -> Result<Option<SnapshotFile>, DurableError> {
        let Some(name) = batch.keep_file() else {
            return Ok(None);
        };
        self.written.push(name.clone());
        let path = self.state.path().join(&name);
        let bytes = std::fs::metadata(&path)
            .map_err(|error| DurableError::io(path, error))?
            .len();
        Ok(Some(SnapshotFile {
            name,
            updates: batch.len() as u64,
            bytes,
        }))
    }

    /// Merges the snapshot's files, newest first, while a file holds at least half the updates
    /// of the one before it (so their number stays logarithmic), and all of them once the
    /// files after the first hold a quarter of its updates. Returns the bytes written.
    fn merge(&mut self) -> Result<u64, DurableError> {
        let mut written = 0;
        loop {
            let count = self.files.len();
            if count < 2 {
                return Ok(written);
            }
            let rest: u64 = self.files[1..].iter().map(|file| file.updates).sum();
            let from = if rest * MERGE_ALL_FRACTION >= self.files[0].updates {
                0
            } else if count >= 3
                && 2 * self.files[count - 1].updates >= self.files[count - 2].updates
            {
                count - 2
            } else {
                return Ok(written);
            };
            let merged = self.merge_files(from)?;
            written += merged.as_ref().map_or(0, |file| file.bytes);
            self.files.truncate(from);
            self.files.extend(merged);
        }
    }

    /// Merges the files from `from` on into one (`None` if everything cancelled).
    fn merge_files(&mut self, from: usize) -> Result<Option<SnapshotFile>, DurableError> {
        let storage = self.state.storage();
        let mut inputs = self.files[from..]
            .iter()
            .map(|file| Batch::<SnapshotUpdate<D>>::open_file(storage, &file.name))
            .collect::<Result<Vec<_>, _>>()?;
        let lower = inputs[0].description().lower.clone();
        let upper = inputs[inputs.len() - 1].description().upper.clone();
        let time = upper.elements()[0] - 1;
        let description = Description::with_since(lower, upper, Antichain::from_elem(time));
        let merged = guarded(storage, || {
            let mut merge = KWayMerge::new(&mut inputs, time);
            Batch::write_sorted(
                storage,
                &description,
                std::iter::from_fn(|| merge.next_part()),
            )
        })??;
        self.keep(&merged)
    }
}

/// A merge of several snapshot files into parts of consolidated updates, a slice of keys at
/// a time, each input keeping only its current block pinned.
struct KWayMerge<'a, D: Data> {
    inputs: &'a mut [Batch<SnapshotUpdate<D>>],
    /// Each input's next key, and the first block its handle may still pin.
    next_key: Vec<usize>,
    pinned_from: Vec<usize>,
    time: u64,
}

impl<'a, D: Data> KWayMerge<'a, D> {
    fn new(inputs: &'a mut [Batch<SnapshotUpdate<D>>], time: u64) -> Self {
        let count = inputs.len();
        Self {
            inputs,
            next_key: vec![0; count],
            pinned_from: vec![0; count],
            time,
        }
    }

    /// The next part of merged updates (of up to [`SLICE_KEYS`] keys before consolidation);
    /// `None` once every input is exhausted.
    fn next_part(&mut self) -> Option<Updates<SnapshotUpdate<D>>> {
        loop {
            for (input, (key, from)) in self
                .inputs
                .iter_mut()
                .zip(self.next_key.iter().zip(self.pinned_from.iter_mut()))
            {
                let current = input.block_of_key(*key);
                input.unpin(*from..current);
                *from = current;
            }
            let mut cursors: Vec<BatchCursor<'_, SnapshotUpdate<D>>> = self
                .inputs
                .iter()
                .zip(&self.next_key)
                .map(|(input, key)| input.cursor_at(*key))
                .collect();
            let mut part = Updates::default();
            let mut exhausted = false;
            for _ in 0..SLICE_KEYS {
                let least = cursors.iter().filter_map(BatchCursor::get_key).min();
                let Some(least) = least else {
                    exhausted = true;
                    break;
                };
                let mut diff = 0;
                for cursor in &mut cursors {
                    if cursor.get_key() == Some(least) {
                        diff += key_diff(cursor);
                        cursor.step_key();
                    }
                }
                if diff != 0 {
                    part.push(&D::into_owned(least), &(), &self.time, &diff);
                }
            }
            for (next, cursor) in self.next_key.iter_mut().zip(&cursors) {
                *next = cursor.key_index();
            }
            if !part.is_empty() {
                return Some(part);
            }
            if exhausted {
                return None;
            }
        }
    }
}

/// The sum of the diffs of the cursor's key (of every value and time).
fn key_diff<D: Data>(cursor: &mut BatchCursor<'_, SnapshotUpdate<D>>) -> i64 {
    let mut diff = 0;
    while cursor.val_valid() {
        cursor.map_times(|_, update| diff += i64::into_owned(update));
        cursor.step_val();
    }
    diff
}

/// Runs `work`, turning a storage fault it unwinds with (a damaged block, a failed read)
/// into the error the tier recorded.
fn guarded<T>(storage: &Arc<Storage>, work: impl FnOnce() -> T) -> Result<T, DurableError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|payload| {
        match storage.fault() {
            Some(fault) => DurableError::Fault(fault),
            None => std::panic::resume_unwind(payload),
        }
    })
}
