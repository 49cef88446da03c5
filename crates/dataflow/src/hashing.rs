//! How keys pick their worker: a deterministic hash of the borrowed key.
//!
//! Both inputs of a join and every process must route a key to the same worker, so the hash is
//! computed on the borrowed form (`Ref`) that all containers and batches hand out, with a fixed
//! hasher (`FxHasher`, no random seed).

use columnar::Ref;
use ripple_updates::Data;
use std::hash::{Hash, Hasher};

/// Data whose borrowed form can be hashed: keys of arrangements, joins and reductions.
///
/// Implemented for every [`Data`] type whose `Ref` is `Hash`: integers, tuples, `String`,
/// `Vec<u8>`, and derived structs with `#[columnar(derive(Hash))]`.
pub trait ExchangeData: Data {
    /// The routing hash of a borrowed item.
    fn hash_ref(item: Ref<'_, Self>) -> u64;
}

impl<D: Data> ExchangeData for D
where
    for<'a> Ref<'a, D>: Hash,
{
    #[inline]
    fn hash_ref(item: Ref<'_, Self>) -> u64 {
        let mut hasher = rustc_hash::FxHasher::default();
        item.hash(&mut hasher);
        // Fx leaves low bits weak for small integers; fold the high half in before masking.
        let hash = hasher.finish();
        hash ^ (hash >> 32)
    }
}
