//! Helpers the `ripple` binary's test files share: the command, scratch directories, output.

// Each test file uses some of these helpers, not all.
#![allow(dead_code)]

use std::path::PathBuf;
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
