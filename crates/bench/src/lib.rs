//! Shared pieces of ripple's benchmarks: a counting allocator for peak-memory figures, input
//! generators, and report formatting.
//!
//! Besides tests, this crate and `ripple-oracle` (whose computations it runs) are the only places where
//! `differential-dataflow` appears: it is the baseline every ripple benchmark runs beside, in
//! the same process, on identical inputs.

pub mod alloc;
pub mod args;
pub mod batcher_inputs;
pub mod cycles;
pub mod dd;
pub mod report;
pub mod svg;
pub mod trace_inputs;
