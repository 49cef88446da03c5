//! Sharing an arrangement with other dataflows of the same worker.
//!
//! A [`TraceAgent`] is a trace handle plus the list of dataflows that imported it. The arrange
//! operator that writes the trace tells every importer about each new batch and each advance of
//! the trace's upper; an importer's source operator replays them as its own stream of batches,
//! after first sending the batches the trace already held. Operators built on the import read
//! the same trace, through their own handles and holds.

use crate::arrange::{give_batch, Arranged};
use ripple_trace::{Batch, TraceHandle};
use ripple_updates::{Antichain, Data, Semigroup, Time};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::CapabilitySet;
use timely::dataflow::Scope;
use timely::scheduling::Activator;

/// What an importer learns from the writer, in order.
enum Event<K: Data, V: Data, T: Time, R: Semigroup> {
    /// A batch was added.
    Batch(Batch<(K, V, T, R)>),
    /// The trace is complete up to this frontier.
    Progress(Antichain<T>),
}

/// One importer's pending events and how to wake it.
struct ImportQueue<K: Data, V: Data, T: Time, R: Semigroup> {
    events: VecDeque<Event<K, V, T, R>>,
    activator: Activator,
}

type Listeners<K, V, T, R> = Rc<RefCell<Vec<Weak<RefCell<ImportQueue<K, V, T, R>>>>>>;

/// A handle on an arrangement's trace that can outlive its dataflow's construction and be
/// imported into other dataflows of the same worker.
///
/// Like every handle, a kept agent holds the trace's compaction at its own frontiers (the
/// minimal time at first): advance them with `handle.set_logical_compaction` and
/// `handle.set_physical_compaction`, or drop the agent, so the trace can merge and forget.
pub struct TraceAgent<K: Data, V: Data, T: Time, R: Semigroup> {
    /// The trace handle: snapshots, and this agent's compaction holds.
    pub handle: TraceHandle<(K, V, T, R)>,
    listeners: Listeners<K, V, T, R>,
    /// True for an agent of an imported arrangement, whose stream forwards the writer's batches
    /// some time after they enter the trace; false where the writer sends each batch as it
    /// inserts it (the trace then holds no batch with updates the stream has not delivered).
    pub(crate) imported: bool,
}

impl<K: Data, V: Data, T: Time, R: Semigroup> Clone for TraceAgent<K, V, T, R> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
            listeners: Rc::clone(&self.listeners),
            imported: self.imported,
        }
    }
}

impl<K: Data, V: Data, T: Time, R: Semigroup> TraceAgent<K, V, T, R> {
    /// An agent for a trace no dataflow has imported yet.
    pub(crate) fn new(handle: TraceHandle<(K, V, T, R)>) -> Self {
        Self {
            handle,
            listeners: Rc::new(RefCell::new(Vec::new())),
            imported: false,
        }
    }

    /// An agent for announcing only: its handle holds nothing back.
    pub(crate) fn clone_without_holds(&self) -> Self {
        let mut handle = self.handle.clone();
        handle.set_logical_compaction(Antichain::new().borrow());
        handle.set_physical_compaction(Antichain::new().borrow());
        Self {
            handle,
            listeners: Rc::clone(&self.listeners),
            imported: self.imported,
        }
    }

    /// Tells every live importer about a new batch.
    pub(crate) fn announce_batch(&self, batch: &Batch<(K, V, T, R)>) {
        self.announce(|| Event::Batch(batch.clone()));
    }

    /// Tells every live importer that the trace is complete up to `upper`.
    pub(crate) fn announce_progress(&self, upper: &Antichain<T>) {
        self.announce(|| Event::Progress(upper.clone()));
    }

    fn announce(&self, event: impl Fn() -> Event<K, V, T, R>) {
        self.listeners
            .borrow_mut()
            .retain(|listener| match listener.upgrade() {
                Some(queue) => {
                    let mut queue = queue.borrow_mut();
                    queue.events.push_back(event());
                    queue.activator.activate();
                    true
                }
                None => false,
            });
    }

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
