//! The times a reduce defers: `(key, time)` entries at or beyond an interval's upper bound
//! that will need examining once a later interval reaches them.
//!
//! They are one list sorted by key (each key's times sorted and distinct), which each
//! activation rewrites in a single pass beside its walk over the keys it visits, in key order:
//! entries of keys it does not visit carry over as they are, and a visited key's entries still
//! beyond `upper` are written back together with those its visit defers. Every key with a due
//! entry is visited, so the entries a walk skips are never due.

use ripple_updates::search::gallop;
use ripple_updates::{Antichain, Time};

/// The deferred `(key, time)` entries of a reduce, and the walk that rewrites them.
pub(super) struct DeferredTimes<K, T> {
    /// Sorted by key, then time; no entry twice.
    current: Vec<(K, T)>,
    /// The list a walk writes, in the same order, to replace `current` when it ends.
    next: Vec<(K, T)>,
    /// How far the walk has read `current`.
    read: usize,
}

impl<K, T> Default for DeferredTimes<K, T> {
    fn default() -> Self {
        Self {
            current: Vec::new(),
            next: Vec::new(),
            read: 0,
        }
    }
}

impl<K: Ord + Clone, T: Time> DeferredTimes<K, T> {
    /// The keys of the entries inside the interval ending at `upper` (in order, repeated for
    /// each of their due times).
    pub(super) fn due_keys<'s>(&'s self, upper: &'s Antichain<T>) -> impl Iterator<Item = K> + 's {
        self.current
            .iter()
            .filter(|(_, time)| !upper.less_equal(time))
            .map(|(key, _)| key.clone())
    }

    /// Starts a walk over the keys to visit.
    pub(super) fn begin(&mut self) {
        self.next.clear();
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
        // Visited keys are dense among the deferred ones, so the run of skipped keys is usually
        // empty or short: a gallop from the front finds its end.
        let current = &self.current;
        let skipped = gallop(self.read, current.len(), |index| current[index].0 < *key);
        self.next.extend_from_slice(&current[self.read..skipped]);
        self.read = skipped;
        due.clear();
        later.clear();
        while let Some((_, time)) = current.get(self.read).filter(|(other, _)| other == key) {
            if upper.less_equal(time) {
                later.push(time.clone());
            } else {
                due.push(time.clone());
            }
            self.read += 1;
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
        Extend::extend(
            &mut self.next,
            later.iter().map(|time| (key.clone(), time.clone())),
        );
    }

    /// Ends the walk: the entries after the last visited key carry over, and the rewritten
    /// list replaces the old one.
    pub(super) fn finish(&mut self, upper: &Antichain<T>) {
        let rest = &self.current[self.read..];
        debug_assert!(
            rest.iter().all(|(_, time)| upper.less_equal(time)),
            "a key with a due deferred time was not visited"
        );
        self.next.extend_from_slice(rest);
        std::mem::swap(&mut self.current, &mut self.next);
    }

    /// The least deferred times: the times the operator must keep capabilities for.
    pub(super) fn pending(&self) -> Antichain<T> {
        let mut pending = Antichain::new();
        for (_, time) in self.current.iter() {
            pending.insert(time.clone());
        }
        pending
    }
}

#[cfg(test)]
mod tests {
    use super::DeferredTimes;
    use ripple_updates::{Antichain, Product};

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
            deferred.current,
            vec![(1, time(2, 1)), (1, time(3, 0)), (5, time(2, 1))]
        );
    }
}
