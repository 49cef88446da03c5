//! Diffs: how the multiplicity of a record changes.
//!
//! A diff type is a commutative [`Semigroup`] with a test for zero: equal `(key, val, time)`
//! triples are combined by adding their diffs, and a sum that is zero is dropped. `i64` is the
//! fast, primary case; its columnar container is a plain `Vec<i64>`.

use columnar::{Columnar, Ref};
use std::fmt::Debug;
use std::hash::Hash;

/// A commutative, associative addition with a recognizable zero.
///
/// `Eq + Hash` let batches store the distinct `(time, diff)` pairs of a batch once, in a
/// dictionary, instead of once per update.
pub trait Semigroup: Columnar + Clone + Eq + Hash + Debug + Send + 'static {
    /// Adds `rhs` into `self`.
    fn plus_equals(&mut self, rhs: &Self);
    /// True when `self` is the additive identity, so the update carries no change.
    fn is_zero(&self) -> bool;

    /// Adds a borrowed diff (as read from a diff column) into `self`.
    #[inline(always)]
    fn plus_equals_ref(&mut self, rhs: Ref<'_, Self>) {
        self.plus_equals(&Self::into_owned(rhs));
    }
}

macro_rules! integer_semigroup {
    ($($t:ty),*) => {$(
        impl Semigroup for $t {
            #[inline(always)]
            fn plus_equals(&mut self, rhs: &Self) { *self = self.wrapping_add(*rhs); }
            #[inline(always)]
            fn is_zero(&self) -> bool { *self == 0 }
            #[inline(always)]
            fn plus_equals_ref(&mut self, rhs: Ref<'_, Self>) { *self = self.wrapping_add(Self::into_owned(rhs)); }
        }
    )*};
}
// Wrapping addition: diffs form a group modulo 2^bits, exactly as differential dataflow's
// integer diffs do. It is exact for every sum whose true value fits the type, whatever the order
// of its terms: partial sums may wrap (a consolidation adds in sorted order, not the input's)
// and still come out right, which is why it is not checked, not even in debug builds, where a
// check would reject sums that are fine. A sum whose true value does not fit is a wrong answer,
// so inputs are kept from making one where they enter (the `ripple` command refuses changes
// whose running multiplicities or edge counts would leave the range; see
// `ripple_cli::changes::Multiplicities`); products in joins are bounded the same way.
integer_semigroup!(i8, i16, i32, i64, i128, isize);

/// A semigroup with additive inverses: what `negate`, `antijoin` and retractions need.
pub trait Abelian: Semigroup {
    /// Replaces `self` with its additive inverse.
    fn negate(&mut self);
}

/// Multiplication of diffs, for joins: matching `(k, v1)` with multiplicity `r1` and `(k, v2)`
/// with multiplicity `r2` yields `(k, v1, v2)` with multiplicity `r1 * r2`.
pub trait Multiply<Rhs = Self> {
    /// The diff type of the product.
    type Output: Semigroup;
    /// `self * rhs`.
    fn multiply(&self, rhs: &Rhs) -> Self::Output;
}

macro_rules! integer_ring {
    ($($t:ty),*) => {$(
        impl Abelian for $t {
            #[inline(always)]
            fn negate(&mut self) { *self = self.wrapping_neg(); }
        }
        impl Multiply for $t {
            type Output = $t;
            #[inline(always)]
            fn multiply(&self, rhs: &Self) -> Self { self.wrapping_mul(*rhs) }
        }
    )*};
}
integer_ring!(i8, i16, i32, i64, i128, isize);
