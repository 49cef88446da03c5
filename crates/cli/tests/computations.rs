//! The four computations on random change files: ripple's output must equal a sequential
//! reference (recompute from scratch at every time, then diff) and differential-dataflow's
//! output, whatever the batching and the number of workers.

use differential_dataflow::input::Input;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use ripple_cli::changes::{read_changes, Edge, EdgeChange, Node};
use ripple_cli::computation::{Computation, Value};
use ripple_cli::options::{Cluster, ProgressMode, RunOptions};
use ripple_cli::output::Row;
use ripple_cli::run::{run, Input as RunInput};
use ripple_cli::source::Source;
use ripple_dataflow::RippleConfig;
use ripple_oracle::graph::{self, Top};
use ripple_updates::consolidate::consolidate_triples;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex};

const ROOTS: [Node; 2] = [0, 3];

/// A change file's text: random insertions and removals of present edges over `nodes` nodes at
/// times `0..times`, lines shuffled (times in any order), with comments and blank lines.
fn change_file(seed: u64, nodes: u32, times: u64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut present: Vec<Edge> = Vec::new();
    let mut lines = Vec::new();
    for time in 0..times {
        let changes = if time == 0 {
            3 * nodes
        } else {
            rng.gen_range(0..4)
        };
        for _ in 0..changes {
            if !present.is_empty() && rng.gen_bool(0.45) {
                let edge = present.swap_remove(rng.gen_range(0..present.len()));
                lines.push(format!("{},{},{time},-1", edge.0, edge.1));
            } else {
                let edge = (rng.gen_range(0..nodes), rng.gen_range(0..nodes));
                present.push(edge);
                lines.push(format!("{},{},{time},1", edge.0, edge.1));
            }
        }
    }
    lines.shuffle(&mut rng);
    lines.insert(lines.len() / 2, "# a comment".into());
    lines.insert(lines.len() / 3, String::new());
    lines.join("\n")
}

/// The result at one time, as a multiset of values.
fn result_at(computation: Computation, edges: &BTreeMap<Edge, i64>) -> BTreeMap<Value, i64> {
    let mut out: BTreeMap<Value, i64> = BTreeMap::new();
    let present = || edges.iter().filter(|(_, m)| **m > 0).map(|(e, m)| (*e, *m));
    match computation {
        Computation::Bfs | Computation::Reach => {
            let mut depth: BTreeMap<Node, u64> = ROOTS.iter().map(|r| (*r, 0)).collect();
            let mut queue: VecDeque<Node> = ROOTS.iter().copied().collect();
            while let Some(node) = queue.pop_front() {
                for ((src, dst), _) in present().filter(|((s, _), _)| *s == node) {
                    if !depth.contains_key(&dst) {
                        depth.insert(dst, depth[&src] + 1);
                        queue.push_back(dst);
                    }
                }
            }
            for (node, d) in depth {
                let value = if computation == Computation::Bfs {
                    (d, 0)
                } else {
                    (u64::from(node), 0)
                };
                *out.entry(value).or_default() += 1;
            }
        }
        Computation::Degrees => {
            let mut degree: BTreeMap<Node, i64> = BTreeMap::new();
            for ((src, _), m) in present() {
                *degree.entry(src).or_default() += m;
            }
            for d in degree.values() {
                *out.entry((*d as u64, 0)).or_default() += 1;
            }
        }
        Computation::Cc => {
            let mut parent: BTreeMap<Node, Node> = BTreeMap::new();
            fn find(parent: &mut BTreeMap<Node, Node>, x: Node) -> Node {
                let p = *parent.entry(x).or_insert(x);
                if p == x {
                    x
                } else {
                    let root = find(parent, p);
                    parent.insert(x, root);
                    root
                }
            }
            for ((a, b), _) in present() {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                // The smaller id becomes the root, so a root is its component's least node.
                parent.insert(ra.max(rb), ra.min(rb));
            }
            let nodes: Vec<Node> = parent.keys().copied().collect();
            for node in nodes {
                let label = find(&mut parent, node);
                out.insert((u64::from(node), u64::from(label)), 1);
            }
        }
    }
    out
}

/// Recomputes the result at every input time and reports the differences, sorted by time
/// then value.
fn reference(computation: Computation, changes: &[EdgeChange]) -> Vec<Row> {
    let mut edges: BTreeMap<Edge, i64> = BTreeMap::new();
    let mut previous: BTreeMap<Value, i64> = BTreeMap::new();
    let mut rows = Vec::new();
    for group in changes.chunk_by(|a, b| a.time == b.time) {
        for change in group {
            *edges.entry(change.edge).or_default() += change.diff;
        }
        let current = result_at(computation, &edges);
        let values: BTreeSet<Value> = previous.keys().chain(current.keys()).copied().collect();
        for value in values {
            let diff = current.get(&value).unwrap_or(&0) - previous.get(&value).unwrap_or(&0);
            if diff != 0 {
                rows.push((value, group[0].time, diff));
            }
        }
        previous = current;
    }
    rows
}

/// A writer whose bytes the test can read back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn parse_rows(computation: Computation, text: &str) -> Vec<Row> {
    text.lines()
        .map(|line| {
            let fields: Vec<i64> = line.split(',').map(|f| f.parse().unwrap()).collect();
            match computation.columns() {
                2 => (
                    (fields[0] as u64, fields[1] as u64),
                    fields[2] as u64,
                    fields[3],
                ),
                _ => ((fields[0] as u64, 0), fields[1] as u64, fields[2]),
            }
        })
        .collect()
}

fn run_ripple(
    computation: Computation,
    source: &Arc<Source>,
    batch: u64,
    workers: usize,
) -> Vec<Row> {
    run_ripple_on(computation, source, batch, Cluster::local(workers))
}

fn run_ripple_on(
    computation: Computation,
    source: &Arc<Source>,
    batch: u64,
    cluster: Cluster,
) -> Vec<Row> {
    let buffer = Shared::default();
    let options = RunOptions {
        computation,
        roots: ROOTS.to_vec(),
        batch,
        cluster,
        progress: false,
        stats_every: None,
        config: RippleConfig::default(),
    };
    let input = RunInput::whole(Source::clone(source), batch);
    let report = run(Some(input), &options, Some(Box::new(buffer.clone())))
        .expect("the run succeeds")
        .expect("this process hosts worker 0");
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let rows = parse_rows(computation, &text);
    assert_eq!(report.rows, rows.len() as u64);
    rows
}

/// Differential-dataflow's version of `computation`, its output in ripple's `Value` form.
fn dd_program<'s>(
    computation: Computation,
    edges: Top<'s, Edge>,
    roots: Top<'s, Node>,
) -> Top<'s, Value> {
    match computation {
        Computation::Bfs => graph::bfs(edges, roots).map(|(_, depth)| (u64::from(depth), 0)),
        Computation::Reach => graph::reach(edges, roots).map(|node| (u64::from(node), 0)),
        Computation::Degrees => graph::degrees(edges).map(|(_, degree)| (degree as u64, 0)),
        Computation::Cc => {
            graph::components(edges).map(|(node, label)| (u64::from(node), u64::from(label)))
        }
    }
}

fn run_dd(computation: Computation, changes: &[EdgeChange]) -> Vec<Row> {
    let rows: Arc<Mutex<Vec<Row>>> = Arc::default();
    let sink = Arc::clone(&rows);
    let changes = changes.to_vec();
    timely::execute_directly(move |worker| {
        let probe = timely::dataflow::ProbeHandle::new();
        let (mut edges, mut roots) = worker.dataflow::<u64, _, _>(|scope| {
            let (edge_input, edges) = scope.new_collection::<Edge, i64>();
            let (root_input, roots) = scope.new_collection::<Node, i64>();
            let sink = Arc::clone(&sink);
            dd_program(computation, edges, roots)
                .inspect(move |(v, t, r)| sink.lock().unwrap().push((*v, *t, *r)))
                .probe_with(&probe);
            (edge_input, root_input)
        });
        for root in ROOTS {
            roots.update(root, 1);
        }
        roots.close();
        for change in &changes {
            edges.update_at(change.edge, change.time, change.diff);
        }
        edges.close();
        while worker.step_or_park(None) {}
    });
    let mut by_time: Vec<(u64, Value, i64)> = rows
        .lock()
        .unwrap()
        .iter()
        .map(|(v, t, r)| (*t, *v, *r))
        .collect();
    consolidate_triples(&mut by_time);
    by_time.into_iter().map(|(t, v, r)| (v, t, r)).collect()
}

#[test]
fn computations_match_reference_and_differential() {
    let seeds: u64 = std::env::var("RIPPLE_CLI_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    for seed in 0..seeds {
        let text = change_file(seed, 10, 25);
        let changes = read_changes(text.as_bytes(), "random.csv").expect("the file is valid");
        let source = Arc::new(Source::Changes {
            name: "random.csv".into(),
            changes: changes.clone(),
        });
        for computation in Computation::ALL {
            let expected = reference(computation, &changes);
            assert!(!expected.is_empty());
            let dd = run_dd(computation, &changes);
            assert_eq!(
                dd, expected,
                "{computation:?} seed {seed}: differential vs reference"
            );
            for (batch, workers) in [(1, 1), (3, 1), (1, 2), (7, 3), (1000, 2)] {
                let ripple = run_ripple(computation, &source, batch, workers);
                assert_eq!(
                    ripple, expected,
                    "{computation:?} seed {seed}, batch {batch}, {workers} workers"
                );
            }
        }
    }
}

#[test]
fn generated_runs_agree_across_batches_and_workers() {
    use ripple_cli::generator::GraphSpec;
    let source = Arc::new(Source::Generated(GraphSpec {
        nodes: 60,
        edges: 90,
        updates: 120,
        seed: 5,
    }));
    for computation in Computation::ALL {
        let first = run_ripple(computation, &source, 1, 1);
        assert!(!first.is_empty());
        for (batch, workers) in [(10, 1), (1, 2), (1000, 2)] {
            assert_eq!(
                run_ripple(computation, &source, batch, workers),
                first,
                "{computation:?} batch {batch}, {workers} workers"
            );
        }
        // Progress held back until it matters cuts rounds differently, never the output.
        let demand = Cluster {
            progress_mode: ProgressMode::Demand,
            ..Cluster::local(2)
        };
        assert_eq!(
            run_ripple_on(computation, &source, 10, demand),
            first,
            "{computation:?} batch 10, 2 workers, progress on demand"
        );
    }
}
