//! Per-worker settings for ripple's operators, carried in timely's worker configuration.

use ripple_batcher::BatcherConfig;
use ripple_storage::Storage;
use ripple_trace::{SpineConfig, TraceHandle};
use ripple_updates::Update;
use std::sync::Arc;
use timely::worker::Worker;

/// The key under which [`RippleConfig`] is stored in timely's `WorkerConfig`.
pub const CONFIG_KEY: &str = "ripple";

/// Settings shared by every operator of a worker.
#[derive(Clone, Debug)]
pub struct RippleConfig {
    /// The merge batchers' settings (chunk capacity in serialized bytes, least pending limit).
    pub batcher: BatcherConfig,
    /// The spines' settings (merge effort).
    pub spine: SpineConfig,
    /// How many keys one batched lookup probes (join and reduce look keys up in sorted runs of
    /// this many, one pass over each trace batch per run). At least 1; tests use tiny runs so
    /// that run boundaries fall everywhere.
    pub probe_run: usize,
    /// Keeps an iteration's rounds in step: a reduce inside a loop that holds deferred times
    /// of several outer times (a staircase such as `(6001, 8)`, `(6036, 3)`, `(6112, 2)`)
    /// holds one capability at their meet instead (`(6001, 2)`), and so does an arrangement
    /// inside a loop for the updates it keeps back for later rounds, so every region of outer
    /// times goes round the loop together rather than as separate waves.
    ///
    /// **Precondition:** every cycle of these workers' dataflows goes through a ripple
    /// variable ([`crate::Variable`], as [`crate::Collection::iterate`] makes, or
    /// [`crate::ArrangedVariable`]) whose step advances only the round (the inner coordinate,
    /// as `iterate`'s does), and no timely feedback loop of your own is built around a loop.
    /// The meet holds back every pending time's outer time to the least one and its round to
    /// the least round; a cycle that brought the least outer time back into the loop at a
    /// later outer time could block the pending time of least round while the meet, fed back
    /// a round later, blocks the rest: a deadlock. Under the precondition the least-round
    /// pending time of the operator furthest upstream is never blocked, so the loop makes
    /// progress. Only operators in a scope directly inside a dataflow (a loop, or a region,
    /// whose only cycles are those of loops inside it) hold the meet; those of a loop nested
    /// in another never do, as the outer loop feeds their outer times back.
    ///
    /// A second precondition: a reduce inside such a loop reads an arrangement of its own
    /// dataflow, not one imported from another ([`crate::TraceAgent`]). A reduce on an
    /// arrangement of its own dataflow takes all of that trace as complete (every batch with
    /// updates was sent as it was inserted), while one on an imported trace goes by its input
    /// frontier, which counts other workers' arrangements: their held meets can leave it behind
    /// this worker's trace, and waiting for it can wait for this very reduce (a small bfs on
    /// two workers hung that way before the rule for arrangements of the same dataflow).
    /// `ripple`'s computations import nothing.
    ///
    /// Reduces hold the meet only with more than one worker: with one, every round's message
    /// reaches the one reduce, whose capability at the interval's start already keeps the
    /// regions together. With two workers the meet measured a few percent faster in bfs at
    /// most step sizes; with one it gained on a small graph but lost on big steps of a big
    /// graph, hence the bound (measurements: docs/perf-notes.md, section "Lockstep
    /// iterations").
    ///
    /// Arrangements hold it with any number of workers. Behind an [`crate::ArrangedVariable`]
    /// nothing else keeps the regions together: the reduce's input arrangement, left to hold
    /// the staircase of the updates the join sent ahead, let each outer time's wave start at
    /// its own round, and the reduce then met incomparable times in most intervals (bfs ran
    /// much slower without the meet; same section). Off by default; `ripple`'s runs, whose
    /// computations meet the precondition, turn it on.
    pub lockstep_iterations: bool,
    /// The process's storage tier: with one, arrangements write batches out to files when
    /// the process's in-memory batches exceed their share of its memory budget (see
    /// `ripple_trace::Spine::with_storage`). `None`, the default, keeps everything in memory.
    /// Every worker of a process shares the one tier.
    pub storage: Option<Arc<Storage>>,
}

impl RippleConfig {
    /// The default probe run: enough keys that each batch is walked once for many of them, few
    /// enough that what a run gathers stays small. Runs several times longer measured within
    /// noise on a big graph (measurements: docs/perf-notes.md, section "Probe run length").
    pub const PROBE_RUN_DEFAULT: usize = 1024;

    /// The arrangements' least pending limit for plain rows, the least size of a form (see
    /// [`BatcherConfig::pending_bytes_min`]): an arrangement inside an iteration receives a few
    /// thousand updates per round, which 8 KiB forms cut into several chains, each update then
    /// merged two or three times before the seal; 64 KiB forms sort them in one piece. In bfs
    /// that executed a few percent fewer instructions on mid-sized steps (a fifth fewer in the
    /// arrange operators), and other floors near this one ran within noise of it
    /// (measurements: docs/perf-notes.md, section "Arrangement form size floor"). Beyond this
    /// floor the limit follows an eighth of the batcher's data and the trace's together
    /// (`MergeBatcher::set_context_bytes`, at most 16 MiB): pending rows stay a small fraction
    /// of the arrangement.
    pub const ARRANGE_PENDING_BYTES_MIN: usize = 64 << 10;
}

impl Default for RippleConfig {
    fn default() -> Self {
        Self {
            batcher: BatcherConfig {
                pending_bytes_min: Self::ARRANGE_PENDING_BYTES_MIN,
                ..BatcherConfig::default()
            },
            spine: SpineConfig::default(),
            probe_run: Self::PROBE_RUN_DEFAULT,
            lockstep_iterations: false,
            storage: None,
        }
    }
}

impl RippleConfig {
    /// Whether operators in a scope at `address` hold meets (see [`Self::lockstep_iterations`]):
    /// only in a loop directly inside a dataflow. A scope's address is its path from the
    /// worker: a dataflow's own scope has one element, a loop directly inside it two.
    pub(crate) fn holds_meets(&self, address: &[usize]) -> bool {
        self.lockstep_iterations && address.len() == 2
    }

    /// A new trace with these settings' spine and storage tier.
    pub(crate) fn trace_handle<U: Update>(&self) -> TraceHandle<U> {
        TraceHandle::with_storage(self.spine, self.storage.clone())
    }

    /// Installs `self` in a timely worker configuration, for every dataflow of those workers.
    pub fn install(self, config: &mut timely::WorkerConfig) {
        config.set(CONFIG_KEY.to_string(), self);
    }

    /// The settings installed for `worker`, or the defaults.
    pub fn of(worker: &Worker) -> Self {
        worker
            .config()
            .get::<RippleConfig>(CONFIG_KEY)
            .cloned()
            .unwrap_or_default()
    }
}
