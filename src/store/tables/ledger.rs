//! The ledger: the store's log (`store_log`), each plan's hash chain head
//! and kept counts (`plans`), and the counts by type
//! (`decision_type_counts`).
//!
//! A [`Ledger`] is what a write transaction that extends the log holds:
//! [`Ledger::begin`] takes the log's lock, entries are placed with
//! [`Ledger::next_entry`] and recorded with [`Ledger::appended`] in memory,
//! and [`Ledger::flush`] writes the heads and counts once before the
//! commit, so a bulk import costs no extra statement per row.

use std::collections::HashMap;

use super::integrity::{self, GENESIS};
use super::kept;
use crate::decision::{Decision, DecisionId, DecisionType, IdMap, IdSet, PlanId};
use crate::error::{Error, Result};
use crate::hash::{self, Hash};
use crate::store::engine::{vals, Conn, Dialect, WriteTx};

/// The length of the store's log.
pub(crate) const LOG_LENGTH: &str = "SELECT entries FROM store_log WHERE id = 1";
/// The log's one row, locked: on PostgreSQL the writers that extend the log
/// queue here (SQLite's file lock does the same).
const LOCK_LOG: &str = "SELECT entries FROM store_log WHERE id = 1 FOR UPDATE";
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
/// [`COUNT_TYPES`] of every type at once (PostgreSQL): one round trip.
const COUNT_TYPES_POSTGRES: &str = "INSERT INTO decision_type_counts (decision_type, decisions) \
     SELECT * FROM unnest(CAST(?1 AS TEXT[]), CAST(?2 AS BIGINT[])) \
     ON CONFLICT (decision_type) DO UPDATE SET decisions = decision_type_counts.decisions + excluded.decisions";
const SET_LOG_LENGTH: &str = "UPDATE store_log SET entries = ?1 WHERE id = 1";

/// A plan's chain head and the changes to its kept counts in this transaction.
pub(super) struct PlanState {
    /// The plan has a row in `plans` already.
    stored: bool,
    entries: i64,
    head: Hash,
    decisions: i64,
    corrections: i64,
    superseded: i64,
    /// Redactions appended (they change the head, not the counts).
    redacted: i64,
    max_depth: i64,
    first: Option<DecisionId>,
    last: Option<DecisionId>,
}

/// What a write transaction changes in the chain heads and kept counts,
/// held in memory and written once by [`Ledger::flush`] before the commit.
/// It also remembers the decisions inserted in the transaction, so a child
/// finds its parent without a query.
pub(crate) struct Ledger {
    log: Option<i64>,
    plans: IdMap<PlanId, PlanState>,
    types: HashMap<DecisionType, i64>,
    inserted: Recent,
    /// On PostgreSQL, where a bulk write's rows may not be sent yet.
    written: Option<Written>,
    /// The last entry appended in this transaction.
    last: Option<LastEntry>,
    /// The plan model's rules are checked on every entry (not on a copy,
    /// which writes what its source holds).
    rules: bool,
    /// The entries appended, for the kept staleness and calibration.
    events: Vec<kept::Event>,
}

/// What a transaction wrote, for the checks of a supersession while its
/// rows may not all be sent yet (see `decisions::link_supersession`).
#[derive(Default)]
struct Written {
    /// Supersession links, old -> new.
    links: IdMap<DecisionId, DecisionId>,
    /// Corrections, corrected -> correcting.
    corrections: IdMap<DecisionId, Vec<DecisionId>>,
    /// The decisions inserted: no row outside the transaction refers to them.
    fresh: IdSet<DecisionId>,
}

/// An entry of the log as the ledger placed it: found in the store after
/// a commit whose answer was lost, it proves the commit (a transaction
/// commits whole or not at all).
#[derive(Clone, Debug)]
pub(crate) struct LastEntry {
    plan: PlanId,
    chain_index: i64,
    chain_hash: Hash,
    /// The decision of the entry (of a supersession, the superseded one): what to look at.
    pub(crate) decision: DecisionId,
}

/// Is `entry` stored, at its place in its plan's chain?
const ENTRY_STORED: &str =
    "SELECT EXISTS (SELECT 1 FROM decisions WHERE plan_id = ?1 AND chain_index = ?2 AND chain_hash = ?3) \
     OR EXISTS (SELECT 1 FROM supersessions WHERE plan_id = ?1 AND chain_index = ?2 AND chain_hash = ?3) \
     OR EXISTS (SELECT 1 FROM redactions WHERE plan_id = ?1 AND chain_index = ?2 AND chain_hash = ?3)";

/// True when `entry` is in the store (see [`LastEntry`]).
pub(crate) fn entry_stored(conn: &Conn, entry: &LastEntry) -> Result<bool> {
    let hex = hash::to_hex(&entry.chain_hash);
    conn.query_one(ENTRY_STORED, vals![&entry.plan.to_string(), entry.chain_index, &hex], |r| r.bool(0))
}

/// The decisions last inserted in a transaction, with their plan and
/// depth, in two generations of at most [`RECENT`] each: when the newer
/// is full it becomes the older, and the older is emptied for reuse. The
/// last `RECENT` inserts at least are remembered, in maps small enough to
/// stay in cache: one map of 65,536 was 5 % of an import's writer thread,
/// most of it cache misses. A decision not remembered is looked up.
#[derive(Default)]
pub(crate) struct Recent {
    newer: IdMap<DecisionId, (PlanId, i64)>,
    older: IdMap<DecisionId, (PlanId, i64)>,
}

/// The size of a [`Recent`] generation: 7/8 of a power of two, the most a
/// hash table of that many slots holds before it doubles.
pub(crate) const RECENT: usize = 7 << 10;

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
}

/// A new entry's place in its plan's chain and in the store's log.
pub(super) struct Entry {
    pub(super) chain_index: i64,
    pub(super) chain_hash: Hash,
    pub(super) log_index: i64,
}

/// The plan and depth of a stored decision (one index lookup).
pub(crate) const PLAN_OF: &str = "SELECT plan_id, depth FROM decisions WHERE decision_id = ?1";

pub(crate) fn plan_of(tx: &Conn, id: &str) -> Result<Option<(String, Option<i64>)>> {
    tx.query_opt(PLAN_OF, vals![id], |r| Ok((r.string(0)?, r.opt_i64(1)?)))
}

/// [`plan_of`] a decision that is not among the rows a bulk write deferred.
fn plan_of_past_deferred(tx: &Conn, id: &str) -> Result<Option<(String, Option<i64>)>> {
    tx.query_opt_past_deferred(PLAN_OF, vals![id], |r| Ok((r.string(0)?, r.opt_i64(1)?)))
}

impl Ledger {
    /// The ledger of a write transaction that extends the log. On
    /// PostgreSQL it locks the log's row for the rest of the transaction:
    /// writers of the log queue there (up to the busy timeout), while
    /// writers of the graph do not wait for them. On SQLite the file's write
    /// lock, taken when the transaction began, serialises all writers.
    pub(crate) fn begin(tx: &WriteTx<'_>) -> Result<Ledger> {
        Ledger::begin_after(tx, Recent::default())
    }

    /// [`Ledger::begin`] of a bulk write's next transaction, knowing the
    /// decisions that the write's earlier transactions committed (from
    /// [`Ledger::flush_keeping`]): a child finds a parent written a
    /// transaction ago without a query. Stored rows never change, so what
    /// was committed stays true.
    pub(crate) fn begin_after(tx: &WriteTx<'_>, recent: Recent) -> Result<Ledger> {
        let log = match tx.dialect() {
            Dialect::Postgres => Some(tx.query_one(LOCK_LOG, &[], |r| r.i64(0))?),
            Dialect::Sqlite => None,
        };
        Ok(Ledger {
            log,
            plans: IdMap::default(),
            types: HashMap::new(),
            inserted: recent,
            written: tx.is_postgres().then(Written::default),
            last: None,
            rules: true,
            events: Vec::new(),
        })
    }

    /// The ledger of a copy: entries are written as the source holds them,
    /// whatever rules it was written under (see `decisions::check_place`).
    pub(crate) fn verbatim(mut self) -> Ledger {
        self.rules = false;
        self
    }

    /// True when entries must keep the plan model's rules.
    pub(super) fn keeps_rules(&self) -> bool {
        self.rules
    }

    /// How many entries `plan` has, stored and appended in this transaction.
    pub(super) fn plan_entries(&mut self, tx: &Conn, plan: PlanId) -> Result<i64> {
        Ok(self.plan(tx, plan)?.entries)
    }

    fn plan(&mut self, tx: &Conn, plan: PlanId) -> Result<&mut PlanState> {
        let vacant = match self.plans.entry(plan) {
            std::collections::hash_map::Entry::Occupied(known) => return Ok(known.into_mut()),
            std::collections::hash_map::Entry::Vacant(vacant) => vacant,
        };
        let plan_id = plan.to_string();
        // The kept row of a plan is written by `flush` only, never deferred.
        let head = tx.query_opt_past_deferred(PLAN_HEAD, vals![&plan_id], |r| Ok((r.i64(0)?, r.string(1)?)))?;
        let (stored, entries, head) = match head {
            None => (false, 0, GENESIS),
            Some((n, hex)) => (true, n, kept_head(&plan_id, &hex)?),
        };
        Ok(vacant.insert(PlanState {
            stored,
            entries,
            head,
            decisions: 0,
            corrections: 0,
            superseded: 0,
            redacted: 0,
            max_depth: 0,
            first: None,
            last: None,
        }))
    }

    /// Where the next entry of `plan` goes; nothing changes until [`Ledger::appended`].
    pub(super) fn next_entry(&mut self, tx: &Conn, plan: PlanId, content: &Hash) -> Result<Entry> {
        if self.log.is_none() {
            let length = tx.query_opt_past_deferred(LOG_LENGTH, &[], |r| r.i64(0))?;
            self.log = Some(length.ok_or_else(|| Error::storage("the store's log has no row"))?);
        }
        let log_index = self.log.expect("loaded above") + 1;
        let state = self.plan(tx, plan)?;
        Ok(Entry { chain_index: state.entries + 1, chain_hash: integrity::link(&state.head, content), log_index })
    }

    /// Records an entry whose row was written.
    fn appended(&mut self, plan: PlanId, decision: DecisionId, entry: &Entry) -> &mut PlanState {
        self.log = Some(entry.log_index);
        self.last = Some(LastEntry { plan, chain_index: entry.chain_index, chain_hash: entry.chain_hash, decision });
        let state = self.plans.get_mut(&plan).expect("next_entry loaded the plan");
        state.entries = entry.chain_index;
        state.head = entry.chain_hash;
        state
    }

    /// Records a decision row written as `entry`, at `depth` in its tree.
    pub(super) fn decision_appended(&mut self, d: &Decision, entry: &Entry, depth: i64) {
        let state = self.appended(d.plan_id(), d.decision_id(), entry);
        state.decisions += 1;
        state.corrections += i64::from(d.corrects_decision_id().is_some());
        state.max_depth = state.max_depth.max(depth);
        let this = d.decision_id();
        state.first = Some(state.first.map_or(this, |f| f.min(this)));
        state.last = Some(state.last.map_or(this, |l| l.max(this)));
        *self.types.entry(d.decision_type()).or_default() += 1;
        self.inserted.insert(this, d.plan_id(), depth);
        self.events.push(kept::Event::Insert(Box::new(kept::Facts::of(d, entry.log_index))));
        if let Some(w) = &mut self.written {
            if let Some(corrected) = d.corrects_decision_id() {
                w.corrections.entry(corrected).or_default().push(this);
            }
            w.fresh.insert(this);
        }
    }

    /// True when `id` was inserted in this transaction: then every row
    /// that refers to it (a correction, a supersession) was written in
    /// this transaction too, and the ledger knows them all.
    pub(super) fn is_fresh(&self, id: DecisionId) -> bool {
        self.written.as_ref().is_some_and(|w| w.fresh.contains(&id))
    }

    /// Records a supersession row (`old` replaced by `new`) written as `entry`.
    pub(super) fn supersession_appended(&mut self, plan: PlanId, old: DecisionId, new: DecisionId, entry: &Entry) {
        self.appended(plan, old, entry).superseded += 1;
        self.events.push(kept::Event::Supersede { id: old, log_index: entry.log_index });
        if let Some(w) = &mut self.written {
            w.links.insert(old, new);
        }
    }

    /// Records a redaction row (of `decision`) written as `entry`.
    pub(super) fn redaction_appended(&mut self, plan: PlanId, decision: DecisionId, entry: &Entry) {
        self.appended(plan, decision, entry).redacted += 1;
    }

    /// The last entry appended in this transaction, if any.
    pub(crate) fn last_entry(&self) -> Option<LastEntry> {
        self.last.clone()
    }

    /// What supersedes `old`, written in this transaction.
    pub(super) fn link_written(&self, old: DecisionId) -> Option<DecisionId> {
        self.written.as_ref()?.links.get(&old).copied()
    }

    /// The decisions one step after `id` written in this transaction: what
    /// supersedes it and what corrects it.
    pub(super) fn next_written(&self, id: DecisionId) -> impl Iterator<Item = DecisionId> + '_ {
        let w = self.written.as_ref();
        let link = w.and_then(|w| w.links.get(&id));
        link.into_iter().chain(w.and_then(|w| w.corrections.get(&id)).into_iter().flatten()).copied()
    }

    /// The plan of a stored decision: from the recent inserts, else looked
    /// up without sending deferred rows (a decision not among the recent
    /// inserts is not among them). `None` when it is not stored.
    pub(super) fn plan_of_stored(&self, tx: &Conn, id: DecisionId) -> Result<Option<PlanId>> {
        match self.inserted.get(&id) {
            Some(&(plan, _)) => Ok(Some(plan)),
            None => {
                plan_of_past_deferred(tx, &id.to_string())?.map(|(p, _)| PlanId::parse_field("plan_id", &p)).transpose()
            }
        }
    }

    /// Checks that a referenced decision is stored in `plan`; returns its depth.
    pub(super) fn reference(&self, tx: &Conn, field: &'static str, id: DecisionId, plan: PlanId) -> Result<i64> {
        let (other_plan, depth) = match self.inserted.get(&id) {
            Some(&(p, depth)) if p == plan => return Ok(depth),
            Some(&(p, depth)) => (p.to_string(), Some(depth)),
            // Not among the recent inserts, so not among the rows deferred (see `Inserter`).
            None => plan_of_past_deferred(tx, &id.to_string())?.ok_or_else(|| Error::MissingReference {
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

    /// Writes the chain heads and counts: call once, before the commit of
    /// the transaction the ledger began in.
    pub(crate) fn flush(self, tx: &WriteTx<'_>) -> Result<()> {
        self.flush_keeping(tx).map(drop)
    }

    /// [`Ledger::flush`], returning the decisions inserted, for
    /// [`Ledger::begin_after`] once the transaction has committed.
    pub(crate) fn flush_keeping(mut self, tx: &WriteTx<'_>) -> Result<Recent> {
        kept::Kept::apply(tx, std::mem::take(&mut self.events))?;
        if let Some(n) = self.log {
            tx.execute(SET_LOG_LENGTH, vals![n])?;
        }
        let update_plan = tx.dialect().pick(UPDATE_PLAN, UPDATE_PLAN_POSTGRES);
        for (plan, s) in self.plans.drain().filter(|(_, s)| s.decisions > 0 || s.superseded > 0 || s.redacted > 0) {
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
                    &hash::to_hex(&s.head),
                ],
            )?;
        }
        if tx.is_postgres() && self.types.len() > 1 {
            let (types, counts): (Vec<String>, Vec<i64>) =
                self.types.drain().map(|(t, n)| (t.as_str().to_owned(), n)).unzip();
            tx.execute(COUNT_TYPES_POSTGRES, vals![&types[..], &counts[..]])?;
        } else {
            for (t, n) in self.types.drain() {
                tx.execute(COUNT_TYPES, vals![t.as_str(), n])?;
            }
        }
        Ok(self.inserted)
    }
}

/// A plan's kept head hash, or [`Error::Corrupt`] when it is not one.
pub(super) fn kept_head(plan: &str, hex: &str) -> Result<Hash> {
    hash::from_hex(hex).ok_or_else(|| Error::Corrupt {
        table: "plans",
        key: plan.to_owned(),
        reason: "head_hash is not 64 hex digits".into(),
    })
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
    }
}
