//! The keys a reduce activation visits, read a window at a time in key order.
//!
//! An interval visits the keys of the batches received for it and the keys with deferred times
//! inside it. Collected whole, sorted and deduplicated, they were a list of every key of the
//! interval: at the load of a big graph, millions of them, the largest item of a budget run's
//! working memory that grew with the data (see docs/perf-notes.md, section "Storage: the whole
//! process within its budget"). [`KeySources`] instead keeps a position in each batch and
//! reads the keys a window at a time: at most `run` keys from each batch and `run` distinct
//! keys from the deferred times, of which the window keeps those up to the least key at which
//! a source stopped short (its *bound*). The window's keys are then all the keys up to the
//! bound, so every key is visited once (keys a batch gave beyond the bound are read again for
//! the next window), and a window holds at most `run` keys per batch and `run` for the
//! deferred times.

use super::deferred::DeferredTimes;
use ripple_trace::Batch;
use ripple_updates::{Antichain, Data, Semigroup, Time};

/// A batch whose keys an interval visits, with the index of its first key not yet in a window.
type Source<K, V, T, R> = (Batch<(K, V, T, R)>, usize);

/// The batches received for an interval, each with its position.
pub(super) struct KeySources<K: Data, V: Data, T: Time, R: Semigroup> {
    batches: Vec<Source<K, V, T, R>>,
    /// How many keys each batch gave the window being made.
    read: Vec<usize>,
}

impl<K: Data, V: Data, T: Time, R: Semigroup> Default for KeySources<K, V, T, R> {
    fn default() -> Self {
        Self {
            batches: Vec::new(),
            read: Vec::new(),
        }
    }
}

impl<K: Data, V: Data, T: Time, R: Semigroup> KeySources<K, V, T, R> {
    /// Adds a batch whose keys the interval visits.
    pub(super) fn push(&mut self, batch: Batch<(K, V, T, R)>) {
        self.batches.push((batch, 0));
    }

    /// Lets go of the batches (an activation's end).
    pub(super) fn clear(&mut self) {
        self.batches.clear();
    }

    /// Fills `keys` (cleared first) with the next window of keys to visit, sorted and
    /// distinct, and returns whether there are any. The deferred times' walk must have taken
    /// every key of the windows before (their entries are read from the walk's position on).
    pub(super) fn next_window(
        &mut self,
        deferred: &DeferredTimes<K, T>,
        upper: &Antichain<T>,
        run: usize,
        keys: &mut Vec<K>,
    ) -> bool {
        let run = run.max(1);
        keys.clear();
        self.read.clear();
        let mut bound: Option<K> = None;
        for (batch, next) in &self.batches {
            let end = batch.key_count().min(*next + run);
            if *next < end {
                // A handle of its own, dropped once the batch's keys are read: a stored
                // batch's blocks read here are pinned no longer.
                let handle = batch.clone();
                let mut cursor = handle.cursor_at(*next);
                keys.push(K::into_owned(cursor.key()));
                for _ in *next + 1..end {
                    // Stepping only to keys it reads, the cursor never enters a block beyond.
                    cursor.step_key();
                    keys.push(K::into_owned(cursor.key()));
                }
                if end < batch.key_count() {
                    let last = keys.last().expect("a key was read");
                    lower_bound(&mut bound, last);
                }
            }
            self.read.push(end - *next);
        }
        let mut due = 0;
        for (key, time) in deferred.unread() {
            if bound.as_ref().is_some_and(|bound| key > bound) {
                break;
            }
            if upper.less_equal(time) {
                continue;
            }
            if due == run && keys.last() != Some(key) {
                // `run` keys taken already: the window ends at the last of them.
                let last = keys.last().expect("due keys were read").clone();
                lower_bound(&mut bound, &last);
                break;
            }
            if keys.last() != Some(key) {
                due += 1;
                keys.push(key.clone());
            }
        }
        // Each batch moves past the keys it gave that the window keeps.
        let mut start = 0;
        for ((_, next), read) in self.batches.iter_mut().zip(&self.read) {
            let given = &keys[start..start + read];
            *next += bound.as_ref().map_or(given.len(), |bound| {
                given.partition_point(|key| key <= bound)
            });
            start += read;
        }
        keys.sort_unstable();
        keys.dedup();
        if let Some(bound) = &bound {
            keys.truncate(keys.partition_point(|key| key <= bound));
        }
        !keys.is_empty()
    }
}

/// Lowers `bound` to `key` if that is less (or there was none).
fn lower_bound<K: Ord + Clone>(bound: &mut Option<K>, key: &K) {
    if bound.as_ref().is_none_or(|bound| key < bound) {
        *bound = Some(key.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ripple_trace::{Builder, Description};
    use ripple_updates::Updates;
    use std::collections::BTreeSet;

    type U = (u64, u64, u64, i64);

    fn batch(keys: &BTreeSet<u64>) -> Batch<U> {
        let rows: Vec<(u64, u64, u64, i64)> = keys.iter().map(|&key| (key, 0, 0, 1)).collect();
        let mut builder = Builder::new();
        builder.push_view(Updates::<U>::from_rows(rows.iter()).view());
        builder.build(Description::new(
            Antichain::from_elem(0),
            Antichain::from_elem(1),
        ))
    }

    proptest! {
        /// Windows of any run length give every key of the batches and every key with a due
        /// deferred time, each once and in order, and no other; a window holds at most `run`
        /// keys per source.
        #[test]
        fn windows_give_every_key_once_in_order(
            batches in proptest::collection::vec(proptest::collection::btree_set(0u64..300, 0..60), 0..4),
            entries in proptest::collection::btree_set((0u64..300, 0u64..6), 0..80),
            run in 1usize..6,
        ) {
            let (mut due, mut later) = (Vec::new(), Vec::new());
            // The deferred list: `entries`, written by a walk at an upper below them all.
            let mut deferred = DeferredTimes::<u64, u64>::default();
            let none_due = Antichain::from_elem(0);
            deferred.begin();
            let entry_keys: BTreeSet<u64> = entries.iter().map(|(key, _)| *key).collect();
            for key in &entry_keys {
                let carried = deferred.take_key(key, &none_due, &mut due, &mut later);
                later.extend(entries.range((*key, 0)..=(*key, u64::MAX)).map(|(_, time)| *time));
                deferred.defer(key, &mut later, carried);
            }
            deferred.finish(&none_due);

            let upper = Antichain::from_elem(3);
            let mut expected: BTreeSet<u64> = batches.iter().flatten().copied().collect();
            expected.extend(entries.iter().filter(|(_, time)| *time < 3).map(|(key, _)| *key));
            let mut sources = KeySources::<u64, u64, u64, i64>::default();
            for keys in &batches {
                sources.push(batch(keys));
            }
            let mut visited = Vec::new();
            let mut window = Vec::new();
            deferred.begin();
            while sources.next_window(&deferred, &upper, run, &mut window) {
                prop_assert!(window.len() <= run * (batches.len() + 1));
                for key in &window {
                    prop_assert!(visited.last().is_none_or(|last| last < key));
                    visited.push(*key);
                    let carried = deferred.take_key(key, &upper, &mut due, &mut later);
                    deferred.defer(key, &mut later, carried);
                }
            }
            deferred.finish(&upper);
            prop_assert_eq!(visited, expected.into_iter().collect::<Vec<_>>());
        }
    }
}
