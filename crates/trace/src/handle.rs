//! Trace handles: shared access to one spine, each reader with its own compaction holds.
//!
//! Several operators (and dataflows) read one arrangement. Each holds a [`TraceHandle`] and says
//! how far it will still read: its *logical* hold (it reads accumulations only at times `>=`
//! it) and its *physical* hold (it needs batches distinct only beyond it). The spine compacts
//! only as far as every handle allows: its frontiers are the meet of all holds, tracked with
//! timely's `MutableAntichain`. Dropping a handle releases its holds.

use crate::batch::Batch;
use crate::snapshot::TraceSnapshot;
use crate::spine::{Spine, SpineConfig};
use ripple_storage::Storage;
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use timely::progress::frontier::MutableAntichain;
use timely::progress::Timestamp;

struct Shared<U: Update> {
    spine: Spine<U>,
    logical_holds: MutableAntichain<U::Time>,
    physical_holds: MutableAntichain<U::Time>,
}

impl<U: Update> Shared<U> {
    /// Moves one hold from `old` to `new` and tells the spine the resulting frontier.
    fn move_hold(
        &mut self,
        logical: bool,
        old: AntichainRef<'_, U::Time>,
        new: AntichainRef<'_, U::Time>,
    ) {
        let holds = if logical {
            &mut self.logical_holds
        } else {
            &mut self.physical_holds
        };
        holds.update_iter(
            new.iter()
                .map(|t| (t.clone(), 1))
                .chain(old.iter().map(|t| (t.clone(), -1))),
        );
        let frontier = holds.frontier();
        // With no holds left nobody will read again; keep the frontiers where they were rather
        // than advance them to "everything".
        if frontier.is_empty() {
            return;
        }
        if logical {
            self.spine.set_logical_compaction(frontier);
        } else {
            self.spine.set_physical_compaction(frontier);
        }
    }
}

/// A shared reader (and writer) of one trace.
pub struct TraceHandle<U: Update> {
    shared: Rc<RefCell<Shared<U>>>,
    logical: Antichain<U::Time>,
    physical: Antichain<U::Time>,
}

impl<U: Update> TraceHandle<U> {
    /// A new, empty trace and its first handle, holding both frontiers at the minimal time.
    pub fn new(config: SpineConfig) -> Self {
        Self::with_storage(config, None)
    }

    /// Like [`TraceHandle::new`], with a spine that writes batches out to `storage` when the
    /// process is over its memory budget (see [`Spine::with_storage`]).
    pub fn with_storage(config: SpineConfig, storage: Option<Arc<Storage>>) -> Self {
        let minimum = Antichain::from_elem(U::Time::minimum());
        let mut logical_holds = MutableAntichain::new();
        logical_holds.update_iter([(U::Time::minimum(), 1)]);
        let mut physical_holds = MutableAntichain::new();
        physical_holds.update_iter([(U::Time::minimum(), 1)]);
        Self {
            shared: Rc::new(RefCell::new(Shared {
                spine: Spine::with_storage(config, storage),
                logical_holds,
                physical_holds,
            })),
            logical: minimum.clone(),
            physical: minimum,
        }
    }

    /// Adds a batch to the trace (the arrange operator's job; see [`Spine::insert`]).
    pub fn insert(&self, batch: Batch<U>) {
        self.shared.borrow_mut().spine.insert(batch);
    }

    /// Records that the trace is complete up to `upper` (see [`Spine::advance_upper`]).
    pub fn advance_upper(&self, upper: Antichain<U::Time>) {
        self.shared.borrow_mut().spine.advance_upper(upper);
    }

    /// Grants merges in progress `fuel` units of work.
    pub fn exert(&self, fuel: usize) {
        self.shared.borrow_mut().spine.exert(fuel);
    }

    /// Where the trace's next batch must start: everything before it is complete.
    pub fn upper(&self) -> Antichain<U::Time> {
        self.shared.borrow().spine.upper().to_owned()
    }

    /// This handle's logical hold.
    pub fn logical_compaction(&self) -> AntichainRef<'_, U::Time> {
        self.logical.borrow()
    }

    /// This handle's physical hold.
    pub fn physical_compaction(&self) -> AntichainRef<'_, U::Time> {
        self.physical.borrow()
    }

    /// The trace's logical compaction frontier: the meet of every handle's hold.
    pub fn trace_logical_compaction(&self) -> Antichain<U::Time> {
        self.shared.borrow().spine.logical_frontier().to_owned()
    }

    /// Promises to read only at times `>= frontier` from now on. Panics if `frontier` is not at
    /// or beyond this handle's current hold.
    pub fn set_logical_compaction(&mut self, frontier: AntichainRef<'_, U::Time>) {
        self.advance_hold(true, frontier);
    }

    /// Promises to need batches distinct only beyond `frontier`. Panics if `frontier` is not
    /// at or beyond this handle's current hold.
    pub fn set_physical_compaction(&mut self, frontier: AntichainRef<'_, U::Time>) {
        self.advance_hold(false, frontier);
    }

    fn advance_hold(&mut self, logical: bool, frontier: AntichainRef<'_, U::Time>) {
        let (hold, name) = if logical {
            (&mut self.logical, "logical")
        } else {
            (&mut self.physical, "physical")
        };
        assert!(
            PartialOrder::less_equal(&hold.borrow(), &frontier),
            "a handle's {name} hold cannot move backwards: {hold:?} to {frontier:?}"
        );
        if hold.borrow() == frontier {
            return;
        }
        self.shared
            .borrow_mut()
            .move_hold(logical, hold.borrow(), frontier);
        // Into the old hold's allocation: inside a loop, holds are staircases of two times or
        // more, which an antichain keeps on the heap, and they move at every activation.
        hold.clear();
        hold.extend(frontier.iter().cloned());
    }

    /// A consistent view of the trace's batches, valid however the trace changes afterwards.
    pub fn snapshot(&self) -> TraceSnapshot<U> {
        self.shared.borrow().spine.snapshot()
    }

    /// Merges every admitted batch into one now (see [`Spine::compact`]).
    pub fn compact(&self) {
        self.shared.borrow_mut().spine.compact();
    }

    /// Runs `logic` with the spine (measurements, invariant checks, forcing merges).
    pub fn with_spine<R>(&self, logic: impl FnOnce(&mut Spine<U>) -> R) -> R {
        logic(&mut self.shared.borrow_mut().spine)
    }
}

impl<U: Update> Clone for TraceHandle<U> {
    /// Another handle on the same trace, starting with this handle's holds.
    fn clone(&self) -> Self {
        {
            let mut shared = self.shared.borrow_mut();
            shared
                .logical_holds
                .update_iter(self.logical.iter().map(|t| (t.clone(), 1)));
            shared
                .physical_holds
                .update_iter(self.physical.iter().map(|t| (t.clone(), 1)));
        }
        Self {
            shared: Rc::clone(&self.shared),
            logical: self.logical.clone(),
            physical: self.physical.clone(),
        }
    }
}

impl<U: Update> Drop for TraceHandle<U> {
    fn drop(&mut self) {
        let empty = Antichain::new();
        let mut shared = self.shared.borrow_mut();
        shared.move_hold(true, self.logical.borrow(), empty.borrow());
        shared.move_hold(false, self.physical.borrow(), empty.borrow());
    }
}
