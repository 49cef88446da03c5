//! Ripple's merge batcher beside differential-dataflow 0.26's default merge batcher.
//!
//! Both engines get identical inputs (see `ripple_bench::batcher_inputs`), run alternately in one
//! process, and must produce identical output (count and an order-dependent hash of every
//! update); a mismatch stops the run. Two measurements per cell:
//! - *cycle*: push the input in rounds, then seal at time 2 (half the updates ship, half stay).
//! - *merge*: merge two sorted, consolidated chains of the given size each.
//!
//! Each run takes the next of several input sets generated with different seeds (as many as fit
//! in 32 MiB, at most 64), so no run repeats the input of the run before it. Repeating one small
//! input thousands of times lets the CPU's branch predictor learn the merge's whole sequence of
//! decisions: differential's branchy merge then ran several times faster on a small input than
//! on any input it had not seen, a speed no real batcher sees (see docs/perf-notes.md, section
//! "Bench: fresh inputs and a primed allocator").
//!
//! Reports the median throughput (payload bytes per second), peak heap (capacity
//! included; for *cycle* the batcher's own allocations, inputs excluded, plus for differential the
//! string bytes it takes over from the inputs instead of copying; for *merge* the two input chains
//! plus everything the merge allocates), and the ripple/differential ratios.

use clap::Parser;
use differential_dataflow::batcher::{Batcher, Extract};
use differential_dataflow::trace::implementations::merge_batcher::{
    chunker::ContainerChunker, vec::VecMerger, MergeBatcher as DdMergeBatcher, Merger, Sealer,
};
use ripple_batcher::chunk::{ChunkWriter, Stash};
use ripple_batcher::{BatcherConfig, Chain, MergeBatcher};
use ripple_bench::alloc::{self, CountingAlloc};
use ripple_bench::batcher_inputs::{
    cycle_rounds, merge_sides, mix, IntRecord, Raw, Record, Regime, StringRecord,
};
use ripple_bench::report::{bytes, markdown_table, mib_per_second};
use ripple_updates::consolidate::consolidate_rows;
use ripple_updates::{Antichain, Updates};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Ripple's merge batcher beside differential-dataflow's, with ratios.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Per-side sizes, in bytes of payload, with a KiB or MiB suffix.
    #[arg(long, value_delimiter = ',', default_values_t = ["32KiB".to_string(), "512KiB".to_string()])]
    sizes: Vec<String>,
    /// All four sizes of the full table: 32KiB, 512KiB, 8MiB and 128MiB (overrides --sizes).
    #[arg(long)]
    full: bool,
    /// Regimes to run: mixed, collisions, disjoint, sorted.
    #[arg(long, value_delimiter = ',', default_values_t = Regime::ALL.map(|r| r.name().to_string()))]
    regimes: Vec<String>,
    /// Record types to run: int for ((u64, u64), u64, i64), string for (String, u64, i64).
    #[arg(long, value_delimiter = ',', default_values_t = ["int".to_string(), "string".to_string()])]
    records: Vec<String>,
    /// Measurements to run: cycle (push rounds + seal) and merge (two chains).
    #[arg(long, value_delimiter = ',', default_values_t = ["cycle".to_string(), "merge".to_string()])]
    modes: Vec<String>,
    /// Rounds of pushes in the cycle.
    #[arg(long, default_value_t = 64)]
    rounds: usize,
    /// Time to spend per cell and engine, in seconds (at least 3 runs each, and at most 31 or
    /// four per input set, whichever is more).
    #[arg(long, default_value_t = 0.5)]
    seconds: f64,
    /// Where to write the Markdown report.
    #[arg(long, default_value = "target/bench/batcher.md")]
    out: PathBuf,
}

/// One run's figures.
struct Run {
    time: Duration,
    peak: usize,
    /// Allocation and reallocation calls.
    allocations: usize,
    /// Updates out and an order-dependent hash of them.
    checksum: (usize, u64),
}

/// Medians of one engine in one cell.
struct Figures {
    /// Payload MiB per second.
    rate: f64,
    peak: usize,
    allocations: usize,
}

type RippleUpdate<R> = (<R as Record>::Key, <R as Record>::Val, u64, i64);
type DdData<R> = (<R as Record>::Key, <R as Record>::Val);
type DdUpdate<R> = (DdData<R>, u64, i64);

/// Hands the extracted chain out as it is.
struct ChainSealer;
impl<C> Sealer<C> for ChainSealer {
    type Output = Vec<C>;
    fn seal(chain: &mut Vec<C>) -> Option<Vec<C>> {
        Some(std::mem::take(chain))
    }
}

type DdBatcher<R> =
    DdMergeBatcher<ContainerChunker<Vec<DdUpdate<R>>>, VecMerger<DdData<R>, u64, i64>, ChainSealer>;

/// Folds one update into an order-dependent checksum `(count, hash)`.
fn fold_update<R: Record>(
    checksum: &mut (usize, u64),
    key: &R::Key,
    val: &R::Val,
    time: u64,
    diff: i64,
) {
    checksum.0 += 1;
    checksum.1 = mix(checksum.1, mix(mix(R::hash(key, val), time), diff as u64));
}

fn ripple_checksum<R: Record>(chain: &Chain<RippleUpdate<R>>) -> (usize, u64) {
    let mut checksum = (0, 0);
    chain.for_each_view(|view| {
        for index in 0..view.len() {
            let (key, val, time, diff) = view.row(index);
            fold_update::<R>(&mut checksum, &key, &val, time, diff);
        }
    });
    checksum
}

fn dd_checksum<R: Record>(chain: &[Vec<DdUpdate<R>>]) -> (usize, u64) {
    let mut checksum = (0, 0);
    for ((key, val), time, diff) in chain.iter().flatten() {
        fold_update::<R>(&mut checksum, key, val, *time, *diff);
    }
    checksum
}

/// Runs `work` with the peak-memory counter reset; `work` returns its own timing and output.
/// Peak bytes are counted above `base` (the live bytes before the engine's data was built);
/// the checksum is taken after the peak is read, so it does not count.
fn measured<O>(
    base: usize,
    work: impl FnOnce() -> (Duration, O),
    checksum: impl FnOnce(&O) -> (usize, u64),
) -> Run {
    alloc::reset_peak();
    let calls = alloc::allocation_calls();
    let (time, output) = work();
    let allocations = alloc::allocation_calls() - calls;
    let peak = alloc::peak_bytes().saturating_sub(base);
    Run {
        time,
        peak,
        allocations,
        checksum: checksum(&output),
    }
}

// The timed parts of each run are functions of their own, never inlined, so that a profiler can
// select one engine's work by name, e.g. valgrind's `--toggle-collect='*ripple_cycle_timed*'`.

/// A cycle's shipped chain and the batcher that kept the rest (dropped after the timing).
type RippleCycleOutput<R> = (Chain<RippleUpdate<R>>, MergeBatcher<RippleUpdate<R>>);
type DdCycleOutput<R> = (Vec<Vec<DdUpdate<R>>>, DdBatcher<R>);

#[inline(never)]
fn ripple_cycle_timed<R: Record>(
    rounds: &[Updates<RippleUpdate<R>>],
) -> (Duration, RippleCycleOutput<R>) {
    let start = Instant::now();
    let mut batcher = MergeBatcher::<RippleUpdate<R>>::new(BatcherConfig::default());
    for round in rounds {
        batcher.push_updates(round);
    }
    let shipped = batcher.seal(Antichain::from_elem(2).borrow());
    (start.elapsed(), (shipped, batcher))
}

#[inline(never)]
fn dd_cycle_timed<R: Record>(inputs: &mut [Vec<DdUpdate<R>>]) -> (Duration, DdCycleOutput<R>) {
    let start = Instant::now();
    let mut batcher = DdBatcher::<R>::new(None, 0);
    for round in inputs.iter_mut() {
        batcher.insert(round);
    }
    let shipped = batcher
        .extract(Antichain::from_elem(2).borrow())
        .0
        .unwrap_or_default();
    (start.elapsed(), (shipped, batcher))
}

fn ripple_cycle<R: Record>(rounds: &[Updates<RippleUpdate<R>>]) -> Run {
    // A fresh copy, as differential's run gets one (its batcher drains its input): both
    // engines start with their input just written, equally warm in cache. Without it a small
    // cell compared ripple reading a cold input set with differential reading a warm one.
    let rounds = rounds.to_vec();
    measured(
        alloc::live_bytes(),
        || ripple_cycle_timed::<R>(&rounds),
        |(shipped, _)| ripple_checksum::<R>(shipped),
    )
}

fn dd_cycle<R: Record>(rounds: &[Vec<DdUpdate<R>>]) -> Run {
    let mut inputs = rounds.to_vec();
    // Differential's batcher takes the records' heap parts (string bytes) over from the input
    // buffers instead of copying them, so they were allocated before the measurement starts;
    // ripple copies them into its columns, inside it. Both batchers hold those bytes, so they
    // count for both.
    let moved_in: usize = rounds
        .iter()
        .flatten()
        .map(|((key, _), _, _)| R::heap_bytes(key))
        .sum();
    let mut run = measured(
        alloc::live_bytes(),
        || dd_cycle_timed::<R>(&mut inputs),
        |(shipped, _)| dd_checksum::<R>(shipped),
    );
    run.peak += moved_in;
    run
}

/// A ripple chain of `rows` (sorted, consolidated), cut into the chunks the batcher's writers
/// cut an output of this size into (default configuration).
fn ripple_chain<R: Record>(rows: &[RippleUpdate<R>]) -> Chain<RippleUpdate<R>> {
    let mut writer = ChunkWriter::new(BatcherConfig::CHUNK_BYTES_DEFAULT);
    writer.expect(
        Updates::<RippleUpdate<R>>::from_rows(rows.iter()).byte_len(),
        rows.len(),
    );
    let mut stash = Stash::new(0);
    let mut chunks = Vec::new();
    for (k, v, t, r) in rows {
        writer.updates().push(k, v, t, r);
        if writer.is_full() {
            writer.flush(&mut chunks, &mut stash);
        }
    }
    writer.flush(&mut chunks, &mut stash);
    Chain::from_chunks(chunks)
}

/// A differential chain of `rows`, cut into chunks of the capacity its merger uses.
fn dd_chain<R: Record>(rows: &[RippleUpdate<R>]) -> Vec<Vec<DdUpdate<R>>> {
    let target = timely::container::buffer::default_capacity::<DdUpdate<R>>().next_power_of_two();
    rows.chunks(target)
        .map(|piece| {
            let mut chunk = Vec::with_capacity(target);
            chunk.extend(
                piece
                    .iter()
                    .map(|(k, v, t, r)| ((k.clone(), v.clone()), *t, *r)),
            );
            chunk
        })
        .collect()
}

#[inline(never)]
fn ripple_merge_timed<U: ripple_updates::Update>(
    chain_a: Chain<U>,
    chain_b: Chain<U>,
) -> (Duration, Chain<U>) {
    let start = Instant::now();
    let mut writer = ChunkWriter::new(BatcherConfig::CHUNK_BYTES_DEFAULT);
    let mut stash = Stash::new(BatcherConfig::default().stash_count_max);
    let merged = ripple_batcher::merger::merge(chain_a, chain_b, &mut writer, &mut stash);
    (start.elapsed(), merged)
}

#[inline(never)]
fn dd_merge_timed<R: Record>(
    chain_a: Vec<Vec<DdUpdate<R>>>,
    chain_b: Vec<Vec<DdUpdate<R>>>,
) -> (Duration, Vec<Vec<DdUpdate<R>>>) {
    let start = Instant::now();
    let mut merger = VecMerger::<DdData<R>, u64, i64>::default();
    let mut output = Vec::new();
    let mut stash = Vec::new();
    merger.merge(chain_a, chain_b, &mut output, &mut stash);
    (start.elapsed(), output)
}

fn ripple_merge<R: Record>(a: &[RippleUpdate<R>], b: &[RippleUpdate<R>]) -> Run {
    let base = alloc::live_bytes();
    let (chain_a, chain_b) = (ripple_chain::<R>(a), ripple_chain::<R>(b));
    measured(
        base,
        || ripple_merge_timed(chain_a, chain_b),
        ripple_checksum::<R>,
    )
}

fn dd_merge<R: Record>(a: &[RippleUpdate<R>], b: &[RippleUpdate<R>]) -> Run {
    let base = alloc::live_bytes();
    let (chain_a, chain_b) = (dd_chain::<R>(a), dd_chain::<R>(b));
    measured(
        base,
        || dd_merge_timed::<R>(chain_a, chain_b),
        |output| dd_checksum::<R>(output),
    )
}

/// Runs both engines alternately, each run on the next input set (`payloads[v]` is set `v`'s
/// payload bytes), until the time budget is spent; checks that outputs agree.
fn compare(
    label: &str,
    seconds: f64,
    payloads: &[usize],
    mut ripple: impl FnMut(usize) -> Run,
    mut dd: impl FnMut(usize) -> Run,
) -> Result<(Figures, Figures), String> {
    let (mut ripple_rates, mut dd_rates) = (Vec::new(), Vec::new());
    let (mut ripple_peaks, mut dd_peaks) = (Vec::new(), Vec::new());
    let (mut ripple_allocations, mut dd_allocations) = (Vec::new(), Vec::new());
    let max_runs = 31.max(4 * payloads.len());
    let started = Instant::now();
    let mut runs = 0;
    while runs < 3 || (runs < max_runs && started.elapsed().as_secs_f64() < 2.0 * seconds) {
        let variant = runs % payloads.len();
        let ours = ripple(variant);
        let theirs = dd(variant);
        if ours.checksum != theirs.checksum {
            return Err(format!(
                "{label}: outputs differ: ripple {:?}, differential {:?}",
                ours.checksum, theirs.checksum
            ));
        }
        ripple_rates.push(mib_per_second(payloads[variant], ours.time));
        dd_rates.push(mib_per_second(payloads[variant], theirs.time));
        ripple_peaks.push(ours.peak);
        dd_peaks.push(theirs.peak);
        ripple_allocations.push(ours.allocations);
        dd_allocations.push(theirs.allocations);
        runs += 1;
    }
    for samples in [&mut ripple_rates, &mut dd_rates] {
        samples.sort_by(f64::total_cmp);
    }
    for samples in [
        &mut ripple_peaks,
        &mut dd_peaks,
        &mut ripple_allocations,
        &mut dd_allocations,
    ] {
        samples.sort();
    }
    Ok((
        Figures {
            rate: ripple_rates[runs / 2],
            peak: ripple_peaks[runs / 2],
            allocations: ripple_allocations[runs / 2],
        },
        Figures {
            rate: dd_rates[runs / 2],
            peak: dd_peaks[runs / 2],
            allocations: dd_allocations[runs / 2],
        },
    ))
}

/// How many input sets a cell rotates through: as many as fit in 32 MiB of payload, 1 to 64.
fn variants_for(size: usize) -> u64 {
    ((32 << 20) / (2 * size.max(1))).clamp(1, 64) as u64
}

fn to_ripple<R: Record>(raw: &[Raw]) -> Vec<RippleUpdate<R>> {
    raw.iter()
        .map(|&(key, val, time, diff)| {
            let (k, v) = R::make(key, val);
            (k, v, time, diff)
        })
        .collect()
}

fn payload<R: Record>(rows: &[RippleUpdate<R>]) -> usize {
    rows.iter().map(|(k, _, _, _)| R::payload_bytes(k)).sum()
}

/// Updates per side for a payload size, measured on a sample of this record type.
fn count_for<R: Record>(size: usize) -> usize {
    let sample = to_ripple::<R>(
        &(0..1000)
            .map(|i| (i * 7919, i % 4, 0, 1))
            .collect::<Vec<_>>(),
    );
    let per_update = payload::<R>(&sample) / sample.len();
    (size / per_update).max(1)
}

fn run_cell<R: Record>(
    args: &Args,
    mode: &str,
    regime: Regime,
    size: usize,
) -> Result<Vec<String>, String> {
    let count = count_for::<R>(size);
    let label = format!("{} {mode} {} {}", R::NAME, regime.name(), bytes(size));
    let seeds = (0..variants_for(size)).map(|variant| 0x5eed + variant);
    let (ours, theirs) = match mode {
        "cycle" => {
            // Both sides' worth of updates, pushed in rounds.
            let mut payloads = Vec::new();
            let mut ripple_inputs = Vec::new();
            let mut dd_inputs = Vec::new();
            for seed in seeds {
                let raw = cycle_rounds(regime, 2 * count, args.rounds, seed);
                let rows: Vec<Vec<RippleUpdate<R>>> =
                    raw.iter().map(|round| to_ripple::<R>(round)).collect();
                payloads.push(rows.iter().map(|round| payload::<R>(round)).sum());
                ripple_inputs.push(
                    rows.iter()
                        .map(|round| Updates::from_rows(round.iter()))
                        .collect::<Vec<Updates<RippleUpdate<R>>>>(),
                );
                dd_inputs.push(
                    rows.iter()
                        .map(|round| {
                            round
                                .iter()
                                .map(|(k, v, t, r)| ((k.clone(), v.clone()), *t, *r))
                                .collect()
                        })
                        .collect::<Vec<Vec<DdUpdate<R>>>>(),
                );
            }
            compare(
                &label,
                args.seconds,
                &payloads,
                |variant| ripple_cycle::<R>(&ripple_inputs[variant]),
                |variant| dd_cycle::<R>(&dd_inputs[variant]),
            )?
        }
        "merge" => {
            let mut payloads = Vec::new();
            let mut sides = Vec::new();
            for seed in seeds {
                let (raw_a, raw_b) = merge_sides(regime, count, seed);
                let mut a = to_ripple::<R>(&raw_a);
                let mut b = to_ripple::<R>(&raw_b);
                consolidate_rows::<RippleUpdate<R>>(&mut a);
                consolidate_rows::<RippleUpdate<R>>(&mut b);
                payloads.push(payload::<R>(&a) + payload::<R>(&b));
                sides.push((a, b));
            }
            compare(
                &label,
                args.seconds,
                &payloads,
                |variant| ripple_merge::<R>(&sides[variant].0, &sides[variant].1),
                |variant| dd_merge::<R>(&sides[variant].0, &sides[variant].1),
            )?
        }
        other => return Err(format!("unknown mode '{other}' (expected cycle or merge)")),
    };
    let (ours_rate, theirs_rate) = (ours.rate, theirs.rate);
    let row = vec![
        R::NAME.to_string(),
        mode.to_string(),
        regime.name().to_string(),
        bytes(size),
        format!("{ours_rate:.0}"),
        format!("{theirs_rate:.0}"),
        format!("{:.2}x", ours_rate / theirs_rate),
        bytes(ours.peak),
        bytes(theirs.peak),
        format!("{:.2}x", ours.peak as f64 / theirs.peak.max(1) as f64),
        ours.allocations.to_string(),
        theirs.allocations.to_string(),
    ];
    eprintln!("{}", row.join("  "));
    Ok(row)
}

fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (number, unit) = if let Some(n) = text.strip_suffix("KiB") {
        (n, 1 << 10)
    } else if let Some(n) = text.strip_suffix("MiB") {
        (n, 1 << 20)
    } else {
        (text, 1)
    };
    number
        .trim()
        .parse::<usize>()
        .map(|n| n * unit)
        .map_err(|_| {
            format!("bad size '{text}' (expected a number with an optional KiB or MiB suffix)")
        })
}

/// Puts the allocator in the state a long-running process reaches, whatever cells run.
///
/// glibc serves blocks above its mmap threshold (128 KiB at start) with fresh mappings, and
/// raises the threshold to the size of a freed mapped block (blocks up to 32 MiB count; 16 MiB is
/// safely below that cap).
/// Without this, a cell's figures depend on which cells ran before it: a merge of 2 MiB chunks
/// measured alone paid a page fault per page and ran far slower than after a cycle cell had
/// freed larger blocks (see docs/perf-notes.md, section "Bench: fresh inputs and a primed
/// allocator"). Both engines see the same primed allocator.
fn prime_allocator() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(16 << 20)));
}

fn main() {
    let args = Args::parse();
    prime_allocator();
    if let Err(message) = run(&args) {
        eprintln!("batcher-bench: {message}");
        std::process::exit(2);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let sizes: Vec<usize> = if args.full {
        vec![32 << 10, 512 << 10, 8 << 20, 128 << 20]
    } else {
        args.sizes
            .iter()
            .map(|s| parse_size(s))
            .collect::<Result<_, _>>()?
    };
    let regimes: Vec<Regime> = args
        .regimes
        .iter()
        .map(|r| Regime::parse(r))
        .collect::<Result<_, _>>()?;
    let header = [
        "record",
        "bench",
        "regime",
        "per side",
        "ripple MiB/s",
        "differential MiB/s",
        "speed ratio",
        "ripple peak",
        "differential peak",
        "memory ratio",
        "ripple allocs",
        "differential allocs",
    ];
    eprintln!("{}", header.join("  "));
    let mut rows = Vec::new();
    for record in &args.records {
        for mode in &args.modes {
            for &regime in &regimes {
                for &size in &sizes {
                    rows.push(match record.as_str() {
                        "int" => run_cell::<IntRecord>(args, mode, regime, size)?,
                        "string" => run_cell::<StringRecord>(args, mode, regime, size)?,
                        other => {
                            return Err(format!(
                                "unknown record type '{other}' (expected int or string)"
                            ))
                        }
                    });
                }
            }
        }
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = format!(
        "# Merge batcher: ripple vs differential-dataflow 0.26\n\n\
         Produced by `{command}` on a machine with {} cores.\n\
         Medians of alternating runs, each on the next of up to 64 input sets (different seeds, so the\n\
         branch predictor cannot learn one input's decisions); each engine's input (rounds for *cycle*,\n\
         chains for *merge*) is built or copied just before its timed run, so both start equally warm\n\
         in cache. Throughput is payload bytes (both sides) per second. Peak heap\n\
         counts capacity, not just use: for *cycle* it is the batcher's own allocations (the caller's\n\
         input buffers excluded; differential takes the string keys' heap bytes over from them\n\
         instead of copying, so those count for it too), for *merge* the two input chains plus what\n\
         the merge allocates.\n\
         Allocs are the median run's allocation and reallocation calls.\n\
         Ratios are ripple / differential: above 1 is faster for speed, below 1 is leaner for memory.\n\n{}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        markdown_table(&header, &rows)
    );
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(&args.out, report)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}
