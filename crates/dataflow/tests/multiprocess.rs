//! Two processes on localhost (timely's cluster mode, two workers each) compute the same
//! outputs as one process. The test re-runs its own binary as the two processes.

mod common;

use common::{drive_ripple, programs, run_ripple, workload, Row, Setup, Workload};
use ripple_dataflow::capture::consolidate_rows;
use ripple_dataflow::Captured;
use std::io::Write;
use std::process::Command;

const CHILD: &str = "RIPPLE_CLUSTER_CHILD";

fn test_workload() -> Workload {
    workload(7, 20, 36, 16, 8)
}

/// One process of the cluster; does nothing unless started by `two_processes_match_one`.
#[test]
#[ignore = "started as a subprocess by two_processes_match_one"]
fn cluster_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let mut parts = spec.split(';');
    let process: usize = parts.next().unwrap().parse().unwrap();
    let addresses: Vec<String> = parts.next().unwrap().split(',').map(String::from).collect();
    let output_path = parts.next().unwrap().to_string();
    let sinks: Vec<Captured<(u64, u64), u64, i64>> =
        programs().iter().map(|_| Captured::new()).collect();
    let worker_sinks = sinks.clone();
    let config = timely::Config {
        communication: timely::CommunicationConfig::Cluster {
            threads: 2,
            process,
            addresses,
            report: false,
            zerocopy: false,
        },
        worker: timely::WorkerConfig::default(),
    };
    let input = test_workload();
    let guards = timely::execute(config, move |worker| {
        for ((_, program, _), sink) in programs().into_iter().zip(&worker_sinks) {
            drive_ripple(worker, &input, 2, program, sink);
        }
    })
    .expect("cluster starts");
    for result in guards.join() {
        result.expect("worker completes");
    }
    let mut file = std::fs::File::create(&output_path).unwrap();
    for ((name, _, _), sink) in programs().iter().zip(&sinks) {
        for ((a, b), time, diff) in sink.consolidated() {
            writeln!(file, "{name} {a} {b} {time} {diff}").unwrap();
        }
    }
}

#[test]
fn two_processes_match_one() {
    let ports: Vec<u16> = (0..2)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        })
        .collect();
    let addresses = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let dir = std::env::temp_dir();
    let outputs: Vec<_> = (0..2)
        .map(|i| dir.join(format!("ripple-cluster-{}-{i}.txt", std::process::id())))
        .collect();
    let children: Vec<_> = (0..2)
        .map(|i| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "cluster_child", "--test-threads=1"])
                .env(CHILD, format!("{i};{addresses};{}", outputs[i].display()))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn cluster process")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "a cluster process failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let mut lines = Vec::new();
    for path in &outputs {
        lines.extend(
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>(),
        );
        let _ = std::fs::remove_file(path);
    }
    let input = test_workload();
    for (name, program, _) in programs() {
        let rows: Vec<Row> = lines
            .iter()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                (f[0] == name).then(|| {
                    (
                        (f[1].parse().unwrap(), f[2].parse().unwrap()),
                        f[3].parse().unwrap(),
                        f[4].parse().unwrap(),
                    )
                })
            })
            .collect();
        let expected = run_ripple(&input, Setup::default(), program);
        assert_eq!(
            consolidate_rows(rows),
            expected,
            "{name}: two processes differ from one"
        );
        assert!(
            !expected.is_empty() || name == "scc",
            "{name}: empty output tests nothing"
        );
    }
}
