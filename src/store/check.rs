//! `Store::check`: SQLite's own checks plus the domain's invariants.
//!
//! The schema already refuses most bad rows; these checks find what a file
//! edited outside this library (triggers dropped, rows changed by hand) or
//! damaged on disk can still hold.

use serde::Serialize;

use super::{storage, Store};
use crate::decision::{DecisionTree, PlanId};
use crate::error::Result;

/// One problem found by [`Store::check`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `integrity`, `foreign_key`, `unreadable`, `orphan` (a parent missing or
    /// in another plan), `dangling_correction`, `dangling_supersession`,
    /// `root_has_parent`, `duplicate_sequence`, `cycle`.
    pub kind: &'static str,
    pub decision_id: Option<String>,
    pub message: String,
}

impl Problem {
    fn new(kind: &'static str, decision_id: Option<String>, message: impl Into<String>) -> Self {
        Problem { kind, decision_id, message: message.into() }
    }
}

/// Pairs (decision, referenced id) whose reference is missing or in another plan.
const DANGLING: [(&str, &str, &str); 4] = [
    (
        "orphan",
        "parent_decision_id",
        "SELECT d.decision_id, d.parent_decision_id FROM decisions d LEFT JOIN decisions p ON p.decision_id = d.parent_decision_id
         WHERE d.parent_decision_id IS NOT NULL AND (p.decision_id IS NULL OR p.plan_id <> d.plan_id)",
    ),
    (
        "dangling_correction",
        "corrects_decision_id",
        "SELECT d.decision_id, d.corrects_decision_id FROM decisions d LEFT JOIN decisions c ON c.decision_id = d.corrects_decision_id
         WHERE d.corrects_decision_id IS NOT NULL AND (c.decision_id IS NULL OR c.plan_id <> d.plan_id)",
    ),
    (
        "dangling_supersession",
        "superseded_by",
        "SELECT s.decision_id, s.superseded_by FROM supersessions s
         LEFT JOIN decisions o ON o.decision_id = s.decision_id LEFT JOIN decisions n ON n.decision_id = s.superseded_by
         WHERE o.decision_id IS NULL OR n.decision_id IS NULL OR o.plan_id <> n.plan_id",
    ),
    (
        "root_has_parent",
        "parent_decision_id",
        "SELECT decision_id, parent_decision_id FROM decisions WHERE decision_type = 'prompt_definition' AND parent_decision_id IS NOT NULL",
    ),
];

impl Store {
    /// Every problem in the file; an empty list means the store is sound.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the checks themselves cannot run.
    pub fn check(&self) -> Result<Vec<Problem>> {
        let mut problems: Vec<Problem> = self
            .storage_problems()?
            .into_iter()
            .map(|p| {
                let kind = if p.starts_with("foreign key") { "foreign_key" } else { "integrity" };
                Problem::new(kind, None, p)
            })
            .collect();
        for (kind, field, sql) in DANGLING {
            let mut stmt = self.conn.prepare(sql).map_err(storage)?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(storage)?;
            for row in rows {
                let (id, other) = row.map_err(storage)?;
                problems.push(Problem::new(
                    kind,
                    Some(id.clone()),
                    format!("{id}: {field} {other} is missing or in another plan"),
                ));
            }
        }
        let mut stmt = self
            .conn
            .prepare("SELECT plan_id, sequence, count(*) FROM decisions GROUP BY plan_id, sequence HAVING count(*) > 1")
            .map_err(storage)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
            .map_err(storage)?;
        for row in rows {
            let (plan, seq, n) = row.map_err(storage)?;
            problems.push(Problem::new(
                "duplicate_sequence",
                None,
                format!("plan {plan}: {n} decisions at sequence {seq}"),
            ));
        }
        self.check_plans(&mut problems)?;
        Ok(problems)
    }

    /// Decodes every row (reporting those that do not decode) and checks each plan's history.
    fn check_plans(&self, problems: &mut Vec<Problem>) -> Result<()> {
        let mut stmt = self.conn.prepare("SELECT DISTINCT plan_id FROM decisions ORDER BY plan_id").map_err(storage)?;
        let plans: Vec<String> =
            stmt.query_map([], |r| r.get(0)).map_err(storage)?.collect::<rusqlite::Result<_>>().map_err(storage)?;
        for plan in plans {
            let Ok(plan_id) = PlanId::parse(&plan) else {
                problems.push(Problem::new("unreadable", None, format!("plan id {plan:?} is not a ULID")));
                continue;
            };
            let (decisions, unreadable) = super::decisions::plan_rows_lenient(&self.conn, &plan)?;
            for (id, e) in unreadable {
                problems.push(Problem::new("unreadable", Some(id.clone()), format!("{id}: {e}")));
            }
            let tree = DecisionTree::from_decisions(decisions);
            for d in tree.decisions() {
                let id = d.decision_id();
                if tree.depth(id).is_none() {
                    problems.push(Problem::new(
                        "cycle",
                        Some(id.to_string()),
                        format!("{id}: its parent links loop in plan {plan_id}"),
                    ));
                } else if tree.standing(id).is_none() {
                    problems.push(Problem::new(
                        "cycle",
                        Some(id.to_string()),
                        format!("{id}: its corrections and supersessions loop"),
                    ));
                }
            }
        }
        Ok(())
    }
}
