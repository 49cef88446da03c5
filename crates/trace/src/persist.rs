//! Batches to files and back: [`write_batch`] writes a batch in the format of [`crate::file`];
//! [`Batch::write_to`] writes one and returns it as a stored batch ([`crate::stored`]), which
//! is how a spine spills; [`Batch::open_file`] opens a file written before.

use crate::batch::Batch;
use crate::block;
use crate::builder::Builder;
use crate::description::Description;
use crate::file::{checksum, Footer, MAGIC, TRAILER_WORDS, VERSION};
use crate::filter::{KeyFilter, KeyHasher};
use crate::stored::StoredBatch;
use columnar::bytes::indexed;
use columnar::{Borrow, Columnar, ContainerOf, Push};
use ripple_storage::{FileStore, Storage, StorageError};
use ripple_updates::{Antichain, Update};
use std::sync::Arc;

/// Writes `batch` as the batch file `name` in `store`, in blocks of whole keys holding about
/// `block_updates` updates each (at least one key per block), with a key filter if `filter`.
/// Returns the file's length in bytes. On error no file of that name is left (see
/// [`FileStore::write`]).
pub fn write_batch<U: Update>(
    store: &dyn FileStore,
    name: &str,
    batch: &Batch<U>,
    block_updates: usize,
    filter: bool,
) -> Result<u64, StorageError> {
    let mut hasher = KeyHasher::<U::Key>::default();
    let mut hashes = Vec::new();
    let description = batch.description();
    let mut words: Vec<u64> = Vec::new();
    let mut offsets = vec![0u64];
    let mut crcs: Vec<u32> = Vec::new();
    let mut first_keys = ContainerOf::<U::Key>::default();
    let mut last_keys = ContainerOf::<U::Key>::default();
    let mut key_starts = vec![0u64];
    let mut builder = Builder::<U>::new();
    let mut history: Vec<(U::Time, U::Diff)> = Vec::new();
    let mut cursor = batch.cursor();
    let mut keys = 0u64;
    while let Some(key) = cursor.get_key() {
        if builder.is_empty() {
            first_keys.push(key);
        }
        if filter {
            hashes.push(hasher.hash(key));
        }
        while let Some(val) = cursor.get_val() {
            history.clear();
            cursor.map_times(|time, diff| {
                history.push((U::Time::into_owned(time), U::Diff::into_owned(diff)))
            });
            builder.push_history(key, val, &history);
            cursor.step_val();
        }
        cursor.step_key();
        keys += 1;
        if builder.len() >= block_updates.max(1) || cursor.get_key().is_none() {
            last_keys.push(key);
            key_starts.push(keys);
            let start = words.len();
            let block = builder.build(description.clone());
            block::encode(
                block.view().expect("a block is built in memory"),
                &mut words,
            );
            crcs.push(checksum(&words[start..]));
            offsets.push(words.len() as u64 * 8);
        }
    }
    let counts = [
        batch.len() as u64,
        batch.key_count() as u64,
        batch.val_count() as u64,
    ];
    let lower = column_of::<U::Time>(description.lower.elements());
    let upper = column_of::<U::Time>(description.upper.elements());
    let since = column_of::<U::Time>(description.since.elements());
    let key_filter = KeyFilter::build(&mut hashes);
    let footer: Footer<'_, U::Key, U::Time> = (
        (&offsets, &crcs),
        (first_keys.borrow(), last_keys.borrow(), &key_starts),
        (lower.borrow(), upper.borrow(), since.borrow()),
        &counts,
        key_filter.parts(),
    );
    let footer_start = words.len();
    indexed::encode(&mut words, &footer);
    let footer_words = &words[footer_start..];
    let trailer = [
        footer_words.len() as u64,
        (u64::from(checksum(footer_words)) << 32) | u64::from(VERSION),
        MAGIC,
    ];
    store.write(
        name,
        &[bytemuck::cast_slice(&words), bytemuck::cast_slice(&trailer)],
    )?;
    Ok(((words.len() + TRAILER_WORDS) * 8) as u64)
}

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

/// `items` as a column.
fn column_of<C: Columnar>(items: &[C]) -> ContainerOf<C> {
    let mut column = ContainerOf::<C>::default();
    for item in items {
        column.push(item);
    }
    column
}
