//! Ripple's columnar merge batcher.
//!
//! The batcher is where updates arrive in no particular order and leave sorted, consolidated and
//! split by time. It is built from small parts, each in its own module:
//!
//! - [`chunk`]: a [`Chunk`] is a bounded, sorted, consolidated columnar run; the [`ChunkWriter`]
//!   fills chunks to a byte size and the [`Stash`] recycles their allocations.
//! - [`chain`]: a [`Chain`] is a sorted sequence of chunks.
//! - [`chunker`]: unsorted input to sorted chains.
//! - [`merger`]: two chains to one, galloping through runs, passing whole chunks through.
//! - [`extract`]: one chain to two, by a frontier.
//! - [`batcher`]: the [`MergeBatcher`] that composes them with a geometric ladder of chains.
//!
//! The batcher knows times and frontiers but nothing of timely's dataflow types; the arrange
//! operator composes it with the trace.

pub mod batcher;
pub mod chain;
pub mod chunk;
pub mod chunker;
pub mod extract;
pub mod merger;

pub use batcher::{BatcherConfig, MergeBatcher};
pub use chain::Chain;
pub use chunk::{Chunk, ChunkWriter, Stash};
pub use chunker::Chunker;
