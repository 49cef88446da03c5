//! The `ripple` binary as a user meets it: help, bad arguments and bad input (exit code 2, a
//! message naming the problem, nothing written), stdin, summaries that do not depend on
//! batching or workers, and two processes on localhost.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;

use common::{ripple, stderr, stdout};

fn scratch_dir(name: &str) -> PathBuf {
    common::scratch_dir("cli", name)
}

fn run(command: &mut Command) -> Output {
    command.output().expect("ripple starts")
}

#[test]
fn help_explains_computations_and_formats() {
    let output = run(ripple().arg("--help"));
    assert!(output.status.success());
    let text = stdout(&output);
    for word in [
        "bfs",
        "reach",
        "degrees",
        "cc",
        "src,dst,time,diff",
        "SplitMix64",
    ] {
        assert!(text.contains(word), "--help lacks {word}:\n{text}");
    }
    let output = run(ripple().args(["bfs", "--help"]));
    assert!(output.status.success());
    let text = stdout(&output);
    for option in [
        "--input",
        "--batch",
        "--workers",
        "--processes",
        "--hostfile",
        "--summary",
    ] {
        assert!(text.contains(option), "bfs --help lacks {option}");
    }
}

/// Each malformed input stops the run with exit code 2 and a message naming the file, the
/// line and what was expected, and leaves no output file behind.
#[test]
fn bad_input_is_reported_with_its_line() {
    let dir = scratch_dir("bad-input");
    let cases: [(&[u8], &str); 9] = [
        (b"1,2,0,1\n1,2,3\n", ":2: expected 4 comma-separated fields"),
        (b"1,2,0,1,7\n", ":1: expected 4 comma-separated fields"),
        (
            b"a,2,0,1\n",
            ":1: expected a node id (an unsigned 32-bit integer), found src `a`",
        ),
        (
            b"# c\n1,-2,0,1\n",
            ":2: expected a node id (an unsigned 32-bit integer), found dst `-2`",
        ),
        (
            b"1,2,soon,1\n",
            ":1: expected a time (an unsigned 64-bit integer",
        ),
        (
            b"1,2,0,+x\n",
            ":1: expected a diff (a signed 64-bit integer), found diff `+x`",
        ),
        (b"1,2,0,99999999999999999999\n", ":1: expected a diff"),
        (b"1,2,0,1\n\xfe\n", ":2: expected UTF-8 text"),
        (
            b"1,2,0,1\n1,2,4,-1\n1,2,4,-1\n",
            ":3: at time 4, edge 1->2 is removed more often than inserted",
        ),
    ];
    for (index, (content, message)) in cases.iter().enumerate() {
        let input = dir.join(format!("in{index}.csv"));
        std::fs::write(&input, content).unwrap();
        let out = dir.join(format!("out{index}.csv"));
        let output = run(ripple()
            .arg("bfs")
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out));
        assert_eq!(
            output.status.code(),
            Some(2),
            "case {index}: {}",
            stderr(&output)
        );
        let text = stderr(&output);
        assert!(
            text.contains(&format!("{}{message}", input.display())),
            "case {index}: {text}"
        );
        assert!(
            !out.exists(),
            "case {index}: output written despite bad input"
        );
    }
    let output = run(ripple().args(["cc", "--input", "/no/such/file.csv"]));
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/no/such/file.csv"));
}

#[test]
fn bad_arguments_exit_with_2() {
    let cases: [&[&str]; 8] = [
        &["bfs", "--batch", "0"],
        &["bfs", "--nodes", "0"],
        &["bfs", "--edges", "0"],
        &["bfs", "--input", "x.csv", "--nodes", "5"],
        &["bfs", "-n", "2", "-p", "2"],
        &["bfs", "--roots", "1,x"],
        &["bfs", "--progress-mode", "lazy"],
        &["pagerank"],
    ];
    for args in cases {
        let output = run(ripple().args(args));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).is_empty(), "{args:?}: no message");
    }
}

fn summary_checksum(args: &[&str]) -> String {
    let output = run(ripple().args(args).arg("--summary"));
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    let text = stdout(&output);
    for field in ["updates/s", "p50", "p99", "peak memory", "checksum"] {
        assert!(text.contains(field), "summary lacks {field}:\n{text}");
    }
    text.lines()
        .find_map(|line| line.strip_prefix("checksum"))
        .expect("a checksum line")
        .trim()
        .to_string()
}

/// The per-change figures of a summary's work line starting with `name`.
fn work_figures(text: &str, name: &str) -> Vec<f64> {
    let line = text
        .lines()
        .find(|line| line.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} work line:\n{text}"));
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|word| word.parse().ok())
        .collect()
}

#[test]
fn summaries_count_the_operators_work() {
    let args = [
        "bfs",
        "--nodes",
        "200",
        "--edges",
        "400",
        "--updates",
        "300",
        "--batch",
        "10",
        "--summary",
    ];
    let output = run(ripple().args(args));
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("work         per input change after the load"),
        "{text}"
    );
    // arranged; batches, their updates; merges, their updates.
    let arrange = work_figures(&text, "arrange");
    // probed, matched; history read; outputs.
    let join = work_figures(&text, "join");
    // visits; history read; corrections.
    let reduce = work_figures(&text, "reduce");
    assert_eq!(
        (arrange.len(), join.len(), reduce.len()),
        (5, 4, 3),
        "{text}"
    );
    assert!(arrange.iter().all(|&figure| figure > 0.0), "{text}");
    assert!(
        join[0] >= join[1] && join[1] > 0.0 && join[3] > 0.0,
        "{text}"
    );
    assert!(reduce.iter().all(|&figure| figure > 0.0), "{text}");
    // Every join output is arranged for the reduce, and the edges' changes too.
    assert!(arrange[0] >= join[3], "{text}");
    // The counts are of work done, not of time taken: one worker repeats them exactly.
    let again = stdout(&run(ripple().args(args)));
    let work = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|line| !line.starts_with("work "))
            .take(4)
            .map(str::to_string)
            .collect()
    };
    assert_eq!(work(&text), work(&again));
}

#[test]
fn summaries_do_not_depend_on_batching_or_workers() {
    for computation in ["bfs", "reach", "degrees", "cc"] {
        let base = [
            computation,
            "--nodes",
            "200",
            "--edges",
            "300",
            "--updates",
            "150",
        ];
        let first = summary_checksum(&base);
        for extra in [
            &["--batch", "7"][..],
            &["-w", "2"],
            &["--batch", "1000", "-w", "3"],
            &["--batch", "7", "-w", "2", "--progress-mode", "demand"],
        ] {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            assert_eq!(summary_checksum(&args), first, "{args:?}");
        }
    }
}

#[test]
fn stdin_and_file_inputs_agree() {
    let dir = scratch_dir("stdin");
    let text = "0,1,0,1\n1,2,0,1\n2,3,1,1\n0,1,2,-1\n3,0,2,1\n";
    let file = dir.join("in.csv");
    std::fs::write(&file, text).unwrap();
    let from_file = run(ripple().arg("reach").arg("--input").arg(&file));
    assert!(from_file.status.success());
    let mut child = ripple()
        .args(["reach", "--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let from_stdin = child.wait_with_output().unwrap();
    assert!(from_stdin.status.success());
    assert_eq!(stdout(&from_stdin), stdout(&from_file));
    // Root 0 reaches 1 and 2 at time 0, 3 at time 1; removing 0->1 at time 2 strands 1, 2
    // and 3, then 3->0 changes nothing reachable from 0.
    assert_eq!(
        stdout(&from_file),
        "0,0,1\n1,0,1\n2,0,1\n3,1,1\n1,2,-1\n2,2,-1\n3,2,-1\n"
    );
}

fn free_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<_> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn two_processes_match_one() {
    let dir = scratch_dir("cluster");
    let hosts = dir.join("hosts.txt");
    let ports = free_ports(2);
    std::fs::write(
        &hosts,
        ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let args = [
        "cc",
        "--nodes",
        "300",
        "--edges",
        "400",
        "--updates",
        "200",
        "--batch",
        "10",
    ];
    let single = dir.join("single.csv");
    let output = run(ripple().args(args).arg("--output").arg(&single));
    assert!(output.status.success());

    let clustered = dir.join("cluster.csv");
    let spawn = |process: &str| {
        ripple()
            .args(args)
            .args(["-w", "2", "-n", "2", "-p", process, "-H"])
            .arg(&hosts)
            .arg("--output")
            .arg(&clustered)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = spawn("0");
    let second = spawn("1");
    let (first, second) = (
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    );
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(!read(&single).is_empty());
    assert_eq!(read(&clustered), read(&single));
}

/// `--memory-budget` never changes the output: the same bytes with every batch of 64 KiB or
/// more written out (budget 0), with a small budget, and in memory, on one and two workers;
/// the budget runs do write files (their summaries say how many), and the spill directory is
/// left empty, the default one under the temp directory included.
#[test]
fn memory_budgets_give_the_same_bytes() {
    let spill = scratch_dir("spill");
    let spill_arg = spill.to_str().expect("a UTF-8 path");
    // The default spill directory goes under TMPDIR: a fresh one, to see that it is removed.
    let temp = scratch_dir("temp");
    let rows = scratch_dir("rows").join("rows.txt");
    let rows_arg = rows.to_str().expect("a UTF-8 path");
    for computation in ["bfs", "cc"] {
        // Edges enough for the edges' batch to be over the 64 KiB below which batches stay in
        // memory whatever the budget.
        let base = [
            computation,
            "--nodes",
            "1000",
            "--edges",
            "6000",
            "--updates",
            "100",
        ];
        let expected = run(ripple().args(base));
        assert!(expected.status.success(), "{}", stderr(&expected));
        for extra in [
            &["--memory-budget", "0", "--spill-dir", spill_arg][..],
            &[
                "--memory-budget",
                "64KiB",
                "--batch",
                "7",
                "--spill-dir",
                spill_arg,
            ],
            &["--memory-budget", "0", "-w", "2", "--batch", "3"],
        ] {
            let args: Vec<&str> = base
                .iter()
                .chain(extra)
                .chain(&["--summary", "--output", rows_arg])
                .copied()
                .collect();
            let _ = std::fs::remove_file(&rows);
            let output = run(ripple().args(&args).env("TMPDIR", &temp));
            assert!(output.status.success(), "{args:?}: {}", stderr(&output));
            let written = std::fs::read(&rows).expect("the rows written");
            assert!(written == expected.stdout, "{args:?}: other output");
            let summary = stdout(&output);
            for field in ["block cache", "misses", "peak memory"] {
                assert!(summary.contains(field), "summary lacks {field}:\n{summary}");
            }
            assert!(
                files_written(&summary) > 0,
                "{args:?} wrote no batch file:\n{summary}"
            );
            for dir in [&spill, &temp] {
                let left = std::fs::read_dir(dir).expect("the spill parent").count();
                assert_eq!(left, 0, "{args:?} left files in {}", dir.display());
            }
        }
    }
    for dir in [&spill, &temp, rows.parent().expect("a folder")] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The number of batch files a `--summary` says were written ("... written in N files").
fn files_written(summary: &str) -> u64 {
    let line = summary
        .lines()
        .find(|line| line.starts_with("storage"))
        .unwrap_or_else(|| panic!("no storage line in:\n{summary}"));
    let (_, after) = line.split_once("written in ").expect("written in N files");
    let count = after.split_whitespace().next().expect("a count");
    count.parse().expect("a file count")
}

/// A budget that is not a size, a missing or unwritable spill directory, or a spill directory
/// without a budget: exit 2 with a message saying what was expected.
#[test]
fn bad_storage_arguments_exit_with_2() {
    let file = scratch_dir("not-a-dir").join("file");
    std::fs::write(&file, "x").expect("a file");
    let file = file.to_str().expect("a UTF-8 path");
    let cases: [(&[&str], &str); 5] = [
        (&["bfs", "--memory-budget", "lots"], "expected a size"),
        (&["bfs", "--memory-budget=-5MiB"], "expected a size"),
        (
            &[
                "bfs",
                "--memory-budget",
                "1MiB",
                "--spill-dir",
                "/nonexistent/ripple",
            ],
            "expected a writable directory",
        ),
        (
            &["bfs", "--memory-budget", "1MiB", "--spill-dir", file],
            "expected a writable directory",
        ),
        (&["bfs", "--spill-dir", "/tmp"], "--memory-budget"),
    ];
    for (args, message) in cases {
        let output = run(ripple().args(args));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(output.stdout.is_empty(), "{args:?} wrote output");
    }
}

/// A spilled batch file damaged while the run holds it: the next read of it stops the run with
/// an error naming the file and the block (exit code 1), never a wrong row; the spill directory
/// is removed all the same.
#[test]
fn a_damaged_spill_file_stops_the_run() {
    use std::io::{BufRead, BufReader, Write};
    let spill = scratch_dir("damaged");
    let mut child = ripple()
        .args([
            "degrees",
            "--input",
            "-",
            "--memory-budget",
            "0",
            "--spill-dir",
        ])
        .arg(&spill)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Time 0: enough edges for the count's input arrangement to be written out.
    let mut text = String::new();
    for node in 0..40_000u32 {
        text.push_str(&format!("{node},{},0,1\n", node + 1));
    }
    text.push_str("@1\n");
    stdin.write_all(text.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first.split(',').nth(1), Some("0"), "{first}");
    // Time 0 is complete and its batches are on disk: damage every byte in their middles.
    let damaged = common::damage_spill_files(&spill, "ripple-spill-");
    assert!(damaged > 0, "nothing was spilled");
    // Time 1 changes every node's degree: the count reads its input back.
    let mut text = String::new();
    for node in 0..2_000u32 {
        text.push_str(&format!("{node},{node},1,1\n"));
    }
    text.push_str("@2\n");
    let _ = stdin.write_all(text.as_bytes());
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(message.contains("batch-"), "{message}");
    assert!(message.contains("block"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    // No row of time 1 was written.
    assert!(
        !rest.lines().any(|row| row.split(',').nth(1) == Some("1")),
        "{rest}"
    );
    assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);
}
