//! The dataflow tests' programs: each a function of an edge collection and a root collection
//! returning a collection of pairs, in a ripple version and a differential-dataflow version.
//!
//! Most are written once for both engines by the `program!` macro (the two collection types
//! offer the same operator names). The graph computations take differential's version from
//! [`crate::graph`], where the `ripple` command's oracle lives, so that each is written once;
//! the macro's `dd:` form says so.

/// An edge of the tests' graphs.
pub type Edge = (u64, u64);

/// Defines a program once, for both engines: `$name::ripple` and `$name::dd` share `$body`.
macro_rules! program {
    ($name:ident, |$edges:ident, $roots:ident| $body:block) => {
        pub mod $name {
            #[allow(unused_imports)]
            use differential_dataflow::operators::*;
            pub fn ripple<'s>(
                $edges: ripple_dataflow::Collection<'s, u64, (u64, u64)>,
                $roots: ripple_dataflow::Collection<'s, u64, u64>,
            ) -> ripple_dataflow::Collection<'s, u64, (u64, u64)> {
                $body
            }
            pub fn dd<'s>(
                $edges: differential_dataflow::VecCollection<'s, u64, (u64, u64), i64>,
                $roots: differential_dataflow::VecCollection<'s, u64, u64, i64>,
            ) -> differential_dataflow::VecCollection<'s, u64, (u64, u64), i64> {
                $body
            }
        }
    };
    // A program whose differential version is written apart (in `crate::graph`).
    ($name:ident, |$edges:ident, $roots:ident| $body:block, dd: $dd:block) => {
        pub mod $name {
            #[allow(unused_imports)]
            use crate::graph;
            pub fn ripple<'s>(
                $edges: ripple_dataflow::Collection<'s, u64, (u64, u64)>,
                $roots: ripple_dataflow::Collection<'s, u64, u64>,
            ) -> ripple_dataflow::Collection<'s, u64, (u64, u64)> {
                $body
            }
            pub fn dd<'s>(
                $edges: graph::Top<'s, (u64, u64)>,
                $roots: graph::Top<'s, u64>,
            ) -> graph::Top<'s, (u64, u64)> {
                $dd
            }
        }
    };
}

pub type RippleProgram = for<'s> fn(
    ripple_dataflow::Collection<'s, u64, Edge>,
    ripple_dataflow::Collection<'s, u64, u64>,
) -> ripple_dataflow::Collection<'s, u64, Edge>;

pub type DdProgram = for<'s> fn(
    differential_dataflow::VecCollection<'s, u64, Edge, i64>,
    differential_dataflow::VecCollection<'s, u64, u64, i64>,
) -> differential_dataflow::VecCollection<'s, u64, Edge, i64>;

program!(map_filter, |edges, roots| {
    let _ = roots;
    edges
        .clone()
        .map(|(a, b)| (b, a * 2 + 1))
        .filter(|(a, b)| (*a + *b) % 3 != 0)
        .flat_map(|(a, b)| [(a, b), (b % 4, a)])
        .concat(edges.map(|(a, b)| (a % 5, b)).negate())
        .consolidate()
});

program!(join_chain, |edges, roots| {
    let two = edges
        .clone()
        .map(|(a, b)| (b, a))
        .join_map(edges.clone(), |_mid, a, c| (*a, *c));
    let three = two
        .clone()
        .map(|(a, c)| (c, a))
        .join_map(edges.clone(), |_c, a, d| (*a, *d));
    let reached = edges
        .clone()
        .semijoin(roots.clone())
        .map(|(a, b)| (a + 100, b));
    let missed = edges.antijoin(roots).map(|(a, b)| (a + 200, b));
    two.concat(three).concat(reached).concat(missed)
});

program!(reductions, |edges, roots| {
    let _ = roots;
    let counts = edges
        .clone()
        .map(|(a, _)| a)
        .count_core::<i64>()
        .map(|(a, c)| (a, c as u64));
    let distinct = edges
        .clone()
        .map(|(_, b)| b % 7)
        .distinct_core::<i64>()
        .map(|x| (x + 1000, 0));
    let threshold = edges
        .clone()
        .map(|(a, _)| a % 5)
        .threshold(|_, c| if *c >= 2 { 1 } else { 0 })
        .map(|x| (x + 2000, 0));
    let min = edges
        .clone()
        .reduce(|_, input, output| output.push((*input[0].0, 1i64)))
        .map(|(a, m)| (a + 3000, m));
    let max = edges
        .reduce(|_, input, output| output.push((*input[input.len() - 1].0, 1i64)))
        .map(|(a, m)| (a + 4000, m));
    counts
        .concat(distinct)
        .concat(threshold)
        .concat(min)
        .concat(max)
});

// Depth of every node reachable from the roots: `(node, depth)`.
program!(
    bfs,
    |edges, roots| {
        let nodes = roots.map(|x| (x, 0u64));
        nodes.clone().iterate(|scope, inner| {
            let edges = edges.enter(scope);
            let nodes = nodes.enter(scope);
            inner
                .join_map(edges, |_k, l, d| (*d, l + 1))
                .concat(nodes)
                .reduce(|_, s, t| t.push((*s[0].0, 1i64)))
        })
    },
    dd: { graph::bfs(edges, roots).map(|(node, depth)| (node, u64::from(depth))) }
);

// The nodes reachable from the roots, as `(node, 0)`.
program!(
    reach,
    |edges, roots| {
        roots
            .iterate(|scope, reached| {
                let edges = edges.enter(scope);
                reached
                    .clone()
                    .map(|x| (x, x))
                    .join_map(edges, |_src, _, dst| *dst)
                    .concat(reached)
                    .distinct_core::<i64>()
            })
            .map(|x| (x, 0))
    },
    dd: { graph::reach(edges, roots).map(|node| (node, 0)) }
);

// Connected components, edges undirected: `(node, least node of its component)`.
program!(
    components,
    |edges, roots| {
        let _ = roots;
        let undirected = edges.clone().concat(edges.map(|(a, b)| (b, a)));
        let nodes = undirected
            .clone()
            .map(|(a, _)| (a, a))
            .distinct_core::<i64>();
        nodes.clone().iterate(|scope, labels| {
            let undirected = undirected.enter(scope);
            let nodes = nodes.enter(scope);
            labels
                .join_map(undirected, |_node, label, next| (*next, *label))
                .concat(nodes)
                .reduce(|_, s, t| t.push((*s[0].0, 1i64)))
        })
    },
    dd: {
        let _ = roots;
        graph::components(edges)
    }
);

/// Keeps the edges of `edges` whose endpoints get the same label when the least node id is
/// propagated along `cycle` (a nested iteration); returns them reversed.
macro_rules! trim {
    ($cycle:expr, $edges:expr) => {{
        let cycle = $cycle;
        let edges = $edges;
        let nodes = edges.clone().map(|(_, b)| (b, b)).consolidate();
        let labels = nodes.clone().iterate(|scope, labels| {
            let cycle = cycle.enter(scope);
            let nodes = nodes.enter(scope);
            labels
                .join_map(cycle, |_node, label, next| (*next, *label))
                .concat(nodes)
                .reduce(|_, s, t| t.push((*s[0].0, 1i64)))
        });
        edges
            .join_map(labels.clone(), |e1, e2, l1| (*e2, (*e1, *l1)))
            .join_map(labels, |e2, (e1, l1), l2| ((*e1, *e2), (*l1, *l2)))
            .filter(|(_, (l1, l2))| l1 == l2)
            .map(|((x1, x2), _)| (x2, x1))
    }};
}

program!(nested_reach, |edges, roots| {
    // A loop holding both a reduce of its own (the last `distinct`) and a nested loop with
    // reduces inside: with `lockstep_iterations` the outer reduce may hold the meet of its
    // pending times, the inner ones never do.
    roots
        .iterate(|scope, reached| {
            let edges = edges.enter(scope);
            let stepped = reached
                .clone()
                .map(|x| (x, x))
                .join_map(edges.clone(), |_src, _, dst| *dst);
            let onwards = stepped.iterate(|inner, found| {
                let edges = edges.enter(inner);
                found
                    .clone()
                    .map(|x| (x, x))
                    .join_map(edges, |_src, _, dst| *dst)
                    .filter(|dst| dst % 2 == 0)
                    .concat(found)
                    .distinct_core::<i64>()
            });
            onwards.concat(reached).distinct_core::<i64>()
        })
        .map(|x| (x, 0))
});

program!(scc, |edges, roots| {
    let _ = roots;
    edges.clone().iterate(|scope, cycles| {
        let edges = edges.enter(scope);
        let forward = trim!(cycles, edges.clone());
        let reverse = edges.map(|(a, b)| (b, a));
        trim!(forward, reverse)
    })
});

/// Every program: name, ripple version, differential version.
pub fn programs() -> Vec<(&'static str, RippleProgram, DdProgram)> {
    vec![
        ("map_filter", map_filter::ripple, map_filter::dd),
        ("join_chain", join_chain::ripple, join_chain::dd),
        ("reductions", reductions::ripple, reductions::dd),
        ("bfs", bfs::ripple, bfs::dd),
        ("reach", reach::ripple, reach::dd),
        ("components", components::ripple, components::dd),
        ("nested_reach", nested_reach::ripple, nested_reach::dd),
        ("scc", scc::ripple, scc::dd),
    ]
}
