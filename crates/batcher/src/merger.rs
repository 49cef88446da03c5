//! Merging two chains into one.
//!
//! The merge walks the heads of both chains. Where one side's current update sorts first, it
//! gallops (exponential then binary search) to the end of the run of updates that sort before
//! the other side's head, and copies the run column by column in bulk; a run of length one, the
//! common case on interleaved keys, costs one extra comparison. Equal `(key, val, time)` triples
//! are consolidated: their diffs are added and a zero sum is dropped.
//!
//! Whole-chunk passthrough: when a chunk that has not been started sorts strictly before the
//! other side's head, the writer ships what it holds (a chunk below its target, which sorts
//! before) and the chunk moves to the output as it is, without a comparison per update or a byte
//! copied. Runs that span chunks (long key ranges owned by one side) thus cost one partial chunk
//! at each switch of sides, and every whole chunk inside them moves for free. Strictly: a chunk whose
//! last update equals the other head must go through the consolidating path, or the equal pair
//! would end up in two chunks unconsolidated. Once one side is exhausted, the other side's
//! current chunk is copied and its remaining chunks pass through.
//!
//! Each input chunk is recycled into the stash as soon as it is consumed, so the merge holds
//! about one chunk more than its inputs at any moment.

use crate::chain::Chain;
use crate::chunk::{Chunk, ChunkWriter, Stash};
use columnar::Columnar;
use ripple_updates::{Semigroup, Update, UpdatesView};
use std::cmp::Ordering;

/// How many consecutive updates from one side before the merge gallops.
const GALLOP_AFTER: isize = 8;

/// The first index in `lower..upper` at which `before(index)` is false, given that `before` is
/// true at `lower` and, once false, stays false. Returns `upper` if it is true throughout.
#[inline(always)]
pub(crate) fn gallop(lower: usize, upper: usize, before: impl Fn(usize) -> bool) -> usize {
    debug_assert!(lower < upper && before(lower));
    // Invariant: before(low) is true; before(high) is false or high == upper.
    let mut low = lower;
    let mut step = 1;
    while low + step < upper && before(low + step) {
        low += step;
        step <<= 1;
    }
    let mut high = (low + step).min(upper);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if before(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}

/// One side of a merge: the chunks not yet started, and the current chunk with a position.
struct Side<U: Update> {
    rest: std::vec::IntoIter<Chunk<U>>,
    head: Option<Chunk<U>>,
    position: usize,
}

impl<U: Update> Side<U> {
    fn new(chain: Chain<U>) -> Self {
        let mut rest = chain.into_chunks().into_iter();
        let head = rest.next();
        Self {
            rest,
            head,
            position: 0,
        }
    }

    /// Moves to the next chunk if the current one is consumed, recycling it.
    #[inline]
    fn advance_if_done(&mut self, stash: &mut Stash<U>) {
        if let Some(chunk) = &self.head {
            if self.position == chunk.len() {
                stash.recycle(self.head.take().expect("head checked above"));
                self.head = self.rest.next();
                self.position = 0;
            }
        }
    }
}

/// Merges chains `a` and `b` into one chain, consolidating equal `(key, val, time)` triples.
pub fn merge<U: Update>(
    a: Chain<U>,
    b: Chain<U>,
    writer: &mut ChunkWriter<U>,
    stash: &mut Stash<U>,
) -> Chain<U> {
    debug_assert!(writer.is_empty(), "merge starts with an empty writer");
    let mut output = Vec::with_capacity(a.chunks().len() + b.chunks().len());
    writer.expect(a.byte_len() + b.byte_len(), a.len() + b.len());
    let mut a = Side::new(a);
    let mut b = Side::new(b);

    while let (Some(chunk_a), Some(chunk_b)) = (&a.head, &b.head) {
        let view_a = chunk_a.view();
        let view_b = chunk_b.view();

        if a.position == 0 && view_a.cmp_at(view_a.len() - 1, &view_b, b.position) == Ordering::Less
        {
            // Ship what the writer holds (it all sorts before this chunk), then the chunk.
            writer.flush(&mut output, stash);
            output.push(a.head.take().expect("head matched above"));
            a.head = a.rest.next();
            continue;
        }
        if b.position == 0 && view_b.cmp_at(view_b.len() - 1, &view_a, a.position) == Ordering::Less
        {
            writer.flush(&mut output, stash);
            output.push(b.head.take().expect("head matched above"));
            b.head = b.rest.next();
            continue;
        }

        writer.prepare(stash);
        let full = merge_chunks(view_a, &mut a.position, view_b, &mut b.position, writer);
        if full {
            writer.flush(&mut output, stash);
        }
        a.advance_if_done(stash);
        b.advance_if_done(stash);
    }

    // One side is exhausted. Copy the rest of the other side's current chunk, then pass its
    // remaining chunks through.
    for side in [&mut a, &mut b] {
        if let Some(chunk) = side.head.take() {
            if side.position == 0 {
                writer.flush(&mut output, stash);
                output.push(chunk);
            } else {
                let view = chunk.view();
                while side.position < view.len() {
                    writer.prepare(stash);
                    let end = (side.position + writer.room()).min(view.len());
                    writer.updates().extend_from(view, side.position..end);
                    side.position = end;
                    if writer.is_full() {
                        writer.flush(&mut output, stash);
                    }
                }
                stash.recycle(chunk);
            }
        }
        writer.flush(&mut output, stash);
        output.extend(side.rest.by_ref());
    }

    Chain::from_chunks(output)
}

/// Merges from two chunks into the writer until one chunk is consumed or the writer is full.
/// Returns true when the writer is full.
///
/// On interleaved keys which side comes next is a coin flip, and a branch on it mispredicts
/// half the time. So an update costs one comparison and one select-and-push per column
/// ([`Updates::push_either`](ripple_updates::Updates::push_either)), and the positions advance
/// arithmetically; only equal triples (consolidation) and long runs take branches. After
/// `GALLOP_AFTER` consecutive updates from the same side the merge gallops and copies the rest of
/// the run in bulk: on interleaved keys runs are short and a search would cost more than it saves.
#[inline]
fn merge_chunks<'a, U: Update>(
    a: UpdatesView<'a, U>,
    position_a: &mut usize,
    b: UpdatesView<'a, U>,
    position_b: &mut usize,
    writer: &mut ChunkWriter<U>,
) -> bool {
    let (mut i, mut j) = (*position_a, *position_b);
    let (len_a, len_b) = (a.len(), b.len());
    // Consecutive updates taken from the same side: positive for `a`, negative for `b`.
    let mut streak: isize = 0;
    let full = loop {
        let ordering = a.cmp_at(i, &b, j);
        if ordering == Ordering::Equal {
            streak = 0;
            let mut diff = U::Diff::into_owned(a.diff(i));
            diff.plus_equals_ref(b.diff(j));
            if !diff.is_zero() {
                writer.updates().push_from_with_diff(a, i, &diff);
            }
            i += 1;
            j += 1;
        } else {
            let take_a = ordering == Ordering::Less;
            writer.updates().push_either(a, i, b, j, take_a);
            i += take_a as usize;
            j += !take_a as usize;
            // Branch-free streak: extend it in the direction taken, restart on a switch.
            let step: isize = if take_a { 1 } else { -1 };
            streak = if (streak > 0) == take_a {
                streak + step
            } else {
                step
            };
            if streak.unsigned_abs() >= GALLOP_AFTER as usize
                && writer.room() > 1
                && i < len_a
                && j < len_b
            {
                streak = 0;
                if take_a {
                    if a.cmp_at(i, &b, j) == Ordering::Less {
                        let upper = len_a.min(i + writer.room() - 1);
                        let end = gallop(i, upper, |x| a.cmp_at(x, &b, j) == Ordering::Less);
                        writer.updates().extend_from(a, i..end);
                        i = end;
                    }
                } else if b.cmp_at(j, &a, i) == Ordering::Less {
                    let upper = len_b.min(j + writer.room() - 1);
                    let end = gallop(j, upper, |y| b.cmp_at(y, &a, i) == Ordering::Less);
                    writer.updates().extend_from(b, j..end);
                    j = end;
                }
            }
        }
        if writer.is_full() {
            break true;
        }
        if i == len_a || j == len_b {
            break false;
        }
    };
    *position_a = i;
    *position_b = j;
    full
}

#[cfg(test)]
mod tests {
    use super::gallop;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn gallop_finds_the_boundary(lower in 0usize..50, extra in 1usize..100, cut in 0usize..200) {
            let upper = lower + extra;
            let boundary = cut.clamp(lower + 1, upper);
            prop_assert_eq!(gallop(lower, upper, |i| i < boundary), boundary);
        }
    }
}
