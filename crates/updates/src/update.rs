//! The shape of an update: which types its key, value, time and diff have.
//!
//! [`Update`] bundles the four types behind one parameter, so the rest of ripple writes
//! `Updates<U>` rather than four type parameters everywhere. The tuple `(K, V, T, R)` implements
//! it for any suitable types.
//!
//! Keys and values are [`Data`]: any `Columnar` type whose owned and borrowed forms are both
//! totally ordered, and ordered *the same way* (sorting owned rows and merging borrowed columns
//! must agree). `u32`, `u64`, tuples, `String`, `Vec<u8>` qualify; a user struct qualifies with
//! `#[derive(Columnar, Ord, PartialOrd, Eq, PartialEq)]` and
//! `#[columnar(derive(Ord, PartialOrd, Eq, PartialEq))]`, which orders the borrowed form
//! field by field, as the derived `Ord` does.

use crate::diff::Semigroup;
use crate::lattice::Lattice;
use columnar::{Borrow, Columnar};
use std::fmt::Debug;

/// A record type that can be stored in columns and sorted there.
///
/// Invariant (relied on by the chunker's row fast path and checked in debug builds by
/// `check_invariants`): for owned `a`, `b`, `a.cmp(&b)` equals the comparison of their borrowed
/// forms.
pub trait Data:
    Columnar<Container: for<'a> Borrow<Ref<'a>: Ord + Debug>> + Ord + Clone + Debug + Send + 'static
{
}
impl<D> Data for D where
    D: Columnar<Container: for<'a> Borrow<Ref<'a>: Ord + Debug>>
        + Ord
        + Clone
        + Debug
        + Send
        + 'static
{
}

/// A time: a timely timestamp with lattice operations, storable in columns.
///
/// The total order `Ord` (lexicographic for `Product`) is only used to sort updates; the
/// semantics use the partial order `PartialOrder`. `Hash` lets batches store their distinct
/// `(time, diff)` pairs once, in a dictionary.
pub trait Time: timely::progress::Timestamp + Lattice + Data + std::hash::Hash {}
impl<T: timely::progress::Timestamp + Lattice + Data + std::hash::Hash> Time for T {}

/// The types of an update `(key, val, time, diff)`.
pub trait Update: Sized + 'static {
    /// What is indexed by (the join and reduce key).
    type Key: Data;
    /// What is attached to a key; `()` for unkeyed collections.
    type Val: Data;
    /// When the change happens.
    type Time: Time;
    /// How the multiplicity changes.
    type Diff: Semigroup;
}

impl<K: Data, V: Data, T: Time, R: Semigroup> Update for (K, V, T, R) {
    type Key = K;
    type Val = V;
    type Time = T;
    type Diff = R;
}

/// An owned update, as a row.
pub type Row<U> = (
    <U as Update>::Key,
    <U as Update>::Val,
    <U as Update>::Time,
    <U as Update>::Diff,
);
