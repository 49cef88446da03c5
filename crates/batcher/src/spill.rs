//! Chains on disk: a batcher over its process's memory budget writes whole chains out to
//! spill files of chunks, and merges and splits of such chains stream them chunk by chunk,
//! from file to file, holding about one chunk per input and output in memory.
//!
//! A spill file is a sequence of chunks, each the `columnar` indexed encoding of its four
//! columns, with a CRC-32C per chunk kept beside the chunk's place in the file (in memory: a
//! spill file lives only as long as the run, and no other process reads it). A
//! [`StoredChunk`] names its place; the file is deleted when the last chunk naming it drops.
//! Storage failures unwind the worker through [`Storage::fail`], as the trace's reads do: the
//! driver reports the recorded error, naming the file (and the chunk).

use crate::chunk::{Chunk, Stash};
use columnar::bytes::indexed;
use columnar::{BorrowedOf, FromBytes};
use ripple_storage::{FileReader, FileWriter, Storage, StorageError};
use ripple_updates::{Update, UpdatesView};
use std::ops::Range;
use std::sync::Arc;

/// A spill file: read by its chunks, deleted when the last of them drops.
struct SpillFile {
    storage: Arc<Storage>,
    id: u64,
    name: String,
    reader: Box<dyn FileReader>,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        self.storage.delete(self.id, &self.name, 0);
    }
}

/// A chunk written to a spill file: where it is, its checksum and its sizes.
pub struct StoredChunk {
    file: Arc<SpillFile>,
    /// Its bytes in the file.
    range: Range<u64>,
    crc: u32,
    /// Its place in the file, for messages.
    index: usize,
    len: usize,
    byte_len: usize,
}

impl StoredChunk {
    /// The number of updates.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a chunk of no updates (never the case in a chain).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of payload (as [`Chunk::byte_len`] counted them before the chunk was written).
    pub fn byte_len(&self) -> usize {
        self.byte_len
    }

    /// The storage tier holding the chunk.
    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.file.storage
    }

    /// Reads the chunk back into memory, into a stashed buffer if one fits. A failed or
    /// damaged read unwinds the worker (see the module documentation).
    pub(crate) fn load<U: Update>(&self, stash: &mut Stash<U>) -> Chunk<U> {
        let file = &self.file;
        let storage = &file.storage;
        let words = file
            .reader
            .read(self.range.clone())
            .unwrap_or_else(|error| storage.fail(error));
        storage.note_read(self.range.end - self.range.start);
        let damaged = |what: &str| {
            let what = format!("spilled chunk {} {what}", self.index);
            StorageError::corrupt(file.reader.path(), what)
        };
        if crc32c::crc32c(bytemuck::cast_slice(&words)) != self.crc {
            storage.fail(damaged("fails its checksum"));
        }
        let Some(view) = decode::<U>(&words) else {
            storage.fail(damaged("does not decode"));
        };
        if view.len() != self.len {
            storage.fail(damaged("holds the wrong number of updates"));
        }
        stash.copy_of(view)
    }
}

/// A chunk's four columns, borrowed.
type Columns<'a, U> = (
    BorrowedOf<'a, <U as Update>::Key>,
    BorrowedOf<'a, <U as Update>::Val>,
    BorrowedOf<'a, <U as Update>::Time>,
    BorrowedOf<'a, <U as Update>::Diff>,
);

/// The view of a chunk's encoding, if `words` hold one of `U`'s columns of equal lengths.
fn decode<U: Update>(words: &[u64]) -> Option<UpdatesView<'_, U>> {
    let mut slices = indexed::decode(words);
    let (keys, vals, times, diffs): Columns<'_, U> = FromBytes::from_bytes(&mut slices);
    let view = UpdatesView::<U> {
        keys,
        vals,
        times,
        diffs,
    };
    use columnar::Len;
    let len = view.keys.len();
    (view.vals.len() == len && view.times.len() == len && view.diffs.len() == len).then_some(view)
}

/// A spill file being written, chunk after chunk.
pub(crate) struct SpillWriter {
    storage: Arc<Storage>,
    id: u64,
    name: String,
    file: Box<dyn FileWriter>,
    written: u64,
    /// What each chunk written so far will be, but for the file.
    chunks: Vec<(Range<u64>, u32, usize, usize)>,
    words: Vec<u64>,
}

impl SpillWriter {
    /// Starts a new spill file of `storage`; a failure unwinds the worker.
    pub(crate) fn new(storage: &Arc<Storage>) -> Self {
        let (id, _) = storage.new_file();
        let name = format!("chunks-{id:08}.rpl");
        let file = storage
            .store()
            .create(&name)
            .unwrap_or_else(|error| storage.fail(error));
        Self {
            storage: Arc::clone(storage),
            id,
            name,
            file,
            written: 0,
            chunks: Vec::new(),
            words: Vec::new(),
        }
    }

    /// Appends `chunk` to the file.
    pub(crate) fn write<U: Update>(&mut self, chunk: &Chunk<U>) {
        let view = chunk.view();
        self.words.clear();
        indexed::encode(
            &mut self.words,
            &(view.keys, view.vals, view.times, view.diffs),
        );
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        if let Err(error) = self.file.append(bytes) {
            self.storage.fail(error);
        }
        let start = self.written;
        self.written += bytes.len() as u64;
        let crc = crc32c::crc32c(bytes);
        self.chunks
            .push((start..self.written, crc, chunk.len(), chunk.byte_len()));
    }

    /// Publishes the file and returns its chunks, in the order written. A file of no chunks
    /// is not kept.
    pub(crate) fn finish(self) -> Vec<StoredChunk> {
        let Self {
            storage,
            id,
            name,
            file,
            written,
            chunks,
            ..
        } = self;
        if chunks.is_empty() {
            // Dropped unfinished, the writer leaves nothing.
            return Vec::new();
        }
        if let Err(error) = file.finish() {
            storage.fail(error);
        }
        storage.note_written(written);
        let reader = match storage.store().open(&name) {
            Ok(reader) => reader,
            Err(error) => {
                let _ = storage.store().delete(&name);
                storage.fail(error)
            }
        };
        let file = Arc::new(SpillFile {
            storage,
            id,
            name,
            reader,
        });
        chunks
            .into_iter()
            .enumerate()
            .map(|(index, (range, crc, len, byte_len))| StoredChunk {
                file: Arc::clone(&file),
                range,
                crc,
                index,
                len,
                byte_len,
            })
            .collect()
    }
}
