//! `Store::copy_into`: a whole store into an empty one, on either backend.
//!
//! The log is replayed in its own order (each decision row, then each
//! supersession at its place), so the destination computes the same
//! content hashes, chains and digests as the source: a copy is checked by
//! comparing the two digests.

use serde::Serialize;

use super::db::{vals, Conn};
use super::decisions::{for_each_in_log_order, insert_prepared, insert_statement, link_supersession, PreparedRow};
use super::graph::{upsert_edges_in, upsert_nodes_in};
use super::ingest::{code_references, INSERT_REFERENCE};
use super::Store;
use crate::decision::{Decision, DecisionId};
use crate::error::{Error, Result};
use crate::uko::{UkoEdge, UkoNode};

/// Entries (or nodes, edges) written per transaction.
const BATCH: usize = 10_000;

/// What [`Store::copy_into`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    pub decisions: u64,
    pub supersessions: u64,
    pub nodes: u64,
    pub edges: u64,
    /// Unresolved references kept by `ingest` (so a later ingest resolves as the source's would).
    pub code_references: u64,
    /// The digest both stores have, `store:N:HEX`.
    pub digest: String,
}

/// One entry of the log.
enum Entry {
    Decision(Box<Decision>),
    Supersession(DecisionId, DecisionId),
}

impl Store {
    /// Copies this whole store (decisions, supersessions, the graph and
    /// ingest's references) into `dst`, which must be empty: SQLite into
    /// PostgreSQL and back. Reads one snapshot of this store; writes
    /// [`BATCH`]-entry transactions, and checks at the end that both
    /// stores have the same digest.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `destination` when `dst` is not empty;
    /// [`Error::Corrupt`] when the digests differ (a source whose rows were
    /// changed outside the library: run `dstore check` on it); the errors of
    /// reading and writing.
    pub fn copy_into(&self, dst: &mut Store, mut progress: impl FnMut(&CopyReport)) -> Result<CopyReport> {
        let (held, graph) = (dst.decision_counts()?.decisions, dst.graph_counts()?);
        let references = dst.conn.query_one("SELECT count(*) FROM uko_code_references", &[], |r| r.i64(0))?;
        if held > 0 || graph.nodes > 0 || references > 0 {
            return Err(Error::validation(
                "destination",
                format!("holds {held} decisions and {} nodes; copy writes into an empty store only", graph.nodes),
            ));
        }
        self.read_snapshot(|src| {
            // Rows written around the library have no place in the log to replay them at.
            let unplaced = src.conn.query_one(
                "SELECT (SELECT count(*) FROM decisions WHERE log_index IS NULL) \
                      + (SELECT count(*) FROM supersessions WHERE log_index IS NULL)",
                &[],
                |r| r.i64(0),
            )?;
            if unplaced > 0 {
                return Err(Error::Corrupt(format!(
                    "{unplaced} rows of the source have no place in its log (written around the library); run `dstore check`"
                )));
            }
            const PARTIAL: &str =
                "; the destination may hold part of the copy: empty it (a new file, or drop its schema) and copy again";
            src.copy_log_and_graph(dst, &mut progress).map_err(|e| match e {
                Error::Validation { field, reason } => Error::Validation { field, reason: format!("{reason}{PARTIAL}") },
                e @ (Error::Corrupt(_) | Error::Storage(_) | Error::Busy) => Error::Storage(format!("{e}{PARTIAL}").into()),
                e => e,
            })
        })
    }

    fn copy_log_and_graph(&self, dst: &mut Store, progress: &mut impl FnMut(&CopyReport)) -> Result<CopyReport> {
        let src = self;
        let mut report = CopyReport::default();
        let links = src.conn.query_vec(
            "SELECT decision_id, superseded_by, log_index FROM supersessions ORDER BY log_index",
            &[],
            |r| Ok((r.i64(2)?, DecisionId::parse(r.str(0)?)?, DecisionId::parse(r.str(1)?)?)),
        )?;
        let mut links = links.into_iter().peekable();
        let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
        for_each_in_log_order(&src.conn, |log, d| {
            while let Some((_, old, new)) = links.next_if(|(at, _, _)| *at < log) {
                batch.push(Entry::Supersession(old, new));
            }
            batch.push(Entry::Decision(Box::new(d)));
            if batch.len() >= BATCH {
                write_entries(dst, &mut batch, &mut report)?;
                progress(&report);
            }
            Ok(())
        })?;
        batch.extend(links.map(|(_, old, new)| Entry::Supersession(old, new)));
        write_entries(dst, &mut batch, &mut report)?;

        in_batches(
            dst,
            &mut report,
            progress,
            |each| src.for_each_node(each),
            |tx, nodes: &[UkoNode]| upsert_nodes_in(tx, nodes),
            |r| &mut r.nodes,
        )?;
        in_batches(
            dst,
            &mut report,
            progress,
            |each| src.for_each_edge(each),
            |tx, edges: &[UkoEdge]| upsert_edges_in(tx, edges),
            |r| &mut r.edges,
        )?;
        let references = code_references(&src.conn)?;
        report.code_references = references.len() as u64;
        dst.write(|tx, _| {
            let mut insert = tx.prepare(INSERT_REFERENCE)?;
            for (file, from, relation, name) in &references {
                insert.execute(vals![file, from, relation, name])?;
            }
            Ok(())
        })?;

        let (ours, theirs) = (src.digest()?.store, dst.digest()?.store);
        if ours != theirs {
            return Err(Error::Corrupt(format!(
                "the copy's digest {theirs} differs from the source's {ours}: run `dstore check` on the source"
            )));
        }
        report.digest = ours.to_string();
        Ok(report)
    }
}

/// Copies the items `source` streams into `dst`, [`BATCH`] per transaction
/// written by `write`, counting them in the report's field `count`.
fn in_batches<T>(
    dst: &mut Store,
    report: &mut CopyReport,
    progress: &mut impl FnMut(&CopyReport),
    source: impl FnOnce(&mut dyn FnMut(T) -> Result<()>) -> Result<()>,
    write: impl Fn(&Conn, &[T]) -> Result<()>,
    count: impl Fn(&mut CopyReport) -> &mut u64,
) -> Result<()> {
    let mut batch: Vec<T> = Vec::with_capacity(BATCH);
    let mut flush = |batch: &mut Vec<T>, report: &mut CopyReport| -> Result<()> {
        dst.write(|tx, _| write(tx, batch))?;
        *count(report) += batch.len() as u64;
        batch.clear();
        Ok(())
    };
    source(&mut |item| {
        batch.push(item);
        if batch.len() >= BATCH {
            flush(&mut batch, report)?;
            progress(report);
        }
        Ok(())
    })?;
    flush(&mut batch, report)
}

/// Writes a batch of log entries in one transaction of `dst`, in order.
fn write_entries(dst: &mut Store, batch: &mut Vec<Entry>, report: &mut CopyReport) -> Result<()> {
    dst.write(|tx, ledger| {
        // One statement for the batch: taking it from the cache per row hashes its text twice.
        let mut insert = insert_statement(tx)?;
        for e in batch.iter() {
            match e {
                Entry::Decision(d) => insert_prepared(tx, &mut insert, ledger, d, &PreparedRow::of(d))?,
                Entry::Supersession(old, new) => {
                    link_supersession(tx, ledger, *old, *new)?;
                }
            }
        }
        Ok(())
    })?;
    for e in batch.drain(..) {
        match e {
            Entry::Decision(_) => report.decisions += 1,
            Entry::Supersession(..) => report.supersessions += 1,
        }
    }
    Ok(())
}
