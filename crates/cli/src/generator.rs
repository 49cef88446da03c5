//! The generated change stream: a random graph of constant size whose edges are replaced one at
//! a time, oldest first (the workload of the bfs experiment).
//!
//! Precisely, for `--nodes N --edges M --updates U --seed S`:
//!
//! - Random numbers come from SplitMix64 seeded with `S`: each draw adds `0x9E3779B97F4A7C15`
//!   to the state (wrapping) and returns the state mixed by
//!   `z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//!   z ^ (z >> 31)` (wrapping multiplications).
//! - A random node is `(draw * N) >> 64` (the 128-bit product's high word); a random edge is a
//!   random `src` then a random `dst`.
//! - The edge sequence `e1, e2, ...` is the sequence of random edges.
//! - At time 0 the graph is `e1..eM`, each with diff +1.
//! - Update `i` (for `i` in `1..=U`) happens at time `i`: it inserts `e(M+i)` (diff +1) and
//!   removes `e(i)` (diff -1), the oldest edge still present. The graph always has `M` edges.
//!
//! Because removals replay the insertions in order, the generator needs no memory: a second
//! random stream with the same seed yields the edges to remove.

use crate::changes::Edge;

/// SplitMix64: a tiny, well-known generator, fully specified in the module docs.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Skips `draws` numbers at once (the state is a counter).
    pub fn skip(&mut self, draws: u64) {
        self.state = self.state.wrapping_add(Self::GAMMA.wrapping_mul(draws));
    }

    /// A number in `0..bound`.
    pub fn below(&mut self, bound: u32) -> u32 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u32
    }
}

/// The generator's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphSpec {
    pub nodes: u32,
    pub edges: u64,
    pub updates: u64,
    pub seed: u64,
}

impl GraphSpec {
    /// Checks the parameters make a graph: at least one node, and an edge to remove if there
    /// are updates.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("--nodes must be at least 1".into());
        }
        if self.edges == 0 && self.updates > 0 {
            return Err("--edges must be at least 1 when --updates is positive: each update removes the oldest edge".into());
        }
        if self.updates == u64::MAX {
            return Err("--updates must be below 18446744073709551615".into());
        }
        Ok(())
    }
}

/// Produces the change stream of a [`GraphSpec`], time by time.
#[derive(Clone, Debug)]
pub struct Generator {
    nodes: u32,
    additions: SplitMix64,
    removals: SplitMix64,
}

impl Generator {
    pub fn new(spec: &GraphSpec) -> Self {
        Self {
            nodes: spec.nodes,
            additions: SplitMix64::new(spec.seed),
            removals: SplitMix64::new(spec.seed),
        }
    }

    fn edge(nodes: u32, random: &mut SplitMix64) -> Edge {
        let src = random.below(nodes);
        (src, random.below(nodes))
    }

    /// The next edge of the sequence, inserted.
    pub fn insertion(&mut self) -> Edge {
        Self::edge(self.nodes, &mut self.additions)
    }

    /// The oldest edge not yet removed.
    pub fn removal(&mut self) -> Edge {
        Self::edge(self.nodes, &mut self.removals)
    }

    /// Skips the times before `time` of a graph of `edges` edges, as if their changes had been
    /// generated (a resumed run starts after its checkpoint): two draws an edge.
    pub fn skip_to(&mut self, time: u64, edges: u64) {
        if time == 0 {
            return;
        }
        let inserted = edges + (time - 1);
        self.additions.skip(2 * inserted);
        self.removals.skip(2 * (time - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn splitmix_reference_values() {
        // The first outputs for seed 0, as published with the algorithm.
        let mut random = SplitMix64::new(0);
        assert_eq!(random.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(random.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn skipping_matches_generating() {
        let spec = GraphSpec {
            nodes: 97,
            edges: 13,
            updates: 50,
            seed: 5,
        };
        for time in 0..20 {
            let mut generated = Generator::new(&spec);
            for _ in 0..spec.edges {
                generated.insertion();
            }
            for _ in 1..time {
                generated.insertion();
                generated.removal();
            }
            let mut skipped = Generator::new(&spec);
            skipped.skip_to(time, spec.edges);
            if time == 0 {
                continue;
            }
            assert_eq!(skipped.insertion(), generated.insertion());
            assert_eq!(skipped.removal(), generated.removal());
        }
    }

    #[test]
    fn removals_are_the_oldest_present_edges() {
        let spec = GraphSpec {
            nodes: 10,
            edges: 5,
            updates: 40,
            seed: 7,
        };
        let mut generator = Generator::new(&spec);
        let mut present: VecDeque<Edge> = (0..spec.edges).map(|_| generator.insertion()).collect();
        for _ in 0..spec.updates {
            present.push_back(generator.insertion());
            assert_eq!(Some(generator.removal()), present.pop_front());
            assert_eq!(present.len() as u64, spec.edges);
        }
        assert!(present.iter().all(|&(a, b)| a < 10 && b < 10));
    }
}
