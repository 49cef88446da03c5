//! The block cache: blocks read from files, kept in memory up to a byte budget.
//!
//! A block in memory is a [`Block`]: a reference-counted handle to its words. The cache holds
//! one handle per cached block; a reader that reads a block holds another for as long as it
//! may hand out references into the words (Kudu's lesson: readers point into shared immutable
//! blocks instead of copying values out). A block with a reader's handle is *pinned*: the
//! cache evicts least recently used blocks first, pinned or not: a pinned block's words stay
//! alive for its readers after the cache drops its handle, and are freed when the last reader
//! lets go. Every block's words are counted while alive, cached or not
//! ([`CacheStats::resident_bytes`]), so pinned bytes are visible.
//!
//! A block enters the cache on its second miss, not its first (a *doorkeeper*, as in
//! TinyLFU): the keys of blocks missed once are remembered in two generations of as many keys
//! as the cache has room for blocks (of the size of the one just read), the older dropped
//! when the newer fills. A block missed again while remembered was read twice within about
//! the cache's capacity, as a block must be to hit in an LRU cache of that size; under a small
//! budget most blocks a lookup reads are not read again before they would be evicted, and
//! caching each cost an insertion and an eviction for nothing (see docs/perf-notes.md, section
//! "Storage: block cache admission"). A generation holds at least 1,024 keys however small
//! the cache; the keys, some 40 bytes each and not counted in the budget, come to under 1% of
//! the cache's bytes with blocks of a few KiB once the cache has room for over 1,024 blocks.

use lru::LruCache;
use rustc_hash::{FxBuildHasher, FxHashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A block's words, shared by the cache and its readers.
pub type Block = Arc<BlockWords>;

/// Which block: a file's number (unique in a process, never reused) and the block's index.
pub type BlockKey = (u64, u32);

/// The words of one block; their bytes are counted as resident until the last handle drops.
pub struct BlockWords {
    words: Box<[u64]>,
    resident: Arc<AtomicUsize>,
}

impl BlockWords {
    /// The words.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The size in bytes.
    pub fn byte_len(&self) -> usize {
        self.words.len() * 8
    }
}

impl Drop for BlockWords {
    fn drop(&mut self) {
        self.resident.fetch_sub(self.byte_len(), Ordering::Relaxed);
    }
}

/// What the cache has done, for benches and `--summary`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Blocks dropped from the cache to stay within its budget.
    pub evictions: u64,
    /// Bytes of blocks held by the cache.
    pub cached_bytes: usize,
    /// Bytes of all blocks alive: cached, or pinned by readers.
    pub resident_bytes: usize,
    /// The most `resident_bytes` has been.
    pub peak_resident_bytes: usize,
}

/// Blocks in memory within a byte budget, shared by the workers of a process.
pub struct BlockCache {
    budget: usize,
    state: Mutex<CacheState>,
    resident: Arc<AtomicUsize>,
    peak_resident: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

struct CacheState {
    /// The cached blocks, by last use.
    entries: LruCache<BlockKey, Block, FxBuildHasher>,
    bytes: usize,
    /// Blocks missed once and not cached: the newer generation, then the older.
    missed_once: [FxHashSet<BlockKey>; 2],
}

/// The fewest keys of blocks missed once a generation holds, however small the cache.
const MISSED_ONCE_MIN: usize = 1024;

impl Default for CacheState {
    fn default() -> Self {
        Self {
            entries: LruCache::unbounded_with_hasher(FxBuildHasher),
            bytes: 0,
            missed_once: Default::default(),
        }
    }
}

impl BlockCache {
    /// A cache holding at most `budget` bytes of blocks (0: none; every read goes to
    /// the file).
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            state: Mutex::default(),
            resident: Arc::default(),
            peak_resident: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    fn state(&self) -> MutexGuard<'_, CacheState> {
        // A panic while the lock is held can only come from the allocator or a bug of the
        // list's; what is left is at worst a block too many or too few counted, which only
        // skews when the cache evicts, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The block `key`, from the cache or else read by `read` (outside the cache's lock, so
    /// workers read in parallel) and cached if it was missed once before (see the module
    /// documentation).
    pub fn get<E>(
        &self,
        key: BlockKey,
        read: impl FnOnce() -> Result<Vec<u64>, E>,
    ) -> Result<Block, E> {
        self.get_or_read(key, read, true)
    }

    /// Like [`BlockCache::get`] for a block read once, in order (a merge's input, a scan):
    /// from the cache if there, without making it the most recently used, else read and
    /// neither cached nor remembered as missed, so that a merge streaming through a batch
    /// does not evict the blocks lookups come back to.
    pub fn get_passing<E>(
        &self,
        key: BlockKey,
        read: impl FnOnce() -> Result<Vec<u64>, E>,
    ) -> Result<Block, E> {
        self.get_or_read(key, read, false)
    }

    fn get_or_read<E>(
        &self,
        key: BlockKey,
        read: impl FnOnce() -> Result<Vec<u64>, E>,
        keep: bool,
    ) -> Result<Block, E> {
        if let Some(block) = self.lookup(key, keep) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(block);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let words = read()?.into_boxed_slice();
        let bytes = words.len() * 8;
        let now = self.resident.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_resident.fetch_max(now, Ordering::Relaxed);
        let block = Arc::new(BlockWords {
            words,
            resident: Arc::clone(&self.resident),
        });
        if keep && bytes <= self.budget {
            self.insert(key, &block);
        }
        Ok(block)
    }

    /// The cached block `key`, made the most recently used if `touch`.
    fn lookup(&self, key: BlockKey, touch: bool) -> Option<Block> {
        let mut state = self.state();
        let block = if touch {
            state.entries.get(&key)
        } else {
            state.entries.peek(&key)
        };
        block.map(Arc::clone)
    }

    /// Caches `block`, just read, if it was missed once before (see the module documentation).
    fn insert(&self, key: BlockKey, block: &Block) {
        let mut state = self.state();
        if state.entries.contains(&key) {
            return; // Another worker read it meanwhile.
        }
        let [newer, older] = &mut state.missed_once;
        if !newer.remove(&key) && !older.remove(&key) {
            let room = (self.budget / block.byte_len().max(1)).max(MISSED_ONCE_MIN);
            if newer.len() >= room {
                std::mem::swap(newer, older);
                newer.clear();
            }
            newer.insert(key);
            return;
        }
        state.entries.put(key, Arc::clone(block));
        state.bytes += block.byte_len();
        self.evict(&mut state);
    }

    /// Drops least recently used blocks until the cached bytes fit the budget. A block a
    /// reader still pins goes too (its words stay alive for the reader, and are freed when it
    /// lets go): skipping pinned blocks made each eviction scan past every block the readers
    /// of one activation hold, and made the cache slower than no cache at all (see
    /// docs/perf-notes.md, section "Storage: block cache eviction").
    fn evict(&self, state: &mut CacheState) {
        while state.bytes > self.budget {
            let Some((_, block)) = state.entries.pop_lru() else {
                break;
            };
            state.bytes -= block.byte_len();
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drops the cached blocks `0..blocks` of file `file` (its file is gone), and their keys
    /// among those missed once.
    pub fn forget(&self, file: u64, blocks: usize) {
        let mut state = self.state();
        if state.entries.is_empty() && state.missed_once.iter().all(|keys| keys.is_empty()) {
            return;
        }
        for index in 0..blocks {
            let key = (file, index as u32);
            if let Some(block) = state.entries.pop(&key) {
                state.bytes -= block.byte_len();
            }
            for keys in &mut state.missed_once {
                keys.remove(&key);
            }
        }
    }

    /// The counters and sizes now.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            cached_bytes: self.state().bytes,
            resident_bytes: self.resident.load(Ordering::Relaxed),
            peak_resident_bytes: self.peak_resident.load(Ordering::Relaxed),
        }
    }

    /// Bytes of blocks alive only because a reader holds them (not cached).
    pub fn pinned_bytes(&self) -> usize {
        let state = self.state();
        let resident = self.resident.load(Ordering::Relaxed);
        let unpinned: usize = state
            .entries
            .iter()
            .filter(|(_, block)| Arc::strong_count(block) == 1)
            .map(|(_, block)| block.byte_len())
            .sum();
        resident.saturating_sub(unpinned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(words: usize) -> impl FnOnce() -> Result<Vec<u64>, ()> {
        move || Ok(vec![7; words])
    }

    /// Reads `block` of file 1 twice, so that the cache takes it in (on its second miss).
    fn admit(cache: &BlockCache, block: u32) {
        cache.get((1, block), read(10)).unwrap();
        cache.get((1, block), read(10)).unwrap();
    }

    #[test]
    fn hits_after_two_misses_and_evicts_least_recently_used() {
        let cache = BlockCache::new(3 * 80);
        for block in 0..3 {
            admit(&cache, block);
        }
        cache.get((1, 0), read(10)).unwrap(); // hit: block 0 is now the most recent
        admit(&cache, 3); // evicts block 1
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.evictions), (1, 8, 1));
        assert_eq!(stats.cached_bytes, 240);
        cache.get((1, 0), read(10)).unwrap();
        assert_eq!(cache.stats().hits, 2);
        cache.get((1, 1), read(10)).unwrap();
        assert_eq!(cache.stats().misses, 9, "block 1 was evicted");
    }

    #[test]
    fn blocks_missed_once_are_not_cached() {
        // Room for 100 blocks: generations of MISSED_ONCE_MIN keys.
        let cache = BlockCache::new(100 * 80);
        for block in 0..100 {
            cache.get((1, block), read(10)).unwrap();
        }
        assert_eq!(cache.stats().cached_bytes, 0, "each block read once");
        cache.get((1, 7), read(10)).unwrap();
        assert_eq!(cache.stats().cached_bytes, 80, "block 7 missed twice");
        cache.get((1, 7), read(10)).unwrap();
        assert_eq!(cache.stats().hits, 1);
        // Block 8's first miss is remembered while its generation is the older one...
        let fill = |from: u32| {
            for block in from..from + MISSED_ONCE_MIN as u32 {
                cache.get((2, block), read(10)).unwrap();
            }
        };
        fill(0);
        cache.get((1, 8), read(10)).unwrap();
        assert_eq!(cache.stats().cached_bytes, 160, "block 8 missed twice");
        // ... and forgotten once a newer one has filled too.
        fill(10_000);
        fill(20_000);
        cache.get((1, 9), read(10)).unwrap();
        assert_eq!(
            cache.stats().cached_bytes,
            160,
            "block 9's first miss was forgotten"
        );
    }

    /// A generation holds as many keys as the cache has room for blocks, when that is more
    /// than `MISSED_ONCE_MIN`; a forgotten file's keys go.
    #[test]
    fn generations_follow_the_cache_room() {
        let room = 3 * MISSED_ONCE_MIN as u32;
        let cache = BlockCache::new(room as usize * 80);
        cache.get((1, 0), read(10)).unwrap();
        for block in 0..room - 1 {
            cache.get((2, block), read(10)).unwrap();
        }
        cache.get((1, 0), read(10)).unwrap();
        assert_eq!(
            cache.stats().cached_bytes,
            80,
            "remembered through `room` misses"
        );
        cache.get((3, 0), read(10)).unwrap();
        cache.forget(3, 1);
        cache.get((3, 0), read(10)).unwrap();
        assert_eq!(
            cache.stats().cached_bytes,
            80,
            "a forgotten file's first miss is gone"
        );
    }

    #[test]
    fn pinned_blocks_outlive_eviction_and_are_counted() {
        let cache = BlockCache::new(80);
        admit(&cache, 0);
        let pinned = cache.get((1, 0), read(10)).unwrap();
        admit(&cache, 1);
        let _other = cache.get((1, 1), read(10)).unwrap();
        // Both pinned, one cached: the cache dropped its handle on the older, its words live on.
        assert_eq!(cache.stats().cached_bytes, 80);
        assert_eq!(cache.stats().resident_bytes, 160);
        assert_eq!(pinned.words(), &[7; 10][..]);
        drop(_other);
        drop(pinned);
        assert_eq!(
            cache.stats().resident_bytes,
            80,
            "only the cached block is left"
        );
        assert_eq!(cache.pinned_bytes(), 0);
    }

    #[test]
    fn a_zero_budget_caches_nothing() {
        let cache = BlockCache::new(0);
        let block = cache.get((1, 0), read(10)).unwrap();
        assert_eq!(cache.stats().cached_bytes, 0);
        assert_eq!(cache.pinned_bytes(), 80);
        drop(block);
        assert_eq!(cache.stats().resident_bytes, 0);
        cache.get((1, 0), read(10)).unwrap();
        assert_eq!(cache.stats().misses, 2);
        assert_eq!(cache.stats().cached_bytes, 0, "not even on a second miss");
    }

    #[test]
    fn passing_reads_use_the_cache_without_filling_it() {
        let cache = BlockCache::new(1000);
        admit(&cache, 0);
        cache.get_passing((1, 0), read(10)).unwrap();
        cache.get_passing((1, 1), read(10)).unwrap();
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (1, 3));
        assert_eq!(stats.cached_bytes, 80, "the passing miss is not cached");
        cache.get_passing((1, 1), read(10)).unwrap();
        assert_eq!(cache.stats().misses, 4);
        // A passing miss is not remembered as a first miss: the next read is the first.
        cache.get((1, 1), read(10)).unwrap();
        assert_eq!(
            cache.stats().cached_bytes,
            80,
            "block 1's passing misses do not count"
        );
        // A passing hit does not make its block the most recent.
        let cache = BlockCache::new(2 * 80);
        admit(&cache, 0);
        admit(&cache, 1);
        cache.get_passing((1, 0), read(10)).unwrap();
        admit(&cache, 2); // evicts block 0, the least recently used still
        let hits = cache.stats().hits;
        cache.get((1, 1), read(10)).unwrap();
        assert_eq!(cache.stats().hits, hits + 1, "block 1 stayed");
    }

    #[test]
    fn forgetting_a_file_drops_its_blocks() {
        let cache = BlockCache::new(1000);
        admit(&cache, 0);
        cache.get((2, 0), read(10)).unwrap();
        cache.get((2, 0), read(10)).unwrap();
        cache.forget(1, 1);
        assert_eq!(cache.stats().cached_bytes, 80);
        assert_eq!(cache.stats().resident_bytes, 80);
    }
}
