//! [`Batch::map_times`]: a batch with every time replaced, as an iteration's feedback does when
//! it moves a batch to the next round.

use crate::batch::{Batch, BatchData};
use crate::builder::Builder;
use crate::columns::exact_copy;
use crate::description::Description;
use crate::history::Histories;
use crate::offsets::OffsetList;
use columnar::Columnar;
use ripple_updates::consolidate::consolidate_pairs;
use ripple_updates::{Antichain, Semigroup, Time, Update};

impl<U: Update> Batch<U> {
    /// This batch with every time `t` replaced by `map(t)` and its description's frontiers
    /// mapped the same way; updates whose time `map` drops (returns `None` for) are left out.
    /// `map` must be monotone in the partial order, so that the mapped description still
    /// bounds the mapped times (the feedback of an iteration, advancing times by a round).
    ///
    /// When `map` keeps every time and their order within each value (a round counter's
    /// increment does), only the stored `(time, diff)` pairs are rewritten and the other
    /// columns copied; otherwise each value's mapped updates are sorted and consolidated anew.
    pub fn map_times(&self, mut map: impl FnMut(&U::Time) -> Option<U::Time>) -> Batch<U> {
        let data = self.data();
        let mut frontier = |antichain: &Antichain<U::Time>| -> Antichain<U::Time> {
            antichain.iter().filter_map(&mut map).collect()
        };
        let description = Description::with_since(
            frontier(&data.description.lower),
            frontier(&data.description.upper),
            frontier(&data.description.since),
        );
        let histories = data
            .histories
            .map_times(&mut map)
            .filter(|histories| ordered_within_values(histories, &data.val_ends));
        match histories {
            Some(histories) => Self::from_data(BatchData {
                keys: exact_copy::<U::Key>(&data.keys),
                key_fences: exact_copy::<U::Key>(&data.key_fences),
                key_ends: data.key_ends.clone(),
                vals: exact_copy::<U::Val>(&data.vals),
                val_ends: data.val_ends.clone(),
                histories,
                description,
            }),
            None => self.map_times_rebuilding(map, description),
        }
    }

    /// [`Self::map_times`] for maps that drop or reorder times: value by value, the mapped
    /// updates sorted by time and consolidated.
    fn map_times_rebuilding(
        &self,
        mut map: impl FnMut(&U::Time) -> Option<U::Time>,
        description: Description<U::Time>,
    ) -> Batch<U> {
        let mut builder = Builder::<U>::new();
        let mut history: Vec<(U::Time, U::Diff)> = Vec::new();
        let mut cursor = self.cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                history.clear();
                cursor.map_times(|time, diff| {
                    if let Some(time) = map(&U::Time::into_owned(time)) {
                        history.push((time, U::Diff::into_owned(diff)));
                    }
                });
                consolidate_pairs(&mut history);
                if !history.is_empty() {
                    builder.push_history(key, val, &history);
                }
                cursor.step_val();
            }
            cursor.step_key();
        }
        builder.done(description)
    }
}

/// True when the times of each value (the updates `val_ends.start(j)..val_ends.end(j)`) are
/// strictly increasing, as a batch keeps them.
fn ordered_within_values<T: Time, R: Semigroup>(
    histories: &Histories<T, R>,
    val_ends: &OffsetList,
) -> bool {
    (0..val_ends.len()).all(|val| {
        let (start, end) = (val_ends.start(val), val_ends.end(val));
        (start + 1..end).all(|update| histories.get(update - 1).0 < histories.get(update).0)
    })
}
