//! Sharing an arrangement with other dataflows of the same worker.
//!
//! A [`TraceAgent`] is a trace handle plus the list of dataflows that imported it. The arrange
//! operator that writes the trace tells every importer about each new batch and each advance of
//! the trace's upper; an importer's source operator replays them as its own stream of batches,
//! after first sending the batches the trace already held. Operators built on the import read
//! the same trace, through their own handles and holds.

use ripple_trace::{Batch, TraceHandle};
use ripple_updates::{Antichain, Data, Semigroup, Time};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use timely::scheduling::Activator;

/// What an importer learns from the writer, in order.
pub(super) enum Event<K: Data, V: Data, T: Time, R: Semigroup> {
    /// A batch was added.
    Batch(Batch<(K, V, T, R)>),
    /// The trace is complete up to this frontier.
    Progress(Antichain<T>),
}

/// One importer's pending events and how to wake it.
pub(super) struct ImportQueue<K: Data, V: Data, T: Time, R: Semigroup> {
    pub(super) events: VecDeque<Event<K, V, T, R>>,
    pub(super) activator: Activator,
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
    pub(super) listeners: Listeners<K, V, T, R>,
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
}
