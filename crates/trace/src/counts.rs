//! Process-wide counts of the work arrangements, spines, joins and reduces do: how many
//! batches, merges, probes, keys and updates, not how long they took. `ripple --summary`
//! prints them per input change, and the work accountings in docs/perf-notes.md are made of
//! them.
//!
//! Every worker of the process adds to the same counts, and so does every dataflow it runs:
//! they mean something for a process running one dataflow (as `ripple` does), and only deltas
//! ([`WorkCounts::since`]) are meaningful while another runs beside it (as tests do). Callers
//! add once per batch, merge or activation, never per update, so that counting stays out of
//! the hot loops (its cost is measured in docs/perf-notes.md, section "Work accounting").

use std::sync::atomic::{AtomicU64, Ordering};

/// A kind of work counted; its discriminant indexes the counts (new kinds go before
/// `ReduceOutputs`, the last, which sizes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Updates pushed into arrangements' batchers.
    Arranged,
    /// Batches inserted into spines (sealed by arrangements or built by reduces), once per
    /// spine: a reduce's output batch that also enters an `ArrangedVariable`'s spine counts
    /// twice, as does the work of merging it in each.
    Batches,
    /// The updates of those batches.
    BatchUpdates,
    /// Spine merges finished.
    Merges,
    /// The updates of those merges' inputs (what the merges read).
    MergedUpdates,
    /// Keys joins looked up in the other side's trace.
    JoinProbes,
    /// Of those, keys found: both sides' histories were read and multiplied.
    JoinKeys,
    /// Updates of both sides' histories read for those keys.
    JoinHistory,
    /// Updates joins sent on (products, consolidated per key).
    JoinOutputs,
    /// Keys reduces visited (a key once per interval it changed in or had deferred times
    /// due in).
    ReduceKeys,
    /// Updates read for those visits: input and output histories (or a key's totals standing
    /// for them) and the interval's new updates.
    ReduceHistory,
    /// Output corrections reduces produced, before each key's are consolidated.
    ReduceOutputs,
}

/// How many kinds of work are counted: the enum's variants are the indices `0..KINDS`
/// (`ReduceOutputs` is the last).
const KINDS: usize = Count::ReduceOutputs as usize + 1;

static TOTALS: [AtomicU64; KINDS] = [const { AtomicU64::new(0) }; KINDS];

/// Adds `amount` to `count`.
#[inline]
pub fn add(count: Count, amount: usize) {
    if amount > 0 {
        TOTALS[count as usize].fetch_add(amount as u64, Ordering::Relaxed);
    }
}

/// The counts at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkCounts([u64; KINDS]);

impl WorkCounts {
    /// The process's counts now.
    pub fn now() -> Self {
        Self(std::array::from_fn(|index| {
            TOTALS[index].load(Ordering::Relaxed)
        }))
    }

    /// The work done between `earlier` and `self`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self(std::array::from_fn(|index| {
            self.0[index].saturating_sub(earlier.0[index])
        }))
    }

    pub fn get(&self, count: Count) -> u64 {
        self.0[count as usize]
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&value| value == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_subtract() {
        // Other tests of this crate count too: only the deltas of the counts touched here are
        // checked, and only to be at least what was added.
        let before = WorkCounts::now();
        add(Count::JoinOutputs, 5);
        add(Count::JoinOutputs, 0);
        add(Count::ReduceKeys, 2);
        let delta = WorkCounts::now().since(&before);
        assert!(delta.get(Count::JoinOutputs) >= 5);
        assert!(delta.get(Count::ReduceKeys) >= 2);
        assert!(!delta.is_empty());
        assert!(before.since(&WorkCounts::now()).is_empty());
    }
}
