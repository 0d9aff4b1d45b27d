//! Queries of the `decisions` and `supersessions` tables.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};
use serde::Serialize;

use super::{storage, Store};
use crate::decision::{Decision, DecisionBuilder, DecisionId, DecisionTree, DecisionType, PlanId};
use crate::error::{Error, Result};

const INSERT: &str = "INSERT INTO decisions (decision_id, plan_id, parent_decision_id, sequence, decision_type, \
     chosen_option, rationale, confidence_score, alternatives, context_snapshot, artifacts_produced, \
     corrects_decision_id, downstream_decision_ids, downstream_plan_ids, metadata) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

/// The columns of a decision row (with its supersession link), for `from_row`.
macro_rules! select_decisions {
    () => {
        "SELECT d.decision_id, d.plan_id, d.parent_decision_id, d.sequence, d.decision_type, \
         d.chosen_option, d.rationale, d.confidence_score, d.alternatives, d.context_snapshot, d.artifacts_produced, \
         d.corrects_decision_id, s.superseded_by, d.downstream_decision_ids, d.downstream_plan_ids, d.metadata \
         FROM decisions d LEFT JOIN supersessions s ON s.decision_id = d.decision_id"
    };
}

pub(super) const DECISION_BY_ID: &str = concat!(select_decisions!(), " WHERE d.decision_id = ?1");
pub(super) const PLAN_ROWS: &str = concat!(select_decisions!(), " WHERE d.plan_id = ?1 ORDER BY d.sequence");
const ALL_ROWS: &str = concat!(select_decisions!(), " ORDER BY d.plan_id, d.sequence");
pub(super) const PLAN_OF: &str = "SELECT plan_id FROM decisions WHERE decision_id = ?1";
/// The plan of a decision and what supersedes it, if anything.
pub(super) const LINK_OF: &str = "SELECT d.plan_id, s.superseded_by FROM decisions d \
     LEFT JOIN supersessions s ON s.decision_id = d.decision_id WHERE d.decision_id = ?1";
/// Is ?2 reachable from ?1 through supersessions and corrections?
pub(super) const REACHES: &str = "WITH RECURSIVE succ(id) AS (
         SELECT ?1
         UNION
         SELECT s.superseded_by FROM supersessions s JOIN succ ON s.decision_id = succ.id
         UNION
         SELECT d.decision_id FROM decisions d JOIN succ ON d.corrects_decision_id = succ.id
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

fn json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("in-memory values always serialize")
}

/// Reads a JSON text column, naming the column when it is not valid.
fn column_json<T: serde::de::DeserializeOwned>(row: &Row<'_>, idx: usize, name: &str) -> rusqlite::Result<T> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            idx,
            rusqlite::types::Type::Text,
            format!("column {name}: {e}").into(),
        )
    })
}

/// Rebuilds a decision from a row of `SELECT`, validating it like any input.
fn from_row(row: &Row<'_>) -> rusqlite::Result<Result<Decision>> {
    let decision_type: String = row.get(4)?;
    let decision_type = match decision_type.parse::<DecisionType>() {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let plan_id: String = row.get(1)?;
    let mut b: DecisionBuilder = Decision::builder(PlanId::generate(), decision_type, row.get(3)?)
        .plan_id(plan_id)
        .decision_id(row.get::<_, String>(0)?)
        .chosen_option(row.get::<_, String>(5)?)
        .rationale(row.get::<_, String>(6)?)
        .confidence_score(row.get::<_, Option<f64>>(7)?)
        .context_snapshot(column_json(row, 9, "context_snapshot")?)
        .corrects_decision_id(row.get(11)?);
    if let Some(p) = row.get::<_, Option<String>>(2)? {
        b = b.parent(p);
    }
    if row.get::<_, Option<String>>(11)?.is_some() {
        b = b.is_correction(true);
    }
    if let Some(s) = row.get::<_, Option<String>>(12)? {
        b = b.superseded_by(s);
    }
    for a in column_json::<Vec<_>>(row, 8, "alternatives")? {
        b = b.alternative(a);
    }
    for a in column_json::<Vec<_>>(row, 10, "artifacts_produced")? {
        b = b.artifact(a);
    }
    for id in column_json::<Vec<String>>(row, 13, "downstream_decision_ids")? {
        b = b.downstream_decision(id);
    }
    for id in column_json::<Vec<String>>(row, 14, "downstream_plan_ids")? {
        b = b.downstream_plan(id);
    }
    for (k, v) in column_json::<serde_json::Map<_, _>>(row, 15, "metadata")? {
        b = b.metadata(k, v);
    }
    Ok(Decision::try_from(b))
}

fn collect(rows: impl Iterator<Item = rusqlite::Result<Result<Decision>>>) -> Result<Vec<Decision>> {
    rows.map(|r| r.map_err(storage).and_then(|d| d)).collect()
}

/// Translates a failed insert into the rule it broke.
fn insert_error(d: &Decision, e: rusqlite::Error) -> Error {
    let message = match &e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        _ => return storage(e),
    };
    if message.contains("decisions.decision_id") {
        return Error::DuplicateDecision(d.decision_id().to_string());
    }
    if message.contains("decisions.plan_id, decisions.sequence") {
        return Error::DuplicateSequence { plan_id: d.plan_id().to_string(), sequence: d.sequence() };
    }
    storage(e)
}

fn plan_of(tx: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    tx.prepare_cached(PLAN_OF)?.query_row([id], |r| r.get(0)).optional()
}

/// Checks that a referenced decision is stored in `plan` (one index lookup).
fn check_reference(tx: &Connection, field: &'static str, id: DecisionId, plan: PlanId) -> Result<()> {
    let (id, plan_id) = (id.to_string(), plan.to_string());
    match plan_of(tx, &id).map_err(storage)? {
        Some(p) if p == plan_id => Ok(()),
        Some(other_plan) => Err(Error::CrossPlanReference { field, id, plan_id, other_plan }),
        None => Err(Error::MissingReference { field, id, plan_id }),
    }
}

/// Inserts one decision row (not its supersession link), after checking
/// that its parent and corrected decision are stored in its plan.
pub(crate) fn insert_row(tx: &Transaction<'_>, d: &Decision) -> Result<()> {
    if let Some(p) = d.parent_decision_id() {
        check_reference(tx, "parent_decision_id", p, d.plan_id())?;
    }
    if let Some(c) = d.corrects_decision_id() {
        check_reference(tx, "corrects_decision_id", c, d.plan_id())?;
    }
    let mut stmt = tx.prepare_cached(INSERT).map_err(storage)?;
    let snapshot = d.context_snapshot();
    stmt.execute(params![
        d.decision_id().to_string(),
        d.plan_id().to_string(),
        d.parent_decision_id().map(|p| p.to_string()),
        d.sequence(),
        d.decision_type().as_str(),
        d.chosen_option(),
        d.rationale(),
        d.confidence_score(),
        json(d.alternatives()),
        json(snapshot),
        json(d.artifacts_produced()),
        d.corrects_decision_id().map(|p| p.to_string()),
        json(d.downstream_decision_ids()),
        json(d.downstream_plan_ids()),
        json(d.metadata()),
    ])
    .map_err(|e| insert_error(d, e))?;
    Ok(())
}

/// Reads one decision inside a transaction.
pub(crate) fn get_in(tx: &rusqlite::Connection, id: DecisionId) -> Result<Option<Decision>> {
    let mut stmt = tx.prepare_cached(DECISION_BY_ID).map_err(storage)?;
    let row = stmt.query_row([id.to_string()], from_row).optional().map_err(storage)?;
    row.transpose()
}

/// Decoded decisions, and (id, error) for rows that do not decode.
pub(crate) type LenientRows = (Vec<Decision>, Vec<(String, Error)>);

/// Every row of a plan, decoded where possible: the decisions, and the id
/// and error of each row that does not decode (for `check`). One query.
pub(crate) fn plan_rows_lenient(conn: &Connection, plan: &str) -> Result<LenientRows> {
    let mut stmt = conn.prepare_cached(PLAN_ROWS).map_err(storage)?;
    let mut rows = stmt.query([plan]).map_err(storage)?;
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    while let Some(row) = rows.next().map_err(storage)? {
        let id: String = row.get(0).map_err(storage)?;
        match from_row(row) {
            Ok(Ok(d)) => good.push(d),
            Ok(Err(e)) => bad.push((id, e)),
            Err(e) => bad.push((id, Error::Storage(Box::new(e)))),
        }
    }
    Ok((good, bad))
}

/// Records "`old` was replaced by `new`" after checking both ends and cycles.
/// Returns false when the same link was already stored.
pub(crate) fn link_supersession(tx: &Transaction<'_>, old: DecisionId, new: DecisionId) -> Result<bool> {
    // Only the plan and the current link of `old` are needed, not the whole row.
    let (old_plan, current): (String, Option<String>) = tx
        .prepare_cached(LINK_OF)
        .map_err(storage)?
        .query_row([old.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(storage)?
        .ok_or_else(|| Error::DecisionNotFound(old.to_string()))?;
    let new_plan = plan_of(tx, &new.to_string()).map_err(storage)?;
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
    // Would `old` be reachable from `new` through corrections and supersessions?
    let cycle: bool = tx
        .prepare_cached(REACHES)
        .map_err(storage)?
        .query_row([new.to_string(), old.to_string()], |r| r.get(0))
        .map_err(storage)?;
    if cycle {
        return Err(Error::Cycle(format!(
            "superseding {old} by {new} would form a cycle: {new} already leads back to {old}"
        )));
    }
    tx.prepare_cached("INSERT INTO supersessions (decision_id, superseded_by) VALUES (?1, ?2)")
        .map_err(storage)?
        .execute([old.to_string(), new.to_string()])
        .map_err(storage)?;
    Ok(true)
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
        self.write(|tx| {
            insert_row(tx, decision)?;
            if let Some(by) = decision.superseded_by() {
                link_supersession(tx, decision.decision_id(), by)?;
            }
            Ok(())
        })
    }

    /// Stores decisions in one transaction: all or nothing. Items may refer
    /// to earlier items of the same batch.
    ///
    /// # Errors
    /// [`Error::Batch`] with the index of the first failing item.
    pub fn insert_many<'a>(&mut self, decisions: impl IntoIterator<Item = &'a Decision>) -> Result<usize> {
        self.write(|tx| {
            let mut pending = Vec::new();
            let mut n = 0;
            for (index, d) in decisions.into_iter().enumerate() {
                insert_row(tx, d).map_err(|e| Error::Batch { index, source: Box::new(e) })?;
                if let Some(by) = d.superseded_by() {
                    pending.push((index, d.decision_id(), by));
                }
                n += 1;
            }
            // Links last: a decision may be superseded by a later item.
            for (index, old, new) in pending {
                link_supersession(tx, old, new).map_err(|e| Error::Batch { index, source: Box::new(e) })?;
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
        self.write(|tx| link_supersession(tx, old, new).map(|_| ()))
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
        let mut stmt = self.conn.prepare_cached(PLAN_ROWS).map_err(storage)?;
        let rows = stmt.query_map([plan.to_string()], from_row).map_err(storage)?;
        collect(rows)
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
        let mut stmt = self.conn.prepare_cached(sql).map_err(storage)?;
        let mut rows = match &arg {
            Some(a) => stmt.query([a]),
            None => stmt.query([]),
        }
        .map_err(storage)?;
        while let Some(row) = rows.next().map_err(storage)? {
            f(from_row(row).map_err(storage)??)?;
        }
        Ok(())
    }

    /// The plan's decision tree, rebuilt from its rows.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] when the plan has no decisions.
    pub fn decision_tree(&self, plan: PlanId) -> Result<DecisionTree> {
        let decisions = self.plan_decisions(plan)?;
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
        let plan = plan_of(&self.conn, &id.to_string())
            .map_err(storage)?
            .ok_or_else(|| Error::DecisionNotFound(id.to_string()))?;
        self.decision_tree(PlanId::parse(&plan)?)
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

    /// One summary row per plan, ordered by plan id.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn plans(&self) -> Result<Vec<PlanSummary>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "WITH RECURSIVE walk(id, plan_id, depth) AS (
                     SELECT decision_id, plan_id, 0 FROM decisions WHERE parent_decision_id IS NULL
                     UNION ALL
                     SELECT d.decision_id, d.plan_id, w.depth + 1 FROM decisions d JOIN walk w ON d.parent_decision_id = w.id
                 ),
                 depths AS (SELECT plan_id, max(depth) AS max_depth FROM walk GROUP BY plan_id)
                 SELECT d.plan_id, count(*), coalesce(depths.max_depth, 0),
                        count(d.corrects_decision_id), count(s.decision_id),
                        min(d.decision_id), max(d.decision_id)
                 FROM decisions d
                 LEFT JOIN supersessions s ON s.decision_id = d.decision_id
                 LEFT JOIN depths ON depths.plan_id = d.plan_id
                 GROUP BY d.plan_id ORDER BY d.plan_id",
            )
            .map_err(storage)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u64>(1)?,
                    r.get::<_, u64>(2)?,
                    r.get::<_, u64>(3)?,
                    r.get::<_, u64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(storage)?;
        let mut out = Vec::new();
        for row in rows {
            let (plan, decisions, max_depth, corrections, superseded, first, last) = row.map_err(storage)?;
            out.push(PlanSummary {
                plan_id: PlanId::parse(&plan)?,
                decisions,
                max_depth,
                corrections,
                superseded,
                first_ms: DecisionId::parse(&first)?.timestamp_ms(),
                last_ms: DecisionId::parse(&last)?.timestamp_ms(),
            });
        }
        Ok(out)
    }

    /// Counts of decisions by type, and of corrections and supersessions.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn decision_counts(&self) -> Result<DecisionCounts> {
        let mut by_type = std::collections::BTreeMap::new();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT decision_type, count(*) FROM decisions GROUP BY decision_type")
            .map_err(storage)?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u64>(1)?))).map_err(storage)? {
            let (t, n) = row.map_err(storage)?;
            by_type.insert(t.parse::<DecisionType>()?, n);
        }
        let (plans, corrections): (u64, u64) = self
            .conn
            .query_row("SELECT count(DISTINCT plan_id), count(corrects_decision_id) FROM decisions", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(storage)?;
        let supersessions: u64 =
            self.conn.query_row("SELECT count(*) FROM supersessions", [], |r| r.get(0)).map_err(storage)?;
        Ok(DecisionCounts { plans, decisions: by_type.values().sum(), corrections, supersessions, by_type })
    }
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
