//! The batch file format: a batch's columns in checksummed blocks, indexed by a footer.
//!
//! ```text
//! file    := block* footer trailer          (every part a whole number of 8-byte words)
//! block   := ripple_trace::block of the batch's columns for a run of whole keys
//! footer  := columnar indexed frame of (block offsets, block CRC-32Cs, each block's first key,
//!            each block's last key, (lower, upper, since), [updates, keys])
//! trailer := [footer words, CRC-32C of the footer << 32 | version, magic]   (three u64s)
//! ```
//!
//! A reader opens a file by its trailer: the magic and version say it is a batch file this
//! code can read, the footer's checksum that the index is intact. Each block is read on its own
//! ([`BatchFile::block`]) and checked against its checksum before it is decoded, so a flipped
//! byte anywhere is an error naming the file and the block, never a wrong output or a panic.
//! The footer's key range of each block lets a reader go to the blocks a key can be in. Words
//! are stored in the machine's byte order (little-endian on every target ripple builds for).

use crate::error::StorageError;
use crate::store::FileStore;
use columnar::bytes::indexed;
use columnar::{Borrow, BorrowedOf, Columnar, Container, ContainerOf, FromBytes, Index, Len, Push};
use ripple_trace::{block, Batch, BatchView, Builder, Description};
use ripple_updates::{Antichain, Update};
use std::path::PathBuf;

/// The first eight bytes of a batch file's last word: `RPLBATCH`.
const MAGIC: u64 = u64::from_le_bytes(*b"RPLBATCH");

/// The format version this code writes and reads.
const VERSION: u32 = 1;

/// The trailer's length in words, and in bytes.
const TRAILER_WORDS: usize = 3;
const TRAILER_BYTES: u64 = TRAILER_WORDS as u64 * 8;

/// The footer's columns (see the module documentation).
type Footer<'a, K, T> = (
    &'a [u64],
    &'a [u32],
    BorrowedOf<'a, K>,
    BorrowedOf<'a, K>,
    (BorrowedOf<'a, T>, BorrowedOf<'a, T>, BorrowedOf<'a, T>),
    &'a [u64],
);

/// The CRC-32C of `words` as stored.
fn checksum(words: &[u64]) -> u32 {
    crc32c::crc32c(bytemuck::cast_slice(words))
}

/// Writes `batch` as the batch file `name` in `store`, in blocks of whole keys holding about
/// `block_updates` updates each (at least one key per block). Returns the file's length in
/// bytes. On error no file of that name is left (see [`FileStore::write`]).
pub fn write_batch<U: Update, S: FileStore + ?Sized>(
    store: &S,
    name: &str,
    batch: &Batch<U>,
    block_updates: usize,
) -> Result<u64, StorageError> {
    let description = batch.description();
    let mut words: Vec<u64> = Vec::new();
    let mut offsets = vec![0u64];
    let mut crcs: Vec<u32> = Vec::new();
    let mut first_keys = ContainerOf::<U::Key>::default();
    let mut last_keys = ContainerOf::<U::Key>::default();
    let mut builder = Builder::<U>::new();
    let mut history: Vec<(U::Time, U::Diff)> = Vec::new();
    let mut cursor = batch.cursor();
    while let Some(key) = cursor.get_key() {
        if builder.is_empty() {
            first_keys.push(key);
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
        if builder.len() >= block_updates.max(1) || cursor.get_key().is_none() {
            last_keys.push(key);
            let start = words.len();
            block::encode(builder.build(description.clone()).view(), &mut words);
            crcs.push(checksum(&words[start..]));
            offsets.push(words.len() as u64 * 8);
        }
    }
    let counts = [batch.len() as u64, batch.key_count() as u64];
    let lower = column_of::<U::Time>(description.lower.elements());
    let upper = column_of::<U::Time>(description.upper.elements());
    let since = column_of::<U::Time>(description.since.elements());
    let footer: Footer<'_, U::Key, U::Time> = (
        &offsets,
        &crcs,
        first_keys.borrow(),
        last_keys.borrow(),
        (lower.borrow(), upper.borrow(), since.borrow()),
        &counts,
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

/// An open batch file: its index and description, read once; blocks are read on demand.
pub struct BatchFile<'s, U: Update, S: FileStore + ?Sized> {
    store: &'s S,
    name: String,
    /// Byte offsets of the blocks: block `i` is `offsets[i]..offsets[i + 1]`.
    offsets: Vec<u64>,
    crcs: Vec<u32>,
    first_keys: ContainerOf<U::Key>,
    last_keys: ContainerOf<U::Key>,
    description: Description<U::Time>,
    updates: u64,
}

impl<'s, U: Update, S: FileStore + ?Sized> BatchFile<'s, U, S> {
    /// Opens the batch file `name` of `store`: checks its trailer and its footer's checksum
    /// and layout, and reads the index.
    pub fn open(store: &'s S, name: &str) -> Result<Self, StorageError> {
        let path = store.path(name);
        let corrupt = |what: String| StorageError::corrupt(&path, what);
        let len = store.len(name)?;
        if len % 8 != 0 || len < TRAILER_BYTES {
            return Err(corrupt(format!("{len} bytes is not a batch file")));
        }
        let trailer = store.read(name, len - TRAILER_BYTES..len)?;
        let [footer_words, crc_and_version, magic] = trailer[..] else {
            unreachable!("three words were read")
        };
        if magic != MAGIC {
            return Err(corrupt("not a batch file (wrong magic number)".into()));
        }
        let version = crc_and_version as u32;
        if version != VERSION {
            return Err(corrupt(format!(
                "batch file version {version}; this ripple reads version {VERSION}"
            )));
        }
        let footer_bytes = footer_words
            .checked_mul(8)
            .filter(|&b| b <= len - TRAILER_BYTES);
        let Some(footer_bytes) = footer_bytes else {
            return Err(corrupt(format!(
                "footer of {footer_words} words does not fit"
            )));
        };
        let footer_start = len - TRAILER_BYTES - footer_bytes;
        let words = store.read(name, footer_start..len - TRAILER_BYTES)?;
        if checksum(&words) != (crc_and_version >> 32) as u32 {
            return Err(corrupt("footer: checksum mismatch".into()));
        }
        Self::from_footer(store, name, &words, footer_start)
            .map_err(|what| corrupt(format!("footer: {what}")))
    }

    /// The file's index from its footer's words (checksummed), which start at byte
    /// `footer_start`.
    fn from_footer(
        store: &'s S,
        name: &str,
        words: &[u64],
        footer_start: u64,
    ) -> Result<Self, String> {
        indexed::validate::<Footer<'_, U::Key, U::Time>>(words)?;
        let decoded = indexed::DecodedStore::new(words);
        let (offsets, crcs, first_keys, last_keys, (lower, upper, since), counts) =
            <Footer<'_, U::Key, U::Time> as FromBytes>::from_store(&decoded, &mut 0);
        let blocks = crcs.len();
        let consistent = offsets.len() == blocks + 1
            && first_keys.len() == blocks
            && last_keys.len() == blocks
            && counts.len() == 2
            && offsets.first() == Some(&0)
            && offsets.last() == Some(&footer_start)
            && offsets.windows(2).all(|w| w[0] < w[1] && w[1] % 8 == 0);
        if !consistent {
            return Err(format!(
                "an index of {blocks} blocks that does not fit the file"
            ));
        }
        let antichain = |times: BorrowedOf<'_, U::Time>| -> Antichain<U::Time> {
            (0..times.len())
                .map(|i| U::Time::into_owned(times.get(i)))
                .collect()
        };
        Ok(Self {
            store,
            name: name.to_string(),
            offsets: offsets.to_vec(),
            crcs: crcs.to_vec(),
            first_keys: owned::<U::Key>(first_keys),
            last_keys: owned::<U::Key>(last_keys),
            description: Description::with_since(
                antichain(lower),
                antichain(upper),
                antichain(since),
            ),
            updates: counts[0],
        })
    }

    /// The path of the file, for messages.
    pub fn path(&self) -> PathBuf {
        self.store.path(&self.name)
    }

    /// The batch's description.
    pub fn description(&self) -> &Description<U::Time> {
        &self.description
    }

    /// The number of updates in the batch.
    pub fn len(&self) -> u64 {
        self.updates
    }

    /// True when the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.updates == 0
    }

    /// The number of blocks.
    pub fn block_count(&self) -> usize {
        self.crcs.len()
    }

    /// The first and last key of block `index`.
    pub fn key_range(
        &self,
        index: usize,
    ) -> (columnar::Ref<'_, U::Key>, columnar::Ref<'_, U::Key>) {
        (
            self.first_keys.borrow().get(index),
            self.last_keys.borrow().get(index),
        )
    }

    /// Reads block `index` and checks it: its checksum, then its layout.
    pub fn block(&self, index: usize) -> Result<Block<U>, StorageError> {
        let range = self.offsets[index]..self.offsets[index + 1];
        let words = self.store.read(&self.name, range)?;
        let corrupt = |what: String| StorageError::corrupt(self.path(), what);
        if checksum(&words) != self.crcs[index] {
            return Err(corrupt(format!("block {index}: checksum mismatch")));
        }
        let view_is_valid = block::decode::<U>(&words).map(|_| ());
        view_is_valid.map_err(|what| corrupt(format!("block {index}: {what}")))?;
        Ok(Block {
            words,
            marker: std::marker::PhantomData,
        })
    }
}

/// A block read from a batch file, checked: its columns are read in place through
/// [`Block::view`].
pub struct Block<U: Update> {
    words: Vec<u64>,
    marker: std::marker::PhantomData<U>,
}

impl<U: Update> Block<U> {
    /// The block's columns, pointing into its words.
    pub fn view(&self) -> BatchView<'_, U> {
        block::decode::<U>(&self.words).expect("a block is checked when it is read")
    }

    /// The block's size in bytes.
    pub fn byte_len(&self) -> usize {
        self.words.len() * 8
    }
}

/// An owned copy of a borrowed column.
fn owned<C: Columnar>(column: BorrowedOf<'_, C>) -> ContainerOf<C> {
    let mut owned = ContainerOf::<C>::default();
    owned.extend_from_self(column, 0..column.len());
    owned
}

/// `items` as a column.
fn column_of<C: Columnar>(items: &[C]) -> ContainerOf<C> {
    let mut column = ContainerOf::<C>::default();
    for item in items {
        column.push(item);
    }
    column
}
