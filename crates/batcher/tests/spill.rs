//! A batcher that writes its chains out hands out exactly what one in memory does: the same
//! updates at every seal, the same frontiers, whatever the chunk size, with every spill file
//! deleted once nothing needs it; and a damaged spill file is an error naming it, not a wrong
//! answer.

use proptest::prelude::*;
use ripple_batcher::{BatcherConfig, MergeBatcher};
use ripple_storage::{SpillDir, Storage, StorageFault, StorageSettings};
use ripple_updates::update::Row;
use ripple_updates::{Antichain, Lattice, Product, Updates};
use std::sync::Arc;

type PartialU = (u32, u32, Product<u64, u32>, i64);

/// A tier whose budget every byte exceeds: each chain the batcher holds is written out.
fn spilling_storage() -> Arc<Storage> {
    let settings = StorageSettings {
        spill_min_bytes: 0,
        cache_bytes: 0,
        ..StorageSettings::with_budget(0)
    };
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    Arc::new(Storage::in_spill_dir(spill, settings))
}

fn files_in(storage: &Storage) -> Vec<std::path::PathBuf> {
    let path = storage.spill_path().expect("a spill directory");
    let mut files: Vec<_> = std::fs::read_dir(path)
        .expect("the spill directory lists")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    files
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn spilled_seals_match_in_memory_ones(
        rounds in proptest::collection::vec(
            (
                proptest::collection::vec((0u32..40, 0u32..3, (0u64..4, 0u32..4), -2i64..3), 0..120),
                1usize..40,
                proptest::collection::vec((0u64..4, 0u32..4), 1..3),
            ),
            1..6,
        ),
        cap in 0usize..3,
    ) {
        let config = BatcherConfig::with_chunk_bytes([64, 1024, 1 << 20][cap]);
        let storage = spilling_storage();
        let mut memory = MergeBatcher::<PartialU>::new(config);
        let mut spilling = MergeBatcher::<PartialU>::new(config);
        spilling.set_storage(Some(Arc::clone(&storage)));
        let mut lower = Antichain::from_elem(Product::new(0u64, 0u32));
        for (updates, slice, upper_times) in rounds {
            let anchor = lower.elements()[0];
            let rows: Vec<Row<PartialU>> = updates
                .into_iter()
                .map(|(k, v, (o, i), r)| (k, v, Product::new(o, i).join(&anchor), r))
                .collect();
            for part in rows.chunks(slice) {
                let part = Updates::from_rows(part.iter());
                memory.push_updates(&part);
                spilling.push_updates(&part);
            }
            let mut upper = Antichain::new();
            for (o, i) in upper_times {
                upper.insert(Product::new(o, i).join(&anchor));
            }
            let expected = memory.seal(upper.borrow());
            let shipped = spilling.seal(upper.borrow());
            spilling.check_invariants();
            shipped.check_invariants();
            prop_assert_eq!(shipped.to_rows(), expected.to_rows());
            prop_assert_eq!(spilling.frontier().to_owned(), memory.frontier().to_owned());
            prop_assert_eq!(spilling.len(), memory.len());
            lower = upper;
            if lower.is_empty() {
                break;
            }
        }
        let rest = spilling.seal(Antichain::new().borrow());
        prop_assert_eq!(rest.to_rows(), memory.seal(Antichain::new().borrow()).to_rows());
        drop(rest);
        drop(spilling);
        prop_assert!(files_in(&storage).is_empty(), "spill files left: {:?}", files_in(&storage));
        let stats = storage.stats();
        prop_assert_eq!(stats.files_written, stats.files_deleted);
        prop_assert_eq!(stats.batch_bytes, 0, "the batcher's bytes are no longer counted");
    }
}

/// Updates enough to fill several chunks, all at time 0.
fn load(count: u32) -> Updates<PartialU> {
    let rows: Vec<Row<PartialU>> = (0..count)
        .map(|i| {
            (
                i.wrapping_mul(2_654_435_761) % 5_000,
                i % 3,
                Product::new(0, 0),
                1,
            )
        })
        .collect();
    Updates::from_rows(rows.iter())
}

/// A whole load waits in spill files for its time to complete, and comes out as it went in.
#[test]
fn a_load_waits_in_spill_files() {
    let storage = spilling_storage();
    let mut batcher = MergeBatcher::<PartialU>::new(BatcherConfig::with_chunk_bytes(4096));
    batcher.set_storage(Some(Arc::clone(&storage)));
    let mut memory = MergeBatcher::<PartialU>::new(BatcherConfig::with_chunk_bytes(4096));
    let updates = load(50_000);
    for _ in 0..3 {
        batcher.push_updates(&updates);
        memory.push_updates(&updates);
    }
    assert!(
        !files_in(&storage).is_empty(),
        "the chains were written out"
    );
    assert_eq!(
        storage.stats().batch_bytes,
        0,
        "no chain stays in memory over a zero budget"
    );
    let upper = Antichain::from_elem(Product::new(1, 0));
    let shipped = batcher.seal(upper.borrow());
    assert!(
        shipped.is_stored(),
        "a seal of stored chains hands out a stored chain"
    );
    assert_eq!(shipped.to_rows(), memory.seal(upper.borrow()).to_rows());
}

/// A flipped byte in a spill file is caught by the chunk's checksum: the worker unwinds with
/// a storage fault recorded as naming the file and the chunk.
#[test]
fn a_damaged_spill_file_is_an_error() {
    let storage = spilling_storage();
    let mut batcher = MergeBatcher::<PartialU>::new(BatcherConfig::with_chunk_bytes(4096));
    batcher.set_storage(Some(Arc::clone(&storage)));
    batcher.push_updates(&load(20_000));
    batcher.push_updates(&load(20_000));
    let files = files_in(&storage);
    assert!(!files.is_empty());
    for file in &files {
        let mut bytes = std::fs::read(file).expect("a spill file reads");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(file, bytes).expect("a spill file writes");
    }
    let sealed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        batcher
            .seal(Antichain::from_elem(Product::new(1, 0)).borrow())
            .to_rows()
    }));
    let payload = sealed.expect_err("a damaged chunk is not read as data");
    assert!(payload.downcast_ref::<StorageFault>().is_some());
    let fault = storage.fault().expect("the error is recorded");
    assert!(
        fault.contains("chunks-") && fault.contains("spilled chunk") && fault.contains("checksum"),
        "{fault}"
    );
}

/// Under its budget a batcher writes nothing out, and counts its chains in memory toward the
/// budget only while it holds them: a seal that ships everything leaves nothing counted.
#[test]
fn chains_in_memory_are_counted_while_held() {
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    let storage = Arc::new(Storage::in_spill_dir(
        spill,
        StorageSettings::with_budget(1 << 30),
    ));
    let mut batcher = MergeBatcher::<PartialU>::new(BatcherConfig::with_chunk_bytes(4096));
    batcher.set_storage(Some(Arc::clone(&storage)));
    for _ in 0..4 {
        batcher.push_updates(&load(20_000));
    }
    assert!(storage.stats().batch_bytes > 0, "held chains are counted");
    assert!(
        files_in(&storage).is_empty(),
        "nothing is written under budget"
    );
    let shipped = batcher.seal(Antichain::from_elem(Product::new(1, 0)).borrow());
    assert!(!shipped.is_stored());
    assert_eq!(
        storage.stats().batch_bytes,
        0,
        "nothing held, nothing counted"
    );
}
