//! The driver: builds the dataflow on every worker, feeds the source step by step from worker
//! 0, gathers the output on worker 0, and measures.

use crate::changes::{Edge, Node};
use crate::computation::Value;
use crate::options::RunOptions;
use crate::output::{Checksum, OutputSink, Row};
use crate::progress::Progress;
use crate::source::{Source, Step};
use crate::stats::{peak_resident_bytes, RunReport};
use ripple_dataflow::exchange::exchange_by;
use ripple_dataflow::{Collection, InputSession, RippleConfig, UpdateContainer};
use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

/// Why a run failed after its input was read.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("could not start the workers: {0}")]
    Start(String),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    #[error("a worker failed: {0}")]
    Worker(String),
}

/// Runs `options.computation` over `source`, writing output lines to `writer` (if any).
/// Returns the report in the process that hosts worker 0, `None` in the others.
pub fn run(
    source: Arc<Source>,
    options: &RunOptions,
    writer: Option<Box<dyn Write + Send>>,
) -> Result<Option<RunReport>, RunError> {
    let started = Instant::now();
    let mut config = timely::Config {
        communication: options.cluster.communication(),
        worker: timely::WorkerConfig::default().progress_mode(options.cluster.progress_mode.into()),
    };
    // Each computation here is one ripple loop at most (a `Variable`'s or an
    // `ArrangedVariable`'s, advancing the round alone), and no other cycle: what
    // `lockstep_iterations` requires.
    RippleConfig {
        lockstep_iterations: true,
        ..options.config.clone()
    }
    .install(&mut config.worker);
    let writer = Arc::new(Mutex::new(writer));
    let shared = Arc::new(options.clone());
    let guards = timely::execute(config, move |worker| {
        let writer = if worker.index() == 0 {
            writer
                .lock()
                .map(|mut writer| writer.take())
                .unwrap_or(None)
        } else {
            None
        };
        drive(worker, &source, &shared, writer)
    })
    .map_err(RunError::Start)?;
    let mut report = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Some(mut found))) => {
                found.total = started.elapsed();
                report = Some(found);
            }
            Ok(Ok(None)) => {}
            Ok(Err(error)) => return Err(error.into()),
            Err(panic) => return Err(RunError::Worker(panic)),
        }
    }
    Ok(report)
}

/// The feeding, stepping and measuring of one worker; worker 0 returns the report.
fn drive(
    worker: &mut Worker,
    source: &Source,
    options: &RunOptions,
    writer: Option<Box<dyn Write + Send>>,
) -> std::io::Result<Option<RunReport>> {
    let leader = worker.index() == 0;
    let peers = worker.peers();
    let mut edges = InputSession::<u64, Edge>::new();
    let mut roots = InputSession::<u64, Node>::new();
    let gathered: Rc<RefCell<Vec<Row>>> = Rc::default();
    let probe = worker.dataflow(|scope| {
        let output = options
            .computation
            .build(edges.to_collection(scope), roots.to_collection(scope));
        gather(output, Rc::clone(&gathered))
    });
    if leader && options.computation.uses_roots() {
        for root in &options.roots {
            roots.insert(*root);
        }
    }
    // Roots never change: closing their input lets every later time complete.
    roots.close();

    let plan = source.plan(options.batch);
    let mut feeder = source.feeder();
    let mut sink = OutputSink::new(options.computation, writer);
    let mut run_step = |worker: &mut Worker, step: Step, sink: &mut OutputSink| {
        let began = Instant::now();
        let fed = if leader {
            feeder.feed(step.end, |edge, time, diff| {
                edges
                    .update_at(edge, time, diff)
                    .expect("the feeder hands out times in order, none before the step");
            })
        } else {
            0
        };
        edges
            .advance_to(step.end)
            .expect("steps advance the input forward");
        worker.step_while(|| probe.less_than(&step.end));
        sink.step(&mut gathered.borrow_mut())
            .map(|()| (began.elapsed(), fed))
    };

    let mut report = RunReport::new(options, source, &plan, peers);
    if let Some(load) = plan.load() {
        let (elapsed, fed) = run_step(worker, load, &mut sink)?;
        report.load = elapsed;
        report.load_changes = fed;
    }
    let mut progress = Progress::new(options.progress && leader, plan.steps());
    let updates_began = Instant::now();
    for index in 0..plan.steps() {
        let (elapsed, _fed) = run_step(worker, plan.step(index), &mut sink)?;
        report.latencies.push(elapsed);
        progress.advance(index + 1);
    }
    report.updates = updates_began.elapsed();
    progress.finish();
    if !leader {
        return Ok(None);
    }
    let (checksum, rows): (Checksum, u64) = sink.finish()?;
    report.checksum = checksum;
    report.rows = rows;
    report.peak_resident = peak_resident_bytes();
    Ok(Some(report))
}

/// Sends every output update to worker 0's `rows`; the probe returned passes a time only once
/// worker 0 holds every update before it.
fn gather<'s>(output: Collection<'s, u64, Value>, rows: Rc<RefCell<Vec<Row>>>) -> ProbeHandle<u64> {
    let gathered = output
        .inner
        .unary::<CapacityContainerBuilder<UpdateContainer<Value, u64, i64>>, _, _, _>(
            exchange_by(|_| 0),
            "Gather",
            move |_capability, _info| {
                move |input, _output| {
                    input.for_each(|_capability, container| {
                        rows.borrow_mut().extend(container.rows());
                    });
                }
            },
        );
    Collection::new(gathered).probe().0
}
