//! Chunks, the stash that recycles them, and the writer that fills them to size.
//!
//! A [`Chunk`] is a bounded run of updates, sorted strictly by `(key, val, time)` and
//! consolidated (no zero diffs). Its size is measured in serialized bytes, not records, so
//! chunks of wide and narrow records weigh the same. `chunk_bytes_max` (about 2 MiB by default)
//! caps it. Below the cap a writer aims at [`chunk_target`]: about 1/64 of the output it is
//! producing, and at least [`CHUNK_BYTES_MIN`]. A merge or split holds a few chunks beyond its
//! data (the inputs' partly read heads and the output being filled), so chunks proportional to
//! the data keep that overhead a small fraction of it at every size, while big outputs still get
//! big chunks whose per-chunk costs vanish.
//!
//! Memory discipline. Every chunk knows the byte capacity of each of its leaf slices, and a
//! chunk is only ever handed out when those capacities are at most 1.25x what it holds: either
//! it was allocated for exactly its contents, or it is a recycled chunk whose capacity the
//! contents fill closely. Emptied chunks go to a small [`Stash`]; a [`ChunkWriter`] fills a
//! recycled chunk in place and ships it without a copy when it fits, which is the steady state
//! for fixed-width records. Nothing reserves for the worst case.

use ripple_updates::consolidate::rows_are_plain;
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

/// The smallest chunk a writer aims at below the cap: a few pages, so per-chunk costs
/// (allocation, a passthrough test, a size check) stay small next to the copying.
pub const CHUNK_BYTES_MIN: usize = 8 << 10;

/// How many chunks an output of known size is cut into, at most (until chunks reach the minimum
/// or the cap).
pub const CHUNKS_PER_OUTPUT: usize = 64;

/// The chunk size a writer aims at for an output of about `expected_bytes`, given the cap.
pub fn chunk_target(expected_bytes: usize, chunk_bytes_max: usize) -> usize {
    (expected_bytes / CHUNKS_PER_OUTPUT)
        .max(CHUNK_BYTES_MIN)
        .min(chunk_bytes_max)
        .max(1)
}

/// Per-slice byte lengths of `view`.
fn slice_lens<U: Update>(view: UpdatesView<'_, U>, lens: &mut Vec<usize>) {
    lens.clear();
    view.for_each_slice_len(|len| lens.push(len));
}

/// Per-slice byte capacities of a buffer reserved for `copies` copies of a sample whose
/// per-slice lengths are `lens` (an empty container's lengths `empty` are counted once).
fn copies_capacity(lens: &[usize], empty: &[usize], copies: usize) -> Vec<usize> {
    lens.iter()
        .zip(empty)
        .map(|(len, base)| base + len.saturating_sub(*base) * copies)
        .collect()
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

    /// Keeps the allocation of a consumed chunk, in place of the oldest one kept if the stash
    /// is full: the latest consumed chunks are the likeliest to match the chunks being written.
    pub fn recycle(&mut self, chunk: Chunk<U>) {
        if self.count_max == 0 {
            return;
        }
        if self.buffers.len() == self.count_max {
            self.buffers.remove(0);
        }
        let Chunk {
            mut updates,
            capacity,
        } = chunk;
        updates.clear();
        self.buffers.push((updates, capacity));
    }

    /// An empty stashed buffer for chunks of `target` bytes: at least half and at most 1.25x of
    /// it in all. A larger one would ship underfilled (and be copied to size); a smaller one
    /// would cut the output into small chunks.
    fn take(&mut self, target: usize) -> Option<(Updates<U>, Vec<usize>)> {
        let index = self.buffers.iter().rposition(|(_, capacity)| {
            let bytes: usize = capacity.iter().sum();
            bytes * 2 >= target && bytes * 4 <= target * 5
        })?;
        Some(self.buffers.swap_remove(index))
    }

    /// Drops every stashed buffer.
    pub fn clear(&mut self) {
        self.buffers.clear();
    }

    /// A chunk holding a copy of `contents`: a stashed buffer that fits them, or a fresh
    /// allocation of exactly their size.
    fn chunk_from(&mut self, contents: &Updates<U>, lens: &[usize]) -> Chunk<U> {
        self.copy_with_lens(contents.view(), lens)
    }

    /// A chunk holding a copy of `view` (a chunk read back from a spill file), as
    /// [`Stash::chunk_from`] makes one.
    pub(crate) fn copy_of(&mut self, view: UpdatesView<'_, U>) -> Chunk<U> {
        let mut lens = Vec::new();
        slice_lens(view, &mut lens);
        self.copy_with_lens(view, &lens)
    }

    fn copy_with_lens(&mut self, view: UpdatesView<'_, U>, lens: &[usize]) -> Chunk<U> {
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

/// Fills chunks of about [`chunk_target`] serialized bytes and ships them into a chain.
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
    /// The size at which a chunk ships: `chunk_target(expected_bytes, chunk_bytes_max)`.
    target: usize,
    /// Measure again when `updates.len()` reaches this.
    check_at: usize,
    /// An upper bound on the bytes still to come, set by the caller: a fresh buffer never
    /// reserves beyond it, so small outputs do not reserve whole chunks.
    expected_bytes: usize,
    /// An upper bound on the updates still to come, set by the caller. For plain data, whose
    /// updates all have the sample's size, it makes a small output's reservation exact.
    expected_updates: usize,
    /// True while `updates` is a new allocation that has never been reserved: one that grew by
    /// doubling from empty, so its capacity is at most twice its length.
    fresh: bool,
    lens: Vec<usize>,
    /// Per-slice byte lengths of an empty container.
    empty_lens: Vec<usize>,
    /// The first sample a fresh buffer was sized after (empty until then), and its per-slice
    /// lengths: later fresh buffers are reserved from it before the first push, one
    /// allocation per slice, instead of growing a sample and moving it into a sized buffer.
    sample: Updates<U>,
    sample_lens: Vec<usize>,
}

/// How many updates a fresh buffer holds before it is sized for a whole chunk: enough for a
/// representative average size, few enough that the doubling before it costs little. Updates
/// of plain data (no heap in any field) all have the same size, so one is representative (and
/// slice lengths are unpadded, so its size is exact); strings and other variable-size data need
/// a larger sample.
const fn sample_len<U: Update>() -> usize {
    if rows_are_plain::<U>() {
        1
    } else {
        32
    }
}

impl<U: Update> ChunkWriter<U> {
    /// A writer of chunks of at most about `chunk_bytes_max` bytes (at least one update each).
    pub fn new(chunk_bytes_max: usize) -> Self {
        Self {
            updates: Updates::default(),
            capacity: None,
            chunk_bytes_max,
            target: chunk_bytes_max.max(1),
            check_at: 1,
            expected_bytes: usize::MAX,
            expected_updates: usize::MAX,
            fresh: true,
            lens: Vec::new(),
            empty_lens: {
                let mut lens = Vec::new();
                slice_lens(Updates::<U>::default().view(), &mut lens);
                lens
            },
            sample: Updates::default(),
            sample_lens: Vec::new(),
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

    /// Bounds the bytes and the updates this writer will be given until the next call (the
    /// size of the inputs it is fed from): reservations stay within them, and chunks aim at
    /// [`chunk_target`] of the bytes. Call it between outputs, when nothing is pending.
    pub fn expect(&mut self, bytes: usize, updates: usize) {
        debug_assert!(self.updates.is_empty(), "expect with a chunk in progress");
        self.expected_bytes = bytes;
        self.expected_updates = updates;
        self.target = chunk_target(bytes, self.chunk_bytes_max);
        // Checkpoints set for another target may overshoot this one: measure at the next push.
        self.check_at = 1;
    }

    /// The size at which the chunk being filled ships.
    pub fn target(&self) -> usize {
        self.target
    }

    /// How many updates may be appended before `is_full` must be asked again (at least 1).
    #[inline(always)]
    pub fn room(&self) -> usize {
        self.check_at.saturating_sub(self.updates.len()).max(1)
    }

    /// Starts a chunk in a stashed buffer if there is one, or else in a buffer reserved after
    /// the writer's sample, so full chunks ship without a copy.
    #[inline]
    pub fn prepare(&mut self, stash: &mut Stash<U>) {
        if self.updates.is_empty() && self.capacity.is_none() {
            if let Some((updates, capacity)) = stash.take(self.target) {
                self.updates = updates;
                self.capacity = Some(capacity);
                self.fresh = false;
            } else if !self.sample.is_empty() {
                self.reserve_from_sample();
            }
        }
    }

    /// Reserves the empty buffer for a chunk of the target size (or the expected bytes, if
    /// fewer) in copies of the sample.
    #[cold]
    fn reserve_from_sample(&mut self) {
        let grown = self.sample_lens.iter().zip(&self.empty_lens);
        let sample_bytes: usize = grown.map(|(len, base)| len - (*base).min(*len)).sum();
        let mut copies = self.target.min(self.expected_bytes) / sample_bytes.max(1);
        if rows_are_plain::<U>() {
            // The sample is one update of the one size: an output smaller than a chunk gets a
            // buffer of exactly its size, which ships without a copy.
            copies = copies.min(self.expected_updates);
        }
        if copies == 0 {
            return;
        }
        self.updates = Updates::default();
        self.updates.reserve_for_copies(self.sample.view(), copies);
        self.capacity = Some(copies_capacity(&self.sample_lens, &self.empty_lens, copies));
        self.fresh = false;
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
        if bytes >= self.target {
            return true;
        }
        let update_bytes = (bytes / len).max(1);
        let mut room = (self.target - bytes) / update_bytes;
        if self.fresh && self.capacity.is_none() {
            if len < sample_len::<U>() {
                self.check_at = len + room.clamp(1, sample_len::<U>() - len);
                return false;
            }
            // Size the buffer for the whole chunk now, proportionally to the sample, so that it
            // neither doubles past the chunk nor needs a copy to an exact size when it ships.
            if self.sample.is_empty() {
                self.sample.extend_from(self.updates.view(), 0..len);
                self.sample_lens.clone_from(&self.lens);
            }
            let mut expected_room = self.expected_bytes.saturating_sub(bytes) / update_bytes;
            if rows_are_plain::<U>() {
                expected_room = expected_room.min(self.expected_updates.saturating_sub(len));
            }
            let copies = room.min(expected_room) / len;
            if copies >= 3 {
                self.updates.reserve_copies(copies);
                self.capacity = Some(copies_capacity(&self.lens, &self.empty_lens, copies + 1));
            }
            self.fresh = false;
        }
        if let Some(capacity) = &self.capacity {
            // Stop before any slice outgrows the buffer: a reallocation would both copy and
            // double that slice.
            for ((len_bytes, cap), base) in self.lens.iter().zip(capacity).zip(&self.empty_lens) {
                if len_bytes > cap {
                    // Already outgrown (an update far larger than average): capacity is unknown.
                    self.capacity = None;
                    break;
                }
                // A slice's length is its empty length plus a share per update; a slice that has
                // not grown (a count, the column of `()`) limits nothing.
                let grown = len_bytes - base.min(len_bytes);
                if grown == 0 {
                    continue;
                }
                let per_update = grown.div_ceil(len);
                room = room.min((cap - len_bytes) / per_update);
            }
            if self.capacity.is_some() {
                if room == 0 {
                    return true;
                }
                // Plain data has one size per update, so the room is exact; other data may
                // vary, so approach the limit by halves.
                if !rows_are_plain::<U>() {
                    room = room.div_ceil(2);
                }
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
        // Measure at the next push: a fresh buffer must be sized after its sample (not grow by
        // doubling to a whole chunk), and a stashed one must stop before outgrowing its slices.
        self.check_at = 1;
    }

    /// Drops the writer's buffer (between seals, so idle batchers hold no scratch).
    pub fn release(&mut self) {
        debug_assert!(self.updates.is_empty(), "release with unflushed updates");
        self.updates = Updates::default();
        self.capacity = None;
        self.fresh = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BatcherConfig;

    type U = (u64, u32, u64, i64);

    /// Writes `count` updates as one output and returns the chunks it shipped, and whether the
    /// last one shipped in the buffer it was written in (no copy at the flush).
    fn write(
        writer: &mut ChunkWriter<U>,
        stash: &mut Stash<U>,
        count: u64,
    ) -> (Vec<Chunk<U>>, bool) {
        let row_bytes = std::mem::size_of::<ripple_updates::update::Row<U>>();
        writer.expect(count as usize * row_bytes, count as usize);
        let mut chunks = Vec::new();
        let mut in_place = true;
        let flush = |writer: &mut ChunkWriter<U>,
                     chunks: &mut Vec<Chunk<U>>,
                     stash: &mut Stash<U>,
                     in_place: &mut bool| {
            if writer.is_empty() {
                return;
            }
            let written_in = writer.updates.diffs.as_ptr();
            writer.flush(chunks, stash);
            *in_place &=
                chunks.last().map(|chunk| chunk.updates.diffs.as_ptr()) == Some(written_in);
        };
        for index in 0..count {
            writer.prepare(stash);
            writer.updates().push(&index, &1, &0, &1);
            if writer.is_full() {
                flush(writer, &mut chunks, stash, &mut in_place);
            }
        }
        flush(writer, &mut chunks, stash, &mut in_place);
        (chunks, in_place)
    }

    /// An output of plain data smaller than a chunk ships as one chunk of exactly its size, and
    /// once the writer has its one-update sample, in the buffer reserved from it for the
    /// announced count: small seals neither over-reserve nor copy.
    #[test]
    fn small_plain_outputs_get_exact_buffers() {
        let mut writer = ChunkWriter::<U>::new(BatcherConfig::CHUNK_BYTES_DEFAULT);
        let mut stash = Stash::new(0);
        for (round, count) in [1u64, 2, 3, 5, 10, 37, 100, 3, 1].into_iter().enumerate() {
            let (chunks, in_place) = write(&mut writer, &mut stash, count);
            assert_eq!(chunks.len(), 1, "{count} updates in one chunk");
            // The first output has no sample yet; every later one is reserved from it.
            assert!(
                in_place || round == 0,
                "{count} updates were copied at the flush"
            );
            let chunk = &chunks[0];
            assert_eq!(chunk.len() as u64, count);
            let mut lens = Vec::new();
            slice_lens(chunk.view(), &mut lens);
            assert_eq!(
                chunk.byte_capacity(),
                lens.iter().sum::<usize>(),
                "{count} updates: capacity {:?} for lengths {lens:?}",
                chunk.capacity
            );
            chunk.check_invariants();
        }
    }
}
