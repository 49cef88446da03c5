//! The durability experiment: what `--state-dir` costs a bfs run, and what a restart takes.
//!
//! For each batch size, in one process and alternating (the order rotates from one repetition
//! to the next), bfs runs over the same generated change stream without state (`plain`) and
//! with a fresh state directory checkpointing every `--every` (`durable`). Reported: updates/s
//! of each and their ratio, per-step latency p99 of each, the checkpoints' bytes (of new
//! changes, of merges) and the snapshot's size on disk against its live size (space
//! amplification) and per input update. Outputs must match (checksums).
//!
//! Recovery: a durable run is stopped after `--kill-after` updates without a last checkpoint
//! (its feed fails, as a killed process stops: the state directory holds the last periodic
//! checkpoint), then the run is started again over the whole stream. Reported: the time until
//! rows flow again (rehydration and the first step after the checkpoint) against the initial
//! load plus the time the updates after the checkpoint took before the stop; the resumed
//! run's checksum must match an uninterrupted run's. Writes `durable.md` into `--out`.

use clap::Parser;
use ripple_bench::args::parse_graph;
use ripple_bench::report::{bytes, finish, markdown_table, median_by};
use ripple_cli::changes::{Edge, InputError};
use ripple_cli::computation::Computation;
use ripple_cli::generator::GraphSpec;
use ripple_cli::options::{Cluster, RunOptions};
use ripple_cli::run::{run, Input};
use ripple_cli::source::{Fed, Feed, Source};
use ripple_cli::state::{CheckpointSummary, Durability, InputKind, OutputKind};
use ripple_cli::stats::{human_duration, RunReport};
use ripple_dataflow::RippleConfig;
use ripple_durable::{Checkpoints, StateDir};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// bfs with and without checkpoints, and a restart.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The graph, as NODES/EDGES.
    #[arg(long, default_value = "1000000/10000000")]
    graph: String,
    /// Updates after the initial graph, each at its own time.
    #[arg(long, default_value_t = 1_000_000)]
    updates: u64,
    /// Distinct times per step.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000u64, 100_000])]
    batches: Vec<u64>,
    /// How often the durable runs checkpoint.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    every: Duration,
    /// Runs per batch size and engine; the run with the median throughput is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// The recovery experiment stops its first run after this many updates.
    #[arg(long, default_value_t = 500_000)]
    kill_after: u64,
    /// Where the state directories go (removed after each run).
    #[arg(long, default_value = "target/durable-bench/state")]
    state: PathBuf,
    /// A smoke run for CI: graph 10000/20000, 4000 updates, batches 10 and 1000, checkpoints
    /// every 20ms, stopped after 2000.
    #[arg(long)]
    quick: bool,
    /// Folder for durable.md.
    #[arg(long, default_value = "target/durable-bench")]
    out: PathBuf,
}

/// One run: its report, and its checkpoints and snapshot (durable runs).
struct Run {
    report: RunReport,
    snapshot: Option<Snapshot>,
}

/// A durable run's checkpoints, and its snapshot's size on disk against the live size.
struct Snapshot {
    checkpoints: CheckpointSummary,
    /// Updates in the snapshot's files, and live (distinct data of non-zero sums).
    updates: u64,
    live: u64,
}

fn options(batch: u64) -> RunOptions {
    RunOptions {
        computation: Computation::Bfs,
        roots: vec![0],
        batch,
        cluster: Cluster::local(1),
        progress: false,
        stats_every: None,
        config: RippleConfig::default(),
    }
}

fn durability(state: &Path, spec: GraphSpec, every: Duration) -> Durability {
    let input = InputKind::Generated(spec);
    Durability::open(
        state,
        Computation::Bfs,
        &[0],
        input,
        OutputKind::None,
        every,
    )
    .expect("a state directory")
}

/// Runs bfs over `spec` at `batch` per step, durable in a fresh `state` if given.
fn run_once(spec: GraphSpec, batch: u64, state: Option<&Path>, every: Duration) -> Run {
    let source = Source::Generated(spec);
    let mut input = Input::whole(source, batch);
    if let Some(state) = state {
        let _ = std::fs::remove_dir_all(state);
        input.durable = Some(durability(state, spec, every));
    }
    let report = run(Some(input), &options(batch), None)
        .expect("ripple runs")
        .expect("one process hosts worker 0");
    let snapshot = state.map(|state| {
        let checkpoints = report.checkpoints.expect("a durable run's checkpoints");
        let (updates, live) = snapshot_sizes(state);
        std::fs::remove_dir_all(state).expect("the state directory goes");
        Snapshot {
            checkpoints,
            updates,
            live,
        }
    });
    Run { report, snapshot }
}

/// The updates in the snapshot files of `state`, and the live ones among them.
fn snapshot_sizes(state: &Path) -> (u64, u64) {
    let checkpoints = Checkpoints::<Edge>::new(StateDir::open(state).expect("the state"));
    let manifest = checkpoints.last().expect("a checkpoint");
    let updates = manifest.files.iter().map(|file| file.updates).sum();
    let mut sums: HashMap<Edge, i64> = HashMap::new();
    checkpoints
        .replay(|edge, diff| *sums.entry(edge).or_insert(0) += diff)
        .expect("the snapshot reads back");
    let live = sums.values().filter(|sum| **sum != 0).count() as u64;
    (updates, live)
}

/// A feed that fails after `after` input times, as a killed process stops: without a last
/// checkpoint. It notes when its first two calls began (the load is between them) and when
/// it failed.
struct Killed {
    inner: Box<dyn Feed>,
    after: u64,
    fed: u64,
    calls: Arc<Mutex<Vec<Instant>>>,
    killed: Arc<Mutex<Option<SystemTime>>>,
}

impl Feed for Killed {
    fn feed(
        &mut self,
        max_times: u64,
        deadline: Option<Instant>,
        push: &mut dyn FnMut(Edge, u64, i64),
    ) -> Result<Fed, InputError> {
        self.calls.lock().unwrap().push(Instant::now());
        if self.fed > self.after {
            *self.killed.lock().unwrap() = Some(SystemTime::now());
            return Err(InputError::Io {
                file: "durable-bench".into(),
                source: std::io::Error::other("stopped, as if killed"),
            });
        }
        // Up to the stop, not past it.
        let max_times = max_times.min(self.after + 1 - self.fed);
        let fed = self.inner.feed(max_times, deadline, push)?;
        if let Fed::Step { times, .. } = fed {
            self.fed += times;
        }
        Ok(fed)
    }
}

/// The recovery experiment at `batch` per step (see the module documentation).
struct Recovery {
    load: Duration,
    redo: Duration,
    rehydration: Duration,
    first_step: Duration,
    frontier: u64,
    checksum_matches: bool,
}

fn recovery(spec: GraphSpec, batch: u64, args: &Args, expected: u64) -> Recovery {
    let state = args.state.join("recovery");
    let _ = std::fs::remove_dir_all(&state);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let killed = Arc::new(Mutex::new(None));
    let mut input = Input::whole(Source::Generated(spec), batch);
    input.feed = Box::new(Killed {
        inner: input.feed,
        after: args.kill_after,
        fed: 0,
        calls: Arc::clone(&calls),
        killed: Arc::clone(&killed),
    });
    input.durable = Some(durability(&state, spec, args.every));
    let stopped = run(Some(input), &options(batch), None);
    assert!(stopped.is_err(), "the first run stops");
    let calls = calls.lock().unwrap().clone();
    let load = calls[1] - calls[0];
    let checkpointed = std::fs::metadata(state.join("MANIFEST"))
        .and_then(|manifest| manifest.modified())
        .expect("a checkpoint");
    let killed = killed.lock().unwrap().expect("stopped");
    let redo = killed.duration_since(checkpointed).unwrap_or_default();
    // The restart, over the whole stream.
    let durable = durability(&state, spec, args.every);
    let resume = durable.resume().expect("a checkpoint to resume from");
    let mut input = Input::whole_from(Source::Generated(spec), batch, resume.frontier);
    input.durable = Some(durable);
    let report = run(Some(input), &options(batch), None)
        .expect("the restart runs")
        .expect("one process hosts worker 0");
    std::fs::remove_dir_all(&state).expect("the state directory goes");
    Recovery {
        load,
        redo,
        rehydration: report.load,
        first_step: report.latencies.first().unwrap_or_default(),
        frontier: resume.frontier,
        checksum_matches: report.checksum.0 == expected,
    }
}

/// A run's throughput, which medians are of.
fn throughput(run: &Run) -> f64 {
    run.report.updates_per_second()
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.graph = "10000/20000".into();
        args.updates = 4_000;
        args.batches = vec![10, 1_000];
        args.every = Duration::from_millis(20);
        args.kill_after = 2_000;
    }
    let (nodes, edges) = match parse_graph(&args.graph) {
        Ok(graph) => graph,
        Err(error) => {
            eprintln!("durable-bench: {error}");
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
        eprintln!("durable-bench: {error}");
        return ExitCode::from(2);
    }
    if args.kill_after >= args.updates {
        eprintln!("durable-bench: --kill-after must be below --updates");
        return ExitCode::from(2);
    }
    let state = args.state.join("run");
    let mut cells = Vec::new();
    let mut mismatch = false;
    for &batch in &args.batches {
        let mut plain = Vec::new();
        let mut durable = Vec::new();
        for repetition in 0..args.runs {
            for turn in 0..2 {
                let is_durable = (turn + repetition) % 2 == 1;
                let run = run_once(spec, batch, is_durable.then_some(&*state), args.every);
                eprintln!(
                    "b{batch} {}: {:.0} updates/s",
                    if is_durable { "durable" } else { "plain" },
                    run.report.updates_per_second()
                );
                if is_durable { &mut durable } else { &mut plain }.push(run);
            }
        }
        let (plain, durable) = (median_by(plain, throughput), median_by(durable, throughput));
        mismatch |= plain.report.checksum != durable.report.checksum;
        let recovery = recovery(spec, batch, &args, plain.report.checksum.0);
        mismatch |= !recovery.checksum_matches;
        eprintln!(
            "b{batch} recovery: rows again after {} (load {}, redo {})",
            human_duration(recovery.rehydration + recovery.first_step),
            human_duration(recovery.load),
            human_duration(recovery.redo)
        );
        cells.push((batch, plain, durable, recovery));
    }
    let text = report(&args, &cells);
    let mismatch = mismatch.then_some("between plain, durable and resumed runs");
    finish("durable-bench", &args.out, "durable.md", &text, mismatch)
}

fn report(args: &Args, cells: &[(u64, Run, Run, Recovery)]) -> String {
    let mut text = String::from("# bfs with checkpoints, and restarts\n\n");
    text.push_str(&format!(
        "Reproduce: `cargo run --release -p ripple-bench --bin durable-bench -- --graph {} --updates {} --batches {} --every {} --kill-after {} --runs {}`.\n\n",
        args.graph,
        args.updates,
        args.batches.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        humantime::format_duration(args.every),
        args.kill_after,
        args.runs,
    ));
    text.push_str(
        "`plain`: no state; `durable`: a fresh `--state-dir`, checkpoints every interval and \
         at the end. Throughput is updates/s after the load; p99 is of per-step latency \
         after the load (a step's checkpoint counts in it). Bytes per checkpoint: of the \
         changes since the one before (the load's among them), and of the snapshot's merges \
         (on a thread of their own). Space amplification: updates in the snapshot's files over \
         live updates.\n\n## Checkpoint cost\n\n",
    );
    let mut rows = Vec::new();
    for (batch, plain, durable, _) in cells {
        let snapshot = durable.snapshot.as_ref().expect("a durable run");
        let checkpoints = &snapshot.checkpoints;
        let count = checkpoints.count.max(1);
        let p99 = |run: &Run| run.report.latencies.quantile(0.99);
        let input_updates = durable.report.load_changes + durable.report.update_changes;
        rows.push(vec![
            batch.to_string(),
            format!("{:.0}", plain.report.updates_per_second()),
            format!("{:.0}", durable.report.updates_per_second()),
            format!(
                "{:.3}x",
                durable.report.updates_per_second() / plain.report.updates_per_second().max(1e-9)
            ),
            format!(
                "{} / {}",
                human_duration(p99(plain)),
                human_duration(p99(durable))
            ),
            checkpoints.count.to_string(),
            bytes((checkpoints.new_bytes / count) as usize),
            bytes(checkpoints.merged_bytes as usize),
            human_duration(checkpoints.longest),
            format!(
                "{:.2}x",
                snapshot.updates as f64 / snapshot.live.max(1) as f64
            ),
            format!(
                "{:.1} B",
                checkpoints.snapshot_bytes as f64 / input_updates.max(1) as f64
            ),
        ]);
    }
    text.push_str(&markdown_table(
        &[
            "batch",
            "plain updates/s",
            "durable updates/s",
            "durable / plain",
            "p99 plain / durable",
            "checkpoints",
            "new bytes per checkpoint",
            "merged bytes",
            "longest checkpoint",
            "space amplification",
            "snapshot bytes per input change",
        ],
        &rows,
    ));
    text.push_str("\n## Recovery\n\n");
    let mut rows = Vec::new();
    for (batch, _, _, recovery) in cells {
        let again = recovery.rehydration + recovery.first_step;
        rows.push(vec![
            batch.to_string(),
            recovery.frontier.to_string(),
            human_duration(recovery.rehydration),
            human_duration(again),
            human_duration(recovery.load),
            human_duration(recovery.redo),
            format!(
                "{:.2}x",
                again.as_secs_f64() / (recovery.load + recovery.redo).as_secs_f64().max(1e-9)
            ),
            if recovery.checksum_matches {
                "same"
            } else {
                "DIFFERENT"
            }
            .to_string(),
        ]);
    }
    text.push_str(&markdown_table(
        &[
            "batch",
            "resumed at time",
            "rehydration",
            "rows again after",
            "initial load",
            "updates since the checkpoint took",
            "rows again / (load + those updates)",
            "checksum",
        ],
        &rows,
    ));
    text.push_str("\n## Runs\n\n");
    let mut rows = Vec::new();
    for (batch, plain, durable, _) in cells {
        for (name, run) in [("plain", plain), ("durable", durable)] {
            rows.push(vec![
                batch.to_string(),
                name.to_string(),
                human_duration(run.report.load),
                format!("{:.0}", run.report.updates_per_second()),
                human_duration(run.report.total),
                format!("`{:016x}`", run.report.checksum.0),
            ]);
        }
    }
    text.push_str(&markdown_table(
        &["batch", "engine", "load", "updates/s", "total", "checksum"],
        &rows,
    ));
    text
}
