//! Inputs for the trace benchmark, identical for ripple and differential-dataflow.
//!
//! *Build*: `n` updates in `rounds` rounds, round `r` at time `r`. Keys are drawn uniformly from
//! `n / 8` ids (so a key has about eight values), values uniformly from `2^32`, diffs `+1`. A
//! [`TraceKey`] turns a key id into the engine's key: the id itself (`u64`), or a string of 24
//! to 40 bytes that sorts in id order (as in the batcher benchmark).
//!
//! *Lookups*: keys `0..keys`, each with one value (`3 * key`) at the time of the one batch
//! (of `batches`) it is assigned to at random. Probe batches of `size` keys: *random* keys, or
//! a run `start, start + stride, ...` from a random start (the key locality of RocksDB's
//! MultiGet benchmark).

use crate::batcher_inputs::mix;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A key type the benchmark runs, made from a key id.
pub trait TraceKey: Clone + Ord + std::fmt::Debug + 'static {
    /// The name in reports.
    const NAME: &'static str;
    /// The key for id `id`.
    fn from_id(id: u64) -> Self;
    /// A hash of the key, for checksums.
    fn hash(&self) -> u64;
}

impl TraceKey for u64 {
    const NAME: &'static str = "u64 -> u64";
    fn from_id(id: u64) -> Self {
        id
    }
    fn hash(&self) -> u64 {
        mix(0, *self)
    }
}

impl TraceKey for String {
    const NAME: &'static str = "String -> u64";
    fn from_id(id: u64) -> Self {
        let filler = (mix(7, id) % 17) as usize;
        let mut key = format!("{id:024}");
        key.extend(std::iter::repeat_n('x', filler));
        key
    }
    fn hash(&self) -> u64 {
        self.bytes().fold(0, |hash, byte| mix(hash, byte as u64))
    }
}

/// The build input: per round, `(key id, value)` pairs, all at the round's time with diff +1.
pub fn build_rounds(updates: usize, rounds: usize, seed: u64) -> Vec<Vec<(u64, u64)>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let key_ids = (updates / 8).max(1) as u64;
    let per_round = updates.div_ceil(rounds.max(1));
    (0..rounds)
        .map(|round| {
            let count = per_round.min(updates.saturating_sub(round * per_round));
            (0..count)
                .map(|_| (rng.gen_range(0..key_ids), rng.gen_range(0..1u64 << 32)))
                .collect()
        })
        .collect()
}

/// The lookup trace: for each batch, its sorted keys (each key in exactly one batch).
pub fn lookup_batches(keys: u64, batches: usize, seed: u64) -> Vec<Vec<u64>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut assigned = vec![Vec::new(); batches];
    for key in 0..keys {
        assigned[rng.gen_range(0..batches)].push(key);
    }
    assigned
}

/// Key locality of a probe batch.
#[derive(Clone, Copy, Debug)]
pub enum Locality {
    /// Uniformly random keys.
    Random,
    /// `start, start + stride, ...`.
    Stride(u64),
}

impl Locality {
    /// The name in reports.
    pub fn name(self) -> String {
        match self {
            Locality::Random => "random".to_string(),
            Locality::Stride(stride) => format!("stride {stride}"),
        }
    }
}

/// `count` probe batches of `size` sorted keys each (duplicates of random draws removed).
pub fn probe_batches(
    keys: u64,
    size: usize,
    locality: Locality,
    count: usize,
    seed: u64,
) -> Vec<Vec<u64>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let mut batch: Vec<u64> = match locality {
                Locality::Random => (0..size).map(|_| rng.gen_range(0..keys)).collect(),
                Locality::Stride(stride) => {
                    let span = stride * size as u64;
                    let start = rng.gen_range(0..keys.saturating_sub(span).max(1));
                    (0..size as u64).map(|i| start + i * stride).collect()
                }
            };
            batch.sort_unstable();
            batch.dedup();
            batch
        })
        .collect()
}
