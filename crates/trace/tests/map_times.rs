//! `Batch::map_times` against a model: the batch's rows with their times mapped, the dropped
//! ones left out, consolidated. A round counter's increment takes the path that rewrites only
//! the stored `(time, diff)` pairs (with every encoding: one pair, a dictionary, plain pairs);
//! maps that merge or drop times take the path that rebuilds each value's history.

use proptest::prelude::*;
use ripple_trace::{Batch, Builder, Description};
use ripple_updates::consolidate::consolidate_rows;
use ripple_updates::{Antichain, Product};

type T = Product<u64, u32>;
type U = (u64, u64, T, i64);

fn build(mut rows: Vec<U>, description: Description<T>) -> Batch<U> {
    consolidate_rows::<U>(&mut rows);
    let mut builder = Builder::new();
    for (key, val, time, diff) in &rows {
        builder.push(key, val, time, diff);
    }
    builder.done(description)
}

/// What `map_times(map)` must hold: the rows mapped, dropped where `map` says so, consolidated.
fn model(batch: &Batch<U>, map: impl Fn(&T) -> Option<T>) -> Vec<U> {
    let mut rows: Vec<U> = batch
        .to_rows()
        .into_iter()
        .filter_map(|(key, val, time, diff)| map(&time).map(|time| (key, val, time, diff)))
        .collect();
    consolidate_rows::<U>(&mut rows);
    rows
}

fn frontier(times: &[(u64, u32)]) -> Antichain<T> {
    times.iter().map(|&(o, i)| Product::new(o, i)).collect()
}

fn rows() -> impl Strategy<Value = Vec<U>> {
    // Up to 2,000 rows: small batches store one pair or plain pairs, bigger ones a dictionary
    // (or plain pairs again when they are mostly distinct).
    let row = (
        0u64..40,
        0u64..4,
        0u64..6,
        0u32..6,
        prop_oneof![Just(1i64), Just(-1), Just(2)],
    );
    proptest::collection::vec(row, 0..2000).prop_map(|rows| {
        rows.into_iter()
            .map(|(k, v, o, i, r)| (k, v, Product::new(o, i), r))
            .collect()
    })
}

fn description() -> Description<T> {
    Description::new(frontier(&[(0, 0)]), frontier(&[(0, 6), (6, 0)]))
}

proptest! {
    #[test]
    fn a_round_increment_rewrites_the_pairs(rows in rows()) {
        let batch = build(rows, description());
        let step = |t: &T| Some(Product::new(t.outer, t.inner + 1));
        let mapped = batch.map_times(step);
        prop_assert_eq!(mapped.to_rows(), model(&batch, step));
        prop_assert_eq!(
            mapped.description(),
            &Description::new(frontier(&[(0, 1)]), frontier(&[(0, 7), (6, 1)]))
        );
        mapped.check_invariants();
    }

    #[test]
    fn merged_and_dropped_times_are_consolidated(rows in rows()) {
        let batch = build(rows, description());
        // Rounds 0 and 1 become one; round 5 is dropped.
        let merge = |t: &T| (t.inner != 5).then(|| Product::new(t.outer, t.inner.max(1)));
        let mapped = batch.map_times(merge);
        prop_assert_eq!(mapped.to_rows(), model(&batch, merge));
        mapped.check_invariants();
    }
}

/// An empty batch maps to an empty batch with the mapped description; an upper whose times
/// all map to nothing becomes the empty frontier.
#[test]
fn descriptions_map_like_times() {
    let empty = build(Vec::new(), description());
    let mapped = empty.map_times(|t| Some(Product::new(t.outer + 1, t.inner)));
    assert!(mapped.is_empty());
    assert_eq!(
        mapped.description(),
        &Description::new(frontier(&[(1, 0)]), frontier(&[(1, 6), (7, 0)]))
    );
    let closed = empty.map_times(|t| (t.inner == 0 && t.outer == 0).then_some(*t));
    assert_eq!(closed.description().upper, Antichain::new());
}
