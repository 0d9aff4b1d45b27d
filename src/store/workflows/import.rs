//! The JSON Lines import pipeline (decisions, and the graph's nodes and
//! edges) in the interchange format.
//!
//! Import reads one line at a time (constant memory, except for records that
//! wait for a parent, a corrected or a superseding decision that has not
//! arrived yet), parses on a second thread, and writes in transactions of a
//! bounded number of records ([`Commit`]). A bad line fails the import with
//! its line number: the transactions committed before it stay (importing
//! again skips what is stored and goes on), and in [`Commit::Atomic`] mode
//! the store is exactly as it was.
//!
//! ## Locking
//!
//! Each transaction holds the write lock (SQLite) or the log's or graph's
//! row lock (PostgreSQL) for at most [`BATCH`] records (and the records that
//! waited for them), and commits early once it has held it for
//! [`MAX_HOLD`]; between two transactions the lock is left free for a
//! moment, so another writer's single insert waits for about one batch at
//! most. A first load into an empty file that no other connection has open
//! commits every 65,536 records or 500 ms instead, until another connection
//! opens the file. [`Commit::Atomic`] holds the lock for the whole import:
//! other writers wait up to the busy timeout (5 s), then fail with
//! `Error::Busy`.

use std::io::BufRead;
use std::ops::Range;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::decision::{Decision, DecisionId, IdMap};
use crate::error::{Error, Result};
use crate::store::engine::{Conn, WriteTx};
use crate::store::tables::decisions::{get_in, insert_prepared, link_supersession, Inserter};
use crate::store::tables::graph;
use crate::store::tables::ledger::{Ledger, Recent};
use crate::store::tables::rows::PreparedRow;
use crate::store::workflows::{BATCH, FIRST_LOAD_BATCH, FIRST_LOAD_HOLD, MAX_HOLD};
use crate::uko::{UkoEdge, UkoNode};

/// When an import commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Commit {
    /// After at most [`BATCH`] records, and earlier once the transaction
    /// has held the lock for [`MAX_HOLD`] (the default): no writer waits on
    /// the import for longer than that.
    #[default]
    Bounded,
    /// After every this many records.
    Every(usize),
    /// Once, at the end: all or nothing. Other writers wait for the whole
    /// import (up to their busy timeout).
    Atomic,
}

/// Records written between two looks at the clock: on PostgreSQL a run
/// is also what one look ahead and one COPY cover (see `Inserter`), and
/// a longer one costs fewer round trips.
const RUN: usize = 32;
const RUN_POSTGRES: usize = 256;

/// What ends one transaction of an import.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limit {
    pub(crate) records: u64,
    pub(crate) hold: Option<Duration>,
}

impl Commit {
    /// The limit of a transaction; `unlogged`: it writes a first load
    /// without the log.
    pub(crate) fn limit(self, unlogged: bool) -> Limit {
        match self {
            Commit::Bounded if unlogged => Limit { records: FIRST_LOAD_BATCH as u64, hold: Some(FIRST_LOAD_HOLD) },
            Commit::Bounded => Limit { records: BATCH as u64, hold: Some(MAX_HOLD) },
            Commit::Every(n) => Limit { records: n.max(1) as u64, hold: None },
            Commit::Atomic => Limit { records: u64::MAX, hold: None },
        }
    }
}

/// How to import.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    pub commit: Commit,
}

impl ImportOptions {
    /// One transaction for the whole input ([`Commit::Atomic`]).
    pub fn atomic() -> Self {
        ImportOptions { commit: Commit::Atomic }
    }

    /// A commit after every `n` records ([`Commit::Every`]).
    pub fn every(n: usize) -> Self {
        ImportOptions { commit: Commit::Every(n) }
    }
}

/// What an import did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// Non-blank lines read.
    pub lines: u64,
    /// Records written.
    pub imported: u64,
    /// Records already stored identically.
    pub skipped: u64,
    /// Supersession links recorded.
    pub supersessions: u64,
    /// Transactions committed.
    pub batches: u64,
    /// Bytes read.
    pub bytes: u64,
}

impl std::fmt::Display for ImportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "imported {}, skipped {} already stored", self.imported, self.skipped)?;
        if self.supersessions > 0 {
            write!(f, ", {} supersession link{}", self.supersessions, if self.supersessions == 1 { "" } else { "s" })?;
        }
        write!(f, ", {} batch{} committed", self.batches, if self.batches == 1 { "" } else { "es" })
    }
}

/// Lines a worker parses at a time, and chunks read ahead of the writer.
const CHUNK: usize = 256;
const IN_FLIGHT: usize = 4;

/// Lines of one input on their way to the import's worker thread: one
/// buffer of text, so reading costs no allocation per line.
struct Work {
    source: usize,
    text: Vec<u8>,
    /// Each line's number and its bytes in `text`.
    lines: Vec<LineAt>,
    /// A read error after the last line (an endless line, a failing reader).
    error: Option<Error>,
    /// Bytes of the input read up to the end of this chunk.
    bytes: u64,
}

/// A line's number and where its bytes are in a chunk's text.
type LineAt = (u64, Range<usize>);

/// What the writer sends its worker: lines to parse, or parsed records it
/// is done with, to be freed on the thread that allocated them.
enum ToWorker<T> {
    Parse(Work),
    Free(Vec<(u64, Result<T>)>),
}

/// Parsed lines on their way back: the non-blank ones, in input order.
struct Parsed<T> {
    source: usize,
    lines: Vec<(u64, Result<T>)>,
    /// The chunk's buffers, emptied, for the writer to read the next chunk into.
    text: Vec<u8>,
    ranges: Vec<LineAt>,
    error: Option<Error>,
    bytes: u64,
}

/// Progress over all inputs: their lines and bytes, and input `current`'s other counts.
fn overall(reports: &[ImportReport], current: usize) -> ImportReport {
    let lines = reports.iter().map(|r| r.lines).sum();
    let bytes = reports.iter().map(|r| r.bytes).sum();
    ImportReport { lines, bytes, ..reports[current] }
}

/// The longest line an import reads: memory stays bounded whatever the input.
const MAX_LINE: u64 = 128 << 20;

/// Reads numbered lines of an input into chunk buffers.
struct Lines<R> {
    reader: R,
    line: u64,
    bytes: u64,
}

impl<R: BufRead> Lines<R> {
    fn new(reader: R) -> Self {
        Lines { reader, line: 0, bytes: 0 }
    }

    /// Appends the next line to `buf`; returns its 1-based number and where it is, or `None` at the end.
    fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<(u64, Range<usize>)>> {
        let start = buf.len();
        let n = self.read_line(buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        self.bytes += n;
        if n > MAX_LINE {
            buf.truncate(start);
            let error = Box::new(Error::validation("line", format!("longer than {} MiB", MAX_LINE >> 20)));
            return Err(Error::Line { line: self.line, error });
        }
        Ok(Some((self.line, start..buf.len())))
    }

    /// `read_until(b'\n')` of at most `MAX_LINE + 1` bytes, with the memchr
    /// crate's vectorised search: the standard library's took 4 % of an
    /// import's writer thread, which reads every line.
    fn read_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<u64> {
        let mut n = 0;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let room = usize::try_from(MAX_LINE + 1 - n).unwrap_or(usize::MAX).min(available.len());
            let (taken, done) = match memchr::memchr(b'\n', &available[..room]) {
                Some(i) => (i + 1, true),
                None => (room, room == 0 || n + room as u64 > MAX_LINE),
            };
            buf.extend_from_slice(&available[..taken]);
            self.reader.consume(taken);
            n += taken as u64;
            if done {
                return Ok(n);
            }
        }
    }
}

/// The text of one line, trimmed; `None` when it is blank.
fn line_text(bytes: &[u8]) -> Result<Option<&str>> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(Some(text.trim()).filter(|t| !t.is_empty())),
        Err(e) => Err(Error::validation("encoding", format!("not UTF-8 ({e})"))),
    }
}

fn at(line: u64) -> impl Fn(Error) -> Error {
    move |e| Error::Line { line, error: Box::new(e) }
}

/// The interchange JSON of a decision without its supersession link.
fn without_link(d: &Decision) -> serde_json::Value {
    let mut v = d.to_json_value();
    v["superseded_by"] = serde_json::Value::Null;
    v
}

/// Import state that outlives a batch: records waiting for a decision to arrive.
#[derive(Default)]
pub(crate) struct Pending {
    /// Missing parent or corrected id -> records waiting for it (with their line).
    waiting: IdMap<DecisionId, Vec<(u64, Decision, PreparedRow)>>,
    /// Missing superseding id -> (line, superseded id).
    links: IdMap<DecisionId, Vec<(u64, DecisionId)>>,
    /// Chain heads and counts of the open transaction.
    ledger: Option<Ledger>,
    /// The decisions inserted by the transactions committed so far.
    recent: Option<Recent>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.links.is_empty()
    }

    fn describe(&self) -> String {
        let mut items: Vec<(u64, String)> = Vec::new();
        for (missing, recs) in &self.waiting {
            for (line, d, _) in recs {
                items.push((*line, format!("line {line}: decision {} needs {missing}", d.decision_id())));
            }
        }
        for (missing, recs) in &self.links {
            for (line, old) in recs {
                items.push((*line, format!("line {line}: decision {old} is superseded by {missing}")));
            }
        }
        items.sort();
        let total = items.len();
        let mut text: Vec<String> = items.into_iter().take(20).map(|(_, s)| s).collect();
        if total > 20 {
            text.push(format!("and {} more", total - 20));
        }
        format!(
            "{total} record(s) refer to decisions that are neither in the input nor in the store: {}",
            text.join("; ")
        )
    }
}

/// What an import does with its records, around the loop of [`import`].
pub(crate) trait ImportState {
    /// A parsed record, ready to be written.
    type Item: Send;
    /// Statements prepared once for the whole import and kept across its
    /// transactions (preparing per run of lines cost 4 % of the writer).
    type Statements<'c>;
    fn statements(conn: &Conn) -> Result<Self::Statements<'_>>;
    /// Parses the record `text` of input `source`; runs on the import's
    /// worker thread, so it touches no database.
    fn prepare(source: usize, text: &str) -> Result<Self::Item>;
    /// Runs at the start of every transaction (takes its locks).
    fn begin(&mut self, tx: &WriteTx<'_>) -> Result<()>;
    /// Writes prepared records of input `source`, each with its line
    /// number, in order: a run of lines within one transaction.
    fn record<'a>(
        &mut self,
        tx: &WriteTx<'_>,
        statements: &mut Self::Statements<'_>,
        source: usize,
        items: impl Iterator<Item = (u64, &'a Self::Item)> + Clone,
        report: &mut ImportReport,
    ) -> Result<()>
    where
        Self::Item: 'a;
    /// Runs before every commit.
    fn before_commit(&mut self, tx: &WriteTx<'_>) -> Result<()>;
    /// Runs after the last line, before the last commit.
    fn finish(&self) -> Result<()> {
        Ok(())
    }
}

impl Pending {
    fn ledger(&mut self) -> &mut Ledger {
        self.ledger.as_mut().expect("begin() opened the transaction's ledger")
    }
}

impl ImportState for Pending {
    type Item = (Decision, PreparedRow);
    type Statements<'c> = Inserter<'c>;

    fn statements(conn: &Conn) -> Result<Inserter<'_>> {
        Inserter::new(conn)
    }

    fn prepare(_: usize, text: &str) -> Result<Self::Item> {
        let d = Decision::from_json(text)?;
        let row = PreparedRow::of(&d);
        Ok((d, row))
    }

    fn begin(&mut self, tx: &WriteTx<'_>) -> Result<()> {
        self.ledger = Some(Ledger::begin_after(tx, self.recent.take().unwrap_or_default())?);
        Ok(())
    }

    fn record<'a>(
        &mut self,
        tx: &WriteTx<'_>,
        insert: &mut Inserter<'_>,
        _: usize,
        items: impl Iterator<Item = (u64, &'a Self::Item)> + Clone,
        report: &mut ImportReport,
    ) -> Result<()> {
        insert.look_ahead(tx, items.clone().map(|(_, (d, _))| d))?;
        for (line, (d, row)) in items {
            self.place(tx, insert, line, d, row, report)?;
        }
        Ok(())
    }

    fn before_commit(&mut self, tx: &WriteTx<'_>) -> Result<()> {
        if let Some(ledger) = self.ledger.take() {
            // Kept for the next transaction, which begins only after this one commits.
            self.recent = Some(ledger.flush_keeping(tx)?);
        }
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(Error::validation("references", self.describe()))
        }
    }
}

/// Graph import: source 0 holds nodes, source 1 edges.
#[derive(Default)]
pub(crate) struct GraphImport {
    /// The graph's generation when the open transaction began.
    generation: i64,
    /// The generation this import's last commit left, if it committed.
    committed: Option<i64>,
    /// The keys of the nodes this import wrote or looked up: an edge's
    /// ends are looked up once. Forgotten when another writer changed the
    /// graph between two of the import's transactions.
    keys: std::collections::HashMap<String, crate::uko::NodeKey>,
}

/// A parsed line of a graph import.
pub(crate) enum GraphItem {
    Node(UkoNode),
    Edge(UkoEdge),
}

impl ImportState for GraphImport {
    type Item = GraphItem;
    type Statements<'c> = ();

    fn statements(_: &Conn) -> Result<()> {
        Ok(())
    }

    fn prepare(source: usize, text: &str) -> Result<GraphItem> {
        Ok(if source == 0 {
            GraphItem::Node(serde_json::from_str(text)?)
        } else {
            GraphItem::Edge(serde_json::from_str(text)?)
        })
    }

    fn begin(&mut self, tx: &WriteTx<'_>) -> Result<()> {
        self.generation = graph::lock(tx)?;
        if self.committed != Some(self.generation) {
            self.keys.clear();
        }
        Ok(())
    }

    fn record<'a>(
        &mut self,
        tx: &WriteTx<'_>,
        _: &mut (),
        _: usize,
        items: impl Iterator<Item = (u64, &'a GraphItem)> + Clone,
        report: &mut ImportReport,
    ) -> Result<()> {
        // A run holds one source's lines: nodes or edges, written together.
        let lines: Vec<u64> = items.clone().map(|(line, _)| line).collect();
        let (nodes, edges): (Vec<&UkoNode>, Vec<&UkoEdge>) =
            items.fold((Vec::new(), Vec::new()), |(mut n, mut e), (_, item)| {
                match item {
                    GraphItem::Node(node) => n.push(node),
                    GraphItem::Edge(edge) => e.push(edge),
                }
                (n, e)
            });
        graph::write_nodes(tx, &nodes, &mut self.keys).map_err(|(i, e)| at(lines[i])(e))?;
        graph::write_edges(tx, &edges, &mut self.keys).map_err(|(i, e)| at(lines[i])(e))?;
        report.imported += lines.len() as u64;
        Ok(())
    }

    fn before_commit(&mut self, tx: &WriteTx<'_>) -> Result<()> {
        self.committed = Some(graph::bump(tx, self.generation)?);
        Ok(())
    }
}

impl Pending {
    /// Stores one record and everything that was waiting for it.
    fn place(
        &mut self,
        tx: &WriteTx<'_>,
        insert: &mut Inserter<'_>,
        line: u64,
        d: &Decision,
        row: &PreparedRow,
        report: &mut ImportReport,
    ) -> Result<()> {
        if let Some(missing) = self.place_one(tx, insert, line, d, row, report)? {
            self.waiting.entry(missing).or_default().push((line, d.clone(), row.clone()));
            return Ok(());
        }
        let mut queue = self.waiting.remove(&d.decision_id()).unwrap_or_default();
        while let Some((line, d, row)) = queue.pop() {
            match self.place_one(tx, insert, line, &d, &row, report)? {
                Some(missing) => self.waiting.entry(missing).or_default().push((line, d, row)),
                None => queue.extend(self.waiting.remove(&d.decision_id()).unwrap_or_default()),
            }
        }
        Ok(())
    }

    /// Stores one record and its supersession links; returns the decision it
    /// waits for when its parent or corrected decision is not stored yet.
    fn place_one(
        &mut self,
        tx: &WriteTx<'_>,
        insert: &mut Inserter<'_>,
        line: u64,
        d: &Decision,
        row: &PreparedRow,
        report: &mut ImportReport,
    ) -> Result<Option<DecisionId>> {
        let id = d.decision_id();
        match insert_prepared(tx, insert, self.ledger(), d, row) {
            Ok(()) => report.imported += 1,
            Err(Error::MissingReference {
                field: "parent_decision_id" | "corrects_decision_id", id: missing, ..
            }) => {
                return DecisionId::parse(&missing).map(Some).map_err(at(line));
            }
            // SQLite may report the (plan, sequence) constraint before the primary key.
            Err(e @ (Error::DuplicateDecision(_) | Error::DuplicateSequence { .. })) => {
                let Some(stored) = get_in(tx, id)? else { return Err(at(line)(e)) };
                if without_link(&stored) != without_link(d) {
                    return Err(at(line)(Error::DuplicateDecision(format!("{id} (stored with different content)"))));
                }
                if let (Some(a), Some(b)) = (stored.superseded_by(), d.superseded_by()) {
                    if a != b {
                        return Err(at(line)(Error::AlreadySuperseded { id: id.to_string(), by: a.to_string() }));
                    }
                }
                report.skipped += 1;
            }
            Err(e) => return Err(at(line)(e)),
        }
        if let Some(new) = d.superseded_by() {
            self.link(tx, line, id, new, report)?;
        }
        // Links that waited for this decision as the superseding end.
        for (l, old) in self.links.remove(&id).unwrap_or_default() {
            self.link(tx, l, old, id, report)?;
        }
        Ok(None)
    }

    fn link(
        &mut self,
        tx: &WriteTx<'_>,
        line: u64,
        old: DecisionId,
        new: DecisionId,
        report: &mut ImportReport,
    ) -> Result<()> {
        match link_supersession(tx, self.ledger(), old, new) {
            Ok(true) => report.supersessions += 1,
            Ok(false) => {}
            Err(Error::MissingReference { field: "superseded_by", .. }) => {
                self.links.entry(new).or_default().push((line, old))
            }
            Err(e) => return Err(at(line)(e)),
        }
        Ok(())
    }
}

/// The loop of every import: one record per non-blank line of each
/// source in turn, a commit every [`Commit::bound`] records (or once for
/// all sources), progress every 10,000 lines. When `finish` fails at the
/// end, the batches committed stay and what the last one holds is
/// committed too, unless the import is atomic: then nothing is written.
/// `first_load`: the store is an empty file, which the import may load
/// without the write-ahead log (see `Bulk`).
///
/// Two threads: this one reads lines and writes records; a worker parses
/// chunks of lines (`ImportState::prepare`) meanwhile. Records are written
/// in input order, and the first error in input order ends the import.
pub(crate) fn import<S: ImportState, const N: usize>(
    conn: &Conn,
    first_load: bool,
    sources: [(&'static str, &mut dyn BufRead); N],
    options: ImportOptions,
    progress: &mut impl FnMut(&ImportReport),
    state: &mut S,
) -> Result<[ImportReport; N]> {
    let names = sources.each_ref().map(|(name, _)| *name);
    let name_it = |source: usize| {
        move |e: Error| if N > 1 { Error::Input { name: names[source], error: Box::new(e) } } else { e }
    };
    let mut readers: Vec<Lines<&mut dyn BufRead>> = sources.into_iter().map(|(_, r)| Lines::new(r)).collect();
    let mut reports = [ImportReport::default(); N];

    std::thread::scope(|scope| -> Result<[ImportReport; N]> {
        let bulk = conn.bulk(first_load);
        let mut tx = bulk.begin()?;
        state.begin(&tx)?;
        let (mut limit, mut began) = (options.commit.limit(bulk.is_unlogged()), Instant::now());
        // Declared after `tx`, so dropped (finalized) before it.
        let mut statements = S::statements(conn)?;
        let run_length = conn.dialect().pick(RUN, RUN_POSTGRES);
        let mut in_batch = 0u64;
        // The source whose record opened the current batch is credited with its commit.
        let mut owner = 0;
        // Unbounded, but never long: the writer sends at most IN_FLIGHT
        // chunks to parse, and one batch to free for each chunk it took back.
        let (work_tx, work_rx) = mpsc::channel::<ToWorker<S::Item>>();
        let (done_tx, done_rx) = mpsc::sync_channel::<Parsed<S::Item>>(IN_FLIGHT);
        scope.spawn(move || {
            for message in work_rx {
                let work = match message {
                    ToWorker::Parse(work) => work,
                    ToWorker::Free(records) => {
                        drop(records);
                        continue;
                    }
                };
                let Work { source, mut text, lines: mut ranges, error, bytes } = work;
                let lines = ranges
                    .drain(..)
                    .filter_map(|(line, range)| match line_text(&text[range]) {
                        Ok(None) => None,
                        Ok(Some(text)) => Some((line, S::prepare(source, text))),
                        Err(e) => Some((line, Err(e))),
                    })
                    .collect();
                text.clear();
                let done = Parsed { source, lines, text, ranges, error, bytes };
                if done_tx.send(done).is_err() {
                    break;
                }
            }
        });
        let (mut reading, mut in_flight) = (0usize, 0usize);
        // Buffers come back with parsed chunks and are read into again:
        // fresh ones would cost the writer page faults on every chunk.
        let mut spare: Vec<(Vec<u8>, Vec<LineAt>)> = Vec::new();
        loop {
            // Keep the worker busy: up to IN_FLIGHT chunks read ahead.
            while in_flight < IN_FLIGHT && reading < N {
                let lines = &mut readers[reading];
                let (text, ranges) =
                    spare.pop().unwrap_or_else(|| (Vec::with_capacity(1 << 16), Vec::with_capacity(CHUNK)));
                let mut work = Work { source: reading, text, lines: ranges, error: None, bytes: 0 };
                while work.lines.len() < CHUNK {
                    match lines.read_into(&mut work.text) {
                        Ok(Some(line)) => work.lines.push(line),
                        Ok(None) => {
                            reading += 1;
                            break;
                        }
                        Err(e) => {
                            work.error = Some(e);
                            reading = N; // read no further: this error ends the import
                            break;
                        }
                    }
                }
                work.bytes = lines.bytes;
                work_tx.send(ToWorker::Parse(work)).expect("the worker runs until its queue closes");
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            let mut chunk = done_rx.recv().expect("the worker answers every chunk");
            in_flight -= 1;
            spare.push((std::mem::take(&mut chunk.text), std::mem::take(&mut chunk.ranges)));
            let source = chunk.source;
            // The first line that did not parse: the import ends there.
            let bad = chunk.lines.iter().position(|(_, item)| item.is_err());
            let mut start = 0;
            while start < chunk.lines.len() {
                if in_batch == 0 {
                    owner = source;
                }
                // A run ends at the next commit, at a line that did not parse, or with the chunk.
                let mut room = usize::try_from(limit.records - in_batch).unwrap_or(usize::MAX);
                if limit.hold.is_some() {
                    room = room.min(run_length);
                }
                let end = bad.unwrap_or(chunk.lines.len()).min(start.saturating_add(room));
                let run = &chunk.lines[start..end];
                let before = reports[source].lines;
                reports[source].lines += run.len() as u64;
                let items = run.iter().map(|(line, item)| (*line, item.as_ref().expect("a run holds parsed lines")));
                state.record(&tx, &mut statements, source, items, &mut reports[source]).map_err(name_it(source))?;
                in_batch += run.len() as u64;
                if in_batch == limit.records || limit.hold.is_some_and(|h| began.elapsed() >= h) {
                    state.before_commit(&tx)?;
                    tx.commit()?;
                    reports[owner].batches += 1;
                    in_batch = 0;
                    bulk.between();
                    tx = bulk.begin()?;
                    state.begin(&tx)?;
                    (limit, began) = (options.commit.limit(bulk.is_unlogged()), Instant::now());
                }
                if bad == Some(end) {
                    let (line, item) = chunk.lines.swap_remove(end);
                    let e = item.err().expect("found as an error");
                    return Err(name_it(source)(at(line)(e)));
                }
                if before / 10_000 != reports[source].lines / 10_000 {
                    reports[source].bytes = chunk.bytes;
                    progress(&overall(&reports, source));
                }
                start = end;
            }
            reports[source].bytes = chunk.bytes;
            if let Some(e) = chunk.error {
                return Err(name_it(source)(e));
            }
            // The worker allocated these records; it frees them faster than this thread.
            let _ = work_tx.send(ToWorker::Free(chunk.lines));
        }
        if let Err(e) = state.finish() {
            if options.commit != Commit::Atomic && in_batch > 0 {
                state.before_commit(&tx)?;
                tx.commit()?;
            }
            return Err(e);
        }
        state.before_commit(&tx)?;
        tx.commit()?;
        if in_batch > 0 || reports.iter().all(|r| r.batches == 0) {
            reports[owner].batches += 1;
        }
        progress(&overall(&reports, owner));
        Ok(reports)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line as `read_into` cuts it, through a reader buffer of `capacity` bytes.
    fn lines(input: &[u8], capacity: usize) -> Vec<(u64, Vec<u8>)> {
        let mut lines = Lines::new(std::io::BufReader::with_capacity(capacity, input));
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some((n, range)) = lines.read_into(&mut buf).unwrap() {
            out.push((n, buf[range].to_vec()));
        }
        assert_eq!(lines.bytes, input.len() as u64, "every byte is counted");
        out
    }

    #[test]
    fn lines_are_cut_after_each_newline_across_buffer_refills() {
        let input = b"{\"a\":1}\n\r\n\nlast line without a newline";
        for capacity in [1, 2, 3, 7, 8, 64] {
            let got = lines(input, capacity);
            let want: Vec<(u64, Vec<u8>)> = vec![
                (1, b"{\"a\":1}\n".to_vec()),
                (2, b"\r\n".to_vec()),
                (3, b"\n".to_vec()),
                (4, b"last line without a newline".to_vec()),
            ];
            assert_eq!(got, want, "capacity {capacity}");
        }
        assert!(lines(b"", 8).is_empty());
        assert_eq!(lines(b"\n", 8), vec![(1, b"\n".to_vec())]);
    }
}
