//! Importing an arrangement into another dataflow of the same worker: a source operator
//! that replays the trace's batches, then the writer's new batches and progress, as its own
//! stream of batches.

use super::agent::{Event, ImportQueue, TraceAgent};
use super::Arranged;
use crate::capabilities::give_batch;
use ripple_trace::Batch;
use ripple_updates::{Data, Semigroup, Time};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::CapabilitySet;
use timely::dataflow::Scope;

impl<K: Data, V: Data, T: Time, R: Semigroup> TraceAgent<K, V, T, R> {
    /// The arrangement in another dataflow (of this worker): first the batches the trace holds
    /// now, then every batch the writer adds, with the writer's progress.
    ///
    /// ```
    /// use ripple_dataflow::{Captured, InputSession};
    /// let captured = Captured::new();
    /// let sink = captured.clone();
    /// timely::execute_directly(move |worker| {
    ///     let mut people = InputSession::<u64, (u64, String)>::new();
    ///     let agent = worker.dataflow(|scope| people.to_collection(scope).arrange_by_key().trace);
    ///     people.insert((1, "ada".to_string()));
    ///     people.advance_to(1).unwrap();
    ///     worker.step_while(|| agent.handle.upper().less_equal(&0));
    ///
    ///     // A second dataflow reads the same arrangement.
    ///     let mut queries = InputSession::<u64, (u64, ())>::new();
    ///     worker.dataflow(|scope| {
    ///         let people = agent.import(scope);
    ///         queries
    ///             .to_collection(scope)
    ///             .arrange_by_key()
    ///             .join_core(people, |id, (), name| (*id, String::from_utf8_lossy(name).into_owned()))
    ///             .capture_into(&sink);
    ///     });
    ///     queries.insert((1, ()));
    /// });
    /// assert_eq!(captured.consolidated(), vec![((1, "ada".to_string()), 0, 1)]);
    /// ```
    pub fn import<'scope>(&self, scope: Scope<'scope, T>) -> Arranged<'scope, K, V, T, R> {
        let agent = self.clone();
        let stream = source::<_, CapacityContainerBuilder<Vec<Batch<(K, V, T, R)>>>, _, _>(
            scope,
            "ImportTrace",
            move |capability, info| {
                let queue = Rc::new(RefCell::new(ImportQueue {
                    events: VecDeque::new(),
                    activator: scope.activator_for(Rc::clone(&info.address)),
                }));
                {
                    let mut queue = queue.borrow_mut();
                    let snapshot = agent.handle.snapshot();
                    for batch in snapshot.batches() {
                        queue.events.push_back(Event::Batch(batch.clone()));
                    }
                    queue
                        .events
                        .push_back(Event::Progress(agent.handle.upper()));
                }
                agent.listeners.borrow_mut().push(Rc::downgrade(&queue));
                let mut capabilities = CapabilitySet::from_elem(capability);
                move |output| {
                    let mut queue = queue.borrow_mut();
                    while let Some(event) = queue.events.pop_front() {
                        match event {
                            Event::Batch(batch) => {
                                if !capabilities.is_empty() {
                                    give_batch(output, &capabilities, batch);
                                }
                            }
                            Event::Progress(upper) => capabilities.downgrade(upper.iter()),
                        }
                    }
                }
            },
        );
        Arranged {
            stream,
            trace: TraceAgent {
                imported: true,
                ..self.clone()
            },
        }
    }
}
