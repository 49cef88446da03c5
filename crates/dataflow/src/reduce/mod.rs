//! Reduce: per key, a function of the accumulated values, maintained as the input changes.
//!
//! The operator reads an arrangement and writes its own. Each activation processes the interval
//! `[lower, upper)` of times that has become complete: `upper` is the last batch boundary of the
//! input trace not beyond the input frontier, or the upper of the last input batch received if
//! that is further, and for an arrangement of the same dataflow the trace's own upper (see
//! `ReduceState::next_interval` in `shell.rs`). The keys to visit are those of the batches
//! received for the interval and those with deferred times now inside it, read from both a
//! window at a time in key order (`keys.rs`: never all of them at once) and looked up in sorted
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
//! A visit reads its key's histories from the traces afresh, although inside an iteration
//! most visits are to keys the previous activation visited, whose histories it had in hand.
//! Keeping the histories between activations measured slower, not faster: advanced and
//! consolidated at every visit, the keeping cost more than the lookups it saved (more
//! instructions); copied as they came, consolidated only when doubled, the longer
//! unconsolidated histories cost the per-key sweep as much as the lookups saved (equal
//! instructions, slower in time), and on a big graph at big steps neither gained
//! (measurements: docs/perf-notes.md, section "Reduce: histories kept between activations
//! (rejected)"). What is kept is smaller: for keys whose new times follow every time of their
//! histories, as when one outer time runs many rounds, the sums of the histories by value
//! (`totals`), which then stand in for them, so a key whose value changes at each of many
//! rounds costs each round its new updates, not its whole history.
//!
//! Keeping them *instead of* the traces is another matter, where nobody else reads the
//! arrangements (a reduction of a collection): with each key's histories held by the operator
//! in columns found through a hash of the key, there is no input batcher, no merges in either
//! trace and no lookups. A prototype of that ran bfs with far fewer instructions on small steps
//! but more on big ones (long histories are rewritten as they grow, and every update is hashed
//! and sorted by hash), and on a big graph its state (times stored plainly) peaked near
//! differential's heap, where this operator stays near half of it (measurements:
//! docs/perf-notes.md, section "Reduce: hashed-reduce prototype (rejected)").

mod chain_sweep;
mod deferred;
mod key;
mod keys;
mod replay;
mod segmented_sweep;
mod shell;
mod totals;
mod visit;

use crate::arrange::{send_as_updates, Arranged, TraceAgent};
use crate::capabilities::give_batch;
use crate::collection::{Collection, Output};
use crate::config::RippleConfig;
use crate::exchange::ExchangeData;
use columnar::Ref;
use ripple_trace::Batch;
use ripple_updates::{Abelian, Data, Semigroup, Time};
use shell::{ReduceSettings, ReduceState};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::{Operator, OutputBuilderSession};
use timely::dataflow::operators::CapabilitySet;
use timely::dataflow::Stream;

/// What the reduce operator makes: the stream it sends downstream and its output trace.
type ReduceOutput<'scope, K, V, T, R, C> = (Stream<'scope, T, C>, TraceAgent<K, V, T, R>);

/// The container builder of a stream of batches.
type BatchBuilder<K, V, T, R> = CapacityContainerBuilder<Vec<Batch<(K, V, T, R)>>>;

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
                send_as_updates([batch], &mut record, |container| {
                    session.give_container(container)
                });
            },
        );
        Collection { inner }
    }

    /// The reduce operator, sending each output batch downstream with `send`: as a batch
    /// ([`Self::reduce_core`]), or as update containers where a collection is all that is
    /// wanted (one operator fewer in every round than arranging, then reading the batches).
    pub(crate) fn reduce_operator<V2, R2, CB>(
        self,
        name: &str,
        mut logic: impl FnMut(Ref<'_, K>, &[(Ref<'_, V>, R)], &mut Vec<(V2, R2)>) + 'static,
        mut send: impl FnMut(&Batch<(K, V2, T, R2)>, &mut OutputBuilderSession<'_, T, CB>, &CapabilitySet<T>)
            + 'static,
    ) -> ReduceOutput<'scope, K, V2, T, R2, CB::Container>
    where
        V2: Data,
        R2: Semigroup + Abelian,
        CB: timely::ContainerBuilder,
    {
        let scope = self.stream.scope();
        let config = RippleConfig::of(scope.worker());
        let settings = ReduceSettings {
            hold_meets: config.holds_meets(&scope.addr()) && scope.peers() > 1,
            local_input: !self.trace.imported,
            probe_run: config.probe_run,
        };
        let reader = TraceAgent::new(config.trace_handle::<(K, V2, T, R2)>());
        let mut state = ReduceState::new(
            settings,
            self.trace.handle.clone(),
            reader.handle.clone(),
            reader.clone_without_holds(),
            config.storage.clone(),
        );
        let stream = self
            .stream
            .unary_frontier::<CB, _, _, _>(Pipeline, name, move |_, _| {
                move |(input, frontier), output| {
                    input.for_each(|capability, batches| {
                        let capabilities = capability.retain_stamp(0);
                        for batch in batches.drain(..) {
                            state.receive(batch, capabilities.clone());
                        }
                    });
                    state.activate(frontier.frontier(), &mut logic, |batch, retired| {
                        send(batch, output, retired)
                    });
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
