//! Differential dataflow on timely: collections of changes and the operators that maintain
//! computations over them incrementally.
//!
//! A [`Collection`] is a timely stream of [`UpdateContainer`]s: columns of `(data, time, diff)`
//! whose capability bounds their times from below, so one container carries changes at many
//! times. [`InputSession`] feeds changes in; [`completed`] hands a collection's changes out
//! one complete time at a time, for live feeds. Record-at-a-time operators ([`collection`]) rewrite
//! containers as they pass. [`arrange`] routes updates to workers by key ([`exchange`]), sorts
//! them in a merge batcher and seals a batch per completed interval of times into a shared
//! trace; [`join`] and [`reduce`] read arrangements; [`iterate`] closes loops in nested scopes.
//! See the crate README's guide and `ARCHITECTURE.md` for the map.

pub mod arrange;
mod capabilities;
pub mod capture;
pub mod collection;
pub mod completed;
pub mod config;
pub mod container;
pub mod exchange;
pub mod input;
pub mod iterate;
pub mod join;
mod recycle;
pub mod reduce;

pub use arrange::{Arranged, TraceAgent};
pub use capture::Captured;
pub use collection::Collection;
pub use completed::CompletedTimes;
pub use config::RippleConfig;
pub use container::UpdateContainer;
pub use exchange::ExchangeData;
pub use input::{InputError, InputSession};
pub use iterate::{ArrangedVariable, Variable};
/// Process-wide counts of the work operators do (`ripple --summary` prints them).
pub use ripple_trace::counts;

/// The README's examples, compiled and run as doctests so the guide stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
