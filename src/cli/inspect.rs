//! Read commands: `info`, `plans`, `show`, `tree`, `chain`, `impact`, `check`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use decision_store::store::Problem;
use decision_store::{Decision, DecisionId, DecisionTree, Phase};
use serde::Serialize;

use super::render::{bytes, confidence, short, table, time};
use super::{open_read, parse_decision, parse_plan, print_json, print_text, CmdResult, Format, TreeFormat};

#[derive(Serialize)]
struct InfoReport {
    path: String,
    file_size: u64,
    schema_version: i64,
    sqlite_version: &'static str,
    plans: u64,
    decisions: u64,
    corrections: u64,
    supersessions: u64,
    nodes: u64,
    edges: u64,
    by_type: BTreeMap<String, u64>,
    by_phase: BTreeMap<String, u64>,
}

pub fn info(db: &Path, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let counts = store.decision_counts()?;
    let graph = store.graph_counts()?;
    let mut by_phase: BTreeMap<String, u64> =
        [Phase::Strategize, Phase::Execute, Phase::Any].iter().map(|p| (p.to_string(), 0)).collect();
    for (t, n) in &counts.by_type {
        *by_phase.entry(t.phase().to_string()).or_default() += n;
    }
    let report = InfoReport {
        path: db.display().to_string(),
        file_size: std::fs::metadata(db)?.len(),
        schema_version: store.schema_version()?,
        sqlite_version: decision_store::Store::sqlite_version(),
        plans: counts.plans,
        decisions: counts.decisions,
        corrections: counts.corrections,
        supersessions: counts.supersessions,
        nodes: graph.nodes,
        edges: graph.edges,
        by_type: counts.by_type.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
        by_phase,
    };
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut rows = vec![
        vec!["file".into(), format!("{} ({})", report.path, bytes(report.file_size))],
        vec!["schema version".into(), report.schema_version.to_string()],
        vec!["sqlite version".into(), report.sqlite_version.to_string()],
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
    print_text(&table(&["", ""], &rows).lines().skip(1).map(|l| format!("{l}\n")).collect::<String>())?;
    Ok(0)
}

#[derive(Serialize)]
struct PlanRow {
    plan_id: String,
    decisions: u64,
    max_depth: u64,
    corrections: u64,
    superseded: u64,
    first: String,
    last: String,
}

pub fn plans(db: &Path, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let rows: Vec<PlanRow> = store
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
        .collect();
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

#[derive(Serialize)]
struct ShowReport {
    decision: serde_json::Value,
    parent: Option<String>,
    children: Vec<String>,
    correction_chain: Vec<String>,
    superseded_by_chain: Vec<String>,
    effective: String,
}

pub fn show(db: &Path, id: &str, format: Format) -> CmdResult {
    let id = parse_decision(id)?;
    let store = open_read(db)?;
    let tree = store.tree_of(id)?;
    let d = tree.get(id).expect("tree_of holds the decision");
    let standing = tree.standing(id).unwrap_or(d);
    let report = ShowReport {
        decision: d.to_json_value(),
        parent: d.parent_decision_id().map(|p| p.to_string()),
        children: ids(tree.children(id)),
        correction_chain: ids(tree.correction_chain(id)),
        superseded_by_chain: ids(tree.supersession_path(id)),
        effective: standing.decision_id().to_string(),
    };
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
            let _ = writeln!(out, "  resource    {}", r.resource_id());
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

#[derive(Serialize)]
struct TreeNode {
    decision_id: String,
    decision_type: String,
    sequence: u32,
    depth: usize,
    confidence_score: Option<f64>,
    chosen_option: String,
    corrected_by: Vec<String>,
    superseded_by: Option<String>,
    effective: bool,
    children: Vec<TreeNode>,
}

#[derive(Serialize)]
struct TreeReport {
    plan_id: String,
    roots: Vec<TreeNode>,
}

fn build_nodes(tree: &DecisionTree, of: &[&Decision], effective_only: bool) -> Vec<TreeNode> {
    let mut out = Vec::new();
    for d in of {
        let id = d.decision_id();
        let children = build_nodes(tree, &tree.children(id), effective_only);
        if effective_only && !tree.is_effective(id) {
            out.extend(children); // a hidden decision's children move up
            continue;
        }
        out.push(TreeNode {
            decision_id: id.to_string(),
            decision_type: d.decision_type().to_string(),
            sequence: d.sequence(),
            depth: tree.depth(id).unwrap_or(0),
            confidence_score: d.confidence_score(),
            chosen_option: d.chosen_option().to_owned(),
            corrected_by: tree.corrected_by(id).iter().map(|c| c.to_string()).collect(),
            superseded_by: d.superseded_by().map(|s| s.to_string()),
            effective: tree.is_effective(id),
            children,
        });
    }
    out.sort_by_key(|n| n.sequence);
    out
}

fn seq_of(tree: &DecisionTree, id: &str) -> String {
    DecisionId::parse(id)
        .ok()
        .and_then(|i| tree.get(i))
        .map(|d| format!("#{}", d.sequence()))
        .unwrap_or_else(|| id.to_owned())
}

fn text_tree(tree: &DecisionTree, nodes: &[TreeNode], prefix: &str, out: &mut String) {
    for (i, n) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        let mut marks = Vec::new();
        if !n.corrected_by.is_empty() {
            marks.push(format!(
                "corrected by {}",
                n.corrected_by.iter().map(|c| seq_of(tree, c)).collect::<Vec<_>>().join(", ")
            ));
        }
        if let Some(s) = &n.superseded_by {
            marks.push(format!("superseded by {}", seq_of(tree, s)));
        }
        let marks = if marks.is_empty() { String::new() } else { format!("  [{}]", marks.join("; ")) };
        let _ = writeln!(
            out,
            "{prefix}{}{} #{}  {}  {}{marks}",
            if last { "└─ " } else { "├─ " },
            n.decision_type,
            n.sequence,
            confidence(n.confidence_score),
            short(&n.chosen_option, 48),
        );
        text_tree(tree, &n.children, &format!("{prefix}{}", if last { "   " } else { "│  " }), out);
    }
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn visit<'a>(nodes: &'a [TreeNode], out: &mut Vec<&'a TreeNode>) {
    for n in nodes {
        out.push(n);
        visit(&n.children, out);
    }
}

fn dot(plan: &str, roots: &[TreeNode]) -> String {
    let mut all = Vec::new();
    visit(roots, &mut all);
    let shown: std::collections::HashSet<&str> = all.iter().map(|n| n.decision_id.as_str()).collect();
    let mut out = format!("digraph \"plan {plan}\" {{\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];\n");
    for n in &all {
        let style = if n.effective { "" } else { ", fillcolor=\"#eeeeee\", fontcolor=\"#777777\"" };
        let text = format!(
            "{} #{}\n{} {}",
            n.decision_type,
            n.sequence,
            confidence(n.confidence_score),
            short(&n.chosen_option, 40)
        );
        let _ = writeln!(out, "  \"{}\" [label=\"{}\"{style}];", n.decision_id, dot_escape(&text));
    }
    for n in &all {
        for c in &n.children {
            let _ = writeln!(out, "  \"{}\" -> \"{}\";", n.decision_id, c.decision_id);
        }
        for c in n.corrected_by.iter().filter(|c| shown.contains(c.as_str())) {
            let _ = writeln!(out, "  \"{c}\" -> \"{}\" [style=dashed, color=\"#c0392b\", fontcolor=\"#c0392b\", label=\"corrects\", constraint=false];", n.decision_id);
        }
        if let Some(s) = n.superseded_by.as_ref().filter(|s| shown.contains(s.as_str())) {
            let _ = writeln!(out, "  \"{}\" -> \"{s}\" [style=dotted, color=\"#2c6fbb\", fontcolor=\"#2c6fbb\", label=\"superseded by\", constraint=false];", n.decision_id);
        }
    }
    out.push_str("}\n");
    out
}

fn mermaid(roots: &[TreeNode]) -> String {
    let mut all = Vec::new();
    visit(roots, &mut all);
    let key: std::collections::HashMap<&str, String> =
        all.iter().enumerate().map(|(i, n)| (n.decision_id.as_str(), format!("d{i}"))).collect();
    let esc = |s: &str| s.replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;");
    let mut out = String::from("flowchart TD\n");
    for n in &all {
        let _ = writeln!(
            out,
            "  {}[\"{} #{}<br/>{} {}\"]",
            key[n.decision_id.as_str()],
            n.decision_type,
            n.sequence,
            confidence(n.confidence_score),
            esc(&short(&n.chosen_option, 40))
        );
    }
    for n in &all {
        let k = &key[n.decision_id.as_str()];
        for c in &n.children {
            let _ = writeln!(out, "  {k} --> {}", key[c.decision_id.as_str()]);
        }
        for c in n.corrected_by.iter().filter_map(|c| key.get(c.as_str())) {
            let _ = writeln!(out, "  {c} -. corrects .-> {k}");
        }
        if let Some(s) = n.superseded_by.as_ref().and_then(|s| key.get(s.as_str())) {
            let _ = writeln!(out, "  {k} -. superseded by .-> {s}");
        }
    }
    let stale: Vec<&str> = all.iter().filter(|n| !n.effective).map(|n| key[n.decision_id.as_str()].as_str()).collect();
    out.push_str("  classDef stale fill:#eeeeee,color:#777777;\n");
    if !stale.is_empty() {
        let _ = writeln!(out, "  class {} stale;", stale.join(","));
    }
    out
}

pub fn tree(db: &Path, plan: &str, effective_only: bool, format: TreeFormat) -> CmdResult {
    let plan = parse_plan(plan)?;
    let store = open_read(db)?;
    let tree = store.decision_tree(plan)?;
    let roots = build_nodes(&tree, &tree.roots(), effective_only);
    let report = TreeReport { plan_id: plan.to_string(), roots };
    match format {
        TreeFormat::Json => print_json(&report)?,
        TreeFormat::Dot => print_text(&dot(&report.plan_id, &report.roots))?,
        TreeFormat::Mermaid => print_text(&mermaid(&report.roots))?,
        TreeFormat::Text => {
            let mut out = format!(
                "plan {}  ({} decisions, {} effective, depth {})\n",
                report.plan_id,
                tree.len(),
                tree.effective().len(),
                tree.max_depth()
            );
            text_tree(&tree, &report.roots, "", &mut out);
            print_text(&out)?;
        }
    }
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

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

pub fn impact(db: &Path, id: &str, format: Format) -> CmdResult {
    let id = parse_decision(id)?;
    let store = open_read(db)?;
    let tree = store.tree_of(id)?;
    let subtree = tree.subtree(id);
    let mut report = ImpactReport {
        decision_id: id.to_string(),
        descendants: ids(subtree.iter().skip(1).copied()),
        downstream_decisions: Vec::new(),
        downstream_plans: Vec::new(),
        artifacts: Vec::new(),
    };
    for d in &subtree {
        for x in d.downstream_decision_ids() {
            push_unique(&mut report.downstream_decisions, x.to_string());
        }
        for x in d.downstream_plan_ids() {
            push_unique(&mut report.downstream_plans, x.to_string());
        }
        for a in d.artifacts_produced() {
            push_unique(&mut report.artifacts, a.artifact_path().to_owned());
        }
    }
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut out = format!("impact of {id}\n");
    let mut section = |title: &str, items: &[String]| {
        let _ = writeln!(out, "{title} ({})", items.len());
        for i in items {
            let extra = DecisionId::parse(i)
                .ok()
                .and_then(|x| tree.get(x))
                .map(|d| format!("  {}  {}", label(d), short(d.chosen_option(), 40)))
                .unwrap_or_default();
            let _ = writeln!(out, "  {i}{extra}");
        }
    };
    section("descendants", &report.descendants);
    section("downstream decisions", &report.downstream_decisions);
    section("downstream plans", &report.downstream_plans);
    section("artifacts", &report.artifacts);
    print_text(&out)?;
    Ok(0)
}

#[derive(Serialize)]
struct CheckReport {
    ok: bool,
    problems: Vec<Problem>,
}

pub fn check(db: &Path, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let problems = store.check()?;
    let report = CheckReport { ok: problems.is_empty(), problems };
    if format == Format::Json {
        print_json(&report)?;
    } else if report.ok {
        print_text("ok: no problems found\n")?;
    } else {
        let rows: Vec<Vec<String>> = report
            .problems
            .iter()
            .map(|p| vec![p.kind.to_owned(), p.decision_id.clone().unwrap_or_else(|| "-".into()), p.message.clone()])
            .collect();
        print_text(&table(&["KIND", "DECISION", "PROBLEM"], &rows))?;
        eprintln!("dstore: {} problem(s) found", report.problems.len());
    }
    Ok(if report.ok { 0 } else { 1 })
}
