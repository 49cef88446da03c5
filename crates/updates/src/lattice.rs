//! Lattices of times: the least upper bound (`join`) and greatest lower bound (`meet`).
//!
//! Timely gives times a partial order ([`PartialOrder`]). Incremental operators also need to
//! name "the first time at which both `a` and `b` have happened" (`join`) and "the last time
//! before both" (`meet`), for example to find the times at which a reduction's output may change.
//!
//! Laws (checked by property tests): `join` and `meet` are commutative, associative and
//! idempotent; `a.less_equal(&a.join(b))`; `a.meet(b).less_equal(&a)`; for totally ordered
//! times `join` is `max` and `meet` is `min`.

use timely::order::Product;
use timely::PartialOrder;

/// A partially ordered set in which every pair has a least upper and a greatest lower bound.
///
/// The lattice must be *distributive* (`a.join(&b.meet(&c)) == a.join(b).meet(&a.join(c))`), as
/// totally ordered times and products of distributive lattices are: then advancing by a
/// frontier is joining with the frontier's meet, so a time that advancing leaves alone is left
/// alone together with every time after it (merges rely on this to skip batches whose times
/// advancing cannot move; see [`Lattice::advance_leaves_after`]).
pub trait Lattice: PartialOrder + Sized {
    /// The least upper bound of `self` and `other`.
    fn join(&self, other: &Self) -> Self;
    /// The greatest lower bound of `self` and `other`.
    fn meet(&self, other: &Self) -> Self;

    /// Replaces `self` with `self.join(other)`.
    fn join_assign(&mut self, other: &Self) {
        *self = self.join(other);
    }
    /// Replaces `self` with `self.meet(other)`.
    fn meet_assign(&mut self, other: &Self) {
        *self = self.meet(other);
    }

    /// The meet of all of `times`, or `None` when there are none.
    fn meet_of<'a>(times: impl IntoIterator<Item = &'a Self>) -> Option<Self>
    where
        Self: Clone + 'a,
    {
        let mut times = times.into_iter();
        let mut meet = times.next()?.clone();
        for time in times {
            meet.meet_assign(time);
        }
        Some(meet)
    }

    /// Advances `self` to the earliest time that is indistinguishable from it once only times
    /// `>= frontier` are observed: the meet, over the elements `f` of `frontier`, of
    /// `self.join(f)`. An empty frontier leaves `self` unchanged.
    ///
    /// This is what logical compaction does to a batch: for every `t` with `frontier <= t`,
    /// `self <= t` holds exactly when the advanced time `<= t`, so accumulations at such `t` do
    /// not change.
    fn advance_by(&mut self, frontier: timely::progress::frontier::AntichainRef<'_, Self>) {
        let mut elements = frontier.iter();
        if let Some(first) = elements.next() {
            let mut advanced = self.join(first);
            for element in elements {
                advanced.meet_assign(&self.join(element));
            }
            *self = advanced;
        }
    }

    /// True when advancing by `frontier` leaves every time at or after an element of `lower`
    /// unchanged: when it leaves each element of `lower` unchanged. (Advancing joins with the
    /// frontier's meet `m`; `l.join(m) == l` means `m <= l`, so `m <= t` for every `t >= l`.)
    fn advance_leaves_after(
        lower: timely::progress::frontier::AntichainRef<'_, Self>,
        frontier: timely::progress::frontier::AntichainRef<'_, Self>,
    ) -> bool
    where
        Self: Clone,
    {
        lower.iter().all(|element| {
            let mut advanced = element.clone();
            advanced.advance_by(frontier);
            advanced == *element
        })
    }
}

macro_rules! total_order_lattice {
    ($($t:ty),*) => {$(
        impl Lattice for $t {
            #[inline(always)]
            fn join(&self, other: &Self) -> Self { *self.max(other) }
            #[inline(always)]
            fn meet(&self, other: &Self) -> Self { *self.min(other) }
        }
    )*};
}
total_order_lattice!(u8, u16, u32, u64, u128, usize, i32, i64);

impl Lattice for () {
    fn join(&self, _other: &Self) -> Self {}
    fn meet(&self, _other: &Self) -> Self {}
}

impl<A: Lattice + Clone, B: Lattice + Clone> Lattice for Product<A, B> {
    #[inline]
    fn join(&self, other: &Self) -> Self {
        Product::new(self.outer.join(&other.outer), self.inner.join(&other.inner))
    }
    #[inline]
    fn meet(&self, other: &Self) -> Self {
        Product::new(self.outer.meet(&other.outer), self.inner.meet(&other.inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type P = Product<u64, u32>;

    fn product() -> impl Strategy<Value = P> {
        (0u64..8, 0u32..8).prop_map(|(o, i)| Product::new(o, i))
    }

    proptest! {
        #[test]
        fn product_lattice_laws(a in product(), b in product(), c in product()) {
            prop_assert_eq!(a.join(&b), b.join(&a));
            prop_assert_eq!(a.meet(&b), b.meet(&a));
            prop_assert_eq!(a.join(&b).join(&c), a.join(&b.join(&c)));
            prop_assert_eq!(a.meet(&b).meet(&c), a.meet(&b.meet(&c)));
            prop_assert_eq!(a.join(&a), a);
            prop_assert!(a.less_equal(&a.join(&b)) && b.less_equal(&a.join(&b)));
            prop_assert!(a.meet(&b).less_equal(&a) && a.meet(&b).less_equal(&b));
            // The join is the least upper bound: any upper bound of both is above it.
            if a.less_equal(&c) && b.less_equal(&c) {
                prop_assert!(a.join(&b).less_equal(&c));
            }
            if c.less_equal(&a) && c.less_equal(&b) {
                prop_assert!(c.less_equal(&a.meet(&b)));
            }
        }

        #[test]
        fn advance_by_preserves_comparisons_beyond_frontier(
            t in product(),
            frontier in proptest::collection::vec(product(), 0..3),
            probe in product(),
        ) {
            let frontier = timely::progress::Antichain::from(frontier);
            let mut advanced = t;
            advanced.advance_by(frontier.borrow());
            prop_assert!(t.less_equal(&advanced));
            if frontier.less_equal(&probe) {
                prop_assert_eq!(t.less_equal(&probe), advanced.less_equal(&probe));
            }
        }

        /// `meet_of` is the greatest lower bound of all its times, and nothing for none.
        #[test]
        fn meet_of_is_greatest_lower_bound(
            times in proptest::collection::vec(product(), 0..5),
            c in product(),
        ) {
            match P::meet_of(times.iter()) {
                None => prop_assert!(times.is_empty()),
                Some(meet) => {
                    prop_assert!(times.iter().all(|time| meet.less_equal(time)));
                    if times.iter().all(|time| c.less_equal(time)) {
                        prop_assert!(c.less_equal(&meet));
                    }
                }
            }
        }

        /// The law merges rely on: advancing is joining with the frontier's meet, so a lower
        /// bound that advancing leaves alone vouches for every time after it.
        #[test]
        fn advance_by_is_join_with_meet(
            t in product(),
            frontier in proptest::collection::vec(product(), 1..4),
            lower in proptest::collection::vec(product(), 0..3),
            a in product(),
            b in product(),
        ) {
            // Distributivity.
            prop_assert_eq!(a.join(&b.meet(&t)), a.join(&b).meet(&a.join(&t)));
            let frontier = timely::progress::Antichain::from(frontier);
            let meet = frontier
                .iter()
                .skip(1)
                .fold(frontier[0], |meet, element| meet.meet(element));
            let mut advanced = t;
            advanced.advance_by(frontier.borrow());
            prop_assert_eq!(advanced, t.join(&meet));
            let lower = timely::progress::Antichain::from(lower);
            if P::advance_leaves_after(lower.borrow(), frontier.borrow()) && lower.less_equal(&t) {
                prop_assert_eq!(advanced, t);
            }
        }

        #[test]
        fn total_order_is_max_min(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(a.join(&b), a.max(b));
            prop_assert_eq!(a.meet(&b), a.min(b));
        }
    }
}
