//! The batch file format: a batch's columns in checksummed blocks, indexed by a footer.
//!
//! ```text
//! file    := block* footer trailer          (every part a whole number of 8-byte words)
//! block   := crate::block of the batch's columns for a run of whole keys
//! footer  := columnar indexed frame of (block offsets, block CRC-32Cs, each block's first key,
//!            each block's last key, each block's first key index, (lower, upper, since),
//!            [updates, keys, values], the key filters: each partition's first block,
//!            fingerprints' end, descriptor, and the fingerprints)
//! trailer := [footer words, CRC-32C of the footer << 32 | version, magic]   (three u64s)
//! ```
//!
//! A reader opens a file by its trailer: the magic and version say it is a batch file this
//! code can read, the footer's checksum that the index is intact. Each block is read on its own
//! ([`FileIndex::read_block`]) and checked against its checksum before it is decoded, so a
//! flipped byte anywhere is an error naming the file and the block, never a wrong output or a
//! panic. The footer's key range of each block lets a reader go to the blocks a key can be in
//! without reading any. Words are stored in the machine's byte order (little-endian on every
//! target ripple builds for).

use crate::block;
use crate::description::Description;
use crate::filter::{FilterParts, KeyFilter};
use columnar::bytes::indexed;
use columnar::{Borrow, BorrowedOf, Columnar, Container, ContainerOf, FromBytes, Index, Len};
use ripple_storage::{FileReader, StorageError};
use ripple_updates::{Antichain, Update};

/// The first eight bytes of a batch file's last word: `RPLBATCH`.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"RPLBATCH");

/// The format version this code writes and reads.
pub(crate) const VERSION: u32 = 2;

/// The trailer's length in words, and in bytes.
pub(crate) const TRAILER_WORDS: usize = 3;
const TRAILER_BYTES: u64 = TRAILER_WORDS as u64 * 8;

/// The footer's columns (see the module documentation).
pub(crate) type Footer<'a, K, T> = (
    (&'a [u64], &'a [u32]),
    (BorrowedOf<'a, K>, BorrowedOf<'a, K>, &'a [u64]),
    (BorrowedOf<'a, T>, BorrowedOf<'a, T>, BorrowedOf<'a, T>),
    &'a [u64],
    FilterParts<'a>,
);

/// The CRC-32C of `words` as stored.
pub(crate) fn checksum(words: &[u64]) -> u32 {
    crc32c::crc32c(bytemuck::cast_slice(words))
}

/// A batch's sizes, as its file's footer records them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub updates: usize,
    pub keys: usize,
    pub vals: usize,
}

/// A batch file's index and description, read once when it is opened; blocks are read on
/// demand with [`FileIndex::read_block`].
pub struct FileIndex<U: Update> {
    /// Byte offsets of the blocks: block `i` is `offsets[i]..offsets[i + 1]`.
    offsets: Vec<u64>,
    crcs: Vec<u32>,
    first_keys: ContainerOf<U::Key>,
    last_keys: ContainerOf<U::Key>,
    /// The index in the batch of each block's first key, and the key count last.
    key_starts: Vec<usize>,
    description: Description<U::Time>,
    counts: Counts,
    filter: KeyFilter,
}

impl<U: Update> FileIndex<U> {
    /// Reads the index of the batch file open in `reader`: checks its trailer, and its
    /// footer's checksum and layout.
    pub fn open(reader: &dyn FileReader) -> Result<Self, StorageError> {
        let corrupt = |what: String| StorageError::corrupt(reader.path(), what);
        let len = reader.len();
        if !len.is_multiple_of(8) || len < TRAILER_BYTES {
            return Err(corrupt(format!("{len} bytes is not a batch file")));
        }
        let trailer = reader.read(len - TRAILER_BYTES..len)?;
        let [footer_words, crc_and_version, magic] = trailer[..] else {
            return Err(corrupt("a short read of the trailer".into()));
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
        let words = reader.read(footer_start..len - TRAILER_BYTES)?;
        if checksum(&words) != (crc_and_version >> 32) as u32 {
            return Err(corrupt("footer: checksum mismatch".into()));
        }
        Self::from_footer(&words, footer_start).map_err(|what| corrupt(format!("footer: {what}")))
    }

    /// The index from its footer's words (checksummed), which start at byte `footer_start`.
    fn from_footer(words: &[u64], footer_start: u64) -> Result<Self, String> {
        indexed::validate::<Footer<'_, U::Key, U::Time>>(words)?;
        let decoded = indexed::DecodedStore::new(words);
        let (
            (offsets, crcs),
            (first_keys, last_keys, key_starts),
            (lower, upper, since),
            counts,
            filter_parts,
        ) = <Footer<'_, U::Key, U::Time> as FromBytes>::from_store(&decoded, &mut 0);
        let filter = KeyFilter::from_parts(filter_parts)
            .ok_or_else(|| "key filters of the wrong sizes".to_string())?;
        let blocks = crcs.len();
        if filter_parts
            .0
            .last()
            .is_some_and(|&first| first >= blocks as u64)
        {
            return Err("a key filter partition past the last block".to_string());
        }
        let consistent = offsets.len() == blocks + 1
            && first_keys.len() == blocks
            && last_keys.len() == blocks
            && key_starts.len() == blocks + 1
            && counts.len() == 3
            && key_starts.first() == Some(&0)
            && key_starts.last() == Some(&counts[1])
            && key_starts.windows(2).all(|w| w[0] < w[1])
            && offsets.first() == Some(&0)
            && offsets.last() == Some(&footer_start)
            && offsets
                .windows(2)
                .all(|w| w[0] < w[1] && w[1].is_multiple_of(8));
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
            offsets: offsets.to_vec(),
            crcs: crcs.to_vec(),
            first_keys: owned::<U::Key>(first_keys),
            last_keys: owned::<U::Key>(last_keys),
            key_starts: key_starts.iter().map(|&k| k as usize).collect(),
            description: Description::with_since(
                antichain(lower),
                antichain(upper),
                antichain(since),
            ),
            counts: Counts {
                updates: counts[0] as usize,
                keys: counts[1] as usize,
                vals: counts[2] as usize,
            },
            filter,
        })
    }

    /// The batch's description.
    pub fn description(&self) -> &Description<U::Time> {
        &self.description
    }

    /// The batch's sizes.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The batch's key filter (empty if it was written without one).
    pub fn filter(&self) -> &KeyFilter {
        &self.filter
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

    /// The index in the batch of block `index`'s first key (of `block_count()`: the key count).
    #[inline]
    pub fn key_start(&self, index: usize) -> usize {
        self.key_starts[index]
    }

    /// The block holding the batch's key `key` (a key index below the key count).
    pub fn block_of_key_index(&self, key: usize) -> usize {
        self.key_starts.partition_point(|&start| start <= key) - 1
    }

    /// The first block at or after `from` whose last key is `>= target` (the block count if
    /// none): the block where a search for `target` from block `from` lands.
    pub fn block_not_before(&self, from: usize, target: columnar::Ref<'_, U::Key>) -> usize {
        let last_keys = self.last_keys.borrow();
        let target = U::Key::reborrow(target);
        ripple_updates::search::gallop(from, self.block_count(), |index| {
            U::Key::reborrow(last_keys.get(index)) < target
        })
    }

    /// Heap bytes of the index.
    pub fn heap_bytes(&self) -> usize {
        use crate::columns::payload_bytes;
        self.offsets.capacity() * 8
            + self.crcs.capacity() * 4
            + self.key_starts.capacity() * 8
            + payload_bytes::<U::Key>(&self.first_keys)
            + payload_bytes::<U::Key>(&self.last_keys)
            + self.filter.heap_bytes()
    }

    /// Reads block `index` from `reader` and checks it: its checksum, then its layout.
    pub fn read_block(
        &self,
        reader: &dyn FileReader,
        index: usize,
    ) -> Result<Vec<u64>, StorageError> {
        let range = self.offsets[index]..self.offsets[index + 1];
        let words = reader.read(range)?;
        let corrupt = |what: String| StorageError::corrupt(reader.path(), what);
        if checksum(&words) != self.crcs[index] {
            return Err(corrupt(format!("block {index}: checksum mismatch")));
        }
        let view_is_valid = block::decode::<U>(&words).map(|_| ());
        view_is_valid.map_err(|what| corrupt(format!("block {index}: {what}")))?;
        Ok(words)
    }
}

/// An owned copy of a borrowed column.
fn owned<C: Columnar>(column: BorrowedOf<'_, C>) -> ContainerOf<C> {
    let mut owned = ContainerOf::<C>::default();
    owned.extend_from_self(column, 0..column.len());
    owned
}
