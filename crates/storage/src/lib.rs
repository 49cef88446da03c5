//! Ripple's storage tier, the layer under the trace: files of 8-byte words, a block cache and
//! a memory budget. It knows nothing of batches; the batch file format lives in
//! `ripple_trace::file`, on top of it.
//!
//! - [`store`]: where files live, behind three calls (create a file by appending and publish
//!   it whole, open one and read ranges of it, delete one): [`LocalDir`], a directory, is the one implementation; an
//!   object store could serve the same calls.
//! - [`cache`]: [`BlockCache`], blocks in memory within a byte budget, handed out as
//!   reference-counted [`Block`]s that readers pin while they point into them.
//! - [`held`]: [`HeldBytes`], an operator's report of what it keeps in memory beside batches.
//! - [`spill`]: [`SpillDir`], a run's own directory, removed when the run ends.
//! - [`tier`]: [`Storage`], one per process: the store, the cache, the budget that decides
//!   when spines write batches out, the counters, and the first error of the run.
//! - [`error`]: what can go wrong, always naming the file (and the block).

pub mod cache;
pub mod error;
pub mod held;
pub mod spill;
pub mod store;
pub mod tier;

pub use cache::{Block, BlockCache, BlockKey, CacheStats};
pub use error::StorageError;
pub use held::HeldBytes;
pub use spill::SpillDir;
pub use store::{FileReader, FileStore, FileWriter, LocalDir};
pub use tier::{Storage, StorageFault, StorageSettings, StorageStats};
