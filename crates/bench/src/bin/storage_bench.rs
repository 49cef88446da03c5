//! The storage experiment: bfs with arrangements spilled to disk, beside the same run in
//! memory and beside differential-dataflow 0.26.
//!
//! For each graph and batch size, in one process and alternating (the order rotates from one
//! repetition to the next), these engines run bfs from root 0 over the same generated change
//! stream (`ripple bfs --nodes N --edges M --updates U --batch B`):
//! - `memory`: ripple, everything in memory;
//! - `budget`: ripple with `--memory-budget` (`--budget`, a quarter of it for the block cache
//!   and a quarter left to working memory);
//! - `forced`: ripple writing out every merged batch, whatever its size, with no block cache
//!   (the worst case: every read of a stored batch goes to the file);
//! - `dd`: differential-dataflow, in memory.
//!
//! With `--sweep BUDGETS`, the `budget` engine also runs at each of those budgets (as engines
//! named `budget@BYTES`, alternating with the others; repeats and `--budget` itself are run
//! once), and a table gives each budget's speed and peak heap against the in-memory run:
//! what a budget costs, budget by budget.
//!
//! Reported per engine: updates/s, total time, peak heap (a counting allocator, reset before
//! each run: cached and pinned blocks are heap too), and for ripple with storage the bytes
//! written and read and the block cache's hits and misses. Outputs must match (checksums).
//! Writes `storage.md` into `--out`.

use clap::Parser;
use ripple_bench::alloc::{self, CountingAlloc};
use ripple_bench::args::parse_graph;
use ripple_bench::dd::run_dd;
use ripple_bench::report::{bytes, finish, markdown_table, median_by};
use ripple_cli::computation::Computation;
use ripple_cli::generator::GraphSpec;
use ripple_cli::options::{Cluster, RunOptions};
use ripple_cli::run::{run, Input};
use ripple_cli::source::Source;
use ripple_cli::stats::{human_duration, RunReport};
use ripple_dataflow::RippleConfig;
use ripple_storage::{SpillDir, Storage, StorageSettings, StorageStats};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// bfs spilled to disk, in memory, and on differential-dataflow, with ratios.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Graphs as NODES/EDGES.
    #[arg(long, value_delimiter = ',', default_values_t = ["1000000/10000000".to_string()])]
    graphs: Vec<String>,
    /// Updates after the initial graph, each at its own time.
    #[arg(long, default_value_t = 1_000_000)]
    updates: u64,
    /// Distinct times per step.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000u64, 100_000])]
    batches: Vec<u64>,
    /// The `budget` engine's memory budget, e.g. 64MiB.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    budget: u64,
    /// Engines to run, of memory, budget, forced, dd.
    #[arg(long, value_delimiter = ',', default_values_t = ["memory".to_string(), "budget".to_string(), "forced".to_string(), "dd".to_string()])]
    engines: Vec<String>,
    /// More budgets to run the `budget` engine at, e.g. 128MiB,256MiB (see the module
    /// documentation).
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sweep: Vec<u64>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Runs per cell and engine; the run with the median throughput is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// A smoke run for CI: graph 10000/20000, 2000 updates, batches 10 and 1000.
    #[arg(long)]
    quick: bool,
    /// Folder for storage.md.
    #[arg(long, default_value = "target/storage-bench")]
    out: PathBuf,
}

fn parse_size(text: &str) -> Result<u64, String> {
    parse_size::parse_size(text).map_err(|error| error.to_string())
}

/// One engine's median run in one cell.
struct Run {
    report: RunReport,
    heap: usize,
    storage: Option<StorageStats>,
}

/// The storage tier of an engine, if it has one (`budget@BYTES`: the budget engine at that
/// budget).
fn storage_for(engine: &str, budget: u64) -> Option<Arc<Storage>> {
    let swept = engine
        .strip_prefix("budget@")
        .map(|bytes| bytes.parse::<usize>().expect("a budget in bytes"));
    let settings = match (engine, swept) {
        (_, Some(bytes)) => StorageSettings::with_budget(bytes),
        ("budget", None) => StorageSettings::with_budget(budget as usize),
        ("forced", None) => StorageSettings {
            spill_min_bytes: 0,
            cache_bytes: 0,
            ..StorageSettings::with_budget(0)
        },
        _ => return None,
    };
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    Some(Arc::new(Storage::in_spill_dir(spill, settings)))
}

/// Runs `engine` once on `source`.
fn run_engine(engine: &str, source: &Arc<Source>, args: &Args, batch: u64) -> Run {
    let storage = storage_for(engine, args.budget);
    let options = RunOptions {
        computation: Computation::Bfs,
        roots: vec![0],
        batch,
        cluster: Cluster::local(args.workers),
        progress: false,
        stats_every: None,
        config: RippleConfig {
            storage: storage.clone(),
            ..RippleConfig::default()
        },
    };
    let (report, heap) = alloc::peak_during(|| {
        if engine == "dd" {
            run_dd(Arc::clone(source), &options)
        } else {
            run(
                Some(Input::whole(Source::clone(source), options.batch)),
                &options,
                None,
            )
            .expect("ripple runs")
            .expect("one process hosts worker 0")
        }
    });
    Run {
        report,
        heap,
        storage: storage.map(|storage| storage.stats()),
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.graphs = vec!["10000/20000".into()];
        args.updates = 2_000;
        args.batches = vec![10, 1_000];
    }
    if let Some(bad) = args
        .engines
        .iter()
        .find(|e| !["memory", "budget", "forced", "dd"].contains(&e.as_str()))
    {
        eprintln!("storage-bench: unknown engine {bad}");
        return ExitCode::from(2);
    }
    if !args.sweep.is_empty() && !args.engines.iter().any(|engine| engine == "memory") {
        eprintln!("storage-bench: --sweep compares with the memory engine: add it to --engines");
        return ExitCode::from(2);
    }
    args.sweep.sort_unstable();
    args.sweep.dedup();
    let budget = args.budget;
    args.sweep.retain(|&swept| swept != budget);
    let swept = args.sweep.iter().map(|budget| format!("budget@{budget}"));
    let engines: Vec<String> = args.engines.iter().cloned().chain(swept).collect();
    let mut cells = Vec::new();
    let mut mismatch = false;
    for graph in &args.graphs {
        let (nodes, edges) = match parse_graph(graph) {
            Ok(graph) => graph,
            Err(error) => {
                eprintln!("storage-bench: {error}");
                return ExitCode::from(2);
            }
        };
        let spec = GraphSpec {
            nodes,
            edges,
            updates: args.updates,
            seed: 0,
        };
        if let Err(error) = spec.validate() {
            eprintln!("storage-bench: {error}");
            return ExitCode::from(2);
        }
        let source = Arc::new(Source::Generated(spec));
        for &batch in &args.batches {
            let mut runs: Vec<Vec<Run>> = engines.iter().map(|_| Vec::new()).collect();
            for repetition in 0..args.runs as usize {
                for turn in 0..engines.len() {
                    let index = (turn + repetition) % engines.len();
                    let engine = &engines[index];
                    let run = run_engine(engine, &source, &args, batch);
                    eprintln!(
                        "{graph} b{batch} {engine}: {:.0} updates/s, heap {}",
                        run.report.updates_per_second(),
                        bytes(run.heap)
                    );
                    runs[index].push(run);
                }
            }
            let runs: Vec<Run> = runs
                .into_iter()
                .map(|runs| median_by(runs, |run: &Run| run.report.updates_per_second()))
                .collect();
            let checksum = runs[0].report.checksum;
            mismatch |= runs.iter().any(|run| run.report.checksum != checksum);
            cells.push((graph.clone(), batch, runs));
        }
    }
    let text = report(&args, &engines, &cells);
    let mismatch = mismatch.then_some("between engines");
    finish("storage-bench", &args.out, "storage.md", &text, mismatch)
}

/// The report: a ratio table against the in-memory run and differential, then every run.
fn report(args: &Args, engines: &[String], cells: &[(String, u64, Vec<Run>)]) -> String {
    let mut text = String::from("# bfs with arrangements on disk\n\n");
    text.push_str(&format!(
        "Reproduce: `cargo run --release -p ripple-bench --bin storage-bench -- --graphs {} --updates {} --batches {} --budget {} --engines {}{} --workers {} --runs {}`.\n\n",
        args.graphs.join(","),
        args.updates,
        args.batches.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        args.budget,
        args.engines.join(","),
        if args.sweep.is_empty() {
            String::new()
        } else {
            let budgets: Vec<String> = args.sweep.iter().map(u64::to_string).collect();
            format!(" --sweep {}", budgets.join(","))
        },
        args.workers,
        args.runs,
    ));
    text.push_str(
        "`memory`: ripple in memory; `budget`: ripple with that memory budget (a quarter for \
         the block cache, a quarter left to working memory); `forced`: every merged batch \
         written out, no block cache; `dd`: differential-dataflow; `budget@BYTES`: the budget \
         engine at that budget. Ratios are of updates/s (higher is better for the first \
         engine) and of peak heap (lower is better).\n\n\
         ## Ratios\n\n",
    );
    let find = |runs: &'_ [Run], name: &str| -> Option<usize> {
        engines
            .iter()
            .position(|e| e == name)
            .filter(|&i| i < runs.len())
    };
    let ratio = |a: f64, b: f64| format!("{:.2}x", a / b.max(1e-9));
    let mut rows = Vec::new();
    for (graph, batch, runs) in cells {
        let speed = |name: &str| find(runs, name).map(|i| runs[i].report.updates_per_second());
        let heap = |name: &str| find(runs, name).map(|i| runs[i].heap as f64);
        let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => ratio(a, b),
            _ => String::new(),
        };
        rows.push(vec![
            graph.clone(),
            batch.to_string(),
            pair(speed("budget"), speed("memory")),
            pair(speed("budget"), speed("dd")),
            pair(heap("budget"), heap("memory")),
            pair(speed("forced"), speed("memory")),
        ]);
    }
    text.push_str(&markdown_table(
        &[
            "graph",
            "batch",
            "budget / memory (speed)",
            "budget / dd (speed)",
            "budget / memory (peak heap)",
            "forced / memory (speed)",
        ],
        &rows,
    ));
    if !args.sweep.is_empty() {
        text.push_str("\n## Budgets\n\nThe budget engine at each budget, against memory.\n\n");
        let mut rows = Vec::new();
        for (graph, batch, runs) in cells {
            let memory = find(runs, "memory").map(|i| &runs[i]);
            for budget in std::iter::once(args.budget).chain(args.sweep.iter().copied()) {
                let name = if budget == args.budget {
                    "budget".to_string()
                } else {
                    format!("budget@{budget}")
                };
                let (Some(run), Some(memory)) = (find(runs, &name).map(|i| &runs[i]), memory)
                else {
                    continue;
                };
                let speed = run.report.updates_per_second();
                let memory_speed = memory.report.updates_per_second();
                rows.push(vec![
                    graph.clone(),
                    batch.to_string(),
                    bytes(budget as usize),
                    ratio(speed, memory_speed),
                    ratio(run.heap as f64, memory.heap as f64),
                    bytes(run.heap),
                ]);
            }
        }
        text.push_str(&markdown_table(
            &[
                "graph",
                "batch",
                "budget",
                "speed / memory",
                "peak heap / memory",
                "peak heap",
            ],
            &rows,
        ));
    }
    text.push_str("\n## Runs\n\n");
    let mut rows = Vec::new();
    for (graph, batch, runs) in cells {
        for (engine, run) in engines.iter().zip(runs) {
            let storage = run.storage.as_ref();
            let io = storage.map_or(String::new(), |s| {
                format!(
                    "{} / {}",
                    bytes(s.bytes_written as usize),
                    bytes(s.bytes_read as usize)
                )
            });
            let cache = storage.map_or(String::new(), |s| {
                format!("{} / {}", s.cache.hits, s.cache.misses)
            });
            rows.push(vec![
                graph.clone(),
                batch.to_string(),
                engine.clone(),
                format!("{:.0}", run.report.updates_per_second()),
                human_duration(run.report.total),
                bytes(run.heap),
                io,
                cache,
                format!("`{:016x}`", run.report.checksum.0),
            ]);
        }
    }
    text.push_str(&markdown_table(
        &[
            "graph",
            "batch",
            "engine",
            "updates/s",
            "total",
            "peak heap",
            "written / read",
            "cache hits / misses",
            "checksum",
        ],
        &rows,
    ));
    text
}
