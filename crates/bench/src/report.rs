//! Formatting for benchmark reports: medians, byte sizes, throughput, Markdown tables.

use std::path::Path;
use std::process::ExitCode;
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

/// Ends a bench: writes its report `text` as `name` in the folder `out` and prints it. The
/// exit code is 1 if the report cannot be written or if `mismatch` (why the engines' outputs
/// differ) is given, 0 otherwise; `bench` names the bench in messages.
pub fn finish(bench: &str, out: &Path, name: &str, text: &str, mismatch: Option<&str>) -> ExitCode {
    if let Err(error) =
        std::fs::create_dir_all(out).and_then(|()| std::fs::write(out.join(name), text))
    {
        eprintln!("{bench}: {}: {error}", out.display());
        return ExitCode::from(1);
    }
    print!("{text}");
    match mismatch {
        Some(why) => {
            eprintln!("{bench}: OUTPUT MISMATCH {why}");
            ExitCode::from(1)
        }
        None => ExitCode::SUCCESS,
    }
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
