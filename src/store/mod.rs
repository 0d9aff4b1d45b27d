//! The SQLite store: one file holds decisions and the UKO graph.
//!
//! [`Store::open`] creates or opens a store and brings its schema up to date;
//! [`Store::open_read_only`] never writes and never creates a file. The
//! queries of each table group live in their own module (`decisions`,
//! `graph`); nothing of SQLite shows in the public API, which speaks domain
//! types only, so another backend can offer the same methods.
//!
//! ## Locking
//!
//! The file is in WAL mode: readers never block the writer and see whole
//! transactions only. The one exception is the first load into an empty
//! store file ([`Store::begin_bulk`]), written with a rollback journal and
//! the file's exclusive lock: readers wait for it. Every other write
//! transaction starts with `BEGIN IMMEDIATE`, so concurrent writers queue
//! on the busy timeout (5 s) instead of failing when a read lock would have
//! to be upgraded. A `Store` is one connection:
//! use one per thread.
//!
//! ## Compatibility
//!
//! The schema lives in `migrations/` (refinery, append-only, checksummed).
//! A file is recognised as a store by its SQLite `application_id`; a store
//! written by a newer schema is refused with [`Error::IncompatibleVersion`],
//! and files of other applications with [`Error::NotAStore`], before anything
//! is written to them.
//!
//! ## Performance
//!
//! Statements are prepared once and cached per connection; bulk writes run in
//! one transaction. Plan reads are one query per table, and graph traversal
//! asks for a whole BFS frontier per query (see `graph`).

mod borrowed;
mod check;
mod column_json;
mod copy;
pub(crate) mod db;
mod decisions;
mod exchange;
mod graph;
mod ingest;
pub mod integrity;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};
use db::{Conn, Tx};

pub use check::{Problem, ProblemKind};
pub use copy::CopyReport;
pub use decisions::{DecisionCounts, Digest, PlanSummary, PreparedDecision};
pub use exchange::{ImportOptions, ImportReport};
pub use graph::{GraphCounts, Neighbour};
pub use ingest::{IngestOptions, IngestReport, SkippedFile, CODE_RELATIONS};
pub use integrity::{Anchor, AnchorScope};

mod embedded {
    refinery::embed_migrations!("migrations/sqlite");
}

mod embedded_postgres {
    refinery::embed_migrations!("migrations/postgres");
}

/// `PRAGMA application_id` of a decision store: "DSTR".
const APPLICATION_ID: i64 = 0x4453_5452;
/// How long a connection waits for another writer before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The newest version in refinery's history table.
const HISTORY_VERSION: &str = "SELECT coalesce(max(version), 0) FROM refinery_schema_history";

/// The advisory lock a PostgreSQL migration holds: "DSTR" and the schema.
const MIGRATION_LOCK: &str = "SELECT pg_advisory_lock(1146311762, hashtext(current_schema()))";
const MIGRATION_UNLOCK: &str = "SELECT pg_advisory_unlock(1146311762, hashtext(current_schema()))";

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return "(a connection string)".to_owned() };
    // `?password=...` is a password too.
    let (rest, query) = rest.split_once('?').map_or((rest, None), |(r, q)| (r, Some(q)));
    let query = query.map(|q| {
        q.split('&').filter(|kv| !kv.to_ascii_lowercase().starts_with("password=")).collect::<Vec<_>>().join("&")
    });
    let rest = match query.as_deref() {
        Some("") | None => rest.to_owned(),
        Some(q) => format!("{rest}?{q}"),
    };
    let rest = rest.as_str();
    let (authority, tail) = rest.split_once('/').map_or((rest, None), |(a, t)| (a, Some(t)));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    match tail {
        Some(t) => format!("{scheme}://{authority}/{t}"),
        None => format!("{scheme}://{authority}"),
    }
}

/// The newest schema version this library knows.
pub fn supported_schema_version() -> i64 {
    MIGRATIONS.last().map_or(0, |&(version, _, _)| version)
}

// `MIGRATIONS`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// A decision store on one connection: a SQLite file, or a PostgreSQL database.
pub struct Store {
    conn: Conn,
    path: Option<PathBuf>,
    /// The server's URL without its password, for a PostgreSQL store.
    url: Option<String>,
    read_only: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("url", &self.url)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// What is found at a path before SQLite is allowed to touch it.
enum FileState {
    Missing,
    Empty,
    Sqlite,
}

fn inspect(path: &Path) -> Result<FileState> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(e) => return Err(Error::Io(e)),
    };
    if meta.is_dir() {
        return Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: is a directory, not a store file", path.display()),
        )));
    }
    if meta.len() == 0 {
        return Ok(FileState::Empty);
    }
    let mut header = [0u8; 16];
    let mut file = fs::File::open(path)?;
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..])? {
            0 => break,
            n => read += n,
        }
    }
    if read < header.len() || &header != b"SQLite format 3\0" {
        return Err(Error::NotSqlite { path: path.to_owned() });
    }
    Ok(FileState::Sqlite)
}

/// Maps an engine error to ours, keeping the engine's types out of the API.
pub(crate) fn storage(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseCorrupt, DatabaseLocked, NotADatabase};
    if e.sqlite_error().is_some_and(|f| f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK) {
        // A writer died in a bulk load (`Store::begin_bulk`): its journal waits for a writable open.
        return Error::Storage(
            "a write was interrupted and left its journal to roll back, which a read-only open cannot do; \
             open the store for writing once (e.g. `dstore init`)"
                .into(),
        );
    }
    match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => Error::Busy,
        Some(DatabaseCorrupt | NotADatabase) => Error::Corrupt(e.to_string()),
        _ => Error::Storage(Box::new(e)),
    }
}

impl Store {
    /// Opens the store at `path`, creating it (or initialising a missing or
    /// empty file) and applying pending migrations.
    ///
    /// # Errors
    /// [`Error::NotSqlite`], [`Error::NotAStore`] or
    /// [`Error::IncompatibleVersion`] for files that are not this library's
    /// (left untouched); [`Error::Busy`], [`Error::Io`] or [`Error::Storage`]
    /// when the environment fails.
    ///
    /// # Example
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = decision_store::Store::open(dir.path().join("agent.db"))?;
    /// assert_eq!(store.schema_version()?, decision_store::store::supported_schema_version());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let state = inspect(path)?;
        let conn = Connection::open(path).map_err(storage)?;
        let mut store = Store::new(conn, Some(path.to_owned()), false)?;
        if matches!(state, FileState::Sqlite) {
            store.identify()?;
        }
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing store for reading only: nothing is written to the
    /// file, no file is created and no migration runs.
    ///
    /// # Errors
    /// [`Error::NotCreated`] for a missing or empty file,
    /// [`Error::NeedsUpgrade`] for a store of an older schema, and the errors
    /// of [`Store::open`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        match inspect(path)? {
            FileState::Missing | FileState::Empty => return Err(Error::NotCreated { path: path.to_owned() }),
            FileState::Sqlite => {}
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(storage)?;
        let store = Store::new(conn, Some(path.to_owned()), true)?;
        let Some(found) = store.identify()? else {
            return Err(Error::NotCreated { path: path.to_owned() });
        };
        let supported = supported_schema_version();
        if found < supported {
            return Err(Error::NeedsUpgrade { path: path.to_owned(), found, supported });
        }
        // Per connection, read-only ones too: the checks in queries rely on it.
        store.sqlite()?.pragma_update(None, "foreign_keys", true).map_err(storage)?;
        Ok(store)
    }

    /// A store in memory, for quick use and tests; gone when dropped.
    ///
    /// # Errors
    /// [`Error::Storage`] if SQLite cannot allocate it.
    pub fn open_in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().map_err(storage)?;
        let mut store = Store::new(conn, None, false)?;
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Connects to a store in a PostgreSQL database
    /// (`postgres://user[:password]@host[:port]/database`), creating its
    /// tables in an empty database and applying pending migrations. Many
    /// processes on many hosts may hold one at once; writes queue on a row
    /// lock (see `docs/postgres.md`). Only unencrypted connections are made.
    ///
    /// # Errors
    /// [`Error::Connect`] when the server cannot be reached, refuses the
    /// login, or the database holds another application's tables (left
    /// untouched); [`Error::IncompatibleVersion`] and
    /// [`Error::MigrationMismatch`] as for files.
    pub fn connect(url: &str) -> Result<Store> {
        let mut store = Store::connect_as(url, false)?;
        // Under the migration lock: another agent may be creating the schema right now.
        store.conn.batch(MIGRATION_LOCK)?;
        let outcome = store.identify_postgres().and_then(|_| store.migrate());
        let unlocked = store.conn.batch(MIGRATION_UNLOCK);
        outcome.and(unlocked)?;
        Ok(store)
    }

    /// Connects to an existing PostgreSQL store for reading only: every
    /// transaction of the session is read-only and no migration runs.
    ///
    /// # Errors
    /// [`Error::NeedsUpgrade`] for a store of an older schema, a
    /// [`Error::Connect`] naming the URL for a database without a store, and
    /// the errors of [`Store::connect`].
    pub fn connect_read_only(url: &str) -> Result<Store> {
        let store = Store::connect_as(url, true)?;
        let found = store.identify_postgres()?;
        let supported = supported_schema_version();
        if found == 0 {
            return Err(Error::NotAStoreDatabase {
                url: store.display_url(),
                reason: "no decision store in this schema yet".into(),
            });
        }
        if found < supported {
            return Err(Error::NeedsUpgrade { path: PathBuf::from(store.display_url()), found, supported });
        }
        store.conn.batch("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")?;
        Ok(store)
    }

    /// True for a `postgres://` or `postgresql://` URL, which [`Store::connect`]
    /// takes; anything else is a file path for [`Store::open`].
    pub fn is_url(target: &str) -> bool {
        target.starts_with("postgres://") || target.starts_with("postgresql://")
    }

    fn connect_as(url: &str, read_only: bool) -> Result<Store> {
        let shown = redact(url);
        let fail = |reason: String| Error::Connect { url: shown.clone(), reason };
        let config: postgres::Config = url.parse().map_err(|e| fail(format!("not a PostgreSQL URL: {e}")))?;
        let client = config.connect(postgres::NoTls).map_err(|e| {
            let reason = match e.as_db_error() {
                Some(db) => db.message().to_owned(),
                None => std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string()),
            };
            fail(format!("cannot connect: {reason}"))
        })?;
        let conn = Conn::Postgres(Box::new(db::Pg::new(client)));
        // Notices (such as "relation already exists, skipping") are the server's business.
        // A session that dies inside a transaction (a crashed host) frees the writers' row lock after 5 minutes.
        conn.batch("SET client_min_messages = warning; SET idle_in_transaction_session_timeout = '5min'")?;
        let (encoding, schema) =
            conn.query_one("SELECT current_setting('server_encoding'), current_schema()", &[], |r| {
                Ok((r.string(0)?, r.opt_string(1)?))
            })?;
        if encoding != "UTF8" {
            return Err(fail(format!("the database's encoding is {encoding}; a decision store needs UTF8")));
        }
        if schema.is_none() {
            return Err(fail("the search path names no existing schema to hold the store".into()));
        }
        Ok(Store { conn, path: None, url: Some(shown), read_only })
    }

    fn display_url(&self) -> String {
        self.url.clone().unwrap_or_default()
    }

    /// The PostgreSQL counterpart of `identify`: the schema version of the
    /// database's store (0 for a database without tables), refusing other
    /// applications' tables and newer or diverging schemas.
    fn identify_postgres(&self) -> Result<i64> {
        let (history, log, tables) = self.conn.query_one(
            "SELECT to_regclass(quote_ident(current_schema()) || '.refinery_schema_history') IS NOT NULL, \
             to_regclass(quote_ident(current_schema()) || '.store_log') IS NOT NULL, \
             (SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema())",
            &[],
            |r| Ok((r.bool(0)?, r.bool(1)?, r.i64(2)?)),
        )?;
        if !history {
            if tables == 0 {
                return Ok(0);
            }
            return Err(Error::NotAStoreDatabase {
                url: self.display_url(),
                reason: "the schema holds tables of another application, not a decision store".into(),
            });
        }
        // The history table exists (checked above): its newest version, in one query.
        let found = self.conn.query_one(HISTORY_VERSION, &[], |r| r.i64(0))?;
        if found > 0 && !log {
            return Err(Error::NotAStoreDatabase {
                url: self.display_url(),
                reason: "the schema holds another application's migrations, not a decision store".into(),
            });
        }
        let supported = supported_schema_version();
        if found > supported {
            return Err(Error::IncompatibleVersion { path: PathBuf::from(self.display_url()), found, supported });
        }
        self.verify_history()?;
        Ok(found)
    }

    /// Settings of every connection, read-only ones included: the busy
    /// timeout, `rarray()` and the hash functions.
    fn new(conn: Connection, path: Option<PathBuf>, read_only: bool) -> Result<Store> {
        conn.busy_timeout(BUSY_TIMEOUT).map_err(storage)?;
        // rarray(): bind a whole id list as one parameter (BFS frontiers).
        rusqlite::vtab::array::load_module(&conn).map_err(storage)?;
        integrity::register_functions(&conn).map_err(storage)?;
        Ok(Store { conn: Conn::Sqlite(conn), path, url: None, read_only })
    }

    /// The SQLite connection, for the settings only SQLite has.
    fn sqlite(&self) -> Result<&Connection> {
        self.conn.sqlite().ok_or_else(|| Error::Storage("a SQLite setting asked of a PostgreSQL store".into()))
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
            Some(c) => c.pragma_update(None, "cache_size", -i64::from(kib.max(1))).map_err(storage),
            // The server's buffers are the server's.
            None => Ok(()),
        }
    }

    /// The file behind the store (`None` in memory and on PostgreSQL).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The server behind a PostgreSQL store, as `postgres://user@host:port/db`
    /// (no password); `None` for SQLite.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        if self.conn.is_postgres() {
            "postgres"
        } else {
            "sqlite"
        }
    }

    /// True when opened with [`Store::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// What to call the store in messages: its file's path as given, or
    /// the server's URL without a password.
    pub fn display_name(&self) -> String {
        self.display_path().display().to_string()
    }

    fn display_path(&self) -> PathBuf {
        match (&self.path, &self.url) {
            (Some(p), _) => p.clone(),
            (None, Some(url)) => PathBuf::from(url),
            (None, None) => PathBuf::from(":memory:"),
        }
    }

    /// Checks, by reading only, that an existing SQLite file is a store this
    /// library can use; returns its schema version, or `None` for a blank
    /// SQLite file (no tables).
    fn identify(&self) -> Result<Option<i64>> {
        let not_sqlite = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => Error::NotSqlite { path: self.display_path() },
            _ => storage(e),
        };
        let conn = self.sqlite()?;
        let app_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(not_sqlite)?;
        let objects: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(not_sqlite)?;
        if app_id != APPLICATION_ID {
            if app_id == 0 && objects == 0 {
                return Ok(None);
            }
            return Err(Error::NotAStore { path: self.display_path() });
        }
        let found = self.schema_version()?;
        let supported = supported_schema_version();
        if found > supported {
            return Err(Error::IncompatibleVersion { path: self.display_path(), found, supported });
        }
        if found > 0 {
            self.verify_history()?;
        }
        Ok(Some(found))
    }

    /// Compares every migration recorded in the file with the library's
    /// migration of the same version, by reading only. refinery validates
    /// only when a migration is pending; this runs on every open, so a file
    /// whose recorded history differs from the library's is never written.
    fn verify_history(&self) -> Result<()> {
        let list = if self.conn.is_postgres() { PG_MIGRATIONS } else { MIGRATIONS };
        let known: std::collections::HashMap<i64, (&str, &str)> =
            list.iter().map(|&(version, name, checksum)| (version, (name, checksum))).collect();
        let rows = self.conn.query_vec(
            "SELECT version, name, checksum FROM refinery_schema_history ORDER BY version",
            &[],
            |r| Ok((r.i64(0)?, r.string(1)?, r.string(2)?)),
        )?;
        for (version, name, found) in rows {
            let expected = match known.get(&version) {
                Some((n, checksum)) if *n == name && *checksum == found => continue,
                Some((_, checksum)) => checksum.to_string(),
                None => "no such migration".into(),
            };
            return Err(Error::MigrationMismatch { path: self.display_path(), version, name, found, expected });
        }
        Ok(())
    }

    /// Connection settings for a writable store; run outside any transaction.
    fn configure(&self) -> Result<()> {
        let conn = self.sqlite()?;
        // Statement journals in memory, not in temp files: every INSERT into
        // a table with triggers keeps one, a write per page in a file.
        // Not for readers: with it, a projection after a plan's tree on the
        // same connection took 133 ms instead of 95 (measured, cause unknown);
        // `check` sets it for its own sorts.
        conn.pragma_update(None, "temp_store", "MEMORY").map_err(storage)?;
        // 8 MiB of page cache (SQLite's default is 2 MiB) for bulk imports,
        // which touch four indexes. With 8 KiB pages 32 MiB was faster; with
        // 16 KiB pages 8 MiB is as fast (100k import 715-778 ms against
        // 748-1034 ms) and the import's peak memory drops from 177 to 79 MB.
        // Not for readers: a short read pays for every page of a larger cache
        // as fresh memory (measured: `tree` 16 -> 21 ms, `project` 95 -> 121 ms).
        conn.pragma_update(None, "cache_size", -8_192).map_err(storage)?;
        // 16 KiB pages for new files (a no-op on existing ones): a decision
        // row is about 1.5 KiB; 4 KiB pages hold two with a quarter of each
        // unused, and each size up means fewer pages to split, link and log.
        // Measured on a 100k import, whole process: 4 -> 8 KiB wrote 18 %
        // less and took 4 % less time; 8 -> 16 KiB 790 -> 685 ms and 4 %
        // less file, with a plan's tree 6.9 -> 6.3 ms and the breadth-4
        // projection 44 -> 43 ms.
        conn.pragma_update(None, "page_size", 16384).map_err(storage)?;
        // WAL: readers and the writer do not block each other, and a commit is one append.
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(storage)?;
        if self.path.is_some() && !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::Storage(
                format!("{}: SQLite refused write-ahead logging (journal mode {mode})", self.display_path().display())
                    .into(),
            ));
        }
        // Enforce REFERENCES on every connection (SQLite's default is off).
        conn.pragma_update(None, "foreign_keys", true).map_err(storage)?;
        // NORMAL is durable in WAL mode except for the last commits on power loss, and much faster than FULL.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(storage)?;
        Ok(())
    }

    /// Brings the schema to the library's version. On PostgreSQL the caller
    /// holds the migration lock: agents on many hosts may connect to a new
    /// database at once, and one migrates while the others wait.
    fn migrate(&mut self) -> Result<()> {
        if self.schema_version()? == supported_schema_version() {
            return Ok(());
        }
        let outcome = match &mut self.conn {
            Conn::Sqlite(c) => {
                embedded::migrations::runner().set_abort_divergent(true).set_abort_missing(true).run(c).map(drop)
            }
            // Grouped: all pending versions and their history rows in one
            // transaction (PostgreSQL's DDL is transactional), so a crash
            // mid-migration leaves the schema as it was.
            Conn::Postgres(pg) => embedded_postgres::migrations::runner()
                .set_abort_divergent(true)
                .set_abort_missing(true)
                .set_grouped(true)
                .run(&mut *pg.client())
                .map(drop),
        };
        if let Err(e) = outcome {
            // Another process may have migrated the same file meanwhile.
            if self.schema_version()? != supported_schema_version() {
                return Err(Error::Storage(Box::new(e)));
            }
        }
        Ok(())
    }

    /// The schema version of the file (0 for a file not yet initialised).
    ///
    /// # Errors
    /// [`Error::Storage`] if the history table cannot be read.
    pub fn schema_version(&self) -> Result<i64> {
        let has_history = if self.conn.is_postgres() {
            "SELECT to_regclass(quote_ident(current_schema()) || '.refinery_schema_history') IS NOT NULL"
        } else {
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'refinery_schema_history')"
        };
        if !self.conn.query_one(has_history, &[], |r| r.bool(0))? {
            return Ok(0);
        }
        self.conn.query_one(HISTORY_VERSION, &[], |r| r.i64(0))
    }

    /// The PostgreSQL server's version (`SHOW server_version`); `None` for SQLite.
    ///
    /// # Errors
    /// [`Error::Storage`] when the server does not answer.
    pub fn server_version(&self) -> Result<Option<String>> {
        if !self.conn.is_postgres() {
            return Ok(None);
        }
        self.conn.query_one("SELECT current_setting('server_version')", &[], |r| r.string(0)).map(Some)
    }

    /// The SQLite library version in use.
    pub fn sqlite_version() -> &'static str {
        rusqlite::version()
    }

    /// Runs `f` in a write transaction (see [`Conn::begin_write`] for how
    /// writers queue); writes the ledger's chain heads and counts and
    /// commits when it returns `Ok`, rolls back otherwise.
    fn write<T>(&mut self, f: impl FnOnce(&Conn, &mut decisions::Ledger) -> Result<T>) -> Result<T> {
        Self::write_in(self.begin_write()?, f)
    }

    /// A write transaction ([`Conn::begin_write`]); refused on a read-only store.
    pub(crate) fn begin_write(&self) -> Result<Tx<'_>> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.conn.begin_write()
    }

    /// [`Store::write`] for a bulk load (see [`Store::begin_bulk`]).
    fn write_bulk<T>(&mut self, f: impl FnOnce(&Conn, &mut decisions::Ledger) -> Result<T>) -> Result<T> {
        Self::write_in(self.begin_bulk()?, f)
    }

    fn write_in<T>(tx: Tx<'_>, f: impl FnOnce(&Conn, &mut decisions::Ledger) -> Result<T>) -> Result<T> {
        let mut ledger = decisions::Ledger::default();
        let out = f(&tx, &mut ledger)?;
        ledger.flush(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// The write transaction of a bulk load: an import (decisions or
    /// graph) or `try_insert_many`/`try_insert_prepared`. Into a store file
    /// that holds nothing yet (no decision, no supersession, no graph node)
    /// and that no other connection has open, it writes the file directly,
    /// with a rollback journal instead of the write-ahead log (see
    /// [`Conn::begin_unlogged_write`]): the load's pages are new to the file,
    /// so almost none is journaled, and each is written once instead of
    /// twice (to the log, then again by the checkpoint). Measured on a 100k
    /// import: 319 -> 160 MB written. Readers that open the file meanwhile
    /// wait for the load up to the busy timeout (5 s), then get
    /// [`Error::Busy`]. Anywhere else, an ordinary write transaction.
    pub(crate) fn begin_bulk(&self) -> Result<Tx<'_>> {
        if !self.read_only && self.path.is_some() && !self.conn.is_postgres() {
            let empty = self.conn.query_one(
                "SELECT (SELECT entries FROM store_log WHERE id = 1) = 0 AND NOT EXISTS (SELECT 1 FROM uko_nodes)",
                &[],
                |r| r.bool(0),
            )?;
            if empty {
                if let Some(tx) = self.conn.begin_unlogged_write(BUSY_TIMEOUT)? {
                    return Ok(tx);
                }
            }
        }
        self.begin_write()
    }

    /// Runs `f` in one read transaction, so that its statements see one state
    /// of the file (inside a transaction already open, it just runs `f`).
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

    /// SQLite's `integrity_check` and `foreign_key_check`: one line per problem.
    ///
    /// # Errors
    /// [`Error::Storage`] when the checks cannot run.
    pub fn storage_problems(&self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        // PostgreSQL checks its pages and enforces every REFERENCES itself.
        let Some(conn) = self.conn.sqlite() else { return Ok(problems) };
        let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(storage)?;
        for row in stmt.query_map([], |r| r.get::<_, String>(0)).map_err(storage)? {
            let line = row.map_err(storage)?;
            if line != "ok" {
                problems.push(format!("integrity: {line}"));
            }
        }
        let mut stmt = conn.prepare("PRAGMA foreign_key_check").map_err(storage)?;
        // The rowid is NULL for WITHOUT ROWID tables; their rows are named by the dangling-link checks.
        let rows = stmt
            .query_map([], |r| {
                let (table, rowid, parent) =
                    (r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?, r.get::<_, String>(2)?);
                Ok(match rowid {
                    Some(id) => format!("foreign key: {table} row {id} refers to a missing {parent} row"),
                    None => format!("foreign key: a {table} row refers to a missing {parent} row"),
                })
            })
            .map_err(storage)?;
        for row in rows {
            problems.push(row.map_err(storage)?);
        }
        Ok(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_a_reader_cannot_roll_back_says_what_to_do() {
        let e =
            rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY_ROLLBACK), None);
        let shown = storage(e).to_string();
        assert!(shown.contains("interrupted") && shown.contains("dstore init"), "{shown}");
        let other = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY), None);
        assert!(!storage(other).to_string().contains("interrupted"));
    }

    #[test]
    fn refuses_foreign_files_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.db");
        fs::write(&garbage, b"this is not a database at all, not even close").unwrap();
        assert!(matches!(Store::open(&garbage), Err(Error::NotSqlite { .. })));
        assert!(matches!(Store::open_read_only(&garbage), Err(Error::NotSqlite { .. })));
        assert_eq!(fs::read(&garbage).unwrap(), b"this is not a database at all, not even close");

        let other = dir.path().join("other.db");
        Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
        let before = fs::read(&other).unwrap();
        assert!(matches!(Store::open(&other), Err(Error::NotAStore { .. })));
        assert!(matches!(Store::open_read_only(&other), Err(Error::NotAStore { .. })));
        assert_eq!(fs::read(&other).unwrap(), before);
    }

    #[test]
    fn missing_and_empty_files_are_stores_not_yet_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.db");
        assert!(matches!(Store::open_read_only(&missing), Err(Error::NotCreated { .. })));
        assert!(!missing.exists());
        let empty = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        assert!(matches!(Store::open_read_only(empty.path()), Err(Error::NotCreated { .. })));
        assert_eq!(fs::metadata(empty.path()).unwrap().len(), 0);
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
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (999, 'future', '2030-01-01T00:00:00Z', '0')",
            [],
        )
        .unwrap();
        drop(conn);
        let before = fs::read(&path).unwrap();
        for result in [Store::open(&path), Store::open_read_only(&path)] {
            match result {
                Err(Error::IncompatibleVersion { found: 999, .. }) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    /// Every query on the hot paths searches an index; none scans the edge or decision table.
    #[test]
    fn the_page_cache_is_set_in_kib_and_check_restores_it() {
        let store = Store::open_in_memory().unwrap();
        let cache =
            |s: &Store| -> i64 { s.sqlite().unwrap().query_row("PRAGMA cache_size", [], |r| r.get(0)).unwrap() };
        assert_eq!(cache(&store), -8_192, "writers get 8 MiB");
        store.set_cache_kib(256).unwrap();
        assert_eq!(cache(&store), -256);
        assert_eq!(store.check().unwrap(), vec![]);
        assert_eq!(cache(&store), -256, "check's larger cache lasts only while it runs");
        let temp = |s: &Store| -> i64 { s.sqlite().unwrap().query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap() };
        assert_eq!(temp(&store), 2, "writers keep statement journals in memory");
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("postgres://u:pw@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact("postgres://u@h/db?password=pw&sslmode=disable"), "postgres://u@h/db?sslmode=disable");
        assert_eq!(redact("postgresql://h/db?Password=pw"), "postgresql://h/db");
        assert_eq!(redact("host=h user=u password=pw"), "(a connection string)");
    }

    #[test]
    fn migration_list_matches_refinery() {
        let dialects =
            [(MIGRATIONS, embedded::migrations::runner()), (PG_MIGRATIONS, embedded_postgres::migrations::runner())];
        for (listed, runner) in dialects {
            let refinery: Vec<(i64, String, String)> = runner
                .get_migrations()
                .iter()
                .map(|m| (i64::from(m.version()), m.name().to_owned(), m.checksum().to_string()))
                .collect();
            let ours: Vec<(i64, String, String)> =
                listed.iter().map(|&(v, n, c)| (v, n.to_owned(), c.to_owned())).collect();
            assert_eq!(ours, refinery);
        }
        assert_eq!(supported_schema_version(), 8);
        assert_eq!(PG_MIGRATIONS.last().map(|m| m.0), Some(8), "both dialects have every version");
    }

    #[test]
    fn hot_queries_search_indexes() {
        let store = Store::open_in_memory().unwrap();
        let queries = [
            graph::EXPAND_OUT,
            graph::EXPAND_OUT_REL,
            graph::EXPAND_IN,
            graph::EXPAND_IN_REL,
            graph::RESOLVE,
            graph::RECORDS,
            graph::VIEWS,
            decisions::DECISION_BY_ID,
            decisions::PLAN_ROWS,
            decisions::OUTLINE_ROWS,
            decisions::PLAN_LINKS,
            decisions::PLAN_OF,
            decisions::LINK_OF,
            decisions::NEXT_OF,
        ];
        for sql in queries {
            let mut stmt = store.sqlite().unwrap().prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
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
            if sql == decisions::OUTLINE_ROWS {
                // An outline reads index entries only, never the ~1 KiB rows.
                assert!(text.contains("USING COVERING INDEX decisions_outline"), "{sql}\n{text}");
            }
        }
    }
}
