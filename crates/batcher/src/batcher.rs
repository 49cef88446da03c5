//! The merge batcher: accepts updates in any order, hands out sorted chains by frontier.
//!
//! Data path: `push` feeds the [`Chunker`], whose sorted chains enter a geometric ladder of
//! chains. The ladder keeps chains in decreasing length, each at least twice the next, merging
//! the two smallest whenever that breaks; so there are O(log n) chains and each update is merged
//! O(log n) times. `seal(upper)` merges the ladder into one chain and [`extract`]s from it the
//! updates whose times are not `>= upper`; the rest stays as one chain, with the antichain of its
//! times available from `frontier()`.
//!
//! Invariants (checked by `check_invariants`): every chain satisfies the chain invariants; the
//! ladder is geometric; after a seal, every held update's time is `>= upper`, and the frontier
//! is exactly the antichain of the kept times.

use crate::chain::Chain;
use crate::chunk::{ChunkWriter, Stash, CHUNK_BYTES_MIN};
use crate::chunker::Chunker;
use crate::extract::extract;
use crate::merger::merge;
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update, Updates, UpdatesView};

/// Tuning for a merge batcher. Passed in, never a global.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatcherConfig {
    /// The serialized size at which a chunk is shipped. At least one update per chunk, so `1`
    /// means one update per chunk (useful in tests).
    pub chunk_bytes_max: usize,
    /// How many emptied chunk allocations to keep for reuse.
    pub stash_count_max: usize,
    /// The least pending limit for plain-data rows: input is sorted into a chain once this many
    /// bytes are pending, or an eighth of what the batcher holds if that is more. Small forms
    /// keep a small batcher's footprint small; larger ones mean fewer, longer chains and fewer
    /// merges of each update (see [`BatcherConfig::FORM_BYTES_MIN_DEFAULT`]).
    pub form_bytes_min: usize,
}

impl BatcherConfig {
    /// The default chunk size: 2 MiB, large enough that per-chunk costs vanish and small enough
    /// to stay in cache while a chunk is written.
    pub const CHUNK_BYTES_DEFAULT: usize = 2 << 20;

    /// The default least pending limit for plain rows: one minimal chunk. A batcher holding
    /// little data then keeps at most that much unsorted beside its chains (with 64 KiB, the
    /// push-and-seal cycle of 32 KiB per side in batcher-bench peaked at 1.24x to 1.46x of
    /// differential's heap instead of 0.88x to 0.97x).
    pub const FORM_BYTES_MIN_DEFAULT: usize = CHUNK_BYTES_MIN;

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
            form_bytes_min: Self::FORM_BYTES_MIN_DEFAULT,
        }
    }
}

/// Collects updates and releases them, sorted and consolidated, once their times are complete.
pub struct MergeBatcher<U: Update> {
    chunker: Chunker<U>,
    /// The ladder: chains in decreasing length.
    chains: Vec<Chain<U>>,
    writer: ChunkWriter<U>,
    keep_writer: ChunkWriter<U>,
    stash: Stash<U>,
    /// The antichain of the times held, as of the last seal.
    frontier: Antichain<U::Time>,
    /// The last `upper` sealed at: pushed times must not be before it.
    lower: Antichain<U::Time>,
}

impl<U: Update> MergeBatcher<U> {
    /// An empty batcher.
    pub fn new(config: BatcherConfig) -> Self {
        use timely::progress::Timestamp;
        Self {
            chunker: Chunker::with_form_min(config.chunk_bytes_max, config.form_bytes_min),
            chains: Vec::new(),
            writer: ChunkWriter::new(config.chunk_bytes_max),
            keep_writer: ChunkWriter::new(config.chunk_bytes_max),
            stash: Stash::new(config.stash_count_max),
            frontier: Antichain::new(),
            lower: Antichain::from_elem(U::Time::minimum()),
        }
    }

    /// Accepts updates in any order. Their times must not be before the last sealed `upper`.
    pub fn push(&mut self, updates: UpdatesView<'_, U>) {
        if cfg!(debug_assertions) {
            self.assert_not_before_lower(updates);
        }
        self.chunker.adapt_to(self.byte_len());
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
        let merged = self.merge_all();
        let (ship, keep) = extract(
            merged,
            upper,
            &mut self.frontier,
            &mut self.writer,
            &mut self.keep_writer,
            &mut self.stash,
        );
        if !keep.is_empty() {
            self.chains.push(keep);
        }
        self.lower = upper.to_owned();
        // Between seals a batcher holds only its data: scratch and stashed allocations go.
        self.release_scratch();
        ship
    }

    /// The antichain of the times of held updates, as of the last seal.
    pub fn frontier(&self) -> AntichainRef<'_, U::Time> {
        self.frontier.borrow()
    }

    /// Updates held: in chains, plus those pending in the chunker.
    pub fn len(&self) -> usize {
        self.chains.iter().map(Chain::len).sum::<usize>() + self.chunker.pending_len()
    }

    /// True when no updates are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of payload held in chains.
    pub fn byte_len(&self) -> usize {
        self.chains.iter().map(Chain::byte_len).sum()
    }

    /// Drops scratch buffers and stashed allocations, keeping only the data. `seal` does this
    /// at its end; pushes between seals reuse the buffers.
    pub fn release_scratch(&mut self) {
        self.chunker.finish(&mut self.stash);
        self.insert_ready();
        self.writer.release();
        self.keep_writer.release();
        self.stash.clear();
    }

    /// Panics unless chains are valid and geometric and the frontier matches the kept times.
    pub fn check_invariants(&self) {
        for chain in &self.chains {
            chain.check_invariants();
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
        while let Some(chain) = self.chunker.pop_ready() {
            self.insert_chain(chain);
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

    fn merge_last_two(&mut self) {
        let a = self.chains.pop().expect("two chains");
        let b = self.chains.pop().expect("two chains");
        let merged = merge(b, a, &mut self.writer, &mut self.stash);
        self.chains.push(merged);
    }

    fn merge_all(&mut self) -> Chain<U> {
        while self.chains.len() > 1 {
            self.merge_last_two();
        }
        self.chains.pop().unwrap_or_default()
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
