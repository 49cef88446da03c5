//! Chains: sorted sequences of chunks.
//!
//! A [`Chain`] is what the merge batcher merges and what `seal` hands out. Invariants, checked by
//! [`Chain::check_invariants`]: every chunk satisfies the chunk invariants, and the last update
//! of each chunk sorts strictly before the first update of the next, so the whole chain is one
//! strictly sorted, consolidated run (no `(key, val, time)` is ever split across chunks).

use crate::chunk::Chunk;
use ripple_updates::update::Row;
use ripple_updates::Update;
use std::cmp::Ordering;

/// A sorted, consolidated sequence of chunks.
pub struct Chain<U: Update> {
    chunks: Vec<Chunk<U>>,
    /// Total updates in `chunks`.
    len: usize,
}

impl<U: Update> Default for Chain<U> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<U: Update> Chain<U> {
    /// A chain of `chunks`, which must already satisfy the chain invariants.
    pub fn from_chunks(chunks: Vec<Chunk<U>>) -> Self {
        let len = chunks.iter().map(Chunk::len).sum();
        let chain = Self { chunks, len };
        if cfg!(debug_assertions) {
            chain.check_invariants();
        }
        chain
    }

    /// The total number of updates.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the chain holds no updates.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunks, in order.
    pub fn chunks(&self) -> &[Chunk<U>] {
        &self.chunks
    }

    /// The chunks, owned.
    pub fn into_chunks(self) -> Vec<Chunk<U>> {
        self.chunks
    }

    /// Bytes of payload held.
    pub fn byte_len(&self) -> usize {
        self.chunks.iter().map(Chunk::byte_len).sum()
    }

    /// Bytes of capacity allocated for the chunks' leaf slices.
    pub fn byte_capacity(&self) -> usize {
        self.chunks.iter().map(Chunk::byte_capacity).sum()
    }

    /// All updates as owned rows, in order (tests and tools; not a hot path).
    pub fn to_rows(&self) -> Vec<Row<U>> {
        self.chunks
            .iter()
            .flat_map(|chunk| {
                let view = chunk.view();
                (0..view.len()).map(move |index| view.row(index))
            })
            .collect()
    }

    /// Panics unless every chunk is valid and chunk boundaries are strictly increasing.
    pub fn check_invariants(&self) {
        let mut len = 0;
        for (index, chunk) in self.chunks.iter().enumerate() {
            chunk.check_invariants();
            len += chunk.len();
            if index > 0 {
                let previous = self.chunks[index - 1].view();
                let next = chunk.view();
                assert_eq!(
                    previous.cmp_at(previous.len() - 1, &next, 0),
                    Ordering::Less,
                    "chain invariant: chunk {index} does not start strictly after chunk {} ends",
                    index - 1
                );
            }
        }
        assert_eq!(len, self.len, "chain invariant: cached length is stale");
    }
}
