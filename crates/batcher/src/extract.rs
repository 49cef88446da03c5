//! Splitting a chain by a frontier.
//!
//! [`extract`] divides a sorted, consolidated chain into the updates whose times are *not*
//! greater or equal to `upper` (complete: they ship) and those that are (kept for a later seal),
//! and reports the antichain of the kept times. Both outputs stay sorted and consolidated: they
//! are subsequences of the input. A chunk whose updates all go one way moves whole; mixed chunks
//! are split into runs, each copied column by column, and the writers ship a chunk whenever it
//! reaches its size, so no output chunk grows past the threshold.

use crate::chain::Chain;
use crate::chunk::{ChunkWriter, Stash};
use columnar::{Columnar, Index, Len};
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update};
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
/// the times in `keep`.
pub fn extract<U: Update>(
    chain: Chain<U>,
    upper: AntichainRef<'_, U::Time>,
    frontier: &mut Antichain<U::Time>,
    ship_writer: &mut ChunkWriter<U>,
    keep_writer: &mut ChunkWriter<U>,
    stash: &mut Stash<U>,
) -> (Chain<U>, Chain<U>) {
    frontier.clear();
    let mut ship = Vec::new();
    let mut keep = Vec::new();
    let mut time = U::Time::minimum();

    // One pass over the times decides every update, so each writer can reserve for its share
    // before anything is copied. The pass also notes, per chunk, how many updates stay and how
    // many runs the decisions form, which decide how the chunk is copied. Decisions are kept as bits: a byte per update of the whole chain would sit beside
    // the data at the seal's peak (8 MiB for 256 MiB of 32-byte updates).
    let mut kept_bits: Vec<u64> = Vec::with_capacity(chain.len().div_ceil(64));
    // The word being filled and the number of its bits filled so far.
    let (mut word, mut bits) = (0u64, 0u32);
    let mut summaries: Vec<(usize, usize)> = Vec::with_capacity(chain.chunks().len());
    for chunk in chain.chunks() {
        let times = chunk.view().times;
        let (mut kept_here, mut runs) = (0, 0);
        let mut previous = None;
        // No branch on the decision in this loop: when times interleave it is a coin toss, and
        // a mispredicted branch per update cost more than the frontier's own pass below.
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
    let kept_count: usize = summaries.iter().map(|(kept, _)| kept).sum();
    let bytes = chain.byte_len();
    let kept_bytes = (bytes as u128 * kept_count as u128 / chain.len().max(1) as u128) as usize;
    // Update sizes vary, so leave each side some slack over its proportional share.
    let ship_count = chain.len() - kept_count;
    keep_writer.expect(kept_bytes + kept_bytes / 8, kept_count);
    ship_writer.expect((bytes - kept_bytes) + (bytes - kept_bytes) / 8, ship_count);

    let mut indices: [Vec<u32>; 2] = Default::default();
    // The decisions of the chunk being split, unpacked (at most one chunk's worth).
    let mut flags: Vec<bool> = Vec::new();
    let mut offset = 0;
    for (chunk, (kept_here, runs)) in chain.into_chunks().into_iter().zip(summaries) {
        let view = chunk.view();
        let first = offset;
        offset += view.len();

        let all_kept = kept_here == view.len();
        let none_kept = kept_here == 0;
        if all_kept && keep_writer.is_empty() {
            keep.push(chunk);
            continue;
        }
        if none_kept && ship_writer.is_empty() {
            ship.push(chunk);
            continue;
        }

        // Scattered decisions (runs of a few updates, as when times interleave) are copied by
        // index lists, one gather per column and side; long runs are copied run by run.
        if runs * SHORT_RUN > view.len() && view.len() <= u32::MAX as usize {
            let [ship_indices, keep_indices] = &mut indices;
            // Every index is written to both lists and only the side it belongs to advances:
            // no branch on the decisions, which are unpredictable here, and no capacity check.
            ship_indices.clear();
            keep_indices.clear();
            ship_indices.resize(view.len(), 0);
            keep_indices.resize(view.len(), 0);
            let (mut shipped, mut kept) = (0, 0);
            for (index, bit) in (first..offset).enumerate() {
                let stays = (kept_bits[bit / 64] >> (bit % 64)) as usize & 1;
                ship_indices[shipped] = index as u32;
                keep_indices[kept] = index as u32;
                shipped += 1 - stays;
                kept += stays;
            }
            debug_assert_eq!(kept, kept_here);
            ship_indices.truncate(shipped);
            keep_indices.truncate(kept);
            for (selected, writer, output) in [
                (&*ship_indices, &mut *ship_writer, &mut ship),
                (&*keep_indices, &mut *keep_writer, &mut keep),
            ] {
                let mut start = 0;
                while start < selected.len() {
                    writer.prepare(stash);
                    let end = selected.len().min(start + writer.room());
                    writer.updates().extend_gather(view, &selected[start..end]);
                    if writer.is_full() {
                        writer.flush(output, stash);
                    }
                    start = end;
                }
            }
        } else {
            flags.clear();
            flags.extend((first..offset).map(|bit| kept_bits[bit / 64] >> (bit % 64) & 1 == 1));
            let mut start = 0;
            while start < view.len() {
                let kept = flags[start];
                let (writer, output) = if kept {
                    (&mut *keep_writer, &mut keep)
                } else {
                    (&mut *ship_writer, &mut ship)
                };
                writer.prepare(stash);
                let limit = view.len().min(start + writer.room());
                let end = start
                    + flags[start..limit]
                        .iter()
                        .take_while(|&&k| k == kept)
                        .count();
                writer.updates().extend_from(view, start..end);
                if writer.is_full() {
                    writer.flush(output, stash);
                }
                start = end;
            }
        }
        stash.recycle(chunk);
    }
    ship_writer.flush(&mut ship, stash);
    keep_writer.flush(&mut keep, stash);
    let keep = Chain::from_chunks(keep);
    frontier_of(&keep, frontier);
    (Chain::from_chunks(ship), keep)
}

/// Sets `frontier` to the antichain of the times in `chain`.
pub(crate) fn frontier_of<U: Update>(chain: &Chain<U>, frontier: &mut Antichain<U::Time>) {
    frontier.clear();
    // A plain `Vec` while scanning: the antichain's small-vector storage costs a branch per
    // access, and most times are already covered by an element found earlier.
    let mut least: Vec<U::Time> = Vec::new();
    let mut time = U::Time::minimum();
    for chunk in chain.chunks() {
        let times = chunk.view().times;
        for index in 0..times.len() {
            time.copy_from(times.get(index));
            if !least.iter().any(|f| f.less_equal(&time)) {
                least.retain(|f| !time.less_equal(f));
                least.push(time.clone());
            }
        }
    }
    frontier.extend(least);
}
