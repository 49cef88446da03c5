//! The chunker: unsorted input updates in, sorted and consolidated chains out.
//!
//! Input accumulates until about one chunk's worth (`chunk_bytes_max`) is pending, then is
//! sorted and consolidated (see `ripple_updates::consolidate` for the two paths: plain-data
//! rows, or a permutation over columns). If consolidation leaves at least half, the sorted
//! result is cut into chunks and emitted as one chain; otherwise it stays pending and absorbs
//! more input, so heavy cancellation does not produce a stream of tiny chunks. All buffers are
//! reused from one batch of input to the next.

use crate::chain::Chain;
use crate::chunk::{Chunk, ChunkWriter, Stash};
use ripple_updates::consolidate::{consolidate_columns, consolidate_rows, rows_are_plain};
use ripple_updates::update::Row;
use ripple_updates::{Update, Updates, UpdatesView};

/// Sorts and consolidates input into chains of chunks.
pub struct Chunker<U: Update> {
    chunk_bytes_max: usize,
    /// Pending input, for plain-data updates.
    rows: Vec<Row<U>>,
    /// How many rows make about one chunk.
    rows_max: usize,
    /// Pending input, for other updates.
    pending: Updates<U>,
    /// Consolidated output of the column path, before it is cut into chunks.
    sorted: Updates<U>,
    /// Scratch permutation for the column path.
    order: Vec<u32>,
    writer: ChunkWriter<U>,
    /// Chains ready to be taken.
    ready: Vec<Chain<U>>,
}

impl<U: Update> Chunker<U> {
    /// A chunker that forms chunks of about `chunk_bytes_max` bytes.
    pub fn new(chunk_bytes_max: usize) -> Self {
        let row_bytes = std::mem::size_of::<Row<U>>().max(1);
        Self {
            chunk_bytes_max,
            rows: Vec::new(),
            rows_max: (chunk_bytes_max / row_bytes).max(1),
            pending: Updates::default(),
            sorted: Updates::default(),
            order: Vec::new(),
            writer: ChunkWriter::new(chunk_bytes_max),
            ready: Vec::new(),
        }
    }

    /// Accepts a container of updates, in any order.
    pub fn push(&mut self, input: UpdatesView<'_, U>, stash: &mut Stash<U>) {
        if rows_are_plain::<U>() {
            let mut index = 0;
            while index < input.len() {
                let take = (self.rows_max - self.rows.len()).min(input.len() - index);
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
                let room = (self.chunk_bytes_max.saturating_sub(bytes) / update_bytes).max(1);
                let end = input.len().min(index + room);
                self.pending.extend_from(input, index..end);
                index = end;
                if self.pending.byte_len() >= self.chunk_bytes_max {
                    self.form_columns(false, stash);
                }
            }
        }
    }

    /// Sorts and emits whatever is pending, however little.
    pub fn finish(&mut self, stash: &mut Stash<U>) {
        if rows_are_plain::<U>() {
            self.form_rows(true, stash);
        } else {
            self.form_columns(true, stash);
        }
    }

    /// Takes the chains formed so far.
    pub fn take_ready(&mut self) -> impl Iterator<Item = Chain<U>> + '_ {
        self.ready.drain(..)
    }

    /// Updates pending, not yet in a chain.
    pub fn pending_len(&self) -> usize {
        self.rows.len() + self.pending.len()
    }

    fn form_rows(&mut self, finishing: bool, stash: &mut Stash<U>) {
        let before = self.rows.len();
        consolidate_rows::<U>(&mut self.rows);
        if self.rows.is_empty() || (!finishing && self.rows.len() < before / 2) {
            return;
        }
        let mut chunks = Vec::new();
        self.writer
            .expect_bytes(self.rows.len() * std::mem::size_of::<Row<U>>());
        for (k, v, t, r) in self.rows.iter() {
            self.writer.prepare(stash);
            self.writer.updates().push(k, v, t, r);
            if self.writer.is_full() {
                self.writer.flush(&mut chunks, stash);
            }
        }
        self.writer.flush(&mut chunks, stash);
        self.rows.clear();
        self.emit(chunks);
    }

    fn form_columns(&mut self, finishing: bool, stash: &mut Stash<U>) {
        let before = self.pending.len();
        self.sorted.clear();
        consolidate_columns(self.pending.view(), &mut self.order, &mut self.sorted);
        self.pending.clear();
        if self.sorted.is_empty() || (!finishing && self.sorted.len() < before / 2) {
            // Keep accumulating on top of what survived.
            std::mem::swap(&mut self.pending, &mut self.sorted);
            return;
        }
        let view = self.sorted.view();
        let mut chunks = Vec::new();
        self.writer.expect_bytes(view.byte_len());
        let mut index = 0;
        while index < view.len() {
            self.writer.prepare(stash);
            let end = view.len().min(index + self.writer.room());
            self.writer.updates().extend_from(view, index..end);
            index = end;
            if self.writer.is_full() {
                self.writer.flush(&mut chunks, stash);
            }
        }
        self.writer.flush(&mut chunks, stash);
        self.sorted.clear();
        self.emit(chunks);
    }

    fn emit(&mut self, chunks: Vec<Chunk<U>>) {
        if !chunks.is_empty() {
            self.ready.push(Chain::from_chunks(chunks));
        }
    }

    /// Drops scratch buffers (between seals, so an idle batcher holds only its data).
    pub fn release(&mut self) {
        debug_assert_eq!(self.pending_len(), 0, "release with pending updates");
        self.rows = Vec::new();
        self.pending = Updates::default();
        self.sorted = Updates::default();
        self.order = Vec::new();
        self.writer.release();
    }
}
