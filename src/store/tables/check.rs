//! The checks of `Store::check`: SQLite's own checks, the log's hashes, and
//! the domain's invariants, as queries over every table.
//!
//! The schema already refuses most bad rows; these checks find what a file
//! edited outside this library (triggers dropped, rows changed or replaced
//! by hand) or damaged on disk can still hold. Each problem names the
//! decision (or table and key) at fault; `check` itself fails only when the
//! file cannot be read at all.

use std::collections::HashMap;

use serde::Serialize;

use super::integrity::{self, Anchor, AnchorScope, GENESIS};
use crate::decision::{DecisionId, DecisionTree, DecisionType, PlanId};
use crate::error::Result;
use crate::hash::{self, Hash};
use crate::store::engine::{sqlite, Conn, ValueRef};

/// What kind of problem [`crate::Store::check`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// SQLite's `integrity_check` failed: the file is damaged.
    Integrity,
    /// A row refers to a row of another table that does not exist.
    ForeignKey,
    /// A row does not decode as a valid decision.
    Unreadable,
    /// A parent is missing or in another plan.
    Orphan,
    DanglingCorrection,
    DanglingSupersession,
    RootHasParent,
    DuplicateSequence,
    Cycle,
    /// A row no longer matches its content hash: it was changed after it was written.
    HashMismatch,
    /// A row has no hash (written around the library).
    Unhashed,
    /// An entry's chain hash does not follow from the entry before it, or positions are missing.
    ChainBroken,
    /// The kept per-plan or per-type counts, or the log length, disagree with the rows.
    SummaryMismatch,
    /// The store does not extend an anchored digest.
    AnchorMismatch,
    /// A plan's root is not its prompt_definition, or a plan has several
    /// roots (written before the plan model was enforced).
    PlanRoot,
    /// A correction or supersession of a decision that was overturned
    /// already (written before the plan model was enforced).
    OverturnedTarget,
}

impl ProblemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Integrity => "integrity",
            ProblemKind::ForeignKey => "foreign_key",
            ProblemKind::Unreadable => "unreadable",
            ProblemKind::Orphan => "orphan",
            ProblemKind::DanglingCorrection => "dangling_correction",
            ProblemKind::DanglingSupersession => "dangling_supersession",
            ProblemKind::RootHasParent => "root_has_parent",
            ProblemKind::DuplicateSequence => "duplicate_sequence",
            ProblemKind::Cycle => "cycle",
            ProblemKind::HashMismatch => "hash_mismatch",
            ProblemKind::Unhashed => "unhashed",
            ProblemKind::ChainBroken => "chain_broken",
            ProblemKind::SummaryMismatch => "summary_mismatch",
            ProblemKind::AnchorMismatch => "anchor_mismatch",
            ProblemKind::PlanRoot => "plan_root",
            ProblemKind::OverturnedTarget => "overturned_target",
        }
    }
}

impl std::fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found by [`crate::Store::check`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    pub decision_id: Option<String>,
    pub message: String,
}

impl Problem {
    fn new(kind: ProblemKind, decision_id: Option<String>, message: impl Into<String>) -> Self {
        Problem { kind, decision_id, message: message.into() }
    }
}

/// Pairs (decision, referenced id) whose reference is missing or in another plan.
const DANGLING: [(ProblemKind, &str, &str); 5] = [
    (
        ProblemKind::Orphan,
        "parent_decision_id",
        "SELECT d.decision_id, d.parent_decision_id FROM decisions d LEFT JOIN decisions p ON p.decision_id = d.parent_decision_id
         WHERE d.parent_decision_id IS NOT NULL AND (p.decision_id IS NULL OR p.plan_id <> d.plan_id)",
    ),
    (
        ProblemKind::DanglingCorrection,
        "corrects_decision_id",
        "SELECT d.decision_id, d.corrects_decision_id FROM decisions d LEFT JOIN decisions c ON c.decision_id = d.corrects_decision_id
         WHERE d.corrects_decision_id IS NOT NULL AND (c.decision_id IS NULL OR c.plan_id <> d.plan_id)",
    ),
    (
        ProblemKind::DanglingSupersession,
        "superseded_by",
        "SELECT s.decision_id, s.superseded_by FROM supersessions s
         LEFT JOIN decisions o ON o.decision_id = s.decision_id LEFT JOIN decisions n ON n.decision_id = s.superseded_by
         WHERE n.decision_id IS NULL OR o.plan_id <> n.plan_id OR s.plan_id IS DISTINCT FROM o.plan_id",
    ),
    (
        ProblemKind::DanglingSupersession,
        "decision_id",
        "SELECT s.decision_id, s.decision_id FROM supersessions s
         LEFT JOIN decisions o ON o.decision_id = s.decision_id WHERE o.decision_id IS NULL",
    ),
    (
        ProblemKind::RootHasParent,
        "parent_decision_id",
        "SELECT decision_id, parent_decision_id FROM decisions WHERE decision_type = 'prompt_definition' AND parent_decision_id IS NOT NULL",
    ),
];

/// Graph rows whose node is missing (SQLite's `foreign_key_check` cannot name
/// rows of WITHOUT ROWID tables).
const DANGLING_GRAPH: [&str; 2] = [
    "SELECT 'view at depth ' || v.depth || ' of node ' || v.node_id || ' names a missing node'
     FROM uko_node_views v LEFT JOIN uko_nodes n ON n.node_id = v.node_id WHERE n.node_id IS NULL",
    "SELECT 'edge ' || e.source_id || ' -' || e.relation || '-> ' || e.target_id || ' names a missing node'
     FROM uko_edges e LEFT JOIN uko_nodes s ON s.node_id = e.source_id LEFT JOIN uko_nodes t ON t.node_id = e.target_id
     WHERE s.node_id IS NULL OR t.node_id IS NULL",
];

/// Every entry of the log, in chain order, with the columns its content
/// hash covers, hashed in Rust as they are now, so both backends check
/// alike: from column [`HASHED`] on a decision's 15, or a supersession's 3
/// and NULLs; from column [`REDACTION_HASHED`] on a redaction's 8. (A
/// redaction's text columns have columns of their own: PostgreSQL's UNION
/// does not put text where a decision has a number.)
fn entries_sql() -> String {
    let nulls = |n: usize| ", NULL".repeat(n);
    let (decision, redaction) = (integrity::DECISION_COLUMNS.len(), integrity::REDACTION_COLUMNS.len());
    format!(
        "SELECT 0, decision_id, plan_id, chain_index, log_index, content_hash, chain_hash, {}{}
         FROM decisions
         UNION ALL
         SELECT 1, decision_id, plan_id, chain_index, log_index, content_hash, chain_hash,
                plan_id, decision_id, superseded_by{}{}
         FROM supersessions
         UNION ALL
         SELECT 2, decision_id, plan_id, chain_index, log_index, content_hash, chain_hash{}, {}
         FROM redactions
         ORDER BY 3, 4, 1, 2",
        integrity::DECISION_COLUMNS.join(", "),
        nulls(redaction),
        nulls(decision - 3),
        nulls(redaction),
        nulls(decision),
        integrity::REDACTION_COLUMNS.join(", ")
    )
}

/// The first column of [`entries_sql`] that a content hash covers.
const HASHED: usize = 7;
/// The first column of a redaction's in [`entries_sql`].
const REDACTION_HASHED: usize = HASHED + integrity::DECISION_COLUMNS.len();

/// What kind of entry a row of `entries_sql` is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Decision,
    Supersession,
    Redaction,
}

/// One entry as `entries_sql` reads it.
struct EntryRow {
    kind: Kind,
    id: String,
    plan: Option<String>,
    chain_index: Option<i64>,
    log_index: Option<i64>,
    content_hash: Option<String>,
    chain_hash: Option<String>,
    actual: String,
}

/// A plan's decisions, corrections, superseded decisions, max depth, first and last decision id.
type PlanCounts = (i64, i64, i64, i64, Option<String>, Option<String>);

/// The walk of one plan's chain.
struct PlanWalk {
    plan: String,
    entries: i64,
    head: Hash,
    /// Last (chain index, chain hash) at or below each store anchor's log length.
    at_anchor: Vec<Option<(i64, Hash)>>,
}

/// Every problem in the store, in one read transaction that the caller holds.
pub(crate) fn run(conn: &Conn, anchors: &[Anchor]) -> Result<Vec<Problem>> {
    let mut problems = storage_checks(conn)?;
    check_links(conn, &mut problems)?;
    check_log(conn, anchors, &mut problems)?;
    check_plans(conn, &mut problems)?;
    Ok(problems)
}

fn storage_checks(conn: &Conn) -> Result<Vec<Problem>> {
    // PostgreSQL checks its pages and enforces every REFERENCES itself.
    let engine = match conn.sqlite() {
        Some(c) => sqlite::integrity_problems(c)?,
        None => Vec::new(),
    };
    let mut problems: Vec<Problem> = engine
        .into_iter()
        .map(|p| {
            let kind = if p.starts_with("foreign key") { ProblemKind::ForeignKey } else { ProblemKind::Integrity };
            Problem::new(kind, None, p)
        })
        .collect();
    for sql in DANGLING_GRAPH {
        conn.for_each(sql, &[], |r| {
            problems.push(Problem::new(ProblemKind::ForeignKey, None, r.string(0)?));
            Ok(())
        })?;
    }
    Ok(problems)
}

fn check_links(conn: &Conn, problems: &mut Vec<Problem>) -> Result<()> {
    for (kind, field, sql) in DANGLING {
        let rows = conn.query_vec(sql, &[], |r| Ok((r.string(0)?, r.opt_string(1)?)))?;
        for (id, other) in rows {
            let other = other.unwrap_or_else(|| "(null)".into());
            problems.push(Problem::new(
                kind,
                Some(id.clone()),
                format!("{id}: {field} {other} is missing or in another plan"),
            ));
        }
    }
    let rows = conn.query_vec(
        "SELECT plan_id, sequence, count(*) FROM decisions GROUP BY plan_id, sequence HAVING count(*) > 1",
        &[],
        |r| Ok((r.string(0)?, r.i64(1)?, r.i64(2)?)),
    )?;
    for (plan, seq, n) in rows {
        problems.push(Problem::new(
            ProblemKind::DuplicateSequence,
            None,
            format!("plan {plan}: {n} decisions at sequence {seq}"),
        ));
    }
    Ok(())
}

/// Recomputes every content hash and walks every plan's chain and the store's log.
fn check_log(conn: &Conn, anchors: &[Anchor], problems: &mut Vec<Problem>) -> Result<()> {
    let store_anchors: Vec<&Anchor> = anchors.iter().filter(|a| a.scope == AnchorScope::Store).collect();
    let mut plan_anchors: HashMap<&str, Vec<&Anchor>> = HashMap::new();
    for a in anchors {
        if let AnchorScope::Plan(p) = &a.scope {
            plan_anchors.entry(p.as_str()).or_default().push(a);
        }
    }
    let mut walks: Vec<PlanWalk> = Vec::new();
    let mut log_indexes: Vec<i64> = Vec::new();
    // Plan anchors whose entry was found (and compared).
    let mut compared: std::collections::HashSet<(String, u64)> = std::collections::HashSet::new();
    // Each redacted decision's hashes, before and after each of its redactions, oldest first.
    let mut redacted: HashMap<String, Vec<(String, String)>> = HashMap::new();
    conn.for_each(super::redactions::ALL, &[], |r| {
        redacted.entry(r.string(0)?).or_default().push((r.string(6)?, r.string(7)?));
        Ok(())
    })?;
    conn.for_each_streamed(&entries_sql(), &[], |r| {
            let kind = match r.i64(0)? {
                1 => Kind::Supersession,
                2 => Kind::Redaction,
                _ => Kind::Decision,
            };
            let actual = match kind {
                Kind::Supersession => {
                    integrity::supersession_hash(r.value(HASHED)?, r.value(HASHED + 1)?, r.value(HASHED + 2)?)
                }
                Kind::Redaction => {
                    let mut fields = [ValueRef::Null; 8];
                    for (i, f) in fields.iter_mut().enumerate() {
                        *f = r.value(REDACTION_HASHED + i)?;
                    }
                    integrity::redaction_hash(&fields)
                }
                Kind::Decision => {
                    let mut fields = [ValueRef::Null; 15];
                    for (i, f) in fields.iter_mut().enumerate() {
                        *f = r.value(HASHED + i)?;
                    }
                    integrity::decision_hash(&fields)
                }
            };
            let e = EntryRow {
                kind,
                id: r.string(1)?,
                plan: r.opt_string(2)?,
                chain_index: r.opt_i64(3)?,
                log_index: r.opt_i64(4)?,
                content_hash: r.opt_string(5)?,
                chain_hash: r.opt_string(6)?,
                actual: hash::to_hex(&actual),
            };
            let what = match e.kind {
                Kind::Supersession => format!("the supersession of {}", e.id),
                Kind::Redaction => format!("the redaction of {}", e.id),
                Kind::Decision => e.id.clone(),
            };
            let (Some(plan), Some(index), Some(log), Some(content), Some(chain)) =
                (&e.plan, e.chain_index, e.log_index, &e.content_hash, &e.chain_hash)
            else {
                problems.push(Problem::new(
                    ProblemKind::Unhashed,
                    Some(e.id.clone()),
                    format!("{what}: the row has no hash or chain position (written around the library)"),
                ));
                return Ok(());
            };
            log_indexes.push(log);
            if walks.last().is_none_or(|w| &w.plan != plan) {
                walks.push(PlanWalk {
                    plan: plan.clone(),
                    entries: 0,
                    head: GENESIS,
                    at_anchor: vec![None; store_anchors.len()],
                });
            }
            let walk = walks.last_mut().expect("pushed above");
            match redacted.get(&e.id).filter(|_| e.kind == Kind::Decision) {
                // A redacted row: it hashes to its last redaction's hash of it,
                // and its redactions follow one another from its own hash.
                Some(rs) => {
                    let follows = rs.first().is_some_and(|(before, _)| before == content)
                        && rs.windows(2).all(|w| w[1].0 == w[0].1);
                    if !follows {
                        problems.push(Problem::new(
                            ProblemKind::HashMismatch,
                            Some(e.id.clone()),
                            format!("{what}: its redactions do not follow from its content hash: one was changed"),
                        ));
                    } else if rs.last().is_some_and(|(_, after)| *after != e.actual) {
                        problems.push(Problem::new(
                            ProblemKind::HashMismatch,
                            Some(e.id.clone()),
                            format!("{what}: the redacted row no longer matches its redaction: it was changed after it"),
                        ));
                    }
                }
                None if *content != e.actual => problems.push(Problem::new(
                    ProblemKind::HashMismatch,
                    Some(e.id.clone()),
                    format!("{what}: the row no longer matches its content hash: it was changed after it was written"),
                )),
                None => {}
            }
            let stored_chain = hash::from_hex(chain);
            let expected_chain = hash::from_hex(content).map(|c| integrity::link(&walk.head, &c));
            if index != walk.entries + 1 {
                problems.push(Problem::new(
                    ProblemKind::ChainBroken,
                    Some(e.id.clone()),
                    format!(
                        "{what}: at position {index} of plan {plan}'s chain, where {} was expected (entries removed, duplicated or reordered)",
                        walk.entries + 1
                    ),
                ));
            } else if stored_chain.is_none() || stored_chain != expected_chain {
                problems.push(Problem::new(
                    ProblemKind::ChainBroken,
                    Some(e.id.clone()),
                    format!("{what}: its chain hash does not follow from entry {} of plan {plan}", index - 1),
                ));
            }
            walk.entries = index;
            walk.head = stored_chain.unwrap_or(GENESIS);
            for (slot, anchor) in walk.at_anchor.iter_mut().zip(&store_anchors) {
                if log <= anchor.entries as i64 {
                    *slot = Some((index, walk.head));
                }
            }
            for anchor in plan_anchors.get(plan.as_str()).into_iter().flatten().filter(|a| a.entries as i64 == index) {
                compared.insert((plan.clone(), anchor.entries));
                if walk.head != anchor.hash {
                    problems.push(Problem::new(
                        ProblemKind::AnchorMismatch,
                        Some(e.id.clone()),
                        format!("{what}: entry {index} of plan {plan} differs from the anchored digest {anchor}"),
                    ));
                }
            }
            Ok(())
        })?;
    for (plan, list) in &plan_anchors {
        let entries = walks.iter().find(|w| w.plan == *plan).map_or(0, |w| w.entries);
        for a in list.iter().filter(|a| !compared.contains(&(plan.to_string(), a.entries))) {
            let message = if a.entries as i64 > entries {
                format!("plan {plan} has {entries} entries, fewer than the {} of the anchored digest {a}", a.entries)
            } else {
                format!("entry {} of plan {plan}, which the anchored digest {a} pins, is missing", a.entries)
            };
            problems.push(Problem::new(ProblemKind::AnchorMismatch, None, message));
        }
    }
    check_summaries(conn, &walks, problems)?;
    log_indexes.sort_unstable();
    let total = log_indexes.len() as i64;
    if let Some((i, &found)) = log_indexes.iter().enumerate().find(|&(i, &l)| l != i as i64 + 1) {
        problems.push(Problem::new(
            ProblemKind::ChainBroken,
            None,
            format!(
                "the store's log has entry {found} where entry {} was expected (entries removed or duplicated)",
                i + 1
            ),
        ));
    }
    let kept = conn.query_opt(super::ledger::LOG_LENGTH, &[], |r| r.i64(0))?;
    if kept != Some(total) {
        problems.push(Problem::new(
            ProblemKind::SummaryMismatch,
            None,
            format!(
                "store_log records {} entries, the tables hold {total}",
                kept.map_or("no".into(), |k| k.to_string())
            ),
        ));
    }
    for (i, anchor) in store_anchors.iter().enumerate() {
        if anchor.entries as i64 > total {
            problems.push(Problem::new(
                ProblemKind::AnchorMismatch,
                None,
                format!(
                    "the store has {total} entries, fewer than the {} of the anchored digest {anchor}",
                    anchor.entries
                ),
            ));
            continue;
        }
        let heads = walks.iter().filter_map(|w| w.at_anchor[i].map(|(n, h)| (w.plan.as_str(), n as u64, h)));
        let heads: Vec<(&str, u64, Hash)> = heads.collect();
        let digest = integrity::store_digest(heads.iter().map(|(p, n, h)| (*p, *n, h)));
        if digest != anchor.hash {
            problems.push(Problem::new(
                ProblemKind::AnchorMismatch,
                None,
                format!(
                    "the first {} entries of the store differ from the anchored digest {anchor}: history was rewritten",
                    anchor.entries
                ),
            ));
        }
    }
    Ok(())
}

/// The kept per-plan rows must match the walked chains and the rows.
fn check_summaries(conn: &Conn, walks: &[PlanWalk], problems: &mut Vec<Problem>) -> Result<()> {
    // The counts as the rows give them, one pass per table.
    let mut actual: HashMap<String, PlanCounts> = HashMap::new();
    conn.for_each(
        "SELECT plan_id, count(*), count(corrects_decision_id), coalesce(max(depth), 0),
                    min(decision_id), max(decision_id) FROM decisions GROUP BY plan_id",
        &[],
        |r| {
            let counts = (r.i64(1)?, r.i64(2)?, 0, r.i64(3)?, r.opt_string(4)?, r.opt_string(5)?);
            actual.insert(r.string(0)?, counts);
            Ok(())
        },
    )?;
    conn.for_each("SELECT plan_id, count(*) FROM supersessions GROUP BY plan_id", &[], |r| {
        if let Some(v) = r.opt_str(0)?.and_then(|p| actual.get_mut(p)) {
            v.2 = r.i64(1)?;
        }
        Ok(())
    })?;
    let mut kept: HashMap<String, (i64, String, bool)> = HashMap::new();
    conn.for_each(
        "SELECT plan_id, entries, head_hash, decisions, corrections, superseded, max_depth,
                    first_decision_id, last_decision_id FROM plans",
        &[],
        |r| {
            let counts = (r.i64(3)?, r.i64(4)?, r.i64(5)?, r.i64(6)?, r.opt_string(7)?, r.opt_string(8)?);
            let plan = r.string(0)?;
            let counts_ok = actual.get(&plan) == Some(&counts);
            kept.insert(plan, (r.i64(1)?, r.string(2)?, counts_ok));
            Ok(())
        },
    )?;
    for w in walks {
        match kept.remove(&w.plan) {
            None => problems.push(Problem::new(
                ProblemKind::SummaryMismatch,
                None,
                format!("plan {} has no row in the plans table", w.plan),
            )),
            Some((entries, head, counts_ok)) => {
                if entries != w.entries || hash::from_hex(&head) != Some(w.head) {
                    problems.push(Problem::new(
                            ProblemKind::ChainBroken,
                            None,
                            format!(
                                "plan {}: the recorded head (entry {entries}) is not the chain's last entry ({}): entries were removed or rewritten",
                                w.plan, w.entries
                            ),
                        ));
                }
                if !counts_ok {
                    problems.push(Problem::new(
                        ProblemKind::SummaryMismatch,
                        None,
                        format!("plan {}: the kept counts disagree with its rows", w.plan),
                    ));
                }
            }
        }
    }
    for plan in kept.keys() {
        problems.push(Problem::new(
            ProblemKind::ChainBroken,
            None,
            format!("plan {plan} is recorded in the plans table but has no entries left: they were removed"),
        ));
    }
    let types_ok = conn.query_one(
        "SELECT NOT EXISTS (
                     SELECT decision_type, count(*) FROM decisions GROUP BY decision_type
                     EXCEPT SELECT decision_type, decisions FROM decision_type_counts)
                 AND NOT EXISTS (
                     SELECT decision_type, decisions FROM decision_type_counts WHERE decisions > 0
                     EXCEPT SELECT decision_type, count(*) FROM decisions GROUP BY decision_type)",
        &[],
        |r| r.bool(0),
    )?;
    if !types_ok {
        problems.push(Problem::new(
            ProblemKind::SummaryMismatch,
            None,
            "the kept counts of decisions by type disagree with the rows",
        ));
    }
    Ok(())
}

/// The plan model's rules (`docs/interchange.md`, "Shared semantics") in a
/// plan written before they were enforced: one root, its prompt_definition;
/// each correction and supersession of a decision that stood.
fn check_plan_model(tree: &DecisionTree, plan: PlanId, problems: &mut Vec<Problem>) {
    let roots = tree.roots();
    if roots.len() > 1 {
        let ids: Vec<String> = roots.iter().map(|d| d.decision_id().to_string()).collect();
        problems.push(Problem::new(
            ProblemKind::PlanRoot,
            Some(ids[1].clone()),
            format!("plan {plan} has {} roots ({}); a plan has one, its prompt_definition", ids.len(), ids.join(", ")),
        ));
    }
    for root in roots.iter().filter(|d| d.decision_type() != DecisionType::PromptDefinition) {
        let id = root.decision_id();
        problems.push(Problem::new(
            ProblemKind::PlanRoot,
            Some(id.to_string()),
            format!("{id}: a {} without a parent; a plan's root is its prompt_definition", root.decision_type()),
        ));
    }
    for d in tree.decisions() {
        let id = d.decision_id();
        let mut correctors: Vec<DecisionId> = tree.corrected_by(id).to_vec();
        correctors.sort_unstable();
        for later in correctors.iter().skip(1) {
            problems.push(Problem::new(
                ProblemKind::OverturnedTarget,
                Some(later.to_string()),
                format!("{later} corrects {id}, which {} had corrected already", correctors[0]),
            ));
        }
        if let (Some(first), Some(by)) = (correctors.first(), d.superseded_by()) {
            problems.push(Problem::new(
                ProblemKind::OverturnedTarget,
                Some(id.to_string()),
                format!("{id} is both corrected (by {first}) and superseded (by {by}); one overturns it"),
            ));
        }
    }
}

/// Decodes every row (reporting those that do not decode) and checks each plan's history.
fn check_plans(conn: &Conn, problems: &mut Vec<Problem>) -> Result<()> {
    let plans = conn.query_vec("SELECT DISTINCT plan_id FROM decisions ORDER BY plan_id", &[], |r| r.string(0))?;
    for plan in plans {
        let Ok(plan_id) = PlanId::parse(&plan) else {
            problems.push(Problem::new(ProblemKind::Unreadable, None, format!("plan id {plan:?} is not a ULID")));
            continue;
        };
        let (decisions, unreadable) = super::decisions::plan_rows_lenient(conn, &plan)?;
        for (id, e) in unreadable {
            let reason = match e {
                crate::error::Error::Corrupt { reason, .. } => reason,
                e => e.to_string(),
            };
            problems.push(Problem::new(ProblemKind::Unreadable, Some(id.clone()), format!("{id}: {reason}")));
        }
        let tree = DecisionTree::from_decisions(decisions);
        check_plan_model(&tree, plan_id, problems);
        let standing = tree.standing_all();
        for (d, standing) in tree.decisions().iter().zip(standing) {
            let id = d.decision_id();
            if tree.depth(id).is_none() {
                problems.push(Problem::new(
                    ProblemKind::Cycle,
                    Some(id.to_string()),
                    format!("{id}: its parent links loop in plan {plan_id}"),
                ));
            } else if standing.is_none() {
                problems.push(Problem::new(
                    ProblemKind::Cycle,
                    Some(id.to_string()),
                    format!("{id}: its corrections and supersessions loop"),
                ));
            }
        }
    }
    Ok(())
}
