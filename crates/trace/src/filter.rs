//! Key filters of stored batches: which probe keys a batch file surely does not hold.
//!
//! A batch file carries binary fuse filters (the `xorf` crate's `BinaryFuse8`: about nine
//! bits per key, a false-positive rate of about 1/256) of its keys' hashes, one per partition
//! of its blocks. A batched lookup
//! hashes all its probes once, then tests each against the filter of every stored batch whose
//! key range they fall in, and reads a block only for the probes that pass (RocksDB's
//! MultiGet does the same with its per-file filters). A probe the filter rejects is surely
//! absent; one it passes is present or a false positive, which the block read settles.
//!
//! Keys are hashed through their columnar bytes (the key pushed alone into a column), so any
//! key type hashes without a `Hash` bound, and the hash is the same in every process.

use columnar::{AsBytes, Borrow, Clear, Columnar, ContainerOf, Push, Ref};
use std::cell::Cell;
use std::hash::Hasher;
use xorf::{BinaryFuse8, BinaryFuse8Ref, DmaSerializable, Filter, FilterRef};

/// Hashes keys of type `K` through a column of one key, reused.
pub struct KeyHasher<K: Columnar> {
    column: ContainerOf<K>,
}

impl<K: Columnar> Default for KeyHasher<K> {
    fn default() -> Self {
        Self {
            column: Default::default(),
        }
    }
}

impl<K: Columnar> KeyHasher<K> {
    /// The hash of `key`, a function of the key alone.
    pub fn hash(&mut self, key: Ref<'_, K>) -> u64 {
        self.column.clear();
        self.column.push(key);
        let mut hasher = rustc_hash::FxHasher::default();
        for (_, bytes) in self.column.borrow().as_bytes() {
            hasher.write_usize(bytes.len());
            hasher.write(bytes);
        }
        hasher.finish()
    }
}

/// The filters of a batch's key hashes, as stored in its file: one binary fuse filter per
/// *partition*, a run of whole blocks holding about [`KeyFilter::PARTITION_KEYS`] keys (as
/// RocksDB partitions its filters), so that a writer holds one partition's hashes, not the
/// whole file's: a filter's construction takes a few dozen bytes per key, which for a batch
/// of tens of millions of keys was hundreds of megabytes. Empty when the batch was written
/// without a filter. A partition whose construction failed (rare: the crate's construction
/// can fail to find a mapping) has no fingerprints and passes every probe.
#[derive(Default)]
pub struct KeyFilter {
    /// Each partition's first block (increasing, from 0).
    first_blocks: Vec<u64>,
    /// Where each partition's fingerprints end in `fingerprints`.
    fingerprint_ends: Vec<u64>,
    /// Each partition's descriptor, `BinaryFuse8::DESCRIPTOR_LEN` bytes each.
    descriptors: Vec<u8>,
    fingerprints: Vec<u8>,
}

/// A key filter's stored columns: first blocks, fingerprint ends, descriptors, fingerprints.
pub type FilterParts<'a> = (&'a [u64], &'a [u64], &'a [u8], &'a [u8]);

impl KeyFilter {
    /// About how many keys a partition holds: its construction's scratch stays within a few
    /// megabytes.
    pub const PARTITION_KEYS: usize = 1 << 16;

    /// Adds the filter of `hashes` (sorted and deduplicated here, then emptied) for the
    /// partition starting at block `first_block`, after every partition added so far.
    pub fn push_partition(&mut self, first_block: usize, hashes: &mut Vec<u64>) {
        hashes.sort_unstable();
        hashes.dedup();
        let mut descriptor = [0u8; BinaryFuse8::DESCRIPTOR_LEN];
        if let Ok(filter) = BinaryFuse8::try_from(&hashes[..]) {
            filter.dma_copy_descriptor_to(&mut descriptor);
            self.fingerprints
                .extend_from_slice(filter.dma_fingerprints());
        }
        hashes.clear();
        self.first_blocks.push(first_block as u64);
        self.fingerprint_ends.push(self.fingerprints.len() as u64);
        self.descriptors.extend_from_slice(&descriptor);
    }

    /// The filter as stored.
    pub fn parts(&self) -> FilterParts<'_> {
        (
            &self.first_blocks,
            &self.fingerprint_ends,
            &self.descriptors,
            &self.fingerprints,
        )
    }

    /// The filter from its stored parts, `None` if they are not a filter's.
    pub fn from_parts(parts: FilterParts<'_>) -> Option<Self> {
        let (first_blocks, ends, descriptors, fingerprints) = parts;
        let partitions = first_blocks.len();
        let fits = ends.len() == partitions
            && descriptors.len() == partitions * BinaryFuse8::DESCRIPTOR_LEN
            && first_blocks.first().is_none_or(|&first| first == 0)
            && first_blocks.windows(2).all(|pair| pair[0] < pair[1])
            && ends.windows(2).all(|pair| pair[0] <= pair[1])
            && ends.last().map_or(0, |&end| end) == fingerprints.len() as u64;
        fits.then(|| Self {
            first_blocks: first_blocks.to_vec(),
            fingerprint_ends: ends.to_vec(),
            descriptors: descriptors.to_vec(),
            fingerprints: fingerprints.to_vec(),
        })
    }

    /// True when the batch was written with a filter.
    pub fn is_present(&self) -> bool {
        !self.first_blocks.is_empty()
    }

    /// The filter of the partition holding block `block`, ready to test hashes (`None`
    /// without one).
    pub fn tester(&self, block: usize) -> Option<BinaryFuse8Ref<'_>> {
        let partition = self
            .first_blocks
            .partition_point(|&first| first <= block as u64)
            .checked_sub(1)?;
        let end = self.fingerprint_ends[partition] as usize;
        let start = partition
            .checked_sub(1)
            .map_or(0, |before| self.fingerprint_ends[before] as usize);
        if start == end {
            return None;
        }
        let length = BinaryFuse8::DESCRIPTOR_LEN;
        let descriptor = &self.descriptors[partition * length..(partition + 1) * length];
        Some(BinaryFuse8Ref::from_dma(
            descriptor,
            &self.fingerprints[start..end],
        ))
    }

    /// Heap bytes of the filter.
    pub fn heap_bytes(&self) -> usize {
        (self.first_blocks.capacity() + self.fingerprint_ends.capacity()) * 8
            + self.descriptors.capacity()
            + self.fingerprints.capacity()
    }

    /// The filter's size in bits per key of `keys`.
    pub fn bits_per_key(&self, keys: usize) -> f64 {
        (self.fingerprints.len() * 8) as f64 / keys.max(1) as f64
    }
}

/// What a stored batch's filter has been worth to its lookups: a filter that lets nearly every
/// probe through (as the keys a join probes its edges with are nearly all present) costs a
/// hash and a few cache misses per probe and saves almost no block reads, so lookups skip it
/// (RocksDB offers the same as a fixed option, `optimize_filters_for_hits`). Skipping never
/// changes a result: the block read settles every probe. While skipped, one lookup in
/// [`FilterYield::RETEST_EVERY`] still tests, so a filter that starts to reject comes back.
#[derive(Debug, Default)]
pub struct FilterYield {
    tested: Cell<u32>,
    rejected: Cell<u32>,
    skipped: Cell<u32>,
}

impl FilterYield {
    /// Probes tested before the filter may be skipped.
    pub const SAMPLE_MIN: u32 = 1024;
    /// Skipped while it rejects fewer than one probe in this many. A rejection saves a block
    /// read, several times a filter test's cost; below this share the tests cost more than
    /// the reads they save.
    pub const REJECT_SHARE: u32 = 64;
    /// While skipped, one lookup in this many tests.
    pub const RETEST_EVERY: u32 = 16;
    /// Counts are halved past this many tests, so that recent lookups weigh most: a filter
    /// skipped after a full window of passes comes back after about `WINDOW / (2 *
    /// REJECT_SHARE)` rejecting retests.
    const WINDOW: u32 = 1 << 12;

    /// Whether the next lookup should test the filter.
    pub fn should_test(&self) -> bool {
        let (tested, rejected) = (self.tested.get(), self.rejected.get());
        if tested < Self::SAMPLE_MIN || rejected.saturating_mul(Self::REJECT_SHARE) >= tested {
            return true;
        }
        let skipped = self.skipped.get().wrapping_add(1);
        self.skipped.set(skipped);
        skipped.is_multiple_of(Self::RETEST_EVERY)
    }

    /// Counts a lookup's `tested` probes, of which `passed` passed.
    pub fn note(&self, tested: usize, passed: usize) {
        let mut tested_now = u64::from(self.tested.get()) + tested as u64;
        let mut rejected_now =
            u64::from(self.rejected.get()) + tested.saturating_sub(passed) as u64;
        while tested_now > u64::from(Self::WINDOW) {
            tested_now /= 2;
            // Rounded up, so that halving never drifts towards skipping.
            rejected_now = rejected_now.div_ceil(2);
        }
        // Both within the window now, which fits a u32.
        self.tested.set(tested_now as u32);
        self.rejected.set(rejected_now as u32);
    }
}

/// Whether `tester` (if any) lets `hash` through.
#[inline]
pub fn may_contain(tester: &Option<BinaryFuse8Ref<'_>>, hash: u64) -> bool {
    tester.as_ref().is_none_or(|filter| filter.contains(&hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_that_pass_everything_are_skipped_and_come_back_when_they_reject() {
        let worth = FilterYield::default();
        // Until the sample is in, every lookup tests.
        for _ in 0..FilterYield::SAMPLE_MIN {
            assert!(worth.should_test());
            worth.note(1, 1);
        }
        // Nothing rejected: most lookups skip, one in RETEST_EVERY tests.
        let tests = (0..FilterYield::RETEST_EVERY * 10)
            .filter(|_| worth.should_test())
            .count();
        assert_eq!(tests, 10);
        // A retest that rejects most of a long run brings the filter back.
        worth.note(4096, 0);
        assert!((0..10).all(|_| worth.should_test()));
        // Rejecting one in REJECT_SHARE or more keeps it.
        let kept = FilterYield::default();
        let share = FilterYield::REJECT_SHARE as usize;
        kept.note(share * 100, share * 100 - 100);
        assert!((0..100).all(|_| kept.should_test()));
        // Counts stay bounded: a long history halves.
        for _ in 0..100 {
            kept.note(1 << 15, 1 << 15);
        }
        assert!(kept.tested.get() <= FilterYield::WINDOW);
    }

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let mut hasher = KeyHasher::<String>::default();
        let keys: Vec<String> = (0..20_000).map(|i| format!("key{i}")).collect();
        let mut hashes: Vec<u64> = keys.iter().map(|k| hasher.hash(k.as_bytes())).collect();
        let mut filter = KeyFilter::default();
        filter.push_partition(0, &mut hashes);
        let filter = KeyFilter::from_parts(filter.parts()).expect("stored parts");
        let tester = filter.tester(0);
        assert!(keys
            .iter()
            .all(|k| may_contain(&tester, hasher.hash(k.as_bytes()))));
        let passed = (0..100_000)
            .filter(|i| may_contain(&tester, hasher.hash(format!("other{i}").as_bytes())))
            .count();
        // A target of 1/256: 390 expected of 100,000.
        assert!(passed < 600, "{passed} false positives of 100,000");
        assert!(filter.bits_per_key(keys.len()) < 10.0);
    }

    /// Keys in several partitions: each block's probes are tested against its own partition's
    /// filter, which holds every key of it (no false negatives anywhere).
    #[test]
    fn partitions_hold_their_blocks_keys() {
        let mut hasher = KeyHasher::<u64>::default();
        let mut filter = KeyFilter::default();
        // Partitions of 3 blocks; block `b` holds keys `b * 1000 .. b * 1000 + 1000`.
        for partition in 0..4usize {
            let blocks = partition * 3..partition * 3 + 3;
            let mut hashes: Vec<u64> = (blocks.start as u64 * 1000..blocks.end as u64 * 1000)
                .map(|key| hasher.hash(&key))
                .collect();
            filter.push_partition(blocks.start, &mut hashes);
            assert!(hashes.is_empty());
        }
        let filter = KeyFilter::from_parts(filter.parts()).expect("stored parts");
        for block in 0..12u64 {
            let tester = filter.tester(block as usize);
            assert!(tester.is_some());
            assert!((block * 1000..block * 1000 + 1000)
                .all(|key| may_contain(&tester, hasher.hash(&key))));
        }
        // A key of another partition mostly fails: the filters are separate.
        let other = filter.tester(0);
        let passed = (9_000..12_000u64)
            .filter(|key| may_contain(&other, hasher.hash(key)))
            .count();
        assert!(
            passed < 100,
            "{passed} of 3,000 passed another partition's filter"
        );
        let (first, ends, descriptors, fingerprints) = filter.parts();
        assert!(KeyFilter::from_parts((&first[1..], ends, descriptors, fingerprints)).is_none());
    }

    #[test]
    fn hashes_depend_on_the_key_alone() {
        let mut one = KeyHasher::<(u64, String)>::default();
        let mut other = KeyHasher::<(u64, String)>::default();
        other.hash((&7, b"warm".as_slice()));
        let key = (&3u64, b"abc".as_slice());
        assert_eq!(one.hash(key), other.hash(key));
        assert_ne!(one.hash(key), one.hash((&3, b"abd".as_slice())));
    }
}
