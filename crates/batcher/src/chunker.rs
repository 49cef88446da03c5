//! The chunker: unsorted input updates in, sorted and consolidated chains out.
//!
//! Input accumulates until a *pending limit* is reached, then is sorted and consolidated, a
//! step called a *form* (it forms a chain; see
//! `ripple_updates::consolidate` for the two paths: plain-data rows, or a permutation over
//! columns). If consolidation leaves at least half, the sorted result is cut into chunks and
//! emitted as one chain; otherwise it stays pending and absorbs more input, so heavy
//! cancellation does not produce a stream of tiny chunks. All buffers are reused from one batch
//! of input to the next until `finish`, which lets them go but for a small rows buffer.
//!
//! The pending limit follows the data the batcher holds, and the trace beside it when the
//! owner says so ([`Chunker::adapt_to`], `MergeBatcher::set_context_bytes`): an eighth of
//! it, at least `BatcherConfig::pending_bytes_min` (by default `CHUNK_BYTES_MIN`; 32 KiB on the
//! column path) and at most eight full chunks
//! (`chunk_bytes_max` each; one on the column path). Pending input and its sorted copy are the
//! chunker's transient memory, so a limit proportional to the data keeps it a small fraction
//! at every size, and big inputs still sort in big pieces. For plain data the pending rows'
//! buffer grows by doubling up to the limit (it holds at most twice what is pending) and, beyond
//! `ROWS_SMALL_BYTES` and while the limit is more than a sixteenth of the data held, is sorted
//! descending and cut into chunks from its end, each
//! shrink giving memory back: the pending updates are then held about once, not as rows and
//! chunks side by side, and no full-size buffer waits beside the chains between forms.

use crate::chain::Chain;
use crate::chunk::{Chunk, ChunkWriter, Stash, CHUNK_BYTES_MIN};
use ripple_updates::consolidate::{
    consolidate_order, consolidate_rows, consolidate_rows_descending, rows_are_plain,
};
use ripple_updates::update::Row;
use ripple_updates::{Update, Updates, UpdatesView};

/// The size up to which the pending rows' buffer is kept between forms and between seals (and
/// reserved whole): small enough to be a negligible share of any batcher it would be kept in
/// (on a small graph every arrangement keeps one, and they were a tenth of the heap at 64
/// KiB), large enough that small batchers do not reallocate it on every form. Kept across
/// seals, it spares a batcher sealed at every round an allocation and free each time, about a
/// percent of bfs's instructions at one update per step; 16 KiB executes as many instructions
/// as 64 did at one to a hundred updates per step (see docs/perf-notes.md, section "Chunker:
/// kept rows buffer").
const ROWS_SMALL_BYTES: usize = 16 << 10;

/// The least pending limit on the column path (`String` and other non-plain updates). Each form
/// there has costs per form, not per update (a pass for the keys' common prefix, the sort keys'
/// buffer, a writer sample of 32 updates), and a small form also means more, smaller chains to
/// merge, each update's bytes copied again per merge. Forming at 32 KiB instead of the minimal
/// chunk made batcher-bench's small cycles of string updates markedly faster while their peak
/// memory stayed below differential's. Plain rows stay at `BatcherConfig::pending_bytes_min`, by
/// default [`CHUNK_BYTES_MIN`]: their forms are cheap, and there a larger floor raised the peak
/// of the colliding-keys cycle above differential's. See docs/perf-notes.md, section "Chunker:
/// form sizes".
const PENDING_COLUMNS_MIN: usize = 32 << 10;

/// On the plain-rows path the pending limit may reach this many chunks. Each form becomes one
/// sorted chain, and every doubling of the chains' length is one more merge pass over all of
/// them: a batcher holding hundreds of MiB (in bfs on a big graph, the loop's join output)
/// merged each update several times with 2 MiB forms. Forms of up to 16 MiB save three of those
/// passes for three more levels of an in-place sort; measured there, big steps and the load
/// ran a few percent faster with the same peak, and bigger forms gained nothing more (see
/// docs/perf-notes.md, section "Chunker: form sizes"). The limit stays within an eighth of
/// what the batcher holds, as at every size. The column path keeps one chunk: its permutation
/// sort gathers through memory, and it was not measured.
const PENDING_CHUNKS_MAX: usize = 8;

/// Sorts and consolidates input into chains of chunks.
pub struct Chunker<U: Update> {
    chunk_bytes_max: usize,
    /// The least pending limit on the plain-rows path.
    pending_bytes_min: usize,
    /// How many bytes of input may be pending before they are sorted.
    pending_max: usize,
    /// Pending input, for plain-data updates.
    rows: Vec<Row<U>>,
    /// How many rows make `pending_max` bytes.
    rows_max: usize,
    /// How many rows make [`ROWS_SMALL_BYTES`]: a buffer this small is kept between forms.
    rows_small: usize,
    /// True when the pending limit is a sizeable share of the data held (it is not capped by
    /// `chunk_bytes_max`), so that holding the pending rows twice would show in the batcher's
    /// memory: a buffer beyond `rows_small` is then given back as it is formed.
    give_back: bool,
    /// Pending input, for other updates.
    pending: Updates<U>,
    /// Scratch for the column path: the sorted survivors, as indices into `pending`.
    order: Vec<u32>,
    /// Scratch for the column path: the survivors' summed diffs.
    sums: Vec<U::Diff>,
    writer: ChunkWriter<U>,
    /// Chains ready to be taken.
    ready: Vec<Chain<U>>,
}

impl<U: Update> Chunker<U> {
    /// A chunker that forms chunks of at most about `chunk_bytes_max` bytes.
    pub fn new(chunk_bytes_max: usize) -> Self {
        Self::with_pending_min(chunk_bytes_max, CHUNK_BYTES_MIN)
    }

    /// Like [`Chunker::new`], with plain rows sorted only once at least `pending_bytes_min` bytes
    /// are pending (see [`crate::BatcherConfig::pending_bytes_min`]).
    pub fn with_pending_min(chunk_bytes_max: usize, pending_bytes_min: usize) -> Self {
        let mut chunker = Self {
            chunk_bytes_max,
            pending_bytes_min: pending_bytes_min.max(1),
            pending_max: chunk_bytes_max,
            rows: Vec::new(),
            rows_max: 1,
            rows_small: 1,
            give_back: false,
            pending: Updates::default(),
            order: Vec::new(),
            sums: Vec::new(),
            writer: ChunkWriter::new(chunk_bytes_max),
            ready: Vec::new(),
        };
        chunker.adapt_to(0);
        chunker
    }

    /// Sets the pending limit for a batcher that holds `held_bytes` of sorted data (with what its
    /// owner holds beside it for the same collection).
    pub fn adapt_to(&mut self, held_bytes: usize) {
        let (floor, chunks) = if rows_are_plain::<U>() {
            (self.pending_bytes_min, PENDING_CHUNKS_MAX)
        } else {
            (PENDING_COLUMNS_MIN, 1)
        };
        self.pending_max = (held_bytes / 8)
            .max(floor)
            .min(self.chunk_bytes_max.saturating_mul(chunks))
            .max(1);
        let row_bytes = std::mem::size_of::<Row<U>>().max(1);
        self.rows_max = (self.pending_max / row_bytes).max(1);
        self.rows_small = (ROWS_SMALL_BYTES / row_bytes).clamp(1, self.rows_max);
        // Below a sixteenth of the data, holding the pending rows twice costs little memory,
        // and giving them back costs time: a fresh buffer to fault in and a reversing sort at
        // each form.
        self.give_back = self.pending_max * 16 > held_bytes;
    }

    /// Accepts a container of updates, in any order.
    pub fn push(&mut self, input: UpdatesView<'_, U>, stash: &mut Stash<U>) {
        if rows_are_plain::<U>() {
            let wanted = (self.rows.len() + input.len()).min(self.rows_max);
            if self.rows.capacity() < wanted {
                // Grow by doubling from a small buffer, up to the pending limit: the buffer
                // holds at most twice what is pending, not a whole limit's worth while little is.
                let grown = (2 * self.rows.capacity())
                    .max(wanted)
                    .max(self.rows_small)
                    .min(self.rows_max);
                self.rows.reserve_exact(grown - self.rows.len());
            }
            let mut index = 0;
            while index < input.len() {
                let take = self
                    .rows_max
                    .saturating_sub(self.rows.len())
                    .max(1)
                    .min(input.len() - index);
                self.rows
                    .extend((index..index + take).map(|i| input.row(i)));
                index += take;
                if self.rows.len() >= self.rows_max {
                    self.form_rows(false, stash);
                }
            }
        } else {
            let mut index = 0;
            while index < input.len() {
                // Append in slices of about the room left, so one huge input is not copied
                // whole into the pending buffer.
                let bytes = self.pending.byte_len();
                let update_bytes = if self.pending.is_empty() {
                    input.byte_len() / input.len()
                } else {
                    bytes / self.pending.len()
                }
                .max(1);
                let room = (self.pending_max.saturating_sub(bytes) / update_bytes).max(1);
                let end = input.len().min(index + room);
                self.pending.extend_from(input, index..end);
                index = end;
                if self.pending.byte_len() >= self.pending_max {
                    self.form_columns(false, stash);
                }
            }
        }
    }

    /// Sorts and emits whatever is pending, however little, and drops the scratch buffers, so
    /// they do not sit beside the merges and the split that follow a seal.
    pub fn finish(&mut self, stash: &mut Stash<U>) {
        if rows_are_plain::<U>() {
            self.form_rows(true, stash);
        } else {
            self.form_columns(true, stash);
        }
        self.release();
    }

    /// Takes one chain formed so far, the latest first.
    pub fn pop_ready(&mut self) -> Option<Chain<U>> {
        self.ready.pop()
    }

    /// Updates pending, not yet in a chain.
    pub fn pending_len(&self) -> usize {
        self.rows.len() + self.pending.len()
    }

    /// Sorts and consolidates the pending rows and, unless too few survive, writes them into
    /// one chain.
    ///
    /// A buffer beyond [`ROWS_SMALL_BYTES`], while the pending limit is a sizeable share of the
    /// data (`give_back`), is sorted in descending order and its chunks are cut from its end,
    /// which gives their memory back as they are written: so forming holds the pending updates
    /// about once, not twice (the rows and their chunks), and the buffer is gone afterwards
    /// instead of sitting at full capacity beside the chains until the next form. Otherwise the
    /// buffer is sorted ascending, written from the front and kept.
    fn form_rows(&mut self, finishing: bool, stash: &mut Stash<U>) {
        let before = self.rows.len();
        let from_back = self.give_back && self.rows.capacity() > self.rows_small;
        if from_back {
            consolidate_rows_descending::<U>(&mut self.rows);
        } else {
            consolidate_rows::<U>(&mut self.rows);
        }
        if self.rows.is_empty() || (!finishing && self.rows.len() < before / 2) {
            return;
        }
        let mut chunks = Vec::new();
        self.writer.expect(
            self.rows.len() * std::mem::size_of::<Row<U>>(),
            self.rows.len(),
        );
        if from_back {
            while !self.rows.is_empty() {
                self.writer.prepare(stash);
                let start = self.rows.len() - self.rows.len().min(self.writer.room());
                self.writer
                    .updates()
                    .extend_from_rows_reversed(&self.rows[start..]);
                self.rows.truncate(start);
                if self.writer.is_full() {
                    self.writer.flush(&mut chunks, stash);
                    // A shrinking reallocation stays in place: nothing is copied.
                    self.rows.shrink_to_fit();
                }
            }
            self.rows = Vec::new();
        } else {
            let mut index = 0;
            while index < self.rows.len() {
                self.writer.prepare(stash);
                let end = self.rows.len().min(index + self.writer.room());
                self.writer
                    .updates()
                    .extend_from_rows(&self.rows[index..end]);
                index = end;
                if self.writer.is_full() {
                    self.writer.flush(&mut chunks, stash);
                }
            }
            self.rows.clear();
        }
        self.writer.flush(&mut chunks, stash);
        self.emit(chunks);
    }

    fn form_columns(&mut self, finishing: bool, stash: &mut Stash<U>) {
        let before = self.pending.len();
        if before == 0 {
            return;
        }
        // Sort and sum by index: the survivors are written from `pending` straight into chunks,
        // with no sorted copy of the whole pending input in between.
        // Input found sorted and consolidated already (a sorted load) survives whole and in
        // place: it is copied column by column in bulk rather than gathered update by update.
        let in_place = consolidate_order(&self.pending, &mut self.order, &mut self.sums);
        let kept = self.order.len();
        if kept == 0 || (!finishing && kept < before / 2) {
            // Keep accumulating on top of what survived (at most half of the pending input).
            let mut survivors = Updates::default();
            self.write_survivors(&mut survivors);
            self.pending = survivors;
            return;
        }
        let bytes = self.pending.byte_len();
        let kept_bytes = (bytes as u128 * kept as u128 / before as u128) as usize;
        let mut chunks = Vec::new();
        // Update sizes vary, so allow the survivors some slack over their proportional share.
        self.writer.expect(kept_bytes + kept_bytes / 8, kept);
        let view = self.pending.view();
        let mut survivor = 0;
        while survivor < kept {
            self.writer.prepare(stash);
            let end = kept.min(survivor + self.writer.room());
            if in_place {
                self.writer.updates().extend_from(view, survivor..end);
            } else {
                self.writer.updates().extend_gather_with_diffs(
                    view,
                    &self.order[survivor..end],
                    &self.sums[survivor..end],
                );
            }
            survivor = end;
            if self.writer.is_full() {
                self.writer.flush(&mut chunks, stash);
            }
        }
        self.writer.flush(&mut chunks, stash);
        self.pending.clear();
        self.emit(chunks);
    }

    /// Appends the survivors of the last consolidation, in order, to `output`.
    fn write_survivors(&self, output: &mut Updates<U>) {
        output.extend_gather_with_diffs(self.pending.view(), &self.order, &self.sums);
    }

    fn emit(&mut self, chunks: Vec<Chunk<U>>) {
        if !chunks.is_empty() {
            self.ready.push(Chain::from_chunks(chunks));
        }
    }

    /// Drops scratch buffers but a small rows buffer (between seals, so an idle batcher holds
    /// little besides its data).
    pub fn release(&mut self) {
        debug_assert_eq!(self.pending_len(), 0, "release with pending updates");
        // A small rows buffer stays: a batcher sealed at every round (an iteration fed one
        // update per step) would otherwise allocate and free it at each seal.
        if self.rows.capacity() > self.rows_small {
            self.rows = Vec::new();
        }
        self.pending = Updates::default();
        self.order = Vec::new();
        self.sums = Vec::new();
        self.writer.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type U = (u64, u64, u64, i64);

    fn rows(count: u64) -> Updates<U> {
        let rows: Vec<Row<U>> = (0..count).map(|i| (i * 7 % count, i, 0, 1)).collect();
        Updates::from_rows(rows.iter())
    }

    /// A batcher sealed every round keeps its small rows buffer from one seal to the next, and
    /// gives a big one back.
    #[test]
    fn finish_keeps_only_a_small_rows_buffer() {
        let mut stash = Stash::new(4);
        let mut chunker = Chunker::<U>::with_pending_min(2 << 20, 64 << 10);
        chunker.push(rows(10).view(), &mut stash);
        chunker.finish(&mut stash);
        assert_eq!(chunker.pop_ready().map(|chain| chain.len()), Some(10));
        let kept = chunker.rows.capacity();
        assert!(kept > 0 && kept <= chunker.rows_small, "kept {kept} rows");
        chunker.push(rows(10).view(), &mut stash);
        assert_eq!(chunker.rows.capacity(), kept, "the kept buffer is reused");
        chunker.finish(&mut stash);
        assert_eq!(chunker.pop_ready().map(|chain| chain.len()), Some(10));

        // Beside 512 MiB of data the pending limit is 16 MiB, too small a share of the data for
        // the buffer to be given back as it forms (`give_back`): `finish` lets it go.
        chunker.adapt_to(512 << 20);
        assert!(!chunker.give_back);
        chunker.push(rows(100_000).view(), &mut stash);
        chunker.finish(&mut stash);
        assert!(chunker.pop_ready().is_some());
        assert_eq!(chunker.rows.capacity(), 0, "the big buffer is let go");
    }
}
