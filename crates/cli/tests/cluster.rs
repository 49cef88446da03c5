//! Clusters of real `ripple` processes on localhost when something is off: processes started
//! with other settings, a process that never starts, a process killed mid-run. Each ends every
//! process still running with a message naming the other process and a documented exit code,
//! never a panic or a hang; nothing but rows reaches stdout.

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{ripple, stderr};

/// A hostfile of two free ports on 127.0.0.1.
fn hostfile(name: &str) -> PathBuf {
    let listeners: Vec<_> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let text: String = listeners
        .iter()
        .map(|l| format!("127.0.0.1:{}\n", l.local_addr().unwrap().port()))
        .collect();
    let path = std::env::temp_dir().join(format!("ripple-cluster-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn spawn(args: &[&str], process: &str, hosts: &PathBuf) -> Child {
    ripple()
        .args(args)
        .args(["-n", "2", "-p", process, "-H"])
        .arg(hosts)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child`, failing the test if it runs longer than `patience`.
fn finish(mut child: Child, patience: Duration) -> Output {
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > patience {
            let _ = child.kill();
            panic!("a process hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn processes_with_other_settings_refuse_to_run() {
    let hosts = hostfile("mismatch");
    let first = spawn(&["bfs", "-w", "2"], "0", &hosts);
    let second = spawn(&["cc", "-w", "1"], "1", &hosts);
    let patience = Duration::from_secs(30);
    let (first, second) = (finish(first, patience), finish(second, patience));
    for (output, differences) in [
        (
            &first,
            "computation cc there, bfs here; workers 1 there, 2 here",
        ),
        (
            &second,
            "computation bfs there, cc here; workers 2 there, 1 here",
        ),
    ] {
        assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
        assert!(
            stderr(output).contains("was started with other settings"),
            "{}",
            stderr(output)
        );
        assert!(stderr(output).contains(differences), "{}", stderr(output));
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn a_process_that_never_starts_times_out() {
    let hosts = hostfile("missing");
    let first = spawn(&["bfs", "--connect-timeout", "1s"], "0", &hosts);
    let output = finish(first, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let port = std::fs::read_to_string(&hosts).unwrap();
    let address = port.lines().next().unwrap();
    assert!(
        stderr(&output).contains(&format!(
            "process 1 did not connect to {address} within 1 s"
        )),
        "{}",
        stderr(&output)
    );
    assert!(output.stdout.is_empty(), "no chatter on stdout");
    // The other way round: process 1 waits for a process 0 that is not there.
    let second = spawn(&["bfs", "--connect-timeout", "1s"], "1", &hosts);
    let output = finish(second, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("process 0 at"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_process_killed_mid_run_ends_the_others() {
    let hosts = hostfile("killed");
    let args = common::LONG_BFS;
    let first = spawn(&args, "0", &hosts);
    let mut second = spawn(&args, "1", &hosts);
    std::thread::sleep(Duration::from_millis(1500));
    second.kill().unwrap();
    let _ = second.wait();
    let output = finish(first, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("lost the connection to process 1"),
        "{}",
        stderr(&output)
    );
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
}

#[test]
fn only_process_0_reads_the_input() {
    let hosts = hostfile("input");
    let dir = std::env::temp_dir().join(format!("ripple-cluster-{}-in", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.csv");
    std::fs::write(&input, "0,1,0,1\n1,2,1,1\n").unwrap();
    let input = input.to_str().unwrap();
    // Process 1's input names no file: it is never opened.
    let first = spawn(&["reach", "--input", input], "0", &hosts);
    let second = spawn(&["reach", "--input", "/nonexistent/in.csv"], "1", &hosts);
    let patience = Duration::from_secs(30);
    let (first, second) = (finish(first, patience), finish(second, patience));
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        "0,0,1\n1,0,1\n2,1,1\n"
    );
    assert!(second.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A worker of process 1 meets a damaged spill file: process 1 says so and stops process 0
/// (which would wait forever for its progress); both exit with 1, neither hangs.
#[test]
fn a_failed_worker_stops_the_other_processes() {
    use std::io::{BufRead, BufReader, Write};
    let hosts = hostfile("failed");
    let spill = std::env::temp_dir().join(format!("ripple-cluster-{}-spill", std::process::id()));
    let _ = std::fs::remove_dir_all(&spill);
    std::fs::create_dir_all(&spill).unwrap();
    let spill_arg = spill.to_str().unwrap();
    let args = ["degrees", "--memory-budget", "0", "--spill-dir", spill_arg];
    let mut first = ripple()
        .args(args)
        .args(["--input", "-", "-n", "2", "-p", "0", "-H"])
        .arg(&hosts)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let second = spawn(&args, "1", &hosts);
    let mut stdin = first.stdin.take().unwrap();
    let mut stdout = BufReader::new(first.stdout.take().unwrap());
    let mut text = String::new();
    for node in 0..80_000u32 {
        text.push_str(&format!("{node},{},0,1\n", node + 1));
    }
    text.push_str("@1\n");
    stdin.write_all(text.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut row = String::new();
    stdout.read_line(&mut row).unwrap();
    // Time 0 is complete: damage every file process 1 spilled.
    let of_second = format!("ripple-spill-{}-", second.id());
    let damaged = common::damage_spill_files(&spill, &of_second);
    assert!(damaged >= 1, "process 1 spilled nothing");
    let mut text = String::new();
    for node in 0..80_000u32 {
        text.push_str(&format!("{node},{node},1,1\n"));
    }
    text.push_str("@2\n");
    let _ = stdin.write_all(text.as_bytes());
    let patience = Duration::from_secs(60);
    let second = finish(second, patience);
    drop(stdin);
    drop(stdout);
    let first = finish(first, patience);
    for output in [&first, &second] {
        assert_eq!(output.status.code(), Some(1), "{}", stderr(output));
        assert!(!stderr(output).contains("panicked"), "{}", stderr(output));
    }
    assert!(
        stderr(&first).contains("process 1") || stderr(&first).contains("batch-"),
        "{}",
        stderr(&first)
    );
    let _ = std::fs::remove_dir_all(&spill);
}
