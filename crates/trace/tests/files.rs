//! Batch files: any batch written and read back block by block is the same batch; damaged,
//! cut or foreign files are errors that name the file (and the block), never panics or wrong
//! rows; a failed write leaves no file behind.

use proptest::prelude::*;
use ripple_storage::{
    FileReader, FileStore, FileWriter, LocalDir, Storage, StorageError, StorageFault,
    StorageSettings,
};
use ripple_trace::merge::Merge;
use ripple_trace::writer::write_batch;
use ripple_trace::{Batch, Builder, Description, LookupScratch, TraceSnapshot};
use ripple_updates::{Antichain, Product};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type Time = Product<u64, u32>;
type U = (String, u64, Time, i64);
type Row = (String, u64, Time, i64);

/// A fresh directory under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("ripple-storage-test-{}-{id}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a scratch directory");
        Self(path)
    }

    fn dir(&self) -> LocalDir {
        LocalDir::new(&self.0).expect("the scratch directory")
    }

    /// A storage tier in this directory, with blocks of about `block_updates` and a cache of
    /// `cache_bytes`.
    fn storage(&self, block_updates: usize, cache_bytes: usize) -> Arc<Storage> {
        storage_on(Box::new(self.dir()), block_updates, cache_bytes)
    }
}

fn storage_on(store: Box<dyn FileStore>, block_updates: usize, cache_bytes: usize) -> Arc<Storage> {
    let settings = StorageSettings {
        memory_budget: cache_bytes,
        cache_bytes,
        working_bytes: 0,
        block_updates,
        filters: true,
        spill_min_bytes: 0,
    };
    Arc::new(Storage::with_store(store, None, settings))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn batch_of(rows: Vec<Row>) -> Batch<U> {
    batch_between(rows, 0, 10)
}

/// A batch of `rows` (times in rounds `lower..upper`) for rounds `[lower, upper)`.
fn batch_between(mut rows: Vec<Row>, lower: u64, upper: u64) -> Batch<U> {
    rows.sort();
    rows.dedup_by(|b, a| {
        let same = (&a.0, a.1, a.2) == (&b.0, b.1, b.2);
        if same {
            a.3 += b.3;
        }
        same
    });
    rows.retain(|row| row.3 != 0);
    let mut builder = Builder::new();
    for (key, val, time, diff) in &rows {
        builder.push(key.as_bytes(), val, time, diff);
    }
    builder.done(Description::new(
        Antichain::from_elem(Product::new(lower, 0)),
        Antichain::from_elem(Product::new(upper, 0)),
    ))
}

/// The files in `dir`, temporary ones included.
fn files_in(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .expect("the directory")
        .map(|entry| entry.expect("an entry").file_name())
        .collect()
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    let key = prop_oneof![Just(String::new()), "[a-c]{1,3}", "[a-z]{0,10}"];
    let time = (0u64..4, 0u32..3).prop_map(|(outer, round)| Product::new(outer, round));
    proptest::collection::vec((key, 0u64..5, time, -2i64..3), 0..200)
}

/// The batch file `name` opened and every block checked, then its rows.
fn rows_of_file(storage: &Arc<Storage>, name: &str) -> Result<Vec<Row>, StorageError> {
    let batch = Batch::<U>::open_file(storage, name)?;
    batch.check_blocks()?;
    Ok(batch.to_rows())
}

/// A batch of a few hundred updates with String keys, written in blocks of about 16 as the
/// file `batch`.
fn written() -> (Scratch, Arc<Storage>, Batch<U>) {
    let scratch = Scratch::new();
    let rows = (0..300u64)
        .map(|i| (format!("key{:03}", i / 3), i % 5, Product::new(i % 4, 0), 1))
        .collect();
    let batch = batch_of(rows);
    let storage = scratch.storage(16, 0);
    write_batch(storage.store(), "batch", &batch, 16, true).expect("the file is written");
    (scratch, storage, batch)
}

/// Owned rows of the values of `found`'s key.
fn found_rows(snapshot: &TraceSnapshot<U>, probes: &[String]) -> Vec<Row> {
    let mut column = <String as columnar::Columnar>::Container::default();
    for probe in probes {
        columnar::Push::push(&mut column, probe);
    }
    let mut rows = Vec::new();
    let mut scratch = LookupScratch::default();
    snapshot.lookup(
        columnar::Borrow::borrow(&column),
        &mut scratch,
        |_, vals| {
            let key = String::from_utf8_lossy(vals.key()).into_owned();
            while let Some(val) = vals.get_val() {
                vals.map_times(|time, diff| {
                    rows.push((
                        key.clone(),
                        *val,
                        Product::new(*time.outer, *time.inner),
                        *diff,
                    ))
                });
                vals.step_val();
            }
        },
    );
    rows
}

proptest! {
    /// A batch written and read back is the same batch: its rows, its description, its
    /// cursors' seeks and its lookups, whatever the block size and the cache.
    #[test]
    fn files_round_trip(
        rows in rows(),
        block_updates in 1usize..40,
        cache in prop_oneof![Just(0usize), Just(1 << 20)],
        targets in proptest::collection::vec("[a-z]{0,3}", 0..12),
    ) {
        let scratch = Scratch::new();
        let storage = scratch.storage(block_updates, cache);
        let batch = batch_of(rows);
        let stored = batch.write_to(&storage).expect("the file is written");
        prop_assert_eq!(stored.description(), batch.description());
        prop_assert_eq!(stored.len(), batch.len());
        prop_assert_eq!((stored.key_count(), stored.val_count()), (batch.key_count(), batch.val_count()));
        stored.check_invariants();
        prop_assert_eq!(stored.to_rows(), batch.to_rows());
        let mut targets = targets;
        targets.sort();
        let (mut ours, mut theirs) = (stored.cursor(), batch.cursor());
        for target in &targets {
            ours.seek_key(target.as_bytes());
            theirs.seek_key(target.as_bytes());
            prop_assert_eq!(ours.get_key(), theirs.get_key());
            prop_assert_eq!(ours.key_index(), theirs.key_index());
        }
        let in_memory = TraceSnapshot::new(vec![batch.clone()]);
        let in_file = TraceSnapshot::new(vec![stored.clone()]);
        prop_assert_eq!(found_rows(&in_file, &targets), found_rows(&in_memory, &targets));
        drop((stored, in_file));
        let written = u64::from(!batch.is_empty());
        prop_assert_eq!(storage.stats().files_written, written);
        prop_assert_eq!(storage.stats().files_deleted, written, "the last handle deletes the file");
        prop_assert_eq!(storage.stats().cache.resident_bytes, 0);
    }
}

/// A flipped byte anywhere is an error naming the file and, inside a block, the block: the
/// file is read to its end or to the first error, never to wrong rows.
#[test]
fn every_flipped_byte_is_an_error() {
    let (scratch, storage, batch) = written();
    let path = scratch.0.join("batch");
    let intact = std::fs::read(&path).expect("the file");
    for at in (0..intact.len()).step_by(7) {
        let mut damaged = intact.clone();
        damaged[at] ^= 0x10;
        std::fs::write(&path, &damaged).expect("the damaged file");
        let outcome = rows_of_file(&storage, "batch");
        match outcome {
            Ok(rows) => panic!("byte {at} flipped, read {} rows", rows.len()),
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains("batch"), "byte {at}: {message}");
                assert!(
                    message.contains("block")
                        || message.contains("footer")
                        || message.contains("version")
                        || message.contains("magic")
                        || message.contains("fit"),
                    "byte {at}: {message}"
                );
            }
        }
    }
    std::fs::write(&path, &intact).expect("the file again");
    assert_eq!(
        rows_of_file(&storage, "batch").expect("reads"),
        batch.to_rows()
    );
}

/// Cut files, other files and another version are refused with a message.
#[test]
fn cut_and_foreign_files_are_refused() {
    let (scratch, storage, _batch) = written();
    let path = scratch.0.join("batch");
    let intact = std::fs::read(&path).expect("the file");
    let open = |bytes: &[u8]| {
        std::fs::write(&path, bytes).expect("written");
        Batch::<U>::open_file(&storage, "batch")
            .err()
            .expect("refused")
            .to_string()
    };
    assert!(open(&intact[..intact.len() - 8]).contains("magic"));
    assert!(open(&intact[..16]).contains("not a batch file"));
    assert!(open(b"").contains("not a batch file"));
    assert!(open(&[7u8; 64]).contains("magic"));
    let mut other_version = intact.clone();
    let version_at = intact.len() - 16;
    other_version[version_at] = 9;
    assert!(open(&other_version).contains("version 9"));
    // The same file read as a batch of other types: its layout does not match.
    std::fs::write(&path, &intact).expect("written");
    let other = Batch::<(u64, u64, u64, i64)>::open_file(&storage, "batch");
    assert!(other.is_err());
    let missing = Batch::<U>::open_file(&storage, "missing")
        .err()
        .expect("no such file");
    assert!(missing.to_string().contains("missing"), "{missing}");
}

/// A store that holds `room` bytes more (a disk filling up): a write past it fails with the
/// disk's error.
struct FullDisk {
    dir: LocalDir,
    room: Arc<AtomicUsize>,
}

impl FullDisk {
    fn new(dir: LocalDir, room: usize) -> Self {
        let room = Arc::new(AtomicUsize::new(room));
        Self { dir, room }
    }
}

/// A file of a [`FullDisk`].
struct Filling {
    file: Box<dyn FileWriter>,
    room: Arc<AtomicUsize>,
    path: PathBuf,
}

impl FileWriter for Filling {
    fn append(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        let room = self.room.load(Ordering::Relaxed);
        if bytes.len() > room {
            let error = std::io::Error::from(std::io::ErrorKind::StorageFull);
            return Err(StorageError::Io {
                path: self.path.clone(),
                source: error,
            });
        }
        self.room.store(room - bytes.len(), Ordering::Relaxed);
        self.file.append(bytes)
    }
    fn finish(self: Box<Self>) -> Result<(), StorageError> {
        self.file.finish()
    }
}

impl FileStore for FullDisk {
    fn create(&self, name: &str) -> Result<Box<dyn FileWriter>, StorageError> {
        Ok(Box::new(Filling {
            file: self.dir.create(name)?,
            room: Arc::clone(&self.room),
            path: self.path(name),
        }))
    }
    fn open(&self, name: &str) -> Result<Box<dyn FileReader>, StorageError> {
        self.dir.open(name)
    }
    fn delete(&self, name: &str) -> Result<(), StorageError> {
        self.dir.delete(name)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path(name)
    }
}

#[test]
fn failed_writes_leave_nothing() {
    let scratch = Scratch::new();
    let batch = batch_of(vec![("a".into(), 1, Product::new(0, 0), 1)]);
    let full = storage_on(Box::new(FullDisk::new(scratch.dir(), 0)), 8, 0);
    let error = batch.write_to(&full).err().expect("the write fails");
    assert!(error.to_string().contains("batch"), "{error}");
    assert!(files_in(&scratch.0).is_empty());
    // A local write whose rename fails (a directory holds the name) removes its partial file.
    std::fs::create_dir(scratch.0.join("taken")).expect("a directory");
    let error = write_batch(&scratch.dir(), "taken", &batch, 8, true).expect_err("fails");
    assert!(error.to_string().contains("taken"), "{error}");
    assert_eq!(
        files_in(&scratch.0),
        vec![std::ffi::OsString::from("taken")]
    );
    // A file deleted is gone.
    let dir = scratch.dir();
    write_batch(&dir, "batch", &batch, 8, false).expect("written");
    dir.delete("batch").expect("deleted");
    assert!(Batch::<U>::open_file(&scratch.storage(8, 0), "batch").is_err());
}

/// Merges `older` and `newer` at `since` in steps of `fuel`, to a file of `storage` or (without
/// one) in memory.
fn merged(
    older: Batch<U>,
    newer: Batch<U>,
    since: &Antichain<Time>,
    fuel: isize,
    storage: Option<&Arc<Storage>>,
) -> Batch<U> {
    let mut merge = match storage {
        Some(storage) => Merge::to_file(older, newer, since.borrow(), storage),
        None => Merge::new(older, newer, since.borrow()),
    };
    let mut budget = fuel;
    while !merge.work(&mut budget) {
        budget = fuel;
    }
    merge.complete()
}

proptest! {
    /// A merge written to a file block by block, of stored or in-memory inputs, holds what the
    /// same merge in memory holds, whatever the fuel and the block size; every file is gone once
    /// the batches are.
    #[test]
    fn merges_to_files_hold_what_merges_in_memory_hold(
        older in rows(),
        newer in rows(),
        since in (0u64..12, 0u32..3),
        block_updates in 1usize..40,
        fuel in 1isize..60,
        store_inputs in any::<bool>(),
    ) {
        let scratch = Scratch::new();
        let storage = scratch.storage(block_updates, 1 << 16);
        let shift = |rows: Vec<Row>| -> Vec<Row> {
            rows.into_iter()
                .map(|(k, v, t, r)| (k, v, Product::new(t.outer + 4, t.inner), r))
                .collect()
        };
        let older = batch_between(older, 0, 4);
        let newer = batch_between(shift(newer), 4, 8);
        let since = Antichain::from_elem(Product::new(since.0, since.1));
        let expected = merged(older.clone(), newer.clone(), &since, fuel, None);
        let (older, newer) = if store_inputs {
            (older.write_to(&storage).expect("written"), newer.write_to(&storage).expect("written"))
        } else {
            (older, newer)
        };
        let result = merged(older, newer, &since, fuel, Some(&storage));
        prop_assert_eq!(result.is_stored(), !expected.is_empty());
        prop_assert_eq!(result.description(), expected.description());
        result.check_invariants();
        prop_assert_eq!(result.to_rows(), expected.to_rows());
        drop(result);
        prop_assert!(files_in(&scratch.0).is_empty());
        let stats = storage.stats();
        prop_assert_eq!(stats.files_written, stats.files_deleted);
    }
}

/// A disk that fills up in the middle of a merge to a file ends the worker with a storage
/// fault naming the file, and leaves no part of the file behind.
#[test]
fn merges_on_a_full_disk_fail_and_leave_nothing() {
    let scratch = Scratch::new();
    let rows = |from: u64| -> Vec<Row> {
        (0..2_000u64)
            .map(|i| {
                (
                    format!("key{:05}", i),
                    i % 7,
                    Product::new(from + i % 4, 0),
                    1,
                )
            })
            .collect()
    };
    let older = batch_between(rows(0), 0, 4);
    let newer = batch_between(rows(4), 4, 8);
    let full = storage_on(Box::new(FullDisk::new(scratch.dir(), 20_000)), 16, 0);
    let since = Antichain::from_elem(Product::new(0, 0));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        merged(older, newer, &since, 100, Some(&full))
    }));
    let payload = outcome.err().expect("the merge fails");
    assert!(payload.is::<StorageFault>());
    let fault = full.fault().expect("the error is recorded");
    assert!(fault.contains("batch-"), "{fault}");
    assert!(
        files_in(&scratch.0).is_empty(),
        "{:?}",
        files_in(&scratch.0)
    );
}

/// A batch of more keys than a filter partition holds is written with several partitions,
/// and lookups through them find every present key and (nearly) no absent one: each block's
/// probes meet the filter of its own partition.
#[test]
fn partitioned_filters_find_every_key() {
    let scratch = Scratch::new();
    let keys = 3 * ripple_trace::filter::KeyFilter::PARTITION_KEYS as u64;
    let rows = (0..keys)
        .map(|i| (format!("key{i:07}"), i % 3, Product::new(0, 0), 1))
        .collect();
    let batch = batch_of(rows);
    let storage = scratch.storage(256, 1 << 20);
    let stored = batch.write_to(&storage).expect("the file is written");
    let snapshot = TraceSnapshot::new(vec![stored]);
    let present: Vec<String> = (0..keys)
        .step_by(97)
        .map(|i| format!("key{i:07}"))
        .collect();
    let absent: Vec<String> = (0..keys)
        .step_by(97)
        .map(|i| format!("key{i:07}x"))
        .collect();
    assert!(found_rows(&snapshot, &absent).is_empty());
    let stats = storage.stats();
    let (tested, passed) = (stats.probes_filtered, stats.probes_passed);
    // A probe between two blocks' key ranges is skipped before any filter.
    assert!(
        tested * 10 > absent.len() as u64 * 9,
        "{tested} probes tested"
    );
    assert!(
        passed * 50 < tested,
        "{passed} of {tested} absent probes passed"
    );
    let found = found_rows(&snapshot, &present);
    let expected: Vec<Row> = present
        .iter()
        .map(|key| {
            let i: u64 = key[3..].parse().expect("a number");
            (key.clone(), i % 3, Product::new(0, 0), 1)
        })
        .collect();
    assert_eq!(found, expected);
}

/// A filter that passes every probe is skipped by later lookups (`FilterYield`), which still
/// find every present key and no absent one, single probes and runs alike; once retests see it
/// reject, every lookup tests it again.
#[test]
fn filters_that_pass_every_probe_are_skipped_until_they_reject() {
    let scratch = Scratch::new();
    let keys = 20_000u64;
    let row = |i: u64| (format!("key{i:07}"), i % 3, Product::new(0, 0), 1);
    let storage = scratch.storage(256, 1 << 20);
    let stored = batch_of((0..keys).map(row).collect())
        .write_to(&storage)
        .expect("the file is written");
    let snapshot = TraceSnapshot::new(vec![stored]);
    let tested = || storage.stats().probes_filtered;
    let present: Vec<u64> = (0..keys).step_by(7).collect();
    assert!(present.len() as u32 > 2 * ripple_trace::filter::FilterYield::SAMPLE_MIN);
    for &i in &present {
        assert_eq!(found_rows(&snapshot, &[row(i).0]), vec![row(i)]);
    }
    // The first lookups test, then one in RETEST_EVERY does.
    assert!(
        tested() < present.len() as u64 * 2 / 3,
        "{} tested",
        tested()
    );
    let present_keys: Vec<String> = present.iter().map(|&i| row(i).0).collect();
    let expected: Vec<Row> = present.iter().map(|&i| row(i)).collect();
    assert_eq!(found_rows(&snapshot, &present_keys), expected);
    let absent: Vec<String> = present.iter().map(|&i| format!("key{i:07}x")).collect();
    let before = tested();
    for key in &absent {
        assert!(found_rows(&snapshot, std::slice::from_ref(key)).is_empty());
    }
    assert!(found_rows(&snapshot, &absent).is_empty());
    // The retests' rejections bring the filter back for most of the absent probes.
    let again = tested() - before;
    assert!(again > absent.len() as u64 / 2, "{again} tested");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A sealed chain's chunks may cut a key's updates anywhere: `write_sorted` gives the
    /// batch of all of them whatever the cuts (a key across two, three or more parts, empty
    /// parts), in blocks of whole keys.
    #[test]
    fn sorted_parts_write_the_batch_of_their_updates(
        rows in rows(),
        cuts in proptest::collection::vec(0usize..200, 0..8),
        block_updates in 1usize..20,
    ) {
        let scratch = Scratch::new();
        let storage = scratch.storage(block_updates, 1 << 20);
        let batch = batch_of(rows);
        let sorted = batch.to_rows();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(sorted.len())).collect();
        cuts.sort_unstable();
        let mut parts = Vec::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain(std::iter::once(sorted.len())) {
            parts.push(ripple_updates::Updates::<U>::from_rows(sorted[start..cut].iter()));
            start = cut;
        }
        let written = Batch::write_sorted(&storage, batch.description(), parts)
            .expect("the file is written");
        written.check_blocks().expect("every block reads");
        prop_assert_eq!(written.to_rows(), sorted);
        prop_assert_eq!(written.key_count(), batch.key_count());
    }
}
