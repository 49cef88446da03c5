//! The storage tier of a process: where its spilled files go, its block cache, its memory
//! budget and its counters, shared by every worker (and every spine) of the process.
//!
//! The budget is the process's: the block cache gets [`StorageSettings::cache_bytes`] of it,
//! operators' working memory is left [`StorageSettings::working_bytes`], and spines and
//! batchers write batches and chains out while those in memory, with what operators keep
//! beside them that no spine can write out ([`crate::HeldBytes`]), take more than the rest
//! ([`Storage::over_budget`]).
//!
//! A read that fails inside an operator cannot return an error through a cursor's
//! `Ref`-returning calls. [`Storage::fail`] records the error, then unwinds the worker with a
//! [`StorageFault`]; the driver reports the recorded error ([`Storage::fault`]) instead of a
//! panic, and no output of the failed step is written.

use crate::cache::{BlockCache, CacheStats};
use crate::error::StorageError;
use crate::spill::SpillDir;
use crate::store::FileStore;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How a process's storage tier is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageSettings {
    /// Bytes of memory for the process's arrangements: in-memory batches, cached blocks and
    /// the operators' working memory together.
    pub memory_budget: usize,
    /// The block cache's share of the budget (at most the budget).
    pub cache_bytes: usize,
    /// The share of the budget left to what the operators hold beside batches and blocks:
    /// batchers' forms, merges under way, a window of an interval's keys, buffers of output.
    /// Not counted as it comes and goes, it is set aside: batches in memory (and what
    /// operators hold beside them, see [`crate::HeldBytes`]) get the budget less the cache's
    /// and this share. At most the budget less the cache's share (see
    /// docs/perf-notes.md, section "Storage: the whole process within its budget").
    pub working_bytes: usize,
    /// About how many updates a block of a batch file holds (blocks hold whole keys).
    pub block_updates: usize,
    /// Whether batch files carry a key filter, which batched lookups test probes against
    /// before they read blocks.
    pub filters: bool,
    /// Batches, batcher chains and spine merges smaller than this stay in memory whatever the
    /// budget: the small, fresh batches of the lower levels, which a spine holds a few of at a
    /// time and merges soon. (Written out, each would cost a file's creation and deletion for
    /// a few updates.)
    pub spill_min_bytes: usize,
}

impl StorageSettings {
    /// The default number of updates per block: blocks of some tens of kilobytes, read in
    /// one call each.
    pub const BLOCK_UPDATES_DEFAULT: usize = 256;

    /// The default least size of a batch written out.
    pub const SPILL_MIN_BYTES_DEFAULT: usize = 64 << 10;

    /// A budget of `memory_budget` bytes: a quarter of it for the cache, a quarter for
    /// working memory and half for batches.
    pub fn with_budget(memory_budget: usize) -> Self {
        Self {
            memory_budget,
            cache_bytes: memory_budget / 4,
            working_bytes: memory_budget / 4,
            block_updates: Self::BLOCK_UPDATES_DEFAULT,
            filters: true,
            spill_min_bytes: Self::SPILL_MIN_BYTES_DEFAULT,
        }
    }
}

/// What the tier has done, for benches and `--summary`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    pub files_written: u64,
    pub files_deleted: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub cache: CacheStats,
    /// Bytes held in memory now by the spines' batches and the batchers' chains.
    pub batch_bytes: usize,
    /// The most bytes the spines' batches and the batchers' chains held in memory at once.
    pub batch_bytes_peak: usize,
    /// Bytes operators hold now beside batches, counted against the batches' share (see
    /// [`crate::HeldBytes`]).
    pub held_bytes: usize,
    /// Probes batched lookups tested against stored batches' key filters, and those that
    /// passed (present, or false positives).
    pub probes_filtered: u64,
    pub probes_passed: u64,
}

/// The payload a worker unwinds with when a storage call fails; the error itself is recorded
/// in the [`Storage`] (see [`Storage::fault`]).
#[derive(Debug)]
pub struct StorageFault;

/// A process's storage tier (see the module documentation).
pub struct Storage {
    store: Box<dyn FileStore>,
    /// Kept so that the directory is removed when the tier drops.
    spill: Option<SpillDir>,
    cache: BlockCache,
    settings: StorageSettings,
    batch_bytes: AtomicUsize,
    batch_bytes_peak: AtomicUsize,
    /// See [`Storage::hold`].
    held_bytes: AtomicUsize,
    next_file: AtomicU64,
    files_written: AtomicU64,
    files_deleted: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    probes_filtered: AtomicU64,
    probes_passed: AtomicU64,
    fault: Mutex<Option<String>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("settings", &self.settings)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// A tier keeping its files in `spill` (removed when the tier drops).
    pub fn in_spill_dir(spill: SpillDir, settings: StorageSettings) -> Self {
        let store = Box::new(spill.dir().clone());
        Self::with_store(store, Some(spill), settings)
    }

    /// A tier keeping its files in `store`; `spill`, if any, is dropped with the tier.
    pub fn with_store(
        store: Box<dyn FileStore>,
        spill: Option<SpillDir>,
        settings: StorageSettings,
    ) -> Self {
        let cache_bytes = settings.cache_bytes.min(settings.memory_budget);
        let settings = StorageSettings {
            cache_bytes,
            working_bytes: settings
                .working_bytes
                .min(settings.memory_budget - cache_bytes),
            block_updates: settings.block_updates.max(1),
            ..settings
        };
        Self {
            store,
            spill,
            cache: BlockCache::new(settings.cache_bytes),
            settings,
            batch_bytes: AtomicUsize::new(0),
            batch_bytes_peak: AtomicUsize::new(0),
            held_bytes: AtomicUsize::new(0),
            next_file: AtomicU64::new(0),
            files_written: AtomicU64::new(0),
            files_deleted: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            probes_filtered: AtomicU64::new(0),
            probes_passed: AtomicU64::new(0),
            fault: Mutex::new(None),
        }
    }

    /// The run's spill directory, if the tier has one (it is removed when the tier drops).
    pub fn spill_path(&self) -> Option<std::path::PathBuf> {
        self.spill.as_ref().map(SpillDir::path)
    }

    /// Where the files live.
    pub fn store(&self) -> &dyn FileStore {
        &*self.store
    }

    /// The block cache.
    pub fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// The settings.
    pub fn settings(&self) -> &StorageSettings {
        &self.settings
    }

    /// A fresh file number and name (numbers are never reused in a process).
    pub fn new_file(&self) -> (u64, String) {
        let id = self.next_file.fetch_add(1, Ordering::Relaxed);
        (id, format!("batch-{id:08}.rpl"))
    }

    /// Numbers files from `next` on, if that is past the numbers given so far: a tier over a
    /// directory that holds files of an earlier run names none of its new files like them.
    pub fn number_files_from(&self, next: u64) {
        self.next_file.fetch_max(next, Ordering::Relaxed);
    }

    /// The number in the name of a file this tier would name (`batch-<number>.rpl`).
    pub fn file_number(name: &str) -> Option<u64> {
        name.strip_prefix("batch-")?
            .strip_suffix(".rpl")?
            .parse()
            .ok()
    }

    /// Counts a file of `bytes` written.
    pub fn note_written(&self, bytes: u64) {
        self.files_written.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `bytes` read from files.
    pub fn note_read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `tested` probes tested against a key filter, of which `passed` passed.
    pub fn note_filtered(&self, tested: u64, passed: u64) {
        self.probes_filtered.fetch_add(tested, Ordering::Relaxed);
        self.probes_passed.fetch_add(passed, Ordering::Relaxed);
    }

    /// Deletes the file `name`, numbered `id`, of `blocks` blocks, and forgets its cached
    /// blocks. A failure to delete is recorded as the run's fault but does not unwind: it is
    /// reported when the run ends (the spill directory goes then anyway).
    pub fn delete(&self, id: u64, name: &str, blocks: usize) {
        self.cache.forget(id, blocks);
        match self.store.delete(name) {
            Ok(()) => {
                self.files_deleted.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => self.record(&error),
        }
    }

    /// Changes the bytes the spines' in-memory batches and the batchers' chains hold by
    /// `added - removed`.
    pub fn account(&self, added: usize, removed: usize) {
        let now = change(&self.batch_bytes, added, removed);
        self.batch_bytes_peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Changes by `added - removed` the bytes operators keep in memory that no spine can write
    /// out and that grow with the data (a reduce's deferred times), as [`crate::HeldBytes`]
    /// reports them. They take their room from the batches' share: batches are written out to
    /// make it.
    pub(crate) fn hold(&self, added: usize, removed: usize) {
        change(&self.held_bytes, added, removed);
    }

    /// Whether the spines' in-memory batches and the batchers' chains, with what operators
    /// hold (see [`crate::HeldBytes`]), take more than the budget leaves them: what the cache and
    /// working memory do not take.
    pub fn over_budget(&self) -> bool {
        !self.has_room(0)
    }

    /// Whether `bytes` more of batches would stay within what the budget leaves them (see
    /// [`Storage::over_budget`]).
    pub fn has_room(&self, bytes: usize) -> bool {
        let settings = &self.settings;
        let batches = settings.memory_budget - settings.cache_bytes - settings.working_bytes;
        let batch_bytes = self.batch_bytes.load(Ordering::Relaxed);
        let held = batch_bytes.saturating_add(self.held_bytes.load(Ordering::Relaxed));
        held.saturating_add(bytes) <= batches
    }

    /// The counters now.
    pub fn stats(&self) -> StorageStats {
        StorageStats {
            files_written: self.files_written.load(Ordering::Relaxed),
            files_deleted: self.files_deleted.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            cache: self.cache.stats(),
            batch_bytes: self.batch_bytes.load(Ordering::Relaxed),
            batch_bytes_peak: self.batch_bytes_peak.load(Ordering::Relaxed),
            held_bytes: self.held_bytes.load(Ordering::Relaxed),
            probes_filtered: self.probes_filtered.load(Ordering::Relaxed),
            probes_passed: self.probes_passed.load(Ordering::Relaxed),
        }
    }

    fn record(&self, error: &StorageError) {
        let mut fault = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        fault.get_or_insert_with(|| error.to_string());
    }

    /// Records `error` as the run's fault (the first one is kept) and unwinds the worker with
    /// a [`StorageFault`].
    pub fn fail(&self, error: StorageError) -> ! {
        self.record(&error);
        std::panic::panic_any(StorageFault)
    }

    /// The first storage error of the run, if any.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Adds `added - removed` to `counter` (in one atomic step, whichever is larger) and returns
/// the new count.
fn change(counter: &AtomicUsize, added: usize, removed: usize) -> usize {
    if added >= removed {
        counter.fetch_add(added - removed, Ordering::Relaxed) + (added - removed)
    } else {
        counter.fetch_sub(removed - added, Ordering::Relaxed) - (removed - added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(settings: StorageSettings) -> Storage {
        let spill = SpillDir::new_in_temp().expect("a spill directory");
        Storage::in_spill_dir(spill, settings)
    }

    /// Batches get what the cache and the working share leave; shares asked beyond the budget
    /// are cut to it; the peak of the batches' bytes stays after they go.
    #[test]
    fn batches_get_what_cache_and_working_memory_leave() {
        let storage = tier(StorageSettings::with_budget(400));
        assert_eq!(storage.settings().cache_bytes, 100);
        assert_eq!(storage.settings().working_bytes, 100);
        storage.account(200, 0);
        assert!(!storage.over_budget(), "half the budget is the batches'");
        storage.account(1, 0);
        assert!(storage.over_budget());
        storage.account(0, 201);
        let stats = storage.stats();
        assert_eq!((stats.batch_bytes, stats.batch_bytes_peak), (0, 201));

        let greedy = StorageSettings {
            cache_bytes: 300,
            working_bytes: 300,
            ..StorageSettings::with_budget(400)
        };
        let storage = tier(greedy);
        assert_eq!(storage.settings().working_bytes, 100);
        storage.account(1, 0);
        assert!(storage.over_budget(), "nothing is left for batches");
    }

    /// Room is what the batches' share leaves beside the batches and held bytes; a budget of
    /// nothing has room for nothing more.
    #[test]
    fn room_is_the_share_left() {
        let storage = tier(StorageSettings::with_budget(400));
        storage.account(150, 0);
        assert!(storage.has_room(50) && !storage.has_room(51));
        storage.hold(20, 0);
        assert!(storage.has_room(30) && !storage.has_room(31));
        assert!(!storage.has_room(usize::MAX), "no overflow");
        let empty = tier(StorageSettings::with_budget(0));
        assert!(empty.has_room(0) && !empty.has_room(1));
        assert!(!empty.over_budget());
    }
}
