//! Differential dataflow on timely: collections of changes and the operators that maintain
//! computations over them incrementally.

pub mod capture;
pub mod collection;
pub mod container;
pub mod hashing;
pub mod input;

pub use capture::Captured;
pub use collection::Collection;
pub use container::UpdateContainer;
pub use hashing::ExchangeData;
pub use input::{InputError, InputSession};
pub mod config;
pub mod exchange;
pub use config::RippleConfig;
pub mod arrange;
pub use arrange::Arranged;
pub mod iterate;
pub mod join;
pub mod reduce;
pub use iterate::Variable;
