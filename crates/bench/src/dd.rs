//! The baseline of the benchmarks: differential-dataflow 0.26 running the same computation
//! (`ripple_oracle::graph`), driven exactly like `ripple` (same input, same steps fed by
//! worker 0 alone, output rows made alike, gathered on worker 0 and checksummed the same
//! way).

use differential_dataflow::input::Input;
use differential_dataflow::VecCollection;
use ripple_cli::changes::{Edge, Node};
use ripple_cli::computation::{Computation, Value};
use ripple_cli::options::RunOptions;
use ripple_cli::output::{OutputSink, Row, TimedRow};
use ripple_cli::source::{Fed, Feed, Source};
use ripple_cli::stats::RunReport;
use ripple_oracle::graph::{bfs, components, degrees, reach, Top};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;

/// Runs `options.computation` over `source` on differential-dataflow with `options` (one
/// process); returns the report of worker 0.
pub fn run_dd(source: Arc<Source>, options: &RunOptions) -> RunReport {
    assert_eq!(
        options.cluster.hosts.len(),
        1,
        "the baseline runs in one process"
    );
    let started = Instant::now();
    let config = timely::Config::process(options.cluster.workers);
    let shared = Arc::new(options.clone());
    let guards = timely::execute(config, move |worker| {
        let options = &*shared;
        let leader = worker.index() == 0;
        let gathered: Rc<RefCell<Vec<TimedRow>>> = Rc::default();
        let sink_rows = Rc::clone(&gathered);
        let (mut edges, roots, probe) = worker.dataflow::<u64, _, _>(|scope| {
            let (edge_input, edges) = scope.new_collection::<Edge, i64>();
            let (root_input, roots) = scope.new_collection::<Node, i64>();
            let output = rows(options.computation, edges, roots);
            let probe: ProbeHandle<u64> = output
                .inner
                .unary::<timely::container::CapacityContainerBuilder<Vec<Row>>, _, _, _>(
                    Exchange::new(|_row: &(Value, u64, i64)| 0u64),
                    "Gather",
                    move |_capability, _info| {
                        move |input, _output| {
                            input.for_each(|_capability, rows| {
                                sink_rows.borrow_mut().extend(
                                    rows.drain(..)
                                        .map(|(value, time, diff)| (time, value, diff)),
                                );
                            });
                        }
                    },
                )
                .probe()
                .0;
            (edge_input, root_input, probe)
        });
        let mut roots = roots;
        if !leader {
            // As in `ripple`: the input's frontier is worker 0's alone.
            roots.close();
            edges.close();
            while !probe.done() {
                worker.step_or_park(None);
            }
            return None;
        }
        for root in &options.roots {
            roots.update(*root, 1);
        }
        roots.close();

        let mut feed = Source::clone(&source).into_feed();
        let mut sink = OutputSink::new(options.computation, None, false);
        let mut report = RunReport::new(options, source.describe(), worker.peers());
        let mut updates_began = None;
        loop {
            let began = Instant::now();
            let max_times = if updates_began.is_some() {
                options.batch
            } else {
                1
            };
            let fed = feed.feed(max_times, None, &mut |edge, time, diff| {
                edges.update_at(edge, time, diff)
            });
            let Fed::Step {
                end,
                times,
                changes,
            } = fed.expect("a source read whole has no errors")
            else {
                break;
            };
            edges.advance_to(end);
            edges.flush();
            worker.step_while(|| probe.less_than(&end));
            sink.step(&mut gathered.borrow_mut())
                .expect("no writer, nothing to fail");
            if updates_began.is_none() {
                report.load = began.elapsed();
                report.load_changes = changes;
                updates_began = Some(Instant::now());
            } else {
                report.latencies.record(began.elapsed());
                report.update_times += times;
                report.update_changes += changes;
            }
        }
        report.updates = updates_began.map_or_else(Default::default, |began| began.elapsed());
        edges.close();
        while !probe.done() {
            worker.step();
        }
        let (checksum, rows) = sink.finish().expect("no writer, nothing to fail");
        report.checksum = checksum;
        report.rows = rows;
        Some(report)
    })
    .expect("timely starts");
    let mut report = guards
        .join()
        .into_iter()
        .map(|result| result.expect("worker completes"))
        .find_map(|report| report)
        .expect("worker 0 reports");
    report.total = started.elapsed();
    report
}

/// The computation's output as the rows `ripple` makes of it (`Computation::build`).
fn rows<'s>(
    computation: Computation,
    edges: Top<'s, Edge>,
    roots: Top<'s, Node>,
) -> VecCollection<'s, u64, Value, i64> {
    match computation {
        Computation::Bfs => bfs(edges, roots).map(|(_node, depth)| (u64::from(depth), 0)),
        Computation::Reach => reach(edges, roots).map(|node| (u64::from(node), 0)),
        Computation::Degrees => degrees(edges).map(|(_node, degree)| (degree as u64, 0)),
        Computation::Cc => {
            components(edges).map(|(node, label)| (u64::from(node), u64::from(label)))
        }
    }
}
