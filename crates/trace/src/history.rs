//! The `(time, diff)` histories of a batch, with the distinct pairs stored once.
//!
//! A batch's updates rarely have many distinct `(time, diff)` pairs: a batch covers an interval
//! of times, and after compaction often a single time, while diffs are mostly `+1` or `-1`. So
//! [`Histories`] keeps a dictionary of the distinct pairs and, per update, an index into it as
//! narrow as the dictionary allows: nothing when there is one pair, a `u8` up to 256 pairs, a
//! `u16` beyond. When the pairs are nearly all distinct, or so many that hashing them waits on
//! memory (more than 16,384 pairs), the dictionary would cost more than it saves, and the pairs
//! are stored per update ("plain").
//!
//! The hashing costs a few percent, and skipping it everywhere is not worth the memory: with
//! every batch plain, bfs on a big graph ran in the same time with about half again as much
//! peak resident memory. Small batches are another matter: a builder told to expect at most
//! 16,384 updates (a merge of small batches, a small sealed chain, a reduce's small output)
//! stores them per update from the start. Inside an iteration most merges are of that kind, of
//! the small batches of one outer step's rounds, which the next whole compaction rewrites
//! anyway; on a small graph that saved a few percent of bfs's instructions and time, while the
//! big batches of a big graph keep their dictionaries. See docs/perf-notes.md, section
//! "Histories: the (time, diff) dictionary".
//!
//! Reads hand out the dictionary's `Ref` items, so they borrow like every other column.

use crate::pair_index::{IndexBuilder, PairIndex};
use columnar::{Borrow, BorrowedOf, Clear, Container, ContainerOf, Index, Len, Push, Ref};
use ripple_updates::{Semigroup, Time};
use rustc_hash::FxHashMap;

/// The `(time, diff)` of each update of a batch.
pub struct Histories<T: Time, R: Semigroup> {
    times: ContainerOf<T>,
    diffs: ContainerOf<R>,
    index: PairIndex,
    len: usize,
}

impl<T: Time, R: Semigroup> Default for Histories<T, R> {
    fn default() -> Self {
        Self {
            times: Default::default(),
            diffs: Default::default(),
            index: PairIndex::Plain,
            len: 0,
        }
    }
}

/// Which pair each update uses, borrowed.
#[derive(Clone, Copy, Debug)]
enum PairIndexView<'a> {
    Plain,
    Single,
    Narrow8(&'a [u8]),
    Narrow16(&'a [u16]),
}

/// [`Histories`], borrowed: what cursors, merges and builders read, wherever the columns live.
pub struct HistoriesView<'a, T: Time, R: Semigroup> {
    times: BorrowedOf<'a, T>,
    diffs: BorrowedOf<'a, R>,
    index: PairIndexView<'a>,
    len: usize,
}

impl<T: Time, R: Semigroup> Clone for HistoriesView<'_, T, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Time, R: Semigroup> Copy for HistoriesView<'_, T, R> {}

/// A [`HistoriesView`] as columns, for a block's bytes: `[len, encoding]`, the pairs' times
/// and diffs, and the `u8` and `u16` pair indices (one of them empty, or both).
pub(crate) type HistoriesParts<'a, T, R> = (
    [u64; 2],
    BorrowedOf<'a, T>,
    BorrowedOf<'a, R>,
    &'a [u8],
    &'a [u16],
);

impl<'a, T: Time, R: Semigroup> HistoriesView<'a, T, R> {
    /// The view as columns (see [`HistoriesParts`]).
    pub(crate) fn parts(&self) -> HistoriesParts<'a, T, R> {
        let (encoding, narrow8, narrow16): (u64, &[u8], &[u16]) = match self.index {
            PairIndexView::Plain => (0, &[], &[]),
            PairIndexView::Single => (1, &[], &[]),
            PairIndexView::Narrow8(index) => (2, index, &[]),
            PairIndexView::Narrow16(index) => (3, &[], index),
        };
        let meta = [self.len as u64, encoding];
        (meta, self.times, self.diffs, narrow8, narrow16)
    }

    /// The view [`Self::parts`] made, checked so that no read of it can go out of bounds: the
    /// pairs match the encoding, and every index names a stored pair. Without `scan`, the
    /// indices are not read one by one (parts checked with a scan before, entered again).
    pub(crate) fn from_parts(
        meta: &[u64],
        times: BorrowedOf<'a, T>,
        diffs: BorrowedOf<'a, R>,
        narrow8: &'a [u8],
        narrow16: &'a [u16],
        scan: bool,
    ) -> Result<Self, String> {
        let [len, encoding] = meta else {
            return Err(format!(
                "histories: {} header words, expected 2",
                meta.len()
            ));
        };
        let len = usize::try_from(*len).map_err(|_| format!("histories: length {len}"))?;
        let pairs = times.len();
        if diffs.len() != pairs {
            return Err(format!(
                "histories: {pairs} times but {} diffs",
                diffs.len()
            ));
        }
        let indexed = |count: usize, within: bool| count == len && within;
        let index = match encoding {
            0 if pairs == len && narrow8.is_empty() && narrow16.is_empty() => PairIndexView::Plain,
            1 if pairs == usize::from(len > 0) && narrow8.is_empty() && narrow16.is_empty() => {
                PairIndexView::Single
            }
            2 if narrow16.is_empty()
                && indexed(
                    narrow8.len(),
                    !scan || narrow8.iter().all(|&p| usize::from(p) < pairs),
                ) =>
            {
                PairIndexView::Narrow8(narrow8)
            }
            3 if narrow8.is_empty()
                && indexed(
                    narrow16.len(),
                    !scan || narrow16.iter().all(|&p| usize::from(p) < pairs),
                ) =>
            {
                PairIndexView::Narrow16(narrow16)
            }
            _ => {
                return Err(format!(
                    "histories: encoding {encoding} of {len} updates does not match {pairs} pairs"
                ))
            }
        };
        Ok(Self {
            times,
            diffs,
            index,
            len,
        })
    }
}

impl<'a, T: Time, R: Semigroup> HistoriesView<'a, T, R> {
    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no updates.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn pair(&self, update: usize) -> usize {
        debug_assert!(update < self.len);
        match self.index {
            PairIndexView::Plain => update,
            PairIndexView::Single => 0,
            PairIndexView::Narrow8(index) => index[update] as usize,
            PairIndexView::Narrow16(index) => index[update] as usize,
        }
    }

    /// The time and diff of update `update`.
    #[inline(always)]
    pub fn get(&self, update: usize) -> (Ref<'a, T>, Ref<'a, R>) {
        let pair = self.pair(update);
        (self.times.get(pair), self.diffs.get(pair))
    }

    /// Calls `logic` with the time and diff of each update in `range`, in order. Equivalent to
    /// [`Self::get`] for each, with the encoding decided once for the range rather than once
    /// per update (merges and reduce read every update of a value this way).
    #[inline(always)]
    pub fn for_each_in(
        &self,
        range: std::ops::Range<usize>,
        mut logic: impl FnMut(Ref<'a, T>, Ref<'a, R>),
    ) {
        debug_assert!(range.end <= self.len);
        let (times, diffs) = (self.times, self.diffs);
        match self.index {
            PairIndexView::Plain => range.for_each(|u| logic(times.get(u), diffs.get(u))),
            PairIndexView::Single => {
                let (time, diff) = (times.get(0), diffs.get(0));
                range.for_each(|_| logic(time, diff));
            }
            PairIndexView::Narrow8(index) => index[range]
                .iter()
                .for_each(|&p| logic(times.get(p as usize), diffs.get(p as usize))),
            PairIndexView::Narrow16(index) => index[range]
                .iter()
                .for_each(|&p| logic(times.get(p as usize), diffs.get(p as usize))),
        }
    }

    /// Prefetches what reading update `update` will touch: its index entry, or its pair when
    /// plain (see `crate::columns::prefetch_item`).
    #[inline]
    pub(crate) fn prefetch(&self, update: usize) {
        use crate::columns::prefetch_item;
        match self.index {
            PairIndexView::Plain => {
                prefetch_item::<T>(self.times, update, self.len);
                prefetch_item::<R>(self.diffs, update, self.len);
            }
            PairIndexView::Single => {}
            PairIndexView::Narrow8(index) => prefetch_item::<u8>(index, update, self.len),
            PairIndexView::Narrow16(index) => prefetch_item::<u16>(index, update, self.len),
        }
    }
}

impl<T: Time, R: Semigroup> Histories<T, R> {
    /// The histories, borrowed.
    #[inline(always)]
    pub fn view(&self) -> HistoriesView<'_, T, R> {
        HistoriesView {
            times: self.times.borrow(),
            diffs: self.diffs.borrow(),
            index: match &self.index {
                PairIndex::Plain => PairIndexView::Plain,
                PairIndex::Single => PairIndexView::Single,
                PairIndex::Narrow8(index) => PairIndexView::Narrow8(index),
                PairIndex::Narrow16(index) => PairIndexView::Narrow16(index),
            },
            len: self.len,
        }
    }

    /// The number of updates.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no updates.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The time and diff of update `update`.
    #[inline(always)]
    pub fn get(&self, update: usize) -> (Ref<'_, T>, Ref<'_, R>) {
        self.view().get(update)
    }

    /// The number of distinct pairs stored (all updates when plain).
    pub fn stored_pairs(&self) -> usize {
        self.times.len()
    }

    /// These histories with each stored time replaced by `map(time)`, the diffs and the
    /// encoding kept: `None` if `map` returns `None` for some time. Only the stored pairs are
    /// mapped (each dictionary entry once), so whether the times stay in order within each
    /// value is for the caller to check.
    pub(crate) fn map_times(&self, mut map: impl FnMut(&T) -> Option<T>) -> Option<Self> {
        let stored = self.times.borrow();
        let mut times = <ContainerOf<T> as Container>::with_capacity_for(std::iter::once(stored));
        for pair in 0..stored.len() {
            times.push(&map(&T::into_owned(stored.get(pair)))?);
        }
        Some(Self {
            times,
            diffs: crate::columns::exact_copy::<R>(&self.diffs),
            index: self.index.clone(),
            len: self.len,
        })
    }

    /// Heap bytes held: the pairs' payload plus the index.
    pub fn heap_bytes(&self) -> usize {
        let pairs = crate::columns::payload_bytes::<T>(&self.times)
            + crate::columns::payload_bytes::<R>(&self.diffs);
        pairs
            + match &self.index {
                PairIndex::Plain | PairIndex::Single => 0,
                PairIndex::Narrow8(index) => index.capacity(),
                PairIndex::Narrow16(index) => index.capacity() * 2,
            }
    }
}

/// Fills a [`Histories`], deciding the encoding as pairs arrive.
///
/// A builder starts *small*: pairs are stored per update with no hashing (whether they are
/// all equal is checked at the build). Small batches are the ones built and merged all the
/// time at high resolution, and there a dictionary costs more in hashing than it saves in
/// bytes. At 256 updates (or at the build of a small batch of one repeated pair) the pairs
/// move into a dictionary, which a bigger batch keeps unless its pairs are mostly distinct:
/// judged on the first 256, then again from 1,024 on.
pub struct HistoriesBuilder<T: Time, R: Semigroup> {
    times: ContainerOf<T>,
    diffs: ContainerOf<R>,
    /// Per-update pair index, while a dictionary is kept.
    index: IndexBuilder,
    /// Pair to its index, while a dictionary is kept (emptied, its allocation kept, otherwise).
    dictionary: FxHashMap<(T, R), u32>,
    stage: Stage,
    /// The last pair pushed and its index, while a dictionary is kept: consecutive updates
    /// often share a pair, and this check spares them the hash lookup.
    last: Option<(T, R, u32)>,
    len: usize,
    /// Pair buffers kept for the next change of encoding, which swaps them in, so that a
    /// builder reused across small batches does not allocate for it; [`Self::reserve_small`]
    /// also holds its one-pair sample there. Whoever uses them clears them first.
    spare: (ContainerOf<T>, ContainerOf<R>),
    /// How many updates the caller expects at most (0: no idea). See [`Self::expect`].
    expected: usize,
    /// Pairs the plain buffers were given room for in one fresh allocation, when the
    /// expectation sized them (0 otherwise): [`Self::build`] then knows their slack.
    reserved: usize,
    /// Pairs the buffers are known to have room for (see [`Self::reserve_small`]); 0 once they
    /// are swapped or handed out.
    small_room: usize,
}

/// How a builder stores pairs at the moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Fewer than [`SMALL_MAX`] updates: per update, unhashed.
    Small,
    /// A dictionary of distinct pairs and a per-update index.
    Dictionary,
    /// Per update, for good: the dictionary did not pay, or the batch is expected small.
    Plain,
}

impl<T: Time, R: Semigroup> Default for HistoriesBuilder<T, R> {
    fn default() -> Self {
        Self {
            times: Default::default(),
            diffs: Default::default(),
            index: IndexBuilder::default(),
            dictionary: FxHashMap::default(),
            stage: Stage::Small,
            last: None,
            len: 0,
            spare: Default::default(),
            expected: 0,
            reserved: 0,
            small_room: 0,
        }
    }
}

/// Batches of fewer updates than this store their pairs per update (or once, when all are
/// equal) and never hash them.
const SMALL_MAX: usize = 256;

/// Batches announced to hold at most this many updates ([`HistoriesBuilder::expect`]) store
/// their pairs per update from the start: they are small, and inside an iteration mostly short
/// lived (merged again within the outer step), so what the dictionary saves is not worth its
/// hashing. See the module documentation for the measurements.
const PLAIN_EXPECTED_MAX: usize = 1 << 14;

/// [`HistoriesBuilder::extend_from`] copies column by column from this many updates on; fewer
/// are pushed one by one, which costs less than setting up the copies.
const BULK_MIN: usize = 4;

/// Plain buffers are sized by the expectation only beyond this many updates: below, the copy
/// into exact allocations is cheap and a builder's reused buffers serve better.
const SIZED_PLAIN_MIN: usize = 1 << 16;

/// Beyond this many updates, a dictionary holding more than half as many pairs as updates is
/// abandoned: it would save less than the index costs.
const PLAIN_CHECK_AFTER: usize = 1024;

/// A dictionary is abandoned once it holds more pairs than this, however many updates share
/// them. Its hash table then outgrows the processor's private caches and every lookup waits on
/// memory, which costs more than the bytes it saves. On a big graph, where merges of big
/// batches built dictionaries of hundreds of thousands of pairs, each lower limit down to this
/// one took a few percent off bfs's time for slightly more peak resident memory, and a lower
/// one changed nothing; see docs/perf-notes.md, section "Histories: dictionary size limit".
const DICTIONARY_PAIRS_MAX: usize = 1 << 14;

/// Turns `push`, which takes owned pairs, into a callback taking borrowed ones: each is copied
/// into one owned time and diff kept across calls (`copy_from`), so that pairs whose items own
/// memory do not allocate one by one.
fn owning<'s, T: Time, R: Semigroup>(
    mut push: impl FnMut(&T, &R),
) -> impl FnMut(Ref<'s, T>, Ref<'s, R>) {
    let (mut time, mut diff) = (None::<T>, None::<R>);
    move |t, d| {
        let time = time.get_or_insert_with(|| T::into_owned(t));
        time.copy_from(t);
        let diff = diff.get_or_insert_with(|| R::into_owned(d));
        diff.copy_from(d);
        push(time, diff);
    }
}

impl<T: Time, R: Semigroup> HistoriesBuilder<T, R> {
    /// The number of updates pushed.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Announces that the batch being built will hold at most about `updates` updates (the
    /// sum of a merge's inputs, the length of a sealed chain). Should the pairs go plain, their
    /// buffers are then allocated once at that size instead of growing by doubling, and a
    /// build that fills most of them hands them to the batch as they are instead of copying
    /// them into exact allocations: for big batches that copy, through fresh pages, cost more
    /// than the pages it saves.
    pub fn expect(&mut self, updates: usize) {
        self.expected = updates;
    }

    /// The expectation announced for the batch being built (0: none).
    pub fn expected(&self) -> usize {
        self.expected
    }

    /// Appends one update's `(time, diff)`.
    #[inline]
    pub fn push(&mut self, time: &T, diff: &R) {
        self.len += 1;
        match self.stage {
            Stage::Small => {
                if self.len == 1 && self.expected > 1 {
                    self.reserve_small(time, diff);
                }
                self.times.push(time);
                self.diffs.push(diff);
                if self.len == SMALL_MAX {
                    if self.expected_small() {
                        // The pairs are stored per update already.
                        self.stage = Stage::Plain;
                    } else {
                        self.start_dictionary();
                        // Pairs mostly distinct so far will likely stay so: stop hashing now.
                        if self.dictionary.len() * 2 > self.len {
                            self.go_plain();
                        }
                    }
                }
            }
            Stage::Dictionary => {
                self.push_to_dictionary(time, diff);
                let pairs = self.dictionary.len();
                if pairs > DICTIONARY_PAIRS_MAX
                    || (self.len >= PLAIN_CHECK_AFTER && pairs * 2 > self.len)
                {
                    self.go_plain();
                }
            }
            Stage::Plain => {
                self.times.push(time);
                self.diffs.push(diff);
            }
        }
    }

    /// Whether the caller announced a batch of at most [`PLAIN_EXPECTED_MAX`] updates.
    #[inline]
    fn expected_small(&self) -> bool {
        (1..=PLAIN_EXPECTED_MAX).contains(&self.expected)
    }

    /// Appends the updates `range` of `source`: the same as pushing each of them, with the
    /// pairs copied column by column where the builder stores them per update. Merges copy
    /// most values whole, and copying them in bulk (with the check for one repeated pair moved
    /// from every push to the build) took up to a couple of percent off bfs's instructions; see
    /// docs/perf-notes.md, section "Histories: bulk copies".
    pub fn extend_from(&mut self, source: &HistoriesView<'_, T, R>, range: std::ops::Range<usize>) {
        debug_assert!(range.end <= source.len());
        let count = range.len();
        let bulk = count >= BULK_MIN
            && match self.stage {
                // The first push sizes the small buffers, the 256th starts the dictionary.
                Stage::Small => self.len > 0 && self.len + count < SMALL_MAX,
                Stage::Plain => true,
                Stage::Dictionary => false,
            };
        if !bulk {
            source.for_each_in(range, owning(|time, diff| self.push(time, diff)));
            return;
        }
        let (times, diffs) = (source.times, source.diffs);
        match source.index {
            PairIndexView::Plain => {
                self.times.extend_from_self(times, range.clone());
                self.diffs.extend_from_self(diffs, range);
            }
            PairIndexView::Single => {
                for _ in range {
                    self.times.extend_from_self(times, 0..1);
                    self.diffs.extend_from_self(diffs, 0..1);
                }
            }
            PairIndexView::Narrow8(index) => {
                for &pair in &index[range] {
                    self.times.push(times.get(pair as usize));
                    self.diffs.push(diffs.get(pair as usize));
                }
            }
            PairIndexView::Narrow16(index) => {
                for &pair in &index[range] {
                    self.times.push(times.get(pair as usize));
                    self.diffs.push(diffs.get(pair as usize));
                }
            }
        }
        self.len += count;
    }

    /// Appends the updates `range` of `source` with each time passed through `map` first: the
    /// same as pushing each mapped pair. The caller vouches that the mapped times of each value
    /// stay sorted and distinct (merges use it for values of a single update, whose times
    /// advance).
    pub fn extend_mapped(
        &mut self,
        source: &HistoriesView<'_, T, R>,
        range: std::ops::Range<usize>,
        mut map: impl FnMut(&mut T),
    ) {
        let mut mapped: Option<T> = None;
        source.for_each_in(
            range,
            owning(|time: &T, diff: &R| {
                let mapped = match &mut mapped {
                    Some(mapped) => {
                        mapped.clone_from(time);
                        mapped
                    }
                    None => mapped.insert(time.clone()),
                };
                map(mapped);
                self.push(mapped, diff);
            }),
        );
    }

    /// Whether every pair stored per update (small stage) equals the first.
    fn is_uniform(&self) -> bool {
        debug_assert_eq!(self.stage, Stage::Small);
        let (times, diffs) = (self.times.borrow(), self.diffs.borrow());
        let first_diff = R::into_owned(diffs.get(0));
        (1..self.len).all(|update| {
            times.get(update) == times.get(0) && R::into_owned(diffs.get(update)) == first_diff
        })
    }

    /// Gives the small stage's buffers room for the expected updates (at most
    /// [`SMALL_MAX`]) at once: a builder that starts empty, as after a big batch, otherwise
    /// grows them by doubling, a copy at every step.
    #[cold]
    fn reserve_small(&mut self, time: &T, diff: &R) {
        let room = self.expected.min(SMALL_MAX);
        // A builder reused across small batches mostly has the room already: reserving it
        // again cost a sample's allocations at every batch (about a percent of bfs's
        // instructions at one update per step; see docs/perf-notes.md, section "Histories:
        // small buffers").
        if self.small_room >= room {
            return;
        }
        // Columnar containers reserve room for copies of a container: the first pair, in the
        // spare buffers (which only the changes of encoding use, emptied first).
        let (one_time, one_diff) = &mut self.spare;
        one_time.clear();
        one_diff.clear();
        one_time.push(time);
        one_diff.push(diff);
        self.times
            .reserve_for(std::iter::repeat_n(one_time.borrow(), room));
        self.diffs
            .reserve_for(std::iter::repeat_n(one_diff.borrow(), room));
        self.small_room = room;
    }

    #[inline]
    fn push_to_dictionary(&mut self, time: &T, diff: &R) {
        if let Some((last_time, last_diff, pair)) = &self.last {
            if last_time == time && last_diff == diff {
                self.index.push(*pair);
                return;
            }
        }
        let next = self.dictionary.len() as u32;
        let pair = *self
            .dictionary
            .entry((time.clone(), diff.clone()))
            .or_insert_with(|| {
                self.times.push(time);
                self.diffs.push(diff);
                next
            });
        self.index.push(pair);
        self.last = Some((time.clone(), diff.clone(), pair));
    }

    /// Moves the pairs stored per update (small stage) into a dictionary.
    fn start_dictionary(&mut self) {
        debug_assert_eq!(self.stage, Stage::Small);
        let (mut times, mut diffs) = std::mem::take(&mut self.spare);
        times.clear();
        diffs.clear();
        std::mem::swap(&mut self.times, &mut times);
        std::mem::swap(&mut self.diffs, &mut diffs);
        self.small_room = 0;
        self.index.restart(self.expected);
        self.dictionary.clear();
        self.last = None;
        self.stage = Stage::Dictionary;
        {
            let (plain_times, plain_diffs) = (times.borrow(), diffs.borrow());
            let mut push = owning(|time, diff| self.push_to_dictionary(time, diff));
            for update in 0..plain_times.len() {
                push(plain_times.get(update), plain_diffs.get(update));
            }
        }
        self.spare = (times, diffs);
    }

    /// Replaces the dictionary by one pair per update.
    fn go_plain(&mut self) {
        debug_assert_eq!(self.stage, Stage::Dictionary);
        let (times, diffs) = &mut self.spare;
        times.clear();
        diffs.clear();
        if self.expected > self.len {
            // Room for the expected updates at once, so the buffers do not double their way
            // there (a copy at every step). Columnar containers reserve room for copies of a
            // container: the dictionary's pairs, `copies` times.
            let copies = self.expected.div_ceil(self.times.len().max(1));
            if self.expected > SIZED_PLAIN_MIN {
                // Fresh buffers, so their capacity is what is reserved here (`build` may hand
                // them to the batch as they are).
                *times = Default::default();
                *diffs = Default::default();
                self.reserved = copies * self.times.len();
            }
            times.reserve_for(std::iter::repeat_n(self.times.borrow(), copies));
            diffs.reserve_for(std::iter::repeat_n(self.diffs.borrow(), copies));
        }
        {
            let (dict_times, dict_diffs) = (self.times.borrow(), self.diffs.borrow());
            self.index.for_each(|pair| {
                times.push(dict_times.get(pair));
                diffs.push(dict_diffs.get(pair));
            });
        }
        std::mem::swap(&mut self.times, times);
        std::mem::swap(&mut self.diffs, diffs);
        self.small_room = 0;
        self.index.restart(0);
        self.dictionary.clear();
        self.stage = Stage::Plain;
        self.last = None;
    }

    /// The finished histories, with the narrowest index that fits and exact allocations. The
    /// builder is left empty, its buffers kept for the next batch.
    pub fn build(&mut self) -> Histories<T, R> {
        match self.stage {
            // One repeated pair: a dictionary of one, found without hashing past the first.
            Stage::Small if self.len > 1 && self.is_uniform() => self.start_dictionary(),
            Stage::Dictionary if self.times.len() * 2 > self.len && self.len > 1 => self.go_plain(),
            _ => {}
        }
        let pairs = self.times.len();
        let index = match self.stage {
            Stage::Small | Stage::Plain => PairIndex::Plain,
            Stage::Dictionary => {
                // `push` abandons bigger dictionaries, so every index fits in 16 bits.
                const { assert!(DICTIONARY_PAIRS_MAX <= 1 << 16) };
                assert!(pairs <= DICTIONARY_PAIRS_MAX, "dictionary of {pairs} pairs");
                assert_eq!(self.index.len(), self.len, "an index entry per update");
                // As narrow as the pairs allow: none for one pair, bytes up to 256.
                self.index.finish(pairs)
            }
        };
        // Sized plain buffers that are mostly full go to the batch as they are (room for at
        // most a quarter more than they hold); anything else is copied into exact allocations.
        let sized = self.stage == Stage::Plain
            && self.reserved > 0
            && self.len <= self.reserved
            && self.len * 5 >= self.reserved * 4;
        let (times, diffs) = if sized {
            // Only `go_plain` sizes buffers, and it swapped the small ones out.
            debug_assert_eq!(self.small_room, 0);
            (
                std::mem::take(&mut self.times),
                std::mem::take(&mut self.diffs),
            )
        } else {
            (
                crate::columns::exact_copy::<T>(&self.times),
                crate::columns::exact_copy::<R>(&self.diffs),
            )
        };
        let histories = Histories {
            times,
            diffs,
            index,
            len: self.len,
        };
        self.expected = 0;
        self.reserved = 0;
        self.times.clear();
        self.diffs.clear();
        self.index.restart(0);
        self.dictionary.clear();
        self.stage = Stage::Small;
        self.last = None;
        self.len = 0;
        histories
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pushes `pairs` into `builder`, builds, and checks that the histories read back as
    /// pushed.
    fn build_and_check(
        builder: &mut HistoriesBuilder<u64, i64>,
        pairs: &[(u64, i64)],
    ) -> Histories<u64, i64> {
        for (time, diff) in pairs {
            builder.push(time, diff);
        }
        let histories = builder.build();
        assert_eq!(histories.len(), pairs.len());
        for (update, (time, diff)) in pairs.iter().enumerate() {
            let (t, r) = histories.get(update);
            assert_eq!((*t, *r), (*time, *diff), "update {update}");
        }
        // Ranges read in one pass agree with reading update by update, whatever the encoding.
        let len = pairs.len();
        for range in [
            0..len,
            0..len / 2,
            len / 3..len,
            len / 4..len / 4 + len.min(7) / 2,
        ] {
            let mut read = Vec::new();
            histories
                .view()
                .for_each_in(range.clone(), |t, r| read.push((*t, *r)));
            assert_eq!(read, pairs[range]);
        }
        histories
    }

    fn round_trip(pairs: &[(u64, i64)]) -> Histories<u64, i64> {
        build_and_check(&mut HistoriesBuilder::default(), pairs)
    }

    proptest! {
        /// One builder reused across batches of every stage (small, dictionary, plain, in any
        /// order) builds each as pushed, with or without an expectation (under, at or over
        /// the updates pushed: the buffers it sizes hold whatever comes).
        #[test]
        fn a_reused_builder_round_trips_every_batch(
            batches in proptest::collection::vec(
                (0usize..1500, 1u64..2000, prop_oneof![Just(1i64), Just(3)], 0usize..4),
                1..6,
            )
        ) {
            let mut builder = HistoriesBuilder::<u64, i64>::default();
            for (len, distinct, diffs, expectation) in batches {
                let pairs: Vec<_> = (0..len as u64)
                    .map(|i| ((i * 7919) % distinct, (i % diffs as u64) as i64 - 1))
                    .collect();
                match expectation {
                    1 => builder.expect(len / 2),
                    2 => builder.expect(len),
                    3 => builder.expect(len * 3),
                    _ => {}
                }
                build_and_check(&mut builder, &pairs);
            }
        }

        #[test]
        fn every_encoding_round_trips(
            pairs in proptest::collection::vec((0u64..3, -1i64..2), 0..200),
            spread in prop_oneof![Just(1u64), Just(100), Just(1 << 20)],
        ) {
            let pairs: Vec<_> = pairs
                .iter()
                .enumerate()
                .map(|(i, (t, r))| (t * spread + (i as u64 % spread.min(300)), *r))
                .collect();
            round_trip(&pairs);
        }
    }

    proptest! {
        /// Copying ranges of built histories of every encoding (plain, single, one-byte
        /// dictionary) into a builder, reused across two batches and at every stage (small,
        /// dictionary, plain; with or without an expectation), builds the same as pushing their
        /// pairs one by one.
        #[test]
        fn extending_from_ranges_is_pushing_them(
            sources in proptest::collection::vec(
                (0usize..700, prop_oneof![Just(1u64), Just(40), Just(1 << 20)], 1i64..3),
                1..4,
            ),
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec((0usize..3, 0usize..700, 0usize..300), 0..12),
                    0usize..3,
                ),
                1..3,
            ),
        ) {
            let built: Vec<_> = sources
                .iter()
                .map(|&(len, distinct, diffs)| {
                    let pairs: Vec<_> = (0..len as u64)
                        .map(|i| ((i * 7919) % distinct, 1 - 2 * (i as i64 % diffs)))
                        .collect();
                    let histories = round_trip(&pairs);
                    if distinct == 1 && diffs == 1 && len > 1 {
                        assert!(matches!(histories.index, PairIndex::Single));
                    }
                    if distinct == 40 && len >= SMALL_MAX {
                        assert!(matches!(histories.index, PairIndex::Narrow8(_)));
                    }
                    (histories, pairs)
                })
                .collect();
            let mut builder = HistoriesBuilder::<u64, i64>::default();
            for (copies, expectation) in batches {
                let mut expected = Vec::new();
                for &(source, start, count) in &copies {
                    let pairs = &built[source % built.len()].1;
                    let start = start.min(pairs.len());
                    expected.extend_from_slice(&pairs[start..(start + count).min(pairs.len())]);
                }
                builder.expect(expected.len() * expectation);
                for (source, start, count) in copies {
                    let (histories, pairs) = &built[source % built.len()];
                    let start = start.min(pairs.len());
                    builder.extend_from(&histories.view(), start..(start + count).min(pairs.len()));
                }
                // Pushed one by one under the same expectation, which picks the encoding.
                let mut pushing = HistoriesBuilder::default();
                pushing.expect(expected.len() * expectation);
                let reference = build_and_check(&mut pushing, &expected);
                let extended = builder.build();
                prop_assert_eq!(extended.len(), expected.len());
                prop_assert_eq!(extended.stored_pairs(), reference.stored_pairs());
                for (update, (time, diff)) in expected.iter().enumerate() {
                    let (t, r) = extended.get(update);
                    prop_assert_eq!((*t, *r), (*time, *diff), "update {}", update);
                }
            }
        }
    }

    /// Pairs that a dictionary would store once are stored per update when the builder was
    /// told to expect a small batch, and in a dictionary when it was told nothing or to expect
    /// a big one.
    #[test]
    fn small_expected_batches_skip_the_dictionary() {
        let pairs: Vec<(u64, i64)> = (0..2 * SMALL_MAX as u64).map(|i| (i % 4, 1)).collect();
        let mut builder = HistoriesBuilder::<u64, i64>::default();
        for (expected, plain) in [
            (0, false),
            (pairs.len(), true),
            (PLAIN_EXPECTED_MAX, true),
            (PLAIN_EXPECTED_MAX + 1, false),
            (0, false),
        ] {
            builder.expect(expected);
            let histories = build_and_check(&mut builder, &pairs);
            assert_eq!(
                matches!(histories.index, PairIndex::Plain),
                plain,
                "expected {expected}"
            );
            assert_eq!(
                histories.stored_pairs(),
                if plain { pairs.len() } else { 4 }
            );
        }
    }

    /// Builds with an expectation: plain pairs that fill most of the sized buffers keep them
    /// (room for at most a quarter more), anything else is copied exactly; every batch reads
    /// back as pushed, and the builder goes on without an expectation afterwards.
    #[test]
    fn expected_sizes_bound_the_slack() {
        let mut builder = HistoriesBuilder::<u64, i64>::default();
        // (expected, pushed, whether the sized buffers are kept)
        for (expected, pushed, kept) in [
            (100_000, 100_000, true),
            (100_000, 85_000, true),
            (100_000, 70_000, false),
            (100_000, 130_000, false),
            (0, 100_000, false),
            (100_000, 1_000, false),
        ] {
            builder.expect(expected);
            let pairs: Vec<(u64, i64)> = (0..pushed)
                .map(|i| (i * 3, 1 - 2 * (i as i64 % 2)))
                .collect();
            let histories = build_and_check(&mut builder, &pairs);
            let (len, capacity) = (histories.times.len(), histories.times.capacity());
            assert_eq!(len, pushed as usize, "distinct pairs are stored plain");
            if kept {
                assert!(
                    capacity >= expected && capacity * 4 <= len * 5,
                    "{capacity} for {len}"
                );
            } else {
                assert_eq!(capacity, len, "copied exactly");
            }
            assert_eq!(histories.diffs.capacity(), capacity);
        }
    }

    #[test]
    fn encodings_are_chosen_by_distinct_pairs() {
        let single = round_trip(&vec![(5, 1); 1000]);
        assert_eq!(single.stored_pairs(), 1);
        assert_eq!(single.heap_bytes(), 16);
        let few: Vec<_> = (0..5000).map(|i| (i % 100, 1)).collect();
        let few = round_trip(&few);
        assert_eq!(few.stored_pairs(), 100);
        assert_eq!(few.heap_bytes(), 100 * 16 + 5000);
        let many: Vec<_> = (0..5000).map(|i| (i * 7, 1)).collect();
        let many = round_trip(&many);
        assert_eq!(many.stored_pairs(), 5000);
        assert_eq!(many.heap_bytes(), 5000 * 16);
        // Small batches are not hashed: one repeated pair is stored once, anything else per
        // update.
        let small_single = round_trip(&[(5, 1); 100]);
        assert_eq!(small_single.stored_pairs(), 1);
        let small_two: Vec<_> = (0..100).map(|i| (5, 1 - 2 * (i % 2))).collect();
        assert_eq!(round_trip(&small_two).stored_pairs(), 100);
        // A dictionary is kept up to `DICTIONARY_PAIRS_MAX` pairs however many updates share
        // them, and abandoned beyond: each pair used eight times, one eighth distinct.
        let shared =
            |pairs: u64| -> Vec<(u64, i64)> { (0..pairs * 8).map(|i| (i / 8, 1)).collect() };
        let at_most = round_trip(&shared(DICTIONARY_PAIRS_MAX as u64));
        assert_eq!(at_most.stored_pairs(), DICTIONARY_PAIRS_MAX);
        let beyond = round_trip(&shared(DICTIONARY_PAIRS_MAX as u64 + 1));
        assert_eq!(beyond.stored_pairs(), beyond.len());
    }
}
