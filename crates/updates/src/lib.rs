//! Ripple's vocabulary: what an update is and how updates are laid out in memory.
//!
//! An *update* is a change `(key, val, time, diff)`: at `time`, the multiplicity of `(key, val)`
//! changes by `diff`. Unkeyed data uses `val = ()`. Times come from timely and are only partially
//! ordered in general; [`Lattice`] adds the least upper bound (`join`) and greatest lower bound
//! (`meet`) that incremental operators need. Diffs form a [`Semigroup`]; `i64` is the primary case.
//!
//! Updates are stored in columns ([`Updates`]): keys, vals, times and diffs each live in their own
//! `columnar` container, so a run of updates copies as a handful of slice copies and comparisons
//! read primitive slices directly. Reads go through [`UpdatesView`], which hands out borrowed
//! `Ref` items that point into the columns: nothing is cloned per record on the read path.
//!
//! [`consolidate`] sorts updates by `(key, val, time)`, sums the diffs of equal triples and drops
//! zero sums: the normal form that chunks, chains and batches keep.

pub mod columns;
pub mod consolidate;
pub mod diff;
pub mod lattice;
pub mod radix;
pub mod search;
pub mod strings;
pub mod update;

pub use columns::{Updates, UpdatesView};
pub use diff::{Abelian, Multiply, Semigroup};
pub use lattice::Lattice;
pub use update::{Data, Time, Update};

/// The product of two times, ordered componentwise: the time of nested iteration scopes.
pub use timely::order::Product;
/// Antichains and frontiers come from timely; re-exported so lower layers need not name timely's
/// module paths.
pub use timely::progress::frontier::{Antichain, AntichainRef};
/// The partial order of times, from timely.
pub use timely::PartialOrder;
