//! The workflows floor: the long operations, each built from the tables'
//! queries over transactions it begins and ends itself, with its own
//! `## Locking` section saying how long each one holds a lock.
//!
//! - `import`: the JSON Lines import pipeline (decisions, graph);
//! - `ingest`: a source tree's graph, planned outside any transaction;
//! - `history`: its git history, as `co_changed` links between files;
//! - `copy`: a whole store into an empty one.

pub(crate) mod copy;
#[cfg(feature = "ingest")]
pub(crate) mod history;
pub(crate) mod import;
#[cfg(feature = "ingest")]
pub(crate) mod ingest;
