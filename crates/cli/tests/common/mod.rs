//! Helpers the `ripple` binary's test files share: the command, scratch directories, output.

// Each test file uses some of these helpers, not all.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `ripple` binary under test.
pub fn ripple() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ripple"))
}

/// A fresh directory `ripple-<test file>-<pid>-<name>` under the system's temporary directory.
pub fn scratch_dir(file: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ripple-{file}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Arguments of a bfs run long enough to be stopped (by a signal, a killed peer) mid-run.
pub const LONG_BFS: [&str; 7] = [
    "bfs",
    "--nodes",
    "100000",
    "--edges",
    "400000",
    "--updates",
    "1000000",
];

/// Damages every file in the spill directories under `spill` whose names begin with
/// `prefix`: the middle of each file is flipped, so that every read of it fails its checksum.
/// Returns how many files were damaged.
pub fn damage_spill_files(spill: &Path, prefix: &str) -> usize {
    let mut damaged = 0;
    for run_dir in std::fs::read_dir(spill).unwrap() {
        let run_dir = run_dir.unwrap();
        if !run_dir.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        for file in std::fs::read_dir(run_dir.path()).unwrap() {
            let path = file.unwrap().path();
            let mut bytes = std::fs::read(&path).unwrap();
            let len = bytes.len();
            for byte in &mut bytes[len / 8..len / 2] {
                *byte ^= 0x5a;
            }
            std::fs::write(&path, bytes).unwrap();
            damaged += 1;
        }
    }
    damaged
}
