//! The decision log's public methods: insert, supersede, and read back.

use crate::decision::{Decision, DecisionId, DecisionTree, PlanId};
use crate::error::{Error, Result};
use crate::store::engine::WriteTx;
use crate::store::tables::decisions::{
    self, children_of, get_in, insert_prepared, insert_row, link_supersession, next_sequence, rows_of_plan, Inserter,
    ALL_ROWS, OUTLINE_ROWS, PLAN_ROWS,
};
use crate::store::tables::ledger::{plan_of, Ledger};
use crate::store::tables::rows::{PreparedDecision, PreparedRow};
use crate::store::{DecisionCounts, Digest, Insertion, Placement, PlanSummary, Store};

/// Inserts `d` (and its supersession link) at the place `placement` says;
/// returns the decision as stored.
fn insert_placed(tx: &WriteTx<'_>, ledger: &mut Ledger, d: &Decision, placement: Placement) -> Result<Decision> {
    let sequence = match placement {
        Placement::AsGiven => d.sequence(),
        Placement::Next => next_sequence(tx, d.plan_id())?,
    };
    let d = if sequence == d.sequence() { d.clone() } else { d.to_builder().sequence(sequence).build()? };
    insert_row(tx, ledger, &d)?;
    if let Some(by) = d.superseded_by() {
        link_supersession(tx, ledger, d.decision_id(), by)?;
    }
    Ok(d)
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
        self.write_log(|tx, ledger| {
            insert_row(tx, ledger, decision)?;
            if let Some(by) = decision.superseded_by() {
                link_supersession(tx, ledger, decision.decision_id(), by)?;
            }
            Ok(())
        })
    }

    /// Stores `decision` as the next of its plan and returns it as stored:
    /// its sequence becomes one more than the plan's largest (0 in a new
    /// plan), read inside the write transaction, so that writers appending
    /// to one plan, in one process or several, never collide. The id, and
    /// everything else, stay as given.
    ///
    /// # Errors
    /// As [`Store::insert`].
    pub fn insert_next(&mut self, decision: &Decision) -> Result<Decision> {
        self.write_log(|tx, ledger| insert_placed(tx, ledger, decision, Placement::Next))
    }

    /// Stores several decisions in one write transaction (a group commit),
    /// each with an outcome of its own: a decision that is refused (a
    /// reference not stored, an id or a sequence taken, a supersession
    /// that would loop, a decision it supersedes that cannot be) is left
    /// out, and the others are stored. Items are
    /// stored in order, so one may refer to an earlier one; a
    /// [`Placement::Next`] item takes its plan's next sequence as of the
    /// items before it.
    ///
    /// This is what a process that writes for many callers (`dstore
    /// serve`) does with the decisions that wait while it writes: one
    /// commit for all of them instead of one each.
    ///
    /// Returns one outcome per item, in order: the decision as stored, or
    /// why it was refused.
    ///
    /// # Errors
    /// When the transaction itself fails ([`Error::Busy`], [`Error::Storage`],
    /// [`Error::ReadOnly`]): then none of the items is stored.
    pub fn insert_each(&mut self, items: &[Insertion]) -> Result<Vec<Result<Decision>>> {
        self.writable()?;
        self.once_more(|store| store.insert_each_once(items))
    }

    fn insert_each_once(&mut self, items: &[Insertion]) -> Result<Vec<Result<Decision>>> {
        let mut refused: Vec<Option<Error>> = items.iter().map(|_| None).collect();
        // A refused item ends the attempt, which rolls back (the transaction
        // may be spoilt, and the ledger gave the item its place in the
        // chain); the next attempt leaves it out. Each attempt refuses one
        // more item or commits the rest.
        'attempt: loop {
            let tx = self.conn.begin_write()?;
            let mut ledger = Ledger::begin(&tx)?;
            let mut stored = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                if refused[i].is_some() {
                    continue;
                }
                let placed = insert_placed(&tx, &mut ledger, &item.decision, item.placement).and_then(|d| {
                    if let Some(old) = item.supersedes {
                        link_supersession(&tx, &mut ledger, old, d.decision_id())?;
                    }
                    Ok(d)
                });
                match placed {
                    Ok(d) => stored.push(d),
                    // The transaction's failure, not the item's.
                    Err(e @ Error::ConnectionLost { .. }) => return Err(e),
                    Err(e) => {
                        refused[i] = Some(e);
                        continue 'attempt;
                    }
                }
            }
            let last = ledger.last_entry();
            ledger.flush(&tx)?;
            Store::settle(&self.conn, tx.commit(), last)?;
            let mut stored = stored.into_iter();
            return Ok(refused
                .into_iter()
                .map(|r| match r {
                    Some(e) => Err(e),
                    None => Ok(stored.next().expect("a stored decision for each item not refused")),
                })
                .collect());
        }
    }

    /// Stores decisions in one transaction: all or nothing. Items may refer
    /// to earlier items of the same batch. The write lock is held for the
    /// whole batch (other writers wait for it, up to their busy timeout), so
    /// hand over batches of a few thousand; an import
    /// ([`Store::import_decisions`]) commits in bounded batches itself.
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
        /// Rows looked ahead at a time (on PostgreSQL, one query, then one COPY).
        const RUN: usize = 1024;
        self.write_log_bulk(|tx, ledger| {
            let mut pending = Vec::new();
            let mut insert = Inserter::new(tx)?;
            let mut rows = rows.into_iter().enumerate().peekable();
            let mut run = Vec::with_capacity(RUN);
            let mut n = 0;
            while rows.peek().is_some() {
                run.clear();
                // A run ends early at an item that failed to be made: the rows before it are written first.
                let mut failed = None;
                for (index, item) in rows.by_ref().take(RUN) {
                    match item {
                        Ok((d, row)) => run.push((index, d, row)),
                        Err(e) => {
                            failed = Some(Error::Batch { index, error: Box::new(e) });
                            break;
                        }
                    }
                }
                insert.look_ahead(tx, run.iter().map(|(_, d, _)| d.borrow()))?;
                for (index, d, row) in &run {
                    let d = d.borrow();
                    insert_prepared(tx, &mut insert, ledger, d, row)
                        .map_err(|e| Error::Batch { index: *index, error: Box::new(e) })?;
                    if let Some(by) = d.superseded_by() {
                        pending.push((*index, d.decision_id(), by));
                    }
                    n += 1;
                }
                if let Some(e) = failed {
                    return Err(e);
                }
            }
            // Links last: a decision may be superseded by a later item.
            for (index, old, new) in pending {
                link_supersession(tx, ledger, old, new).map_err(|e| Error::Batch { index, error: Box::new(e) })?;
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
        self.write_log(|tx, ledger| link_supersession(tx, ledger, old, new).map(|_| ()))
    }

    /// The ids of the decisions whose parent is `id`, in sequence order.
    ///
    /// # Errors
    /// [`Error::DecisionNotFound`] when `id` is not stored.
    pub fn children(&self, id: DecisionId) -> Result<Vec<DecisionId>> {
        self.read_snapshot(|store| {
            let plan = store.decision(id)?.plan_id();
            children_of(&store.conn, plan, id)
        })
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
        let params: &[crate::store::engine::Value<'_>] = match &arg {
            Some(a) => crate::store::engine::vals![a],
            None => &[],
        };
        // One snapshot, read through a cursor on PostgreSQL.
        self.read_snapshot(|store| {
            store.conn.for_each_streamed(sql, params, |row| f(decisions::decode_row(row, &mut cols)?))
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
        decisions::plan_summaries(&self.conn)
    }

    /// The decision that `text` names as a person gives it: a whole id, a
    /// unique beginning of one (any case), or `PLAN#SEQ`, the decision at
    /// sequence SEQ of the plan whose id (or unique beginning of it) is PLAN,
    /// as `dstore tree` shows decisions.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `decision_id` for text that is no id, a
    /// beginning that several ids share (listing some), or a plan's id (it
    /// says so); [`Error::DecisionNotFound`] when no decision matches.
    pub fn find_decision(&self, text: &str) -> Result<DecisionId> {
        let text = text.trim();
        if let Some((plan, seq)) = text.split_once('#') {
            let plan = self.find_plan(plan)?;
            let sequence: u32 = seq.trim().parse().map_err(|_| {
                Error::validation("decision_id", format!("{text}: after `#` comes a sequence number, as `tree` shows"))
            })?;
            let id = decisions::at_sequence(&self.conn, plan, sequence)?
                .ok_or_else(|| Error::DecisionNotFound(format!("#{sequence} of plan {plan}")))?;
            return DecisionId::parse_field("decision_id", &id);
        }
        let prefix = id_prefix(text, "decision_id")?;
        if prefix.len() == 26 {
            if let Ok(id) = DecisionId::parse(&prefix) {
                if self.get(id)?.is_some() {
                    return Ok(id);
                }
            }
        }
        let found = decisions::ids_from(&self.conn, &prefix, false, 6)?;
        match found.as_slice() {
            [one] => DecisionId::parse_field("decision_id", one),
            [] => match decisions::ids_from(&self.conn, &prefix, true, 2)?.as_slice() {
                [plan] => Err(Error::validation(
                    "decision_id",
                    format!(
                        "{} is a plan's id: its tree shows its decisions (`dstore tree`), and `{plan}#SEQ` names one",
                        if plan.as_str() == prefix { text.to_owned() } else { format!("{text} begins {plan}, which") }
                    ),
                )),
                _ => Err(Error::DecisionNotFound(text.to_owned())),
            },
            many => Err(ambiguous(text, "decision", many)),
        }
    }

    /// The plan that `text` names: a whole plan id or a unique beginning of
    /// one (any case).
    ///
    /// # Errors
    /// [`Error::Validation`] naming `plan_id` for text that is no id or a
    /// beginning that several plans share; [`Error::PlanNotFound`] when no
    /// plan matches (a decision's id says so).
    pub fn find_plan(&self, text: &str) -> Result<PlanId> {
        let text = text.trim();
        let prefix = id_prefix(text, "plan_id")?;
        let found = decisions::ids_from(&self.conn, &prefix, true, 6)?;
        match found.as_slice() {
            [one] => PlanId::parse_field("plan_id", one),
            [] => match decisions::ids_from(&self.conn, &prefix, false, 2)?.as_slice() {
                [decision] => Err(Error::validation(
                    "plan_id",
                    format!(
                        "{} is a decision's id: `dstore show` shows it",
                        if decision.as_str() == prefix {
                            text.to_owned()
                        } else {
                            format!("{text} begins {decision}, which")
                        }
                    ),
                )),
                _ => Err(Error::PlanNotFound(text.to_owned())),
            },
            many => Err(ambiguous(text, "plan", many)),
        }
    }

    /// The plans whose goal (or id) holds every word of `words` (any case;
    /// every plan when `words` is blank), the most recently changed first,
    /// as people and agents look for a plan.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn recent_plans(&self, words: &str) -> Result<Vec<PlanSummary>> {
        let mut plans = self.plans()?;
        plans.retain(|p| p.matches(words));
        plans.sort_by(|a, b| b.last_ms.cmp(&a.last_ms).then(b.plan_id.cmp(&a.plan_id)));
        Ok(plans)
    }

    /// One plan's summary (a kept row, no decision read), `None` when the
    /// store holds no decision of `plan`.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn plan_summary(&self, plan: PlanId) -> Result<Option<PlanSummary>> {
        decisions::plan_summary_of(&self.conn, plan)
    }

    /// Each plan's decisions counted by type.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read, [`Error::Corrupt`] when a
    /// stored plan id or type is not one.
    pub fn plan_type_counts(&self) -> Result<decisions::PlanTypeCounts> {
        decisions::plan_type_counts(&self.conn)
    }

    /// Counts of decisions by type, and of corrections and supersessions,
    /// from the kept counts (no decision row is read).
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn decision_counts(&self) -> Result<DecisionCounts> {
        self.read_snapshot(|store| decisions::decision_counts(&store.conn))
    }

    /// The digest of every plan (its anchor at its current length) and of the
    /// whole store, from the kept chain heads. Anchor a value elsewhere and
    /// verify it later with [`Store::check_against`].
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read, [`Error::Corrupt`] when a
    /// kept head is not a hash.
    pub fn digest(&self) -> Result<Digest> {
        self.read_snapshot(|store| decisions::digest(&store.conn))
    }
}

/// `text` as the beginning of an id: upper case, Crockford base32 digits.
fn id_prefix(text: &str, field: &str) -> Result<String> {
    let prefix = text.to_ascii_uppercase();
    let valid = |c: char| c.is_ascii_digit() || (c.is_ascii_uppercase() && !matches!(c, 'I' | 'L' | 'O' | 'U'));
    if prefix.is_empty() || prefix.len() > 26 || !prefix.chars().all(valid) {
        return Err(Error::validation(
            field,
            format!("{text:?} is not an id or the beginning of one (up to 26 of 0-9 and A-Z but I, L, O, U)"),
        ));
    }
    Ok(prefix)
}

/// A beginning several ids share.
fn ambiguous(text: &str, what: &str, ids: &[String]) -> Error {
    let shown = ids.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let more = if ids.len() > 5 { ", ..." } else { "" };
    Error::validation(
        format!("{what}_id"),
        format!(
            "{text} begins {} {what} ids ({shown}{more}): give more of it",
            if ids.len() > 5 { "more than five" } else { "several" }
        ),
    )
}
