//! Inputs for the merge-batcher benchmark, identical for ripple and differential-dataflow.
//!
//! Records are generated as `(key id, val, time, diff)` and turned into each engine's record
//! type by a [`Record`]: `((u64, u64), u64, i64)` (key and value ids as they are) or
//! `(String, u64, i64)` (the key id as a zero-padded decimal of 24 digits plus 0 to 16 filler
//! bytes, so strings are 24 to 40 bytes long and sort in key-id order).
//!
//! Regimes:
//! - *mixed*: keys uniform over four times as many ids as records; interleaved on merge.
//! - *collisions*: keys from a range of `n / 64` ids, values in `0..4`: most triples repeat and
//!   consolidate.
//! - *disjoint*: non-overlapping key ranges. In the push cycle each round draws random keys from
//!   its own range and rounds arrive in shuffled order; in a merge, the two sides own alternate
//!   blocks of 1024 keys, so runs are long but shorter than a chunk.
//! - *sorted*: one sorted dataset cut into contiguous pieces, arriving in order: the shape of a
//!   sorted snapshot being loaded.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// A generated update: key id, value, time, diff.
pub type Raw = (u64, u64, u64, i64);

/// The four input regimes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regime {
    /// Interleaved random keys.
    Mixed,
    /// A small key range: many equal triples that consolidate.
    Collisions,
    /// Non-overlapping key ranges.
    Disjoint,
    /// One sorted dataset in contiguous pieces.
    Sorted,
}

impl Regime {
    /// All regimes, in report order.
    pub const ALL: [Regime; 4] = [
        Regime::Mixed,
        Regime::Collisions,
        Regime::Disjoint,
        Regime::Sorted,
    ];

    /// The regime's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Regime::Mixed => "mixed",
            Regime::Collisions => "collisions",
            Regime::Disjoint => "disjoint",
            Regime::Sorted => "sorted",
        }
    }

    /// Parses a regime name.
    pub fn parse(name: &str) -> Result<Regime, String> {
        Regime::ALL
            .into_iter()
            .find(|regime| regime.name() == name)
            .ok_or_else(|| {
                format!("unknown regime '{name}' (expected mixed, collisions, disjoint or sorted)")
            })
    }
}

/// Rounds of pushes for the full push-and-seal cycle: `rounds` rounds, `count` updates in all.
pub fn cycle_rounds(regime: Regime, count: usize, rounds: usize, seed: u64) -> Vec<Vec<Raw>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let count = count as u64;
    let per_round = count.div_ceil(rounds as u64).max(1);
    let mut output: Vec<Vec<Raw>> = Vec::with_capacity(rounds);
    for round in 0..rounds as u64 {
        let lower = round * per_round;
        let upper = ((round + 1) * per_round).min(count);
        let updates: Vec<Raw> = (lower..upper)
            .map(|index| match regime {
                Regime::Mixed => (
                    rng.gen_range(0..4 * count),
                    rng.gen_range(0..4),
                    rng.gen_range(0..4),
                    1,
                ),
                Regime::Collisions => (
                    rng.gen_range(0..count / 64 + 1),
                    rng.gen_range(0..4),
                    rng.gen_range(0..4),
                    1,
                ),
                Regime::Disjoint => (
                    rng.gen_range(4 * lower..4 * upper.max(lower + 1)),
                    0,
                    rng.gen_range(0..4),
                    1,
                ),
                Regime::Sorted => (index, 0, index % 4, 1),
            })
            .collect();
        output.push(updates);
    }
    if regime == Regime::Disjoint {
        output.shuffle(&mut rng);
    }
    output
}

/// The two sides of a merge, each with `count` updates before consolidation.
pub fn merge_sides(regime: Regime, count: usize, seed: u64) -> (Vec<Raw>, Vec<Raw>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let count = count as u64;
    const BLOCK: u64 = 1024;
    let mut side = |which: u64| -> Vec<Raw> {
        (0..count)
            .map(|index| match regime {
                Regime::Mixed => (rng.gen_range(0..4 * count), rng.gen_range(0..4), 0, 1),
                Regime::Collisions => (rng.gen_range(0..count / 4 + 1), rng.gen_range(0..4), 0, 1),
                Regime::Disjoint => {
                    let block = index / BLOCK;
                    ((2 * block + which) * BLOCK + index % BLOCK, 0, 0, 1)
                }
                Regime::Sorted => (which * count + index, 0, 0, 1),
            })
            .collect()
    };
    let a = side(0);
    let b = side(1);
    (a, b)
}

/// How an engine's record is made from a generated update.
pub trait Record {
    /// The key type.
    type Key: ripple_updates::Data;
    /// The value type.
    type Val: ripple_updates::Data;
    /// The record type's name in reports.
    const NAME: &'static str;
    /// The key and value for a key id and value.
    fn make(key: u64, val: u64) -> (Self::Key, Self::Val);
    /// Payload bytes of one update (key, value, 8-byte time, 8-byte diff), for throughput.
    fn payload_bytes(key: &Self::Key) -> usize;
    /// A hash of a key and value, for comparing the two engines' outputs.
    fn hash(key: &Self::Key, val: &Self::Val) -> u64;
    /// Bytes a key owns on the heap (a string's allocation).
    fn heap_bytes(key: &Self::Key) -> usize;
}

/// `((u64, u64), u64, i64)` records.
pub struct IntRecord;
/// `(String, u64, i64)` records with keys of 24 to 40 bytes.
pub struct StringRecord;

impl Record for IntRecord {
    type Key = u64;
    type Val = u64;
    const NAME: &'static str = "(u64,u64)";
    fn make(key: u64, val: u64) -> (u64, u64) {
        (key, val)
    }
    fn payload_bytes(_key: &u64) -> usize {
        32
    }
    fn hash(key: &u64, val: &u64) -> u64 {
        mix(mix(0, *key), *val)
    }
    fn heap_bytes(_key: &u64) -> usize {
        0
    }
}

impl Record for StringRecord {
    type Key = String;
    type Val = ();
    const NAME: &'static str = "String";
    fn make(key: u64, val: u64) -> (String, ()) {
        // The value id is folded into the key: string records are unkeyed data.
        let id = key * 4 + val;
        let filler = (id.wrapping_mul(0x9E37_79B9) % 17) as usize;
        (format!("{id:024}{}", &"abcdefghijklmnopq"[..filler]), ())
    }
    fn payload_bytes(key: &String) -> usize {
        key.len() + 16
    }
    fn hash(key: &String, _val: &()) -> u64 {
        key.bytes().fold(0, |hash, byte| mix(hash, byte as u64))
    }
    fn heap_bytes(key: &String) -> usize {
        key.capacity()
    }
}

/// Folds `value` into `hash` (a 64-bit multiply-xorshift mix).
pub fn mix(hash: u64, value: u64) -> u64 {
    let mixed = (hash ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    mixed ^ (mixed >> 29)
}
