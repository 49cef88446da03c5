//! The merge batcher: accepts updates in any order, hands out sorted chains by frontier.
//!
//! Data path: `push` feeds the [`Chunker`], whose sorted chains enter a geometric ladder of
//! chains. The ladder keeps chains in decreasing length, each at least twice the next, merging
//! the two smallest whenever that breaks; so there are O(log n) chains and each update is merged
//! O(log n) times. `seal(upper)` merges the ladder into one chain and [`extract`]s from it the
//! updates whose times are not `>= upper`; the rest is kept. Kept chains stay apart from the
//! ladder, in their own geometric list, each with the antichain of its times: a seal splits
//! each of them on its own (skipping, unread, those whose times are all `>= upper`) and merges
//! only the shipped parts. Merged with every round of new pushes instead, the updates kept for
//! later rounds (in an iteration, the join of a step's new edges with the depths of every later
//! round) were copied twice at every seal until they shipped, and in bfs the batcher held
//! more updates at its seals than it shipped; keeping them apart took a few percent off bfs's
//! instructions and time. See docs/perf-notes.md, section "Merge batcher: kept chains".
//!
//! Invariants: every chain satisfies the chain invariants, each kept chain's antichain is
//! exactly that of its times, and the ladder is geometric (checked by `check_invariants`);
//! after a seal, every held update's time is `>= upper`, and `frontier()` covers the held
//! times (updates that cancel across two kept chains are netted out when those chains merge or
//! ship, so until then their time may stay in it), checked by the seal property tests in
//! `tests/properties.rs`.

use crate::chain::Chain;
use crate::chunk::{ChunkWriter, Stash, CHUNK_BYTES_MIN};
use crate::chunker::Chunker;
use crate::extract::{extract, frontier_of, is_kept};
use crate::merger::merge;
use ripple_storage::Storage;
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update, Updates, UpdatesView};
use std::sync::Arc;

/// Tuning for a merge batcher. Passed in, never a global.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatcherConfig {
    /// The serialized size at which a chunk is shipped. At least one update per chunk, so `1`
    /// means one update per chunk (useful in tests).
    pub chunk_bytes_max: usize,
    /// How many emptied chunk allocations to keep for reuse.
    pub stash_count_max: usize,
    /// The least pending limit for plain-data rows: input is sorted into a chain once this many
    /// bytes are pending, or an eighth of what the batcher holds (with the context its owner
    /// declared, [`MergeBatcher::set_context_bytes`]) if that is more. Small forms
    /// keep a small batcher's footprint small; larger ones mean fewer, longer chains and fewer
    /// merges of each update (see [`BatcherConfig::PENDING_BYTES_MIN_DEFAULT`]).
    pub pending_bytes_min: usize,
}

impl BatcherConfig {
    /// The default chunk size: 2 MiB, large enough that per-chunk costs vanish and small enough
    /// to stay in cache while a chunk is written.
    pub const CHUNK_BYTES_DEFAULT: usize = 2 << 20;

    /// The default least pending limit for plain rows: one minimal chunk. A batcher holding
    /// little data (and declaring no context) then keeps at most that much unsorted beside its
    /// chains (with a larger floor, batcher-bench's smallest push-and-seal cycles peaked above
    /// differential's heap instead of below it; see docs/perf-notes.md, section "Merge batcher:
    /// form size floor").
    pub const PENDING_BYTES_MIN_DEFAULT: usize = CHUNK_BYTES_MIN;

    /// A configuration with chunks of `chunk_bytes_max` bytes.
    pub fn with_chunk_bytes(chunk_bytes_max: usize) -> Self {
        Self {
            chunk_bytes_max: chunk_bytes_max.max(1),
            ..Self::default()
        }
    }
}

impl Default for BatcherConfig {
    fn default() -> Self {
        Self {
            chunk_bytes_max: Self::CHUNK_BYTES_DEFAULT,
            stash_count_max: 2,
            pending_bytes_min: Self::PENDING_BYTES_MIN_DEFAULT,
        }
    }
}

/// Collects updates and releases them, sorted and consolidated, once their times are complete.
pub struct MergeBatcher<U: Update> {
    chunker: Chunker<U>,
    /// The ladder: chains in decreasing length, of the updates pushed since the last seal.
    chains: Vec<Chain<U>>,
    /// The updates earlier seals kept, as chains in decreasing length, each with the antichain
    /// of its times. They stay apart from the ladder: merged into each new round of pushes,
    /// they were copied twice at every seal (merge, then split) until they shipped.
    kept: Vec<(Chain<U>, Antichain<U::Time>)>,
    writer: ChunkWriter<U>,
    keep_writer: ChunkWriter<U>,
    stash: Stash<U>,
    /// The antichain of the times held, as of the last seal.
    frontier: Antichain<U::Time>,
    /// The last `upper` sealed at: pushed times must not be before it.
    lower: Antichain<U::Time>,
    /// Bytes the batcher's owner holds for the same collection elsewhere, counted with the
    /// batcher's own when sizing the chunker's forms ([`MergeBatcher::set_context_bytes`]).
    context_bytes: usize,
    /// The process's storage tier, if chains may be written out ([`MergeBatcher::set_storage`]).
    storage: Option<Arc<Storage>>,
    /// The bytes of in-memory chains last reported to `storage`.
    reported_bytes: usize,
}

/// Under a storage budget, the data the chunker's forms may follow whatever the budget (see
/// [`MergeBatcher::held_for_forms`]): an eighth of it, a form of 2 MiB, is one chunk at the
/// default size. With a budget of zero (every batch written out) forms fell to the least
/// pending limit, and bfs wrote out twice the bytes of its many short chains.
const FORMS_HELD_UNDER_BUDGET_MIN: usize = 16 << 20;

impl<U: Update> Drop for MergeBatcher<U> {
    fn drop(&mut self) {
        if let Some(storage) = &self.storage {
            storage.account(0, self.reported_bytes);
        }
    }
}

impl<U: Update> MergeBatcher<U> {
    /// An empty batcher.
    pub fn new(config: BatcherConfig) -> Self {
        use timely::progress::Timestamp;
        Self {
            chunker: Chunker::with_pending_min(config.chunk_bytes_max, config.pending_bytes_min),
            chains: Vec::new(),
            kept: Vec::new(),
            writer: ChunkWriter::new(config.chunk_bytes_max),
            keep_writer: ChunkWriter::new(config.chunk_bytes_max),
            stash: Stash::new(config.stash_count_max),
            frontier: Antichain::new(),
            lower: Antichain::from_elem(U::Time::minimum()),
            context_bytes: 0,
            storage: None,
            reported_bytes: 0,
        }
    }

    /// Gives the batcher the process's storage tier. Its chains in memory then count toward
    /// the tier's budget with the spines' batches, and while the process is over budget the
    /// batcher writes its largest chain in memory out to a spill file (chains under
    /// `StorageSettings::spill_min_bytes` stay), after pushes and at seals; merges and
    /// splits of stored chains stream from file to file, so a seal of stored chains hands
    /// out a stored chain. So a collection far larger than memory can wait for its time to
    /// complete (a whole graph loaded at one time) with about a chunk per chain in memory.
    pub fn set_storage(&mut self, storage: Option<Arc<Storage>>) {
        if let Some(old) = &self.storage {
            old.account(0, self.reported_bytes);
        }
        self.reported_bytes = 0;
        self.storage = storage;
        self.spill_while_over_budget();
    }

    /// Says how many bytes the batcher's owner holds beside it for the same collection (an
    /// arrangement's trace, counted as rows). The chunker's pending limit then follows the data
    /// held by batcher and trace together: a batcher that empties at every seal beside a big
    /// trace (an arrangement inside a loop) would otherwise start each round with small forms,
    /// many short chains and a merge pass per doubling. In bfs on big steps over a big graph,
    /// counting the trace cut the times each update was merged to well under half and ran a
    /// few percent faster (see docs/perf-notes.md, section "Merge batcher: context bytes"). The
    /// pending limit stays at most an eighth of batcher and trace and at most eight chunks; the
    /// pending rows, in a buffer grown by doubling, and their sorted chunks at a form can hold
    /// up to twice that. A trace counted as rows overstates its compressed bytes, so the
    /// fraction of the real footprint can be larger (up to about a quarter).
    pub fn set_context_bytes(&mut self, bytes: usize) {
        self.context_bytes = bytes;
    }

    /// Accepts updates in any order. Their times must not be before the last sealed `upper`.
    pub fn push(&mut self, updates: UpdatesView<'_, U>) {
        if cfg!(debug_assertions) {
            self.assert_not_before_lower(updates);
        }
        self.chunker.adapt_to(self.held_for_forms());
        self.chunker.push(updates, &mut self.stash);
        self.insert_ready();
    }

    /// Accepts a container of updates in any order; see [`MergeBatcher::push`].
    pub fn push_updates(&mut self, updates: &Updates<U>) {
        self.push(updates.view());
    }

    /// Releases the updates whose times are not `>= upper`, as one sorted, consolidated chain,
    /// and keeps the rest.
    pub fn seal(&mut self, upper: AntichainRef<'_, U::Time>) -> Chain<U> {
        self.chunker.finish(&mut self.stash);
        self.insert_ready();
        let fresh = self.merge_all();
        // Each chain is split on its own, and a kept chain none of whose times is complete is
        // not even read: the shipped parts are merged, the kept ones stay apart.
        let mut ships = Vec::new();
        let mut kept = Vec::with_capacity(self.kept.len() + 1);
        let held = std::mem::take(&mut self.kept)
            .into_iter()
            .map(|(c, f)| (c, Some(f)));
        for (chain, frontier) in held.chain(std::iter::once((fresh, None))) {
            if chain.is_empty() {
                continue;
            }
            if let Some(frontier) = frontier {
                if frontier.iter().all(|time| is_kept(upper, time)) {
                    kept.push((chain, frontier));
                    continue;
                }
            }
            let mut frontier = Antichain::new();
            let (ship, keep) = extract(
                chain,
                upper,
                &mut frontier,
                &mut self.writer,
                &mut self.keep_writer,
                &mut self.stash,
            );
            if !ship.is_empty() {
                ships.push(ship);
            }
            if !keep.is_empty() {
                kept.push((keep, frontier));
            }
        }
        ships.sort_by_key(|chain| std::cmp::Reverse(chain.len()));
        let ship = merge_down(&mut ships, &mut self.writer, &mut self.stash);
        kept.sort_by_key(|(chain, _)| std::cmp::Reverse(chain.len()));
        for (chain, frontier) in kept {
            self.keep_chain(chain, frontier);
        }
        self.frontier.clear();
        for (_, frontier) in &self.kept {
            self.frontier.extend(frontier.iter().cloned());
        }
        self.lower = upper.to_owned();
        // Between seals a batcher holds its data and at most a small rows buffer: scratch and
        // stashed allocations go.
        self.release_scratch();
        // What stays is counted anew (a seal that ships everything leaves nothing counted).
        self.spill_while_over_budget();
        ship
    }

    /// Reports the bytes of chains in memory to the storage tier, and writes out the largest
    /// chain in memory while the process is over budget (see [`MergeBatcher::set_storage`]).
    fn spill_while_over_budget(&mut self) {
        let Some(storage) = self.storage.clone() else {
            return;
        };
        loop {
            let bytes = self.all_chains().map(Chain::memory_bytes).sum();
            storage.account(bytes, self.reported_bytes);
            self.reported_bytes = bytes;
            if !storage.over_budget() {
                return;
            }
            let least = storage.settings().spill_min_bytes.max(1);
            let ladder = self.chains.iter_mut();
            let kept = self.kept.iter_mut().map(|(chain, _)| chain);
            let Some(largest) = ladder
                .chain(kept)
                .filter(|chain| chain.memory_bytes() >= least)
                .max_by_key(|chain| chain.memory_bytes())
            else {
                return;
            };
            let chain = std::mem::take(largest);
            *largest = chain.spill(&storage, &mut self.stash);
        }
    }

    /// The antichain of the times of held updates, as of the last seal.
    pub fn frontier(&self) -> AntichainRef<'_, U::Time> {
        self.frontier.borrow()
    }

    /// Updates held: in chains, plus those pending in the chunker.
    pub fn len(&self) -> usize {
        self.all_chains().map(Chain::len).sum::<usize>() + self.chunker.pending_len()
    }

    /// True when no updates are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of payload held in chains.
    pub fn byte_len(&self) -> usize {
        self.all_chains().map(Chain::byte_len).sum()
    }

    /// The bytes the chunker's pending limit follows (see [`Self::set_context_bytes`]): the
    /// batcher's and its owner's data, but under a storage budget at most its working share
    /// (`StorageSettings::working_bytes`, a quarter of the budget by default) or
    /// [`FORMS_HELD_UNDER_BUDGET_MIN`], whichever is more: each batcher's forms stay within a
    /// thirty-second of a budget of 64 MiB or more (the budget is the process's, and each of
    /// its batchers forms on its own). Most of the data is then on disk, while a form's
    /// pending rows and its sort's scratch are in memory, in the working share: following the
    /// data, forms on a big graph took a large share of a small budget's peak. The limit is
    /// then a large share of what the chunker is told is held, so it gives the pending rows
    /// back as it forms them (see `Chunker::adapt_to`), which is what a budget asks for (see
    /// docs/perf-notes.md, section "Storage: the peak under a budget").
    fn held_for_forms(&self) -> usize {
        let held = self.byte_len() + self.context_bytes;
        match &self.storage {
            Some(storage) => {
                let cap = storage.settings().working_bytes;
                held.min(cap.max(FORMS_HELD_UNDER_BUDGET_MIN))
            }
            None => held,
        }
    }

    /// The ladder's chains, then the kept ones.
    fn all_chains(&self) -> impl Iterator<Item = &Chain<U>> {
        let kept = self.kept.iter().map(|(chain, _)| chain);
        self.chains.iter().chain(kept)
    }

    /// Drops scratch buffers and stashed allocations, keeping the data and a small rows buffer
    /// (see the chunker's `ROWS_SMALL_BYTES`). `seal` does this at its end; pushes between
    /// seals reuse the buffers.
    pub fn release_scratch(&mut self) {
        self.chunker.finish(&mut self.stash);
        self.insert_ready();
        self.writer.release();
        self.keep_writer.release();
        self.stash.clear();
    }

    /// Panics unless chains are valid and geometric and the frontier matches the kept times.
    pub fn check_invariants(&self) {
        for chain in self.all_chains() {
            chain.check_invariants();
        }
        for (chain, frontier) in &self.kept {
            let mut times = Antichain::new();
            frontier_of(chain, &mut times);
            assert_eq!(
                &times, frontier,
                "a kept chain's frontier is the antichain of its times"
            );
        }
        for pair in self.chains.windows(2) {
            assert!(
                pair[1].len() < pair[0].len() / 2 + 1 || pair[0].len() < 2,
                "ladder invariant: chain of {} follows chain of {}",
                pair[1].len(),
                pair[0].len()
            );
        }
    }

    fn insert_ready(&mut self) {
        let mut inserted = false;
        while let Some(chain) = self.chunker.pop_ready() {
            self.insert_chain(chain);
            inserted = true;
        }
        if inserted {
            self.spill_while_over_budget();
        }
    }

    /// Pushes a chain and merges from the small end while the ladder is not geometric.
    fn insert_chain(&mut self, chain: Chain<U>) {
        self.chains.push(chain);
        while self.chains.len() > 1 {
            let last = self.chains[self.chains.len() - 1].len();
            let before = self.chains[self.chains.len() - 2].len();
            if last < before / 2 {
                break;
            }
            self.merge_last_two();
        }
    }

    /// Adds a kept chain (no longer than any kept before it in this seal) with the antichain of
    /// its times, and merges the shortest kept chains while each is not under half the one
    /// before, as the ladder does.
    fn keep_chain(&mut self, chain: Chain<U>, frontier: Antichain<U::Time>) {
        self.kept.push((chain, frontier));
        while self.kept.len() > 1 {
            let last = self.kept[self.kept.len() - 1].0.len();
            let before = self.kept[self.kept.len() - 2].0.len();
            if last < before / 2 {
                break;
            }
            let (a, a_frontier) = self.kept.pop().expect("two chains");
            let (b, mut frontier) = self.kept.pop().expect("two chains");
            frontier.extend(a_frontier);
            let len = a.len() + b.len();
            let merged = merge(b, a, &mut self.writer, &mut self.stash);
            if merged.len() < len {
                // Updates cancelled: the union may name times no longer held.
                frontier_of(&merged, &mut frontier);
            }
            if !merged.is_empty() {
                self.kept.push((merged, frontier));
            }
        }
    }

    fn merge_last_two(&mut self) {
        let a = self.chains.pop().expect("two chains");
        let b = self.chains.pop().expect("two chains");
        let merged = merge(b, a, &mut self.writer, &mut self.stash);
        self.chains.push(merged);
    }

    fn merge_all(&mut self) -> Chain<U> {
        merge_down(&mut self.chains, &mut self.writer, &mut self.stash)
    }

    fn assert_not_before_lower(&self, updates: UpdatesView<'_, U>) {
        use columnar::Columnar;
        for index in 0..updates.len() {
            let time = U::Time::into_owned(updates.time(index));
            assert!(
                self.lower.iter().any(|lower| lower.less_equal(&time)),
                "batcher: update at time {time:?} pushed after sealing at {:?}",
                self.lower
            );
        }
    }
}

/// Merges `chains` (in decreasing length) into one, the two shortest first, leaving `chains`
/// empty.
fn merge_down<U: Update>(
    chains: &mut Vec<Chain<U>>,
    writer: &mut ChunkWriter<U>,
    stash: &mut Stash<U>,
) -> Chain<U> {
    while chains.len() > 1 {
        let a = chains.pop().expect("two chains");
        let b = chains.pop().expect("two chains");
        chains.push(merge(b, a, writer, stash));
    }
    chains.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ripple_updates::update::Row;

    type IntU = (u64, u64, u64, i64);

    fn rows(count: u64) -> Vec<Row<IntU>> {
        // A multiplicative hash spreads the keys, so that pushes arrive unsorted.
        (0..count)
            .map(|i| {
                (
                    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 50_000,
                    i % 7,
                    i % 5,
                    1,
                )
            })
            .collect()
    }

    /// Updates kept for later stay apart from new pushes: a kept chain whose times are all
    /// beyond the upper is left as it is, updates that cancel across kept chains never ship,
    /// and each update ships exactly once, when its time completes.
    #[test]
    fn kept_chains_stay_apart_and_ship_once() {
        type U = IntU;
        let mut batcher = MergeBatcher::<U>::new(BatcherConfig::default());
        let seal = |batcher: &mut MergeBatcher<U>, upper: u64| {
            let shipped = batcher.seal(Antichain::from_elem(upper).borrow());
            batcher.check_invariants();
            shipped.to_rows()
        };
        // Times 10 and 20 are kept at the seal at 5.
        let far: Vec<Row<U>> = (0..100).map(|k| (k, 0, 20, 1)).collect();
        batcher.push_updates(&Updates::from_rows([(7, 0, 10, 1)].iter().chain(&far)));
        assert!(seal(&mut batcher, 5).is_empty());
        // A later round cancels time 10's update and adds one at 3 and 6.
        batcher.push_updates(&Updates::from_rows([(7, 0, 10, -1), (1, 1, 6, 1)].iter()));
        assert!(seal(&mut batcher, 6).is_empty());
        assert_eq!(
            batcher.kept.len(),
            2,
            "the short new keep stays beside the long one"
        );
        assert_eq!(seal(&mut batcher, 7), vec![(1, 1, 6, 1)]);
        // Time 10 completes: its updates cancelled, nothing ships; time 20's are still kept.
        assert!(seal(&mut batcher, 15).is_empty());
        assert_eq!(batcher.len(), 100);
        assert!(batcher.frontier().iter().all(|t| *t == 20));
        let shipped = seal(&mut batcher, 25);
        assert_eq!(shipped, far);
        assert!(batcher.is_empty());
    }

    /// Counting a big trace beside the batcher makes its forms big: 200,000 updates pushed in
    /// small parts stay pending for one form instead of becoming a ladder of chains (each
    /// doubling a merge pass), and the sealed updates are the same.
    #[test]
    fn context_bytes_make_fewer_chains_and_the_same_updates() {
        let rows = rows(200_000);
        let sealed = |context_bytes: usize| {
            let mut batcher = MergeBatcher::<IntU>::new(BatcherConfig::default());
            batcher.set_context_bytes(context_bytes);
            for part in rows.chunks(4099) {
                batcher.push_updates(&Updates::from_rows(part.iter()));
            }
            let chains = batcher.chains.len();
            batcher.check_invariants();
            let ship = batcher.seal(Antichain::from_elem(3).borrow());
            ship.check_invariants();
            batcher.check_invariants();
            (
                chains,
                ship.to_rows(),
                batcher.seal(Antichain::new().borrow()).to_rows(),
            )
        };
        let (alone, alone_ship, alone_keep) = sealed(0);
        let (beside, beside_ship, beside_keep) = sealed(1 << 30);
        assert!(alone >= 2, "small forms: {alone} chains before the seal");
        assert_eq!(beside, 0, "one form at the seal");
        assert_eq!((alone_ship, alone_keep), (beside_ship, beside_keep));
    }

    /// Under a storage budget the forms follow at most its working share (a quarter of it by
    /// default), and never less than [`FORMS_HELD_UNDER_BUDGET_MIN`]; without one, the data
    /// held beside the batcher.
    #[test]
    fn forms_follow_a_budget() {
        use ripple_storage::{SpillDir, StorageSettings};
        let held_for_forms = |budget: Option<usize>| {
            let mut batcher = MergeBatcher::<IntU>::new(BatcherConfig::default());
            batcher.set_context_bytes(1 << 30);
            let storage = budget.map(|budget| {
                let spill = SpillDir::new_in_temp().expect("a spill directory");
                let settings = StorageSettings::with_budget(budget);
                Arc::new(Storage::in_spill_dir(spill, settings))
            });
            batcher.set_storage(storage);
            batcher.held_for_forms()
        };
        assert_eq!(held_for_forms(None), 1 << 30);
        assert_eq!(held_for_forms(Some(4 << 30)), 1 << 30);
        assert_eq!(held_for_forms(Some(512 << 20)), 128 << 20);
        assert_eq!(held_for_forms(Some(64 << 20)), 16 << 20);
        assert_eq!(held_for_forms(Some(0)), FORMS_HELD_UNDER_BUDGET_MIN);
    }
}
