//! Exchange: routing updates to the worker that owns their key.
//!
//! [`KeyDistributor`] splits each container by a hash of each update's key into one container
//! per worker. Timely then moves those containers: to a worker of the same process by pointer,
//! to another process through [`ContainerBytes`](timely::dataflow::channels::ContainerBytes)
//! as columnar bytes. With one worker the pact passes containers through untouched.

use crate::container::{UpdateContainer, SHIP_UPDATES};
use columnar::{Len, Ref};
use ripple_updates::{Data, Semigroup, Time, Updates};
use timely::communication::Push;
use timely::dataflow::channels::pact::DistributorPact;
use timely::dataflow::channels::pushers::exchange::Distributor;
use timely::dataflow::channels::{Message, Stamp};

/// Splits containers into one container per worker by `route(data) % peers`.
pub struct KeyDistributor<D: Data, T: Time, R: Semigroup, H> {
    buffers: Vec<UpdateContainer<D, T, R>>,
    /// Per worker, the positions in the container being split of the updates it gets.
    positions: Vec<Vec<u32>>,
    route: H,
}

impl<D: Data, T: Time, R: Semigroup, H> KeyDistributor<D, T, R, H> {
    /// A distributor over `peers` workers.
    pub fn new(route: H, peers: usize) -> Self {
        Self {
            buffers: (0..peers).map(|_| UpdateContainer::default()).collect(),
            positions: vec![Vec::new(); peers],
            route,
        }
    }
}

impl<D, T, R, H> Distributor<UpdateContainer<D, T, R>> for KeyDistributor<D, T, R, H>
where
    D: Data,
    T: Time,
    R: Semigroup,
    H: for<'a> FnMut(Ref<'a, D>) -> u64,
{
    fn partition<T2: Clone, P: Push<Message<T2, UpdateContainer<D, T, R>>>>(
        &mut self,
        container: &mut UpdateContainer<D, T, R>,
        stamp: &Stamp<T2>,
        pushers: &mut [P],
    ) {
        let peers = pushers.len() as u64;
        let view = container.view();
        // Positions first, then each worker's updates copied column by column: one pass per
        // column is cheaper than pushing each update into every column in turn.
        for positions in self.positions.iter_mut() {
            positions.clear();
        }
        for index in 0..view.len() {
            let target = ((self.route)(view.key(index)) % peers) as usize;
            self.positions[target].push(index as u32);
        }
        for (target, positions) in self.positions.iter().enumerate() {
            let buffer = &mut self.buffers[target];
            let mut positions = positions.as_slice();
            if buffer.is_empty() && !positions.is_empty() {
                // A buffer handed to timely comes back empty, without room: growing it by
                // doubling, column by column, cost a third of the split.
                buffer.updates = Updates::with_capacity_for(view);
            }
            while !positions.is_empty() {
                let room = SHIP_UPDATES.saturating_sub(buffer.len()).max(1);
                let (now, later) = positions.split_at(room.min(positions.len()));
                buffer.updates.extend_gather(view, now);
                positions = later;
                if buffer.len() >= SHIP_UPDATES {
                    let mut full = buffer.take_reserving();
                    Message::push_at(&mut full, stamp.clone(), &mut pushers[target]);
                }
            }
        }
        container.clear();
    }

    fn flush<T2: Clone, P: Push<Message<T2, UpdateContainer<D, T, R>>>>(
        &mut self,
        stamp: &Stamp<T2>,
        pushers: &mut [P],
    ) {
        for (buffer, pusher) in self.buffers.iter_mut().zip(pushers.iter_mut()) {
            if !buffer.is_empty() {
                Message::push_at(buffer, stamp.clone(), pusher);
                buffer.clear();
            }
        }
    }

    fn relax(&mut self) {
        for buffer in &mut self.buffers {
            *buffer = UpdateContainer::default();
        }
        for positions in &mut self.positions {
            *positions = Vec::new();
        }
    }
}

/// The pact that routes each update to worker `route(data) % peers`.
pub type ExchangeByKey<D, T, R, H> =
    DistributorPact<Box<dyn FnOnce(usize) -> KeyDistributor<D, T, R, H>>>;

/// The pact that routes each update to worker `route(data) % peers`.
pub fn exchange_by<D, T, R, H>(route: H) -> ExchangeByKey<D, T, R, H>
where
    D: Data,
    T: Time,
    R: Semigroup,
    H: for<'a> FnMut(Ref<'a, D>) -> u64 + 'static,
{
    DistributorPact(Box::new(move |peers| KeyDistributor::new(route, peers)))
}
