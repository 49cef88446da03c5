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

/// Splits containers into one container per worker by [`worker_of`]`(route(data), peers)`.
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
        let peers = pushers.len();
        let view = container.view();
        // Positions first, then each worker's updates copied column by column: one pass per
        // column is cheaper than pushing each update into every column in turn.
        for positions in self.positions.iter_mut() {
            positions.clear();
        }
        for index in 0..view.len() {
            let target = worker_of((self.route)(view.key(index)), peers);
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

/// The worker of `peers` that a routing hash picks: the hash scaled into `[0, peers)` by a
/// multiplication that keeps its high bits, where [`crate::hashing`]'s hash is well mixed. (A
/// remainder was a 64-bit division per update: a third of the split's time in perf with 2
/// workers.) Every pact and process must agree on it: this is the one place that maps hashes
/// to workers.
#[inline]
pub fn worker_of(hash: u64, peers: usize) -> usize {
    ((u128::from(hash) * peers as u128) >> 64) as usize
}

/// The pact that routes each update to worker [`worker_of`]`(route(data), peers)`.
pub type ExchangeByKey<D, T, R, H> =
    DistributorPact<Box<dyn FnOnce(usize) -> KeyDistributor<D, T, R, H>>>;

/// The pact that routes each update to worker [`worker_of`]`(route(data), peers)`.
pub fn exchange_by<D, T, R, H>(route: H) -> ExchangeByKey<D, T, R, H>
where
    D: Data,
    T: Time,
    R: Semigroup,
    H: for<'a> FnMut(Ref<'a, D>) -> u64 + 'static,
{
    DistributorPact(Box::new(move |peers| KeyDistributor::new(route, peers)))
}

#[cfg(test)]
mod tests {
    use super::worker_of;
    use crate::hashing::ExchangeData;
    use proptest::prelude::*;

    /// The share of `keys` that each of `peers` workers gets.
    fn shares(keys: impl Iterator<Item = u64>, peers: usize) -> Vec<f64> {
        let mut counts = vec![0usize; peers];
        let mut total = 0;
        for hash in keys {
            counts[worker_of(hash, peers)] += 1;
            total += 1;
        }
        counts.iter().map(|c| *c as f64 / total as f64).collect()
    }

    /// Dense small keys spread almost exactly evenly (the case of node ids, where an uneven
    /// split is an idle worker); keys that differ only in their high bits, and pairs, spread
    /// evenly too.
    #[test]
    fn keys_spread_evenly() {
        for peers in [2, 3, 4, 7] {
            let even = 1.0 / peers as f64;
            let dense = shares(
                (0..1_000u32).map(|k| <u32 as ExchangeData>::hash_ref(&k)),
                peers,
            );
            for share in &dense {
                assert!(
                    (share - even).abs() < 0.02 * even,
                    "{peers} workers: {dense:?}"
                );
            }
            let high = shares(
                (0..20_000u64).map(|k| <u64 as ExchangeData>::hash_ref(&(k << 40))),
                peers,
            );
            let pairs = shares(
                (0..20_000u32)
                    .map(|k| <(u32, u32) as ExchangeData>::hash_ref((&(k % 7), &(k / 7)))),
                peers,
            );
            let strings = shares(
                (0..20_000u32)
                    .map(|k| <String as ExchangeData>::hash_ref(format!("node-{k}").as_bytes())),
                peers,
            );
            for share in high.iter().chain(&pairs).chain(&strings) {
                assert!(
                    (share - even).abs() < 0.05 * even,
                    "{peers} workers: {high:?} {pairs:?} {strings:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn every_hash_has_a_worker(hash: u64, peers in 1usize..64) {
            prop_assert!(worker_of(hash, peers) < peers);
        }
    }
}
