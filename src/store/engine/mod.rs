//! The engine floor: one connection, SQLite or PostgreSQL, behind the few
//! calls the tables need, so each query is written once.
//!
//! Here the two engines' connections differ: their settings,
//! transactions, statements, binding values, reading rows, mapping the
//! drivers' errors to the crate's (keeping SQLite's result code and
//! PostgreSQL's SQLSTATE), and what a server tells of itself (`server`).
//! Where a query's text must differ (a row lock on the server, a form its
//! planner runs faster), the `tables` and `workflows` floors keep both
//! texts side by side and pick one by [`Dialect::pick`], and a few checks of
//! `Conn::is_postgres` choose a server's batched path; the schemas differ in
//! `migrations/`. It imports nothing of the floors above it (`tables`,
//! `workflows`, the `Store` API): only the crate's error and the drivers.
//!
//! Queries are written in SQLite's dialect with numbered parameters (`?1`)
//! and `IN rarray(?N)` for a list bound as one parameter. On PostgreSQL the
//! text is rewritten once per statement (`$1`, `= ANY($N)`; see
//! `postgres::rewrite`, which refuses what it cannot rewrite) and the
//! prepared statement is cached by its text, as rusqlite's cache does.
//! Values go in as [`Value`] and come out of a [`Row`] by the type the code
//! asks for, whatever integer width the server chose for a column.
//!
//! Neither driver's types leave this module.

mod borrowed;
#[cfg(feature = "postgres")]
mod postgres;
pub(crate) mod server;
pub(crate) mod sqlite;
pub(crate) mod value;

use std::cell::Cell;

#[cfg(feature = "postgres")]
pub(crate) use self::postgres::{Connector, Pg, Shape};
use borrowed::BorrowedStmt;
pub(crate) use value::{bad_column, vals, Dialect, Value, ValueRef, NUL_REASON};

use crate::error::{Error, Result};

/// A result row of either engine.
pub(crate) enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    #[cfg(feature = "postgres")]
    Postgres(&'a ::postgres::Row),
}

impl Row<'_> {
    /// Where the column called `name` is, `None` when the query has none.
    pub(crate) fn column_index(&self, name: &str) -> Option<usize> {
        match self {
            Row::Sqlite(r) => r.as_ref().column_index(name).ok(),
            #[cfg(feature = "postgres")]
            Row::Postgres(r) => r.columns().iter().position(|c| c.name() == name),
        }
    }

    /// A column's value as stored.
    pub(crate) fn value(&self, i: usize) -> Result<ValueRef<'_>> {
        match self {
            Row::Sqlite(r) => Ok(sqlite::value_ref(r.get_ref(i).map_err(sqlite::error)?)),
            #[cfg(feature = "postgres")]
            Row::Postgres(r) => postgres::value_ref(r, i),
        }
    }

    /// An integer (or boolean) column that may be NULL.
    pub(crate) fn opt_i64(&self, i: usize) -> Result<Option<i64>> {
        match self {
            Row::Sqlite(r) => r.get(i).map_err(sqlite::error),
            #[cfg(feature = "postgres")]
            Row::Postgres(r) => postgres::opt_i64(r, i),
        }
    }

    pub(crate) fn i64(&self, i: usize) -> Result<i64> {
        self.opt_i64(i)?.ok_or_else(|| bad_column(i, "an integer", "NULL"))
    }

    pub(crate) fn bool(&self, i: usize) -> Result<bool> {
        Ok(self.i64(i)? != 0)
    }

    pub(crate) fn opt_f64(&self, i: usize) -> Result<Option<f64>> {
        match self {
            Row::Sqlite(r) => r.get(i).map_err(sqlite::error),
            #[cfg(feature = "postgres")]
            Row::Postgres(r) => postgres::opt_f64(r, i),
        }
    }

    /// A text column that may be NULL, borrowed from the row.
    pub(crate) fn opt_str(&self, i: usize) -> Result<Option<&str>> {
        match self {
            Row::Sqlite(r) => {
                r.get_ref(i).map_err(sqlite::error)?.as_str_or_null().map_err(|e| bad_column(i, "text", e))
            }
            #[cfg(feature = "postgres")]
            Row::Postgres(r) => r.try_get(i).map_err(|e| bad_column(i, "text", e)),
        }
    }

    /// A text column's bytes, not yet checked as UTF-8 (ids check their own
    /// 26 ASCII characters in one pass).
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<&[u8]>> {
        match self {
            Row::Sqlite(r) => match r.get_ref(i).map_err(sqlite::error)? {
                rusqlite::types::ValueRef::Text(t) => Ok(Some(t)),
                rusqlite::types::ValueRef::Null => Ok(None),
                other => Err(bad_column(i, "text", other.data_type())),
            },
            #[cfg(feature = "postgres")]
            Row::Postgres(_) => Ok(self.opt_str(i)?.map(str::as_bytes)),
        }
    }

    /// [`Row::opt_text`] of a column that must not be NULL.
    pub(crate) fn text(&self, i: usize) -> Result<&[u8]> {
        self.opt_text(i)?.ok_or_else(|| bad_column(i, "text", "NULL"))
    }

    pub(crate) fn str(&self, i: usize) -> Result<&str> {
        self.opt_str(i)?.ok_or_else(|| bad_column(i, "text", "NULL"))
    }

    pub(crate) fn string(&self, i: usize) -> Result<String> {
        self.str(i).map(str::to_owned)
    }

    pub(crate) fn opt_string(&self, i: usize) -> Result<Option<String>> {
        Ok(self.opt_str(i)?.map(str::to_owned))
    }
}

/// A store's connection.
pub(crate) enum Conn {
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Postgres(Box<Pg>),
}

impl Conn {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    pub(crate) fn is_postgres(&self) -> bool {
        self.dialect() == Dialect::Postgres
    }

    /// The SQLite connection, for the settings only SQLite has.
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Conn::Sqlite(c) => Some(c),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => None,
        }
    }

    /// Refuses a text this engine cannot store, naming `field` (on
    /// PostgreSQL, text with U+0000; SQLite stores any text).
    pub(crate) fn storable(&self, field: &str, text: &str) -> Result<()> {
        if self.is_postgres() && text.contains('\0') {
            return Err(Error::validation(field, NUL_REASON));
        }
        Ok(())
    }

    /// Runs one statement; returns the number of rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Value<'_>]) -> Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    /// Writes a row of `insert` (`INSERT INTO table (columns) VALUES (...)`)
    /// by the end of the transaction: SQLite writes it now; PostgreSQL
    /// sends the rows of a bulk write together, in one COPY, before the
    /// next statement or the commit. A row that cannot be written (a key
    /// taken) then fails that statement and aborts the transaction, so
    /// defer only rows known to be writable (see `decisions::Inserter`).
    /// Tables go out lower `order` first: a row may refer to rows of a
    /// lower order (a supersession to decisions) whenever they were deferred.
    pub(crate) fn defer(&self, insert: &str, order: u8, params: &[Value<'_>]) -> Result<()> {
        match self {
            Conn::Sqlite(_) => {
                let _ = order; // written at once: no order to keep
                self.execute(insert, params).map(drop)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.defer(insert, order, params),
        }
    }

    /// Statements without parameters or results, separated by `;`.
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(c) => c.execute_batch(sql).map_err(sqlite::error),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.batch(sql),
        }
    }

    /// Calls `f` on each result row, in order. On PostgreSQL the rows are
    /// fetched first, so `f` may run queries of its own.
    pub(crate) fn for_each(
        &self,
        sql: &str,
        params: &[Value<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql).map_err(sqlite::error)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(sqlite::error)?;
                while let Some(r) = rows.next().map_err(sqlite::error)? {
                    f(&Row::Sqlite(r))?;
                }
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => {
                for r in pg.query(sql, params)? {
                    f(&Row::Postgres(&r))?;
                }
                Ok(())
            }
        }
    }

    /// [`Conn::for_each`] for a query over a whole table (export, copy,
    /// check). On PostgreSQL inside a transaction it reads through a
    /// server-side cursor, a thousand rows at a time, so memory stays flat
    /// however large the store; elsewhere it is `for_each`.
    pub(crate) fn for_each_streamed(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        match self {
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) if pg.in_transaction() => {
                let mut f = f;
                pg.for_each_streamed(sql, params, |r| f(&Row::Postgres(r)))
            }
            _ => self.for_each(sql, params, f),
        }
    }

    /// Every result row, each turned into a `T` by `f`.
    pub(crate) fn query_vec<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.for_each(sql, params, |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first result row turned into a `T`, or `None` without rows.
    pub(crate) fn query_opt<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Conn::Sqlite(_) => self.prepare(sql)?.query_opt(params, f),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.query(sql, params)?.first().map(|r| f(&Row::Postgres(r))).transpose(),
        }
    }

    /// Replaces a server's connection with a fresh one (see
    /// [`Pg::reconnect`]); nothing to do for a file.
    pub(crate) fn reconnect(&self) -> Result<()> {
        match self {
            Conn::Sqlite(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.reconnect(),
        }
    }

    /// [`Conn::query_opt`] of a query that the caller knows reads none of
    /// the rows deferred by [`Conn::defer`] (another table, or a key not
    /// among them): on PostgreSQL they stay unsent, so a bulk write's
    /// lookups do not cut its batches short.
    pub(crate) fn query_opt_past_deferred<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Conn::Sqlite(_) => self.query_opt(sql, params, f),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => {
                pg.query_past_deferred(sql, params)?.first().map(|r| f(&Row::Postgres(r))).transpose()
            }
        }
    }

    /// [`Conn::for_each`] of a query that reads none of the deferred rows
    /// (see [`Conn::query_opt_past_deferred`]).
    pub(crate) fn for_each_past_deferred(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        match self {
            Conn::Sqlite(_) => self.for_each(sql, params, f),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => {
                let mut f = f;
                pg.query_past_deferred(sql, params)?.iter().try_for_each(|r| f(&Row::Postgres(r)))
            }
        }
    }

    /// True while rows written with [`Conn::defer`] wait to be sent (never on SQLite).
    pub(crate) fn has_deferred(&self) -> bool {
        match self {
            Conn::Sqlite(_) => false,
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.has_deferred(),
        }
    }

    /// The one result row turned into a `T`; a query that returns none is a storage error.
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?.ok_or_else(|| {
            Error::storage(format!("no row from {}", sql.split_whitespace().take(6).collect::<Vec<_>>().join(" ")))
        })
    }

    /// A statement held across many executions (a bulk insert's).
    pub(crate) fn prepare(&self, sql: &str) -> Result<Stmt<'_>> {
        Ok(match self {
            Conn::Sqlite(c) => Stmt::Sqlite(c.prepare_cached(sql).map_err(sqlite::error)?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => Stmt::Postgres(pg, pg.shape(sql)?),
        })
    }

    /// [`Conn::prepare`] for a statement that only writes and runs once per
    /// row of a large batch: on SQLite its texts are bound without a copy
    /// ([`BorrowedStmt`]), and it is prepared afresh rather than cached.
    pub(crate) fn prepare_write(&self, sql: &str) -> Result<Stmt<'_>> {
        Ok(match self {
            Conn::Sqlite(c) => Stmt::SqliteWrite(BorrowedStmt::prepare(c, sql).map_err(sqlite::error)?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => self.prepare(sql)?,
        })
    }

    /// True inside a transaction.
    pub(crate) fn in_transaction(&self) -> bool {
        match self {
            Conn::Sqlite(c) => !c.is_autocommit(),
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.in_transaction(),
        }
    }

    /// Starts a write transaction: SQLite's `BEGIN IMMEDIATE` takes the
    /// file's one write lock at once (so a writer never fails to upgrade a
    /// read lock), and waits for it up to [`BUSY_TIMEOUT`](value::BUSY_TIMEOUT), polling every
    /// millisecond. PostgreSQL's transaction takes no lock of its own: the
    /// tables lock the rows they must serialise on (the log's, the graph's),
    /// each for as long as [`BUSY_TIMEOUT`](value::BUSY_TIMEOUT) at most.
    pub(crate) fn begin_write(&self) -> Result<WriteTx<'_>> {
        match self {
            Conn::Sqlite(c) => c.execute_batch("BEGIN IMMEDIATE").map_err(sqlite::error)?,
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.begin_write()?,
        }
        Ok(WriteTx(Tx { conn: self, done: false }))
    }

    /// The write transactions of one bulk load: see [`Bulk`].
    pub(crate) fn bulk(&self, unlogged: bool) -> Bulk<'_> {
        Bulk { conn: self, want_unlogged: Cell::new(unlogged), unlogged: Cell::new(false) }
    }

    /// Starts a read transaction: its statements see one state of the store.
    pub(crate) fn begin_read(&self) -> Result<Tx<'_>> {
        match self {
            Conn::Sqlite(c) => {
                c.execute_batch("BEGIN DEFERRED").map_err(sqlite::error)?;
                let tx = Tx { conn: self, done: false };
                // A deferred transaction takes its snapshot at the first read: take it now.
                c.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())).map_err(sqlite::error)?;
                Ok(tx)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => {
                pg.begin_read()?;
                Ok(Tx { conn: self, done: false })
            }
        }
    }

    fn end(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(c) => {
                let out = c.execute_batch(sql).map_err(sqlite::error);
                // A COMMIT that failed (busy, disk full) leaves the transaction open: end it.
                if out.is_err() && !c.is_autocommit() {
                    let _ = c.execute_batch("ROLLBACK");
                }
                out
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(pg) => pg.end(sql),
        }
    }
}

/// An open transaction: [`Tx::commit`] ends it, dropping it rolls it back.
pub(crate) struct Tx<'c> {
    conn: &'c Conn,
    done: bool,
}

impl Tx<'_> {
    pub(crate) fn commit(mut self) -> Result<()> {
        self.done = true;
        self.conn.end("COMMIT")
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.end("ROLLBACK");
        }
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

/// A write transaction: what every function of the tables that writes
/// takes, so a write outside one does not compile.
pub(crate) struct WriteTx<'c>(Tx<'c>);

impl WriteTx<'_> {
    pub(crate) fn commit(self) -> Result<()> {
        self.0.commit()
    }
}

/// The write transactions of one bulk load (an import, a copy, an ingest's
/// changes), begun one after another with [`Bulk::begin`].
///
/// Asked for `unlogged` (a first load into an empty SQLite file), the load
/// bypasses the write-ahead log while no other connection has the file
/// open: see [`sqlite::leave_wal`]. Its transactions then hold the
/// file's exclusive lock, readers included; between two of them another
/// connection may open the file, which puts it back into WAL, and the load
/// goes on through the log. Dropping the `Bulk` restores WAL.
pub(crate) struct Bulk<'c> {
    conn: &'c Conn,
    /// The next transaction may try to leave the log (only the first does).
    want_unlogged: Cell<bool>,
    /// The load writes the file directly.
    unlogged: Cell<bool>,
}

impl<'c> Bulk<'c> {
    /// The next write transaction of the load.
    pub(crate) fn begin(&self) -> Result<WriteTx<'c>> {
        if let Some(c) = self.conn.sqlite() {
            if self.want_unlogged.replace(false) && sqlite::leave_wal(c)? {
                self.unlogged.set(true);
            }
            if self.unlogged.get() {
                if sqlite::begin_unlogged(c)? {
                    return Ok(WriteTx(Tx { conn: self.conn, done: false }));
                }
                // Another connection put the file back into WAL.
                self.unlogged.set(false);
            }
        }
        self.conn.begin_write()
    }

    /// True while the load writes the file without the log.
    pub(crate) fn is_unlogged(&self) -> bool {
        self.unlogged.get()
    }

    /// Call after a commit when another transaction of the load follows:
    /// on SQLite it leaves the lock free for [`sqlite::BULK_GAP`], so a
    /// writer that waits for it gets in (PostgreSQL queues waiters itself).
    pub(crate) fn between(&self) {
        if !self.conn.is_postgres() {
            std::thread::sleep(sqlite::BULK_GAP);
        }
    }
}

impl Drop for Bulk<'_> {
    fn drop(&mut self) {
        if let (Some(c), true) = (self.conn.sqlite(), self.unlogged.get()) {
            sqlite::resume_wal(c);
        }
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.0.conn
    }
}

/// A prepared statement held by its caller.
pub(crate) enum Stmt<'c> {
    Sqlite(rusqlite::CachedStatement<'c>),
    /// A SQLite statement that writes, binding texts without copying them
    /// (see [`Conn::prepare_write`]).
    SqliteWrite(BorrowedStmt<'c>),
    #[cfg(feature = "postgres")]
    Postgres(&'c Pg, std::sync::Arc<Shape>),
}

impl Stmt<'_> {
    pub(crate) fn execute(&mut self, params: &[Value<'_>]) -> Result<usize> {
        self.execute_raw(params).map_err(EngineError::into_error)
    }

    /// Like [`Stmt::execute`], with the engine's error left for the caller
    /// to read (a unique violation names the rule that was broken).
    pub(crate) fn execute_raw(&mut self, params: &[Value<'_>]) -> std::result::Result<usize, EngineError> {
        match self {
            Stmt::Sqlite(s) => s.execute(rusqlite::params_from_iter(params)).map_err(EngineError::Sqlite),
            Stmt::SqliteWrite(s) => s.execute(params).map_err(EngineError::Sqlite),
            #[cfg(feature = "postgres")]
            Stmt::Postgres(pg, s) => {
                pg.send_deferred().map_err(EngineError::Store)?;
                pg.execute(s, params).map_err(EngineError::Store)?.map_err(EngineError::Postgres)
            }
        }
    }

    pub(crate) fn query_opt<T>(
        &mut self,
        params: &[Value<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Stmt::Sqlite(s) => {
                let mut rows = s.query(rusqlite::params_from_iter(params)).map_err(sqlite::error)?;
                match rows.next().map_err(sqlite::error)? {
                    Some(r) => f(&Row::Sqlite(r)).map(Some),
                    None => Ok(None),
                }
            }
            Stmt::SqliteWrite(_) => Err(Error::storage("a statement prepared for writing was queried")),
            #[cfg(feature = "postgres")]
            Stmt::Postgres(pg, s) => {
                let row = pg.query_opt_prepared(s, params)?;
                row.map(|r| f(&Row::Postgres(&r))).transpose()
            }
        }
    }
}

/// An engine's own error, for the few callers that read it.
pub(crate) enum EngineError {
    Sqlite(rusqlite::Error),
    #[cfg(feature = "postgres")]
    Postgres(::postgres::Error),
    /// A failure before the statement ran (sending the rows deferred before it).
    #[cfg(feature = "postgres")]
    Store(Error),
}

impl EngineError {
    /// The constraint a unique violation broke: SQLite's column list
    /// (`decisions.decision_id`) or PostgreSQL's constraint name.
    pub(crate) fn unique_violation(&self) -> Option<String> {
        match self {
            EngineError::Sqlite(e) => sqlite::unique_violation(e),
            #[cfg(feature = "postgres")]
            EngineError::Postgres(e) => postgres::unique_violation(e),
            #[cfg(feature = "postgres")]
            EngineError::Store(_) => None,
        }
    }

    pub(crate) fn into_error(self) -> Error {
        match self {
            EngineError::Sqlite(e) => sqlite::error(e),
            #[cfg(feature = "postgres")]
            EngineError::Postgres(e) => postgres::error(e),
            #[cfg(feature = "postgres")]
            EngineError::Store(e) => e,
        }
    }
}
