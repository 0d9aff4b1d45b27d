//! The workflows floor: the long operations, each built from the tables'
//! queries over transactions it begins and ends itself, with its own
//! `## Locking` section saying how long each one holds a lock.
//!
//! - `import`: the JSON Lines import pipeline (decisions, graph);
//! - `ingest`: a source tree's graph, planned outside any transaction;
//! - `history`: its git history, as `co_changed` links between files;
//! - `copy`: a whole store into an empty one;
//! - `kept`: the kept staleness and calibration, built from the rows.

use std::time::Duration;

pub(crate) mod copy;
#[cfg(feature = "ingest")]
pub(crate) mod history;
pub(crate) mod import;
#[cfg(feature = "ingest")]
pub(crate) mod ingest;
pub(crate) mod kept;

/// The most records an import's [`Commit::Bounded`](import::Commit)
/// transaction holds, and a copy's.
pub const BATCH: usize = 4096;
/// How long a bounded transaction of a workflow (an import's, a copy's,
/// an ingest's, the history's) holds the lock at most, give or take the
/// run of rows it is writing when the time is up.
pub const MAX_HOLD: Duration = Duration::from_millis(25);
/// [`BATCH`] and [`MAX_HOLD`] of a first load into an empty file that no
/// other connection has open (see `engine::Bulk`): each of its commits
/// syncs the file, and there is no other writer to wait for it.
pub(crate) const FIRST_LOAD_BATCH: usize = 65_536;
pub(crate) const FIRST_LOAD_HOLD: Duration = Duration::from_millis(500);
