//! Command-line arguments and the `ripple` command's main flow: create the output, read a
//! whole input (or start reading a stream), then run, then report. Exit codes: 0 success, 2 bad
//! arguments or input (also in the middle of a stream), 1 failure while running, 130 and 143
//! stopped by SIGINT and SIGTERM, 141 stdout closed by its reader.

use crate::changes::{read_changes, InputError, Node};
use crate::cluster::{lost_process, stopping, ClusterError};
use crate::computation::Computation;
use crate::destination::{on_signals, Leftovers, OutputFile};
use crate::follow::Follow;
use crate::generator::GraphSpec;
use crate::options::{Cluster, ProgressMode, RunOptions};
use crate::run::{run_on, Input, RunError};
use crate::source::Source;
use crate::state::{Durability, InputKind, OutputKind, StateError};
use crate::stdin_log::{LoggedStdin, StdinLog};
use crate::stream::{Stream, StreamStart};
use clap::{Args, Parser, Subcommand};
use ripple_dataflow::RippleConfig;
use ripple_storage::{SpillDir, Storage, StorageFault, StorageSettings};
use std::io::{BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

const FORMATS: &str = "\
INPUT: one edge change per line, `src,dst,time,diff` (u32, u32, u64, i64), e.g. `3,7,12,1` adds \
edge 3->7 at time 12 and `3,7,20,-1` removes it at time 20. Blank lines and lines starting with \
`#` are ignored. A file read whole (--input FILE) may list times in any order; a malformed line, \
or a removal of an edge that is not there, stops the run before any output (exit code 2).

STREAMING: with --input - (stdin) or --input FILE --follow (the file is read as it grows, like \
`tail -F`), lines are read as they arrive and times must not go back. A time is complete when a \
line with a later time arrives, when a progress line `@T` says no change below time T will \
follow, or at the end of the input; each step takes every complete time that has arrived (up to \
--batch) and writes and flushes its rows at once. A bad line in the middle of a stream (malformed, \
a time below an earlier one, a removal of an absent edge) stops the run with exit code 2, after \
the rows of the times completed before it. Example: `tail -f changes.csv | ripple reach --input -`.

GENERATED INPUT (without --input): at time 0, --edges random edges over --nodes nodes; then \
update i (time i, for i in 1..=--updates) inserts a new random edge and removes the oldest edge \
still present. Random numbers: SplitMix64 seeded with --seed; a node is the high 64 bits of \
draw * nodes; an edge is src then dst.

STEPS: the first time (the initial graph) is loaded on its own; then --batch distinct times are \
fed at once before the workers run until the output is complete for them. The output never \
depends on --batch or on the number of workers or processes.

OUTPUT: the changes to the result, consolidated: one line `value,time,diff` per (value, time) \
with a non-zero diff, sorted by time then value. --summary prints statistics instead (throughput, \
per-step latency, peak memory, and a checksum of the output that does not depend on batching or \
workers).

CLUSTER: two processes with two workers each on this machine:
  ripple bfs -w 2 -n 2 -p 0 &
  ripple bfs -w 2 -n 2 -p 1
Process 0 reads the input and writes the output. Without -H the processes listen on \
localhost:2101, :2102, ... The processes first compare their version, computation, workers, roots \
and progress mode, and refuse to run if any differs (exit code 2). A process that does not \
connect within --connect-timeout, or whose connection breaks during the run, ends the run of the \
others with an error naming it (exit code 1).

DURABILITY: with --state-dir DIR, a checkpoint is committed to DIR every --checkpoint-every (default 1s) and when the input ends; the same command run again after a crash (or kill -9) resumes from the last one, and its output (an --output file, or the checksum of --summary) is byte for byte that of a run that never stopped: the output file is cut back to its length at the checkpoint, and the rows after it are computed again. Rows written to stdout after the last checkpoint are written again after a restart. DIR refuses a run of another computation, roots, input or output (exit code 2); a followed file is the recommended input. With stdin, the lines received are logged in DIR; a restart says which line the producer must send again from.

EXIT CODES: 0 done; 1 a failure while running; 2 bad arguments or input; 130 and 143 stopped by \
SIGINT and SIGTERM; 141 stdout closed by its reader. Unless the input is a stream or the run \
durable, --output is written to a temporary file and replaces FILE only when the run completes.";

/// Incremental graph computations over streams of edge changes.
#[derive(Debug, Parser)]
#[command(name = "ripple", version, propagate_version = true, after_long_help = FORMATS)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Number of nodes at each distance from the roots. Value: `depth` (a root has depth 0).
    #[command(after_long_help = FORMATS)]
    Bfs(RunArgs),
    /// The nodes reachable from the roots, roots included. Value: `node`.
    #[command(after_long_help = FORMATS)]
    Reach(RunArgs),
    /// Out-degree distribution. Value: `degree`; the diff is the change in the number of nodes
    /// with that out-degree (nodes without out-edges do not appear).
    #[command(after_long_help = FORMATS)]
    Degrees(RunArgs),
    /// Connected components, edges taken as undirected: each node of an edge is labelled with
    /// the least node of its component. Value: `node,label`.
    #[command(after_long_help = FORMATS)]
    Cc(RunArgs),
}

impl Command {
    fn split(self) -> (Computation, RunArgs) {
        match self {
            Command::Bfs(args) => (Computation::Bfs, args),
            Command::Reach(args) => (Computation::Reach, args),
            Command::Degrees(args) => (Computation::Degrees, args),
            Command::Cc(args) => (Computation::Cc, args),
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Read edge changes from FILE (`-` for stdin, read as it arrives) instead of generating
    /// them.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["nodes", "edges", "updates", "seed"])]
    pub input: Option<String>,
    /// Keep reading lines appended to the --input file, as `tail -F` does (see STREAMING).
    #[arg(long, requires = "input")]
    pub follow: bool,
    /// Generator: number of nodes.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: u32,
    /// Generator: edges in the graph at every time.
    #[arg(long, default_value_t = 2_000)]
    pub edges: u64,
    /// Generator: updates after the initial graph, one per time.
    #[arg(long, default_value_t = 10_000)]
    pub updates: u64,
    /// Generator: random seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Root nodes for bfs and reach, present from time 0.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub roots: Vec<Node>,
    /// Distinct input times fed per step, at most (1 = every time on its own). A stream's steps
    /// take the complete times that have arrived, up to this many.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Write the output lines to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print statistics instead of output lines (output lines still go to --output if given).
    #[arg(long)]
    pub summary: bool,
    /// Print a line of running statistics to stderr every DURATION (e.g. `1s`, `500ms`):
    /// updates/s, step latency p50/p99 over the interval, resident memory, rows written.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub stats_every: Option<std::time::Duration>,
    /// Worker threads per process, at most 256 (each pair of workers shares channels: 1,024
    /// workers took seconds and gigabytes to run three lines).
    #[arg(short = 'w', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub workers: u64,
    /// Number of processes in the cluster.
    #[arg(short = 'n', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..1025))]
    pub processes: u64,
    /// This process's index, in 0..processes.
    #[arg(short = 'p', long, default_value_t = 0)]
    pub process: u64,
    /// File whose first `processes` lines are the processes' `host:port` addresses.
    #[arg(short = 'H', long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// How long the processes of a cluster wait for each other to connect (e.g. `60s`).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "60s")]
    pub connect_timeout: std::time::Duration,
    /// When workers tell each other of their progress: as soon as it is made (eager), or once
    /// it could unblock another worker (demand, timely's default). Never changes the output.
    #[arg(long, value_enum, default_value_t)]
    pub progress_mode: ProgressMode,
    /// Keep the arrangements of each process within SIZE of memory (e.g. `512MiB`, `2GB`, or
    /// bytes): a quarter of it is a block cache, a quarter is left to operators' working
    /// memory, and batches beyond the other half are written to files in --spill-dir and read
    /// back through the cache; `0` writes out every merged batch. Never changes the output.
    /// Without it, everything stays in memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_budget)]
    pub memory_budget: Option<u64>,
    /// Where --memory-budget spills: ripple makes a fresh directory inside DIR and removes it
    /// when the run ends [default: the system's temporary directory].
    #[arg(long, value_name = "DIR", requires = "memory_budget")]
    pub spill_dir: Option<PathBuf>,
    /// Make the run durable: checkpoints go to DIR (created if need be), and the same command
    /// run again after a crash resumes from the last one, with the output of a run that never
    /// stopped (see DURABILITY).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// How often a durable run checkpoints, between steps (e.g. `1s`, `100ms`); it also does
    /// when the input ends.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "1s", requires = "state_dir")]
    pub checkpoint_every: std::time::Duration,
}

/// A `--memory-budget`: a size with an optional unit.
fn parse_budget(text: &str) -> Result<u64, String> {
    parse_size::parse_size(text).map_err(|error| {
        format!("{error}; expected a size such as 512MiB, 64MB or 1000000 (bytes)")
    })
}

/// A `--stats-every` interval.
fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(text) {
        Ok(interval) if !interval.is_zero() => Ok(interval),
        Ok(_) => Err("expected a positive duration such as 1s or 500ms".into()),
        Err(error) => Err(format!("{error}; expected a duration such as 1s or 500ms")),
    }
}

/// A failure before the run: exit code 2 (or 1, for a state directory that cannot be read).
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{0}")]
    Arguments(String),
    #[error(transparent)]
    State(#[from] StateError),
}

impl UsageError {
    fn exit_code(&self) -> u8 {
        match self {
            UsageError::State(error) => error.exit_code(),
            _ => 2,
        }
    }
}

impl RunArgs {
    fn cluster(&self) -> Result<Cluster, UsageError> {
        let processes = self.processes as usize;
        if self.process >= self.processes {
            return Err(UsageError::Arguments(format!(
                "--process {} is not below --processes {}",
                self.process, self.processes
            )));
        }
        let hosts = match &self.hostfile {
            None => (0..processes)
                .map(|index| format!("localhost:{}", 2101 + index))
                .collect(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| {
                    UsageError::Arguments(format!("--hostfile {}: {error}", path.display()))
                })?;
                let hosts: Vec<String> = text
                    .lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty())
                    .take(processes)
                    .map(String::from)
                    .collect();
                if hosts.len() < processes {
                    return Err(UsageError::Arguments(format!(
                        "--hostfile {} lists {} address(es), but --processes is {processes}",
                        path.display(),
                        hosts.len()
                    )));
                }
                hosts
            }
        };
        Ok(Cluster {
            workers: self.workers as usize,
            process: self.process as usize,
            hosts,
            progress_mode: self.progress_mode,
            connect_timeout: self.connect_timeout,
        })
    }

    /// The storage tier `--memory-budget` asks for, with its fresh spill directory.
    fn storage(&self) -> Result<Option<Arc<Storage>>, UsageError> {
        let Some(budget) = self.memory_budget else {
            return Ok(None);
        };
        let spill = match &self.spill_dir {
            Some(dir) => SpillDir::new_in(dir).map_err(|error| {
                UsageError::Arguments(format!(
                    "--spill-dir: {error} (expected a writable directory)"
                ))
            })?,
            None => SpillDir::new_in_temp()
                .map_err(|error| UsageError::Arguments(format!("the spill directory: {error}")))?,
        };
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        let settings = StorageSettings::with_budget(budget);
        Ok(Some(Arc::new(Storage::in_spill_dir(spill, settings))))
    }

    /// The generator's parameters.
    fn graph_spec(&self) -> GraphSpec {
        GraphSpec {
            nodes: self.nodes,
            edges: self.edges,
            updates: self.updates,
            seed: self.seed,
        }
    }

    /// The checkpoints `--state-dir` asks for (of the process hosting worker 0), with the
    /// checkpoint found there, if any.
    fn durability(&self, computation: Computation) -> Result<Option<Durability>, UsageError> {
        let Some(dir) = &self.state_dir else {
            return Ok(None);
        };
        let input = match self.input.as_deref() {
            None => {
                let spec = self.graph_spec();
                spec.validate().map_err(UsageError::Arguments)?;
                InputKind::Generated(spec)
            }
            Some("-") => InputKind::Stdin,
            Some(name) => {
                // An input that cannot be read is the input's error, as without a state.
                std::fs::File::open(name).map_err(|source| InputError::Io {
                    file: name.to_string(),
                    source,
                })?;
                if self.follow {
                    InputKind::Follow(name.into())
                } else {
                    InputKind::File(name.into())
                }
            }
        };
        let output = match (&self.output, self.summary) {
            (Some(path), _) => OutputKind::File(canonical_output(path)),
            (None, true) => OutputKind::None,
            (None, false) => OutputKind::Stdout,
        };
        let every = self.checkpoint_every;
        let durable = Durability::open(dir, computation, &self.roots, input, output, every)?;
        Ok(Some(durable))
    }

    /// Stdin through the log in `durable`'s state directory, from `start`: says on stderr
    /// which lines the log holds, so that a producer knows where to send again from.
    fn logged_stdin(
        &self,
        durable: &mut Durability,
        start: &StreamStart,
        stdin: BufReader<std::io::Stdin>,
    ) -> Result<Box<dyn crate::stream::LineSource>, UsageError> {
        let dir = durable.dir();
        let (log, held) =
            StdinLog::open(dir, start.position).map_err(|source| StateError::Unusable {
                dir: dir.to_path_buf(),
                source,
            })?;
        if held.lines > 0 {
            eprintln!(
                "ripple: resuming: {} holds the first {} lines of stdin; send from line {} on",
                dir.display(),
                held.lines,
                held.lines + 1
            );
        }
        durable.set_stdin_log(Arc::clone(&log));
        Ok(Box::new(LoggedStdin::new(held, stdin, log)))
    }

    /// The input of the process hosting worker 0: a file read whole, a stream started, or the
    /// generator; from the checkpoint `durable` resumes from, if any.
    fn input(&self, durable: Option<Durability>) -> Result<Input, UsageError> {
        let resume = durable.as_ref().and_then(Durability::resume);
        let from = resume.map_or(0, |resume| resume.frontier);
        let mut durable = durable;
        let mut input = self.input_from(durable.as_mut(), from)?;
        input.durable = durable;
        Ok(input)
    }

    fn input_from(&self, durable: Option<&mut Durability>, from: u64) -> Result<Input, UsageError> {
        let Some(name) = &self.input else {
            let spec = self.graph_spec();
            spec.validate().map_err(UsageError::Arguments)?;
            return Ok(Input::whole_from(Source::Generated(spec), self.batch, from));
        };
        let io_error = |source| InputError::Io {
            file: name.clone(),
            source,
        };
        if name == "-" || self.follow {
            let resume = durable.as_deref().and_then(Durability::resume);
            let resume = resume.unwrap_or_default();
            let start = match durable.as_deref().filter(|_| from > 0) {
                None => StreamStart::default(),
                Some(durable) => StreamStart {
                    frontier: from,
                    position: resume.position,
                    multiplicities: durable.multiplicities().map_err(|source| {
                        StateError::Unusable {
                            dir: self.state_dir.clone().unwrap_or_default(),
                            source,
                        }
                    })?,
                },
            };
            let (lines, shown): (Box<dyn crate::stream::LineSource>, String) = if name == "-" {
                let stdin = BufReader::with_capacity(1 << 16, std::io::stdin());
                match durable {
                    None => (Box::new(stdin), "<stdin>".into()),
                    Some(durable) => (self.logged_stdin(durable, &start, stdin)?, "<stdin>".into()),
                }
            } else {
                let offset = start.position.offset;
                let follow = Follow::open_at(name, offset).map_err(io_error)?;
                (Box::new(follow), name.clone())
            };
            let stream =
                Stream::spawn_from(lines, shown.clone(), start, crate::stream::Backlog::LIMIT)
                    .map_err(io_error)?;
            return Ok(Input {
                description: format!("{shown} (streamed)"),
                feed: Box::new(stream),
                streaming: true,
                steps: None,
                durable: None,
            });
        }
        let file = std::fs::File::open(name).map_err(io_error)?;
        let changes = read_changes(BufReader::with_capacity(1 << 16, file), name)?;
        let source = Source::Changes {
            name: name.clone(),
            changes,
        };
        Ok(Input::whole_from(source, self.batch, from))
    }
}

/// The canonical path of `--output FILE`, which may not exist yet: its directory's, joined
/// with its name (the path as given if the directory does not exist either).
fn canonical_output(path: &Path) -> PathBuf {
    if let Ok(path) = std::fs::canonicalize(path) {
        return path;
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), path.file_name()) {
        (Ok(parent), Some(name)) => parent.join(name),
        _ => path.to_path_buf(),
    }
}

/// Runs the command line `args`; returns the exit code.
pub fn main_with(args: impl IntoIterator<Item = String>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with exit 0; usage errors to stderr with exit 2.
            let _ = error.print();
            return ExitCode::from(error.exit_code() as u8);
        }
    };
    let (computation, args) = cli.command.split();
    let prepared = args
        .cluster()
        .and_then(|cluster| Ok((args.storage()?, cluster)));
    let (storage, cluster) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => return usage_error(error),
    };
    let leads = cluster.process == 0;
    let streaming = args.input.as_deref() == Some("-") || args.follow;
    // The process hosting worker 0 holds the state: its checkpoints, and the one it resumes.
    let mut durable = match leads.then(|| args.durability(computation)).transpose() {
        Ok(durable) => durable.flatten(),
        Err(error) => return usage_error(error),
    };
    let resumed_output = durable
        .as_ref()
        .and_then(Durability::resume)
        .and_then(|resume| resume.output.length);
    let leftovers = Arc::new(Mutex::new(Leftovers {
        output: None,
        spill: storage.as_ref().and_then(|storage| storage.spill_path()),
    }));
    // Only the process hosting worker 0 writes; its output is created before the input is
    // read, so an unwritable path is refused at once (see `destination`).
    let writer: Option<Box<dyn Write + Send>> = match (&args.output, args.summary, leads) {
        (_, _, false) => None,
        (Some(path), _, true) => {
            // A durable run's rows are written in place: a restart goes on after them.
            if let Some(durable) = &durable {
                if let Err(error) = durable.check_output() {
                    return usage_error(error.into());
                }
            }
            let created = match resumed_output {
                Some(length) => OutputFile::resume(path, length),
                None => OutputFile::create(path, streaming || durable.is_some()),
            };
            let synced = created.and_then(|(file, writer)| {
                // A regular file is synced and cut back; a pipe or a device is not.
                let regular = writer.get_ref().metadata()?.is_file();
                if let Some(durable) = durable.as_mut().filter(|_| regular) {
                    durable.set_output_file(writer.get_ref().try_clone()?);
                }
                Ok((file, writer))
            });
            match synced {
                Ok((file, writer)) => {
                    lock(&leftovers).output = Some(file);
                    Some(Box::new(writer))
                }
                Err(error) => {
                    let message = format!("--output {}: {error}", path.display());
                    return usage_error(UsageError::Arguments(message));
                }
            }
        }
        (None, false, true) => Some(Box::new(BufWriter::with_capacity(
            1 << 16,
            std::io::stdout(),
        ))),
        (None, true, true) => None,
    };
    if let Err(error) = on_signals(Arc::clone(&leftovers)) {
        eprintln!("ripple: warning: SIGINT and SIGTERM will not clean up: {error}");
    }
    // Rows on the terminal the bar would draw over: no bar.
    let rows_on_terminal =
        args.output.is_none() && !args.summary && std::io::stdout().is_terminal();
    let options = RunOptions {
        computation,
        roots: args.roots.clone(),
        batch: args.batch,
        cluster,
        progress: !rows_on_terminal,
        stats_every: args.stats_every,
        config: RippleConfig {
            storage: storage.clone(),
            ..RippleConfig::default()
        },
    };
    install_panic_hook(Arc::clone(&leftovers));
    // A cluster connects before the input is read: a process 0 that stops on bad input is
    // then a lost connection to the others, not a process they wait for.
    let sockets = if options.cluster.hosts.len() > 1 {
        match crate::cluster::connect(&options, options.cluster.connect_timeout) {
            Ok(sockets) => Some(sockets),
            Err(error) => {
                let code = if matches!(error, ClusterError::Mismatch { .. }) {
                    2
                } else {
                    1
                };
                lock(&leftovers).clean();
                eprintln!("ripple: error: {error}");
                return ExitCode::from(code);
            }
        }
    } else {
        None
    };
    // Only the process hosting worker 0 reads the input.
    let input = match leads.then(|| args.input(durable.take())).transpose() {
        Ok(input) => input,
        Err(error) => {
            lock(&leftovers).clean();
            return usage_error(error);
        }
    };
    // Under way: a file written in place is emptied now, not before.
    if let Some(output) = lock(&leftovers).output.as_mut() {
        if let Err(error) = output.begin() {
            eprintln!("ripple: error: --output: {error}");
            return ExitCode::from(1);
        }
    }
    let outcome = run_on(input, &options, writer, sockets);
    // The run did not complete: clean up and say what became of the output.
    let failed = |message: &dyn std::fmt::Display, code: u8| {
        let output = lock(&leftovers).clean();
        let output = output.map_or_else(String::new, |output| format!(" ({output})"));
        eprintln!("ripple: error: {message}{output}");
        ExitCode::from(code)
    };
    // A storage error unwound a worker: report it rather than the unwinding.
    if let Some(fault) = storage.as_ref().and_then(|storage| storage.fault()) {
        return failed(&fault, 1);
    }
    let mut report = match outcome {
        Ok(Some(report)) => report,
        Ok(None) => return ExitCode::SUCCESS,
        Err(RunError::Output(error)) if is_closed_stdout(&error, &args) => {
            lock(&leftovers).clean();
            return ExitCode::from(CLOSED_PIPE);
        }
        Err(RunError::Input(error)) => return failed(&error, 2),
        Err(RunError::State(error)) => {
            let code = crate::state::exit_code(&error);
            let hint = if code == 1 {
                "; the last checkpoint committed stays, and the same command resumes from it"
            } else {
                ""
            };
            return failed(&format!("{}{hint}", RunError::State(error)), code);
        }
        Err(RunError::Cluster(error @ ClusterError::Mismatch { .. })) => return failed(&error, 2),
        Err(error) => return failed(&error, 1),
    };
    let output = lock(&leftovers).output.take();
    if let Some(Err(error)) = output.map(OutputFile::commit) {
        let path = args.output.as_deref().unwrap_or(Path::new("")).display();
        return failed(&format!("--output {path}: {error}"), 1);
    }
    report.storage = storage.map(|storage| storage.stats());
    if args.summary {
        let mut stdout = std::io::stdout().lock();
        if let Err(error) = writeln!(stdout, "{report}").and_then(|()| stdout.flush()) {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                return ExitCode::from(CLOSED_PIPE);
            }
            return failed(&format!("writing the summary: {error}"), 1);
        }
    }
    ExitCode::SUCCESS
}

/// The exit code when stdout is closed under the run (`| head`): what a process killed by
/// SIGPIPE reports, quietly.
const CLOSED_PIPE: u8 = 141;

/// Whether `error` is stdout closed by its reader.
fn is_closed_stdout(error: &std::io::Error, args: &RunArgs) -> bool {
    error.kind() == std::io::ErrorKind::BrokenPipe && args.output.is_none()
}

fn lock(leftovers: &Mutex<Leftovers>) -> std::sync::MutexGuard<'_, Leftovers> {
    leftovers
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reports bad arguments or input: exit code 2 (see [`UsageError::exit_code`]).
fn usage_error(error: UsageError) -> ExitCode {
    eprintln!("ripple: error: {error}");
    ExitCode::from(error.exit_code())
}

/// Keeps the panic hook quiet for workers unwinding with a [`StorageFault`] (the error they
/// recorded is reported once, as an error, when the run ends), and turns a broken connection
/// to another process (a panic of timely's communication threads) into an error naming the
/// process: the run stops at once, cleaning up `leftovers`, with exit code 1.
fn install_panic_hook(leftovers: Arc<Mutex<Leftovers>>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        if payload.downcast_ref::<StorageFault>().is_some() {
            return;
        }
        let message = crate::run::panic_message(payload);
        let thread = std::thread::current();
        if let Some((process, cause)) = lost_process(thread.name().unwrap_or(""), &message) {
            let output = lock(&leftovers).clean();
            let output = output.map_or_else(String::new, |output| format!("; {output}"));
            if stopping() {
                // This process ended its connections itself, having said why.
                eprintln!("ripple: the run did not complete{output}");
            } else {
                eprintln!(
                    "ripple: error: lost the connection to process {process} ({cause}): the run did not complete{output}"
                );
            }
            std::process::exit(1);
        }
        previous(info);
    }));
}
