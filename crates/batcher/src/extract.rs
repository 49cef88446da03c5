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
fn is_kept<T: PartialOrder>(upper: AntichainRef<'_, T>, time: &T) -> bool {
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

    // One pass over the times decides every update (and builds the frontier), so each writer
    // can reserve for its share before anything is copied. The pass also notes, per chunk, how
    // many updates stay and how many runs the decisions form, which decide how the chunk is
    // copied. Decisions are kept as bits: a byte per update of the whole chain would sit beside
    // the data at the seal's peak (8 MiB for 256 MiB of 32-byte updates).
    let mut kept_bits: Vec<u64> = Vec::with_capacity(chain.len().div_ceil(64));
    // The word being filled and the number of its bits filled so far.
    let (mut word, mut bits) = (0u64, 0u32);
    let mut summaries: Vec<(usize, usize)> = Vec::with_capacity(chain.chunks().len());
    let mut kept_frontier: Vec<U::Time> = Vec::new();
    for chunk in chain.chunks() {
        let times = chunk.view().times;
        let (mut kept_here, mut runs) = (0, 0);
        let mut previous = None;
        for index in 0..times.len() {
            time.copy_from(times.get(index));
            let kept = is_kept(upper, &time);
            // Most kept times are already covered by the frontier. (A plain `Vec` here: the
            // antichain's small-vector storage costs a branch per access.)
            if kept && !kept_frontier.iter().any(|f| f.less_equal(&time)) {
                kept_frontier.retain(|f| !time.less_equal(f));
                kept_frontier.push(time.clone());
            }
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
    frontier.extend(kept_frontier);
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

        flags.clear();
        flags.extend((first..offset).map(|bit| kept_bits[bit / 64] >> (bit % 64) & 1 == 1));
        // Scattered flags (runs of a few updates, as when times interleave) are copied by
        // index lists, one gather per column and side; long runs are copied run by run.
        if runs * SHORT_RUN > view.len() && view.len() <= u32::MAX as usize {
            let [ship_indices, keep_indices] = &mut indices;
            ship_indices.clear();
            keep_indices.clear();
            for (index, &kept) in flags.iter().enumerate() {
                // Index arithmetic instead of a branch: the flags are unpredictable here.
                [&mut *ship_indices, &mut *keep_indices][kept as usize].push(index as u32);
            }
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
    (Chain::from_chunks(ship), Chain::from_chunks(keep))
}
