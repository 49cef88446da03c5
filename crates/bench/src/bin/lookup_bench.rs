//! Lookups into a stored batch: batched (RocksDB's MultiGet) against one seek per key.
//!
//! A batch of `--keys` keys (`0, 2, 4, ...`, one update each) is written to a batch file in
//! blocks of `StorageSettings::BLOCK_UPDATES_DEFAULT` updates, with and without a key filter.
//! Probes come in runs of `--runs-of` keys (each run sorted), either *local* (a run covers
//! consecutive keys of one stretch) or *random* (spread over the whole key range); a probe is a
//! present key with the probability of the hit rate, else an absent (odd) key inside the range.
//! Each run is looked up through a fresh handle of the batch (as an operator's activation
//! does), either as one batched lookup or as one seek per probe, with the block cache *warm*
//! (every block cached) or *cold* (a cache of 0 bytes: every block a lookup needs is read from
//! the file). Reported: nanoseconds per probe (median of `--repeats`), batched over per-key,
//! block reads per distinct block the run's found keys lie in, and the filter's pass rate.
//! Writes `lookups.md` into `--out`.

use clap::Parser;
use ripple_bench::cycles::reference_cycles;
use ripple_bench::report::markdown_table;
use ripple_storage::{SpillDir, Storage, StorageSettings};
use ripple_trace::{Batch, Builder, Description, LookupScratch, TraceSnapshot};
use ripple_updates::Antichain;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

type U = (u64, u64, u64, i64);

/// Batched lookups into a stored batch against one seek per key.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Keys in the stored batch.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Probes per measurement.
    #[arg(long, default_value_t = 65_536)]
    probes: usize,
    /// Probe run lengths.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 32, 1024])]
    runs_of: Vec<usize>,
    /// Measurements per cell; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Folder for lookups.md.
    #[arg(long, default_value = "target/lookup-bench")]
    out: PathBuf,
}

/// A SplitMix64 step: the probes' randomness, the same in every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The probes, in runs of `run` sorted keys.
fn probes(args: &Args, run: usize, local: bool, hit_percent: u64) -> Vec<Vec<u64>> {
    let mut state = run as u64 * 1000 + hit_percent + u64::from(local);
    let mut runs = Vec::new();
    for _ in 0..args.probes.div_ceil(run) {
        let start = next(&mut state) % args.keys.saturating_sub(run as u64).max(1);
        let mut keys: Vec<u64> = (0..run as u64)
            .map(|i| {
                let index = if local {
                    start + i
                } else {
                    next(&mut state) % args.keys
                };
                let present = next(&mut state) % 100 < hit_percent;
                // Present keys are even; an absent one is the odd key after it (inside the
                // range but for the last).
                2 * index.min(args.keys - 2) + u64::from(!present)
            })
            .collect();
        keys.sort_unstable();
        runs.push(keys);
    }
    runs
}

fn storage(cache_bytes: usize, filters: bool) -> Arc<Storage> {
    let settings = StorageSettings {
        memory_budget: cache_bytes,
        cache_bytes,
        filters,
        ..StorageSettings::with_budget(0)
    };
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    Arc::new(Storage::in_spill_dir(spill, settings))
}

fn stored(storage: &Arc<Storage>, keys: u64) -> Batch<U> {
    let mut builder = Builder::new();
    for key in 0..keys {
        builder.push(&(2 * key), &key, &0, &1);
    }
    let batch = builder.done(Description::new(
        Antichain::from_elem(0),
        Antichain::from_elem(1),
    ));
    batch.write_to(storage).expect("the batch file is written")
}

/// What one pass over the probe runs did.
struct Pass {
    nanos_per_probe: f64,
    /// Time-stamp counter ticks per probe, where there is a counter.
    cycles_per_probe: Option<f64>,
    found: usize,
}

/// Looks every run up through a fresh handle: batched, or one seek per probe.
fn pass(batch: &Batch<U>, runs: &[Vec<u64>], batched: bool, scratch: &mut LookupScratch) -> Pass {
    let mut found = 0;
    let started = Instant::now();
    let cycles_before = reference_cycles();
    for run in runs {
        let snapshot = TraceSnapshot::new(vec![batch.clone()]);
        if batched {
            let mut cursor = snapshot.lookup_cursor();
            cursor.lookup(&run[..], scratch, |_, vals| {
                while let Some(val) = vals.get_val() {
                    found += usize::from(*val < u64::MAX);
                    vals.step_val();
                }
            });
        } else {
            for key in run {
                let mut cursor = snapshot.lookup_cursor();
                cursor.seek_key(key);
                if cursor.get_key() == Some(key) {
                    while let Some(val) = cursor.get_val() {
                        found += usize::from(*val < u64::MAX);
                        cursor.step_val();
                    }
                }
            }
        }
    }
    let cycles = cycles_before.zip(reference_cycles());
    let probes: usize = runs.iter().map(Vec::len).sum();
    Pass {
        nanos_per_probe: started.elapsed().as_nanos() as f64 / probes as f64,
        // A thread moved to another core may read a counter a little behind: none, not a
        // wrapped difference of some 10^19 cycles.
        cycles_per_probe: cycles.map(|(from, to)| to.saturating_sub(from) as f64 / probes as f64),
        found,
    }
}

/// The median of `samples`, if any.
fn median(samples: &mut [f64]) -> Option<f64> {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied()
}

/// The distinct blocks the probes of each run lie in (present or not), summed over the runs.
fn blocks_touched(runs: &[Vec<u64>], keys_per_block: u64) -> u64 {
    runs.iter()
        .map(|run| {
            run.iter()
                .map(|key| key / 2 / keys_per_block)
                .collect::<BTreeSet<_>>()
                .len() as u64
        })
        .sum()
}

fn main() {
    let args = Args::parse();
    let mut rows = Vec::new();
    let mut bits = Vec::new();
    for filters in [true, false] {
        for (cache, cache_bytes) in [("warm", 1usize << 30), ("cold", 0)] {
            let storage = storage(cache_bytes, filters);
            let batch = stored(&storage, args.keys);
            let keys_per_block = args.keys / batch.block_count() as u64;
            if let Some(per_key) = batch.filter_bits_per_key() {
                bits.push(per_key);
            }
            let mut scratch = LookupScratch::default();
            // Warm the cache with every block (a block is cached on its second miss).
            let every_block = probes(&args, 1024, true, 100);
            for _ in 0..2 {
                pass(&batch, &every_block, true, &mut scratch);
            }
            for &run in &args.runs_of {
                for local in [true, false] {
                    for hit in [100u64, 10, 0] {
                        let runs = probes(&args, run, local, hit);
                        let mut timing = |batched: bool| {
                            let mut samples: Vec<f64> = Vec::new();
                            let mut cycles: Vec<f64> = Vec::new();
                            let mut found = 0;
                            let (mut reads, mut tested, mut passed) = (0, 0, 0);
                            for _ in 0..args.repeats.max(1) {
                                let before = storage.stats();
                                let measured = pass(&batch, &runs, batched, &mut scratch);
                                let after = storage.stats();
                                reads = after.cache.misses - before.cache.misses;
                                tested = after.probes_filtered - before.probes_filtered;
                                passed = after.probes_passed - before.probes_passed;
                                samples.push(measured.nanos_per_probe);
                                cycles.extend(measured.cycles_per_probe);
                                found = measured.found;
                            }
                            let time = median(&mut samples).expect("a sample");
                            let counted = (median(&mut cycles), found);
                            (time, counted, reads, tested, passed)
                        };
                        let (per_key, (per_key_cycles, found_a), _, _, _) = timing(false);
                        let (batched, (batched_cycles, found_b), reads, tested, passed) =
                            timing(true);
                        let cycles = |cycles: Option<f64>| {
                            cycles.map_or(String::new(), |cycles| format!("{cycles:.0}"))
                        };
                        assert_eq!(found_a, found_b, "both ways find the same keys");
                        let touched = blocks_touched(&runs, keys_per_block);
                        rows.push(vec![
                            if filters { "on" } else { "off" }.to_string(),
                            cache.to_string(),
                            run.to_string(),
                            if local { "local" } else { "random" }.to_string(),
                            format!("{hit}%"),
                            format!("{per_key:.0}"),
                            format!("{batched:.0}"),
                            format!("{:.2}x", batched / per_key),
                            cycles(per_key_cycles),
                            cycles(batched_cycles),
                            if cache == "cold" && touched > 0 {
                                format!("{:.2}", reads as f64 / touched as f64)
                            } else {
                                String::new()
                            },
                            if tested > 0 {
                                format!("{:.2}%", 100.0 * passed as f64 / tested as f64)
                            } else {
                                String::new()
                            },
                        ]);
                        eprintln!("{:?}", rows.last().expect("a row"));
                    }
                }
            }
        }
    }
    let mut text = String::from("# Lookups into a stored batch\n\n");
    text.push_str(&format!(
        "Reproduce: `cargo run --release -p ripple-bench --bin lookup-bench -- --keys {} --probes {} --runs-of {} --repeats {}`.\n\n",
        args.keys,
        args.probes,
        args.runs_of.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        args.repeats
    ));
    text.push_str(&format!(
        "One stored batch of {} keys in blocks of about {} updates. Per probe, the median of {} \
         passes: one seek per key, then batched lookups of the run; `batched / per key` below 1x \
         favours batching; `cycles`: the processor's time-stamp counter per probe, the median \
         of the same passes (reference cycles, at a constant rate rather than the core's \
         clock). `reads per block` (cold cache only): block reads over the distinct \
         blocks the runs' probes lie in. `filter pass`: of the probes tested against the key \
         filter, those it let through (with 0% hits, its false-positive rate; target 1/256 = \
         0.39%; a filter that passes nearly every probe is tested by one lookup in 16). Filter \
         size: {} bits per key.\n\n",
        args.keys,
        StorageSettings::BLOCK_UPDATES_DEFAULT,
        args.repeats,
        bits.first().map_or("-".into(), |b| format!("{b:.2}")),
    ));
    text.push_str(&markdown_table(
        &[
            "filter",
            "cache",
            "run",
            "keys",
            "hits",
            "per key ns",
            "batched ns",
            "batched / per key",
            "per key cycles",
            "batched cycles",
            "reads per block",
            "filter pass",
        ],
        &rows,
    ));
    std::fs::create_dir_all(&args.out).expect("the output folder");
    std::fs::write(args.out.join("lookups.md"), &text).expect("lookups.md written");
    print!("{text}");
}
