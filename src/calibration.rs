//! Whether an agent's confidence can be trusted: confidence scores against outcomes.
//!
//! A decision's outcome is *held* when it stands (nothing corrects it and it
//! is not superseded) and *overturned* otherwise. For decisions with a
//! confidence score, [`calibrate`] reports the count, the mean confidence,
//! the share held, the Brier score (mean squared difference between
//! confidence and outcome, 1 held and 0 overturned) and the expected
//! calibration error over ten equal-width bins, overall and per group.
//! `docs/calibration.md` gives the formulas.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decision::{DecisionId, DecisionType, Phase, PlanId};
use crate::error::{Error, Result};
use crate::store::tables::kept;
use crate::store::Store;

/// Number of equal-width confidence bins.
pub const BINS: usize = 10;

/// How [`calibrate`] groups decisions besides the overall figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    Type,
    Phase,
    Plan,
}

impl GroupBy {
    /// The names [`GroupBy`]'s `FromStr` takes.
    pub const NAMES: [&'static str; 3] = ["type", "phase", "plan"];

    /// Its name: `type`, `phase` or `plan`.
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Type => "type",
            GroupBy::Phase => "phase",
            GroupBy::Plan => "plan",
        }
    }
}

impl std::str::FromStr for GroupBy {
    type Err = Error;
    fn from_str(s: &str) -> Result<GroupBy> {
        match s {
            "type" => Ok(GroupBy::Type),
            "phase" => Ok(GroupBy::Phase),
            "plan" => Ok(GroupBy::Plan),
            _ => Err(Error::validation("group_by", format!("{s:?} is not one of {}", GroupBy::NAMES.join(", ")))),
        }
    }
}

/// What [`Store::calibration`] looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct CalibrationOptions {
    /// Only this plan's decisions.
    pub plan: Option<PlanId>,
    /// Groups reported beside the overall figures.
    pub by: Option<GroupBy>,
    /// Count only decisions followed by at least this many later decisions
    /// (higher sequence) in their plan: newer ones have not been judged yet.
    pub settled_after: u32,
}

/// One decision and what became of it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Outcome {
    pub decision_id: DecisionId,
    pub plan_id: PlanId,
    pub decision_type: DecisionType,
    pub confidence: Option<f64>,
    /// Not corrected and not superseded.
    pub held: bool,
    /// Decisions of its plan with a higher sequence.
    pub later: u32,
}

/// One confidence bin: `[lower, upper)`, the last one `[0.9, 1.0]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    pub lower: f64,
    pub upper: f64,
    pub count: u64,
    /// `None` for an empty bin.
    pub mean_confidence: Option<f64>,
    pub share_held: Option<f64>,
}

/// Calibration figures of a set of decisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// Decisions in the set, with or without a confidence score.
    pub decisions: u64,
    /// Decisions without a confidence score: counted apart, in no figure below.
    pub unscored: u64,
    /// Decisions with a confidence score: the figures below are theirs.
    pub scored: u64,
    pub held: u64,
    /// The figures are `None` when no decision of the set has a score.
    pub mean_confidence: Option<f64>,
    pub share_held: Option<f64>,
    pub brier: Option<f64>,
    /// Expected calibration error over [`BINS`] equal-width bins.
    pub ece: Option<f64>,
    pub bins: Vec<Bin>,
}

/// A group's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The type's or phase's wire name, or the plan id.
    pub key: String,
    #[serde(flatten)]
    pub metrics: Metrics,
}

/// The answer of [`calibrate`] and [`Store::calibration`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    pub settled_after: u32,
    /// Decisions left out because fewer than `settled_after` decisions follow them.
    pub unsettled: u64,
    pub overall: Metrics,
    pub by: Option<GroupBy>,
    /// In type declaration order, phase order or plan id order; only non-empty groups.
    pub groups: Vec<Group>,
}

/// Running sums of one set: counts, and confidences in integer units
/// ([`UNIT`]), so that sums kept by the store as decisions arrive and sums
/// of a recomputation are equal whatever their order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Sums {
    decisions: u64,
    unscored: u64,
    /// Held among the scored decisions.
    held: u64,
    confidence: i64,
    squares: i64,
    held_confidence: i64,
    /// Per bin: count, confidence, held.
    bins: [(u64, i64, u64); BINS],
}

/// The unit of the confidence sums: figures are exact to it.
pub const UNIT: f64 = kept::CONFIDENCE_UNIT;

impl Sums {
    fn add(&mut self, o: &Outcome) {
        let b = kept::bin(o.confidence);
        self.add_kept(b, &kept::CalSums::one(o.confidence, o.held));
    }

    /// Adds sums the store keeps for bin `b` (-1: no confidence).
    fn add_kept(&mut self, b: i64, s: &kept::CalSums) {
        let n = u64::try_from(s.decisions).unwrap_or(0);
        self.decisions += n;
        let Ok(b) = usize::try_from(b) else {
            self.unscored += n;
            return;
        };
        let held = u64::try_from(s.held).unwrap_or(0);
        self.held += held;
        self.confidence += s.confidence;
        self.squares += s.squares;
        self.held_confidence += s.held_confidence;
        let bin = &mut self.bins[b.min(BINS - 1)];
        bin.0 += n;
        bin.1 += s.confidence;
        bin.2 += held;
    }

    fn metrics(&self) -> Metrics {
        let scored = self.decisions - self.unscored;
        let per = |sum: f64, n: u64| (n > 0).then(|| sum / n as f64);
        let bins: Vec<Bin> = self
            .bins
            .iter()
            .enumerate()
            .map(|(i, &(count, conf, held))| Bin {
                lower: i as f64 / BINS as f64,
                upper: (i + 1) as f64 / BINS as f64,
                count,
                mean_confidence: per(conf as f64 * UNIT, count),
                share_held: per(held as f64, count),
            })
            .collect();
        let ece = (scored > 0).then(|| {
            bins.iter()
                .filter_map(|b| Some(b.count as f64 / scored as f64 * (b.share_held? - b.mean_confidence?).abs()))
                .sum()
        });
        // Σ(c - y)² = Σc² - 2Σc·y + Σy², y = 1 when held: in units, then scaled.
        let squared_error =
            self.squares as f64 * UNIT * UNIT - 2.0 * self.held_confidence as f64 * UNIT + self.held as f64;
        Metrics {
            decisions: self.decisions,
            unscored: self.unscored,
            scored,
            held: self.held,
            mean_confidence: per(self.confidence as f64 * UNIT, scored),
            share_held: per(self.held as f64, scored),
            brier: per(squared_error.max(0.0), scored),
            ece,
            bins,
        }
    }
}

/// A group's sort key and name: types and phases in declaration order, plans by id.
fn group_key(by: GroupBy, t: DecisionType, plan: Option<PlanId>) -> (usize, String) {
    match by {
        GroupBy::Type => (DecisionType::ALL.iter().position(|&x| x == t).unwrap_or(0), t.as_str().to_owned()),
        GroupBy::Phase => {
            let p = t.phase();
            (
                [Phase::Strategize, Phase::Execute, Phase::Any].iter().position(|&x| x == p).unwrap_or(0),
                phase_key(p).to_owned(),
            )
        }
        GroupBy::Plan => (0, plan.map(|p| p.to_string()).unwrap_or_default()),
    }
}

fn phase_key(p: Phase) -> &'static str {
    match p {
        Phase::Strategize => "strategize",
        Phase::Execute => "execute",
        Phase::Any => "any",
    }
}

/// Calibration figures of these outcomes, grouped by `by`, counting only
/// those followed by at least `settled_after` later decisions.
pub fn calibrate<'a>(
    outcomes: impl IntoIterator<Item = &'a Outcome>,
    by: Option<GroupBy>,
    settled_after: u32,
) -> Calibration {
    let mut overall = Sums::default();
    // Sort keys: type and phase by declaration order, plans by id.
    let mut groups: BTreeMap<(usize, String), Sums> = BTreeMap::new();
    let mut unsettled = 0;
    for o in outcomes {
        if o.later < settled_after {
            unsettled += 1;
            continue;
        }
        overall.add(o);
        let Some(by) = by else { continue };
        groups.entry(group_key(by, o.decision_type, Some(o.plan_id))).or_default().add(o);
    }
    Calibration {
        settled_after,
        unsettled,
        overall: overall.metrics(),
        by,
        groups: groups.into_iter().map(|((_, key), sums)| Group { key, metrics: sums.metrics() }).collect(),
    }
}

impl Store {
    /// Each decision's confidence and outcome, by plan then sequence, from one read snapshot.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] for a plan with no decisions,
    /// [`Error::Storage`] when rows cannot be read.
    pub fn outcomes(&self, plan: Option<PlanId>) -> Result<Vec<Outcome>> {
        self.read_snapshot(|store| {
            let plans = match plan {
                Some(p) => vec![p],
                None => store.plans()?.into_iter().map(|p| p.plan_id).collect(),
            };
            let mut out = Vec::new();
            for plan in plans {
                // The outline holds ids, links, type, sequence and confidence: all this needs.
                let tree = store.decision_tree_outline(plan)?;
                let n = tree.len();
                // In sequence order, and a plan's sequences are unique (the
                // schema says so): the ones after position i are later.
                for (i, d) in tree.decisions().iter().enumerate() {
                    out.push(Outcome {
                        decision_id: d.decision_id(),
                        plan_id: plan,
                        decision_type: d.decision_type(),
                        confidence: d.confidence_score(),
                        held: tree.is_effective(d.decision_id()),
                        later: u32::try_from(n - i - 1).unwrap_or(u32::MAX),
                    });
                }
            }
            Ok(out)
        })
    }

    /// Calibration figures of the store's decisions (or one plan's).
    ///
    /// ```
    /// # use decision_store::{Decision, DecisionType, PlanId, Store, calibration::CalibrationOptions};
    /// let mut store = Store::open_in_memory()?;
    /// let plan = PlanId::generate();
    /// let goal = Decision::builder(plan, DecisionType::PromptDefinition, 0).build()?;
    /// let first = Decision::builder(plan, DecisionType::StrategyChoice, 1)
    ///     .parent(goal.decision_id())
    ///     .confidence_score(0.9)
    ///     .build()?;
    /// let fix = Decision::builder(plan, DecisionType::StrategyChoice, 2)
    ///     .parent(goal.decision_id())
    ///     .corrects(first.decision_id())
    ///     .confidence_score(0.5)
    ///     .build()?;
    /// store.insert_many([&goal, &first, &fix])?;
    /// let c = store.calibration(CalibrationOptions::default())?;
    /// // (0.9 - 0)² and (0.5 - 1)², averaged.
    /// assert!((c.overall.brier.unwrap() - (0.81 + 0.25) / 2.0).abs() < 1e-12);
    /// # Ok::<(), decision_store::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] for a plan with no decisions,
    /// [`Error::Storage`] when rows cannot be read.
    pub fn calibration(&self, options: CalibrationOptions) -> Result<Calibration> {
        if options.settled_after > 0 {
            // Which decisions are settled depends on what followed them: from the rows.
            let outcomes = self.outcomes(options.plan)?;
            return Ok(calibrate(&outcomes, options.by, options.settled_after));
        }
        self.read_snapshot(|store| store.calibration_kept(options))
    }

    /// [`Store::calibration`] from the sums the store keeps: its cost grows
    /// with the number of groups, not of decisions.
    fn calibration_kept(&self, options: CalibrationOptions) -> Result<Calibration> {
        self.kept_built()?;
        if let Some(p) = options.plan {
            self.plan_summary(p)?.ok_or_else(|| Error::PlanNotFound(p.to_string()))?;
        }
        let mut overall = Sums::default();
        let mut groups: BTreeMap<(usize, String), Sums> = BTreeMap::new();
        for ((_, t, b), s) in self.kept_calibration(options.plan)? {
            overall.add_kept(b, &s);
            if let Some(key) = options.by.filter(|by| *by != GroupBy::Plan).map(|by| group_key(by, t, options.plan)) {
                groups.entry(key).or_default().add_kept(b, &s);
            }
        }
        if options.by == Some(GroupBy::Plan) {
            let rows = match options.plan {
                Some(p) => self
                    .kept_calibration(Some(p))?
                    .into_iter()
                    .map(|((_, t, b), s)| ((p.to_string(), t, b), s))
                    .collect(),
                None => self.kept_calibration_by_plan()?,
            };
            for ((plan, _, b), s) in rows {
                groups.entry((0, plan)).or_default().add_kept(b, &s);
            }
        }
        Ok(Calibration {
            settled_after: 0,
            unsettled: 0,
            overall: overall.metrics(),
            by: options.by,
            groups: groups.into_iter().map(|((_, key), sums)| Group { key, metrics: sums.metrics() }).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(t: DecisionType, confidence: Option<f64>, held: bool, later: u32) -> Outcome {
        Outcome {
            decision_id: DecisionId::generate(),
            plan_id: PlanId::parse("01M8NR005J4Z8TH8XN0RWFPS8E").unwrap(),
            decision_type: t,
            confidence,
            held,
            later,
        }
    }

    #[test]
    fn bins_are_half_open_and_the_last_takes_one() {
        let bin_of = |c: f64| kept::bin(Some(c));
        assert_eq!(bin_of(0.0), 0);
        assert_eq!(bin_of(0.0999), 0);
        for k in 1..10u8 {
            assert_eq!(bin_of(f64::from(k) / 10.0), i64::from(k), "{k}/10");
        }
        assert_eq!(bin_of(1.0), 9);
        assert_eq!(kept::bin(None), -1);
    }

    #[test]
    fn nothing_scored_gives_no_figures_and_no_division_by_zero() {
        let c = calibrate(&[outcome(DecisionType::ToolInvocation, None, true, 0)], Some(GroupBy::Type), 0);
        assert_eq!((c.overall.decisions, c.overall.unscored, c.overall.scored), (1, 1, 0));
        assert_eq!((c.overall.brier, c.overall.ece, c.overall.mean_confidence), (None, None, None));
        assert!(c.overall.bins.iter().all(|b| b.count == 0 && b.share_held.is_none()));
        let empty = calibrate(&[], None, 0);
        assert_eq!(empty.overall.decisions, 0);
        assert!(empty.groups.is_empty());
    }

    #[test]
    fn settled_after_leaves_out_the_latest() {
        use DecisionType::*;
        let os = [outcome(ToolInvocation, Some(0.5), true, 2), outcome(ToolInvocation, Some(0.5), true, 1)];
        let c = calibrate(&os, None, 2);
        assert_eq!((c.overall.decisions, c.unsettled), (1, 1));
    }
}
