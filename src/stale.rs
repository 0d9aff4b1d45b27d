//! Which decisions were made on context that has since changed.
//!
//! A decision's context snapshot names the resources (UKO node URIs) it saw
//! and their versions. [`Store::stale`] compares those with the graph's
//! current versions ([`crate::uko::UkoNode::current_version`]): a decision is
//! stale when a resource it recorded has another version now, or is gone
//! from the graph. A resource recorded without a version is checked for
//! presence only. Everything that builds on a stale decision is at risk: its
//! descendants in the plan's tree and the decisions it names as downstream,
//! and so on from those, across plans.

use std::collections::HashMap;

use serde::Serialize;

use crate::decision::{DecisionId, DecisionType, PlanId};
use crate::error::{Error, Result};
use crate::store::tables::kept;
use crate::store::Store;

/// What [`Store::stale`] looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct StaleOptions {
    /// Only this plan's decisions: those of it that are stale, and those of
    /// it at risk (through stale decisions of any plan).
    pub plan: Option<PlanId>,
    /// Report overturned (corrected or superseded) decisions too; by default
    /// only effective ones are reported, stale or at risk.
    pub all: bool,
}

/// A resource of a snapshot whose version moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChangedResource {
    pub resource_id: String,
    /// The version the decision recorded (`None`: it recorded none).
    pub recorded_version: Option<String>,
    /// The graph's version now; `None` when the node is gone from the graph.
    pub current_version: Option<String>,
}

/// A decision whose snapshot no longer matches the graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StaleDecision {
    pub decision_id: DecisionId,
    pub plan_id: PlanId,
    pub sequence: u32,
    pub decision_type: DecisionType,
    pub chosen_option: String,
    /// False for an overturned decision (reported only with `all`).
    pub effective: bool,
    pub resources: Vec<ChangedResource>,
}

/// How an at-risk decision depends on a stale one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskPath {
    /// Below it in the plan's tree.
    Descendant,
    /// Named in its `downstream_decision_ids` (or reached through such a link).
    Downstream,
}

impl RiskPath {
    /// How a person reads the path from the at-risk decision to the stale
    /// one: "below" it, or "downstream of" it.
    pub fn as_words(self) -> &'static str {
        match self {
            RiskPath::Descendant => "below",
            RiskPath::Downstream => "downstream of",
        }
    }
}

/// A stale decision that an at-risk decision builds on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RiskCause {
    pub stale_decision_id: DecisionId,
    pub via: RiskPath,
}

/// A decision that builds on a stale one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AtRisk {
    pub decision_id: DecisionId,
    /// `None` for a downstream id that names no stored decision (yet).
    pub plan_id: Option<PlanId>,
    pub sequence: Option<u32>,
    pub decision_type: Option<DecisionType>,
    /// `None` when the decision is not stored.
    pub effective: Option<bool>,
    /// Every reported stale decision it builds on, in the report's order.
    pub because_of: Vec<RiskCause>,
}

/// The answer of [`Store::stale`] and [`Store::stale_page`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StaleReport {
    /// Decisions looked at (those without a snapshot included).
    pub checked_decisions: u64,
    /// Snapshot resources compared (those without a recorded version only for presence).
    pub checked_resources: u64,
    /// By plan, then sequence (a page of them from [`Store::stale_page`]).
    pub stale: Vec<StaleDecision>,
    /// By plan, then sequence; ids not stored last. A stale decision is not repeated here.
    pub at_risk: Vec<AtRisk>,
    /// Nodes in the graph: with none, every recorded resource is missing from it.
    pub graph_nodes: u64,
    /// How many stale decisions there are in all (on every page).
    pub stale_total: u64,
    /// How many decisions (and ids not stored) are at risk in all.
    pub at_risk_total: u64,
}

impl StaleReport {
    /// True when nothing is stale.
    pub fn is_clean(&self) -> bool {
        self.stale.is_empty()
    }
}

/// Where a page of [`Store::stale_page`] ends: after which stale decision
/// and after which decision at risk. Its text (`next_cursor`) is opaque.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Cursor {
    /// `None`: the stale list is done.
    stale: Option<(String, i64)>,
    /// `None`: the at-risk list is done.
    risk: Option<RiskAfter>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum RiskAfter {
    /// After this (plan, sequence) among the stored decisions.
    Stored(String, i64),
    /// Among the ids not stored, after this one.
    Unstored(String),
}

impl Cursor {
    fn start() -> Cursor {
        Cursor { stale: Some((String::new(), -1)), risk: Some(RiskAfter::Stored(String::new(), -1)) }
    }

    fn encode(&self) -> Option<String> {
        if self.stale.is_none() && self.risk.is_none() {
            return None;
        }
        let stale = self.stale.as_ref().map_or("-".to_owned(), |(p, s)| format!("{p}.{s}"));
        let risk = match &self.risk {
            None => "-".to_owned(),
            Some(RiskAfter::Stored(p, s)) => format!("{p}.{s}"),
            Some(RiskAfter::Unstored(id)) => format!("~{id}"),
        };
        Some(format!("{stale}/{risk}"))
    }

    fn decode(text: &str) -> Result<Cursor> {
        let bad = || Error::validation("cursor", format!("{text:?} is not a cursor this store gave"));
        let (stale, risk) = text.split_once('/').ok_or_else(bad)?;
        let key = |k: &str| -> Result<(String, i64)> {
            let (p, s) = k.rsplit_once('.').ok_or_else(bad)?;
            Ok((p.to_owned(), s.parse().map_err(|_| bad())?))
        };
        Ok(Cursor {
            stale: if stale == "-" { None } else { Some(key(stale)?) },
            risk: match risk {
                "-" => None,
                r if r.starts_with('~') => Some(RiskAfter::Unstored(r[1..].to_owned())),
                r => {
                    let (p, s) = key(r)?;
                    Some(RiskAfter::Stored(p, s))
                }
            },
        })
    }
}

impl Store {
    /// Every decision whose context snapshot names a resource whose version
    /// differs from the graph's now, or that is gone from the graph, and
    /// every decision at risk through it, from one read snapshot. Read from
    /// the state the store keeps as decisions and nodes change: the whole
    /// store's report at once is as large as the answer; a page of it is
    /// [`Store::stale_page`].
    ///
    /// ```
    /// # use decision_store::{Decision, DecisionType, PlanId, Store, stale::StaleOptions, uko::UkoNode};
    /// let mut store = Store::open_in_memory()?;
    /// store.upsert_nodes(&[UkoNode::new("class://A", "uko-code:", "class", "A").with_version("v1")])?;
    /// let plan = PlanId::generate();
    /// let d = Decision::builder(plan, DecisionType::PromptDefinition, 0)
    ///     .context_snapshot(store.snapshot_of(&["class://A"])?)
    ///     .build()?;
    /// store.insert(&d)?;
    /// assert!(store.stale(StaleOptions::default())?.is_clean());
    /// store.upsert_nodes(&[UkoNode::new("class://A", "uko-code:", "class", "A").with_version("v2")])?;
    /// let report = store.stale(StaleOptions::default())?;
    /// assert_eq!(report.stale[0].resources[0].current_version.as_deref(), Some("v2"));
    /// # Ok::<(), decision_store::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::EmptyGraph`] when the graph is empty while decisions recorded
    /// resources of it (nothing to compare with); [`Error::PlanNotFound`] for a
    /// plan with no decisions; [`Error::Storage`] when rows cannot be read.
    pub fn stale(&self, options: StaleOptions) -> Result<StaleReport> {
        self.read_snapshot(|store| {
            let (mut report, mut next) = store.stale_page_in(options, PAGE, None)?;
            while let Some(cursor) = next {
                let (page, more) = store.stale_page_in(options, PAGE, Some(&cursor))?;
                report.stale.extend(page.stale);
                report.at_risk.extend(page.at_risk);
                next = more;
            }
            Ok(report)
        })
    }

    /// A page of [`Store::stale`]: at most `limit` stale decisions and at
    /// most `limit` at risk, after where `cursor` (a `next_cursor` of the
    /// page before) ended, with the totals of the whole answer; and the
    /// cursor of the next page, `None` after the last. Its cost grows with
    /// the page, not with the store.
    ///
    /// # Errors
    /// As [`Store::stale`]; [`Error::Validation`] naming `cursor` for a
    /// cursor this store did not give.
    pub fn stale_page(
        &self,
        options: StaleOptions,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<(StaleReport, Option<String>)> {
        self.read_snapshot(|store| store.stale_page_in(options, limit.max(1), cursor))
    }

    fn stale_page_in(
        &self,
        options: StaleOptions,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<(StaleReport, Option<String>)> {
        self.kept_built()?;
        let decisions = match options.plan {
            Some(p) => self.plan_summary(p)?.ok_or_else(|| Error::PlanNotFound(p.to_string()))?.decisions,
            None => self.decision_counts()?.decisions,
        };
        let counts = self.kept_counts(options.plan)?;
        let mut report = StaleReport {
            checked_decisions: decisions,
            checked_resources: counts.resources,
            graph_nodes: self.graph_counts()?.nodes,
            stale_total: counts.stale + if options.all { counts.stale_overturned } else { 0 },
            at_risk_total: counts.at_risk + if options.all { counts.at_risk_overturned } else { 0 },
            ..StaleReport::default()
        };
        if report.graph_nodes == 0 && report.checked_resources > 0 {
            // Every recorded resource would be "gone": that says nothing.
            return Err(Error::EmptyGraph { resources: report.checked_resources });
        }
        let mut cursor = match cursor {
            Some(c) => Cursor::decode(c)?,
            None => Cursor::start(),
        };
        if let Some((plan, seq)) = cursor.stale.clone() {
            let rows = self.kept_stale_after(options.plan, options.all, (&plan, seq), limit)?;
            cursor.stale = (rows.len() == limit).then(|| rows.last().map(key_of)).flatten();
            for row in rows {
                report.stale.push(self.stale_decision(row)?);
            }
        }
        let mut room = limit;
        while room > 0 {
            let rows = match &cursor.risk {
                None => break,
                Some(RiskAfter::Stored(plan, seq)) => {
                    let rows = self.kept_at_risk_after(options.plan, options.all, (plan, *seq), room)?;
                    cursor.risk = match rows.last() {
                        Some(r) if rows.len() == room => Some(RiskAfter::Stored(key_of(r).0, key_of(r).1)),
                        _ if options.plan.is_none() => Some(RiskAfter::Unstored(String::new())),
                        _ => None,
                    };
                    rows
                }
                Some(RiskAfter::Unstored(after)) => {
                    let rows = self.kept_unstored_after(after, room)?;
                    cursor.risk = match rows.last() {
                        Some(r) if rows.len() == room => Some(RiskAfter::Unstored(r.0.to_string())),
                        _ => None,
                    };
                    rows
                }
            };
            room -= rows.len();
            for row in rows {
                report.at_risk.push(self.at_risk_entry(row)?);
            }
        }
        Ok((report, cursor.encode()))
    }

    /// A stale decision of a page, with the resources that moved.
    fn stale_decision(&self, (id, plan, sequence, effective): kept::PageRow) -> Result<StaleDecision> {
        let d = self.decision(id)?;
        let uris: Vec<String> = d.context_snapshot().resources().iter().map(|r| r.resource_id().to_owned()).collect();
        let current = self.node_versions(&uris)?;
        let resources = d
            .context_snapshot()
            .resources()
            .iter()
            .filter_map(|r| {
                let now = current.get(r.resource_id());
                let moved = match (r.version(), now) {
                    (_, None) => true,
                    (Some(then), Some(now)) => then != now,
                    (None, Some(_)) => false,
                };
                moved.then(|| ChangedResource {
                    resource_id: r.resource_id().to_owned(),
                    recorded_version: r.version().map(str::to_owned),
                    current_version: now.cloned(),
                })
            })
            .collect();
        Ok(StaleDecision {
            decision_id: id,
            plan_id: plan.unwrap_or(d.plan_id()),
            sequence: u32::try_from(sequence).unwrap_or(d.sequence()),
            decision_type: d.decision_type(),
            chosen_option: d.chosen_option().to_owned(),
            effective,
            resources,
        })
    }

    /// A decision (or id) at risk, with the stale decisions it builds on.
    fn at_risk_entry(&self, (id, plan, sequence, effective): kept::PageRow) -> Result<AtRisk> {
        let mut causes = self.kept_causes(id)?;
        causes.sort_by_key(|a| (a.1.plan, a.1.sequence, a.0));
        let because_of = causes
            .into_iter()
            .map(|(c, _, tree)| RiskCause {
                stale_decision_id: c,
                via: if tree { RiskPath::Descendant } else { RiskPath::Downstream },
            })
            .collect();
        let decision_type = match plan {
            Some(_) => Some(self.decision(id)?.decision_type()),
            None => None,
        };
        Ok(AtRisk {
            decision_id: id,
            plan_id: plan,
            sequence: plan.map(|_| u32::try_from(sequence).unwrap_or(0)),
            decision_type,
            effective: plan.map(|_| effective),
            because_of,
        })
    }

    /// Each plan's counts of stale decisions and decisions at risk (those
    /// that stand), from the kept state: what the plans page shows.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn stale_counts(&self) -> Result<HashMap<PlanId, StaleCounts>> {
        self.kept_built()?;
        let mut out = HashMap::new();
        for (plan, c) in self.kept_plan_counts()? {
            if let Ok(p) = PlanId::parse(&plan) {
                out.insert(p, StaleCounts { stale: c.stale, at_risk: c.at_risk });
            }
        }
        Ok(out)
    }
}

/// The stale decisions and decisions at risk of a plan (those that stand).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StaleCounts {
    pub stale: u64,
    pub at_risk: u64,
}

/// How many entries of each list [`Store::stale`] reads at a time.
const PAGE: usize = 2048;

fn key_of(r: &kept::PageRow) -> (String, i64) {
    (r.1.map(|p| p.to_string()).unwrap_or_default(), r.2)
}

/// The reference computation of [`Store::stale`]: every plan's decisions
/// read and compared with the graph, and a walk down from each stale one.
/// What the kept state must equal; its cost grows with the store. For tests.
#[cfg(any(test, feature = "test-support"))]
pub mod recompute {
    use std::collections::{HashMap, HashSet, VecDeque};

    use super::*;
    use crate::decision::DecisionId;
    /// What the walk needs of a stored decision.
    struct Node {
        plan: PlanId,
        sequence: u32,
        decision_type: DecisionType,
        effective: bool,
        children: Vec<DecisionId>,
        downstream: Vec<DecisionId>,
    }

    /// Decisions of the plans read so far, kept small: one plan's full rows are
    /// dropped once its stale decisions are found.
    #[derive(Default)]
    struct Index {
        loaded: HashSet<PlanId>,
        nodes: HashMap<DecisionId, Node>,
        /// Downstream ids already looked up and not stored.
        missing: HashSet<DecisionId>,
    }

    impl Index {
        /// Reads a plan's tree; returns its decisions when `keep` (to check them).
        fn load(&mut self, store: &Store, plan: PlanId, keep: bool) -> Result<Vec<crate::decision::Decision>> {
            if !self.loaded.insert(plan) {
                return Ok(Vec::new());
            }
            let tree = store.decision_tree(plan)?;
            for d in tree.decisions() {
                let id = d.decision_id();
                self.nodes.insert(
                    id,
                    Node {
                        plan,
                        sequence: d.sequence(),
                        decision_type: d.decision_type(),
                        effective: tree.is_effective(id),
                        children: tree.children(id).iter().map(|c| c.decision_id()).collect(),
                        downstream: d.downstream_decision_ids().to_vec(),
                    },
                );
            }
            Ok(if keep { tree.decisions().to_vec() } else { Vec::new() })
        }

        /// The node of `id`, reading its plan first if needed; `None` when not stored.
        fn node(&mut self, store: &Store, id: DecisionId) -> Result<Option<&Node>> {
            if !self.nodes.contains_key(&id) && !self.missing.contains(&id) {
                match store.get(id)? {
                    Some(d) => {
                        self.load(store, d.plan_id(), false)?;
                    }
                    None => {
                        self.missing.insert(id);
                    }
                }
            }
            Ok(self.nodes.get(&id))
        }
    }

    impl Store {
        #[doc(hidden)]
        /// [`Store::stale`] computed from the rows, as it was before the store kept it.
        ///
        /// # Errors
        /// As [`Store::stale`].
        pub fn stale_recomputed(&self, options: StaleOptions) -> Result<StaleReport> {
            self.read_snapshot(|store| store.stale_in_snapshot(options))
        }

        fn stale_in_snapshot(&self, options: StaleOptions) -> Result<StaleReport> {
            let plans = match options.plan {
                Some(p) => vec![p],
                None => self.plans()?.into_iter().map(|p| p.plan_id).collect(),
            };
            let mut index = Index::default();
            let mut report = StaleReport::default();
            for plan in plans {
                let decisions = index.load(self, plan, true)?;
                let uris: Vec<String> = {
                    let mut seen = HashSet::new();
                    decisions
                        .iter()
                        .flat_map(|d| d.context_snapshot().resources())
                        .map(|r| r.resource_id())
                        .filter(|u| seen.insert(*u))
                        .map(str::to_owned)
                        .collect()
                };
                let current = self.node_versions(&uris)?;
                for d in &decisions {
                    report.checked_decisions += 1;
                    let mut changed = Vec::new();
                    for r in d.context_snapshot().resources() {
                        report.checked_resources += 1;
                        let now = current.get(r.resource_id());
                        let moved = match (r.version(), now) {
                            (_, None) => true,
                            (Some(then), Some(now)) => then != now,
                            (None, Some(_)) => false,
                        };
                        if moved {
                            changed.push(ChangedResource {
                                resource_id: r.resource_id().to_owned(),
                                recorded_version: r.version().map(str::to_owned),
                                current_version: now.cloned(),
                            });
                        }
                    }
                    let effective = index.nodes[&d.decision_id()].effective;
                    if !changed.is_empty() && (effective || options.all) {
                        report.stale.push(StaleDecision {
                            decision_id: d.decision_id(),
                            plan_id: plan,
                            sequence: d.sequence(),
                            decision_type: d.decision_type(),
                            chosen_option: d.chosen_option().to_owned(),
                            effective,
                            resources: changed,
                        });
                    }
                }
            }
            report.graph_nodes = self.graph_counts()?.nodes;
            if report.graph_nodes == 0 && report.checked_resources > 0 {
                // Every recorded resource would be "gone": that says nothing.
                return Err(Error::EmptyGraph { resources: report.checked_resources });
            }
            report.at_risk = self.at_risk(&mut index, &report.stale, options.all)?;
            Ok(report)
        }

        /// Walks down the trees and downstream links from each effective stale
        /// decision (an overturned one steers nothing, with `all` or without).
        fn at_risk(&self, index: &mut Index, stale: &[StaleDecision], all: bool) -> Result<Vec<AtRisk>> {
            let stale_ids: HashSet<DecisionId> = stale.iter().map(|s| s.decision_id).collect();
            let mut causes: HashMap<DecisionId, Vec<RiskCause>> = HashMap::new();
            for s in stale.iter().filter(|s| s.effective) {
                // (decision, reached only through tree edges so far)
                let mut queue: VecDeque<(DecisionId, bool)> = VecDeque::from([(s.decision_id, true)]);
                let mut seen: HashMap<DecisionId, bool> = HashMap::from([(s.decision_id, true)]);
                while let Some((id, in_tree)) = queue.pop_front() {
                    let Some(node) = index.node(self, id)? else { continue };
                    let next: Vec<(DecisionId, bool)> = node
                        .children
                        .iter()
                        .map(|&c| (c, in_tree))
                        .chain(node.downstream.iter().map(|&d| (d, false)))
                        .collect();
                    for (n, tree_only) in next {
                        // A decision reached both ways counts as a descendant.
                        match seen.get(&n) {
                            Some(&was) if was || !tree_only => continue,
                            _ => {}
                        }
                        seen.insert(n, tree_only);
                        queue.push_back((n, tree_only));
                    }
                }
                for (id, tree_only) in seen {
                    if id != s.decision_id {
                        let via = if tree_only { RiskPath::Descendant } else { RiskPath::Downstream };
                        causes.entry(id).or_default().push(RiskCause { stale_decision_id: s.decision_id, via });
                    }
                }
            }
            let position: HashMap<DecisionId, usize> =
                stale.iter().enumerate().map(|(i, s)| (s.decision_id, i)).collect();
            let mut out = Vec::with_capacity(causes.len());
            for (id, mut because_of) in causes {
                if stale_ids.contains(&id) {
                    continue;
                }
                because_of.sort_by_key(|c| position[&c.stale_decision_id]);
                let entry = match index.node(self, id)? {
                    Some(n) if n.effective || all => AtRisk {
                        decision_id: id,
                        plan_id: Some(n.plan),
                        sequence: Some(n.sequence),
                        decision_type: Some(n.decision_type),
                        effective: Some(n.effective),
                        because_of,
                    },
                    Some(_) => continue,
                    None => AtRisk {
                        decision_id: id,
                        plan_id: None,
                        sequence: None,
                        decision_type: None,
                        effective: None,
                        because_of,
                    },
                };
                out.push(entry);
            }
            out.sort_by_key(|a| (a.plan_id.is_none(), a.plan_id, a.sequence, a.decision_id));
            Ok(out)
        }
    }
}
