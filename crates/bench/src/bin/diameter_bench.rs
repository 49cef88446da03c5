//! Long-diameter graphs: ripple and differential-dataflow 0.26 side by side.
//!
//! Iterative computations on graphs whose diameter is long run many rounds, and where node ids
//! follow the long paths a label or depth changes at many rounds of one time: the long
//! iteration histories of issue 55. The graphs, each loaded whole at time 0:
//! - `path-N`: edges `i -> i+1` for `i` below `N - 1`, ids along the path (`cc` on it changes
//!   node `k`'s label `k` times, about `N²/2` changes in all);
//! - `grid-S`: an `S` by `S` grid, edges to the right and down, ids row by row;
//! - `lollipop-K/T`: a complete directed graph on `K` nodes, and a tail of `T` nodes from node
//!   `K - 1` on, ids along the tail.
//!
//! Paths run `cc`; grids and lollipops run `bfs`, `reach` and `cc` from root 0. Each cell runs
//! both engines `--runs` times, alternating, and reports each engine's median run by total
//! time, its peak heap (a counting allocator), and whether every run of both engines gave the
//! same output (checksum and rows). Paths longer than `--dd-path-max` run ripple alone
//! (differential's time grows about as `N³` there). The report ends with the growth exponent
//! of ripple's time over the paths.
//!
//! Writes `diameter.md` into `--out`.

use clap::Parser;
use ripple_bench::alloc::{peak_during, CountingAlloc};
use ripple_bench::dd::run_dd;
use ripple_bench::report::{bytes, finish, markdown_table, median_by};
use ripple_cli::changes::{Edge, EdgeChange};
use ripple_cli::computation::Computation;
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

/// Iterative computations on long-diameter graphs, ripple beside differential-dataflow.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Path lengths (nodes) for `cc`.
    #[arg(long, value_delimiter = ',', default_values_t = [200u32, 400, 800, 1600, 3200])]
    paths: Vec<u32>,
    /// The longest path differential runs (its time grows about as the cube of the length).
    #[arg(long, default_value_t = 800)]
    dd_path_max: u32,
    /// The side of the square grid (at most 5000: a graph has at most 50,000,000 edges).
    #[arg(long, default_value_t = 100)]
    grid: u32,
    /// The lollipop as CLIQUE/TAIL (nodes in the complete part, nodes in the tail; at most
    /// 50,000,000 edges, CLIQUE x (CLIQUE - 1) + TAIL).
    #[arg(long, default_value = "100/1000")]
    lollipop: String,
    /// The computations to run (paths run `cc` only): any of bfs, reach, cc.
    #[arg(long, value_delimiter = ',', default_values = ["bfs", "reach", "cc"])]
    computations: Vec<Computation>,
    /// Worker counts (threads of one process).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize])]
    workers: Vec<usize>,
    /// Runs per cell and engine; the run with the median total time is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// A smoke run for CI: paths 100 and 200, grid 20, lollipop 20/200, one run.
    #[arg(long)]
    quick: bool,
    /// Folder for diameter.md (a table to commit goes to a folder of its own under results/,
    /// indexed in results/README.md).
    #[arg(long, default_value = "target/diameter-bench")]
    out: PathBuf,
}

/// One graph: its name and edges.
struct Graph {
    name: String,
    /// The path length, for paths (the growth exponent is fitted over them).
    path: Option<u32>,
    edges: Vec<Edge>,
}

fn path(nodes: u32) -> Graph {
    Graph {
        name: format!("path-{nodes}"),
        path: Some(nodes),
        edges: (1..nodes).map(|node| (node - 1, node)).collect(),
    }
}

fn grid(side: u32) -> Graph {
    let id = |row: u32, column: u32| row * side + column;
    let mut edges = Vec::new();
    for row in 0..side {
        for column in 0..side {
            if column + 1 < side {
                edges.push((id(row, column), id(row, column + 1)));
            }
            if row + 1 < side {
                edges.push((id(row, column), id(row + 1, column)));
            }
        }
    }
    Graph {
        name: format!("grid-{side}"),
        path: None,
        edges,
    }
}

fn lollipop(clique: u32, tail: u32) -> Graph {
    let mut edges: Vec<Edge> = (0..clique)
        .flat_map(|a| (0..clique).filter(move |&b| b != a).map(move |b| (a, b)))
        .collect();
    edges.extend((clique..clique + tail).map(|node| (node - 1, node)));
    Graph {
        name: format!("lollipop-{clique}/{tail}"),
        path: None,
        edges,
    }
}

/// The most edges a graph of the bench may have: both engines hold it, with their
/// arrangements, and a bigger request would end in running out of memory, not in a table.
const MAX_EDGES: u64 = 50_000_000;

/// `CLIQUE/TAIL`, both at least 1, the lollipop's edges within [`MAX_EDGES`].
fn parse_lollipop(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .split_once('/')
        .and_then(|(c, t)| Some((c.parse::<u32>().ok()?, t.parse::<u32>().ok()?)));
    let edges =
        |clique: u32, tail: u32| u64::from(clique) * u64::from(clique - 1) + u64::from(tail);
    match parsed {
        Some((clique, tail))
            if clique >= 1
                && tail >= 1
                && clique.checked_add(tail).is_some()
                && edges(clique, tail) <= MAX_EDGES =>
        {
            Ok((clique, tail))
        }
        _ => Err(format!(
            "--lollipop {text}: expected CLIQUE/TAIL, two counts of at least 1 (e.g. 100/1000), \
             with CLIQUE x (CLIQUE - 1) + TAIL edges at most {MAX_EDGES}"
        )),
    }
}

/// Checks the sizes of the paths and the grid: at least 2 nodes a path and on a side, and
/// at most [`MAX_EDGES`] edges each (a grid of side `s` has `2s(s - 1)`).
fn check_sizes(paths: &[u32], grid: u32) -> Result<(), String> {
    let grid_edges = 2 * u64::from(grid) * u64::from(grid.saturating_sub(1));
    if paths
        .iter()
        .any(|&nodes| nodes < 2 || u64::from(nodes) - 1 > MAX_EDGES)
        || grid < 2
        || grid_edges > MAX_EDGES
    {
        return Err(format!(
            "paths need 2 to {} nodes, the grid a side of 2 to 5000 ({MAX_EDGES} edges at most)",
            MAX_EDGES + 1
        ));
    }
    Ok(())
}

/// One graph, computation and worker count, measured.
struct Measured {
    graph: String,
    path: Option<u32>,
    computation: Computation,
    workers: usize,
    ripple: (RunReport, usize),
    /// None where differential was not run.
    dd: Option<(RunReport, usize)>,
    outputs_match: bool,
}

/// The iterative computations only: `degrees` has no rounds to run on a long diameter.
fn check_computations(computations: &[Computation]) -> Result<(), String> {
    if computations.contains(&Computation::Degrees) {
        return Err("--computations takes bfs, reach and cc (degrees does not iterate)".into());
    }
    Ok(())
}

fn measure(args: &Args, graph: &Graph, computation: Computation, workers: usize) -> Measured {
    let changes = graph
        .edges
        .iter()
        .map(|&edge| EdgeChange {
            time: 0,
            edge,
            diff: 1,
        })
        .collect();
    let source = Arc::new(Source::Changes {
        name: graph.name.clone(),
        changes,
    });
    let options = RunOptions {
        computation,
        roots: vec![0],
        batch: 1,
        cluster: Cluster::local(workers),
        progress: false,
        stats_every: None,
        config: RippleConfig::default(),
    };
    let with_dd = graph.path.is_none_or(|nodes| nodes <= args.dd_path_max);
    let ripple_run = || {
        peak_during(|| {
            let input = Input::whole(Source::clone(&source), options.batch);
            run(Some(input), &options, None)
                .expect("ripple runs")
                .expect("one process hosts worker 0")
        })
    };
    let dd_run = || peak_during(|| run_dd(Arc::clone(&source), &options));
    let (mut ripple_runs, mut dd_runs) = (Vec::new(), Vec::new());
    for repetition in 0..args.runs {
        // The engines take turns at going first.
        if repetition % 2 == 1 && with_dd {
            dd_runs.push(dd_run());
        }
        ripple_runs.push(ripple_run());
        if repetition % 2 == 0 && with_dd {
            dd_runs.push(dd_run());
        }
    }
    let output = |run: &(RunReport, usize)| (run.0.checksum, run.0.rows);
    let reference = output(&ripple_runs[0]);
    let outputs_match = ripple_runs
        .iter()
        .chain(&dd_runs)
        .all(|run| output(run) == reference);
    let total = |run: &(RunReport, usize)| run.0.total.as_secs_f64();
    Measured {
        graph: graph.name.clone(),
        path: graph.path,
        computation,
        workers,
        ripple: median_by(ripple_runs, total),
        dd: (!dd_runs.is_empty()).then(|| median_by(dd_runs, total)),
        outputs_match,
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.paths = vec![100, 200];
        args.grid = 20;
        args.lollipop = "20/200".into();
        args.runs = 1;
    }
    let (clique, tail) = match parse_lollipop(&args.lollipop) {
        Ok(sizes) => sizes,
        Err(error) => {
            eprintln!("diameter-bench: {error}");
            return ExitCode::from(2);
        }
    };
    if let Err(error) = check_computations(&args.computations) {
        eprintln!("diameter-bench: {error}");
        return ExitCode::from(2);
    }
    if let Err(error) = check_sizes(&args.paths, args.grid) {
        eprintln!("diameter-bench: {error}");
        return ExitCode::from(2);
    }
    let iterative: Vec<Computation> = [Computation::Bfs, Computation::Reach, Computation::Cc]
        .into_iter()
        .filter(|computation| args.computations.contains(computation))
        .collect();
    let on_paths: Vec<Computation> = iterative
        .iter()
        .copied()
        .filter(|&computation| computation == Computation::Cc)
        .collect();
    // Paths run cc alone: without it they are not generated at all.
    let paths = if on_paths.is_empty() {
        &[][..]
    } else {
        &args.paths[..]
    };
    let mut cells: Vec<(Graph, Vec<Computation>)> = paths
        .iter()
        .map(|&nodes| (path(nodes), on_paths.clone()))
        .collect();
    cells.push((grid(args.grid), iterative.clone()));
    cells.push((lollipop(clique, tail), iterative));
    let began = Instant::now();
    let mut results = Vec::new();
    for (graph, computations) in &cells {
        for &computation in computations {
            for &workers in &args.workers {
                let m = measure(&args, graph, computation, workers);
                eprintln!(
                    "[{:>7.1}s] {} {} w{workers}: ripple {}, dd {}",
                    began.elapsed().as_secs_f64(),
                    m.graph,
                    computation.name(),
                    human_duration(m.ripple.0.total),
                    m.dd.as_ref()
                        .map_or("not run".into(), |dd| human_duration(dd.0.total)),
                );
                results.push(m);
            }
        }
    }
    let mismatches: Vec<String> = results
        .iter()
        .filter(|m| !m.outputs_match)
        .map(|m| format!("{} {} w{}", m.graph, m.computation.name(), m.workers))
        .collect();
    let mismatch = (!mismatches.is_empty()).then(|| mismatches.join(", "));
    let text = report(&args, &results, mismatch.as_deref());
    finish(
        "diameter-bench",
        &args.out,
        "diameter.md",
        &text,
        mismatch.as_deref(),
    )
}

fn report(args: &Args, results: &[Measured], mismatch: Option<&str>) -> String {
    let mut text =
        String::from("# Long-diameter graphs: ripple beside differential-dataflow 0.26\n\n");
    text.push_str(&format!(
        "Reproduce: `cargo run --release -p ripple-bench --bin diameter-bench -- --paths {} \
         --dd-path-max {} --grid {} --lollipop {} --computations {} --workers {} --runs {}`.\n\n",
        args.paths
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        args.dd_path_max,
        args.grid,
        args.lollipop,
        args.computations
            .iter()
            .map(|computation| computation.name())
            .collect::<Vec<_>>()
            .join(","),
        args.workers
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        args.runs,
    ));
    text.push_str(
        "Each graph is loaded whole at time 0 (`diameter-bench --help` describes them); `time` \
         is the whole run, load to output, of the run with the median time of each engine \
         (engines alternating); `speed-up` is differential's time over ripple's; `peak heap` is \
         the most heap a run held at once (a counting allocator).\n\n",
    );
    if let Some(mismatch) = mismatch {
        text.push_str(&format!("**Output mismatches:** {mismatch}\n\n"));
    }
    let rows: Vec<Vec<String>> = results.iter().map(row).collect();
    text.push_str(&markdown_table(
        &[
            "graph",
            "computation",
            "workers",
            "ripple time",
            "differential time",
            "speed-up",
            "ripple peak heap",
            "differential peak heap",
            "outputs match",
        ],
        &rows,
    ));
    text.push_str(&growth(results));
    text
}

fn row(m: &Measured) -> Vec<String> {
    let (ripple, ripple_heap) = &m.ripple;
    let dd_time = m.dd.as_ref().map(|(dd, _)| dd.total);
    vec![
        m.graph.clone(),
        m.computation.name().to_string(),
        m.workers.to_string(),
        human_duration(ripple.total),
        dd_time.map_or("not run".into(), human_duration),
        dd_time.map_or(String::new(), |dd| {
            format!(
                "{:.2}x",
                dd.as_secs_f64() / ripple.total.as_secs_f64().max(1e-9)
            )
        }),
        bytes(*ripple_heap),
        m.dd.as_ref()
            .map_or(String::new(), |(_, heap)| bytes(*heap)),
        if m.outputs_match { "yes" } else { "**NO**" }.to_string(),
    ]
}

/// The exponent `e` of ripple's time growing as `Nᵉ` over the paths, per worker count: from
/// each path to the next, and from the shortest to the longest.
fn growth(results: &[Measured]) -> String {
    let mut text = String::new();
    let mut workers: Vec<usize> = results.iter().map(|m| m.workers).collect();
    workers.dedup();
    for count in workers {
        let paths: Vec<(u32, f64)> = results
            .iter()
            .filter(|m| m.workers == count)
            .filter_map(|m| Some((m.path?, m.ripple.0.total.as_secs_f64())))
            .collect();
        let (Some(first), Some(last)) = (paths.first(), paths.last()) else {
            continue;
        };
        if paths.len() < 2 {
            continue;
        }
        let exponent = |a: (u32, f64), b: (u32, f64)| {
            (b.1 / a.1).ln() / (f64::from(b.0) / f64::from(a.0)).ln()
        };
        let steps: Vec<String> = paths
            .windows(2)
            .map(|pair| {
                format!(
                    "{}→{}: {:.2}",
                    pair[0].0,
                    pair[1].0,
                    exponent(pair[0], pair[1])
                )
            })
            .collect();
        text.push_str(&format!(
            "\nGrowth of ripple's `cc` time on paths, {count} worker(s): N^{:.2} from {} to {} nodes ({}).\n",
            exponent(*first, *last),
            first.0,
            last.0,
            steps.join(", "),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degrees_is_refused() {
        assert!(check_computations(&[Computation::Bfs, Computation::Cc]).is_ok());
        let error = check_computations(&[Computation::Degrees]).unwrap_err();
        assert!(error.contains("bfs, reach and cc"), "{error}");
    }

    #[test]
    fn sizes_beyond_the_edge_bound_are_refused() {
        assert_eq!(parse_lollipop("100/1000"), Ok((100, 1000)));
        // 7,072 x 7,071 edges in the complete part: over 50,000,000.
        assert!(parse_lollipop("7072/1").is_err());
        assert!(parse_lollipop("7071/1000").is_ok());
        assert!(parse_lollipop("0/10").is_err());
        assert!(parse_lollipop("10").is_err());
        assert!(check_sizes(&[200, 3200], 100).is_ok());
        assert!(check_sizes(&[1], 100).is_err());
        assert!(check_sizes(&[200], 5001).is_err());
        assert!(check_sizes(&[200], 5000).is_ok());
        assert!(check_sizes(&[50_000_002], 100).is_err());
    }
}
