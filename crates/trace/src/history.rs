//! The `(time, diff)` histories of a batch, with the distinct pairs stored once.
//!
//! A batch's updates rarely have many distinct `(time, diff)` pairs: a batch covers an interval
//! of times, and after compaction often a single time, while diffs are mostly `+1` or `-1`. So
//! [`Histories`] keeps a dictionary of the distinct pairs and, per update, an index into it as
//! narrow as the dictionary allows: nothing when there is one pair, a `u8` up to 256 pairs, a
//! `u16` up to 65,536, a `u32` beyond. When the pairs are nearly all distinct the dictionary
//! would cost more than it saves, and the pairs are stored per update ("plain").
//!
//! Reads hand out the dictionary's `Ref` items, so they borrow like every other column.

use columnar::{Borrow, Clear, ContainerOf, Index, Len, Push, Ref};
use ripple_updates::{Semigroup, Time};
use rustc_hash::FxHashMap;

/// Which pair each update uses.
#[derive(Clone, Debug)]
enum PairIndex {
    /// Update `i` uses pair `i`.
    Plain,
    /// Every update uses pair 0.
    Single,
    Narrow8(Vec<u8>),
    Narrow16(Vec<u16>),
    Wide(Vec<u32>),
}

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

impl<T: Time, R: Semigroup> Histories<T, R> {
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
        match &self.index {
            PairIndex::Plain => update,
            PairIndex::Single => 0,
            PairIndex::Narrow8(index) => index[update] as usize,
            PairIndex::Narrow16(index) => index[update] as usize,
            PairIndex::Wide(index) => index[update] as usize,
        }
    }

    /// The time and diff of update `update`.
    #[inline(always)]
    pub fn get(&self, update: usize) -> (Ref<'_, T>, Ref<'_, R>) {
        let pair = self.pair(update);
        (self.times.borrow().get(pair), self.diffs.borrow().get(pair))
    }

    /// The number of distinct pairs stored (all updates when plain).
    pub fn stored_pairs(&self) -> usize {
        self.times.len()
    }

    /// Heap bytes held: the pairs' payload plus the index.
    pub fn heap_bytes(&self) -> usize {
        let pairs = crate::batch::payload_bytes::<T>(&self.times)
            + crate::batch::payload_bytes::<R>(&self.diffs);
        pairs
            + match &self.index {
                PairIndex::Plain | PairIndex::Single => 0,
                PairIndex::Narrow8(index) => index.capacity(),
                PairIndex::Narrow16(index) => index.capacity() * 2,
                PairIndex::Wide(index) => index.capacity() * 4,
            }
    }
}

/// Fills a [`Histories`], deciding the encoding as pairs arrive.
pub struct HistoriesBuilder<T: Time, R: Semigroup> {
    times: ContainerOf<T>,
    diffs: ContainerOf<R>,
    /// Per-update pair index, while a dictionary is kept.
    index: Vec<u32>,
    /// Pair to its index, while a dictionary is kept; `None` once plain.
    dictionary: Option<FxHashMap<(T, R), u32>>,
    /// The last pair pushed and its index: consecutive updates often share a pair, and this
    /// check spares them the hash lookup.
    last: Option<(T, R, u32)>,
    len: usize,
}

impl<T: Time, R: Semigroup> Default for HistoriesBuilder<T, R> {
    fn default() -> Self {
        Self {
            times: Default::default(),
            diffs: Default::default(),
            index: Vec::new(),
            dictionary: Some(FxHashMap::default()),
            last: None,
            len: 0,
        }
    }
}

/// Beyond this many updates, a dictionary holding more than half as many pairs as updates is
/// abandoned: it would save less than the index costs.
const PLAIN_CHECK_AFTER: usize = 1024;

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

    /// Appends one update's `(time, diff)`.
    #[inline]
    pub fn push(&mut self, time: &T, diff: &R) {
        self.len += 1;
        let Some(dictionary) = self.dictionary.as_mut() else {
            self.times.push(time);
            self.diffs.push(diff);
            return;
        };
        if let Some((last_time, last_diff, pair)) = &self.last {
            if last_time == time && last_diff == diff {
                self.index.push(*pair);
                return;
            }
        }
        let next = dictionary.len() as u32;
        let pair = *dictionary
            .entry((time.clone(), diff.clone()))
            .or_insert_with(|| {
                self.times.push(time);
                self.diffs.push(diff);
                next
            });
        self.index.push(pair);
        self.last = Some((time.clone(), diff.clone(), pair));
        if self.len >= PLAIN_CHECK_AFTER && dictionary.len() * 2 > self.len {
            self.go_plain();
        }
    }

    /// Replaces the dictionary by one pair per update.
    fn go_plain(&mut self) {
        let mut times = ContainerOf::<T>::default();
        let mut diffs = ContainerOf::<R>::default();
        {
            let (dict_times, dict_diffs) = (self.times.borrow(), self.diffs.borrow());
            for &pair in &self.index {
                times.push(dict_times.get(pair as usize));
                diffs.push(dict_diffs.get(pair as usize));
            }
        }
        self.times = times;
        self.diffs = diffs;
        self.index = Vec::new();
        self.dictionary = None;
        self.last = None;
    }

    /// The finished histories, with the narrowest index that fits and exact allocations. The
    /// builder is left empty, its buffers kept for the next batch.
    pub fn build(&mut self) -> Histories<T, R> {
        if self.dictionary.is_some() && self.times.len() * 2 > self.len && self.len > 1 {
            self.go_plain();
        }
        let pairs = self.times.len();
        let index = match self.dictionary {
            None => PairIndex::Plain,
            Some(_) if pairs <= 1 => PairIndex::Single,
            Some(_) if pairs <= 1 << 8 => {
                PairIndex::Narrow8(self.index.iter().map(|&i| i as u8).collect())
            }
            Some(_) if pairs <= 1 << 16 => {
                PairIndex::Narrow16(self.index.iter().map(|&i| i as u16).collect())
            }
            // `Vec::clone` allocates exactly the length.
            Some(_) => PairIndex::Wide(self.index.clone()),
        };
        let histories = Histories {
            times: crate::batch::exact_copy::<T>(&self.times),
            diffs: crate::batch::exact_copy::<R>(&self.diffs),
            index,
            len: self.len,
        };
        self.times.clear();
        self.diffs.clear();
        self.index.clear();
        match &mut self.dictionary {
            Some(dictionary) => dictionary.clear(),
            None => self.dictionary = Some(FxHashMap::default()),
        }
        self.last = None;
        self.len = 0;
        histories
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(pairs: &[(u64, i64)]) -> Histories<u64, i64> {
        let mut builder = HistoriesBuilder::<u64, i64>::default();
        for (time, diff) in pairs {
            builder.push(time, diff);
        }
        let histories = builder.build();
        assert_eq!(histories.len(), pairs.len());
        for (update, (time, diff)) in pairs.iter().enumerate() {
            let (t, r) = histories.get(update);
            assert_eq!((*t, *r), (*time, *diff), "update {update}");
        }
        histories
    }

    proptest! {
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
    }
}
