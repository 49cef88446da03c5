//! Reduce: per key, a function of the accumulated values, maintained as the input changes.
//!
//! The operator reads an arrangement and writes its own. Each activation processes the interval
//! `[lower, upper)` of times that has become complete: `upper` is the last batch boundary of the
//! input trace not beyond the input frontier. The keys to visit are those of the batches
//! received for the interval and those with deferred times now inside it, looked up in sorted
//! runs (one batched lookup per trace and run, read in step key by key). For each key the
//! input history through `lower`, its new updates in `[lower, upper)` (kept apart: they seed
//! the times to examine only while they do not cancel out) and the output history (from the
//! operator's own trace) go to `key::reduce_key`, whose corrections become one output batch
//! for `[lower, upper)`, inserted into the output trace and sent downstream. Keys are visited in
//! order, so the corrections, each key's sorted once its visit is done, go straight to a batch
//! builder: no batcher sorts them again (in bfs, slightly fewer instructions, and time and peak
//! memory within a percent; see docs/perf-notes.md, section "Reduce: corrections straight to
//! the builder"). Times at or beyond `upper` that will need attention are kept, with
//! capabilities, until their interval comes: as one list of `(key, time)` sorted by key, which
//! each activation rewrites in a single pass beside its walk over the keys (the entries of keys
//! it does not visit carry over as they are).
//!
//! Every visit reads its key's histories from the traces afresh, although inside an iteration
//! most visits are to keys the previous activation visited, whose histories it had in hand.
//! Keeping them between activations measured slower, not faster: advanced and consolidated at
//! every visit, the keeping cost more than the lookups it saved (more instructions); copied as
//! they came, consolidated only when doubled, the longer unconsolidated histories cost the
//! per-key sweep as much as the lookups saved (equal instructions, slower in time), and on a big
//! graph at big steps neither gained (measurements: docs/perf-notes.md, section "Reduce:
//! histories kept between activations (rejected)").
//!
//! Keeping them *instead of* the traces is another matter, where nobody else reads the
//! arrangements (a reduction of a collection): with each key's histories held by the operator
//! in columns found through a hash of the key, there is no input batcher, no merges in either
//! trace and no lookups. A prototype of that ran bfs with far fewer instructions on small steps
//! but more on big ones (long histories are rewritten as they grow, and every update is hashed
//! and sorted by hash), and on a big graph its state (times stored plainly) peaked near
//! differential's heap, where this operator stays near half of it (measurements:
//! docs/perf-notes.md, section "Reduce: hashed-reduce prototype (rejected)").

mod chain;
mod key;
mod replay;
mod segments;
mod visit;

use crate::arrange::{ship_as_updates, Arranged, TraceAgent};
use crate::capabilities::{give_batch, HeldCapabilities};
use crate::collection::{Collection, Output};
use crate::config::RippleConfig;
use crate::exchange::ExchangeData;
use crate::recycle::recycle;
use columnar::{Borrow, Columnar, Index, Push, Ref};
use key::{reduce_key, KeyScratch};
use ripple_trace::{
    Batch, Builder, Description, LookupScratch, TraceCursor, TraceHandle, TraceSnapshot,
};
use ripple_updates::consolidate::consolidate_triples;
use ripple_updates::search::gallop;
use ripple_updates::{Abelian, Antichain, Data, PartialOrder, Semigroup, Time, Update, Updates};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::{Operator, OutputBuilderSession};
use timely::dataflow::operators::CapabilitySet;
use timely::dataflow::Stream;
use visit::{Hooks, Visit};

/// Output corrections are handed to the builder in pieces of about this many updates, so the
/// gathering buffer kept between activations stays small.
const PRODUCED_FLUSH: usize = 1 << 16;

/// What the reduce operator makes: the stream it ships and its output trace.
type Shipped<'scope, K, V, T, R, C> = (Stream<'scope, T, C>, TraceAgent<K, V, T, R>);

/// The container builder of a stream of batches.
type BatchBuilder<K, V, T, R> = CapacityContainerBuilder<Vec<Batch<(K, V, T, R)>>>;

/// A received input batch waiting for its interval, with the capabilities it arrived under.
type Queued<K, V, T, R> = (Batch<(K, V, T, R)>, CapabilitySet<T>);

impl<'scope, K, V, T, R> Arranged<'scope, K, V, T, R>
where
    K: ExchangeData,
    V: Data,
    T: Time,
    R: Semigroup,
{
    /// Maintains, for each key, `logic(key, input, output)`: `input` is the key's accumulated
    /// `(value, multiplicity)` pairs (sorted by value, none zero, never empty), and `logic`
    /// pushes the key's output `(value, multiplicity)` pairs into `output`. Returns the output
    /// arranged by key.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         input
    ///             .to_collection(scope)
    ///             .arrange_by_key()
    ///             // The number of distinct values per key.
    ///             .reduce_core("Distinct values", |_key, input, output| output.push((input.len() as u64, 1i64)))
    ///             .as_collection()
    ///             .capture_into(&sink)
    ///     });
    ///     input.insert((1, 10));
    ///     input.insert((1, 10));
    ///     input.insert((1, 11));
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 2), 0, 1)]);
    /// ```
    pub fn reduce_core<V2, R2>(
        self,
        name: &str,
        logic: impl FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>) + 'static,
    ) -> Arranged<'scope, K, V2, T, R2>
    where
        V2: Data,
        R2: Semigroup + Abelian,
    {
        let (stream, trace) = self.reduce_operator::<V2, R2, BatchBuilder<K, V2, T, R2>>(
            name,
            logic,
            |batch, output, capabilities| give_batch(output, capabilities, batch.clone()),
        );
        Arranged { stream, trace }
    }

    /// The least value of each key (among values with positive multiplicity), arranged: what
    /// a loop can set an [`crate::ArrangedVariable`] to. [`Collection::min`] as an arrangement.
    pub fn min(self) -> Arranged<'scope, K, V, T, i64>
    where
        R: Ord + From<i8>,
    {
        self.reduce_core("Min", |_key, input, output| least_positive(input, output))
    }

    /// [`Self::reduce_core`] for when only the output collection is wanted: each output
    /// `(key, val)` becomes a record by `record`, and the output arrangement stays internal.
    pub(crate) fn reduce_collection<V2, R2, D>(
        self,
        name: &str,
        logic: impl FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>) + 'static,
        mut record: impl FnMut(Ref<'_, K>, Ref<'_, V2>) -> D + 'static,
    ) -> Collection<'scope, T, D, R2>
    where
        V2: Data,
        R2: Semigroup + Abelian,
        D: Data,
    {
        let (inner, _trace) = self.reduce_operator::<V2, R2, Output<D, T, R2>>(
            name,
            logic,
            move |batch, output, capabilities| {
                let mut session = output.session(capabilities);
                ship_as_updates([batch], &mut record, |container| {
                    session.give_container(container)
                });
            },
        );
        Collection { inner }
    }

    /// The reduce operator, shipping each output batch downstream with `ship`: as a batch
    /// ([`Self::reduce_core`]), or as update containers where a collection is all that is
    /// wanted (one operator fewer in every round than arranging, then reading the batches).
    pub(crate) fn reduce_operator<V2, R2, CB>(
        self,
        name: &str,
        mut logic: impl FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>) + 'static,
        mut ship: impl FnMut(&Batch<(K, V2, T, R2)>, &mut OutputBuilderSession<'_, T, CB>, &CapabilitySet<T>)
            + 'static,
    ) -> Shipped<'scope, K, V2, T, R2, CB::Container>
    where
        V2: Data,
        R2: Semigroup + Abelian,
        CB: timely::ContainerBuilder,
    {
        let config = RippleConfig::of(self.stream.scope().worker());
        let lockstep =
            config.holds_meets(&self.stream.scope().addr()) && self.stream.scope().peers() > 1;
        let mut input_trace = self.trace.handle.clone();
        let local_input = !self.trace.imported;
        let reader = TraceAgent::new(TraceHandle::<(K, V2, T, R2)>::new(config.spine));
        let mut output_trace = reader.handle.clone();
        let announcer = reader.clone_without_holds();

        let stream = self
            .stream
            .unary_frontier::<CB, _, _, _>(Pipeline, name, move |_, _| {
                let mut lower = Antichain::from_elem(<T as timely::progress::Timestamp>::minimum());
                // The upper of the last input batch received.
                let mut received =
                    Antichain::from_elem(<T as timely::progress::Timestamp>::minimum());
                // Received batches not yet processed, with their capabilities.
                let mut queued: Vec<Queued<K, V, T, R>> = Vec::new();
                // Capabilities for the deferred times.
                let mut held = HeldCapabilities::<T>::default();
                // Deferred times as `(key, time)`, sorted, to be taken up when `upper`
                // passes them; and the list an activation writes for the next one.
                let mut deferred: Vec<(K, T)> = Vec::new();
                let mut next_deferred: Vec<(K, T)> = Vec::new();
                // One key's deferred times still beyond `upper`, with those its pass defers
                // (its times now due go to `key_times`).
                let mut later_times: Vec<T> = Vec::new();
                // The keys to visit in an activation, sorted and distinct.
                let mut keys: Vec<K> = Vec::new();
                let mut key_times: Vec<T> = Vec::new();
                // Corrections in output order: keys are visited in order, and each key's
                // corrections are sorted and consolidated once its visit is done. So they go
                // straight to the builder, without a batcher to sort them again.
                let mut produced = Updates::<(K, V2, T, R2)>::default();
                let mut key_output: Vec<(V2, T, R2)> = Vec::new();
                let mut builder = Builder::new();
                let mut lookups: [LookupScratch; 3] = Default::default();
                // The per-key buffers, kept between activations (their items borrow
                // from an activation's batches; see `crate::recycle`).
                let mut spare = Spare::<V, V2, T, R, R2>::default();
                let probe_run = config.probe_run.max(1);
                move |(input, frontier), output| {
                    input.for_each(|capability, batches| {
                        let capabilities = capability.retain_stamp(0);
                        for batch in batches.drain(..) {
                            received.clone_from(&batch.description().upper);
                            queued.push((batch, capabilities.clone()));
                        }
                    });

                    // The interval to process ends at the last input batch boundary that
                    // is not beyond the input frontier, or at the upper of the last batch
                    // received, if that is further: the arrangement sends a batch only once
                    // everything before its upper is in the trace, and the frontier that
                    // says so reaches this operator only at the end of the worker's step.
                    // Going by the batches saves a step per iteration round. An arrangement
                    // of this dataflow sends every batch with updates as it inserts it, so
                    // all of its trace is complete: the batches not received are empty
                    // advances of its upper, which the frontier can be slow to confirm (it
                    // counts other workers' arrangements, whose held meets of outer times
                    // and rounds can leave it behind this worker's; waiting for it then can
                    // wait for this very reduce).
                    let mut through = input_trace.snapshot().into_batches();
                    let complete = through
                        .iter()
                        .take_while(|batch| {
                            let upper = &batch.description().upper;
                            local_input
                                || PartialOrder::less_equal(&upper.borrow(), &frontier.frontier())
                                || PartialOrder::less_equal(upper, &received)
                        })
                        .count();
                    through.truncate(complete);
                    let Some(upper) = through
                        .last()
                        .map(|batch| batch.description().upper.clone())
                    else {
                        return;
                    };
                    if upper == lower {
                        return;
                    }
                    // The batches through `lower` hold the history, the rest the interval's
                    // new updates. The spine keeps the two apart: our physical compaction
                    // frontier is `lower`, so no merge spans it.
                    let split = through.partition_point(|batch| {
                        PartialOrder::less_equal(&batch.description().upper, &lower)
                    });
                    assert!(
                        through
                            .get(split)
                            .is_none_or(|batch| batch.description().lower == lower),
                        "reduce: an input batch spans the interval's lower bound {lower:?}"
                    );
                    let new_snapshot = TraceSnapshot::new(through.split_off(split));
                    let history_snapshot = TraceSnapshot::new(through);
                    let output_snapshot = output_trace.snapshot();

                    // Keys to visit: those of the new updates ...
                    let mut capabilities = std::mem::take(&mut held);
                    keys.clear();
                    queued.retain(|(batch, caps)| {
                        if !PartialOrder::less_equal(&batch.description().upper, &upper) {
                            return true;
                        }
                        for capability in caps.iter() {
                            capabilities.insert(capability.clone());
                        }
                        let mut cursor = batch.cursor();
                        while let Some(key) = cursor.get_key() {
                            keys.push(K::into_owned(key));
                            cursor.step_key();
                        }
                        false
                    });
                    // ... and those with deferred times now inside the interval.
                    Extend::extend(
                        &mut keys,
                        deferred
                            .iter()
                            .filter(|(_, time)| !upper.less_equal(time))
                            .map(|(key, _)| key.clone()),
                    );
                    keys.sort_unstable();
                    keys.dedup();
                    // The walk below writes the next deferred list in one pass, in order:
                    // entries of keys it does not visit move over as they are, a visited
                    // key's entries still beyond `upper` merge with those its pass defers.
                    next_deferred.clear();
                    let mut deferred_read = 0;

                    // The keys as a column, so cursors can seek with borrowed keys.
                    let mut key_column = <K as Columnar>::Container::default();
                    for key in keys.iter() {
                        key_column.push(key);
                    }
                    let key_column = key_column.borrow();

                    let mut history_cursor = history_snapshot.cursor();
                    let mut new_cursor = new_snapshot.cursor();
                    let mut output_cursor = output_snapshot.cursor();
                    let Spare {
                        scratch,
                        input_history,
                        new_updates,
                        mut output_history,
                    } = std::mem::take(&mut spare);
                    let mut scratch = scratch.recycle();
                    let mut input_history = recycle(input_history);
                    let mut new_updates = recycle(new_updates);
                    let mut run_start = 0;
                    while run_start < keys.len() {
                        // One batched lookup per trace for a run of keys (each batch walked
                        // once, the cursors not re-merged after every seek); the hits come
                        // back key by key, so only one key's histories are held at a time.
                        let run_end = keys.len().min(run_start + probe_run);
                        let probes =
                            columnar::Slice::new(run_start as u64, run_end as u64, key_column);
                        let [history_lookup, new_lookup, output_lookup] = &mut lookups;
                        let mut history_hits =
                            HitStream::start(&mut history_cursor, probes, history_lookup);
                        let mut new_hits = HitStream::start(&mut new_cursor, probes, new_lookup);
                        let mut output_hits =
                            HitStream::start(&mut output_cursor, probes, output_lookup);
                        for (probe, key) in keys[run_start..run_end].iter().enumerate() {
                            let key_ref = key_column.get(run_start + probe);
                            // Entries of keys before this one are not due (every key
                            // with a due entry is visited): they carry over. Visited keys
                            // are dense among the deferred ones, so that run is usually
                            // empty or short: a gallop from the front finds its end.
                            let skipped = gallop(deferred_read, deferred.len(), |index| {
                                deferred[index].0 < *key
                            });
                            next_deferred.extend_from_slice(&deferred[deferred_read..skipped]);
                            deferred_read = skipped;
                            key_times.clear();
                            later_times.clear();
                            while let Some((_, time)) = deferred
                                .get(deferred_read)
                                .filter(|(other, _)| other == key)
                            {
                                if upper.less_equal(time) {
                                    later_times.push(time.clone());
                                } else {
                                    key_times.push(time.clone());
                                }
                                deferred_read += 1;
                            }
                            let kept = later_times.len();
                            input_history.clear();
                            history_hits.gather(probe, &mut input_history, |v| v);
                            new_updates.clear();
                            new_hits.gather(probe, &mut new_updates, |v| v);
                            output_history.clear();
                            output_hits.gather(probe, &mut output_history, V2::into_owned);
                            let visit = &mut Visit {
                                history: &mut input_history,
                                batch: &mut new_updates,
                                output: &mut output_history,
                                upper: upper.borrow(),
                            };
                            let hooks = &mut Hooks::new(
                                |input, output| logic(key_ref, input, output),
                                |val: &V2, time: &T, diff: &R2| {
                                    key_output.push((val.clone(), time.clone(), diff.clone()))
                                },
                                |time| later_times.push(time.clone()),
                            );
                            reduce_key(visit, &key_times, &mut scratch, hooks);
                            if later_times.len() > kept {
                                later_times.sort_unstable();
                                later_times.dedup();
                            }
                            Extend::extend(
                                &mut next_deferred,
                                later_times.iter().map(|time| (key.clone(), time.clone())),
                            );
                            if !key_output.is_empty() {
                                consolidate_triples(&mut key_output);
                                for (val, time, diff) in key_output.drain(..) {
                                    produced.push(key, &val, &time, &diff);
                                }
                            }
                            if produced.len() >= PRODUCED_FLUSH {
                                builder.push_view(produced.view());
                                produced.clear();
                            }
                        }
                        run_start = run_end;
                    }
                    debug_assert!(
                        deferred[deferred_read..]
                            .iter()
                            .all(|(_, time)| upper.less_equal(time)),
                        "a key with a due deferred time was not visited"
                    );
                    next_deferred.extend_from_slice(&deferred[deferred_read..]);
                    std::mem::swap(&mut deferred, &mut next_deferred);
                    spare = Spare {
                        scratch: scratch.recycle(),
                        input_history: recycle(input_history),
                        new_updates: recycle(new_updates),
                        output_history: recycle(output_history),
                    };
                    if builder.is_empty() {
                        // The whole batch: its size picks the encoding of its histories.
                        builder.expect(produced.len());
                    }
                    builder.push_view(produced.view());
                    produced.clear();

                    // One batch for the interval, under every capability it retires.
                    let retired = capabilities.before(upper.borrow());
                    let batch = builder.build(Description::new(lower.clone(), upper.clone()));
                    if retired.is_empty() {
                        debug_assert!(batch.is_empty(), "output without a capability");
                        output_trace.advance_upper(upper.clone());
                    } else {
                        output_trace.insert(batch.clone());
                        announcer.announce_batch(&batch);
                        ship(&batch, output, &retired);
                    }
                    announcer.announce_progress(&upper);
                    let mut pending = Antichain::new();
                    for (_, time) in deferred.iter() {
                        pending.insert(time.clone());
                    }
                    capabilities.downgrade_holding(pending.borrow(), lockstep);
                    held = capabilities;

                    // Only times at or beyond `upper` will be read from now on.
                    input_trace.set_logical_compaction(upper.borrow());
                    input_trace.set_physical_compaction(upper.borrow());
                    output_trace.set_logical_compaction(upper.borrow());
                    output_trace.set_physical_compaction(upper.borrow());
                    lower = upper;
                }
            });
        (stream, reader)
    }
}

impl<'scope, K, T, R> Arranged<'scope, K, (), T, R>
where
    K: ExchangeData,
    T: Time,
    R: Semigroup + Ord + From<i8>,
{
    /// Each key with positive multiplicity, once, arranged: what a loop can set an
    /// [`crate::ArrangedVariable`] of `(key, ())` to. [`Collection::distinct`] as an
    /// arrangement of keys.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, (u64, ())>::new();
    ///     worker.dataflow(|scope| {
    ///         let keys = input.to_collection(scope).arrange_by_key().distinct();
    ///         keys.as_keys().capture_into(&sink)
    ///     });
    ///     input.insert((5, ()));
    ///     input.insert((5, ()));
    ///     input.insert((6, ()));
    ///     input.advance_to(1).unwrap();
    ///     input.remove((6, ()));
    /// });
    /// assert_eq!(captured.consolidated(), vec![(5, 0, 1), (6, 0, 1), (6, 1, -1)]);
    /// ```
    pub fn distinct(self) -> Arranged<'scope, K, (), T, i64> {
        self.reduce_core("Distinct", |_key, input, output| {
            let diff: i64 = once_if_positive(&input[0].1);
            if diff != 0 {
                output.push(((), diff));
            }
        })
    }
}

/// The logic of `distinct`: a multiplicity of 1 where `count` is positive, else 0.
fn once_if_positive<R: Ord + From<i8>, R2: From<i8>>(count: &R) -> R2 {
    R2::from(if *count > R::from(0) { 1 } else { 0 })
}

/// The logic of `min`: the least value with a positive multiplicity, once.
fn least_positive<V: Data, R: Ord + From<i8>>(
    input: &[(Ref<'_, V>, R)],
    output: &mut Vec<(V, i64)>,
) {
    if let Some((val, _)) = input.iter().find(|(_, r)| *r > R::from(0)) {
        output.push((V::into_owned(*val), 1));
    }
}

/// The per-key buffers of the reduce operator between activations, typed for `'static`
/// borrows (see [`crate::recycle`]): the history vectors and the scratch's vectors of borrowed
/// items emptied, or let go when they hold room for a huge key's history.
struct Spare<V: Data, V2, T, R, R2> {
    scratch: KeyScratch<'static, V, V2, T, R, R2>,
    input_history: Vec<(Ref<'static, V>, T, R)>,
    new_updates: Vec<(Ref<'static, V>, T, R)>,
    output_history: Vec<(V2, T, R2)>,
}

impl<V: Data, V2, T, R, R2> Default for Spare<V, V2, T, R, R2> {
    fn default() -> Self {
        Self {
            scratch: KeyScratch::default(),
            input_history: Vec::new(),
            new_updates: Vec::new(),
            output_history: Vec::new(),
        }
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
}

impl<'scope, K, V, T, R> Collection<'scope, T, (K, V), R>
where
    K: ExchangeData,
    V: Data,
    T: Time,
    R: Semigroup,
{
    /// Groups by key and maintains `logic(key, input, output)` for each key: `input` holds the
    /// key's `(value, multiplicity)` pairs (sorted, non-zero, never empty) and `logic` pushes
    /// the key's output values with their multiplicities.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| {
    ///         input
    ///             .to_collection(scope)
    ///             .reduce(|_key, input, output| {
    ///                 let sum: u64 = input.iter().map(|(v, r)| **v * *r as u64).sum();
    ///                 output.push((sum, 1i64));
    ///             })
    ///             .capture_into(&sink)
    ///     });
    ///     input.insert((1, 10));
    ///     input.insert((1, 5));
    ///     input.advance_to(1).unwrap();
    ///     input.remove((1, 5));
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 10), 1, 1), ((1, 15), 0, 1), ((1, 15), 1, -1)]);
    /// ```
    pub fn reduce<V2, R2>(
        self,
        logic: impl FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>) + 'static,
    ) -> Collection<'scope, T, (K, V2), R2>
    where
        V2: Data,
        R2: Semigroup + Abelian,
    {
        self.arrange_by_key()
            .reduce_collection("Reduce", logic, |key, val| {
                (K::into_owned(key), V2::into_owned(val))
            })
    }

    /// The least value of each key (among values with positive multiplicity).
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).min().capture_into(&sink));
    ///     input.insert((1, 7));
    ///     input.insert((1, 3));
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 3), 0, 1)]);
    /// ```
    pub fn min(self) -> Collection<'scope, T, (K, V), i64>
    where
        R: Ord + From<i8>,
    {
        self.reduce(|_key, input, output| least_positive(input, output))
    }

    /// The greatest value of each key (among values with positive multiplicity).
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, (u64, u64)>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).max().capture_into(&sink));
    ///     input.insert((1, 7));
    ///     input.insert((1, 3));
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, 7), 0, 1)]);
    /// ```
    pub fn max(self) -> Collection<'scope, T, (K, V), i64>
    where
        R: Ord + From<i8>,
    {
        self.reduce(|_key, input, output| {
            if let Some((val, _)) = input.iter().rev().find(|(_, r)| *r > R::from(0)) {
                output.push((V::into_owned(*val), 1));
            }
        })
    }
}

impl<'scope, K, T, R> Collection<'scope, T, K, R>
where
    K: ExchangeData,
    T: Time,
    R: Semigroup,
{
    /// Each distinct record with its total multiplicity, as `(record, count)` with diff 1.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).count().capture_into(&sink));
    ///     input.insert(5);
    ///     input.insert(5);
    /// });
    /// assert_eq!(captured.consolidated(), vec![((5, 2), 0, 1)]);
    /// ```
    pub fn count(self) -> Collection<'scope, T, (K, R), i64>
    where
        R: Data,
    {
        self.count_core()
    }

    /// [`count`](Self::count) with output diffs of type `R2`.
    pub fn count_core<R2: Semigroup + Abelian + From<i8>>(self) -> Collection<'scope, T, (K, R), R2>
    where
        R: Data,
    {
        self.arrange_by_self().reduce_collection(
            "Count",
            |_key, input, output| output.push((input[0].1.clone(), R2::from(1))),
            |key, count| (K::into_owned(key), R::into_owned(count)),
        )
    }

    /// Each record with multiplicity `logic(record, multiplicity)`, dropped where that is 0.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         // Records that occur at least twice, once each.
    ///         input.to_collection(scope).threshold(|_, count| if *count >= 2 { 1i64 } else { 0 }).capture_into(&sink)
    ///     });
    ///     for x in [1, 1, 2] { input.insert(x); }
    /// });
    /// assert_eq!(captured.consolidated(), vec![(1, 0, 1)]);
    /// ```
    pub fn threshold<R2: Semigroup + Abelian>(
        self,
        mut logic: impl FnMut(Ref<'_, K>, &R) -> R2 + 'static,
    ) -> Collection<'scope, T, K, R2> {
        self.arrange_by_self().reduce_collection(
            "Threshold",
            move |key, input, output| {
                let diff = logic(key, &input[0].1);
                if !diff.is_zero() {
                    output.push(((), diff));
                }
            },
            |key, ()| K::into_owned(key),
        )
    }

    /// Each record with positive multiplicity, once.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).distinct().capture_into(&sink));
    ///     input.insert(5);
    ///     input.insert(5);
    ///     input.insert(6);
    ///     input.advance_to(1).unwrap();
    ///     input.remove(6);
    /// });
    /// assert_eq!(captured.consolidated(), vec![(5, 0, 1), (6, 0, 1), (6, 1, -1)]);
    /// ```
    pub fn distinct(self) -> Collection<'scope, T, K, i64>
    where
        R: Ord + From<i8>,
    {
        self.distinct_core()
    }

    /// [`distinct`](Self::distinct) with output diffs of type `R2`.
    pub fn distinct_core<R2: Semigroup + Abelian + From<i8>>(self) -> Collection<'scope, T, K, R2>
    where
        R: Ord + From<i8>,
    {
        self.threshold(|_, count| once_if_positive(count))
    }
}
