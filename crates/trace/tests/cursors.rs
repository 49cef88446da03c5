//! Cursor and lookup edge cases: empty batches, single updates, repeated probes, keys at batch
//! boundaries, string keys, and snapshots outliving the trace's merges.
//!
//! `String` keys are read back as their bytes (`&[u8]`), columnar's borrowed form of a string.

use ripple_trace::{Batch, Builder, Description, LookupScratch, SpineConfig, TraceHandle};
use ripple_updates::Antichain;

type S = (String, u64, u64, i64);

fn batch_of(rows: &[(&str, u64, u64, i64)], lower: u64, upper: u64) -> Batch<S> {
    let mut builder = Builder::<S>::new();
    for (k, v, t, r) in rows {
        builder.push(k.as_bytes(), v, t, r);
    }
    builder.done(Description::new(
        Antichain::from_elem(lower),
        Antichain::from_elem(upper),
    ))
}

fn keys(rows: &[&str]) -> Vec<String> {
    rows.iter().map(|s| s.to_string()).collect()
}

/// Runs a lookup of `probes` and returns, per found probe, (index, key, [(val, time, diff)]).
/// A found probe: its index, its key and its (val, time, diff) history, sorted.
type Found = (usize, String, Vec<(u64, u64, i64)>);

fn look(trace: &TraceHandle<S>, probes: &[&str]) -> Vec<Found> {
    let probes: <String as columnar::Columnar>::Container =
        columnar::Columnar::as_columns(keys(probes).iter());
    let mut scratch = LookupScratch::default();
    let mut out = Vec::new();
    trace.snapshot().lookup(
        columnar::Borrow::borrow(&probes),
        &mut scratch,
        |index, vals| {
            let mut history = Vec::new();
            while let Some(val) = vals.get_val() {
                vals.map_times(|t, r| history.push((*val, *t, *r)));
                vals.step_val();
            }
            history.sort();
            out.push((
                index,
                String::from_utf8(vals.key().to_vec()).unwrap(),
                history,
            ));
        },
    );
    out
}

#[test]
fn empty_batches_and_empty_traces() {
    let trace = TraceHandle::<S>::new(SpineConfig::default());
    assert!(look(&trace, &["a"]).is_empty());
    assert!(trace.snapshot().cursor().get_key().is_none());
    trace.advance_upper(Antichain::from_elem(3));
    trace.insert(batch_of(&[], 3, 4));
    assert!(look(&trace, &["a", "b"]).is_empty());
    let snapshot = trace.snapshot();
    let mut cursor = snapshot.cursor();
    cursor.seek_key(b"a");
    assert!(!cursor.key_valid() && !cursor.val_valid());
    cursor.step_key();
    cursor.step_val();
    assert!(cursor.get_val().is_none());
    assert_eq!(snapshot.upper(), Some(&Antichain::from_elem(4)));
}

#[test]
fn single_update_batches() {
    let trace = TraceHandle::<S>::new(SpineConfig::default());
    trace.insert(batch_of(&[("m", 1, 0, 5)], 0, 1));
    assert_eq!(look(&trace, &["m"]), vec![(0, "m".into(), vec![(1, 0, 5)])]);
    assert!(look(&trace, &["a"]).is_empty());
    assert!(look(&trace, &["z"]).is_empty());
    let snapshot = trace.snapshot();
    let mut cursor = snapshot.cursor();
    cursor.seek_key(b"n");
    assert!(!cursor.key_valid());
    let batch = &snapshot.batches()[0];
    assert_eq!(
        (batch.len(), batch.key_count(), batch.val_count()),
        (1, 1, 1)
    );
}

#[test]
fn repeated_probes_find_the_key_each_time() {
    let trace = TraceHandle::<S>::new(SpineConfig::default());
    trace.insert(batch_of(&[("a", 1, 0, 1), ("c", 2, 0, 1)], 0, 1));
    let found = look(&trace, &["a", "a", "b", "c", "c", "c"]);
    let indexes: Vec<usize> = found.iter().map(|f| f.0).collect();
    assert_eq!(indexes, vec![0, 1, 3, 4, 5]);
}

#[test]
fn keys_at_batch_boundaries_merge_across_batches() {
    // No merging (physical compaction held), so the three batches stay distinct and a key
    // appears at the end of one and the start of the next.
    let mut trace = TraceHandle::<S>::new(SpineConfig::default());
    trace.set_physical_compaction(Antichain::from_elem(0).borrow());
    trace.insert(batch_of(&[("a", 1, 0, 1), ("k", 1, 0, 1)], 0, 1));
    trace.insert(batch_of(
        &[("k", 1, 1, 1), ("k", 2, 1, 1), ("q", 1, 1, 1)],
        1,
        2,
    ));
    trace.insert(batch_of(&[("a", 1, 2, -1), ("k", 2, 2, 1)], 2, 3));
    assert_eq!(trace.snapshot().batches().len(), 3);
    assert_eq!(
        look(&trace, &["a", "k", "q"]),
        vec![
            (0, "a".into(), vec![(1, 0, 1), (1, 2, -1)]),
            (
                1,
                "k".into(),
                vec![(1, 0, 1), (1, 1, 1), (2, 1, 1), (2, 2, 1)]
            ),
            (2, "q".into(), vec![(1, 1, 1)]),
        ]
    );
    let snapshot = trace.snapshot();
    assert_eq!(
        snapshot.accumulate_at(&2),
        vec![("k".into(), 1, 2), ("k".into(), 2, 2), ("q".into(), 1, 1)]
    );
    let mut cursor = snapshot.cursor();
    cursor.seek_key(b"k");
    cursor.seek_val(&2);
    assert_eq!(cursor.get_val(), Some(&2));
    cursor.rewind_vals();
    assert_eq!(cursor.get_val(), Some(&1));
}

#[test]
fn snapshots_outlive_merges_and_compaction() {
    let mut trace = TraceHandle::<S>::new(SpineConfig::default());
    trace.insert(batch_of(&[("a", 1, 0, 1), ("b", 1, 0, 1)], 0, 1));
    trace.insert(batch_of(&[("a", 1, 1, -1)], 1, 2));
    let before = trace.snapshot();
    let first = before.batches()[0].clone();
    assert!(
        first.handle_count() >= 3,
        "the spine, the snapshot and `first` share one batch"
    );
    // Let the trace compact everything to time 2 and merge: "a" cancels out.
    trace.set_logical_compaction(Antichain::from_elem(2).borrow());
    trace.set_physical_compaction(Antichain::from_elem(2).borrow());
    trace.insert(batch_of(&[], 2, 3));
    trace.compact();
    let after = trace.snapshot();
    assert_eq!(after.len(), 1, "compaction consolidated 'a' away");
    // The old snapshot still reads the old batches, whose columns it keeps alive.
    assert_eq!(
        before.accumulate_at(&0),
        vec![("a".into(), 1, 1), ("b".into(), 1, 1)]
    );
    assert_eq!(first.handle_count(), 2);
    drop(before);
    assert_eq!(first.handle_count(), 1);
}

#[test]
fn handles_hold_back_compaction_until_all_release() {
    let mut trace = TraceHandle::<(u64, u64, u64, i64)>::new(SpineConfig::default());
    let mut reader = trace.clone();
    trace.set_logical_compaction(Antichain::from_elem(5).borrow());
    assert_eq!(trace.trace_logical_compaction(), Antichain::from_elem(0));
    reader.set_logical_compaction(Antichain::from_elem(3).borrow());
    assert_eq!(trace.trace_logical_compaction(), Antichain::from_elem(3));
    drop(reader);
    assert_eq!(trace.trace_logical_compaction(), Antichain::from_elem(5));
}

#[test]
#[should_panic(expected = "cannot move backwards")]
fn a_hold_cannot_move_backwards() {
    let mut trace = TraceHandle::<(u64, u64, u64, i64)>::new(SpineConfig::default());
    trace.set_logical_compaction(Antichain::from_elem(5).borrow());
    trace.set_logical_compaction(Antichain::from_elem(4).borrow());
}

#[test]
#[should_panic(expected = "must start where")]
fn batches_must_be_contiguous() {
    let trace = TraceHandle::<S>::new(SpineConfig::default());
    trace.insert(batch_of(&[], 1, 2));
}
