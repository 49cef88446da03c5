//! Arrange: turning a stream of updates into a shared, indexed trace and a stream of batches.
//!
//! The arrange operator receives containers routed to it by key, pushes them into a
//! [`MergeBatcher`], and whenever its input frontier advances seals every update whose time is
//! no longer possible to receive (not `>=` the frontier) into one [`Batch`] for the interval
//! `[previous frontier, frontier)`. The batch goes into the trace (a spine behind a
//! [`TraceHandle`]) and downstream, under the capabilities it retires. When the frontier moves
//! but no update is ready, only the trace's upper advances: downstream learns of it from its
//! input frontier.

use crate::collection::{Collection, Output};
use crate::config::RippleConfig;
use crate::container::{UpdateContainer, SHIP_UPDATES};
use crate::exchange::exchange_by;
use crate::hashing::ExchangeData;
use crate::shared::TraceAgent;
use columnar::Ref;
use ripple_batcher::{Chain, MergeBatcher};
use ripple_trace::{Batch, Builder, Description, TraceHandle};
use ripple_updates::{
    Antichain, AntichainRef, Data, PartialOrder, Semigroup, Time, Update, UpdatesView,
};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{ParallelizationContract, Pipeline};
use timely::dataflow::operators::generic::{Operator, OutputBuilderSession};
use timely::dataflow::operators::{Capability, CapabilitySet, InputCapability};
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

/// Capabilities for the lower envelope of the times an operator still holds updates at.
pub(crate) struct HeldCapabilities<T: Time> {
    capabilities: Vec<Capability<T>>,
}

impl<T: Time> Default for HeldCapabilities<T> {
    fn default() -> Self {
        Self {
            capabilities: Vec::new(),
        }
    }
}

impl<T: Time> HeldCapabilities<T> {
    /// Adds `capability` unless a held one is already at or before it; drops held ones after it.
    pub(crate) fn insert(&mut self, capability: Capability<T>) {
        if !self.covers(capability.time()) {
            self.hold(capability);
        }
    }

    /// Holds the times of a message's stamp as [`Self::insert`] does, but mints a capability
    /// (for output 0) only for the times no held one covers: messages mostly arrive at times
    /// already held, and every capability minted and dropped is progress traffic that timely
    /// must sort out.
    pub(crate) fn insert_stamp(&mut self, capability: &InputCapability<T>) {
        for time in capability.stamp().iter() {
            if !self.covers(time) {
                self.hold(capability.delayed(time, 0));
            }
        }
    }

    /// True when a held capability is at or before `time`.
    pub(crate) fn covers(&self, time: &T) -> bool {
        self.capabilities
            .iter()
            .any(|held| held.time().less_equal(time))
    }

    /// Adds `capability`, which no held one covers, dropping the held ones after it.
    fn hold(&mut self, capability: Capability<T>) {
        self.capabilities
            .retain(|held| !capability.time().less_equal(held.time()));
        self.capabilities.push(capability);
    }

    /// True when some held capability is for a time not `>= frontier`: work may be due.
    pub(crate) fn any_before(&self, frontier: AntichainRef<'_, T>) -> bool {
        self.capabilities
            .iter()
            .any(|held| !frontier.less_equal(held.time()))
    }

    /// The held capabilities not `>= frontier`, as one set to stamp a message with.
    pub(crate) fn before(&self, frontier: AntichainRef<'_, T>) -> CapabilitySet<T> {
        self.capabilities
            .iter()
            .filter(|held| !frontier.less_equal(held.time()))
            .cloned()
            .collect()
    }

    /// Replaces the held capabilities with ones for exactly the times of `frontier`, each
    /// derived from a held capability at or before it. Panics if a time has no such capability:
    /// that would be an update the operator never had the right to hold.
    pub(crate) fn downgrade_to(&mut self, frontier: AntichainRef<'_, T>) {
        let mut next = Vec::with_capacity(frontier.len());
        for time in frontier.iter() {
            let held = self
                .capabilities
                .iter()
                .find(|held| held.time().less_equal(time))
                .unwrap_or_else(|| {
                    panic!(
                        "no capability at or before {time:?} among {:?}",
                        self.times()
                    )
                });
            next.push(held.delayed(time));
        }
        self.capabilities = next;
    }

    /// The held times.
    pub(crate) fn times(&self) -> Vec<T> {
        self.capabilities.iter().map(|c| c.time().clone()).collect()
    }
}

/// Sends `batch` downstream under `capabilities`, in a container of its own: `give` would have
/// the container builder reserve its default capacity (8 KiB) for the one batch handle, at
/// every seal.
pub(crate) fn give_batch<T: Time, U: Update>(
    output: &mut OutputBuilderSession<'_, T, CapacityContainerBuilder<Vec<Batch<U>>>>,
    capabilities: &CapabilitySet<T>,
    batch: Batch<U>,
) {
    output
        .session(capabilities)
        .give_container(&mut vec![batch]);
}

/// Builds a batch from a sealed chain of sorted, consolidated chunks.
pub(crate) fn build_batch<U: Update>(
    chain: &Chain<U>,
    description: Description<U::Time>,
    builder: &mut Builder<U>,
) -> Batch<U> {
    builder.expect(chain.len());
    for chunk in chain.chunks() {
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
    let reader = TraceAgent::new(TraceHandle::<(K, V, T, R)>::new(config.spine));
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
                let mut builder = Builder::new();
                let mut held = HeldCapabilities::default();
                let mut lower = Antichain::from_elem(T::minimum());
                move |(input, frontier), output| {
                    input.for_each(|capability, container| {
                        held.insert_stamp(&capability);
                        batcher.push(keyed_view(container));
                    });
                    let frontier = frontier.frontier();
                    if lower.borrow() == frontier {
                        return;
                    }
                    debug_assert!(PartialOrder::less_equal(&lower.borrow(), &frontier));
                    let description = Description::new(lower.clone(), frontier.to_owned());
                    if held.any_before(frontier) {
                        let retired = held.before(frontier);
                        let chain = batcher.seal(frontier);
                        let batch = build_batch(&chain, description, &mut builder);
                        writer.insert(batch.clone());
                        announcer.announce_batch(&batch);
                        give_batch(output, &retired, batch);
                        // Inside a loop, the least time of the updates kept for later rounds, so
                        // that every outer time goes round together (see
                        // `RippleConfig::lockstep_iterations`).
                        let envelope = batcher.frontier();
                        let meet = if lockstep && envelope.len() > 1 {
                            T::meet_of(envelope.iter()).filter(|meet| held.covers(meet))
                        } else {
                            None
                        };
                        match meet {
                            Some(meet) => held.downgrade_to(Antichain::from_elem(meet).borrow()),
                            None => held.downgrade_to(envelope),
                        }
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

    /// The same collection with each `(data, time)` appearing once, its diffs added, zero sums
    /// gone: updates are held until their time completes and then emitted consolidated.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).consolidate().capture_into(&sink));
    ///     input.insert(3);
    ///     input.insert(3);
    ///     input.insert(4);
    ///     input.remove(4);
    ///     input.close();
    /// });
    /// assert_eq!(captured.updates(), vec![(3, 0, 2)]);
    /// ```
    pub fn consolidate(self) -> Self {
        let config = RippleConfig::of(self.scope().worker());
        let inner = self.inner.unary_frontier::<Output<K, T, R>, _, _, _>(
            exchange_by(|key: Ref<'_, K>| K::hash_ref(key)),
            "Consolidate",
            move |_, _| {
                let mut batcher = MergeBatcher::<(K, (), T, R)>::new(config.batcher);
                let mut held = HeldCapabilities::default();
                move |(input, frontier), output| {
                    input.for_each(|capability, container| {
                        held.insert_stamp(&capability);
                        batcher.push(container.view());
                    });
                    let frontier = frontier.frontier();
                    if !held.any_before(frontier) {
                        return;
                    }
                    let retired = held.before(frontier);
                    let chain = batcher.seal(frontier);
                    let mut session = output.session(&retired);
                    for chunk in chain.into_chunks() {
                        let mut container = UpdateContainer {
                            updates: chunk.into_updates(),
                        };
                        session.give_container(&mut container);
                    }
                    drop(session);
                    held.downgrade_to(batcher.frontier());
                }
            },
        );
        Collection { inner }
    }
}

/// Hands `batches`' updates to `ship` in update containers of about [`SHIP_UPDATES`] each,
/// every `(key, val)` turned into a record by `logic`.
pub(crate) fn ship_as_updates<'b, K, V, T, R, D>(
    batches: impl IntoIterator<Item = &'b Batch<(K, V, T, R)>> + Clone,
    logic: &mut impl FnMut(Ref<'_, K>, Ref<'_, V>) -> D,
    mut ship: impl FnMut(&mut UpdateContainer<D, T, R>),
) where
    K: Data,
    V: Data,
    T: Time,
    R: Semigroup,
    D: Data,
{
    // The first container is sized for the batches' updates (at most a shipment's worth) once
    // its first key is in, a sample of the records' sizes: a reduce's output batch in an
    // iteration round is a few hundred updates, which growing from empty reallocated some
    // seven times per column.
    let total: usize = batches.clone().into_iter().map(|batch| batch.len()).sum();
    let mut container = UpdateContainer::<D, T, R>::default();
    let mut sized = false;
    for batch in batches {
        let mut cursor = batch.cursor();
        while let Some(key) = cursor.get_key() {
            while let Some(val) = cursor.get_val() {
                let data = logic(key, val);
                cursor.map_times(|time, diff| container.push_data_ref_owned(&data, time, diff));
                cursor.step_val();
            }
            let held = container.len();
            if !sized && held > 0 {
                let room = total.min(SHIP_UPDATES);
                if room > held {
                    container.updates.reserve_copies(room.div_ceil(held) - 1);
                }
                sized = true;
            }
            if held >= SHIP_UPDATES {
                // The next container starts at this one's size (see `take_reserving`).
                ship(&mut container.take_reserving());
            }
            cursor.step_key();
        }
    }
    if !container.is_empty() {
        ship(&mut container);
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
                            ship_as_updates(batches.iter(), &mut logic, |container| {
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
