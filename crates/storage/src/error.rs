//! Storage errors: every one names the file, and a block's names the block.

use std::path::PathBuf;

/// Why a storage call failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The file system refused: missing file, no space, no permission.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not an intact batch file of the expected types.
    #[error("{}: {what}", path.display())]
    Corrupt { path: PathBuf, what: String },
}

impl StorageError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A damaged or foreign file at `path`, and what is wrong with it.
    pub fn corrupt(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self::Corrupt {
            path: path.into(),
            what: what.into(),
        }
    }
}
