//! The spine: a trace's batches in LSM-style levels, merged a little at each insert.
//!
//! Level `k` holds batches of up to about `2^k` updates: vacant, one batch, or two batches being
//! merged (into a batch for level `k + 1`). Higher levels hold older batches, so reading the
//! levels from the top down, then the batches awaiting admission, gives the batches oldest first
//! with contiguous descriptions.
//!
//! Inserting a batch of `n` updates:
//! 1. grants every merge in progress `effort * n` units of fuel (one unit per update merged), so
//!    merge work is paid for by inserts in proportion to their size and no insert waits for a
//!    giant merge. With the default effort a merge at level `k` completes before another batch
//!    can reach level `k`;
//! 2. collapses the levels below the batch's own into it (they hold fewer updates than it), and
//!    places it at its level, starting a merge there if the level was occupied.
//!
//! Merges advance times to the logical compaction frontier (`since`) and consolidate. The
//! physical compaction frontier says which batches readers still need distinct: a batch enters
//! the levels (and may be merged) only once its `upper` is not beyond that frontier; until then
//! it waits in `pending`. Empty batches carry frontier progress and merge at no cost.

use crate::batch::Batch;
use crate::description::Description;
use crate::merge::Merge;
use crate::snapshot::TraceSnapshot;
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update};
use std::collections::VecDeque;

/// Tuning for a spine.
#[derive(Clone, Copy, Debug)]
pub struct SpineConfig {
    /// Merge work granted per inserted update (at least 1 unit per insert). Higher values
    /// finish merges sooner, holding fewer batches; 4 is enough for merges to keep up.
    pub effort: usize,
}

impl Default for SpineConfig {
    fn default() -> Self {
        Self { effort: 4 }
    }
}

enum Level<U: Update> {
    Vacant,
    Single(Batch<U>),
    Merging(Box<Merge<U>>),
}

/// A trace: the batches of one arrangement.
pub struct Spine<U: Update> {
    config: SpineConfig,
    levels: Vec<Level<U>>,
    /// Batches not yet admitted to the levels because readers need them distinct.
    pending: VecDeque<Batch<U>>,
    /// The upper frontier of the newest batch: where the next batch must start.
    upper: Antichain<U::Time>,
    /// Times may be advanced to this frontier.
    logical: Antichain<U::Time>,
    /// Batches with uppers not beyond this frontier may be merged.
    physical: Antichain<U::Time>,
    /// The largest batch ever admitted or produced: levels stay within its logarithm.
    max_batch_len: usize,
}

/// Moves a compaction frontier forward to `to`; panics, naming both, if that is backwards.
fn advance_frontier<T: ripple_updates::Time>(
    frontier: &mut Antichain<T>,
    to: AntichainRef<'_, T>,
    name: &str,
) {
    assert!(
        PartialOrder::less_equal(&frontier.borrow(), &to),
        "{name} compaction frontier moved backwards: {frontier:?} to {to:?}"
    );
    *frontier = to.to_owned();
}

/// The level of a batch of `len` updates: the least `k` with `len <= 2^k`.
fn level_of(len: usize) -> usize {
    (usize::BITS - len.saturating_sub(1).leading_zeros()) as usize
}

impl<U: Update> Spine<U> {
    /// An empty spine whose first batch must start at the minimal time.
    pub fn new(config: SpineConfig) -> Self {
        use timely::progress::Timestamp;
        let minimum = Antichain::from_elem(U::Time::minimum());
        Self {
            config,
            levels: Vec::new(),
            pending: VecDeque::new(),
            upper: minimum.clone(),
            logical: minimum.clone(),
            physical: minimum,
            max_batch_len: 0,
        }
    }

    /// Where the next batch must start.
    pub fn upper(&self) -> AntichainRef<'_, U::Time> {
        self.upper.borrow()
    }

    /// The logical compaction frontier.
    pub fn logical_frontier(&self) -> AntichainRef<'_, U::Time> {
        self.logical.borrow()
    }

    /// The physical compaction frontier.
    pub fn physical_frontier(&self) -> AntichainRef<'_, U::Time> {
        self.physical.borrow()
    }

    /// Adds `batch`, which must start where the previous one ended, and does the merge work it
    /// pays for.
    pub fn insert(&mut self, batch: Batch<U>) {
        assert_eq!(
            batch.description().lower,
            self.upper,
            "a batch must start where the trace's last batch ended"
        );
        self.upper = batch.description().upper.clone();
        self.pending.push_back(batch);
        self.admit();
    }

    /// Records that nothing more will change before `upper`: inserts an empty batch.
    pub fn advance_upper(&mut self, upper: Antichain<U::Time>) {
        if upper != self.upper {
            self.insert(Batch::empty(Description::new(self.upper.clone(), upper)));
        }
    }

    /// Lets times be advanced to `frontier` (which must not go backwards): reads at times
    /// `>= frontier` stay exact, earlier times are no longer distinguished.
    pub fn set_logical_compaction(&mut self, frontier: AntichainRef<'_, U::Time>) {
        advance_frontier(&mut self.logical, frontier, "logical");
    }

    /// Lets batches whose upper is not beyond `frontier` (which must not go backwards) be
    /// merged.
    pub fn set_physical_compaction(&mut self, frontier: AntichainRef<'_, U::Time>) {
        advance_frontier(&mut self.physical, frontier, "physical");
        self.admit();
    }

    /// Moves pending batches into the levels while the physical frontier allows.
    fn admit(&mut self) {
        while let Some(batch) = self.pending.front() {
            if !PartialOrder::less_equal(&batch.description().upper, &self.physical) {
                break;
            }
            let batch = self.pending.pop_front().expect("front exists");
            let fuel = self.config.effort.max(1) * batch.len().max(1);
            self.exert(fuel);
            self.introduce(batch);
        }
    }

    /// Grants each merge in progress `fuel` units of work.
    pub fn exert(&mut self, fuel: usize) {
        let fuel = fuel.min(isize::MAX as usize) as isize;
        for level in 0..self.levels.len() {
            if let Level::Merging(merge) = &mut self.levels[level] {
                let mut granted = fuel;
                if merge.work(&mut granted) {
                    let Level::Merging(merge) =
                        std::mem::replace(&mut self.levels[level], Level::Vacant)
                    else {
                        unreachable!("matched Merging above")
                    };
                    let merged = merge.complete();
                    self.settle(level, merged);
                }
            }
        }
    }

    /// Completes every merge in progress (for measurements and tests).
    pub fn complete_merges(&mut self) {
        while self
            .levels
            .iter()
            .any(|level| matches!(level, Level::Merging(_)))
        {
            self.exert(usize::MAX);
        }
    }

    /// Merges every admitted batch into one, now, advancing times to the logical frontier.
    ///
    /// Inserts merge batches only when levels fill up, so an idle trace may keep a few batches
    /// of different sizes, and updates that cancel across them stay. This is the way to
    /// collapse it when there is time (and how measurements see a trace at its smallest).
    pub fn compact(&mut self) {
        let mut merged: Option<Batch<U>> = None;
        for level in (0..self.levels.len()).rev() {
            if let Some(newer) = self.take_level(level) {
                merged = Some(match merged {
                    None => newer,
                    Some(older) => Merge::new(older, newer, self.logical.borrow()).complete(),
                });
            }
        }
        self.levels.clear();
        if let Some(batch) = merged {
            self.max_batch_len = self.max_batch_len.max(batch.len());
            let level = level_of(batch.len());
            self.place(level, batch);
        }
    }

    /// Puts a newly admitted batch, the newest of all, at its level.
    fn introduce(&mut self, batch: Batch<U>) {
        let level = level_of(batch.len());
        // The levels below hold newer batches than those above and fewer updates than `batch`:
        // fold them, oldest first, into one batch ahead of it.
        let mut merged: Option<Batch<U>> = None;
        for lower in (0..level.min(self.levels.len())).rev() {
            if let Some(older) = self.take_level(lower) {
                merged = Some(match merged {
                    None => older,
                    Some(acc) => Merge::new(acc, older, self.logical.borrow()).complete(),
                });
            }
        }
        let batch = match merged {
            None => batch,
            Some(acc) => Merge::new(acc, batch, self.logical.borrow()).complete(),
        };
        self.max_batch_len = self.max_batch_len.max(batch.len());
        // Every level below is now vacant, so a batch that consolidation shrank may go lower.
        self.place(level.min(level_of(batch.len())), batch);
    }

    /// Empties `level`, returning its batches oldest first (completing a merge in progress).
    fn take_level(&mut self, level: usize) -> Option<Batch<U>> {
        match std::mem::replace(&mut self.levels[level], Level::Vacant) {
            Level::Vacant => None,
            Level::Single(batch) => Some(batch),
            Level::Merging(merge) => Some(merge.complete()),
        }
    }

    /// Puts the result of a merge completed at `level` (now vacant) where its size belongs: one
    /// level up, unless consolidation shrank it enough to stay. Staying keeps levels from
    /// growing with batches that cancel out.
    fn settle(&mut self, level: usize, merged: Batch<U>) {
        self.max_batch_len = self.max_batch_len.max(merged.len());
        if merged.len() <= 1 << level.min(usize::BITS as usize - 2) {
            self.levels[level] = Level::Single(merged);
        } else {
            self.place(level + 1, merged);
        }
    }

    /// Puts `batch`, newer than everything at `level` and above and older than everything
    /// below, at `level`.
    fn place(&mut self, level: usize, batch: Batch<U>) {
        if self.levels.len() <= level {
            self.levels.resize_with(level + 1, || Level::Vacant);
        }
        self.levels[level] = match std::mem::replace(&mut self.levels[level], Level::Vacant) {
            Level::Vacant => Level::Single(batch),
            Level::Single(older) => {
                Level::Merging(Box::new(Merge::new(older, batch, self.logical.borrow())))
            }
            Level::Merging(merge) => {
                // The merge fell behind (only with little effort): finish it and start merging
                // its result with the newcomer.
                let merged = merge.complete();
                self.max_batch_len = self.max_batch_len.max(merged.len());
                Level::Merging(Box::new(Merge::new(merged, batch, self.logical.borrow())))
            }
        };
    }

    /// The batches, oldest first (merges in progress contribute their inputs).
    pub fn batches(&self) -> Vec<Batch<U>> {
        let mut batches = Vec::new();
        for level in self.levels.iter().rev() {
            match level {
                Level::Vacant => {}
                Level::Single(batch) => batches.push(batch.clone()),
                Level::Merging(merge) => batches.extend(merge.inputs().into_iter().cloned()),
            }
        }
        batches.extend(self.pending.iter().cloned());
        batches
    }

    /// A consistent view of the trace that stays valid whatever the spine does next.
    pub fn snapshot(&self) -> TraceSnapshot<U> {
        TraceSnapshot::new(self.batches())
    }

    /// The number of batches held (merges in progress count their two inputs).
    pub fn batch_count(&self) -> usize {
        self.levels
            .iter()
            .map(|level| match level {
                Level::Vacant => 0,
                Level::Single(_) => 1,
                Level::Merging(_) => 2,
            })
            .sum::<usize>()
            + self.pending.len()
    }

    /// The number of updates held in the batches (merges in progress count their inputs).
    pub fn len(&self) -> usize {
        self.batches().iter().map(Batch::len).sum()
    }

    /// True when no batch holds an update.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes of the batches held (not counting partial merge outputs).
    pub fn heap_bytes(&self) -> usize {
        self.batches().iter().map(Batch::heap_bytes).sum()
    }

    /// Panics unless the spine is well formed: batches contiguous from the minimal time to
    /// `upper`, each batch well formed, at most two batches per level, and each level's batches
    /// not much larger than the level allows.
    pub fn check_invariants(&self) {
        use timely::progress::Timestamp;
        let batches = self.batches();
        let mut expected_lower = Antichain::from_elem(U::Time::minimum());
        for batch in &batches {
            assert_eq!(
                batch.description().lower,
                expected_lower,
                "batch descriptions not contiguous"
            );
            expected_lower = batch.description().upper.clone();
            batch.check_invariants();
        }
        assert_eq!(expected_lower, self.upper, "batches do not reach the upper");
        // Levels hold at most two batches each, and a batch reaches level k only when it, or
        // a batch that merged into it, held more than 2^(k-1) updates.
        assert!(
            self.levels.len() <= level_of(self.max_batch_len) + 2,
            "{} levels for batches of at most {} updates",
            self.levels.len(),
            self.max_batch_len
        );
    }
}
