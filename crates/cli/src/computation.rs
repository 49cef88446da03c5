//! The four graph computations, as ripple dataflows over edge and root collections.

use crate::changes::{Edge, Node};
use ripple_dataflow::{ArrangedVariable, Collection};
use ripple_updates::Product;

/// One output value. Single-column results (`depth`, `node`, `degree`) leave the second field
/// 0; [`Computation::columns`] says how many fields are printed.
pub type Value = (u64, u64);

/// A computation the `ripple` command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Computation {
    /// Number of nodes at each distance from the roots; value `depth`.
    Bfs,
    /// The nodes reachable from the roots, roots included; value `node`.
    Reach,
    /// Out-degree distribution; value `degree`, diff = change in the number of such nodes.
    Degrees,
    /// Connected components (edges undirected), labelled by their least node; value
    /// `node,label`.
    Cc,
}

impl Computation {
    pub const ALL: [Computation; 4] = [
        Computation::Bfs,
        Computation::Reach,
        Computation::Degrees,
        Computation::Cc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Computation::Bfs => "bfs",
            Computation::Reach => "reach",
            Computation::Degrees => "degrees",
            Computation::Cc => "cc",
        }
    }

    /// How many fields of a [`Value`] the output shows.
    pub fn columns(self) -> usize {
        match self {
            Computation::Cc => 2,
            _ => 1,
        }
    }

    /// Whether the computation reads `--roots`.
    pub fn uses_roots(self) -> bool {
        matches!(self, Computation::Bfs | Computation::Reach)
    }

    /// The dataflow computing this result's changes from edge and root changes.
    pub fn build<'s>(
        self,
        edges: Collection<'s, u64, Edge>,
        roots: Collection<'s, u64, Node>,
    ) -> Collection<'s, u64, Value> {
        match self {
            Computation::Bfs => bfs(edges, roots).map(|(_node, depth)| (u64::from(depth), 0)),
            Computation::Reach => reach(edges, roots).map(|node| (u64::from(node), 0)),
            Computation::Degrees => degrees(edges).map(|degree| (degree as u64, 0)),
            Computation::Cc => {
                components(edges).map(|(node, label)| (u64::from(node), u64::from(label)))
            }
        }
    }
}

/// `(node, depth)`: the least number of edges from any root to each reachable node.
///
/// Round `i` of the loop holds the depths found along paths of at most `i` edges: the roots,
/// and the least of the depths of round `i - 1` plus one along each edge. The depths are an
/// [`ArrangedVariable`] set to the reduce's output, so each round joins the last one's batches
/// as they are; it starts empty (round 0 is the roots alone), one round before `iterate`'s
/// variable started from the roots would, and reaches the same fixed point.
pub fn bfs<'s>(
    edges: Collection<'s, u64, Edge>,
    roots: Collection<'s, u64, Node>,
) -> Collection<'s, u64, (Node, u32)> {
    let start = roots.map(|root| (root, 0u32));
    let outer = edges.scope();
    outer.iterative::<u32, _, _>(|inner| {
        let (variable, depths) = ArrangedVariable::new(inner, Product::new(0, 1));
        let next = depths
            .join_core(edges.enter(inner).arrange_by_key(), |_src, depth, dst| {
                (*dst, depth + 1)
            })
            .concat(start.enter(inner))
            .arrange_by_key()
            .min();
        variable.set(next.clone());
        next.as_collection().leave(outer)
    })
}

/// The nodes reachable from the roots. As in `bfs`, the reached nodes go round as the reduce's
/// batches (an [`ArrangedVariable`] of `(node, ())`).
pub fn reach<'s>(
    edges: Collection<'s, u64, Edge>,
    roots: Collection<'s, u64, Node>,
) -> Collection<'s, u64, Node> {
    let outer = edges.scope();
    outer.iterative::<u32, _, _>(|inner| {
        let (variable, reached) =
            ArrangedVariable::<Node, (), _, i64>::new(inner, Product::new(0, 1));
        let next = reached
            .join_core(edges.enter(inner).arrange_by_key(), |_src, (), dst| {
                (*dst, ())
            })
            .concat(roots.enter(inner).map(|root| (root, ())))
            .arrange_by_key()
            .distinct();
        variable.set(next.clone());
        next.as_keys().leave(outer)
    })
}

/// One record per node with out-degree `d > 0`: the record `d`.
pub fn degrees<'s>(edges: Collection<'s, u64, Edge>) -> Collection<'s, u64, i64> {
    edges
        .map(|(src, _dst)| src)
        .count()
        .map(|(_node, degree)| degree)
}

/// `(node, label)`: each node of an edge, labelled with the least node of its undirected
/// component.
pub fn components<'s>(edges: Collection<'s, u64, Edge>) -> Collection<'s, u64, (Node, Node)> {
    let outer = edges.scope();
    let undirected = edges.clone().concat(edges.map(|(src, dst)| (dst, src)));
    let nodes = undirected
        .clone()
        .map(|(node, _)| node)
        .distinct()
        .map(|node| (node, node));
    // As in `bfs`, the labels go round as the reduce's batches.
    outer.iterative::<u32, _, _>(|inner| {
        let (variable, labels) =
            ArrangedVariable::<Node, Node, _, i64>::new(inner, Product::new(0, 1));
        let next = labels
            .join_core(
                undirected.enter(inner).arrange_by_key(),
                |_node, label, next| (*next, *label),
            )
            .concat(nodes.enter(inner))
            .arrange_by_key()
            .min();
        variable.set(next.clone());
        next.as_collection().leave(outer)
    })
}
