//! Exchange: routing updates to the worker that owns their key.
//!
//! [`KeyDistributor`] splits each container by a hash of each update's key into one container
//! per worker. Timely then moves those containers: to a worker of the same process by pointer,
//! to another process through [`ContainerBytes`](timely::dataflow::channels::ContainerBytes)
//! as columnar bytes. With one worker the pact passes containers through untouched.
//!
//! Keys pick their worker by a deterministic hash of the borrowed key ([`ExchangeData`]).
//!
//! Both inputs of a join and every process must route a key to the same worker, so the hash is
//! computed on the borrowed form (`Ref`) that all containers and batches hand out, with a fixed
//! hasher (no random seed).
//!
//! The hasher is Fx's multiply-add over words without Fx's final rotation: its state after the
//! last multiplication has the most entropy in its high bits, which is where
//! [`worker_of`] reads. For dense integer keys (node ids) the high bits of
//! `key * K` also spread consecutive keys evenly, better than independent random choices would.
//! Fx's finished hash, by a multiplication-mixed multiply-high, split them unevenly enough that
//! one worker of bfs spent measurably longer in the reduce than the other; by a remainder, keys
//! that differ only in their high bits all went to one worker (measurements: docs/perf-notes.md,
//! section "Exchange hashing").

use crate::container::{UpdateContainer, SEND_UPDATES};
use columnar::{Len, Ref};
use ripple_updates::{Data, Semigroup, Time, Updates};
use std::hash::{Hash, Hasher};
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
                // doubling, column by column, cost a large share of the split (see
                // docs/perf-notes.md, section "Exchange hashing").
                buffer.updates = Updates::with_capacity_for(view);
            }
            while !positions.is_empty() {
                let room = SEND_UPDATES.saturating_sub(buffer.len()).max(1);
                let (now, later) = positions.split_at(room.min(positions.len()));
                buffer.updates.extend_gather(view, now);
                positions = later;
                if buffer.len() >= SEND_UPDATES {
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

/// Data whose borrowed form can be hashed: keys of arrangements, joins and reductions.
///
/// Implemented for every [`Data`] type whose `Ref` is `Hash`: integers, tuples, `String`,
/// `Vec<u8>`, and derived structs with `#[columnar(derive(Hash))]`.
pub trait ExchangeData: Data {
    /// The routing hash of a borrowed item; its high bits are the well-mixed ones.
    fn hash_ref(item: Ref<'_, Self>) -> u64;
}

impl<D: Data> ExchangeData for D
where
    for<'a> Ref<'a, D>: Hash,
{
    #[inline]
    fn hash_ref(item: Ref<'_, Self>) -> u64 {
        let mut hasher = RouteHasher::default();
        item.hash(&mut hasher);
        hasher.finish()
    }
}

/// Fx's multiplier (odd, with its bits spread).
const K: u64 = 0xf135_7aea_2e62_a9c5;

/// Each word is added to the state, which is then multiplied by [`K`]; `finish` returns the
/// state as it is.
#[derive(Default)]
struct RouteHasher {
    state: u64,
}

impl RouteHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.state = self.state.wrapping_add(word).wrapping_mul(K);
    }
}

impl Hasher for RouteHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.state
    }
}

/// The worker of `peers` that a routing hash picks: the hash scaled into `[0, peers)` by a
/// multiplication that keeps its high bits, where [`ExchangeData::hash_ref`] is well mixed. (A
/// remainder was a 64-bit division per update, a large share of the split's time; see
/// docs/perf-notes.md, section "Exchange hashing".) Every pact and process must agree on it:
/// this is the one place that maps hashes to workers.
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
    use super::ExchangeData;
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
