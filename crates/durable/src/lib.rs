//! Durable state for ripple: input collections checkpointed into a state directory, and
//! recovery that is exact.
//!
//! A checkpoint at frontier `F` commits, atomically, a manifest naming the input collection
//! compacted to `F` (batch files of the storage tier's format) and whatever the application
//! records beside it (where its input and output stood at `F`). A restarted run rebuilds its
//! computation from that snapshot (rehydration: operator state is recomputed, never stored),
//! emits nothing for times below `F`, and goes on from the input's position at `F`.
//!
//! - [`manifest`]: the manifest's format, its atomic commit.
//! - [`state`]: [`StateDir`], the directory: lock, manifest, leftovers of a crash.
//! - [`checkpoints`]: [`Checkpoints`], changes since the last checkpoint written as batch
//!   files, merges of the snapshot, replay.
//! - [`input`]: [`DurableInput`], an input session with checkpoints.
//! - [`output`]: [`resume_file`], an output file cut back to its length at a checkpoint.

pub mod checkpoints;
mod error;
pub mod input;
pub mod manifest;
pub mod output;
pub mod state;

pub use checkpoints::{CheckpointStats, Checkpoints};
pub use error::DurableError;
pub use input::DurableInput;
pub use manifest::{Manifest, SnapshotFile};
pub use output::resume_file;
pub use state::StateDir;
