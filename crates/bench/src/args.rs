//! Arguments the benches share.

/// A graph given as `NODES/EDGES` (e.g. `1000000/10000000`).
pub fn parse_graph(text: &str) -> Result<(u32, u64), String> {
    let (nodes, edges) = text
        .split_once('/')
        .ok_or_else(|| format!("graph `{text}`: expected NODES/EDGES"))?;
    let nodes = nodes
        .parse()
        .map_err(|_| format!("graph `{text}`: bad node count"))?;
    let edges = edges
        .parse()
        .map_err(|_| format!("graph `{text}`: bad edge count"))?;
    Ok((nodes, edges))
}
