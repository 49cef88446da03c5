//! The log of a durable run's stdin (`--input -` with `--state-dir`): stdin has no offsets to
//! go back to, so every line received is appended to a log in the state directory, synced at
//! each checkpoint.
//!
//! The log is a series of segments `stdin-<offset>.log`, each holding the lines received from
//! byte `offset` of stdin on; a checkpoint starts a new segment once the current one is big,
//! and deletes the segments wholly before its input position. A restarted run reads the log
//! from the checkpoint's position to its last complete line (a line cut by the crash is
//! dropped from the log), then goes on with stdin: the producer sends again from the first
//! line the log does not hold, which the restart names on stderr.

use crate::source::Position;
use crate::stream::LineSource;
use ripple_durable::DurableError;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A segment this big or bigger is closed at the next checkpoint.
const SEGMENT_BYTES: u64 = 64 << 20;

/// The log of stdin's lines (see the module documentation).
#[derive(Debug)]
pub struct StdinLog {
    dir: PathBuf,
    state: Mutex<LogState>,
}

#[derive(Debug)]
struct LogState {
    /// The segment being appended to.
    file: BufWriter<File>,
    /// The stdin offsets where the live segments begin, in order; the last is `file`'s.
    segments: Vec<u64>,
    /// The stdin offset after the last line appended.
    end: u64,
}

/// What the log held when a run resumed: lines to read again, and how far they go.
pub struct Held {
    /// The log's bytes from the checkpoint's position to its last complete line.
    replay: Box<dyn BufRead + Send>,
    /// The lines of stdin the log holds (counted from the first line ever received).
    pub lines: u64,
}

impl StdinLog {
    /// Opens the log in the state directory `dir` for a run resuming at `position` (the
    /// start, for a new run): drops a line cut short at its end, and returns what the log
    /// holds from `position` on.
    pub fn open(dir: &Path, position: Position) -> Result<(Arc<Self>, Held), DurableError> {
        let io = |error| DurableError::Io {
            path: dir.join("stdin-*.log"),
            source: error,
        };
        let segments = segment_offsets(dir).map_err(io)?;
        if segments
            .first()
            .is_some_and(|&first| first > position.offset)
        {
            return Err(DurableError::Damaged {
                path: segment_path(dir, segments[0]),
                what: format!(
                    "the stdin log begins at byte {}, after the checkpoint's position {}",
                    segments[0], position.offset
                ),
            });
        }
        Self::open_segments(dir, position, segments).map_err(io)
    }

    fn open_segments(
        dir: &Path,
        position: Position,
        mut segments: Vec<u64>,
    ) -> std::io::Result<(Arc<Self>, Held)> {
        if segments.is_empty() {
            segments.push(position.offset);
            File::create(segment_path(dir, position.offset))?;
        }
        // The last segment ends with the last complete line.
        let last = *segments.last().expect("a segment");
        let last_path = segment_path(dir, last);
        let mut bytes = std::fs::read(&last_path)?;
        let complete = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        bytes.truncate(complete);
        let file = OpenOptions::new().write(true).open(&last_path)?;
        file.set_len(complete as u64)?;
        let end = last + complete as u64;
        // The lines held after `position`, counted before they are read again.
        let mut line = Vec::new();
        let mut counting = BufReader::new(tail(dir, &segments, position.offset, end)?);
        let lines = position.line + count_lines(&mut counting, &mut line)?;
        let replay = tail(dir, &segments, position.offset, end)?;
        let mut file = BufWriter::with_capacity(1 << 16, file);
        file.seek(SeekFrom::End(0))?;
        let log = Arc::new(Self {
            dir: dir.to_path_buf(),
            state: Mutex::new(LogState {
                file,
                segments,
                end,
            }),
        });
        let held = Held {
            replay: Box::new(BufReader::new(replay)),
            lines,
        };
        Ok((log, held))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a line received.
    fn append(&self, line: &[u8]) -> std::io::Result<()> {
        let mut state = self.lock();
        state.file.write_all(line)?;
        state.end += line.len() as u64;
        Ok(())
    }

    /// Hands what was appended to the operating system (it then survives the process).
    fn flush(&self) -> std::io::Result<()> {
        self.lock().file.flush()
    }

    /// Syncs the log for a checkpoint; starts a new segment if the current one is big.
    pub fn sync(&self) -> std::io::Result<()> {
        let mut state = self.lock();
        state.file.flush()?;
        state.file.get_ref().sync_data()?;
        let base = *state.segments.last().expect("a segment");
        if state.end - base >= SEGMENT_BYTES {
            let end = state.end;
            let file = File::create(segment_path(&self.dir, end))?;
            ripple_durable::manifest::sync_dir(&self.dir).map_err(std::io::Error::other)?;
            state.file = BufWriter::with_capacity(1 << 16, file);
            state.segments.push(end);
        }
        Ok(())
    }

    /// Deletes the segments wholly before `offset` (a committed checkpoint's position).
    pub fn retire_before(&self, offset: u64) -> std::io::Result<()> {
        let mut state = self.lock();
        while state.segments.len() > 1 && state.segments[1] <= offset {
            let base = state.segments.remove(0);
            std::fs::remove_file(segment_path(&self.dir, base))?;
        }
        Ok(())
    }
}

/// The log's bytes from stdin offset `from` to `end`, across the segments beginning at
/// `segments`.
fn tail(
    dir: &Path,
    segments: &[u64],
    from: u64,
    end: u64,
) -> std::io::Result<Box<dyn Read + Send>> {
    let mut tail: Box<dyn Read + Send> = Box::new(std::io::empty());
    for (index, &base) in segments.iter().enumerate() {
        let next = segments.get(index + 1).copied().unwrap_or(end);
        if next <= from {
            continue;
        }
        let mut segment = File::open(segment_path(dir, base))?;
        let skip = from.saturating_sub(base);
        segment.seek(SeekFrom::Start(skip))?;
        tail = Box::new(tail.chain(segment.take(next - base - skip)));
    }
    Ok(tail)
}

/// The lines (ending in a newline) `reader` holds from where it is.
fn count_lines(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<u64> {
    let mut count = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', line)? == 0 {
            return Ok(count);
        }
        count += u64::from(line.last() == Some(&b'\n'));
    }
}

fn segment_path(dir: &Path, offset: u64) -> PathBuf {
    dir.join(format!("stdin-{offset:020}.log"))
}

/// The offsets of the segments in `dir`, in order.
fn segment_offsets(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut offsets = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(offset) = name
            .strip_prefix("stdin-")
            .and_then(|rest| rest.strip_suffix(".log"))
            .and_then(|digits| digits.parse().ok())
        {
            offsets.push(offset);
        }
    }
    offsets.sort_unstable();
    Ok(offsets)
}

/// Stdin read through its log: the lines the log held first, then stdin's, each appended to
/// the log as it arrives.
pub struct LoggedStdin<R: Read + Send> {
    held: Option<Box<dyn BufRead + Send>>,
    stdin: BufReader<R>,
    log: Arc<StdinLog>,
}

impl<R: Read + Send> LoggedStdin<R> {
    pub fn new(held: Held, stdin: BufReader<R>, log: Arc<StdinLog>) -> Self {
        Self {
            held: Some(held.replay),
            stdin,
            log,
        }
    }
}

impl<R: Read + Send> LineSource for LoggedStdin<R> {
    fn read_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        if let Some(held) = &mut self.held {
            let read = held.read_until(b'\n', buf)?;
            if read > 0 {
                return Ok(read);
            }
            self.held = None;
        }
        // Before waiting for stdin, what was logged goes to the operating system.
        if self.stdin.buffer().is_empty() {
            self.log.flush()?;
        }
        let start = buf.len();
        let mut read = self.stdin.read_until(b'\n', buf)?;
        if read > 0 && buf.last() != Some(&b'\n') {
            // The last line of stdin, unended: ended here and in the log (where a line cut
            // short is a crash's), so that the log's offsets are the stream's.
            buf.push(b'\n');
            read += 1;
        }
        self.log.append(&buf[start..])?;
        Ok(read)
    }
}
