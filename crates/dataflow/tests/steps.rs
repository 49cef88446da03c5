//! Latency in worker steps: an iterative computation should need no more of timely's worker
//! steps than differential-dataflow's to finish an update. Each round of an iteration crosses
//! the same operators in both; an operator that waits a step for a frontier it could have
//! learned from the batches it received adds a step to every round.

use differential_dataflow::input::Input;
use differential_dataflow::operators::*;
use ripple_dataflow::InputSession;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;

/// A path 0 -> 1 -> ... -> 29: a shortcut edge from 0 changes the depth of most nodes, one
/// iteration round per node.
fn path() -> Vec<(u32, u32)> {
    (0..29).map(|node| (node, node + 1)).collect()
}

/// Worker steps to complete the update that adds edge 0 -> 10, for ripple's bfs.
fn ripple_steps() -> usize {
    timely::execute_directly(|worker| {
        let mut edges = InputSession::<u64, (u32, u32)>::new();
        let mut roots = InputSession::<u64, u32>::new();
        let probe = worker.dataflow::<u64, _, _>(|scope| {
            let edges = edges.to_collection(scope);
            let start = roots.to_collection(scope).map(|root| (root, 0u32));
            start
                .clone()
                .iterate(|scope, depths| {
                    let edges = edges.enter(scope);
                    let start = start.enter(scope);
                    depths
                        .join_map(edges, |_src, depth, dst| (*dst, depth + 1))
                        .concat(start)
                        .min()
                })
                .inner
                .probe()
                .0
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
            let (edge_input, edges) = scope.new_collection::<(u32, u32), i64>();
            let (root_input, roots) = scope.new_collection::<u32, i64>();
            let start = roots.map(|root| (root, 0u32));
            let probe: ProbeHandle<u64> = start
                .clone()
                .iterate(|scope, depths| {
                    let edges = edges.enter(scope);
                    let start = start.enter(scope);
                    depths
                        .join_map(edges, |_src, depth, dst| (*dst, depth + 1))
                        .concat(start)
                        .reduce(|_node, input, output| output.push((*input[0].0, 1i64)))
                })
                .inner
                .probe()
                .0;
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
