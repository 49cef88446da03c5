//! Batched lookups: many probe keys against every batch of a trace, one forward pass per batch.
//!
//! Looking keys up one at a time walks every batch once per key, jumping between batches and
//! starting each search afresh. Given the probe keys sorted, [`lookup`] instead visits each
//! batch once:
//! - a batch whose key range `[first, last]` misses the probes' range is skipped outright;
//! - otherwise probes and keys are zipped, galloping on whichever side is behind: a run of
//!   nearby probes costs a few comparisons each, a batch much smaller than the probe run is
//!   crossed in a few gallops over the probes, and a far probe costs what a fresh seek costs.
//!   (Bisecting the remaining keys for far probes, or bracketing the probe run first, measured
//!   slower: galloping's first steps touch cache lines the previous search just read.)
//! - a big batch (one with key fences) against a much shorter probe run: when the stretch of
//!   keys the probes span (two searches through the fences) is within eight times the
//!   probes in number, that stretch is walked in order without branching on the comparisons
//!   (a few percent faster than bisecting in bfs on a big graph). Otherwise each probe finds
//!   its block of keys among the fences, then bisects it without branching, so the cache
//!   misses of different probes overlap (about a tenth faster there than the galloping walk
//!   through fences). Measurements: docs/perf-notes.md, section "Batched lookups".
//!
//! The hits, `(probe, key position)` per batch, are then merged in probe order and handed out
//! as a [`ValCursor`] over the values of that key in every batch that has it. A single probe
//! does exactly the work of one seek per batch, so tiny probe runs do not lose. The two halves
//! are also available apart ([`start`], then [`next_hit`] per found key), so that a reader of
//! several traces (reduce reads its input history, new batches and output) can take the same
//! key from each before moving on.

use crate::columns::KEY_FENCE;
use crate::cursor::BatchCursor;
use crate::filter::{may_contain, KeyHasher};
use crate::trace_cursor::TraceCursor;
use columnar::{Columnar, Index, Len, Ref};
use ripple_updates::search::gallop;
use ripple_updates::Update;
use std::any::Any;
use std::cmp::Ordering;

impl<'a, U: Update> TraceCursor<'a, U> {
    /// Finds each of `probes` (sorted) in every batch, one forward pass per batch, and calls
    /// `found(probe_index, values)` for each probe present in some batch, in probe order. Reuse
    /// one cursor and one `scratch` across lookups: neither allocates once warm. Leaves the
    /// cursor at an unspecified key. See the module documentation.
    pub fn lookup<'p, P>(
        &mut self,
        probes: P,
        scratch: &mut LookupScratch,
        found: impl FnMut(usize, &mut ValCursor<'_, 'a, U>),
    ) where
        P: columnar::Index<Ref = columnar::Ref<'p, U::Key>> + columnar::Len + Copy,
    {
        lookup(self, probes, scratch, found)
    }

    /// Like [`TraceCursor::lookup`], in two steps: `start_lookup` finds the probes, then each
    /// [`TraceCursor::next_hit`] positions the cursor at the next probe found and returns its
    /// index, so a caller can interleave the lookups of several traces key by key. The cursor
    /// must not be moved otherwise in between.
    pub fn start_lookup<'p, P>(&mut self, probes: P, scratch: &mut LookupScratch)
    where
        P: columnar::Index<Ref = columnar::Ref<'p, U::Key>> + columnar::Len + Copy,
    {
        start(self, probes, scratch)
    }

    /// The next probe found by the lookup `start_lookup` began, with the cursor at its key.
    pub fn next_hit(&mut self, scratch: &mut LookupScratch) -> Option<usize> {
        next_hit(self, scratch)
    }

    /// Like [`TraceCursor::next_hit`], without ordering the key's values across batches: read
    /// them with [`TraceCursor::map_key_updates`].
    pub fn next_hit_key(&mut self, scratch: &mut LookupScratch) -> Option<usize> {
        next_hit_key(self, scratch)
    }
}

/// Buffers reused across lookups, so a steady stream of lookups allocates nothing.
#[derive(Default)]
pub struct LookupScratch {
    /// Per batch, `(probe index, key index)` of each hit, in probe order.
    hits: Vec<Vec<(u32, u32)>>,
    /// Per batch, how many of its hits have been handed out.
    next: Vec<usize>,
    /// For a single probe (looked up by plain seeks): whether it is still to be handed out, and
    /// whether it was found.
    single: Option<bool>,
    /// Per probe, the number of key fences at or below it (see [`intersect_fenced`]).
    blocks: Vec<u32>,
    /// Whether some batch is big (has key fences), so that [`next_hit_key`] prefetches.
    prefetch: bool,
    /// For stored batches: the probes' hashes and which pass a batch's filter.
    stored: StoredProbes,
}

/// What lookups into stored batches keep between lookups (see [`intersect_stored`]).
#[derive(Default)]
struct StoredProbes {
    /// Each probe's key hash, computed once per lookup (`hashed`) for all stored batches.
    hashes: Vec<u64>,
    hashed: bool,
    /// Of the probes in one block's key range, those its batch's filter passes.
    passing: Vec<u32>,
    /// A `KeyHasher` of the probes' key type, kept to hash without allocating.
    hasher: Option<Box<dyn Any>>,
}

/// The values of one probed key, across the batches that have it.
pub struct ValCursor<'c, 'a, U: Update> {
    cursor: &'c mut TraceCursor<'a, U>,
}

impl<'a, U: Update> ValCursor<'_, 'a, U> {
    /// The key found.
    pub fn key(&self) -> Ref<'a, U::Key> {
        self.cursor
            .get_key()
            .expect("a value cursor is always at a key")
    }

    /// The current value, if any.
    pub fn get_val(&self) -> Option<Ref<'a, U::Val>> {
        self.cursor.get_val()
    }

    /// Calls `logic` with each `(time, diff)` of the current value, batch by batch.
    pub fn map_times(&self, logic: impl FnMut(Ref<'a, U::Time>, Ref<'a, U::Diff>)) {
        self.cursor.map_times(logic)
    }

    /// Advances to the next value.
    pub fn step_val(&mut self) {
        self.cursor.step_val()
    }

    /// Advances to the first value `>= val`.
    pub fn seek_val(&mut self, val: Ref<'_, U::Val>) {
        self.cursor.seek_val(val)
    }

    /// Returns to the first value.
    pub fn rewind_vals(&mut self) {
        self.cursor.rewind_vals()
    }
}

/// Finds each probe in every batch of `cursor`; see the module documentation. `probes` must be
/// sorted (checked in debug builds); a repeated probe is reported once per occurrence. Leaves
/// `cursor` at an unspecified key: rewind it before stepping.
pub fn lookup<'a, 'p, U: Update, P>(
    cursor: &mut TraceCursor<'a, U>,
    probes: P,
    scratch: &mut LookupScratch,
    mut found: impl FnMut(usize, &mut ValCursor<'_, 'a, U>),
) where
    P: Index<Ref = Ref<'p, U::Key>> + Len + Copy,
{
    start(cursor, probes, scratch);
    while let Some(probe) = next_hit(cursor, scratch) {
        found(probe, &mut ValCursor { cursor });
    }
}

/// The first half of [`lookup`]: finds the probes in every batch and notes the hits in
/// `scratch`, for [`next_hit`] to hand out. Between the two, the cursor must not move.
pub fn start<'p, U: Update, P>(
    cursor: &mut TraceCursor<'_, U>,
    probes: P,
    scratch: &mut LookupScratch,
) where
    P: Index<Ref = Ref<'p, U::Key>> + Len + Copy,
{
    debug_assert!(
        (1..probes.len()).all(|i| probes.get(i - 1).cmp(&probes.get(i)) != Ordering::Greater),
        "lookup probes must be sorted"
    );
    scratch.single = None;
    scratch.prefetch = cursor.cursors.iter().any(|batch| batch.fence_count() > 0);
    let batch_count = cursor.cursors.len();
    scratch.next.clear();
    scratch.next.resize(batch_count, 0);
    scratch
        .hits
        .resize_with(batch_count.max(scratch.hits.len()), Vec::new);
    for hits in &mut scratch.hits[..batch_count] {
        hits.clear();
    }
    if probes.is_empty() || batch_count == 0 {
        return;
    }
    let probe_count = probes.len();
    if probe_count == 1 {
        // A single probe: a fresh seek in each batch, without the per-batch hit lists.
        let target = U::Key::reborrow(probes.get(0));
        cursor.at_key.clear();
        scratch.stored.hashed = false;
        for (index, batch) in cursor.cursors.iter_mut().enumerate() {
            if batch.stored().is_some() {
                // Only the block the key can be in is read, and only if the filter lets the
                // key through.
                let Some(block) = stored_may_hold(batch, probes, &mut scratch.stored) else {
                    continue;
                };
                batch.seek_in_block(block, target);
            } else {
                batch.rewind_keys();
                batch.seek_key(target);
            }
            if batch
                .get_key()
                .is_some_and(|key| U::Key::reborrow(key) == target)
            {
                cursor.at_key.push(index);
            }
        }
        scratch.single = Some(!cursor.at_key.is_empty());
        return;
    }
    let (first_probe, last_probe) = (
        U::Key::reborrow(probes.get(0)),
        U::Key::reborrow(probes.get(probe_count - 1)),
    );
    scratch.stored.hashed = false;
    for (batch, hits) in cursor.cursors.iter().zip(scratch.hits.iter_mut()) {
        if batch.stored().is_some() {
            intersect_stored(batch, probes, &mut scratch.stored, hits);
            continue;
        }
        let key_count = batch.key_count();
        let key = |index: usize| U::Key::reborrow(batch.key_at(index));
        let probe = |index: usize| U::Key::reborrow(probes.get(index));
        if last_probe < key(0) || key(key_count - 1) < first_probe {
            continue;
        }
        if key_count <= DENSE_RATIO * probe_count && probe_count <= DENSE_RATIO * key_count {
            intersect_dense(probe_count, key_count, probe, key, hits);
        } else if batch.fence_count() > 0 && key_count > DENSE_RATIO * probe_count {
            // Density is judged by the keys the probes span, which two searches through the
            // fences find: a long run of a big interval's keys may cover a stretch of a huge
            // batch closely (in bfs on a big graph, a probe run within a stretch of a few times
            // its length; see docs/perf-notes.md, section "Batched lookups"), and a walk reads
            // that stretch in order where bisections would wait on a cache line each.
            let from = batch.search_key(0, first_probe);
            let to = batch
                .search_key(from, last_probe)
                .saturating_add(1)
                .min(key_count);
            let span = to - from;
            if span <= DENSE_RATIO * probe_count {
                let start = hits.len();
                intersect_dense(probe_count, span, probe, |i| key(from + i), hits);
                for hit in &mut hits[start..] {
                    hit.1 += from as u32;
                }
                continue;
            }
            let fence = |index: usize| U::Key::reborrow(batch.fence_at(index));
            let fences = (batch.fence_count(), fence);
            intersect_fenced(
                probe_count,
                key_count,
                probe,
                key,
                fences,
                &mut scratch.blocks,
                hits,
            );
        } else {
            let search = |from: usize, target| batch.search_key(from, target);
            intersect_galloping(probe_count, key_count, probe, key, search, hits);
        }
    }
}

/// Appends to `hits` the `(probe, key)` index pairs of a stored batch's keys among the probes,
/// as RocksDB's MultiGet reads a file: the file's index routes each run of probes to the one
/// block whose key range can hold them, skipping blocks (and probes) that no probe (key) falls
/// in; the probes of a block's range are tested against the batch's key filter (all probes
/// hashed once per lookup, first); and the block is read once for all the probes that pass,
/// not at all if none does.
fn intersect_stored<'p, U: Update, P>(
    batch: &BatchCursor<'_, U>,
    probes: P,
    scratch: &mut StoredProbes,
    hits: &mut Vec<(u32, u32)>,
) where
    P: Index<Ref = Ref<'p, U::Key>> + Len + Copy,
{
    let stored = batch.stored().expect("a stored batch");
    let index = stored.index();
    let (probe_count, block_count) = (probes.len(), stored.block_count());
    let probe = |i: usize| U::Key::reborrow(probes.get(i));
    let filtered = index.filter().is_present() && stored.tests_filter();
    if filtered && !scratch.hashed {
        hash_probes::<U::Key, P>(probes, scratch);
    }
    let (mut next, mut block) = (0, 0);
    let (mut tested, mut passed) = (0, 0);
    while next < probe_count {
        block = index.block_not_before(block, probes.get(next));
        if block == block_count {
            break;
        }
        let (first, last) = index.key_range(block);
        let (first, last) = (U::Key::reborrow(first), U::Key::reborrow(last));
        next = gallop(next, probe_count, |i| probe(i) < first);
        let end = gallop(next, probe_count, |i| probe(i) <= last);
        let (hashes, passing) = (&scratch.hashes, &mut scratch.passing);
        passing.clear();
        let tester = filtered.then(|| index.filter().tester(block)).flatten();
        let filtered = (next as u32..end as u32)
            .filter(|&i| tester.is_none() || may_contain(&tester, hashes[i as usize]));
        passing.extend(filtered);
        if tester.is_some() {
            // A partition without a filter (its construction failed) tests nothing.
            tested += end - next;
            passed += passing.len();
        }
        next = end;
        if passing.is_empty() {
            continue;
        }
        let view = batch.block_view(block);
        let key = |i: usize| U::Key::reborrow(view.keys.get(i));
        let key_count = view.keys.len();
        let search = |from: usize, target| gallop(from, key_count, |i| key(i) < target);
        let start = hits.len();
        let passing_probe = |i: usize| probe(passing[i] as usize);
        intersect_galloping(passing.len(), key_count, passing_probe, key, search, hits);
        let base = index.key_start(block) as u32;
        for hit in &mut hits[start..] {
            *hit = (passing[hit.0 as usize], hit.1 + base);
        }
        block += 1;
    }
    if filtered {
        stored.note_filtered(tested, passed);
    }
}

/// For a single probe into a stored batch: the block that may hold it, if its key range and
/// filter let the probe through (no block read).
fn stored_may_hold<'p, U: Update, P>(
    batch: &BatchCursor<'_, U>,
    probes: P,
    scratch: &mut StoredProbes,
) -> Option<usize>
where
    P: Index<Ref = Ref<'p, U::Key>> + Len + Copy,
{
    let stored = batch.stored().expect("a stored batch");
    let index = stored.index();
    let target = U::Key::reborrow(probes.get(0));
    let block = index.block_not_before(0, probes.get(0));
    if block == stored.block_count() || target < U::Key::reborrow(index.key_range(block).0) {
        return None;
    }
    if !index.filter().is_present() || !stored.tests_filter() {
        return Some(block);
    }
    let tester = index.filter().tester(block);
    if tester.is_none() {
        return Some(block);
    }
    if !scratch.hashed {
        hash_probes::<U::Key, P>(probes, scratch);
    }
    let passed = may_contain(&tester, scratch.hashes[0]);
    stored.note_filtered(1, usize::from(passed));
    passed.then_some(block)
}

/// Hashes every probe into `scratch.hashes`, once per lookup.
#[inline(never)]
fn hash_probes<'p, K: Columnar, P>(probes: P, scratch: &mut StoredProbes)
where
    P: Index<Ref = Ref<'p, K>> + Len + Copy,
{
    let hasher = scratch
        .hasher
        .get_or_insert_with(|| Box::new(KeyHasher::<K>::default()));
    let hasher = hasher
        .downcast_mut::<KeyHasher<K>>()
        .expect("one key type per scratch");
    scratch.hashes.clear();
    scratch
        .hashes
        .extend((0..probes.len()).map(|i| hasher.hash(K::reborrow(probes.get(i)))));
    scratch.hashed = true;
}

/// A batch is intersected with the probes by a linear walk when neither outnumbers the other by
/// more than this. Galloping decides each step on a comparison that is a coin toss when probes
/// and keys interleave closely; the walk advances without branching on it, so it costs a few
/// instructions per key and probe instead of a mispredicted branch per step. But the walk visits
/// every probe and key up to the last match, so where one side is much sparser (a small batch
/// against a long probe run, or the reverse) galloping over the denser side stays far cheaper.
const DENSE_RATIO: usize = 8;

/// Appends to `hits` the `(probe, key)` index pairs of equal probes and keys (probes sorted,
/// keys sorted and distinct), galloping on whichever side is behind; `search(from, target)`
/// is the first key index at or after `from` whose key is `>= target` (a batch searches its
/// keys through its fences).
#[inline]
fn intersect_galloping<K: Ord>(
    probe_count: usize,
    key_count: usize,
    probe: impl Fn(usize) -> K,
    key: impl Fn(usize) -> K,
    search: impl Fn(usize, K) -> usize,
    hits: &mut Vec<(u32, u32)>,
) {
    let (mut p, mut k) = (0, 0);
    while p < probe_count && k < key_count {
        match probe(p).cmp(&key(k)) {
            Ordering::Less => {
                let target = key(k);
                p = gallop(p, probe_count, |i| probe(i) < target);
            }
            Ordering::Greater => k = search(k, probe(p)),
            Ordering::Equal => {
                // Only the probe moves on: a repeated probe finds the same key again.
                hits.push((p as u32, k as u32));
                p += 1;
            }
        }
    }
}

/// Like [`intersect_galloping`], for a batch with key fences (fence `j` is key
/// `j * KEY_FENCE`) much bigger than the probe run. First every probe finds its block among
/// the fences, which stay in cache; then each probe bisects its block. The bisections do not
/// depend on one another and do not branch on their comparisons, so the processor overlaps
/// their cache misses instead of waiting out one per probe in turn, as a galloping walk must.
#[inline]
fn intersect_fenced<K: Ord>(
    probe_count: usize,
    key_count: usize,
    probe: impl Fn(usize) -> K,
    key: impl Fn(usize) -> K,
    (fence_count, fence): (usize, impl Fn(usize) -> K),
    blocks: &mut Vec<u32>,
    hits: &mut Vec<(u32, u32)>,
) {
    blocks.clear();
    // Probes past the last key find nothing: the walk ends at the first of them.
    let Some(last) = key_count.checked_sub(1).map(&key) else {
        return;
    };
    let mut at_or_below = 0;
    for p in 0..probe_count {
        let target = probe(p);
        if target > last {
            break;
        }
        at_or_below = gallop(at_or_below, fence_count, |j| fence(j) <= target);
        blocks.push(at_or_below as u32);
    }
    for (p, &at_or_below) in blocks.iter().enumerate() {
        // No fence at or below: the probe is below the first key.
        let Some(block) = (at_or_below as usize).checked_sub(1) else {
            continue;
        };
        let target = probe(p);
        let (low, high) = (block * KEY_FENCE, ((block + 1) * KEY_FENCE).min(key_count));
        let found = bisect(low, high, |i| key(i) < target);
        if found < high && key(found) == target {
            hits.push((p as u32, found as u32));
        }
    }
}

/// The first index in `[start, end)` at which `before` is false (`end` if none), given that
/// it is true on a prefix of the range: halves the range a fixed number of times, each step a
/// select rather than a branch.
#[inline]
fn bisect(start: usize, end: usize, before: impl Fn(usize) -> bool) -> usize {
    if start >= end {
        return start;
    }
    // The answer is in [base, base + size].
    let (mut base, mut size) = (start, end - start);
    while size > 1 {
        let half = size / 2;
        let middle = base + half;
        base = std::hint::select_unpredictable(before(middle), middle, base);
        size -= half;
    }
    base + before(base) as usize
}

/// Like [`intersect_galloping`], walking both sorted sequences once. As in the galloping walk,
/// a repeated probe finds the same key again. Where keys outnumber probes at least twice, each
/// probe takes a block of keys at once ([`walk_dense`]); otherwise probe and key step in turn
/// ([`walk_dense_stepping`]), which spends fewer instructions when nearly every key is probed.
#[inline]
fn intersect_dense<K: Ord>(
    probe_count: usize,
    key_count: usize,
    probe: impl Fn(usize) -> K,
    key: impl Fn(usize) -> K,
    hits: &mut Vec<(u32, u32)>,
) {
    // Every probe matches at most one key: room for all of them, trimmed afterwards, lets the
    // loop write each pair unconditionally and count only the matches.
    let start = hits.len();
    hits.resize(start + probe_count, (0, 0));
    let out = &mut hits[start..];
    let found = if key_count < 2 * probe_count {
        walk_dense_stepping(probe_count, key_count, probe, key, out)
    } else {
        walk_dense(probe_count, key_count, probe, key, out)
    };
    hits.truncate(start + found);
}

/// Like [`walk_dense`], stepping either the probe or the key after each comparison.
#[inline]
fn walk_dense_stepping<K: Ord>(
    probe_count: usize,
    key_count: usize,
    probe: impl Fn(usize) -> K,
    key: impl Fn(usize) -> K,
    out: &mut [(u32, u32)],
) -> usize {
    assert!(out.len() >= probe_count, "room for every probe");
    let (mut p, mut k, mut found) = (0, 0, 0);
    while p < probe_count && k < key_count {
        let ordering = probe(p).cmp(&key(k));
        out[found] = (p as u32, k as u32);
        found += (ordering == Ordering::Equal) as usize;
        // On a match only the probe moves on: a repeated probe finds the same key again.
        // (Moving the key too when the next probe differs saved nothing measurable in bfs.)
        p += (ordering != Ordering::Greater) as usize;
        k += (ordering == Ordering::Greater) as usize;
    }
    found
}

/// How many keys [`walk_dense`] compares with a probe at once.
const DENSE_BLOCK: usize = 8;

/// The loop of [`intersect_dense`] where keys outnumber probes at least twice: writes the
/// `(probe, key)` pairs of matches to the front of `out` (room for every probe) and returns
/// their number.
///
/// A walk that steps either the probe or the key after each comparison makes every step wait
/// for the previous comparison: a chain of dependent loads, several per probe. Instead each
/// probe counts the keys below it in a block of [`DENSE_BLOCK`] keys from the current position
/// (after skipping whole blocks that lie below it): those comparisons do not depend on one
/// another, so a probe costs about one load-and-compare of latency however many keys it passes.
/// Keys are distinct, so the keys below a probe are a prefix of the block and their count is
/// the step to the first key at or after it. (With the reduce walking its big batches for
/// hundreds of thousands of keys per round, bfs took a few percent less time than stepping
/// through them; see docs/perf-notes.md, section "Batched lookups".)
#[inline]
fn walk_dense<K: Ord>(
    probe_count: usize,
    key_count: usize,
    probe: impl Fn(usize) -> K,
    key: impl Fn(usize) -> K,
    out: &mut [(u32, u32)],
) -> usize {
    assert!(out.len() >= probe_count, "room for every probe");
    let (mut k, mut found) = (0, 0);
    for p in 0..probe_count {
        let target = probe(p);
        while k + DENSE_BLOCK <= key_count && key(k + DENSE_BLOCK - 1) < target {
            k += DENSE_BLOCK;
        }
        let end = (k + DENSE_BLOCK).min(key_count);
        k += (k..end).map(|j| (key(j) < target) as usize).sum::<usize>();
        if k == key_count {
            // Every key is below this probe, and below every later one.
            break;
        }
        // `found <= p < probe_count`: in bounds. Written always, kept only on a match.
        out[found] = (p as u32, k as u32);
        found += (key(k) == target) as usize;
    }
    found
}

/// The second half of [`lookup`]: positions `cursor` at the next probe found (in probe order),
/// every batch that has it at that key, and returns the probe's index; `None` once all are
/// handed out. Read the key's values with the cursor's `get_val`, `map_times` and `step_val`.
pub fn next_hit<U: Update>(
    cursor: &mut TraceCursor<'_, U>,
    scratch: &mut LookupScratch,
) -> Option<usize> {
    let hit = next_hit_key(cursor, scratch);
    if hit.is_some() {
        cursor.find_least_val();
    }
    hit
}

/// How many hits ahead of the one it hands out [`next_hit_key`] prefetches a key's first
/// update in a big batch (in bfs on a big graph, prefetching a handful of hits ahead, or a
/// dozen, cut about a tenth of the time; see docs/perf-notes.md, section "Batched lookups").
/// The key's value and offsets are prefetched further ahead, in stages
/// [`PREFETCH_STAGE`] hits apart (see [`crate::cursor::BatchCursor::prefetch_key`]).
const PREFETCH_AHEAD: usize = 8;

/// Hits between the stages of one key's prefetch.
const PREFETCH_STAGE: usize = 4;

/// Like [`next_hit`], without ordering the key's values across batches: read them batch by
/// batch with the cursor's `map_key_updates`.
pub fn next_hit_key<U: Update>(
    cursor: &mut TraceCursor<'_, U>,
    scratch: &mut LookupScratch,
) -> Option<usize> {
    if let Some(present) = scratch.single.take() {
        // `start` already positioned the batches for the single probe.
        return present.then_some(0);
    }
    let batch_count = scratch.next.len();
    let mut least = u32::MAX;
    for (hits, &next) in scratch.hits[..batch_count].iter().zip(&scratch.next) {
        if next < hits.len() {
            least = least.min(hits[next].0);
        }
    }
    if least == u32::MAX {
        return None;
    }
    cursor.at_key.clear();
    for (batch, (hits, next)) in scratch.hits[..batch_count]
        .iter()
        .zip(scratch.next.iter_mut())
        .enumerate()
    {
        if *next < hits.len() {
            let (probe, key) = hits[*next];
            if probe == least {
                cursor.cursors[batch].set_key_index(key as usize);
                cursor.at_key.push(batch);
                *next += 1;
            }
        }
    }
    if scratch.prefetch {
        prefetch_ahead(cursor, scratch);
    }
    Some(least as usize)
}

/// In a big batch (one with key fences) the hits a few places ahead of those just handed out
/// are likely out of cache: starts loading them now, so that their reads, when their turn
/// comes, overlap with the work on this key instead of waiting in line. Small batches stay in
/// cache, and there a prefetch would only cost. Out of line, so that lookups into small
/// batches run the same code as without it.
#[inline(never)]
fn prefetch_ahead<U: Update>(cursor: &TraceCursor<'_, U>, scratch: &LookupScratch) {
    for &batch in &cursor.at_key {
        let (hits, next) = (&scratch.hits[batch], scratch.next[batch]);
        let batch_cursor = &cursor.cursors[batch];
        if batch_cursor.fence_count() == 0 || batch_cursor.stored().is_some() {
            continue;
        }
        for stage in 0..3 {
            let ahead = next + PREFETCH_AHEAD + (2 - stage) * PREFETCH_STAGE;
            if ahead < hits.len() {
                batch_cursor.prefetch_key(hits[ahead].1 as usize, stage);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        bisect, intersect_dense, intersect_fenced, intersect_galloping, walk_dense,
        walk_dense_stepping, KEY_FENCE,
    };
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bisect_finds_the_boundary(len in 0usize..100, boundary in 0usize..100, start in 0usize..100) {
            let (boundary, start) = (boundary.min(len), start.min(len));
            prop_assert_eq!(bisect(start, len, |i| i < boundary), boundary.max(start));
        }

        /// Every walk finds exactly the pairs of equal probes and keys, repeated probes
        /// included, whatever the density (keys fenced every `KEY_FENCE` for the fenced walk).
        #[test]
        fn walks_find_every_match(
            mut probes in proptest::collection::vec(0u32..64, 0..40),
            keys in proptest::collection::btree_set(0u32..64, 0..40),
            scale in prop_oneof![Just(1u32), Just(7), Just(97)],
        ) {
            // Spread out, the keys span several fences.
            let probes: Vec<u32> = { probes.sort(); probes.iter().map(|p| p * scale * 3 + p % 3).collect() };
            let keys: Vec<u32> = keys.iter().map(|k| k * scale * 3 + k % 3).collect();
            let fences: Vec<u32> = keys.iter().step_by(KEY_FENCE).copied().collect();
            let mut expected = Vec::new();
            for (p, probe) in probes.iter().enumerate() {
                if let Ok(k) = keys.binary_search(probe) {
                    expected.push((p as u32, k as u32));
                }
            }
            // Hits of earlier batches stay in front.
            let search = |from: usize, target: u32| from + keys[from..].partition_point(|k| *k < target);
            let mut galloping = vec![(7, 7)];
            intersect_galloping(probes.len(), keys.len(), |i| probes[i], |i| keys[i], search, &mut galloping);
            let mut dense = vec![(7, 7)];
            intersect_dense(probes.len(), keys.len(), |i| probes[i], |i| keys[i], &mut dense);
            let mut fenced = vec![(7, 7)];
            let fence = (fences.len(), |j: usize| fences[j]);
            intersect_fenced(probes.len(), keys.len(), |i| probes[i], |i| keys[i], fence, &mut Vec::new(), &mut fenced);
            for hits in [galloping, dense, fenced] {
                prop_assert_eq!(hits[0], (7, 7));
                prop_assert_eq!(&hits[1..], &expected[..]);
            }
            // Both dense walks, whichever `intersect_dense` picks for these counts.
            type Walk = fn(usize, usize, &dyn Fn(usize) -> u32, &dyn Fn(usize) -> u32, &mut [(u32, u32)]) -> usize;
            let walks: [Walk; 2] = [
                |p, k, probe, key, out| walk_dense(p, k, probe, key, out),
                |p, k, probe, key, out| walk_dense_stepping(p, k, probe, key, out),
            ];
            for walk in walks {
                let mut out = vec![(0, 0); probes.len()];
                let found = walk(probes.len(), keys.len(), &|i| probes[i], &|i| keys[i], &mut out);
                prop_assert_eq!(&out[..found], &expected[..]);
            }
        }

        /// The block walk on long key runs with sparse probes: whole blocks skipped, probes
        /// past the last key, keys past the last probe.
        #[test]
        fn block_walk_skips_runs(
            keys in proptest::collection::btree_set(0u32..2000, 0..300),
            probes in proptest::collection::vec(0u32..2100, 0..60),
        ) {
            let keys: Vec<u32> = keys.into_iter().collect();
            let mut probes = probes;
            probes.sort();
            let expected: Vec<(u32, u32)> = probes
                .iter()
                .enumerate()
                .filter_map(|(p, probe)| keys.binary_search(probe).ok().map(|k| (p as u32, k as u32)))
                .collect();
            let mut out = vec![(0, 0); probes.len()];
            let found = walk_dense(probes.len(), keys.len(), |i| probes[i], |i| keys[i], &mut out);
            prop_assert_eq!(&out[..found], &expected[..]);
        }
    }
}
