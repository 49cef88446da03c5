//! The graph experiments: ripple and differential-dataflow 0.26 side by side.
//!
//! For each computation (bfs by default; `--computations` adds reach, degrees and cc), graph,
//! worker count and batch size, both engines run the computation (bfs and reach from root 0) over
//! the same generated change stream (`ripple bfs --nodes N --edges M --updates U --batch B`): the
//! graph is loaded at time 0, then each update (one inserted and one removed edge) happens at its
//! own time, and `B` times are fed per step. Runs alternate between the engines, and for each graph
//! and batch size a repetition runs every worker count in turn; with `--runs N` each cell runs N
//! times per engine and reports the run with the median throughput (these machines are noisy).
//! Reported per run: load time, total time, updates/s, per-step latency p50/p99/max, peak heap (a
//! counting allocator, reset before each run) and the output checksum, which must match across
//! engines and runs.
//!
//! Writes one report per computation (`bfs.md`, `cc.md`, ...: tables) and one latency CDF plot
//! per computation and graph (`bfs-latency-*.svg`, ...) into `--out`.

use clap::Parser;
use ripple_bench::alloc::{peak_during, CountingAlloc};
use ripple_bench::args::parse_graph;
use ripple_bench::dd::run_dd;
use ripple_bench::report::{bytes, markdown_table, median_by};
use ripple_bench::svg::{cdf_plot, Curve, PALETTE, POINTS};
use ripple_cli::computation::Computation;
use ripple_cli::generator::GraphSpec;
use ripple_cli::options::{Cluster, RunOptions};
use ripple_cli::run::{run, Input};
use ripple_cli::source::Source;
use ripple_cli::stats::{human_duration, RunReport};
use ripple_dataflow::RippleConfig;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Graph computations on ripple and on differential-dataflow, with ratios.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Computations to run, each with a report of its own.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Computation::Bfs])]
    computations: Vec<Computation>,
    /// Graphs as NODES/EDGES.
    #[arg(long, value_delimiter = ',', default_values_t = ["1000/2000".to_string(), "1000000/10000000".to_string()])]
    graphs: Vec<String>,
    /// Updates after the initial graph, each at its own time.
    #[arg(long, default_value_t = 1_000_000)]
    updates: u64,
    /// Distinct times per step.
    #[arg(long, value_delimiter = ',', default_values_t = [1u64, 10, 100, 1_000, 10_000, 100_000, 1_000_000])]
    batches: Vec<u64>,
    /// Worker counts (threads of one process).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    workers: Vec<usize>,
    /// Generator seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Runs per cell and engine; the run with the median throughput is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// A smoke run for CI: graphs 1000/2000 and 10000/20000, 2000 updates, batches 1, 10,
    /// 100, 1000 (overrides --graphs, --updates and --batches).
    #[arg(long)]
    quick: bool,
    /// Folder for the reports (bfs.md, ...) and the latency plots (a table to commit goes to a
    /// folder of its own under results/, indexed in results/README.md).
    #[arg(long, default_value = "target/bfs-bench")]
    out: PathBuf,
}

struct Measured {
    graph: String,
    workers: usize,
    batch: u64,
    ripple: RunReport,
    ripple_heap: usize,
    dd: RunReport,
    dd_heap: usize,
    /// Every run of both engines gave the same output (checksum and rows).
    outputs_match: bool,
}

fn short(count: u64) -> String {
    match count {
        c if c >= 1_000_000 && c % 1_000_000 == 0 => format!("{}m", c / 1_000_000),
        c if c >= 1_000 && c % 1_000 == 0 => format!("{}k", c / 1_000),
        c => c.to_string(),
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.graphs = vec!["1000/2000".into(), "10000/20000".into()];
        args.updates = 2_000;
        args.batches = vec![1, 10, 100, 1_000];
    }
    let graphs: Vec<(u32, u64)> = match args.graphs.iter().map(|g| parse_graph(g)).collect() {
        Ok(graphs) => graphs,
        Err(error) => {
            eprintln!("bfs-bench: {error}");
            return ExitCode::from(2);
        }
    };
    let mut specs = Vec::new();
    for &(nodes, edges) in &graphs {
        let spec = GraphSpec {
            nodes,
            edges,
            updates: args.updates,
            seed: args.seed,
        };
        if let Err(error) = spec.validate() {
            eprintln!("bfs-bench: {error}");
            return ExitCode::from(2);
        }
        specs.push(spec);
    }
    let mut progress = Progress {
        began: Instant::now(),
        done: 0,
        total: args.computations.len() * specs.len() * args.workers.len() * args.batches.len(),
    };
    let mut all_mismatches = Vec::new();
    for &computation in &args.computations {
        let (results, mismatches) = measure_computation(&args, computation, &specs, &mut progress);
        if let Err(error) = write_report(&args, computation, &results, &mismatches) {
            eprintln!("bfs-bench: {error}");
            return ExitCode::from(1);
        }
        all_mismatches.extend(mismatches);
    }
    if all_mismatches.is_empty() {
        ExitCode::SUCCESS
    } else {
        for mismatch in &all_mismatches {
            eprintln!("bfs-bench: OUTPUT MISMATCH {mismatch}");
        }
        ExitCode::from(1)
    }
}

/// The cells measured so far, for the progress lines on stderr.
struct Progress {
    began: Instant,
    done: usize,
    total: usize,
}

impl Progress {
    fn measured(&mut self, computation: Computation, graph: &str, m: &Measured) {
        self.done += 1;
        let (ripple, dd) = (m.ripple.updates_per_second(), m.dd.updates_per_second());
        eprintln!(
            "[{:>3}/{} {:>7.1}s] {} {graph} w{} b{}: ripple {ripple:.0}/s, dd {dd:.0}/s ({:.2}x), heap {} vs {}",
            self.done,
            self.total,
            self.began.elapsed().as_secs_f64(),
            computation.name(),
            m.workers,
            m.batch,
            ripple / dd.max(1e-9),
            bytes(m.ripple_heap),
            bytes(m.dd_heap),
        );
    }
}

/// Measures `computation` on every graph of `specs` at every batch size and worker count:
/// the cells in table order (by graph, then worker count, then batch size), and a line for
/// each cell whose outputs differed.
fn measure_computation(
    args: &Args,
    computation: Computation,
    specs: &[GraphSpec],
    progress: &mut Progress,
) -> (Vec<Measured>, Vec<String>) {
    let mut results: Vec<Measured> = Vec::new();
    let mut mismatches = Vec::new();
    for spec in specs {
        let source = Arc::new(Source::Generated(*spec));
        let graph = format!("{}/{}", short(u64::from(spec.nodes)), short(spec.edges));
        let graph_start = results.len();
        for &batch in &args.batches {
            let cell = Cell {
                computation,
                source: &source,
                graph: &graph,
                batch,
            };
            for measured in cell.measure(args) {
                progress.measured(computation, &graph, &measured);
                if !measured.outputs_match {
                    let (ripple, dd) = (&measured.ripple, &measured.dd);
                    mismatches.push(format!(
                        "{} {graph} w{} b{batch}: ripple {:016x} ({} rows) vs dd {:016x} ({} rows)",
                        computation.name(),
                        measured.workers,
                        ripple.checksum.0,
                        ripple.rows,
                        dd.checksum.0,
                        dd.rows
                    ));
                }
                results.push(measured);
            }
        }
        results[graph_start..].sort_by_key(|m| {
            let workers = args.workers.iter().position(|&w| w == m.workers);
            let batch = args.batches.iter().position(|&b| b == m.batch);
            (workers, batch)
        });
    }
    (results, mismatches)
}

fn engine_row(m: &Measured, engine: &str, report: &RunReport, heap: usize) -> Vec<String> {
    vec![
        m.graph.clone(),
        m.workers.to_string(),
        m.batch.to_string(),
        engine.to_string(),
        human_duration(report.load),
        human_duration(report.total),
        format!("{:.0}", report.updates_per_second()),
        human_duration(report.latencies.quantile(0.5)),
        human_duration(report.latencies.quantile(0.99)),
        human_duration(report.latencies.max()),
        bytes(heap),
        format!("`{:016x}`", report.checksum.0),
    ]
}

/// What a computation's report says it measures.
fn what(computation: Computation) -> &'static str {
    match computation {
        Computation::Bfs => "bfs from root 0 (the number of nodes at each depth)",
        Computation::Reach => "reach from root 0 (the nodes reachable)",
        Computation::Degrees => "degrees (the out-degree distribution)",
        Computation::Cc => "cc (connected components, labelled by their least node)",
    }
}

fn write_report(
    args: &Args,
    computation: Computation,
    results: &[Measured],
    mismatches: &[String],
) -> Result<(), String> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let name = computation.name();
    let mut text = String::new();
    text.push_str(&format!(
        "# {name}: ripple beside differential-dataflow 0.26\n\n"
    ));
    let computations = if args.computations == [Computation::Bfs] {
        String::new()
    } else {
        let names: Vec<_> = args.computations.iter().map(|c| c.name()).collect();
        format!("--computations {} ", names.join(","))
    };
    text.push_str(&format!(
        "Reproduce: `cargo run --release -p ripple-bench --bin bfs-bench -- {computations}--graphs {} --updates {} --batches {} --workers {} --seed {} --runs {}`.\n\n",
        args.graphs.join(","),
        args.updates,
        args.batches.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        args.workers.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        args.seed,
        args.runs,
    ));
    text.push_str(&format!(
        "{} over the generated graph (`ripple bfs --help` documents the generator); \
         each update inserts one random edge and removes the oldest, at its own time; `batch` \
         times are fed per step. `updates/s` counts updates (times) after the initial load; \
         latencies are per step (p50 and p99 within 1%, max exact); `peak heap` is the most heap the run held at once (a counting \
         allocator). Each cell reports, per engine, the run with the median throughput of {} \
         (engines alternating, worker counts taking turns within each repetition); ratios are \
         ripple / differential.\n\n",
        what(computation),
        args.runs
    ));
    if !mismatches.is_empty() {
        text.push_str("**Output mismatches:**\n\n");
        for mismatch in mismatches {
            text.push_str(&format!("- {mismatch}\n"));
        }
        text.push('\n');
    }
    text.push_str("## Ratios\n\n");
    let rows = ratio_rows(results);
    text.push_str(&markdown_table(
        &[
            "graph",
            "workers",
            "batch",
            "throughput ripple/dd",
            "peak heap ripple/dd",
            "ripple vs its 1 worker",
            "outputs match",
        ],
        &rows,
    ));
    text.push_str("\n## Runs\n\n");
    let rows: Vec<Vec<String>> = results
        .iter()
        .flat_map(|m| {
            [
                engine_row(m, "ripple", &m.ripple, m.ripple_heap),
                engine_row(m, "differential", &m.dd, m.dd_heap),
            ]
        })
        .collect();
    text.push_str(&markdown_table(
        &[
            "graph",
            "workers",
            "batch",
            "engine",
            "load",
            "total",
            "updates/s",
            "p50",
            "p99",
            "max",
            "peak heap",
            "checksum",
        ],
        &rows,
    ));
    text.push_str("\n## Latency distributions\n\n");
    write_latency_plots(args, name, results, &mut text)?;
    let path = args.out.join(format!("{name}.md"));
    std::fs::write(&path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    print!("{text}");
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// The ratios table's rows: per cell, ripple over differential and over its own one worker.
fn ratio_rows(results: &[Measured]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for m in results {
        let own_one_worker = results
            .iter()
            .find(|o| o.graph == m.graph && o.batch == m.batch && o.workers == 1 && m.workers != 1);
        rows.push(vec![
            m.graph.clone(),
            m.workers.to_string(),
            m.batch.to_string(),
            format!(
                "{:.2}x",
                m.ripple.updates_per_second() / m.dd.updates_per_second().max(1e-9)
            ),
            format!("{:.2}x", m.ripple_heap as f64 / (m.dd_heap as f64).max(1.0)),
            own_one_worker.map_or("".into(), |one| {
                format!(
                    "{:.2}x",
                    m.ripple.updates_per_second() / one.ripple.updates_per_second().max(1e-9)
                )
            }),
            if m.ripple.checksum == m.dd.checksum {
                "yes".into()
            } else {
                "**NO**".into()
            },
        ]);
    }
    rows
}

/// Writes one latency CDF plot per graph beside the report and links it from `text`.
fn write_latency_plots(
    args: &Args,
    name: &str,
    results: &[Measured],
    text: &mut String,
) -> Result<(), String> {
    let mut graphs: Vec<&String> = results.iter().map(|m| &m.graph).collect();
    graphs.dedup();
    for graph in graphs {
        let file = format!("{name}-latency-{}.svg", graph.replace('/', "-"));
        let mut curves = Vec::new();
        for (index, m) in results.iter().filter(|m| &m.graph == graph).enumerate() {
            let color = PALETTE[index % PALETTE.len()];
            for (engine, report, dashed) in [("ripple", &m.ripple, false), ("dd", &m.dd, true)] {
                curves.push(Curve {
                    label: format!("{engine} w{} b{}", m.workers, m.batch),
                    color,
                    dashed,
                    samples: report.latencies.curve(POINTS),
                });
            }
        }
        let svg = cdf_plot(
            &format!("{name} on {graph}: per-step latency CDF (solid ripple, dashed differential)"),
            &curves,
        );
        let path = args.out.join(&file);
        std::fs::write(&path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        text.push_str(&format!("![{name} latency on {graph}]({file})\n\n"));
    }
    Ok(())
}

/// One graph and batch size, measured at every worker count.
struct Cell<'c> {
    computation: Computation,
    source: &'c Arc<Source>,
    graph: &'c str,
    batch: u64,
}

impl Cell<'_> {
    /// Runs both engines `args.runs` times at each of `args.workers`, and keeps each engine's
    /// median run per worker count.
    fn measure(&self, args: &Args) -> Vec<Measured> {
        let (source, batch) = (self.source, self.batch);
        let options = |workers: usize| RunOptions {
            computation: self.computation,
            roots: vec![0],
            batch,
            cluster: Cluster::local(workers),
            progress: false,
            stats_every: None,
            config: RippleConfig::default(),
        };
        let ripple_run = |options: &RunOptions| {
            peak_during(|| {
                run(
                    Some(Input::whole(Source::clone(source), options.batch)),
                    options,
                    None,
                )
                .expect("ripple runs")
                .expect("one process hosts worker 0")
            })
        };
        let dd_run = |options: &RunOptions| peak_during(|| run_dd(Arc::clone(source), options));
        // Each repetition runs every worker count, and each cell's engines take turns at
        // going first from one repetition to the next (and from one worker count to the
        // next), so neither always meets a warm or a fragmented heap; a worker count's
        // runs sit beside the others' in time, so the gain over one worker compares runs
        // of the same stretch of a machine whose speed drifts over minutes (by about a
        // tenth, differential-dataflow's runs as much as ripple's; see CONTRIBUTING.md,
        // "Method").
        let mut runs: Vec<(Vec<_>, Vec<_>)> = vec![(Vec::new(), Vec::new()); args.workers.len()];
        for repetition in 0..args.runs as usize {
            let cells = args.workers.iter().zip(runs.iter_mut()).enumerate();
            for (index, (&workers, (ripple_runs, dd_runs))) in cells {
                let options = options(workers);
                if (repetition + index) % 2 == 0 {
                    ripple_runs.push(ripple_run(&options));
                    dd_runs.push(dd_run(&options));
                } else {
                    dd_runs.push(dd_run(&options));
                    ripple_runs.push(ripple_run(&options));
                }
            }
        }
        let mut measured = Vec::new();
        for (&workers, (ripple_runs, dd_runs)) in args.workers.iter().zip(runs) {
            let reference = (dd_runs[0].0.checksum, dd_runs[0].0.rows);
            let outputs_match = ripple_runs
                .iter()
                .chain(&dd_runs)
                .all(|(report, _)| (report.checksum, report.rows) == reference);
            let (ripple, ripple_heap) = median_by(ripple_runs, |run: &(RunReport, usize)| {
                run.0.updates_per_second()
            });
            let (dd, dd_heap) = median_by(dd_runs, |run: &(RunReport, usize)| {
                run.0.updates_per_second()
            });
            measured.push(Measured {
                graph: self.graph.to_string(),
                workers,
                batch,
                ripple,
                ripple_heap,
                dd,
                dd_heap,
                outputs_match,
            });
        }
        measured
    }
}
