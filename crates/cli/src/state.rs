//! `--state-dir`: durable runs. After any number of crashes and restarts with the same
//! command, the output is byte for byte that of a run that never stopped.
//!
//! Every `--checkpoint-every` (between steps, and when the input ends) worker 0 flushes and
//! syncs the output, writes the edge changes fed since the last checkpoint as batch files
//! ([`ripple_durable::Checkpoints`]) and commits a manifest at the frontier `F` of the steps
//! fed. The manifest records, beside the snapshot of the edges at `F`:
//!
//! - what the state belongs to: the computation and its roots, and the input (a generated
//!   graph's parameters; a file's size and a checksum of its first 64 KiB; a followed file's
//!   checksum of its first bytes; stdin);
//! - where the input stood at `F` (bytes and lines read, for a followed file; a file read
//!   whole and the generator resume by time);
//! - the output's length (of an `--output` file), its rows and its checksum at `F`.
//!
//! A restart finds the manifest, refuses the state of another computation, input or output
//! (exit 2), feeds the snapshot as one step at time `F - 1` (rehydration: the operators'
//! state is computed again, not stored), drops the rows of times below `F` (the output file is
//! cut back to its length at `F`), and goes on from the input's position at `F`.

use crate::changes::{Edge, Multiplicities};
use crate::computation::Computation;
use crate::generator::GraphSpec;
use crate::output::Checksum;
use crate::source::{Position, HEAD_BYTES};
use crate::stdin_log::StdinLog;
use ripple_durable::{Checkpoints, DurableError, StateDir};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The environment variable of the crash test: `N` stops the process (SIGKILL) in its `N`th
/// checkpoint, after the batch files are written and before the manifest is renamed.
pub const CRASH_HOOK: &str = "RIPPLE_TEST_CRASH_IN_CHECKPOINT";

/// The environment variable of the disk-full test: batch files of the state directory fail
/// to be written, as on a full disk, once the process has written this many bytes of them.
pub const WRITE_LIMIT_HOOK: &str = "RIPPLE_TEST_STATE_WRITE_LIMIT";

/// Where a run's input comes from, as a state directory records it.
#[derive(Clone, Debug)]
pub enum InputKind {
    Generated(GraphSpec),
    /// A file read whole: it must be the same file on a restart.
    File(PathBuf),
    /// A followed file: its beginning must be the same on a restart.
    Follow(PathBuf),
    /// Stdin, with a log of the lines received.
    Stdin,
}

/// Where a run's rows go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// `--output FILE` (its canonical path): cut back on a restart.
    File(PathBuf),
    /// Stdout: the rows after the checkpoint are written again after a restart.
    Stdout,
    /// `--summary` alone.
    None,
}

impl OutputKind {
    fn name(&self) -> String {
        match self {
            OutputKind::File(path) => format!("the file {}", path.display()),
            OutputKind::Stdout => "stdout".into(),
            OutputKind::None => "none".into(),
        }
    }
}

/// The output at a checkpoint: its length in bytes (of a file), its rows and their checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputMark {
    pub length: Option<u64>,
    pub rows: u64,
    pub checksum: Checksum,
    /// The CRC-32C of the file's last bytes before `length` (up to [`HEAD_BYTES`] of them), and
    /// how many: a restart checks that the file is the one written.
    pub tail: Option<(u64, u32)>,
}

/// Why a state directory cannot serve this run.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// It cannot be used: in use, damaged, of an input that cannot be read (exit 2), or it
    /// cannot be read or written (exit 1).
    #[error("--state-dir {dir}: {source}")]
    Unusable { dir: PathBuf, source: DurableError },
    /// It holds the state of another run (exit 2).
    #[error("--state-dir {dir} holds the state of another run: {what}")]
    Mismatch { dir: PathBuf, what: String },
}

impl StateError {
    /// The exit code: 2 for a directory the user must fix, 1 for a failure to read it.
    pub fn exit_code(&self) -> u8 {
        match self {
            StateError::Unusable { source, .. } => exit_code(source),
            StateError::Mismatch { .. } => 2,
        }
    }
}

/// The exit code of a failure of the state directory: 2 for one the user must fix (damaged,
/// in use, of another run), 1 for one of the system (a read or write failed, a full disk).
pub fn exit_code(error: &DurableError) -> u8 {
    match error {
        DurableError::Io { .. } | DurableError::Storage(_) => 1,
        _ => 2,
    }
}

/// Where a resumed run starts: the checkpoint's frontier, input position and output.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resume {
    pub frontier: u64,
    pub position: Position,
    pub output: OutputMark,
}

/// A durable run's checkpoints (see the module documentation).
pub struct Durability {
    checkpoints: Checkpoints<Edge>,
    /// What the state belongs to, recorded in every manifest.
    identity: BTreeMap<String, String>,
    input: InputKind,
    output: OutputKind,
    /// The output file, synced at each checkpoint.
    output_file: Option<File>,
    /// The log of stdin's lines, synced at each checkpoint.
    stdin_log: Option<Arc<StdinLog>>,
    every: Duration,
    next: Instant,
    /// The frontier of the last checkpoint (found or made).
    last_frontier: u64,
    resume: Option<Resume>,
    /// The crash test's checkpoint (see [`CRASH_HOOK`]).
    crash_at: Option<u64>,
    /// What the checkpoints did (see [`Durability::summary`]).
    stats: CheckpointSummary,
}

/// What a run's checkpoints did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointSummary {
    pub count: u64,
    /// Bytes of the batches of new changes, and of merges.
    pub new_bytes: u64,
    pub merged_bytes: u64,
    /// The snapshot's size on disk after the last checkpoint.
    pub snapshot_bytes: u64,
    pub longest: Duration,
    /// The frontier the run resumed from, if it did.
    pub resumed_from: Option<u64>,
}

impl Durability {
    /// Opens the state directory `dir` for a run of `computation` from `roots` over `input`,
    /// writing to `output`; checks that a checkpoint found there belongs to this run.
    pub fn open(
        dir: &Path,
        computation: Computation,
        roots: &[u32],
        input: InputKind,
        output: OutputKind,
        every: Duration,
    ) -> Result<Self, StateError> {
        let unusable = |source| StateError::Unusable {
            dir: dir.to_path_buf(),
            source,
        };
        let limit = std::env::var(WRITE_LIMIT_HOOK)
            .ok()
            .and_then(|n| n.parse().ok());
        let state = StateDir::open_with_limit(dir, limit).map_err(unusable)?;
        let mut identity = BTreeMap::new();
        let roots = if computation.uses_roots() {
            let roots: Vec<String> = roots.iter().map(u32::to_string).collect();
            format!(" --roots {}", roots.join(","))
        } else {
            String::new()
        };
        identity.insert("run".into(), format!("{}{roots}", computation.name()));
        identity.insert("input".into(), input_identity(&input).map_err(unusable)?);
        identity.insert("output".into(), output.name());
        let resume = match state.manifest() {
            None => None,
            Some(manifest) => {
                Some(check(dir, &identity, &input, &manifest.meta)?.at(manifest.frontier))
            }
        };
        let crash_at = std::env::var(CRASH_HOOK).ok().and_then(|n| n.parse().ok());
        Ok(Self {
            checkpoints: Checkpoints::new(state),
            identity,
            input,
            output,
            output_file: None,
            stdin_log: None,
            every,
            next: Instant::now() + every,
            last_frontier: resume.map_or(0, |resume: Resume| resume.frontier),
            resume,
            crash_at,
            stats: CheckpointSummary::default(),
        })
    }

    /// What the checkpoints did, and the frontier the run resumed from (if it was past 0: a
    /// snapshot was fed), for `--summary`.
    pub fn summary(&self) -> CheckpointSummary {
        let resumed_from = self.resume.map(|resume| resume.frontier);
        CheckpointSummary {
            resumed_from: resumed_from.filter(|frontier| *frontier > 0),
            ..self.stats
        }
    }

    /// The checkpoint the run resumes from, if the directory held one.
    pub fn resume(&self) -> Option<Resume> {
        self.resume
    }

    /// Checks that the output file is as the checkpoint resumed left it: no shorter, and
    /// its last bytes then the same.
    pub fn check_output(&self) -> Result<(), StateError> {
        let (OutputKind::File(path), Some(resume)) = (&self.output, self.resume) else {
            return Ok(());
        };
        let (Some(length), Some((bytes, crc))) = (resume.output.length, resume.output.tail) else {
            return Ok(());
        };
        if tail_checksum(path, length, bytes).ok() != Some(crc) {
            return Err(StateError::Mismatch {
                dir: self.dir().to_path_buf(),
                what: format!(
                    "{} is not the output it wrote (shorter than its {length} bytes, or changed)",
                    path.display()
                ),
            });
        }
        Ok(())
    }

    /// Syncs `file`, the output, at each checkpoint.
    pub fn set_output_file(&mut self, file: File) {
        self.output_file = Some(file);
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        self.checkpoints.state().path()
    }

    /// Syncs `log`, the log of stdin, at each checkpoint.
    pub fn set_stdin_log(&mut self, log: Arc<StdinLog>) {
        self.stdin_log = Some(log);
    }

    /// The edges' multiplicities at the checkpoint (a resumed stream checks removals against
    /// them).
    pub fn multiplicities(&self) -> Result<Multiplicities, DurableError> {
        let mut multiplicities = Multiplicities::default();
        let mut overflow = None;
        self.checkpoints.replay(|edge, diff| {
            if let Err(what) = multiplicities.seed(edge, diff) {
                overflow.get_or_insert(what);
            }
        })?;
        match overflow {
            Some(what) => Err(DurableError::Damaged {
                path: self.checkpoints.state().path().to_path_buf(),
                what: format!("the snapshot's {what}"),
            }),
            None => Ok(multiplicities),
        }
    }

    /// Feeds the checkpoint's snapshot to `push` (see [`Checkpoints::replay`]).
    pub fn replay(&mut self, push: impl FnMut(Edge, i64)) -> Result<(), DurableError> {
        self.checkpoints.replay(push)
    }

    /// Records a change fed.
    pub fn record(&mut self, edge: Edge, time: u64, diff: i64) -> Result<(), DurableError> {
        self.checkpoints.record(edge, time, diff)
    }

    /// Whether a checkpoint is due.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Whether a checkpoint is due and would cover more than the last: a stream waiting for
    /// input checkpoints the steps it took since.
    pub fn due_beyond(&self, frontier: u64) -> bool {
        self.due() && frontier > self.last_frontier
    }

    /// Commits a checkpoint at `frontier`, the input at `position` and the output at
    /// `output` (flushed: its file is synced here, and its length taken).
    pub fn checkpoint(
        &mut self,
        frontier: u64,
        position: Position,
        output: OutputMark,
    ) -> Result<(), DurableError> {
        let began = Instant::now();
        let mut output = output;
        if let Some(file) = &self.output_file {
            let io = |error| DurableError::Io {
                path: PathBuf::from("--output"),
                source: error,
            };
            file.sync_data().map_err(io)?;
            let length = file.metadata().map_err(io)?.len();
            output.length = Some(length);
            if let OutputKind::File(path) = &self.output {
                let bytes = length.min(HEAD_BYTES);
                output.tail = Some((bytes, tail_checksum(path, length, bytes).map_err(io)?));
            }
        }
        let mut meta = self.identity.clone();
        if let InputKind::Follow(_) = &self.input {
            // The beginning of the file the reader read, up to the bytes read: a restart checks
            // it.
            let head = (position.head_len, position.head_crc);
            meta.insert("input.head".into(), format!("{}:{:08x}", head.0, head.1));
        }
        meta.insert("input.offset".into(), position.offset.to_string());
        meta.insert("input.line".into(), position.line.to_string());
        if let Some(length) = output.length {
            meta.insert("output.length".into(), length.to_string());
        }
        meta.insert("output.rows".into(), output.rows.to_string());
        meta.insert(
            "output.checksum".into(),
            format!("{:016x}", output.checksum.0),
        );
        if let Some((bytes, crc)) = output.tail {
            meta.insert("output.tail".into(), format!("{bytes}:{crc:08x}"));
        }
        if let Some(log) = &self.stdin_log {
            log.sync().map_err(|error| DurableError::Io {
                path: self.dir().to_path_buf(),
                source: error,
            })?;
        }
        self.stats.count += 1;
        let crash = self.crash_at == Some(self.stats.count);
        let stats = self.checkpoints.checkpoint(frontier, meta, || {
            if crash {
                let _ = signal_hook::low_level::raise(signal_hook::consts::SIGKILL);
            }
        })?;
        if let Some(error) = &stats.merge_error {
            eprintln!(
                "ripple: warning: a merge of the state's snapshot failed ({error}); its files stay as they are"
            );
        }
        self.stats.new_bytes += stats.new_bytes;
        self.stats.merged_bytes += stats.merged_bytes;
        self.stats.snapshot_bytes = stats.snapshot_bytes;
        self.stats.longest = self.stats.longest.max(began.elapsed());
        self.next = Instant::now() + self.every;
        self.last_frontier = frontier;
        if let Some(log) = &self.stdin_log {
            log.retire_before(position.offset)
                .map_err(|error| DurableError::Io {
                    path: self.dir().to_path_buf(),
                    source: error,
                })?;
        }
        Ok(())
    }
}

/// The identity of an input, as the manifest records it.
fn input_identity(input: &InputKind) -> Result<String, DurableError> {
    Ok(match input {
        InputKind::Generated(spec) => format!(
            "generated --nodes {} --edges {} --updates {} --seed {}",
            spec.nodes, spec.edges, spec.updates, spec.seed
        ),
        InputKind::File(path) => {
            let io = |error| DurableError::Io {
                path: path.clone(),
                source: error,
            };
            let size = std::fs::metadata(path).map_err(io)?.len();
            let head = head_checksum(path, size.min(HEAD_BYTES)).map_err(io)?;
            format!(
                "file of {size} bytes, first {} bytes' CRC-32C {head:08x}",
                size.min(HEAD_BYTES)
            )
        }
        InputKind::Follow(_) => "a followed file".into(),
        InputKind::Stdin => "stdin".into(),
    })
}

/// The CRC-32C of the first `length` bytes of the file `path` (fewer if it is shorter).
fn head_checksum(path: &Path, length: u64) -> std::io::Result<u32> {
    let mut head = Vec::new();
    File::open(path)?.take(length).read_to_end(&mut head)?;
    Ok(crc32c::crc32c(&head))
}

/// The CRC-32C of the `bytes` bytes of the file `path` before byte `end`; an error if the file
/// is shorter.
fn tail_checksum(path: &Path, end: u64, bytes: u64) -> std::io::Result<u32> {
    use std::os::unix::fs::FileExt;
    let mut tail = vec![0; bytes as usize];
    File::open(path)?.read_exact_at(&mut tail, end - bytes)?;
    Ok(crc32c::crc32c(&tail))
}

/// `length:crc` as a manifest records a head or a tail.
fn parse_span(text: &str) -> Option<(u64, u32)> {
    let (length, crc) = text.split_once(':')?;
    Some((length.parse().ok()?, u32::from_str_radix(crc, 16).ok()?))
}

/// What a manifest's `meta` says of the input's position and output, once its identity is
/// that of this run.
struct Recorded {
    position: Position,
    output: OutputMark,
}

impl Recorded {
    fn at(self, frontier: u64) -> Resume {
        Resume {
            frontier,
            position: self.position,
            output: self.output,
        }
    }
}

/// Checks that the checkpoint `meta` belongs to the run `identity` over `input`.
fn check(
    dir: &Path,
    identity: &BTreeMap<String, String>,
    input: &InputKind,
    meta: &BTreeMap<String, String>,
) -> Result<Recorded, StateError> {
    let mismatch = |what: String| StateError::Mismatch {
        dir: dir.to_path_buf(),
        what,
    };
    let damaged = |what: String| StateError::Unusable {
        dir: dir.to_path_buf(),
        source: DurableError::Damaged {
            path: dir.join(ripple_durable::manifest::MANIFEST),
            what,
        },
    };
    for (key, what) in [
        ("run", "the run"),
        ("input", "the input"),
        ("output", "the output"),
    ] {
        let recorded = meta.get(key).map(String::as_str).unwrap_or("(nothing)");
        if recorded != identity[key] {
            return Err(mismatch(format!(
                "{what} was `{recorded}`, this run's is `{}`",
                identity[key]
            )));
        }
    }
    let number = |key: &str| -> Result<Option<u64>, StateError> {
        meta.get(key)
            .map(|value| value.parse::<u64>())
            .transpose()
            .map_err(|_| damaged(format!("`{key}` is not a number")))
    };
    let mut position = Position {
        offset: number("input.offset")?.unwrap_or(0),
        line: number("input.line")?.unwrap_or(0),
        ..Position::default()
    };
    if let InputKind::Follow(path) = input {
        let (length, head) = meta
            .get("input.head")
            .and_then(|head| parse_span(head))
            .ok_or_else(|| damaged("no `input.head` of the followed file".into()))?;
        (position.head_len, position.head_crc) = (length, head);
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let now = head_checksum(path, length).ok();
        if size < position.offset || now != Some(head) {
            return Err(mismatch(format!(
                "{} is not the file the run followed (its first {length} bytes differ, or it is shorter than the {} bytes read)",
                path.display(),
                position.offset
            )));
        }
    }
    let tail = match meta.get("output.tail") {
        None => None,
        Some(tail) => Some(parse_span(tail).ok_or_else(|| damaged("a bad `output.tail`".into()))?),
    };
    let checksum = meta
        .get("output.checksum")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| damaged("no `output.checksum`".into()))?;
    Ok(Recorded {
        position,
        output: OutputMark {
            length: number("output.length")?,
            rows: number("output.rows")?.unwrap_or(0),
            checksum: Checksum(checksum),
            tail,
        },
    })
}
