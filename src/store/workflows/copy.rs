//! Copying a whole store into an empty one, on either engine.
//!
//! The log is replayed in its own order (each decision row, then each
//! supersession at its place), so the destination computes the same
//! content hashes, chains and digests as the source: a copy is checked by
//! comparing the two digests.
//!
//! ## Locking
//!
//! The source is read in one read transaction (one snapshot, however much
//! is written to it meanwhile). The destination is written in transactions
//! of at most [`BATCH`](super::BATCH) entries, nodes or edges each,
//! with the lock left free between two of them.

use std::collections::HashMap;

use serde::Serialize;

use super::import::Commit;
use crate::decision::{Decision, DecisionId};
use crate::error::{Error, Result};
use crate::hash::{self, Hash};
use crate::store::engine::{Bulk, Conn, WriteTx};
use crate::store::tables::decisions::{self, for_each_in_log_order, insert_prepared, link_supersession, Inserter};
use crate::store::tables::ledger::Ledger;
use crate::store::tables::redactions::{self, Redaction};
use crate::store::tables::rows::PreparedRow;
use crate::store::tables::{graph, history, lexical, references};
use crate::uko::{UkoEdge, UkoNode};

/// What [`crate::Store::copy_into`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    pub decisions: u64,
    pub supersessions: u64,
    pub redactions: u64,
    pub nodes: u64,
    pub edges: u64,
    /// Unresolved references kept by `ingest` (so a later ingest resolves as the source's would).
    pub code_references: u64,
    /// Files of the lexical index (the words `ingest` read from each file).
    pub term_documents: u64,
    /// The digest both stores have, `store:N:HEX`.
    pub digest: String,
}

/// One entry of the log.
enum Entry {
    /// A decision, and the content hash its chain committed to when it was
    /// redacted since (its row hashes to its last redaction's hash now).
    Decision(Box<Decision>, Option<Hash>),
    Supersession(DecisionId, DecisionId),
    Redaction(Box<Redaction>),
}

/// Fails unless `dst` holds nothing: no decision, node or code reference.
pub(crate) fn check_empty(dst: &Conn) -> Result<()> {
    let held = decisions::decision_counts(dst)?.decisions;
    let graph = graph::counts(dst)?;
    if held > 0 || graph.nodes > 0 || references::count(dst)? > 0 {
        return Err(Error::validation(
            "destination",
            format!("holds {held} decisions and {} nodes; copy writes into an empty store only", graph.nodes),
        ));
    }
    Ok(())
}

/// Copies everything of `src` (read inside one read transaction the
/// caller holds) into `dst`, which [`check_empty`] passed. `first_load`:
/// `dst` is an empty file that the copy may write without its log.
pub(crate) fn copy(
    src: &Conn,
    dst: &Conn,
    first_load: bool,
    progress: &mut impl FnMut(&CopyReport),
) -> Result<CopyReport> {
    // Rows written around the library have no place in the log to replay them at.
    let unplaced = src.query_one(
        "SELECT (SELECT count(*) FROM decisions WHERE log_index IS NULL) \
              + (SELECT count(*) FROM supersessions WHERE log_index IS NULL)",
        &[],
        |r| r.i64(0),
    )?;
    if unplaced > 0 {
        return Err(Error::Corrupt {
            table: "decisions",
            key: format!("({unplaced} rows)"),
            reason: "rows without a place in the source's log (written around the library)".into(),
        });
    }
    const PARTIAL: &str =
        "; the destination may hold part of the copy: empty it (a new file, or drop its schema) and copy again";
    copy_log_and_graph(src, dst, first_load, progress).map_err(|e| match e {
        Error::Validation { field, reason } => Error::Validation { field, reason: format!("{reason}{PARTIAL}") },
        e @ (Error::Corrupt { .. } | Error::Damaged(_) | Error::Storage(_) | Error::Busy) => {
            Error::storage(format!("{e}{PARTIAL}"))
        }
        e => e,
    })
}

fn copy_log_and_graph(
    src: &Conn,
    dst: &Conn,
    first_load: bool,
    progress: &mut impl FnMut(&CopyReport),
) -> Result<CopyReport> {
    let bound = Commit::Bounded.limit(false).records as usize;
    let mut report = CopyReport::default();
    // The entries that are not decision rows, in log order: supersessions and redactions.
    let mut others: Vec<(i64, Entry)> = src.query_vec(
        "SELECT decision_id, superseded_by, log_index FROM supersessions ORDER BY log_index",
        &[],
        |r| Ok((r.i64(2)?, Entry::Supersession(DecisionId::parse(r.str(0)?)?, DecisionId::parse(r.str(1)?)?))),
    )?;
    let redactions = src.query_vec(redactions::ALL, &[], |r| Ok((r.i64(8)?, redactions::from_row(r)?)))?;
    // What each redacted decision hashed to before its first redaction: what its chain holds.
    let mut originals: HashMap<DecisionId, Hash> = HashMap::new();
    for (_, r) in &redactions {
        if let Some(h) = hash::from_hex(&r.before_hash) {
            originals.entry(r.decision_id).or_insert(h);
        }
    }
    others.extend(redactions.into_iter().map(|(log, r)| (log, Entry::Redaction(Box::new(r)))));
    others.sort_by_key(|(log, _)| *log);
    let mut others = others.into_iter().peekable();
    let bulk = dst.bulk(first_load);
    let mut batch: Vec<Entry> = Vec::with_capacity(bound);
    for_each_in_log_order(src, |log, d| {
        while let Some((_, e)) = others.next_if(|(at, _)| *at < log) {
            batch.push(e);
        }
        let original = originals.get(&d.decision_id()).copied();
        batch.push(Entry::Decision(Box::new(d), original));
        if batch.len() >= bound {
            write_entries(&bulk, &mut batch, &mut report)?;
            progress(&report);
        }
        Ok(())
    })?;
    batch.extend(others.map(|(_, e)| e));
    write_entries(&bulk, &mut batch, &mut report)?;

    in_batches(
        &bulk,
        bound,
        &mut report,
        progress,
        |each| graph::for_each_node(src, each),
        |tx, nodes: &[UkoNode]| graph::upsert_nodes(tx, nodes),
        |r| &mut r.nodes,
    )?;
    in_batches(
        &bulk,
        bound,
        &mut report,
        progress,
        |each| graph::for_each_edge(src, each),
        |tx, edges: &[UkoEdge]| graph::upsert_edges(tx, edges),
        |r| &mut r.edges,
    )?;
    let code = references::all(src)?;
    report.code_references = code.len() as u64;
    for chunk in code.chunks(bound.max(1)) {
        in_graph_tx(&bulk, |tx| {
            references::insert(
                tx,
                chunk.iter().map(|(f, from, r, n)| (f.as_str(), from.as_str(), r.as_str(), n.as_str())),
            )
        })?;
    }
    // The lexical index, and how far the history was read: without them
    // the copy would rank context without its words until the next ingest,
    // which would also read the whole history again.
    lexical::for_each_document(src, |docs| {
        report.term_documents += docs.len() as u64;
        let files: Vec<lexical::FileTerms<'_>> =
            docs.iter().map(|(f, v, t)| (f.as_str(), v.as_str(), Some(t.as_slice()))).collect();
        in_graph_tx(&bulk, |tx| lexical::index_files(tx, &files))
    })?;
    if let Some(state) = history::state(src)? {
        in_graph_tx(&bulk, |tx| history::set_state(tx, &state))?;
    }
    drop(bulk);

    let ours = decisions::digest(src)?.store;
    let theirs = dst.begin_read().and_then(|tx| {
        let d = decisions::digest(&tx)?;
        tx.commit()?;
        Ok(d.store)
    })?;
    if ours != theirs {
        return Err(Error::DigestMismatch { source_digest: ours.to_string(), copy: theirs.to_string() });
    }
    report.digest = ours.to_string();
    Ok(report)
}

/// One transaction of `bulk` that writes the graph: locked, bumped, committed.
fn in_graph_tx(bulk: &Bulk<'_>, write: impl FnOnce(&WriteTx<'_>) -> Result<()>) -> Result<()> {
    let tx = bulk.begin()?;
    let generation = graph::lock(&tx)?;
    write(&tx)?;
    graph::bump(&tx, generation)?;
    tx.commit()?;
    bulk.between();
    Ok(())
}

/// Copies the items `source` streams into the destination, `bound` per
/// transaction written by `write`, counting them in the report's field `count`.
fn in_batches<T>(
    bulk: &Bulk<'_>,
    bound: usize,
    report: &mut CopyReport,
    progress: &mut impl FnMut(&CopyReport),
    source: impl FnOnce(&mut dyn FnMut(T) -> Result<()>) -> Result<()>,
    write: impl Fn(&WriteTx<'_>, &[T]) -> Result<()>,
    count: impl Fn(&mut CopyReport) -> &mut u64,
) -> Result<()> {
    let mut batch: Vec<T> = Vec::with_capacity(bound);
    let flush = |batch: &mut Vec<T>, report: &mut CopyReport| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        in_graph_tx(bulk, |tx| write(tx, batch))?;
        *count(report) += batch.len() as u64;
        batch.clear();
        Ok(())
    };
    source(&mut |item| {
        batch.push(item);
        if batch.len() >= bound {
            flush(&mut batch, report)?;
            progress(report);
        }
        Ok(())
    })?;
    flush(&mut batch, report)
}

/// Writes a batch of log entries in one transaction of the destination, in order.
fn write_entries(bulk: &Bulk<'_>, batch: &mut Vec<Entry>, report: &mut CopyReport) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let tx = bulk.begin()?;
    let mut ledger = Ledger::begin(&tx)?.verbatim();
    {
        // One statement for the batch: taking it from the cache per row hashes its text twice.
        let mut insert = Inserter::new(&tx)?;
        let decisions = batch.iter().filter_map(|e| match e {
            Entry::Decision(d, _) => Some(&**d),
            _ => None,
        });
        insert.look_ahead(&tx, decisions)?;
        for e in batch.iter() {
            match e {
                Entry::Decision(d, original) => {
                    let row = PreparedRow::of(d);
                    let row = match original {
                        Some(h) => row.with_content_hash(*h),
                        None => row,
                    };
                    insert_prepared(&tx, &mut insert, &mut ledger, d, &row)?;
                }
                Entry::Supersession(old, new) => {
                    link_supersession(&tx, &mut ledger, *old, *new)?;
                }
                Entry::Redaction(r) => redactions::write_entry(&tx, &mut ledger, r)?,
            }
        }
    }
    ledger.flush(&tx)?;
    tx.commit()?;
    bulk.between();
    for e in batch.drain(..) {
        match e {
            Entry::Decision(..) => report.decisions += 1,
            Entry::Supersession(..) => report.supersessions += 1,
            Entry::Redaction(_) => report.redactions += 1,
        }
    }
    Ok(())
}
