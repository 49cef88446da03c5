//! The arrange operator: a stream of updates to a shared, indexed trace and a stream of
//! batches.
//!
//! It receives containers routed to it by key, pushes them into a [`MergeBatcher`], and
//! whenever its input frontier advances seals every update whose time is no longer possible
//! to receive (not `>=` the frontier) into one [`Batch`] for the interval `[previous frontier,
//! frontier)`. The batch goes into the trace (a spine behind a [`TraceHandle`](ripple_trace::TraceHandle)) and
//! downstream, under the capabilities it retires. When the frontier moves but no update is
//! ready, only the trace's upper advances: downstream learns of it from its input frontier.

use super::agent::TraceAgent;
use super::Arranged;
use crate::capabilities::{give_batch, HeldCapabilities};
use crate::collection::Collection;
use crate::config::RippleConfig;
use crate::container::UpdateContainer;
use crate::exchange::{exchange_by, ExchangeData};
use columnar::Ref;
use ripple_batcher::{Chain, Chunk, MergeBatcher};
use ripple_storage::Storage;
use ripple_trace::counts::{self, Count};
use ripple_trace::{Batch, Builder, Description};
use ripple_updates::{Antichain, Data, PartialOrder, Semigroup, Time, Update, UpdatesView};
use std::sync::Arc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::generic::Operator;

/// Builds a batch from a sealed chain of sorted, consolidated chunks. A chain the batcher
/// wrote out, or one of at least `spill_min_bytes` while the process is over its budget
/// (counting the chain, which a batch built in memory would hold a second time), becomes a
/// stored batch, written block by block; a failure to write ends the worker with the error
/// (see `ripple_storage::Storage::fail`).
pub(crate) fn build_batch<U: Update>(
    chain: Chain<U>,
    description: Description<U::Time>,
    builder: &mut Builder<U>,
    storage: Option<&Arc<Storage>>,
) -> Batch<U> {
    let to_file = chain.storage().cloned().or_else(|| {
        let storage = storage?;
        let bytes = chain.memory_bytes();
        let over = !storage.has_room(bytes) && bytes >= storage.settings().spill_min_bytes;
        over.then(|| Arc::clone(storage))
    });
    if let Some(storage) = to_file {
        let parts = chain.into_chunks().map(Chunk::into_updates);
        return Batch::write_sorted(&storage, &description, parts)
            .unwrap_or_else(|error| storage.fail(error));
    }
    builder.expect(chain.len());
    // Each chunk goes as soon as it is copied: the chain shrinks while the batch grows, rather
    // than being held whole beside the finished batch (at a big load, the process's peak).
    for chunk in chain.into_chunks() {
        builder.push_view(chunk.view());
    }
    builder.build(description)
}

/// The keyed view of an unkeyed container of `(key, val)` pairs: the tuple column is already
/// a key column and a value column, so this borrows without copying.
pub(crate) fn keyed_view<K: Data, V: Data, T: Time, R: Semigroup>(
    container: &UpdateContainer<(K, V), T, R>,
) -> UpdatesView<'_, (K, V, T, R)> {
    let view = container.view();
    UpdatesView {
        keys: view.keys.0,
        vals: view.keys.1,
        times: view.times,
        diffs: view.diffs,
    }
}

/// Arranges a collection of `(key, val)` pairs that `pact` routes to workers.
pub(crate) fn arrange_core<'scope, K, V, T, R, P>(
    collection: Collection<'scope, T, (K, V), R>,
    pact: P,
    name: &str,
) -> Arranged<'scope, K, V, T, R>
where
    K: Data,
    V: Data,
    T: Time,
    R: Semigroup,
    P: ParallelizationContract<T, UpdateContainer<(K, V), T, R>>,
{
    let config = RippleConfig::of(collection.scope().worker());
    let lockstep = config.holds_meets(&collection.scope().addr());
    let reader = TraceAgent::new(config.trace_handle::<(K, V, T, R)>());
    let mut writer = reader.handle.clone();
    let announcer = reader.clone_without_holds();
    // The writer reads nothing: only readers' holds should keep history alive.
    writer.set_logical_compaction(Antichain::new().borrow());
    writer.set_physical_compaction(Antichain::new().borrow());

    let stream = collection
        .inner
        .unary_frontier::<CapacityContainerBuilder<Vec<Batch<(K, V, T, R)>>>, _, _, _>(
            pact,
            name,
            move |_, _| {
                let mut batcher = MergeBatcher::<(K, V, T, R)>::new(config.batcher);
                batcher.set_storage(config.storage.clone());
                let mut builder = Builder::new();
                let mut held = HeldCapabilities::default();
                let mut lower = Antichain::from_elem(T::minimum());
                move |(input, frontier), output| {
                    let mut arranged = 0;
                    input.for_each(|capability, container| {
                        held.insert_stamp(&capability);
                        arranged += container.len();
                        batcher.push(keyed_view(container));
                    });
                    counts::add(Count::Arranged, arranged);
                    let frontier = frontier.frontier();
                    if lower.borrow() == frontier {
                        return;
                    }
                    debug_assert!(PartialOrder::less_equal(&lower.borrow(), &frontier));
                    let description = Description::new(lower.clone(), frontier.to_owned());
                    if held.any_before(frontier) {
                        let retired = held.before(frontier);
                        let chain = batcher.seal(frontier);
                        let batch =
                            build_batch(chain, description, &mut builder, config.storage.as_ref());
                        writer.insert(batch.clone());
                        announcer.announce_batch(&batch);
                        give_batch(output, &retired, batch);
                        // Inside a loop, the meet of the times kept for later rounds, so that
                        // every outer time goes round together.
                        held.downgrade_holding(batcher.frontier(), lockstep);
                        // The batcher sizes its sorted runs by the arrangement's whole size
                        // (see `MergeBatcher::set_context_bytes`), the trace's updates counted
                        // as the rows the batcher measures its own by.
                        let rows = writer.with_spine(|spine| spine.len());
                        batcher.set_context_bytes(rows * std::mem::size_of::<(K, V, T, R)>());
                    } else {
                        writer.advance_upper(frontier.to_owned());
                    }
                    lower = frontier.to_owned();
                    announcer.announce_progress(&lower);
                }
            },
        );
    Arranged {
        stream,
        trace: reader,
    }
}

impl<'scope, K, V, T, R> Collection<'scope, T, (K, V), R>
where
    K: ExchangeData,
    V: Data,
    T: Time,
    R: Semigroup,
{
    /// Indexes the collection by key: each worker arranges the keys routed to it.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, (u64, String)>::new();
    ///     worker.dataflow(|scope| {
    ///         input.to_collection(scope).arrange_by_key().as_collection().capture_into(&sink)
    ///     });
    ///     input.insert((2, "b".to_string()));
    ///     input.insert((1, "a".to_string()));
    ///     input.insert((1, "a".to_string()));
    ///     input.close();
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, "a".to_string()), 0, 2), ((2, "b".to_string()), 0, 1)]);
    /// ```
    pub fn arrange_by_key(self) -> Arranged<'scope, K, V, T, R> {
        self.arrange_core_by_key("ArrangeByKey")
    }

    /// Arranges by key under an operator name of the caller's choosing.
    fn arrange_core_by_key(self, name: &str) -> Arranged<'scope, K, V, T, R> {
        arrange_core(
            self,
            exchange_by(|(key, _val): Ref<'_, (K, V)>| K::hash_ref(key)),
            name,
        )
    }
}

impl<'scope, K, T, R> Collection<'scope, T, K, R>
where
    K: ExchangeData,
    T: Time,
    R: Semigroup,
{
    /// Indexes the collection by the records themselves (the values are `()`).
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, String>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).arrange_by_self().as_keys().capture_into(&sink));
    ///     input.insert("b".to_string());
    ///     input.insert("a".to_string());
    /// });
    /// assert_eq!(captured.consolidated(), vec![("a".to_string(), 0, 1), ("b".to_string(), 0, 1)]);
    /// ```
    pub fn arrange_by_self(self) -> Arranged<'scope, K, (), T, R> {
        self.map_ref(|key| (K::into_owned(key), ()))
            .arrange_core_by_key("ArrangeBySelf")
    }
}
