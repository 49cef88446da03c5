//! Ripple's storage tier: immutable batches kept in files instead of on the heap.
//!
//! - [`store`]: where files live, behind three calls (write a file whole, read a range of
//!   one, delete one): [`LocalDir`], a directory, is the one implementation; an object store
//!   could serve the same calls.
//! - [`file`](mod@file): the batch file format. A batch is cut into blocks of whole keys; each block is
//!   the batch's columns for its keys, as `ripple_trace::block` lays them out, with a CRC-32C;
//!   a footer indexes the blocks (offsets, checksums, first and last keys) and holds the
//!   batch's description. [`BatchFile`] opens a file and reads a block back as a [`Block`],
//!   whose view points into the words read.
//! - [`error`]: what can go wrong, always naming the file (and the block).
//!
//! Corrupted, truncated or foreign files are errors, never panics: every block and the footer
//! are checksummed before they are decoded, and decoding checks the layout again.

pub mod error;
pub mod file;
pub mod store;

pub use error::StorageError;
pub use file::{write_batch, BatchFile, Block};
pub use store::{FileStore, LocalDir};
