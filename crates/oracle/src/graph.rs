//! The `ripple` command's computations on differential-dataflow, over any node type: the
//! oracle of the CLI tests and the baseline of the bfs benchmark.
//!
//! Each takes the edge collection (and the roots, where the computation has them) at the top
//! level of a dataflow with `u64` times and returns the same collection `ripple` maintains.

use differential_dataflow::operators::Iterate;
use differential_dataflow::{ExchangeData, VecCollection};
use std::hash::Hash;

/// A collection at the top level of a dataflow, with `u64` times and `i64` diffs.
pub type Top<'s, D> = VecCollection<'s, u64, D, i64>;

/// `(node, depth)` for every node reachable from `roots`: the least number of edges from a
/// root (differential's own bfs example).
pub fn bfs<'s, N>(edges: Top<'s, (N, N)>, roots: Top<'s, N>) -> Top<'s, (N, u32)>
where
    N: ExchangeData + Hash,
{
    let start = roots.map(|root| (root, 0u32));
    start.clone().iterate(|scope, depths| {
        let edges = edges.enter(scope);
        let start = start.enter(scope);
        depths
            .join_map(edges, |_src, depth, dst| (dst.clone(), depth + 1))
            .concat(start)
            .reduce(|_node, input, output| output.push((*input[0].0, 1i64)))
    })
}

/// The nodes reachable from `roots`, roots included.
pub fn reach<'s, N>(edges: Top<'s, (N, N)>, roots: Top<'s, N>) -> Top<'s, N>
where
    N: ExchangeData + Hash,
{
    roots.clone().iterate(|scope, reached| {
        let edges = edges.enter(scope);
        reached
            .map(|node| (node, ()))
            .join_map(edges, |_src, (), dst| dst.clone())
            .concat(roots.enter(scope))
            .distinct_core::<i64>()
    })
}

/// `(node, out-degree)` for every node with an out-edge.
pub fn degrees<'s, N>(edges: Top<'s, (N, N)>) -> Top<'s, (N, i64)>
where
    N: ExchangeData + Hash,
{
    edges.map(|(src, _dst)| src).count_core::<i64>()
}

/// `(node, label)`: connected components with edges taken as undirected, each labelled by its
/// least node.
pub fn components<'s, N>(edges: Top<'s, (N, N)>) -> Top<'s, (N, N)>
where
    N: ExchangeData + Hash,
{
    let undirected = edges.clone().concat(edges.map(|(src, dst)| (dst, src)));
    let nodes = undirected
        .clone()
        .map(|(node, _)| node)
        .distinct_core::<i64>()
        .map(|node| (node.clone(), node));
    nodes.clone().iterate(|scope, labels| {
        labels
            .join_map(undirected.enter(scope), |_node, label, next| {
                (next.clone(), label.clone())
            })
            .concat(nodes.enter(scope))
            .reduce(|_node, input, output| output.push((input[0].0.clone(), 1i64)))
    })
}
