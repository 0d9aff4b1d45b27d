//! The documents that `dstore plans`, `tree`, `show`, `stale` and
//! `calibration` print with `--format json` and the web view serves under
//! `/api/`: built here once, so the two cannot drift. (`stale` and
//! `calibration` print the library's reports as they are.)

use std::io::{self, Write};

use decision_store::decision::{Decision, DecisionId, DecisionTree, TreeView, ViewNode};
use decision_store::store::{Redaction, Store};
use decision_store::time::utc_ms as time;
use decision_store::Result;
use serde::Serialize;

/// One row of `dstore plans --format json` (and of the web view's `/api/plans`).
#[derive(Serialize)]
pub struct PlanRow {
    pub plan_id: String,
    /// Its root prompt_definition's chosen option (cut), `null` without one.
    pub goal: Option<String>,
    pub decisions: u64,
    pub max_depth: u64,
    pub corrections: u64,
    pub superseded: u64,
    /// When its first and last decisions were made (from their ids).
    pub first: String,
    pub last: String,
}

/// The rows of the plans whose goal holds every word of `words` (all for
/// none), the most recently changed first, as `dstore plans` shows them.
pub fn plan_rows(store: &Store, words: &str) -> Result<Vec<PlanRow>> {
    Ok(store
        .recent_plans(words)?
        .into_iter()
        .map(|p| PlanRow {
            plan_id: p.plan_id.to_string(),
            goal: p.goal,
            decisions: p.decisions,
            max_depth: p.max_depth,
            corrections: p.corrections,
            superseded: p.superseded,
            first: time(p.first_ms),
            last: time(p.last_ms),
        })
        .collect())
}

/// The ids of `ds`, as the documents list them.
pub fn ids<'a>(ds: impl IntoIterator<Item = &'a Decision>) -> Vec<String> {
    ds.into_iter().map(|d| d.decision_id().to_string()).collect()
}

/// `dstore show --format json` (and the web view's `/api/decision/ID`).
#[derive(Serialize)]
pub struct ShowReport {
    pub decision: serde_json::Value,
    /// When it was recorded (RFC 3339, from its id).
    pub made_at: String,
    pub parent: Option<String>,
    pub children: Vec<String>,
    pub correction_chain: Vec<String>,
    pub superseded_by_chain: Vec<String>,
    pub effective: String,
    /// Its redactions, oldest first (none: the field is left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
}

/// The report of decision `id` of `tree` (its plan's, from `Store::tree_of`)
/// with its `redactions` (`Store::redactions`).
pub fn show_report(tree: &DecisionTree, id: DecisionId, redactions: Vec<Redaction>) -> Option<ShowReport> {
    let d = tree.get(id)?;
    let standing = tree.standing(id).unwrap_or(d);
    Some(ShowReport {
        decision: d.to_json_value(),
        made_at: time(id.timestamp_ms()),
        parent: d.parent_decision_id().map(|p| p.to_string()),
        children: ids(tree.children(id)),
        correction_chain: ids(tree.correction_chain(id)),
        superseded_by_chain: ids(tree.supersession_path(id)),
        effective: standing.decision_id().to_string(),
        redactions,
    })
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
pub const MAX_INDENT: usize = 32;

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
pub fn jsonl_tree(tree: &DecisionTree, view: &TreeView<'_>, out: &mut impl Write) -> io::Result<()> {
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
