//! Trace handles: shared access to one spine, each reader with its own compaction holds.
//!
//! Several operators (and dataflows) read one arrangement. Each holds a [`TraceHandle`] and says
//! how far it will still read: its *logical* hold (it reads accumulations only at times `>=`
//! it) and its *physical* hold (it needs batches distinct only beyond it). The spine compacts
//! only as far as every handle allows: its frontiers are the meet of all holds (the least
//! elements of their union), recomputed from every handle's holds when one moves or a handle is
//! dropped. A trace has a few handles, and readers move their holds at every activation:
//! counting times in timely's `MutableAntichain` instead cost a couple of percent of bfs's
//! instructions at one update per step (docs/perf-notes.md, section "Trace handles: holds").
//! Dropping a handle releases its holds.

use crate::batch::Batch;
use crate::snapshot::TraceSnapshot;
use crate::spine::{Spine, SpineConfig};
use ripple_storage::Storage;
use ripple_updates::{Antichain, AntichainRef, PartialOrder, Update};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use timely::progress::Timestamp;

/// Which of a handle's two holds.
const LOGICAL: usize = 0;
const PHYSICAL: usize = 1;

struct Shared<U: Update> {
    spine: Spine<U>,
    /// Every live handle's holds, logical then physical, by the handle's slot (`None`: a
    /// dropped handle's slot, free for the next clone).
    holds: Vec<Option<[Antichain<U::Time>; 2]>>,
    /// The meet of one kind of hold, rebuilt at every move and drop (kept for its allocation).
    meet: Antichain<U::Time>,
}

impl<U: Update> Shared<U> {
    /// A slot for a new handle holding `holds`.
    fn add_handle(&mut self, holds: [Antichain<U::Time>; 2]) -> usize {
        match self.holds.iter().position(Option::is_none) {
            Some(slot) => {
                self.holds[slot] = Some(holds);
                slot
            }
            None => {
                self.holds.push(Some(holds));
                self.holds.len() - 1
            }
        }
    }

    /// Moves hold `kind` of the handle in `slot` to `new` and tells the spine the resulting
    /// frontier.
    fn move_hold(&mut self, slot: usize, kind: usize, new: AntichainRef<'_, U::Time>) {
        let hold = &mut self.holds[slot].as_mut().expect("a live handle's slot")[kind];
        hold.clear();
        hold.extend(new.iter().cloned());
        self.update_frontier(kind);
    }

    /// Drops the holds of the handle in `slot` and tells the spine the resulting frontiers.
    fn remove_handle(&mut self, slot: usize) {
        self.holds[slot] = None;
        self.update_frontier(LOGICAL);
        self.update_frontier(PHYSICAL);
    }

    /// Recomputes the meet of every handle's hold `kind` and tells the spine.
    fn update_frontier(&mut self, kind: usize) {
        self.meet.clear();
        for holds in self.holds.iter().flatten() {
            for time in holds[kind].iter() {
                self.meet.insert_ref(time);
            }
        }
        // With no holds left nobody will read again; keep the frontiers where they were rather
        // than advance them to "everything".
        if self.meet.is_empty() {
            return;
        }
        if kind == LOGICAL {
            self.spine.set_logical_compaction(self.meet.borrow());
        } else {
            self.spine.set_physical_compaction(self.meet.borrow());
        }
    }
}

/// A shared reader (and writer) of one trace.
pub struct TraceHandle<U: Update> {
    shared: Rc<RefCell<Shared<U>>>,
    /// This handle's place in the shared holds.
    slot: usize,
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
        Self {
            shared: Rc::new(RefCell::new(Shared {
                spine: Spine::with_storage(config, storage),
                holds: vec![Some([minimum.clone(), minimum.clone()])],
                meet: Antichain::new(),
            })),
            slot: 0,
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
        let kind = if logical { LOGICAL } else { PHYSICAL };
        self.shared
            .borrow_mut()
            .move_hold(self.slot, kind, frontier);
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
        // The same holds again leave the meets where they are.
        let slot = self
            .shared
            .borrow_mut()
            .add_handle([self.logical.clone(), self.physical.clone()]);
        Self {
            shared: Rc::clone(&self.shared),
            slot,
            logical: self.logical.clone(),
            physical: self.physical.clone(),
        }
    }
}

impl<U: Update> Drop for TraceHandle<U> {
    fn drop(&mut self) {
        self.shared.borrow_mut().remove_handle(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ripple_updates::Lattice;
    use timely::order::Product;

    type P = Product<u64, u32>;
    type U = (u64, u64, P, i64);

    /// What a handle does: cloned, dropped, or one of its holds moved forward by joining each
    /// of its times with each time of an antichain (its least elements kept).
    #[derive(Clone, Debug)]
    enum Op {
        Clone(usize),
        Drop(usize),
        Advance(usize, bool, Vec<(u64, u32)>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..4).prop_map(Op::Clone),
            (0usize..4).prop_map(Op::Drop),
            (
                0usize..4,
                any::<bool>(),
                proptest::collection::vec((0u64..6, 0u32..6), 0..3)
            )
                .prop_map(|(handle, logical, times)| Op::Advance(handle, logical, times)),
        ]
    }

    /// The least elements of the union of `holds`.
    fn meet<'a>(holds: impl Iterator<Item = &'a Antichain<P>>) -> Antichain<P> {
        let mut meet = Antichain::new();
        for hold in holds {
            for time in hold.iter() {
                meet.insert_ref(time);
            }
        }
        meet
    }

    proptest! {
        /// Whatever handles are cloned, dropped and moved, the spine's frontiers are the least
        /// elements of the live handles' holds, and stay where they were when no hold is left.
        #[test]
        fn spine_frontiers_are_the_meet_of_live_holds(ops in proptest::collection::vec(op(), 0..40)) {
            let first = TraceHandle::<U>::new(SpineConfig::default());
            let mut handles = vec![first.clone()];
            drop(first);
            let (mut logical, mut physical) = (
                Antichain::from_elem(P::minimum()),
                Antichain::from_elem(P::minimum()),
            );
            let shared = Rc::clone(&handles[0].shared);
            for op in ops {
                match op {
                    Op::Clone(index) if !handles.is_empty() => {
                        let clone = handles[index % handles.len()].clone();
                        handles.push(clone);
                    }
                    Op::Drop(index) if !handles.is_empty() => {
                        handles.remove(index % handles.len());
                    }
                    Op::Advance(index, is_logical, times) if !handles.is_empty() => {
                        let count = handles.len();
                        let handle = &mut handles[index % count];
                        let hold = if is_logical { handle.logical.clone() } else { handle.physical.clone() };
                        let mut new = Antichain::new();
                        for old in hold.iter() {
                            for &(outer, inner) in &times {
                                new.insert(old.join(&Product::new(outer, inner)));
                            }
                        }
                        if is_logical {
                            handle.set_logical_compaction(new.borrow());
                        } else {
                            handle.set_physical_compaction(new.borrow());
                        }
                    }
                    _ => {}
                }
                let expected = [
                    meet(handles.iter().map(|handle| &handle.logical)),
                    meet(handles.iter().map(|handle| &handle.physical)),
                ];
                for (frontier, expected) in [&mut logical, &mut physical].into_iter().zip(expected) {
                    if !expected.is_empty() {
                        *frontier = expected;
                    }
                }
                let shared = shared.borrow();
                prop_assert_eq!(shared.spine.logical_frontier(), logical.borrow());
                prop_assert_eq!(shared.spine.physical_frontier(), physical.borrow());
            }
        }
    }
}
