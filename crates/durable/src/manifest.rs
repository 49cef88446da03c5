//! The manifest: what a checkpoint covers, in a small text file committed atomically.
//!
//! ```text
//! ripple-state 1
//! frontier 1234                       every time below 1234 is in the snapshot
//! file batch-00000012.rpl 5000 0 81920  the snapshot's batch files, oldest first:
//! file batch-00000015.rpl 310 155 8192    name, updates, removals, bytes
//! meta input.offset 48213             what the application recorded (values escaped)
//! checksum 1f2e3d4c                   CRC-32C of every byte before this line
//! ```
//!
//! [`Manifest::commit`] writes `MANIFEST.tmp`, syncs it, renames it over `MANIFEST` and syncs
//! the directory: after a crash the directory holds the old manifest or the new one, whole.
//! [`Manifest::load`] refuses a manifest whose checksum or lines do not match.

use crate::error::DurableError;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The manifest's file name in a state directory.
pub const MANIFEST: &str = "MANIFEST";
/// Where a manifest is written before its rename.
pub const MANIFEST_TMP: &str = "MANIFEST.tmp";
/// The format's first line.
const HEADER: &str = "ripple-state 1";

/// One batch file of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    pub name: String,
    /// Updates in the file, and those of them with negative diffs.
    pub updates: u64,
    pub removals: u64,
    /// The file's length.
    pub bytes: u64,
}

/// A committed checkpoint (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Every input time below this is in the snapshot; none at or after it.
    pub frontier: u64,
    /// The snapshot: batch files whose updates sum to the input collection compacted to
    /// `frontier`, oldest first.
    pub files: Vec<SnapshotFile>,
    /// What the application recorded with the checkpoint: where its input and output stood,
    /// and what the state belongs to.
    pub meta: BTreeMap<String, String>,
}

impl Manifest {
    /// The manifest as text, its checksum last.
    pub fn encode(&self) -> String {
        let mut text = format!("{HEADER}\nfrontier {}\n", self.frontier);
        for file in &self.files {
            text.push_str(&format!(
                "file {} {} {} {}\n",
                file.name, file.updates, file.removals, file.bytes
            ));
        }
        for (key, value) in &self.meta {
            assert!(
                !key.is_empty() && !key.contains([' ', '\n', '%']),
                "a meta key is one word: {key:?}"
            );
            text.push_str(&format!("meta {key} {}\n", escape(value)));
        }
        let checksum = crc32c::crc32c(text.as_bytes());
        text.push_str(&format!("checksum {checksum:08x}\n"));
        text
    }

    /// Reads a manifest written by [`Manifest::encode`]; `path` names it in errors.
    pub fn decode(text: &str, path: &Path) -> Result<Self, DurableError> {
        let damaged = |what: String| DurableError::damaged(path, what);
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map_or(0, |newline| newline + 1);
        let (body, last) = text.split_at(body_end);
        if !last.starts_with("checksum ") {
            return Err(damaged(
                "the manifest is cut short (no checksum line)".into(),
            ));
        }
        // Compared as text: the line must be exactly what `encode` writes.
        if last != format!("checksum {:08x}\n", crc32c::crc32c(body.as_bytes())) {
            return Err(damaged(
                "the manifest's checksum does not match its contents".into(),
            ));
        }
        // Lines end at `\n` alone (a value's `\r` is escaped anyway).
        let mut lines = body.strip_suffix('\n').unwrap_or(body).split('\n');
        if lines.next() != Some(HEADER) {
            return Err(damaged(format!(
                "not a ripple state manifest of this version (expected `{HEADER}`)"
            )));
        }
        let mut manifest = Manifest::default();
        let mut frontier = None;
        for (number, line) in lines.enumerate() {
            let bad = || damaged(format!("line {}: cannot read `{line}`", number + 2));
            let (kind, rest) = line.split_once(' ').ok_or_else(bad)?;
            match kind {
                "frontier" => frontier = Some(rest.parse().map_err(|_| bad())?),
                "file" => {
                    let fields: Vec<&str> = rest.split(' ').collect();
                    let [name, updates, removals, bytes] = fields[..] else {
                        return Err(bad());
                    };
                    manifest.files.push(SnapshotFile {
                        name: name.to_string(),
                        updates: updates.parse().map_err(|_| bad())?,
                        removals: removals.parse().map_err(|_| bad())?,
                        bytes: bytes.parse().map_err(|_| bad())?,
                    });
                }
                "meta" => {
                    let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
                    manifest
                        .meta
                        .insert(key.to_string(), unescape(value).ok_or_else(bad)?);
                }
                _ => return Err(bad()),
            }
        }
        manifest.frontier = frontier.ok_or_else(|| damaged("no frontier line".into()))?;
        Ok(manifest)
    }

    /// Reads the manifest of the state directory `dir`: `None` if it has none yet.
    pub fn load(dir: &Path) -> Result<Option<Self>, DurableError> {
        let path = dir.join(MANIFEST);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| DurableError::damaged(&path, "the manifest is not text"))?;
                Self::decode(&text, &path).map(Some)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(DurableError::io(path, error)),
        }
    }

    /// Replaces the manifest of the state directory `dir` with this one, atomically and
    /// durably (see the module documentation). `before_rename` runs between the synced
    /// temporary file and the rename (a test's crash point).
    pub fn commit(&self, dir: &Path, before_rename: impl FnOnce()) -> Result<(), DurableError> {
        let temporary = dir.join(MANIFEST_TMP);
        let written = File::create(&temporary).and_then(|mut file| {
            file.write_all(self.encode().as_bytes())?;
            file.sync_all()
        });
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(DurableError::io(temporary, error));
        }
        before_rename();
        let path = dir.join(MANIFEST);
        std::fs::rename(&temporary, &path).map_err(|error| DurableError::io(&path, error))?;
        sync_dir(dir)
    }
}

/// Syncs the entries of the directory `dir` (renames, creations, deletions) to the device.
pub fn sync_dir(dir: &Path) -> Result<(), DurableError> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| DurableError::io(dir, error))
}

/// `value` on one line: `%`, newlines and carriage returns as `%25`, `%0A`, `%0D`.
fn escape(value: &str) -> String {
    value
        .replace('%', "%25")
        .replace('\n', "%0A")
        .replace('\r', "%0D")
}

fn unescape(value: &str) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        match rest.get(at + 1..at + 3)? {
            "25" => out.push('%'),
            "0A" => out.push('\n'),
            "0D" => out.push('\r'),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn manifest(frontier: u64, values: Vec<String>) -> Manifest {
        Manifest {
            frontier,
            files: (0..values.len() as u64)
                .map(|i| SnapshotFile {
                    name: format!("batch-{i:08}.rpl"),
                    updates: i * 7,
                    removals: i,
                    bytes: i * 4096,
                })
                .collect(),
            meta: values
                .into_iter()
                .enumerate()
                .map(|(i, value)| (format!("key{i}"), value))
                .collect(),
        }
    }

    proptest! {
        #[test]
        fn round_trip(frontier in any::<u64>(), values in prop::collection::vec(".*", 0..5)) {
            let manifest = manifest(frontier, values);
            let text = manifest.encode();
            prop_assert_eq!(Manifest::decode(&text, Path::new("M")).unwrap(), manifest);
        }

        /// Any change of one byte, and any cut, is refused.
        #[test]
        fn damage_is_refused(at in any::<prop::sample::Index>(), flip in 1u8..=255, cut in any::<bool>()) {
            let text = manifest(17, vec!["a b%c\nd".into(), String::new()]).encode();
            let mut bytes = text.into_bytes();
            let at = at.index(bytes.len());
            if cut {
                bytes.truncate(at);
            } else {
                bytes[at] ^= flip;
            }
            if let Ok(text) = String::from_utf8(bytes) {
                prop_assert!(Manifest::decode(&text, Path::new("M")).is_err());
            }
        }
    }

    #[test]
    fn commit_replaces_whole() {
        let dir = std::env::temp_dir().join(format!("ripple-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Manifest::load(&dir).unwrap(), None);
        let first = manifest(3, vec!["x".into()]);
        first.commit(&dir, || {}).unwrap();
        assert_eq!(Manifest::load(&dir).unwrap(), Some(first.clone()));
        let second = manifest(9, vec!["y".into(), "z".into()]);
        // Stopped before the rename: the old manifest stands.
        let stopped = std::panic::catch_unwind(|| second.commit(&dir, || panic!("crash")));
        assert!(stopped.is_err());
        assert_eq!(Manifest::load(&dir).unwrap(), Some(first));
        second.commit(&dir, || {}).unwrap();
        assert_eq!(Manifest::load(&dir).unwrap(), Some(second));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
