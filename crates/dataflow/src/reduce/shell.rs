//! The reduce operator's state between activations, and what an activation does with it.
//!
//! The timely closure only hands received batches to [`ReduceState::receive`] and calls
//! [`ReduceState::activate`], which finds the interval of times now complete
//! ([`ReduceState::next_interval`]), takes the batches whose keys it visits
//! ([`ReduceState::take_batches`]), visits their keys and those with deferred times in sorted
//! runs ([`ReduceState::visit_keys`]) and seals the interval's output batch
//! ([`ReduceState::seal`]).

use super::deferred::DeferredTimes;
use super::key::{reduce_key, KeyScratch};
use super::keys::KeySources;
use super::totals::{Cover, KeyTotal, Totals, TotalsCursor};
use super::visit::{Hooks, Visit};
use crate::arrange::TraceAgent;
use crate::capabilities::HeldCapabilities;
use crate::recycle::recycle;
use columnar::{Borrow, Columnar, Index, Push, Ref};
use ripple_storage::{HeldBytes, Storage};
use ripple_trace::counts::{self, Count};
use ripple_trace::TraceSnapshot;
use ripple_trace::{Batch, Builder, Description, LookupScratch, TraceCursor, TraceHandle};
use ripple_updates::consolidate::consolidate_time_ordered_triples;
use ripple_updates::{Abelian, Antichain, AntichainRef, Data, PartialOrder, Semigroup, Time};
use ripple_updates::{Update, Updates};
use std::sync::Arc;
use timely::dataflow::operators::CapabilitySet;

/// Output corrections are handed to the builder in pieces of about this many updates, so the
/// gathering buffer kept between activations stays small.
const PRODUCED_FLUSH: usize = 1 << 16;

/// The gathering buffer keeps its allocation between activations only after pieces of at most
/// this many updates, as batch builders do (see `ripple_trace::builder`).
const PRODUCED_KEPT_MAX: usize = 1 << 8;

/// Keys are read from each source in windows of this many probe runs: a window ends with a
/// partial run, and each window costs a cursor per batch, so one run a window made bfs's load
/// of a big graph a few percent slower than collecting every key at once; a window of a few
/// dozen thousand keys is still small beside the millions of a big load (see
/// docs/perf-notes.md, section "Storage: the whole process within its budget").
const WINDOW_RUNS: usize = 16;

/// How a reduce operator runs, fixed when it is built.
pub(super) struct ReduceSettings {
    /// Hold the meet of the pending times rather than each of them (lockstep iterations with
    /// more than one worker; see [`crate::RippleConfig::lockstep_iterations`]).
    pub hold_meets: bool,
    /// The input arrangement belongs to this dataflow: every batch with updates reaches this
    /// operator as its writer inserts it, so all of the trace is complete.
    pub local_input: bool,
    /// Keys per batched lookup.
    pub probe_run: usize,
}

/// A received input batch waiting for its interval, with the capabilities it arrived under.
type Queued<K, V, T, R> = (Batch<(K, V, T, R)>, CapabilitySet<T>);

/// The interval `[lower, upper)` an activation processes, with the input trace split at
/// `lower`: the history before it and the interval's new updates.
pub(super) struct Interval<K: Data, V: Data, T: Time, R: Semigroup> {
    upper: Antichain<T>,
    history: TraceSnapshot<(K, V, T, R)>,
    new: TraceSnapshot<(K, V, T, R)>,
}

/// Everything a reduce operator keeps between activations.
pub(super) struct ReduceState<K: Data, V: Data, T: Time, R: Semigroup, V2: Data, R2: Semigroup> {
    settings: ReduceSettings,
    input_trace: TraceHandle<(K, V, T, R)>,
    output_trace: TraceHandle<(K, V2, T, R2)>,
    /// Tells importers of the output arrangement about its batches and progress.
    announcer: TraceAgent<K, V2, T, R2>,
    /// The lower bound of the next interval.
    lower: Antichain<T>,
    /// The upper of the last input batch received.
    received: Antichain<T>,
    /// Received batches not yet processed, with their capabilities.
    queued: Vec<Queued<K, V, T, R>>,
    /// Capabilities for the deferred times.
    held: HeldCapabilities<T>,
    deferred: DeferredTimes<K, T>,
    /// The deferred times' bytes, reported to the storage tier: they stay in memory whatever
    /// the budget, so batches make room for them.
    deferred_bytes: HeldBytes,
    /// The batches whose keys an activation visits.
    sources: KeySources<K, V, T, R>,
    /// A window of the keys to visit, sorted and distinct.
    keys: Vec<K>,
    corrections: Corrections<K, V2, T, R2>,
    lookups: [LookupScratch; 3],
    /// The per-key buffers, kept between activations (their items borrow from an
    /// activation's batches; see `crate::recycle`).
    buffers: KeyBuffers<'static, V, V2, T, R, R2>,
    /// The last activation's totals, and the room for the next one's.
    totals: Totals<K, V, T, R, V2, R2>,
    next_totals: Totals<K, V, T, R, V2, R2>,
}

impl<K, V, T, R, V2, R2> ReduceState<K, V, T, R, V2, R2>
where
    K: Data,
    V: Data,
    T: Time,
    R: Semigroup,
    V2: Data,
    R2: Semigroup + Abelian,
{
    pub(super) fn new(
        settings: ReduceSettings,
        input_trace: TraceHandle<(K, V, T, R)>,
        output_trace: TraceHandle<(K, V2, T, R2)>,
        announcer: TraceAgent<K, V2, T, R2>,
        storage: Option<Arc<Storage>>,
    ) -> Self {
        let minimum = Antichain::from_elem(<T as timely::progress::Timestamp>::minimum());
        Self {
            settings,
            input_trace,
            output_trace,
            announcer,
            lower: minimum.clone(),
            received: minimum,
            queued: Vec::new(),
            held: HeldCapabilities::default(),
            deferred: DeferredTimes::default(),
            deferred_bytes: HeldBytes::new(storage),
            sources: KeySources::default(),
            keys: Vec::new(),
            corrections: Corrections::default(),
            lookups: Default::default(),
            buffers: KeyBuffers::default(),
            totals: Totals::default(),
            next_totals: Totals::default(),
        }
    }

    /// Queues an input batch for its interval.
    pub(super) fn receive(&mut self, batch: Batch<(K, V, T, R)>, capabilities: CapabilitySet<T>) {
        self.received.clone_from(&batch.description().upper);
        self.queued.push((batch, capabilities));
    }

    /// Processes the interval that has become complete, if any, given the input `frontier`:
    /// `logic` is the reduction, and `send` sends the interval's output batch downstream
    /// under the capabilities it retires.
    pub(super) fn activate<L>(
        &mut self,
        frontier: AntichainRef<'_, T>,
        logic: &mut L,
        send: impl FnOnce(&Batch<(K, V2, T, R2)>, &CapabilitySet<T>),
    ) where
        L: FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>),
    {
        let Some(mut interval) = self.next_interval(frontier) else {
            return;
        };
        let capabilities = self.take_batches(&interval.upper);
        let mut output = self.output_trace.snapshot();
        self.visit_keys(&mut interval, &mut output, logic);
        drop(output);
        self.seal(interval.upper, capabilities, send);
    }

    /// The interval to process: it ends at the last input batch boundary that is not beyond
    /// the input frontier, or at the upper of the last batch received, if that is further.
    /// The arrangement sends a batch only once everything before its upper is in the trace,
    /// and the frontier that says so reaches this operator only at the end of the worker's
    /// step: going by the batches saves a step per iteration round. An arrangement of this
    /// dataflow sends every batch with updates as it inserts it, so all of its trace is
    /// complete: the batches not received are empty advances of its upper, which the frontier
    /// can be slow to confirm (it counts other workers' arrangements, whose held meets of outer
    /// times and rounds can leave it behind this worker's; waiting for it then can wait for
    /// this very reduce).
    fn next_interval(&self, frontier: AntichainRef<'_, T>) -> Option<Interval<K, V, T, R>> {
        let mut through = self.input_trace.snapshot().into_batches();
        let complete = through
            .iter()
            .take_while(|batch| {
                let upper = &batch.description().upper;
                self.settings.local_input
                    || PartialOrder::less_equal(&upper.borrow(), &frontier)
                    || PartialOrder::less_equal(upper, &self.received)
            })
            .count();
        through.truncate(complete);
        let upper = through.last()?.description().upper.clone();
        if upper == self.lower {
            return None;
        }
        // The batches through `lower` hold the history, the rest the interval's new updates.
        // The spine keeps the two apart: our physical compaction frontier is `lower`, so no
        // merge spans it.
        let split = through.partition_point(|batch| {
            PartialOrder::less_equal(&batch.description().upper, &self.lower)
        });
        assert!(
            through
                .get(split)
                .is_none_or(|batch| batch.description().lower == self.lower),
            "reduce: an input batch spans the interval's lower bound {:?}",
            self.lower
        );
        let new = TraceSnapshot::new(through.split_off(split));
        Some(Interval {
            upper,
            history: TraceSnapshot::new(through),
            new,
        })
    }

    /// Takes the batches received for the interval, whose keys it visits (with those that
    /// have deferred times inside it). Returns the capabilities the interval may use: the
    /// held ones and those of the batches taken.
    fn take_batches(&mut self, upper: &Antichain<T>) -> HeldCapabilities<T> {
        let mut capabilities = std::mem::take(&mut self.held);
        let sources = &mut self.sources;
        self.queued.retain(|(batch, caps)| {
            if !PartialOrder::less_equal(&batch.description().upper, upper) {
                return true;
            }
            for capability in caps.iter() {
                capabilities.insert(capability.clone());
            }
            sources.push(batch.clone());
            false
        });
        capabilities
    }

    /// Visits the keys a window at a time (see `super::keys`), each window in runs of
    /// `probe_run`: one batched lookup per trace and run (each
    /// batch walked once, the cursors not re-merged after every seek), the hits read back key
    /// by key, so only one key's histories are held at a time; a key whose totals cover its
    /// new times takes them instead of its histories (see `super::totals`). Each key's
    /// corrections go to `corrections`, its times still to come to `deferred`, its totals to
    /// the next activation.
    fn visit_keys<L>(
        &mut self,
        interval: &mut Interval<K, V, T, R>,
        output: &mut TraceSnapshot<(K, V2, T, R2)>,
        logic: &mut L,
    ) where
        L: FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>),
    {
        // A run's keys as a column, so cursors can seek with borrowed keys.
        let mut key_column = <K as Columnar>::Container::default();
        let stored =
            interval.history.has_stored() || interval.new.has_stored() || output.has_stored();
        self.deferred.begin();
        let totals = std::mem::take(&mut self.totals);
        let mut next_totals = std::mem::take(&mut self.next_totals);
        next_totals.restart(&interval.upper);
        let mut totals_cursor = totals.cursor(&self.lower);
        let probe_run = self.settings.probe_run.max(1);
        let (mut visited, mut read, mut produced) = (0, 0, 0);
        let mut sources = std::mem::take(&mut self.sources);
        let window = probe_run.saturating_mul(WINDOW_RUNS);
        while sources.next_window(&self.deferred, &interval.upper, window, &mut self.keys) {
            visited += self.keys.len();
            for run_start in (0..self.keys.len()).step_by(probe_run) {
                if stored {
                    // Keys are visited in order: the blocks earlier runs pinned are done with
                    // (read again through the cache if needed), so pins never hold more than a
                    // run's blocks, however many keys the interval has.
                    interval.history.unpin_all();
                    interval.new.unpin_all();
                    output.unpin_all();
                }
                let mut cursors = (
                    interval.history.lookup_cursor(),
                    interval.new.lookup_cursor(),
                    output.lookup_cursor(),
                );
                let mut buffers = std::mem::take(&mut self.buffers).recycle();
                let upper = interval.upper.borrow();
                let run_end = self.keys.len().min(run_start + probe_run);
                columnar::Clear::clear(&mut key_column);
                for key in self.keys[run_start..run_end].iter() {
                    key_column.push(key);
                }
                let run_keys = key_column.borrow();
                let probes = columnar::Slice::new(0, (run_end - run_start) as u64, run_keys);
                let [history, new, out] = &mut self.lookups;
                let mut hits = (
                    HitStream::start(&mut cursors.0, probes, history),
                    HitStream::start(&mut cursors.1, probes, new),
                    HitStream::start(&mut cursors.2, probes, out),
                );
                for (probe, key) in self.keys[run_start..run_end].iter().enumerate() {
                    let carried = self.deferred.take_key(
                        key,
                        &interval.upper,
                        &mut buffers.due_times,
                        &mut buffers.later_times,
                    );
                    let key_ref = run_keys.get(probe);
                    let kept = (&totals, &mut totals_cursor);
                    let totalled = buffers.gather(probe, key, &mut hits, kept, upper);
                    read += buffers.input_history.len()
                        + buffers.new_updates.len()
                        + buffers.output_history.len();
                    buffers.visit(key_ref, upper, logic, &mut self.corrections);
                    produced += self.corrections.key.len();
                    if totalled {
                        let corrections = &self.corrections.key;
                        let logic = |input: &_, output: &mut _| logic(key_ref, input, output);
                        buffers.total.finish(corrections, logic);
                        next_totals.push(key, &buffers.total);
                    }
                    self.deferred.defer(key, &mut buffers.later_times, carried);
                    self.corrections.finish_key(key);
                }
                self.buffers = buffers.recycle();
            }
        }
        sources.clear();
        self.sources = sources;
        self.totals = next_totals;
        self.next_totals = totals;
        self.deferred.finish(&interval.upper);
        self.deferred_bytes.report(self.deferred.heap_bytes());
        counts::add(Count::ReduceKeys, visited);
        counts::add(Count::ReduceHistory, read);
        counts::add(Count::ReduceOutputs, produced);
    }

    /// Seals the interval: its output batch goes into the output trace and downstream under
    /// every capability it retires; the capabilities are downgraded to the deferred times
    /// (their meet, in lockstep), and both traces compacted to `upper`, the least time read
    /// from now on.
    fn seal(
        &mut self,
        upper: Antichain<T>,
        mut capabilities: HeldCapabilities<T>,
        send: impl FnOnce(&Batch<(K, V2, T, R2)>, &CapabilitySet<T>),
    ) {
        let retired = capabilities.before(upper.borrow());
        let batch = self
            .corrections
            .build(Description::new(self.lower.clone(), upper.clone()));
        if retired.is_empty() {
            debug_assert!(batch.is_empty(), "output without a capability");
            self.output_trace.advance_upper(upper.clone());
        } else {
            self.output_trace.insert(batch.clone());
            self.announcer.announce_batch(&batch);
            send(&batch, &retired);
        }
        self.announcer.announce_progress(&upper);
        let pending = self.deferred.pending();
        capabilities.downgrade_holding(pending.borrow(), self.settings.hold_meets);
        self.held = capabilities;
        self.input_trace.set_logical_compaction(upper.borrow());
        self.input_trace.set_physical_compaction(upper.borrow());
        self.output_trace.set_logical_compaction(upper.borrow());
        self.output_trace.set_physical_compaction(upper.borrow());
        self.lower = upper;
    }
}

/// One activation's output, in output order, on its way to the interval's batch. Keys are
/// visited in order and each key's corrections are sorted and consolidated once its visit is
/// done, so they go straight to the builder, without a batcher to sort them again.
struct Corrections<K: Data, V2: Data, T: Time, R2: Semigroup> {
    /// The current key's corrections, in the order the visit made them.
    key: Vec<(V2, T, R2)>,
    /// Finished keys' corrections not yet handed to the builder.
    produced: Updates<(K, V2, T, R2)>,
    builder: Builder<(K, V2, T, R2)>,
}

impl<K: Data, V2: Data, T: Time, R2: Semigroup> Default for Corrections<K, V2, T, R2> {
    fn default() -> Self {
        Self {
            key: Vec::new(),
            produced: Updates::default(),
            builder: Builder::new(),
        }
    }
}

impl<K: Data, V2: Data, T: Time, R2: Semigroup> Corrections<K, V2, T, R2> {
    /// Ends `key`'s visit: its corrections, consolidated, join the output.
    fn finish_key(&mut self, key: &K) {
        if !self.key.is_empty() {
            consolidate_time_ordered_triples(&mut self.key);
            for (val, time, diff) in self.key.drain(..) {
                self.produced.push(key, &val, &time, &diff);
            }
        }
        if self.produced.len() >= PRODUCED_FLUSH {
            self.builder.push_view(self.produced.view());
            self.empty_produced();
        }
    }

    /// Empties `produced`, keeping its allocation only if it is small: the corrections of one
    /// big activation, a load's, would otherwise stay allocated for the rest of the run.
    fn empty_produced(&mut self) {
        if self.produced.len() > PRODUCED_KEPT_MAX {
            self.produced = Updates::default();
        } else {
            self.produced.clear();
        }
    }

    /// The batch of everything produced since the last one.
    fn build(&mut self, description: Description<T>) -> Batch<(K, V2, T, R2)> {
        if self.builder.is_empty() {
            // The whole batch: its size picks the encoding of its histories.
            self.builder.expect(self.produced.len());
        }
        self.builder.push_view(self.produced.view());
        self.empty_produced();
        self.builder.build(description)
    }
}

/// One key's buffers, their items borrowed from an activation's batches for `'a`; kept
/// between activations as `'static`, emptied (see `crate::recycle`), or let go when they hold
/// room for a huge key's history.
struct KeyBuffers<'a, V: Data, V2, T, R, R2> {
    scratch: KeyScratch<'a, V, V2, T, R, R2>,
    input_history: Vec<(Ref<'a, V>, T, R)>,
    new_updates: Vec<(Ref<'a, V>, T, R)>,
    output_history: Vec<(V2, T, R2)>,
    /// The key's deferred times inside the interval.
    due_times: Vec<T>,
    /// The key's times at or beyond `upper`: deferred ones still beyond it, then those its
    /// visit defers.
    later_times: Vec<T>,
    /// The key's totals, made over its visit.
    total: KeyTotal<'a, V, T, R, V2, R2>,
}

impl<V: Data, V2, T: Time, R, R2> Default for KeyBuffers<'_, V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            scratch: KeyScratch::default(),
            input_history: Vec::new(),
            new_updates: Vec::new(),
            output_history: Vec::new(),
            due_times: Vec::new(),
            later_times: Vec::new(),
            total: KeyTotal::default(),
        }
    }
}

/// The three lookups of a run of keys: input history, new updates, output history.
type Hits<'c, 'a, 'o, 's, K, V, T, R, V2, R2> = (
    HitStream<'c, 'a, 's, (K, V, T, R)>,
    HitStream<'c, 'a, 's, (K, V, T, R)>,
    HitStream<'c, 'o, 's, (K, V2, T, R2)>,
);

impl<'a, V, V2, T, R, R2> KeyBuffers<'a, V, V2, T, R, R2>
where
    V: Data,
    V2: Data,
    T: Time,
    R: Semigroup,
    R2: Semigroup + Abelian,
{
    /// The same buffers for borrows of another lifetime.
    fn recycle<'b>(self) -> KeyBuffers<'b, V, V2, T, R, R2> {
        KeyBuffers {
            scratch: self.scratch.recycle(),
            input_history: recycle(self.input_history),
            new_updates: recycle(self.new_updates),
            output_history: recycle(self.output_history),
            due_times: self.due_times,
            later_times: self.later_times,
            total: self.total.recycle(),
        }
    }

    /// Reads probe `probe` (`key`): its new updates from the run's lookup, its histories from
    /// its totals if they cover its new times, from the lookups otherwise. Returns whether
    /// `self.total` has begun the key's next totals.
    fn gather<K: Data>(
        &mut self,
        probe: usize,
        key: &K,
        hits: &mut Hits<'_, 'a, '_, '_, K, V, T, R, V2, R2>,
        (totals, cursor): (&'a Totals<K, V, T, R, V2, R2>, &mut TotalsCursor),
        upper: AntichainRef<'_, T>,
    ) -> bool {
        self.new_updates.clear();
        hits.1.gather(probe, &mut self.new_updates, |v| v);
        self.input_history.clear();
        self.output_history.clear();
        let cover = totals.cover(cursor, key, &self.new_updates, &self.due_times);
        if let Cover::Sums(index) = cover {
            hits.0.skip(probe);
            hits.2.skip(probe);
            totals.fill(index, &mut self.input_history, &mut self.output_history);
        } else {
            hits.0.gather(probe, &mut self.input_history, |v| v);
            hits.2
                .gather(probe, &mut self.output_history, V2::into_owned);
        }
        self.total.begin(
            &self.input_history,
            &self.new_updates,
            &self.output_history,
            &self.due_times,
            upper,
            cover,
        )
    }

    /// Visits one key with its gathered histories and due times: its corrections go to
    /// `corrections.key`, the times it defers to `later_times`.
    fn visit<K: Data, L>(
        &mut self,
        key: Ref<'_, K>,
        upper: AntichainRef<'_, T>,
        logic: &mut L,
        corrections: &mut Corrections<K, V2, T, R2>,
    ) where
        L: FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>),
    {
        let visit = &mut Visit {
            history: &mut self.input_history,
            batch: &mut self.new_updates,
            output: &mut self.output_history,
            upper,
        };
        let later_times = &mut self.later_times;
        let hooks = &mut Hooks::new(
            |input, output| logic(key, input, output),
            |val: &V2, time: &T, diff: &R2| {
                corrections
                    .key
                    .push((val.clone(), time.clone(), diff.clone()))
            },
            |time| later_times.push(time.clone()),
        );
        reduce_key(visit, &self.due_times, &mut self.scratch, hooks);
    }
}

/// A batched lookup of a run of keys in one trace, read key by key: the probes found come back
/// in order, each with the trace's cursor at its key.
struct HitStream<'c, 'a, 's, U: Update> {
    cursor: &'c mut TraceCursor<'a, U>,
    scratch: &'s mut LookupScratch,
    /// The next probe found, if any is left.
    next: Option<usize>,
}

impl<'c, 'a, 's, K, V, T, R> HitStream<'c, 'a, 's, (K, V, T, R)>
where
    K: Data,
    V: Data,
    T: Time,
    R: Semigroup,
{
    fn start<'p, P>(
        cursor: &'c mut TraceCursor<'a, (K, V, T, R)>,
        probes: P,
        scratch: &'s mut LookupScratch,
    ) -> Self
    where
        P: Index<Ref = Ref<'p, K>> + columnar::Len + Copy,
    {
        cursor.start_lookup(probes, scratch);
        let next = cursor.next_hit_key(scratch);
        Self {
            cursor,
            scratch,
            next,
        }
    }

    /// Appends probe `probe`'s `(value, time, diff)` updates to `updates` (nothing if the trace
    /// lacks the key), each value as `value` makes it (borrowed for input histories, owned for
    /// the output's), batch by batch: values are not merged across batches here, where the
    /// comparisons that would order them mispredict (replay groups them with one stable sort).
    /// Probes must be asked in increasing order.
    fn gather<W>(
        &mut self,
        probe: usize,
        updates: &mut Vec<(W, T, R)>,
        mut value: impl FnMut(Ref<'a, V>) -> W,
    ) {
        debug_assert!(
            self.next.is_none_or(|next| next >= probe),
            "probes asked out of order"
        );
        if self.next != Some(probe) {
            return;
        }
        self.cursor.map_key_updates(|val, time, diff| {
            updates.push((value(val), T::into_owned(time), R::into_owned(diff)))
        });
        self.next = self.cursor.next_hit_key(self.scratch);
    }

    /// Passes probe `probe` without reading its updates.
    fn skip(&mut self, probe: usize) {
        if self.next == Some(probe) {
            self.next = self.cursor.next_hit_key(self.scratch);
        }
    }
}
