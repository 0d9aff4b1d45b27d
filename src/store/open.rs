//! Opening a store: a SQLite file (or memory) or a PostgreSQL database,
//! recognised before anything is written to it, and its schema brought up
//! to the library's version.
//!
//! ## Compatibility
//!
//! The schema lives in `migrations/` (append-only, checksummed; see `schema`).
//! A file is recognised as a store by its SQLite `application_id`; a store
//! written by a newer schema is refused with [`Error::IncompatibleVersion`],
//! and files of other applications with [`Error::NotAStore`], before anything
//! is written to them.

use std::fs;
use std::path::Path;

use super::engine::{sqlite, Conn};
use super::schema::{self, supported_schema_version, HISTORY_VERSION};
use super::tables::{integrity, kept};
use super::Store;
use crate::error::{Error, Location, Result};

/// `PRAGMA application_id` of a decision store: "DSTR".
const APPLICATION_ID: i64 = 0x4453_5452;

/// What is found at a path before SQLite is allowed to touch it.
enum FileState {
    Missing,
    Empty,
    Present,
}

/// What is at `path`, from its metadata alone. The file is not opened
/// here: closing any descriptor of a file drops every POSIX lock that the
/// process holds on it, so a read of the header while another connection of
/// this process has the store open would let a third process believe the
/// file unused and delete the write-ahead log under it. SQLite reads the
/// header itself (see `identify`: a file that is not SQLite is NotSqlite).
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
    // A new file's first commits may sit in its write-ahead log alone (a
    // writer killed before any checkpoint): the store is there all the same.
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if meta.len() == 0 && fs::metadata(&wal).map_or(true, |w| w.len() == 0) {
        return Ok(FileState::Empty);
    }
    Ok(FileState::Present)
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
        let conn = sqlite::open(path, false, &integrity::FUNCTIONS)?;
        let mut store = Store::new(Conn::Sqlite(conn), Location::File(path.to_owned()), false);
        if matches!(state, FileState::Present) {
            store.identify()?;
        }
        store.configure()?;
        store.migrate()?;
        store.build_kept()?;
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
            FileState::Present => {}
        }
        let open = || -> Result<(Store, Option<i64>)> {
            let conn = sqlite::open(path, true, &integrity::FUNCTIONS)?;
            let store = Store::new(Conn::Sqlite(conn), Location::File(path.to_owned()), true);
            let found = store.identify()?;
            Ok((store, found))
        };
        let (store, found) = match open() {
            // A writer killed in the middle of a write left its journal: roll it
            // back where the file may be written, as `sqlite3` would, and read on.
            Err(e) if sqlite::is_rollback_pending(&e) && sqlite::recover_journal(path)? => open()?,
            other => other?,
        };
        let Some(found) = found else {
            return Err(Error::NotCreated { path: path.to_owned() });
        };
        let supported = supported_schema_version();
        if found < supported {
            return Err(Error::NeedsUpgrade { store: store.location.clone(), found, supported });
        }
        Ok(store)
    }

    /// A store in memory, for quick use and tests; gone when dropped.
    ///
    /// # Errors
    /// [`Error::Storage`] if SQLite cannot allocate it.
    pub fn open_in_memory() -> Result<Store> {
        let conn = sqlite::open_in_memory(&integrity::FUNCTIONS)?;
        let mut store = Store::new(Conn::Sqlite(conn), Location::Memory, false);
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// True for a `postgres://` or `postgresql://` URL, which [`Store::connect`]
    /// takes; anything else is a file path for [`Store::open`].
    pub fn is_url(target: &str) -> bool {
        target.starts_with("postgres://") || target.starts_with("postgresql://")
    }

    /// Checks, by reading only, that an existing SQLite file is a store this
    /// library can use; returns its schema version, or `None` for a blank
    /// SQLite file (no tables).
    fn identify(&self) -> Result<Option<i64>> {
        let not_sqlite =
            |e: Error| if sqlite::is_not_a_database(&e) { Error::NotSqlite { path: self.file_path() } } else { e };
        let app_id = self.conn.query_one("PRAGMA application_id", &[], |r| r.i64(0)).map_err(not_sqlite)?;
        let objects =
            self.conn.query_one("SELECT count(*) FROM sqlite_master", &[], |r| r.i64(0)).map_err(not_sqlite)?;
        if app_id != APPLICATION_ID {
            if app_id == 0 && objects == 0 {
                return Ok(None);
            }
            return Err(Error::NotAStore { path: self.file_path() });
        }
        let found = self.schema_version()?;
        let supported = supported_schema_version();
        if found > supported {
            return Err(Error::IncompatibleVersion { store: self.location.clone(), found, supported });
        }
        if found > 0 {
            self.verify_history()?;
        }
        Ok(Some(found))
    }

    /// The file of a SQLite store, for the errors that name one.
    fn file_path(&self) -> std::path::PathBuf {
        match &self.location {
            Location::File(p) => p.clone(),
            other => other.to_string().into(),
        }
    }

    /// Compares every migration recorded in the store with the library's
    /// migration of the same version, by reading only. It runs on every
    /// open, so a store whose recorded history differs from the library's
    /// is never written.
    fn verify_history(&self) -> Result<()> {
        let known: std::collections::HashMap<i64, (&str, &str)> =
            schema::migrations(self.conn.dialect()).iter().map(|m| (m.version, (m.name, m.checksum))).collect();
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
            return Err(Error::MigrationMismatch { store: self.location.clone(), version, name, found, expected });
        }
        Ok(())
    }

    /// Connection settings for a writable SQLite store; run outside any transaction.
    fn configure(&self) -> Result<()> {
        let Some(conn) = self.conn.sqlite() else { return Ok(()) };
        sqlite::configure_writer(conn, matches!(self.location, Location::File(_)), &self.location.to_string())
    }

    /// Brings the schema to the library's version. On PostgreSQL the caller
    /// holds the migration lock: agents on many hosts may connect to a new
    /// database at once, and one migrates while the others wait.
    fn migrate(&mut self) -> Result<()> {
        if self.schema_version()? == supported_schema_version() {
            return Ok(());
        }
        schema::migrate(&self.conn)
    }

    /// Builds the kept staleness and calibration of a store upgraded to
    /// schema version 12 (once: a store created at it has them from the start).
    fn build_kept(&mut self) -> Result<()> {
        if kept::state(&self.conn)?.0 {
            return Ok(());
        }
        let tx = self.conn.begin_write()?;
        // Under the write lock: another process may have built it meanwhile.
        if !kept::state(&tx)?.0 {
            crate::store::workflows::kept::rebuild(&tx)?;
        }
        tx.commit()
    }

    /// The schema version of the store (0 for one not yet initialised).
    ///
    /// # Errors
    /// [`Error::Storage`] if the history table cannot be read.
    pub fn schema_version(&self) -> Result<i64> {
        let has_history = self.conn.dialect().pick(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'refinery_schema_history')",
            "SELECT to_regclass(quote_ident(current_schema()) || '.refinery_schema_history') IS NOT NULL",
        );
        if !self.conn.query_one(has_history, &[], |r| r.bool(0))? {
            return Ok(0);
        }
        self.conn.query_one(HISTORY_VERSION, &[], |r| r.i64(0))
    }
}

#[cfg(feature = "postgres")]
mod server {
    use super::*;
    use crate::store::engine::{Connector, Pg};

    /// Takes the advisory lock a PostgreSQL migration holds ("DSTR" and the
    /// schema) for the rest of the transaction, waiting as long as another
    /// agent's migration takes; the migration's own locks wait as any
    /// writer's do.
    fn migration_lock() -> String {
        let ms = crate::store::engine::value::BUSY_TIMEOUT.as_millis();
        format!(
            "SET LOCAL lock_timeout = 0; SELECT pg_advisory_xact_lock(1146311762, hashtext(current_schema())); \
             SET LOCAL lock_timeout = '{ms}ms'"
        )
    }

    /// `url` without its password, for messages.
    pub(super) fn redact(url: &str) -> String {
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

    impl Store {
        /// Connects to a store in a PostgreSQL database
        /// (`postgres://user[:password]@host[:port]/database`), creating its
        /// tables in an empty database and applying pending migrations. Many
        /// processes on many hosts may hold one at once; writes queue on row
        /// locks (see `docs/postgres.md`). Only unencrypted connections are made.
        ///
        /// # Errors
        /// [`Error::Connect`] when the server cannot be reached, refuses the
        /// login, or the database holds another application's tables (left
        /// untouched); [`Error::IncompatibleVersion`] and
        /// [`Error::MigrationMismatch`] as for files.
        pub fn connect(url: &str) -> Result<Store> {
            let store = Store::connect_as(url, false)?;
            // In one transaction under the migration lock: another agent may be creating the schema right now.
            let tx = store.conn.begin_write()?;
            store.check_server()?;
            tx.batch(&migration_lock())?;
            if store.identify_postgres()? < supported_schema_version() {
                schema::migrate_in(&tx)?;
            }
            if !kept::state(&tx)?.0 {
                crate::store::workflows::kept::rebuild(&tx)?;
            }
            tx.commit()?;
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
            // One transaction for the questions a connection asks: one round trip to begin it, not one each.
            let tx = store.conn.begin_read()?;
            store.check_server()?;
            let found = store.identify_postgres()?;
            tx.commit()?;
            let supported = supported_schema_version();
            if found == 0 {
                return Err(Error::NotAStoreDatabase {
                    url: store.location.to_string(),
                    reason: "no decision store in this schema yet".into(),
                });
            }
            if found < supported {
                return Err(Error::NeedsUpgrade { store: store.location.clone(), found, supported });
            }
            Ok(store)
        }

        fn connect_as(url: &str, read_only: bool) -> Result<Store> {
            let shown = redact(url);
            let fail = |reason: String| Error::Connect { url: shown.clone(), reason };
            let connector = Connector::parse(url, &shown, read_only).map_err(fail)?;
            let conn = Conn::Postgres(Box::new(Pg::connect(connector)?));
            Ok(Store::new(conn, Location::Server(shown), read_only))
        }

        /// Refuses a database that cannot hold a store: not UTF8, or no
        /// schema on the search path.
        fn check_server(&self) -> Result<()> {
            let fail = |reason: String| Error::Connect { url: self.location.to_string(), reason };
            let (encoding, schema) =
                self.conn.query_one("SELECT current_setting('server_encoding'), current_schema()", &[], |r| {
                    Ok((r.string(0)?, r.opt_string(1)?))
                })?;
            if encoding != "UTF8" {
                return Err(fail(format!("the database's encoding is {encoding}; a decision store needs UTF8")));
            }
            if schema.is_none() {
                return Err(fail("the search path names no existing schema to hold the store".into()));
            }
            Ok(())
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
            let url = || self.location.to_string();
            if !history {
                if tables == 0 {
                    return Ok(0);
                }
                return Err(Error::NotAStoreDatabase {
                    url: url(),
                    reason: "the schema holds tables of another application, not a decision store".into(),
                });
            }
            // The history table exists (checked above): its newest version, in one query.
            let found = self.conn.query_one(HISTORY_VERSION, &[], |r| r.i64(0))?;
            if found > 0 && !log {
                return Err(Error::NotAStoreDatabase {
                    url: url(),
                    reason: "the schema holds another application's migrations, not a decision store".into(),
                });
            }
            let supported = supported_schema_version();
            if found > supported {
                return Err(Error::IncompatibleVersion { store: self.location.clone(), found, supported });
            }
            self.verify_history()?;
            Ok(found)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::redact;

        #[test]
        fn passwords_never_show() {
            assert_eq!(redact("postgres://u:pw@h:5432/db"), "postgres://u:***@h:5432/db");
            assert_eq!(redact("postgres://u@h/db?password=pw&sslmode=disable"), "postgres://u@h/db?sslmode=disable");
            assert_eq!(redact("postgresql://h/db?Password=pw"), "postgresql://h/db");
            assert_eq!(redact("host=h user=u password=pw"), "(a connection string)");
        }
    }
}
