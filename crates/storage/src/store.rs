//! Where batch files live: a small interface of whole-file writes, ranged reads and deletes.
//!
//! Batch files are immutable, so three calls serve: write a file whole (atomically: readers
//! see all of it or none), read a range of one, delete one. [`LocalDir`] serves them from a
//! directory. An object store (S3 and the like) offers the same three, which is why the
//! storage tier goes through [`FileStore`] rather than `std::fs`.

use crate::error::StorageError;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The calls the storage tier makes of the place its files live.
pub trait FileStore {
    /// Writes the file `name` as the concatenation of `parts`, replacing any file of that
    /// name. On error no file of that name is left half-written, and no temporary file stays.
    fn write(&self, name: &str, parts: &[&[u8]]) -> Result<(), StorageError>;

    /// The bytes `range` of the file `name`, as 8-byte words: `range` must start and end on a
    /// multiple of 8 within the file.
    fn read(&self, name: &str, range: Range<u64>) -> Result<Vec<u64>, StorageError>;

    /// The length of the file `name` in bytes.
    fn len(&self, name: &str) -> Result<u64, StorageError>;

    /// Removes the file `name`.
    fn delete(&self, name: &str) -> Result<(), StorageError>;

    /// The path to name in messages about the file `name`.
    fn path(&self, name: &str) -> PathBuf;
}

/// Batch files in a local directory.
#[derive(Clone, Debug)]
pub struct LocalDir {
    root: PathBuf,
}

impl LocalDir {
    /// The directory `root`, which must exist and be writable.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, StorageError> {
        let root = root.into();
        let metadata = fs::metadata(&root).map_err(|e| StorageError::io(&root, e))?;
        if !metadata.is_dir() {
            let error = std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory");
            return Err(StorageError::io(&root, error));
        }
        Ok(Self { root })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn write_to(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
        let mut file = File::create(path)?;
        for part in parts {
            file.write_all(part)?;
        }
        file.sync_all()
    }
}

impl FileStore for LocalDir {
    fn write(&self, name: &str, parts: &[&[u8]]) -> Result<(), StorageError> {
        let path = self.path(name);
        // Written beside its final name and renamed into place: a reader never sees a part.
        let temporary = self.root.join(format!(".{name}.partial"));
        let written =
            Self::write_to(&temporary, parts).and_then(|()| fs::rename(&temporary, &path));
        written.map_err(|error| {
            let _ = fs::remove_file(&temporary);
            StorageError::io(&path, error)
        })
    }

    fn read(&self, name: &str, range: Range<u64>) -> Result<Vec<u64>, StorageError> {
        let path = self.path(name);
        if !range.start.is_multiple_of(8) || !range.end.is_multiple_of(8) || range.end < range.start
        {
            let what = format!("bytes {range:?} are not a range of 8-byte words");
            return Err(StorageError::corrupt(&path, what));
        }
        let mut words = vec![0u64; ((range.end - range.start) / 8) as usize];
        let read = File::open(&path).and_then(|mut file| {
            file.seek(SeekFrom::Start(range.start))?;
            file.read_exact(bytemuck::cast_slice_mut(&mut words))
        });
        read.map_err(|error| StorageError::io(&path, error))?;
        Ok(words)
    }

    fn len(&self, name: &str) -> Result<u64, StorageError> {
        let path = self.path(name);
        let metadata = fs::metadata(&path).map_err(|e| StorageError::io(&path, e))?;
        Ok(metadata.len())
    }

    fn delete(&self, name: &str) -> Result<(), StorageError> {
        let path = self.path(name);
        fs::remove_file(&path).map_err(|e| StorageError::io(&path, e))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}
