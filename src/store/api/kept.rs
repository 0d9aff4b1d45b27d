//! The kept staleness and calibration (`tables::kept`), as the modules
//! above the store read them: a page at a time, and the counts.

use crate::decision::{DecisionId, PlanId};
use crate::error::Result;
use crate::store::tables::kept::{self, CalKey, CalSums, PageRow, PlanRisk, Risk};
use crate::store::Store;

impl Store {
    /// [`crate::error::Error::Storage`] unless the kept state is built.
    pub(crate) fn kept_built(&self) -> Result<()> {
        kept::ensure_built(&self.conn)
    }

    /// A plan's kept counts, or the store's.
    pub(crate) fn kept_counts(&self, plan: Option<PlanId>) -> Result<PlanRisk> {
        kept::plan_risk(&self.conn, plan)
    }

    /// Every plan's kept counts, by plan id (`""`: the ids not stored).
    pub(crate) fn kept_plan_counts(&self) -> Result<rustc_hash::FxHashMap<String, PlanRisk>> {
        kept::plan_risks(&self.conn)
    }

    /// See [`kept::stale_after`].
    pub(crate) fn kept_stale_after(
        &self,
        plan: Option<PlanId>,
        all: bool,
        after: (&str, i64),
        limit: usize,
    ) -> Result<Vec<PageRow>> {
        kept::stale_after(&self.conn, plan, all, after, limit)
    }

    /// See [`kept::at_risk_after`].
    pub(crate) fn kept_at_risk_after(
        &self,
        plan: Option<PlanId>,
        all: bool,
        after: (&str, i64),
        limit: usize,
    ) -> Result<Vec<PageRow>> {
        kept::at_risk_after(&self.conn, plan, all, after, limit)
    }

    /// See [`kept::unstored_after`].
    pub(crate) fn kept_unstored_after(&self, after: &str, limit: usize) -> Result<Vec<PageRow>> {
        kept::unstored_after(&self.conn, after, limit)
    }

    /// See [`kept::causes`].
    pub(crate) fn kept_causes(&self, id: DecisionId) -> Result<Vec<(DecisionId, Risk, bool)>> {
        kept::causes(&self.conn, id)
    }

    /// The kept calibration sums of one plan's decisions (or the store's), by type and bin.
    pub(crate) fn kept_calibration(&self, plan: Option<PlanId>) -> Result<Vec<(CalKey, CalSums)>> {
        kept::calibration_sums(&self.conn, plan)
    }

    /// The kept calibration sums of every plan, by type and bin.
    pub(crate) fn kept_calibration_by_plan(&self) -> Result<Vec<(CalKey, CalSums)>> {
        kept::calibration_sums_by_plan(&self.conn)
    }
}
