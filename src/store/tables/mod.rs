//! The tables floor: one module of queries per table group, each write over
//! an explicit write transaction ([`WriteTx`](super::engine::WriteTx)) of
//! the engine below. Nothing here opens or ends a transaction: the
//! workflows and the `Store` API above decide where one starts and what it
//! holds.
//!
//! - `decisions`: decoding rows, inserting a decision, linking a
//!   supersession, the kept counts and digests;
//! - `ledger`: the log's lock, each plan's chain head and counts;
//! - `rows`: a decision row's column texts and content hash, computed
//!   without a database (`column_json` writes its JSON columns);
//! - `integrity`: the canonical encodings and hashes of the log, anchors;
//! - `graph`: nodes, views, edges and the graph's generation;
//! - `references`: the code references `ingest` resolves;
//! - `lexical`: the terms of ingested files, and BM25's statistics;
//! - `history`: what `ingest` read of the git history, and `co_changed` links;
//! - `kept`: staleness and calibration kept by the writes that change them;
//! - `check`: the checks of `Store::check`.

pub(crate) mod check;
mod column_json;
pub(crate) mod decisions;
pub(crate) mod graph;
// Written by ingest; its state is copied in every build.
#[cfg_attr(not(feature = "ingest"), allow(dead_code))]
pub(crate) mod history;
pub(crate) mod integrity;
pub(crate) mod kept;
pub(crate) mod ledger;
pub(crate) mod lexical;
pub(crate) mod redactions;
pub(crate) mod references;
pub(crate) mod rows;

use crate::error::Result;
use crate::store::engine::Conn;

/// True when the store holds nothing: no entry of the log, no graph node.
pub(crate) fn is_empty(conn: &Conn) -> Result<bool> {
    conn.query_one(
        "SELECT (SELECT entries FROM store_log WHERE id = 1) = 0 AND NOT EXISTS (SELECT 1 FROM uko_nodes)",
        &[],
        |r| r.bool(0),
    )
}
