//! Joins: matching the keys of two arrangements as both change.
//!
//! Each new batch of one side is joined against the other side's trace *as acknowledged so
//! far*: the batches of that side this operator has already received. A pair of batches is
//! therefore joined exactly once, by whichever of the two arrived second. The operator holds
//! the other trace's physical compaction at its acknowledged frontier (so the batches through
//! it stay separable) and its logical compaction at this side's input frontier (every future
//! batch of this side is at or beyond it, and joins with such times are preserved).
//!
//! Work is queued per received batch with the capabilities of its message, and done with a
//! bounded amount of fuel per activation; when fuel runs out the operator reschedules itself.

mod history;
mod work;

use crate::arrange::Arranged;
use crate::collection::{Collection, Output};
use crate::config::RippleConfig;
use crate::container::{UpdateContainer, SHIP_UPDATES};
use crate::exchange::ExchangeData;
use columnar::Ref;
use ripple_trace::{Batch, LookupScratch, TraceHandle, TraceSnapshot};
use ripple_updates::{
    Abelian, Antichain, AntichainRef, Data, Multiply, PartialOrder, Semigroup, Time,
};
use std::collections::VecDeque;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::{Operator, OutputBuilderSession};
use timely::dataflow::operators::CapabilitySet;
use work::JoinWork;

/// Output updates produced per activation before the join yields.
const FUEL_PER_ACTIVATION: usize = 1 << 20;

/// Queued work of one side: batches with the capabilities they arrived under.
type Queue<K, VB, VT, T, RB, RT> = VecDeque<(CapabilitySet<T>, JoinWork<K, VB, VT, T, RB, RT>)>;

/// The batches of `trace` whose upper is at or before `frontier`: the part of the trace this
/// operator has acknowledged.
fn snapshot_through<K: Data, V: Data, T: Time, R: Semigroup>(
    trace: &TraceHandle<(K, V, T, R)>,
    frontier: AntichainRef<'_, T>,
) -> TraceSnapshot<(K, V, T, R)> {
    let mut batches = trace.snapshot().into_batches();
    let through = batches
        .iter()
        .take_while(|batch| {
            PartialOrder::less_equal(&batch.description().upper.borrow(), &frontier)
        })
        .count();
    batches.truncate(through);
    TraceSnapshot::new(batches)
}

/// Queues each received batch of one side against the other side's trace as acknowledged so
/// far, then counts the batch as acknowledged for this side.
fn enqueue<K, VB, VT, T, RB, RT>(
    batches: &mut Vec<Batch<(K, VB, T, RB)>>,
    capabilities: CapabilitySet<T>,
    other: &TraceHandle<(K, VT, T, RT)>,
    other_acknowledged: &Antichain<T>,
    acknowledged: &mut Antichain<T>,
    queue: &mut Queue<K, VB, VT, T, RB, RT>,
) where
    K: Data,
    VB: Data,
    VT: Data,
    T: Time,
    RB: Semigroup,
    RT: Semigroup,
{
    // The other side's acknowledged frontier does not move while this side's message is read,
    // so one snapshot serves every batch of the message.
    let through = snapshot_through(other, other_acknowledged.borrow());
    for batch in batches.drain(..) {
        acknowledged.clone_from(&batch.description().upper);
        if !batch.is_empty() && !through.is_empty() {
            queue.push_back((capabilities.clone(), JoinWork::new(batch, through.clone())));
        }
    }
}

/// Future batches of this side are at or beyond `frontier`: the other side's trace may forget
/// distinctions before it, and merge its batches through what this operator has acknowledged.
/// Once this side is complete the other trace is released entirely (`done`).
fn hold_other_trace<K: Data, V: Data, T: Time, R: Semigroup>(
    other: &mut TraceHandle<(K, V, T, R)>,
    frontier: AntichainRef<'_, T>,
    other_acknowledged: &Antichain<T>,
    done: &mut bool,
) {
    if *done {
        return;
    }
    other.set_logical_compaction(frontier);
    other.set_physical_compaction(other_acknowledged.borrow());
    if frontier.is_empty() {
        other.set_physical_compaction(Antichain::new().borrow());
        *done = true;
    }
}

/// Works through `queue` while `fuel` lasts, sending what `produce` makes of each joined pair
/// under the capabilities of the batch it came from; finished work leaves the queue.
///
/// `expected` carries the size of the last container sent from one call to the next: a new
/// container is reserved for that many updates at its first (at most [`SHIP_UPDATES`]), so
/// that it does not grow from empty through a dozen reallocations on every activation.
#[allow(clippy::too_many_arguments)]
fn drain_queue<K, VB, VT, T, RB, RT, D, R3>(
    queue: &mut Queue<K, VB, VT, T, RB, RT>,
    expected: &mut usize,
    fuel: &mut usize,
    probe_run: usize,
    scratch: &mut LookupScratch,
    output: &mut OutputBuilderSession<'_, T, Output<D, T, R3>>,
    multiply: impl Fn(&RB, &RT) -> R3,
    mut produce: impl FnMut(Ref<'_, K>, Ref<'_, VB>, Ref<'_, VT>) -> D,
) where
    K: Data,
    VB: Data,
    VT: Data,
    T: Time,
    RB: Semigroup,
    RT: Semigroup,
    D: Data,
    R3: Semigroup,
{
    let mut container = UpdateContainer::<D, T, R3>::default();
    while *fuel > 0 {
        let Some((capabilities, work)) = queue.front_mut() else {
            break;
        };
        let mut session = output.session(&*capabilities);
        let finished = work.work(
            fuel,
            probe_run,
            scratch,
            &multiply,
            &mut |key, vb, vt, time, diff| {
                container.push(&produce(key, vb, vt), &time, &diff);
                if container.len() == 1 && *expected > 1 {
                    container.updates.reserve_copies(*expected - 1);
                }
                if container.len() >= SHIP_UPDATES {
                    *expected = SHIP_UPDATES;
                    session.give_container(&mut container.take_reserving());
                }
            },
        );
        if !container.is_empty() {
            *expected = container.len();
            session.give_container(&mut container);
            container.clear();
        }
        drop(session);
        if finished {
            queue.pop_front();
        }
    }
}

impl<'scope, K, V1, T, R1> Arranged<'scope, K, V1, T, R1>
where
    K: Data,
    V1: Data,
    T: Time,
    R1: Semigroup,
{
    /// Joins two arrangements, producing `logic(key, v1, v2)` for each matching pair, at the
    /// join of their times, with the product of their diffs.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut left = InputSession::<u64, (u64, u64)>::new();
    ///     let mut right = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         let left = left.to_collection(scope).arrange_by_key();
    ///         let right = right.to_collection(scope).arrange_by_key();
    ///         // Arrangements can be shared: `left` here could feed other joins too.
    ///         left.join_core(right, |key, a, b| (*key, a + b)).capture_into(&sink)
    ///     });
    ///     left.insert((1, 10));
    ///     right.update_at((1, 5), 3, 1).unwrap();
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 15), 3, 1)]);
    /// ```
    pub fn join_core<V2, R2, D>(
        self,
        other: Arranged<'scope, K, V2, T, R2>,
        mut logic: impl FnMut(Ref<'_, K>, Ref<'_, V1>, Ref<'_, V2>) -> D + 'static,
    ) -> Collection<'scope, T, D, <R1 as Multiply<R2>>::Output>
    where
        V2: Data,
        R2: Semigroup,
        D: Data,
        R1: Multiply<R2>,
    {
        type R3<A, B> = <A as Multiply<B>>::Output;
        let mut trace1 = self.trace.handle.clone();
        let mut trace2 = other.trace.handle.clone();
        let scope = self.stream.scope();
        let probe_run = RippleConfig::of(scope.worker()).probe_run;
        let inner = self
            .stream
            .binary_frontier::<_, Output<D, T, R3<R1, R2>>, _, _, _, _>(
                other.stream,
                Pipeline,
                Pipeline,
                "Join",
                move |_, info| {
                    let activator = scope.activator_for(info.address);
                    let mut acknowledged1 =
                        Antichain::from_elem(<T as timely::progress::Timestamp>::minimum());
                    let mut acknowledged2 = acknowledged1.clone();
                    let mut todo1: Queue<K, V1, V2, T, R1, R2> = VecDeque::new();
                    let mut todo2: Queue<K, V2, V1, T, R2, R1> = VecDeque::new();
                    let mut scratch = LookupScratch::default();
                    let (mut expected1, mut expected2) = (0, 0);
                    let mut done1 = false;
                    let mut done2 = false;
                    move |(input1, frontier1), (input2, frontier2), output| {
                        // Batches of side 1 meet side 2 as acknowledged before them, and then count as
                        // acknowledged for the batches of side 2 that follow.
                        input1.for_each(|capability, batches| {
                            enqueue(
                                batches,
                                capability.retain_stamp(0),
                                &trace2,
                                &acknowledged2,
                                &mut acknowledged1,
                                &mut todo1,
                            );
                        });
                        input2.for_each(|capability, batches| {
                            enqueue(
                                batches,
                                capability.retain_stamp(0),
                                &trace1,
                                &acknowledged1,
                                &mut acknowledged2,
                                &mut todo2,
                            );
                        });

                        let mut fuel = FUEL_PER_ACTIVATION;
                        drain_queue(
                            &mut todo1,
                            &mut expected1,
                            &mut fuel,
                            probe_run,
                            &mut scratch,
                            output,
                            |r1: &R1, r2: &R2| r1.multiply(r2),
                            &mut logic,
                        );
                        drain_queue(
                            &mut todo2,
                            &mut expected2,
                            &mut fuel,
                            probe_run,
                            &mut scratch,
                            output,
                            |r2: &R2, r1: &R1| r1.multiply(r2),
                            |key, v2, v1| logic(key, v1, v2),
                        );
                        if !todo1.is_empty() || !todo2.is_empty() {
                            activator.activate();
                        }

                        // Each side's frontier bounds what the other side's trace must keep.
                        hold_other_trace(
                            &mut trace2,
                            frontier1.frontier(),
                            &acknowledged2,
                            &mut done2,
                        );
                        hold_other_trace(
                            &mut trace1,
                            frontier2.frontier(),
                            &acknowledged1,
                            &mut done1,
                        );
                    }
                },
            );
        Collection { inner }
    }
}

impl<'scope, K, V1, T, R> Collection<'scope, T, (K, V1), R>
where
    K: ExchangeData,
    V1: Data,
    T: Time,
    R: Semigroup,
{
    /// Matches records of the two collections with equal keys: `(key, (v1, v2))` for each
    /// pair, with the product of their multiplicities.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut names = InputSession::<u64, (u64, String)>::new();
    ///     let mut ages = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         let names = names.to_collection(scope);
    ///         let ages = ages.to_collection(scope);
    ///         names.join(ages).capture_into(&sink);
    ///     });
    ///     names.insert((1, "ada".to_string()));
    ///     ages.insert((1, 36));
    ///     ages.insert((2, 41));
    ///     names.advance_to(1).unwrap();
    ///     ages.advance_to(1).unwrap();
    ///     ages.remove((1, 36));
    /// });
    /// assert_eq!(
    ///     captured.consolidated(),
    ///     vec![((1, ("ada".to_string(), 36)), 0, 1), ((1, ("ada".to_string(), 36)), 1, -1)]
    /// );
    /// ```
    pub fn join<V2: Data>(
        self,
        other: Collection<'scope, T, (K, V2), R>,
    ) -> Collection<'scope, T, (K, (V1, V2)), <R as Multiply>::Output>
    where
        R: Multiply,
    {
        self.join_map(other, |key, v1, v2| {
            (K::into_owned(key), (V1::into_owned(v1), V2::into_owned(v2)))
        })
    }

    /// Matches records with equal keys and produces `logic(key, v1, v2)` for each pair.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut left = InputSession::<u64, (u64, u64)>::new();
    ///     let mut right = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         let right = right.to_collection(scope);
    ///         left.to_collection(scope).join_map(right, |_key, a, b| a * b).capture_into(&sink)
    ///     });
    ///     left.insert((1, 3));
    ///     right.insert((1, 4));
    ///     right.insert((2, 5));
    /// });
    /// assert_eq!(captured.consolidated(), vec![(12, 0, 1)]);
    /// ```
    pub fn join_map<V2: Data, R2: Semigroup, D: Data>(
        self,
        other: Collection<'scope, T, (K, V2), R2>,
        logic: impl FnMut(Ref<'_, K>, Ref<'_, V1>, Ref<'_, V2>) -> D + 'static,
    ) -> Collection<'scope, T, D, <R as Multiply<R2>>::Output>
    where
        R: Multiply<R2>,
    {
        self.arrange_by_key()
            .join_core(other.arrange_by_key(), logic)
    }

    /// Keeps the records whose key is in `keys`, multiplied by the key's multiplicity there.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut edges = InputSession::<u64, (u64, u64)>::new();
    ///     let mut keep = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         edges.to_collection(scope).semijoin(keep.to_collection(scope)).capture_into(&sink);
    ///     });
    ///     edges.insert((1, 2));
    ///     edges.insert((3, 4));
    ///     keep.insert(3);
    /// });
    /// assert_eq!(captured.consolidated(), vec![((3, 4), 0, 1)]);
    /// ```
    pub fn semijoin<R2: Semigroup>(
        self,
        keys: Collection<'scope, T, K, R2>,
    ) -> Collection<'scope, T, (K, V1), <R as Multiply<R2>>::Output>
    where
        R: Multiply<R2>,
    {
        self.arrange_by_key()
            .join_core(keys.arrange_by_self(), |key, v1, ()| {
                (K::into_owned(key), V1::into_owned(v1))
            })
    }

    /// Keeps the records whose key is *not* in `keys`: the collection minus its semijoin with
    /// `keys` (so `keys` should be a set, each key with multiplicity 1).
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut edges = InputSession::<u64, (u64, u64)>::new();
    ///     let mut drop = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         edges.to_collection(scope).antijoin(drop.to_collection(scope)).consolidate().capture_into(&sink);
    ///     });
    ///     edges.insert((1, 2));
    ///     edges.insert((3, 4));
    ///     drop.insert(3);
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 2), 0, 1)]);
    /// ```
    pub fn antijoin(self, keys: Collection<'scope, T, K, R>) -> Self
    where
        R: Multiply<Output = R> + Abelian,
    {
        self.clone().concat(self.semijoin(keys).negate())
    }
}
