//! The times a reduce defers: `(key, time)` entries at or beyond an interval's upper bound
//! that will need examining once a later interval reaches them.
//!
//! They are one list sorted by key (each key's times sorted and distinct), which each
//! activation rewrites in a single pass beside its walk over the keys it visits, in key order:
//! entries of keys it does not visit carry over as they are, and a visited key's entries still
//! beyond `upper` are written back together with those its visit defers. Every key with a due
//! entry is visited, so the entries a walk skips are never due.
//!
//! The list is held in blocks of a fixed size, and the walk gives each block of the old list
//! back (for the new list to reuse) as soon as it has read past it. Inside an iteration over
//! big steps on a big graph, over half the keys can hold a deferred time: as two whole lists
//! grown by doubling, the old one and the one being written, they were the largest item of a
//! bfs run's peak heap under a memory budget; in blocks, the list is held about once (see
//! docs/perf-notes.md, section "Storage: the peak under a budget").

use ripple_updates::search::gallop;
use ripple_updates::{Antichain, Time};

/// The most bytes of a block of entries (whose count is a power of two): small beside a
/// reduce's other state, large enough that moving from block to block is rare. Tiny in unit
/// tests, so that walks cross blocks.
const BLOCK_BYTES: usize = if cfg!(test) { 64 } else { 256 << 10 };

/// How many emptied blocks a walk keeps for the new list to fill; any more are let go, so
/// that a list that shrinks gives its memory back as it is rewritten. One is kept between
/// walks: a list that once was long keeps up to two blocks' room.
const SPARE_BLOCKS_MAX: usize = 4;

/// The deferred `(key, time)` entries of a reduce, and the walk that rewrites them.
pub(super) struct DeferredTimes<K, T> {
    /// Sorted by key, then time; no entry twice. Every block holds at least one entry, but
    /// those a walk has read to their end (before `front`), which it empties.
    current: Vec<Vec<(K, T)>>,
    /// The list a walk writes, in the same order, to replace `current` when it ends: every
    /// block full but the last.
    next: Vec<Vec<(K, T)>>,
    /// The block of `current` the walk is reading, and how far it has read it.
    front: usize,
    read: usize,
    /// Emptied blocks, for `next`.
    spare: Vec<Vec<(K, T)>>,
}

impl<K, T> Default for DeferredTimes<K, T> {
    fn default() -> Self {
        Self {
            current: Vec::new(),
            next: Vec::new(),
            front: 0,
            read: 0,
            spare: Vec::new(),
        }
    }
}

impl<K: Ord + Clone, T: Time> DeferredTimes<K, T> {
    /// Entries per block: a power of two, so that a block grown by doubling ends full.
    fn block_len() -> usize {
        let fitting = (BLOCK_BYTES / std::mem::size_of::<(K, T)>().max(1)).max(1);
        1 << fitting.ilog2()
    }

    /// Every entry not yet read, in order: outside walks, every entry; during a walk, those
    /// of the keys after the last one it took.
    pub(super) fn unread(&self) -> impl Iterator<Item = &(K, T)> {
        let unread = self
            .current
            .get(self.front)
            .map_or(&[][..], |block| &block[self.read..]);
        unread
            .iter()
            .chain(self.current.iter().skip(self.front + 1).flatten())
    }

    /// The keys of the entries inside the interval ending at `upper` (in order, repeated for
    /// each of their due times).
    #[cfg(test)]
    fn due_keys<'s>(&'s self, upper: &'s Antichain<T>) -> impl Iterator<Item = K> + 's {
        self.unread()
            .filter(|(_, time)| !upper.less_equal(time))
            .map(|(key, _)| key.clone())
    }

    /// Starts a walk over the keys to visit.
    pub(super) fn begin(&mut self) {
        debug_assert!(
            self.next.is_empty(),
            "a walk began before the last one finished"
        );
        self.front = 0;
        self.read = 0;
    }

    /// Takes `key`'s entries: the times inside the interval go to `due`, the others to `later`
    /// (both cleared first), and returns how many went to `later`. Keys must come in increasing
    /// order; the entries of keys skipped since the previous one carry over.
    pub(super) fn take_key(
        &mut self,
        key: &K,
        upper: &Antichain<T>,
        due: &mut Vec<T>,
        later: &mut Vec<T>,
    ) -> usize {
        due.clear();
        later.clear();
        // Visited keys are dense among the deferred ones, so the run of skipped keys is usually
        // empty or short: a gallop from the front finds its end.
        while let Some(block) = self.current.get(self.front) {
            let skipped = gallop(self.read, block.len(), |index| block[index].0 < *key);
            for entry in &block[self.read..skipped] {
                push_entry(&mut self.next, &mut self.spare, entry.clone());
            }
            self.read = skipped;
            if skipped < block.len() {
                break;
            }
            self.retire_front();
        }
        while let Some(block) = self.current.get(self.front) {
            while let Some((_, time)) = block.get(self.read).filter(|(other, _)| other == key) {
                if upper.less_equal(time) {
                    later.push(time.clone());
                } else {
                    due.push(time.clone());
                }
                self.read += 1;
            }
            if self.read < block.len() {
                break;
            }
            self.retire_front();
        }
        later.len()
    }

    /// Writes `key`'s times still deferred after its visit: `later` holds the `carried` times
    /// [`Self::take_key`] gave it, then those the visit deferred (sorted and deduplicated here
    /// when there are any).
    pub(super) fn defer(&mut self, key: &K, later: &mut Vec<T>, carried: usize) {
        if later.len() > carried {
            later.sort_unstable();
            later.dedup();
        }
        for time in later.iter() {
            push_entry(&mut self.next, &mut self.spare, (key.clone(), time.clone()));
        }
    }

    /// Ends the walk: the entries after the last visited key carry over, and the rewritten
    /// list replaces the old one.
    pub(super) fn finish(&mut self, upper: &Antichain<T>) {
        while let Some(block) = self.current.get(self.front) {
            debug_assert!(
                block[self.read..]
                    .iter()
                    .all(|(_, time)| upper.less_equal(time)),
                "a key with a due deferred time was not visited"
            );
            for entry in &block[self.read..] {
                push_entry(&mut self.next, &mut self.spare, entry.clone());
            }
            self.retire_front();
        }
        self.current.clear();
        std::mem::swap(&mut self.current, &mut self.next);
        (self.front, self.read) = (0, 0);
        self.spare.truncate(1);
    }

    /// The least deferred times: the times the operator must keep capabilities for.
    pub(super) fn pending(&self) -> Antichain<T> {
        let mut pending = Antichain::new();
        for (_, time) in self.unread() {
            pending.insert(time.clone());
        }
        pending
    }

    /// Heap bytes of the blocks, read, written and spare.
    pub(super) fn heap_bytes(&self) -> usize {
        let blocks = self.current.iter().chain(&self.next).chain(&self.spare);
        let entries: usize = blocks.map(Vec::capacity).sum();
        let lists = self.current.capacity() + self.next.capacity() + self.spare.capacity();
        entries * std::mem::size_of::<(K, T)>() + lists * std::mem::size_of::<Vec<(K, T)>>()
    }

    /// Lets the block the walk has read to its end go, keeping it for `next` if few are kept.
    fn retire_front(&mut self) {
        let mut block = std::mem::take(&mut self.current[self.front]);
        if self.spare.len() < SPARE_BLOCKS_MAX {
            block.clear();
            self.spare.push(block);
        }
        self.front += 1;
        self.read = 0;
    }
}

/// Appends `entry` to `list`, starting a block (an emptied one from `spare` if there is one)
/// when the last is full. A new block grows by doubling, so a list that was never long stays
/// small.
fn push_entry<K, T>(list: &mut Vec<Vec<(K, T)>>, spare: &mut Vec<Vec<(K, T)>>, entry: (K, T))
where
    K: Ord + Clone,
    T: Time,
{
    let block_len = DeferredTimes::<K, T>::block_len();
    match list.last_mut() {
        Some(block) if block.len() < block_len => block.push(entry),
        _ => {
            let mut block = spare.pop().unwrap_or_default();
            block.push(entry);
            list.push(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DeferredTimes;
    use proptest::prelude::*;
    use ripple_updates::{Antichain, Product};
    use std::collections::BTreeSet;

    type Time = Product<u64, u32>;

    fn time(outer: u64, round: u32) -> Time {
        Product::new(outer, round)
    }

    /// A walk that visits some keys carries the others over, splits a visited key's times at
    /// `upper`, adds what its visit defers (sorted, once), and leaves the list sorted.
    #[test]
    fn a_walk_rewrites_the_list_in_order() {
        let mut deferred = DeferredTimes::<u64, Time>::default();
        let upper = Antichain::from_elem(time(1, 0));
        deferred.begin();
        let (mut due, mut later) = (Vec::new(), Vec::new());
        for key in [1, 5] {
            let carried = deferred.take_key(&key, &upper, &mut due, &mut later);
            assert_eq!((due.len(), carried), (0, 0));
            later.extend([time(2, 1), time(1, 3), time(2, 1)]);
            deferred.defer(&key, &mut later, carried);
        }
        deferred.finish(&upper);
        // (1, 3) and (2, 1) are incomparable: both are least.
        let mut least = Antichain::new();
        least.insert(time(1, 3));
        least.insert(time(2, 1));
        assert_eq!(deferred.pending(), least);
        assert_eq!(deferred.due_keys(&upper).count(), 0);

        // The next interval reaches (1, 3) but not (2, 1): key 1 is visited, key 5 is not.
        let upper = Antichain::from_elem(time(2, 0));
        assert_eq!(deferred.due_keys(&upper).collect::<Vec<_>>(), vec![1, 5]);
        deferred.begin();
        let carried = deferred.take_key(&1, &upper, &mut due, &mut later);
        assert_eq!(
            (due.clone(), later.clone()),
            (vec![time(1, 3)], vec![time(2, 1)])
        );
        later.push(time(3, 0));
        deferred.defer(&1, &mut later, carried);
        // Key 5's entries are due too; a walk that skipped them would trip the debug check, so
        // visit it with nothing to add.
        let carried = deferred.take_key(&5, &upper, &mut due, &mut later);
        deferred.defer(&5, &mut later, carried);
        deferred.finish(&upper);
        assert_eq!(
            deferred.unread().cloned().collect::<Vec<_>>(),
            vec![(1, time(2, 1)), (1, time(3, 0)), (5, time(2, 1))]
        );
    }

    proptest! {
        /// Walks over random keys against a set of entries: each visited key gets its due and
        /// later times, writes back its later ones and new ones, and the list after each walk
        /// is the model's, whatever the blocks it crosses (four entries a block here).
        #[test]
        fn walks_agree_with_a_set(rounds in proptest::collection::vec(
            (
                proptest::collection::btree_set(0u64..40, 0..20),
                proptest::collection::vec((0u64..40, 1u64..6), 0..30),
            ),
            1..8,
        )) {
            let mut deferred = DeferredTimes::<u64, u64>::default();
            let mut model = BTreeSet::<(u64, u64)>::new();
            let (mut due, mut later) = (Vec::new(), Vec::new());
            for (round, (extra_keys, new_entries)) in rounds.iter().enumerate() {
                let round = round as u64;
                let upper = Antichain::from_elem(round + 1);
                // Keys with a due entry must be visited; others may be.
                let mut visit: BTreeSet<u64> = deferred.due_keys(&upper).collect();
                let model_due: BTreeSet<u64> = model.iter().filter(|(_, t)| *t <= round).map(|(k, _)| *k).collect();
                prop_assert_eq!(&visit, &model_due);
                visit.extend(extra_keys.iter().copied());
                deferred.begin();
                for key in &visit {
                    let carried = deferred.take_key(key, &upper, &mut due, &mut later);
                    let expected: Vec<u64> = model.range((*key, 0)..=(*key, u64::MAX)).map(|(_, t)| *t).collect();
                    let (expected_due, expected_later): (Vec<u64>, Vec<u64>) = expected.iter().partition(|t| **t <= round);
                    prop_assert_eq!(&due, &expected_due);
                    prop_assert_eq!(&later, &expected_later);
                    prop_assert_eq!(carried, later.len());
                    model.retain(|(k, t)| k != key || *t > round);
                    for (_, offset) in new_entries.iter().filter(|(k, _)| k == key) {
                        later.push(round + offset);
                        model.insert((*key, round + offset));
                    }
                    deferred.defer(key, &mut later, carried);
                }
                deferred.finish(&upper);
                let entries: Vec<(u64, u64)> = deferred.unread().cloned().collect();
                prop_assert_eq!(entries, model.iter().cloned().collect::<Vec<_>>());
                prop_assert!(deferred.current.iter().all(|block| !block.is_empty()));
                // What the storage tier is told is held: the lists of blocks, and blocks
                // that hold at least the entries and at most one block's room more than they
                // need (the spare one a walk keeps).
                let size = std::mem::size_of::<(u64, u64)>();
                let block_len = DeferredTimes::<u64, u64>::block_len();
                let lists = deferred.current.capacity() + deferred.next.capacity()
                    + deferred.spare.capacity();
                let blocks_bytes =
                    deferred.heap_bytes() - lists * std::mem::size_of::<Vec<(u64, u64)>>();
                prop_assert!(blocks_bytes >= model.len() * size);
                let room = (model.len().div_ceil(block_len) + 1) * block_len * size;
                prop_assert!(
                    blocks_bytes <= room,
                    "{} bytes for {} entries",
                    blocks_bytes,
                    model.len()
                );
            }
        }
    }
}
