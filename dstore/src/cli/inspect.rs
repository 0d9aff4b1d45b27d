//! Read commands: `info`, `plans`, `show`, `tree`, `chain`, `impact`, `check`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use decision_store::decision::{Decision, DecisionId, DecisionTree, Phase, TreeView};
use decision_store::hash;
use decision_store::store::{Anchor, AnchorScope, Problem, Replication, Store};
use decision_store::Error;
use serde::Serialize;

use super::render::{bytes, short, table};
use super::{print_json, print_text, stdout, Format, TreeFormat};
use crate::app::errors::{CmdResult, Failure};
use crate::app::open::open_read;
use crate::app::reports::{ids, json_tree, jsonl_tree, plan_rows, show_report, MAX_INDENT};
use crate::app::text::{confidence, count};

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
    replication: Option<Replication>,
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
        sqlite_version: Store::sqlite_version(),
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
    ];
    // The counts by type belong under the decisions.
    for (t, n) in &report.by_type {
        rows.push(vec![format!("  {t}"), n.to_string()]);
    }
    rows.extend([
        vec!["corrections".into(), report.corrections.to_string()],
        vec!["supersessions".into(), report.supersessions.to_string()],
        vec!["graph".into(), format!("{}, {}", count(report.nodes, "node"), count(report.edges, "edge"))],
    ]);
    match &report.replication {
        Some(r) if r.standby => {
            rows.push(vec!["replication".into(), format!("standby, lag {}", lag(r.lag_bytes, r.lag_ms))])
        }
        Some(r) if r.standbys.is_empty() => rows.push(vec!["replication".into(), "primary, no standby".into()]),
        Some(r) => {
            rows.push(vec!["replication".into(), format!("primary, {}", count(r.standbys.len() as u64, "standby"))]);
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

pub fn plans(db: &Path, words: &str, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let rows = plan_rows(&store, words)?;
    if format == Format::Json {
        print_json(&rows)?;
        return Ok(0);
    }
    if rows.is_empty() {
        let why = if words.trim().is_empty() {
            "the store holds no plan yet".to_owned()
        } else {
            format!("no plan's goal holds {words:?}")
        };
        print_text(&format!("no plans: {why}\n"))?;
        return Ok(0);
    }
    // Times to the minute, as people read them (JSON has them whole).
    let minute = |t: &str| t.get(..16).map_or_else(|| t.to_owned(), |m| m.replacen('T', " ", 1));
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.plan_id.clone(),
                minute(&r.first),
                minute(&r.last),
                r.decisions.to_string(),
                r.corrections.to_string(),
                r.superseded.to_string(),
                short(r.goal.as_deref().unwrap_or("(no prompt_definition)"), 60),
            ]
        })
        .collect();
    print_text(&table(&["PLAN", "STARTED", "CHANGED", "DECISIONS", "CORRECTIONS", "SUPERSEDED", "GOAL"], &cells))?;
    Ok(0)
}

fn label(d: &Decision) -> String {
    format!("{} #{}", d.decision_type(), d.sequence())
}

pub fn show(db: &Path, id: &str, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let id = store.find_decision(id)?;
    let (tree, redactions) = store.read_snapshot(|s| Ok((s.tree_of(id)?, s.redactions(id)?)))?;
    let d = tree.get(id).expect("tree_of holds the decision");
    let report = show_report(&tree, id, redactions).expect("tree_of holds the decision");
    if format == Format::Json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}  {}", d.decision_id(), label(d));
    let _ = writeln!(out, "plan          {}", d.plan_id());
    let _ = writeln!(out, "made          {}", report.made_at);
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
    for r in &report.redactions {
        let _ =
            writeln!(out, "redacted      {} by {} at {}: {}", r.fields.join(", "), r.actor, r.redacted_at, r.reason);
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
    let store = open_read(db)?;
    let plan = store.find_plan(plan)?;
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
                "plan {plan}  ({}, {} effective, depth {})",
                count(tree.len() as u64, "decision"),
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
    let store = open_read(db)?;
    let id = store.find_decision(id)?;
    let tree = store.tree_of(id)?;
    let path = tree.supersession_path(id);
    let supersessions =
        if path.is_empty() { Vec::new() } else { std::iter::once(id.to_string()).chain(ids(path)).collect() };
    let standing = tree.standing(id).ok_or_else(|| Error::Cycle(format!("the history of {id} loops")))?;
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
    let store = open_read(db)?;
    let id = store.find_decision(id)?;
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
    let tree_plan = tree.get(id).expect("tree_of holds the decision").plan_id();
    let mut out = stdout();
    writeln!(out, "impact of {id}")?;
    let mut section = |title: &str, items: &[String]| -> io::Result<()> {
        writeln!(out, "{title} ({})", items.len())?;
        for i in items {
            // A decision of another plan is looked up; one never stored is said so.
            let id = DecisionId::parse(i).ok();
            let elsewhere = |x: DecisionId| store.get(x).ok().flatten();
            let extra = match id.and_then(|x| tree.get(x).cloned().or_else(|| elsewhere(x))) {
                Some(d) if d.plan_id() == tree_plan => format!("  {}  {}", label(&d), short(d.chosen_option(), 40)),
                Some(d) => format!("  {} of plan {}  {}", label(&d), d.plan_id(), short(d.chosen_option(), 30)),
                None if id.is_some() => "  (not stored)".to_owned(),
                None => String::new(),
            };
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
        let verified = if anchors.is_empty() {
            String::new()
        } else {
            format!(", {} verified", count(anchors.len() as u64, "anchored digest"))
        };
        print_text(&format!("ok: no problems found{verified}\n"))?;
    } else {
        let rows: Vec<Vec<String>> = report
            .problems
            .iter()
            .map(|p| vec![p.kind.to_string(), p.decision_id.clone().unwrap_or_else(|| "-".into()), p.message.clone()])
            .collect();
        print_text(&table(&["KIND", "DECISION", "PROBLEM"], &rows))?;
        eprintln!("dstore: {} found", count(report.problems.len() as u64, "problem"));
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
    let store = open_read(db)?;
    let plan = plan.map(|p| store.find_plan(p)).transpose()?.map(|p| p.to_string());
    let digest = store.digest()?;
    let lines: Vec<DigestLine> = match &plan {
        Some(p) => {
            let a = digest
                .plans
                .iter()
                .find(|a| a.scope == AnchorScope::Plan(p.clone()))
                .ok_or_else(|| Error::PlanNotFound(p.clone()))?;
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
