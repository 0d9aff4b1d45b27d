//! `project` and `child-context`.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use decision_store::context::StoredContextOptions;
use decision_store::inheritance::ContextRequest;
use decision_store::projection::{
    Cl100k, ContextFragment, Depth, ProjectedNode, ProjectionSpec, Ranking, TokenCounter, DEFAULT_DEPTH,
};
use decision_store::uko::Direction;
use serde::Serialize;

use super::render::table;
use super::{one_of, print_json, print_text, Format};
use crate::app::errors::{CmdResult, Failure};
use crate::app::open::open_read;
use crate::app::text::count;

#[derive(Debug, Args)]
pub struct ProjectArgs {
    db: PathBuf,
    /// A focus: a node URI, or a file path relative to the ingested tree
    /// (src/auth.py means project://src/auth.py); repeat for several.
    #[arg(long, required = true)]
    focus: Vec<String>,
    /// How far to walk from the focus: file hops of the relevance ranking's
    /// graph signal (at most 2), or node hops of the distance ranking.
    /// Default: 2 (relevance), 6 (distance).
    #[arg(long)]
    breadth: Option<u32>,
    /// Full detail depth: a number or a named level such as FULL_SOURCE.
    /// The relevance ranking shows definitions at most at signature depth.
    #[arg(long, allow_hyphen_values = true, default_value = DEFAULT_DEPTH)]
    depth: String,
    /// Give every node the full depth (distance ranking).
    #[arg(long)]
    no_gradient: bool,
    /// Domain whose named levels resolve --depth.
    #[arg(long, default_value = "uko-code:")]
    domain: String,
    /// Which edges to follow. Default: both.
    #[arg(long, value_parser = one_of::<Direction>(&Direction::NAMES))]
    direction: Option<Direction>,
    /// relevance: the files most relevant to the focus (graph, git history,
    /// words, directory), each by its definitions' signatures; distance: a
    /// breadth-first walk, nearer nodes in more detail (docs/ingest.md).
    #[arg(long, default_value = Ranking::NAMES[0], value_parser = one_of::<Ranking>(&Ranking::NAMES))]
    ranking: Ranking,
    /// Follow only this relation (repeat for several).
    #[arg(long)]
    relation: Vec<String>,
    /// Hub guard: at most N new neighbours per node and hop.
    #[arg(long, value_name = "N")]
    max_fan_out: Option<usize>,
    /// Token budget for --fragments.
    #[arg(long, value_name = "TOKENS")]
    budget: Option<usize>,
    /// Materialise fragments (content and token counts).
    #[arg(long)]
    fragments: bool,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Serialize)]
struct ProjectReport<'a> {
    spec: &'a ProjectionSpec,
    full_depth: u32,
    nodes: &'a [ProjectedNode],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    cut: &'a [(String, usize)],
    #[serde(skip_serializing_if = "Option::is_none")]
    fragments: Option<&'a [ContextFragment]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped: Option<&'a [String]>,
    /// Fragments a budget left out because their file is shown whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    covered: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tokens: Option<usize>,
}

/// The spec of `a`: the defaults of its ranking, changed where an option says.
fn spec_of(a: &ProjectArgs) -> Result<ProjectionSpec, Failure> {
    let depth: Depth = a.depth.parse().map_err(|e: decision_store::Error| Failure::usage(format!("--depth: {e}")))?;
    let mut spec = ProjectionSpec::ranked(a.focus.iter().cloned(), a.ranking)
        .map_err(|e| Failure::usage(format!("--focus: {e}")))?
        .with_depth(depth)
        .with_depth_gradient(!a.no_gradient)
        .with_domain(a.domain.clone())
        .with_max_fan_out(a.max_fan_out);
    if let Some(breadth) = a.breadth {
        spec = spec.with_breadth(breadth);
    }
    if let Some(direction) = a.direction {
        spec = spec.with_direction(direction);
    }
    if !a.relation.is_empty() {
        spec = spec.with_relations(a.relation.clone());
    }
    Ok(spec)
}

pub fn project(a: &ProjectArgs) -> CmdResult {
    if a.budget.is_some() && !a.fragments {
        return Err(Failure::usage("--budget needs --fragments (a budget counts fragment tokens)"));
    }
    let store = open_read(&a.db)?;
    let (projection, fragments) = if a.fragments {
        let (p, f) = store.project(&spec_of(a)?, &Cl100k, a.budget)?;
        (p, Some(f))
    } else {
        (store.projection(&spec_of(a)?)?, None)
    };
    let spec = &projection.spec;
    let report = ProjectReport {
        spec,
        full_depth: projection.full_depth,
        nodes: &projection.nodes,
        cut: &projection.cut,
        fragments: fragments.as_ref().map(|f| f.fragments.as_slice()),
        dropped: fragments.as_ref().filter(|_| a.budget.is_some()).map(|f| f.dropped.as_slice()),
        covered: fragments.as_ref().filter(|f| !f.covered.is_empty()).map(|f| f.covered.as_slice()),
        total_tokens: fragments.as_ref().map(|f| f.total_tokens),
    };
    if a.format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut out = format!(
        "projection of {} ({} ranking, breadth {}, depth {} = {}, gradient {}, {} edges): {}\n",
        spec.focus().join(", "),
        spec.ranking().name(),
        spec.breadth(),
        spec.depth(),
        projection.full_depth,
        if spec.depth_gradient() { "on" } else { "off" },
        spec.direction().as_words(),
        count(projection.nodes.len() as u64, "node")
    );
    match &fragments {
        None => {
            let rows: Vec<Vec<String>> = projection
                .nodes
                .iter()
                .map(|n| vec![n.uri().to_owned(), n.distance().to_string(), n.resolved_depth().to_string()])
                .collect();
            out.push_str(&table(&["URI", "DISTANCE", "DEPTH"], &rows));
        }
        Some(set) => {
            for f in &set.fragments {
                let d = f.metadata().get("distance").map(|v| v.to_string()).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "── {}  (distance {d}, depth {}, {})",
                    f.uko_node(),
                    f.detail_depth(),
                    count(f.tokens() as u64, "token")
                );
                for line in f.content().lines() {
                    let _ = writeln!(out, "   {line}");
                }
            }
            let _ = writeln!(
                out,
                "{} in {} ({})",
                count(set.total_tokens as u64, "token"),
                count(set.fragments.len() as u64, "fragment"),
                Cl100k.name()
            );
            if !set.dropped.is_empty() {
                let _ = writeln!(out, "dropped by the budget: {}", set.dropped.join(", "));
            }
            if !set.covered.is_empty() {
                let _ = writeln!(out, "covered by a file shown whole: {}", set.covered.join(", "));
            }
        }
    }
    for (uri, n) in &projection.cut {
        let _ = writeln!(out, "fan-out cap: {n} neighbours of {uri} left out");
    }
    print_text(&out)?;
    Ok(0)
}

#[derive(Debug, Args)]
pub struct ChildArgs {
    db: PathBuf,
    /// The parent plan.
    #[arg(long)]
    plan: String,
    /// The child's token budget.
    #[arg(long)]
    budget: usize,
    /// The parent's depth in the plan tree.
    #[arg(long, default_value_t = 0)]
    parent_depth: u32,
    /// The child's depth in the plan tree (greater than --parent-depth).
    #[arg(long, default_value_t = 1)]
    child_depth: u32,
    /// The child's focus (default: the resources of the plan's subplan spawns).
    #[arg(long)]
    focus: Vec<String>,
    /// Breadth of the parent's projection.
    #[arg(long, default_value_t = 2)]
    parent_breadth: u32,
    /// Detail depth of the parent's projection.
    #[arg(long, default_value = "SIGNATURES")]
    parent_detail: String,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Serialize)]
struct ChildReport<'a> {
    request: &'a ContextRequest,
    skeleton_fragments: &'a [ContextFragment],
    skeleton_tokens: usize,
    depth_delta: u32,
}

pub fn child_context(a: &ChildArgs) -> CmdResult {
    let parent_depth: Depth =
        a.parent_detail.parse().map_err(|e: decision_store::Error| Failure::usage(format!("--parent-detail: {e}")))?;
    let store = open_read(&a.db)?;
    let plan = store.find_plan(&a.plan)?;
    let options = StoredContextOptions {
        budget: a.budget,
        parent_breadth: a.parent_breadth,
        parent_depth,
        parent_depth_in_tree: a.parent_depth,
        child_depth_in_tree: a.child_depth,
        child_focus: if a.focus.is_empty() { None } else { Some(a.focus.clone()) },
        ..StoredContextOptions::default()
    };
    let result = store.child_context(plan, &options)?;
    let report = ChildReport {
        request: result.request(),
        skeleton_fragments: result.skeleton_fragments(),
        skeleton_tokens: result.skeleton_tokens(),
        depth_delta: result.depth_delta(),
    };
    if a.format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let r = result.request();
    let mut out = format!(
        "child request: focus {}, breadth {}, depth {}, gradient {}, budget {}\n",
        r.focus().join(", "),
        r.breadth(),
        r.depth(),
        if r.depth_gradient() { "on" } else { "off" },
        r.budget()
    );
    let _ = writeln!(
        out,
        "skeleton: {}, {} (depth delta {})",
        count(report.skeleton_fragments.len() as u64, "fragment"),
        count(report.skeleton_tokens as u64, "token"),
        report.depth_delta
    );
    for f in report.skeleton_fragments {
        let _ =
            writeln!(out, "── {}  (depth {}, {})", f.uko_node(), f.detail_depth(), count(f.tokens() as u64, "token"));
        for line in f.content().lines() {
            let _ = writeln!(out, "   {line}");
        }
    }
    print_text(&out)?;
    Ok(0)
}

/// Builds [`ProjectArgs`] of a breadth-first projection for other commands (the demo).
pub struct ProjectArgsBuilder(ProjectArgs);

impl ProjectArgsBuilder {
    pub fn new(db: &std::path::Path, focus: &str, breadth: u32, depth: &str) -> Self {
        ProjectArgsBuilder(ProjectArgs {
            db: db.to_owned(),
            focus: vec![focus.to_owned()],
            breadth: Some(breadth),
            depth: depth.to_owned(),
            no_gradient: false,
            domain: "uko-code:".into(),
            direction: Some(Direction::Outgoing),
            ranking: Ranking::Distance,
            relation: Vec::new(),
            max_fan_out: None,
            budget: None,
            fragments: false,
            format: Format::Text,
        })
    }
    pub fn build(self) -> ProjectArgs {
        self.0
    }
}
