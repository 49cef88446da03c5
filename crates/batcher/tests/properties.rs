//! Property tests of the merge batcher against a brute-force model: a map from
//! `(key, val, time)` to the sum of its diffs.
//!
//! Every test runs at several chunk capacities, from one update per chunk to the default, and
//! checks the chunk and chain invariants on everything the batcher hands out.

use proptest::prelude::*;
use ripple_batcher::chunk::{ChunkWriter, Stash};
use ripple_batcher::merger::merge;
use ripple_batcher::{BatcherConfig, Chain, Chunker, MergeBatcher};
use ripple_updates::update::Row;
use ripple_updates::{Antichain, Lattice, PartialOrder, Product, Update, Updates};
use std::collections::BTreeMap;

/// Chunk capacities in bytes: one update per chunk, a few updates, a few hundred, the default.
const CAPACITIES: [usize; 4] = [1, 100, 4096, BatcherConfig::CHUNK_BYTES_DEFAULT];

type Model<U> = BTreeMap<(<U as Update>::Key, <U as Update>::Val, <U as Update>::Time), i64>;

fn model<U: Update<Diff = i64>>(rows: &[Row<U>]) -> Vec<Row<U>> {
    let mut map: Model<U> = BTreeMap::new();
    for (k, v, t, r) in rows {
        *map.entry((k.clone(), v.clone(), t.clone())).or_insert(0) += r;
    }
    map.into_iter()
        .filter(|(_, r)| *r != 0)
        .map(|((k, v, t), r)| (k, v, t, r))
        .collect()
}

/// Pushes `rows` through a chunker in slices of `slice` updates and returns its chains.
fn chunk_all<U: Update>(rows: &[Row<U>], chunk_bytes_max: usize, slice: usize) -> Vec<Chain<U>> {
    feed(&mut Chunker::new(chunk_bytes_max), rows, slice)
}

/// Pushes `rows` through `chunker` in slices of `slice` updates, finishes it and returns the
/// chains it formed.
fn feed<U: Update>(chunker: &mut Chunker<U>, rows: &[Row<U>], slice: usize) -> Vec<Chain<U>> {
    let mut stash = Stash::new(2);
    let mut chains = Vec::new();
    for part in rows.chunks(slice.max(1)) {
        chunker.push(Updates::<U>::from_rows(part.iter()).view(), &mut stash);
        chains.extend(std::iter::from_fn(|| chunker.pop_ready()));
    }
    chunker.finish(&mut stash);
    chains.extend(std::iter::from_fn(|| chunker.pop_ready()));
    chains
}

/// Merges all chains pairwise into one.
fn merge_all<U: Update>(mut chains: Vec<Chain<U>>, chunk_bytes_max: usize) -> Chain<U> {
    let mut writer = ChunkWriter::new(chunk_bytes_max);
    let mut stash = Stash::new(2);
    while chains.len() > 1 {
        let a = chains.remove(0);
        let b = chains.remove(0);
        let merged = merge(a, b, &mut writer, &mut stash);
        merged.check_invariants();
        chains.push(merged);
    }
    chains.pop().unwrap_or_default()
}

/// Chunks `rows` at capacity index `cap`: every chain is valid and together they hold the model.
fn check_chunker<U: Update<Diff = i64>>(
    rows: &[Row<U>],
    slice: usize,
    cap: usize,
) -> Result<(), TestCaseError> {
    let chains = chunk_all::<U>(rows, CAPACITIES[cap], slice);
    let mut all = Vec::new();
    for chain in &chains {
        chain.check_invariants();
        all.extend(chain.to_rows());
    }
    prop_assert_eq!(model::<U>(&all), model::<U>(rows));
    Ok(())
}

/// Chunks and merges `rows` at capacity index `cap`: the merged chain is valid and is the model.
fn check_merger<U: Update<Diff = i64>>(
    rows: &[Row<U>],
    slice: usize,
    cap: usize,
) -> Result<(), TestCaseError> {
    let chains = chunk_all::<U>(rows, CAPACITIES[cap], slice);
    let merged = merge_all(chains, CAPACITIES[cap]);
    merged.check_invariants();
    prop_assert_eq!(merged.to_rows(), model::<U>(rows));
    Ok(())
}

type IntU = (u64, u64, u64, i64);
type StrU = (String, (), u64, i64);
type PartialU = (u32, u32, Product<u64, u32>, i64);

fn int_rows(len: usize) -> impl Strategy<Value = Vec<Row<IntU>>> {
    proptest::collection::vec((0u64..40, 0u64..4, 0u64..5, -2i64..3), 0..len)
}

fn str_rows(len: usize) -> impl Strategy<Value = Vec<Row<StrU>>> {
    proptest::collection::vec(("[a-d]{0,30}", Just(()), 0u64..5, -2i64..3), 0..len)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn chunker_matches_model(rows in int_rows(400), slice in 1usize..100, cap in 0usize..4) {
        check_chunker::<IntU>(&rows, slice, cap)?;
    }

    /// Also on sorted input (a sorted load), consolidated or not: consolidated sorted input is
    /// copied into chunks in bulk instead of gathered.
    #[test]
    fn chunker_columns_match_model(
        mut rows in str_rows(300),
        slice in 1usize..100,
        cap in 0usize..4,
        sorted in 0usize..3,
    ) {
        if sorted > 0 {
            rows.sort();
        }
        if sorted > 1 {
            rows = model::<StrU>(&rows);
        }
        check_chunker::<StrU>(&rows, slice, cap)?;
    }

    #[test]
    fn merger_matches_model(rows in int_rows(600), slice in 1usize..200, cap in 0usize..4) {
        check_merger::<IntU>(&rows, slice, cap)?;
    }

    #[test]
    fn merger_strings_match_model(rows in str_rows(400), slice in 1usize..200, cap in 0usize..4) {
        check_merger::<StrU>(&rows, slice, cap)?;
    }

    /// String keys sharing a long prefix, some prefixes of others, some with zero bytes: what
    /// a comparison that skips or summarizes the shared prefix would get wrong.
    #[test]
    fn merger_strings_with_shared_prefixes_match_model(
        rows in proptest::collection::vec(
            (
                (prop_oneof![Just(""), Just("0000000000000000"), Just("shared/path/")], "[ab\\x00]{0,10}"),
                Just(()),
                0u64..3,
                -1i64..2,
            ),
            0..300,
        ),
        slice in 1usize..100,
        cap in 0usize..4,
    ) {
        let rows: Vec<Row<StrU>> = rows
            .into_iter()
            .map(|((common, tail), v, t, r)| (format!("{common}{tail}"), v, t, r))
            .collect();
        check_merger::<StrU>(&rows, slice, cap)?;
    }

    /// Chains with long shared runs and equal triples at chunk boundaries: the passthrough and
    /// galloping paths must never leave an equal pair unconsolidated.
    #[test]
    fn merger_boundaries(split in 0u64..64, overlap in 0u64..8, cap in 0usize..3, cancel in any::<bool>()) {
        let a: Vec<Row<IntU>> = (0..split + overlap).map(|k| (k, 0, 0, 1)).collect();
        let b: Vec<Row<IntU>> = (split..64).map(|k| (k, 0, 0, if cancel { -1 } else { 1 })).collect();
        let chain_a = merge_all(chunk_all::<IntU>(&a, CAPACITIES[cap], a.len()), CAPACITIES[cap]);
        let chain_b = merge_all(chunk_all::<IntU>(&b, CAPACITIES[cap], b.len()), CAPACITIES[cap]);
        let mut writer = ChunkWriter::new(CAPACITIES[cap]);
        let merged = merge(chain_a, chain_b, &mut writer, &mut Stash::new(2));
        merged.check_invariants();
        let all: Vec<Row<IntU>> = a.iter().chain(b.iter()).cloned().collect();
        prop_assert_eq!(merged.to_rows(), model::<IntU>(&all));
    }

    /// Rounds of pushes and seals with partially ordered times: sealed + kept = pushed, nothing
    /// at or beyond `upper` is shipped, and the kept frontier covers the kept times.
    #[test]
    fn seal_partial_order(
        rounds in proptest::collection::vec(
            (
                proptest::collection::vec((0u32..12, 0u32..3, (0u64..4, 0u32..4), -2i64..3), 0..60),
                proptest::collection::vec((0u64..4, 0u32..4), 1..3),
            ),
            1..6,
        ),
        cap in 0usize..4,
    ) {
        let config = BatcherConfig::with_chunk_bytes(CAPACITIES[cap]);
        let mut batcher = MergeBatcher::<PartialU>::new(config);
        let mut lower = Antichain::from_elem(Product::new(0u64, 0u32));
        let mut pushed: Vec<Row<PartialU>> = Vec::new();
        let mut sealed: Vec<Row<PartialU>> = Vec::new();

        for (updates, upper_times) in rounds {
            // Times at or after `lower`: join each with an element of `lower`.
            let anchor = lower.elements()[0];
            let rows: Vec<Row<PartialU>> = updates
                .into_iter()
                .map(|(k, v, (o, i), r)| (k, v, Product::new(o, i).join(&anchor), r))
                .collect();
            batcher.push_updates(&Updates::from_rows(rows.iter()));
            pushed.extend(rows);

            // An upper at or after `lower`.
            let mut upper = Antichain::new();
            for (o, i) in upper_times {
                upper.insert(Product::new(o, i).join(&anchor));
            }
            let shipped = batcher.seal(upper.borrow());
            shipped.check_invariants();
            batcher.check_invariants();
            for (_, _, t, _) in shipped.to_rows() {
                prop_assert!(!upper.less_equal(&t), "shipped {:?} at or beyond {:?}", t, upper);
            }
            sealed.extend(shipped.to_rows());

            // The model of what is held: pushed minus sealed, accumulated.
            let mut held: Vec<Row<PartialU>> = pushed.clone();
            held.extend(sealed.iter().map(|(k, v, t, r)| (*k, *v, *t, -r)));
            let held = model::<PartialU>(&held);
            let mut expected_frontier = Antichain::new();
            for (_, _, t, _) in &held {
                prop_assert!(upper.less_equal(t), "kept {:?} not beyond {:?}", t, upper);
                expected_frontier.insert(*t);
            }
            // Every held time is at or after an element of the frontier, which lies at or
            // beyond `upper`; it is exact but for updates that cancel across kept chains.
            prop_assert!(PartialOrder::less_equal(&batcher.frontier(), &expected_frontier.borrow()));
            prop_assert!(batcher.frontier().iter().all(|t| upper.less_equal(t)));
            lower = upper;
            if lower.is_empty() {
                break;
            }
        }
        // Sealing at the empty frontier releases everything.
        let rest = batcher.seal(Antichain::new().borrow());
        rest.check_invariants();
        sealed.extend(rest.to_rows());
        prop_assert!(batcher.is_empty());
        prop_assert_eq!(model::<PartialU>(&sealed), model::<PartialU>(&pushed));
    }
}

#[test]
fn all_cancelling_input_leaves_nothing() {
    for cap in CAPACITIES {
        let mut batcher = MergeBatcher::<IntU>::new(BatcherConfig::with_chunk_bytes(cap));
        let rows: Vec<Row<IntU>> = (0..500u64).map(|k| (k % 37, k % 3, k % 5, 1)).collect();
        let negated: Vec<Row<IntU>> = rows.iter().map(|(k, v, t, r)| (*k, *v, *t, -r)).collect();
        batcher.push_updates(&Updates::from_rows(rows.iter()));
        batcher.push_updates(&Updates::from_rows(negated.iter()));
        let sealed = batcher.seal(Antichain::new().borrow());
        assert!(
            sealed.is_empty(),
            "capacity {cap}: {} updates survived",
            sealed.len()
        );
        assert!(batcher.frontier().is_empty());
    }
}

/// A fixed-seed xorshift generator, for inputs too large for proptest to shrink usefully.
fn xorshift() -> impl FnMut() -> u64 {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Rows from a fixed-seed generator: keys in `0..keys`, some repeated and some cancelled.
fn generated_rows(count: u64, keys: u64) -> Vec<Row<IntU>> {
    let mut next = xorshift();
    (0..count)
        .map(|_| {
            let word = next();
            let diff = if word.is_multiple_of(7) { -1 } else { 1 };
            ((word >> 8) % keys, (word >> 40) % 3, (word >> 50) % 5, diff)
        })
        .collect()
}

/// A chunker whose pending limit is far beyond its small-buffer size sorts its rows descending
/// and cuts chunks from the back of the buffer, giving it back as it goes: its chains still
/// hold exactly the model, and each is a valid chain.
#[test]
fn large_pending_buffers_match_model() {
    let rows = generated_rows(60_000, 20_000);
    let mut chunker = Chunker::<IntU>::new(BatcherConfig::CHUNK_BYTES_DEFAULT);
    // As for a batcher holding 4 MiB: a pending limit of 512 KiB, 16,384 rows.
    chunker.adapt_to(4 << 20);
    let chains = feed(&mut chunker, &rows, 997);
    assert!(chains.len() >= 3, "several forms: {} chains", chains.len());
    let mut all = Vec::new();
    for chain in &chains {
        chain.check_invariants();
        all.extend(chain.to_rows());
    }
    assert_eq!(model::<IntU>(&all), model::<IntU>(&rows));

    // The same through a batcher, whose pending limit follows what it holds.
    let mut batcher = MergeBatcher::<IntU>::new(BatcherConfig::default());
    let rows = generated_rows(200_000, 50_000);
    for part in rows.chunks(4099) {
        batcher.push_updates(&Updates::from_rows(part.iter()));
    }
    let sealed = batcher.seal(Antichain::from_elem(3).borrow());
    sealed.check_invariants();
    let kept = batcher.seal(Antichain::new().borrow());
    let mut all = sealed.to_rows();
    all.extend(kept.to_rows());
    assert_eq!(model::<IntU>(&all), model::<IntU>(&rows));
    assert!(sealed.to_rows().iter().all(|(_, _, t, _)| *t < 3));
}

/// The form minimum sets how many chains small pushes become, never what they hold: 2,000
/// updates (about 62 KiB of rows) pushed 100 at a time form several chains at the default 8 KiB
/// and one at 64 KiB, and a batcher built either way seals the same updates.
#[test]
fn form_minimum_changes_the_chains_not_the_updates() {
    let rows = generated_rows(2_000, 700);
    let chains_formed = |pending_bytes_min: usize| {
        let mut chunker = Chunker::<IntU>::with_pending_min(
            BatcherConfig::CHUNK_BYTES_DEFAULT,
            pending_bytes_min,
        );
        feed(&mut chunker, &rows, 100)
    };
    let small = chains_formed(BatcherConfig::PENDING_BYTES_MIN_DEFAULT);
    let large = chains_formed(64 << 10);
    assert!(small.len() >= 4, "8 KiB forms: {} chains", small.len());
    assert_eq!(large.len(), 1, "64 KiB forms: one chain");
    for chains in [&small, &large] {
        let mut all = Vec::new();
        for chain in chains.iter() {
            chain.check_invariants();
            all.extend(chain.to_rows());
        }
        assert_eq!(model::<IntU>(&all), model::<IntU>(&rows));
    }

    let sealed = |pending_bytes_min: usize| {
        let mut batcher = MergeBatcher::<IntU>::new(BatcherConfig {
            pending_bytes_min,
            ..BatcherConfig::default()
        });
        for part in rows.chunks(100) {
            batcher.push_updates(&Updates::from_rows(part.iter()));
        }
        let chain = batcher.seal(Antichain::new().borrow());
        chain.check_invariants();
        chain.to_rows()
    };
    let large = sealed(64 << 10);
    assert_eq!(sealed(8 << 10), large);
    assert_eq!(model::<IntU>(&large), model::<IntU>(&rows));
}

#[test]
fn one_update_per_chunk_at_capacity_one() {
    let rows: Vec<Row<IntU>> = (0..50u64).rev().map(|k| (k, 0, 0, 1)).collect();
    let chains = chunk_all::<IntU>(&rows, 1, 7);
    let merged = merge_all(chains, 1);
    assert_eq!(merged.len(), 50);
    assert_eq!(merged.chunk_count(), 50, "one update per chunk");
}

#[test]
#[should_panic(expected = "pushed after sealing")]
#[cfg(debug_assertions)]
fn pushing_before_the_sealed_upper_is_caught_in_debug_builds() {
    let mut batcher = MergeBatcher::<IntU>::new(BatcherConfig::default());
    batcher.seal(Antichain::from_elem(5).borrow());
    batcher.push_updates(&Updates::from_rows([(1, 1, 3, 1)].iter()));
}

#[test]
fn partial_order_frontier_is_an_antichain() {
    // Kept times (1,0) and (0,1) are incomparable: both stay in the frontier.
    let mut batcher = MergeBatcher::<PartialU>::new(BatcherConfig::with_chunk_bytes(1));
    let rows: Vec<Row<PartialU>> = vec![
        (1, 0, Product::new(0, 0), 1),
        (2, 0, Product::new(1, 0), 1),
        (3, 0, Product::new(0, 1), 1),
        (4, 0, Product::new(1, 1), 1),
    ];
    batcher.push_updates(&Updates::from_rows(rows.iter()));
    let upper = Antichain::from_iter([Product::new(1, 0), Product::new(0, 1)]);
    let sealed = batcher.seal(upper.borrow());
    assert_eq!(sealed.to_rows(), vec![(1, 0, Product::new(0, 0), 1)]);
    let frontier = batcher.frontier().to_owned();
    assert_eq!(frontier, upper);
    assert!(frontier
        .elements()
        .iter()
        .all(|t| !t.less_than(&Product::new(0, 0))));
}

/// Sealed chains of a big push cycle are cut into chunks near their target size, whatever the
/// record type: a column whose slices do not grow per update (the `()` of unkeyed strings) must
/// not make the writers ship chunks of one update.
fn check_chunks_fill<U: Update<Time = u64, Diff = i64>>(rows: Vec<Row<U>>) {
    let mut batcher = MergeBatcher::<U>::new(BatcherConfig::default());
    for round in rows.chunks(rows.len() / 50 + 1) {
        batcher.push_updates(&Updates::from_rows(round.iter()));
    }
    let sealed = batcher.seal(Antichain::from_elem(2).borrow());
    let kept = batcher.seal(Antichain::new().borrow());
    for chain in [&sealed, &kept] {
        chain.check_invariants();
        let bytes = chain.byte_len();
        assert!(
            bytes > 256 << 10,
            "the test needs several chunks' worth ({bytes} bytes)"
        );
        assert!(
            chain.chunk_count() <= bytes / (2 << 10) + 1,
            "{} chunks for {bytes} bytes",
            chain.chunk_count()
        );
    }
    assert_eq!(
        model::<U>(&[sealed.to_rows(), kept.to_rows()].concat()),
        model::<U>(&rows)
    );
}

#[test]
fn chunks_fill_to_their_target() {
    let mut next = xorshift();
    let ints: Vec<Row<IntU>> = (0..20_000)
        .map(|_| (next() % 80_000, next() % 4, next() % 4, 1))
        .collect();
    check_chunks_fill::<IntU>(ints);
    let strings: Vec<Row<StrU>> = (0..20_000)
        .map(|_| (format!("{:024}", next() % 80_000), (), next() % 4, 1))
        .collect();
    check_chunks_fill::<StrU>(strings);
}
