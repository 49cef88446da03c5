//! The determinism matrix: every program gives identical per-time output whatever the input
//! batching, the number of workers, the chunk capacity, the keys per batched lookup and whether
//! workers exchange containers by pointer or as serialized bytes, or whether loops' reduces hold
//! their pending times in lockstep, or whether arrangements spill to storage.

mod common;

use common::{programs, run_ripple, workload, Setup};
use ripple_batcher::BatcherConfig;
use ripple_dataflow::RippleConfig;

#[test]
fn outputs_do_not_depend_on_batching_workers_or_chunk_capacity() {
    let seeds: u64 = std::env::var("RIPPLE_MATRIX_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let max_time = 8;
    for seed in 0..seeds {
        let input = workload(100 + seed, 16, 30, 16, max_time);
        for (name, program, _) in programs() {
            let reference = run_ripple(&input, Setup::default(), program);
            assert!(
                !reference.is_empty() || name == "scc",
                "{name}: empty output tests nothing"
            );
            for batch in [1, 3, max_time + 1] {
                for workers in [1, 2, 3] {
                    // 1 byte holds one record per chunk; 4 KiB a few hundred; then the default.
                    // Lookup runs shrink alongside: one key (every lookup a single probe), three
                    // (run boundaries among a handful of keys), then the default.
                    // Reduces in loops hold capabilities per pending time or at their meet.
                    for (chunk_bytes, probe_run, lockstep) in [
                        (1, 1, false),
                        (4096, 3, true),
                        (
                            BatcherConfig::default().chunk_bytes_max,
                            RippleConfig::PROBE_RUN_DEFAULT,
                            workers == 3,
                        ),
                    ] {
                        let setup = Setup {
                            workers,
                            binary: false,
                            batch,
                            chunk_bytes,
                            probe_run,
                            lockstep,
                            storage: None,
                        };
                        let output = run_ripple(&input, setup, program);
                        assert_eq!(output, reference, "{name}, seed {seed}: {setup:?} differs");
                    }
                }
                // Containers serialized between workers, as across processes.
                let setup = Setup {
                    workers: 2,
                    binary: true,
                    batch,
                    chunk_bytes: 4096,
                    probe_run: 2,
                    lockstep: true,
                    storage: None,
                };
                let output = run_ripple(&input, setup, program);
                assert_eq!(output, reference, "{name}, seed {seed}: {setup:?} differs");
                // Arrangements spilled: everything with no cache, or a tiny budget and cache.
                for (workers, storage) in [(1, (0, 0)), (2, (4096, 1024)), (3, (0, 0))] {
                    let setup = Setup {
                        workers,
                        batch,
                        chunk_bytes: 4096,
                        probe_run: 3,
                        storage: Some(storage),
                        ..Setup::default()
                    };
                    let output = run_ripple(&input, setup, program);
                    assert_eq!(output, reference, "{name}, seed {seed}: {setup:?} differs");
                }
            }
        }
    }
}
