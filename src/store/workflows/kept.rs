//! Building the kept staleness and calibration (`tables::kept`) from the
//! store's rows: what an upgrade to schema version 12 runs once.
//!
//! ## Locking
//!
//! One write transaction, the caller's, for the whole build: a store is
//! upgraded once, at its first writable open, and nothing else writes it
//! meanwhile (on SQLite the file's write lock; on PostgreSQL the
//! migration's lock).

use crate::decision::DecisionId;
use crate::error::Result;
use crate::store::engine::WriteTx;
use crate::store::tables::kept::{self, Event, Facts, Kept};
use crate::store::tables::{decisions, graph};

/// Builds the kept state in the caller's write transaction: every node's
/// current version, then the log replayed in order (each decision and
/// supersession as its write would have applied it, against the graph as
/// it is now), a chunk of entries at a time.
pub(crate) fn rebuild(tx: &WriteTx<'_>) -> Result<()> {
    kept::clear(tx)?;
    let mut versions: Vec<(String, String)> = Vec::new();
    graph::for_each_node(tx, |n| {
        let v = n.current_version();
        versions.push((n.uri, v));
        Ok(())
    })?;
    kept::set_current_versions(tx, &versions)?;
    drop(versions);
    // Supersessions by log index; decisions stream in log order and the two merge.
    let mut links: Vec<(i64, DecisionId)> = tx.query_vec(
        "SELECT log_index, decision_id FROM supersessions WHERE log_index IS NOT NULL ORDER BY log_index DESC",
        &[],
        |r| Ok((r.i64(0)?, DecisionId::parse_field("decision_id", r.str(1)?)?)),
    )?;
    const CHUNK: usize = 4096;
    let mut chunk: Vec<Event> = Vec::with_capacity(CHUNK);
    decisions::for_each_in_log_order(tx, |log_index, d| {
        while links.last().is_some_and(|(at, _)| *at < log_index) {
            let (at, id) = links.pop().expect("looked at above");
            chunk.push(Event::Supersede { id, log_index: at });
        }
        chunk.push(Event::Insert(Box::new(Facts::of(&d, log_index))));
        if chunk.len() >= CHUNK {
            Kept::apply(tx, std::mem::take(&mut chunk))?;
        }
        Ok(())
    })?;
    while let Some((at, id)) = links.pop() {
        chunk.push(Event::Supersede { id, log_index: at });
    }
    Kept::apply(tx, chunk)?;
    kept::set_built(tx)
}
