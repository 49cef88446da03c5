//! Random input files and argument combinations: no panic and no hang, whatever the bytes.
//! Every run ends with exit code 0 (good input) or 2 (bad input, with a message), in the
//! parser, in the stream reader and in the `ripple` binary.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use ripple_cli::changes::read_changes;
use ripple_cli::source::{Fed, Feed};
use ripple_cli::stream::Stream;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Lines that are mostly almost right: fields of random kinds, extreme numbers, stray bytes.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let field = prop_oneof![
        (0u32..6).prop_map(|n| n.to_string()),
        Just(i64::MAX.to_string()),
        Just(i64::MIN.to_string()),
        Just(u64::MAX.to_string()),
        Just("-1".to_string()),
        "[a-z@#\u{feff}\u{1b} ]{0,3}",
    ];
    prop_oneof![
        proptest::collection::vec(field, 1..6).prop_map(|fields| fields.join(",").into_bytes()),
        (0u64..8).prop_map(|t| format!("@{t}").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(line(), 0..30).prop_map(|lines| lines.join(&b'\n'))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The parser and the stream reader end, with changes or an error, on any bytes.
    #[test]
    fn any_bytes_parse_or_fail_cleanly(bytes in input()) {
        let _ = read_changes(&bytes[..], "fuzz");
        let reader = std::io::Cursor::new(bytes);
        let mut stream = Stream::spawn(Box::new(reader), "fuzz".into()).unwrap();
        loop {
            match stream.feed(3, None, &mut |_, _, _| {}) {
                Ok(Fed::End) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

/// Runs `ripple` with `args` and `stdin`, failing on a hang.
fn run_ripple(args: &[String], stdin: &[u8]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ripple"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let began = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return (status.code(), stderr);
        }
        if began.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("ripple {args:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Random inputs through the binary, with random computations, workers, batches and input
/// modes: exit 0 or 2, never a panic.
#[test]
fn random_runs_exit_0_or_2() {
    let dir = std::env::temp_dir().join(format!("ripple-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for case in 0..24 {
        let bytes = input().new_tree(&mut runner).unwrap().current();
        let computation = ["bfs", "reach", "degrees", "cc"][rng.gen_range(0..4)];
        let mut args = vec![computation.to_string()];
        args.extend(["-w".into(), rng.gen_range(1..3).to_string()]);
        args.extend(["--batch".into(), rng.gen_range(1..5).to_string()]);
        if rng.gen_bool(0.3) {
            args.extend(["--roots".into(), "0,2".into()]);
        }
        let stdin = if rng.gen_bool(0.5) {
            args.extend(["--input".into(), "-".into()]);
            bytes.clone()
        } else {
            let file = dir.join(format!("in-{case}.csv"));
            std::fs::write(&file, &bytes).unwrap();
            args.extend(["--input".into(), file.display().to_string()]);
            Vec::new()
        };
        let (code, stderr) = run_ripple(&args, &stdin);
        assert!(
            matches!(code, Some(0) | Some(2)),
            "ripple {args:?} on {:?}: exit {code:?}: {stderr}",
            String::from_utf8_lossy(&bytes)
        );
        assert!(!stderr.contains("panicked"), "ripple {args:?}: {stderr}");
        if code == Some(2) {
            assert!(stderr.starts_with("ripple: error: "), "{stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
