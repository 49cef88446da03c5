//! Following a file as it grows (`--follow`), as `tail -F` does: lines appended after the end
//! are read as they come; a file truncated is read again from its start, and a file replaced
//! under its name (rotated) is read from the new file's start, each with a note on stderr.
//! A followed file has no end of its own; [`Follow::stopper`] gives a program one.

use crate::stream::LineSource;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long to wait at the end of the file before looking again: short enough that a line
/// is read within a few milliseconds of its append.
const POLL: Duration = Duration::from_millis(1);

/// A file read line by line, waiting at its end for more.
pub struct Follow {
    path: PathBuf,
    reader: BufReader<File>,
    /// Bytes read from the current file.
    position: u64,
    /// The file's device and inode: another pair under the path is another file.
    identity: (u64, u64),
    /// Whether the path was found missing (rotated away, not yet replaced) when last looked.
    missing: bool,
    /// Whether the file was read again from a start since [`LineSource::restarted`] asked.
    restarted: bool,
    /// Set by the program: the input ends at the end of the file (see [`Follow::stopper`]),
    /// once it has been read to there after the flag was seen.
    stop: Arc<AtomicBool>,
    stopping: bool,
}

impl Follow {
    /// Opens `path` to read from its start.
    pub fn open(path: impl Into<PathBuf>) -> std::io::Result<Self> {
        let path = path.into();
        let file = File::open(&path)?;
        let metadata = file.metadata()?;
        Ok(Self {
            path,
            reader: BufReader::with_capacity(1 << 16, file),
            position: 0,
            identity: (metadata.dev(), metadata.ino()),
            missing: false,
            restarted: false,
            stop: Arc::default(),
            stopping: false,
        })
    }

    /// Opens `path` to read from byte `offset` on (where a resumed run's checkpoint left it).
    pub fn open_at(path: impl Into<PathBuf>, offset: u64) -> std::io::Result<Self> {
        let mut follow = Self::open(path)?;
        follow.reader.seek(SeekFrom::Start(offset))?;
        follow.position = offset;
        Ok(follow)
    }

    /// A flag that ends the input: once it is set, the input ends where the file ends (what
    /// was appended before the flag was set is read).
    pub fn stopper(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// At the end of what was written: reopens a replaced file or rereads a truncated one.
    /// Returns whether it did (a partial line read before is then dropped).
    fn check(&mut self) -> std::io::Result<bool> {
        let shown = self.path.display();
        let metadata = match std::fs::metadata(&self.path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                if !self.missing {
                    eprintln!("ripple: note: {shown} is gone; waiting for a file of that name");
                    self.missing = true;
                }
                return Ok(false);
            }
            Err(error) => return Err(error),
        };
        self.missing = false;
        if (metadata.dev(), metadata.ino()) != self.identity {
            // Lines appended to the old file before it was replaced are read first.
            if !self.reader.fill_buf()?.is_empty() {
                return Ok(false);
            }
            let next = match Self::open(&self.path) {
                Ok(next) => next,
                // Replaced again meanwhile: looked at again after the next wait.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(error) => return Err(error),
            };
            eprintln!("ripple: note: {shown} was replaced; reading the new file from its start");
            let stop = Arc::clone(&self.stop);
            *self = next;
            self.stop = stop;
            self.restarted = true;
            return Ok(true);
        }
        if metadata.len() < self.position {
            eprintln!("ripple: note: {shown} was truncated; reading it again from its start");
            self.reader.seek(SeekFrom::Start(0))?;
            self.position = 0;
            self.restarted = true;
            return Ok(true);
        }
        Ok(false)
    }
}

impl LineSource for Follow {
    fn read_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        let start = buf.len();
        loop {
            let read = self.reader.read_until(b'\n', buf)?;
            self.position += read as u64;
            if buf.len() > start && buf.last() == Some(&b'\n') {
                return Ok(buf.len() - start);
            }
            // The end of what was written so far, maybe inside a line still being written.
            if self.stopping {
                return Ok(buf.len() - start);
            }
            if self.stop.load(Ordering::Acquire) {
                // Read once more: lines appended before the flag was set may have come after
                // the read that just ended.
                self.stopping = true;
                continue;
            }
            if self.check()? {
                buf.truncate(start);
                continue;
            }
            std::thread::sleep(POLL);
        }
    }

    fn restarted(&mut self) -> bool {
        std::mem::take(&mut self.restarted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_appended_lines_across_truncation_and_replacement() {
        let dir = std::env::temp_dir().join(format!("ripple-follow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("in.csv");
        std::fs::write(&path, "a\nb").unwrap();
        let mut follow = Follow::open(&path).unwrap();
        let mut line = Vec::new();
        follow.read_line(&mut line).unwrap();
        assert_eq!(line, b"a\n");
        // The rest of a line written in two parts.
        let appender = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                file.write_all(b"c\n").unwrap();
            })
        };
        line.clear();
        follow.read_line(&mut line).unwrap();
        assert_eq!(line, b"bc\n");
        appender.join().unwrap();
        // Truncated and rewritten: read again from the start.
        std::fs::write(&path, "d\n").unwrap();
        line.clear();
        follow.read_line(&mut line).unwrap();
        assert_eq!(line, b"d\n");
        // Replaced by another file (a rotation).
        let next = dir.join("next.csv");
        std::fs::write(&next, "e\n").unwrap();
        std::fs::rename(&next, &path).unwrap();
        line.clear();
        follow.read_line(&mut line).unwrap();
        assert_eq!(line, b"e\n");
        // Stopped: what was appended is read, then the input ends.
        let stop = follow.stopper();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"f\n")
            .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Release);
        line.clear();
        follow.read_line(&mut line).unwrap();
        assert_eq!(line, b"f\n");
        line.clear();
        assert_eq!(follow.read_line(&mut line).unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
