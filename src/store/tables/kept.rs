//! Staleness and calibration kept, not recomputed (schema version 12).
//!
//! A decision is *stale* when a resource its snapshot recorded has another
//! version in the graph now, or is gone from it; it is a *source* of risk
//! while it is stale and effective; a decision is *at risk* when a source
//! other than itself reaches it down the tree or through
//! `downstream_decision_ids` (`crate::stale`). Three tables keep that:
//!
//! - `snapshot_refs`: each recorded resource, by URI, with the version
//!   recorded and whether it moved: what a node's change has to look at;
//! - `risk`: a row for each decision that is stale or at risk (and each
//!   downstream id, stored or not, that a risky decision names): how many
//!   of its resources moved, whether it stands, and its *support*, the
//!   number of its risky predecessors (its parent, and the decisions that
//!   name it downstream). At risk is support > 0, exact on a graph without
//!   cycles; a store whose downstream links can close a cycle (a link to a
//!   decision stored before its source) has each lost support checked by a
//!   walk up to a source;
//! - `plan_risk`: per plan, how many decisions are stale and at risk,
//!   standing or overturned (plan `''`: the ids not stored).
//!
//! `calibration_sums` keeps, per plan (and `*` for the store), type and
//! confidence bin, the integer sums that calibration's figures come from.
//!
//! Every write that changes decisions or nodes updates them in its own
//! transaction: a decision write through the ledger ([`Event`]s applied by
//! [`Kept::apply`] before the ledger's flush), a node write through
//! [`nodes_changed`]. [`rebuild`] computes them from the rows (an upgrade),
//! and `check` compares them with a computation of its own.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::decision::{Decision, DecisionId, DecisionType, PlanId};
use crate::error::{Error, Result};
use crate::store::engine::{vals, Conn, Row, WriteTx};

/// Confidence is summed in integer units of 1e-5: sums are exact whatever
/// the order, on SQLite and PostgreSQL alike (a square fits 10^10; a group
/// of 9 * 10^8 decisions fits an i64).
pub const CONFIDENCE_UNIT: f64 = 1e-5;

/// A confidence in [`CONFIDENCE_UNIT`]s.
pub(crate) fn units(c: f64) -> i64 {
    (c / CONFIDENCE_UNIT).round() as i64
}

/// The calibration bin of a confidence: `0..BINS`, or -1 for none.
pub(crate) fn bin(c: Option<f64>) -> i64 {
    match c {
        None => -1,
        Some(c) => {
            ((c * crate::calibration::BINS as f64).floor().max(0.0) as i64).min(crate::calibration::BINS as i64 - 1)
        }
    }
}

/// What the kept state needs of an inserted decision.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    pub(crate) id: DecisionId,
    pub(crate) plan: PlanId,
    pub(crate) sequence: u32,
    pub(crate) decision_type: DecisionType,
    pub(crate) confidence: Option<f64>,
    pub(crate) parent: Option<DecisionId>,
    pub(crate) corrects: Option<DecisionId>,
    pub(crate) downstream: Vec<DecisionId>,
    /// (URI, recorded version), in the snapshot's order.
    pub(crate) resources: Vec<(String, Option<String>)>,
    pub(crate) log_index: i64,
}

impl Facts {
    pub(crate) fn of(d: &Decision, log_index: i64) -> Facts {
        let resources: Vec<(String, Option<String>)> = d
            .context_snapshot()
            .resources()
            .iter()
            .map(|r| (r.resource_id().to_owned(), r.version().map(str::to_owned)))
            .collect();
        let mut downstream: Vec<DecisionId> = Vec::new();
        for &x in d.downstream_decision_ids() {
            if x != d.decision_id() && !downstream.contains(&x) {
                downstream.push(x);
            }
        }
        Facts {
            id: d.decision_id(),
            plan: d.plan_id(),
            sequence: d.sequence(),
            decision_type: d.decision_type(),
            confidence: d.confidence_score(),
            parent: d.parent_decision_id(),
            corrects: d.corrects_decision_id(),
            downstream,
            resources,
            log_index,
        }
    }
}

/// An entry of the log, as the kept state sees it.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    Insert(Box<Facts>),
    /// A supersession: `id` no longer stands, from this entry on.
    Supersede {
        id: DecisionId,
        log_index: i64,
    },
}

/// A decision's kept risk state (a row of `risk`, or none when it is all zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Risk {
    /// `None` for an id no stored decision has (yet).
    pub(crate) plan: Option<PlanId>,
    pub(crate) sequence: i64,
    pub(crate) effective: bool,
    pub(crate) moved: i64,
    pub(crate) support: i64,
}

impl Risk {
    fn source(&self) -> bool {
        self.moved > 0 && self.effective
    }
    fn risky(&self) -> bool {
        self.source() || self.support > 0
    }
    fn is_empty(&self) -> bool {
        self.moved == 0 && self.support == 0
    }
    /// Its column of `plan_risk`, with its plan.
    fn category(&self) -> Option<(String, usize)> {
        if self.is_empty() {
            return None;
        }
        let plan = self.plan.map(|p| p.to_string()).unwrap_or_default();
        let column = match (self.moved > 0, self.effective, self.plan.is_some()) {
            (_, _, false) => AT_RISK,
            (true, true, _) => STALE,
            (true, false, _) => STALE_OVERTURNED,
            (false, true, _) => AT_RISK,
            (false, false, _) => AT_RISK_OVERTURNED,
        };
        Some((plan, column))
    }
}

const STALE: usize = 0;
const STALE_OVERTURNED: usize = 1;
const AT_RISK: usize = 2;
const AT_RISK_OVERTURNED: usize = 3;

/// Sums of one (plan, type, bin) of `calibration_sums`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CalSums {
    pub(crate) decisions: i64,
    pub(crate) held: i64,
    pub(crate) confidence: i64,
    pub(crate) squares: i64,
    pub(crate) held_confidence: i64,
}

impl CalSums {
    pub(crate) fn add(&mut self, o: &CalSums) {
        self.decisions += o.decisions;
        self.held += o.held;
        self.confidence += o.confidence;
        self.squares += o.squares;
        self.held_confidence += o.held_confidence;
    }
    /// One decision, held or not.
    pub(crate) fn one(confidence: Option<f64>, held: bool) -> CalSums {
        let q = confidence.map_or(0, units);
        let h = i64::from(held);
        CalSums { decisions: 1, held: h, confidence: q, squares: q * q, held_confidence: q * h }
    }
    fn negated(self) -> CalSums {
        CalSums {
            decisions: -self.decisions,
            held: -self.held,
            confidence: -self.confidence,
            squares: -self.squares,
            held_confidence: -self.held_confidence,
        }
    }
    fn is_zero(&self) -> bool {
        *self == CalSums::default()
    }
}

/// The plan of `calibration_sums`' rows of the whole store.
pub(crate) const STORE: &str = "*";

/// A key of `calibration_sums`: plan ([`STORE`] for the store), type, bin.
pub(crate) type CalKey = (String, DecisionType, i64);

/// The row of `risk` of one decision, and what it was when loaded.
struct Slot {
    /// As stored; `None`: no row.
    stored: Option<Risk>,
    now: Risk,
    /// `now.plan`, `sequence` and `effective` hold the decision's (a row
    /// made here for a decision that had none learns them on demand).
    described: bool,
}

const RISK_ROW: &str = "SELECT plan_id, sequence, effective, moved, support FROM risk WHERE decision_id = ?1";
const RISK_ROWS: &str =
    "SELECT decision_id, plan_id, sequence, effective, moved, support FROM risk WHERE decision_id IN rarray(?1)";
const UPSERT_RISK: &str = "INSERT INTO risk (decision_id, plan_id, sequence, effective, moved, support) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (decision_id) DO UPDATE SET plan_id = excluded.plan_id, \
     sequence = excluded.sequence, effective = excluded.effective, moved = excluded.moved, support = excluded.support";
const DELETE_RISK: &str = "DELETE FROM risk WHERE decision_id = ?1";
/// A decision's place, when it was written (its log index), if stored.
const PLACE: &str = "SELECT plan_id, sequence, log_index FROM decisions WHERE decision_id = ?1";
/// Whether an entry before log index ?2 overturned decision ?1.
const OVERTURNED_BEFORE: &str = "SELECT CASE WHEN EXISTS (SELECT 1 FROM decisions \
     WHERE corrects_decision_id = ?1 AND log_index < ?2) OR EXISTS (SELECT 1 FROM supersessions \
     WHERE decision_id = ?1 AND log_index < ?2) THEN 1 ELSE 0 END";
const CHILDREN: &str =
    "SELECT decision_id FROM decisions WHERE parent_decision_id = ?1 AND log_index <= ?2 ORDER BY log_index";
const DOWNSTREAM: &str = "SELECT downstream_decision_ids FROM decisions WHERE decision_id = ?1";
const NAMED_BY: &str = "SELECT source FROM downstream_refs WHERE target = ?1";
const PARENT: &str = "SELECT parent_decision_id, log_index FROM decisions WHERE decision_id = ?1";
const CALIBRATION_OF: &str = "SELECT plan_id, decision_type, confidence_score FROM decisions WHERE decision_id = ?1";
const INSERT_REF: &str = "INSERT INTO snapshot_refs (resource, decision_id, position, recorded_version, moved) \
     VALUES (?1, ?2, ?3, ?4, ?5)";
const INSERT_DOWNSTREAM_REF: &str =
    "INSERT INTO downstream_refs (target, source) VALUES (?1, ?2) ON CONFLICT (target, source) DO NOTHING";
const REFS_OF: &str = "SELECT resource, decision_id, position, recorded_version, moved FROM snapshot_refs \
     WHERE resource IN rarray(?1)";
const SET_MOVED: &str =
    "UPDATE snapshot_refs SET moved = ?4 WHERE resource = ?1 AND decision_id = ?2 AND position = ?3";
const VERSIONS: &str = "SELECT uri, current_version FROM uko_nodes WHERE uri IN rarray(?1)";
const COUNT_PLAN: &str = "INSERT INTO plan_risk \
     (plan_id, stale, stale_overturned, at_risk, at_risk_overturned, resources) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (plan_id) DO UPDATE SET stale = plan_risk.stale + excluded.stale, \
     resources = plan_risk.resources + excluded.resources, \
     stale_overturned = plan_risk.stale_overturned + excluded.stale_overturned, \
     at_risk = plan_risk.at_risk + excluded.at_risk, \
     at_risk_overturned = plan_risk.at_risk_overturned + excluded.at_risk_overturned";
const ADD_CALIBRATION: &str = "INSERT INTO calibration_sums \
     (plan_id, decision_type, bin, decisions, held, confidence, squares, held_confidence) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (plan_id, decision_type, bin) DO UPDATE SET \
     decisions = calibration_sums.decisions + excluded.decisions, held = calibration_sums.held + excluded.held, \
     confidence = calibration_sums.confidence + excluded.confidence, \
     squares = calibration_sums.squares + excluded.squares, \
     held_confidence = calibration_sums.held_confidence + excluded.held_confidence";
const ADD_BACKWARD: &str = "UPDATE kept_state SET backward_links = backward_links + ?1 WHERE id = 1";
const STATE: &str = "SELECT built, backward_links FROM kept_state WHERE id = 1";

/// Whether the kept state has been built (an upgrade builds it at its first
/// writable open), and how many downstream links point back in the log.
pub(crate) fn state(conn: &Conn) -> Result<(bool, i64)> {
    conn.query_one(STATE, &[], |r| Ok((r.i64(0)? != 0, r.i64(1)?)))
}

/// [`Error::Storage`] unless the kept state is built.
pub(crate) fn ensure_built(conn: &Conn) -> Result<()> {
    if state(conn)?.0 {
        return Ok(());
    }
    Err(Error::storage(
        "this store's kept staleness is not built yet: open it for writing once (dstore init) to build it",
    ))
}

fn risk_of(r: &Row<'_>, at: usize) -> Result<Risk> {
    Ok(Risk {
        plan: r.opt_str(at)?.filter(|p| !p.is_empty()).map(|p| PlanId::parse_field("plan_id", p)).transpose()?,
        sequence: r.opt_i64(at + 1)?.unwrap_or(0),
        effective: r.i64(at + 2)? != 0,
        moved: r.i64(at + 3)?,
        support: r.i64(at + 4)?,
    })
}

/// The changes of one write transaction to the kept state, applied as
/// they come, written by [`Kept::flush`].
pub(crate) struct Kept {
    rows: FxHashMap<DecisionId, Slot>,
    /// Entries with a log index up to this one are the store's so far.
    at: i64,
    cal: FxHashMap<CalKey, CalSums>,
    /// Decisions of this transaction: (plan, type, confidence), for an overturn.
    inserted: FxHashMap<DecisionId, (PlanId, DecisionType, Option<f64>)>,
    backward: i64,
    /// The store had backward links before this transaction.
    cyclic: bool,
    /// Decisions whose support fell and stays above zero (checked when cyclic).
    verify: Vec<DecisionId>,
    /// Resources recorded by the decisions inserted, per plan.
    resources: FxHashMap<String, i64>,
}

impl Kept {
    pub(crate) fn new(conn: &Conn) -> Result<Kept> {
        let (_, backward) = state(conn)?;
        Ok(Kept {
            rows: FxHashMap::default(),
            at: i64::MAX,
            cal: FxHashMap::default(),
            inserted: FxHashMap::default(),
            backward: 0,
            cyclic: backward > 0,
            verify: Vec::new(),
            resources: FxHashMap::default(),
        })
    }

    /// Applies `events` (a transaction's entries, in log order), then writes.
    pub(crate) fn apply(tx: &WriteTx<'_>, events: Vec<Event>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut kept = Kept::new(tx)?;
        kept.preload(tx, &events)?;
        kept.apply_events(tx, events)?;
        kept.flush(tx)
    }

    fn apply_events(&mut self, tx: &Conn, events: Vec<Event>) -> Result<()> {
        // The node versions of every resource recorded, in one query.
        let uris: Vec<String> = {
            let mut seen = FxHashSet::default();
            events
                .iter()
                .filter_map(|e| match e {
                    Event::Insert(f) => Some(f.resources.iter().map(|(u, _)| u)),
                    Event::Supersede { .. } => None,
                })
                .flatten()
                .filter(|u| seen.insert(u.as_str()))
                .cloned()
                .collect()
        };
        let versions = current_versions(tx, &uris)?;
        for e in events {
            match e {
                Event::Insert(f) => self.insert(tx, &f, &versions)?,
                Event::Supersede { id, log_index } => {
                    self.at = log_index;
                    self.overturn(tx, id, log_index)?;
                }
            }
        }
        self.at = i64::MAX;
        self.settle(tx)
    }

    /// Loads the rows of the events' decisions and their parents in one
    /// query; those without one are known to be empty.
    fn preload(&mut self, tx: &Conn, events: &[Event]) -> Result<()> {
        let mut ids: Vec<String> = Vec::new();
        let mut wanted: Vec<DecisionId> = Vec::new();
        for e in events {
            let (a, b) = match e {
                Event::Insert(f) => (Some(f.id), f.parent),
                Event::Supersede { id, .. } => (Some(*id), None),
            };
            for x in [a, b].into_iter().flatten() {
                if !self.rows.contains_key(&x) && !wanted.contains(&x) {
                    wanted.push(x);
                    ids.push(x.to_string());
                }
            }
        }
        let mut found: FxHashMap<DecisionId, Risk> = FxHashMap::default();
        for chunk in ids.chunks(4096) {
            tx.for_each(RISK_ROWS, vals![chunk], |r| {
                found.insert(DecisionId::parse_field("decision_id", r.str(0)?)?, risk_of(r, 1)?);
                Ok(())
            })?;
        }
        for x in wanted {
            let stored = found.remove(&x);
            let described = stored.is_some();
            self.rows.insert(x, Slot { stored, now: stored.unwrap_or_default(), described });
        }
        Ok(())
    }

    /// The slot of `id`, loaded when first asked for.
    fn slot(&mut self, tx: &Conn, id: DecisionId) -> Result<&mut Slot> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.rows.entry(id) {
            let stored = tx.query_opt(RISK_ROW, vals![&id.to_string()], |r| risk_of(r, 0))?;
            slot.insert(Slot { stored, now: stored.unwrap_or_default(), described: stored.is_some() });
        }
        Ok(self.rows.get_mut(&id).expect("inserted above"))
    }

    fn peek(&mut self, tx: &Conn, id: DecisionId) -> Result<Risk> {
        Ok(self.slot(tx, id)?.now)
    }

    /// Fills in the place and standing of `id`'s row when it has none yet:
    /// a decision stored (up to [`Kept::at`]) gets its plan, sequence and
    /// whether it stands; any other id stays unstored.
    fn describe(&mut self, tx: &Conn, id: DecisionId) -> Result<()> {
        if self.slot(tx, id)?.described {
            return Ok(());
        }
        let at = self.at;
        let place = tx.query_opt(PLACE, vals![&id.to_string()], |r| Ok((r.string(0)?, r.i64(1)?, r.i64(2)?)))?;
        let (plan, sequence, effective) = match place {
            Some((plan, sequence, log)) if log <= at => {
                let over = overturned_before(tx, id, at.saturating_add(1))?;
                (Some(PlanId::parse_field("plan_id", &plan)?), sequence, !over)
            }
            _ => (None, 0, true),
        };
        let slot = self.rows.get_mut(&id).expect("loaded above");
        slot.now.plan = plan;
        slot.now.sequence = sequence;
        slot.now.effective = effective;
        slot.described = true;
        Ok(())
    }

    /// Changes `id`'s row by `f`; when whether it is risky changes, its
    /// successors' support follows (and theirs, and so on).
    fn change(&mut self, tx: &Conn, id: DecisionId, f: impl FnOnce(&mut Risk)) -> Result<()> {
        self.describe(tx, id)?;
        let cyclic = self.cyclic_now();
        let slot = self.rows.get_mut(&id).expect("described");
        let (before, was_source, had) = (slot.now.risky(), slot.now.source(), slot.now.support);
        f(&mut slot.now);
        let after = slot.now.risky();
        if before != after {
            self.propagate(tx, id, if after { 1 } else { -1 })?;
        } else if after && !slot.now.source() && (was_source || slot.now.support < had) && cyclic {
            // Risky now only by a support that fell or that it leans on alone,
            // which a cycle through it may give.
            self.verify.push(id);
        }
        Ok(())
    }

    /// Adds `delta` to the support of each successor of `from`, and so on
    /// down while a decision's riskiness changes.
    fn propagate(&mut self, tx: &Conn, from: DecisionId, delta: i64) -> Result<()> {
        let mut work: Vec<(DecisionId, i64)> = vec![(from, delta)];
        while let Some((x, d)) = work.pop() {
            for y in self.successors(tx, x)? {
                self.describe(tx, y)?;
                let slot = self.rows.get_mut(&y).expect("described");
                let before = slot.now.risky();
                slot.now.support += d;
                debug_assert!(slot.now.support >= 0, "support of {y} below zero");
                let after = slot.now.risky();
                if before != after {
                    work.push((y, d));
                } else if d < 0 && after && !slot.now.source() && self.cyclic_now() {
                    self.verify.push(y);
                }
            }
        }
        Ok(())
    }

    fn cyclic_now(&self) -> bool {
        self.cyclic || self.backward > 0
    }

    /// The decisions `x` leads to that the store holds so far: its
    /// children stored up to [`Kept::at`], and the ids it names downstream
    /// (stored or not). An id not stored so far leads nowhere yet.
    fn successors(&mut self, tx: &Conn, x: DecisionId) -> Result<Vec<DecisionId>> {
        self.describe(tx, x)?;
        if self.rows[&x].now.plan.is_none() {
            return Ok(Vec::new());
        }
        let id = x.to_string();
        let mut out =
            tx.query_vec(CHILDREN, vals![&id, self.at], |r| DecisionId::parse_field("decision_id", r.str(0)?))?;
        let named: Vec<DecisionId> = tx
            .query_opt(DOWNSTREAM, vals![&id], |r| {
                serde_json::from_str::<Vec<DecisionId>>(r.str(0)?).map_err(|e| Error::Corrupt {
                    table: "decisions",
                    key: id.clone(),
                    reason: format!("downstream_decision_ids: {e}"),
                })
            })?
            .unwrap_or_default();
        for y in named {
            if y != x && !out.contains(&y) {
                out.push(y);
            }
        }
        Ok(out)
    }

    /// The decisions that lead to `x`: its parent and those that name it
    /// downstream, stored up to [`Kept::at`].
    fn predecessors(&mut self, tx: &Conn, x: DecisionId) -> Result<Vec<DecisionId>> {
        let id = x.to_string();
        let mut out = Vec::new();
        if let Some((Some(p), log)) = tx.query_opt(PARENT, vals![&id], |r| Ok((r.opt_string(0)?, r.i64(1)?)))? {
            if log <= self.at {
                out.push(DecisionId::parse_field("parent_decision_id", &p)?);
            }
        }
        for q in tx.query_vec(NAMED_BY, vals![&id], |r| DecisionId::parse_field("source", r.str(0)?))? {
            if q != x && !out.contains(&q) {
                out.push(q);
            }
        }
        Ok(out)
    }

    fn insert(&mut self, tx: &Conn, f: &Facts, versions: &FxHashMap<String, String>) -> Result<()> {
        self.at = f.log_index;
        let id = f.id.to_string();
        let mut moved = 0;
        for (position, (uri, recorded)) in f.resources.iter().enumerate() {
            let m = moves(recorded.as_deref(), versions.get(uri).map(String::as_str));
            moved += i64::from(m);
            tx.execute(INSERT_REF, vals![uri.as_str(), &id, position as i64, recorded.as_deref(), i64::from(m)])?;
        }
        *self.resources.entry(f.plan.to_string()).or_default() += f.resources.len() as i64;
        // Its row may hold support already: risky decisions named it downstream before it was stored.
        self.slot(tx, f.id)?;
        let parent_risky = match f.parent {
            Some(p) => self.peek(tx, p)?.risky(),
            None => false,
        };
        let slot = self.rows.get_mut(&f.id).expect("loaded above");
        slot.now.plan = Some(f.plan);
        slot.now.sequence = i64::from(f.sequence);
        slot.now.effective = true;
        slot.now.moved = moved;
        slot.now.support += i64::from(parent_risky);
        slot.described = true;
        let risky = slot.now.risky();
        for &x in &f.downstream {
            tx.execute(INSERT_DOWNSTREAM_REF, vals![&x.to_string(), &id])?;
            // A link to a decision stored before this one can close a cycle.
            let earlier = match tx.query_opt(PLACE, vals![&x.to_string()], |r| r.i64(2))? {
                Some(log) => log < f.log_index,
                None => false,
            };
            self.backward += i64::from(earlier);
            if risky {
                self.change(tx, x, |r| r.support += 1)?;
            }
        }
        self.inserted.insert(f.id, (f.plan, f.decision_type, f.confidence));
        self.add_cal(f.plan, f.decision_type, f.confidence, CalSums::one(f.confidence, true));
        if let Some(c) = f.corrects {
            self.overturn(tx, c, f.log_index)?;
        }
        Ok(())
    }

    /// `id` is overturned by the entry at `log_index`: it stands no longer.
    fn overturn(&mut self, tx: &Conn, id: DecisionId, log_index: i64) -> Result<()> {
        if overturned_before(tx, id, log_index)? {
            return Ok(()); // overturned already (a store written before the plan model)
        }
        let (plan, t, c) = match self.inserted.get(&id) {
            Some(&known) => known,
            None => tx
                .query_opt(CALIBRATION_OF, vals![&id.to_string()], |r| {
                    Ok((PlanId::parse_field("plan_id", r.str(0)?)?, r.str(1)?.parse::<DecisionType>()?, r.opt_f64(2)?))
                })?
                .ok_or_else(|| Error::DecisionNotFound(id.to_string()))?,
        };
        self.add_cal(plan, t, c, CalSums::one(c, true).negated());
        self.add_cal(plan, t, c, CalSums::one(c, false));
        let now = self.peek(tx, id)?;
        if now.is_empty() {
            // An empty row stays empty; one that learnt its standing before
            // must forget it (a row described later reads it from the log).
            if let Some(slot) = self.rows.get_mut(&id) {
                slot.now.effective = false;
            }
            return Ok(());
        }
        self.change(tx, id, |r| r.effective = false)
    }

    /// Adds `s`, the sums of decisions of confidence `c`, to their plan's and the store's.
    fn add_cal(&mut self, plan: PlanId, t: DecisionType, c: Option<f64>, s: CalSums) {
        let b = bin(c);
        self.cal.entry((plan.to_string(), t, b)).or_default().add(&s);
        self.cal.entry((STORE.to_owned(), t, b)).or_default().add(&s);
    }

    /// A node's version changed (or it went, `None`): each decision that
    /// recorded it moves or comes back.
    fn node(&mut self, tx: &Conn, refs: Vec<RefRow>, now: Option<&str>) -> Result<()> {
        for RefRow { uri, decision, position, recorded, moved: was } in refs {
            let m = moves(recorded.as_deref(), now);
            if m == was {
                continue;
            }
            tx.execute(SET_MOVED, vals![uri.as_str(), &decision.to_string(), position, i64::from(m)])?;
            let delta = if m { 1 } else { -1 };
            self.change(tx, decision, |r| r.moved += delta)?;
        }
        Ok(())
    }

    /// Checks each decision whose support fell and stayed: in a store with
    /// cycles its support may come only from the cycle. A walk up its risky
    /// predecessors either finds a source (it stays at risk) or not (the
    /// cycle goes: its members lose their support, and what they lead to
    /// loses theirs).
    fn settle(&mut self, tx: &Conn) -> Result<()> {
        while let Some(x) = self.verify.pop() {
            let r = self.peek(tx, x)?;
            if !r.risky() || r.source() {
                continue;
            }
            let mut seen: Vec<DecisionId> = vec![x];
            let mut i = 0;
            let mut found = false;
            'walk: while i < seen.len() {
                let y = seen[i];
                i += 1;
                for p in self.predecessors(tx, y)? {
                    let pr = self.peek(tx, p)?;
                    if pr.source() {
                        found = true;
                        break 'walk;
                    }
                    if pr.risky() && !seen.contains(&p) {
                        seen.push(p);
                    }
                }
            }
            if found {
                continue;
            }
            // Unsupported: none of `seen` is reached from a source.
            let members: FxHashSet<DecisionId> = seen.iter().copied().collect();
            for &z in &seen {
                self.describe(tx, z)?;
                self.rows.get_mut(&z).expect("described").now.support = 0;
            }
            for &z in &seen {
                for w in self.successors(tx, z)? {
                    if !members.contains(&w) {
                        self.change(tx, w, |r| r.support -= 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes the rows that changed, the per-plan counts, the calibration
    /// sums and the count of backward links.
    pub(crate) fn flush(self, tx: &Conn) -> Result<()> {
        let mut counts: FxHashMap<String, [i64; 5]> = FxHashMap::default();
        let mut upsert = tx.prepare(UPSERT_RISK)?;
        let mut delete = tx.prepare(DELETE_RISK)?;
        for (id, slot) in &self.rows {
            if slot.stored == Some(slot.now) || (slot.stored.is_none() && slot.now.is_empty()) {
                continue;
            }
            if let Some((plan, c)) = slot.stored.and_then(|s| s.category()) {
                counts.entry(plan).or_default()[c] -= 1;
            }
            if let Some((plan, c)) = slot.now.category() {
                counts.entry(plan).or_default()[c] += 1;
            }
            let key = id.to_string();
            if slot.now.is_empty() {
                delete.execute(vals![&key])?;
            } else {
                let r = slot.now;
                let plan = r.plan.map(|p| p.to_string());
                upsert.execute(vals![&key, &plan, r.sequence, i64::from(r.effective), r.moved, r.support])?;
            }
        }
        for (plan, n) in &self.resources {
            counts.entry(plan.clone()).or_default()[4] += n;
        }
        let mut count = tx.prepare(COUNT_PLAN)?;
        for (plan, c) in counts.iter().filter(|(_, c)| c.iter().any(|&n| n != 0)) {
            count.execute(vals![plan.as_str(), c[0], c[1], c[2], c[3], c[4]])?;
        }
        let mut add = tx.prepare(ADD_CALIBRATION)?;
        for ((plan, t, b), s) in self.cal.iter().filter(|(_, s)| !s.is_zero()) {
            add.execute(vals![
                plan.as_str(),
                t.as_str(),
                *b,
                s.decisions,
                s.held,
                s.confidence,
                s.squares,
                s.held_confidence
            ])?;
        }
        if self.backward > 0 {
            tx.execute(ADD_BACKWARD, vals![self.backward])?;
        }
        Ok(())
    }
}

/// A row of `snapshot_refs`.
struct RefRow {
    uri: String,
    decision: DecisionId,
    position: i64,
    recorded: Option<String>,
    moved: bool,
}

/// Whether a resource recorded at `recorded` moved, the graph's version being `now` (`None`: gone).
fn moves(recorded: Option<&str>, now: Option<&str>) -> bool {
    match (recorded, now) {
        (_, None) => true,
        (Some(then), Some(now)) => then != now,
        (None, Some(_)) => false,
    }
}

fn overturned_before(tx: &Conn, id: DecisionId, log_index: i64) -> Result<bool> {
    tx.query_one(OVERTURNED_BEFORE, vals![&id.to_string(), log_index], |r| r.bool(0))
}

/// The current version of each of `uris` that names a node.
fn current_versions(conn: &Conn, uris: &[String]) -> Result<FxHashMap<String, String>> {
    let mut out = FxHashMap::default();
    for chunk in uris.chunks(4096) {
        conn.for_each(VERSIONS, vals![chunk], |r| {
            if let Some(v) = r.opt_string(1)? {
                out.insert(r.string(0)?, v);
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Nodes whose current version is now the given one (`None`: removed):
/// the decisions that recorded them move or come back, and what they lead
/// to follows. Call in the transaction that wrote the nodes.
pub(crate) fn nodes_changed(tx: &WriteTx<'_>, changes: &[(String, Option<String>)]) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let uris: Vec<String> = changes.iter().map(|(u, _)| u.clone()).collect();
    let mut refs: FxHashMap<String, Vec<RefRow>> = FxHashMap::default();
    for chunk in uris.chunks(4096) {
        tx.for_each(REFS_OF, vals![chunk], |r| {
            let uri = r.string(0)?;
            let row = RefRow {
                uri: uri.clone(),
                decision: DecisionId::parse_field("decision_id", r.str(1)?)?,
                position: r.i64(2)?,
                recorded: r.opt_string(3)?,
                moved: r.i64(4)? != 0,
            };
            refs.entry(uri).or_default().push(row);
            Ok(())
        })?;
    }
    if refs.is_empty() {
        return Ok(());
    }
    let mut kept = Kept::new(tx)?;
    // Of a URI changed twice, the last change is the one that holds.
    let mut last: FxHashMap<&str, Option<&str>> = FxHashMap::default();
    for (u, v) in changes {
        last.insert(u.as_str(), v.as_deref());
    }
    for (uri, now) in last {
        if let Some(r) = refs.remove(uri) {
            kept.node(tx, r, now)?;
        }
    }
    kept.settle(tx)?;
    kept.flush(tx)
}

/// Empties the kept tables, for [`crate::store::workflows::kept::rebuild`].
pub(crate) fn clear(tx: &WriteTx<'_>) -> Result<()> {
    for table in ["snapshot_refs", "downstream_refs", "risk", "plan_risk", "calibration_sums"] {
        tx.execute(&format!("DELETE FROM {table}"), &[])?;
    }
    tx.execute("UPDATE kept_state SET backward_links = 0, built = 0 WHERE id = 1", &[]).map(drop)
}

/// Records that the kept tables hold the store's state.
pub(crate) fn set_built(tx: &WriteTx<'_>) -> Result<()> {
    tx.execute("UPDATE kept_state SET built = 1 WHERE id = 1", &[]).map(drop)
}

/// Sets the current version of stored nodes (by URI).
pub(crate) fn set_current_versions(tx: &WriteTx<'_>, versions: &[(String, String)]) -> Result<()> {
    let mut set = tx.prepare("UPDATE uko_nodes SET current_version = ?2 WHERE uri = ?1")?;
    for (uri, v) in versions {
        set.execute(vals![uri.as_str(), v.as_str()])?;
    }
    Ok(())
}

// ---------------------------------------------------------------- reading

/// A plan's row of `plan_risk` (or the sum of every plan's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PlanRisk {
    pub(crate) stale: u64,
    pub(crate) stale_overturned: u64,
    pub(crate) at_risk: u64,
    pub(crate) at_risk_overturned: u64,
    pub(crate) resources: u64,
}

const PLAN_RISK: &str = "SELECT stale, stale_overturned, at_risk, at_risk_overturned, resources FROM plan_risk";

fn plan_risk_of(r: &Row<'_>, at: usize) -> Result<PlanRisk> {
    let n = |i: usize| -> Result<u64> { Ok(u64::try_from(r.i64(at + i)?).unwrap_or(0)) };
    Ok(PlanRisk { stale: n(0)?, stale_overturned: n(1)?, at_risk: n(2)?, at_risk_overturned: n(3)?, resources: n(4)? })
}

/// The counts of one plan, or of the store (every plan, and the ids not stored).
pub(crate) fn plan_risk(conn: &Conn, plan: Option<PlanId>) -> Result<PlanRisk> {
    match plan {
        Some(p) => Ok(conn
            .query_opt(&format!("{PLAN_RISK} WHERE plan_id = ?1"), vals![&p.to_string()], |r| plan_risk_of(r, 0))?
            .unwrap_or_default()),
        None => conn.query_one(
            // (PostgreSQL's sum of a BIGINT is a numeric.)
            "SELECT CAST(coalesce(sum(stale), 0) AS BIGINT), CAST(coalesce(sum(stale_overturned), 0) AS BIGINT), \
             CAST(coalesce(sum(at_risk), 0) AS BIGINT), CAST(coalesce(sum(at_risk_overturned), 0) AS BIGINT), \
             CAST(coalesce(sum(resources), 0) AS BIGINT) FROM plan_risk",
            &[],
            |r| plan_risk_of(r, 0),
        ),
    }
}

/// Every plan's counts, by plan id.
pub(crate) fn plan_risks(conn: &Conn) -> Result<FxHashMap<String, PlanRisk>> {
    let mut out = FxHashMap::default();
    conn.for_each(
        "SELECT plan_id, stale, stale_overturned, at_risk, at_risk_overturned, resources FROM plan_risk",
        &[],
        |r| {
            out.insert(r.string(0)?, plan_risk_of(r, 1)?);
            Ok(())
        },
    )?;
    Ok(out)
}

/// A row of a page: id, plan (`None`: not stored), sequence, whether it stands.
pub(crate) type PageRow = (DecisionId, Option<PlanId>, i64, bool);

fn page_row(r: &Row<'_>) -> Result<PageRow> {
    Ok((
        DecisionId::parse_field("decision_id", r.str(0)?)?,
        r.opt_str(1)?.map(|p| PlanId::parse_field("plan_id", p)).transpose()?,
        r.opt_i64(2)?.unwrap_or(0),
        r.i64(3)? != 0,
    ))
}

/// The stale decisions after `(plan, sequence)` in that order, at most
/// `limit`; standing ones only unless `all`; of one plan or every one.
pub(crate) fn stale_after(
    conn: &Conn,
    plan: Option<PlanId>,
    all: bool,
    after: (&str, i64),
    limit: usize,
) -> Result<Vec<PageRow>> {
    let standing = if all { "" } else { " AND effective = 1" };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    match plan {
        Some(p) => conn.query_vec(
            &format!(
                "SELECT decision_id, plan_id, sequence, effective FROM risk WHERE moved > 0{standing} \
                 AND plan_id = ?1 AND sequence > ?2 ORDER BY plan_id, sequence LIMIT ?3"
            ),
            vals![&p.to_string(), after.1, limit],
            page_row,
        ),
        None => conn.query_vec(
            &format!(
                "SELECT decision_id, plan_id, sequence, effective FROM risk WHERE moved > 0{standing} \
                 AND (plan_id > ?1 OR (plan_id = ?1 AND sequence > ?2)) ORDER BY plan_id, sequence LIMIT ?3"
            ),
            vals![after.0, after.1, limit],
            page_row,
        ),
    }
}

/// The stored decisions at risk (and not stale) after `(plan, sequence)`,
/// as [`stale_after`].
pub(crate) fn at_risk_after(
    conn: &Conn,
    plan: Option<PlanId>,
    all: bool,
    after: (&str, i64),
    limit: usize,
) -> Result<Vec<PageRow>> {
    let standing = if all { "" } else { " AND effective = 1" };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    match plan {
        Some(p) => conn.query_vec(
            &format!(
                "SELECT decision_id, plan_id, sequence, effective FROM risk WHERE moved = 0{standing} \
                 AND plan_id = ?1 AND sequence > ?2 ORDER BY plan_id, sequence LIMIT ?3"
            ),
            vals![&p.to_string(), after.1, limit],
            page_row,
        ),
        None => conn.query_vec(
            &format!(
                "SELECT decision_id, plan_id, sequence, effective FROM risk WHERE moved = 0{standing} \
                 AND plan_id IS NOT NULL AND (plan_id > ?1 OR (plan_id = ?1 AND sequence > ?2)) \
                 ORDER BY plan_id, sequence LIMIT ?3"
            ),
            vals![after.0, after.1, limit],
            page_row,
        ),
    }
}

/// The ids at risk that no stored decision has, after `after`, in id order.
pub(crate) fn unstored_after(conn: &Conn, after: &str, limit: usize) -> Result<Vec<PageRow>> {
    conn.query_vec(
        "SELECT decision_id, plan_id, sequence, effective FROM risk WHERE moved = 0 AND plan_id IS NULL \
         AND decision_id > ?1 ORDER BY decision_id LIMIT ?2",
        vals![after, i64::try_from(limit).unwrap_or(i64::MAX)],
        page_row,
    )
}

/// The kept row of `id`, if any.
pub(crate) fn risk(conn: &Conn, id: DecisionId) -> Result<Option<Risk>> {
    conn.query_opt(RISK_ROW, vals![&id.to_string()], |r| risk_of(r, 0))
}

/// The stale and standing decisions that reach `x` (the sources of its
/// risk), each with whether it is an ancestor of `x` in its tree: walks
/// back over the risky decisions only, as every path from a source is risky.
pub(crate) fn causes(conn: &Conn, x: DecisionId) -> Result<Vec<(DecisionId, Risk, bool)>> {
    let risky = |id: DecisionId| -> Result<Option<Risk>> { Ok(risk(conn, id)?.filter(Risk::risky)) };
    let parent_of = |id: DecisionId| -> Result<Option<DecisionId>> {
        conn.query_opt(PARENT, vals![&id.to_string()], |r| r.opt_str(0).map(|p| p.map(DecisionId::parse)))?
            .flatten()
            .transpose()
    };
    // The ancestors reached through risky decisions only.
    let mut ancestors: FxHashSet<DecisionId> = FxHashSet::default();
    let mut at = x;
    while let Some(p) = parent_of(at)? {
        if p == x || !ancestors.insert(p) || risky(p)?.is_none() {
            break;
        }
        at = p;
    }
    let mut seen: FxHashSet<DecisionId> = FxHashSet::from_iter([x]);
    let mut queue = vec![x];
    let mut out = Vec::new();
    while let Some(y) = queue.pop() {
        let mut preds: Vec<DecisionId> = parent_of(y)?.into_iter().collect();
        preds
            .extend(conn.query_vec(NAMED_BY, vals![&y.to_string()], |r| DecisionId::parse_field("source", r.str(0)?))?);
        for p in preds {
            if !seen.insert(p) {
                continue;
            }
            if let Some(r) = risky(p)? {
                if r.source() {
                    out.push((p, r, ancestors.contains(&p)));
                }
                queue.push(p);
            }
        }
    }
    Ok(out)
}

fn cal_row(r: &Row<'_>) -> Result<(CalKey, CalSums)> {
    Ok((
        (r.string(0)?, r.str(1)?.parse::<DecisionType>()?, r.i64(2)?),
        CalSums {
            decisions: r.i64(3)?,
            held: r.i64(4)?,
            confidence: r.i64(5)?,
            squares: r.i64(6)?,
            held_confidence: r.i64(7)?,
        },
    ))
}

const CAL_ROWS: &str =
    "SELECT plan_id, decision_type, bin, decisions, held, confidence, squares, held_confidence FROM calibration_sums";

/// The calibration sums of a plan (or of the store), by type and bin.
pub(crate) fn calibration_sums(conn: &Conn, plan: Option<PlanId>) -> Result<Vec<(CalKey, CalSums)>> {
    let plan = plan.map_or(STORE.to_owned(), |p| p.to_string());
    conn.query_vec(&format!("{CAL_ROWS} WHERE plan_id = ?1 ORDER BY decision_type, bin"), vals![&plan], cal_row)
}

/// The calibration sums of every plan, by plan, type and bin.
pub(crate) fn calibration_sums_by_plan(conn: &Conn) -> Result<Vec<(CalKey, CalSums)>> {
    conn.query_vec(
        &format!("{CAL_ROWS} WHERE plan_id <> ?1 ORDER BY plan_id, decision_type, bin"),
        vals![STORE],
        cal_row,
    )
}
