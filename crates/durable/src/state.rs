//! A state directory: its lock, its manifest, and the batch files the manifest names.
//!
//! [`StateDir::open`] creates the directory if need be, takes its `LOCK` (a second run on
//! the same directory is refused, not interleaved), reads the manifest, checks that every
//! file it names is there with its length, and removes what a crash left behind: batch files
//! no manifest names (written for a checkpoint that never committed), half-written files and
//! a manifest that was never renamed. Batch files are read and written through a storage tier
//! of their own over the directory, which syncs every file before publishing it.

use crate::error::DurableError;
use crate::manifest::{Manifest, MANIFEST, MANIFEST_TMP};
use ripple_storage::StorageSettings;
use ripple_storage::{FileReader, FileStore, FileWriter, LocalDir, Storage, StorageError};
use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The lock file's name.
const LOCK: &str = "LOCK";

/// The block cache for reading a snapshot back: blocks are read once, in order.
const CACHE_BYTES: usize = 4 << 20;

/// An open state directory (see the module documentation).
pub struct StateDir {
    path: PathBuf,
    store: LocalDir,
    storage: Arc<Storage>,
    /// Held while the directory is open; the lock goes with it.
    _lock: File,
    /// The last manifest committed (found at opening, or written since).
    manifest: Option<Manifest>,
}

impl std::fmt::Debug for StateDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateDir")
            .field("path", &self.path)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl StateDir {
    /// Opens the state directory `path`, creating it if it does not exist (see the module
    /// documentation).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, DurableError> {
        Self::open_with_limit(path, None)
    }

    /// Like [`StateDir::open`]; with a `limit`, batch files fail to be written as on a full
    /// disk once this process has written `limit` bytes of them (fault tests).
    pub fn open_with_limit(
        path: impl Into<PathBuf>,
        limit: Option<u64>,
    ) -> Result<Self, DurableError> {
        let path = path.into();
        std::fs::create_dir_all(&path).map_err(|error| DurableError::io(&path, error))?;
        let lock_path = path.join(LOCK);
        let lock = File::create(&lock_path).map_err(|error| DurableError::io(&lock_path, error))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(DurableError::Locked { path }),
            Err(std::fs::TryLockError::Error(error)) => {
                return Err(DurableError::io(lock_path, error))
            }
        }
        let store = LocalDir::durable(&path)?;
        let manifest = Manifest::load(&path)?;
        // Snapshot files are read whole (replay, merges), never probed: no key filters, whose
        // building took about a third of a checkpoint's instructions.
        let settings = StorageSettings {
            cache_bytes: CACHE_BYTES,
            filters: false,
            ..StorageSettings::with_budget(CACHE_BYTES)
        };
        let files: Box<dyn FileStore> = match limit {
            None => Box::new(store.clone()),
            Some(limit) => Box::new(Limited {
                inner: store.clone(),
                left: Arc::new(AtomicU64::new(limit)),
            }),
        };
        let storage = Arc::new(Storage::with_store(files, None, settings));
        let state = Self {
            path,
            store,
            storage,
            _lock: lock,
            manifest,
        };
        state.check_files()?;
        state.remove_leftovers()?;
        Ok(state)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last manifest committed: `None` for a directory without a checkpoint.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// The storage tier over the directory's batch files.
    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// The directory's store (files synced before they are published).
    pub fn store(&self) -> &LocalDir {
        &self.store
    }

    /// Commits `manifest` (see [`Manifest::commit`]; `before_rename` is a test's crash
    /// point), then deletes the batch files the previous manifest named, and those of
    /// `written` (files written since), that this one does not name. Files written for
    /// `manifest` must be whole already: the directory is synced first, so that their names
    /// are durable before the manifest that names them.
    pub fn commit(
        &mut self,
        manifest: Manifest,
        written: &[String],
        before_rename: impl FnOnce(),
    ) -> Result<(), DurableError> {
        self.store.sync_dir()?;
        manifest.commit(&self.path, before_rename)?;
        let previous = self.manifest.replace(manifest);
        let live: BTreeSet<&str> = self.live_names().collect();
        let named = previous.iter().flat_map(|previous| &previous.files);
        let names = named.map(|file| &file.name).chain(written);
        for name in names {
            if !live.contains(name.as_str()) {
                let path = self.path.join(name);
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    // Gone already (an earlier commit got this far, then failed).
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(DurableError::io(path, error)),
                }
            }
        }
        Ok(())
    }

    /// The names of the batch files the committed manifest holds.
    fn live_names(&self) -> impl Iterator<Item = &str> {
        self.manifest
            .iter()
            .flat_map(|manifest| &manifest.files)
            .map(|file| file.name.as_str())
    }

    /// Checks that every file the manifest names is there, at its length.
    fn check_files(&self) -> Result<(), DurableError> {
        for file in self.manifest.iter().flat_map(|manifest| &manifest.files) {
            let path = self.path.join(&file.name);
            let length = match std::fs::metadata(&path) {
                Ok(metadata) => metadata.len(),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return Err(DurableError::damaged(
                        &path,
                        "a batch file the manifest names is missing",
                    ))
                }
                Err(error) => return Err(DurableError::io(path, error)),
            };
            if length != file.bytes {
                return Err(DurableError::damaged(
                    &path,
                    format!(
                        "{length} bytes, but the manifest says {} (the file was cut or replaced)",
                        file.bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Removes what a crash left (see the module documentation), and numbers new batch files
    /// after every file there.
    fn remove_leftovers(&self) -> Result<(), DurableError> {
        let live: BTreeSet<&str> = self.live_names().collect();
        let entries =
            std::fs::read_dir(&self.path).map_err(|error| DurableError::io(&self.path, error))?;
        let mut next = 0;
        for entry in entries {
            let entry = entry.map_err(|error| DurableError::io(&self.path, error))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = Storage::file_number(&name);
            if let Some(number) = number {
                next = next.max(number + 1);
            }
            let leftover = (number.is_some() && !live.contains(name.as_str()))
                || (name.starts_with('.') && name.ends_with(".partial"))
                || name == MANIFEST_TMP;
            if leftover {
                let path = entry.path();
                std::fs::remove_file(&path).map_err(|error| DurableError::io(path, error))?;
            }
        }
        self.storage.number_files_from(next);
        debug_assert!(live.is_empty() || self.path.join(MANIFEST).exists());
        Ok(())
    }
}

/// A store that refuses writes, as a full disk does, once it has written its bytes
/// ([`StateDir::open_with_limit`]).
struct Limited {
    inner: LocalDir,
    left: Arc<AtomicU64>,
}

struct LimitedWriter {
    inner: Box<dyn FileWriter>,
    left: Arc<AtomicU64>,
    path: PathBuf,
}

impl FileStore for Limited {
    fn create(&self, name: &str) -> Result<Box<dyn FileWriter>, StorageError> {
        Ok(Box::new(LimitedWriter {
            inner: self.inner.create(name)?,
            left: Arc::clone(&self.left),
            path: self.inner.path(name),
        }))
    }

    fn open(&self, name: &str) -> Result<Box<dyn FileReader>, StorageError> {
        self.inner.open(name)
    }

    fn delete(&self, name: &str) -> Result<(), StorageError> {
        self.inner.delete(name)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.inner.path(name)
    }
}

impl FileWriter for LimitedWriter {
    fn append(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        let wanted = bytes.len() as u64;
        let taken = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(wanted)
            });
        if taken.is_err() {
            let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
            return Err(StorageError::io(&self.path, full));
        }
        self.inner.append(bytes)
    }

    fn finish(self: Box<Self>) -> Result<(), StorageError> {
        self.inner.finish()
    }
}
