//! What can go wrong with a state directory, always naming the file.

use ripple_storage::StorageError;
use std::path::PathBuf;

/// A state directory could not be used, read or written.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// A file of the state directory could not be read or written (disk full, permissions).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file of the state directory is not what a checkpoint wrote: cut short, altered, or
    /// missing.
    #[error("{path}: {what}")]
    Damaged { path: PathBuf, what: String },
    /// A batch file of the snapshot could not be written or read.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Reading a batch file of the snapshot failed (a damaged block, a failed read).
    #[error("{0}")]
    Fault(String),
    /// A checkpoint was asked for while changes at or after its frontier were recorded.
    #[error("a checkpoint at frontier {frontier} would hold a change at time {time}; checkpoint once every change recorded is before the input's time")]
    Early { frontier: u64, time: u64 },
    /// The input refused a change (a time before its current time).
    #[error(transparent)]
    Input(#[from] ripple_dataflow::InputError),
    /// An earlier write of these checkpoints failed; open the directory again to resume from
    /// its last checkpoint.
    #[error("an earlier write of the state failed; the state resumes from its last checkpoint when opened again")]
    Broken,
    /// Another run holds the state directory.
    #[error("{path} is in use by another run (its LOCK is held)")]
    Locked { path: PathBuf },
}

impl DurableError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn damaged(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self::Damaged {
            path: path.into(),
            what: what.into(),
        }
    }
}
