//! The capabilities an operator holds for the updates it keeps, and sending a batch under a
//! set of them.
//!
//! Operators that hold updates back (arrange, consolidate, reduce) keep capabilities for exactly the lower envelope of the times they still hold, minted
//! sparingly from the stamps of the messages they receive; when they send, they send under
//! the held capabilities the sent times retire.

use ripple_trace::Batch;
use ripple_updates::{Antichain, AntichainRef, Time, Update};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::OutputBuilderSession;
use timely::dataflow::operators::{Capability, CapabilitySet, InputCapability};

/// Capabilities for the lower envelope of the times an operator still holds updates at.
pub(crate) struct HeldCapabilities<T: Time> {
    capabilities: Vec<Capability<T>>,
}

impl<T: Time> Default for HeldCapabilities<T> {
    fn default() -> Self {
        Self {
            capabilities: Vec::new(),
        }
    }
}

impl<T: Time> HeldCapabilities<T> {
    /// Adds `capability` unless a held one is already at or before it; drops held ones after it.
    pub(crate) fn insert(&mut self, capability: Capability<T>) {
        if !self.covers(capability.time()) {
            self.hold(capability);
        }
    }

    /// Holds the times of a message's stamp as [`Self::insert`] does, but mints a capability
    /// (for output 0) only for the times no held one covers: messages mostly arrive at times
    /// already held, and every capability minted and dropped is progress traffic that timely
    /// must sort out.
    pub(crate) fn insert_stamp(&mut self, capability: &InputCapability<T>) {
        for time in capability.stamp().iter() {
            if !self.covers(time) {
                self.hold(capability.delayed(time, 0));
            }
        }
    }

    /// True when a held capability is at or before `time`.
    pub(crate) fn covers(&self, time: &T) -> bool {
        self.capabilities
            .iter()
            .any(|held| held.time().less_equal(time))
    }

    /// Adds `capability`, which no held one covers, dropping the held ones after it.
    fn hold(&mut self, capability: Capability<T>) {
        self.capabilities
            .retain(|held| !capability.time().less_equal(held.time()));
        self.capabilities.push(capability);
    }

    /// True when some held capability is for a time not `>= frontier`: work may be due.
    pub(crate) fn any_before(&self, frontier: AntichainRef<'_, T>) -> bool {
        self.capabilities
            .iter()
            .any(|held| !frontier.less_equal(held.time()))
    }

    /// The held capabilities not `>= frontier`, as one set to stamp a message with.
    pub(crate) fn before(&self, frontier: AntichainRef<'_, T>) -> CapabilitySet<T> {
        self.capabilities
            .iter()
            .filter(|held| !frontier.less_equal(held.time()))
            .cloned()
            .collect()
    }

    /// Replaces the held capabilities with ones for exactly the times of `frontier`, each
    /// derived from a held capability at or before it. Panics if a time has no such capability:
    /// that would be an update the operator never had the right to hold.
    pub(crate) fn downgrade_to(&mut self, frontier: AntichainRef<'_, T>) {
        let mut next = Vec::with_capacity(frontier.len());
        for time in frontier.iter() {
            let held = self
                .capabilities
                .iter()
                .find(|held| held.time().less_equal(time))
                .unwrap_or_else(|| {
                    panic!(
                        "no capability at or before {time:?} among {:?}",
                        self.times()
                    )
                });
            next.push(held.delayed(time));
        }
        self.capabilities = next;
    }

    /// Downgrades to `pending`, the least times the operator still holds updates at; with
    /// `hold_meet`, to their meet instead where a held capability covers it, so that the
    /// updates pending at several incomparable times (the outer times of a loop's rounds) go
    /// on together. This is the lockstep rule of [`crate::RippleConfig::lockstep_iterations`],
    /// the one place it is written.
    pub(crate) fn downgrade_holding(&mut self, pending: AntichainRef<'_, T>, hold_meet: bool) {
        if hold_meet && pending.len() > 1 {
            if let Some(meet) = T::meet_of(pending.iter()).filter(|meet| self.covers(meet)) {
                self.downgrade_to(Antichain::from_elem(meet).borrow());
                return;
            }
        }
        self.downgrade_to(pending);
    }

    /// The held times.
    pub(crate) fn times(&self) -> Vec<T> {
        self.capabilities.iter().map(|c| c.time().clone()).collect()
    }
}

/// Sends `batch` downstream under `capabilities`, in a container of its own: `give` would have
/// the container builder reserve its default capacity (8 KiB) for the one batch handle, at
/// every seal.
pub(crate) fn give_batch<T: Time, U: Update>(
    output: &mut OutputBuilderSession<'_, T, CapacityContainerBuilder<Vec<Batch<U>>>>,
    capabilities: &CapabilitySet<T>,
    batch: Batch<U>,
) {
    output
        .session(capabilities)
        .give_container(&mut vec![batch]);
}
