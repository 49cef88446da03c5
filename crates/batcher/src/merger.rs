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
//! String keys (`String`, `Box<str>`) take a fast path (`StringKeys`): the loop compares and
//! copies them through [`ripple_updates::strings::StringColumn`] instead of the generic column
//! interface, whose `memcmp` and `memcpy` calls mispredicted on key lengths about once per
//! update.
//!
//! Each input chunk is recycled into the stash as soon as it is consumed, so the merge holds
//! about one chunk more than its inputs at any moment.

use crate::chain::{Chain, ChainSink, Link};
use crate::chunk::{Chunk, ChunkWriter, Stash};
use columnar::Columnar;
use columnar::Len;
use ripple_updates::strings::{strings_mut, StringColumn};
use ripple_updates::{Semigroup, Update, Updates, UpdatesView};
use std::cmp::Ordering;
use std::hint::select_unpredictable as select;

/// How many consecutive updates from one side before the merge gallops.
const GALLOP_AFTER: isize = 8;

/// The first index in `lower..upper` at which `before(index)` is false, given that `before` is
/// true at `lower` and, once false, stays false. Returns `upper` if it is true throughout.
///
/// `ripple_updates::search::gallop` answers the same for any start, first testing `before` at
/// it; the merge has always just tested that, and with the shared one in its loop merges of
/// colliding keys ran a few percent slower (see docs/perf-notes.md, section "Merger:
/// galloping").
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

/// One side of a merge: the chunks not yet started, and the current chunk with a position
/// (read back from its spill file if it is stored).
struct Side<U: Update> {
    rest: std::vec::IntoIter<Link<U>>,
    head: Option<Chunk<U>>,
    position: usize,
}

impl<U: Update> Side<U> {
    fn new(chain: Chain<U>, stash: &mut Stash<U>) -> Self {
        let mut side = Self {
            rest: chain.into_links().into_iter(),
            head: None,
            position: 0,
        };
        side.next_head(stash);
        side
    }

    /// Makes the next chunk the current one.
    fn next_head(&mut self, stash: &mut Stash<U>) {
        self.head = self.rest.next().map(|link| link.load(stash));
        self.position = 0;
    }

    /// Moves to the next chunk if the current one is consumed, recycling it.
    #[inline]
    fn advance_if_done(&mut self, stash: &mut Stash<U>) {
        if let Some(chunk) = &self.head {
            if self.position == chunk.len() {
                stash.recycle(self.head.take().expect("head checked above"));
                self.next_head(stash);
            }
        }
    }
}

/// Merges chains `a` and `b` into one chain, consolidating equal `(key, val, time)` triples.
/// If either is stored, so is the merged chain: it is written out as it is made.
pub fn merge<U: Update>(
    a: Chain<U>,
    b: Chain<U>,
    writer: &mut ChunkWriter<U>,
    stash: &mut Stash<U>,
) -> Chain<U> {
    debug_assert!(writer.is_empty(), "merge starts with an empty writer");
    let storage = a.storage().or(b.storage()).cloned();
    let mut output = ChainSink::new(storage);
    writer.expect(a.byte_len() + b.byte_len(), a.len() + b.len());
    let mut a = Side::new(a, stash);
    let mut b = Side::new(b, stash);

    while let (Some(chunk_a), Some(chunk_b)) = (&a.head, &b.head) {
        let view_a = chunk_a.view();
        let view_b = chunk_b.view();

        if a.position == 0 && view_a.cmp_at(view_a.len() - 1, &view_b, b.position) == Ordering::Less
        {
            // Ship what the writer holds (it all sorts before this chunk), then the chunk.
            writer.flush(&mut output.chunks, stash);
            let chunk = a.head.take().expect("head matched above");
            output.push_link(Link::Memory(chunk), stash);
            a.next_head(stash);
            continue;
        }
        if b.position == 0 && view_b.cmp_at(view_b.len() - 1, &view_a, a.position) == Ordering::Less
        {
            writer.flush(&mut output.chunks, stash);
            let chunk = b.head.take().expect("head matched above");
            output.push_link(Link::Memory(chunk), stash);
            b.next_head(stash);
            continue;
        }

        writer.prepare(stash);
        let full = match (
            StringColumn::of::<U::Key>(view_a.keys),
            StringColumn::of::<U::Key>(view_b.keys),
        ) {
            (Some(keys_a), Some(keys_b)) => merge_chunks(
                view_a,
                &mut a.position,
                view_b,
                &mut b.position,
                writer,
                StringKeys(keys_a, keys_b),
            ),
            _ => merge_chunks(
                view_a,
                &mut a.position,
                view_b,
                &mut b.position,
                writer,
                AnyKeys,
            ),
        };
        if full {
            writer.flush(&mut output.chunks, stash);
            output.settle(stash);
        }
        a.advance_if_done(stash);
        b.advance_if_done(stash);
    }

    // One side is exhausted. Copy the rest of the other side's current chunk, then pass its
    // remaining chunks through.
    for side in [&mut a, &mut b] {
        if let Some(chunk) = side.head.take() {
            if side.position == 0 {
                writer.flush(&mut output.chunks, stash);
                output.push_link(Link::Memory(chunk), stash);
            } else {
                let view = chunk.view();
                while side.position < view.len() {
                    writer.prepare(stash);
                    let end = (side.position + writer.room()).min(view.len());
                    writer.updates().extend_from(view, side.position..end);
                    side.position = end;
                    if writer.is_full() {
                        writer.flush(&mut output.chunks, stash);
                        output.settle(stash);
                    }
                }
                stash.recycle(chunk);
            }
        }
        writer.flush(&mut output.chunks, stash);
        for link in side.rest.by_ref() {
            output.push_link(link, stash);
        }
    }

    output.finish(stash)
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
    keys: impl Keys<'a, U>,
) -> bool {
    let (mut i, mut j) = (*position_a, *position_b);
    let (len_a, len_b) = (a.len(), b.len());
    // Every column as long as the diffs, and both positions inside: with these known, the
    // compiler drops the per-column bounds checks in the loop.
    assert!(i < len_a && j < len_b, "merge_chunks past a chunk's end");
    assert!(
        a.keys.len() == len_a && a.vals.len() == len_a && a.times.len() == len_a,
        "columns of one length"
    );
    assert!(
        b.keys.len() == len_b && b.vals.len() == len_b && b.times.len() == len_b,
        "columns of one length"
    );
    // Consecutive updates taken from the same side: positive for `a`, negative for `b`.
    let mut streak: isize = 0;
    let full = loop {
        let ordering = keys.cmp_at(a, i, b, j);
        if ordering == Ordering::Equal {
            streak = 0;
            let mut diff = U::Diff::into_owned(a.diff(i));
            diff.plus_equals_ref(b.diff(j));
            if !diff.is_zero() {
                keys.push_from_with_diff(writer.updates(), a, i, &diff);
            }
            i += 1;
            j += 1;
        } else {
            let take_a = ordering == Ordering::Less;
            keys.push_either(writer.updates(), a, i, b, j, take_a);
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

/// How the merge loop compares two updates and appends the one it takes: through the columns'
/// generic interface ([`AnyKeys`]), or with string keys read directly ([`StringKeys`]).
trait Keys<'a, U: Update>: Copy {
    /// Compares `(key, val, time)` of update `i` of `a` with update `j` of `b`.
    fn cmp_at(self, a: UpdatesView<'a, U>, i: usize, b: UpdatesView<'a, U>, j: usize) -> Ordering;
    /// Appends update `i` of `a` if `take_a`, else update `j` of `b`.
    fn push_either(
        self,
        into: &mut Updates<U>,
        a: UpdatesView<'a, U>,
        i: usize,
        b: UpdatesView<'a, U>,
        j: usize,
        take_a: bool,
    );
    /// Appends the key, value and time of update `i` of `a`, with diff `diff`.
    fn push_from_with_diff(
        self,
        into: &mut Updates<U>,
        a: UpdatesView<'a, U>,
        i: usize,
        diff: &U::Diff,
    );
}

/// Keys of any type, through `columnar`'s interface.
#[derive(Clone, Copy)]
struct AnyKeys;

impl<'a, U: Update> Keys<'a, U> for AnyKeys {
    #[inline(always)]
    fn cmp_at(self, a: UpdatesView<'a, U>, i: usize, b: UpdatesView<'a, U>, j: usize) -> Ordering {
        a.cmp_at(i, &b, j)
    }
    #[inline(always)]
    fn push_either(
        self,
        into: &mut Updates<U>,
        a: UpdatesView<'a, U>,
        i: usize,
        b: UpdatesView<'a, U>,
        j: usize,
        take_a: bool,
    ) {
        into.push_either(a, i, b, j, take_a);
    }
    #[inline(always)]
    fn push_from_with_diff(
        self,
        into: &mut Updates<U>,
        a: UpdatesView<'a, U>,
        i: usize,
        diff: &U::Diff,
    ) {
        into.push_from_with_diff(a, i, diff);
    }
}

/// String keys of the two sides, compared and copied without `memcmp` and `memcpy` calls
/// (see [`ripple_updates::strings`]).
#[derive(Clone, Copy)]
struct StringKeys<'a>(StringColumn<'a>, StringColumn<'a>);

impl<'a, U: Update> Keys<'a, U> for StringKeys<'a> {
    #[inline(always)]
    fn cmp_at(self, a: UpdatesView<'a, U>, i: usize, b: UpdatesView<'a, U>, j: usize) -> Ordering {
        match self.0.cmp_at(i, &self.1, j) {
            Ordering::Equal => a.cmp_after_key_at(i, &b, j),
            ordering => ordering,
        }
    }
    #[inline(always)]
    fn push_either(
        self,
        into: &mut Updates<U>,
        a: UpdatesView<'a, U>,
        i: usize,
        b: UpdatesView<'a, U>,
        j: usize,
        take_a: bool,
    ) {
        let keys = strings_mut(&mut into.keys).expect("string keys are a string column");
        // Select the column and index, not the call: a branch here mispredicts on interleaved
        // keys.
        let (column, index) = select(take_a, (self.0, i), (self.1, j));
        column.push_to(index, keys);
        into.push_either_after_key(a, i, b, j, take_a);
    }
    #[inline(always)]
    fn push_from_with_diff(
        self,
        into: &mut Updates<U>,
        a: UpdatesView<'a, U>,
        i: usize,
        diff: &U::Diff,
    ) {
        let keys = strings_mut(&mut into.keys).expect("string keys are a string column");
        self.0.push_to(i, keys);
        into.push_from_with_diff_after_key(a, i, diff);
    }
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
