//! The spine against a model: a list of every update inserted.
//!
//! Random programs of inserts (batches of random updates over an interval of times), logical
//! compaction, physical compaction and extra fuel run against a `Spine` and a plain list. After
//! every step the spine's invariants are checked, and at every readable time (`>= since`) the
//! accumulations read three ways (cursor, batched lookup of random probe keys, plain seeks)
//! must equal the model's.

use proptest::prelude::*;
use ripple_storage::{SpillDir, Storage, StorageSettings};
use ripple_trace::{Batch, Builder, Description, LookupScratch, Spine, SpineConfig, TraceSnapshot};
use ripple_updates::{Antichain, Lattice, PartialOrder, Product, Time};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a program does.
#[derive(Clone, Debug)]
enum Step {
    /// Insert a batch spanning `width` times (0 for an empty interval) with these updates:
    /// (key, val, time offset within the interval, diff).
    Insert {
        width: u64,
        updates: Vec<(u64, u64, u64, i64)>,
    },
    /// Advance logical compaction by this much (clamped to the upper).
    Logical(u64),
    /// Advance physical compaction by this much (clamped to the upper).
    Physical(u64),
    /// Grant extra merge work.
    Exert(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..4, proptest::collection::vec((0u64..12, 0u64..3, 0u64..4, -2i64..3), 0..40))
            .prop_map(|(width, updates)| Step::Insert { width, updates }),
        2 => (0u64..4).prop_map(Step::Logical),
        2 => (0u64..4).prop_map(Step::Physical),
        1 => (0usize..64).prop_map(Step::Exert),
    ]
}

/// Sorts and consolidates rows, then builds a batch of them.
fn build<T: Time>(
    mut rows: Vec<(u64, u64, T, i64)>,
    description: Description<T>,
) -> Batch<(u64, u64, T, i64)> {
    rows.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
    let mut builder = Builder::new();
    let mut pending: Option<(u64, u64, T, i64)> = None;
    for row in rows {
        match &mut pending {
            Some(p) if (p.0, p.1, &p.2) == (row.0, row.1, &row.2) => p.3 += row.3,
            _ => {
                if let Some(p) = pending.take() {
                    if p.3 != 0 {
                        builder.push(&p.0, &p.1, &p.2, &p.3);
                    }
                }
                pending = Some(row);
            }
        }
    }
    if let Some(p) = pending.take() {
        if p.3 != 0 {
            builder.push(&p.0, &p.1, &p.2, &p.3);
        }
    }
    builder.done(description)
}

/// The model's accumulation at `time`.
fn model_at<T: Time>(model: &[(u64, u64, T, i64)], time: &T) -> Vec<(u64, u64, i64)> {
    let mut sums = BTreeMap::new();
    for (k, v, t, r) in model {
        if t.less_equal(time) {
            *sums.entry((*k, *v)).or_insert(0i64) += r;
        }
    }
    nonzero(sums)
}

/// The non-zero sums of a map of accumulations, in key order.
fn nonzero(sums: BTreeMap<(u64, u64), i64>) -> Vec<(u64, u64, i64)> {
    sums.into_iter()
        .filter(|(_, r)| *r != 0)
        .map(|((k, v), r)| (k, v, r))
        .collect()
}

/// Reads the accumulation at `time` through batched lookups of `probes`.
fn lookup_at(
    spine: &Spine<(u64, u64, u64, i64)>,
    probes: &[u64],
    time: &u64,
) -> Vec<(u64, u64, i64)> {
    let snapshot = spine.snapshot();
    let mut scratch = LookupScratch::default();
    let mut out = BTreeMap::new();
    snapshot.lookup(probes, &mut scratch, |index, vals| {
        assert_eq!(*vals.key(), probes[index], "value cursor at the probed key");
        while let Some(val) = vals.get_val() {
            vals.map_times(|t, r| {
                if t.less_equal(time) {
                    *out.entry((probes[index], *val)).or_insert(0i64) += *r;
                }
            });
            vals.step_val();
        }
    });
    nonzero(out)
}

/// Reads the accumulation at `time` through the two-step lookup that reads each found key
/// batch by batch (`next_hit_key`, then `map_key_updates`), as reduce does.
fn key_hits_at(
    spine: &Spine<(u64, u64, u64, i64)>,
    probes: &[u64],
    time: &u64,
) -> Vec<(u64, u64, i64)> {
    let snapshot = spine.snapshot();
    // A cursor for lookups alone, as reduce's: stored batches open no block before the lookup.
    let mut cursor = snapshot.lookup_cursor();
    let mut scratch = LookupScratch::default();
    let mut out = BTreeMap::new();
    cursor.start_lookup(probes, &mut scratch);
    let mut previous = None;
    while let Some(index) = cursor.next_hit_key(&mut scratch) {
        assert!(
            previous < Some(index),
            "hits come in probe order, once each"
        );
        previous = Some(index);
        assert_eq!(
            cursor.get_key(),
            Some(&probes[index]),
            "cursor at the probed key"
        );
        cursor.map_key_updates(|val, t, r| {
            if t.less_equal(time) {
                *out.entry((probes[index], *val)).or_insert(0i64) += *r;
            }
        });
    }
    nonzero(out)
}

/// Reads the accumulation at `time` with one fresh seek per probe key.
fn seeks_at(
    spine: &Spine<(u64, u64, u64, i64)>,
    probes: &[u64],
    time: &u64,
) -> Vec<(u64, u64, i64)> {
    let snapshot = spine.snapshot();
    let mut out = BTreeMap::new();
    for probe in probes {
        let mut cursor = snapshot.cursor();
        cursor.seek_key(probe);
        if cursor.get_key() != Some(probe) {
            continue;
        }
        while let Some(val) = cursor.get_val() {
            cursor.map_times(|t, r| {
                if t.less_equal(time) {
                    *out.entry((*probe, *val)).or_insert(0i64) += *r;
                }
            });
            cursor.step_val();
        }
    }
    nonzero(out)
}

/// Runs `steps` on times made by `time_of` from a counter (totally ordered here; see the
/// product-time test below).
fn run(steps: Vec<Step>, config: SpineConfig, probes: Vec<u64>) -> Result<(), TestCaseError> {
    run_with(steps, config, probes, None)
}

/// [`run`] with a spine that spills to `storage`; afterwards, every file it wrote is gone.
fn run_with(
    steps: Vec<Step>,
    config: SpineConfig,
    probes: Vec<u64>,
    storage: Option<Arc<Storage>>,
) -> Result<(), TestCaseError> {
    let spine = Spine::<(u64, u64, u64, i64)>::with_storage(config, storage.clone());
    run_on(spine, steps, probes)?;
    if let Some(storage) = storage {
        let stats = storage.stats();
        prop_assert_eq!(
            stats.files_written,
            stats.files_deleted,
            "files left behind"
        );
        prop_assert_eq!(stats.cache.resident_bytes, stats.cache.cached_bytes);
        prop_assert_eq!(stats.batch_bytes, 0);
    }
    Ok(())
}

fn run_on(
    mut spine: Spine<(u64, u64, u64, i64)>,
    steps: Vec<Step>,
    probes: Vec<u64>,
) -> Result<(), TestCaseError> {
    let mut model: Vec<(u64, u64, u64, i64)> = Vec::new();
    let (mut upper, mut logical, mut physical) = (0u64, 0u64, 0u64);
    let mut probes = probes;
    probes.sort();
    probes.dedup();
    let mut inserted = 0usize;
    // Every other step a snapshot is kept through the next one, as a reader's would be: the
    // spine merges its batches while they are shared, and it must read as it did.
    type Held = (
        TraceSnapshot<(u64, u64, u64, i64)>,
        u64,
        Vec<(u64, u64, i64)>,
    );
    let mut held: Option<Held> = None;
    for (index, step) in steps.into_iter().enumerate() {
        match step {
            Step::Insert { width, updates } => {
                let rows: Vec<_> = if width == 0 {
                    Vec::new()
                } else {
                    updates
                        .into_iter()
                        .map(|(k, v, t, r)| (k, v, upper + t % width, r))
                        .collect()
                };
                inserted += rows.len();
                model.extend(rows.iter().cloned());
                let description = Description::new(
                    Antichain::from_elem(upper),
                    Antichain::from_elem(upper + width),
                );
                spine.insert(build(rows, description));
                upper += width;
            }
            Step::Logical(by) => {
                logical = (logical + by).min(upper);
                spine.set_logical_compaction(Antichain::from_elem(logical).borrow());
            }
            Step::Physical(by) => {
                physical = (physical + by).min(upper);
                spine.set_physical_compaction(Antichain::from_elem(physical).borrow());
            }
            Step::Exert(fuel) => spine.exert(fuel),
        }
        spine.check_invariants();
        let batches_allowed = 2 * (usize::BITS - inserted.leading_zeros()) as usize + 4;
        let admitted = spine.batch_count() - pending_count(&spine, physical);
        prop_assert!(
            admitted <= batches_allowed,
            "{admitted} batches for {inserted} updates"
        );
        for time in logical..=upper {
            let expected = model_at(&model, &time);
            prop_assert_eq!(
                &spine.snapshot().accumulate_at(&time),
                &expected,
                "cursor at {}",
                time
            );
            let probed: Vec<_> = expected
                .iter()
                .filter(|(k, _, _)| probes.binary_search(k).is_ok())
                .cloned()
                .collect();
            prop_assert_eq!(
                &lookup_at(&spine, &probes, &time),
                &probed,
                "lookup at {}",
                time
            );
            prop_assert_eq!(
                &seeks_at(&spine, &probes, &time),
                &probed,
                "seeks at {}",
                time
            );
            prop_assert_eq!(
                &key_hits_at(&spine, &probes, &time),
                &probed,
                "key hits at {}",
                time
            );
        }
        if let Some((snapshot, time, expected)) = held.take() {
            prop_assert_eq!(&snapshot.accumulate_at(&time), &expected, "held snapshot");
        }
        if index % 2 == 0 {
            held = Some((spine.snapshot(), upper, model_at(&model, &upper)));
        }
    }
    // Completing every merge, then compacting to one batch, leaves the same accumulations.
    spine.complete_merges();
    spine.check_invariants();
    for time in logical..=upper {
        prop_assert_eq!(
            spine.snapshot().accumulate_at(&time),
            model_at(&model, &time)
        );
    }
    spine.compact();
    spine.check_invariants();
    prop_assert!(spine.batch_count() <= 1 + pending_count(&spine, physical));
    for time in logical..=upper {
        prop_assert_eq!(
            spine.snapshot().accumulate_at(&time),
            model_at(&model, &time)
        );
    }
    Ok(())
}

/// Batches still waiting for the physical frontier: those whose upper is beyond it.
fn pending_count(spine: &Spine<(u64, u64, u64, i64)>, physical: u64) -> usize {
    spine
        .batches()
        .iter()
        .filter(|b| {
            !PartialOrder::less_equal(&b.description().upper, &Antichain::from_elem(physical))
        })
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn spine_matches_model(
        steps in proptest::collection::vec(step(), 1..40),
        effort in prop_oneof![Just(1usize), Just(4), Just(100)],
        compaction_min in prop_oneof![Just(1usize), Just(16), Just(usize::MAX)],
        compaction_share in prop_oneof![Just(1usize), Just(4)],
        probes in proptest::collection::vec(0u64..14, 0..8),
    ) {
        run(steps, SpineConfig { effort, compaction_min, compaction_share }, probes)?;
    }

    /// The same with storage: a budget that spills nearly everything (or everything), blocks
    /// of a few updates, and a cache of nothing or of a few blocks.
    #[test]
    fn spilling_spine_matches_model(
        steps in proptest::collection::vec(step(), 1..40),
        effort in prop_oneof![Just(1usize), Just(4)],
        compaction_min in prop_oneof![Just(16usize), Just(usize::MAX)],
        probes in proptest::collection::vec(0u64..14, 0..8),
        budget in prop_oneof![Just(0usize), Just(2000)],
        cache_bytes in prop_oneof![Just(0usize), Just(1000)],
        block_updates in 1usize..8,
        filters in any::<bool>(),
    ) {
        let settings = StorageSettings { memory_budget: budget.max(cache_bytes), cache_bytes, working_bytes: 0, block_updates, filters, spill_min_bytes: 0 };
        let spill = SpillDir::new_in_temp().expect("a spill directory");
        let storage = Arc::new(Storage::in_spill_dir(spill, settings));
        let config = SpineConfig { effort, compaction_min, compaction_share: 4 };
        run_with(steps, config, probes, Some(storage))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Batches big enough to have key fences, where the two-step lookup prefetches the hits
    /// ahead of the one it hands out (in stages: offsets, then values, then updates; keys
    /// have one to three values, so the offsets are stored): every way of reading finds what
    /// the model holds, however the probes are spread (dense runs, which walk the stretch of
    /// keys they span, sparse strides, which bisect within fences, probes past the keys).
    #[test]
    fn big_batches_read_alike_every_way(
        seed in 0u64..1000,
        stride in prop_oneof![Just(1u64), Just(3), Just(97)],
        probe_count in 1usize..400,
    ) {
        let mut spine = Spine::<(u64, u64, u64, i64)>::new(SpineConfig::default());
        let mut model = Vec::new();
        for (index, keys) in [6000u64, 4500].into_iter().enumerate() {
            let time = index as u64;
            // Keys spread by a seed-dependent step; one to three values, one or two updates.
            let rows: Vec<_> = (0..keys)
                .flat_map(|k| {
                    let key = k * 2 + (seed + k) % 2;
                    let values = 1 + (key * 7 + seed) % 3;
                    (0..values).flat_map(move |v| {
                        let updates = 1 + (key + v) % 2;
                        (0..updates).map(move |u| (key, v, time, 1 + u as i64))
                    })
                })
                .collect();
            model.extend(rows.iter().cloned());
            spine.insert(build(
                rows,
                Description::new(Antichain::from_elem(time), Antichain::from_elem(time + 1)),
            ));
        }
        let mut probes: Vec<u64> =
            (0..probe_count as u64).map(|p| (seed + p * stride) % 13_000).collect();
        probes.sort();
        probes.dedup();
        let time = 1;
        let expected: Vec<_> = model_at(&model, &time)
            .into_iter()
            .filter(|(k, _, _)| probes.binary_search(k).is_ok())
            .collect();
        prop_assert_eq!(&lookup_at(&spine, &probes, &time), &expected);
        prop_assert_eq!(&key_hits_at(&spine, &probes, &time), &expected);
        prop_assert_eq!(&seeks_at(&spine, &probes, &time), &expected);
    }
}

/// With little effort a merge can still be running when a larger batch arrives and collapses
/// the levels below it: the collapse must finish that merge, not drop its inputs.
#[test]
fn collapse_completes_merges_in_progress() {
    let mut spine = Spine::<(u64, u64, u64, i64)>::new(SpineConfig {
        effort: 1,
        compaction_min: usize::MAX,
        ..SpineConfig::default()
    });
    let mut model = Vec::new();
    for (time, count) in [(0u64, 16u64), (1, 16), (2, 17)] {
        let rows: Vec<_> = (0..count).map(|k| (k, time, time, 1)).collect();
        model.extend(rows.iter().cloned());
        let description =
            Description::new(Antichain::from_elem(time), Antichain::from_elem(time + 1));
        spine.insert(build(rows, description));
        spine.check_invariants();
    }
    for time in 0..3 {
        assert_eq!(
            spine.snapshot().accumulate_at(&time),
            model_at(&model, &time)
        );
    }
}

/// Churn that cancels among the new batches, and empty batches, still count towards merging
/// with an old large batch: deletions of its updates must not pile up beside it for ever (every
/// reader would walk the stale updates and their deletions).
#[test]
fn deletions_of_an_old_batch_merge_into_it_despite_churn() {
    type U = (u64, u64, u64, i64);
    // Inserts `rows` as the batch `[upper, upper + 1)` and lets everything before it compact.
    fn insert(spine: &mut Spine<U>, model: &mut Vec<U>, upper: &mut u64, rows: Vec<U>) {
        model.extend(rows.iter().cloned());
        let description = Description::new(
            Antichain::from_elem(*upper),
            Antichain::from_elem(*upper + 1),
        );
        spine.insert(build(rows, description));
        *upper += 1;
        spine.set_logical_compaction(Antichain::from_elem(*upper).borrow());
        spine.set_physical_compaction(Antichain::from_elem(*upper).borrow());
        spine.check_invariants();
    }
    let mut spine = Spine::<U>::new(SpineConfig::default());
    let (mut model, mut upper) = (Vec::new(), 0u64);
    let originals = (0..1024).map(|k| (k, 0, 0, 1)).collect();
    insert(&mut spine, &mut model, &mut upper, originals);
    let live = 1024 - 256;
    for deleted in 0..256u64 {
        let time = upper;
        // Delete one original update; insert and retract a temporary one; then idle.
        let churn = vec![(deleted, 0, time, -1), (5000 + deleted, 0, time, 1)];
        insert(&mut spine, &mut model, &mut upper, churn);
        let retract = vec![(5000 + deleted, 0, time + 1, -1)];
        insert(&mut spine, &mut model, &mut upper, retract);
        for _ in 0..14 {
            insert(&mut spine, &mut model, &mut upper, Vec::new());
        }
    }
    assert_eq!(
        spine.snapshot().accumulate_at(&upper),
        model_at(&model, &upper)
    );
    // Levelling by length would hold all 1024 originals and the 256 deletions beside them.
    assert!(
        spine.len() < live + live / 4,
        "{} updates held for {live} live",
        spine.len()
    );
}

/// Partially ordered times: batches over intervals of rounds, each update at (round, iteration)
/// with random iterations; compaction to a round frontier keeps accumulations at every
/// `(round, iteration)` beyond it.
#[test]
fn product_times_compact_without_changing_readable_accumulations() {
    type P = Product<u64, u32>;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(100));
    runner
        .run(
            &(
                proptest::collection::vec(
                    proptest::collection::vec(
                        (0u64..6, 0u64..2, 0u64..2, 0u32..3, -1i64..2),
                        0..16,
                    ),
                    1..8,
                ),
                any::<bool>(),
            ),
            |(rounds, whole)| {
                let compaction_min = if whole { 4 } else { usize::MAX };
                let mut spine = Spine::<(u64, u64, P, i64)>::new(SpineConfig {
                    effort: 2,
                    compaction_min,
                    ..SpineConfig::default()
                });
                let mut model: Vec<(u64, u64, P, i64)> = Vec::new();
                let mut upper = 0u64;
                for (index, updates) in rounds.iter().enumerate() {
                    let rows: Vec<_> = updates
                        .iter()
                        .map(|&(k, v, dt, i, r)| (k, v, Product::new(upper + dt, i), r))
                        .collect();
                    model.extend(rows.iter().cloned());
                    let description = Description::new(
                        Antichain::from_elem(Product::new(upper, 0)),
                        Antichain::from_elem(Product::new(upper + 2, 0)),
                    );
                    spine.insert(build(rows, description));
                    upper += 2;
                    if index % 2 == 1 {
                        // Compact to a two-element frontier: (upper - 2, 1) and (upper - 3, 2).
                        let frontier = Antichain::from(vec![
                            Product::new(upper - 2, 1),
                            Product::new(upper - 3, 2),
                        ]);
                        if PartialOrder::less_equal(&spine.logical_frontier().to_owned(), &frontier)
                        {
                            spine.set_logical_compaction(frontier.borrow());
                        }
                    }
                    spine.set_physical_compaction(
                        Antichain::from_elem(Product::new(upper, 0)).borrow(),
                    );
                    spine.check_invariants();
                    let since = spine.logical_frontier().to_owned();
                    for round in 0..upper + 2 {
                        for iteration in 0..4u32 {
                            let time = Product::new(round, iteration);
                            if since.less_equal(&time) {
                                prop_assert_eq!(
                                    spine.snapshot().accumulate_at(&time),
                                    model_at(&model, &time),
                                    "at {:?} with since {:?}",
                                    time,
                                    since
                                );
                            }
                        }
                    }
                }
                // Advancing a time only ever joins it with frontier elements.
                let mut t = Product::new(0u64, 5u32);
                t.advance_by(Antichain::from_elem(Product::new(3, 1)).borrow());
                prop_assert_eq!(t, Product::new(3, 5));
                Ok(())
            },
        )
        .unwrap();
}

/// Inside an iteration an update and its retraction at the same round of two outer times
/// cancel once both outer times are complete. Merges within an outer time cannot advance its
/// rounds' times, and the binary counter leaves the merged batches of past outer times in
/// separate levels until later inserts merge them; a whole compaction, due each time the meet
/// of the logical frontier moves (once per outer time here), collapses them at once.
#[test]
fn whole_compactions_collapse_finished_outer_times() {
    type P = Product<u64, u32>;
    type U = (u64, u64, P, i64);
    let (keys, rounds) = (64u64, 4u32);
    let held = |compaction_min: usize| {
        let mut spine = Spine::<U>::new(SpineConfig {
            compaction_min,
            ..SpineConfig::default()
        });
        let mut model: Vec<U> = Vec::new();
        for step in 0..40u64 {
            for round in 0..rounds {
                // Each key's value at this round becomes `step`, retracting the last step's.
                let time = Product::new(step, round);
                let mut rows: Vec<U> = (0..keys).map(|k| (k, step, time, 1)).collect();
                if step > 0 {
                    rows.extend((0..keys).map(|k| (k, step - 1, time, -1)));
                }
                model.extend(rows.iter().cloned());
                let next_step = Product::new(step + 1, 0);
                let staircase = |round: u32| {
                    if round == 0 {
                        Antichain::from_elem(Product::new(step, 0))
                    } else if round == rounds {
                        Antichain::from_elem(next_step)
                    } else {
                        Antichain::from(vec![Product::new(step, round), next_step])
                    }
                };
                let upper = staircase(round + 1);
                spine.insert(build(
                    rows,
                    Description::new(staircase(round), upper.clone()),
                ));
                spine.set_logical_compaction(upper.borrow());
                spine.set_physical_compaction(upper.borrow());
                spine.check_invariants();
            }
            for round in 0..=rounds {
                let time = Product::new(step + 1, round);
                assert_eq!(
                    spine.snapshot().accumulate_at(&time),
                    model_at(&model, &time)
                );
            }
        }
        // The last step's compaction waits for a batch beyond it: the next step's first round.
        let waiting = spine.len();
        let next = Antichain::from(vec![Product::new(40, 1), Product::new(41, 0)]);
        spine.insert(build(
            Vec::new(),
            Description::new(Antichain::from_elem(Product::new(40, 0)), next.clone()),
        ));
        spine.set_physical_compaction(next.borrow());
        spine.check_invariants();
        assert!(spine.len() <= waiting);
        spine.len()
    };
    let whole = held(1);
    let counter_only = held(usize::MAX);
    // Right after a whole compaction only the live values remain, one per key and round; the
    // counter alone still holds the previous outer time's updates and their retractions.
    assert_eq!(whole, (keys * u64::from(rounds)) as usize);
    assert!(
        counter_only >= 2 * whole,
        "the counter alone holds {counter_only} updates, against {whole}"
    );
}

/// An outer step that alone takes in a quarter of what the last whole compaction left (but
/// less than all of it) has the trace compacted once the logical frontier passes it; with a
/// share of 1, only the trace's doubling does, and the old batch and the steps' stay apart.
/// Reads stay exact either way.
#[test]
fn big_steps_are_compacted_when_the_next_begins() {
    type U = (u64, u64, u64, i64);
    let batches_after = |compaction_share: usize| {
        let mut spine = Spine::<U>::new(SpineConfig {
            effort: 1,
            compaction_min: 16,
            compaction_share,
        });
        let mut model: Vec<U> = Vec::new();
        // Time 0 loads 4,000 keys; each later time brings 1,500 new ones (more than a quarter
        // of what the trace holds), so nothing cancels and only a whole compaction joins the
        // batches.
        let mut counts = Vec::new();
        for time in 0..3u64 {
            let rows: Vec<U> = if time == 0 {
                (0..4_000).map(|k| (k, 0, 0, 1)).collect()
            } else {
                let first = 4_000 + 1_500 * (time - 1);
                (first..first + 1_500).map(|k| (k, 0, time, 1)).collect()
            };
            model.extend(rows.iter().cloned());
            let upper = Antichain::from_elem(time + 1);
            spine.insert(build(
                rows,
                Description::new(Antichain::from_elem(time), upper.clone()),
            ));
            // The logical frontier one time behind, as a reader of `time` holds it: the batch
            // just admitted is beyond its meet, so a due compaction runs now.
            spine.set_logical_compaction(Antichain::from_elem(time).borrow());
            spine.set_physical_compaction(upper.borrow());
            spine.check_invariants();
            assert_eq!(
                spine.snapshot().accumulate_at(&time),
                model_at(&model, &time)
            );
            counts.push(spine.batches().len());
        }
        counts
    };
    // Each time's 1,500 make it due: one batch after each.
    assert_eq!(batches_after(4), vec![1, 1, 1]);
    // Waiting for 4,000 more: the later times' batches stay beside the load's.
    assert!(batches_after(1)[1..].iter().all(|count| *count > 1));
}

/// A batch meeting an empty one becomes their union without a merge (its description widened,
/// its times as they were), unless a reader shares it: then the two stay apart among the recent
/// batches (at a level, they would merge).
#[test]
fn an_empty_neighbour_joins_a_batch_without_a_merge() {
    for shared in [false, true] {
        let mut spine = Spine::<(u64, u64, u64, i64)>::new(SpineConfig::default());
        spine.set_logical_compaction(Antichain::from_elem(1).borrow());
        spine.insert(build(
            vec![(1, 1, 0, 1)],
            Description::new(Antichain::from_elem(0), Antichain::from_elem(1)),
        ));
        spine.set_physical_compaction(Antichain::from_elem(1).borrow());
        let reader = shared.then(|| spine.snapshot());
        spine.insert(Batch::empty(Description::new(
            Antichain::from_elem(1),
            Antichain::from_elem(2),
        )));
        spine.set_physical_compaction(Antichain::from_elem(2).borrow());
        spine.check_invariants();
        let batches = spine.batches();
        if shared {
            // Both wait among the recent batches, the shared one not widened.
            assert_eq!(batches.len(), 2);
        } else {
            assert_eq!(batches.len(), 1);
            let description = batches[0].description();
            assert_eq!(description.lower, Antichain::from_elem(0));
            assert_eq!(description.upper, Antichain::from_elem(2));
            // Not advanced to the logical frontier: the time is still 0.
            assert_eq!(description.since, Antichain::from_elem(0));
            assert_eq!(batches[0].to_rows(), vec![(1, 1, 0, 1)]);
        }
        assert_eq!(spine.snapshot().accumulate_at(&1), vec![(1, 1, 1)]);
        drop(reader);
    }
}

/// A trace that takes only empty batches after a big one (an input gone quiet) still advances
/// it: empty neighbours widen only small batches unadvanced, and a big one merges once the
/// empty batches after it add up to its weight (100 updates: among the recent batches, when
/// they merge; 200: in the levels).
#[test]
fn a_quiet_trace_advances_its_big_batch() {
    for times in [100, 200] {
        let mut spine = Spine::<(u64, u64, u64, i64)>::new(SpineConfig {
            compaction_min: usize::MAX,
            ..SpineConfig::default()
        });
        // One value at `times` times: advanced to the last, they are one update.
        spine.insert(build(
            (0..times).map(|time| (1, 1, time, 1)).collect(),
            Description::new(Antichain::from_elem(0), Antichain::from_elem(times)),
        ));
        let last = times + 300;
        for upper in times + 1..=last {
            spine.set_logical_compaction(Antichain::from_elem(upper - 1).borrow());
            spine.set_physical_compaction(Antichain::from_elem(upper - 1).borrow());
            spine.advance_upper(Antichain::from_elem(upper));
        }
        spine.check_invariants();
        assert_eq!(spine.len(), 1, "the quiet trace kept its history");
        let expected = vec![(1, 1, times as i64)];
        assert_eq!(spine.snapshot().accumulate_at(&last), expected);
    }
}

/// Small batches wait among the recent ones and are merged into one batch at once, their times
/// advanced, when there are eight of them; a bigger batch merges them first, as older than it.
#[test]
fn small_batches_merge_at_once() {
    let mut spine = Spine::<(u64, u64, u64, i64)>::new(SpineConfig::default());
    let at =
        |time: u64| Description::new(Antichain::from_elem(time), Antichain::from_elem(time + 1));
    for time in 0..7 {
        spine.set_logical_compaction(Antichain::from_elem(time).borrow());
        spine.set_physical_compaction(Antichain::from_elem(time).borrow());
        // Value 1 comes and goes; value `time` stays.
        let rows = vec![
            (0, 1, time, if time % 2 == 0 { 1 } else { -1 }),
            (0, 10 + time, time, 1),
        ];
        spine.insert(build(rows, at(time)));
    }
    spine.set_physical_compaction(Antichain::from_elem(7).borrow());
    spine.check_invariants();
    assert_eq!(spine.batches().len(), 7, "seven small batches wait");
    spine.set_logical_compaction(Antichain::from_elem(7).borrow());
    spine.insert(build(vec![(0, 1, 7, -1)], at(7)));
    spine.set_physical_compaction(Antichain::from_elem(8).borrow());
    spine.check_invariants();
    let batches = spine.batches();
    assert_eq!(batches.len(), 1, "the eighth merges them");
    assert_eq!(batches[0].description().since, Antichain::from_elem(7));
    let expected: Vec<_> = (0..7).map(|time| (0, 10 + time, 7, 1)).collect();
    assert_eq!(batches[0].to_rows(), expected);
    // A big batch after two small ones: they merge into one ahead of it.
    for time in 8..10 {
        spine.insert(build(vec![(1, time, time, 1)], at(time)));
    }
    let big: Vec<_> = (0..200).map(|value| (2, value, 10, 1)).collect();
    spine.insert(build(big, at(10)));
    spine.set_physical_compaction(Antichain::from_elem(11).borrow());
    spine.check_invariants();
    let lens: Vec<usize> = spine.batches().iter().map(Batch::len).collect();
    assert_eq!(lens.iter().sum::<usize>(), 7 + 2 + 200);
    assert!(lens.len() <= 3, "{lens:?}");
    assert_eq!(spine.snapshot().accumulate_at(&10).len(), 7 + 2 + 200);
}

/// `compact` advances the times of a lone batch too, which has no partner to merge with: after
/// a whole compaction at one frontier, a later `compact` at a further one must still advance.
#[test]
fn compact_advances_a_lone_batch() {
    let mut spine = Spine::<(u64, u64, u64, i64)>::new(SpineConfig::default());
    spine.insert(build(
        vec![(1, 1, 0, 1), (1, 1, 1, 1), (2, 2, 1, 1)],
        Description::new(Antichain::from_elem(0), Antichain::from_elem(2)),
    ));
    spine.set_physical_compaction(Antichain::from_elem(2).borrow());
    spine.compact();
    assert_eq!(spine.batches().len(), 1);
    spine.set_logical_compaction(Antichain::from_elem(2).borrow());
    spine.compact();
    spine.check_invariants();
    assert_eq!(spine.snapshot().to_rows(), vec![(1, 1, 2, 2), (2, 2, 2, 1)]);
}

/// Over its budget, a spine writes out its oldest, largest batch first: small fresh batches
/// stay in memory while an old big one goes to a file.
#[test]
fn spilling_writes_the_oldest_largest_batch_first() {
    type U = (u64, u64, u64, i64);
    let batch_at = |time: u64, count: u64| {
        let rows: Vec<U> = (0..count)
            .map(|k| (k + 10_000 * time, k, time, 1))
            .collect();
        let description =
            Description::new(Antichain::from_elem(time), Antichain::from_elem(time + 1));
        build(rows, description)
    };
    let big = batch_at(0, 5_000);
    let small_bytes = batch_at(1, 50).heap_bytes();
    // Room for the big batch and a few small ones, not for all that follow.
    let settings = StorageSettings {
        memory_budget: big.heap_bytes() + 4 * small_bytes,
        cache_bytes: 0,
        working_bytes: 0,
        block_updates: 64,
        filters: true,
        spill_min_bytes: 0,
    };
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    let storage = Arc::new(Storage::in_spill_dir(spill, settings));
    let config = SpineConfig {
        compaction_min: usize::MAX,
        ..SpineConfig::default()
    };
    let mut spine = Spine::<U>::with_storage(config, Some(Arc::clone(&storage)));
    spine.insert(big);
    spine.set_physical_compaction(Antichain::from_elem(1).borrow());
    assert!(spine.batches().iter().all(|batch| !batch.is_stored()));
    let mut spilled = false;
    for time in 1..24 {
        spine.insert(batch_at(time, 50));
        spine.set_physical_compaction(Antichain::from_elem(time + 1).borrow());
        spine.check_invariants();
        let batches = spine.batches();
        if batches.iter().any(Batch::is_stored) {
            spilled = true;
            // The big batch alone, or a merge that took it in, is the first written out.
            let oldest = &batches[0];
            assert!(
                oldest.is_stored() && oldest.len() >= 5_000,
                "the big batch first"
            );
            let newest = batches.last().expect("batches");
            assert!(
                !newest.is_stored(),
                "the newest small batch stays in memory"
            );
        }
    }
    assert!(spilled, "over budget, something is written out");
}
