//! Batch files: any batch written and read back block by block is the same batch; damaged,
//! cut or foreign files are errors that name the file (and the block), never panics or wrong
//! rows; a failed write leaves no file behind.

use proptest::prelude::*;
use ripple_storage::{write_batch, BatchFile, FileStore, LocalDir, StorageError};
use ripple_trace::{Batch, Builder, Description};
use ripple_updates::{Antichain, Product};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

type Time = Product<u64, u32>;
type U = (String, u64, Time, i64);
type Row = (String, u64, Time, i64);

/// A fresh directory under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("ripple-storage-test-{}-{id}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a scratch directory");
        Self(path)
    }

    fn dir(&self) -> LocalDir {
        LocalDir::new(&self.0).expect("the scratch directory")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn batch_of(mut rows: Vec<Row>) -> Batch<U> {
    rows.sort();
    rows.dedup_by(|b, a| {
        let same = (&a.0, a.1, a.2) == (&b.0, b.1, b.2);
        if same {
            a.3 += b.3;
        }
        same
    });
    rows.retain(|row| row.3 != 0);
    let mut builder = Builder::new();
    for (key, val, time, diff) in &rows {
        builder.push(key.as_bytes(), val, time, diff);
    }
    builder.done(Description::new(
        Antichain::from_elem(Product::new(0, 0)),
        Antichain::from_elem(Product::new(10, 0)),
    ))
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    let key = prop_oneof![Just(String::new()), "[a-c]{1,3}", "[a-z]{0,10}"];
    let time = (0u64..4, 0u32..3).prop_map(|(outer, round)| Product::new(outer, round));
    proptest::collection::vec((key, 0u64..5, time, -2i64..3), 0..200)
}

/// Every row of every block of the file, in order.
fn rows_of_file<S: FileStore>(file: &BatchFile<'_, U, S>) -> Result<Vec<Row>, StorageError> {
    let mut rows = Vec::new();
    for index in 0..file.block_count() {
        let block = file.block(index)?;
        let mut cursor = block.view().cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                cursor.map_times(|time, diff| {
                    let key = String::from_utf8_lossy(key).into_owned();
                    rows.push((key, *val, Product::new(*time.outer, *time.inner), *diff))
                });
                cursor.step_val();
            }
            cursor.step_key();
        }
    }
    Ok(rows)
}

/// A batch of a few hundred updates with String keys, written in blocks of about 16.
fn written() -> (Scratch, Batch<U>) {
    let scratch = Scratch::new();
    let rows = (0..300u64)
        .map(|i| (format!("key{:03}", i / 3), i % 5, Product::new(i % 4, 0), 1))
        .collect();
    let batch = batch_of(rows);
    write_batch(&scratch.dir(), "batch", &batch, 16).expect("the file is written");
    (scratch, batch)
}

proptest! {
    #[test]
    fn files_round_trip(rows in rows(), block_updates in 1usize..40) {
        let scratch = Scratch::new();
        let dir = scratch.dir();
        let batch = batch_of(rows);
        write_batch(&dir, "batch", &batch, block_updates).expect("the file is written");
        let file = BatchFile::<U, _>::open(&dir, "batch").expect("the file opens");
        prop_assert_eq!(file.description(), batch.description());
        prop_assert_eq!(file.len(), batch.len() as u64);
        prop_assert_eq!(rows_of_file(&file).expect("every block reads"), batch.to_rows());
        // Each block's key range is its first and last key, and the blocks are in key order.
        for index in 0..file.block_count() {
            let block = file.block(index).expect("the block reads");
            let view = block.view();
            let (first, last) = file.key_range(index);
            let mut cursor = view.cursor();
            prop_assert_eq!(cursor.get_key(), Some(first));
            let mut at = first;
            while let Some(key) = cursor.get_key() {
                at = key;
                cursor.step_key();
            }
            prop_assert_eq!(at, last);
        }
    }
}

/// A flipped byte anywhere is an error naming the file and, inside a block, the block: the
/// file is read to its end or to the first error, never to wrong rows.
#[test]
fn every_flipped_byte_is_an_error() {
    let (scratch, batch) = written();
    let path = scratch.0.join("batch");
    let intact = std::fs::read(&path).expect("the file");
    let dir = scratch.dir();
    for at in (0..intact.len()).step_by(7) {
        let mut damaged = intact.clone();
        damaged[at] ^= 0x10;
        std::fs::write(&path, &damaged).expect("the damaged file");
        let outcome = BatchFile::<U, _>::open(&dir, "batch").and_then(|file| rows_of_file(&file));
        match outcome {
            Ok(rows) => panic!("byte {at} flipped, read {} rows", rows.len()),
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains("batch"), "byte {at}: {message}");
                assert!(
                    message.contains("block")
                        || message.contains("footer")
                        || message.contains("version")
                        || message.contains("magic")
                        || message.contains("fit"),
                    "byte {at}: {message}"
                );
            }
        }
    }
    std::fs::write(&path, &intact).expect("the file again");
    let file = BatchFile::<U, _>::open(&dir, "batch").expect("the intact file opens");
    assert_eq!(rows_of_file(&file).expect("reads"), batch.to_rows());
}

/// Cut files, other files and another version are refused with a message.
#[test]
fn cut_and_foreign_files_are_refused() {
    let (scratch, _batch) = written();
    let path = scratch.0.join("batch");
    let intact = std::fs::read(&path).expect("the file");
    let dir = scratch.dir();
    let open = |bytes: &[u8]| {
        std::fs::write(&path, bytes).expect("written");
        BatchFile::<U, _>::open(&dir, "batch")
            .err()
            .expect("refused")
            .to_string()
    };
    assert!(open(&intact[..intact.len() - 8]).contains("magic"));
    assert!(open(&intact[..16]).contains("not a batch file"));
    assert!(open(b"").contains("not a batch file"));
    assert!(open(&[7u8; 64]).contains("magic"));
    let mut other_version = intact.clone();
    let version_at = intact.len() - 16;
    other_version[version_at] = 9;
    assert!(open(&other_version).contains("version 9"));
    // The same file read as a batch of other types: its layout does not match.
    std::fs::write(&path, &intact).expect("written");
    let other = BatchFile::<(u64, u64, u64, i64), _>::open(&dir, "batch");
    assert!(other.is_err());
    let missing = BatchFile::<U, _>::open(&dir, "missing")
        .err()
        .expect("no such file");
    assert!(missing.to_string().contains("missing"), "{missing}");
}

/// A store whose writes fail (a full disk) fails the write with its error.
struct FullDisk(LocalDir);

impl FileStore for FullDisk {
    fn write(&self, name: &str, _parts: &[&[u8]]) -> Result<(), StorageError> {
        let error = std::io::Error::from(std::io::ErrorKind::StorageFull);
        Err(StorageError::Io {
            path: self.path(name),
            source: error,
        })
    }
    fn read(&self, name: &str, range: Range<u64>) -> Result<Vec<u64>, StorageError> {
        self.0.read(name, range)
    }
    fn len(&self, name: &str) -> Result<u64, StorageError> {
        self.0.len(name)
    }
    fn delete(&self, name: &str) -> Result<(), StorageError> {
        self.0.delete(name)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path(name)
    }
}

#[test]
fn failed_writes_leave_nothing() {
    let scratch = Scratch::new();
    let batch = batch_of(vec![("a".into(), 1, Product::new(0, 0), 1)]);
    let full = FullDisk(scratch.dir());
    let error = write_batch(&full, "batch", &batch, 8).expect_err("the write fails");
    assert!(error.to_string().contains("batch"), "{error}");
    // A local write whose rename fails (a directory holds the name) removes its partial file.
    std::fs::create_dir(scratch.0.join("taken")).expect("a directory");
    let error = write_batch(&scratch.dir(), "taken", &batch, 8).expect_err("fails");
    assert!(error.to_string().contains("taken"), "{error}");
    let left: Vec<_> = std::fs::read_dir(&scratch.0)
        .expect("the directory")
        .map(|entry| entry.expect("an entry").file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("taken")]);
    // A file deleted is gone.
    let dir = scratch.dir();
    write_batch(&dir, "batch", &batch, 8).expect("written");
    dir.delete("batch").expect("deleted");
    assert!(BatchFile::<U, _>::open(&dir, "batch").is_err());
}
