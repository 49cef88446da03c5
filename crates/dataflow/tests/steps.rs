//! Latency in worker steps: an iterative computation should need no more of timely's worker
//! steps than differential-dataflow's to finish an update. Each round of an iteration crosses
//! the same operators in both; an operator that waits a step for a frontier it could have
//! learned from the batches it received adds a step to every round.

mod common;

use differential_dataflow::input::Input;
use ripple_dataflow::InputSession;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;

/// A path 0 -> 1 -> ... -> 29: a shortcut edge from 0 changes the depth of most nodes, one
/// iteration round per node.
fn path() -> Vec<(u64, u64)> {
    (0..29).map(|node| (node, node + 1)).collect()
}

/// Worker steps to complete the update that adds edge 0 -> 10, for ripple's bfs (the program
/// the differential tests share).
fn ripple_steps() -> usize {
    timely::execute_directly(|worker| {
        let mut edges = InputSession::<u64, (u64, u64)>::new();
        let mut roots = InputSession::<u64, u64>::new();
        let probe = worker.dataflow::<u64, _, _>(|scope| {
            let (edges, roots) = (edges.to_collection(scope), roots.to_collection(scope));
            common::bfs::ripple(edges, roots).inner.probe().0
        });
        roots.insert(0);
        roots.close();
        for edge in path() {
            edges.insert(edge);
        }
        edges.advance_to(1).expect("forward");
        worker.step_while(|| probe.less_than(&1));
        edges.update_at((0, 10), 1, 1).expect("at the current time");
        edges.advance_to(2).expect("forward");
        let mut steps = 0;
        while probe.less_than(&2) {
            worker.step();
            steps += 1;
        }
        steps
    })
}

/// The same for differential-dataflow.
fn differential_steps() -> usize {
    timely::execute_directly(|worker| {
        let (mut edges, mut roots, probe) = worker.dataflow::<u64, _, _>(|scope| {
            let (edge_input, edges) = scope.new_collection::<(u64, u64), i64>();
            let (root_input, roots) = scope.new_collection::<u64, i64>();
            let probe: ProbeHandle<u64> = common::bfs::dd(edges, roots).inner.probe().0;
            (edge_input, root_input, probe)
        });
        roots.update(0, 1);
        roots.close();
        for edge in path() {
            edges.update(edge, 1);
        }
        edges.advance_to(1);
        edges.flush();
        worker.step_while(|| probe.less_than(&1));
        edges.update_at((0, 10), 1, 1);
        edges.advance_to(2);
        edges.flush();
        let mut steps = 0;
        while probe.less_than(&2) {
            worker.step();
            steps += 1;
        }
        steps
    })
}

#[test]
fn iteration_rounds_take_no_more_steps_than_differential() {
    let (ripple, differential) = (ripple_steps(), differential_steps());
    assert!(
        ripple <= differential,
        "ripple took {ripple} worker steps, differential-dataflow {differential}"
    );
}
