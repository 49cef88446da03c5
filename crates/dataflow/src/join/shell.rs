//! The join operator's state between activations, and what an activation does with it.
//!
//! The timely closure hands each side's received batches to [`JoinState::receive1`] and
//! [`JoinState::receive2`], then calls [`JoinState::work`] (fueled; it says whether work is
//! left, so that the operator reschedules itself) and [`JoinState::release_traces`].

use super::work::JoinWork;
use crate::collection::Output;
use crate::container::{UpdateContainer, SEND_UPDATES};
use columnar::Ref;
use ripple_storage::Storage;
use ripple_trace::{Batch, LookupScratch, TraceHandle, TraceSnapshot};
use ripple_updates::{Antichain, AntichainRef, Data, Multiply, PartialOrder, Semigroup, Time};
use std::collections::VecDeque;
use timely::dataflow::operators::generic::OutputBuilderSession;
use timely::dataflow::operators::CapabilitySet;

/// Output updates produced per activation before the join yields, in memory.
const FUEL_PER_ACTIVATION: usize = 1 << 20;

/// The least fuel under a storage budget: activations' fixed costs stay small beside it.
const FUEL_UNDER_BUDGET_MIN: usize = 16 * SEND_UPDATES;

const _: () = assert!(FUEL_UNDER_BUDGET_MIN <= FUEL_PER_ACTIVATION);

/// Output updates an activation produces before the join yields (at the end of the probe run
/// under way, so a run's output may go past it). All of an activation's output waits in
/// timely's channel until the next operator takes it, so under a storage budget the fuel is
/// what fills an eighth of the working share (`StorageSettings::working_bytes`) at the
/// output's width (`size_of` its data, time and diff: data that owns heap memory counts only
/// its handle), at least [`FUEL_UNDER_BUDGET_MIN`] and at most [`FUEL_PER_ACTIVATION`]. It is
/// per join and worker, as the share is the process's: with a million updates of output, a
/// join's output was the largest item of a small budget's peak (docs/perf-notes.md, section
/// "Storage: a small budget's peak").
pub(super) fn fuel_per_activation<D, T, R>(storage: Option<&Storage>) -> usize {
    let Some(storage) = storage else {
        return FUEL_PER_ACTIVATION;
    };
    let width = std::mem::size_of::<D>() + std::mem::size_of::<T>() + std::mem::size_of::<R>();
    let fuel = storage.settings().working_bytes / 8 / width.max(1);
    fuel.clamp(FUEL_UNDER_BUDGET_MIN, FUEL_PER_ACTIVATION)
}

/// A received batch still to join, with the capabilities it arrived under.
type Queued<K, VB, VT, T, RB, RT> = (CapabilitySet<T>, JoinWork<K, VB, VT, T, RB, RT>);

/// One side of a join: its trace, how much of it this operator has acknowledged, and its
/// received batches queued against the other side's trace.
struct JoinSide<K: Data, VB: Data, VT: Data, T: Time, RB: Semigroup, RT: Semigroup> {
    /// This side's trace, read by the other side's work. The operator holds its compaction.
    trace: TraceHandle<(K, VB, T, RB)>,
    /// The upper of the last batch of this side received: the batches through it are the
    /// part of this side's trace the other side's new batches join with.
    acknowledged: Antichain<T>,
    /// Received batches still to join, each with the capabilities it arrived under.
    queue: VecDeque<Queued<K, VB, VT, T, RB, RT>>,
    /// The size of the last container sent: a new container is reserved for that many
    /// updates at its first (at most [`SEND_UPDATES`]), so that it does not grow from empty
    /// through a dozen reallocations on every activation.
    expected: usize,
    /// The other side is complete: this trace is no longer held.
    released: bool,
}

impl<K, VB, VT, T, RB, RT> JoinSide<K, VB, VT, T, RB, RT>
where
    K: Data,
    VB: Data,
    VT: Data,
    T: Time,
    RB: Semigroup,
    RT: Semigroup,
{
    fn new(trace: TraceHandle<(K, VB, T, RB)>) -> Self {
        Self {
            trace,
            acknowledged: Antichain::from_elem(<T as timely::progress::Timestamp>::minimum()),
            queue: VecDeque::new(),
            expected: 0,
            released: false,
        }
    }

    /// Queues each received batch against the other side's trace as acknowledged so far, then
    /// counts the batch as acknowledged for this side.
    fn enqueue(
        &mut self,
        batches: &mut Vec<Batch<(K, VB, T, RB)>>,
        capabilities: CapabilitySet<T>,
        other: &JoinSide<K, VT, VB, T, RT, RB>,
    ) {
        // The other side's acknowledged frontier does not move while this side's message is
        // read, so one snapshot serves every batch of the message.
        let through = other.acknowledged_snapshot();
        for batch in batches.drain(..) {
            self.acknowledged.clone_from(&batch.description().upper);
            if !batch.is_empty() && !through.is_empty() {
                let work = JoinWork::new(batch, through.clone());
                self.queue.push_back((capabilities.clone(), work));
            }
        }
    }

    /// The batches of this side's trace whose upper is at or before its acknowledged frontier.
    fn acknowledged_snapshot(&self) -> TraceSnapshot<(K, VB, T, RB)> {
        let mut batches = self.trace.snapshot().into_batches();
        let through = batches
            .iter()
            .take_while(|batch| {
                PartialOrder::less_equal(&batch.description().upper, &self.acknowledged)
            })
            .count();
        batches.truncate(through);
        TraceSnapshot::new(batches)
    }

    /// Future batches of the other side are at or beyond `other_frontier`: this trace may
    /// forget distinctions before it, and merge its batches through what this operator has
    /// acknowledged. Once the other side is complete this trace is released entirely.
    fn hold_trace(&mut self, other_frontier: AntichainRef<'_, T>) {
        if self.released {
            return;
        }
        self.trace.set_logical_compaction(other_frontier);
        self.trace
            .set_physical_compaction(self.acknowledged.borrow());
        if other_frontier.is_empty() {
            self.trace
                .set_physical_compaction(Antichain::new().borrow());
            self.released = true;
        }
    }

    /// Works through the queue while `fuel` lasts, sending what `produce` makes of each joined
    /// pair under the capabilities of the batch it came from; finished work leaves the queue.
    fn drain<D: Data, R3: Semigroup>(
        &mut self,
        fuel: &mut usize,
        probe_run: usize,
        scratch: &mut LookupScratch,
        output: &mut OutputBuilderSession<'_, T, Output<D, T, R3>>,
        multiply: impl Fn(&RB, &RT) -> R3,
        mut produce: impl FnMut(Ref<'_, K>, Ref<'_, VB>, Ref<'_, VT>) -> D,
    ) {
        let mut container = UpdateContainer::<D, T, R3>::default();
        let expected = &mut self.expected;
        while *fuel > 0 {
            let Some((capabilities, work)) = self.queue.front_mut() else {
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
                    if container.len() >= SEND_UPDATES {
                        *expected = SEND_UPDATES;
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
                self.queue.pop_front();
            }
        }
    }
}

/// Everything a join operator keeps between activations.
pub(super) struct JoinState<K: Data, V1: Data, V2: Data, T: Time, R1: Semigroup, R2: Semigroup> {
    side1: JoinSide<K, V1, V2, T, R1, R2>,
    side2: JoinSide<K, V2, V1, T, R2, R1>,
    scratch: LookupScratch,
    /// Keys per batched lookup.
    probe_run: usize,
    /// Output updates per activation (see [`fuel_per_activation`]).
    fuel: usize,
}

impl<K, V1, V2, T, R1, R2> JoinState<K, V1, V2, T, R1, R2>
where
    K: Data,
    V1: Data,
    V2: Data,
    T: Time,
    R1: Semigroup + Multiply<R2>,
    R2: Semigroup,
    <R1 as Multiply<R2>>::Output: Semigroup,
{
    pub(super) fn new(
        trace1: TraceHandle<(K, V1, T, R1)>,
        trace2: TraceHandle<(K, V2, T, R2)>,
        probe_run: usize,
        fuel: usize,
    ) -> Self {
        Self {
            side1: JoinSide::new(trace1),
            side2: JoinSide::new(trace2),
            scratch: LookupScratch::default(),
            probe_run,
            fuel,
        }
    }

    /// Batches of side 1 meet side 2 as acknowledged before them, and then count as
    /// acknowledged for the batches of side 2 that follow.
    pub(super) fn receive1(
        &mut self,
        batches: &mut Vec<Batch<(K, V1, T, R1)>>,
        capabilities: CapabilitySet<T>,
    ) {
        self.side1.enqueue(batches, capabilities, &self.side2);
    }

    /// As [`Self::receive1`], for side 2.
    pub(super) fn receive2(
        &mut self,
        batches: &mut Vec<Batch<(K, V2, T, R2)>>,
        capabilities: CapabilitySet<T>,
    ) {
        self.side2.enqueue(batches, capabilities, &self.side1);
    }

    /// Joins queued batches for one activation's fuel, sending `logic(key, v1, v2)` for each
    /// matching pair. Returns true while work is left.
    pub(super) fn work<D: Data>(
        &mut self,
        output: &mut OutputBuilderSession<'_, T, Output<D, T, <R1 as Multiply<R2>>::Output>>,
        logic: &mut impl FnMut(Ref<'_, K>, Ref<'_, V1>, Ref<'_, V2>) -> D,
    ) -> bool {
        let mut fuel = self.fuel;
        let (probe_run, scratch) = (self.probe_run, &mut self.scratch);
        self.side1.drain(
            &mut fuel,
            probe_run,
            scratch,
            output,
            |r1: &R1, r2: &R2| r1.multiply(r2),
            &mut *logic,
        );
        self.side2.drain(
            &mut fuel,
            probe_run,
            scratch,
            output,
            |r2: &R2, r1: &R1| r1.multiply(r2),
            |key, v2, v1| logic(key, v1, v2),
        );
        !self.side1.queue.is_empty() || !self.side2.queue.is_empty()
    }

    /// Each side's input frontier bounds what the other side's trace must keep.
    pub(super) fn release_traces(
        &mut self,
        frontier1: AntichainRef<'_, T>,
        frontier2: AntichainRef<'_, T>,
    ) {
        self.side2.hold_trace(frontier1);
        self.side1.hold_trace(frontier2);
    }
}
