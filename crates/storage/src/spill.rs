//! The spill directory of a run: a fresh directory of ripple's own, removed when dropped.
//!
//! Ripple never writes into a directory it did not make: under the directory a user names
//! (or the system's temporary directory) it makes `ripple-spill-<pid>-<n>`, keeps its files
//! there, and removes the whole directory when the run ends, on success or on error.

use crate::error::StorageError;
use crate::store::LocalDir;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory made for one run's files; dropping it removes it and all it holds.
#[derive(Debug)]
pub struct SpillDir {
    dir: LocalDir,
}

impl SpillDir {
    /// Makes a fresh directory under `parent`, which must exist and be writable.
    pub fn new_in(parent: &Path) -> Result<Self, StorageError> {
        LocalDir::new(parent)?;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("ripple-spill-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(Self {
                        dir: LocalDir::new(path)?,
                    })
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(StorageError::io(parent, error)),
            }
        }
    }

    /// Makes a fresh directory under the system's temporary directory.
    pub fn new_in_temp() -> Result<Self, StorageError> {
        Self::new_in(&std::env::temp_dir())
    }

    /// The directory, to write files in.
    pub fn dir(&self) -> &LocalDir {
        &self.dir
    }

    /// The directory's path.
    pub fn path(&self) -> PathBuf {
        self.dir.root().to_path_buf()
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.root());
    }
}
