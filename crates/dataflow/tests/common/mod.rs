//! Shared harness: random change streams over graphs and runners that collect consolidated
//! outputs. The programs, each in a ripple and a differential-dataflow version, live in
//! `ripple_oracle::programs`.

#![allow(dead_code)]

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use ripple_batcher::BatcherConfig;
use ripple_dataflow::{Captured, InputSession, RippleConfig};
use ripple_storage::{SpillDir, Storage, StorageSettings};
use std::sync::Arc;

#[allow(unused_imports)] // each test binary uses its own part of the harness
pub use ripple_oracle::programs::{bfs, programs, DdProgram, Edge, RippleProgram};
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
    /// With `Some((memory_budget, cache_bytes))`, arrangements spill to a storage tier of that
    /// budget and cache, in blocks of a few updates.
    pub storage: Option<(usize, usize)>,
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
            storage: None,
        }
    }
}

/// A storage tier of `memory_budget` (of which `cache_bytes` for the cache) in a fresh spill
/// directory, with blocks of about four updates so that batches span many blocks.
pub fn tiny_storage(memory_budget: usize, cache_bytes: usize) -> Arc<Storage> {
    let settings = StorageSettings {
        memory_budget: memory_budget.max(cache_bytes),
        cache_bytes,
        working_bytes: 0,
        block_updates: 4,
        filters: true,
        spill_min_bytes: 0,
    };
    let spill = SpillDir::new_in_temp().expect("a spill directory");
    Arc::new(Storage::in_spill_dir(spill, settings))
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
    let storage = setup
        .storage
        .map(|(budget, cache)| tiny_storage(budget, cache));
    RippleConfig {
        batcher: BatcherConfig::with_chunk_bytes(setup.chunk_bytes),
        probe_run: setup.probe_run,
        lockstep_iterations: setup.lockstep,
        storage: storage.clone(),
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
    if let Some(storage) = storage {
        let stats = storage.stats();
        assert_eq!(
            stats.files_written, stats.files_deleted,
            "files left behind"
        );
        assert_eq!(stats.batch_bytes, 0, "spines still accounted for");
        assert_eq!(
            stats.held_bytes, 0,
            "operators' held bytes still accounted for"
        );
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
