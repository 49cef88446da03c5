//! The crash harness of `--state-dir`: durable runs killed with SIGKILL at random moments
//! (and, through the test hook, inside checkpoints, between the batch files and the manifest's
//! rename) and started again with the same command end with the bytes of a run that was never
//! stopped: every computation, 1 and 2 workers (a restart may take the other number, or spill
//! under a memory budget), a file read whole and a followed file.
//!
//! CI runs it small. A longer run (the README's): `RIPPLE_CRASH_KILLS=260 RIPPLE_CRASH_TIMES=3000
//! cargo test --release -p ripple-cli --test crash`, for 1,040 kills in all.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::ripple;

const COMPUTATIONS: [&str; 4] = ["bfs", "reach", "degrees", "cc"];

/// A number from the environment variable `name`, or `default`.
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// A change file: a graph at time 0, then a few insertions and removals of present edges per
/// time (times one or two apart), progress lines now and then (some inside a time: `@T` after
/// a line of time `T`), and a last progress line completing every time.
fn change_lines(seed: u64, nodes: u32, times: u64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut present: Vec<(u32, u32)> = Vec::new();
    let mut text = String::from("# crash harness\n");
    let mut time = 0;
    for step in 0..times {
        let changes = if step == 0 {
            3 * nodes
        } else {
            rng.gen_range(1..4)
        };
        for change in 0..changes {
            if change == 1 && rng.gen_bool(0.2) {
                text.push_str(&format!("@{time}\n"));
            }
            if !present.is_empty() && rng.gen_bool(0.45) {
                let edge = present.swap_remove(rng.gen_range(0..present.len()));
                text.push_str(&format!("{},{},{time},-1\n", edge.0, edge.1));
            } else {
                let edge = (rng.gen_range(0..nodes), rng.gen_range(0..nodes));
                present.push(edge);
                text.push_str(&format!("{},{},{time},1\n", edge.0, edge.1));
            }
        }
        time += rng.gen_range(1..3);
        if rng.gen_bool(0.1) {
            text.push_str(&format!("@{time}\n"));
        }
    }
    text.push_str(&format!("@{time}\n"));
    text
}

/// One configuration of the harness.
struct Case<'a> {
    computation: &'a str,
    workers: &'a str,
    follow: bool,
    input: &'a Path,
}

impl Case<'_> {
    /// The command of a durable run on `workers` workers writing to `output` with its state in
    /// `state`.
    fn command(&self, workers: &str, state: &Path, output: &Path, batch: &str) -> Command {
        let mut command = ripple();
        command
            .args([self.computation, "--roots", "0,3", "-w", workers])
            .args(["--batch", batch, "--checkpoint-every", "5ms"])
            .arg("--input")
            .arg(self.input)
            .arg("--state-dir")
            .arg(state)
            .arg("--output")
            .arg(output)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if self.follow {
            command.arg("--follow");
        }
        command
    }

    fn name(&self) -> String {
        let follow = if self.follow { " --follow" } else { "" };
        format!("{} -w {}{follow}", self.computation, self.workers)
    }
}

/// Waits for `child` to exit by itself, for at most `patience`; `None` if it still runs.
fn exits_within(child: &mut Child, patience: Duration) -> Option<std::process::ExitStatus> {
    let began = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if began.elapsed() >= patience {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The stderr of a child that ended.
fn stderr_of(child: Child) -> String {
    let output = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What a case's runs went through.
#[derive(Default)]
struct Tally {
    /// SIGKILLs: at a random moment, and by the hook inside a checkpoint.
    kills: u64,
    in_checkpoint: u64,
    /// Series of restarts ended by a complete output.
    series: u64,
}

/// Runs `case` under `kills` SIGKILLs in all (over as many fresh state directories as it
/// takes), checking after each complete series that the output is `expected`.
fn crash_case(case: &Case, dir: &Path, expected: &[u8], kills: u64, rng: &mut SmallRng) -> Tally {
    let mut tally = Tally::default();
    let mut killed = 0;
    let mut series = 0;
    while killed < kills {
        series += 1;
        let state = dir.join(format!("state-{series}"));
        let output = dir.join(format!("out-{series}.csv"));
        let batch = if rng.gen_bool(0.5) { "1" } else { "7" };
        loop {
            // A restart may take another number of workers.
            let workers = match (case.workers, rng.gen_bool(0.3)) {
                ("1", true) => "2",
                ("2", true) => "1",
                (workers, _) => workers,
            };
            let mut command = case.command(workers, &state, &output, batch);
            // Some restarts spill their arrangements (the output never depends on it).
            if rng.gen_bool(0.15) {
                command.args(["--memory-budget", "256KiB"]);
            }
            // Now and then the process stops itself inside a checkpoint.
            let in_checkpoint = rng.gen_bool(0.25);
            if in_checkpoint {
                command.env(
                    "RIPPLE_TEST_CRASH_IN_CHECKPOINT",
                    rng.gen_range(1..6).to_string(),
                );
            }
            let mut child = command.spawn().unwrap();
            let patience = Duration::from_millis(rng.gen_range(5..150));
            match exits_within(&mut child, patience) {
                None => {
                    child.kill().unwrap();
                    let _ = child.wait();
                    killed += 1;
                }
                Some(status) if status.code().is_none() => {
                    // Killed by its own hook.
                    let _ = child.wait();
                    killed += 1;
                    tally.in_checkpoint += 1;
                }
                Some(status) => {
                    let stderr = stderr_of(child);
                    assert!(status.success(), "{}: {status}: {stderr}", case.name());
                    break;
                }
            }
            if case.follow && std::fs::read(&output).unwrap_or_default().len() >= expected.len() {
                break;
            }
        }
        if case.follow {
            // A followed file has no end: run until every row is there, then stop it.
            let mut command = case.command(case.workers, &state, &output, batch);
            let mut child = command.spawn().unwrap();
            let began = Instant::now();
            while std::fs::read(&output).unwrap_or_default().len() < expected.len()
                && began.elapsed() < Duration::from_secs(60)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            child.kill().unwrap();
            let _ = child.wait();
        }
        let got = std::fs::read(&output).unwrap();
        assert!(
            got == expected,
            "{}: after {killed} kills the output differs ({} bytes, expected {})",
            case.name(),
            got.len(),
            expected.len()
        );
    }
    tally.kills = killed;
    tally.series = series;
    tally
}

#[test]
fn killed_runs_resume_to_the_bytes_of_a_run_never_stopped() {
    let dir = common::scratch_dir("crash", "harness");
    let kills_per_computation = setting("RIPPLE_CRASH_KILLS", 52);
    let times = setting("RIPPLE_CRASH_TIMES", 400);
    let input: PathBuf = dir.join("changes.csv");
    std::fs::write(&input, change_lines(5, 40, times)).unwrap();
    let mut rng = SmallRng::seed_from_u64(17);
    let mut total = Tally::default();
    for computation in COMPUTATIONS {
        let expected = ripple()
            .args([computation, "--roots", "0,3", "--input"])
            .arg(&input)
            .output()
            .unwrap();
        assert!(expected.status.success());
        assert!(!expected.stdout.is_empty());
        let mut killed = 0;
        let cases = [("1", false), ("2", false), ("1", true), ("2", true)];
        for (index, (workers, follow)) in cases.into_iter().enumerate() {
            let case = Case {
                computation,
                workers,
                follow,
                input: &input,
            };
            let share = kills_per_computation
                .saturating_sub(killed)
                .div_ceil((cases.len() - index) as u64);
            let case_dir = dir.join(format!("{computation}-{index}"));
            std::fs::create_dir_all(&case_dir).unwrap();
            let tally = crash_case(&case, &case_dir, &expected.stdout, share, &mut rng);
            killed += tally.kills;
            total.kills += tally.kills;
            total.in_checkpoint += tally.in_checkpoint;
            total.series += tally.series;
        }
        assert!(killed >= kills_per_computation);
    }
    eprintln!(
        "crash harness: {} kills ({} inside checkpoints) over {} series of restarts, every output identical",
        total.kills, total.in_checkpoint, total.series
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
