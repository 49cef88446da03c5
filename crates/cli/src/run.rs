//! The driver: builds the dataflow on every worker, feeds the input step by step from worker
//! 0, gathers the output on worker 0, and measures.
//!
//! Only worker 0 holds the input: the other workers close theirs at once, so the input's
//! frontier is worker 0's, and they step (parking when idle) until the dataflow is complete.
//! Worker 0 takes the first time alone (the load), then up to `--batch` complete times per step
//! from its [`Feed`], runs until the output is complete to the step's end, and writes the
//! step's rows (flushed at once for a stream).

use crate::changes::{Edge, InputError, Node};
use crate::cluster::{ClusterError, Sockets};
use crate::computation::Value;
use crate::options::RunOptions;
use crate::output::{OutputSink, TimedRow};
use crate::progress::Progress;
use crate::source::{Fed, Feed, Position, Source};
use crate::state::{Durability, OutputMark};
use crate::stats::{peak_resident_bytes, RunReport, Ticker};
use ripple_dataflow::counts::WorkCounts;
use ripple_dataflow::exchange::exchange_by;
use ripple_dataflow::{Collection, InputSession, RippleConfig, UpdateContainer};
use ripple_durable::DurableError;
use ripple_updates::consolidate::consolidate_owned_triples;
use std::cell::RefCell;
use std::io::Write;
use std::net::TcpStream;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

/// Why a run failed after it started.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("could not start the workers: {0}")]
    Start(String),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    /// A streamed input went wrong (the rows of the times completed before were written).
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("a worker failed: {0}")]
    Worker(String),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A checkpoint could not be written, or the state resumed from read.
    #[error("--state-dir: {0}")]
    State(#[from] DurableError),
}

/// A run's input, for the process hosting worker 0.
pub struct Input {
    /// What the input is, for `--summary`.
    pub description: String,
    pub feed: Box<dyn Feed>,
    /// A stream: each step's rows are flushed at once, and the number of steps is unknown.
    pub streaming: bool,
    /// How many steps the run makes, when known (for the progress bar).
    pub steps: Option<u64>,
    /// The run's checkpoints, with `--state-dir`.
    pub durable: Option<Durability>,
}

impl Input {
    /// An input read whole, fed the first time alone, then `batch` times per step.
    pub fn whole(source: Source, batch: u64) -> Self {
        Self::whole_from(source, batch, 0)
    }

    /// Like [`Input::whole`], from time `from` on (a resumed run's).
    pub fn whole_from(source: Source, batch: u64, from: u64) -> Self {
        Self {
            description: source.describe(),
            steps: Some(source.steps_from(batch, from)),
            streaming: false,
            feed: Box::new(source.into_feed_from(from)),
            durable: None,
        }
    }
}

/// Runs `options.computation`, writing output lines to `writer` (if any). The process hosting
/// worker 0 passes the `input` and gets the report; other processes pass `None` and get `None`.
/// A cluster's processes connect first (see [`crate::cluster`]).
pub fn run(
    input: Option<Input>,
    options: &RunOptions,
    writer: Option<Box<dyn Write + Send>>,
) -> Result<Option<RunReport>, RunError> {
    run_on(input, options, writer, None)
}

/// Like [`run`], for a cluster over the connections `sockets` made before (by
/// [`crate::cluster::connect`]; `None`: connect now).
pub fn run_on(
    input: Option<Input>,
    options: &RunOptions,
    writer: Option<Box<dyn Write + Send>>,
    sockets: Option<Sockets>,
) -> Result<Option<RunReport>, RunError> {
    use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
    use timely::communication::allocator::ProcessBuilder;
    use timely::communication::{AllocatorBuilder, Hooks};
    let started = Instant::now();
    let mut worker_config =
        timely::WorkerConfig::default().progress_mode(options.cluster.progress_mode.into());
    // Each computation here is one ripple loop at most (a `Variable`'s or an
    // `ArrangedVariable`'s, advancing the round alone), and no other cycle: what
    // `lockstep_iterations` requires.
    RippleConfig {
        lockstep_iterations: true,
        ..options.config.clone()
    }
    .install(&mut worker_config);
    let leading = Arc::new(Mutex::new(input.map(|input| (input, writer))));
    let shared = Arc::new(options.clone());
    let panics: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = Arc::clone(&panics);
    let abort = Arc::new(AtomicBool::new(false));
    // The work of each worker, given the process's connections to the others (none in one
    // process).
    let work = move |connections: Arc<Vec<TcpStream>>| {
        move |worker: &mut Worker| {
            let leads = if worker.index() == 0 {
                leading.lock().map(|mut taken| taken.take()).unwrap_or(None)
            } else {
                None
            };
            // A panic is reported with its message (timely's join would show only `Any`). The
            // dataflows it left half-updated are dropped, not stepped again, and the other workers
            // stop too: they would wait forever for progress from this one. (A storage fault's
            // payload says nothing: the fault itself is recorded in `Storage`.)
            let driven = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                drive(worker, &shared, leads, &abort)
            }));
            driven.unwrap_or_else(|payload| {
                let message = panic_message(&*payload);
                recorded
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(message.clone());
                abort.store(true, Ordering::Release);
                drop_dataflows(worker);
                // The other processes would wait for this one's progress: end the connections.
                // (A storage fault's message is the one `Storage` recorded.)
                if !connections.is_empty() {
                    let storage = shared.config.storage.as_ref();
                    let reason = storage
                        .and_then(|storage| storage.fault())
                        .unwrap_or(message.clone());
                    eprintln!("ripple: error: {reason}; stopping the other processes");
                    crate::cluster::stop_peers(&connections);
                }
                Err(RunError::Worker(message))
            })
        }
    };
    let cluster = &options.cluster;
    let guards = if cluster.hosts.len() > 1 {
        let sockets = match sockets {
            Some(sockets) => sockets,
            None => crate::cluster::connect(options, cluster.connect_timeout)?,
        };
        let connections: Vec<TcpStream> = sockets
            .iter()
            .flatten()
            .filter_map(|socket| socket.try_clone().ok())
            .collect();
        let work = work(Arc::new(connections));
        let hooks = Hooks::default();
        let local = ProcessBuilder::new_typed_vector(
            cluster.workers,
            hooks.refill.clone(),
            hooks.spill.clone(),
        );
        let (builders, guard) = initialize_networking_from_sockets(
            local,
            sockets,
            cluster.process,
            cluster.workers,
            hooks,
        )
        .map_err(|error| RunError::Start(error.to_string()))?;
        let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
        timely::execute::execute_from(builders, Box::new(guard), worker_config, work)
    } else {
        let config = timely::Config {
            communication: cluster.communication(),
            worker: worker_config,
        };
        timely::execute(config, work(Arc::default()))
    }
    .map_err(RunError::Start)?;
    let mut report = None;
    let mut failure = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Some(mut found))) => {
                found.total = started.elapsed();
                report = Some(found);
            }
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                failure.get_or_insert(error);
            }
            Err(panic) => {
                failure.get_or_insert(RunError::Worker(panic));
            }
        }
    }
    // The panic that stopped the run, rather than the other workers' stopping.
    let panicked = panics
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .first()
        .cloned();
    match (panicked, failure) {
        (Some(message), _) => Err(RunError::Worker(message)),
        (None, Some(error)) => Err(error),
        (None, None) => Ok(report),
    }
}

/// Drops every dataflow of `worker` without stepping it, so that its thread can end.
fn drop_dataflows(worker: &mut Worker) {
    for dataflow in worker.installed_dataflows() {
        worker.drop_dataflow(dataflow);
    }
}

/// How long a waiting worker sleeps before it looks whether another one failed.
const ABORT_POLL: Duration = Duration::from_millis(50);

/// How many changes worker 0 feeds (in one call of its feed) between steps of the dataflow.
const STEP_EVERY_CHANGES: usize = 1 << 18;

/// The error of a worker stopped because another failed.
fn stopped(worker: &mut Worker) -> RunError {
    drop_dataflows(worker);
    RunError::Worker("stopped: another worker failed".into())
}

/// The message a panic was raised with.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_string()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// The dataflow of one worker, fed by worker 0 (which gets `leads`, the input and the
/// writer) and returning its report.
fn drive(
    worker: &mut Worker,
    options: &RunOptions,
    leads: Option<(Input, Option<Box<dyn Write + Send>>)>,
    abort: &AtomicBool,
) -> Result<Option<RunReport>, RunError> {
    let aborted = || abort.load(Ordering::Acquire);
    let peers = worker.peers();
    let mut edges = InputSession::<u64, Edge>::new();
    let mut roots = InputSession::<u64, Node>::new();
    let gathered: Rc<RefCell<Vec<TimedRow>>> = Rc::default();
    let probe = worker.dataflow(|scope| {
        let output = options
            .computation
            .build(edges.to_collection(scope), roots.to_collection(scope));
        gather(output, Rc::clone(&gathered))
    });
    let Some((input, writer)) = leads else {
        // The input's frontier is worker 0's alone.
        edges.close();
        roots.close();
        while !probe.done() {
            if aborted() {
                return Err(stopped(worker));
            }
            worker.step_or_park(Some(ABORT_POLL));
        }
        return Ok(None);
    };
    if options.computation.uses_roots() {
        for root in &options.roots {
            roots.insert(*root);
        }
    }
    // Roots never change: closing their input lets every later time complete.
    roots.close();

    let Input {
        description,
        mut feed,
        streaming,
        steps,
        mut durable,
    } = input;
    let mut report = RunReport::new(options, description, peers);
    let mut sink = OutputSink::new(options.computation, writer, streaming);
    let mut progress = Progress::new(options.progress && steps.is_some(), steps.unwrap_or(0));
    let mut ticker = options.stats_every.map(Ticker::new);
    let mut loaded = false;
    let mut done_steps = 0;
    let mut updates_began = Instant::now();
    let mut work_began = WorkCounts::now();
    // Every input time below this has been fed and its rows written.
    let mut frontier = 0;
    if let Some(durable) = durable
        .as_mut()
        .filter(|durable| durable.resume().is_some())
    {
        let began = Instant::now();
        let (at, changes) = rehydrate(worker, &mut edges, durable, &probe, abort)?;
        // The rows below the checkpoint's frontier are the state there, not changes: the run
        // resumed wrote the changes before it.
        gathered.borrow_mut().clear();
        let output = durable
            .resume()
            .map(|resume| resume.output)
            .unwrap_or_default();
        sink.resume(output.rows, output.checksum);
        frontier = at;
        if at > 0 {
            loaded = true;
            report.load = began.elapsed();
            report.load_changes = changes;
            updates_began = Instant::now();
            work_began = WorkCounts::now();
        }
    }
    let failure = loop {
        let max_times = if loaded { options.batch } else { 1 };
        if aborted() {
            return Err(stopped(worker));
        }
        // Waiting for input, look now and then whether another worker failed.
        let poll = Instant::now() + ABORT_POLL;
        let deadline = Some(
            ticker
                .as_ref()
                .map_or(poll, |ticker| ticker.due().min(poll)),
        );
        let mut began = Instant::now();
        let mut pushed = 0usize;
        let mut unrecorded = None;
        let fed = feed.feed(max_times, deadline, &mut |edge, time, diff| {
            edges.update_at(edge, time, diff).expect(
                "a feed hands out complete times in order, none before the last step's end",
            );
            if let Some(durable) = durable.as_mut() {
                if let Err(error) = durable.record(edge, time, diff) {
                    unrecorded.get_or_insert(error);
                }
            }
            pushed += 1;
            if pushed.is_multiple_of(STEP_EVERY_CHANGES) {
                // A big step (the load of a graph) moves into the arrangements' batchers as
                // it is fed, where a storage budget bounds it, instead of queueing whole.
                edges.flush();
                worker.step();
            }
        });
        if let Some(error) = unrecorded {
            return Err(error.into());
        }
        let (end, times, changes) = match fed {
            Err(error) => break Some(error),
            Ok(Fed::End) => break None,
            Ok(Fed::Idle) => {
                if let Some(ticker) = &mut ticker {
                    ticker.tick(sink.rows());
                }
                if let Some(durable) = durable.as_mut().filter(|d| d.due_beyond(frontier)) {
                    checkpoint(durable, &mut sink, frontier, feed.position())?;
                }
                continue;
            }
            Ok(Fed::Step {
                end,
                times,
                changes,
            }) => (end, times, changes),
        };
        if streaming {
            // A stream's step begins when its input is there, not while waiting for it.
            began = Instant::now();
        }
        // A feed's ends only grow; should one not, the input stays where it is.
        let end = end.max(*edges.time());
        edges
            .advance_to(end)
            .expect("steps advance the input forward");
        worker.step_while(|| probe.less_than(&end) && !aborted());
        if aborted() {
            return Err(stopped(worker));
        }
        sink.step(&mut gathered.borrow_mut())?;
        frontier = end;
        if let Some(durable) = durable.as_mut().filter(|durable| durable.due()) {
            checkpoint(durable, &mut sink, frontier, feed.position())?;
        }
        let elapsed = began.elapsed();
        if times == 0 {
            // Progress alone: nothing was fed.
        } else if !loaded {
            loaded = true;
            report.load = elapsed;
            report.load_changes = changes;
            updates_began = Instant::now();
            work_began = WorkCounts::now();
        } else {
            report.latencies.record(elapsed);
            report.update_times += times;
            report.update_changes += changes;
        }
        done_steps += 1;
        progress.advance(done_steps);
        if let Some(ticker) = &mut ticker {
            if times > 0 {
                ticker.record(elapsed, times, changes);
            }
            ticker.tick(sink.rows());
        }
    };
    if loaded {
        report.updates = updates_began.elapsed();
        report.work = WorkCounts::now().since(&work_began);
    }
    progress.finish();
    // Every complete time was fed: the rest of the run computes nothing new.
    edges.close();
    while !probe.done() {
        if aborted() {
            return Err(stopped(worker));
        }
        worker.step();
    }
    if let Some(error) = failure {
        sink.finish()?;
        return Err(error.into());
    }
    sink.step(&mut gathered.borrow_mut())?;
    if let Some(durable) = durable.as_mut() {
        // The input ended: a restart finds everything done.
        checkpoint(durable, &mut sink, frontier, feed.position())?;
        report.checkpoints = Some(durable.summary());
    }
    let (checksum, rows) = sink.finish()?;
    report.checksum = checksum;
    report.rows = rows;
    report.peak_resident = peak_resident_bytes();
    Ok(Some(report))
}

/// Feeds the snapshot of the checkpoint `durable` resumes from at its frontier's last time,
/// and runs until the dataflow's output is complete up to the frontier, which it returns with
/// the number of changes fed.
fn rehydrate(
    worker: &mut Worker,
    edges: &mut InputSession<u64, Edge>,
    durable: &mut Durability,
    probe: &ProbeHandle<u64>,
    abort: &AtomicBool,
) -> Result<(u64, u64), RunError> {
    let at = durable.resume().map_or(0, |resume| resume.frontier);
    let mut pushed = 0u64;
    if at > 0 {
        durable.replay(|edge, diff| {
            edges
                .update_at(edge, at - 1, diff)
                .expect("a new input is at time 0");
            pushed += 1;
            if pushed.is_multiple_of(STEP_EVERY_CHANGES as u64) {
                edges.flush();
                worker.step();
            }
        })?;
    }
    edges.advance_to(at).expect("a new input is at time 0");
    worker.step_while(|| probe.less_than(&at) && !abort.load(Ordering::Acquire));
    if abort.load(Ordering::Acquire) {
        return Err(stopped(worker));
    }
    Ok((at, pushed))
}

/// Flushes the output and commits a checkpoint at `frontier`, the input at `position`.
fn checkpoint(
    durable: &mut Durability,
    sink: &mut OutputSink,
    frontier: u64,
    position: Position,
) -> Result<(), RunError> {
    sink.flush()?;
    let output = OutputMark {
        rows: sink.rows(),
        checksum: sink.checksum(),
        ..OutputMark::default()
    };
    Ok(durable.checkpoint(frontier, position, output)?)
}

/// The least number of gathered rows consolidated at once.
const GATHER_CONSOLIDATE_MIN: usize = 1 << 16;

/// Sends every output update to worker 0's `rows`; the probe returned passes a time only once
/// worker 0 holds every update before it.
fn gather<'s>(
    output: Collection<'s, u64, Value>,
    rows: Rc<RefCell<Vec<TimedRow>>>,
) -> ProbeHandle<u64> {
    let gathered = output
        .inner
        .unary::<CapacityContainerBuilder<UpdateContainer<Value, u64, i64>>, _, _, _>(
            exchange_by(|_| 0),
            "Gather",
            move |_capability, _info| {
                // Rows are consolidated once they number 65,536 or more, so that worker 0
                // holds about as many as the output has distinct rows, not one per update
                // sent (bfs sends a row per node); then again whenever they have doubled. A
                // consolidation that left more than half of the rows says they are mostly
                // distinct (every time of a big step changes `degrees`' counts): the next one
                // waits until they have grown eightfold, so that sorting them here costs a
                // fraction of the sort the output sink does anyway, instead of about as much
                // again (see docs/perf-notes.md, section "Output: gathering rows").
                let mut consolidate_at = GATHER_CONSOLIDATE_MIN;
                move |input, _output| {
                    let mut rows = rows.borrow_mut();
                    input.for_each(|_capability, container| {
                        rows.extend(
                            container
                                .rows()
                                .map(|(value, time, diff)| (time, value, diff)),
                        );
                        if rows.len() >= consolidate_at {
                            let before = rows.len();
                            consolidate_owned_triples(&mut rows);
                            let growth = if 2 * rows.len() > before { 8 } else { 2 };
                            consolidate_at = (growth * rows.len()).max(GATHER_CONSOLIDATE_MIN);
                        }
                    });
                }
            },
        );
    Collection::new(gathered).probe().0
}
