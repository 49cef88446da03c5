//! What a run measured, and how it is printed with `--summary`.

use crate::options::RunOptions;
use crate::output::Checksum;
use crate::source::{Plan, Source};
use ripple_storage::StorageStats;
use std::fmt;
use std::time::Duration;

/// The measurements of one run.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub computation: &'static str,
    pub input: String,
    pub workers: usize,
    pub processes: usize,
    pub batch: u64,
    /// The first time (the initial graph): its changes and how long until its output was
    /// complete.
    pub load: Duration,
    pub load_changes: u64,
    /// Distinct input times after the load, and their changes.
    pub update_times: u64,
    pub update_changes: u64,
    /// Wall-clock time of all steps after the load.
    pub updates: Duration,
    /// Each step's time from feeding to complete output.
    pub latencies: Vec<Duration>,
    /// Start of the workers to their end.
    pub total: Duration,
    pub rows: u64,
    pub checksum: Checksum,
    /// The process's peak resident memory, where the platform reports it.
    pub peak_resident: Option<u64>,
    /// What the storage tier did, with `--memory-budget`.
    pub storage: Option<StorageStats>,
}

impl RunReport {
    pub fn new(options: &RunOptions, source: &Source, plan: &Plan, peers: usize) -> Self {
        let input = match source {
            Source::Changes { name, changes } => format!("{name} ({} changes)", changes.len()),
            Source::Generated(spec) => format!(
                "generated: {} nodes, {} edges, {} updates, seed {}",
                spec.nodes, spec.edges, spec.updates, spec.seed
            ),
        };
        Self {
            computation: options.computation.name(),
            input,
            workers: peers,
            processes: options.cluster.hosts.len(),
            batch: options.batch,
            load: Duration::ZERO,
            load_changes: 0,
            update_times: plan.update_times(),
            update_changes: source.update_changes(),
            updates: Duration::ZERO,
            latencies: Vec::new(),
            total: Duration::ZERO,
            rows: 0,
            checksum: Checksum::default(),
            peak_resident: None,
            storage: None,
        }
    }

    /// Input times after the load per second of update processing.
    pub fn updates_per_second(&self) -> f64 {
        per_second(self.update_times, self.updates)
    }

    pub fn changes_per_second(&self) -> f64 {
        per_second(self.update_changes, self.updates)
    }
}

fn per_second(count: u64, elapsed: Duration) -> f64 {
    if elapsed.is_zero() {
        0.0
    } else {
        count as f64 / elapsed.as_secs_f64()
    }
}

/// The `q`-quantile (0 to 1) of `samples` by the nearest-rank method; zero if there are none.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Peak resident memory (`VmHWM` of `/proc/self/status`), on Linux.
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `1.234 s`, `5.6 ms` or `78 µs`.
pub fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds >= 1.0 {
        format!("{seconds:.3} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.1} µs", seconds * 1e6)
    }
}

/// `12.3 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "computation  {}", self.computation)?;
        writeln!(f, "input        {}", self.input)?;
        writeln!(
            f,
            "workers      {} ({} process{})",
            self.workers,
            self.processes,
            if self.processes == 1 { "" } else { "es" }
        )?;
        writeln!(f, "batch        {} time(s) per step", self.batch)?;
        writeln!(
            f,
            "load         {} changes at the first time in {}",
            self.load_changes,
            human_duration(self.load)
        )?;
        writeln!(
            f,
            "updates      {} times, {} changes in {}",
            self.update_times,
            self.update_changes,
            human_duration(self.updates)
        )?;
        writeln!(
            f,
            "throughput   {:.0} updates/s (input times), {:.0} changes/s",
            self.updates_per_second(),
            self.changes_per_second()
        )?;
        writeln!(
            f,
            "latency      p50 {}, p99 {}, max {} over {} steps",
            human_duration(quantile(&self.latencies, 0.5)),
            human_duration(quantile(&self.latencies, 0.99)),
            human_duration(quantile(&self.latencies, 1.0)),
            self.latencies.len()
        )?;
        writeln!(f, "total        {}", human_duration(self.total))?;
        match self.peak_resident {
            Some(bytes) => writeln!(f, "peak memory  {} resident", human_bytes(bytes))?,
            None => writeln!(f, "peak memory  not reported by this platform")?,
        }
        if let Some(storage) = &self.storage {
            writeln!(
                f,
                "storage      {} written in {} files, {} read",
                human_bytes(storage.bytes_written),
                storage.files_written,
                human_bytes(storage.bytes_read)
            )?;
            let cache = &storage.cache;
            writeln!(
                f,
                "block cache  {} hits, {} misses, {} evictions; peak {} of blocks in memory",
                cache.hits,
                cache.misses,
                cache.evictions,
                human_bytes(cache.peak_resident_bytes as u64)
            )?;
            writeln!(
                f,
                "key filters  {} of {} probes passed",
                storage.probes_passed, storage.probes_filtered
            )?;
        }
        writeln!(f, "output       {} rows", self.rows)?;
        write!(f, "checksum     {:016x}", self.checksum.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(quantile(&samples, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&samples, 0.99), Duration::from_millis(99));
        assert_eq!(quantile(&samples, 1.0), Duration::from_millis(100));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }
}
