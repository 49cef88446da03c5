//! Differential tests: each program on random change streams, ripple against
//! differential-dataflow 0.26, compared as consolidated updates at every time.

mod common;

use common::{programs, run_dd, run_ripple, workload, Setup};

#[test]
fn programs_match_differential_dataflow() {
    let seeds: u64 = std::env::var("RIPPLE_DIFFERENTIAL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for (name, ripple, dd) in programs() {
        for seed in 0..seeds {
            let input = workload(seed, 12 + seed * 4, 20 + seed as usize * 6, 20, 10);
            let expected = run_dd(&input, dd);
            let actual = run_ripple(&input, Setup::default(), ripple);
            assert_eq!(
                actual, expected,
                "{name}, seed {seed}: ripple differs from differential-dataflow"
            );
            // With storage: everything spilled and no cache, then a tiny budget and cache.
            for storage in [(0, 0), (4096, 1024)] {
                let setup = Setup {
                    storage: Some(storage),
                    ..Setup::default()
                };
                let spilled = run_ripple(&input, setup, ripple);
                assert_eq!(
                    spilled, expected,
                    "{name}, seed {seed}: ripple with storage {storage:?} differs from differential-dataflow"
                );
            }
            assert!(
                !expected.is_empty() || name == "scc",
                "{name}, seed {seed}: empty output tests nothing"
            );
        }
    }
}

/// Long iterations: a path numbered along it, cut in the middle and healed at later times,
/// so labels and depths change at many rounds of one time and keys' histories grow long
/// enough for the reduce to keep their totals (`reduce/totals.rs`), with and without more
/// workers, bigger steps and lockstep.
#[test]
fn long_iterations_match_differential_dataflow() {
    let nodes = 80u64;
    let mut edges: Vec<((u64, u64), u64, i64)> =
        (1..nodes).map(|node| ((node - 1, node), 0, 1)).collect();
    let middle = (nodes / 2, nodes / 2 + 1);
    edges.extend([(middle, 3, -1), (middle, 6, 1), ((nodes - 1, 0), 8, 1)]);
    let input = common::Workload {
        edges,
        roots: vec![(0, 0, 1), (nodes / 3, 5, 1)],
        max_time: 10,
    };
    let setups = [
        Setup::default(),
        Setup {
            workers: 2,
            ..Setup::default()
        },
        Setup {
            workers: 2,
            batch: 4,
            lockstep: true,
            ..Setup::default()
        },
    ];
    for (name, ripple, dd) in programs() {
        let expected = run_dd(&input, dd);
        for setup in setups {
            let actual = run_ripple(&input, setup, ripple);
            assert_eq!(
                actual, expected,
                "{name}, {setup:?}: ripple differs from differential-dataflow"
            );
        }
    }
}
