//! The `ripple` command: incremental graph computations over streams of edge changes.
//!
//! Data path: a [`Feed`](source::Feed) hands out complete times in order, from an input read
//! whole (a parsed change file or the [generator]) or from a [`stream`] read as it arrives
//! (stdin, or a file followed by [`follow`]); [`run`](run::run) builds a
//! [`Computation`](computation::Computation)'s dataflow on every timely worker, feeds it from
//! worker 0 step by step, runs until the output is complete for the step, and hands the
//! gathered output to an [`OutputSink`](output::OutputSink), which consolidates, sorts, writes
//! and checksums it. [`cli`] parses arguments and maps failures to exit codes.

pub mod allocator;
pub mod changes;
pub mod cli;
pub mod cluster;
pub mod computation;
pub mod destination;
pub mod follow;
pub mod generator;
pub mod latency;
pub mod options;
pub mod output;
pub mod progress;
pub mod run;
pub mod source;
pub mod state;
pub mod stats;
pub mod stdin_log;
pub mod stream;
