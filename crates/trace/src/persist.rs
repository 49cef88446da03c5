//! Batches to files and back: [`Batch::write_to`] writes a batch (with
//! [`crate::writer::write_batch`]) and returns it as a stored batch ([`crate::stored`]), which
//! is how a spine spills; [`Batch::open_file`] opens a file written before.

use crate::batch::Batch;
use crate::block;
use crate::cursor::BatchCursor;
use crate::description::Description;
use crate::stored::{Reads, StoredBatch};
use crate::writer::{write_batch, BatchWriter};
use columnar::Columnar;
use ripple_storage::{Storage, StorageError};
use ripple_updates::{Antichain, Update, Updates, UpdatesView};
use std::sync::Arc;

impl<U: Update> Batch<U> {
    /// Writes this batch to a new file of `storage` and returns it as a stored batch, whose
    /// file is deleted when the last handle to it drops. On error no file is left. An empty
    /// batch has nothing to store: it is returned as it is.
    pub fn write_to(&self, storage: &Arc<Storage>) -> Result<Batch<U>, StorageError> {
        if self.is_empty() {
            return Ok(self.clone());
        }
        let (id, name) = storage.new_file();
        let settings = storage.settings();
        let bytes = write_batch(
            storage.store(),
            &name,
            self,
            settings.block_updates,
            settings.filters,
        )?;
        Self::open_written(storage, id, name, bytes)
    }

    /// Writes the sorted, consolidated updates of `parts` (in order, as a sealed chain's
    /// chunks hand them out: one key's updates may go on from one part into the next) as a
    /// new batch file of `storage` for `description`, block by block, and returns it as a
    /// stored batch (an empty one, without a file, if there are no updates). On error no file
    /// is left.
    pub fn write_sorted(
        storage: &Arc<Storage>,
        description: &Description<U::Time>,
        parts: impl IntoIterator<Item = Updates<U>>,
    ) -> Result<Batch<U>, StorageError> {
        let (id, name) = storage.new_file();
        let settings = storage.settings();
        let mut writer = BatchWriter::<U>::new(
            storage.store(),
            &name,
            settings.block_updates,
            settings.filters,
        )?;
        // The updates of the last key of the parts so far, which the next part may continue.
        let mut open = Updates::<U>::default();
        for part in parts {
            let mut start = 0;
            while start < part.len() {
                let end = key_end(&part, start);
                if !open.is_empty() && !same_key(&open, &part, start) {
                    push_key_of(&mut writer, open.view(), 0..open.len())?;
                    open.clear();
                }
                if end < part.len() && open.is_empty() {
                    push_key_of(&mut writer, part.view(), start..end)?;
                } else {
                    open.extend_from(part.view(), start..end);
                    if end < part.len() {
                        push_key_of(&mut writer, open.view(), 0..open.len())?;
                        open.clear();
                    }
                }
                start = end;
            }
        }
        if !open.is_empty() {
            push_key_of(&mut writer, open.view(), 0..open.len())?;
        }
        if writer.key_count() == 0 {
            // Nothing to store: the writer, dropped unfinished, leaves no file.
            return Ok(Batch::empty(description.clone()));
        }
        let bytes = writer.finish(description)?;
        Self::open_written(storage, id, name, bytes)
    }

    /// Opens the file `name`, numbered `id`, of `bytes`, just written to `storage` as a
    /// batch of its own: counted as written, and deleted when the last handle to the batch
    /// drops (or now, if it cannot be opened).
    pub(crate) fn open_written(
        storage: &Arc<Storage>,
        id: u64,
        name: String,
        bytes: u64,
    ) -> Result<Batch<U>, StorageError> {
        storage.note_written(bytes);
        match StoredBatch::open(storage, id, name.clone(), true, empty_block::<U>()) {
            Ok(stored) => Ok(Batch::from_stored(stored)),
            Err(error) => {
                let _ = storage.store().delete(&name);
                Err(error)
            }
        }
    }

    /// Opens the batch file `name` of `storage`'s store, which stays when the batch drops.
    pub fn open_file(storage: &Arc<Storage>, name: &str) -> Result<Batch<U>, StorageError> {
        let (id, _) = storage.new_file();
        let stored = StoredBatch::open(storage, id, name.to_string(), false, empty_block::<U>())?;
        if stored.block_count() == 0 {
            // A stored batch has a block to read; an empty one needs none.
            return Ok(Batch::empty(stored.description().clone()));
        }
        Ok(Batch::from_stored(stored))
    }

    /// The name of a stored batch's file, which from now on stays when the last handle to
    /// the batch drops (a durable snapshot keeps it, and deletes it itself); `None` in memory.
    pub fn keep_file(&self) -> Option<String> {
        self.stored().map(|(stored, _)| stored.keep().to_string())
    }

    /// Reads and checks every block of a stored batch (nothing for one in memory), without
    /// caching them: an error names the file and the first block that is damaged.
    pub fn check_blocks(&self) -> Result<(), StorageError> {
        if let Some((stored, _)) = self.stored() {
            for index in 0..stored.block_count() {
                stored.read(index, Reads::Passing)?;
            }
        }
        Ok(())
    }

    /// The block of a stored batch holding key index `key` (the last block past the last
    /// key; 0 in memory).
    pub fn block_of_key(&self, key: usize) -> usize {
        self.stored()
            .map_or(0, |(stored, _)| stored.block_holding(key))
    }

    /// Calls `visit` with a cursor at the first key of each run of keys and the number of
    /// keys in the run, in order: a run per block of a stored batch, read through a handle of
    /// its own that is dropped after the run, so a reader of a batch of any size pins at most
    /// one block, and does not cache the blocks it reads; one run of all keys in memory.
    pub fn for_each_key_run(&self, mut visit: impl FnMut(&mut BatchCursor<'_, U>, usize)) {
        let Some((stored, _)) = self.stored() else {
            visit(&mut self.cursor(), self.key_count());
            return;
        };
        for block in 0..stored.block_count() {
            let index = stored.index();
            let (start, end) = (index.key_start(block), index.key_start(block + 1));
            let handle = self.clone();
            visit(&mut handle.scan_cursor_at(start), end - start);
        }
    }

    /// Lets go of this handle's pins of the blocks `blocks` of a stored batch: a reader that
    /// moves forward through the batch (a merge) keeps only the block it is in. Takes `&mut`,
    /// so no reference into those blocks can be alive.
    pub fn unpin(&mut self, blocks: std::ops::Range<usize>) {
        if let Some(pins) = self.pins_mut() {
            if !blocks.is_empty() {
                pins.as_mut().retain(|block, _| !blocks.contains(block));
            }
        }
    }

    /// The number of blocks of a stored batch (0 for one in memory).
    pub fn block_count(&self) -> usize {
        self.stored().map_or(0, |(stored, _)| stored.block_count())
    }

    /// The size of a stored batch's key filter in bits per key (`None` without one).
    pub fn filter_bits_per_key(&self) -> Option<f64> {
        let (stored, _) = self.stored()?;
        let filter = stored.index().filter();
        filter
            .is_present()
            .then(|| filter.bits_per_key(stored.counts().keys))
    }
}

/// A block of no keys, of `U`'s types (a block holds no description).
fn empty_block<U: Update>() -> Vec<u64> {
    let mut words = Vec::new();
    let nothing = Batch::<U>::empty(Description::new(Antichain::new(), Antichain::new()));
    block::encode(nothing.view().expect("in memory"), &mut words);
    words
}

/// The end of the run of updates of `updates` sharing the key of update `start`.
fn key_end<U: Update>(updates: &Updates<U>, start: usize) -> usize {
    let view = updates.view();
    let key = view.key(start);
    (start + 1..view.len())
        .find(|&index| view.key(index) != key)
        .unwrap_or(view.len())
}

/// True when the key of `open`'s updates is that of update `index` of `part`.
fn same_key<U: Update>(open: &Updates<U>, part: &Updates<U>, index: usize) -> bool {
    open.view().key(0) == part.view().key(index)
}

/// Appends the updates `range` of `view`, all of one key, to the batch file being written.
fn push_key_of<U: Update>(
    writer: &mut BatchWriter<U>,
    view: UpdatesView<'_, U>,
    range: std::ops::Range<usize>,
) -> Result<(), StorageError> {
    writer.push_key(view.key(range.start), |builder| {
        for index in range {
            let time = U::Time::into_owned(view.time(index));
            let diff = U::Diff::into_owned(view.diff(index));
            builder.push(view.key(index), view.val(index), &time, &diff);
        }
    })
}
