//! Queries of the `decisions` and `supersessions` tables.

use std::collections::HashMap;

use serde::Serialize;

use super::column_json::ColumnJson;
use super::db::{vals, Conn, EngineError, Row, Stmt};
use super::integrity::{self, Anchor, AnchorScope, Field, Hash};
use super::Store;
use crate::decision::{Decision, DecisionId, DecisionTree, DecisionType, Details, IdMap, PlanId};
use crate::error::{Error, Result};

/// The INSERT of a decision row, for [`INSERT`] and [`INSERT_POSTGRES`].
macro_rules! insert_decision {
    () => {
        "INSERT INTO decisions (decision_id, plan_id, parent_decision_id, sequence, decision_type, \
     chosen_option, rationale, confidence_score, alternatives, context_snapshot, artifacts_produced, \
     corrects_decision_id, downstream_decision_ids, downstream_plan_ids, metadata, \
     depth, content_hash, chain_index, chain_hash, log_index) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"
    };
}
const INSERT: &str = insert_decision!();
/// [`INSERT`] for PostgreSQL, where a failed statement aborts its whole
/// transaction: a duplicate changes nothing instead of failing, so an
/// import can skip a decision it already holds and go on.
const INSERT_POSTGRES: &str = concat!(insert_decision!(), " ON CONFLICT DO NOTHING");
const INSERT_SUPERSESSION: &str = "INSERT INTO supersessions \
     (decision_id, superseded_by, plan_id, content_hash, chain_index, chain_hash, log_index) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
/// The length of the store's log.
pub(super) const LOG_LENGTH: &str = "SELECT entries FROM store_log WHERE id = 1";
/// The chain head of a plan.
const PLAN_HEAD: &str = "SELECT entries, head_hash FROM plans WHERE plan_id = ?1";
/// A plan's first kept row, written when its first decisions commit.
const INSERT_PLAN: &str = "INSERT INTO plans (plan_id, decisions, corrections, superseded, max_depth, \
     first_decision_id, last_decision_id, entries, head_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
/// Adds a transaction's changes to a plan's kept row (`first`/`last` NULL when it stored no decision).
const UPDATE_PLAN: &str = "UPDATE plans SET decisions = decisions + ?2, corrections = corrections + ?3, \
     superseded = superseded + ?4, max_depth = max(max_depth, ?5), \
     first_decision_id = min(first_decision_id, coalesce(?6, first_decision_id)), \
     last_decision_id = max(last_decision_id, coalesce(?7, last_decision_id)), \
     entries = ?8, head_hash = ?9 WHERE plan_id = ?1";
/// [`UPDATE_PLAN`] in PostgreSQL's words: `greatest`/`least`, which ignore NULL as SQLite's `max`/`min` of a NULL do not need to.
const UPDATE_PLAN_POSTGRES: &str = "UPDATE plans SET decisions = decisions + ?2, corrections = corrections + ?3, \
     superseded = superseded + ?4, max_depth = greatest(max_depth, ?5), \
     first_decision_id = least(first_decision_id, ?6), \
     last_decision_id = greatest(last_decision_id, ?7), \
     entries = ?8, head_hash = ?9 WHERE plan_id = ?1";
const COUNT_TYPES: &str = "INSERT INTO decision_type_counts (decision_type, decisions) VALUES (?1, ?2) \
     ON CONFLICT (decision_type) DO UPDATE SET decisions = decision_type_counts.decisions + excluded.decisions";

/// The columns of a decision row, for `from_row`.
macro_rules! decision_columns {
    () => {
        "d.decision_id, d.plan_id, d.parent_decision_id, d.sequence, d.decision_type, \
         d.chosen_option, d.rationale, d.confidence_score, d.alternatives, d.context_snapshot, d.artifacts_produced, \
         d.corrects_decision_id, d.downstream_decision_ids, d.downstream_plan_ids, d.metadata"
    };
}

/// Decision rows with their supersession links joined.
macro_rules! select_decisions {
    () => {
        concat!(
            "SELECT ",
            decision_columns!(),
            ", s.superseded_by FROM decisions d LEFT JOIN supersessions s ON s.decision_id = d.decision_id"
        )
    };
}

pub(super) const DECISION_BY_ID: &str = concat!(select_decisions!(), " WHERE d.decision_id = ?1");
/// A plan's rows; their supersession links come from [`PLAN_LINKS`], as an outline's do.
pub(super) const PLAN_ROWS: &str =
    concat!("SELECT ", decision_columns!(), " FROM decisions d WHERE d.plan_id = ?1 ORDER BY d.sequence");
/// The scalar columns of a plan's rows, for [`Store::decision_tree_outline`]:
/// in SQLite, all of them from the `decisions_outline` index (schema version
/// 8), without reading a row. Their supersession links come from [`PLAN_LINKS`].
pub(super) const OUTLINE_ROWS: &str = "SELECT d.decision_id, d.parent_decision_id, d.sequence, d.decision_type, \
     d.chosen_option, d.confidence_score, d.corrects_decision_id \
     FROM decisions d WHERE d.plan_id = ?1 ORDER BY d.sequence";
/// The supersession links of a plan: one query for the few links instead
/// of a lookup for each of the many decisions.
pub(super) const PLAN_LINKS: &str = "SELECT decision_id, superseded_by FROM supersessions WHERE plan_id = ?1";
const ALL_ROWS: &str = concat!(select_decisions!(), " ORDER BY d.plan_id, d.sequence");
/// Every decision row without its supersession link, in the order of the store's log.
const LOG_ROWS: &str = concat!("SELECT ", decision_columns!(), ", d.log_index FROM decisions d ORDER BY d.log_index");
pub(super) const PLAN_OF: &str = "SELECT plan_id, depth FROM decisions WHERE decision_id = ?1";
/// The plan of a decision and what supersedes it, if anything.
pub(super) const LINK_OF: &str = "SELECT d.plan_id, s.superseded_by FROM decisions d \
     LEFT JOIN supersessions s ON s.decision_id = d.decision_id WHERE d.decision_id = ?1";
/// The decisions one step after ?1: the one that supersedes it, and those that correct it.
pub(super) const NEXT_OF: &str = "SELECT superseded_by FROM supersessions WHERE decision_id = ?1 \
     UNION ALL SELECT decision_id FROM decisions WHERE corrects_decision_id = ?1";
/// Is ?2 reachable from ?1 through supersessions and corrections? (PostgreSQL: see [`reaches`].)
pub(super) const REACHES_POSTGRES: &str = "WITH RECURSIVE succ(id) AS (
         SELECT CAST(?1 AS TEXT) COLLATE \"C\"
         UNION
         SELECT x.next FROM succ CROSS JOIN LATERAL (
             SELECT s.superseded_by AS next FROM supersessions s WHERE s.decision_id = succ.id
             UNION ALL
             SELECT d.decision_id FROM decisions d WHERE d.corrects_decision_id = succ.id
         ) x
     )
     SELECT EXISTS (SELECT 1 FROM succ WHERE id = ?2)";

/// One row of [`Store::plans`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanSummary {
    pub plan_id: PlanId,
    pub decisions: u64,
    /// The deepest decision's distance from its root.
    pub max_depth: u64,
    pub corrections: u64,
    pub superseded: u64,
    /// Milliseconds since the epoch, from the first and last decision ids.
    pub first_ms: u64,
    pub last_ms: u64,
}

/// Where each column of a decision row is in a statement's result, found by
/// name once per statement (so the query's column order is free).
struct Cols {
    decision_id: usize,
    plan_id: PlanCol,
    parent: usize,
    sequence: usize,
    decision_type: usize,
    chosen_option: usize,
    confidence: usize,
    corrects: usize,
    /// `None` when the query leaves supersession links to a second query.
    superseded_by: Option<usize>,
    /// `None` for an outline query (see [`Store::decision_tree_outline`]).
    full: Option<FullCols>,
}

/// Where a row's plan comes from: its `plan_id` column, or the query's
/// parameter when the query is for one plan and leaves the column out.
enum PlanCol {
    Column(usize),
    Known(PlanId),
}

/// The rationale and the JSON columns, which an outline leaves out.
struct FullCols {
    rationale: usize,
    alternatives: usize,
    context_snapshot: usize,
    artifacts: usize,
    downstream_decisions: usize,
    downstream_plans: usize,
    metadata: usize,
}

impl Cols {
    /// The columns of a row's query, found by name (once per query: see
    /// [`Cols::once`]); `plan` is the plan of every row when the query has
    /// no `plan_id` column.
    fn of(row: &Row<'_>, plan: Option<PlanId>) -> Result<Cols> {
        let at = |name: &str| {
            row.column_index(name).ok_or_else(|| Error::Storage(format!("the query has no column {name}").into()))
        };
        // A query selects either every column or none of the full ones.
        let full = match row.column_index("rationale") {
            None => None,
            Some(rationale) => Some(FullCols {
                rationale,
                alternatives: at("alternatives")?,
                context_snapshot: at("context_snapshot")?,
                artifacts: at("artifacts_produced")?,
                downstream_decisions: at("downstream_decision_ids")?,
                downstream_plans: at("downstream_plan_ids")?,
                metadata: at("metadata")?,
            }),
        };
        Ok(Cols {
            decision_id: at("decision_id")?,
            plan_id: match (row.column_index("plan_id"), plan) {
                (Some(i), _) => PlanCol::Column(i),
                (None, Some(plan)) => PlanCol::Known(plan),
                (None, None) => at("plan_id").map(PlanCol::Column)?,
            },
            parent: at("parent_decision_id")?,
            sequence: at("sequence")?,
            decision_type: at("decision_type")?,
            chosen_option: at("chosen_option")?,
            confidence: at("confidence_score")?,
            corrects: at("corrects_decision_id")?,
            superseded_by: row.column_index("superseded_by"),
            full,
        })
    }
}

impl Cols {
    /// The columns of `row`'s query: found at its first row, kept in `slot` for the rest.
    fn once<'c>(slot: &'c mut Option<Cols>, row: &Row<'_>, plan: Option<PlanId>) -> Result<&'c Cols> {
        match slot {
            Some(c) => Ok(c),
            None => Ok(slot.insert(Cols::of(row, plan)?)),
        }
    }
}

/// Reads a JSON text column without copying it, naming the column when it is not valid.
fn column_json<T: serde::de::DeserializeOwned>(row: &Row<'_>, idx: usize, name: &str) -> Result<T> {
    let text = row.str(idx)?;
    serde_json::from_str(text).map_err(|e| Error::Storage(format!("column {name}: {e}").into()))
}

/// A text column holding an id (or NULL), parsed and named like any input's.
fn id_column<T>(
    row: &Row<'_>,
    idx: usize,
    field: &str,
    parse: fn(&str, &[u8]) -> Result<T>,
) -> Result<Result<Option<T>>> {
    Ok(row.opt_text(idx)?.map(|s| parse(field, s)).transpose())
}

/// Rebuilds a decision from a row of `SELECT`, validating it like any
/// input: the outer error is the row's (unreadable), the inner one the decision's.
fn from_row(row: &Row<'_>, c: &Cols) -> Result<Result<Decision>> {
    macro_rules! ok {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            }
        };
    }
    let decision_type = match DecisionType::from_bytes(row.text(c.decision_type)?) {
        Some(t) => t,
        None => ok!(row.str(c.decision_type)?.parse::<DecisionType>()), // names what is there
    };
    let decision_id = ok!(DecisionId::parse_text("decision_id", row.text(c.decision_id)?));
    let plan_id = match c.plan_id {
        PlanCol::Column(i) => ok!(PlanId::parse_text("plan_id", row.text(i)?)),
        PlanCol::Known(plan) => plan,
    };
    let parent_decision_id = ok!(id_column(row, c.parent, "parent_decision_id", DecisionId::parse_text)?);
    let corrects_decision_id = ok!(id_column(row, c.corrects, "corrects_decision_id", DecisionId::parse_text)?);
    let superseded_by = match c.superseded_by {
        Some(idx) => ok!(id_column(row, idx, "superseded_by", DecisionId::parse_text)?),
        None => None,
    };
    let details = match &c.full {
        None => None,
        Some(f) => {
            let mut x = Details {
                rationale: row.string(f.rationale)?,
                alternatives: column_json(row, f.alternatives, "alternatives")?,
                context_snapshot: column_json(row, f.context_snapshot, "context_snapshot")?,
                artifacts_produced: column_json(row, f.artifacts, "artifacts_produced")?,
                metadata: column_json(row, f.metadata, "metadata")?,
                ..Details::default()
            };
            for id in column_json::<Vec<String>>(row, f.downstream_decisions, "downstream_decision_ids")? {
                x.downstream_decision_ids.push(ok!(DecisionId::parse_field("downstream_decision_ids", &id)));
            }
            for id in column_json::<Vec<String>>(row, f.downstream_plans, "downstream_plan_ids")? {
                x.downstream_plan_ids.push(ok!(PlanId::parse_field("downstream_plan_ids", &id)));
            }
            x.boxed()
        }
    };
    let d = Decision {
        decision_id,
        plan_id,
        parent_decision_id,
        sequence: ok!(sequence(row.i64(c.sequence)?)),
        decision_type,
        chosen_option: row.string(c.chosen_option)?,
        confidence_score: row.opt_f64(c.confidence)?,
        is_correction: corrects_decision_id.is_some(),
        corrects_decision_id,
        superseded_by,
        details,
    };
    Ok(d.check().map(|()| d))
}

/// A stored sequence number, or the validation error of one out of range.
fn sequence(n: i64) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::validation("sequence", format!("{n} is out of range")))
}

/// Every decision a query for one plan returns, decoded with [`from_row`],
/// with the plan's supersession links.
fn rows_of_plan(conn: &Conn, sql: &str, plan_id: PlanId) -> Result<Vec<Decision>> {
    let plan = plan_id.to_string();
    let mut cols = None;
    // The kept count sizes the vector once: growing it moves every decision again.
    let kept = conn.query_opt("SELECT decisions FROM plans WHERE plan_id = ?1", vals![&plan], |r| r.i64(0))?;
    let mut decisions = Vec::with_capacity(kept.unwrap_or(0).clamp(0, 1 << 20) as usize);
    conn.for_each(sql, vals![&plan], |r| {
        decisions.push(from_row(r, Cols::once(&mut cols, r, Some(plan_id))?)??);
        Ok(())
    })?;
    match link_plan(conn, &plan, &mut decisions)?.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(decisions),
    }
}

/// Sets each decision's supersession link from [`PLAN_LINKS`]: one query for
/// a plan's few links instead of a lookup for each of its many decisions.
/// Returns (decision id, error) for each link that does not decode or
/// names its own decision; those decisions are left out of `decisions`.
fn link_plan(conn: &Conn, plan: &str, decisions: &mut Vec<Decision>) -> Result<Vec<(String, Error)>> {
    let mut links: IdMap<DecisionId, DecisionId> = IdMap::default();
    let mut bad = Vec::new();
    let rows = conn.query_vec(PLAN_LINKS, vals![plan], |r| Ok((r.string(0)?, r.string(1)?)))?;
    for (old, new) in rows {
        match (DecisionId::parse_field("decision_id", &old), DecisionId::parse_field("superseded_by", &new)) {
            (Ok(o), Ok(_)) if old == new => {
                links.remove(&o);
                bad.push((old, Error::validation("superseded_by", "a decision cannot name itself")));
            }
            (Ok(o), Ok(n)) => {
                links.insert(o, n);
            }
            (Err(e), _) | (_, Err(e)) => bad.push((old, e)),
        }
    }
    if !bad.is_empty() {
        decisions.retain(|d| !bad.iter().any(|(id, _)| *id == d.decision_id.to_string()));
    }
    if !links.is_empty() {
        for d in decisions.iter_mut() {
            d.superseded_by = links.get(&d.decision_id).copied();
        }
    }
    Ok(bad)
}

/// Translates a failed insert into the rule it broke: SQLite names the
/// columns of the unique index, PostgreSQL the constraint.
fn insert_error(d: &Decision, e: EngineError) -> Error {
    match e.unique_violation().as_deref() {
        Some("decisions.decision_id" | "decisions_pkey") => Error::DuplicateDecision(d.decision_id().to_string()),
        Some(m) if m.contains("decisions.plan_id, decisions.sequence") || m == "decisions_plan_id_sequence_key" => {
            Error::DuplicateSequence { plan_id: d.plan_id().to_string(), sequence: d.sequence() }
        }
        _ => e.into_error(),
    }
}

/// The plan and depth of a stored decision (one index lookup).
fn plan_of(tx: &Conn, id: &str) -> Result<Option<(String, Option<i64>)>> {
    tx.query_opt(PLAN_OF, vals![id], |r| Ok((r.string(0)?, r.opt_i64(1)?)))
}

/// A plan's chain head and the changes to its kept counts in this transaction.
struct PlanState {
    /// The plan has a row in `plans` already.
    stored: bool,
    entries: i64,
    head: Hash,
    decisions: i64,
    corrections: i64,
    superseded: i64,
    max_depth: i64,
    first: Option<DecisionId>,
    last: Option<DecisionId>,
}

/// What a write transaction changes in the chain heads and kept counts
/// (`plans`, `decision_type_counts`, `store_log`), held in memory and written
/// once by [`Ledger::flush`] before the commit: a bulk import then costs no
/// extra statement per row. It also remembers the decisions inserted in the
/// transaction, so a child finds its parent without a query.
#[derive(Default)]
pub(crate) struct Ledger {
    log: Option<i64>,
    plans: IdMap<PlanId, PlanState>,
    types: HashMap<DecisionType, i64>,
    inserted: Recent,
}

/// The decisions last inserted in a transaction, with their plan and
/// depth, in two generations of at most [`RECENT`] each: when the newer
/// is full it becomes the older, and the older is emptied for reuse. The
/// last `RECENT` inserts at least are remembered, in maps small enough to
/// stay in cache: one map of 65,536 was 5 % of an import's writer thread,
/// most of it cache misses. A decision not remembered is looked up.
#[derive(Default)]
struct Recent {
    newer: IdMap<DecisionId, (PlanId, i64)>,
    older: IdMap<DecisionId, (PlanId, i64)>,
}

/// The size of a [`Recent`] generation: 7/8 of a power of two, the most a
/// hash table of that many slots holds before it doubles.
const RECENT: usize = 7 << 10;

impl Recent {
    fn get(&self, id: &DecisionId) -> Option<&(PlanId, i64)> {
        self.newer.get(id).or_else(|| self.older.get(id))
    }

    fn insert(&mut self, id: DecisionId, plan: PlanId, depth: i64) {
        if self.newer.len() >= RECENT {
            std::mem::swap(&mut self.newer, &mut self.older);
            self.newer.clear();
        }
        self.newer.insert(id, (plan, depth));
    }

    fn clear(&mut self) {
        self.newer.clear();
        self.older.clear();
    }
}

impl Ledger {
    fn plan(&mut self, tx: &Conn, plan: PlanId) -> Result<&mut PlanState> {
        let vacant = match self.plans.entry(plan) {
            std::collections::hash_map::Entry::Occupied(known) => return Ok(known.into_mut()),
            std::collections::hash_map::Entry::Vacant(vacant) => vacant,
        };
        let plan_id = plan.to_string();
        let head = tx.query_opt(PLAN_HEAD, vals![&plan_id], |r| Ok((r.i64(0)?, r.string(1)?)))?;
        let (stored, entries, head) = match head {
            None => (false, 0, integrity::GENESIS),
            Some((n, hex)) => (true, n, kept_head(&plan_id, &hex)?),
        };
        Ok(vacant.insert(PlanState {
            stored,
            entries,
            head,
            decisions: 0,
            corrections: 0,
            superseded: 0,
            max_depth: 0,
            first: None,
            last: None,
        }))
    }

    /// Where the next entry of `plan` goes; nothing changes until [`Ledger::appended`].
    fn next_entry(&mut self, tx: &Conn, plan: PlanId, content: &Hash) -> Result<Entry> {
        if self.log.is_none() {
            self.log = Some(tx.query_one(LOG_LENGTH, &[], |r| r.i64(0))?);
        }
        let log_index = self.log.expect("loaded above") + 1;
        let state = self.plan(tx, plan)?;
        Ok(Entry { chain_index: state.entries + 1, chain_hash: integrity::link(&state.head, content), log_index })
    }

    /// Records an entry whose row was written.
    fn appended(&mut self, plan: PlanId, entry: &Entry) -> &mut PlanState {
        self.log = Some(entry.log_index);
        let state = self.plans.get_mut(&plan).expect("next_entry loaded the plan");
        state.entries = entry.chain_index;
        state.head = entry.chain_hash;
        state
    }

    /// Checks that a referenced decision is stored in `plan`; returns its depth.
    fn reference(&self, tx: &Conn, field: &'static str, id: DecisionId, plan: PlanId) -> Result<i64> {
        let (other_plan, depth) = match self.inserted.get(&id) {
            Some(&(p, depth)) if p == plan => return Ok(depth),
            Some(&(p, depth)) => (p.to_string(), Some(depth)),
            None => plan_of(tx, &id.to_string())?.ok_or_else(|| Error::MissingReference {
                field,
                id: id.to_string(),
                plan_id: plan.to_string(),
            })?,
        };
        let plan_id = plan.to_string();
        if other_plan == plan_id {
            Ok(depth.unwrap_or(0))
        } else {
            Err(Error::CrossPlanReference { field, id: id.to_string(), plan_id, other_plan })
        }
    }

    /// Writes the chain heads and counts, then forgets them: call before every commit.
    pub(crate) fn flush(&mut self, tx: &Conn) -> Result<()> {
        if let Some(n) = self.log.take() {
            tx.execute("UPDATE store_log SET entries = ?1 WHERE id = 1", vals![n])?;
        }
        let update_plan = if tx.is_postgres() { UPDATE_PLAN_POSTGRES } else { UPDATE_PLAN };
        for (plan, s) in self.plans.drain().filter(|(_, s)| s.decisions > 0 || s.superseded > 0) {
            let (first, last) = (s.first.map(|d| d.to_string()), s.last.map(|d| d.to_string()));
            tx.execute(
                if s.stored { update_plan } else { INSERT_PLAN },
                vals![
                    &plan.to_string(),
                    s.decisions,
                    s.corrections,
                    s.superseded,
                    s.max_depth,
                    &first,
                    &last,
                    s.entries,
                    &integrity::to_hex(&s.head),
                ],
            )?;
        }
        for (t, n) in self.types.drain() {
            tx.execute(COUNT_TYPES, vals![t.as_str(), n])?;
        }
        self.inserted.clear();
        Ok(())
    }
}

/// A plan's kept head hash, or [`Error::Corrupt`] when it is not one.
fn kept_head(plan: &str, hex: &str) -> Result<Hash> {
    integrity::from_hex(hex)
        .ok_or_else(|| Error::Corrupt(format!("plans.head_hash of plan {plan} is not a hash; run `dstore check`")))
}

/// A new entry's place in its plan's chain and in the store's log.
struct Entry {
    chain_index: i64,
    chain_hash: Hash,
    log_index: i64,
}

/// Inserts one decision row (not its supersession link), after checking
/// that its parent and corrected decision are stored in its plan, as the
/// next entry of its plan's chain. Nothing changes when it fails.
fn insert_row(tx: &Conn, ledger: &mut Ledger, d: &Decision) -> Result<()> {
    // One row: the cached statement, not a fresh one.
    let mut insert = tx.prepare(insert_sql(tx))?;
    insert_prepared(tx, &mut insert, ledger, d, &PreparedRow::of(d))
}

/// The prepared INSERT of a decision row: hold it across the rows of a
/// batch (it binds a row's texts without copying them).
pub(crate) fn insert_statement(tx: &Conn) -> Result<Stmt<'_>> {
    tx.prepare_write(insert_sql(tx))
}

fn insert_sql(tx: &Conn) -> &'static str {
    if tx.is_postgres() {
        INSERT_POSTGRES
    } else {
        INSERT
    }
}

/// The column texts and content hash of a decision row: everything about
/// an insert that needs no database, so an import computes it on another
/// thread while this one writes.
///
/// The texts share one buffer (one allocation per row instead of eleven:
/// an import makes and frees 100,000 of these).
#[derive(Clone)]
pub(crate) struct PreparedRow {
    /// The row's texts one after another, in the order of [`RowText`].
    text: String,
    /// Where each [`RowText`] ends in `text`. An absent id (no parent, no
    /// corrected decision) is empty; a present one never is.
    ends: [u32; ROW_TEXTS],
    content: Hash,
}

/// The texts of a [`PreparedRow`], in their order in its buffer.
#[derive(Clone, Copy)]
enum RowText {
    Id,
    Plan,
    Parent,
    Corrects,
    Alternatives,
    Snapshot,
    Artifacts,
    DownstreamDecisions,
    DownstreamPlans,
    Metadata,
    /// `content` in hex, as the row stores it.
    ContentHex,
}
const ROW_TEXTS: usize = RowText::ContentHex as usize + 1;

/// A [`PreparedRow`]'s buffer while it is written.
struct RowTexts {
    bytes: Vec<u8>,
    ends: [u32; ROW_TEXTS],
}

impl Default for RowTexts {
    fn default() -> Self {
        // The ids, hashes and JSON columns of a typical decision fit; a larger one grows once or twice.
        RowTexts { bytes: Vec::with_capacity(1024), ends: [0; ROW_TEXTS] }
    }
}

impl RowTexts {
    fn push(&mut self, which: RowText, text: &[u8]) {
        self.bytes.extend_from_slice(text);
        self.end(which);
    }

    fn push_json<T: ColumnJson + Serialize + ?Sized>(&mut self, which: RowText, v: &T) {
        let start = self.bytes.len();
        v.write_json(&mut self.bytes);
        debug_assert_eq!(
            std::str::from_utf8(&self.bytes[start..]),
            Ok(&*serde_json::to_string(v).expect("in-memory values always serialize")),
            "column_json and serde_json disagree"
        );
        self.end(which);
    }

    fn end(&mut self, which: RowText) {
        self.ends[which as usize] = u32::try_from(self.bytes.len()).expect("a decision row is under 4 GiB");
    }
}

impl PreparedRow {
    pub(crate) fn of(d: &Decision) -> PreparedRow {
        let mut texts = RowTexts::default();
        let mut ulid = [0; 26];
        // `encode`, not `to_string`: no formatter for ids written by the hundred thousand.
        texts.push(RowText::Id, d.decision_id().encode(&mut ulid).as_bytes());
        texts.push(RowText::Plan, d.plan_id().encode(&mut ulid).as_bytes());
        texts.push(RowText::Parent, d.parent_decision_id().map_or(&[][..], |p| p.encode(&mut ulid).as_bytes()));
        texts.push(RowText::Corrects, d.corrects_decision_id().map_or(&[][..], |c| c.encode(&mut ulid).as_bytes()));
        texts.push_json(RowText::Alternatives, d.alternatives());
        texts.push_json(RowText::Snapshot, d.context_snapshot());
        texts.push_json(RowText::Artifacts, d.artifacts_produced());
        texts.push_json(RowText::DownstreamDecisions, d.downstream_decision_ids());
        texts.push_json(RowText::DownstreamPlans, d.downstream_plan_ids());
        // Any JSON value: serde_json's own writer.
        serde_json::to_writer(&mut texts.bytes, d.metadata()).expect("in-memory values always serialize");
        texts.end(RowText::Metadata);
        let mut row = PreparedRow {
            text: String::from_utf8(texts.bytes).expect("ids and serde_json's output are UTF-8"),
            ends: texts.ends,
            content: integrity::GENESIS,
        };
        // Hashed from the texts as they will be bound, so hash and row cannot disagree.
        row.content = integrity::decision_hash(&[
            Field::Text(row.get(RowText::Id)),
            Field::Text(row.get(RowText::Plan)),
            row.id(RowText::Parent).into(),
            Field::Int(i64::from(d.sequence())),
            Field::Text(d.decision_type().as_str()),
            Field::Text(d.chosen_option()),
            Field::Text(d.rationale()),
            d.confidence_score().map_or(Field::Null, Field::Real),
            Field::Text(row.get(RowText::Alternatives)),
            Field::Text(row.get(RowText::Snapshot)),
            Field::Text(row.get(RowText::Artifacts)),
            row.id(RowText::Corrects).into(),
            Field::Text(row.get(RowText::DownstreamDecisions)),
            Field::Text(row.get(RowText::DownstreamPlans)),
            Field::Text(row.get(RowText::Metadata)),
        ]);
        row.text.push_str(integrity::hex_into(&row.content, &mut [0; 64]));
        row.ends[RowText::ContentHex as usize] = u32::try_from(row.text.len()).expect("a decision row is under 4 GiB");
        row
    }

    fn get(&self, which: RowText) -> &str {
        let i = which as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// An id that may be absent (parent, corrected decision).
    fn id(&self, which: RowText) -> Option<&str> {
        Some(self.get(which)).filter(|t| !t.is_empty())
    }
}

/// A decision with its row's column texts and content hash computed: most
/// of an insert's work that needs no database. A program that makes
/// decisions on one thread and writes them on another prepares them on the
/// first (as the Python package does when its writer falls behind), so that
/// [`Store::try_insert_prepared`] only writes.
#[derive(Clone)]
pub struct PreparedDecision {
    decision: Decision,
    row: PreparedRow,
}

impl PreparedDecision {
    pub fn new(decision: Decision) -> Self {
        let row = PreparedRow::of(&decision);
        PreparedDecision { decision, row }
    }

    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}

impl From<Decision> for PreparedDecision {
    fn from(decision: Decision) -> Self {
        PreparedDecision::new(decision)
    }
}

impl std::fmt::Debug for PreparedDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PreparedDecision").field(&self.decision.decision_id()).finish()
    }
}

/// [`insert_row`] with the row's texts and hash computed already (by [`PreparedRow::of`] on `d`).
pub(crate) fn insert_prepared(
    tx: &Conn,
    insert: &mut Stmt<'_>,
    ledger: &mut Ledger,
    d: &Decision,
    row: &PreparedRow,
) -> Result<()> {
    let mut depth = 0;
    if let Some(p) = d.parent_decision_id() {
        depth = ledger.reference(tx, "parent_decision_id", p, d.plan_id())? + 1;
    }
    if let Some(c) = d.corrects_decision_id() {
        ledger.reference(tx, "corrects_decision_id", c, d.plan_id())?;
    }
    let text = |which| row.get(which);
    if tx.is_postgres() {
        super::db::no_nul("chosen_option", d.chosen_option())?;
        super::db::no_nul("rationale", d.rationale())?;
    }
    let entry = ledger.next_entry(tx, d.plan_id(), &row.content)?;
    let mut chain_hex = [0; 64];
    let inserted = insert
        .execute_raw(vals![
            text(RowText::Id),
            text(RowText::Plan),
            row.id(RowText::Parent),
            d.sequence(),
            d.decision_type().as_str(),
            d.chosen_option(),
            d.rationale(),
            d.confidence_score(),
            text(RowText::Alternatives),
            text(RowText::Snapshot),
            text(RowText::Artifacts),
            row.id(RowText::Corrects),
            text(RowText::DownstreamDecisions),
            text(RowText::DownstreamPlans),
            text(RowText::Metadata),
            depth,
            text(RowText::ContentHex),
            entry.chain_index,
            integrity::hex_into(&entry.chain_hash, &mut chain_hex),
            entry.log_index,
        ])
        .map_err(|e| insert_error(d, e))?;
    if inserted == 0 {
        // PostgreSQL's ON CONFLICT DO NOTHING: which rule did it break?
        let taken =
            tx.query_opt("SELECT 1 FROM decisions WHERE decision_id = ?1", vals![text(RowText::Id)], |_| Ok(()))?;
        return Err(match taken {
            Some(()) => Error::DuplicateDecision(d.decision_id().to_string()),
            None => Error::DuplicateSequence { plan_id: d.plan_id().to_string(), sequence: d.sequence() },
        });
    }
    let state = ledger.appended(d.plan_id(), &entry);
    state.decisions += 1;
    state.corrections += i64::from(d.corrects_decision_id().is_some());
    state.max_depth = state.max_depth.max(depth);
    let this = d.decision_id();
    state.first = Some(state.first.map_or(this, |f| f.min(this)));
    state.last = Some(state.last.map_or(this, |l| l.max(this)));
    *ledger.types.entry(d.decision_type()).or_default() += 1;
    ledger.inserted.insert(this, d.plan_id(), depth);
    Ok(())
}

/// Reads one decision inside a transaction.
pub(crate) fn get_in(tx: &Conn, id: DecisionId) -> Result<Option<Decision>> {
    tx.query_opt(DECISION_BY_ID, vals![&id.to_string()], |r| from_row(r, &Cols::of(r, None)?))?.transpose()
}

/// Every decision in the order the store's log holds them, each with its
/// log index, without supersession links (they are entries of their own).
pub(crate) fn for_each_in_log_order(conn: &Conn, mut f: impl FnMut(i64, Decision) -> Result<()>) -> Result<()> {
    let (mut cols, log_index) = (None, 15);
    conn.for_each_streamed(LOG_ROWS, &[], |r| {
        f(r.opt_i64(log_index)?.unwrap_or(i64::MAX), from_row(r, Cols::once(&mut cols, r, None)?)??)
    })
}

/// Decoded decisions, and (id, error) for rows that do not decode.
pub(crate) type LenientRows = (Vec<Decision>, Vec<(String, Error)>);

/// Every row of a plan, decoded where possible: the decisions, and the id
/// and error of each row that does not decode (for `check`). One query.
pub(crate) fn plan_rows_lenient(conn: &Conn, plan: &str) -> Result<LenientRows> {
    let mut cols = None;
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    conn.for_each(PLAN_ROWS, vals![plan], |row| {
        let cols = Cols::once(&mut cols, row, None)?;
        let id = row.string(cols.decision_id)?;
        match from_row(row, cols) {
            Ok(Ok(d)) => good.push(d),
            Ok(Err(e)) | Err(e) => bad.push((id, e)),
        }
        Ok(())
    })?;
    bad.extend(link_plan(conn, plan, &mut good)?);
    Ok((good, bad))
}

/// Records "`old` was replaced by `new`" after checking both ends and cycles.
/// Returns false when the same link was already stored.
pub(crate) fn link_supersession(tx: &Conn, ledger: &mut Ledger, old: DecisionId, new: DecisionId) -> Result<bool> {
    // Only the plan and the current link of `old` are needed, not the whole row.
    let (old_plan, current) = tx
        .query_opt(LINK_OF, vals![&old.to_string()], |r| Ok((r.string(0)?, r.opt_string(1)?)))?
        .ok_or_else(|| Error::DecisionNotFound(old.to_string()))?;
    let new_plan = plan_of(tx, &new.to_string())?.map(|(p, _)| p);
    let new_plan = new_plan.ok_or_else(|| Error::MissingReference {
        field: "superseded_by",
        id: new.to_string(),
        plan_id: old_plan.clone(),
    })?;
    if new_plan != old_plan {
        return Err(Error::CrossPlanReference {
            field: "superseded_by",
            id: new.to_string(),
            plan_id: old_plan,
            other_plan: new_plan,
        });
    }
    match current {
        Some(by) if by == new.to_string() => return Ok(false),
        Some(by) => return Err(Error::AlreadySuperseded { id: old.to_string(), by }),
        None => {}
    }
    if old == new {
        return Err(Error::validation("superseded_by", "a decision cannot supersede itself"));
    }
    if reaches(tx, new, old)? {
        return Err(Error::Cycle(format!(
            "superseding {old} by {new} would form a cycle: {new} already leads back to {old}"
        )));
    }
    let (old, new) = (old.to_string(), new.to_string());
    let content = integrity::supersession_hash(Field::Text(&old_plan), Field::Text(&old), Field::Text(&new));
    let plan = PlanId::parse_field("plan_id", &old_plan)?;
    let entry = ledger.next_entry(tx, plan, &content)?;
    let chain_hash = integrity::to_hex(&entry.chain_hash);
    tx.execute(
        INSERT_SUPERSESSION,
        vals![&old, &new, &old_plan, &integrity::to_hex(&content), entry.chain_index, &chain_hash, entry.log_index],
    )?;
    ledger.appended(plan, &entry).superseded += 1;
    Ok(true)
}

/// Is `to` reachable from `from` through supersessions and corrections?
fn reaches(tx: &Conn, from: DecisionId, to: DecisionId) -> Result<bool> {
    if tx.is_postgres() {
        // One recursive query: a round trip per step would cost more than the query.
        return tx.query_one(REACHES_POSTGRES, vals![&from.to_string(), &to.to_string()], |r| r.bool(0));
    }
    // On SQLite a walk, one point query per decision reached (in an import
    // usually one: the superseding decision was just stored). A recursive
    // query opened a temporary table for its UNION at every call: 30 us a
    // link, 3 % of an import's writer thread.
    // Texts, as the rows hold them: a walk compares what is stored, as the query did.
    let to = to.to_string();
    let mut seen = std::collections::HashSet::new();
    let mut next = vec![from.to_string()];
    while let Some(id) = next.pop() {
        if id == to {
            return Ok(true);
        }
        if !seen.contains(&id) {
            tx.for_each(NEXT_OF, vals![&id], |r| {
                next.push(r.string(0)?);
                Ok(())
            })?;
            seen.insert(id);
        }
    }
    Ok(false)
}

impl Store {
    /// Stores one decision (and its supersession link, if it has one).
    ///
    /// # Errors
    /// [`Error::MissingReference`] / [`Error::CrossPlanReference`] when the
    /// parent, corrected or superseding decision is not stored in the same
    /// plan; [`Error::DuplicateDecision`], [`Error::DuplicateSequence`],
    /// [`Error::Cycle`]. Nothing is written on error.
    pub fn insert(&mut self, decision: &Decision) -> Result<()> {
        self.write(|tx, ledger| {
            insert_row(tx, ledger, decision)?;
            if let Some(by) = decision.superseded_by() {
                link_supersession(tx, ledger, decision.decision_id(), by)?;
            }
            Ok(())
        })
    }

    /// Stores decisions in one transaction: all or nothing. Items may refer
    /// to earlier items of the same batch.
    ///
    /// # Errors
    /// [`Error::Batch`] with the index of the first failing item.
    pub fn insert_many<D: std::borrow::Borrow<Decision>>(
        &mut self,
        decisions: impl IntoIterator<Item = D>,
    ) -> Result<usize> {
        self.try_insert_many(decisions.into_iter().map(Ok))
    }

    /// [`Store::insert_many`] from items that may fail to be made: the first
    /// `Err` ends the batch with that error and nothing is written. Items
    /// are taken as they come, so a caller can produce them (parse, convert)
    /// on one thread while this one writes.
    ///
    /// # Errors
    /// [`Error::Batch`] with the index of the first failing item, the item's own error inside.
    pub fn try_insert_many<D: std::borrow::Borrow<Decision>>(
        &mut self,
        decisions: impl IntoIterator<Item = Result<D>>,
    ) -> Result<usize> {
        self.insert_rows(decisions.into_iter().map(|d| {
            d.map(|d| {
                let row = PreparedRow::of(d.borrow());
                (d, row)
            })
        }))
    }

    /// [`Store::try_insert_many`] of decisions prepared already (see
    /// [`PreparedDecision`]): this thread only writes them.
    ///
    /// # Errors
    /// As [`Store::try_insert_many`].
    pub fn try_insert_prepared(
        &mut self,
        decisions: impl IntoIterator<Item = Result<PreparedDecision>>,
    ) -> Result<usize> {
        self.insert_rows(decisions.into_iter().map(|p| p.map(|p| (p.decision, p.row))))
    }

    fn insert_rows<D: std::borrow::Borrow<Decision>>(
        &mut self,
        rows: impl IntoIterator<Item = Result<(D, PreparedRow)>>,
    ) -> Result<usize> {
        self.write_bulk(|tx, ledger| {
            let mut pending = Vec::new();
            let mut n = 0;
            let mut insert = insert_statement(tx)?;
            for (index, item) in rows.into_iter().enumerate() {
                let batch = |e: Error| Error::Batch { index, source: Box::new(e) };
                let (d, row) = item.map_err(batch)?;
                let d = d.borrow();
                insert_prepared(tx, &mut insert, ledger, d, &row).map_err(batch)?;
                if let Some(by) = d.superseded_by() {
                    pending.push((index, d.decision_id(), by));
                }
                n += 1;
            }
            // Links last: a decision may be superseded by a later item.
            for (index, old, new) in pending {
                link_supersession(tx, ledger, old, new).map_err(|e| Error::Batch { index, source: Box::new(e) })?;
            }
            Ok(n)
        })
    }

    /// Records that `old` was replaced by `new` (both in the same plan); the
    /// only change the store allows to a stored decision. Recording the same
    /// link again is a no-op.
    ///
    /// # Errors
    /// [`Error::DecisionNotFound`], [`Error::MissingReference`],
    /// [`Error::CrossPlanReference`], [`Error::AlreadySuperseded`], [`Error::Cycle`].
    pub fn supersede(&mut self, old: DecisionId, new: DecisionId) -> Result<()> {
        self.write(|tx, ledger| link_supersession(tx, ledger, old, new).map(|_| ()))
    }

    /// One decision by id.
    ///
    /// # Errors
    /// [`Error::Storage`] when the row cannot be read.
    pub fn get(&self, id: DecisionId) -> Result<Option<Decision>> {
        get_in(&self.conn, id)
    }

    /// One decision by id, or [`Error::DecisionNotFound`].
    ///
    /// # Errors
    /// [`Error::DecisionNotFound`] when no such decision is stored.
    pub fn decision(&self, id: DecisionId) -> Result<Decision> {
        self.get(id)?.ok_or_else(|| Error::DecisionNotFound(id.to_string()))
    }

    /// Every decision of a plan in sequence order, in one query.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn plan_decisions(&self, plan: PlanId) -> Result<Vec<Decision>> {
        rows_of_plan(&self.conn, PLAN_ROWS, plan)
    }

    /// Every decision, ordered by plan then sequence, streamed to `f`.
    ///
    /// # Errors
    /// The first error of reading a row or of `f`.
    pub fn for_each_decision(&self, plan: Option<PlanId>, mut f: impl FnMut(Decision) -> Result<()>) -> Result<()> {
        let (sql, arg) = match plan {
            Some(p) => (PLAN_ROWS, Some(p.to_string())),
            None => (ALL_ROWS, None),
        };
        let mut cols = None;
        let params = match &arg {
            Some(a) => vals![a],
            None => &[],
        };
        // One snapshot, read through a cursor on PostgreSQL.
        self.read_snapshot(|store| {
            store.conn.for_each_streamed(sql, params, |row| f(from_row(row, Cols::once(&mut cols, row, None)?)??))
        })
    }

    /// The plan's decision tree, rebuilt from its rows.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] when the plan has no decisions.
    pub fn decision_tree(&self, plan: PlanId) -> Result<DecisionTree> {
        self.tree_from(PLAN_ROWS, plan)
    }

    /// The plan's tree with each decision's ids, links, type, sequence,
    /// confidence and chosen option only: the rationale and the nested
    /// fields (alternatives, context snapshot, artifacts, downstream ids,
    /// metadata) are left empty. Enough to render the tree and to answer
    /// history questions (roots, children, depth, corrections, supersession,
    /// the effective set), and several times faster to load than
    /// [`Store::decision_tree`] because no JSON column is decoded. In SQLite
    /// it reads one index (`decisions_outline`), not the rows.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] when the plan has no decisions.
    pub fn decision_tree_outline(&self, plan: PlanId) -> Result<DecisionTree> {
        self.tree_from(OUTLINE_ROWS, plan)
    }

    fn tree_from(&self, sql: &str, plan: PlanId) -> Result<DecisionTree> {
        let decisions = rows_of_plan(&self.conn, sql, plan)?;
        if decisions.is_empty() {
            return Err(Error::PlanNotFound(plan.to_string()));
        }
        Ok(DecisionTree::from_decisions(decisions))
    }

    /// The tree of the plan that holds `id`.
    ///
    /// # Errors
    /// [`Error::DecisionNotFound`] when no such decision is stored.
    pub fn tree_of(&self, id: DecisionId) -> Result<DecisionTree> {
        self.read_snapshot(|store| {
            let (plan, _) =
                plan_of(&store.conn, &id.to_string())?.ok_or_else(|| Error::DecisionNotFound(id.to_string()))?;
            store.decision_tree(PlanId::parse(&plan)?)
        })
    }

    /// The correction chain through `id`: the original first, each correction after the one it corrects.
    ///
    /// # Errors
    /// [`Error::DecisionNotFound`] when no such decision is stored.
    pub fn correction_chain(&self, id: DecisionId) -> Result<Vec<Decision>> {
        let tree = self.tree_of(id)?;
        Ok(tree.correction_chain(id).into_iter().cloned().collect())
    }

    /// The decisions of a plan that no decision corrects and that are not superseded.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] when the plan has no decisions.
    pub fn effective_decisions(&self, plan: PlanId) -> Result<Vec<Decision>> {
        let tree = self.decision_tree(plan)?;
        Ok(tree.effective().into_iter().cloned().collect())
    }

    /// The decision that stands for `id` now (latest correction, then supersession, repeatedly).
    ///
    /// # Errors
    /// [`Error::DecisionNotFound`] when no such decision is stored.
    pub fn standing_decision(&self, id: DecisionId) -> Result<Decision> {
        let tree = self.tree_of(id)?;
        tree.standing(id).cloned().ok_or_else(|| Error::Cycle(format!("the history of {id} loops")))
    }

    /// One summary row per plan, ordered by plan id, from the kept counts
    /// (no decision row is read).
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn plans(&self) -> Result<Vec<PlanSummary>> {
        self.conn.query_vec(
            "SELECT plan_id, decisions, max_depth, corrections, superseded, first_decision_id, last_decision_id
             FROM plans ORDER BY plan_id",
            &[],
            |r| {
                Ok(PlanSummary {
                    plan_id: PlanId::parse(r.str(0)?)?,
                    decisions: count(r, 1)?,
                    max_depth: count(r, 2)?,
                    corrections: count(r, 3)?,
                    superseded: count(r, 4)?,
                    first_ms: DecisionId::parse(r.str(5)?)?.timestamp_ms(),
                    last_ms: DecisionId::parse(r.str(6)?)?.timestamp_ms(),
                })
            },
        )
    }

    /// Counts of decisions by type, and of corrections and supersessions,
    /// from the kept counts (no decision row is read).
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn decision_counts(&self) -> Result<DecisionCounts> {
        self.read_snapshot(|store| {
            let mut by_type = std::collections::BTreeMap::new();
            store.conn.for_each(
                "SELECT decision_type, decisions FROM decision_type_counts WHERE decisions > 0",
                &[],
                |r| {
                    by_type.insert(r.str(0)?.parse::<DecisionType>()?, count(r, 1)?);
                    Ok(())
                },
            )?;
            // PostgreSQL's sum of BIGINT is NUMERIC: cast it back.
            let (plans, corrections, supersessions) = store.conn.query_one(
                "SELECT count(*), CAST(coalesce(sum(corrections), 0) AS BIGINT), \
                 CAST(coalesce(sum(superseded), 0) AS BIGINT) FROM plans",
                &[],
                |r| Ok((count(r, 0)?, count(r, 1)?, count(r, 2)?)),
            )?;
            Ok(DecisionCounts { plans, decisions: by_type.values().sum(), corrections, supersessions, by_type })
        })
    }

    /// The digest of every plan (its anchor at its current length) and of the
    /// whole store, from the kept chain heads. Anchor a value elsewhere and
    /// verify it later with [`Store::check_against`].
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read, [`Error::Corrupt`] when a
    /// kept head is not a hash.
    pub fn digest(&self) -> Result<Digest> {
        self.read_snapshot(|store| {
            let plans =
                store.conn.query_vec("SELECT plan_id, entries, head_hash FROM plans ORDER BY plan_id", &[], |r| {
                    let plan = r.string(0)?;
                    let hash = kept_head(&plan, r.str(2)?)?;
                    Ok(Anchor { scope: AnchorScope::Plan(plan), entries: count(r, 1)?, hash })
                })?;
            let entries = store.conn.query_one(LOG_LENGTH, &[], |r| count(r, 0))?;
            let hash = integrity::store_digest(plans.iter().map(|a| match &a.scope {
                AnchorScope::Plan(p) => (p.as_str(), a.entries, &a.hash),
                AnchorScope::Store => unreachable!("plan anchors only"),
            }));
            Ok(Digest { store: Anchor { scope: AnchorScope::Store, entries, hash }, plans })
        })
    }
}

/// A count column (kept or `count(*)`); a negative one means the kept counts are corrupt.
pub(super) fn count(r: &Row<'_>, i: usize) -> Result<u64> {
    let n = r.i64(i)?;
    u64::try_from(n).map_err(|_| Error::Corrupt(format!("a count of {n}; run `dstore check`")))
}

/// What [`Store::digest`] returns: one anchor for the store, one per plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    pub store: Anchor,
    /// In plan id order.
    pub plans: Vec<Anchor>,
}

/// Totals of [`Store::decision_counts`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionCounts {
    pub plans: u64,
    pub decisions: u64,
    pub corrections: u64,
    pub supersessions: u64,
    pub by_type: std::collections::BTreeMap<DecisionType, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_inserts_are_remembered_for_at_least_one_generation() {
        let plan = PlanId::generate();
        let ids: Vec<DecisionId> = (0..2 * RECENT + 1).map(|_| DecisionId::generate()).collect();
        let mut recent = Recent::default();
        for (depth, &id) in ids.iter().enumerate() {
            recent.insert(id, plan, depth as i64);
        }
        // The last insert started a third generation: the first is forgotten,
        // everything of the second and third is still known.
        assert_eq!(recent.get(&ids[RECENT - 1]), None);
        for (depth, id) in ids.iter().enumerate().skip(RECENT) {
            assert_eq!(recent.get(id), Some(&(plan, depth as i64)));
        }
        recent.clear();
        assert_eq!(recent.get(&ids[2 * RECENT]), None);
    }
}
