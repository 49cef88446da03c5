//! Reads of a trace are zero-copy, and batches are shared, not copied: measured with the
//! counting allocator.
//!
//! - Cloning a batch handle, or taking a snapshot, allocates nothing per update (a snapshot
//!   allocates only its list of handles).
//! - A full cursor pass over a `String`-keyed trace, and batched lookups with a warm cursor and
//!   scratch, allocate nothing: every key, value, time and diff is a `Ref` into the columns.
//! - A batch's heap is what `heap_bytes` reports, within allocator rounding, and the columns are
//!   exactly sized (no builder slack survives `done` of pushed updates; only a big merge's
//!   columns, sized in advance, may keep up to a fifth, which this test does not build).
//!
//! One test function, so no other test thread allocates meanwhile.

use ripple_bench::alloc::{allocation_calls, live_bytes, peak_bytes, reset_peak, CountingAlloc};
use ripple_trace::{Builder, Description, LookupScratch, SpineConfig, TraceHandle};
use ripple_updates::Antichain;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

type S = (String, u64, u64, i64);

#[test]
fn reads_and_shares_without_copying() {
    let trace = TraceHandle::<S>::new(SpineConfig::default());
    let mut expected_bytes = 0;
    for round in 0..4u64 {
        let before = live_bytes();
        let mut builder = Builder::<S>::new();
        let mut keys: Vec<String> = (0..5000u64)
            .map(|i| format!("key-{:08}-{}", i * 4 + round, "x".repeat((i % 9) as usize)))
            .collect();
        keys.sort();
        for (index, key) in keys.iter().enumerate() {
            for val in 0..(index as u64 % 3 + 1) {
                builder.push(key.as_bytes(), &val, &round, &1);
            }
        }
        drop(keys);
        let batch = builder.done(Description::new(
            Antichain::from_elem(round),
            Antichain::from_elem(round + 1),
        ));
        let held = live_bytes() - before;
        let reported = batch.heap_bytes();
        assert!(
            held >= reported && held <= reported + reported / 50 + 512,
            "batch holds {held} bytes, reports {reported}"
        );
        expected_bytes += reported;

        // Cloning a handle copies nothing.
        let before = live_bytes();
        let clone = batch.clone();
        assert_eq!(live_bytes(), before, "cloning a batch allocates");
        assert_eq!(clone.handle_count(), 2);
        drop(clone);
        trace.insert(batch);
    }
    // The handle holds physical compaction at time 0, so the four batches stay distinct and
    // the cursor merges them on the fly.
    let snapshot = trace.snapshot();
    let batches: usize = snapshot.batches().iter().map(|b| b.heap_bytes()).sum();
    assert_eq!(snapshot.batches().len(), 4);
    assert_eq!(batches, expected_bytes);

    let mut cursor = snapshot.cursor();
    let probes: Vec<String> = (0..64u64).map(|i| format!("key-{:08}-", i * 97)).collect();
    let probe_columns: <String as columnar::Columnar>::Container =
        columnar::Columnar::as_columns(probes.iter());
    let mut scratch = LookupScratch::default();
    // Warm the cursor and scratch.
    cursor.lookup(
        columnar::Borrow::borrow(&probe_columns),
        &mut scratch,
        |_, _| {},
    );

    let before = live_bytes();
    let calls = allocation_calls();
    reset_peak();
    let (mut updates, mut key_bytes) = (0usize, 0usize);
    cursor.rewind_keys();
    while let Some(key) = cursor.get_key() {
        key_bytes += key.len();
        while cursor.get_val().is_some() {
            cursor.map_times(|_t, r| updates += *r as usize);
            cursor.step_val();
        }
        cursor.step_key();
    }
    let mut found = 0;
    cursor.lookup(
        columnar::Borrow::borrow(&probe_columns),
        &mut scratch,
        |_, vals| {
            while vals.get_val().is_some() {
                vals.map_times(|_t, _r| found += 1);
                vals.step_val();
            }
        },
    );
    assert_eq!(peak_bytes(), before, "reading the trace allocated");
    assert_eq!(allocation_calls(), calls, "reading the trace allocated");
    assert_eq!(updates, snapshot.len());
    assert!(key_bytes > 0);
    assert!(found > 0, "some probes name existing keys");
}
