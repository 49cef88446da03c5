//! Reads of stored batches point into pinned blocks (Kudu's KUDU-2844): a cursor's keys and
//! values stay correct while the cache evicts their block and the spine merges their batch
//! away (its file is deleted when the last handle goes); a full pass over a stored
//! String-keyed trace copies no value out (no allocation per value), warm batched lookups
//! allocate nothing, and a batched lookup reads each block once.
//!
//! That a `Ref` cannot outlive the handle pinning its block is checked by the compiler: see
//! the `compile_fail` example on [`ripple_trace::stored`].

use columnar::{Borrow, Columnar, Push};
use ripple_storage::{SpillDir, Storage, StorageSettings};
use ripple_trace::{Batch, Builder, Description, LookupScratch, Spine, SpineConfig};
use ripple_updates::Antichain;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

type U = (String, u64, u64, i64);

/// Counts this thread's allocation calls (the test harness's other threads are not counted).
struct Counting;

thread_local! {
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` unchanged; counting touches only a `const`
// thread-local `Cell` without `Drop`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CALLS.with(|calls| calls.set(calls.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        CALLS.with(|calls| calls.set(calls.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn calls() -> usize {
    CALLS.with(Cell::get)
}

fn storage(budget: usize, cache_bytes: usize) -> Arc<Storage> {
    let settings = StorageSettings {
        memory_budget: budget.max(cache_bytes),
        cache_bytes,
        working_bytes: 0,
        block_updates: 64,
        filters: true,
        spill_min_bytes: 0,
    };
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    Arc::new(Storage::in_spill_dir(spill, settings))
}

/// Keys `key00000`, `key00001`, ... (`count` of them, `stride` apart), each with the value
/// `2 * i` at `time`.
fn batch(count: u64, stride: u64, time: u64) -> Batch<U> {
    let mut builder = Builder::new();
    for i in 0..count {
        let key = format!("key{:05}", i * stride);
        builder.push(key.as_bytes(), &(2 * i), &time, &1);
    }
    builder.done(Description::new(
        Antichain::from_elem(time),
        Antichain::from_elem(time + 1),
    ))
}

#[test]
fn refs_outlive_eviction_merge_and_file_deletion() {
    let storage = storage(0, 0);
    let mut spine = Spine::<U>::with_storage(SpineConfig::default(), Some(Arc::clone(&storage)));
    spine.insert(batch(500, 1, 0));
    spine.set_physical_compaction(Antichain::from_elem(1).borrow());
    assert!(
        spine.batches().iter().all(Batch::is_stored),
        "budget 0 spills"
    );
    let snapshot = spine.snapshot();
    let mut cursor = snapshot.cursor();
    let mut keys = Vec::new();
    while let Some(key) = cursor.get_key() {
        keys.push((key, cursor.get_val().expect("a value")));
        cursor.step_key();
    }
    assert_eq!(keys.len(), 500);
    // No cache: the blocks live only because the snapshot's handle pins them.
    let stats = storage.stats();
    assert_eq!(stats.cache.cached_bytes, 0);
    assert!(storage.cache().pinned_bytes() > 0);
    // The spine merges the batch away (and its replacement is written out in turn).
    for time in 1..4 {
        spine.insert(batch(200, 3, time));
        spine.set_physical_compaction(Antichain::from_elem(time + 1).borrow());
    }
    spine.set_logical_compaction(Antichain::from_elem(4).borrow());
    spine.complete_merges();
    spine.compact();
    drop(spine);
    // Only the snapshot holds the old batch: dropping it deletes the last files.
    let written = storage.stats().files_written;
    assert!(storage.stats().files_deleted < written);
    for (index, (key, val)) in keys.iter().enumerate() {
        assert_eq!(*key, format!("key{index:05}").as_bytes());
        assert_eq!(**val, 2 * index as u64);
    }
    drop(cursor);
    drop(snapshot);
    let stats = storage.stats();
    assert_eq!(
        stats.files_deleted, written,
        "every file is deleted with its last handle"
    );
    assert_eq!(
        stats.cache.resident_bytes, 0,
        "no block outlives its readers"
    );
    assert_eq!(storage.cache().pinned_bytes(), 0);
}

#[test]
fn stored_reads_copy_nothing() {
    let storage = storage(usize::MAX, 64 << 20);
    let stored = batch(20_000, 1, 0).write_to(&storage).expect("written");
    assert!(stored.block_count() > 100);
    let snapshot = ripple_trace::TraceSnapshot::new(vec![stored]);
    // Warm the cache, and pin every block in the snapshot's handle.
    let mut cursor = snapshot.cursor();
    while cursor.get_key().is_some() {
        cursor.step_key();
    }
    // A full pass: a cursor is a few allocations (one per batch); each value none.
    let before = calls();
    let mut cursor = snapshot.cursor();
    let mut total = 0u64;
    let mut bytes = 0usize;
    while let Some(key) = cursor.get_key() {
        bytes += key.len();
        while let Some(val) = cursor.get_val() {
            cursor.map_times(|_, diff| total += *val * *diff as u64);
            cursor.step_val();
        }
        cursor.step_key();
    }
    let during = calls() - before;
    assert_eq!(bytes, 20_000 * 8);
    assert_eq!(total, (0..20_000u64).map(|i| 2 * i).sum::<u64>());
    assert!(
        during <= 4,
        "{during} allocations in a pass over 20,000 values"
    );
    // Warm batched lookups: no allocation at all.
    let mut probes = <String as Columnar>::Container::default();
    for i in (0..20_000).step_by(37) {
        probes.push(&format!("key{i:05}"));
    }
    let mut scratch = LookupScratch::default();
    let mut cursor = snapshot.cursor();
    let mut found = 0;
    cursor.lookup(probes.borrow(), &mut scratch, |_, _| found += 1);
    let before = calls();
    for _ in 0..3 {
        cursor.lookup(probes.borrow(), &mut scratch, |_, _| found += 1);
    }
    assert_eq!(calls() - before, 0, "warm lookups allocate");
    assert_eq!(found, 4 * 20_000usize.div_ceil(37));
}

/// Probes of absent keys inside a stored batch's key range are turned away by its key filter:
/// few pass (about 1 in 256), and no block is read for those that do not.
#[test]
fn filters_spare_block_reads_for_absent_keys() {
    let storage = storage(usize::MAX, 0);
    // Keys 0, 2, 4, ...: the odd ones are absent but inside every block's key range.
    let stored = batch(20_000, 2, 0).write_to(&storage).expect("written");
    let snapshot = ripple_trace::TraceSnapshot::new(vec![stored]);
    let mut probes = <String as Columnar>::Container::default();
    for i in (1..40_000).step_by(2) {
        probes.push(&format!("key{i:05}"));
    }
    let mut found = 0;
    let mut cursor = snapshot.cursor();
    let read_before = storage.stats().cache.misses;
    cursor.lookup(probes.borrow(), &mut LookupScratch::default(), |_, _| {
        found += 1
    });
    assert_eq!(found, 0);
    let stats = storage.stats();
    // Probes between two blocks' key ranges are skipped by the index, untested.
    assert!(stats.probes_filtered >= 19_000, "{}", stats.probes_filtered);
    assert!(
        stats.probes_passed < 200,
        "{} of 20,000 absent probes passed the filter",
        stats.probes_passed
    );
    let blocks_read = stats.cache.misses - read_before;
    assert!(
        blocks_read <= stats.probes_passed,
        "{blocks_read} blocks read for {} passing probes",
        stats.probes_passed
    );
}

/// A batched lookup reads each block its present probes lie in once, for all of them (with no
/// cache, every read is a miss), and no other block.
#[test]
fn batched_lookups_read_each_block_once() {
    let storage = storage(usize::MAX, 0);
    let stored = batch(20_000, 1, 0).write_to(&storage).expect("written");
    assert!(stored.block_count() > 100);
    let keys: Vec<usize> = (5_000..15_000).step_by(3).collect();
    let mut blocks: Vec<usize> = keys.iter().map(|&key| stored.block_of_key(key)).collect();
    blocks.dedup();
    let snapshot = ripple_trace::TraceSnapshot::new(vec![stored]);
    let mut probes = <String as Columnar>::Container::default();
    for key in &keys {
        probes.push(&format!("key{key:05}"));
    }
    let before = storage.stats().cache.misses;
    let mut found = Vec::new();
    let mut cursor = snapshot.lookup_cursor();
    cursor.lookup(
        probes.borrow(),
        &mut LookupScratch::default(),
        |probe, vals| {
            found.push((probe, *vals.get_val().expect("a value")));
        },
    );
    let expected: Vec<(usize, u64)> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| (i, 2 * k as u64))
        .collect();
    assert_eq!(found, expected);
    let read = storage.stats().cache.misses - before;
    assert_eq!(
        read,
        blocks.len() as u64,
        "blocks read for {} blocks probed",
        blocks.len()
    );
}
