//! The spill directory of a run: a fresh directory of ripple's own, removed when dropped.
//!
//! Ripple never writes into a directory it did not make: under the directory a user names
//! (or the system's temporary directory) it makes `ripple-spill-<pid>-<n>`, keeps its files
//! there, and removes the whole directory when the run ends, on success or on error. A run
//! killed outright (SIGKILL) cannot: the next run in the same parent removes the directories
//! of processes that are gone (on Linux, where `/proc` says which are alive).

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
        remove_orphans(parent);
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

/// Removes the spill directories in `parent` of processes no longer running (killed before
/// they could remove their own). Only on Linux, where `/proc/<pid>` tells a live process;
/// a directory whose process is alive, or whose name is not ripple's, stays.
fn remove_orphans(parent: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("ripple-spill-"))
            .and_then(|rest| rest.split_once('-'))
            .filter(|(_, n)| n.parse::<usize>().is_ok())
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_of_processes_gone_are_removed() {
        let parent = std::env::temp_dir().join(format!("ripple-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        // No process has a pid this large (Linux caps pids at 2^22).
        let orphan = parent.join("ripple-spill-4294967295-0");
        let alive = parent.join(format!("ripple-spill-{}-999", std::process::id()));
        let other = parent.join("ripple-spill-notes");
        for dir in [&orphan, &alive, &other] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let spill = SpillDir::new_in(&parent).unwrap();
        assert!(!orphan.exists() || !Path::new("/proc/self").exists());
        assert!(alive.exists() && other.exists() && spill.path().exists());
        drop(spill);
        std::fs::remove_dir_all(&parent).unwrap();
    }
}
