//! Steps that put a UKO graph into the scenario's temp-file store.

use cucumber::given;
use decision_store::uko::{UkoEdge, UkoNode};

use super::{StepResult, World};

/// A node whose views say which depth they render, so fragment content shows the depth chosen.
pub fn node(uri: &str) -> UkoNode {
    UkoNode::new(uri, "uko-code:", "class", uri)
        .with_view(0, format!("{uri}"))
        .with_view(4, format!("class {uri}: signatures"))
        .with_view(9, format!("class {uri}:\n    def run(self): return {uri}"))
}

/// Parses "A->B B->C" into edges with relation `contains`.
pub fn edges(spec: &str) -> Result<Vec<UkoEdge>, String> {
    spec.split_whitespace()
        .map(|pair| {
            let (s, t) = pair.split_once("->").ok_or_else(|| format!("bad edge {pair:?}"))?;
            Ok(UkoEdge::new(s, t, "contains"))
        })
        .collect()
}

#[given(regex = r"^a UKO graph with nodes ([A-Za-z0-9 ]+?) and (?:edges (.+)|no edges)$")]
fn graph(w: &mut World, nodes: String, edge_spec: String) -> StepResult {
    let nodes: Vec<UkoNode> = nodes.split_whitespace().map(node).collect();
    let edges = edges(&edge_spec)?;
    let store = w.store()?;
    store.upsert_nodes(&nodes).map_err(|e| e.to_string())?;
    store.upsert_edges(&edges).map_err(|e| e.to_string())?;
    // Projections read what is on disk.
    let counts = w.reopen()?.graph_counts().map_err(|e| e.to_string())?;
    if counts.nodes as usize != nodes.len() || counts.edges as usize != edges.len() {
        return Err(format!("stored {counts:?}"));
    }
    Ok(())
}
