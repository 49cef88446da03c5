//! The spine: a trace's batches in LSM-style levels, merged a little at each insert.
//!
//! Level `k` holds batches of *weight* up to about `2^k`: vacant, one batch, or two batches
//! being merged (into a batch for level `k + 1`). A batch's weight is the volume of inserts it
//! stands for: each inserted batch weighs its length (at least 1, so empty batches count), and
//! a merge weighs the sum of its inputs, however much consolidation shrank it. The levels thus
//! count inserts like a binary counter, and a large old batch is merged with the newer ones
//! after about its own length of further inserts, even when those inserts cancel each other
//! or are empty. (Levelling by length instead lets churn that cancels never climb: deletions
//! of old updates pile up in the small levels beside the stale big batch, and every reader
//! walks both.) When the top level's batch is much shorter than its weight it moves down to
//! the level its length deserves, so the counter restarts from what the trace actually holds.
//! Higher levels hold older batches, so reading the levels from the top down, then the recent
//! batches (below), then the batches awaiting admission, gives the batches oldest first with
//! contiguous descriptions.
//!
//! Inserting a batch of weight `w`:
//! 1. grants every merge in progress `effort * w` units of fuel (one unit per update merged), so
//!    merge work is paid for by inserts in proportion to their size and no insert waits for a
//!    giant merge. With the default effort a merge at level `k` usually completes before
//!    another batch can reach level `k` (a group of recent batches arriving there first
//!    finishes it at once);
//! 2. if the batch is small, adds it to the *recent* batches, newer than every level, until
//!    there are `RECENT_COUNT` of them or they weigh `RECENT_WEIGHT`: then they are merged
//!    into one batch of their total weight, all at once, which goes on as a bigger batch does;
//! 3. otherwise (after merging the recent batches, which are older) collapses the levels below
//!    the batch's own into it (they weigh less than it), and places it at its level, starting a
//!    merge there if the level was occupied.
//!
//! The recent batches are there for small steps: a spine fed a batch of a few updates at every
//! round merged them pairwise as they came, seven merges for eight batches, each costing mostly
//! a merge's fixed costs (starting it, building a batch, placing it). Gathered as rows, sorted
//! and built once, eight cost about what one did, while readers walk up to seven more small
//! batches: bfs at one update per step executes a few percent fewer instructions (see
//! docs/perf-notes.md, section "Spine: recent batches").
//!
//! Merges advance times to the logical compaction frontier (`since`) and consolidate. The
//! physical compaction frontier says which batches readers still need distinct: a batch is
//! admitted (to the recent batches or the levels, where it may be merged) only once its `upper`
//! is not beyond that frontier; until then it waits in `pending`. Empty batches carry frontier
//! progress and weigh 1. A merge with an empty side is done as it starts, without the merge
//! machinery: its result is the other batch with its description widened over both intervals
//! and its times not advanced (its `since` says how far they were; a later merge with a
//! non-empty batch advances them). At one update per step about half the merges have an empty
//! side, and each had cost a merge's fixed costs and a rewrite of the other side. The other
//! batch is widened in place, so only when no reader shares it; a shared one merges as usual
//! (or, among the recent batches, stays apart until they merge). A big batch whose times
//! advancing may move merges as usual too, so that a trace that takes only empty batches still
//! collapses its history. See docs/perf-notes.md, section "Spine: empty merges".
//!
//! Inside an iteration the small batches of a step's rounds hold updates that cancel once
//! their times are advanced to the next step (rounds collapse at the compaction frontier), but
//! the binary counter merges them only as further inserts fill the levels, so readers walk the
//! uncollapsed updates of several past steps. Merging small batches sooner (counting every
//! batch as weighing at least some hundreds or thousands) ran within noise of the counter in
//! bfs: what the extra merges cost, the shorter histories saved. What pays
//! is a *whole compaction* once per outer step: all admitted batches merged into one, now,
//! when the meet of the logical frontier has moved since the last one (inside an iteration it
//! moves only when an outer time completes, so compacting mid-step would collapse nothing)
//! and the trace has taken in at least as many updates as that compaction left it holding
//! (and at least [`SpineConfig::compaction_min`]), so each update is rewritten at most about
//! twice more than the counter alone would; or when the outer step that just ended alone took
//! in a quarter of that ([`SpineConfig::compaction_share`]: big steps over a big trace). It
//! waits for the first batch beyond the new meet (the next step's first round, inserted before
//! anyone reads it), so a trace that takes nothing more, at the end of a run, is not rewritten
//! for no reader (a single big step ran measurably slower with the compaction at the step's
//! end). In bfs whole compactions about halve the histories the reduce reads per visit; see
//! [`SpineConfig::compaction_min`] for the times, and docs/perf-notes.md, section "Spine: whole
//! compaction", for the measurements.

use crate::batch::Batch;
use crate::builder::Builder;
use crate::counts::{self, Count};
use crate::description::Description;
use crate::merge::{advancing_may_move, Merge};
use crate::snapshot::TraceSnapshot;
use ripple_storage::Storage;
use ripple_updates::consolidate::consolidate_rows;
use ripple_updates::{Antichain, AntichainRef, Lattice, PartialOrder, Update, Updates};
use std::collections::VecDeque;
use std::sync::Arc;

/// Tuning for a spine.
#[derive(Clone, Copy, Debug)]
pub struct SpineConfig {
    /// Merge work granted per inserted update (at least 1 unit per insert). Higher values
    /// finish merges sooner, holding fewer batches for readers to walk. 4 is enough for merges
    /// to keep up, and 8 (differential-dataflow's budget per record) beats 4 by a few percent in
    /// bfs at one update per step. The default, 32, beats 8 by a few percent on big steps over a
    /// big graph, where the reduce's batched lookups probe every big batch of its input and
    /// output traces; elsewhere the two are within noise, and more effort gained nothing. On a
    /// small graph 8 and 4 are within noise of 32 and 2 is markedly slower. See
    /// docs/perf-notes.md, section "Spine: merge effort".
    pub effort: usize,
    /// The least number of updates a trace takes in between two whole compactions (see the
    /// module documentation); `usize::MAX` turns them off. Against no whole compactions, bfs
    /// gained roughly a tenth on mid-sized steps over a small graph and up to about a third on
    /// big steps over a big graph, with the same peak resident memory, and was within noise on
    /// the smallest steps; see docs/perf-notes.md, section "Spine: whole compaction".
    pub compaction_min: usize,
    /// A whole compaction is also due when the outer step that just ended took in at least
    /// `1 / compaction_share` of what the last one left the levels holding (and
    /// [`SpineConfig::compaction_min`]), however much came before. Waiting until the trace had
    /// taken in as much as it held kept a big trace's steps apart: on big steps over a big
    /// graph the reduce's input trace took in over half of what it held at every step, so
    /// the batches of one step were merged with the next step's round by round, their times
    /// only partly advanced (to mid-step frontiers), and read that way. Compacted at every
    /// step's start instead, the old batch is mostly copied key by key and the last step's
    /// times collapse: the reduce's merges of that trace took a fraction of the time, and bfs
    /// ran about a tenth faster with less peak resident memory. Counting the whole intake
    /// instead (a compaction once the levels took in a quarter of what they held, over any
    /// number of steps) rewrote the old batch every four steps on smaller steps, about a tenth
    /// slower there. Steps that small never reach a quarter of the trace, and on small graphs
    /// `compaction_min` decides: both run as before. A share of 1 leaves only the doubling
    /// rule. See docs/perf-notes.md, section "Spine: compaction share".
    pub compaction_share: usize,
}

impl Default for SpineConfig {
    fn default() -> Self {
        Self {
            effort: 32,
            compaction_min: 1024,
            compaction_share: 4,
        }
    }
}

/// A level's contents; the `usize` is the weight (see the module documentation).
enum Level<U: Update> {
    Vacant,
    Single(Batch<U>, usize),
    Merging(Box<Merge<U>>, usize),
}

/// A trace: the batches of one arrangement.
pub struct Spine<U: Update> {
    config: SpineConfig,
    levels: Vec<Level<U>>,
    /// The newest admitted batches, each small, with their weights: held apart from the
    /// levels until there are enough of them to merge all at once (see `RECENT_COUNT`).
    recent: Vec<(Batch<U>, usize)>,
    /// Batches not yet admitted to the levels because readers need them distinct.
    pending: VecDeque<Batch<U>>,
    /// The upper frontier of the newest batch: where the next batch must start.
    upper: Antichain<U::Time>,
    /// Times may be advanced to this frontier.
    logical: Antichain<U::Time>,
    /// Batches with uppers not beyond this frontier may be merged.
    physical: Antichain<U::Time>,
    /// The largest weight ever placed: levels stay within its logarithm.
    max_weight: usize,
    /// Builders of completed merges, emptied, for the next merges.
    builders: Builders<U>,
    /// Updates admitted since the last whole compaction.
    admitted_since_whole: usize,
    /// Updates the levels held right after the last whole compaction.
    held_after_whole: usize,
    /// The meet of the logical frontier at the last whole compaction (`None` before the first,
    /// and for the empty frontier).
    meet_at_whole: Option<U::Time>,
    /// The meet of the logical frontier as last seen, and `admitted_since_whole` then: an outer
    /// step ends when the meet moves.
    meet_seen: Option<U::Time>,
    admitted_at_meet: usize,
    /// Updates admitted during the last outer step that ended.
    step_admitted: usize,
    /// Where batches go when the process's arrangements exceed its memory budget (see
    /// [`Spine::with_storage`]), and the bytes of in-memory batches this spine has reported
    /// to it.
    storage: Option<Arc<Storage>>,
    reported_bytes: usize,
}

impl<U: Update> Drop for Spine<U> {
    fn drop(&mut self) {
        if let Some(storage) = &self.storage {
            storage.account(0, self.reported_bytes);
        }
    }
}

/// Emptied builders kept for the next merges: a spine fed one small batch per step merges
/// small batches all the time, and a kept builder spares each merge its buffers' growth (see
/// [`Builder::build`], which also lets go of the buffers of big merges).
struct Builders<U: Update>(Vec<Builder<U>>);

impl<U: Update> Builders<U> {
    /// At most this many are kept: merges of small batches mostly run one or two at once.
    const KEEP: usize = 2;

    /// Starts merging `older` with `newer`: in memory, or to a file of `storage` block by
    /// block when either is stored (their union would be written out anyway, and building it
    /// in memory would hold all of it) or when the inputs weigh at least `spill_min_bytes`
    /// and the batches' share of the budget has no room for their union beside them when it
    /// starts (a builder reserves room for the union of its inputs, which stay until it is
    /// done: merges in memory held their inputs twice over the budget). The room is not
    /// reserved: merges that start together in several spines fall on the working share.
    fn start(
        &mut self,
        older: Batch<U>,
        newer: Batch<U>,
        since: AntichainRef<'_, U::Time>,
        storage: Option<&Arc<Storage>>,
    ) -> Merge<U> {
        if let Some(storage) = storage {
            let union = older.heap_bytes() + newer.heap_bytes();
            let big = union >= storage.settings().spill_min_bytes;
            if older.is_stored() || newer.is_stored() || (big && !storage.has_room(union)) {
                return Merge::to_file(older, newer, since, storage);
            }
        }
        Merge::with_builder(older, newer, since, self.take())
    }

    fn finish(&mut self, merge: Merge<U>) -> Batch<U> {
        let [older, newer] = merge.inputs();
        counts::add(Count::Merges, 1);
        counts::add(Count::MergedUpdates, older.len() + newer.len());
        let (batch, builder) = merge.finish();
        if let Some(builder) = builder {
            self.keep(builder);
        }
        batch
    }

    /// A kept builder, or a new one.
    fn take(&mut self) -> Builder<U> {
        self.0.pop().unwrap_or_default()
    }

    /// Keeps an emptied `builder` for the next merges, if fewer than [`Self::KEEP`] are.
    fn keep(&mut self, builder: Builder<U>) {
        if self.0.len() < Self::KEEP {
            self.0.push(builder);
        }
    }

    fn merge(
        &mut self,
        older: Batch<U>,
        newer: Batch<U>,
        since: AntichainRef<'_, U::Time>,
        storage: Option<&Arc<Storage>>,
    ) -> Batch<U> {
        let merge = self.start(older, newer, since, storage);
        self.finish(merge)
    }
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
    // Reuse the allocation: compaction frontiers are set on every activation of an operator.
    if frontier.borrow() != to {
        frontier.clear();
        frontier.extend(to.iter().cloned());
    }
}

/// The most updates a batch may hold to be widened over an empty neighbour with its times not
/// advanced (see [`union_with_empty`]).
const WIDEN_UNADVANCED_MAX: usize = 64;

/// The union of `older` and the `newer` batch that follows it when either is empty: the other
/// one, widened to cover both intervals, its updates as they were. Their times are not advanced
/// to the logical frontier `since` (a batch's `since` says how far they were): a later merge
/// with a non-empty batch advances them. So that a trace that takes only empty batches (an
/// input gone quiet) still collapses its history, a batch whose times advancing may move is
/// widened only when it is small (at most [`WIDEN_UNADVANCED_MAX`] updates): a big one merges,
/// as it did before, once the empty batches after it have added up to its weight (among the
/// recent batches, when they are merged). `Err` gives both back when neither is empty, when the
/// one to widen is big and needs advancing, or when it is stored or shared with a reader.
#[inline(always)]
fn union_with_empty<U: Update>(
    older: Batch<U>,
    newer: Batch<U>,
    since: AntichainRef<'_, U::Time>,
) -> Result<Batch<U>, [Batch<U>; 2]> {
    if !older.is_empty() && !newer.is_empty() {
        return Err([older, newer]);
    }
    let other = if older.is_empty() { &newer } else { &older };
    if other.len() > WIDEN_UNADVANCED_MAX && advancing_may_move(other.description(), since) {
        return Err([older, newer]);
    }
    let lower = older.description().lower.clone();
    let upper = newer.description().upper.clone();
    if older.is_empty() && newer.is_empty() {
        return Ok(Batch::empty(Description::new(lower, upper)));
    }
    if newer.is_empty() {
        older.widened(lower, upper).map_err(|older| [older, newer])
    } else {
        newer.widened(lower, upper).map_err(|newer| [older, newer])
    }
}

/// The most updates a batch may hold to wait among the recent batches instead of entering the
/// levels at once. Bounds of 16, 32, 64 and 128 (with weights of 64 to 256) took bfs at one and
/// ten updates per step successively a little further; see docs/perf-notes.md, section "Spine:
/// recent batches".
const RECENT_LEN_MAX: usize = 128;

/// The recent batches are merged into one, all at once, when there are this many of them
/// (readers walk them all: 4 and 16 did worse than 8)...
const RECENT_COUNT: usize = 8;

/// ... or when they weigh this much together (empty batches weigh 1 each: a trace that takes
/// only empty batches still moves its counter).
const RECENT_WEIGHT: usize = 256;

/// The level of a batch of `len` updates: the least `k` with `len <= 2^k`.
fn level_of(len: usize) -> usize {
    (usize::BITS - len.saturating_sub(1).leading_zeros()) as usize
}

impl<U: Update> Spine<U> {
    /// An empty spine whose first batch must start at the minimal time.
    pub fn new(config: SpineConfig) -> Self {
        Self::with_storage(config, None)
    }

    /// An empty spine that writes batches out to `storage` when the in-memory batches of all
    /// spines of the process (with what operators hold beside them, see
    /// `ripple_storage::HeldBytes`) take more than its budget allows: the batch of the highest
    /// level first (the oldest and largest), one at a time until they fit again. Pending
    /// batches, recent batches, batches under `StorageSettings::spill_min_bytes` and the inputs
    /// of merges in progress stay in memory: fresh batches are small, and a merge's result is
    /// written out once it is placed.
    pub fn with_storage(config: SpineConfig, storage: Option<Arc<Storage>>) -> Self {
        use timely::progress::Timestamp;
        let minimum = Antichain::from_elem(U::Time::minimum());
        Self {
            config,
            levels: Vec::new(),
            recent: Vec::new(),
            pending: VecDeque::new(),
            upper: minimum.clone(),
            logical: minimum.clone(),
            physical: minimum,
            max_weight: 0,
            builders: Builders(Vec::new()),
            admitted_since_whole: 0,
            held_after_whole: 0,
            meet_at_whole: None,
            meet_seen: None,
            admitted_at_meet: 0,
            step_admitted: 0,
            storage,
            reported_bytes: 0,
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
        if !batch.is_empty() {
            counts::add(Count::Batches, 1);
            counts::add(Count::BatchUpdates, batch.len());
        }
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

    /// Admits pending batches (to the recent batches or the levels) while the physical frontier
    /// allows.
    fn admit(&mut self) {
        while let Some(batch) = self.pending.front() {
            if !PartialOrder::less_equal(&batch.description().upper, &self.physical) {
                break;
            }
            let batch = self.pending.pop_front().expect("front exists");
            self.admitted_since_whole = self.admitted_since_whole.saturating_add(batch.len());
            let fuel = self.config.effort.max(1) * batch.len().max(1);
            self.exert(fuel);
            self.introduce(batch);
            self.tidy();
        }
        self.compact_if_due();
        self.settle();
    }

    /// With storage: reports this spine's in-memory bytes to it, and writes batches out while
    /// the process is over its budget (see [`Spine::with_storage`]). A batch that cannot be
    /// written ends the worker with the error (see `ripple_storage::Storage::fail`).
    fn settle(&mut self) {
        let Some(storage) = self.storage.clone() else {
            return;
        };
        loop {
            let bytes = self.heap_bytes();
            storage.account(bytes, self.reported_bytes);
            self.reported_bytes = bytes;
            if !storage.over_budget() {
                return;
            }
            let Some(level) = self.level_to_spill(storage.settings().spill_min_bytes) else {
                return;
            };
            let Level::Single(batch, _) = &mut self.levels[level] else {
                unreachable!("level_to_spill names a single batch")
            };
            match batch.write_to(&storage) {
                Ok(stored) => *batch = stored,
                Err(error) => storage.fail(error),
            }
        }
    }

    /// The highest level holding a single batch in memory of at least `min_bytes` (and at
    /// least one update).
    fn level_to_spill(&self, min_bytes: usize) -> Option<usize> {
        let in_memory = |level: &Level<U>| {
            matches!(level, Level::Single(batch, _)
                if !batch.is_empty() && !batch.is_stored() && batch.heap_bytes() >= min_bytes)
        };
        self.levels.iter().rposition(in_memory)
    }

    /// Merges every admitted batch into one when a whole compaction is due (see the module
    /// documentation): the meet of the logical frontier has moved since the last one, and the
    /// levels have taken in at least what that one left them holding, or the last outer step
    /// alone took in a share of it.
    fn compact_if_due(&mut self) {
        let meet = U::Time::meet_of(self.logical.iter());
        if meet != self.meet_seen {
            self.step_admitted = self.admitted_since_whole - self.admitted_at_meet;
            self.admitted_at_meet = self.admitted_since_whole;
            self.meet_seen = meet.clone();
        }
        let min = self.config.compaction_min;
        let grown = self.admitted_since_whole >= min.max(self.held_after_whole);
        let big_step = self.step_admitted
            >= min.max(self.held_after_whole / self.config.compaction_share.max(1));
        if !grown && !big_step {
            return;
        }
        if meet == self.meet_at_whole {
            return;
        }
        let Some(moved) = &meet else {
            return;
        };
        // Not before a batch beyond the meet has come: what is compacted is read only by the
        // next outer step, and a trace that takes no more (the end of a run) has no use for it.
        if PartialOrder::less_equal(
            &self.upper.borrow(),
            &AntichainRef::new(std::slice::from_ref(moved)),
        ) {
            return;
        }
        self.compact();
        self.held_after_whole = self.levels_len();
        self.admitted_since_whole = 0;
        self.admitted_at_meet = 0;
        self.step_admitted = 0;
        self.meet_at_whole = meet;
    }

    /// The number of updates admitted (in the levels, merges in progress, recent batches).
    fn levels_len(&self) -> usize {
        self.len() - self.pending.iter().map(Batch::len).sum::<usize>()
    }

    /// Grants each merge in progress `fuel` units of work.
    pub fn exert(&mut self, fuel: usize) {
        let fuel = fuel.min(isize::MAX as usize) as isize;
        for level in 0..self.levels.len() {
            if let Level::Merging(merge, _) = &mut self.levels[level] {
                let mut granted = fuel;
                if merge.work(&mut granted) {
                    let Level::Merging(merge, weight) =
                        std::mem::replace(&mut self.levels[level], Level::Vacant)
                    else {
                        unreachable!("matched Merging above")
                    };
                    let merged = self.builders.finish(*merge);
                    // A completed merge climbs one level, whatever consolidation left of it.
                    self.place(level + 1, merged, weight);
                }
            }
        }
    }

    /// Completes every merge in progress (for measurements and tests); the recent batches stay.
    pub fn complete_merges(&mut self) {
        while self
            .levels
            .iter()
            .any(|level| matches!(level, Level::Merging(..)))
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
        self.flush_recent();
        let merged = self.fold_levels(self.levels.len());
        self.levels.clear();
        if let Some((mut batch, _)) = merged {
            // A lone batch went through no merge: its times are advanced here, by merging it
            // with an empty batch at its end, if advancing may move them.
            if !batch.is_empty() && advancing_may_move(batch.description(), self.logical.borrow()) {
                let upper = batch.description().upper.clone();
                let empty = Batch::empty(Description::new(upper.clone(), upper));
                batch =
                    self.builders
                        .merge(batch, empty, self.logical.borrow(), self.storage.as_ref());
            }
            // The counter restarts from what the trace holds.
            let weight = batch.len().max(1);
            self.place(level_of(weight), batch, weight);
        }
        self.settle();
    }

    /// Puts a newly admitted batch, the newest of all, among the recent batches if it is small
    /// (merging them into the levels when they are enough), at its level otherwise.
    fn introduce(&mut self, batch: Batch<U>) {
        let weight = batch.len().max(1);
        if batch.len() <= RECENT_LEN_MAX && !batch.is_stored() {
            self.hold_recent(batch, weight);
        } else {
            self.flush_recent();
            self.introduce_weighed(batch, weight);
        }
    }

    /// Adds a small batch of `weight` to the recent ones (widening the last one over it, or it
    /// over the last one, when either is empty), and merges them into the levels once they
    /// are `RECENT_COUNT` or weigh `RECENT_WEIGHT`.
    fn hold_recent(&mut self, batch: Batch<U>, weight: usize) {
        let held = match self.recent.pop() {
            None => (batch, weight),
            Some((last, last_weight)) => {
                match union_with_empty(last, batch, self.logical.borrow()) {
                    Ok(union) => (union, last_weight + weight),
                    Err([last, batch]) => {
                        self.recent.push((last, last_weight));
                        (batch, weight)
                    }
                }
            }
        };
        self.recent.push(held);
        let recent_weight: usize = self.recent.iter().map(|(_, weight)| weight).sum();
        if self.recent.len() >= RECENT_COUNT || recent_weight >= RECENT_WEIGHT {
            self.flush_recent();
        }
    }

    /// Merges the recent batches into one and puts it at its level.
    fn flush_recent(&mut self) {
        if let Some((batch, weight)) = self.merge_recent() {
            self.introduce_weighed(batch, weight);
        }
    }

    /// The recent batches as one, with their total weight: a lone one as it is, several merged
    /// at once, their times advanced to the logical frontier. Each is small, so their updates
    /// are gathered as rows and sorted: one batch built where merging them pairwise, as the
    /// levels would, built one per merge (a merge's fixed costs are most of a small one's).
    fn merge_recent(&mut self) -> Option<(Batch<U>, usize)> {
        if self.recent.len() <= 1 {
            return self.recent.pop();
        }
        let (first, last) = (&self.recent[0].0, &self.recent[self.recent.len() - 1].0);
        let lower = first.description().lower.clone();
        let upper = last.description().upper.clone();
        let since = self.logical.borrow();
        // Not kept between merges: buffers kept in every spine would add up to more heap than
        // small dataflows hold in their batches.
        let mut rows = Vec::with_capacity(self.recent.iter().map(|(batch, _)| batch.len()).sum());
        let mut weight = 0;
        for (batch, batch_weight) in self.recent.drain(..) {
            weight += batch_weight;
            batch.extend_rows(&mut rows);
        }
        counts::add(Count::Merges, 1);
        counts::add(Count::MergedUpdates, rows.len());
        for row in rows.iter_mut() {
            row.2.advance_by(since);
        }
        consolidate_rows::<U>(&mut rows);
        let mut updates = Updates::<U>::default();
        updates.extend_from_rows(&rows);
        let mut builder = self.builders.take();
        builder.expect(updates.len());
        builder.push_view(updates.view());
        let description = Description::with_since(lower, upper, since.to_owned());
        let batch = builder.build(description);
        self.builders.keep(builder);
        Some((batch, weight))
    }

    /// Puts a newly admitted batch of `weight`, newer than every level, at its level.
    fn introduce_weighed(&mut self, batch: Batch<U>, mut weight: usize) {
        let level = level_of(weight);
        // The levels below hold newer batches than those above and weigh less than `batch`:
        // fold them into one batch ahead of it.
        let batch = match self.fold_levels(level.min(self.levels.len())) {
            None => batch,
            Some((older, older_weight)) => {
                weight += older_weight;
                self.merge_now(older, batch)
            }
        };
        self.place(level, batch, weight);
    }

    /// Empties levels `0..levels` into one batch, with their total weight. Lower levels hold
    /// newer and smaller batches, so they are merged first, each older level into the result
    /// so far: a level's updates are rewritten once per level above theirs, and the biggest,
    /// oldest batch once. (Oldest first, the big batch was rewritten once per level below it,
    /// and whole compactions in bfs read about two fifths more updates; see docs/perf-notes.md,
    /// section "Spine: whole compaction".)
    fn fold_levels(&mut self, levels: usize) -> Option<(Batch<U>, usize)> {
        let mut merged: Option<(Batch<U>, usize)> = None;
        for level in 0..levels {
            if let Some((older, older_weight)) = self.take_level(level) {
                merged = Some(match merged {
                    None => (older, older_weight),
                    Some((newer, weight)) => (self.merge_now(older, newer), weight + older_weight),
                });
            }
        }
        merged
    }

    /// Merges `older` with the `newer` batch that follows it, now: without the merge machinery
    /// when either is empty (see [`union_with_empty`]).
    fn merge_now(&mut self, older: Batch<U>, newer: Batch<U>) -> Batch<U> {
        match union_with_empty(older, newer, self.logical.borrow()) {
            Ok(union) => union,
            Err([older, newer]) => {
                self.builders
                    .merge(older, newer, self.logical.borrow(), self.storage.as_ref())
            }
        }
    }

    /// Starts merging `older` with the `newer` batch that follows it, advancing times to the
    /// logical frontier.
    fn start_merge(&mut self, older: Batch<U>, newer: Batch<U>) -> Box<Merge<U>> {
        Box::new(
            self.builders
                .start(older, newer, self.logical.borrow(), self.storage.as_ref()),
        )
    }

    /// Moves the top level's batch down while it weighs much more than its length and the
    /// level below is vacant: a batch that consolidation shrank should merge again after about
    /// its length of inserts, not after its (possibly huge) weight.
    fn tidy(&mut self) {
        while let Some(Level::Vacant) = self.levels.last() {
            self.levels.pop();
        }
        loop {
            let top = self.levels.len();
            if top < 2 {
                return;
            }
            let Level::Single(batch, _) = &self.levels[top - 1] else {
                return;
            };
            let deserved = batch.len().max(1);
            if level_of(deserved) >= top - 1 || !matches!(self.levels[top - 2], Level::Vacant) {
                return;
            }
            let Some(Level::Single(batch, _)) = self.levels.pop() else {
                unreachable!("matched Single above")
            };
            self.levels[top - 2] = Level::Single(batch, deserved);
        }
    }

    /// Empties `level`, returning its batches oldest first (completing a merge in progress),
    /// with their weight.
    fn take_level(&mut self, level: usize) -> Option<(Batch<U>, usize)> {
        match std::mem::replace(&mut self.levels[level], Level::Vacant) {
            Level::Vacant => None,
            Level::Single(batch, weight) => Some((batch, weight)),
            Level::Merging(merge, weight) => Some((self.builders.finish(*merge), weight)),
        }
    }

    /// Puts `batch` of `weight`, newer than everything at `level` and above and older than
    /// everything below, at `level`.
    fn place(&mut self, level: usize, batch: Batch<U>, weight: usize) {
        self.max_weight = self.max_weight.max(weight);
        if self.levels.len() <= level {
            self.levels.resize_with(level + 1, || Level::Vacant);
        }
        self.levels[level] = match std::mem::replace(&mut self.levels[level], Level::Vacant) {
            Level::Vacant => Level::Single(batch, weight),
            Level::Single(older, older_weight) => {
                match union_with_empty(older, batch, self.logical.borrow()) {
                    // A merge that is complete as it starts climbs at once, as a merge does when
                    // it completes.
                    Ok(union) => return self.place(level + 1, union, older_weight + weight),
                    Err([older, batch]) => {
                        Level::Merging(self.start_merge(older, batch), older_weight + weight)
                    }
                }
            }
            Level::Merging(merge, merge_weight) => {
                // The merge fell behind (only with little effort): finish it and start merging
                // its result with the newcomer.
                let merged = self.builders.finish(*merge);
                Level::Merging(self.start_merge(merged, batch), merge_weight + weight)
            }
        };
    }

    /// The batches, oldest first (merges in progress contribute their inputs).
    pub fn batches(&self) -> Vec<Batch<U>> {
        let mut batches = Vec::with_capacity(self.batch_count());
        batches.extend(self.held().cloned());
        batches
    }

    /// The batches held, oldest first, without cloning handles (as [`Spine::batches`]).
    fn held(&self) -> impl Iterator<Item = &Batch<U>> {
        let levels = self.levels.iter().rev().flat_map(|level| {
            let (first, second) = match level {
                Level::Vacant => (None, None),
                Level::Single(batch, _) => (Some(batch), None),
                Level::Merging(merge, _) => {
                    let [older, newer] = merge.inputs();
                    (Some(older), Some(newer))
                }
            };
            first.into_iter().chain(second)
        });
        let recent = self.recent.iter().map(|(batch, _)| batch);
        levels.chain(recent).chain(self.pending.iter())
    }

    /// A consistent view of the trace that stays valid whatever the spine does next.
    pub fn snapshot(&self) -> TraceSnapshot<U> {
        TraceSnapshot::new(self.batches())
    }

    /// The number of batches held (merges in progress count their two inputs).
    pub fn batch_count(&self) -> usize {
        self.held().count()
    }

    /// The number of updates held in the batches (merges in progress count their inputs).
    pub fn len(&self) -> usize {
        // Without collecting the batches: arrangements ask at every seal.
        self.held().map(Batch::len).sum()
    }

    /// True when no batch holds an update.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes of the batches held (not counting partial merge outputs).
    pub fn heap_bytes(&self) -> usize {
        self.held().map(Batch::heap_bytes).sum()
    }

    /// Panics unless the spine is well formed: batches contiguous from the minimal time to
    /// `upper`, each batch well formed, at most two batches per level, each level's batches not
    /// much larger than the level allows, and fewer than `RECENT_COUNT` small recent batches.
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
        assert!(
            self.recent.len() < RECENT_COUNT,
            "recent batches not merged"
        );
        for (batch, weight) in &self.recent {
            assert!(batch.len() <= RECENT_LEN_MAX, "a big recent batch");
            assert!(batch.len() <= *weight, "light recent batch");
        }
        // Levels hold at most two batches each, a batch reaches level k only when it, or the
        // batches merged into it, weighed more than 2^(k-1), and a batch weighs at least its
        // length.
        assert!(
            self.levels.len() <= level_of(self.max_weight) + 2,
            "{} levels for weights of at most {}",
            self.levels.len(),
            self.max_weight
        );
        for level in &self.levels {
            match level {
                Level::Vacant => {}
                Level::Single(batch, weight) => assert!(batch.len() <= *weight, "light batch"),
                Level::Merging(merge, weight) => {
                    let [older, newer] = merge.inputs();
                    assert!(older.len() + newer.len() <= *weight, "light merge");
                }
            }
        }
    }
}
