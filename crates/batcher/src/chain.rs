//! Chains: sorted sequences of chunks, in memory or written out.
//!
//! A [`Chain`] is what the merge batcher merges and what `seal` hands out. Its links are chunks
//! in memory or chunks of spill files ([`crate::spill`]); a chain the batcher wrote out is all
//! stored, and so is whatever a merge or split makes of it. Invariants, checked by
//! [`Chain::check_invariants`]: every chunk satisfies the chunk invariants, and the last update
//! of each chunk sorts strictly before the first update of the next, so the whole chain is one
//! strictly sorted, consolidated run (no `(key, val, time)` is ever split across chunks).

use crate::chunk::{Chunk, Stash};
use crate::spill::{SpillWriter, StoredChunk};
use ripple_storage::Storage;
use ripple_updates::update::Row;
use ripple_updates::{Update, UpdatesView};
use std::cmp::Ordering;
use std::sync::Arc;

/// One chunk of a chain: in memory, or in a spill file.
pub enum Link<U: Update> {
    Memory(Chunk<U>),
    Stored(StoredChunk),
}

impl<U: Update> Link<U> {
    /// The number of updates.
    pub fn len(&self) -> usize {
        match self {
            Link::Memory(chunk) => chunk.len(),
            Link::Stored(stored) => stored.len(),
        }
    }

    /// True when the link holds no updates (never the case in a chain).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chunk, read back if it is stored.
    pub(crate) fn load(self, stash: &mut Stash<U>) -> Chunk<U> {
        match self {
            Link::Memory(chunk) => chunk,
            Link::Stored(stored) => stored.load(stash),
        }
    }
}

/// A sorted, consolidated sequence of chunks.
pub struct Chain<U: Update> {
    links: Vec<Link<U>>,
    /// Total updates in `links`.
    len: usize,
}

impl<U: Update> Default for Chain<U> {
    fn default() -> Self {
        Self {
            links: Vec::new(),
            len: 0,
        }
    }
}

impl<U: Update> Chain<U> {
    /// A chain of `chunks`, which must already satisfy the chain invariants.
    pub fn from_chunks(chunks: Vec<Chunk<U>>) -> Self {
        Self::from_links(chunks.into_iter().map(Link::Memory).collect())
    }

    /// A chain of `links`, which must already satisfy the chain invariants.
    pub(crate) fn from_links(links: Vec<Link<U>>) -> Self {
        let len = links.iter().map(Link::len).sum();
        let chain = Self { links, len };
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

    /// The number of chunks.
    pub fn chunk_count(&self) -> usize {
        self.links.len()
    }

    /// The storage tier of a chain with chunks in spill files.
    pub fn storage(&self) -> Option<&Arc<Storage>> {
        self.links.iter().find_map(|link| match link {
            Link::Stored(stored) => Some(stored.storage()),
            Link::Memory(_) => None,
        })
    }

    /// True when some chunk is in a spill file.
    pub fn is_stored(&self) -> bool {
        self.storage().is_some()
    }

    /// The chunks in memory, in order (all of them for a chain that is not stored).
    pub(crate) fn memory_chunks(&self) -> impl Iterator<Item = &Chunk<U>> {
        self.links.iter().filter_map(|link| match link {
            Link::Memory(chunk) => Some(chunk),
            Link::Stored(_) => None,
        })
    }

    /// The links, owned.
    pub(crate) fn into_links(self) -> Vec<Link<U>> {
        self.links
    }

    /// The chunks, owned and in order, stored ones read back one at a time as the iterator
    /// reaches them.
    pub fn into_chunks(self) -> impl Iterator<Item = Chunk<U>> {
        let mut stash = Stash::new(0);
        self.links
            .into_iter()
            .map(move |link| link.load(&mut stash))
    }

    /// Calls `visit` on each chunk in order, stored ones read back for the call.
    pub fn for_each_view(&self, mut visit: impl FnMut(UpdatesView<'_, U>)) {
        let mut stash = Stash::new(0);
        for link in &self.links {
            match link {
                Link::Memory(chunk) => visit(chunk.view()),
                Link::Stored(stored) => visit(stored.load::<U>(&mut stash).view()),
            }
        }
    }

    /// Bytes of payload, in memory and in spill files.
    pub fn byte_len(&self) -> usize {
        let bytes = |link: &Link<U>| match link {
            Link::Memory(chunk) => chunk.byte_len(),
            Link::Stored(stored) => stored.byte_len(),
        };
        self.links.iter().map(bytes).sum()
    }

    /// Bytes of payload held in memory.
    pub fn memory_bytes(&self) -> usize {
        self.memory_chunks().map(Chunk::byte_len).sum()
    }

    /// Bytes of capacity allocated for the in-memory chunks' leaf slices.
    pub fn byte_capacity(&self) -> usize {
        self.memory_chunks().map(Chunk::byte_capacity).sum()
    }

    /// This chain with every chunk in memory written to a new spill file of `storage`, their
    /// allocations going to `stash`.
    pub fn spill(self, storage: &Arc<Storage>, stash: &mut Stash<U>) -> Self {
        let mut sink = ChainSink::new(Some(Arc::clone(storage)));
        for link in self.links {
            sink.push_link(link, stash);
        }
        sink.finish(stash)
    }

    /// All updates as owned rows, in order (tests and tools; not a hot path).
    pub fn to_rows(&self) -> Vec<Row<U>> {
        let mut rows = Vec::with_capacity(self.len);
        self.for_each_view(|view| rows.extend((0..view.len()).map(|index| view.row(index))));
        rows
    }

    /// Panics unless every chunk is valid and chunk boundaries are strictly increasing.
    pub fn check_invariants(&self) {
        let mut len = 0;
        let mut stash = Stash::new(0);
        let mut previous: Option<Loaded<'_, U>> = None;
        for (index, link) in self.links.iter().enumerate() {
            let chunk = match link {
                Link::Memory(chunk) => Loaded::Borrowed(chunk),
                Link::Stored(stored) => Loaded::Owned(stored.load::<U>(&mut stash)),
            };
            chunk.get().check_invariants();
            let view = chunk.get().view();
            len += view.len();
            if let Some(previous) = &previous {
                let previous = previous.get().view();
                assert_eq!(
                    previous.cmp_at(previous.len() - 1, &view, 0),
                    Ordering::Less,
                    "chain invariant: chunk {index} does not start strictly after chunk {} ends",
                    index - 1
                );
            }
            previous = Some(chunk);
        }
        assert_eq!(len, self.len, "chain invariant: cached length is stale");
    }
}

/// A chunk of a chain, in memory or read back.
enum Loaded<'a, U: Update> {
    Borrowed(&'a Chunk<U>),
    Owned(Chunk<U>),
}

impl<U: Update> Loaded<'_, U> {
    fn get(&self) -> &Chunk<U> {
        match self {
            Loaded::Borrowed(chunk) => chunk,
            Loaded::Owned(chunk) => chunk,
        }
    }
}

/// A chain being built from chunks and links: in memory, or, given a storage tier, written
/// to spill files as the chunks arrive.
pub(crate) struct ChainSink<U: Update> {
    /// Chunks not yet moved to `links`: writers flush into it, and [`ChainSink::settle`]
    /// empties it.
    pub(crate) chunks: Vec<Chunk<U>>,
    links: Vec<Link<U>>,
    /// Where chunks are written, if the sink spills.
    storage: Option<Arc<Storage>>,
    /// The spill file being written (opened at the first chunk).
    writer: Option<SpillWriter>,
}

impl<U: Update> ChainSink<U> {
    /// A sink in memory, or writing to spill files of `storage`.
    pub(crate) fn new(storage: Option<Arc<Storage>>) -> Self {
        Self {
            chunks: Vec::new(),
            links: Vec::new(),
            storage,
            writer: None,
        }
    }

    /// Moves the chunks flushed into [`ChainSink::chunks`] to the chain, writing them out
    /// (and recycling their allocations) if the sink spills.
    pub(crate) fn settle(&mut self, stash: &mut Stash<U>) {
        for chunk in self.chunks.drain(..) {
            match &self.storage {
                Some(storage) => {
                    let writer = self.writer.get_or_insert_with(|| SpillWriter::new(storage));
                    writer.write(&chunk);
                    stash.recycle(chunk);
                }
                None => self.links.push(Link::Memory(chunk)),
            }
        }
    }

    /// Appends a link after the settled chunks. A stored link stays where it is (a chain may
    /// name several spill files); a chunk in memory is written out if the sink spills.
    pub(crate) fn push_link(&mut self, link: Link<U>, stash: &mut Stash<U>) {
        self.settle(stash);
        match link {
            Link::Memory(chunk) => {
                self.chunks.push(chunk);
                self.settle(stash);
            }
            Link::Stored(stored) => {
                self.close_file();
                self.links.push(Link::Stored(stored));
            }
        }
    }

    /// Publishes the spill file being written, if any, so that its chunks take their place
    /// before any link that follows.
    fn close_file(&mut self) {
        if let Some(writer) = self.writer.take() {
            self.links
                .extend(writer.finish().into_iter().map(Link::Stored));
        }
    }

    /// The chain built.
    pub(crate) fn finish(mut self, stash: &mut Stash<U>) -> Chain<U> {
        self.settle(stash);
        self.close_file();
        Chain::from_links(self.links)
    }
}
