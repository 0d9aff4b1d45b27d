//! The store: one SQLite file (or one PostgreSQL database) holds the
//! decision log and the UKO graph.
//!
//! [`Store::open`] creates or opens a file and brings its schema up to
//! date; [`Store::open_read_only`] never writes and never creates a file;
//! [`Store::connect`] does the same on a PostgreSQL server. Nothing of
//! either engine shows in the public API, which speaks domain types only.
//!
//! ## Floors
//!
//! The code is in three floors under this module's `Store` API, and each
//! imports only from the floors below it:
//!
//! | floor | what | where |
//! |---|---|---|
//! | API | `Store`: open, and thin public methods that begin a transaction and call below | `mod.rs`, `open.rs`, `schema.rs`, `api/` |
//! | workflows | the JSONL import pipeline, ingest's plan and apply, copy | `workflows/` |
//! | tables | one module of queries per table group, each write over an explicit [`WriteTx`](engine::WriteTx) | `tables/` |
//! | engine | SQLite and PostgreSQL connections, transactions, statements, binding, error mapping | `engine/` |
//!
//! ## Locking
//!
//! SQLite files are in WAL mode: readers never block writers and see whole
//! transactions only. Every write transaction starts with `BEGIN
//! IMMEDIATE`, which takes the file's one write lock; a writer that finds
//! it taken polls every half millisecond for up to 5 s, then fails with
//! [`Error::Busy`]. On PostgreSQL, writers of the decision log queue on the
//! `store_log` row and writers of the graph on the `graph_state` row, each
//! for 5 s at most, so a graph write never waits for a decision's, nor the
//! other way round.
//!
//! No transaction the library opens holds its lock for long:
//!
//! - a single insert, supersession or graph upsert is one short transaction;
//! - [`Store::insert_many`] is one transaction for the batch the caller
//!   hands over (all or nothing, as documented there): hand over a few
//!   thousand decisions at a time;
//! - an import commits every [`BATCH`] records, or earlier once it has
//!   held the lock for [`MAX_HOLD`], unless asked to be atomic
//!   ([`Commit::Atomic`]), and leaves the lock free for a moment between
//!   two batches;
//! - an ingest parses outside any transaction and writes at most
//!   `INGEST_BOUND` rows per transaction, or [`MAX_HOLD`]'s worth;
//! - a copy writes its destination in batches as an import does.
//!
//! The one exception is the first load into an empty store file that no
//! other connection has open (see `engine::Bulk`): it is written without
//! the log, under the file's exclusive lock, which readers wait for too,
//! one batch at a time. A `Store` is one connection: use one per thread.
//!
//! ## Transactions
//!
//! Every transaction begins in one of these places, and nowhere else
//! (`Conn::begin_write`, `Conn::begin_read` and `Bulk::begin` are the
//! engine's three ways in):
//!
//! | where | what | kind |
//! |---|---|---|
//! | `Store::write_log` (`mod.rs`) | a write of the decision log (insert, supersede) with its ledger; once more on a fresh connection when one was lost before the commit | write |
//! | `Store::write_log_bulk` (`mod.rs`) | an import's batches; a first load into an empty file without the log | bulk |
//! | `Store::settle` (`mod.rs`) | after a lost COMMIT: the ledger looked up under the log's lock | write |
//! | `Store::write_graph` (`mod.rs`) | a graph write (upsert, add edges, remove), its generation bumped | write |
//! | `Store::read_snapshot` (`mod.rs`) | any read that must see one state (inside a transaction already open, none) | read |
//! | `Store::connect`, `Store::connect_read_only` (`open.rs`) | a server's identification and migration under its lock; the read-only one's questions | write, read |
//! | `schema::migrate` (`schema.rs`) | a file's migrations, one transaction each | write |
//! | `Store::insert_each` (`api/decisions.rs`) | a group commit: each attempt one transaction | write |
//! | `workflows::import` | an import's batches (through `Bulk`) | bulk |
//! | `workflows::ingest` | the graph's state read before parsing; the plan applied in bounded batches | read, bulk |
//! | `workflows::history` | the git history's links, in bounded transactions | write |
//! | `workflows::copy` | the destination's batches; its digest read at the end | bulk, read |
//!
//! ## Performance
//!
//! Statements are prepared once and cached per connection. Plan reads are
//! one query per table, and graph traversal asks for a whole BFS frontier
//! per query (see `tables::graph`).

mod api;
pub(crate) mod engine;
mod open;
mod schema;
pub(crate) mod tables;
pub(crate) mod workflows;

use std::path::Path;

use crate::decision::{Decision, DecisionId};
use crate::error::{Error, Location, Result};
use engine::{Conn, WriteTx};
use tables::ledger::{LastEntry, Ledger};

pub use api::limits;
pub use engine::server::{Replication, StandbyState};
pub use schema::supported_schema_version;
pub use tables::check::{Problem, ProblemKind};
pub use tables::decisions::{DecisionCounts, Digest, PlanSummary, PlanTypeCounts, GOAL_CHARS};
pub use tables::graph::{GraphCounts, Neighbour};
pub use tables::integrity::{Anchor, AnchorScope};
pub use tables::redactions::{Redaction, FIELDS as REDACTABLE, MARKER as REDACTED};
pub use tables::rows::PreparedDecision;
pub use workflows::copy::CopyReport;
pub use workflows::import::{Commit, ImportOptions, ImportReport};
#[cfg(feature = "ingest")]
pub use workflows::ingest::BOUND as INGEST_BOUND;
pub use workflows::{BATCH, MAX_HOLD};

/// Where [`Store::insert_each`] puts a decision in its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// At the sequence the decision carries ([`Store::insert`]).
    AsGiven,
    /// At its plan's next sequence, read inside the write ([`Store::insert_next`]).
    Next,
}

/// A decision for [`Store::insert_each`]: where it goes in its plan, and
/// the stored decision it replaces, if any: the decision and the
/// supersession link are stored together or not at all.
#[derive(Clone, Debug, PartialEq)]
pub struct Insertion {
    pub decision: Decision,
    pub placement: Placement,
    /// A decision of the same plan that this one supersedes.
    pub supersedes: Option<DecisionId>,
}

impl From<(Decision, Placement)> for Insertion {
    fn from((decision, placement): (Decision, Placement)) -> Self {
        Insertion { decision, placement, supersedes: None }
    }
}

/// A decision store on one connection: a SQLite file, or a PostgreSQL database.
pub struct Store {
    conn: Conn,
    location: Location,
    read_only: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("location", &self.location).field("read_only", &self.read_only).finish()
    }
}

impl Store {
    fn new(conn: Conn, location: Location, read_only: bool) -> Store {
        Store { conn, location, read_only }
    }

    /// The PostgreSQL server's version (`SHOW server_version`); `None` for SQLite.
    ///
    /// # Errors
    /// [`Error::Storage`] when the server does not answer.
    pub fn server_version(&self) -> Result<Option<String>> {
        engine::server::version(&self.conn)
    }

    /// Where the server this store is connected to stands in streaming
    /// replication: on a standby, how far its replay is behind; on a
    /// primary, each standby's state and lag. `None` for a file.
    ///
    /// # Errors
    /// [`Error::Storage`] when the server's views cannot be read.
    pub fn replication(&self) -> Result<Option<Replication>> {
        engine::server::replication(&self.conn)
    }

    /// The SQLite library version in use.
    pub fn sqlite_version() -> &'static str {
        engine::sqlite::version()
    }

    /// Sets this connection's page cache (SQLite's `cache_size`) to `kib` KiB.
    ///
    /// A long-lived store gains from a large cache, and writable stores open
    /// with 8 MiB. A one-shot reader that reads each page once is faster
    /// with a small one, which it does not have to fill with fresh memory:
    /// the `dstore` commands read with 256 KiB (a 5,000-decision plan's tree
    /// in 13.5 ms instead of 15.9 ms with SQLite's default 2 MiB).
    ///
    /// # Errors
    /// [`Error::Storage`] if SQLite refuses the setting.
    pub fn set_cache_kib(&self, kib: u32) -> Result<()> {
        match self.conn.sqlite() {
            Some(c) => engine::sqlite::set_cache_kib(c, kib),
            // The server's buffers are the server's.
            None => Ok(()),
        }
    }

    /// Where the store lives: its file, memory, or its server.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The file behind the store (`None` in memory and on PostgreSQL).
    pub fn path(&self) -> Option<&Path> {
        match &self.location {
            Location::File(p) => Some(p),
            _ => None,
        }
    }

    /// The server behind a PostgreSQL store, as `postgres://user@host:port/db`
    /// (no password); `None` for SQLite.
    pub fn url(&self) -> Option<&str> {
        match &self.location {
            Location::Server(url) => Some(url),
            _ => None,
        }
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.conn.dialect().pick("sqlite", "postgres")
    }

    /// True when opened with [`Store::open_read_only`] or [`Store::connect_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// What to call the store in messages: its file's path as given, or
    /// the server's URL without a password.
    pub fn display_name(&self) -> String {
        self.location.to_string()
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Runs `f` in a write transaction that extends the log, with the
    /// transaction's [`Ledger`]; writes the ledger and commits when `f`
    /// returns `Ok`, rolls back otherwise. On a server, a write whose
    /// connection is lost runs once more on a fresh one when it provably
    /// did not commit (see [`Store::settle`]).
    fn write_log<T>(&mut self, mut f: impl FnMut(&WriteTx<'_>, &mut Ledger) -> Result<T>) -> Result<T> {
        self.writable()?;
        self.once_more(|store| {
            let tx = store.conn.begin_write()?;
            Self::log_in(&store.conn, tx, &mut f)
        })
    }

    /// [`Store::write_log`] for a bulk load: the first load into an empty
    /// file may leave the log (see `engine::Bulk`). Its rows are not kept,
    /// so it does not run again: a lost connection is the caller's error.
    fn write_log_bulk<T>(&mut self, f: impl FnOnce(&WriteTx<'_>, &mut Ledger) -> Result<T>) -> Result<T> {
        self.writable()?;
        let bulk = self.conn.bulk(self.is_first_load()?);
        let tx = bulk.begin()?;
        Self::log_in(&self.conn, tx, f)
    }

    fn log_in<T>(conn: &Conn, tx: WriteTx<'_>, f: impl FnOnce(&WriteTx<'_>, &mut Ledger) -> Result<T>) -> Result<T> {
        let mut ledger = Ledger::begin(&tx)?;
        let out = f(&tx, &mut ledger)?;
        let last = ledger.last_entry();
        ledger.flush(&tx)?;
        Self::settle(conn, tx.commit(), last)?;
        Ok(out)
    }

    /// The outcome of a commit. When the connection was lost after the
    /// COMMIT went out, the ledger tells what happened: on a fresh
    /// connection (after a failover, to the new primary) the transaction's
    /// last entry is looked up at its place in its chain, under the log's lock. Found: it
    /// committed. Not found: it did not, which is [`Error::ConnectionLost`]
    /// (nothing stored; the write may run again). When the lookup cannot be
    /// made either, [`Error::OutcomeUnknown`] names the decision to look at.
    fn settle(conn: &Conn, committed: Result<()>, last: Option<LastEntry>) -> Result<()> {
        let Err(Error::OutcomeUnknown { url, reason, .. }) = committed else { return committed };
        // The transaction wrote no entry: nothing to look for.
        let Some(last) = last else { return Ok(()) };
        // Under the log's lock: a session of the old connection that is still
        // committing (the server alive, the network cut) holds it until it is done.
        let look = || {
            conn.reconnect()?;
            let tx = conn.begin_write()?;
            Ledger::begin(&tx)?;
            tables::ledger::entry_stored(&tx, &last)
        };
        match look() {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::ConnectionLost { url, reason }),
            Err(_) => Err(Error::OutcomeUnknown {
                url,
                reason,
                check: format!("check with `dstore show {}` once the server answers", last.decision),
            }),
        }
    }

    /// Runs `f`; on a server, once more on a fresh connection when the
    /// connection was lost and nothing of `f` was stored.
    fn once_more<T>(&mut self, mut f: impl FnMut(&mut Store) -> Result<T>) -> Result<T> {
        match f(self) {
            Err(Error::ConnectionLost { .. }) if self.conn.is_postgres() => {
                self.conn.reconnect()?;
                f(self)
            }
            other => other,
        }
    }

    /// Runs `f` in a write transaction of the graph: locked, and marked
    /// changed (its generation bumped) before the commit; once more on a
    /// fresh connection when a server's connection is lost before the commit.
    fn write_graph<T>(&mut self, mut f: impl FnMut(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.writable()?;
        self.once_more(|store| {
            let tx = store.conn.begin_write()?;
            let generation = tables::graph::lock(&tx)?;
            let out = f(&tx)?;
            tables::graph::bump(&tx, generation)?;
            tx.commit().map_err(|e| match e {
                Error::OutcomeUnknown { url, reason, .. } => Error::OutcomeUnknown {
                    url,
                    reason,
                    check: "`dstore info` shows the graph's counts; writing the same nodes and edges again is harmless"
                        .into(),
                },
                e => e,
            })?;
            Ok(out)
        })
    }

    /// True for a store file that holds nothing yet (no decision, no
    /// supersession, no graph node): a bulk load may then write it without
    /// the log.
    fn is_first_load(&self) -> Result<bool> {
        if self.read_only || self.path().is_none() || self.conn.is_postgres() {
            return Ok(false);
        }
        tables::is_empty(&self.conn)
    }

    /// Runs `f` in one read transaction, so that its statements see one state
    /// of the store (inside a transaction already open, it just runs `f`).
    ///
    /// # Errors
    /// The error of `f`, or [`Error::Storage`] when the transaction cannot start.
    pub fn read_snapshot<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        if self.conn.in_transaction() {
            return f(self);
        }
        let tx = self.conn.begin_read()?;
        let out = f(self);
        tx.commit()?;
        out
    }

    /// SQLite's `integrity_check` and `foreign_key_check`: one line per
    /// problem (none on PostgreSQL, which checks its pages and enforces
    /// every `REFERENCES` itself).
    ///
    /// # Errors
    /// [`Error::Storage`] when the checks cannot run.
    pub fn storage_problems(&self) -> Result<Vec<String>> {
        match self.conn.sqlite() {
            Some(c) => engine::sqlite::integrity_problems(c),
            None => Ok(Vec::new()),
        }
    }

    /// Every problem in the file; an empty list means the store is sound.
    ///
    /// Runs in one read transaction, so it sees one state of the file
    /// however much other processes write meanwhile.
    ///
    /// # Errors
    /// [`Error::Storage`] when the checks themselves cannot run.
    pub fn check(&self) -> Result<Vec<Problem>> {
        self.check_against(&[])
    }

    /// [`Store::check`], and also that the store extends each anchored digest
    /// (as `dstore digest` printed it earlier): a mismatch is a
    /// [`ProblemKind::AnchorMismatch`].
    ///
    /// # Errors
    /// [`Error::Storage`] when the checks themselves cannot run.
    pub fn check_against(&self, anchors: &[Anchor]) -> Result<Vec<Problem>> {
        let run = || self.read_snapshot(|store| tables::check::run(&store.conn, anchors));
        // check reads every table several times: a 32 MiB cache for its
        // duration halves its time on 100k decisions (7.1 s -> 3.8 s), and
        // its log walk sorts every entry in memory, not in temp files (4 s
        // of system time on 100k decisions).
        match self.conn.sqlite() {
            Some(c) => engine::sqlite::with_large_cache(c, run),
            None => run(),
        }
    }

    /// Copies this whole store (decisions, supersessions, the graph and
    /// ingest's references) into `dst`, which must be empty: SQLite into
    /// PostgreSQL and back. Reads one snapshot of this store; writes in
    /// batches, and checks at the end that both stores have the same digest.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `destination` when `dst` is not empty;
    /// [`Error::DigestMismatch`] when the digests differ (a source whose rows
    /// were changed outside the library: run `dstore check` on it); the
    /// errors of reading and writing.
    pub fn copy_into(&self, dst: &mut Store, mut progress: impl FnMut(&CopyReport)) -> Result<CopyReport> {
        dst.writable()?;
        dst.read_snapshot(|dst| workflows::copy::check_empty(&dst.conn))?;
        let first_load = dst.is_first_load()?;
        self.read_snapshot(|src| workflows::copy::copy(&src.conn, &dst.conn, first_load, &mut progress))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module of the store that `file` (relative to `src/`) is, as `store::engine::sqlite`.
    fn module_of(file: &str) -> String {
        let path = file.trim_end_matches(".rs").trim_end_matches("/mod");
        path.replace('/', "::")
    }

    /// The floor of a module: 0 engine, 1 tables, 2 workflows, 3 the API.
    fn floor(module: &str) -> usize {
        ["store::engine", "store::tables", "store::workflows"]
            .iter()
            .position(|f| module == *f || module.starts_with(&format!("{f}::")))
            .unwrap_or(3)
    }

    /// The first path segments that follow each `prefix` in `code`:
    /// `a` of `prefix a::b`, and `a`, `b` of `prefix {a::x, b}`.
    fn segments_after<'c>(code: &'c str, prefix: &str) -> Vec<&'c str> {
        let mut out = Vec::new();
        let word = |s: &'c str| -> &'c str {
            let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
            &s[..end]
        };
        for (at, _) in code.match_indices(prefix) {
            let rest = &code[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            out.push(word(group[start..].trim_start()));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.push(word(group[start..].trim_start()));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            } else {
                out.push(word(rest));
            }
        }
        out.retain(|s| !s.is_empty());
        out
    }

    /// `src/store/` imports only downwards (engine <- tables <- workflows <-
    /// the API), the engine nothing of the crate but its errors, and no
    /// module imports one that imports it back: checked on the source.
    #[test]
    fn the_store_imports_only_downwards_and_has_no_cycle() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        let mut dirs = vec![src.join("store")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path.strip_prefix(&src).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let modules: std::collections::HashSet<String> = files.iter().map(|f| module_of(f)).collect();
        let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
        for file in &files {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            // The code before the tests, without comments.
            let code: String = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap()
                .lines()
                .map(|l| l.split("//").next().unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            let module = module_of(file);
            let parent = module.rsplit_once("::").map_or("", |(p, _)| p).to_owned();
            let mut targets = Vec::new();
            for seg in segments_after(&code, "super::") {
                // A sibling module, or an item of the parent module.
                let sibling = format!("{parent}::{seg}");
                targets.push(if modules.contains(&sibling) { sibling } else { parent.clone() });
            }
            for seg in segments_after(&code, "crate::store::") {
                let top = format!("store::{seg}");
                let deeper = code
                    .match_indices(&format!("crate::store::{seg}::"))
                    .flat_map(|(at, _)| segments_after(&code[at..], &format!("crate::store::{seg}::")))
                    .map(|s| format!("{top}::{s}"))
                    .filter(|m| modules.contains(m))
                    .collect::<Vec<_>>();
                if deeper.is_empty() {
                    targets.push(if modules.contains(&top) { top } else { "store".into() });
                }
                targets.extend(deeper);
            }
            if floor(&module) == 0 {
                for seg in segments_after(&code, "crate::") {
                    assert!(seg == "error" || seg == "store", "{file}: the engine imports crate::{seg}");
                }
            }
            // Its own children, named by a path (`sqlite::error`, `use value::{..}`).
            for child in modules.iter().filter(|c| c.rsplit_once("::").is_some_and(|(p, _)| p == module)) {
                let name = child.rsplit("::").next().unwrap();
                let named = code
                    .match_indices(&format!("{name}::"))
                    .any(|(at, _)| !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':'));
                if named {
                    targets.push(child.clone());
                }
            }
            for target in targets {
                if target == module {
                    continue;
                }
                assert!(floor(&target) <= floor(&module), "{file} ({module}) imports {target}, a floor above it");
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
        // No cycle: a depth-first walk that never meets a module still on its path.
        fn visit(
            m: &str,
            edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut std::collections::HashSet<String>,
        ) {
            if done.contains(m) {
                return;
            }
            if let Some(at) = path.iter().position(|p| p == m) {
                panic!("import cycle: {} -> {m}", path[at..].join(" -> "));
            }
            path.push(m.to_owned());
            for next in edges.get(m).into_iter().flatten() {
                visit(next, edges, path, done);
            }
            path.pop();
            done.insert(m.to_owned());
        }
        let mut done = std::collections::HashSet::new();
        for m in edges.keys() {
            visit(m, &edges, &mut Vec::new(), &mut done);
        }
        // The walk saw the floors it checks.
        assert!(edges.keys().any(|m| floor(m) == 0) && edges.keys().any(|m| floor(m) == 2), "{edges:?}");
        assert!(edges.values().flatten().any(|t| t == "store::engine::value"), "{edges:?}");
    }

    #[test]
    fn refuses_foreign_files_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, b"this is not a database at all, not even close").unwrap();
        assert!(matches!(Store::open(&garbage), Err(Error::NotSqlite { .. })));
        assert!(matches!(Store::open_read_only(&garbage), Err(Error::NotSqlite { .. })));
        assert_eq!(std::fs::read(&garbage).unwrap(), b"this is not a database at all, not even close");

        let other = dir.path().join("other.db");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let before = std::fs::read(&other).unwrap();
        assert!(matches!(Store::open(&other), Err(Error::NotAStore { .. })));
        assert!(matches!(Store::open_read_only(&other), Err(Error::NotAStore { .. })));
        assert_eq!(std::fs::read(&other).unwrap(), before);
    }

    #[test]
    fn missing_and_empty_files_are_stores_not_yet_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.db");
        assert!(matches!(Store::open_read_only(&missing), Err(Error::NotCreated { .. })));
        assert!(!missing.exists());
        let empty = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        assert!(matches!(Store::open_read_only(empty.path()), Err(Error::NotCreated { .. })));
        assert_eq!(std::fs::metadata(empty.path()).unwrap().len(), 0);
        let store = Store::open(empty.path()).unwrap();
        assert_eq!(store.schema_version().unwrap(), supported_schema_version());
        drop(store);
        Store::open_read_only(empty.path()).unwrap();
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("future.db");
        drop(Store::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (999, 'future', '2030-01-01T00:00:00Z', '0')",
            [],
        )
        .unwrap();
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        for result in [Store::open(&path), Store::open_read_only(&path)] {
            match result {
                Err(Error::IncompatibleVersion { found: 999, store: Location::File(p), .. }) => assert_eq!(p, path),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn the_page_cache_is_set_in_kib_and_check_restores_it() {
        let store = Store::open_in_memory().unwrap();
        let pragma =
            |s: &Store, name: &str| -> i64 { s.conn.query_one(&format!("PRAGMA {name}"), &[], |r| r.i64(0)).unwrap() };
        assert_eq!(pragma(&store, "cache_size"), -8_192, "writers get 8 MiB");
        store.set_cache_kib(256).unwrap();
        assert_eq!(pragma(&store, "cache_size"), -256);
        assert_eq!(store.check().unwrap(), vec![]);
        assert_eq!(pragma(&store, "cache_size"), -256, "check's larger cache lasts only while it runs");
        assert_eq!(pragma(&store, "temp_store"), 2, "writers keep statement journals in memory");
    }

    /// Every query on the hot paths searches an index; none scans the edge or decision table.
    #[test]
    fn hot_queries_search_indexes() {
        let store = Store::open_in_memory().unwrap();
        let queries = [
            tables::graph::EXPAND_OUT,
            tables::graph::EXPAND_OUT_REL,
            tables::graph::EXPAND_IN,
            tables::graph::EXPAND_IN_REL,
            tables::graph::RESOLVE,
            tables::graph::RECORDS,
            tables::graph::VIEWS,
            tables::decisions::DECISION_BY_ID,
            tables::decisions::PLAN_ROWS,
            tables::decisions::OUTLINE_ROWS,
            tables::decisions::PLAN_LINKS,
            tables::ledger::PLAN_OF,
            tables::decisions::LINK_STORED,
            tables::decisions::NEXT_OF,
        ];
        let conn = store.conn.sqlite().unwrap();
        for sql in queries {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let nulls = vec![rusqlite::types::Value::Null; stmt.parameter_count()];
            let plan: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            let text = plan.join("\n");
            for table in ["uko_edges", "uko_nodes", "uko_node_views", "decisions", "supersessions", "d ", "s "] {
                assert!(
                    !plan
                        .iter()
                        .any(|l| l.starts_with(&format!("SCAN {table}")) || l == &format!("SCAN {}", table.trim())),
                    "{sql}\nscans {table}:\n{text}"
                );
            }
            assert!(text.contains("SEARCH"), "{sql}\nsearches no index:\n{text}");
            if sql == tables::decisions::OUTLINE_ROWS {
                // An outline reads index entries only, never the ~1 KiB rows.
                assert!(text.contains("USING COVERING INDEX decisions_outline"), "{sql}\n{text}");
            }
        }
    }
}
