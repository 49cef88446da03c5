//! Shared harness: random change streams over graphs, the same programs written for ripple and
//! for differential-dataflow, and runners that collect consolidated outputs.

#![allow(dead_code)]

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use ripple_batcher::BatcherConfig;
use ripple_dataflow::{Captured, InputSession, RippleConfig};
use std::sync::Arc;

pub type Edge = (u64, u64);
pub type Row = (Edge, u64, i64);

/// Edge and root changes at random times in `0..=max_time`.
#[derive(Clone, Debug)]
pub struct Workload {
    pub edges: Vec<(Edge, u64, i64)>,
    pub roots: Vec<(u64, u64, i64)>,
    pub max_time: u64,
}

/// `edges` random edges over `nodes` at time 0; then `changes` insertions of new random edges
/// and as many removals of earlier edges, each at a random time in `1..=max_time`, with the
/// removal never before the insertion. Roots: node 0 at time 0, node 1 joins at `max_time / 2`.
pub fn workload(seed: u64, nodes: u64, edges: usize, changes: usize, max_time: u64) -> Workload {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut present: Vec<(Edge, u64)> = Vec::new();
    let mut updates = Vec::new();
    for _ in 0..edges {
        let edge = (rng.gen_range(0..nodes), rng.gen_range(0..nodes));
        updates.push((edge, 0, 1));
        present.push((edge, 0));
    }
    for _ in 0..changes {
        let time = rng.gen_range(1..=max_time);
        let edge = (rng.gen_range(0..nodes), rng.gen_range(0..nodes));
        updates.push((edge, time, 1));
        present.push((edge, time));
        let victim = rng.gen_range(0..present.len());
        let (edge, since) = present.swap_remove(victim);
        updates.push((edge, rng.gen_range(since..=max_time), -1));
    }
    updates.sort_by_key(|(_, time, _)| *time);
    Workload {
        edges: updates,
        roots: vec![(0, 0, 1), (1, max_time / 2, 1)],
        max_time,
    }
}

/// Defines a program once, for both engines: `$name::ripple` and `$name::dd` share `$body`.
#[macro_export]
macro_rules! program {
    ($name:ident, |$edges:ident, $roots:ident| $body:block) => {
        pub mod $name {
            #[allow(unused_imports)]
            use differential_dataflow::operators::*;
            pub fn ripple<'s>(
                $edges: ripple_dataflow::Collection<'s, u64, (u64, u64)>,
                $roots: ripple_dataflow::Collection<'s, u64, u64>,
            ) -> ripple_dataflow::Collection<'s, u64, (u64, u64)> {
                $body
            }
            pub fn dd<'s>(
                $edges: differential_dataflow::VecCollection<'s, u64, (u64, u64), i64>,
                $roots: differential_dataflow::VecCollection<'s, u64, u64, i64>,
            ) -> differential_dataflow::VecCollection<'s, u64, (u64, u64), i64> {
                $body
            }
        }
    };
}

pub type RippleProgram = for<'s> fn(
    ripple_dataflow::Collection<'s, u64, Edge>,
    ripple_dataflow::Collection<'s, u64, u64>,
) -> ripple_dataflow::Collection<'s, u64, Edge>;

pub type DdProgram = for<'s> fn(
    differential_dataflow::VecCollection<'s, u64, Edge, i64>,
    differential_dataflow::VecCollection<'s, u64, u64, i64>,
) -> differential_dataflow::VecCollection<'s, u64, Edge, i64>;

/// How a ripple run is set up.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Worker threads.
    pub workers: usize,
    /// Serialize containers between workers of the process (timely's `ProcessBinary`).
    pub binary: bool,
    /// Distinct input times fed before the workers run to completion for them.
    pub batch: u64,
    /// The merge batchers' chunk capacity in bytes.
    pub chunk_bytes: usize,
    /// Keys per batched lookup in join and reduce.
    pub probe_run: usize,
    /// [`RippleConfig::lockstep_iterations`]: reduces in loops hold one capability at the meet
    /// of their pending times (with more than one worker).
    pub lockstep: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            workers: 1,
            binary: false,
            batch: 1,
            chunk_bytes: BatcherConfig::default().chunk_bytes_max,
            probe_run: RippleConfig::PROBE_RUN_DEFAULT,
            lockstep: false,
        }
    }
}

/// Feeds `workload` to `program` on this worker (worker 0 supplies the data) and runs until
/// every time is complete; output goes to `sink`.
pub fn drive_ripple(
    worker: &mut timely::worker::Worker,
    workload: &Workload,
    batch: u64,
    program: RippleProgram,
    sink: &Captured<Edge, u64, i64>,
) {
    let mut edges = InputSession::<u64, Edge>::new();
    let mut roots = InputSession::<u64, u64>::new();
    let probe = worker.dataflow(|scope| {
        let output = program(edges.to_collection(scope), roots.to_collection(scope));
        let (probe, output) = output.probe();
        output.capture_into(sink);
        probe
    });
    let feeds = worker.index() == 0;
    let (mut next_edge, mut next_root) = (0, 0);
    let mut start = 0;
    while start <= workload.max_time {
        let end = start + batch;
        if feeds {
            while next_edge < workload.edges.len() && workload.edges[next_edge].1 < end {
                let (edge, time, diff) = workload.edges[next_edge];
                edges
                    .update_at(edge, time, diff)
                    .expect("times are fed in order");
                next_edge += 1;
            }
            while next_root < workload.roots.len() && workload.roots[next_root].1 < end {
                let (root, time, diff) = workload.roots[next_root];
                roots
                    .update_at(root, time, diff)
                    .expect("times are fed in order");
                next_root += 1;
            }
        }
        edges.advance_to(end).unwrap();
        roots.advance_to(end).unwrap();
        worker.step_while(|| probe.less_than(&end));
        start = end;
    }
}

/// Runs `program` on ripple with `setup`, returning its consolidated output.
pub fn run_ripple(workload: &Workload, setup: Setup, program: RippleProgram) -> Vec<Row> {
    let captured = Captured::new();
    let sink = captured.clone();
    let workload = Arc::new(workload.clone());
    let mut config = if setup.binary {
        timely::Config {
            communication: timely::CommunicationConfig::ProcessBinary(setup.workers),
            worker: timely::WorkerConfig::default(),
        }
    } else {
        timely::Config::process(setup.workers)
    };
    RippleConfig {
        batcher: BatcherConfig::with_chunk_bytes(setup.chunk_bytes),
        probe_run: setup.probe_run,
        lockstep_iterations: setup.lockstep,
        ..RippleConfig::default()
    }
    .install(&mut config.worker);
    let guards = timely::execute(config, move |worker| {
        drive_ripple(worker, &workload, setup.batch, program, &sink);
    })
    .expect("timely starts");
    for result in guards.join() {
        result.expect("worker completes");
    }
    captured.consolidated()
}

/// Runs `program` on differential-dataflow (one worker, one time per step).
pub fn run_dd(workload: &Workload, program: DdProgram) -> Vec<Row> {
    use differential_dataflow::input::Input;
    use timely::dataflow::operators::probe::Handle;
    let captured = Captured::<Edge, u64, i64>::new();
    let sink = captured.clone();
    let workload = workload.clone();
    timely::execute_directly(move |worker| {
        let probe = Handle::new();
        let (mut edges, mut roots) = worker.dataflow::<u64, _, _>(|scope| {
            let (edge_input, edges) = scope.new_collection::<Edge, i64>();
            let (root_input, roots) = scope.new_collection::<u64, i64>();
            let sink = sink.clone();
            program(edges, roots)
                .inspect(move |(data, time, diff)| {
                    sink.push_row(*data, *time, *diff);
                })
                .probe_with(&probe);
            (edge_input, root_input)
        });
        let (mut next_edge, mut next_root) = (0, 0);
        for time in 0..=workload.max_time {
            while next_edge < workload.edges.len() && workload.edges[next_edge].1 == time {
                let (edge, _, diff) = workload.edges[next_edge];
                edges.update(edge, diff);
                next_edge += 1;
            }
            while next_root < workload.roots.len() && workload.roots[next_root].1 == time {
                let (root, _, diff) = workload.roots[next_root];
                roots.update(root, diff);
                next_root += 1;
            }
            edges.advance_to(time + 1);
            roots.advance_to(time + 1);
            edges.flush();
            roots.flush();
            worker.step_while(|| probe.less_than(&(time + 1)));
        }
    });
    captured.consolidated()
}

// The programs, each written once for both engines.

program!(map_filter, |edges, roots| {
    let _ = roots;
    edges
        .clone()
        .map(|(a, b)| (b, a * 2 + 1))
        .filter(|(a, b)| (*a + *b) % 3 != 0)
        .flat_map(|(a, b)| [(a, b), (b % 4, a)])
        .concat(edges.map(|(a, b)| (a % 5, b)).negate())
        .consolidate()
});

program!(join_chain, |edges, roots| {
    let two = edges
        .clone()
        .map(|(a, b)| (b, a))
        .join_map(edges.clone(), |_mid, a, c| (*a, *c));
    let three = two
        .clone()
        .map(|(a, c)| (c, a))
        .join_map(edges.clone(), |_c, a, d| (*a, *d));
    let reached = edges
        .clone()
        .semijoin(roots.clone())
        .map(|(a, b)| (a + 100, b));
    let missed = edges.antijoin(roots).map(|(a, b)| (a + 200, b));
    two.concat(three).concat(reached).concat(missed)
});

program!(reductions, |edges, roots| {
    let _ = roots;
    let counts = edges
        .clone()
        .map(|(a, _)| a)
        .count_core::<i64>()
        .map(|(a, c)| (a, c as u64));
    let distinct = edges
        .clone()
        .map(|(_, b)| b % 7)
        .distinct_core::<i64>()
        .map(|x| (x + 1000, 0));
    let threshold = edges
        .clone()
        .map(|(a, _)| a % 5)
        .threshold(|_, c| if *c >= 2 { 1 } else { 0 })
        .map(|x| (x + 2000, 0));
    let min = edges
        .clone()
        .reduce(|_, input, output| output.push((*input[0].0, 1i64)))
        .map(|(a, m)| (a + 3000, m));
    let max = edges
        .reduce(|_, input, output| output.push((*input[input.len() - 1].0, 1i64)))
        .map(|(a, m)| (a + 4000, m));
    counts
        .concat(distinct)
        .concat(threshold)
        .concat(min)
        .concat(max)
});

program!(bfs, |edges, roots| {
    let nodes = roots.map(|x| (x, 0u64));
    nodes.clone().iterate(|scope, inner| {
        let edges = edges.enter(scope);
        let nodes = nodes.enter(scope);
        inner
            .join_map(edges, |_k, l, d| (*d, l + 1))
            .concat(nodes)
            .reduce(|_, s, t| t.push((*s[0].0, 1i64)))
    })
});

program!(reach, |edges, roots| {
    roots
        .iterate(|scope, reached| {
            let edges = edges.enter(scope);
            reached
                .clone()
                .map(|x| (x, x))
                .join_map(edges, |_src, _, dst| *dst)
                .concat(reached)
                .distinct_core::<i64>()
        })
        .map(|x| (x, 0))
});

program!(components, |edges, roots| {
    let _ = roots;
    let undirected = edges.clone().concat(edges.map(|(a, b)| (b, a)));
    let nodes = undirected
        .clone()
        .map(|(a, _)| (a, a))
        .distinct_core::<i64>();
    nodes.clone().iterate(|scope, labels| {
        let undirected = undirected.enter(scope);
        let nodes = nodes.enter(scope);
        labels
            .join_map(undirected, |_node, label, next| (*next, *label))
            .concat(nodes)
            .reduce(|_, s, t| t.push((*s[0].0, 1i64)))
    })
});

/// Keeps the edges of `edges` whose endpoints get the same label when the least node id is
/// propagated along `cycle` (a nested iteration); returns them reversed.
#[macro_export]
macro_rules! trim {
    ($cycle:expr, $edges:expr) => {{
        let cycle = $cycle;
        let edges = $edges;
        let nodes = edges.clone().map(|(_, b)| (b, b)).consolidate();
        let labels = nodes.clone().iterate(|scope, labels| {
            let cycle = cycle.enter(scope);
            let nodes = nodes.enter(scope);
            labels
                .join_map(cycle, |_node, label, next| (*next, *label))
                .concat(nodes)
                .reduce(|_, s, t| t.push((*s[0].0, 1i64)))
        });
        edges
            .join_map(labels.clone(), |e1, e2, l1| (*e2, (*e1, *l1)))
            .join_map(labels, |e2, (e1, l1), l2| ((*e1, *e2), (*l1, *l2)))
            .filter(|(_, (l1, l2))| l1 == l2)
            .map(|((x1, x2), _)| (x2, x1))
    }};
}

program!(nested_reach, |edges, roots| {
    // A loop holding both a reduce of its own (the last `distinct`) and a nested loop with
    // reduces inside: with `lockstep_iterations` the outer reduce may hold the meet of its
    // pending times, the inner ones never do.
    roots
        .iterate(|scope, reached| {
            let edges = edges.enter(scope);
            let stepped = reached
                .clone()
                .map(|x| (x, x))
                .join_map(edges.clone(), |_src, _, dst| *dst);
            let onwards = stepped.iterate(|inner, found| {
                let edges = edges.enter(inner);
                found
                    .clone()
                    .map(|x| (x, x))
                    .join_map(edges, |_src, _, dst| *dst)
                    .filter(|dst| dst % 2 == 0)
                    .concat(found)
                    .distinct_core::<i64>()
            });
            onwards.concat(reached).distinct_core::<i64>()
        })
        .map(|x| (x, 0))
});

program!(scc, |edges, roots| {
    let _ = roots;
    edges.clone().iterate(|scope, cycles| {
        let edges = edges.enter(scope);
        let forward = trim!(cycles, edges.clone());
        let reverse = edges.map(|(a, b)| (b, a));
        trim!(forward, reverse)
    })
});

/// Every program: name, ripple version, differential version.
pub fn programs() -> Vec<(&'static str, RippleProgram, DdProgram)> {
    vec![
        ("map_filter", map_filter::ripple, map_filter::dd),
        ("join_chain", join_chain::ripple, join_chain::dd),
        ("reductions", reductions::ripple, reductions::dd),
        ("bfs", bfs::ripple, bfs::dd),
        ("reach", reach::ripple, reach::dd),
        ("components", components::ripple, components::dd),
        ("nested_reach", nested_reach::ripple, nested_reach::dd),
        ("scc", scc::ripple, scc::dd),
    ]
}
