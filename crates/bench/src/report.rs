//! Formatting for benchmark reports: medians, byte sizes, throughput, Markdown tables.

use std::time::Duration;

/// The median of `samples` (which it sorts).
pub fn median(samples: &mut [Duration]) -> Duration {
    assert!(!samples.is_empty(), "median of no samples");
    samples.sort();
    samples[samples.len() / 2]
}

/// Of several runs, the one whose `key` (its throughput) is the median.
pub fn median_by<T>(mut runs: Vec<T>, key: impl Fn(&T) -> f64) -> T {
    assert!(!runs.is_empty(), "median of no runs");
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let middle = runs.len() / 2;
    runs.swap_remove(middle)
}

/// A byte count with a binary unit: `512 KiB`, `8.0 MiB`.
pub fn bytes(count: usize) -> String {
    const KIB: f64 = 1024.0;
    let value = count as f64;
    if value >= KIB * KIB * KIB {
        format!("{:.2} GiB", value / (KIB * KIB * KIB))
    } else if value >= KIB * KIB {
        format!("{:.1} MiB", value / (KIB * KIB))
    } else if value >= KIB {
        format!("{:.0} KiB", value / KIB)
    } else {
        format!("{count} B")
    }
}

/// Throughput in MiB/s of `bytes` processed in `time`.
pub fn mib_per_second(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / time.as_secs_f64().max(1e-9)
}

/// A Markdown table: header row, separator, rows.
pub fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!(
        "|{}\n",
        header.iter().map(|_| "---|").collect::<String>()
    ));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}
