//! What `ingest` has read of a tree's git history (`code_history`), and
//! the `co_changed` edges between files that changed together.

use std::collections::HashMap;

use crate::error::Result;
use crate::store::engine::{vals, Conn, WriteTx};

use crate::uko::CO_CHANGED;

/// The history read so far: the last commit, the clock, the weights' base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) head: String,
    pub(crate) clock: u64,
    pub(crate) base: u64,
}

pub(crate) fn state(conn: &Conn) -> Result<Option<State>> {
    conn.query_opt("SELECT head, clock, base FROM code_history WHERE id = 1", &[], |r| {
        Ok(State {
            head: r.string(0)?,
            clock: u64::try_from(r.i64(1)?).unwrap_or(0),
            base: u64::try_from(r.i64(2)?).unwrap_or(0),
        })
    })
}

pub(crate) fn set_state(tx: &WriteTx<'_>, s: &State) -> Result<()> {
    let (clock, base) = (i64::try_from(s.clock).unwrap_or(i64::MAX), i64::try_from(s.base).unwrap_or(i64::MAX));
    tx.execute(
        "INSERT INTO code_history (id, head, clock, base) VALUES (1, ?1, ?2, ?3)
         ON CONFLICT (id) DO UPDATE SET head = excluded.head, clock = excluded.clock, base = excluded.base",
        vals![s.head.as_str(), clock, base],
    )
    .map(drop)
}

/// Forgets every `co_changed` edge (the history is read afresh).
pub(crate) fn clear(tx: &WriteTx<'_>) -> Result<()> {
    tx.execute("DELETE FROM uko_edges WHERE relation = ?1", vals![CO_CHANGED]).map(drop)
}

/// Multiplies every `co_changed` weight by `factor` (the base moves on).
pub(crate) fn scale(tx: &WriteTx<'_>, factor: f64) -> Result<()> {
    tx.execute("UPDATE uko_edges SET weight = weight * ?2 WHERE relation = ?1", vals![CO_CHANGED, factor]).map(drop)
}

/// The node of each ingested file, by its `project://` URI.
pub(crate) fn file_nodes(conn: &Conn) -> Result<HashMap<String, i64>> {
    Ok(conn
        .query_vec(
            "SELECT uri, node_id FROM uko_nodes WHERE kind = 'file' AND resource_uri = uri AND domain = 'uko-code:'",
            &[],
            |r| Ok((r.string(0)?, r.i64(1)?)),
        )?
        .into_iter()
        .collect())
}

/// Adds each weight to the `co_changed` edge between two file nodes, both
/// ways (an edge is made at that weight when missing).
pub(crate) fn add_links(tx: &WriteTx<'_>, links: &[(i64, i64, f64)]) -> Result<()> {
    let mut upsert = tx.prepare(
        "INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (source_id, relation, target_id) DO UPDATE SET weight = uko_edges.weight + excluded.weight",
    )?;
    for &(a, b, w) in links {
        upsert.execute(vals![a, b, CO_CHANGED, w])?;
        upsert.execute(vals![b, a, CO_CHANGED, w])?;
    }
    Ok(())
}
