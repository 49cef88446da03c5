//! [`HeldBytes`]: an operator's report of the memory it keeps beside its batches.

use crate::tier::Storage;
use std::sync::Arc;

/// Bytes an operator keeps in memory that grow with the data and that no spine can write out
/// (a reduce's deferred times), reported to the process's storage tier as they change and
/// given back when the report drops; the tier counts them against the batches' share (see
/// [`Storage::over_budget`]). Without a tier it reports nothing.
#[derive(Debug, Default)]
pub struct HeldBytes {
    storage: Option<Arc<Storage>>,
    reported: usize,
}

impl HeldBytes {
    /// A report to `storage`, of nothing yet.
    pub fn new(storage: Option<Arc<Storage>>) -> Self {
        Self {
            storage,
            reported: 0,
        }
    }

    /// The operator now holds `bytes`.
    pub fn report(&mut self, bytes: usize) {
        if let Some(storage) = &self.storage {
            storage.hold(bytes, self.reported);
        }
        self.reported = bytes;
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.report(0);
    }
}

#[cfg(test)]
mod tests {
    use super::HeldBytes;
    use crate::{SpillDir, Storage, StorageSettings};
    use std::sync::Arc;

    /// What operators hold counts against the batches' share as reported, changes as it is
    /// reported again, and is given back when the report drops.
    #[test]
    fn held_bytes_take_the_batches_share_until_dropped() {
        let spill = SpillDir::new_in_temp().expect("a spill directory");
        let storage = Arc::new(Storage::in_spill_dir(
            spill,
            StorageSettings::with_budget(400),
        ));
        storage.account(150, 0);
        let mut held = HeldBytes::new(Some(Arc::clone(&storage)));
        held.report(50);
        assert!(
            !storage.over_budget(),
            "batches and held bytes fill the share exactly"
        );
        held.report(51);
        assert!(storage.over_budget());
        let mut other = HeldBytes::new(Some(Arc::clone(&storage)));
        other.report(10);
        held.report(40);
        assert!(!storage.over_budget(), "two reports add up");
        assert_eq!(storage.stats().held_bytes, 50);
        drop(held);
        drop(other);
        storage.account(50, 0);
        assert!(
            !storage.over_budget(),
            "dropped reports give their bytes back"
        );
        storage.account(1, 0);
        assert!(storage.over_budget());
        assert_eq!(
            storage.stats().batch_bytes,
            201,
            "held bytes are not batches"
        );
    }
}
