//! The streaming experiment: `ripple bfs --follow` on a file a producer appends to at fixed
//! rates, and the delay from a time's append to its rows being written.
//!
//! For each graph and worker count, each cell starts a fresh run, in this process, of bfs
//! from root 0 reading a followed file (the `--follow` code path: `Follow` and the stream
//! reader, with `--batch` as the most times per step). The producer first writes the initial
//! graph (time 0) and waits for its rows; then, for a paced cell, it appends update `i` (an
//! edge inserted and the oldest removed, as `ripple bfs`'s generator makes them) at time `i`,
//! followed by a progress line `@i+1`, at `rate` updates per second, in chunks every
//! millisecond. Each row's arrival at the output writer is timestamped; a time's delay is its
//! first row's arrival minus its append (times whose changes leave bfs's output as it was have
//! no rows and no delay). A rate is *sustained* when the median delay of the last quarter of
//! the run is at most twice that of the first quarter plus a millisecond.
//!
//! The `max` cell appends every update at once, then measures the stream's updates/s beside a
//! run over the same changes read whole (`--batch` times per step, parsing not timed): the
//! highest rate the stream sustains, against the whole file's.

use clap::Parser;
use ripple_bench::args::parse_graph;
use ripple_bench::report::{finish, markdown_table};
use ripple_cli::changes::read_changes;
use ripple_cli::computation::Computation;
use ripple_cli::follow::Follow;
use ripple_cli::generator::{Generator, GraphSpec};
use ripple_cli::options::{Cluster, RunOptions};
use ripple_cli::run::{run, Input};
use ripple_cli::source::Source;
use ripple_cli::stats::{human_duration, quantile, RunReport};
use ripple_cli::stream::Stream;
use ripple_dataflow::RippleConfig;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Delays from append to output of `ripple bfs --follow` at fixed rates.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Graphs as NODES/EDGES.
    #[arg(long, value_delimiter = ',', default_values_t = ["1000/2000".to_string(), "1000000/10000000".to_string()])]
    graphs: Vec<String>,
    /// Paced rates, in updates per second.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000u64, 10_000, 100_000])]
    rates: Vec<u64>,
    /// Worker counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    workers: Vec<usize>,
    /// Seconds of each paced cell.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Updates of the `max` cell (0 skips it).
    #[arg(long, default_value_t = 200_000)]
    max_updates: u64,
    /// The most times per step (`--batch`).
    #[arg(long, default_value_t = 1_000)]
    batch: u64,
    /// A smoke run for CI: graph 1000/2000, rates 1000 and 10000 for half a second, 1 worker,
    /// 5,000 updates in the `max` cell.
    #[arg(long)]
    quick: bool,
    /// Folder for streaming.md.
    #[arg(long, default_value = "target/stream-bench")]
    out: PathBuf,
}

/// When each output time's first row reached the writer.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<HashMap<u64, Instant>>>);

impl Write for Arrivals {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let now = Instant::now();
        let mut first = self.0.lock().expect("not poisoned");
        // Rows come one `depth,time,diff` line per call.
        for line in bytes.split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
            let time = std::str::from_utf8(line)
                .ok()
                .and_then(|line| line.split(',').nth(1))
                .and_then(|time| time.parse().ok());
            if let Some(time) = time {
                first.entry(time).or_insert(now);
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The lines of the initial graph, and of update `time`, as `ripple bfs`'s generator makes
/// them.
struct Lines {
    generator: Generator,
    spec: GraphSpec,
}

impl Lines {
    fn new(spec: GraphSpec) -> Self {
        Self {
            generator: Generator::new(&spec),
            spec,
        }
    }

    fn initial(&mut self, text: &mut String) {
        for _ in 0..self.spec.edges {
            let (src, dst) = self.generator.insertion();
            text.push_str(&format!("{src},{dst},0,1\n"));
        }
        text.push_str("@1\n");
    }

    fn update(&mut self, time: u64, progress: bool, text: &mut String) {
        let (a, b) = self.generator.insertion();
        let (c, d) = self.generator.removal();
        text.push_str(&format!("{a},{b},{time},1\n{c},{d},{time},-1\n"));
        if progress {
            text.push_str(&format!("@{}\n", time + 1));
        }
    }
}

/// One cell's measurements.
struct Cell {
    graph: String,
    workers: usize,
    /// Updates per second asked for (`None`: everything at once).
    rate: Option<u64>,
    updates: u64,
    delays: Vec<Duration>,
    sustained: bool,
    report: RunReport,
    /// For the `max` cell: the same changes read whole.
    whole: Option<RunReport>,
}

fn options(workers: usize, batch: u64) -> RunOptions {
    RunOptions {
        computation: Computation::Bfs,
        roots: vec![0],
        batch,
        cluster: Cluster::local(workers),
        progress: false,
        stats_every: None,
        config: RippleConfig::default(),
    }
}

/// Runs one cell: a followed file in `dir`, fed at `rate` (or at once) with `updates` updates.
fn run_cell(
    dir: &Path,
    spec: GraphSpec,
    workers: usize,
    batch: u64,
    rate: Option<u64>,
    updates: u64,
) -> Result<(RunReport, Vec<Duration>), String> {
    let path = dir.join("stream.csv");
    std::fs::write(&path, "").map_err(|e| e.to_string())?;
    let follow = Follow::open(&path).map_err(|e| e.to_string())?;
    let stop = follow.stopper();
    let stream =
        Stream::spawn(Box::new(follow), path.display().to_string()).map_err(|e| e.to_string())?;
    let input = Input {
        description: format!("{} (followed)", path.display()),
        feed: Box::new(stream),
        streaming: true,
        steps: None,
        durable: None,
    };
    let arrivals = Arrivals::default();
    let writer = arrivals.clone();
    let running = std::thread::spawn(move || {
        run(
            Some(input),
            &options(workers, batch),
            Some(Box::new(writer)),
        )
    });
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|e| e.to_string())?;
    let mut lines = Lines::new(spec);
    let mut text = String::new();
    lines.initial(&mut text);
    file.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    // The load's rows (the roots at depth 0, at least) say the updates may begin.
    while !arrivals.0.lock().expect("not poisoned").contains_key(&0) {
        if running.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut appended = vec![Instant::now(); updates as usize + 1];
    let began = Instant::now();
    let mut sent = 0;
    while sent < updates {
        let due = match rate {
            None => updates,
            Some(rate) => ((began.elapsed().as_secs_f64() * rate as f64) as u64).min(updates),
        };
        if due > sent {
            text.clear();
            for time in sent + 1..=due {
                lines.update(time, rate.is_some(), &mut text);
            }
            file.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
            let now = Instant::now();
            for time in sent + 1..=due {
                appended[time as usize] = now;
            }
            sent = due;
        }
        if rate.is_some() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stop.store(true, Ordering::Release);
    let report = running
        .join()
        .map_err(|_| "the run panicked".to_string())?
        .map_err(|e| e.to_string())?
        .ok_or("no report")?;
    let arrivals = arrivals.0.lock().expect("not poisoned");
    let delays = (1..=updates)
        .filter_map(|time| {
            let arrived = arrivals.get(&time)?;
            Some(arrived.saturating_duration_since(appended[time as usize]))
        })
        .collect();
    Ok((report, delays))
}

/// Whether the median delay of the last quarter is at most twice the first quarter's plus a
/// millisecond.
fn sustained(delays: &[Duration]) -> bool {
    let quarter = delays.len() / 4;
    if quarter == 0 {
        return true;
    }
    let first = quantile(&delays[..quarter], 0.5);
    let last = quantile(&delays[delays.len() - quarter..], 0.5);
    last <= first * 2 + Duration::from_millis(1)
}

/// The same updates as the `max` cell, read whole.
fn whole_run(spec: GraphSpec, workers: usize, batch: u64, updates: u64) -> RunReport {
    let mut lines = Lines::new(spec);
    let mut text = String::new();
    lines.initial(&mut text);
    for time in 1..=updates {
        lines.update(time, false, &mut text);
    }
    let changes = read_changes(text.as_bytes(), "whole").expect("generated lines parse");
    let source = Source::Changes {
        name: "whole".into(),
        changes,
    };
    run(
        Some(Input::whole(source, batch)),
        &options(workers, batch),
        None,
    )
    .expect("ripple runs")
    .expect("one process hosts worker 0")
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.graphs = vec!["1000/2000".into()];
        args.rates = vec![1_000, 10_000];
        args.workers = vec![1];
        args.seconds = 0.5;
        args.max_updates = 5_000;
    }
    let dir = std::env::temp_dir().join(format!("ripple-stream-bench-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("stream-bench: {}: {error}", dir.display());
        return ExitCode::from(1);
    }
    let mut cells = Vec::new();
    for graph in &args.graphs {
        let (nodes, edges) = match parse_graph(graph) {
            Ok(graph) => graph,
            Err(error) => {
                eprintln!("stream-bench: {error}");
                return ExitCode::from(2);
            }
        };
        for &workers in &args.workers {
            let mut plan: Vec<(Option<u64>, u64)> = args
                .rates
                .iter()
                .map(|&rate| (Some(rate), (rate as f64 * args.seconds) as u64))
                .collect();
            if args.max_updates > 0 {
                plan.push((None, args.max_updates));
            }
            for (rate, updates) in plan {
                let spec = GraphSpec {
                    nodes,
                    edges,
                    updates,
                    seed: 0,
                };
                if let Err(error) = spec.validate() {
                    eprintln!("stream-bench: {error}");
                    return ExitCode::from(2);
                }
                let measured = run_cell(&dir, spec, workers, args.batch, rate, updates);
                let (report, delays) = match measured {
                    Ok(measured) => measured,
                    Err(error) => {
                        eprintln!("stream-bench: {graph} -w {workers}: {error}");
                        return ExitCode::from(1);
                    }
                };
                let whole = rate
                    .is_none()
                    .then(|| whole_run(spec, workers, args.batch, updates));
                let cell = Cell {
                    graph: graph.clone(),
                    workers,
                    rate,
                    updates,
                    sustained: sustained(&delays),
                    delays,
                    report,
                    whole,
                };
                eprintln!("{}", row(&cell).join(" | "));
                cells.push(cell);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let text = report(&args, &cells);
    finish("stream-bench", &args.out, "streaming.md", &text, None)
}

/// A cell's row of the table.
fn row(cell: &Cell) -> Vec<String> {
    let report = &cell.report;
    let steps = report.latencies.len().max(1) as f64;
    let delay = |q: f64| human_duration(quantile(&cell.delays, q));
    let (stream, whole) = match &cell.whole {
        Some(whole) => (
            format!("{:.0}", report.updates_per_second()),
            format!(
                "{:.0} ({:.2}x)",
                whole.updates_per_second(),
                report.updates_per_second() / whole.updates_per_second().max(1e-9)
            ),
        ),
        None => (String::new(), String::new()),
    };
    vec![
        cell.graph.clone(),
        cell.workers.to_string(),
        cell.rate.map_or("max".into(), |rate| rate.to_string()),
        cell.updates.to_string(),
        format!("{:.1}", report.update_times as f64 / steps),
        cell.delays.len().to_string(),
        delay(0.5),
        delay(0.99),
        delay(1.0),
        if cell.rate.is_some() {
            (if cell.sustained { "yes" } else { "no" }).into()
        } else {
            String::new()
        },
        stream,
        whole,
    ]
}

fn report(args: &Args, cells: &[Cell]) -> String {
    let mut text = String::from("# bfs on a followed file: delay from append to output\n\n");
    text.push_str(&format!(
        "Reproduce: `cargo run --release -p ripple-bench --bin stream-bench -- --graphs {} --rates {} --workers {} --seconds {} --max-updates {} --batch {}`.\n\n",
        args.graphs.join(","),
        args.rates.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        args.workers.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        args.seconds,
        args.max_updates,
        args.batch,
    ));
    text.push_str(
        "A producer appends each update (an edge inserted, the oldest removed) and a progress \
         line to a file that bfs follows, at `rate` updates/s; `delay` runs from a time's append \
         to its first output row (times with rows only). Sustained: the last quarter's median \
         delay is at most twice the first quarter's plus 1 ms. `max`: every update appended at \
         once; its updates/s beside the same changes read whole, with `--batch` times per \
         step.\n\n",
    );
    text.push_str(&markdown_table(
        &[
            "graph",
            "workers",
            "rate",
            "updates",
            "times/step",
            "timed",
            "delay p50",
            "p99",
            "max",
            "sustained",
            "stream updates/s",
            "whole file updates/s",
        ],
        &cells.iter().map(row).collect::<Vec<_>>(),
    ));
    text
}
