//! Ripple's trace beside differential-dataflow 0.26's default `arrange_by_key` trace.
//!
//! Two parts, both engines on identical inputs in one process, alternating runs:
//!
//! - *build*: updates arrive in rounds (see `ripple_bench::trace_inputs`); each round goes
//!   through the engine's merge batcher, is sealed at the next time, built into a batch and
//!   inserted into a spine; finally every batch is merged into one. Reported: median time,
//!   throughput (updates/s), peak heap during the build, and the heap still held by the trace
//!   afterwards per update. Two variants: *as built* (times kept: `since` stays at 0) and
//!   *compacted* (the logical compaction frontier follows the input, so merges advance every
//!   time to the last round). Ripple uses `MergeBatcher` + `Builder` + `Spine`; differential
//!   uses `ValBatcher` + `ValBuilder` (its sealer) + `ValSpine` (`OrdValBatch`, `Vector` layout),
//!   the types `arrange_by_key` uses, driven by hand.
//! - *lookups*: a trace of `--lookup-keys` `u64` keys in 8 unmerged batches; probe batches of
//!   1, 4, 32 and 1024 keys with random keys or strides 16, 256 and 4096. Reported: nanoseconds
//!   per probe for ripple's batched lookup, ripple with one fresh seek per key, and
//!   differential with one fresh seek per key (its `CursorList`, rewound per probe), plus
//!   ripple's sorted forward seeks for reference.
//!
//! Every variant's output is checksummed and must match across engines and modes.

use clap::Parser;
use differential_dataflow::batcher::{Batcher as DdBatcherTrait, Extract};
use differential_dataflow::trace::cursor::cursor_list;
use differential_dataflow::trace::implementations::{ValBatcher, ValSpine};
use differential_dataflow::trace::{
    Cursor, Description as DdDescription, ExertionLogic, Span, Trace, TraceReader,
};
use ripple_batcher::{BatcherConfig, MergeBatcher};
use ripple_bench::alloc::{self, CountingAlloc};
use ripple_bench::batcher_inputs::mix;
use ripple_bench::report::{bytes, markdown_table, median};
use ripple_bench::trace_inputs::{build_rounds, lookup_batches, probe_batches, Locality, TraceKey};
use ripple_trace::{Builder, Description, LookupScratch, Spine, SpineConfig, TraceSnapshot};
use ripple_updates::{Antichain, Updates};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::dataflow::operators::generic::OperatorInfo;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Ripple's trace beside differential-dataflow's, with ratios.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Update counts for the build part.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000_000usize])]
    updates: Vec<usize>,
    /// The sizes of the full table: 1M and 10M updates (overrides --updates).
    #[arg(long)]
    full: bool,
    /// Rounds (distinct times) the build input arrives in.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Key types for the build part: u64, string.
    #[arg(long, value_delimiter = ',', default_values_t = ["u64".to_string(), "string".to_string()])]
    keys: Vec<String>,
    /// Runs per engine and build cell (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Keys in the lookup trace.
    #[arg(long, default_value_t = 1 << 20)]
    lookup_keys: u64,
    /// Probe keys per lookup cell and mode.
    #[arg(long, default_value_t = 1 << 16)]
    probes: usize,
    /// Skip a part: build or lookups.
    #[arg(long)]
    skip: Option<String>,
    /// Where to write the Markdown report.
    #[arg(long, default_value = "target/bench/trace.md")]
    out: PathBuf,
}

/// Alternating runs per lookup cell and mode; batch-size-1 cells are noisy on 2 cores.
const LOOKUP_RUNS: usize = 9;

type RippleU<K> = (K, u64, u64, i64);
type DdSpine<K> = ValSpine<K, u64, u64, i64>;
type DdUpdate<K> = ((K, u64), u64, i64);

/// One build run's figures.
struct BuildRun {
    time: Duration,
    peak: usize,
    held: usize,
    checksum: (usize, u64),
}

fn fold(checksum: &mut (usize, u64), key: u64, val: u64, time: u64, diff: i64) {
    checksum.0 += 1;
    checksum.1 = mix(checksum.1, mix(mix(mix(key, val), time), diff as u64));
}

fn ripple_build<K: TraceKey + ripple_updates::Data>(
    rounds: &[Vec<(u64, u64)>],
    compact: bool,
) -> BuildRun {
    let base = alloc::live_bytes();
    let inputs: Vec<Updates<RippleU<K>>> = rounds
        .iter()
        .enumerate()
        .map(|(round, pairs)| {
            let mut updates = Updates::default();
            for &(key, val) in pairs {
                updates.push(&K::from_id(key), &val, &(round as u64), &1);
            }
            updates
        })
        .collect();
    alloc::reset_peak();
    let peak_base = alloc::live_bytes();
    let start = Instant::now();
    let mut batcher = MergeBatcher::<RippleU<K>>::new(BatcherConfig::default());
    let mut spine = Spine::<RippleU<K>>::new(SpineConfig::default());
    let mut inputs = inputs.into_iter();
    for round in 0..rounds.len() {
        let input = inputs.next().expect("one input per round");
        batcher.push_updates(&input);
        drop(input);
        let (lower, upper) = (
            Antichain::from_elem(round as u64),
            Antichain::from_elem(round as u64 + 1),
        );
        let chain = batcher.seal(upper.borrow());
        let mut builder = Builder::new();
        chain.for_each_view(|view| builder.push_view(view));
        drop(chain);
        spine.insert(builder.done(Description::new(lower, upper.clone())));
        spine.set_physical_compaction(upper.borrow());
        if compact {
            spine.set_logical_compaction(upper.borrow());
        }
    }
    drop(batcher);
    spine.compact();
    let time = start.elapsed();
    let peak = alloc::peak_bytes().saturating_sub(peak_base);
    let held = alloc::live_bytes().saturating_sub(base);
    let mut checksum = (0, 0);
    let snapshot = spine.snapshot();
    let mut cursor = snapshot.cursor();
    while let Some(key) = cursor.get_key() {
        let key = <K as columnar::Columnar>::into_owned(key).hash();
        while let Some(val) = cursor.get_val() {
            cursor.map_times(|t, r| fold(&mut checksum, key, *val, *t, *r));
            cursor.step_val();
        }
        cursor.step_key();
    }
    BuildRun {
        time,
        peak,
        held,
        checksum,
    }
}

/// Differential's idle-merge logic: keep exerting while more than one batch remains.
fn merge_everything() -> ExertionLogic {
    Arc::new(|layers: &[(usize, usize, usize)]| {
        let mut non_empty = 0;
        for (_index, count, length) in layers {
            if *count > 1 {
                return Some(1 << 32);
            }
            if *length > 0 {
                non_empty += 1;
            }
            if non_empty > 1 {
                return Some(1 << 32);
            }
        }
        None
    })
}

fn dd_batch_count<S: TraceReader>(spine: &S) -> usize {
    let mut count = 0;
    spine.map_spans(|span| {
        if span.inner.is_some() {
            count += 1
        }
    });
    count
}

fn dd_build<K: TraceKey>(rounds: &[Vec<(u64, u64)>], compact: bool) -> BuildRun {
    let base = alloc::live_bytes();
    let inputs: Vec<Vec<DdUpdate<K>>> = rounds
        .iter()
        .enumerate()
        .map(|(round, pairs)| {
            pairs
                .iter()
                .map(|&(key, val)| ((K::from_id(key), val), round as u64, 1))
                .collect()
        })
        .collect();
    alloc::reset_peak();
    let peak_base = alloc::live_bytes();
    let start = Instant::now();
    let info = OperatorInfo::new(0, 0, [].into());
    let mut spine = DdSpine::<K>::with_effort(1, info, None, None);
    let mut batcher = ValBatcher::<K, u64, u64, i64>::new(None, 0);
    let mut inputs = inputs.into_iter();
    for round in 0..rounds.len() {
        let mut input = inputs.next().expect("one input per round");
        batcher.insert(&mut input);
        drop(input);
        let (lower, upper) = (
            Antichain::from_elem(round as u64),
            Antichain::from_elem(round as u64 + 1),
        );
        let (batch, _kept) = batcher.extract(upper.borrow());
        let description = DdDescription::new(lower, upper.clone(), Antichain::from_elem(0));
        spine.insert(Span::new(description, batch.map(Rc::new)));
        spine.set_physical_compaction(upper.borrow());
        if compact {
            spine.set_logical_compaction(upper.borrow());
        }
    }
    drop(batcher);
    spine.set_exert_logic(merge_everything());
    while dd_batch_count(&spine) > 1 {
        spine.exert();
    }
    let time = start.elapsed();
    let peak = alloc::peak_bytes().saturating_sub(peak_base);
    let held = alloc::live_bytes().saturating_sub(base);
    let mut checksum = (0, 0);
    let batches = spine
        .batches_through(Antichain::new().borrow())
        .expect("every batch is readable");
    let (mut cursor, storage) = cursor_list(batches);
    while let Some(key) = cursor.get_key(&storage) {
        let key = key.hash();
        while let Some(val) = cursor.get_val(&storage) {
            cursor.map_times(&storage, |t, r| fold(&mut checksum, key, *val, *t, *r));
            cursor.step_val(&storage);
        }
        cursor.step_key(&storage);
    }
    drop(cursor);
    drop(storage);
    drop(spine);
    BuildRun {
        time,
        peak,
        held,
        checksum,
    }
}

fn build_part<K: TraceKey + ripple_updates::Data>(
    args: &Args,
    updates: usize,
    rows: &mut Vec<Vec<String>>,
) {
    let rounds = build_rounds(updates, args.rounds, 0x5eed ^ updates as u64);
    for compact in [false, true] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..args.runs.max(1) {
            ours.push(ripple_build::<K>(&rounds, compact));
            theirs.push(dd_build::<K>(&rounds, compact));
            let (a, b) = (ours.last().unwrap(), theirs.last().unwrap());
            if a.checksum != b.checksum {
                eprintln!(
                    "error: build output differs for {} at {updates} updates: ripple {:?}, differential {:?}",
                    K::NAME, a.checksum, b.checksum
                );
                std::process::exit(1);
            }
        }
        let summarize = |runs: &mut Vec<BuildRun>| {
            let mut times: Vec<Duration> = runs.iter().map(|r| r.time).collect();
            let time = median(&mut times);
            let mut peaks: Vec<usize> = runs.iter().map(|r| r.peak).collect();
            peaks.sort();
            (
                time,
                peaks[peaks.len() / 2],
                runs[0].held,
                runs[0].checksum.0,
            )
        };
        let (our_time, our_peak, our_held, stored) = summarize(&mut ours);
        let (their_time, their_peak, their_held, _) = summarize(&mut theirs);
        let per_update = |held: usize| held as f64 / updates as f64;
        rows.push(vec![
            K::NAME.to_string(),
            format!("{}M", updates as f64 / 1e6),
            if compact { "compacted" } else { "as built" }.to_string(),
            stored.to_string(),
            format!(
                "{:.2} / {:.2}",
                updates as f64 / our_time.as_secs_f64() / 1e6,
                updates as f64 / their_time.as_secs_f64() / 1e6
            ),
            format!("{:.2}x", their_time.as_secs_f64() / our_time.as_secs_f64()),
            format!("{} / {}", bytes(our_peak), bytes(their_peak)),
            format!("{:.2}x", our_peak as f64 / their_peak.max(1) as f64),
            format!(
                "{:.1} / {:.1}",
                per_update(our_held),
                per_update(their_held)
            ),
            format!("{:.2}x", our_held as f64 / their_held.max(1) as f64),
        ]);
        eprintln!(
            "build {} {updates} {}: done",
            K::NAME,
            if compact { "compacted" } else { "as built" }
        );
    }
}

/// The lookup trace in both engines: 8 batches, never merged (physical compaction held).
fn lookup_traces(keys: u64) -> (TraceSnapshot<RippleU<u64>>, DdSpine<u64>) {
    let batches = lookup_batches(keys, 8, 0x100c);
    let mut ours = Spine::<RippleU<u64>>::new(SpineConfig::default());
    let info = OperatorInfo::new(0, 0, [].into());
    let mut theirs = DdSpine::<u64>::with_effort(1, info, None, None);
    for (index, batch_keys) in batches.iter().enumerate() {
        let time = index as u64;
        let (lower, upper) = (Antichain::from_elem(time), Antichain::from_elem(time + 1));
        let mut builder = Builder::<RippleU<u64>>::new();
        for key in batch_keys {
            builder.push(key, &(3 * key), &time, &1);
        }
        ours.insert(builder.done(Description::new(lower.clone(), upper.clone())));
        let mut chain: Vec<((u64, u64), u64, i64)> = batch_keys
            .iter()
            .map(|&key| ((key, 3 * key), time, 1))
            .collect();
        let mut batcher = ValBatcher::<u64, u64, u64, i64>::new(None, 0);
        batcher.insert(&mut chain);
        let (batch, _) = batcher.extract(upper.borrow());
        theirs.insert(Span::new(
            DdDescription::new(lower, upper, Antichain::from_elem(0)),
            batch.map(Rc::new),
        ));
    }
    let snapshot = ours.snapshot();
    assert_eq!(
        snapshot.batches().len(),
        8,
        "ripple's lookup batches stay distinct"
    );
    (snapshot, theirs)
}

/// One lookup mode's checksum over all probe batches: (found probes, hash).
type Found = (usize, u64);

fn ripple_batched(snapshot: &TraceSnapshot<RippleU<u64>>, probes: &[Vec<u64>]) -> Found {
    let mut found = (0, 0);
    let mut cursor = snapshot.cursor();
    let mut scratch = LookupScratch::default();
    for batch in probes {
        cursor.lookup(&batch[..], &mut scratch, |index, vals| {
            while let Some(val) = vals.get_val() {
                vals.map_times(|t, r| fold(&mut found, batch[index], *val, *t, *r));
                vals.step_val();
            }
        });
    }
    found
}

fn ripple_seeks(
    snapshot: &TraceSnapshot<RippleU<u64>>,
    probes: &[Vec<u64>],
    rewind: bool,
) -> Found {
    let mut found = (0, 0);
    let mut cursor = snapshot.cursor();
    for batch in probes {
        if !rewind {
            cursor.rewind_keys();
        }
        for probe in batch {
            if rewind {
                cursor.rewind_keys();
            }
            cursor.seek_key(probe);
            if cursor.get_key() == Some(probe) {
                while let Some(val) = cursor.get_val() {
                    cursor.map_times(|t, r| fold(&mut found, *probe, *val, *t, *r));
                    cursor.step_val();
                }
            }
        }
    }
    found
}

fn dd_seeks(spine: &mut DdSpine<u64>, probes: &[Vec<u64>]) -> Found {
    let mut found = (0, 0);
    let batches = spine
        .batches_through(Antichain::new().borrow())
        .expect("every batch is readable");
    let (mut cursor, storage) = cursor_list(batches);
    for batch in probes {
        for probe in batch {
            cursor.rewind_keys(&storage);
            cursor.seek_key(&storage, probe);
            if cursor.get_key(&storage) == Some(probe) {
                while let Some(val) = cursor.get_val(&storage) {
                    cursor.map_times(&storage, |t, r| fold(&mut found, *probe, *val, *t, *r));
                    cursor.step_val(&storage);
                }
            }
        }
    }
    found
}

fn timed<O>(work: impl FnOnce() -> O) -> (Duration, O) {
    let start = Instant::now();
    let output = work();
    (start.elapsed(), output)
}

fn lookup_part(args: &Args, rows: &mut Vec<Vec<String>>) {
    let (snapshot, mut dd) = lookup_traces(args.lookup_keys);
    for size in [1usize, 4, 32, 1024] {
        for locality in [
            Locality::Random,
            Locality::Stride(16),
            Locality::Stride(256),
            Locality::Stride(4096),
        ] {
            let count = (args.probes / size).max(1);
            let probes = probe_batches(args.lookup_keys, size, locality, count, size as u64);
            let probe_count: usize = probes.iter().map(Vec::len).sum();
            let mut samples: [Vec<Duration>; 4] = Default::default();
            let mut reference = None;
            for _ in 0..LOOKUP_RUNS {
                let runs = [
                    timed(|| ripple_batched(&snapshot, &probes)),
                    timed(|| ripple_seeks(&snapshot, &probes, true)),
                    timed(|| dd_seeks(&mut dd, &probes)),
                    timed(|| ripple_seeks(&snapshot, &probes, false)),
                ];
                for (mode, (time, found)) in runs.into_iter().enumerate() {
                    let expected = *reference.get_or_insert(found);
                    if found != expected {
                        eprintln!(
                            "error: lookup output differs (size {size}, {}, mode {mode}): {found:?} vs {expected:?}",
                            locality.name()
                        );
                        std::process::exit(1);
                    }
                    samples[mode].push(time);
                }
            }
            let per_probe: Vec<f64> = samples
                .iter_mut()
                .map(|times| median(times).as_nanos() as f64 / probe_count as f64)
                .collect();
            rows.push(vec![
                size.to_string(),
                locality.name(),
                format!("{:.0}", per_probe[0]),
                format!("{:.0}", per_probe[1]),
                format!("{:.0}", per_probe[2]),
                format!("{:.0}", per_probe[3]),
                format!("{:.2}x", per_probe[0] / per_probe[1]),
                format!("{:.2}x", per_probe[0] / per_probe[2]),
            ]);
            eprintln!("lookups size {size} {}: done", locality.name());
        }
    }
}

fn main() {
    let args = Args::parse();
    let updates = if args.full {
        vec![1_000_000, 10_000_000]
    } else {
        args.updates.clone()
    };
    let mut report = String::from("# Trace benchmark: ripple vs differential-dataflow 0.26\n\n");
    report.push_str(&format!(
        "Command: `cargo run --release -p ripple-bench --bin trace-bench -- {}`\n\n",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    ));
    if args.skip.as_deref() != Some("build") {
        let mut rows = Vec::new();
        for updates in &updates {
            for key in &args.keys {
                match key.as_str() {
                    "u64" => build_part::<u64>(&args, *updates, &mut rows),
                    "string" => build_part::<String>(&args, *updates, &mut rows),
                    other => {
                        eprintln!("error: unknown key type {other:?} (expected u64 or string)");
                        std::process::exit(2);
                    }
                }
            }
        }
        report.push_str(&format!(
            "## Build and merge\n\n{} rounds (one time each), keys from n/8 ids, values from 2^32, diffs +1; every batch merged into one at the end. Ratios are ripple/differential: speed > 1 and memory < 1 favour ripple. Held = heap still allocated by the trace afterwards, per input update.\n\n",
            args.rounds
        ));
        report.push_str(&markdown_table(
            &[
                "keys",
                "updates",
                "variant",
                "stored",
                "M updates/s (ripple / dd)",
                "speed",
                "peak (ripple / dd)",
                "peak ratio",
                "held B/update (ripple / dd)",
                "held ratio",
            ],
            &rows,
        ));
    }
    if args.skip.as_deref() != Some("lookups") {
        let mut rows = Vec::new();
        lookup_part(&args, &mut rows);
        report.push_str(&format!(
            "\n## Lookups\n\n{} `u64` keys in 8 unmerged batches, one value each; {} probes per cell. Nanoseconds per probe (medians of {} alternating runs): ripple's batched lookup, ripple's fresh seek per key, differential's fresh seek per key (`CursorList`, rewound per probe), ripple's sorted forward seeks within a probe batch. Ratios below 1 favour batched lookups. At probe batch 1 the four localities are the same workload (one probe per lookup), so their spread shows the noise.\n\n",
            args.lookup_keys, args.probes, LOOKUP_RUNS
        ));
        report.push_str(&markdown_table(
            &[
                "probe batch",
                "locality",
                "batched",
                "seek per key",
                "dd seek per key",
                "forward seeks",
                "batched / seek per key",
                "batched / dd",
            ],
            &rows,
        ));
    }
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent).expect("create the report's folder");
    }
    std::fs::write(&args.out, &report).expect("write the report");
    println!("{report}");
    eprintln!("report written to {}", args.out.display());
}
