//! A tree's git history into `co_changed` edges (the last step of
//! `Store::ingest`): see `ingest::history` for what is read and how a
//! commit is weighed.
//!
//! ## Locking
//!
//! `git log` runs outside any transaction, on a thread of its own that
//! starts with the ingest (it reads while the tree is parsed). The links
//! are then written a
//! run of whole commits per transaction, at most [`BOUND`] rows or
//! [`MAX_HOLD`] each, and every transaction records the last commit it
//! wrote (`code_history`): an ingest that stops part-way leaves the links
//! of a prefix of the history, and the next one reads on from there, so
//! no commit is counted twice or lost. A transaction that links files
//! bumps the graph's generation without unsettling `ingest`'s resolution
//! of the code relations, which the links do not touch. Each transaction
//! first checks that the stored history is the one it continues: when
//! another ingest moved it on meanwhile, this one reads again from there
//! rather than count a commit twice.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::ingest::history::{self, History, NoHistory, MAX_COMMIT_FILES, TAU};
use crate::ingest::HistoryReport;
use crate::store::engine::Conn;
use crate::store::tables::{graph, history as table};
use crate::store::workflows::ingest::BOUND;
use crate::store::workflows::MAX_HOLD;

/// How far the clock may run ahead of the weights' base, in units of
/// [`TAU`], before the base moves on and every weight is scaled down
/// (e^200 is far from a float's limit, and far above any one weight).
const RESCALE_AFTER: f64 = 200.0;

/// One commit's links between file nodes: (commit, the clock after it, the
/// weights' base, the links (a, b, weight)).
type Run = (String, u64, u64, Vec<(i64, i64, f64)>);

/// The history as stored when reading began, and what `git log` read from there.
pub(crate) struct Reading {
    state: Option<table::State>,
    read: std::result::Result<History, NoHistory>,
}

/// Starts reading the commits after the one read last, on a thread of its
/// own, so that `git log` runs while the tree is parsed and written.
pub(crate) fn start(conn: &Conn, root: &Path) -> Result<std::thread::JoinHandle<Reading>> {
    let state = table::state(conn)?;
    let root = root.to_owned();
    std::thread::Builder::new().name("dstore-git-log".into()).spawn(move || read_from(&root, state)).map_err(Error::Io)
}

/// The commits after `state`'s last one (all of them when there is none).
fn read_from(root: &Path, state: Option<table::State>) -> Reading {
    let read = history::read(root, state.as_ref().map(|s| s.head.as_str()));
    Reading { state, read }
}

/// Reads the commits after the one read last into `co_changed` links
/// between the tree's ingested files: `reading` ([`start`]ed before), then
/// again from what is stored whenever another ingest moved the history on
/// meanwhile (its transactions check), a few times at most.
pub(crate) fn update(
    conn: &Conn,
    root: &Path,
    reading: std::thread::JoinHandle<Reading>,
    report: &mut HistoryReport,
) -> Result<()> {
    let mut reading = reading.join().map_err(|_| Error::storage("reading the git history panicked"))?;
    for _ in 0..ROUNDS {
        *report = HistoryReport::default();
        if apply(conn, reading, report)? {
            return Ok(());
        }
        reading = read_from(root, table::state(conn)?);
    }
    Err(Error::Busy)
}

/// How often [`update`] reads again after another ingest moved the history on.
const ROUNDS: usize = 4;

/// Writes what `reading` read. False when another writer moved the stored
/// history on since it was read: nothing more is written then.
fn apply(conn: &Conn, reading: Reading, report: &mut HistoryReport) -> Result<bool> {
    let Reading { state, read } = reading;
    let read = match read {
        Ok(read) => read,
        Err(NoHistory(why)) => {
            report.none = Some(why);
            return Ok(true);
        }
    };
    report.head = Some(read.head.clone());
    report.restarted = read.restarted;
    if read.commits.is_empty() && !read.restarted && state.as_ref().is_some_and(|s| s.head == read.head) {
        return Ok(true);
    }
    report.commits = read.commits.len() as u64;
    let (mut clock, mut base) = match &state {
        Some(s) if !read.restarted => (s.clock, s.base),
        _ => (0, 0),
    };
    let files = table::file_nodes(conn)?;
    let mut runs: Vec<Run> = Vec::with_capacity(read.commits.len());
    let mut rescales: HashMap<usize, f64> = HashMap::new();
    for (id, changed) in &read.commits {
        clock += 1;
        let mut mine: Vec<i64> =
            changed.iter().filter_map(|path| files.get(&format!("project://{path}")).copied()).collect();
        mine.sort_unstable();
        mine.dedup();
        let mut links = Vec::new();
        if changed.len() > MAX_COMMIT_FILES || mine.len() < 2 {
            report.skipped += 1;
        } else {
            if (clock - base) as f64 / TAU > RESCALE_AFTER {
                rescales.insert(runs.len(), (-((clock - base) as f64) / TAU).exp());
                base = clock;
            }
            let w = history::weight(clock, base, mine.len());
            for (i, &a) in mine.iter().enumerate() {
                for &b in &mine[i + 1..] {
                    links.push((a, b, w));
                }
            }
        }
        runs.push((id.clone(), clock, base, links));
    }
    let mut next = 0;
    let mut first = true;
    // The stored history each transaction expects to find: what the reading
    // started from, then what the previous transaction left.
    let mut expected = state.clone();
    while first || next < runs.len() {
        let tx = conn.begin_write()?;
        let generation = graph::lock(&tx)?;
        if table::state(&tx)? != expected {
            // Another ingest read the history meanwhile.
            return Ok(false);
        }
        if first && (read.restarted || state.is_none()) {
            table::clear(&tx)?;
        }
        first = false;
        let (mut rows, began) = (0usize, Instant::now());
        let mut last = None;
        while next < runs.len() && (rows == 0 || (rows + 2 * runs[next].3.len() <= BOUND && began.elapsed() < MAX_HOLD))
        {
            if let Some(&factor) = rescales.get(&next) {
                table::scale(&tx, factor)?;
            }
            let (_, _, _, links) = &runs[next];
            table::add_links(&tx, links)?;
            rows += 2 * links.len() + 1;
            report.links += links.len() as u64;
            last = Some(next);
            next += 1;
        }
        let (head, clock, base) = match last {
            Some(i) => (runs[i].0.clone(), runs[i].1, runs[i].2),
            // Nothing new: HEAD is the commit read last, or the history read afresh is empty.
            None => (read.head.clone(), clock, base),
        };
        // The head recorded is the last commit written, HEAD once all are.
        let head = if next == runs.len() { read.head.clone() } else { head };
        let now = table::State { head, clock, base };
        table::set_state(&tx, &now)?;
        graph::bump_resolved(&tx, generation)?;
        tx.commit()?;
        expected = Some(now);
    }
    Ok(true)
}
