//! Stored batches: a batch kept in a batch file ([`crate::file`]) and read block by block
//! through the process's block cache.
//!
//! A [`StoredBatch`] holds its file open and its index in memory; its columns are read a block
//! at a time, when a cursor first enters the block, and kept alive by the reading handle's
//! *pins* (see [`crate::Batch`]): every `Ref` a cursor hands out points into a pinned block,
//! so it stays valid while the cache evicts the block, the spine merges the batch away or its
//! file is deleted. A file the spine wrote is deleted when the last handle to its batch drops.
//!
//! A block that cannot be read (an I/O error, a checksum mismatch) ends the worker through
//! [`ripple_storage::Storage::fail`], which records the error for the driver to report: a
//! cursor has no way to return an error, and going on would give a wrong output.
//!
//! The borrow checker enforces the pinning: a `Ref` borrows the handle whose pins hold its
//! block, so it cannot outlive it. This does not compile:
//!
//! ```compile_fail,E0597
//! use ripple_trace::{Builder, Description};
//! use ripple_updates::Antichain;
//!
//! let mut builder = Builder::<(u64, u64, u64, i64)>::new();
//! builder.push(&1, &1, &0, &1);
//! let batch = builder.done(Description::new(Antichain::from_elem(0), Antichain::from_elem(1)));
//! let key = {
//!     let handle = batch.clone();
//!     let cursor = handle.cursor();
//!     cursor.get_key()
//! }; // `handle`, and the blocks it pins, are dropped here while `key` points into them
//! assert_eq!(key, Some(&1));
//! ```

use crate::block;
use crate::description::Description;
use crate::file::{Counts, FileIndex};
use crate::filter::FilterYield;
use crate::view::{check_view, BatchView};
use columnar::Columnar;
use elsa::FrozenMap;
use ripple_storage::{Block, FileReader, Storage, StorageError};
use ripple_updates::Update;
use rustc_hash::FxBuildHasher;
use std::sync::Arc;

/// A handle's pins: the blocks of a stored batch its cursors have read, by index. Blocks are
/// only added through a shared reference (elsa's `FrozenMap` hands out references to the
/// blocks' words, which stay put while the map grows), and taken out only through `&mut`, when
/// no reference can be alive. Empty, it has allocated nothing: a handle costs nothing per
/// block of its batch.
pub(crate) type Pins = FrozenMap<usize, Block, FxBuildHasher>;

/// Whether the blocks a reader reads go into the block cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reads {
    /// Cached (on a block's second miss, see `ripple_storage::BlockCache`): lookups and
    /// cursors, which may come back to a block.
    Cached,
    /// Not cached (taken from the cache if there): merges' inputs, scans and checks, which
    /// read each block once, in order.
    Passing,
}

/// A batch in a batch file (see the module documentation).
pub struct StoredBatch<U: Update> {
    storage: Arc<Storage>,
    /// The file's number, unique in the process: the block cache's key.
    id: u64,
    name: String,
    reader: Box<dyn FileReader>,
    index: FileIndex<U>,
    /// Whether dropping the batch deletes its file (files the spine wrote, not files opened
    /// nor files kept: see [`StoredBatch::keep`]).
    owned: std::cell::Cell<bool>,
    /// A block of no keys: what a lookup cursor views before its first block (see
    /// [`Batch::lookup_cursor`]).
    empty: Box<[u64]>,
    /// Whether lookups still test the key filter.
    filter_yield: FilterYield,
}

impl<U: Update> StoredBatch<U> {
    /// Opens the batch file `name` of `storage`, numbered `id`; `empty` is a block of no keys
    /// (see [`StoredBatch::empty_view`]).
    pub(crate) fn open(
        storage: &Arc<Storage>,
        id: u64,
        name: String,
        owned: bool,
        empty: Vec<u64>,
    ) -> Result<Self, StorageError> {
        let reader = storage.store().open(&name)?;
        let index = FileIndex::open(&*reader)?;
        if block::decode::<U>(&empty).is_err() {
            let what = "an empty block of another layout".to_string();
            return Err(StorageError::corrupt(reader.path(), what));
        }
        Ok(Self {
            storage: Arc::clone(storage),
            id,
            name,
            reader,
            index,
            owned: std::cell::Cell::new(owned),
            empty: empty.into_boxed_slice(),
            filter_yield: FilterYield::default(),
        })
    }

    /// The file's name; from now on the file stays when the batch drops.
    pub(crate) fn keep(&self) -> &str {
        self.owned.set(false);
        &self.name
    }

    /// The batch's description.
    pub(crate) fn description(&self) -> &Description<U::Time> {
        self.index.description()
    }

    /// The batch's sizes.
    pub(crate) fn counts(&self) -> Counts {
        self.index.counts()
    }

    /// The file's index.
    pub(crate) fn index(&self) -> &FileIndex<U> {
        &self.index
    }

    /// Whether the next lookup should test its probes against the batch's key filter (see
    /// [`FilterYield`]); one that does reports with [`Self::note_filtered`].
    pub(crate) fn tests_filter(&self) -> bool {
        self.filter_yield.should_test()
    }

    /// Counts probes a lookup tested against the batch's filter, and those that passed.
    pub(crate) fn note_filtered(&self, tested: usize, passed: usize) {
        self.filter_yield.note(tested, passed);
        self.storage.note_filtered(tested as u64, passed as u64);
    }

    /// Heap bytes of the index (the blocks are the cache's).
    pub(crate) fn index_bytes(&self) -> usize {
        self.index.heap_bytes()
    }

    /// The number of blocks.
    pub(crate) fn block_count(&self) -> usize {
        self.index.block_count()
    }

    /// The block holding key index `key`; past the last key, the last block.
    pub(crate) fn block_holding(&self, key: usize) -> usize {
        if key < self.counts().keys {
            self.index.block_of_key_index(key)
        } else {
            self.block_count() - 1
        }
    }

    /// Block `index`, from the cache or read from the file and checked; a block read is cached
    /// if `reads` says so.
    pub(crate) fn read(&self, index: usize, reads: Reads) -> Result<Block, StorageError> {
        let key = (self.id, index as u32);
        let read = || {
            let words = self.index.read_block(&*self.reader, index)?;
            self.storage.note_read(words.len() as u64 * 8);
            Ok(words)
        };
        match reads {
            Reads::Cached => self.storage.cache().get(key, read),
            Reads::Passing => self.storage.cache().get_passing(key, read),
        }
    }

    /// The columns of block `index`, pinned in `pins` (read on first use, cached as `reads`
    /// says). A block that cannot be read ends the worker (see the module documentation).
    #[inline]
    pub(crate) fn view<'a>(&self, pins: &'a Pins, index: usize, reads: Reads) -> BatchView<'a, U> {
        let block = match pins.get(&index) {
            Some(block) => block,
            None => match self.read(index, reads) {
                Ok(block) => pins.insert(index, block),
                Err(error) => self.storage.fail(error),
            },
        };
        // Checked by `block::decode` when read.
        match block::decode_validated::<U>(block.words()) {
            Ok(view) => view,
            // Only a changed decoder could get here.
            Err(what) => self.storage.fail(StorageError::Corrupt {
                path: self.reader.path().to_path_buf(),
                what: format!("block {index}: {what}"),
            }),
        }
    }

    /// The columns of a block of no keys.
    pub(crate) fn empty_view(&self) -> BatchView<'_, U> {
        match block::decode_validated::<U>(&self.empty) {
            Ok(view) => view,
            Err(what) => panic!("an empty block does not decode: {what}"),
        }
    }

    /// [`Batch::check_invariants`] for a stored batch, block by block, reading through `pins`.
    pub(crate) fn check_invariants(&self, pins: &Pins) {
        let mut previous_last: Option<U::Key> = None;
        for index in 0..self.block_count() {
            let view = self.view(pins, index, Reads::Cached);
            check_view(view, self.description());
            let keys = view.keys;
            let (first, last) = self.index.key_range(index);
            let count = columnar::Len::len(&keys);
            assert_eq!(
                count,
                self.index.key_start(index + 1) - self.index.key_start(index),
                "block {index}'s keys are not the index's"
            );
            assert!(
                columnar::Index::get(&keys, 0) == first
                    && columnar::Index::get(&keys, count - 1) == last,
                "block {index}'s key range is not the index's"
            );
            if let Some(previous) = &previous_last {
                assert!(
                    U::Key::into_owned(first) > *previous,
                    "block {index} does not follow the previous one"
                );
            }
            previous_last = Some(U::Key::into_owned(last));
        }
    }
}

impl<U: Update> Drop for StoredBatch<U> {
    fn drop(&mut self) {
        if self.owned.get() {
            self.storage
                .delete(self.id, &self.name, self.index.block_count());
        }
    }
}
