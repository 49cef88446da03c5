//! `--state-dir` at its edges: a state directory of another run is refused, a damaged one is
//! an error naming what is wrong, a full disk in a checkpoint stops the run and leaves the
//! last checkpoint to resume from, `--summary` keeps its checksum across restarts, and stdin
//! resumes from the line its log holds; a run resumes on another number of processes.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;

use common::{ripple, stderr, stdout};

fn scratch_dir(name: &str) -> std::path::PathBuf {
    common::scratch_dir("durable", name)
}

/// A small generated bfs run, durable in `state`, checkpointing at every step.
fn bfs(state: &Path) -> Command {
    let mut command = ripple();
    command
        .args([
            "bfs",
            "--nodes",
            "200",
            "--edges",
            "400",
            "--updates",
            "300",
        ])
        .args(["--checkpoint-every", "1ms", "--state-dir"])
        .arg(state);
    command
}

/// Asserts that `output` ended with exit code `code`, its stderr saying `says`.
fn assert_fails(output: &Output, code: i32, says: &str) {
    assert_eq!(output.status.code(), Some(code), "{}", stderr(output));
    assert!(stderr(output).contains(says), "{}", stderr(output));
}

fn checksum(output: &Output) -> String {
    let text = stdout(output);
    let line = text.lines().find(|line| line.starts_with("checksum"));
    line.unwrap_or_else(|| panic!("no checksum in {text}"))
        .to_string()
}

#[test]
fn a_state_dir_of_another_run_is_refused() {
    let dir = scratch_dir("mismatch");
    let state = dir.join("state");
    let done = bfs(&state).arg("--summary").output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let others: [&[&str]; 4] = [
        &[
            "reach",
            "--nodes",
            "200",
            "--edges",
            "400",
            "--updates",
            "300",
        ],
        &[
            "bfs",
            "--nodes",
            "200",
            "--edges",
            "400",
            "--updates",
            "300",
            "--roots",
            "1",
        ],
        &[
            "bfs",
            "--nodes",
            "200",
            "--edges",
            "400",
            "--updates",
            "300",
            "--seed",
            "2",
        ],
        &[
            "bfs",
            "--nodes",
            "200",
            "--edges",
            "400",
            "--updates",
            "300",
        ],
    ];
    for (index, args) in others.iter().enumerate() {
        let mut command = ripple();
        command.args(*args).arg("--state-dir").arg(&state);
        // The last differs in its output: stdout, where the state's run printed a summary.
        if index < 3 {
            command.arg("--summary");
        }
        let refused = command.output().unwrap();
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&refused)
        );
        assert!(
            stderr(&refused).contains("holds the state of another run"),
            "{}",
            stderr(&refused)
        );
    }
    // Another file under the same name.
    let input = dir.join("in.csv");
    std::fs::write(&input, "1,2,0,1\n2,3,1,1\n").unwrap();
    let file_state = dir.join("file-state");
    let run = |input: &Path| {
        ripple()
            .args(["bfs", "--roots", "1", "--summary", "--input"])
            .arg(input)
            .arg("--state-dir")
            .arg(&file_state)
            .output()
            .unwrap()
    };
    assert!(run(&input).status.success());
    std::fs::write(&input, "1,2,0,1\n2,4,1,1\n").unwrap();
    let refused = run(&input);
    assert_fails(&refused, 2, "the input was");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_output_changed_or_moved_since_the_checkpoint_is_refused() {
    let dir = scratch_dir("output");
    let state = dir.join("state");
    let output = dir.join("out.csv");
    let run = |output: &Path, crash: bool| {
        let mut command = bfs(&state);
        command.arg("--output").arg(output);
        if crash {
            command.env("RIPPLE_TEST_CRASH_IN_CHECKPOINT", "4");
        }
        command.output().unwrap()
    };
    assert_eq!(run(&output, true).status.code(), None, "killed by its hook");
    // Another output file.
    let refused = run(&dir.join("other.csv"), false);
    assert_fails(&refused, 2, "the output was");
    // The same file, changed.
    let mut bytes = std::fs::read(&output).unwrap();
    assert!(!bytes.is_empty());
    bytes[0] ^= 1;
    std::fs::write(&output, &bytes).unwrap();
    let refused = run(&output, false);
    assert_fails(&refused, 2, "is not the output it wrote");
    // Put back as it was, the run resumes.
    bytes[0] ^= 1;
    std::fs::write(&output, &bytes).unwrap();
    let resumed = run(&output, false);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    // A relative path, not there when the state was made, is the same output on a restart.
    let relative = |crash: bool| {
        let mut command = bfs(&dir.join("relative-state"));
        command.current_dir(&dir).args(["--output", "relative.csv"]);
        if crash {
            command.env("RIPPLE_TEST_CRASH_IN_CHECKPOINT", "4");
        }
        command.output().unwrap()
    };
    assert_eq!(relative(true).status.code(), None, "killed by its hook");
    let resumed = relative(false);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_resumes_on_another_number_of_processes() {
    let dir = scratch_dir("processes");
    let state = dir.join("state");
    let output = dir.join("out.csv");
    let reference = dir.join("reference.csv");
    let generated = [
        "bfs",
        "--nodes",
        "200",
        "--edges",
        "400",
        "--updates",
        "300",
    ];
    let done = ripple()
        .args(generated)
        .arg("--output")
        .arg(&reference)
        .output()
        .unwrap();
    assert!(done.status.success());
    // One process, stopped in its fifth checkpoint.
    let stopped = bfs(&state)
        .arg("--output")
        .arg(&output)
        .env("RIPPLE_TEST_CRASH_IN_CHECKPOINT", "5")
        .output()
        .unwrap();
    assert_eq!(stopped.status.code(), None, "killed by its hook");
    // Resumed by two processes of two workers; process 0 holds the state.
    let ports: Vec<_> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let hosts = dir.join("hosts");
    let text: String = ports
        .iter()
        .map(|l| format!("127.0.0.1:{}\n", l.local_addr().unwrap().port()))
        .collect();
    std::fs::write(&hosts, text).unwrap();
    drop(ports);
    let spawn = |process: &str| {
        let mut command = ripple();
        command
            .args(generated)
            .args(["-w", "2", "-n", "2", "-p", process, "-H"])
            .arg(&hosts)
            .stderr(Stdio::piped());
        if process == "0" {
            command
                .arg("--state-dir")
                .arg(&state)
                .arg("--output")
                .arg(&output);
        }
        command.spawn().unwrap()
    };
    let (first, second) = (spawn("0"), spawn("1"));
    let (first, second) = (
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    );
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(
        std::fs::read(&output).unwrap(),
        std::fs::read(&reference).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn checkpoint_every_needs_a_state_dir() {
    let refused = ripple()
        .args(["bfs", "--checkpoint-every", "1s"])
        .output()
        .unwrap();
    assert_fails(&refused, 2, "--state-dir");
    let refused = ripple()
        .args(["bfs", "--state-dir", "/proc/version/x", "--summary"])
        .output()
        .unwrap();
    assert_ne!(refused.status.code(), Some(0), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--state-dir /proc/version/x"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn a_damaged_state_dir_is_an_error_naming_what_is_wrong() {
    let dir = scratch_dir("damage");
    let state = dir.join("state");
    // Stopped in its third checkpoint, after its files and before the manifest's rename.
    let stopped = bfs(&state)
        .arg("--summary")
        .env("RIPPLE_TEST_CRASH_IN_CHECKPOINT", "3")
        .output()
        .unwrap();
    assert_eq!(stopped.status.code(), None, "killed by its hook");
    // A flipped byte in a batch file of the snapshot (one the manifest names: the files of
    // the checkpoint that did not commit are removed when the directory is opened).
    let manifest = std::fs::read_to_string(state.join("MANIFEST")).unwrap();
    let live = manifest.lines().find_map(|line| line.strip_prefix("file "));
    let name = live.unwrap().split(' ').next().unwrap().to_string();
    let victim = &state.join(&name);
    let mut bytes = std::fs::read(victim).unwrap();
    bytes[40] ^= 0x20;
    std::fs::write(victim, &bytes).unwrap();
    let failed = bfs(&state).arg("--summary").output().unwrap();
    assert_fails(&failed, 2, &name);
    // A missing batch file.
    std::fs::remove_file(victim).unwrap();
    let failed = bfs(&state).arg("--summary").output().unwrap();
    assert_fails(&failed, 2, "missing");
    // A manifest cut short.
    let manifest = state.join("MANIFEST");
    let text = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    let failed = bfs(&state).arg("--summary").output().unwrap();
    assert_fails(&failed, 2, "MANIFEST");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_disk_stops_the_run_and_a_restart_resumes_from_the_last_checkpoint() {
    let dir = scratch_dir("full");
    let state = dir.join("state");
    let output = dir.join("out.csv");
    let reference = ripple()
        .args([
            "bfs",
            "--nodes",
            "200",
            "--edges",
            "400",
            "--updates",
            "300",
        ])
        .arg("--output")
        .arg(dir.join("reference.csv"))
        .arg("--summary")
        .output()
        .unwrap();
    assert!(reference.status.success());
    let full = bfs(&state)
        .arg("--output")
        .arg(&output)
        .arg("--summary")
        .env("RIPPLE_TEST_STATE_WRITE_LIMIT", "60000")
        .output()
        .unwrap();
    assert_eq!(full.status.code(), Some(1), "{}", stderr(&full));
    let message = stderr(&full);
    assert!(
        message.contains("--state-dir") && message.contains("no storage space"),
        "{message}"
    );
    assert!(
        message.contains("the same command resumes from it"),
        "{message}"
    );
    let manifest = std::fs::read_to_string(state.join("MANIFEST")).unwrap();
    assert!(
        !manifest.contains("frontier 0\n"),
        "some checkpoints were made: {manifest}"
    );
    // Space again: the run resumes from the last checkpoint and ends as if never stopped.
    let resumed = bfs(&state)
        .arg("--output")
        .arg(&output)
        .arg("--summary")
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(stdout(&resumed).contains("resumed      from the checkpoint"));
    assert_eq!(checksum(&resumed), checksum(&reference));
    assert_eq!(
        std::fs::read(&output).unwrap(),
        std::fs::read(dir.join("reference.csv")).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stdin_resumes_from_the_first_line_its_log_does_not_hold() {
    let dir = scratch_dir("stdin");
    let state = dir.join("state");
    let output = dir.join("out.csv");
    let mut lines: Vec<String> = (0..300u32)
        .map(|i| format!("{},{},0,1", i % 50, (i * 7) % 50))
        .collect();
    for time in 1..200u32 {
        lines.push(format!("{},{},{time},1", time % 50, (time * 3 + 1) % 50));
    }
    let input = dir.join("in.csv");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let expected = ripple()
        .args(["cc", "--input"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(expected.status.success());
    let durable = || {
        let mut command = ripple();
        command
            .args([
                "cc",
                "--input",
                "-",
                "--checkpoint-every",
                "1ms",
                "--output",
            ])
            .arg(&output)
            .arg("--state-dir")
            .arg(&state)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    // The first 400 lines, then the run is killed while it waits for more.
    let mut first = durable().spawn().unwrap();
    let mut stdin = first.stdin.take().unwrap();
    for line in &lines[..400] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let began = std::time::Instant::now();
    while !std::fs::read_to_string(state.join("MANIFEST")).is_ok_and(|m| m.contains("input.line 3"))
        && began.elapsed() < std::time::Duration::from_secs(30)
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    first.kill().unwrap();
    let _ = first.wait();
    // The restart says where to send from, and takes the rest from there.
    let mut second = durable().spawn().unwrap();
    let mut said = String::new();
    BufReader::new(second.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert!(
        said.contains("first 400 lines of stdin; send from line 401 on"),
        "{said}"
    );
    let mut stdin = second.stdin.take().unwrap();
    for line in &lines[400..] {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let status = second.wait().unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read(&output).unwrap(), expected.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}
