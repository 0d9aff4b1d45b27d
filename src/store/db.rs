//! One connection, SQLite or PostgreSQL, behind the few calls the store's
//! queries need, so each query is written once.
//!
//! Queries are written in SQLite's dialect with numbered parameters (`?1`)
//! and `IN rarray(?N)` for a list bound as one parameter. On PostgreSQL the
//! text is rewritten once per statement (`$1`, `= ANY($N)`) and the
//! prepared statement is cached by its text, as rusqlite's cache does.
//! Values go in as [`Value`] and come out of a [`Row`] by the type the
//! code asks for, whatever integer width the server chose for a column.
//!
//! Neither driver's types leave the store module.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use postgres::types::{IsNull, ToSql as PgToSql, Type};

use super::borrowed::BorrowedStmt;
use super::integrity::Field;
use crate::error::{Error, Result};

/// A parameter value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    /// A list of keys, for `IN rarray(?N)`.
    Ints(&'a [i64]),
    /// A list of texts, for `IN rarray(?N)`.
    Texts(&'a [String]),
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}
impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(v)
    }
}
impl<'a> From<&'a [i64]> for Value<'a> {
    fn from(v: &'a [i64]) -> Self {
        Value::Ints(v)
    }
}
impl<'a> From<&'a [String]> for Value<'a> {
    fn from(v: &'a [String]) -> Self {
        Value::Texts(v)
    }
}
impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}
impl<'a> From<&'a Option<String>> for Value<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().map_or(Value::Null, Value::Text)
    }
}

/// Parameters of a statement: `vals![a, b]`.
macro_rules! vals {
    ($($v:expr),* $(,)?) => { &[$($crate::store::db::Value::from($v)),*][..] };
}
pub(crate) use vals;

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value as Owned, ValueRef};
        Ok(match *self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(i)),
            Value::Real(r) => ToSqlOutput::Borrowed(ValueRef::Real(r)),
            Value::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            // What `rarray()` reads: rusqlite's `Array`, passed as a pointer.
            Value::Ints(v) => {
                let array: Vec<Owned> = v.iter().map(|&i| Owned::Integer(i)).collect();
                ToSqlOutput::from_rc(Rc::new(array), c"rarray")
            }
            Value::Texts(v) => {
                let array: Vec<Owned> = v.iter().map(|s| Owned::Text(s.clone())).collect();
                ToSqlOutput::from_rc(Rc::new(array), c"rarray")
            }
        })
    }
}

impl PgToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                _ => Err(format!("an integer cannot go into a {ty} parameter").into()),
            },
            Value::Real(r) => match *ty {
                Type::FLOAT4 => (r as f32).to_sql(ty, out),
                Type::FLOAT8 => r.to_sql(ty, out),
                _ => Err(format!("a number cannot go into a {ty} parameter").into()),
            },
            Value::Text(t) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => t.to_sql(ty, out),
                _ => Err(format!("text cannot go into a {ty} parameter").into()),
            },
            Value::Ints(v) if *ty == Type::INT8_ARRAY => v.to_sql(ty, out),
            Value::Texts(v) if *ty == Type::TEXT_ARRAY => v.to_sql(ty, out),
            Value::Ints(_) | Value::Texts(_) => Err(format!("a list cannot go into a {ty} parameter").into()),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::BOOL
                | Type::FLOAT8
                | Type::FLOAT4
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
                | Type::INT8_ARRAY
                | Type::TEXT_ARRAY
        )
    }

    postgres::types::to_sql_checked!();
}

/// A result row of either backend.
pub(crate) enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a postgres::Row),
}

fn bad_column(i: usize, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Storage(format!("column {i}: expected {what}: {e}").into())
}

impl Row<'_> {
    /// Where the column called `name` is, `None` when the query has none.
    pub(crate) fn column_index(&self, name: &str) -> Option<usize> {
        match self {
            Row::Sqlite(r) => r.as_ref().column_index(name).ok(),
            Row::Postgres(r) => r.columns().iter().position(|c| c.name() == name),
        }
    }

    /// A column's value as the content hashes encode it.
    pub(crate) fn field(&self, i: usize) -> Result<Field<'_>> {
        match self {
            Row::Sqlite(r) => Ok(r.get_ref(i).map_err(super::storage)?.into()),
            Row::Postgres(r) => {
                let ty = r.columns()[i].type_().clone();
                let err = |e| bad_column(i, "a value", e);
                Ok(match ty {
                    Type::INT8 => r.try_get::<_, Option<i64>>(i).map_err(err)?.map_or(Field::Null, Field::Int),
                    Type::INT4 => {
                        r.try_get::<_, Option<i32>>(i).map_err(err)?.map_or(Field::Null, |v| Field::Int(v.into()))
                    }
                    Type::INT2 => {
                        r.try_get::<_, Option<i16>>(i).map_err(err)?.map_or(Field::Null, |v| Field::Int(v.into()))
                    }
                    Type::FLOAT8 => r.try_get::<_, Option<f64>>(i).map_err(err)?.map_or(Field::Null, Field::Real),
                    Type::BYTEA => r.try_get::<_, Option<&[u8]>>(i).map_err(err)?.map_or(Field::Null, Field::Blob),
                    _ => r.try_get::<_, Option<&str>>(i).map_err(err)?.map_or(Field::Null, Field::Text),
                })
            }
        }
    }

    /// An integer (or boolean) column that may be NULL.
    pub(crate) fn opt_i64(&self, i: usize) -> Result<Option<i64>> {
        match self {
            Row::Sqlite(r) => r.get(i).map_err(super::storage),
            Row::Postgres(r) => {
                let err = |e| bad_column(i, "an integer", e);
                match *r.columns()[i].type_() {
                    Type::INT8 => r.try_get(i).map_err(err),
                    Type::INT4 => Ok(r.try_get::<_, Option<i32>>(i).map_err(err)?.map(i64::from)),
                    Type::INT2 => Ok(r.try_get::<_, Option<i16>>(i).map_err(err)?.map(i64::from)),
                    Type::BOOL => Ok(r.try_get::<_, Option<bool>>(i).map_err(err)?.map(i64::from)),
                    ref other => Err(bad_column(i, "an integer", other)),
                }
            }
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
            Row::Sqlite(r) => r.get(i).map_err(super::storage),
            Row::Postgres(r) => match *r.columns()[i].type_() {
                Type::FLOAT4 => {
                    Ok(r.try_get::<_, Option<f32>>(i).map_err(|e| bad_column(i, "a number", e))?.map(f64::from))
                }
                Type::FLOAT8 => r.try_get(i).map_err(|e| bad_column(i, "a number", e)),
                _ => Ok(self.opt_i64(i)?.map(|v| v as f64)),
            },
        }
    }

    /// A text column that may be NULL, borrowed from the row.
    pub(crate) fn opt_str(&self, i: usize) -> Result<Option<&str>> {
        match self {
            Row::Sqlite(r) => {
                r.get_ref(i).map_err(super::storage)?.as_str_or_null().map_err(|e| bad_column(i, "text", e))
            }
            Row::Postgres(r) => r.try_get(i).map_err(|e| bad_column(i, "text", e)),
        }
    }

    /// A text column's bytes, not yet checked as UTF-8 (ids check their own
    /// 26 ASCII characters in one pass).
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<&[u8]>> {
        match self {
            Row::Sqlite(r) => match r.get_ref(i).map_err(super::storage)? {
                rusqlite::types::ValueRef::Text(t) => Ok(Some(t)),
                rusqlite::types::ValueRef::Null => Ok(None),
                other => Err(bad_column(i, "text", other.data_type())),
            },
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

/// The PostgreSQL side: the client and its prepared statements.
pub(crate) struct Pg {
    client: RefCell<postgres::Client>,
    statements: RefCell<HashMap<String, postgres::Statement>>,
    in_transaction: Cell<bool>,
    /// A statement of the open transaction failed: PostgreSQL has aborted
    /// it, and its COMMIT would only roll it back.
    failed: Cell<bool>,
    /// Cursors declared so far, for unique names.
    cursors: Cell<u64>,
}

/// Rows a cursor fetches at a time.
const CURSOR_ROWS: usize = 1000;

/// A store's connection.
pub(crate) enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(Box<Pg>),
}

/// Maps a PostgreSQL error to ours: lock timeouts and serialization
/// failures are [`Error::Busy`], everything else a storage error.
pub(crate) fn pg_storage(e: postgres::Error) -> Error {
    use postgres::error::SqlState;
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE && db.message().contains("0x00") {
            return Error::validation("text", NUL_REASON);
        }
        if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::LOCK_NOT_AVAILABLE
        {
            return Error::Busy;
        }
        return Error::Storage(format!("PostgreSQL: {}", db.message()).into());
    }
    Error::Storage(Box::new(e))
}

/// Why PostgreSQL refuses a text: its text type cannot hold U+0000.
const NUL_REASON: &str = "holds the NUL character (U+0000), which PostgreSQL text cannot store";

/// PostgreSQL's text cannot hold U+0000 (SQLite's can): refuse it by
/// field name before the server refuses it by byte. JSON columns are not
/// affected: JSON writes the character as `\u0000`.
pub(crate) fn no_nul(field: &str, text: &str) -> Result<()> {
    if text.contains('\0') {
        return Err(Error::validation(field, NUL_REASON));
    }
    Ok(())
}

/// `?N` -> `$N` and `IN rarray(?N)` -> `= ANY($N)`, outside quoted text.
pub(crate) fn to_postgres(sql: &str) -> String {
    let sql = sql.replace("IN rarray(?", "= ANY(?");
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

impl Pg {
    pub(crate) fn new(client: postgres::Client) -> Pg {
        Pg {
            client: RefCell::new(client),
            statements: RefCell::default(),
            in_transaction: Cell::new(false),
            failed: Cell::new(false),
            cursors: Cell::new(0),
        }
    }

    /// Maps a statement's error, remembering that it aborted the open transaction.
    fn fail(&self, e: postgres::Error) -> Error {
        pg_storage(self.failing(e))
    }

    /// Remembers that `e` aborted the open transaction, if one is open.
    fn failing(&self, e: postgres::Error) -> postgres::Error {
        if self.in_transaction.get() {
            self.failed.set(true);
        }
        e
    }

    /// Opens a transaction with `begin` (a BEGIN and its settings).
    fn begin(&self, begin: &str) -> Result<()> {
        self.client.borrow_mut().batch_execute(begin).map_err(pg_storage)?;
        self.in_transaction.set(true);
        self.failed.set(false);
        Ok(())
    }

    pub(crate) fn client(&self) -> std::cell::RefMut<'_, postgres::Client> {
        self.client.borrow_mut()
    }

    fn statement(&self, sql: &str) -> Result<postgres::Statement> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let stmt = self.client.borrow_mut().prepare(&to_postgres(sql)).map_err(|e| self.fail(e))?;
        self.statements.borrow_mut().insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    fn params<'p>(params: &'p [Value<'p>]) -> Vec<&'p (dyn PgToSql + Sync)> {
        params.iter().map(|p| p as &(dyn PgToSql + Sync)).collect()
    }

    fn query(&self, sql: &str, params: &[Value<'_>]) -> Result<Vec<postgres::Row>> {
        let stmt = self.statement(sql)?;
        self.client.borrow_mut().query(&stmt, &Self::params(params)).map_err(|e| self.fail(e))
    }
}

impl Conn {
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Conn::Sqlite(c) => Some(c),
            Conn::Postgres(_) => None,
        }
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Conn::Postgres(_))
    }

    /// Runs one statement; returns the number of rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Value<'_>]) -> Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    /// Statements without parameters or results, separated by `;`.
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(c) => c.execute_batch(sql).map_err(super::storage),
            Conn::Postgres(pg) => pg.client.borrow_mut().batch_execute(sql).map_err(|e| pg.fail(e)),
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
                let mut stmt = c.prepare_cached(sql).map_err(super::storage)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(super::storage)?;
                while let Some(r) = rows.next().map_err(super::storage)? {
                    f(&Row::Sqlite(r))?;
                }
                Ok(())
            }
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
        mut f: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let Conn::Postgres(pg) = self else { return self.for_each(sql, params, f) };
        if !pg.in_transaction.get() {
            return self.for_each(sql, params, f);
        }
        let cursor = format!("dstore_rows_{}", pg.cursors.get());
        pg.cursors.set(pg.cursors.get() + 1);
        let declare = format!("DECLARE {cursor} NO SCROLL CURSOR FOR {}", to_postgres(sql));
        let fetch = format!("FETCH {CURSOR_ROWS} FROM {cursor}");
        pg.client.borrow_mut().execute(declare.as_str(), &Pg::params(params)).map_err(|e| pg.fail(e))?;
        loop {
            // The borrow ends before `f` runs, so `f` may query the store too.
            let rows = pg.client.borrow_mut().query(fetch.as_str(), &[]).map_err(|e| pg.fail(e))?;
            for r in &rows {
                f(&Row::Postgres(r))?;
            }
            if rows.len() < CURSOR_ROWS {
                break;
            }
        }
        pg.client.borrow_mut().batch_execute(&format!("CLOSE {cursor}")).map_err(|e| pg.fail(e))
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
        self.prepare(sql)?.query_opt(params, f)
    }

    /// The one result row turned into a `T`; a query that returns none is a storage error.
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?.ok_or_else(|| {
            Error::Storage(
                format!("no row from {}", sql.split_whitespace().take(6).collect::<Vec<_>>().join(" ")).into(),
            )
        })
    }

    /// A statement held across many executions (a bulk insert's).
    pub(crate) fn prepare(&self, sql: &str) -> Result<Stmt<'_>> {
        Ok(match self {
            Conn::Sqlite(c) => Stmt::Sqlite(c.prepare_cached(sql).map_err(super::storage)?),
            Conn::Postgres(pg) => Stmt::Postgres(pg, pg.statement(sql)?),
        })
    }

    /// [`Conn::prepare`] for a statement that only writes and runs once per
    /// row of a large batch: on SQLite its texts are bound without a copy
    /// ([`BorrowedStmt`]), and it is prepared afresh rather than cached.
    pub(crate) fn prepare_write(&self, sql: &str) -> Result<Stmt<'_>> {
        Ok(match self {
            Conn::Sqlite(c) => Stmt::SqliteWrite(BorrowedStmt::prepare(c, sql).map_err(super::storage)?),
            Conn::Postgres(_) => self.prepare(sql)?,
        })
    }

    /// True inside a transaction.
    pub(crate) fn in_transaction(&self) -> bool {
        match self {
            Conn::Sqlite(c) => !c.is_autocommit(),
            Conn::Postgres(pg) => pg.in_transaction.get(),
        }
    }

    /// Starts a write transaction. Writers queue here: SQLite's
    /// `BEGIN IMMEDIATE` takes the file's write lock, and on PostgreSQL the
    /// row lock on `store_log` (which every write updates) does the same,
    /// so the hash chains and kept counts see one writer at a time.
    pub(crate) fn begin_write(&self) -> Result<Tx<'_>> {
        match self {
            Conn::Sqlite(c) => c.execute_batch("BEGIN IMMEDIATE").map_err(super::storage)?,
            Conn::Postgres(pg) => {
                // READ COMMITTED whatever the server's default: a writer
                // that waited for the row lock then reads the rows its
                // predecessor committed instead of failing to serialize.
                // It waits 5 s at most, as SQLite's busy timeout does.
                pg.begin("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '5s'")?;
                let tx = Tx { conn: self, done: false, unlogged: false };
                self.query_one("SELECT entries FROM store_log WHERE id = 1 FOR UPDATE", &[], |_| Ok(()))?;
                return Ok(tx);
            }
        }
        Ok(Tx { conn: self, done: false, unlogged: false })
    }

    /// Starts a write transaction that bypasses SQLite's write-ahead log:
    /// the file goes to rollback-journal mode for the transaction and back
    /// to WAL when it ends. A rollback journal keeps only the pages the file
    /// had before, so pages the transaction adds are written once, to the
    /// file, instead of to the log and again by the checkpoint.
    ///
    /// `None` (nothing changed) where that cannot be done: on PostgreSQL, and
    /// while another connection has the file open (leaving WAL needs the
    /// file to itself; this asks once, without waiting). The transaction
    /// takes the file's exclusive lock at once (`BEGIN EXCLUSIVE`): a reader
    /// that got in before the first page is written would otherwise make
    /// the load wait for it and fail. Readers that open the file meanwhile
    /// wait up to the busy timeout, as writers always do. `synchronous` is
    /// FULL meanwhile: with a rollback journal NORMAL can lose the file to a
    /// badly timed power cut; it costs one more sync of a journal that holds
    /// only the few pages the file had.
    pub(crate) fn begin_unlogged_write(&self, busy_timeout: std::time::Duration) -> Result<Option<Tx<'_>>> {
        let Conn::Sqlite(c) = self else { return Ok(None) };
        c.busy_timeout(std::time::Duration::ZERO).map_err(super::storage)?;
        let mode = c.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get::<_, String>(0));
        // Once the mode switched, dropping `tx` puts WAL back, whatever fails.
        let tx = mode.is_ok_and(|m| m.eq_ignore_ascii_case("delete")).then_some(Tx {
            conn: self,
            done: false,
            unlogged: true,
        });
        c.busy_timeout(busy_timeout).map_err(super::storage)?;
        let Some(tx) = tx else { return Ok(None) };
        c.pragma_update(None, "synchronous", "FULL").map_err(super::storage)?;
        c.execute_batch("BEGIN EXCLUSIVE").map_err(super::storage)?;
        Ok(Some(tx))
    }

    /// Back to write-ahead logging (and `synchronous=NORMAL`) after
    /// [`Conn::begin_unlogged_write`]. Entering WAL needs only a moment's
    /// lock. Should it fail, the file stays sound in rollback-journal mode,
    /// and the next writer to open it restores WAL (`Store::configure`).
    fn resume_wal(&self) {
        if let Conn::Sqlite(c) = self {
            let _ = c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
            let _ = c.pragma_update(None, "synchronous", "NORMAL");
        }
    }

    /// Starts a read transaction: its statements see one state of the store.
    pub(crate) fn begin_read(&self) -> Result<Tx<'_>> {
        match self {
            Conn::Sqlite(c) => {
                c.execute_batch("BEGIN DEFERRED").map_err(super::storage)?;
                let tx = Tx { conn: self, done: false, unlogged: false };
                // A deferred transaction takes its snapshot at the first read: take it now.
                c.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())).map_err(super::storage)?;
                Ok(tx)
            }
            Conn::Postgres(pg) => {
                pg.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
                Ok(Tx { conn: self, done: false, unlogged: false })
            }
        }
    }

    fn end(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(c) => {
                let out = c.execute_batch(sql).map_err(super::storage);
                // A COMMIT that failed (busy, disk full) leaves the transaction open: end it.
                if out.is_err() && !c.is_autocommit() {
                    let _ = c.execute_batch("ROLLBACK");
                }
                out
            }
            Conn::Postgres(pg) => {
                // PostgreSQL answers COMMIT of an aborted transaction by rolling it back, without an error.
                let aborted = pg.failed.replace(false) && sql == "COMMIT";
                let out =
                    pg.client.borrow_mut().batch_execute(if aborted { "ROLLBACK" } else { sql }).map_err(pg_storage);
                pg.in_transaction.set(false);
                if aborted {
                    return Err(Error::Storage(
                        "a statement of this transaction failed, so PostgreSQL rolled all of it back".into(),
                    ));
                }
                out
            }
        }
    }
}

/// An open transaction: [`Tx::commit`] ends it, dropping it rolls it back.
pub(crate) struct Tx<'c> {
    conn: &'c Conn,
    done: bool,
    /// Begun by [`Conn::begin_unlogged_write`]: WAL resumes when it ends.
    unlogged: bool,
}

impl Tx<'_> {
    pub(crate) fn commit(mut self) -> Result<()> {
        self.done = true;
        // Drop resumes WAL, after a failed COMMIT too (`end` rolled it back).
        self.conn.end("COMMIT")
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.end("ROLLBACK");
        }
        if self.unlogged {
            self.conn.resume_wal();
        }
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

/// A prepared statement held by its caller.
pub(crate) enum Stmt<'c> {
    Sqlite(rusqlite::CachedStatement<'c>),
    /// A SQLite statement that writes, binding texts without copying them
    /// (see [`Conn::prepare_write`]).
    SqliteWrite(BorrowedStmt<'c>),
    Postgres(&'c Pg, postgres::Statement),
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
            Stmt::Postgres(pg, s) => {
                let n = pg.client.borrow_mut().execute(&*s, &Pg::params(params));
                n.map(|n| n as usize).map_err(|e| EngineError::Postgres(pg.failing(e)))
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
                let mut rows = s.query(rusqlite::params_from_iter(params)).map_err(super::storage)?;
                match rows.next().map_err(super::storage)? {
                    Some(r) => f(&Row::Sqlite(r)).map(Some),
                    None => Ok(None),
                }
            }
            Stmt::SqliteWrite(_) => Err(Error::Storage("a statement prepared for writing was queried".into())),
            Stmt::Postgres(pg, s) => {
                let row = pg.client.borrow_mut().query_opt(&*s, &Pg::params(params)).map_err(|e| pg.fail(e))?;
                row.map(|r| f(&Row::Postgres(&r))).transpose()
            }
        }
    }
}

/// An engine's own error, for the few callers that read it.
pub(crate) enum EngineError {
    Sqlite(rusqlite::Error),
    Postgres(postgres::Error),
}

impl EngineError {
    /// The constraint a unique violation broke: SQLite's column list
    /// (`decisions.decision_id`) or PostgreSQL's constraint name.
    pub(crate) fn unique_violation(&self) -> Option<String> {
        match self {
            EngineError::Sqlite(rusqlite::Error::SqliteFailure(e, Some(m)))
                if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
            {
                Some(m.strip_prefix("UNIQUE constraint failed: ").unwrap_or(m).to_owned())
            }
            EngineError::Postgres(e) => e
                .as_db_error()
                .filter(|d| *d.code() == postgres::error::SqlState::UNIQUE_VIOLATION)
                .map(|d| d.constraint().unwrap_or_default().to_owned()),
            _ => None,
        }
    }

    pub(crate) fn into_error(self) -> Error {
        match self {
            EngineError::Sqlite(e) => super::storage(e),
            EngineError::Postgres(e) => pg_storage(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::to_postgres;

    #[test]
    fn placeholders_and_lists_are_rewritten_outside_quotes() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE k IN rarray(?1) AND b = ?2 AND c = '?'"),
            "SELECT a FROM t WHERE k = ANY($1) AND b = $2 AND c = '?'"
        );
    }
}
