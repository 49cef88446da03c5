//! The container that flows along a collection's edges: updates `(data, time, diff)` in columns.
//!
//! One container holds many updates at many distinct times; the capability it travels under is
//! a lower bound for all of them (timely's "stamp"). Inside a process a container moves between
//! operators and workers by pointer: timely hands the value over, nothing is serialized. Only
//! when it crosses to another process does [`ContainerBytes`] write it, as columnar bytes: one
//! length-prefixed slice per leaf column (`columnar`'s indexed encoding), not per-record bincode.
//! Decoding copies those slices back into owned columns.

use columnar::bytes::indexed;
use columnar::{Borrow, Columnar, Container, ContainerOf, FromBytes, Index, Len, Push, Ref};
use ripple_updates::{Abelian, Data, Semigroup, Time, Updates, UpdatesView};
use timely::dataflow::channels::ContainerBytes;
use timely::Accountable;

/// How many updates a container collects before operators send it: big enough that per-message
/// costs vanish, small enough to stay in cache on its way through a pipeline.
pub const SEND_UPDATES: usize = 4096;

/// The update type of a collection's container: `data` stands in the key column, values are `()`.
pub type Unkeyed<D, T, R> = (D, (), T, R);

/// Updates `(data, time, diff)`, column by column.
pub struct UpdateContainer<D: Data, T: Time, R: Semigroup> {
    /// The columns: `keys` holds the data, `vals` is the zero-sized unit column.
    pub updates: Updates<Unkeyed<D, T, R>>,
}

impl<D: Data, T: Time, R: Semigroup> Default for UpdateContainer<D, T, R> {
    fn default() -> Self {
        Self {
            updates: Updates::default(),
        }
    }
}

impl<D: Data, T: Time, R: Semigroup> Clone for UpdateContainer<D, T, R> {
    fn clone(&self) -> Self {
        Self {
            updates: self.updates.clone(),
        }
    }
}

impl<D: Data, T: Time, R: Semigroup> std::fmt::Debug for UpdateContainer<D, T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let view = self.view();
        f.debug_list()
            .entries(
                (0..view.len()).map(|i| (view.key(i), view.time(i), R::into_owned(view.diff(i)))),
            )
            .finish()
    }
}

impl<D: Data, T: Time, R: Semigroup> UpdateContainer<D, T, R> {
    /// The number of updates.
    pub fn len(&self) -> usize {
        self.updates.len()
    }

    /// True when there are no updates.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// Borrows the columns.
    pub fn view(&self) -> UpdatesView<'_, Unkeyed<D, T, R>> {
        self.updates.view()
    }

    /// Appends an owned update.
    #[inline]
    pub fn push(&mut self, data: &D, time: &T, diff: &R) {
        self.updates.keys.push(data);
        self.updates.vals.push(&());
        self.updates.times.push(time);
        self.updates.diffs.push(diff);
    }

    /// Appends an update given by borrowed parts (as read from other columns).
    #[inline]
    pub fn push_ref(&mut self, data: Ref<'_, D>, time: Ref<'_, T>, diff: Ref<'_, R>) {
        self.updates.keys.push(data);
        self.updates.vals.push(&());
        self.updates.times.push(time);
        self.updates.diffs.push(diff);
    }

    /// Appends borrowed data with an owned time and diff.
    #[inline]
    pub fn push_data_ref(&mut self, data: Ref<'_, D>, time: &T, diff: &R) {
        self.updates.keys.push(data);
        self.updates.vals.push(&());
        self.updates.times.push(time);
        self.updates.diffs.push(diff);
    }

    /// Takes the updates out, leaving an empty container with room for as many again.
    ///
    /// For an operator that sends a container once it holds [`SEND_UPDATES`]: the next one
    /// will likely fill as well, and starting it at full size spares each column the dozen
    /// doublings (each a reallocation and a copy through fresh memory) of growing from empty.
    /// Timely takes the container it is given and does not hand one back within a process.
    pub fn take_reserving(&mut self) -> Self {
        let next = Updates::with_capacity_for(self.view());
        Self {
            updates: std::mem::replace(&mut self.updates, next),
        }
    }

    /// Removes every update, keeping the allocations.
    pub fn clear(&mut self) {
        self.updates.clear();
    }

    /// The updates as owned rows `(data, time, diff)`.
    pub fn to_rows(&self) -> Vec<(D, T, R)> {
        self.rows().collect()
    }

    /// The updates as owned rows `(data, time, diff)`, one at a time.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = (D, T, R)> + '_ {
        let view = self.view();
        (0..view.len()).map(move |i| {
            (
                D::into_owned(view.key(i)),
                T::into_owned(view.time(i)),
                R::into_owned(view.diff(i)),
            )
        })
    }

    /// A container of the given rows.
    pub fn from_rows<'r>(rows: impl IntoIterator<Item = &'r (D, T, R)>) -> Self {
        let mut container = Self::default();
        for (data, time, diff) in rows {
            container.push(data, time, diff);
        }
        container
    }

    /// Sorts by `(data, time)`, adds the diffs of equal pairs and drops zero sums, within this
    /// container only.
    pub fn consolidate(&mut self) {
        ripple_updates::consolidate::consolidate(&mut self.updates);
    }

    /// The same updates with every diff negated. Data and time columns move untouched.
    pub fn negate(mut self) -> Self
    where
        R: Abelian,
    {
        let mut diffs = <R as Columnar>::Container::default();
        let mut owned: Option<R> = None;
        {
            let old = self.updates.diffs.borrow();
            for index in 0..old.len() {
                let diff = owned.get_or_insert_with(|| R::into_owned(old.get(index)));
                diff.copy_from(old.get(index));
                diff.negate();
                diffs.push(&*diff);
            }
        }
        self.updates.diffs = diffs;
        self
    }

    /// The same times and diffs with every datum replaced by `logic(datum)`. The time, diff and
    /// unit value columns move to the output untouched; only the data column is written, and
    /// `self` is left empty.
    pub fn map_data<D2: Data>(
        &mut self,
        mut logic: impl FnMut(Ref<'_, D>) -> D2,
    ) -> UpdateContainer<D2, T, R> {
        let mut keys = ContainerOf::<D2>::default();
        {
            let data = self.updates.keys.borrow();
            for index in 0..data.len() {
                keys.push(&logic(data.get(index)));
                if index == 0 {
                    reserve_from_first(&mut keys, data.len());
                }
            }
        }
        let taken = std::mem::take(&mut self.updates);
        UpdateContainer {
            updates: Updates {
                keys,
                vals: taken.vals,
                times: taken.times,
                diffs: taken.diffs,
            },
        }
    }

    /// The same data and diffs with every time replaced by `logic(time)`; an update whose
    /// `logic` returns `None` is dropped. When none is dropped (entering and leaving scopes),
    /// the data and diff columns move untouched and only the times are written.
    pub fn map_times<T2: Time>(
        self,
        mut logic: impl FnMut(T) -> Option<T2>,
    ) -> UpdateContainer<D, T2, R> {
        let mut times = ContainerOf::<T2>::default();
        let view = self.view();
        let mut index = 0;
        while index < view.len() {
            match logic(T::into_owned(view.time(index))) {
                Some(time) => times.push(&time),
                None => break,
            }
            if index == 0 {
                reserve_from_first(&mut times, view.len());
            }
            index += 1;
        }
        if index == view.len() {
            let Updates {
                keys, vals, diffs, ..
            } = self.updates;
            return UpdateContainer {
                updates: Updates {
                    keys,
                    vals,
                    times,
                    diffs,
                },
            };
        }
        // Update `index` is dropped: copy the prefix, then filter the rest one by one.
        let mut output = UpdateContainer::<D, T2, R>::default();
        let columns = &mut output.updates;
        columns.keys.extend_from_self(view.keys, 0..index);
        columns.vals.extend_from_self(view.vals, 0..index);
        columns.times = times;
        columns.diffs.extend_from_self(view.diffs, 0..index);
        for index in index + 1..view.len() {
            if let Some(time) = logic(T::into_owned(view.time(index))) {
                columns.keys.push(view.key(index));
                columns.vals.push(&());
                columns.times.push(&time);
                columns.diffs.push(view.diff(index));
            }
        }
        output
    }
}

/// Gives `column`, which holds one value, room for `total` values like it: exactly `total` for
/// fixed-width types, in one allocation, where pushing onto the one value would grow the column
/// through a dozen doublings, each a reallocation and a copy. (Columns of variable-width values,
/// such as strings, are sized as if every value were as long as the first.)
fn reserve_from_first<C: Container>(column: &mut C, total: usize) {
    let first = std::mem::take(column);
    column.reserve_for(std::iter::repeat_n(first.borrow(), total));
    column.extend_from_self(first.borrow(), 0..1);
}

impl<D: Data, T: Time, R: Semigroup> Accountable for UpdateContainer<D, T, R> {
    fn record_count(&self) -> i64 {
        self.len() as i64
    }
}

/// Cross-process encoding: the four borrowed columns as one `columnar` indexed frame.
impl<D: Data, T: Time, R: Semigroup> ContainerBytes for UpdateContainer<D, T, R> {
    fn from_bytes(bytes: timely::bytes::arc::Bytes) -> Self {
        // The frame is a sequence of u64 words; timely's buffers are normally 8-aligned, and
        // when they are not the words are copied once into an aligned buffer.
        let aligned: Vec<u64>;
        let words: &[u64] = match bytemuck::try_cast_slice(&bytes[..]) {
            Ok(words) => words,
            Err(_) => {
                aligned = bytes
                    .chunks_exact(8)
                    .map(|chunk| u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk")))
                    .collect();
                &aligned
            }
        };
        type Borrowed<'a, X> = <<X as Columnar>::Container as Borrow>::Borrowed<'a>;
        let (keys, vals, times, diffs): (
            Borrowed<'_, D>,
            Borrowed<'_, ()>,
            Borrowed<'_, T>,
            Borrowed<'_, R>,
        ) = FromBytes::from_bytes(&mut indexed::decode(words));
        let view = UpdatesView::<Unkeyed<D, T, R>> {
            keys,
            vals,
            times,
            diffs,
        };
        let mut updates = Updates::with_capacity_for(view);
        updates.extend_from(view, 0..view.len());
        Self { updates }
    }

    fn length_in_bytes(&self) -> usize {
        let view = self.view();
        indexed::length_in_bytes(&(view.keys, view.vals, view.times, view.diffs))
    }

    fn into_bytes<W: std::io::Write>(&self, writer: &mut W) {
        let view = self.view();
        indexed::write(writer, &(view.keys, view.vals, view.times, view.diffs))
            .expect("writing a container to a cross-process channel failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use timely::order::Product;

    fn roundtrip<D: Data, T: Time, R: Semigroup>(
        container: &UpdateContainer<D, T, R>,
    ) -> UpdateContainer<D, T, R> {
        let mut bytes = Vec::new();
        container.into_bytes(&mut bytes);
        assert_eq!(bytes.len(), container.length_in_bytes());
        UpdateContainer::from_bytes(timely::bytes::arc::BytesMut::from(bytes).freeze())
    }

    #[test]
    fn bytes_roundtrip_strings_and_products() {
        type Row = ((String, u64), Product<u64, u32>, i64);
        let rows: Vec<Row> = (0..100)
            .map(|i| {
                (
                    (format!("key number {i}"), i * 7),
                    Product::new(i / 3, i as u32 % 5),
                    i as i64 - 50,
                )
            })
            .collect();
        let container = UpdateContainer::from_rows(&rows);
        assert_eq!(roundtrip(&container).to_rows(), rows);
        let empty = UpdateContainer::<u64, u64, i64>::default();
        assert!(roundtrip(&empty).is_empty());
    }

    #[test]
    fn negate_and_map_times() {
        let rows = vec![(1u64, 5u64, 2i64), (2, 6, -3)];
        let negated = UpdateContainer::from_rows(&rows).negate();
        assert_eq!(negated.to_rows(), vec![(1, 5, -2), (2, 6, 3)]);
        let shifted = negated.map_times(|t| (t != 6).then_some(t + 10));
        assert_eq!(shifted.to_rows(), vec![(1, 15, -2)]);
    }

    proptest::proptest! {
        /// `take_reserving` hands over every update in order and leaves an empty container that
        /// takes new updates (reserved from strings of other lengths, too).
        #[test]
        fn take_reserving_moves_everything_and_refills(
            first in proptest::collection::vec(("[a-z]{0,12}", 0u64..10, -3i64..4), 0..40),
            second in proptest::collection::vec(("[a-z]{0,30}", 0u64..10, -3i64..4), 0..40),
        ) {
            let mut container = UpdateContainer::from_rows(&first);
            let taken = container.take_reserving();
            proptest::prop_assert_eq!(taken.to_rows(), first);
            proptest::prop_assert!(container.is_empty());
            for (data, time, diff) in &second {
                container.push(data, time, diff);
            }
            proptest::prop_assert_eq!(container.to_rows(), second);
        }

        /// `map_data` maps every datum in place of the old, keeping times, diffs and order, and
        /// leaves the input empty.
        #[test]
        fn map_data_maps_every_datum(
            rows in proptest::collection::vec(((0u64..20, 0u64..5), 0u64..10, -3i64..4), 0..40),
        ) {
            let mut container = UpdateContainer::from_rows(&rows);
            let mapped = container.map_data(|(a, b): (&u64, &u64)| format!("{a}-{b}"));
            let expected: Vec<_> = rows
                .iter()
                .map(|((a, b), t, r)| (format!("{a}-{b}"), *t, *r))
                .collect();
            proptest::prop_assert_eq!(mapped.to_rows(), expected);
            proptest::prop_assert!(container.is_empty());
        }

        /// `map_times` keeps exactly the updates whose new time is `Some`, in order, whether
        /// none, some or all are dropped (the move path and the copying path).
        #[test]
        fn map_times_is_a_filter_map(
            rows in proptest::collection::vec(((0u64..20, 0u64..5), 0u64..10, -3i64..4), 0..40),
            dropped in 0u64..12,
        ) {
            let container = UpdateContainer::from_rows(&rows);
            let step = |t: u64| (t != dropped).then_some((t, t as u32 + 1));
            let expected: Vec<_> = rows
                .iter()
                .filter_map(|(d, t, r)| step(*t).map(|t2| (*d, t2, *r)))
                .collect();
            let mapped = container.map_times(|t| step(t).map(|(a, b)| Product::new(a, b)));
            let got: Vec<_> = mapped
                .to_rows()
                .into_iter()
                .map(|(d, t, r)| (d, (t.outer, t.inner), r))
                .collect();
            proptest::prop_assert_eq!(got, expected);
        }
    }
}
