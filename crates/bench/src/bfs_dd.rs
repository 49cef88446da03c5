//! The baseline of the bfs benchmark: differential-dataflow 0.26 running the same bfs
//! (`ripple_oracle::graph::bfs`), driven
//! exactly like `ripple bfs` (same generator, same steps, output gathered on worker 0 and
//! checksummed the same way).

use differential_dataflow::input::Input;
use ripple_cli::changes::{Edge, Node};
use ripple_cli::computation::{Computation, Value};
use ripple_cli::options::RunOptions;
use ripple_cli::output::{OutputSink, Row};
use ripple_cli::source::{Source, Step};
use ripple_cli::stats::RunReport;
use ripple_oracle::graph::bfs;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;

/// Runs bfs over `source` on differential-dataflow with `options` (one process); returns the
/// report of worker 0.
pub fn run_dd(source: Arc<Source>, options: &RunOptions) -> RunReport {
    assert_eq!(
        options.computation,
        Computation::Bfs,
        "the baseline runs bfs"
    );
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
        let gathered: Rc<RefCell<Vec<Row>>> = Rc::default();
        let sink_rows = Rc::clone(&gathered);
        let (mut edges, roots, probe) = worker.dataflow::<u64, _, _>(|scope| {
            let (edge_input, edges) = scope.new_collection::<Edge, i64>();
            let (root_input, roots) = scope.new_collection::<Node, i64>();
            let output = bfs(edges, roots).map(|(_node, depth)| (u64::from(depth), 0u64));
            let probe: ProbeHandle<u64> = output
                .inner
                .unary::<timely::container::CapacityContainerBuilder<Vec<Row>>, _, _, _>(
                    Exchange::new(|_row: &(Value, u64, i64)| 0u64),
                    "Gather",
                    move |_capability, _info| {
                        move |input, _output| {
                            input.for_each(|_capability, rows| {
                                sink_rows.borrow_mut().extend(rows.drain(..));
                            });
                        }
                    },
                )
                .probe()
                .0;
            (edge_input, root_input, probe)
        });
        let mut roots = roots;
        if leader {
            for root in &options.roots {
                roots.update(*root, 1);
            }
        }
        roots.close();

        let plan = source.plan(options.batch);
        let mut feeder = source.feeder();
        let mut sink = OutputSink::new(options.computation, None);
        let mut report = RunReport::new(options, &source, &plan, worker.peers());
        let mut run_step = |worker: &mut timely::worker::Worker, step: Step| {
            let began = Instant::now();
            let fed = if leader {
                feeder.feed(step.end, |edge, time, diff| {
                    edges.update_at(edge, time, diff)
                })
            } else {
                0
            };
            edges.advance_to(step.end);
            edges.flush();
            worker.step_while(|| probe.less_than(&step.end));
            sink.step(&mut gathered.borrow_mut())
                .expect("no writer, nothing to fail");
            (began.elapsed(), fed)
        };
        if let Some(load) = plan.load() {
            let (elapsed, fed) = run_step(worker, load);
            report.load = elapsed;
            report.load_changes = fed;
        }
        let updates_began = Instant::now();
        for index in 0..plan.steps() {
            let (elapsed, _) = run_step(worker, plan.step(index));
            report.latencies.push(elapsed);
        }
        report.updates = updates_began.elapsed();
        let (checksum, rows) = sink.finish().expect("no writer, nothing to fail");
        report.checksum = checksum;
        report.rows = rows;
        leader.then_some(report)
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
