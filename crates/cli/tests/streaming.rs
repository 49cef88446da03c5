//! Streaming runs of the `ripple` binary: the same change stream, read whole, piped line by
//! line with pauses, piped in random bursts and appended to a followed file, gives the same
//! bytes for every computation on 1 and 2 workers; rows of a time appear while the input is
//! still open; a bad line in the middle of a stream stops the run with exit code 2 after the
//! rows of the times completed before it.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const COMPUTATIONS: [&str; 4] = ["bfs", "reach", "degrees", "cc"];

mod common;

use common::ripple;

fn scratch_dir(name: &str) -> PathBuf {
    common::scratch_dir("stream", name)
}

/// A stream's lines: random insertions and removals of present edges over `nodes` nodes at
/// non-decreasing times with gaps, a comment, and a progress line now and then.
fn stream_lines(seed: u64, nodes: u32, times: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut present: Vec<(u32, u32)> = Vec::new();
    let mut lines = vec!["# a stream".to_string()];
    let mut time = 0;
    for step in 0..times {
        let changes = if step == 0 {
            3 * nodes
        } else {
            rng.gen_range(0..4)
        };
        for _ in 0..changes {
            if !present.is_empty() && rng.gen_bool(0.45) {
                let edge = present.swap_remove(rng.gen_range(0..present.len()));
                lines.push(format!("{},{},{time},-1", edge.0, edge.1));
            } else {
                let edge = (rng.gen_range(0..nodes), rng.gen_range(0..nodes));
                present.push(edge);
                lines.push(format!("{},{},{time},1", edge.0, edge.1));
            }
        }
        time += rng.gen_range(1..3);
        if rng.gen_bool(0.2) {
            lines.push(format!("@{time}"));
        }
    }
    lines
}

/// Writes `lines` to `sink` one at a time with short pauses (`bursts` false), or in bursts of
/// random sizes with random pauses.
fn trickle(lines: &[String], sink: &mut dyn Write, bursts: bool, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut index = 0;
    while index < lines.len() {
        let take = if bursts { rng.gen_range(1..30) } else { 1 };
        for line in lines.iter().skip(index).take(take) {
            writeln!(sink, "{line}").unwrap();
        }
        sink.flush().unwrap();
        index += take;
        let pause = if bursts { rng.gen_range(0..4) } else { 1 };
        std::thread::sleep(Duration::from_millis(pause));
    }
}

/// The output of `computation` on `lines` piped to stdin (`bursts` as in [`trickle`]).
fn piped(computation: &str, workers: &str, batch: &str, lines: &[String], bursts: bool) -> String {
    let mut child = ripple()
        .args([computation, "--input", "-", "-w", workers, "--batch", batch])
        .args(["--roots", "0,3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    trickle(lines, &mut stdin, bursts, 7);
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{computation}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Waits until the file `path` holds `expected` (or more), for at most `patience`.
fn wait_for(path: &Path, expected: &str, patience: Duration) -> String {
    let began = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.len() >= expected.len() || began.elapsed() > patience {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills `child` (a following run ends only so).
fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn streams_fed_at_any_pace_give_the_bytes_of_the_whole_file() {
    let dir = scratch_dir("pace");
    let lines = stream_lines(11, 12, 60);
    let whole = dir.join("whole.csv");
    std::fs::write(&whole, lines.join("\n") + "\n").unwrap();
    // The last progress line completes every time of the followed file.
    let last = lines
        .iter()
        .filter_map(|line| line.split(',').nth(2))
        .filter_map(|time| time.parse::<u64>().ok())
        .max()
        .unwrap();
    for computation in COMPUTATIONS {
        let expected = ripple()
            .args([computation, "--roots", "0,3", "--input"])
            .arg(&whole)
            .output()
            .unwrap();
        assert!(expected.status.success());
        let expected = String::from_utf8(expected.stdout).unwrap();
        assert!(!expected.is_empty());
        for workers in ["1", "2"] {
            for (bursts, batch) in [(false, "1"), (true, "1000")] {
                let got = piped(computation, workers, batch, &lines, bursts);
                assert_eq!(got, expected, "{computation} -w {workers}, bursts {bursts}");
            }
            // Appended to a file that ripple follows.
            let followed = dir.join(format!("{computation}-{workers}.csv"));
            let output = dir.join(format!("{computation}-{workers}.out"));
            std::fs::write(&followed, "").unwrap();
            let child = ripple()
                .args([computation, "--roots", "0,3", "-w", workers, "--batch", "5"])
                .arg("--input")
                .arg(&followed)
                .arg("--follow")
                .arg("--output")
                .arg(&output)
                .spawn()
                .unwrap();
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&followed)
                .unwrap();
            trickle(&lines, &mut file, true, 3);
            writeln!(file, "@{}", last + 1).unwrap();
            let got = wait_for(&output, &expected, Duration::from_secs(30));
            stop(child);
            assert_eq!(got, expected, "{computation} -w {workers} --follow");
        }
    }
}

#[test]
fn rows_appear_while_the_input_is_open() {
    let mut child = ripple()
        .args(["reach", "--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Time 0 is complete once time 1 begins; time 1 once the progress line says so.
    writeln!(stdin, "0,1,0,1\n1,2,0,1\n2,3,1,1").unwrap();
    stdin.flush().unwrap();
    let mut rows = Vec::new();
    for _ in 0..3 {
        let mut row = String::new();
        stdout.read_line(&mut row).unwrap();
        rows.push(row);
    }
    assert_eq!(rows, ["0,0,1\n", "1,0,1\n", "2,0,1\n"]);
    writeln!(stdin, "@2").unwrap();
    stdin.flush().unwrap();
    let mut row = String::new();
    stdout.read_line(&mut row).unwrap();
    assert_eq!(row, "3,1,1\n");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn bad_lines_mid_stream_exit_2_after_the_complete_times() {
    let cases = [
        (
            "0,1,0,1\n1,2,1,1\n2,3,2,1\n0,1,1,1\n",
            "<stdin>:4: time 1 comes after time 2 of line 3",
        ),
        (
            "0,1,0,1\n1,2,1,1\n@3\n2,3,2,1\n",
            "<stdin>:4: time 2 comes after the progress line `@3` of line 3",
        ),
        // A malformed line completes nothing: time 1 is not complete.
        (
            "0,1,0,1\n1,2,1,1\n@2\n2,3,x,1\n",
            "<stdin>:4: expected a time",
        ),
        (
            "0,1,0,1\n1,2,1,1\n1,2,2,-1\n1,2,2,-1\n3,4,5,1\n",
            "<stdin>:4: at time 2, edge 1->2 is removed more often",
        ),
    ];
    for (input, message) in cases {
        let mut child = ripple()
            .args(["reach", "--input", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{input:?}: {stderr}");
        assert!(stderr.contains(message), "{input:?}: {stderr}");
        // Times 0 and 1 were complete before the bad line: their rows are all there.
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "0,0,1\n1,0,1\n2,1,1\n",
            "{input:?}"
        );
    }
}

#[test]
fn stats_lines_come_while_a_stream_runs() {
    let mut child = ripple()
        .args(["degrees", "--input", "-", "--stats-every", "50ms"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for time in 0..5 {
        writeln!(stdin, "{time},1,{time},1").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(40));
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ripple: stats: "), "{stderr}");
    assert!(stderr.contains("rows written"), "{stderr}");
}

#[test]
fn streaming_arguments_are_checked() {
    for (args, message) in [
        (&["bfs", "--follow"][..], "--input"),
        (
            &["bfs", "--stats-every", "0s"][..],
            "expected a positive duration",
        ),
        (&["bfs", "--stats-every", "soon"][..], "expected a duration"),
        (
            &["bfs", "--input", "/nonexistent/in.csv", "--follow"][..],
            "/nonexistent/in.csv",
        ),
    ] {
        let output = ripple().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
