//! Steps that put a UKO graph into the scenario's temp-file store, and the
//! steps of `features/projection_store.feature`.

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use decision_store::projection::{Cl100k, DepthBreadthProjector, ProjectionSpec, TokenCounter};
use decision_store::store::ImportOptions;
use decision_store::uko::{Direction, UkoEdge, UkoNode};

use super::{ensure, StepResult, World};

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A node whose views say which depth they render, so fragment content shows the depth chosen.
pub fn node(uri: &str) -> UkoNode {
    UkoNode::new(uri, "uko-code:", "class", uri)
        .with_view(0, uri.to_string())
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
    store.upsert_nodes(&nodes).map_err(s)?;
    store.upsert_edges(&edges).map_err(s)?;
    // Projections read what is on disk.
    let counts = w.reopen()?.graph_counts().map_err(s)?;
    ensure!(counts.nodes as usize == nodes.len() && counts.edges as usize == edges.len(), "stored {counts:?}");
    Ok(())
}

fn table_rows(step: &Step) -> Result<Vec<std::collections::HashMap<String, String>>, String> {
    let table = step.table.as_ref().ok_or("no table")?;
    let header = &table.rows[0];
    Ok(table.rows[1..]
        .iter()
        .map(|r| header.iter().cloned().zip(r.iter().map(|c| c.replace("\\n", "\n"))).collect())
        .collect())
}

#[given(regex = r"^graph nodes imported from JSON Lines:$")]
fn nodes_jsonl(w: &mut World, step: &Step) -> StepResult {
    let mut jsonl = String::new();
    for row in table_rows(step)? {
        let mut n = UkoNode::new(&row["uri"], "uko-code:", "class", &row["uri"]);
        for (k, v) in &row {
            if let Some(depth) = k.strip_prefix("view") {
                n = n.with_view(depth.parse().map_err(s)?, v.clone());
            }
        }
        n.views.sort_by_key(|v| v.depth);
        jsonl.push_str(&serde_json::to_string(&n).map_err(s)?);
        jsonl.push('\n');
    }
    w.store()?.import_graph(jsonl.as_bytes(), &b""[..], ImportOptions::default(), |_| {}).map_err(s)?;
    Ok(())
}

#[given(regex = r"^graph edges imported from JSON Lines:$")]
fn edges_jsonl(w: &mut World, step: &Step) -> StepResult {
    let mut jsonl = String::new();
    for row in table_rows(step)? {
        let e = UkoEdge::new(&row["source"], &row["target"], &row["relation"]);
        jsonl.push_str(&serde_json::to_string(&e).map_err(s)?);
        jsonl.push('\n');
    }
    w.store()?.import_graph(&b""[..], jsonl.as_bytes(), ImportOptions::default(), |_| {}).map_err(s)?;
    w.reopen()?;
    Ok(())
}

#[when(
    regex = r#"^I project focus "([^"]+)" with breadth (\d+) and depth (\d+)(?: following (incoming|both) edges| following only "(\w+)"| and at most (\d+) neighbours per node)?$"#
)]
fn project(
    w: &mut World,
    focus: String,
    breadth: u32,
    depth: u32,
    dir: String,
    rel: String,
    cap: String,
) -> StepResult {
    let mut spec = ProjectionSpec::new(focus.split_whitespace(), breadth, depth).map_err(s)?;
    if !dir.is_empty() {
        spec = spec.with_direction(dir.parse().map_err(s)?);
    }
    if !rel.is_empty() {
        spec = spec.with_relations([rel]);
    }
    if !cap.is_empty() {
        spec = spec.with_max_fan_out(Some(cap.parse().map_err(s)?));
    }
    let store = w.store()?;
    match DepthBreadthProjector::new().project(&*store, &spec) {
        Ok(p) => w.projection = Some(p),
        Err(e) => w.error = Some(e),
    }
    Ok(())
}

#[then(regex = r#"^the projection is "([^"]+)"$"#)]
fn projection_is(w: &mut World, expected: String) -> StepResult {
    let p = w.projection.as_ref().ok_or_else(|| format!("no projection: {:?}", w.error))?;
    let got: Vec<String> =
        p.nodes.iter().map(|n| format!("{}:{}:{}", n.uri(), n.distance(), n.resolved_depth())).collect();
    ensure!(got.join(" ") == expected, "projection is {:?}", got.join(" "));
    Ok(())
}

#[then(regex = r"^the projection has (\d+) nodes$")]
fn projection_size(w: &mut World, n: usize) -> StepResult {
    let p = w.projection.as_ref().ok_or_else(|| format!("no projection: {:?}", w.error))?;
    ensure!(p.nodes.len() == n && p.cut.is_empty(), "{} nodes, cut {:?}", p.nodes.len(), p.cut);
    Ok(())
}

#[then(regex = r#"^the projection fails with "([^"]+)"$"#)]
fn projection_fails(w: &mut World, msg: String) -> StepResult {
    ensure!(w.projection.is_none(), "the projection succeeded");
    let e = w.error()?.to_string();
    ensure!(e.contains(&msg), "{e:?}");
    Ok(())
}

#[then(regex = r#"^the projection reports (\d+) neighbours of "(\w+)" cut$"#)]
fn cut(w: &mut World, n: usize, uri: String) -> StepResult {
    let p = w.projection.as_ref().ok_or("no projection")?;
    ensure!(p.cut == vec![(uri, n)], "cut {:?}", p.cut);
    Ok(())
}

#[when(
    regex = r#"^I project fragments for focus "(\w+)" with breadth (\d+) and depth (\d+)(?: within (\d+) tokens)?$"#
)]
fn fragments(w: &mut World, focus: String, breadth: u32, depth: u32, budget: String) -> StepResult {
    let spec = ProjectionSpec::new([focus], breadth, depth).map_err(s)?;
    let budget = if budget.is_empty() { None } else { Some(budget.parse().map_err(s)?) };
    let store = w.store()?;
    let set = DepthBreadthProjector::new().project_fragments(&*store, &spec, &Cl100k, budget).map_err(s)?;
    w.fragments = Some(set);
    Ok(())
}

#[then(regex = r#"^the fragment of "(\w+)" has content "([^"]*)" at depth (\d+)$"#)]
fn fragment_content(w: &mut World, uri: String, content: String, depth: u32) -> StepResult {
    let set = w.fragments.as_ref().ok_or("no fragments")?;
    let f = set.fragments.iter().find(|f| f.uko_node() == uri).ok_or_else(|| format!("no fragment of {uri}"))?;
    let content = content.replace("\\n", "\n");
    ensure!(f.content() == content && f.detail_depth() == depth, "{uri}: {:?} at {}", f.content(), f.detail_depth());
    Ok(())
}

#[then(regex = r"^every fragment's tokens are the tokenizer's count of its content$")]
fn tokens(w: &mut World) -> StepResult {
    for f in &w.fragments.as_ref().ok_or("no fragments")?.fragments {
        ensure!(f.tokens() == Cl100k.count(f.content()) && f.tokens() > 0, "{}: {} tokens", f.uko_node(), f.tokens());
    }
    Ok(())
}

#[then(regex = r#"^the (fragments|dropped fragments) are "([^"]*)"$"#)]
fn fragment_list(w: &mut World, which: String, expected: String) -> StepResult {
    let set = w.fragments.as_ref().ok_or("no fragments")?;
    let got: Vec<&str> = if which == "fragments" {
        set.fragments.iter().map(|f| f.uko_node()).collect()
    } else {
        set.dropped.iter().map(String::as_str).collect()
    };
    ensure!(got.join(" ") == expected, "{which}: {got:?}");
    Ok(())
}

#[then(regex = r"^the fragments take at most (\d+) tokens$")]
fn within(w: &mut World, n: usize) -> StepResult {
    let set = w.fragments.as_ref().ok_or("no fragments")?;
    let total: usize = set.fragments.iter().map(|f| f.tokens()).sum();
    ensure!(total <= n && total == set.total_tokens, "{total} tokens (reported {})", set.total_tokens);
    Ok(())
}

#[when(
    regex = r"^I compare projections of the stored and the in-memory graph from every node with breadth 0 to 3 in every direction$"
)]
fn compare(w: &mut World) -> StepResult {
    let store = w.store()?;
    let memory = store.load_graph().map_err(s)?;
    let uris: Vec<String> = memory.nodes().map(|n| n.uri.clone()).collect();
    let projector = DepthBreadthProjector::new();
    let mut differences = Vec::new();
    let mut compared = 0;
    for uri in &uris {
        for breadth in 0..=3 {
            for dir in [Direction::Outgoing, Direction::Incoming, Direction::Both] {
                let spec = ProjectionSpec::new([uri.clone()], breadth, 9).map_err(s)?.with_direction(dir);
                let a = projector.project(&*store, &spec).map_err(s)?;
                let b = projector.project(&memory, &spec).map_err(s)?;
                compared += 1;
                if a != b {
                    differences.push(format!("{uri} b={breadth} {dir:?}"));
                }
            }
        }
    }
    ensure!(compared == uris.len() * 12, "compared {compared}");
    w.snapshot_before = Some(differences);
    Ok(())
}

#[then(regex = r"^they are equal$")]
fn equal(w: &mut World) -> StepResult {
    let diffs = w.snapshot_before.as_ref().ok_or("nothing compared")?;
    ensure!(diffs.is_empty(), "differences: {diffs:?}");
    Ok(())
}
