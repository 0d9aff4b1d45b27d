//! Queries of the `decisions` and `supersessions` tables: decoding rows,
//! inserting a decision as the next entry of its plan's chain, linking a
//! supersession, and the kept counts and digests read back.
//!
//! Every write takes the transaction's [`Ledger`], which holds the log's
//! lock (see `ledger`); reads take any connection.

use serde::Serialize;

use super::integrity::{self, Anchor, AnchorScope};
use super::ledger::{kept_head, Ledger, LOG_LENGTH, RECENT};
use super::rows::{PreparedRow, RowText};
use crate::decision::{Decision, DecisionId, DecisionType, Details, IdMap, IdSet, PlanId};
use crate::error::{Error, Result};
use crate::hash;
use crate::store::engine::{vals, Conn, EngineError, Row, Stmt, ValueRef, WriteTx};

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
/// The order in which deferred rows go to the server (see `Conn::defer`):
/// a supersession refers to two decisions.
const DECISION_ROWS: u8 = 0;
const SUPERSESSION_ROWS: u8 = 1;
const INSERT_SUPERSESSION: &str = "INSERT INTO supersessions \
     (decision_id, superseded_by, plan_id, content_hash, chain_index, chain_hash, log_index) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

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

pub(crate) const DECISION_BY_ID: &str = concat!(select_decisions!(), " WHERE d.decision_id = ?1");
/// A plan's rows; their supersession links come from [`PLAN_LINKS`], as an outline's do.
pub(crate) const PLAN_ROWS: &str =
    concat!("SELECT ", decision_columns!(), " FROM decisions d WHERE d.plan_id = ?1 ORDER BY d.sequence");
/// The scalar columns of a plan's rows, for [`Store::decision_tree_outline`]:
/// in SQLite, all of them from the `decisions_outline` index (schema version
/// 8), without reading a row. Their supersession links come from [`PLAN_LINKS`].
pub(crate) const OUTLINE_ROWS: &str = "SELECT d.decision_id, d.parent_decision_id, d.sequence, d.decision_type, \
     d.chosen_option, d.confidence_score, d.corrects_decision_id \
     FROM decisions d WHERE d.plan_id = ?1 ORDER BY d.sequence";
/// The supersession links of a plan: one query for the few links instead
/// of a lookup for each of the many decisions.
pub(crate) const PLAN_LINKS: &str = "SELECT decision_id, superseded_by FROM supersessions WHERE plan_id = ?1";
pub(crate) const ALL_ROWS: &str = concat!(select_decisions!(), " ORDER BY d.plan_id, d.sequence");
/// Every decision row without its supersession link, in the order of the store's log.
const LOG_ROWS: &str = concat!("SELECT ", decision_columns!(), ", d.log_index FROM decisions d ORDER BY d.log_index");
/// What supersedes ?1, if anything.
pub(crate) const LINK_STORED: &str = "SELECT superseded_by FROM supersessions WHERE decision_id = ?1";
/// The decisions one step after ?1: the one that supersedes it, and those that correct it.
pub(crate) const NEXT_OF: &str = "SELECT superseded_by FROM supersessions WHERE decision_id = ?1 \
     UNION ALL SELECT decision_id FROM decisions WHERE corrects_decision_id = ?1";
/// Is ?2 reachable from ?1 through supersessions and corrections? (PostgreSQL: see [`reaches`].)
pub(crate) const REACHES_POSTGRES: &str = "WITH RECURSIVE succ(id) AS (
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
    /// The plan's smallest and largest sequence numbers.
    pub first_sequence: u64,
    pub last_sequence: u64,
    /// What the plan is for: its root prompt_definition's chosen option (its
    /// first [`GOAL_CHARS`] characters); `None` for a plan without one.
    pub goal: Option<String>,
}

/// The most characters of a plan's goal a summary carries.
pub const GOAL_CHARS: usize = 200;

impl PlanSummary {
    /// True when the plan's goal or id holds every word of `words`, in any case.
    pub fn matches(&self, words: &str) -> bool {
        let goal = self.goal.as_deref().unwrap_or("").to_lowercase();
        let id = self.plan_id.to_string().to_lowercase();
        words.split_whitespace().map(str::to_lowercase).all(|w| goal.contains(&w) || id.contains(&w))
    }
}

/// Where each column of a decision row is in a statement's result, found by
/// name once per statement (so the query's column order is free).
pub(crate) struct Cols {
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
    pub(super) fn of(row: &Row<'_>, plan: Option<PlanId>) -> Result<Cols> {
        let at = |name: &str| {
            row.column_index(name).ok_or_else(|| Error::storage(format!("the query has no column {name}")))
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
    pub(super) fn once<'c>(slot: &'c mut Option<Cols>, row: &Row<'_>, plan: Option<PlanId>) -> Result<&'c Cols> {
        match slot {
            Some(c) => Ok(c),
            None => Ok(slot.insert(Cols::of(row, plan)?)),
        }
    }
}

/// Reads a JSON text column without copying it, naming the column when it is not valid.
fn column_json<T: serde::de::DeserializeOwned>(row: &Row<'_>, idx: usize, name: &str) -> Result<T> {
    let text = row.str(idx)?;
    serde_json::from_str(text).map_err(|e| Error::storage(format!("column {name}: {e}")))
}

/// A text column holding an id (or NULL), parsed and named like any input's.
fn id_column<T>(row: &Row<'_>, idx: usize, field: &str, parse: fn(&str, &[u8]) -> Result<T>) -> Result<Option<T>> {
    row.opt_text(idx)?.map(|s| parse(field, s)).transpose()
}

/// Rebuilds a decision from a row of `SELECT`, validating it like any
/// input; a row that does not decode is [`Error::Corrupt`], named by its id.
pub(super) fn from_row(row: &Row<'_>, c: &Cols) -> Result<Decision> {
    decode(row, c).map_err(|e| {
        let key = row.opt_text(c.decision_id).ok().flatten().map(String::from_utf8_lossy);
        Error::Corrupt {
            table: "decisions",
            key: key.map_or_else(|| "(no id)".into(), |k| k.into_owned()),
            reason: e.to_string(),
        }
    })
}

fn decode(row: &Row<'_>, c: &Cols) -> Result<Decision> {
    let decision_type = match DecisionType::from_bytes(row.text(c.decision_type)?) {
        Some(t) => t,
        None => row.str(c.decision_type)?.parse::<DecisionType>()?, // names what is there
    };
    let decision_id = DecisionId::parse_text("decision_id", row.text(c.decision_id)?)?;
    let plan_id = match c.plan_id {
        PlanCol::Column(i) => PlanId::parse_text("plan_id", row.text(i)?)?,
        PlanCol::Known(plan) => plan,
    };
    let parent_decision_id = id_column(row, c.parent, "parent_decision_id", DecisionId::parse_text)?;
    let corrects_decision_id = id_column(row, c.corrects, "corrects_decision_id", DecisionId::parse_text)?;
    let superseded_by = match c.superseded_by {
        Some(idx) => id_column(row, idx, "superseded_by", DecisionId::parse_text)?,
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
                x.downstream_decision_ids.push(DecisionId::parse_field("downstream_decision_ids", &id)?);
            }
            for id in column_json::<Vec<String>>(row, f.downstream_plans, "downstream_plan_ids")? {
                x.downstream_plan_ids.push(PlanId::parse_field("downstream_plan_ids", &id)?);
            }
            x.boxed()
        }
    };
    let d = Decision {
        decision_id,
        plan_id,
        parent_decision_id,
        sequence: sequence(row.i64(c.sequence)?)?,
        decision_type,
        chosen_option: row.string(c.chosen_option)?,
        confidence_score: row.opt_f64(c.confidence)?,
        is_correction: corrects_decision_id.is_some(),
        corrects_decision_id,
        superseded_by,
        details,
    };
    d.check()?;
    Ok(d)
}

/// [`from_row`] of a query's row, its columns found at its first row.
pub(crate) fn decode_row(row: &Row<'_>, cols: &mut Option<Cols>) -> Result<Decision> {
    from_row(row, Cols::once(cols, row, None)?)
}

/// A stored sequence number, or the validation error of one out of range.
fn sequence(n: i64) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::validation("sequence", format!("{n} is out of range")))
}

/// Every decision a query for one plan returns, decoded with [`from_row`],
/// with the plan's supersession links.
pub(crate) fn rows_of_plan(conn: &Conn, sql: &str, plan_id: PlanId) -> Result<Vec<Decision>> {
    let plan = plan_id.to_string();
    let mut cols = None;
    // The kept count sizes the vector once: growing it moves every decision again.
    let kept = conn.query_opt("SELECT decisions FROM plans WHERE plan_id = ?1", vals![&plan], |r| r.i64(0))?;
    let mut decisions = Vec::with_capacity(kept.unwrap_or(0).clamp(0, 1 << 20) as usize);
    conn.for_each(sql, vals![&plan], |r| {
        decisions.push(from_row(r, Cols::once(&mut cols, r, Some(plan_id))?)?);
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
                bad.push((old.clone(), corrupt_link(&old, "a decision cannot supersede itself")));
            }
            (Ok(o), Ok(n)) => {
                links.insert(o, n);
            }
            (Err(e), _) | (_, Err(e)) => {
                let e = corrupt_link(&old, &e.to_string());
                bad.push((old, e));
            }
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

/// A supersession row that does not decode.
fn corrupt_link(old: &str, reason: &str) -> Error {
    Error::Corrupt { table: "supersessions", key: old.to_owned(), reason: reason.to_owned() }
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

/// The sequence that a new decision of `plan` gets: one more than the
/// plan's largest, 0 in a plan without decisions. Read it inside the write
/// that inserts the decision, so that no other writer takes it meanwhile.
pub(crate) fn next_sequence(tx: &WriteTx<'_>, plan: PlanId) -> Result<u32> {
    let last =
        tx.query_one("SELECT max(sequence) FROM decisions WHERE plan_id = ?1", vals![&plan.to_string()], |r| {
            r.opt_i64(0)
        })?;
    match last {
        None => Ok(0),
        Some(n) => u32::try_from(n + 1)
            .map_err(|_| Error::validation("sequence", format!("plan {plan} has used every sequence number"))),
    }
}

/// The ids of the decisions whose parent is `id` (in `plan`), in sequence order.
pub(crate) fn children_of(conn: &Conn, plan: PlanId, id: DecisionId) -> Result<Vec<DecisionId>> {
    conn.query_vec(
        "SELECT decision_id FROM decisions WHERE plan_id = ?1 AND parent_decision_id = ?2 ORDER BY sequence",
        vals![&plan.to_string(), &id.to_string()],
        |r| DecisionId::parse(r.str(0)?),
    )
}

/// Inserts one decision row (not its supersession link), after checking
/// that its parent and corrected decision are stored in its plan, as the
/// next entry of its plan's chain. Nothing changes when it fails.
pub(crate) fn insert_row(tx: &WriteTx<'_>, ledger: &mut Ledger, d: &Decision) -> Result<()> {
    // One row: the cached statement, not a fresh one.
    let mut insert =
        Inserter { insert: tx.prepare(insert_sql(tx))?, free: IdSet::default(), placed: Placed::default() };
    insert_prepared(tx, &mut insert, ledger, d, &PreparedRow::of(d))
}

/// The (plan, sequence) of the rows placed since the last look ahead.
type Placed = std::collections::HashSet<(PlanId, u32), rustc_hash::FxBuildHasher>;

/// The writer of a bulk write's decision rows (an import, `insert_many`,
/// a copy): hold it across the rows of a batch.
///
/// On SQLite each row is written at once (its texts bound without
/// copying them). On PostgreSQL, where a row costs a round trip, the rows
/// that [`Inserter::look_ahead`] found free go to the server together
/// ([`Conn::defer`]: one COPY before the next query or the commit); a row
/// that is not known to be free (a key already stored, a second row with
/// the same key, a row not looked at) is written on its own, as it would
/// be without batching, so its error is its own and names its line.
/// The hash chain does not change: rows are placed in the ledger in the
/// same order either way.
pub(crate) struct Inserter<'c> {
    insert: Stmt<'c>,
    /// Ids of the rows last looked ahead whose id and (plan, sequence) are
    /// stored nowhere yet: each may be deferred once.
    free: IdSet<DecisionId>,
    /// The (plan, sequence) of the rows placed since the look ahead.
    placed: Placed,
}

/// The most rows one look ahead lets be deferred.
const LOOK_AHEAD: usize = 4096;

/// The rows of a list (ids, plans, sequences; ?4 ordinals from 0) that
/// cannot be written because their id or their (plan, sequence) is taken.
/// Each key is looked up in its index: `OFFSET 0` keeps the planner, which
/// sees thousands of keys in the lists, from hashing every stored row
/// instead (a scan of the table per look ahead: an import slowed with its size).
const TAKEN_POSTGRES: &str =
    "SELECT x.n - 1 FROM unnest(CAST(?1 AS TEXT[]), CAST(?2 AS TEXT[]), CAST(?3 AS BIGINT[])) \
     WITH ORDINALITY AS x(id, plan, seq, n) \
     WHERE EXISTS (SELECT 1 FROM decisions d WHERE d.decision_id = x.id OFFSET 0) \
     OR EXISTS (SELECT 1 FROM decisions d WHERE d.plan_id = x.plan AND d.sequence = x.seq OFFSET 0)";

impl<'c> Inserter<'c> {
    pub(crate) fn new(tx: &'c Conn) -> Result<Inserter<'c>> {
        Ok(Inserter::with(tx.prepare_write(insert_sql(tx))?))
    }

    fn with(insert: Stmt<'c>) -> Inserter<'c> {
        Inserter { insert, free: IdSet::default(), placed: Placed::default() }
    }

    /// Looks at the rows about to be written (in the open transaction,
    /// whose ledger holds the log's lock, so no other writer adds one
    /// meanwhile): on PostgreSQL, one query finds which can be sent in a
    /// batch. Rows of an earlier look ahead are forgotten: call it once
    /// for each run of rows, inside the transaction that writes them.
    pub(crate) fn look_ahead<'d>(&mut self, tx: &WriteTx<'_>, rows: impl Iterator<Item = &'d Decision>) -> Result<()> {
        self.free.clear();
        self.placed.clear();
        if !tx.is_postgres() {
            return Ok(());
        }
        // Deferred rows must stay among the ledger's recent inserts (see
        // `Ledger::reference`, which looks up the others without sending them).
        const _: () = assert!(LOOK_AHEAD <= RECENT);
        let rows: Vec<&Decision> = rows.take(LOOK_AHEAD).collect();
        if rows.len() < 2 {
            return Ok(());
        }
        let ids: Vec<String> = rows.iter().map(|d| d.decision_id().to_string()).collect();
        let plans: Vec<String> = rows.iter().map(|d| d.plan_id().to_string()).collect();
        let sequences: Vec<i64> = rows.iter().map(|d| i64::from(d.sequence())).collect();
        let taken = tx.query_vec(TAKEN_POSTGRES, vals![&ids[..], &plans[..], &sequences[..]], |r| r.i64(0))?;
        let mut free = vec![true; rows.len()];
        for n in taken {
            if let Some(f) = usize::try_from(n).ok().and_then(|n| free.get_mut(n)) {
                *f = false;
            }
        }
        self.free.extend(rows.iter().zip(free).filter(|(_, f)| *f).map(|(d, _)| d.decision_id()));
        Ok(())
    }

    /// True when `d` may be sent in a batch; from then on its keys count as taken.
    fn take(&mut self, d: &Decision) -> bool {
        if self.free.is_empty() {
            // Nothing may be deferred (SQLite, a row not looked at): no key to keep.
            return false;
        }
        let deferrable = !self.placed.contains(&(d.plan_id(), d.sequence())) && self.free.remove(&d.decision_id());
        self.placed.insert((d.plan_id(), d.sequence()));
        deferrable
    }
}

fn insert_sql(tx: &Conn) -> &'static str {
    tx.dialect().pick(INSERT, INSERT_POSTGRES)
}

/// [`insert_row`] with the row's texts and hash computed already (by [`PreparedRow::of`] on `d`).
pub(crate) fn insert_prepared(
    tx: &WriteTx<'_>,
    insert: &mut Inserter<'_>,
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
    if ledger.keeps_rules() {
        check_place(tx, ledger, d)?;
    }
    let text = |which| row.get(which);
    tx.storable("chosen_option", d.chosen_option())?;
    tx.storable("rationale", d.rationale())?;
    let entry = ledger.next_entry(tx, d.plan_id(), &row.content)?;
    let mut chain_hex = [0; 64];
    let values = vals![
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
        hash::hex_into(&entry.chain_hash, &mut chain_hex),
        entry.log_index,
    ];
    if insert.take(d) {
        tx.defer(INSERT, DECISION_ROWS, values)?;
    } else {
        let inserted = insert.insert.execute_raw(values).map_err(|e| insert_error(d, e))?;
        if inserted == 0 {
            // PostgreSQL's ON CONFLICT DO NOTHING: which rule did it break?
            let taken =
                tx.query_opt("SELECT 1 FROM decisions WHERE decision_id = ?1", vals![text(RowText::Id)], |_| Ok(()))?;
            return Err(match taken {
                Some(()) => Error::DuplicateDecision(d.decision_id().to_string()),
                None => Error::DuplicateSequence { plan_id: d.plan_id().to_string(), sequence: d.sequence() },
            });
        }
    }
    ledger.decision_appended(d, &entry, depth);
    Ok(())
}

/// The plan model's rules for where a decision goes (`docs/interchange.md`,
/// "Shared semantics"), checked as it is inserted: a plan's one root is its
/// prompt_definition, which starts the plan; a correction targets the
/// decision that stands in its chain now. Errors name the field at fault.
fn check_place(tx: &WriteTx<'_>, ledger: &mut Ledger, d: &Decision) -> Result<()> {
    let plan = d.plan_id();
    if d.parent_decision_id().is_none() {
        let prompt = d.decision_type() == DecisionType::PromptDefinition;
        // A decision stored already (an import read twice) is the insert's to answer.
        let started = ledger.plan_entries(tx, plan)? > 0 && ledger.plan_of_stored(tx, d.decision_id())?.is_none();
        let refused = match (prompt, started) {
            (true, false) => None,
            (false, false) => Some((
                "plan_id",
                format!(
                    "no plan {plan} in this store: a plan starts with its prompt_definition, and a {} without a \
                     parent_decision_id would be a second kind of root",
                    d.decision_type()
                ),
            )),
            (false, true) => {
                Some(("parent_decision_id", format!("is required: plan {plan}'s one root is its prompt_definition")))
            }
            (true, true) => Some((
                "decision_type",
                format!(
                    "plan {plan} has its prompt_definition already, and a plan has one; a new prompt starts a new \
                     plan (a change of the goal is a user_intervention under the root)"
                ),
            )),
        };
        if let Some((field, reason)) = refused {
            return Err(Error::validation(field, reason));
        }
    }
    if let Some(target) = d.corrects_decision_id() {
        if let Some(by) = overturned_by(tx, ledger, target)?.filter(|by| *by != d.decision_id()) {
            let standing = standing_from(tx, ledger, by)?;
            return Err(Error::validation(
                "corrects_decision_id",
                format!("{target} was overturned by {by} already; correct the decision that stands now, {standing}"),
            ));
        }
    }
    Ok(())
}

/// The decision that overturned `id` (superseded or corrected it), stored
/// or written in this transaction; `None` while it stands.
fn overturned_by(tx: &Conn, ledger: &Ledger, id: DecisionId) -> Result<Option<DecisionId>> {
    if let Some(next) = ledger.next_written(id).next() {
        return Ok(Some(next));
    }
    if ledger.is_fresh(id) {
        // Inserted in this transaction: what the ledger knows of it is all there is.
        return Ok(None);
    }
    let mut next = None;
    tx.for_each_past_deferred(NEXT_OF, vals![&id.to_string()], |r| {
        let by = DecisionId::parse_field("decision_id", r.str(0)?)?;
        next = Some(next.map_or(by, |n: DecisionId| n.max(by)));
        Ok(())
    })?;
    Ok(next)
}

/// The decision that stands at the end of `id`'s chain of corrections and
/// supersessions (`id` itself when nothing overturned it).
fn standing_from(tx: &Conn, ledger: &Ledger, mut id: DecisionId) -> Result<DecisionId> {
    let mut seen = IdSet::default();
    while let Some(next) = overturned_by(tx, ledger, id)? {
        if !seen.insert(id) {
            break;
        }
        id = next;
    }
    Ok(id)
}

/// Reads one decision inside a transaction.
pub(crate) fn get_in(tx: &Conn, id: DecisionId) -> Result<Option<Decision>> {
    tx.query_opt(DECISION_BY_ID, vals![&id.to_string()], |r| from_row(r, &Cols::of(r, None)?))
}

/// Every decision in the order the store's log holds them, each with its
/// log index, without supersession links (they are entries of their own).
pub(crate) fn for_each_in_log_order(conn: &Conn, mut f: impl FnMut(i64, Decision) -> Result<()>) -> Result<()> {
    let (mut cols, log_index) = (None, 15);
    conn.for_each_streamed(LOG_ROWS, &[], |r| {
        f(r.opt_i64(log_index)?.unwrap_or(i64::MAX), from_row(r, Cols::once(&mut cols, r, None)?)?)
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
            Ok(d) => good.push(d),
            Err(e) => bad.push((id, e)),
        }
        Ok(())
    })?;
    bad.extend(link_plan(conn, plan, &mut good)?);
    Ok((good, bad))
}

/// Records "`old` was replaced by `new`" after checking both ends and cycles.
/// Returns false when the same link was already stored.
pub(crate) fn link_supersession(
    tx: &WriteTx<'_>,
    ledger: &mut Ledger,
    old: DecisionId,
    new: DecisionId,
) -> Result<bool> {
    // The rows of a bulk write may not be sent yet: the checks read the
    // ledger for what this transaction wrote, and the tables for the rest.
    let old_plan = ledger.plan_of_stored(tx, old)?.ok_or_else(|| Error::DecisionNotFound(old.to_string()))?;
    let new_plan = ledger.plan_of_stored(tx, new)?.ok_or_else(|| Error::MissingReference {
        field: "superseded_by",
        id: new.to_string(),
        plan_id: old_plan.to_string(),
    })?;
    if new_plan != old_plan {
        return Err(Error::CrossPlanReference {
            field: "superseded_by",
            id: new.to_string(),
            plan_id: old_plan.to_string(),
            other_plan: new_plan.to_string(),
        });
    }
    let current = match ledger.link_written(old) {
        Some(by) => Some(by.to_string()),
        None if ledger.is_fresh(old) => None,
        None => tx.query_opt_past_deferred(LINK_STORED, vals![&old.to_string()], |r| r.string(0))?,
    };
    match current {
        Some(by) if by == new.to_string() => return Ok(false),
        Some(by) => return Err(Error::AlreadySuperseded { id: old.to_string(), by }),
        None => {}
    }
    if ledger.keeps_rules() {
        if let Some(by) = overturned_by(tx, ledger, old)? {
            let standing = standing_from(tx, ledger, by)?;
            return Err(Error::validation(
                "decision_id",
                format!("{old} was corrected by {by}; supersede the decision that stands now, {standing}"),
            ));
        }
    }
    if old == new {
        return Err(Error::validation("superseded_by", "a decision cannot supersede itself"));
    }
    if reaches(tx, ledger, new, old)? {
        return Err(Error::Cycle(format!(
            "superseding {old} by {new} would form a cycle: {new} already leads back to {old}"
        )));
    }
    let (old_id, new_id, plan_id) = (old.to_string(), new.to_string(), old_plan.to_string());
    let content =
        integrity::supersession_hash(ValueRef::Text(&plan_id), ValueRef::Text(&old_id), ValueRef::Text(&new_id));
    let entry = ledger.next_entry(tx, old_plan, &content)?;
    let chain_hash = hash::to_hex(&entry.chain_hash);
    // Checked above, so it can wait for the rest of a bulk write's rows.
    tx.defer(
        INSERT_SUPERSESSION,
        SUPERSESSION_ROWS,
        vals![&old_id, &new_id, &plan_id, &hash::to_hex(&content), entry.chain_index, &chain_hash, entry.log_index],
    )?;
    ledger.supersession_appended(old_plan, old, new, &entry);
    Ok(true)
}

/// Is `to` reachable from `from` through supersessions and corrections?
fn reaches(tx: &Conn, ledger: &Ledger, from: DecisionId, to: DecisionId) -> Result<bool> {
    let deferred = tx.has_deferred();
    if tx.is_postgres() && !deferred {
        // One recursive query: a round trip per step would cost more than the query.
        return tx.query_one(REACHES_POSTGRES, vals![&from.to_string(), &to.to_string()], |r| r.bool(0));
    }
    // Else a walk, one point query per decision reached (in an import
    // usually one: the superseding decision was just stored); on SQLite a
    // recursive query opened a temporary table for its UNION at every
    // call: 30 us a link, 3 % of an import's writer thread. On PostgreSQL
    // with rows of a bulk write not yet sent, the walk reads the tables
    // without sending them and the ledger for what they hold.
    // Texts, as the rows hold them: a walk compares what is stored, as the query did.
    let to = to.to_string();
    let mut seen = std::collections::HashSet::new();
    let mut next = vec![from.to_string()];
    while let Some(id) = next.pop() {
        if id == to {
            return Ok(true);
        }
        if !seen.contains(&id) {
            // What the ledger knows of a decision inserted in this transaction is all there is.
            let written = if deferred { Some(DecisionId::parse_field("decision_id", &id)?) } else { None };
            if !written.is_some_and(|w| ledger.is_fresh(w)) {
                tx.for_each_past_deferred(NEXT_OF, vals![&id], |r| {
                    next.push(r.string(0)?);
                    Ok(())
                })?;
            }
            if let Some(w) = written {
                next.extend(ledger.next_written(w).map(|d| d.to_string()));
            }
            seen.insert(id);
        }
    }
    Ok(false)
}

/// The columns of a plan's summary, from its kept row (the sequences from
/// the (plan_id, sequence) index: two seeks a plan).
const PLAN_SUMMARY: &str = "SELECT plan_id, decisions, max_depth, corrections, superseded, first_decision_id,
        last_decision_id,
        (SELECT min(sequence) FROM decisions d WHERE d.plan_id = p.plan_id),
        (SELECT max(sequence) FROM decisions d WHERE d.plan_id = p.plan_id),
        (SELECT substr(chosen_option, 1, 200) FROM decisions d
          WHERE d.plan_id = p.plan_id AND d.decision_type = 'prompt_definition' AND d.parent_decision_id IS NULL
          ORDER BY d.sequence LIMIT 1)
 FROM plans p";

/// Up to `?2` decision ids that start with `?1` (ids are upper-case
/// Crockford base32, all below `a` in byte order), in id order.
const DECISIONS_FROM: &str =
    "SELECT decision_id FROM decisions WHERE decision_id >= ?1 AND decision_id < ?1 || 'a' ORDER BY decision_id LIMIT ?2";
/// Up to `?2` plan ids that start with `?1`.
const PLANS_FROM: &str =
    "SELECT plan_id FROM plans WHERE plan_id >= ?1 AND plan_id < ?1 || 'a' ORDER BY plan_id LIMIT ?2";
/// The decision of plan ?1 at sequence ?2.
const AT_SEQUENCE: &str = "SELECT decision_id FROM decisions WHERE plan_id = ?1 AND sequence = ?2";

/// Up to `limit` decision ids (or plan ids, with `plans`) that start with `prefix`.
pub(crate) fn ids_from(conn: &Conn, prefix: &str, plans: bool, limit: i64) -> Result<Vec<String>> {
    conn.query_vec(if plans { PLANS_FROM } else { DECISIONS_FROM }, vals![prefix, limit], |r| r.string(0))
}

/// The decision of `plan` at `sequence`, if any.
pub(crate) fn at_sequence(conn: &Conn, plan: PlanId, sequence: u32) -> Result<Option<String>> {
    conn.query_opt(AT_SEQUENCE, vals![&plan.to_string(), sequence], |r| r.string(0))
}

/// One summary row per plan, ordered by plan id, from the kept counts.
pub(crate) fn plan_summaries(conn: &Conn) -> Result<Vec<PlanSummary>> {
    conn.query_vec(&format!("{PLAN_SUMMARY} ORDER BY plan_id"), &[], plan_summary)
}

/// One plan's summary, `None` when the store holds no decision of it.
pub(crate) fn plan_summary_of(conn: &Conn, plan: PlanId) -> Result<Option<PlanSummary>> {
    conn.query_opt(&format!("{PLAN_SUMMARY} WHERE plan_id = ?1"), vals![plan.to_string().as_str()], plan_summary)
}

/// A plan's summary from a row of [`PLAN_SUMMARY`].
fn plan_summary(r: &Row<'_>) -> Result<PlanSummary> {
    let plan = r.str(0)?;
    let summary = || -> Result<PlanSummary> {
        Ok(PlanSummary {
            plan_id: PlanId::parse(plan)?,
            decisions: count(r, 1)?,
            max_depth: count(r, 2)?,
            corrections: count(r, 3)?,
            superseded: count(r, 4)?,
            first_ms: DecisionId::parse(r.str(5)?)?.timestamp_ms(),
            last_ms: DecisionId::parse(r.str(6)?)?.timestamp_ms(),
            first_sequence: count(r, 7)?,
            last_sequence: count(r, 8)?,
            goal: r.opt_string(9)?,
        })
    };
    summary().map_err(|e| Error::Corrupt { table: "plans", key: plan.to_owned(), reason: e.to_string() })
}

/// Each plan's decisions by type.
pub type PlanTypeCounts = std::collections::BTreeMap<PlanId, std::collections::BTreeMap<DecisionType, u64>>;

/// Each plan's decisions counted by type (one grouped scan of the decisions).
pub(crate) fn plan_type_counts(conn: &Conn) -> Result<PlanTypeCounts> {
    let mut out = PlanTypeCounts::new();
    conn.for_each(
        "SELECT plan_id, decision_type, count(*) FROM decisions GROUP BY plan_id, decision_type",
        &[],
        |r| {
            let (plan, t) = (r.str(0)?, r.str(1)?);
            let bad =
                |e: Error| Error::Corrupt { table: "decisions", key: format!("{plan} {t}"), reason: e.to_string() };
            let plan = PlanId::parse(plan).map_err(bad)?;
            out.entry(plan).or_default().insert(t.parse::<DecisionType>().map_err(bad)?, count(r, 2).map_err(bad)?);
            Ok(())
        },
    )?;
    Ok(out)
}

/// Counts of decisions by type, and of corrections and supersessions, from
/// the kept counts; run it in one read transaction.
pub(crate) fn decision_counts(conn: &Conn) -> Result<DecisionCounts> {
    let mut by_type = std::collections::BTreeMap::new();
    conn.for_each("SELECT decision_type, decisions FROM decision_type_counts WHERE decisions > 0", &[], |r| {
        let t = r.str(0)?;
        let bad = |e: Error| Error::Corrupt { table: "decision_type_counts", key: t.to_owned(), reason: e.to_string() };
        by_type.insert(t.parse::<DecisionType>().map_err(bad)?, count(r, 1).map_err(bad)?);
        Ok(())
    })?;
    // PostgreSQL's sum of BIGINT is NUMERIC: cast it back.
    let (plans, corrections, supersessions) = conn.query_one(
        "SELECT count(*), CAST(coalesce(sum(corrections), 0) AS BIGINT), \
         CAST(coalesce(sum(superseded), 0) AS BIGINT) FROM plans",
        &[],
        |r| Ok((count(r, 0)?, count(r, 1)?, count(r, 2)?)),
    )?;
    Ok(DecisionCounts { plans, decisions: by_type.values().sum(), corrections, supersessions, by_type })
}

/// The digest of every plan and of the store, from the kept chain heads;
/// run it in one read transaction.
pub(crate) fn digest(conn: &Conn) -> Result<Digest> {
    let plans = conn.query_vec("SELECT plan_id, entries, head_hash FROM plans ORDER BY plan_id", &[], |r| {
        let plan = r.string(0)?;
        let hash = kept_head(&plan, r.str(2)?)?;
        let entries =
            count(r, 1).map_err(|e| Error::Corrupt { table: "plans", key: plan.clone(), reason: e.to_string() })?;
        Ok(Anchor { scope: AnchorScope::Plan(plan), entries, hash })
    })?;
    let entries = conn.query_one(LOG_LENGTH, &[], |r| count(r, 0))?;
    let hash = integrity::store_digest(plans.iter().map(|a| match &a.scope {
        AnchorScope::Plan(p) => (p.as_str(), a.entries, &a.hash),
        AnchorScope::Store => unreachable!("plan anchors only"),
    }));
    Ok(Digest { store: Anchor { scope: AnchorScope::Store, entries, hash }, plans })
}

/// A count column (kept or `count(*)`); a negative one is a validation
/// error of the count, which callers name as the row's.
pub(crate) fn count(r: &Row<'_>, i: usize) -> Result<u64> {
    let n = r.i64(i)?;
    u64::try_from(n).map_err(|_| Error::validation("count", format!("{n} is negative")))
}

/// What [`crate::Store::digest`] returns: one anchor for the store, one per plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    pub store: Anchor,
    /// In plan id order.
    pub plans: Vec<Anchor>,
}

/// Totals of [`crate::Store::decision_counts`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionCounts {
    pub plans: u64,
    pub decisions: u64,
    pub corrections: u64,
    pub supersessions: u64,
    pub by_type: std::collections::BTreeMap<DecisionType, u64>,
}
