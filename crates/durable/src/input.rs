//! A durable input collection: an [`InputSession`] whose changes are checkpointed into a state
//! directory, and which a restarted dataflow rehydrates from there.
//!
//! Operator state is never stored: the input is the whole state. With several workers or
//! processes, the worker that feeds the input holds its `DurableInput` (the others close
//! their sessions), and checkpoints once the dataflow's output is complete below the input's
//! time (a probe says so), which is then the frontier of every worker's state. A restarted
//! dataflow may have another number of workers or processes: the exchange spreads the
//! snapshot anew.
//!
//! ```
//! use ripple_dataflow::{Captured, InputSession};
//! use ripple_durable::DurableInput;
//!
//! let dir = std::env::temp_dir().join(format!("ripple-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! // A dataflow counting distinct words, its input durable in `dir`; run it twice.
//! let run = |words: &'static [(&'static str, u64)], until: u64| {
//!     let dir = dir.clone();
//!     let output = Captured::new();
//!     let sink = output.clone();
//!     timely::execute_directly(move |worker| {
//!         let mut session = InputSession::<u64, String>::new();
//!         let probe = worker.dataflow(|scope| {
//!             let (probe, counts) = session.to_collection(scope).distinct().probe();
//!             counts.capture_into(&sink);
//!             probe
//!         });
//!         let mut input = DurableInput::open(&dir, session).unwrap();
//!         // Rebuilds the collection as it was at the last checkpoint (nothing the first time).
//!         let resumed = input.rehydrate().unwrap();
//!         for &(word, time) in words.iter().filter(|(_, time)| *time >= resumed) {
//!             input.update_at(word.to_string(), time, 1).unwrap();
//!         }
//!         input.advance_to(until).unwrap();
//!         worker.step_while(|| probe.less_than(&until));
//!         input.checkpoint(Default::default()).unwrap();
//!     });
//!     // Changes before the checkpoint the run resumed from are rows of the first run.
//!     output.consolidated()
//! };
//! assert_eq!(run(&[("a", 0), ("b", 1)], 2), vec![("a".into(), 0, 1), ("b".into(), 1, 1)]);
//! // The restart resumes at time 2: the old words are in the rehydrated state, not new rows.
//! let rows = run(&[("a", 0), ("b", 1), ("a", 2), ("c", 3)], 4);
//! let after: Vec<_> = rows.into_iter().filter(|(_, time, _)| *time >= 2).collect();
//! assert_eq!(after, vec![("c".into(), 3, 1)]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::checkpoints::{CheckpointStats, Checkpoints};
use crate::error::DurableError;
use crate::manifest::Manifest;
use crate::state::StateDir;
use ripple_dataflow::InputSession;
use ripple_updates::Data;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// An input session with checkpoints (see the module documentation).
pub struct DurableInput<D: Data> {
    session: InputSession<u64, D>,
    checkpoints: Checkpoints<D>,
}

impl<D: Data> DurableInput<D> {
    /// Opens (or creates) the state directory `dir` for `session`, which must be connected to
    /// its dataflow and not yet fed.
    pub fn open(
        dir: impl Into<PathBuf>,
        session: InputSession<u64, D>,
    ) -> Result<Self, DurableError> {
        Ok(Self {
            session,
            checkpoints: Checkpoints::new(StateDir::open(dir)?),
        })
    }

    /// The last checkpoint committed (found in the directory, or made since).
    pub fn last_checkpoint(&self) -> Option<&Manifest> {
        self.checkpoints.last()
    }

    /// Feeds the last checkpoint's snapshot to the session, at time `F - 1`, and advances it
    /// to the checkpoint's frontier `F`, which it returns (0 without a checkpoint). The
    /// dataflow's output at times below `F` is then the collection's state, not its changes:
    /// a resumed run's output begins at `F`.
    pub fn rehydrate(&mut self) -> Result<u64, DurableError> {
        let frontier = self
            .last_checkpoint()
            .map_or(0, |manifest| manifest.frontier);
        if frontier > 0 {
            let session = &mut self.session;
            let mut refused = None;
            self.checkpoints.replay(|data, diff| {
                if let Err(error) = session.update_at(data, frontier - 1, diff) {
                    refused.get_or_insert(error);
                }
            })?;
            if let Some(error) = refused {
                return Err(error.into());
            }
        }
        self.session.advance_to(frontier)?;
        Ok(frontier)
    }

    /// Changes the multiplicity of `data` by `diff` at `time` (not before the current time).
    pub fn update_at(&mut self, data: D, time: u64, diff: i64) -> Result<(), DurableError> {
        self.session.update_at(data.clone(), time, diff)?;
        self.checkpoints.record(data, time, diff)
    }

    /// Moves the current time forward to `time`.
    pub fn advance_to(&mut self, time: u64) -> Result<(), DurableError> {
        Ok(self.session.advance_to(time)?)
    }

    /// The current time.
    pub fn time(&self) -> u64 {
        *self.session.time()
    }

    /// Commits a checkpoint at the current time, which every change recorded must be before;
    /// `meta` goes into the manifest. The caller has made durable whatever output it wrote
    /// for the times below.
    pub fn checkpoint(
        &mut self,
        meta: BTreeMap<String, String>,
    ) -> Result<CheckpointStats, DurableError> {
        let frontier = self.time();
        self.checkpoints.checkpoint(frontier, meta, || {})
    }

    /// Closes the input (see [`InputSession::close`]).
    pub fn close(self) {
        self.session.close();
    }
}
