//! The `ripple` command: incremental graph computations over streams of edge changes.
//!
//! Data path: a [`Source`](source::Source) (a parsed change file or the
//! [generator]) is cut into steps by [`Plan`](source::Plan); [`run`](run::run)
//! builds a [`Computation`](computation::Computation)'s dataflow on every timely worker,
//! feeds each step from worker 0, runs until the output is complete for the step, and hands
//! the gathered output to an [`OutputSink`](output::OutputSink), which consolidates, sorts,
//! writes and checksums it. [`cli`] parses arguments and maps failures to exit codes.

pub mod changes;
pub mod cli;
pub mod computation;
pub mod generator;
pub mod options;
pub mod output;
pub mod progress;
pub mod run;
pub mod source;
pub mod stats;
