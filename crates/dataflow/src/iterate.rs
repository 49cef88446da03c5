//! Iteration: collections defined in terms of themselves, in a nested scope.
//!
//! Inside `iterate` times are `Product<T, u32>`: the outer time and a round counter. A
//! [`Variable`] is a feedback edge: what it is `set` to in round `i` is what it holds in round
//! `i + 1`. The feedback edge advances the capability by the step, and the operator before it
//! advances every time inside the containers by the same step, since ripple's containers carry
//! their own times. Iteration stops when a round produces no changes; the arrangements inside
//! the loop (join, reduce, distinct, ...) consolidate, so cancelling updates vanish instead of
//! circulating forever.
//!
//! An [`ArrangedVariable`] is the same edge for arrangements: the batches of the arrangement it
//! is set to (a reduce's output, say) come back with their times advanced, as batches, so the
//! next round reads them without arranging them again.

use crate::arrange::{Arranged, TraceAgent};
use crate::capabilities::give_batch;
use crate::collection::{Collection, Output};
use crate::config::RippleConfig;
use crate::container::UpdateContainer;
use ripple_trace::{Batch, Description};
use ripple_updates::{Abelian, Antichain, Data, Product, Semigroup, Time};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::feedback::Handle;
use timely::dataflow::operators::generic::{Operator, OutputBuilderSession};
use timely::dataflow::operators::{CapabilityTrait, ConnectLoop, Feedback};
use timely::dataflow::scope::Iterative;
use timely::dataflow::Scope;
use timely::progress::timestamp::PathSummary;
use timely::progress::Timestamp;

/// A collection defined recursively: read it as a collection, then `set` its definition.
///
/// ```
/// use ripple_dataflow::{Captured, InputSession, Variable};
/// use ripple_updates::Product;
/// let captured = Captured::new();
/// let sink = captured.clone();
/// timely::execute_directly(move |worker| {
///     let mut input = InputSession::<u64, u64>::new();
///     worker.dataflow(|scope| {
///         let numbers = input.to_collection(scope);
///         // All numbers reachable by halving, defined with a variable.
///         let result = scope.iterative::<u32, _, _>(|inner| {
///             let (variable, halved) = Variable::new_from(numbers.clone().enter(inner), Product::new(0, 1));
///             let next = halved.map(|x| x / 2).concat(numbers.clone().enter(inner)).distinct();
///             variable.set(next.clone());
///             next.leave(scope)
///         });
///         result.capture_into(&sink);
///     });
///     input.insert(10);
/// });
/// let values: Vec<u64> = captured.consolidated().into_iter().map(|(x, _, _)| x).collect();
/// assert_eq!(values, vec![0, 1, 2, 5, 10]);
/// ```
pub struct Variable<'scope, T: Time, D: Data, R: Abelian> {
    feedback: Handle<'scope, T, UpdateContainer<D, T, R>>,
    source: Option<Collection<'scope, T, D, R>>,
    step: T::Summary,
}

impl<'scope, T: Time, D: Data, R: Abelian> Variable<'scope, T, D, R> {
    /// A variable that starts empty, and the collection through which to read it.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession, Variable};
    /// use ripple_updates::Product;
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut input = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         let numbers = input.to_collection(scope);
    ///         // Numbers reachable by halving at least once: round 0 of the variable is empty.
    ///         let result = scope.iterative::<u32, _, _>(|inner| {
    ///             let (variable, reached) = Variable::new(inner, Product::new(0, 1));
    ///             let halved = numbers.clone().enter(inner).concat(reached).map(|x| x / 2).distinct();
    ///             variable.set(halved.clone());
    ///             halved.leave(scope)
    ///         });
    ///         result.capture_into(&sink);
    ///     });
    ///     input.insert(10);
    /// });
    /// let values: Vec<u64> = captured.consolidated().into_iter().map(|(x, _, _)| x).collect();
    /// assert_eq!(values, vec![0, 1, 2, 5]);
    /// ```
    pub fn new(scope: Scope<'scope, T>, step: T::Summary) -> (Self, Collection<'scope, T, D, R>) {
        let (feedback, updates) = scope.feedback(step.clone());
        let variable = Self {
            feedback,
            source: None,
            step,
        };
        (variable, Collection::new(updates))
    }

    /// A variable that starts as `source`, and the collection through which to read it.
    ///
    /// The feedback carries `result - source`, so that after `set(result)` the variable holds
    /// `source` in round 0 and `result` of round `i` in round `i + 1`.
    pub fn new_from(
        source: Collection<'scope, T, D, R>,
        step: T::Summary,
    ) -> (Self, Collection<'scope, T, D, R>) {
        let (feedback, updates) = source.scope().feedback(step.clone());
        let collection = Collection::new(updates).concat(source.clone());
        let variable = Self {
            feedback,
            source: Some(source),
            step,
        };
        (variable, collection)
    }

    /// Defines the variable's next round as `result`, closing the loop.
    ///
    /// One operator advances the times of `result` and of the negated source: every operator
    /// on the cycle is scheduled, and tracked by timely's progress, in every round.
    pub fn set(self, result: Collection<'scope, T, D, R>) {
        let step = self.step;
        let advance = move |container: &mut UpdateContainer<D, T, R>| {
            std::mem::take(container).map_times(|time| step.results_in(&time))
        };
        let stream = match self.source {
            None => result.inner.unary::<Output<D, T, R>, _, _, _>(
                Pipeline,
                "AdvanceTimes",
                move |_, _| {
                    move |input, output| {
                        input.for_each(|capability, container| {
                            give_unless_empty(output, &capability, advance(container));
                        });
                    }
                },
            ),
            Some(source) => result.inner.binary::<_, Output<D, T, R>, _, _, _, _>(
                source.inner,
                Pipeline,
                Pipeline,
                "AdvanceTimes",
                move |_, _| {
                    move |result, source, output| {
                        result.for_each(|capability, container| {
                            give_unless_empty(output, &capability, advance(container));
                        });
                        source.for_each(|capability, container| {
                            give_unless_empty(output, &capability, advance(container).negate());
                        });
                    }
                },
            ),
        };
        stream.connect_loop(self.feedback);
    }
}

/// The container of a stream of batches, and its builder.
type Batches<K, V, T, R> = Vec<Batch<(K, V, T, R)>>;
type BatchBuilder<K, V, T, R> = CapacityContainerBuilder<Batches<K, V, T, R>>;

/// A recursively defined arrangement: read it as an arrangement, then `set` it to one.
///
/// What it is set to in round `i` is what it holds in round `i + 1`; in round 0 it is empty.
/// Unlike a [`Variable`] read through `arrange_by_key`, nothing is re-arranged: each batch of
/// the result comes back with its times advanced by the step (the key and value columns
/// copied as they are), and no exchange separates one round from the next. That takes one
/// operator and one wait for the other workers out of every round of a loop whose result is
/// an arrangement anyway, as a `reduce` makes. The result's keys must be partitioned among
/// workers as whatever the variable meets (a join's other side): arrangements made by
/// `arrange_by_key` and `reduce_core` are.
///
/// ```
/// use ripple_dataflow::{ArrangedVariable, Captured, InputSession};
/// use ripple_updates::Product;
/// let captured = Captured::new();
/// let sink = captured.clone();
/// timely::execute_directly(move |worker| {
///     let mut edges = InputSession::<u64, (u64, u64)>::new();
///     let mut roots = InputSession::<u64, (u64, u32)>::new();
///     worker.dataflow(|scope| {
///         let (edges, roots) = (edges.to_collection(scope), roots.to_collection(scope));
///         // The hops from the roots to each node reached: the least over its paths.
///         let hops = scope.iterative::<u32, _, _>(|inner| {
///             let (variable, reached) = ArrangedVariable::new(inner, Product::new(0, 1));
///             let edges = edges.enter(inner).arrange_by_key();
///             let next = reached
///                 .join_core(edges, |_, hops, next| (*next, hops + 1))
///                 .concat(roots.enter(inner))
///                 .arrange_by_key()
///                 .reduce_core("Least", |_, input, output| output.push((*input[0].0, 1i64)));
///             variable.set(next.clone());
///             next.as_collection().leave(scope)
///         });
///         hops.capture_into(&sink);
///     });
///     roots.insert((1, 0));
///     for (src, dst) in [(1, 2), (2, 3), (1, 3)] {
///         edges.insert((src, dst));
///     }
/// });
/// assert_eq!(captured.consolidated(), vec![((1, 0), 0, 1), ((2, 1), 0, 1), ((3, 1), 0, 1)]);
/// ```
pub struct ArrangedVariable<'scope, K: Data, V: Data, T: Time, R: Semigroup> {
    feedback: Handle<'scope, T, Batches<K, V, T, R>>,
    step: T::Summary,
}

impl<'scope, K: Data, V: Data, T: Time, R: Semigroup> ArrangedVariable<'scope, K, V, T, R> {
    /// A variable that starts empty, and the arrangement through which to read it.
    pub fn new(scope: Scope<'scope, T>, step: T::Summary) -> (Self, Arranged<'scope, K, V, T, R>) {
        let (feedback, batches) = scope.feedback::<Batches<K, V, T, R>>(step.clone());
        let config = RippleConfig::of(scope.worker());
        let reader = TraceAgent::new(config.trace_handle::<(K, V, T, R)>());
        let mut writer = reader.handle.clone();
        let announcer = reader.clone_without_holds();
        // The writer reads nothing: only readers' holds should keep history alive.
        writer.set_logical_compaction(Antichain::new().borrow());
        writer.set_physical_compaction(Antichain::new().borrow());
        // Nothing comes back before the first step: the times it skips are empty (round 0).
        let minimum = Antichain::from_elem(<T as Timestamp>::minimum());
        let skipped: Antichain<T> = step
            .results_in(&<T as Timestamp>::minimum())
            .into_iter()
            .collect();
        writer.insert(Batch::empty(Description::new(minimum, skipped)));
        let stream = batches.unary::<BatchBuilder<K, V, T, R>, _, _, _>(
            Pipeline,
            "ArrangedVariable",
            move |_, _| {
                move |input, output| {
                    input.for_each(|capability, batches| {
                        let capabilities = capability.retain_stamp(0);
                        for batch in batches.drain(..) {
                            // Intervals in which the result had nothing to send left gaps:
                            // they hold no updates, so the trace may pass over them.
                            let lower = &batch.description().lower;
                            if writer.upper() != *lower {
                                writer.advance_upper(lower.clone());
                            }
                            writer.insert(batch.clone());
                            announcer.announce_batch(&batch);
                            announcer.announce_progress(&batch.description().upper);
                            give_batch(output, &capabilities, batch);
                        }
                    });
                }
            },
        );
        let variable = Self { feedback, step };
        (
            variable,
            Arranged {
                stream,
                trace: reader,
            },
        )
    }

    /// Defines the variable's next round as `result`, closing the loop.
    pub fn set(self, result: Arranged<'scope, K, V, T, R>) {
        let step = self.step;
        result
            .stream
            .unary::<BatchBuilder<K, V, T, R>, _, _, _>(Pipeline, "AdvanceBatches", move |_, _| {
                move |input, output| {
                    input.for_each(|capability, batches| {
                        let capabilities = capability.retain_stamp(0);
                        for batch in batches.iter() {
                            let advanced = batch.map_times(|time| step.results_in(time));
                            give_batch(output, &capabilities, advanced);
                        }
                    });
                }
            })
            .connect_loop(self.feedback);
    }
}

/// Sends `container` under `capability`, unless advancing its times left it empty.
fn give_unless_empty<T: Time, D: Data, R: Abelian>(
    output: &mut OutputBuilderSession<'_, T, Output<D, T, R>>,
    capability: &impl CapabilityTrait<T>,
    mut container: UpdateContainer<D, T, R>,
) {
    if !container.is_empty() {
        output.session(capability).give_container(&mut container);
    }
}

impl<'scope, T: Time, D: Data, R: Abelian> Collection<'scope, T, D, R> {
    /// Repeatedly applies `logic` to the collection, starting from itself, until nothing
    /// changes; returns the fixed point.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut edges = InputSession::<u64, (u64, u64)>::new();
    ///     let mut roots = InputSession::<u64, u64>::new();
    ///     worker.dataflow(|scope| {
    ///         let edges = edges.to_collection(scope);
    ///         // Nodes reachable from the roots.
    ///         roots
    ///             .to_collection(scope)
    ///             .iterate(|inner, reached| {
    ///                 let edges = edges.enter(inner);
    ///                 reached
    ///                     .clone()
    ///                     .map(|node| (node, ()))
    ///                     .join_map(edges, |_src, (), dst| *dst)
    ///                     .concat(reached)
    ///                     .distinct()
    ///             })
    ///             .capture_into(&sink);
    ///     });
    ///     roots.insert(1);
    ///     for (src, dst) in [(1, 2), (2, 3), (4, 5)] {
    ///         edges.insert((src, dst));
    ///     }
    /// });
    /// let reached: Vec<u64> = captured.consolidated().into_iter().map(|(x, _, _)| x).collect();
    /// assert_eq!(reached, vec![1, 2, 3]);
    /// ```
    pub fn iterate<F>(self, logic: F) -> Self
    where
        for<'inner> F: FnOnce(
            Iterative<'inner, T, u32>,
            Collection<'inner, Product<T, u32>, D, R>,
        ) -> Collection<'inner, Product<T, u32>, D, R>,
    {
        let outer = self.scope();
        outer.iterative::<u32, _, _>(|inner| {
            let (variable, collection) = Variable::new_from(
                self.enter(inner),
                Product::new(<T as Timestamp>::Summary::default(), 1),
            );
            let result = logic(inner, collection);
            variable.set(result.clone());
            result.leave(outer)
        })
    }
}
