//! Key filters of stored batches: which probe keys a batch file surely does not hold.
//!
//! A batch file carries a binary fuse filter (the `xorf` crate's `BinaryFuse8`: about nine
//! bits per key, a false-positive rate of about 1/256) of its keys' hashes. A batched lookup
//! hashes all its probes once, then tests each against the filter of every stored batch whose
//! key range they fall in, and reads a block only for the probes that pass (RocksDB's
//! MultiGet does the same with its per-file filters). A probe the filter rejects is surely
//! absent; one it passes is present or a false positive, which the block read settles.
//!
//! Keys are hashed through their columnar bytes (the key pushed alone into a column), so any
//! key type hashes without a `Hash` bound, and the hash is the same in every process.

use columnar::{AsBytes, Borrow, Clear, Columnar, ContainerOf, Push, Ref};
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

/// A filter of a batch's key hashes, as stored in its file: the filter's descriptor and its
/// fingerprints. Empty when the batch was written without a filter.
#[derive(Default)]
pub struct KeyFilter {
    descriptor: Vec<u8>,
    fingerprints: Vec<u8>,
}

impl KeyFilter {
    /// A filter of `hashes` (sorted and deduplicated here). Without hashes, or should the
    /// construction fail, the empty filter, which rejects nothing.
    pub fn build(hashes: &mut Vec<u64>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        if hashes.is_empty() {
            return Self::default();
        }
        let Ok(filter) = BinaryFuse8::try_from(&hashes[..]) else {
            return Self::default();
        };
        let mut descriptor = vec![0u8; BinaryFuse8::DESCRIPTOR_LEN];
        filter.dma_copy_descriptor_to(&mut descriptor);
        Self {
            descriptor,
            fingerprints: filter.dma_fingerprints().to_vec(),
        }
    }

    /// The filter as stored: descriptor and fingerprints.
    pub fn parts(&self) -> (&[u8], &[u8]) {
        (&self.descriptor, &self.fingerprints)
    }

    /// The filter from its stored parts, `None` if they are not a filter's.
    pub fn from_parts(descriptor: &[u8], fingerprints: &[u8]) -> Option<Self> {
        let fits = descriptor.is_empty() && fingerprints.is_empty()
            || descriptor.len() == BinaryFuse8::DESCRIPTOR_LEN && !fingerprints.is_empty();
        fits.then(|| Self {
            descriptor: descriptor.to_vec(),
            fingerprints: fingerprints.to_vec(),
        })
    }

    /// True when the batch was written with a filter.
    pub fn is_present(&self) -> bool {
        !self.descriptor.is_empty()
    }

    /// The filter, ready to test hashes (`None` without one).
    pub fn tester(&self) -> Option<BinaryFuse8Ref<'_>> {
        self.is_present()
            .then(|| BinaryFuse8Ref::from_dma(&self.descriptor, &self.fingerprints))
    }

    /// Heap bytes of the filter.
    pub fn heap_bytes(&self) -> usize {
        self.descriptor.capacity() + self.fingerprints.capacity()
    }

    /// The filter's size in bits per key of `keys`.
    pub fn bits_per_key(&self, keys: usize) -> f64 {
        (self.fingerprints.len() * 8) as f64 / keys.max(1) as f64
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
    fn no_false_negatives_and_few_false_positives() {
        let mut hasher = KeyHasher::<String>::default();
        let keys: Vec<String> = (0..20_000).map(|i| format!("key{i}")).collect();
        let mut hashes: Vec<u64> = keys.iter().map(|k| hasher.hash(k.as_bytes())).collect();
        let filter = KeyFilter::build(&mut hashes);
        let (descriptor, fingerprints) = filter.parts();
        let filter = KeyFilter::from_parts(descriptor, fingerprints).expect("stored parts");
        let tester = filter.tester();
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
