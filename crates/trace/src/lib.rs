//! Ripple's indexed state: the trace that joins and reductions read.
//!
//! - [`batch`]: a [`Batch`] is an immutable columnar trie `key -> val -> (time, diff)` for an
//!   interval of times ([`Description`]), shared by reference count. [`offsets`] and
//!   [`history`] are its compact encodings (`pair_index`: which `(time, diff)` pair each
//!   update uses); `columns` holds helpers the levels share, and
//!   `map_times` rewrites a batch's times. [`view`]: [`BatchView`], a batch's columns borrowed,
//!   wherever they live; [`block`] lays them out as words and reads them back in place.
//! - [`file`](mod@file): the batch file format, a batch's columns in checksummed blocks (of
//!   [`block`]'s layout) with a footer index; [`writer`] writes one block by block (from a
//!   batch or a merge), [`persist`] turns batches into files and opens them; [`stored`]: a batch kept in such a file, read block by block through
//!   `ripple_storage`'s block cache, pinned by the reading handle; [`filter`]: each file's key
//!   filter, which batched lookups test probes against.
//! - [`builder`]: sorted, consolidated updates (a sealed chain) to a batch, without sorting.
//! - [`cursor`]: [`BatchCursor`] navigates one batch with borrowed items; [`trace_cursor`]
//!   merges several on the fly.
//! - [`lookup`]: many sorted probe keys against every batch, one forward pass per batch.
//! - [`merge`]: two adjacent batches to one, fueled, advancing times to `since`.
//! - [`spine`]: the [`Spine`], LSM-style levels with merge work paid by inserts.
//! - [`counts`]: process-wide counts of the work done (batches, merges, probes, keys), for
//!   `--summary` and work accountings.
//! - [`handle`]: [`TraceHandle`]s share a spine, each with its own compaction holds;
//!   [`snapshot`] is a reader's consistent view.
//!
//! The trace knows times and frontiers but not timely's dataflow types, and does not know the
//! batcher: the arrange operator composes them.
//!
//! ```
//! use ripple_trace::{Builder, Description, LookupScratch, SpineConfig, TraceHandle};
//! use ripple_updates::Antichain;
//!
//! let trace = TraceHandle::<(u64, u64, u64, i64)>::new(SpineConfig::default());
//! // A batch for times [0, 2), its updates pushed in (key, val, time) order.
//! let mut builder = Builder::new();
//! builder.push(&1, &10, &0, &1);
//! builder.push(&3, &30, &1, &1);
//! trace.insert(builder.done(Description::new(Antichain::from_elem(0), Antichain::from_elem(2))));
//!
//! // Snapshots hold the batches by reference count; cursors borrow them.
//! let snapshot = trace.snapshot();
//! let mut cursor = snapshot.cursor();
//! let probes: &[u64] = &[1, 2, 3];
//! let mut found = Vec::new();
//! cursor.lookup(probes, &mut LookupScratch::default(), |index, vals| {
//!     while let Some(val) = vals.get_val() {
//!         vals.map_times(|time, diff| found.push((probes[index], *val, *time, *diff)));
//!         vals.step_val();
//!     }
//! });
//! assert_eq!(found, vec![(1, 10, 0, 1), (3, 30, 1, 1)]);
//! assert_eq!(snapshot.accumulate_at(&0), vec![(1, 10, 1)]);
//! ```

pub mod batch;
pub mod block;
pub mod builder;
mod columns;
pub mod counts;
pub mod cursor;
pub mod description;
pub mod file;
pub mod filter;
pub mod handle;
pub mod history;
pub mod lookup;
mod map_times;
pub mod merge;
pub mod offsets;
mod pair_index;
pub mod persist;
pub mod snapshot;
pub mod spine;
pub mod stored;
pub mod trace_cursor;
pub mod view;
pub mod writer;

pub use batch::Batch;
pub use builder::Builder;
pub use cursor::BatchCursor;
pub use description::Description;
pub use handle::TraceHandle;
pub use lookup::{LookupScratch, ValCursor};
pub use snapshot::TraceSnapshot;
pub use spine::{Spine, SpineConfig};
pub use trace_cursor::TraceCursor;
pub use view::BatchView;
