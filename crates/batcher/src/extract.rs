//! Splitting a chain by a frontier.
//!
//! [`extract`] divides a sorted, consolidated chain into the updates whose times are *not*
//! greater or equal to `upper` (complete: they ship) and those that are (kept for a later seal),
//! and reports the antichain of the kept times. Both outputs stay sorted and consolidated: they
//! are subsequences of the input. A chunk whose updates all go one way moves whole; mixed chunks
//! are split into runs, each copied column by column, and the writers ship a chunk whenever it
//! reaches its size, so no output chunk grows past the threshold.

use crate::chain::{Chain, ChainSink, Link};
use crate::chunk::{Chunk, ChunkWriter, Stash};
use columnar::{Columnar, Index, Len};
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update, UpdatesView};
use std::ops::Range;
use std::sync::Arc;
use timely::progress::Timestamp;

/// Below this average run length a mixed chunk is copied by index lists rather than by runs.
const SHORT_RUN: usize = 8;

/// Whether an update at `time` stays (is at or beyond `upper`), with a fast path for the common
/// single-element `upper`.
#[inline(always)]
pub(crate) fn is_kept<T: PartialOrder>(upper: AntichainRef<'_, T>, time: &T) -> bool {
    match &upper[..] {
        [single] => single.less_equal(time),
        _ => upper.less_equal(time),
    }
}

/// Splits `chain` by `upper`: returns `(ship, keep)` and sets `frontier` to the antichain of
/// the times in `keep`. A stored chain is split chunk by chunk into two stored chains.
pub fn extract<U: Update>(
    chain: Chain<U>,
    upper: AntichainRef<'_, U::Time>,
    frontier: &mut Antichain<U::Time>,
    ship_writer: &mut ChunkWriter<U>,
    keep_writer: &mut ChunkWriter<U>,
    stash: &mut Stash<U>,
) -> (Chain<U>, Chain<U>) {
    if let Some(storage) = chain.storage().cloned() {
        let mut ship = ChainSink::new(Some(Arc::clone(&storage)));
        let mut keep = ChainSink::new(Some(storage));
        frontier.clear();
        let mut part_frontier = Antichain::new();
        for link in chain.into_links() {
            // One chunk in memory at a time, split as a chain of its own.
            let part = Chain::from_links(vec![Link::Memory(link.load(stash))]);
            let (ship_part, keep_part) = extract(
                part,
                upper,
                &mut part_frontier,
                ship_writer,
                keep_writer,
                stash,
            );
            for (sink, part) in [(&mut ship, ship_part), (&mut keep, keep_part)] {
                for link in part.into_links() {
                    sink.push_link(link, stash);
                }
            }
            frontier.extend(part_frontier.iter().cloned());
        }
        return (ship.finish(stash), keep.finish(stash));
    }
    frontier.clear();
    let decisions = Decisions::of(&chain, upper);
    let kept_count = decisions.kept_count();
    let bytes = chain.byte_len();
    let kept_bytes = (bytes as u128 * kept_count as u128 / chain.len().max(1) as u128) as usize;
    // Update sizes vary, so leave each side some slack over its proportional share.
    let ship_count = chain.len() - kept_count;
    keep_writer.expect(kept_bytes + kept_bytes / 8, kept_count);
    ship_writer.expect((bytes - kept_bytes) + (bytes - kept_bytes) / 8, ship_count);

    let mut split = Split {
        ship_writer,
        keep_writer,
        ship: Vec::new(),
        keep: Vec::new(),
        stash,
    };
    let mut indices: [Vec<u32>; 2] = Default::default();
    // The decisions of the chunk being split, unpacked (at most one chunk's worth).
    let mut flags: Vec<bool> = Vec::new();
    let mut offset = 0;
    let summaries = decisions.summaries.iter();
    for (chunk, &(kept_here, runs)) in chain.into_chunks().zip(summaries) {
        let view = chunk.view();
        let bits = offset..offset + view.len();
        offset = bits.end;
        if kept_here == view.len() && split.keep_writer.is_empty() {
            split.keep.push(chunk);
            continue;
        }
        if kept_here == 0 && split.ship_writer.is_empty() {
            split.ship.push(chunk);
            continue;
        }
        // Scattered decisions (runs of a few updates, as when times interleave) are copied by
        // index lists, one gather per column and side; long runs are copied run by run.
        if runs * SHORT_RUN > view.len() && view.len() <= u32::MAX as usize {
            split.copy_scattered(view, decisions.bits(bits), kept_here, &mut indices);
        } else {
            flags.clear();
            flags.extend(decisions.bits(bits));
            split.copy_runs(view, &flags);
        }
        split.stash.recycle(chunk);
    }
    let Split {
        ship_writer,
        keep_writer,
        mut ship,
        mut keep,
        stash,
    } = split;
    ship_writer.flush(&mut ship, stash);
    keep_writer.flush(&mut keep, stash);
    let keep = Chain::from_chunks(keep);
    frontier_of(&keep, frontier);
    (Chain::from_chunks(ship), keep)
}

/// Which updates of a chain stay, decided in one pass over the times, so that each writer can
/// reserve for its share before anything is copied.
struct Decisions {
    /// Bit `i` is set when update `i` of the chain stays. Bits, not a byte per update: the
    /// decisions of the whole chain sit beside the data at the seal's peak (8 MiB for 256 MiB
    /// of 32-byte updates).
    kept_bits: Vec<u64>,
    /// Per chunk, how many updates stay and how many runs the decisions form, which decide how
    /// the chunk is copied.
    summaries: Vec<(usize, usize)>,
}

impl Decisions {
    fn of<U: Update>(chain: &Chain<U>, upper: AntichainRef<'_, U::Time>) -> Self {
        let mut time = U::Time::minimum();
        let mut kept_bits: Vec<u64> = Vec::with_capacity(chain.len().div_ceil(64));
        // The word being filled and the number of its bits filled so far.
        let (mut word, mut bits) = (0u64, 0u32);
        let mut summaries: Vec<(usize, usize)> = Vec::with_capacity(chain.chunk_count());
        for chunk in chain.memory_chunks() {
            let times = chunk.view().times;
            let (mut kept_here, mut runs) = (0, 0);
            let mut previous = None;
            // No branch on the decision in this loop: when times interleave it is a coin toss,
            // and a mispredicted branch per update cost more than the frontier's own pass.
            for index in 0..times.len() {
                time.copy_from(times.get(index));
                let kept = is_kept(upper, &time);
                kept_here += kept as usize;
                runs += (previous != Some(kept)) as usize;
                previous = Some(kept);
                word |= (kept as u64) << bits;
                bits += 1;
                if bits == 64 {
                    kept_bits.push(word);
                    (word, bits) = (0, 0);
                }
            }
            summaries.push((kept_here, runs));
        }
        if bits > 0 {
            kept_bits.push(word);
        }
        Self {
            kept_bits,
            summaries,
        }
    }

    fn kept_count(&self) -> usize {
        self.summaries.iter().map(|(kept, _)| kept).sum()
    }

    /// The decisions of the chain's updates `range`, as `true` for those that stay.
    fn bits(&self, range: Range<usize>) -> impl Iterator<Item = bool> + '_ {
        range.map(|bit| self.kept_bits[bit / 64] >> (bit % 64) & 1 == 1)
    }
}

/// The two sides of a split: their writers, the chunks each has filled, and the stash both
/// take chunks from.
struct Split<'w, U: Update> {
    ship_writer: &'w mut ChunkWriter<U>,
    keep_writer: &'w mut ChunkWriter<U>,
    ship: Vec<Chunk<U>>,
    keep: Vec<Chunk<U>>,
    stash: &'w mut Stash<U>,
}

impl<U: Update> Split<'_, U> {
    /// Copies a chunk whose decisions are scattered: its updates' indices go to one list per
    /// side, and each side gathers its list column by column.
    fn copy_scattered(
        &mut self,
        view: UpdatesView<'_, U>,
        kept: impl Iterator<Item = bool>,
        kept_here: usize,
        indices: &mut [Vec<u32>; 2],
    ) {
        let [ship_indices, keep_indices] = indices;
        // Every index is written to both lists and only the side it belongs to advances: no
        // branch on the decisions, which are unpredictable here, and no capacity check.
        ship_indices.clear();
        keep_indices.clear();
        ship_indices.resize(view.len(), 0);
        keep_indices.resize(view.len(), 0);
        let (mut shipped, mut kept_so_far) = (0, 0);
        for (index, stays) in kept.enumerate() {
            let stays = stays as usize;
            ship_indices[shipped] = index as u32;
            keep_indices[kept_so_far] = index as u32;
            shipped += 1 - stays;
            kept_so_far += stays;
        }
        debug_assert_eq!(kept_so_far, kept_here);
        ship_indices.truncate(shipped);
        keep_indices.truncate(kept_so_far);
        for (selected, writer, output) in [
            (&*ship_indices, &mut *self.ship_writer, &mut self.ship),
            (&*keep_indices, &mut *self.keep_writer, &mut self.keep),
        ] {
            let mut start = 0;
            while start < selected.len() {
                writer.prepare(self.stash);
                let end = selected.len().min(start + writer.room());
                writer.updates().extend_gather(view, &selected[start..end]);
                if writer.is_full() {
                    writer.flush(output, self.stash);
                }
                start = end;
            }
        }
    }

    /// Copies a chunk whose decisions (`flags`, `true` for updates that stay) form long runs,
    /// run by run.
    fn copy_runs(&mut self, view: UpdatesView<'_, U>, flags: &[bool]) {
        let mut start = 0;
        while start < view.len() {
            let kept = flags[start];
            let (writer, output) = if kept {
                (&mut *self.keep_writer, &mut self.keep)
            } else {
                (&mut *self.ship_writer, &mut self.ship)
            };
            writer.prepare(self.stash);
            let limit = view.len().min(start + writer.room());
            let end = start
                + flags[start..limit]
                    .iter()
                    .take_while(|&&k| k == kept)
                    .count();
            writer.updates().extend_from(view, start..end);
            if writer.is_full() {
                writer.flush(output, self.stash);
            }
            start = end;
        }
    }
}

/// Sets `frontier` to the antichain of the times in `chain`.
pub(crate) fn frontier_of<U: Update>(chain: &Chain<U>, frontier: &mut Antichain<U::Time>) {
    frontier.clear();
    // A plain `Vec` while scanning: the antichain's small-vector storage costs a branch per
    // access, and most times are already covered by an element found earlier.
    let mut least: Vec<U::Time> = Vec::new();
    let mut time = U::Time::minimum();
    chain.for_each_view(|view| {
        let times = view.times;
        for index in 0..times.len() {
            time.copy_from(times.get(index));
            if !least.iter().any(|f| f.less_equal(&time)) {
                least.retain(|f| !time.less_equal(f));
                least.push(time.clone());
            }
        }
    });
    frontier.extend(least);
}
