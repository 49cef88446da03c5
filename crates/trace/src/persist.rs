//! Batches to files and back: [`Batch::write_to`] writes a batch (with
//! [`crate::writer::write_batch`]) and returns it as a stored batch ([`crate::stored`]), which
//! is how a spine spills; [`Batch::open_file`] opens a file written before.

use crate::batch::Batch;
use crate::block;
use crate::description::Description;
use crate::stored::StoredBatch;
use crate::writer::write_batch;
use ripple_storage::{Storage, StorageError};
use ripple_updates::{Antichain, Update};
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

    /// Reads and checks every block of a stored batch (nothing for one in memory): an error
    /// names the file and the first block that is damaged.
    pub fn check_blocks(&self) -> Result<(), StorageError> {
        if let Some((stored, _)) = self.stored() {
            for index in 0..stored.block_count() {
                stored.read(index)?;
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
