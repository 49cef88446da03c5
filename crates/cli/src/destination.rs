//! Where the rows go, and what is left there when a run does not complete.
//!
//! `--output FILE` of a run over an input read whole is written to a temporary file beside
//! FILE (`.FILE.ripple-<pid>.partial`), renamed over FILE only when the run succeeds: on any
//! failure, and on SIGINT or SIGTERM, FILE is left as it was and the temporary file is
//! removed. A stream's rows must appear as they are computed, so a streaming run writes FILE
//! in place: it then holds the rows of the times completed. So does a durable run
//! (`--state-dir`), whose restart cuts FILE back to its length at the checkpoint and writes on.
//! The temporary file (or FILE) is created before the input is read, so an unwritable path is
//! refused at once.
//!
//! On SIGINT or SIGTERM ([`on_signals`]) the run stops at once: the partial output and the
//! spill directory are removed, stderr says the run did not complete, and the exit code is
//! 130 or 143 (128 plus the signal's number).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An `--output` file being written.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    /// The temporary file renamed over `path` on success; `None` when written in place.
    temporary: Option<PathBuf>,
    /// A regular file written in place, to empty when the run begins.
    truncate: Option<File>,
}

impl OutputFile {
    /// Creates the file the rows of `path` go to: a temporary one beside it, or `path` itself
    /// if `in_place`, or if `path` is not a regular file (`/dev/stdout`, a pipe). A symbolic
    /// link is followed: the file it names is replaced, with its permissions kept. A file
    /// written in place is emptied only by [`OutputFile::begin`], once the run is under way.
    pub fn create(path: &Path, in_place: bool) -> std::io::Result<(Self, BufWriter<File>)> {
        let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let existing = std::fs::metadata(&target).ok();
        let special = existing
            .as_ref()
            .is_some_and(|metadata| !metadata.is_file());
        let temporary = (!in_place && !special).then(|| {
            let name = target.file_name().unwrap_or_default().to_string_lossy();
            let hidden = format!(".{name}.ripple-{}.partial", std::process::id());
            target.with_file_name(hidden)
        });
        let file = match &temporary {
            Some(temporary) => {
                let file = File::create(temporary)?;
                if let Some(existing) = &existing {
                    let _ = file.set_permissions(existing.permissions());
                }
                file
            }
            // Not truncated yet: a run that fails to start leaves the file as it was.
            None => std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&target)?,
        };
        let truncate = match (&temporary, special) {
            (None, false) => Some(file.try_clone()?),
            _ => None,
        };
        let output = Self {
            path: target,
            temporary,
            truncate,
        };
        Ok((output, BufWriter::with_capacity(1 << 16, file)))
    }

    /// The output file of a resumed durable run (`--state-dir`), written on after its first
    /// `length` bytes, which its checkpoint recorded: what came after them is cut.
    pub fn resume(path: &Path, length: u64) -> std::io::Result<(Self, BufWriter<File>)> {
        let file = ripple_durable::resume_file(path, length).map_err(std::io::Error::other)?;
        let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let output = Self {
            path: target,
            temporary: None,
            truncate: None,
        };
        Ok((output, BufWriter::with_capacity(1 << 16, file)))
    }

    /// The run is under way: a file written in place is emptied for its rows.
    pub fn begin(&mut self) -> std::io::Result<()> {
        match self.truncate.take() {
            Some(file) => file.set_len(0),
            None => Ok(()),
        }
    }

    /// The run succeeded (its writer flushed): the rows take FILE's place.
    pub fn commit(self) -> std::io::Result<()> {
        match &self.temporary {
            Some(temporary) => std::fs::rename(temporary, &self.path),
            None => Ok(()),
        }
    }

    /// The run failed: what the user finds at FILE, for the error message (removing a
    /// temporary file).
    pub fn abandon(&self) -> String {
        match &self.temporary {
            Some(temporary) => {
                let _ = std::fs::remove_file(temporary);
                format!("{} was left as it was", self.path.display())
            }
            None if self.truncate.is_some() => {
                format!("{} was left as it was", self.path.display())
            }
            None => format!(
                "{} holds the rows of the times completed",
                self.path.display()
            ),
        }
    }
}

/// What to clean up if a signal stops the run.
#[derive(Debug, Default)]
pub struct Leftovers {
    pub output: Option<OutputFile>,
    pub spill: Option<PathBuf>,
}

impl Leftovers {
    /// Removes what a run that did not complete leaves behind; returns what became of
    /// `--output`, if given.
    pub fn clean(&self) -> Option<String> {
        if let Some(spill) = &self.spill {
            let _ = std::fs::remove_dir_all(spill);
        }
        self.output.as_ref().map(OutputFile::abandon)
    }
}

/// Stops the process on SIGINT or SIGTERM: cleans up `leftovers`, says so on stderr and exits
/// with 128 plus the signal's number. (The run takes its output out of `leftovers` when it
/// commits it.)
pub fn on_signals(leftovers: Arc<Mutex<Leftovers>>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("ripple-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let name = if signal == SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                let leftovers = leftovers.lock().unwrap_or_else(|p| p.into_inner());
                let output = leftovers
                    .clean()
                    .map_or_else(String::new, |output| format!("; {output}"));
                eprintln!("ripple: stopped by {name}: the run did not complete{output}");
                std::process::exit(128 + signal);
            }
        })?;
    Ok(())
}
