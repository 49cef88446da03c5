//! What a run is asked to do, apart from its input and output: the computation, its roots,
//! the step size, the layout of workers and processes, and the operators' settings.

use crate::changes::Node;
use crate::computation::Computation;
use ripple_dataflow::RippleConfig;
use timely::CommunicationConfig;

/// How the workers are laid out: threads per process, and the processes of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Worker threads in each process.
    pub workers: usize,
    /// This process's index in `0..hosts.len()`.
    pub process: usize,
    /// The address (`host:port`) of every process; one entry for a single process.
    pub hosts: Vec<String>,
    /// How the workers tell each other of their progress.
    pub progress_mode: ProgressMode,
    /// How long to wait for the other processes to connect or answer.
    pub connect_timeout: std::time::Duration,
}

/// When a worker sends the changes in its outstanding work to the others (timely's
/// `ProgressMode`; it matters only with more than one worker).
///
/// Ripple runs default to [`ProgressMode::Eager`]. With `demand`, a worker holds its changes
/// back until they could move the frontier of all workers, so a loop's round is seen to end in
/// pieces, one per worker's late news: the reduce inside bfs then processed markedly more
/// intervals on two workers than on one, each visiting its keys and deferring times again.
/// Eager sending brought the intervals back to about what one worker processes, and ran bfs
/// from several percent to over a tenth faster on most step sizes and graphs; elsewhere the
/// two measured within noise. Differential-dataflow's bfs gained nothing from it (the bench's
/// baseline keeps timely's default). See docs/perf-notes.md, section "Eager progress
/// (ProgressMode)".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Send progress as soon as it is made.
    #[default]
    Eager,
    /// Hold progress back until it could unblock another worker (timely's default).
    Demand,
}

impl From<ProgressMode> for timely::worker::ProgressMode {
    fn from(mode: ProgressMode) -> Self {
        match mode {
            ProgressMode::Eager => timely::worker::ProgressMode::Eager,
            ProgressMode::Demand => timely::worker::ProgressMode::Demand,
        }
    }
}

impl Cluster {
    /// The default of `--connect-timeout`.
    pub const CONNECT_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(60);

    /// One process with `workers` threads.
    pub fn local(workers: usize) -> Self {
        Self {
            workers,
            process: 0,
            hosts: vec!["localhost:2101".into()],
            progress_mode: ProgressMode::default(),
            connect_timeout: Self::CONNECT_TIMEOUT_DEFAULT,
        }
    }

    /// The communication of a single process (a cluster's connections are made by
    /// [`crate::cluster::connect`]).
    pub(crate) fn communication(&self) -> CommunicationConfig {
        if self.workers > 1 {
            CommunicationConfig::Process(self.workers)
        } else {
            CommunicationConfig::Thread
        }
    }
}

/// Everything about a run except its input and output.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub computation: Computation,
    pub roots: Vec<Node>,
    /// Distinct input times per step (at least 1).
    pub batch: u64,
    pub cluster: Cluster,
    /// Show a progress bar on stderr (only if it is a terminal, after the first second, and
    /// when the number of steps is known).
    pub progress: bool,
    /// Print a line of running statistics to stderr this often (`--stats-every`).
    pub stats_every: Option<std::time::Duration>,
    /// The operators' settings; `run` turns on `lockstep_iterations` (see there), which its
    /// computations allow.
    pub config: RippleConfig,
}
