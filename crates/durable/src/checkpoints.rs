//! An input collection's checkpoints: the changes fed since the last one, written as batch
//! files at the next, and the snapshot the files make together.
//!
//! The snapshot of a checkpoint at frontier `F` is the input collection compacted to `F`:
//! batch files of `(data, (), time, diff)` whose diffs, summed per datum across files, give
//! the collection at time `F - 1`. A file holds changes of times in `[lower, upper)` of its
//! description, consolidated and all moved to time `upper - 1` (its `since`); the parts of one
//! checkpoint share their `lower`. A checkpoint
//! writes only what was fed since the one before (in parts of [`PART_UPDATES`] if a step is
//! big, so that a load is not held twice in memory; a part is written on a thread while the
//! next is gathered) and commits the manifest.
//!
//! Merges keep the snapshot near its live size and its files few, on a thread of their own
//! (the run goes on meanwhile): when the removals after the first file could cancel a fifth of
//! the snapshot's updates, all files are merged into one; when there are more than
//! [`MAX_FILES`], the adjacent pair of the fewest updates is. A merge starts after a commit,
//! from committed files; a later checkpoint takes its file in their place, and the commit
//! after that deletes them.
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

/// A snapshot is merged whole once the updates its removals could cancel are this fraction
/// of its updates or more (1 in 5: the space on disk stays within about 1.25x of the live
/// size).
const WASTE_FRACTION: u64 = 5;

/// More files than this are merged, a pair at a time: enough that a snapshot of a long run's
/// checkpoints is rarely rewritten, few enough to keep open at once.
pub const MAX_FILES: usize = 32;

/// What a checkpoint wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Bytes of the batch files of the changes since the previous checkpoint.
    pub new_bytes: u64,
    /// Bytes of the files merges wrote.
    pub merged_bytes: u64,
    /// Why a merge failed, if one did: the snapshot's files stay as they were.
    pub merge_error: Option<String>,
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
    /// The greatest time recorded since the last commit (parts written or not).
    recorded_max: Option<u64>,
    /// A write failed: what was recorded since the last commit may be lost.
    broken: bool,
    /// The files written since the last commit (parts, merges), some merged away since.
    written: Vec<String>,
    /// The merge running, if any: the positions in `files` of its inputs (only appended to
    /// meanwhile), and its thread.
    merging: Option<(std::ops::Range<usize>, MergeThread)>,
    /// The part being written, on a thread of its own (the next is gathered meanwhile).
    writing: Option<MergeThread>,
}

/// A thread writing a file of the snapshot: a merge's, or a part's (`None` if everything
/// cancelled).
type MergeThread = std::thread::JoinHandle<Result<Option<SnapshotFile>, DurableError>>;

impl<D: Data> Drop for Checkpoints<D> {
    fn drop(&mut self) {
        // A merge's or a part's file would be left for the next opening to remove; they are
        // waited for, not left writing.
        if let Some((_, thread)) = self.merging.take() {
            let _ = thread.join();
        }
        if let Some(thread) = self.writing.take() {
            let _ = thread.join();
        }
    }
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
            recorded_max: None,
            broken: false,
            written: Vec::new(),
            merging: None,
            writing: None,
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
        self.check_usable()?;
        debug_assert!(time >= self.covered, "a change before the last checkpoint");
        self.pending.push((data, diff));
        self.pending_max = Some(self.pending_max.map_or(time, |max| max.max(time)));
        self.recorded_max = Some(self.recorded_max.map_or(time, |max| max.max(time)));
        if self.pending.len() >= self.part_updates {
            let written = self.write_part(false);
            self.note_failure(written)?;
        }
        Ok(())
    }

    /// An error if an earlier write failed: what was recorded since the last commit may be
    /// lost, so no later checkpoint may be committed from this object.
    fn check_usable(&self) -> Result<(), DurableError> {
        if self.broken {
            return Err(DurableError::Broken);
        }
        Ok(())
    }

    /// Marks this object unusable if `result` is an error.
    fn note_failure<T>(&mut self, result: Result<T, DurableError>) -> Result<T, DurableError> {
        self.broken |= result.is_err();
        result
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
        self.check_usable()?;
        if let Some(time) = self.recorded_max.filter(|max| *max >= frontier) {
            return Err(DurableError::Early { frontier, time });
        }
        assert!(frontier >= self.covered, "checkpoints move forward");
        let committed = self.commit(frontier, meta, before_rename);
        self.note_failure(committed)
    }

    fn commit(
        &mut self,
        frontier: u64,
        meta: BTreeMap<String, String>,
        before_rename: impl FnOnce(),
    ) -> Result<CheckpointStats, DurableError> {
        let (merged_bytes, merge_error) = self.adopt_merge(false);
        self.write_part(true)?;
        let new_bytes = std::mem::take(&mut self.parts_bytes);
        let manifest = Manifest {
            frontier,
            files: self.files.clone(),
            meta,
        };
        self.state.commit(manifest, &self.written, before_rename)?;
        self.written.clear();
        self.covered = frontier;
        self.recorded_max = None;
        self.start_merge();
        Ok(CheckpointStats {
            new_bytes,
            merged_bytes,
            merge_error,
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

    /// Waits for the merge running, if any (the next checkpoint takes its file); returns its
    /// bytes, or why it failed.
    pub fn finish_merge(&mut self) -> (u64, Option<String>) {
        self.adopt_merge(true)
    }

    /// Takes the file of the merge running in place of its inputs, if it is done (or
    /// `wait`ing for it); returns its bytes. A merge that failed (a full disk) changes nothing
    /// (the writer left no file): its error is returned, and the files stay as they were.
    fn adopt_merge(&mut self, wait: bool) -> (u64, Option<String>) {
        let done = self
            .merging
            .as_ref()
            .is_some_and(|(_, thread)| wait || thread.is_finished());
        if !done {
            return (0, None);
        }
        let (range, thread) = self.merging.take().expect("a merge");
        let merged = match thread.join() {
            Ok(Ok(merged)) => merged,
            Ok(Err(error)) => return (0, Some(error.to_string())),
            Err(payload) => std::panic::resume_unwind(payload),
        };
        let bytes = merged.as_ref().map_or(0, |file| file.bytes);
        if let Some(file) = &merged {
            self.written.push(file.name.clone());
        }
        self.files.splice(range, merged);
        (bytes, None)
    }

    /// Starts a merge if the snapshot calls for one (see the module documentation).
    fn start_merge(&mut self) {
        if self.merging.is_some() || self.files.len() < 2 {
            return;
        }
        let total: u64 = self.files.iter().map(|file| file.updates).sum();
        let removals: u64 = self.files[1..].iter().map(|file| file.removals).sum();
        let range = if 2 * removals * WASTE_FRACTION >= total {
            0..self.files.len()
        } else if self.files.len() > MAX_FILES {
            let pair = (0..self.files.len() - 1)
                .min_by_key(|&at| self.files[at].updates + self.files[at + 1].updates)
                .expect("two files or more");
            pair..pair + 2
        } else {
            return;
        };
        let inputs: Vec<String> = self.files[range.clone()]
            .iter()
            .map(|file| file.name.clone())
            .collect();
        let storage = Arc::clone(self.state.storage());
        let dir = self.state.path().to_path_buf();
        let thread = std::thread::Builder::new()
            .name("ripple-snapshot-merge".into())
            .spawn(move || merge_files::<D>(&storage, &dir, &inputs));
        // No thread to spare: the files stay as they are until a later checkpoint.
        if let Ok(thread) = thread {
            self.merging = Some((range, thread));
        }
    }

    /// Starts writing the pending changes as a part, on a thread of its own, after the part
    /// being written (if any) is done; waits for it too if `wait`.
    fn write_part(&mut self, wait: bool) -> Result<(), DurableError> {
        let pending = self.pending_max.take().map(|max| {
            let pending = std::mem::take(&mut self.pending);
            (pending, max)
        });
        self.finish_part()?;
        if let Some((pending, max)) = pending {
            let storage = Arc::clone(self.state.storage());
            let dir = self.state.path().to_path_buf();
            let covered = self.covered;
            let thread = std::thread::Builder::new()
                .name("ripple-snapshot-part".into())
                .spawn(move || write_part::<D>(&storage, &dir, pending, covered, max))
                .map_err(|error| DurableError::io(self.state.path(), error))?;
            self.writing = Some(thread);
        }
        if wait {
            self.finish_part()?;
        }
        Ok(())
    }

    /// Waits for the part being written, if any, and adds it to the snapshot's files.
    fn finish_part(&mut self) -> Result<(), DurableError> {
        let Some(thread) = self.writing.take() else {
            return Ok(());
        };
        let written = match thread.join() {
            Ok(written) => written?,
            Err(payload) => std::panic::resume_unwind(payload),
        };
        if let Some(file) = written {
            self.written.push(file.name.clone());
            self.parts_bytes += file.bytes;
            self.files.push(file);
        }
        Ok(())
    }
}

/// Writes `pending`, changes at times from `covered` to `max`, consolidated, as a batch file of
/// the snapshot in `dir` (`None` if they all cancel).
fn write_part<D: Data>(
    storage: &Arc<Storage>,
    dir: &std::path::Path,
    mut pending: Vec<(D, i64)>,
    covered: u64,
    max: u64,
) -> Result<Option<SnapshotFile>, DurableError> {
    pending.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut updates = Updates::<SnapshotUpdate<D>>::default();
    let mut removals = 0;
    for run in pending.chunk_by(|a, b| a.0 == b.0) {
        let diff: i64 = run.iter().map(|(_, diff)| diff).sum();
        if diff != 0 {
            updates.push(&run[0].0, &(), &max, &diff);
            removals += u64::from(diff < 0);
        }
    }
    drop(pending);
    let description = Description::with_since(
        Antichain::from_elem(covered),
        Antichain::from_elem(max + 1),
        Antichain::from_elem(max),
    );
    let written = Batch::write_sorted(storage, &description, [updates])?;
    keep(dir, &written, removals)
}

/// The file of `batch` as a file of the snapshot in `dir`, kept when the batch drops, with
/// `removals` updates of negative diffs; `None` for a batch of no updates (which has no file).
fn keep<D: Data>(
    dir: &std::path::Path,
    batch: &Batch<SnapshotUpdate<D>>,
    removals: u64,
) -> Result<Option<SnapshotFile>, DurableError> {
    let Some(name) = batch.keep_file() else {
        return Ok(None);
    };
    let path = dir.join(&name);
    let bytes = std::fs::metadata(&path)
        .map_err(|error| DurableError::io(path, error))?
        .len();
    Ok(Some(SnapshotFile {
        name,
        updates: batch.len() as u64,
        removals,
        bytes,
    }))
}

/// Merges the snapshot files `inputs` (adjacent, oldest first) of the directory `dir` into
/// one, through `storage` (`None` if everything cancelled).
fn merge_files<D: Data>(
    storage: &Arc<Storage>,
    dir: &std::path::Path,
    inputs: &[String],
) -> Result<Option<SnapshotFile>, DurableError> {
    let mut inputs = inputs
        .iter()
        .map(|name| Batch::<SnapshotUpdate<D>>::open_file(storage, name))
        .collect::<Result<Vec<_>, _>>()?;
    let lower = inputs[0].description().lower.clone();
    let upper = inputs[inputs.len() - 1].description().upper.clone();
    let time = upper.elements()[0] - 1;
    let description = Description::with_since(lower, upper, Antichain::from_elem(time));
    let mut removals = 0;
    let merged = guarded(storage, || {
        let mut merge = KWayMerge::new(&mut inputs, time, &mut removals);
        Batch::write_sorted(
            storage,
            &description,
            std::iter::from_fn(|| merge.next_part()),
        )
    })??;
    keep(dir, &merged, removals)
}

/// A merge of several snapshot files into parts of consolidated updates, a slice of keys at
/// a time, each input keeping only its current block pinned.
struct KWayMerge<'a, D: Data> {
    inputs: &'a mut [Batch<SnapshotUpdate<D>>],
    /// Each input's next key, and the first block its handle may still pin.
    next_key: Vec<usize>,
    pinned_from: Vec<usize>,
    time: u64,
    /// Merged updates of negative diffs, counted.
    removals: &'a mut u64,
}

impl<'a, D: Data> KWayMerge<'a, D> {
    fn new(inputs: &'a mut [Batch<SnapshotUpdate<D>>], time: u64, removals: &'a mut u64) -> Self {
        let count = inputs.len();
        Self {
            inputs,
            next_key: vec![0; count],
            pinned_from: vec![0; count],
            time,
            removals,
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
                .map(|(input, key)| input.scan_cursor_at(*key))
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
                    *self.removals += u64::from(diff < 0);
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
