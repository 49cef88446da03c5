//! One unit of join work: a new batch of one side against a snapshot of the other side's trace.
//!
//! The batch's keys are probed against the snapshot in sorted runs (batched lookups: one
//! forward pass per trace batch per run). For each key found, both histories are gathered and
//! multiplied ([`key_product`]). Work is fueled: a call stops after the run in which its fuel
//! ran out and the next call resumes at the following key, so a huge join yields to the worker.

use super::product::{key_product, KeyUpdates};
use columnar::{Borrow, Clear, ContainerOf, Push, Ref};
use ripple_trace::counts::{self, Count};
use ripple_trace::{Batch, LookupScratch, TraceSnapshot};
use ripple_updates::{Data, Semigroup, Time};

/// A batch still to be joined against a snapshot of the other side.
pub(crate) struct JoinWork<K: Data, VB: Data, VT: Data, T: Time, RB: Semigroup, RT: Semigroup> {
    batch: Batch<(K, VB, T, RB)>,
    trace: TraceSnapshot<(K, VT, T, RT)>,
    next_key: usize,
}

impl<K, VB, VT, T, RB, RT> JoinWork<K, VB, VT, T, RB, RT>
where
    K: Data,
    VB: Data,
    VT: Data,
    T: Time,
    RB: Semigroup,
    RT: Semigroup,
{
    pub(crate) fn new(batch: Batch<(K, VB, T, RB)>, trace: TraceSnapshot<(K, VT, T, RT)>) -> Self {
        Self {
            batch,
            trace,
            next_key: 0,
        }
    }

    /// Joins keys until `fuel` is spent (it may go a run's worth below zero, saturating) or the
    /// batch is done, looking keys up `probe_run` (at least 1) at a time; calls `emit(key, batch
    /// val, trace val, time, diff)`, the diff the sum of `multiply(batch diff, trace diff)` over
    /// the pairs it stands for ([`key_product`]). With stored batches on either side a call
    /// does one run of probes. Returns true when every key is done.
    pub(crate) fn work<R3: Semigroup>(
        &mut self,
        fuel: &mut usize,
        probe_run: usize,
        scratch: &mut LookupScratch,
        multiply: &impl Fn(&RB, &RT) -> R3,
        emit: &mut impl FnMut(Ref<'_, K>, Ref<'_, VB>, Ref<'_, VT>, T, R3),
    ) -> bool {
        let key_count = self.batch.key_count();
        // A stored batch (one its arrangement wrote out) has no key column in memory: the
        // keys of each probe run are copied out of its blocks.
        let mut run_keys = ContainerOf::<K>::default();
        let mut batch_cursor = self.batch.cursor();
        let mut trace_cursor = self.trace.lookup_cursor();
        let mut batch_history = KeyUpdates::<VB, T, RB>::default();
        let mut trace_history = KeyUpdates::<VT, T, RT>::default();
        let mut pairs = Vec::new();
        // With stored batches on either side a call does one run, so that the blocks it
        // pinned are let go before the next (see below).
        let stored = self.batch.is_stored() || self.trace.has_stored();
        let (mut probed, mut matched, mut read, mut emitted) = (0, 0, 0, 0);
        while self.next_key < key_count && *fuel > 0 {
            let lower = self.next_key;
            let upper = (lower + probe_run.max(1)).min(key_count);
            let memory_keys = self.batch.keys();
            let probes = match memory_keys {
                Some(keys) => columnar::Slice::new(lower as u64, upper as u64, keys),
                None => {
                    run_keys.clear();
                    let mut keys = self.batch.cursor_at(lower);
                    for key in lower..upper {
                        run_keys.push(keys.key());
                        if key + 1 < upper {
                            keys.step_key();
                        }
                    }
                    columnar::Slice::new(0, (upper - lower) as u64, run_keys.borrow())
                }
            };
            let mut spent = 0;
            trace_cursor.lookup(probes, scratch, |probe, values| {
                batch_cursor.set_key_index(lower + probe);
                batch_history.clear();
                while let Some(val) = batch_cursor.get_val() {
                    batch_history.push_val(val);
                    batch_cursor.map_times(|time, diff| {
                        batch_history.push_update(T::into_owned(time), RB::into_owned(diff))
                    });
                    batch_cursor.step_val();
                }
                trace_history.clear();
                while let Some(val) = values.get_val() {
                    trace_history.push_val(val);
                    values.map_times(|time, diff| {
                        trace_history.push_update(T::into_owned(time), RT::into_owned(diff))
                    });
                    values.step_val();
                }
                matched += 1;
                read += batch_history.len() + trace_history.len();
                // Every output time is a join with a batch time, so the trace side can be
                // advanced by their meet and consolidated first.
                if let Some(meet) = batch_history.meet() {
                    trace_history.advance_by(&meet);
                }
                let key = values.key();
                spent += 1 + key_product(
                    &mut batch_history,
                    &mut trace_history,
                    multiply,
                    &mut pairs,
                    &mut |vb, vt, time, diff| {
                        emitted += 1;
                        emit(key, vb, vt, time, diff)
                    },
                );
            });
            probed += upper - lower;
            *fuel = fuel.saturating_sub(spent + (upper - lower) / 16);
            self.next_key = upper;
            if stored {
                break;
            }
        }
        counts::add(Count::JoinProbes, probed);
        counts::add(Count::JoinKeys, matched);
        counts::add(Count::JoinHistory, read);
        counts::add(Count::JoinOutputs, emitted);
        drop((
            batch_cursor,
            trace_cursor,
            batch_history,
            trace_history,
            pairs,
        ));
        // Keys are probed in order: the blocks behind the next key are done with, and the
        // trace's are read again from the cache if a later run needs them. Without this, the
        // pins of a big batch joined against a stored trace would hold all of both sides in
        // memory.
        let done = self.batch.block_of_key(self.next_key);
        self.batch.unpin(0..done);
        self.trace.unpin_all();
        self.next_key >= key_count
    }
}
