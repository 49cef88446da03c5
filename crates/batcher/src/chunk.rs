//! Chunks, the stash that recycles them, and the writer that fills them to size.
//!
//! A [`Chunk`] is a bounded run of updates, sorted strictly by `(key, val, time)` and
//! consolidated (no zero diffs). Its size target is a number of serialized bytes
//! (`chunk_bytes_max`, about 2 MiB by default), not a record count, so chunks of wide and narrow
//! records weigh the same.
//!
//! Memory discipline. Every chunk knows the byte capacity of each of its leaf slices, and a
//! chunk is only ever handed out when those capacities are at most 1.25x what it holds: either
//! it was allocated for exactly its contents, or it is a recycled chunk whose capacity the
//! contents fill closely. Emptied chunks go to a small [`Stash`]; a [`ChunkWriter`] fills a
//! recycled chunk in place and ships it without a copy when it fits, which is the steady state
//! for fixed-width records. Nothing reserves for the worst case.

use ripple_updates::{Update, Updates, UpdatesView};

/// A sorted, consolidated run of updates, with the byte capacity of each leaf slice.
pub struct Chunk<U: Update> {
    updates: Updates<U>,
    /// Byte capacity of each leaf slice, in the order of `UpdatesView::for_each_slice_len`.
    capacity: Vec<usize>,
}

impl<U: Update> Chunk<U> {
    /// The updates, borrowed for reading.
    #[inline(always)]
    pub fn view(&self) -> UpdatesView<'_, U> {
        self.updates.view()
    }

    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.updates.len()
    }

    /// True when the chunk holds no updates (never the case for a chunk in a chain).
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// The updates, owned.
    pub fn into_updates(self) -> Updates<U> {
        self.updates
    }

    /// Bytes of payload held.
    pub fn byte_len(&self) -> usize {
        self.updates.byte_len()
    }

    /// Bytes of capacity allocated for the leaf slices.
    pub fn byte_capacity(&self) -> usize {
        self.capacity.iter().sum()
    }

    /// Panics unless the chunk is non-empty, sorted, consolidated and within its capacity.
    pub fn check_invariants(&self) {
        assert!(
            !self.is_empty(),
            "chunk invariant: a chunk holds at least one update"
        );
        self.view().check_sorted_consolidated();
        let mut index = 0;
        self.view().for_each_slice_len(|len| {
            assert!(
                len <= self.capacity[index],
                "chunk invariant: slice {index} holds {len} bytes beyond its capacity {}",
                self.capacity[index]
            );
            index += 1;
        });
    }
}

/// Per-slice byte lengths of `view`.
fn slice_lens<U: Update>(view: UpdatesView<'_, U>, lens: &mut Vec<usize>) {
    lens.clear();
    view.for_each_slice_len(|len| lens.push(len));
}

/// True when contents of per-slice lengths `lens` fit `capacity` without reallocation and
/// without holding more than 1.25x their size.
fn fits(lens: &[usize], capacity: &[usize]) -> bool {
    let held: usize = lens.iter().sum();
    let allocated: usize = capacity.iter().sum();
    lens.iter().zip(capacity).all(|(len, cap)| len <= cap) && allocated * 4 <= held * 5
}

/// Emptied chunk allocations, kept for reuse.
pub struct Stash<U: Update> {
    buffers: Vec<(Updates<U>, Vec<usize>)>,
    /// How many buffers to keep at most.
    count_max: usize,
}

impl<U: Update> Stash<U> {
    /// A stash that keeps at most `count_max` buffers.
    pub fn new(count_max: usize) -> Self {
        Self {
            buffers: Vec::new(),
            count_max,
        }
    }

    /// Keeps the allocation of a consumed chunk, if there is room.
    pub fn recycle(&mut self, chunk: Chunk<U>) {
        if self.buffers.len() < self.count_max {
            let Chunk {
                mut updates,
                capacity,
            } = chunk;
            updates.clear();
            self.buffers.push((updates, capacity));
        }
    }

    /// An empty buffer with known capacities, if one is stashed.
    fn take(&mut self) -> Option<(Updates<U>, Vec<usize>)> {
        self.buffers.pop()
    }

    /// Drops every stashed buffer.
    pub fn clear(&mut self) {
        self.buffers.clear();
    }

    /// A chunk holding a copy of `contents`: a stashed buffer that fits them, or a fresh
    /// allocation of exactly their size.
    fn chunk_from(&mut self, contents: &Updates<U>, lens: &[usize]) -> Chunk<U> {
        let view = contents.view();
        let (mut updates, capacity) = match self
            .buffers
            .iter()
            .position(|(_, capacity)| fits(lens, capacity))
        {
            Some(index) => self.buffers.swap_remove(index),
            None => (Updates::with_capacity_for(view), lens.to_vec()),
        };
        updates.extend_from(view, 0..view.len());
        Chunk { updates, capacity }
    }
}

/// Fills chunks of about `chunk_bytes_max` serialized bytes and ships them into a chain.
///
/// Callers append to [`ChunkWriter::updates`], append at most [`ChunkWriter::room`] updates
/// between calls to [`ChunkWriter::is_full`], and call [`ChunkWriter::flush`] when it is full and
/// at the end. Sizes are measured only at checkpoints, so the hot loop pays one comparison per
/// step.
pub struct ChunkWriter<U: Update> {
    updates: Updates<U>,
    /// Per-slice capacities of `updates` when it came from the stash and has not outgrown them.
    capacity: Option<Vec<usize>>,
    chunk_bytes_max: usize,
    /// Measure again when `updates.len()` reaches this.
    check_at: usize,
    /// Bytes per update at the last measurement (at least 1).
    update_bytes: usize,
    /// An upper bound on the bytes still to come, set by the caller: a fresh buffer never
    /// reserves beyond it, so small outputs do not reserve whole chunks.
    expected_bytes: usize,
    /// True while `updates` is a new allocation that has never been reserved: one that grew by
    /// doubling from empty, so its capacity is at most twice its length.
    fresh: bool,
    lens: Vec<usize>,
}

/// How many updates a fresh buffer holds before it is sized for a whole chunk: enough for a
/// representative average size, few enough that the doubling before it costs nothing.
const SAMPLE_LEN: usize = 32;

impl<U: Update> ChunkWriter<U> {
    /// A writer of chunks of about `chunk_bytes_max` bytes (at least one update each).
    pub fn new(chunk_bytes_max: usize) -> Self {
        Self {
            updates: Updates::default(),
            capacity: None,
            chunk_bytes_max,
            check_at: 1,
            update_bytes: usize::MAX,
            expected_bytes: usize::MAX,
            fresh: true,
            lens: Vec::new(),
        }
    }

    /// The chunk being filled. Append at most `room()` updates before the next `is_full()`.
    #[inline(always)]
    pub fn updates(&mut self) -> &mut Updates<U> {
        &mut self.updates
    }

    /// True when nothing has been appended since the last flush.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// Bounds the bytes this writer will be given until the next call (the size of the inputs
    /// it is fed from); reservations stay within it.
    pub fn expect_bytes(&mut self, bytes: usize) {
        self.expected_bytes = bytes;
    }

    /// How many updates may be appended before `is_full` must be asked again (at least 1).
    #[inline(always)]
    pub fn room(&self) -> usize {
        self.check_at.saturating_sub(self.updates.len()).max(1)
    }

    /// Starts a chunk in a stashed buffer if there is one, so full chunks ship without a copy.
    #[inline]
    pub fn prepare(&mut self, stash: &mut Stash<U>) {
        if self.updates.is_empty() && self.capacity.is_none() {
            if let Some((updates, capacity)) = stash.take() {
                self.updates = updates;
                self.capacity = Some(capacity);
                self.fresh = false;
            }
        }
    }

    /// True when the chunk has reached its size; otherwise sets the next checkpoint.
    #[inline(always)]
    pub fn is_full(&mut self) -> bool {
        self.updates.len() >= self.check_at && self.measure()
    }

    #[inline(never)]
    fn measure(&mut self) -> bool {
        let len = self.updates.len();
        slice_lens(self.updates.view(), &mut self.lens);
        let bytes: usize = self.lens.iter().sum();
        if bytes >= self.chunk_bytes_max {
            return true;
        }
        self.update_bytes = (bytes / len).max(1);
        let mut room = (self.chunk_bytes_max - bytes) / self.update_bytes;
        if self.fresh && self.capacity.is_none() {
            if len < SAMPLE_LEN {
                self.check_at = len + room.clamp(1, SAMPLE_LEN - len);
                return false;
            }
            // Size the buffer for the whole chunk now, proportionally to the sample, so that it
            // neither doubles past the chunk nor needs a copy to an exact size when it ships.
            let expected_room = self.expected_bytes.saturating_sub(bytes) / self.update_bytes;
            let copies = room.min(expected_room) / len;
            if copies >= 3 {
                self.updates.reserve_copies(copies);
                self.capacity = Some(self.lens.iter().map(|len| len * (copies + 1)).collect());
            }
            self.fresh = false;
        }
        if let Some(capacity) = &self.capacity {
            // Stop before any slice outgrows the stashed buffer: a reallocation would both copy
            // and double that slice. Approach the limit by halves, since update sizes vary.
            for (len_bytes, cap) in self.lens.iter().zip(capacity) {
                if len_bytes > cap {
                    // Already outgrown (an update far larger than average): capacity is unknown.
                    self.capacity = None;
                    break;
                }
                let per_update = len_bytes.div_ceil(len).max(1);
                room = room.min((cap - len_bytes) / per_update);
            }
            if self.capacity.is_some() {
                if room == 0 {
                    return true;
                }
                room = room.div_ceil(2);
            }
        }
        self.check_at = len + room.max(1);
        false
    }

    /// Ships the chunk being filled, if any, onto `chain`.
    pub fn flush(&mut self, chain: &mut Vec<Chunk<U>>, stash: &mut Stash<U>) {
        if self.updates.is_empty() {
            return;
        }
        slice_lens(self.updates.view(), &mut self.lens);
        let bytes: usize = self.lens.iter().sum();
        self.update_bytes = (bytes / self.updates.len()).max(1);
        match self.capacity.take() {
            Some(capacity) if fits(&self.lens, &capacity) => {
                // The buffer is the right size: ship it as is.
                let updates = std::mem::take(&mut self.updates);
                chain.push(Chunk { updates, capacity });
            }
            capacity => {
                chain.push(stash.chunk_from(&self.updates, &self.lens));
                // A buffer that kept its known capacity can serve the next chunk; one of unknown
                // capacity is dropped, so the next starts fresh and is sized exactly.
                match capacity.filter(|c| self.lens.iter().zip(c).all(|(len, cap)| len <= cap)) {
                    Some(capacity) => {
                        self.updates.clear();
                        self.capacity = Some(capacity);
                    }
                    None => self.updates = Updates::default(),
                }
            }
        }
        self.fresh = self.capacity.is_none();
        self.check_at = (self.chunk_bytes_max / self.update_bytes).max(1);
    }

    /// Drops the writer's buffer (between seals, so idle batchers hold no scratch).
    pub fn release(&mut self) {
        debug_assert!(self.updates.is_empty(), "release with unflushed updates");
        self.updates = Updates::default();
        self.capacity = None;
        self.fresh = true;
    }
}
