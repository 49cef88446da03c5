//! Ripple's columnar merge batcher.
//!
//! The batcher is where updates arrive in no particular order and leave sorted, consolidated and
//! split by time. It is built from small parts, each in its own module:
//!
//! - [`chunk`]: a [`Chunk`] is a bounded, sorted, consolidated columnar run; the [`ChunkWriter`]
//!   fills chunks to a byte size and the [`Stash`] recycles their allocations.
//! - [`chain`]: a [`Chain`] is a sorted sequence of chunks, in memory or in spill files.
//! - [`spill`]: chains written out when the process is over its memory budget.
//! - [`chunker`]: unsorted input to sorted chains.
//! - [`merger`]: two chains to one, galloping through runs, passing whole chunks through.
//! - [`extract`]: one chain to two, by a frontier.
//! - [`batcher`]: the [`MergeBatcher`] that composes them with a geometric ladder of chains.
//!
//! The batcher knows times and frontiers but nothing of timely's dataflow types; the arrange
//! operator composes it with the trace.
//!
//! ```
//! use ripple_batcher::{BatcherConfig, MergeBatcher};
//! use ripple_updates::{Antichain, Updates};
//!
//! // Updates (key, val, time, diff); any order, any number of pushes.
//! let mut batcher = MergeBatcher::<(u64, String, u64, i64)>::new(BatcherConfig::default());
//! let rows = vec![(1, "a".to_string(), 3, 1), (1, "a".to_string(), 0, 1), (2, "b".to_string(), 1, -1)];
//! batcher.push_updates(&Updates::from_rows(rows.iter()));
//!
//! // Everything at times not >= 2 comes out sorted and consolidated; the rest stays.
//! let sealed = batcher.seal(Antichain::from_elem(2).borrow());
//! assert_eq!(sealed.len(), 2);
//! assert_eq!(batcher.frontier().to_owned(), Antichain::from_elem(3));
//! ```

pub mod batcher;
pub mod chain;
pub mod chunk;
pub mod chunker;
pub mod extract;
pub mod merger;
pub mod spill;

pub use batcher::{BatcherConfig, MergeBatcher};
pub use chain::Chain;
pub use chunk::{Chunk, ChunkWriter, Stash};
pub use chunker::Chunker;
