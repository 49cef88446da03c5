//! The reference programs ripple is checked and measured against, each written once on
//! differential-dataflow.
//!
//! This crate is for tests and benchmarks only: the engine crates never depend on it (nor on
//! differential-dataflow). [`graph`] holds differential's versions of the `ripple` command's
//! computations, which the CLI tests and the bfs benchmark run; [`programs`] holds the dataflow
//! tests' programs, most of them written once for both engines by the `program!` macro.

pub mod graph;
pub mod programs;
