//! What a user meets when things go wrong: sums that would overflow, a closed stdout,
//! signals, unwritable outputs, odd first lines and argument edges. Each ends in a clear
//! message (or none, for a closed pipe) and a documented exit code, never a panic or a hang,
//! and never an `--output` file that looks complete but is not.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::ripple;

fn scratch_dir(name: &str) -> PathBuf {
    common::scratch_dir("fail", name)
}

/// `ripple reach --input FILE`.
fn reach_on(input: &std::path::Path) -> Command {
    let mut command = ripple();
    command.arg("reach").arg("--input").arg(input);
    command
}

fn files_in(dir: &PathBuf) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn sums_that_would_overflow_are_refused_at_input() {
    let dir = scratch_dir("overflow");
    let max = i64::MAX;
    for (text, message) in [
        (
            format!("0,1,0,{max}\n0,1,0,1\n"),
            "in.csv:2: at time 0, the multiplicity of edge 0->1 would leave the range",
        ),
        (
            format!("0,1,0,{max}\n0,2,0,{max}\n"),
            "in.csv:2: at time 0, the out-edges of node 0 would leave the range",
        ),
    ] {
        let file = dir.join("in.csv");
        std::fs::write(&file, &text).unwrap();
        for computation in ["degrees", "cc"] {
            let output = ripple()
                .arg(computation)
                .arg("--input")
                .arg(&file)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains(message), "{stderr}");
            assert!(output.stdout.is_empty());
        }
    }
}

#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    let mut child = ripple()
        .arg("bfs")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first, "0,0,1\n");
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(141));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

/// Starts a run that takes a while, writing to `--output`, and stops it with `signal`.
fn stopped_by(signal: &str, code: i32) {
    let dir = scratch_dir(signal);
    let out = dir.join("out.csv");
    std::fs::write(&out, "the previous output\n").unwrap();
    let child = ripple()
        .args(common::LONG_BFS)
        .arg("--output")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the partial file is there, the run is under way.
    let began = Instant::now();
    while files_in(&dir).len() < 2 && began.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains(&format!("stopped by SIG{signal}: the run did not complete")),
        "{stderr}"
    );
    assert!(stderr.contains("was left as it was"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "the previous output\n"
    );
    assert_eq!(files_in(&dir), ["out.csv"]);
}

#[test]
fn sigint_and_sigterm_leave_the_previous_output() {
    stopped_by("INT", 130);
    stopped_by("TERM", 143);
}

#[test]
fn outputs_are_checked_before_the_input_is_read() {
    // Stdin stays open: had ripple waited for the input, this would hang.
    let mut child = ripple()
        .args(["reach", "--input", "-", "--output", "/nonexistent/out.csv"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(began.elapsed() < Duration::from_secs(20), "waits for stdin");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(2));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("--output /nonexistent/out.csv"), "{stderr}");
    // A bad input leaves an earlier output as it was.
    let dir = scratch_dir("kept");
    let out = dir.join("out.csv");
    std::fs::write(&out, "kept\n").unwrap();
    let input = dir.join("in.csv");
    std::fs::write(&input, "0,1,0,1\n0,1,x,1\n").unwrap();
    let output = reach_on(&input).arg("--output").arg(&out).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "kept\n");
    assert_eq!(files_in(&dir), ["in.csv", "out.csv"]);
}

#[test]
fn first_lines_help_and_argument_edges() {
    let dir = scratch_dir("edges");
    let input = dir.join("in.csv");
    // A byte-order mark and a header are skipped.
    std::fs::write(&input, "\u{feff}src,dst,time,diff\n0,1,0,1\n").unwrap();
    let output = reach_on(&input).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "0,0,1\n1,0,1\n");
    // Another header gets a hint.
    std::fs::write(&input, "from,to,at,change\n0,1,0,1\n").unwrap();
    let output = reach_on(&input).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("a header line?"));
    // An empty input has the roots at time 0, as any other input.
    std::fs::write(&input, "").unwrap();
    let output = reach_on(&input).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "0,0,1\n");
    // -h is help; --version works on a computation; -w is bounded; --batch takes any u64.
    let help = ripple().args(["bfs", "-h"]).output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: ripple bfs"));
    let version = ripple().args(["bfs", "--version"]).output().unwrap();
    assert!(version.status.success());
    let workers = ripple().args(["bfs", "-w", "1024"]).output().unwrap();
    assert_eq!(workers.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&workers.stderr).contains("1..=256"));
    let batch = ripple()
        .args(["bfs", "--batch", &u64::MAX.to_string(), "--summary"])
        .output()
        .unwrap();
    assert!(batch.status.success(), "{batch:?}");
    assert!(String::from_utf8_lossy(&batch.stdout).contains("checksum     68129fcfc6a2a721"));
    let _ = std::io::stderr().flush();
}

/// A writer that panics: a worker's panic, as any other, reaches the caller with its message.
struct Exploding;

impl Write for Exploding {
    fn write(&mut self, _bytes: &[u8]) -> std::io::Result<usize> {
        panic!("the writer exploded")
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn worker_panics_are_reported_with_their_message() {
    use ripple_cli::computation::Computation;
    use ripple_cli::generator::GraphSpec;
    use ripple_cli::options::{Cluster, RunOptions};
    use ripple_cli::run::{run, Input, RunError};
    use ripple_cli::source::Source;
    let options = RunOptions {
        computation: Computation::Bfs,
        roots: vec![0],
        batch: 1,
        cluster: Cluster::local(2),
        progress: false,
        stats_every: None,
        config: Default::default(),
    };
    let spec = GraphSpec {
        nodes: 10,
        edges: 20,
        updates: 5,
        seed: 0,
    };
    let input = Input::whole(Source::Generated(spec), 1);
    let outcome = run(Some(input), &options, Some(Box::new(Exploding)));
    match outcome {
        Err(RunError::Worker(message)) => assert_eq!(message, "the writer exploded"),
        other => panic!("expected the worker's panic, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn outputs_that_are_not_plain_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir("special");
    let input = dir.join("in.csv");
    std::fs::write(&input, "0,1,0,1\n").unwrap();
    // `/dev/stdout` is written in place.
    let output = reach_on(&input)
        .args(["--output", "/dev/stdout"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "0,0,1\n1,0,1\n");
    // A symbolic link is followed: the file it names gets the rows, keeping its permissions.
    let target = dir.join("target.csv");
    std::fs::write(&target, "old\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.join("link.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let status = reach_on(&input)
        .arg("--output")
        .arg(&link)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "0,0,1\n1,0,1\n");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    // A stream whose input cannot be opened leaves its output file as it was.
    let kept = dir.join("kept.csv");
    std::fs::write(&kept, "kept\n").unwrap();
    let output = ripple()
        .args([
            "reach",
            "--input",
            "/nonexistent/in.csv",
            "--follow",
            "--output",
        ])
        .arg(&kept)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "kept\n");
}
