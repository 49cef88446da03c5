//! Checkpoints against a model: whatever the changes, parts and merges, a state directory
//! reopened after a checkpoint replays exactly the collection at its frontier; leftovers of a
//! checkpoint that did not commit are removed; damage is an error naming the file.

use proptest::prelude::*;
use ripple_durable::{Checkpoints, DurableError, StateDir};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory for one test case.
fn fresh_dir(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ripple-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The collection a state directory's last checkpoint holds, by replay.
fn replayed(checkpoints: &Checkpoints<(u32, u32)>) -> BTreeMap<(u32, u32), i64> {
    let mut collection = BTreeMap::new();
    checkpoints
        .replay(|data, diff| *collection.entry(data).or_insert(0) += diff)
        .unwrap();
    collection.retain(|_, diff| *diff != 0);
    collection
}

/// The files in `dir` but its lock and manifest, sorted.
fn dir_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "LOCK" && name != "MANIFEST")
        .collect();
    names.sort();
    names
}

/// The snapshot's files, sorted.
fn live_files(checkpoints: &Checkpoints<(u32, u32)>) -> Vec<String> {
    let mut live: Vec<String> = checkpoints.files().iter().map(|f| f.name.clone()).collect();
    live.sort();
    live
}

/// A step: changes `(data, diff)` at the step's time, and whether a checkpoint follows it.
type Step = (Vec<((u32, u32), i64)>, bool);

/// Steps of changes.
fn steps() -> impl Strategy<Value = Vec<Step>> {
    let change = (
        (0u32..20, 0u32..4),
        prop_oneof![Just(1i64), Just(-1), Just(2)],
    );
    prop::collection::vec((prop::collection::vec(change, 0..40), any::<bool>()), 1..25)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn reopened_snapshots_match_the_model(steps in steps(), part in 1usize..64, reopen_every in 1usize..5) {
        let dir = fresh_dir("model");
        let mut checkpoints = Checkpoints::new(StateDir::open(&dir).unwrap());
        checkpoints.set_part_updates(part);
        let mut model = BTreeMap::new();
        let mut committed = BTreeMap::new();
        for (time, (changes, checkpoint)) in steps.iter().enumerate() {
            let time = time as u64;
            for &(data, diff) in changes {
                checkpoints.record(data, time, diff).unwrap();
                *model.entry(data).or_insert(0i64) += diff;
            }
            model.retain(|_, diff| *diff != 0);
            if *checkpoint {
                checkpoints.checkpoint(time + 1, BTreeMap::new(), || {}).unwrap();
                // The merge it started (if any) done, a second commit at the same frontier
                // takes its file.
                assert_eq!(checkpoints.finish_merge().1, None);
                checkpoints.checkpoint(time + 1, BTreeMap::new(), || {}).unwrap();
                assert_eq!(checkpoints.finish_merge().1, None);
                committed = model.clone();
                if (time as usize).is_multiple_of(reopen_every) {
                    drop(checkpoints);
                    checkpoints = Checkpoints::new(StateDir::open(&dir).unwrap());
                    checkpoints.set_part_updates(part);
                    prop_assert_eq!(checkpoints.last().unwrap().frontier, time + 1);
                }
                prop_assert_eq!(&replayed(&checkpoints), &committed);
                // No file but the snapshot's (and a merge's, not yet committed) stays.
                let live = live_files(&checkpoints);
                let committed: Vec<String> = checkpoints.last().unwrap().files.iter().map(|f| f.name.clone()).collect();
                for name in dir_files(&dir) {
                    prop_assert!(live.contains(&name) || committed.contains(&name), "{name}");
                }
            }
        }
        // Parts written after the last checkpoint, and a merge not committed, are leftovers
        // of a run that stopped: a reopened directory holds the last checkpoint and its files.
        drop(checkpoints);
        let checkpoints = Checkpoints::<(u32, u32)>::new(StateDir::open(&dir).unwrap());
        prop_assert_eq!(&replayed(&checkpoints), &committed);
        prop_assert_eq!(dir_files(&dir), live_files(&checkpoints));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A directory with one checkpoint of 1,000 changes in two files.
fn checkpointed() -> (PathBuf, Vec<String>) {
    let dir = fresh_dir("damage");
    let mut checkpoints = Checkpoints::new(StateDir::open(&dir).unwrap());
    for i in 0..1000u32 {
        checkpoints.record((i, i), 0, 1).unwrap();
    }
    checkpoints.checkpoint(1, BTreeMap::new(), || {}).unwrap();
    for i in 0..100u32 {
        checkpoints.record((i, 7), 1, 1).unwrap();
    }
    checkpoints.checkpoint(2, BTreeMap::new(), || {}).unwrap();
    let names = checkpoints.files().iter().map(|f| f.name.clone()).collect();
    (dir, names)
}

/// Merges keep the files few, and the snapshot near its live size, over many checkpoints of
/// a sliding window (each change inserts a datum and removes an old one).
#[test]
fn merges_bound_the_files_and_the_space() {
    let dir = fresh_dir("merges");
    let mut checkpoints = Checkpoints::new(StateDir::open(&dir).unwrap());
    let window = 2000u32;
    for i in 0..window {
        checkpoints.record((i, 0), 0, 1).unwrap();
    }
    checkpoints.checkpoint(1, BTreeMap::new(), || {}).unwrap();
    for time in 1..400u64 {
        for step in 0..10u32 {
            let i = window + (time as u32 - 1) * 10 + step;
            checkpoints.record((i, 0), time, 1).unwrap();
            checkpoints.record((i - window, 0), time, -1).unwrap();
        }
        assert_eq!(checkpoints.finish_merge().1, None);
        checkpoints
            .checkpoint(time + 1, BTreeMap::new(), || {})
            .unwrap();
        let files = checkpoints.files();
        assert!(
            files.len() <= ripple_durable::checkpoints::MAX_FILES + 1,
            "{files:?}"
        );
        let updates: u64 = files.iter().map(|file| file.updates).sum();
        // A fifth of removals may wait for a merge, with what they cancel: 1.25x, and the
        // checkpoint that starts the merge adds one more delta.
        assert!(
            updates * 100 <= u64::from(window) * 130,
            "{updates} for {window}"
        );
    }
    assert_eq!(replayed(&checkpoints).len(), window as usize);
    drop(checkpoints);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damage_is_an_error_naming_the_file() {
    // A flipped byte in a block: replay fails, naming the file.
    let (dir, names) = checkpointed();
    assert_eq!(names.len(), 2, "{names:?}");
    let path = dir.join(&names[0]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let checkpoints = Checkpoints::<(u32, u32)>::new(StateDir::open(&dir).unwrap());
    let error = checkpoints.replay(|_, _| {}).unwrap_err().to_string();
    assert!(error.contains(&names[0]), "{error}");

    // A missing file: refused at opening.
    std::fs::remove_file(dir.join(&names[1])).unwrap();
    drop(checkpoints);
    let error = StateDir::open(&dir).unwrap_err();
    assert!(matches!(error, DurableError::Damaged { .. }), "{error}");
    assert!(error.to_string().contains("missing"), "{error}");

    // A manifest cut short.
    let manifest = dir.join("MANIFEST");
    let text = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &text[..text.len() - 5]).unwrap();
    let error = StateDir::open(&dir).unwrap_err().to_string();
    assert!(
        error.contains("MANIFEST") && error.contains("checksum"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_run_is_refused_while_the_first_holds_the_lock() {
    let dir = fresh_dir("lock");
    let first = StateDir::open(&dir).unwrap();
    let error = StateDir::open(&dir).unwrap_err();
    assert!(matches!(error, DurableError::Locked { .. }), "{error}");
    drop(first);
    StateDir::open(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_crash_before_the_manifest_rename_keeps_the_last_checkpoint() {
    let (dir, names) = checkpointed();
    let mut checkpoints = Checkpoints::<(u32, u32)>::new(StateDir::open(&dir).unwrap());
    let before = replayed(&checkpoints);
    for i in 0..5000u32 {
        checkpoints.record((i, 9), 2, 1).unwrap();
    }
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        checkpoints.checkpoint(3, BTreeMap::new(), || panic!("crash"))
    }));
    assert!(crashed.is_err());
    drop(checkpoints);
    let checkpoints = Checkpoints::<(u32, u32)>::new(StateDir::open(&dir).unwrap());
    assert_eq!(checkpoints.last().unwrap().frontier, 2);
    assert_eq!(replayed(&checkpoints), before);
    let live: Vec<&str> = checkpoints
        .files()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(live, names.iter().map(String::as_str).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}
