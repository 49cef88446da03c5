//! Per-worker settings for ripple's operators, carried in timely's worker configuration.

use ripple_batcher::BatcherConfig;
use ripple_trace::SpineConfig;
use timely::worker::Worker;

/// The key under which [`RippleConfig`] is stored in timely's `WorkerConfig`.
pub const CONFIG_KEY: &str = "ripple";

/// Settings shared by every operator of a worker.
#[derive(Clone, Debug, Default)]
pub struct RippleConfig {
    /// The merge batchers' settings (chunk capacity in serialized bytes).
    pub batcher: BatcherConfig,
    /// The spines' settings (merge effort).
    pub spine: SpineConfig,
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
