//! Read commands: `info`, `plans`, `show`, `tree`, `chain`, `impact`, `check`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use decision_store::hash;
use decision_store::store::{Anchor, AnchorScope, Problem};
use decision_store::{Decision, DecisionId, DecisionTree, Phase, Store, TreeView, ViewNode};
use serde::Serialize;

use decision_store::time::utc_ms as time;

use super::render::{bytes, confidence, short, table};
use super::{
    open_read, parse_decision, parse_plan, print_json, print_text, stdout, CmdResult, Failure, Format, TreeFormat,
};

#[derive(Serialize)]
struct InfoReport {
    /// The file, or the server's URL without its password.
    path: String,
    /// `sqlite` or `postgres`.
    backend: &'static str,
    /// `null` on a server.
    file_size: Option<u64>,
    schema_version: i64,
    sqlite_version: &'static str,
    /// The PostgreSQL server's version, `null` for a file.
    server_version: Option<String>,
    plans: u64,
    decisions: u64,
    corrections: u64,
    supersessions: u64,
    nodes: u64,
    edges: u64,
    by_type: BTreeMap<String, u64>,
    by_phase: BTreeMap<String, u64>,
    /// On a server: its place in streaming replication (absent for a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    replication: Option<decision_store::store::Replication>,
}

/// A lag as a person reads it.
fn lag(bytes_behind: Option<i64>, ms: Option<i64>) -> String {
    let time = ms.map_or_else(|| "no recent figure".to_owned(), |ms| format!("{:.3} s", ms as f64 / 1000.0));
    match bytes_behind {
        Some(b) => format!("{time}, {} behind", bytes(b.max(0) as u64)),
        None => time,
    }
}

pub fn info(db: &Path, format: Format) -> CmdResult {
    let store = open_read(db)?;
    // One snapshot: counts that agree with each other even while a writer runs.
    let (counts, graph, schema_version) =
        store.read_snapshot(|s| Ok((s.decision_counts()?, s.graph_counts()?, s.schema_version()?)))?;
    let mut by_phase: BTreeMap<String, u64> =
        [Phase::Strategize, Phase::Execute, Phase::Any].iter().map(|p| (p.to_string(), 0)).collect();
    for (t, n) in &counts.by_type {
        *by_phase.entry(t.phase().to_string()).or_default() += n;
    }
    let report = InfoReport {
        path: store.display_name(),
        backend: store.backend(),
        file_size: match store.path() {
            Some(path) => Some(std::fs::metadata(path)?.len()),
            None => None,
        },
        schema_version,
        sqlite_version: decision_store::Store::sqlite_version(),
        server_version: store.server_version()?,
        plans: counts.plans,
        decisions: counts.decisions,
        corrections: counts.corrections,
        supersessions: counts.supersessions,
        nodes: graph.nodes,
        edges: graph.edges,
        by_type: counts.by_type.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
        by_phase,
        replication: store.replication()?,
    };
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut rows = vec![
        match report.file_size {
            Some(size) => vec!["file".into(), format!("{} ({})", report.path, bytes(size))],
            None => vec!["server".into(), format!("{} (PostgreSQL)", report.path)],
        },
        vec!["schema version".into(), report.schema_version.to_string()],
        match &report.server_version {
            Some(v) => vec!["postgres version".into(), v.clone()],
            None => vec!["sqlite version".into(), report.sqlite_version.to_string()],
        },
        vec!["plans".into(), report.plans.to_string()],
        vec![
            "decisions".into(),
            format!(
                "{} (strategize {}, execute {}, any phase {})",
                report.decisions, report.by_phase["strategize"], report.by_phase["execute"], report.by_phase["any"]
            ),
        ],
        vec!["corrections".into(), report.corrections.to_string()],
        vec!["supersessions".into(), report.supersessions.to_string()],
        vec!["graph".into(), format!("{} nodes, {} edges", report.nodes, report.edges)],
    ];
    for (t, n) in &report.by_type {
        rows.push(vec![format!("  {t}"), n.to_string()]);
    }
    match &report.replication {
        Some(r) if r.standby => {
            rows.push(vec!["replication".into(), format!("standby, lag {}", lag(r.lag_bytes, r.lag_ms))])
        }
        Some(r) if r.standbys.is_empty() => rows.push(vec!["replication".into(), "primary, no standby".into()]),
        Some(r) => {
            rows.push(vec!["replication".into(), format!("primary, {} standby(s)", r.standbys.len())]);
            for s in &r.standbys {
                let state = format!("{} {}, lag {}", s.sync_state, s.state, lag(s.lag_bytes, s.lag_ms));
                rows.push(vec![format!("  {}", s.name), state]);
            }
        }
        None => {}
    }
    print_text(&table(&["", ""], &rows).lines().skip(1).map(|l| format!("{l}\n")).collect::<String>())?;
    Ok(0)
}

/// One row of `dstore plans --format json` (and of the web view's `/api/plans`).
#[derive(Serialize)]
pub struct PlanRow {
    pub plan_id: String,
    pub decisions: u64,
    pub max_depth: u64,
    pub corrections: u64,
    pub superseded: u64,
    pub first: String,
    pub last: String,
}

/// Every plan's row, as `dstore plans` shows them.
pub fn plan_rows(store: &Store) -> Result<Vec<PlanRow>, Failure> {
    Ok(store
        .plans()?
        .into_iter()
        .map(|p| PlanRow {
            plan_id: p.plan_id.to_string(),
            decisions: p.decisions,
            max_depth: p.max_depth,
            corrections: p.corrections,
            superseded: p.superseded,
            first: time(p.first_ms),
            last: time(p.last_ms),
        })
        .collect())
}

pub fn plans(db: &Path, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let rows = plan_rows(&store)?;
    if format == Format::Json {
        print_json(&rows)?;
        return Ok(0);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.plan_id.clone(),
                r.decisions.to_string(),
                r.max_depth.to_string(),
                r.corrections.to_string(),
                r.superseded.to_string(),
                r.first.clone(),
                r.last.clone(),
            ]
        })
        .collect();
    print_text(&table(&["PLAN", "DECISIONS", "DEPTH", "CORRECTIONS", "SUPERSEDED", "FIRST", "LAST"], &cells))?;
    Ok(0)
}

fn ids<'a>(ds: impl IntoIterator<Item = &'a Decision>) -> Vec<String> {
    ds.into_iter().map(|d| d.decision_id().to_string()).collect()
}

fn label(d: &Decision) -> String {
    format!("{} #{}", d.decision_type(), d.sequence())
}

/// `dstore show --format json` (and the web view's `/api/decision/ID`).
#[derive(Serialize)]
pub struct ShowReport {
    pub decision: serde_json::Value,
    pub parent: Option<String>,
    pub children: Vec<String>,
    pub correction_chain: Vec<String>,
    pub superseded_by_chain: Vec<String>,
    pub effective: String,
}

/// The report of decision `id` of `tree` (its plan's, from `Store::tree_of`).
pub fn show_report(tree: &DecisionTree, id: DecisionId) -> Option<ShowReport> {
    let d = tree.get(id)?;
    let standing = tree.standing(id).unwrap_or(d);
    Some(ShowReport {
        decision: d.to_json_value(),
        parent: d.parent_decision_id().map(|p| p.to_string()),
        children: ids(tree.children(id)),
        correction_chain: ids(tree.correction_chain(id)),
        superseded_by_chain: ids(tree.supersession_path(id)),
        effective: standing.decision_id().to_string(),
    })
}

pub fn show(db: &Path, id: &str, format: Format) -> CmdResult {
    let id = parse_decision(id)?;
    let store = open_read(db)?;
    let tree = store.tree_of(id)?;
    let d = tree.get(id).expect("tree_of holds the decision");
    let report = show_report(&tree, id).expect("tree_of holds the decision");
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}  {}", d.decision_id(), label(d));
    let _ = writeln!(out, "plan          {}", d.plan_id());
    let _ = writeln!(out, "phase         {}", d.decision_type().phase());
    let _ = writeln!(out, "confidence    {}", confidence(d.confidence_score()));
    let _ = writeln!(out, "chosen        {}", d.chosen_option());
    let _ = writeln!(out, "rationale     {}", d.rationale());
    for a in d.alternatives() {
        let _ = writeln!(
            out,
            "alternative   {}{}",
            a.option(),
            a.rationale().map(|r| format!(" ({r})")).unwrap_or_default()
        );
    }
    let snap = d.context_snapshot();
    if !snap.is_empty() {
        let _ = writeln!(out, "snapshot      {}", if snap.hash().is_empty() { "(no hash)" } else { snap.hash() });
        for r in snap.resources() {
            let _ = match r.version() {
                Some(v) => writeln!(out, "  resource    {}  version {}", r.resource_id(), short(v, 20)),
                None => writeln!(out, "  resource    {}", r.resource_id()),
            };
        }
        if let Some(a) = snap.actor_state_ref() {
            let _ = writeln!(out, "  actor state {a}");
        }
    }
    for a in d.artifacts_produced() {
        let _ = writeln!(out, "artifact      {}", a.artifact_path());
    }
    for x in d.downstream_decision_ids() {
        let _ = writeln!(out, "downstream    decision {x}");
    }
    for x in d.downstream_plan_ids() {
        let _ = writeln!(out, "downstream    plan {x}");
    }
    if !d.metadata().is_empty() {
        let _ = writeln!(out, "metadata      {}", serde_json::Value::Object(d.metadata().clone()));
    }
    let describe = |id: &str| -> String {
        DecisionId::parse(id)
            .ok()
            .and_then(|i| tree.get(i))
            .map(|x| format!("{id}  {}  {}", label(x), short(x.chosen_option(), 50)))
            .unwrap_or_else(|| id.to_owned())
    };
    let _ =
        writeln!(out, "parent        {}", report.parent.as_deref().map(describe).unwrap_or_else(|| "(root)".into()));
    for c in &report.children {
        let _ = writeln!(out, "child         {}", describe(c));
    }
    if report.correction_chain.len() > 1 {
        let _ = writeln!(out, "correction chain (original first):");
        for c in &report.correction_chain {
            let _ = writeln!(out, "  {}", describe(c));
        }
    }
    if !report.superseded_by_chain.is_empty() {
        let _ = writeln!(out, "superseded by:");
        for c in &report.superseded_by_chain {
            let _ = writeln!(out, "  {}", describe(c));
        }
    }
    let _ = writeln!(out, "stands now    {}", describe(&report.effective));
    print_text(&out)?;
    Ok(0)
}

/// The fields of one node of `tree --format json` and `--format jsonl`,
/// without the braces, appended to `out`: decision_id, decision_type,
/// sequence, depth, confidence_score, chosen_option, corrected_by,
/// superseded_by, effective. Written by hand because a plan's tree writes
/// thousands: the keys are constants and ids need no escaping, so only the
/// chosen option goes through serde_json's string escaping.
fn node_fields(tree: &DecisionTree, n: &ViewNode<'_>, out: &mut Vec<u8>) -> io::Result<()> {
    let d = n.decision;
    let mut id = [0u8; 26];
    let mut ids = |out: &mut Vec<u8>, key: &[u8], value: Option<DecisionId>| {
        out.extend_from_slice(key);
        match value {
            Some(v) => {
                out.push(b'"');
                out.extend_from_slice(v.encode(&mut id).as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
    };
    ids(out, b"\"decision_id\":", Some(d.decision_id()));
    write!(
        out,
        ",\"decision_type\":\"{}\",\"sequence\":{},\"depth\":{},\"confidence_score\":",
        d.decision_type().as_str(),
        d.sequence(),
        tree.depth_at(n.index).unwrap_or(0)
    )?;
    serde_json::to_writer(&mut *out, &d.confidence_score())?;
    out.extend_from_slice(b",\"chosen_option\":");
    serde_json::to_writer(&mut *out, d.chosen_option())?;
    out.extend_from_slice(b",\"corrected_by\":[");
    for (k, c) in tree.corrected_by_at(n.index).iter().enumerate() {
        ids(out, if k == 0 { b"" } else { b"," }, Some(*c));
    }
    out.push(b']');
    ids(out, b",\"superseded_by\":", d.superseded_by());
    out.extend_from_slice(if tree.is_effective_at(n.index) { b",\"effective\":true" } else { b",\"effective\":false" });
    Ok(())
}

/// Indentation stops growing here, so a plan a million levels deep prints
/// in linear space; deeper levels show how many levels are not drawn.
const MAX_INDENT: usize = 32;

fn seq_of(tree: &DecisionTree, id: DecisionId) -> String {
    tree.get(id).map(|d| format!("#{}", d.sequence())).unwrap_or_else(|| id.to_string())
}

fn text_tree(tree: &DecisionTree, view: &TreeView<'_>, out: &mut impl Write) -> io::Result<()> {
    // For each ancestor level: was that ancestor the last of its siblings?
    let mut last_at: Vec<bool> = Vec::new();
    let mut line = String::new();
    for n in &view.nodes {
        last_at.truncate(n.level);
        line.clear();
        let skipped = n.level.saturating_sub(MAX_INDENT);
        if skipped > 0 {
            let _ = write!(line, "⋯{skipped} ");
        }
        for &last in &last_at[skipped..] {
            line.push_str(if last { "   " } else { "│  " });
        }
        let d = n.decision;
        let id = d.decision_id();
        let mut marks = Vec::new();
        if !tree.corrected_by(id).is_empty() {
            let by: Vec<String> = tree.corrected_by(id).iter().map(|c| seq_of(tree, *c)).collect();
            marks.push(format!("corrected by {}", by.join(", ")));
        }
        if let Some(s) = d.superseded_by() {
            marks.push(format!("superseded by {}", seq_of(tree, s)));
        }
        let marks = if marks.is_empty() { String::new() } else { format!("  [{}]", marks.join("; ")) };
        let _ = writeln!(
            line,
            "{}{} #{}  {}  {}{marks}",
            if n.last { "└─ " } else { "├─ " },
            d.decision_type(),
            d.sequence(),
            confidence(d.confidence_score()),
            short(d.chosen_option(), 48),
        );
        out.write_all(line.as_bytes())?;
        last_at.push(n.last);
    }
    Ok(())
}

/// The nested JSON document, streamed: each node on its own line, opened
/// before its children and closed after them, with no recursion.
pub fn json_tree(tree: &DecisionTree, plan: &str, view: &TreeView<'_>, out: &mut impl Write) -> io::Result<()> {
    write!(out, "{{\"plan_id\":\"{plan}\",\"roots\":[")?;
    let mut head = Vec::with_capacity(512);
    const SPACES: &[u8] = &[b' '; 2 * (MAX_INDENT + 1)];
    // Levels of the nodes whose children arrays are still open.
    let mut open = 0usize;
    for (i, n) in view.nodes.iter().enumerate() {
        while open > n.level {
            out.write_all(b"]}")?;
            open -= 1;
        }
        let first_sibling = i == 0 || view.nodes[i - 1].level < n.level;
        if !first_sibling {
            out.write_all(b",")?;
        }
        head.clear();
        head.push(b'\n');
        head.extend_from_slice(&SPACES[..2 * (n.level.min(MAX_INDENT) + 1)]);
        head.push(b'{');
        node_fields(tree, n, &mut head)?;
        head.extend_from_slice(b",\"children\":[");
        out.write_all(&head)?;
        open = n.level + 1;
    }
    while open > 0 {
        out.write_all(b"]}")?;
        open -= 1;
    }
    out.write_all(b"\n]}\n")
}

/// The view as JSON Lines: flat, so any JSON reader takes a plan of any
/// depth. Each line starts with `parent` (the parent shown in this view:
/// with `--effective`, the nearest ancestor that stands) and `level`.
fn jsonl_tree(tree: &DecisionTree, view: &TreeView<'_>, out: &mut impl Write) -> io::Result<()> {
    let mut line = Vec::with_capacity(512);
    let mut id = [0u8; 26];
    for n in &view.nodes {
        line.clear();
        match n.parent {
            Some(p) => {
                let parent = view.nodes[p].decision.decision_id().encode(&mut id);
                write!(line, "{{\"parent\":\"{parent}\",\"level\":{},", n.level)?;
            }
            None => write!(line, "{{\"parent\":null,\"level\":{},", n.level)?,
        }
        node_fields(tree, n, &mut line)?;
        line.extend_from_slice(b"}\n");
        out.write_all(&line)?;
    }
    Ok(())
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn dot(tree: &DecisionTree, plan: &str, view: &TreeView<'_>, out: &mut impl Write) -> io::Result<()> {
    let shown: HashSet<DecisionId> = view.nodes.iter().map(|n| n.decision.decision_id()).collect();
    write!(out, "digraph \"plan {plan}\" {{\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];\n")?;
    for n in &view.nodes {
        let d = n.decision;
        let style =
            if tree.is_effective(d.decision_id()) { "" } else { ", fillcolor=\"#eeeeee\", fontcolor=\"#777777\"" };
        let text = format!(
            "{} #{}\n{} {}",
            d.decision_type(),
            d.sequence(),
            confidence(d.confidence_score()),
            short(d.chosen_option(), 40)
        );
        writeln!(out, "  \"{}\" [label=\"{}\"{style}];", d.decision_id(), dot_escape(&text))?;
    }
    for n in &view.nodes {
        let id = n.decision.decision_id();
        if let Some(p) = n.parent {
            writeln!(out, "  \"{}\" -> \"{id}\";", view.nodes[p].decision.decision_id())?;
        }
        for c in tree.corrected_by(id).iter().filter(|c| shown.contains(c)) {
            writeln!(out, "  \"{c}\" -> \"{id}\" [style=dashed, color=\"#c0392b\", fontcolor=\"#c0392b\", label=\"corrects\", constraint=false];")?;
        }
        if let Some(s) = n.decision.superseded_by().filter(|s| shown.contains(s)) {
            writeln!(out, "  \"{id}\" -> \"{s}\" [style=dotted, color=\"#2c6fbb\", fontcolor=\"#2c6fbb\", label=\"superseded by\", constraint=false];")?;
        }
    }
    out.write_all(b"}\n")
}

fn mermaid(tree: &DecisionTree, view: &TreeView<'_>, out: &mut impl Write) -> io::Result<()> {
    let key: HashMap<DecisionId, usize> =
        view.nodes.iter().enumerate().map(|(i, n)| (n.decision.decision_id(), i)).collect();
    let esc = |s: &str| s.replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;");
    out.write_all(b"flowchart TD\n")?;
    for (i, n) in view.nodes.iter().enumerate() {
        let d = n.decision;
        writeln!(
            out,
            "  d{i}[\"{} #{}<br/>{} {}\"]",
            d.decision_type(),
            d.sequence(),
            confidence(d.confidence_score()),
            esc(&short(d.chosen_option(), 40))
        )?;
    }
    for (i, n) in view.nodes.iter().enumerate() {
        let id = n.decision.decision_id();
        if let Some(p) = n.parent {
            writeln!(out, "  d{p} --> d{i}")?;
        }
        for c in tree.corrected_by(id).iter().filter_map(|c| key.get(c)) {
            writeln!(out, "  d{c} -. corrects .-> d{i}")?;
        }
        if let Some(s) = n.decision.superseded_by().and_then(|s| key.get(&s)) {
            writeln!(out, "  d{i} -. superseded by .-> d{s}")?;
        }
    }
    out.write_all(b"  classDef stale fill:#eeeeee,color:#777777;\n")?;
    let stale: Vec<String> = view
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !tree.is_effective(n.decision.decision_id()))
        .map(|(i, _)| format!("d{i}"))
        .collect();
    if !stale.is_empty() {
        writeln!(out, "  class {} stale;", stale.join(","))?;
    }
    Ok(())
}

pub fn tree(db: &Path, plan: &str, effective_only: bool, format: TreeFormat) -> CmdResult {
    let plan = parse_plan(plan)?;
    let store = open_read(db)?;
    // The renderings show ids, links, type, sequence, confidence and the chosen option only.
    let tree = store.decision_tree_outline(plan)?;
    let view = tree.view(effective_only);
    let plan = plan.to_string();
    let mut out = stdout();
    match format {
        TreeFormat::Json => json_tree(&tree, &plan, &view, &mut out)?,
        TreeFormat::Jsonl => jsonl_tree(&tree, &view, &mut out)?,
        TreeFormat::Dot => dot(&tree, &plan, &view, &mut out)?,
        TreeFormat::Mermaid => mermaid(&tree, &view, &mut out)?,
        TreeFormat::Text => {
            writeln!(
                out,
                "plan {plan}  ({} decisions, {} effective, depth {})",
                tree.len(),
                tree.effective().len(),
                tree.max_depth()
            )?;
            text_tree(&tree, &view, &mut out)?;
        }
    }
    out.flush()?;
    // The process ends here: freeing a large tree piece by piece would only cost time.
    std::mem::forget(view);
    std::mem::forget(tree);
    Ok(0)
}

#[derive(Serialize)]
struct ChainReport {
    decision_id: String,
    corrections: Vec<String>,
    supersessions: Vec<String>,
    effective: String,
}

pub fn chain(db: &Path, id: &str, format: Format) -> CmdResult {
    let id = parse_decision(id)?;
    let store = open_read(db)?;
    let tree = store.tree_of(id)?;
    let path = tree.supersession_path(id);
    let supersessions =
        if path.is_empty() { Vec::new() } else { std::iter::once(id.to_string()).chain(ids(path)).collect() };
    let standing =
        tree.standing(id).ok_or_else(|| decision_store::Error::Cycle(format!("the history of {id} loops")))?;
    let report = ChainReport {
        decision_id: id.to_string(),
        corrections: ids(tree.correction_chain(id)),
        supersessions,
        effective: standing.decision_id().to_string(),
    };
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let line = |ids: &[String]| -> String {
        ids.iter()
            .map(|i| {
                DecisionId::parse(i)
                    .ok()
                    .and_then(|x| tree.get(x))
                    .map(|d| format!("#{} {}", d.sequence(), short(d.chosen_option(), 30)))
                    .unwrap_or_else(|| i.clone())
            })
            .collect::<Vec<_>>()
            .join("  →  ")
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "corrections    {}",
        if report.corrections.len() > 1 { line(&report.corrections) } else { "(none)".into() }
    );
    let _ = writeln!(
        out,
        "supersessions  {}",
        if report.supersessions.is_empty() { "(none)".into() } else { line(&report.supersessions) }
    );
    let _ = writeln!(out, "stands now     {}  {}", report.effective, line(std::slice::from_ref(&report.effective)));
    print_text(&out)?;
    Ok(0)
}

#[derive(Serialize)]
struct ImpactReport {
    decision_id: String,
    descendants: Vec<String>,
    downstream_decisions: Vec<String>,
    downstream_plans: Vec<String>,
    artifacts: Vec<String>,
}

pub fn impact(db: &Path, id: &str, format: Format) -> CmdResult {
    let id = parse_decision(id)?;
    let store = open_read(db)?;
    let tree = store.tree_of(id)?;
    let impact = tree.impact(id);
    let report = ImpactReport {
        decision_id: id.to_string(),
        descendants: ids(impact.descendants.iter().copied()),
        downstream_decisions: impact.downstream_decisions.iter().map(|x| x.to_string()).collect(),
        downstream_plans: impact.downstream_plans.iter().map(|x| x.to_string()).collect(),
        artifacts: impact.artifacts.iter().map(|a| a.to_string()).collect(),
    };
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut out = stdout();
    writeln!(out, "impact of {id}")?;
    let mut section = |title: &str, items: &[String]| -> io::Result<()> {
        writeln!(out, "{title} ({})", items.len())?;
        for i in items {
            let extra = DecisionId::parse(i)
                .ok()
                .and_then(|x| tree.get(x))
                .map(|d| format!("  {}  {}", label(d), short(d.chosen_option(), 40)))
                .unwrap_or_default();
            writeln!(out, "  {i}{extra}")?;
        }
        Ok(())
    };
    section("descendants", &report.descendants)?;
    section("downstream decisions", &report.downstream_decisions)?;
    section("downstream plans", &report.downstream_plans)?;
    section("artifacts", &report.artifacts)?;
    out.flush()?;
    Ok(0)
}

#[derive(Serialize)]
struct CheckReport {
    ok: bool,
    problems: Vec<Problem>,
}

pub fn check(db: &Path, expect: &[String], format: Format) -> CmdResult {
    let anchors = expect
        .iter()
        .map(|e| e.parse::<Anchor>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::usage(format!("--expect: {e}")))?;
    let store = open_read(db)?;
    let problems = store.check_against(&anchors)?;
    let report = CheckReport { ok: problems.is_empty(), problems };
    if format == Format::Json {
        print_json(&report)?;
    } else if report.ok {
        let verified =
            if anchors.is_empty() { String::new() } else { format!(", {} anchored digest(s) verified", anchors.len()) };
        print_text(&format!("ok: no problems found{verified}\n"))?;
    } else {
        let rows: Vec<Vec<String>> = report
            .problems
            .iter()
            .map(|p| vec![p.kind.to_string(), p.decision_id.clone().unwrap_or_else(|| "-".into()), p.message.clone()])
            .collect();
        print_text(&table(&["KIND", "DECISION", "PROBLEM"], &rows))?;
        eprintln!("dstore: {} problem(s) found", report.problems.len());
    }
    Ok(if report.ok { 0 } else { 1 })
}

#[derive(Serialize)]
struct DigestLine {
    scope: String,
    entries: u64,
    head: String,
    anchor: String,
}

impl DigestLine {
    fn of(a: &Anchor) -> Self {
        let scope = match &a.scope {
            AnchorScope::Store => "store".to_owned(),
            AnchorScope::Plan(p) => p.clone(),
        };
        DigestLine { scope, entries: a.entries, head: hash::to_hex(&a.hash), anchor: a.to_string() }
    }
}

pub fn digest(db: &Path, plan: Option<&str>, format: Format) -> CmdResult {
    let plan = plan.map(parse_plan).transpose()?.map(|p| p.to_string());
    let store = open_read(db)?;
    let digest = store.digest()?;
    let lines: Vec<DigestLine> = match &plan {
        Some(p) => {
            let a = digest
                .plans
                .iter()
                .find(|a| a.scope == AnchorScope::Plan(p.clone()))
                .ok_or_else(|| decision_store::Error::PlanNotFound(p.clone()))?;
            vec![DigestLine::of(a)]
        }
        None => digest.plans.iter().chain([&digest.store]).map(DigestLine::of).collect(),
    };
    if format == Format::Json {
        print_json(&lines)?;
    } else {
        print_text(&lines.iter().map(|l| format!("{}\n", l.anchor)).collect::<String>())?;
    }
    Ok(0)
}
