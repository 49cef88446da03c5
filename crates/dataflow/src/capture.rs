//! Collecting a collection's updates outside the dataflow, for tests and tools.

use crate::container::UpdateContainer;
use ripple_updates::{Data, Semigroup, Time};
use std::sync::{Arc, Mutex};

/// A shared, thread-safe list of the updates a collection produced.
///
/// Clone it into every worker (all clones share one list), call
/// [`Collection::capture_into`](crate::Collection::capture_into), run the computation, then read
/// the updates back with [`Captured::consolidated`].
pub struct Captured<D, T, R> {
    updates: Arc<Mutex<Vec<(D, T, R)>>>,
}

impl<D, T, R> Clone for Captured<D, T, R> {
    fn clone(&self) -> Self {
        Self {
            updates: Arc::clone(&self.updates),
        }
    }
}

impl<D, T, R> Default for Captured<D, T, R> {
    fn default() -> Self {
        Self {
            updates: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl<D: Data, T: Time, R: Semigroup> Captured<D, T, R> {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a container's updates.
    pub fn extend(&self, container: &UpdateContainer<D, T, R>) {
        let rows = container.to_rows();
        self.lock().extend(rows);
    }

    /// Appends one update (for collecting other engines' output the same way).
    pub fn push_row(&self, data: D, time: T, diff: R) {
        self.lock().push((data, time, diff));
    }

    /// Every update received so far, in arrival order.
    pub fn updates(&self) -> Vec<(D, T, R)> {
        self.lock().clone()
    }

    /// The updates sorted by `(data, time)`, diffs of equal pairs added, zero sums dropped:
    /// independent of batching, workers and arrival order.
    pub fn consolidated(&self) -> Vec<(D, T, R)> {
        consolidate_rows(self.updates())
    }

    /// The collection's contents at `time`: the sum of all updates at times `<= time`, as
    /// consolidated `(data, diff)` pairs.
    pub fn at(&self, time: &T) -> Vec<(D, R)> {
        let rows = self
            .lock()
            .iter()
            .filter(|(_, t, _)| timely::PartialOrder::less_equal(t, time))
            .map(|(d, _, r)| (d.clone(), time.clone(), r.clone()))
            .collect();
        consolidate_rows(rows)
            .into_iter()
            .map(|(d, _, r)| (d, r))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(D, T, R)>> {
        // A worker that panicked while appending leaves whole rows behind; keep reading them.
        self.updates
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Sorts rows by `(data, time)`, adds the diffs of equal pairs and drops zero sums.
pub fn consolidate_rows<D: Ord, T: Ord, R: Semigroup>(mut rows: Vec<(D, T, R)>) -> Vec<(D, T, R)> {
    rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let mut output: Vec<(D, T, R)> = Vec::with_capacity(rows.len());
    for (data, time, diff) in rows {
        match output.last_mut() {
            Some(last) if last.0 == data && last.1 == time => last.2.plus_equals(&diff),
            _ => output.push((data, time, diff)),
        }
    }
    output.retain(|row| !row.2.is_zero());
    output
}
