//! Arrangements: a collection indexed by key in a shared trace, with the stream of the
//! batches that trace takes in.
//!
//! [`Arranged`] pairs that stream with a [`TraceAgent`]. The arrange operator
//! (`operator.rs`: [`Collection::arrange_by_key`], [`Collection::arrange_by_self`]) builds
//! one from a collection; `agent.rs` holds the agent, and `import.rs` replays an agent's
//! trace into another dataflow of the same worker. Arrangements are read back as collections
//! here, and by join, reduce and the arranged variable.

mod agent;
mod import;
mod operator;

pub use agent::TraceAgent;

use crate::collection::{Collection, Output};
use crate::container::{UpdateContainer, SEND_UPDATES};
use columnar::Ref;
use ripple_trace::Batch;
use ripple_updates::{Data, Semigroup, Time};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::Stream;

/// The stream of an arrangement's batches.
pub type BatchStream<'scope, K, V, T, R> = Stream<'scope, T, Vec<Batch<(K, V, T, R)>>>;

/// A stream of batches and the trace that holds them all.
pub struct Arranged<'scope, K: Data, V: Data, T: Time, R: Semigroup> {
    /// Each batch as it is sealed, sent under capabilities for its times.
    pub stream: BatchStream<'scope, K, V, T, R>,
    /// A handle on the trace. Its holds keep the trace readable at every time until the handle
    /// is dropped or advanced; operators built on the arrangement take their own clones, and
    /// other dataflows can [`import`](TraceAgent::import) it.
    pub trace: TraceAgent<K, V, T, R>,
}

impl<K: Data, V: Data, T: Time, R: Semigroup> Clone for Arranged<'_, K, V, T, R> {
    fn clone(&self) -> Self {
        Self {
            stream: self.stream.clone(),
            trace: self.trace.clone(),
        }
    }
}

/// Hands `batches`' updates to `send` in update containers of about [`SEND_UPDATES`] each,
/// every `(key, val)` turned into a record by `logic`.
pub(crate) fn send_as_updates<'b, K, V, T, R, D>(
    batches: impl IntoIterator<Item = &'b Batch<(K, V, T, R)>> + Clone,
    logic: &mut impl FnMut(Ref<'_, K>, Ref<'_, V>) -> D,
    mut send: impl FnMut(&mut UpdateContainer<D, T, R>),
) where
    K: Data,
    V: Data,
    T: Time,
    R: Semigroup,
    D: Data,
{
    // The first container is sized for the batches' updates (at most one container's worth) once
    // its first key is in, a sample of the records' sizes: a reduce's output batch in an
    // iteration round is a few hundred updates, which growing from empty reallocated some
    // seven times per column.
    let total: usize = batches.clone().into_iter().map(|batch| batch.len()).sum();
    let mut container = UpdateContainer::<D, T, R>::default();
    let mut sized = false;
    // Key runs: a stored batch is read a block at a time, with one block pinned.
    for batch in batches {
        batch.for_each_key_run(|cursor, keys| {
            for index in 0..keys {
                let key = cursor.key();
                while let Some(val) = cursor.get_val() {
                    let data = logic(key, val);
                    cursor.map_times(|time, diff| container.push_data_ref_owned(&data, time, diff));
                    cursor.step_val();
                }
                let held = container.len();
                if !sized && held > 0 {
                    let room = total.min(SEND_UPDATES);
                    if room > held {
                        container.updates.reserve_copies(room.div_ceil(held) - 1);
                    }
                    sized = true;
                }
                if held >= SEND_UPDATES {
                    // The next container starts at this one's size (see `take_reserving`).
                    send(&mut container.take_reserving());
                }
                // Not past the run's last key: that would read (and pin) the next block.
                if index + 1 < keys {
                    cursor.step_key();
                }
            }
        });
    }
    if !container.is_empty() {
        send(&mut container);
    }
}

impl<'scope, K: Data, V: Data, T: Time, R: Semigroup> Arranged<'scope, K, V, T, R> {
    /// The arranged updates as a collection, each `(key, val)` turned into a record by `logic`.
    pub fn as_collection_with<D: Data>(
        self,
        mut logic: impl FnMut(Ref<'_, K>, Ref<'_, V>) -> D + 'static,
    ) -> Collection<'scope, T, D, R> {
        let inner =
            self.stream
                .unary::<Output<D, T, R>, _, _, _>(Pipeline, "AsCollection", move |_, _| {
                    move |input, output| {
                        input.for_each(|capability, batches| {
                            let mut session = output.session(&capability);
                            send_as_updates(batches.iter(), &mut logic, |container| {
                                session.give_container(container)
                            });
                        });
                    }
                });
        Collection { inner }
    }

    /// The arranged updates as a collection of `(key, val)` pairs.
    pub fn as_collection(self) -> Collection<'scope, T, (K, V), R> {
        self.as_collection_with(|key, val| (K::into_owned(key), V::into_owned(val)))
    }
}

impl<'scope, K: Data, T: Time, R: Semigroup> Arranged<'scope, K, (), T, R> {
    /// The keys of an arrangement by self, as a collection.
    pub fn as_keys(self) -> Collection<'scope, T, K, R> {
        self.as_collection_with(|key, ()| K::into_owned(key))
    }
}
