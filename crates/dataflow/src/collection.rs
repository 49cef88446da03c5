//! Collections: timely streams of update containers, and the record-at-a-time operators.
//!
//! A [`Collection`] is a multiset of `data` that changes over time. Each update
//! `(data, time, diff)` changes the multiplicity of `data` by `diff` at `time`; the collection at
//! time `t` is the sum of all updates at times `<= t`. Operators here act on each update alone
//! (`map`, `filter`, `negate`, ...), so they need no state and no frontier: they rewrite each
//! container as it passes and send it on under the same capability. [`Collection::consolidate`]
//! is the exception: it holds updates in a merge batcher until their times complete.

use crate::capabilities::HeldCapabilities;
use crate::capture::Captured;
use crate::config::RippleConfig;
use crate::container::{UpdateContainer, SEND_UPDATES};
use crate::exchange::{exchange_by, ExchangeData};
use columnar::Ref;
use ripple_batcher::MergeBatcher;
use ripple_updates::{Abelian, Data, Semigroup, Time};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Concat, Enter, Leave, Probe};
use timely::dataflow::{ProbeHandle, Scope, Stream};
use timely::progress::timestamp::Refines;

/// The output container builder of every collection operator.
pub(crate) type Output<D, T, R> = CapacityContainerBuilder<UpdateContainer<D, T, R>>;

/// A changing multiset of `D`, as a stream of update containers.
pub struct Collection<'scope, T: Time, D: Data, R: Semigroup = i64> {
    /// The timely stream: containers of `(data, time, diff)`, each sent under a capability
    /// that is a lower bound of its times.
    pub inner: Stream<'scope, T, UpdateContainer<D, T, R>>,
}

impl<T: Time, D: Data, R: Semigroup> Clone for Collection<'_, T, D, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<'scope, T: Time, D: Data, R: Semigroup> Collection<'scope, T, D, R> {
    /// Wraps a stream of update containers.
    pub fn new(inner: Stream<'scope, T, UpdateContainer<D, T, R>>) -> Self {
        Self { inner }
    }

    /// The scope the collection lives in.
    pub fn scope(&self) -> Scope<'scope, T> {
        self.inner.scope()
    }

    /// Rewrites each container with `logic`, keeping its capability.
    fn rewrite<D2: Data, R2: Semigroup>(
        self,
        name: &str,
        mut logic: impl FnMut(&mut UpdateContainer<D, T, R>, &mut dyn FnMut(UpdateContainer<D2, T, R2>))
            + 'static,
    ) -> Collection<'scope, T, D2, R2> {
        let inner = self
            .inner
            .unary::<Output<D2, T, R2>, _, _, _>(Pipeline, name, move |_, _| {
                move |input, output| {
                    input.for_each(|capability, container| {
                        let mut session = output.session(&capability);
                        logic(container, &mut |mut produced| {
                            if !produced.is_empty() {
                                session.give_container(&mut produced);
                            }
                        });
                    });
                }
            });
        Collection { inner }
    }

    /// Applies `logic` to each record, owned.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).map(|x| x * 10).capture_into(&sink));
    ///     input.insert(4);
    ///     input.close();
    /// });
    /// assert_eq!(captured.consolidated(), vec![(40, 0, 1)]);
    /// ```
    pub fn map<D2: Data>(
        self,
        mut logic: impl FnMut(D) -> D2 + 'static,
    ) -> Collection<'scope, T, D2, R> {
        self.map_ref(move |data| logic(D::into_owned(data)))
    }

    /// Applies `logic` to each record, borrowed from its column: no owned copy is made.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, String>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).map_ref(|text: &[u8]| text.len() as u64).capture_into(&sink));
    ///     input.insert("four".to_string());
    /// });
    /// assert_eq!(captured.consolidated(), vec![(4, 0, 1)]);
    /// ```
    pub fn map_ref<D2: Data>(
        self,
        mut logic: impl FnMut(Ref<'_, D>) -> D2 + 'static,
    ) -> Collection<'scope, T, D2, R> {
        self.rewrite("Map", move |container, send| {
            send(container.map_data(&mut logic));
        })
    }

    /// Replaces each record with the records `logic` returns, each with the record's time and
    /// diff.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).flat_map(|x| 0..x).capture_into(&sink));
    ///     input.insert(3);
    ///     input.close();
    /// });
    /// assert_eq!(captured.consolidated(), vec![(0, 0, 1), (1, 0, 1), (2, 0, 1)]);
    /// ```
    pub fn flat_map<D2: Data, I: IntoIterator<Item = D2>>(
        self,
        mut logic: impl FnMut(D) -> I + 'static,
    ) -> Collection<'scope, T, D2, R> {
        self.rewrite("FlatMap", move |container, send| {
            let view = container.view();
            let mut output = UpdateContainer::<D2, T, R>::default();
            for index in 0..view.len() {
                for produced in logic(D::into_owned(view.key(index))) {
                    output.push_data_ref_owned(&produced, view.time(index), view.diff(index));
                    if output.len() >= SEND_UPDATES {
                        send(output.take_reserving());
                    }
                }
            }
            send(output);
        })
    }

    /// Keeps the records for which `logic` (given the borrowed record) returns true.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| input.to_collection(scope).filter(|x| *x % 2 == 0).capture_into(&sink));
    ///     for x in 0..5 { input.insert(x); }
    ///     input.close();
    /// });
    /// assert_eq!(captured.consolidated(), vec![(0, 0, 1), (2, 0, 1), (4, 0, 1)]);
    /// ```
    pub fn filter(self, mut logic: impl FnMut(Ref<'_, D>) -> bool + 'static) -> Self {
        self.rewrite("Filter", move |container, send| {
            let view = container.view();
            let mut output = UpdateContainer::<D, T, R>::default();
            for index in 0..view.len() {
                if logic(view.key(index)) {
                    output.push_ref(view.key(index), view.time(index), view.diff(index));
                }
            }
            send(output);
        })
    }

    /// Negates every diff: the collection of retractions.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         let data = input.to_collection(scope);
    ///         data.clone().concat(data.negate()).consolidate().capture_into(&sink)
    ///     });
    ///     input.insert(7);
    ///     input.close();
    /// });
    /// assert!(captured.consolidated().is_empty());
    /// ```
    pub fn negate(self) -> Self
    where
        R: Abelian,
    {
        self.rewrite("Negate", move |container, send| {
            send(std::mem::take(container).negate());
        })
    }

    /// The sum of two collections.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut a = InputSession::<u64, u64>::new();
    ///     let mut b = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         let (a, b) = (a.to_collection(scope), b.to_collection(scope));
    ///         a.clone().concatenate([b, a]).capture_into(&sink)
    ///     });
    ///     a.insert(1);
    ///     b.insert(2);
    /// });
    /// assert_eq!(captured.consolidated(), vec![(1, 0, 2), (2, 0, 1)]);
    /// ```
    pub fn concat(self, other: Self) -> Self {
        Self {
            inner: self.inner.concat(other.inner),
        }
    }

    /// The sum of this collection and every one of `others`.
    pub fn concatenate(self, others: impl IntoIterator<Item = Self>) -> Self {
        others.into_iter().fold(self, Self::concat)
    }

    /// Calls `logic` with each update as it passes, owned, and passes the update on.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         input.to_collection(scope).inspect(|(x, t, r)| println!("{x} at {t}: {r:+}")).capture_into(&sink)
    ///     });
    ///     input.insert(9);
    /// });
    /// assert_eq!(captured.consolidated(), vec![(9, 0, 1)]);
    /// ```
    pub fn inspect(self, mut logic: impl FnMut(&(D, T, R)) + 'static) -> Self {
        self.rewrite("Inspect", move |container, send| {
            for row in container.to_rows() {
                logic(&row);
            }
            send(std::mem::take(container));
        })
    }

    /// A handle that reports which times may still change in this collection.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     let probe = worker.dataflow(|scope| {
    ///         let (probe, data) = input.to_collection(scope).consolidate().probe();
    ///         data.capture_into(&sink);
    ///         probe
    ///     });
    ///     input.insert(3);
    ///     input.advance_to(1).unwrap();
    ///     // Run until time 0 is complete: its output is final.
    ///     worker.step_while(|| probe.less_than(&1));
    ///     assert_eq!(sink.consolidated(), vec![(3, 0, 1)]);
    /// });
    /// assert_eq!(captured.consolidated(), vec![(3, 0, 1)]);
    /// ```
    pub fn probe(self) -> (ProbeHandle<T>, Self) {
        let (handle, inner) = self.inner.probe();
        (handle, Self { inner })
    }

    /// Reports this collection's progress to an existing probe handle.
    pub fn probe_with(self, handle: &ProbeHandle<T>) -> Self {
        Self {
            inner: self.inner.probe_with(handle),
        }
    }

    /// Brings the collection into a nested scope; each time `t` becomes `t`'s inner counterpart
    /// (for `Product<T, u32>`, `(t, 0)`).
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         let data = input.to_collection(scope);
    ///         // A region with the same times; `iterate` uses a nested scope with `Product` times.
    ///         scope.region(|inner| data.enter(inner).map(|x| x + 1).leave(scope)).capture_into(&sink)
    ///     });
    ///     input.insert(1);
    /// });
    /// assert_eq!(captured.consolidated(), vec![(2, 0, 1)]);
    /// ```
    pub fn enter<'inner, T2: Time + Refines<T>>(
        self,
        child: Scope<'inner, T2>,
    ) -> Collection<'inner, T2, D, R> {
        let inner = self.inner.enter(child).unary::<Output<D, T2, R>, _, _, _>(
            Pipeline,
            "Enter",
            |_, _| {
                |input, output| {
                    input.for_each(|capability, container| {
                        let mut entered =
                            std::mem::take(container).map_times(|t| Some(T2::to_inner(t)));
                        output.session(&capability).give_container(&mut entered);
                    });
                }
            },
        );
        Collection { inner }
    }

    /// Returns the collection from a nested scope to its parent; each time becomes its outer
    /// part, so the result accumulates the inner updates over all iterations.
    pub fn leave<'outer, T2: Time>(self, outer: Scope<'outer, T2>) -> Collection<'outer, T2, D, R>
    where
        T: Refines<T2>,
    {
        let inner = self.inner.leave(outer).unary::<Output<D, T2, R>, _, _, _>(
            Pipeline,
            "Leave",
            |_, _| {
                |input, output| {
                    input.for_each(|capability, container| {
                        let mut left =
                            std::mem::take(container).map_times(|t: T| Some(t.to_outer()));
                        output.session(&capability).give_container(&mut left);
                    });
                }
            },
        );
        Collection { inner }
    }

    /// Records every update into `sink` (see [`Captured`]), for tests and tools.
    pub fn capture_into(self, sink: &Captured<D, T, R>) {
        let sink = sink.clone();
        self.inner
            .sink(Pipeline, "Capture", move |(input, _frontier)| {
                input.for_each(|_capability, container| {
                    sink.extend(container);
                });
            });
    }
}

impl<D: Data, T: Time, R: Semigroup> UpdateContainer<D, T, R> {
    /// Appends owned data with a borrowed time and diff.
    #[inline]
    pub(crate) fn push_data_ref_owned(&mut self, data: &D, time: Ref<'_, T>, diff: Ref<'_, R>) {
        use columnar::Push;
        self.updates.keys.push(data);
        self.updates.vals.push(&());
        self.updates.times.push(time);
        self.updates.diffs.push(diff);
    }
}

impl<'scope, K, T, R> Collection<'scope, T, K, R>
where
    K: ExchangeData,
    T: Time,
    R: Semigroup,
{
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
