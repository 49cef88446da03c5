//! Where files live: a small interface of whole-file writes, ranged reads and deletes.
//!
//! Batch files are immutable, so three calls serve: write a file whole (atomically: readers
//! see all of it or none), open one to read ranges of it, delete one. [`LocalDir`] serves them
//! from a directory, reading with positioned reads (`pread`) on a file kept open. An object
//! store (S3 and the like) offers the same three (a put, ranged gets, a delete), which is why
//! the storage tier goes through [`FileStore`] rather than `std::fs`.

use crate::error::StorageError;
use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The calls the storage tier makes of the place its files live.
pub trait FileStore: Send + Sync {
    /// Writes the file `name` as the concatenation of `parts`, replacing any file of that
    /// name. On error no file of that name is left half-written, and no temporary file stays.
    fn write(&self, name: &str, parts: &[&[u8]]) -> Result<(), StorageError>;

    /// Opens the file `name` for reading.
    fn open(&self, name: &str) -> Result<Box<dyn FileReader>, StorageError>;

    /// Removes the file `name`.
    fn delete(&self, name: &str) -> Result<(), StorageError>;

    /// The path to name in messages about the file `name`.
    fn path(&self, name: &str) -> PathBuf;
}

/// An open file: its length, and ranges of it as 8-byte words.
pub trait FileReader: Send + Sync {
    /// The file's length in bytes.
    fn len(&self) -> u64;

    /// True for a file of no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes `range` of the file, as 8-byte words: `range` must start and end on a
    /// multiple of 8 within the file.
    fn read(&self, range: Range<u64>) -> Result<Vec<u64>, StorageError>;

    /// The path to name in messages.
    fn path(&self) -> &Path;
}

/// Files in a local directory.
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
        // No fsync: spilled files live for one run, and the page cache serves them until
        // they are deleted (durable state is issue #53's checkpoints, which sync).
        file.flush()
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

    fn open(&self, name: &str) -> Result<Box<dyn FileReader>, StorageError> {
        let path = self.path(name);
        let file = File::open(&path).map_err(|e| StorageError::io(&path, e))?;
        let len = file
            .metadata()
            .map_err(|e| StorageError::io(&path, e))?
            .len();
        Ok(Box::new(LocalFile { file, len, path }))
    }

    fn delete(&self, name: &str) -> Result<(), StorageError> {
        let path = self.path(name);
        fs::remove_file(&path).map_err(|e| StorageError::io(&path, e))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// A file of a [`LocalDir`], open for positioned reads.
struct LocalFile {
    file: File,
    len: u64,
    path: PathBuf,
}

impl FileReader for LocalFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, range: Range<u64>) -> Result<Vec<u64>, StorageError> {
        let aligned = range.start.is_multiple_of(8) && range.end.is_multiple_of(8);
        if !aligned || range.end < range.start || range.end > self.len {
            let what = format!(
                "bytes {range:?} are not a range of 8-byte words of a file of {} bytes",
                self.len
            );
            return Err(StorageError::corrupt(&self.path, what));
        }
        let mut words = vec![0u64; ((range.end - range.start) / 8) as usize];
        let read = self
            .file
            .read_exact_at(bytemuck::cast_slice_mut(&mut words), range.start);
        read.map_err(|error| StorageError::io(&self.path, error))?;
        Ok(words)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
