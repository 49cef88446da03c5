//! Where files live: a small interface of whole-file writes, ranged reads and deletes.
//!
//! Batch files are immutable, so three calls serve: create a file by appending to it, and
//! publish it whole when it is complete (readers see all of it or none); open one to read
//! ranges of it; delete one. [`LocalDir`] serves them from a directory, appending to a
//! temporary file that is renamed into place, and reading with positioned reads (`pread`) on
//! a file kept open. An object store (S3 and the like) offers the same (a multipart upload
//! completed at the end, ranged gets, a delete), which is why the storage tier goes through
//! [`FileStore`] rather than `std::fs`.

use crate::error::StorageError;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The calls the storage tier makes of the place its files live.
pub trait FileStore: Send + Sync {
    /// Starts writing the file `name`, which appears, replacing any file of that name, only
    /// when the writer is finished ([`FileWriter::finish`]). A writer dropped unfinished, or
    /// one that failed, leaves no file of that name and nothing of what it wrote.
    fn create(&self, name: &str) -> Result<Box<dyn FileWriter>, StorageError>;

    /// Writes the file `name` whole, as the concatenation of `parts` (see
    /// [`FileStore::create`]).
    fn write(&self, name: &str, parts: &[&[u8]]) -> Result<(), StorageError> {
        let mut writer = self.create(name)?;
        for part in parts {
            writer.append(part)?;
        }
        writer.finish()
    }

    /// Opens the file `name` for reading.
    fn open(&self, name: &str) -> Result<Box<dyn FileReader>, StorageError>;

    /// Removes the file `name`.
    fn delete(&self, name: &str) -> Result<(), StorageError>;

    /// The path to name in messages about the file `name`.
    fn path(&self, name: &str) -> PathBuf;
}

/// A file being written: bytes are appended, and the file is published whole by
/// [`FileWriter::finish`]. Dropped unfinished, it removes what it wrote.
pub trait FileWriter: Send {
    /// Appends `bytes` to the file.
    fn append(&mut self, bytes: &[u8]) -> Result<(), StorageError>;

    /// Makes the file visible under its name, complete. On error nothing stays.
    fn finish(self: Box<Self>) -> Result<(), StorageError>;
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
    /// Whether a finished file is synced to the device before it is published (durable
    /// state); spilled files are not (they live for one run).
    sync: bool,
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
        Ok(Self { root, sync: false })
    }

    /// Like [`LocalDir::new`], syncing every file to the device before its rename publishes
    /// it: a file seen under its name after a crash is whole, once the directory itself is
    /// synced ([`LocalDir::sync_dir`]).
    pub fn durable(root: impl Into<PathBuf>) -> Result<Self, StorageError> {
        Ok(Self {
            sync: true,
            ..Self::new(root)?
        })
    }

    /// Syncs the directory's entries (the renames that published files, the deletes) to the
    /// device.
    pub fn sync_dir(&self) -> Result<(), StorageError> {
        File::open(&self.root)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| StorageError::io(&self.root, e))
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl FileStore for LocalDir {
    fn create(&self, name: &str) -> Result<Box<dyn FileWriter>, StorageError> {
        let path = self.path(name);
        // Written beside its final name and renamed into place: a reader never sees a part.
        let temporary = self.root.join(format!(".{name}.partial"));
        let file = File::create(&temporary).map_err(|e| StorageError::io(&path, e))?;
        Ok(Box::new(LocalWriter {
            file: Some(BufWriter::with_capacity(LocalWriter::BUFFER, file)),
            temporary,
            path,
            sync: self.sync,
        }))
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

/// A file of a [`LocalDir`] being written, under a temporary name until it is finished.
struct LocalWriter {
    /// `None` once finished or failed.
    file: Option<BufWriter<File>>,
    temporary: PathBuf,
    path: PathBuf,
    /// Sync the file before publishing it ([`LocalDir::durable`]).
    sync: bool,
}

impl LocalWriter {
    /// Bytes gathered before a write call: blocks of some kilobytes each go out a few dozen
    /// at a time.
    const BUFFER: usize = 256 << 10;

    /// Removes the temporary file and makes `error` about the file's name.
    fn fail(&mut self, error: std::io::Error) -> StorageError {
        self.file = None;
        let _ = fs::remove_file(&self.temporary);
        StorageError::io(&self.path, error)
    }
}

impl FileWriter for LocalWriter {
    fn append(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        let Some(file) = self.file.as_mut() else {
            let error = std::io::Error::other("written to after it failed or was finished");
            return Err(StorageError::io(&self.path, error));
        };
        match file.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(error) => Err(self.fail(error)),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<(), StorageError> {
        let Some(file) = self.file.take() else {
            let error = std::io::Error::other("finished after it failed");
            return Err(StorageError::io(&self.path, error));
        };
        // Spilled files are not synced: they live for one run, and the page cache serves them
        // until they are deleted. Durable ones are, before the rename can publish them.
        let sync = self.sync;
        let done = file
            .into_inner()
            .map_err(|error| error.into_error())
            .and_then(|file| if sync { file.sync_all() } else { Ok(()) })
            .and_then(|()| fs::rename(&self.temporary, &self.path));
        done.map_err(|error| self.fail(error))
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        // Unfinished (dropped while a merge was unwinding, say): nothing of it stays. A
        // failed or finished writer has no temporary file left.
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.temporary);
        }
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
