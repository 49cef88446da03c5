//! Per-worker settings for ripple's operators, carried in timely's worker configuration.

use ripple_batcher::BatcherConfig;
use ripple_trace::SpineConfig;
use timely::worker::Worker;

/// The key under which [`RippleConfig`] is stored in timely's `WorkerConfig`.
pub const CONFIG_KEY: &str = "ripple";

/// Settings shared by every operator of a worker.
#[derive(Clone, Debug)]
pub struct RippleConfig {
    /// The merge batchers' settings (chunk capacity in serialized bytes).
    pub batcher: BatcherConfig,
    /// The spines' settings (merge effort).
    pub spine: SpineConfig,
    /// How many keys one batched lookup probes (join and reduce look keys up in sorted runs of
    /// this many, one pass over each trace batch per run). At least 1; tests use tiny runs so
    /// that run boundaries fall everywhere.
    pub probe_run: usize,
}

impl RippleConfig {
    /// The default probe run: enough keys that each batch is walked once for many of them, few
    /// enough that what a run gathers stays small.
    pub const PROBE_RUN_DEFAULT: usize = 1024;
}

impl Default for RippleConfig {
    fn default() -> Self {
        Self {
            batcher: BatcherConfig::default(),
            spine: SpineConfig::default(),
            probe_run: Self::PROBE_RUN_DEFAULT,
        }
    }
}

impl RippleConfig {
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
