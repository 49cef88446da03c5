//! Writing a batch file block by block: [`BatchWriter`] takes a batch's keys in order, as a
//! merge or a copy produces them, and appends each block to the file as soon as it holds
//! about `block_updates` updates, so a batch of any size is written with one block in memory,
//! the hashes of one filter partition's keys (eight bytes a key) and the filters built (about
//! nine bits a key). The footer, built from what the blocks recorded, goes last; the file
//! appears under its name only when it is complete.

use crate::batch::Batch;
use crate::block;
use crate::builder::Builder;
use crate::description::Description;
use crate::file::{checksum, Counts, Footer, MAGIC, TRAILER_WORDS, VERSION};
use crate::filter::{KeyFilter, KeyHasher};
use columnar::bytes::indexed;
use columnar::{Borrow, Columnar, ContainerOf, Index, Push, Ref};
use ripple_storage::{FileStore, FileWriter, StorageError};
use ripple_updates::{Antichain, Update};

/// A batch file being written (see the module documentation).
pub struct BatchWriter<U: Update> {
    file: Box<dyn FileWriter>,
    block_updates: usize,
    filter: bool,
    hasher: KeyHasher<U::Key>,
    /// The hashes of the keys of the filter partition being filled, and its first block.
    hashes: Vec<u64>,
    partition_start: usize,
    key_filter: KeyFilter,
    /// The block being filled, and how many keys it holds.
    block: Builder<U>,
    block_keys: usize,
    /// One block's words, reused.
    words: Vec<u64>,
    /// Bytes appended so far.
    written: u64,
    /// The footer's index (see [`crate::file`]).
    offsets: Vec<u64>,
    crcs: Vec<u32>,
    first_keys: ContainerOf<U::Key>,
    last_keys: ContainerOf<U::Key>,
    key_starts: Vec<u64>,
    counts: Counts,
}

impl<U: Update> BatchWriter<U> {
    /// Starts the batch file `name` in `store`, in blocks of whole keys holding about
    /// `block_updates` updates each (at least one key per block), with a key filter if
    /// `filter`.
    pub fn new(
        store: &dyn FileStore,
        name: &str,
        block_updates: usize,
        filter: bool,
    ) -> Result<Self, StorageError> {
        Ok(Self {
            file: store.create(name)?,
            block_updates: block_updates.max(1),
            filter,
            hasher: KeyHasher::default(),
            hashes: Vec::new(),
            partition_start: 0,
            key_filter: KeyFilter::default(),
            block: Builder::new(),
            block_keys: 0,
            words: Vec::new(),
            written: 0,
            offsets: vec![0],
            crcs: Vec::new(),
            first_keys: Default::default(),
            last_keys: Default::default(),
            key_starts: vec![0],
            counts: Counts::default(),
        })
    }

    /// Lets `push` append the values of `key`, which must follow every key written so far,
    /// to the block being filled (all of them, or none if the key's updates cancelled), and
    /// writes the block out once it is full. Returns what `push` returned.
    pub fn push_key<R>(
        &mut self,
        key: Ref<'_, U::Key>,
        push: impl FnOnce(&mut Builder<U>) -> R,
    ) -> Result<R, StorageError> {
        let before = self.block.len();
        let result = push(&mut self.block);
        if self.block.len() == before {
            return Ok(result);
        }
        if self.block_keys == 0 {
            self.first_keys.push(key);
        }
        if self.filter {
            self.hashes.push(self.hasher.hash(key));
        }
        self.block_keys += 1;
        if self.block.len() >= self.block_updates {
            self.write_block(key)?;
        }
        Ok(result)
    }

    /// The number of keys written so far.
    pub fn key_count(&self) -> usize {
        self.counts.keys + self.block_keys
    }

    /// Appends the block being filled, whose last key is `last`, to the file.
    fn write_block(&mut self, last: Ref<'_, U::Key>) -> Result<(), StorageError> {
        self.last_keys.push(last);
        // A block holds columns only; its batch's description stays in the footer. (The
        // description of all times keeps the builder's checks of debug builds content.)
        let all_times = Description::new(
            Antichain::from_elem(<U::Time as timely::progress::Timestamp>::minimum()),
            Antichain::new(),
        );
        let block = self.block.build(all_times);
        self.counts.updates += block.len();
        self.counts.keys += self.block_keys;
        self.counts.vals += block.val_count();
        self.block_keys = 0;
        self.key_starts.push(self.counts.keys as u64);
        self.words.clear();
        block::encode(
            block.view().expect("a block is built in memory"),
            &mut self.words,
        );
        self.crcs.push(checksum(&self.words));
        self.file.append(bytemuck::cast_slice(&self.words))?;
        self.written += self.words.len() as u64 * 8;
        self.offsets.push(self.written);
        if self.hashes.len() >= KeyFilter::PARTITION_KEYS {
            self.close_partition();
        }
        Ok(())
    }

    /// Builds the filter of the partition being filled, if it has keys; the next starts at
    /// the next block.
    fn close_partition(&mut self) {
        if !self.hashes.is_empty() {
            let start = self.partition_start;
            self.key_filter.push_partition(start, &mut self.hashes);
        }
        self.partition_start = self.crcs.len();
    }

    /// Writes the last block and the footer of the batch `description`, publishes the file,
    /// and returns its length in bytes.
    pub fn finish(mut self, description: &Description<U::Time>) -> Result<u64, StorageError> {
        if self.block_keys > 0 {
            // The last key pushed closes the block; copied out, as the block's build empties
            // the builder that holds it.
            let mut last = ContainerOf::<U::Key>::default();
            last.push(
                self.block
                    .last_key()
                    .expect("a block of keys has a last key"),
            );
            self.write_block(last.borrow().get(0))?;
        }
        let counts = [
            self.counts.updates as u64,
            self.counts.keys as u64,
            self.counts.vals as u64,
        ];
        let lower = column_of::<U::Time>(description.lower.elements());
        let upper = column_of::<U::Time>(description.upper.elements());
        let since = column_of::<U::Time>(description.since.elements());
        self.close_partition();
        let key_filter = std::mem::take(&mut self.key_filter);
        let footer: Footer<'_, U::Key, U::Time> = (
            (&self.offsets, &self.crcs),
            (
                self.first_keys.borrow(),
                self.last_keys.borrow(),
                &self.key_starts,
            ),
            (lower.borrow(), upper.borrow(), since.borrow()),
            &counts,
            key_filter.parts(),
        );
        self.words.clear();
        indexed::encode(&mut self.words, &footer);
        let trailer = [
            self.words.len() as u64,
            (u64::from(checksum(&self.words)) << 32) | u64::from(VERSION),
            MAGIC,
        ];
        self.file.append(bytemuck::cast_slice(&self.words))?;
        self.file.append(bytemuck::cast_slice(&trailer))?;
        self.file.finish()?;
        Ok(self.written + ((self.words.len() + TRAILER_WORDS) * 8) as u64)
    }
}

/// Writes `batch` as the batch file `name` in `store` (see [`BatchWriter::new`] for the
/// blocks and the filter), and returns the file's length in bytes. On error no file of that
/// name is left (see [`FileStore::create`]).
pub fn write_batch<U: Update>(
    store: &dyn FileStore,
    name: &str,
    batch: &Batch<U>,
    block_updates: usize,
    filter: bool,
) -> Result<u64, StorageError> {
    let mut writer = BatchWriter::<U>::new(store, name, block_updates, filter)?;
    let mut cursor = batch.cursor();
    while let Some(key) = cursor.get_key() {
        writer.push_key(key, |builder| builder.copy_key(key, &mut cursor))?;
    }
    writer.finish(batch.description())
}

/// `items` as a column.
fn column_of<C: Columnar>(items: &[C]) -> ContainerOf<C> {
    let mut column = ContainerOf::<C>::default();
    for item in items {
        column.push(item);
    }
    column
}
