//! What a run measured, and how it is printed with `--summary`.

use crate::latency::Latencies;
use crate::options::RunOptions;
use crate::output::Checksum;
use crate::state::CheckpointSummary;
use ripple_dataflow::counts::{Count, WorkCounts};
use ripple_storage::StorageStats;
use std::fmt;
use std::time::{Duration, Instant};

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
    pub latencies: Latencies,
    /// Start of the workers to their end.
    pub total: Duration,
    pub rows: u64,
    pub checksum: Checksum,
    /// The process's peak resident memory, where the platform reports it.
    pub peak_resident: Option<u64>,
    /// What the storage tier did, with `--memory-budget`.
    pub storage: Option<StorageStats>,
    /// What the checkpoints did, with `--state-dir`.
    pub checkpoints: Option<CheckpointSummary>,
    /// The work this process's operators did while the updates after the load ran (see
    /// `ripple_dataflow::counts`). Worker 0 reads the counts when it sees the load's output
    /// and the last step's complete; other workers may be a little ahead or behind.
    pub work: WorkCounts,
}

impl RunReport {
    /// A report of no steps yet, of a run of `options` over the input `input`.
    pub fn new(options: &RunOptions, input: String, peers: usize) -> Self {
        Self {
            computation: options.computation.name(),
            input,
            workers: peers,
            processes: options.cluster.hosts.len(),
            batch: options.batch,
            load: Duration::ZERO,
            load_changes: 0,
            update_times: 0,
            update_changes: 0,
            updates: Duration::ZERO,
            latencies: Latencies::new(),
            total: Duration::ZERO,
            rows: 0,
            checksum: Checksum::default(),
            peak_resident: None,
            storage: None,
            checkpoints: None,
            work: WorkCounts::default(),
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
/// (A run's step latencies are kept in a histogram instead: [`Latencies::quantile`].)
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
    status_bytes("VmHWM:")
}

/// Resident memory now (`VmRSS`), on Linux.
pub fn resident_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// The field `name` (in KiB) of `/proc/self/status`, in bytes.
fn status_bytes(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Running statistics printed every interval (`--stats-every`): one line on stderr with the
/// input times and changes per second, the steps' latency (p50, p99) over the interval, the
/// resident memory and the rows written so far.
pub struct Ticker {
    every: Duration,
    began: Instant,
    latencies: Latencies,
    times: u64,
    changes: u64,
}

impl Ticker {
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            began: Instant::now(),
            latencies: Latencies::new(),
            times: 0,
            changes: 0,
        }
    }

    /// When the next line is due.
    pub fn due(&self) -> Instant {
        self.began + self.every
    }

    /// Counts a step of `times` input times and `changes` changes that took `elapsed`.
    pub fn record(&mut self, elapsed: Duration, times: u64, changes: u64) {
        self.latencies.record(elapsed);
        self.times += times;
        self.changes += changes;
    }

    /// Prints the line if it is due, `rows` rows having been written, and starts the next
    /// interval.
    pub fn tick(&mut self, rows: u64) {
        let elapsed = self.began.elapsed();
        if elapsed < self.every {
            return;
        }
        eprintln!("{}", self.line(elapsed, rows, resident_bytes()));
        self.began = Instant::now();
        self.latencies.clear();
        self.times = 0;
        self.changes = 0;
    }

    fn line(&self, elapsed: Duration, rows: u64, resident: Option<u64>) -> String {
        format!(
            "ripple: stats: {:.0} updates/s ({:.0} changes/s), {} steps, latency p50 {} p99 {}, {} resident, {rows} rows written",
            per_second(self.times, elapsed),
            per_second(self.changes, elapsed),
            self.latencies.len(),
            human_duration(self.latencies.quantile(0.5)),
            human_duration(self.latencies.quantile(0.99)),
            resident.map_or_else(|| "unknown".to_string(), human_bytes),
        )
    }
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
            human_duration(self.latencies.quantile(0.5)),
            human_duration(self.latencies.quantile(0.99)),
            human_duration(self.latencies.max()),
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
                "storage      {} written in {} files, {} read; peak {} of batches in memory",
                human_bytes(storage.bytes_written),
                storage.files_written,
                human_bytes(storage.bytes_read),
                human_bytes(storage.batch_bytes_peak as u64)
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
        if let Some(checkpoints) = &self.checkpoints {
            if let Some(frontier) = checkpoints.resumed_from {
                writeln!(
                    f,
                    "resumed      from the checkpoint at time {frontier} (the load above is its rehydration)"
                )?;
            }
            writeln!(
                f,
                "checkpoints  {}: {} of new changes, {} of merges; snapshot {}; longest {}",
                checkpoints.count,
                human_bytes(checkpoints.new_bytes),
                human_bytes(checkpoints.merged_bytes),
                human_bytes(checkpoints.snapshot_bytes),
                human_duration(checkpoints.longest)
            )?;
        }
        if self.update_changes > 0 && !self.work.is_empty() {
            self.fmt_work(f)?;
        }
        writeln!(f, "output       {} rows", self.rows)?;
        write!(f, "checksum     {:016x}", self.checksum.0)
    }
}

impl RunReport {
    /// The work counts per input change after the load.
    fn fmt_work(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = |count| self.work.get(count) as f64 / self.update_changes as f64;
        writeln!(
            f,
            "work         per input change after the load, this process's workers:"
        )?;
        writeln!(
            f,
            "  arrange    {:.2} updates arranged; {:.3} batches inserted, holding {:.2} updates; {:.3} merges, reading {:.2} updates",
            per(Count::Arranged),
            per(Count::Batches),
            per(Count::BatchUpdates),
            per(Count::Merges),
            per(Count::MergedUpdates)
        )?;
        writeln!(
            f,
            "  join       {:.2} keys probed, {:.2} matched; {:.2} history updates read; {:.2} outputs",
            per(Count::JoinProbes),
            per(Count::JoinKeys),
            per(Count::JoinHistory),
            per(Count::JoinOutputs)
        )?;
        writeln!(
            f,
            "  reduce     {:.2} key visits; {:.2} history updates read; {:.2} corrections",
            per(Count::ReduceKeys),
            per(Count::ReduceHistory),
            per(Count::ReduceOutputs)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_lines_say_rates_latencies_memory_and_rows() {
        let mut ticker = Ticker::new(Duration::from_secs(2));
        ticker.record(Duration::from_millis(4), 10, 20);
        ticker.record(Duration::from_millis(8), 30, 60);
        let line = ticker.line(Duration::from_secs(2), 7, Some(3 << 20));
        // Quantiles are the middles of the latency histogram's buckets, within 1% (4 ms: 4.006).
        assert_eq!(
            line,
            "ripple: stats: 20 updates/s (40 changes/s), 2 steps, latency p50 4.01 ms p99 8.00 ms, 3.0 MiB resident, 7 rows written"
        );
    }

    #[test]
    fn nearest_rank_quantiles() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(quantile(&samples, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&samples, 0.99), Duration::from_millis(99));
        assert_eq!(quantile(&samples, 1.0), Duration::from_millis(100));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }
}
