//! A SQLite statement that binds its texts without copying them.
//!
//! rusqlite binds every text with `SQLITE_TRANSIENT`: SQLite allocates and
//! copies each value before the statement runs, and the statement copies it
//! again into the record it writes. For the INSERT that runs once per
//! imported decision, about 1.3 KB of text in 20 parameters, that first copy
//! (an allocation, a copy and a free per text) was 18 % of an import's
//! writer thread. [`BorrowedStmt`] binds with `SQLITE_STATIC` instead: SQLite
//! reads the caller's bytes in place, which is sound because the values
//! are borrowed for the whole of [`BorrowedStmt::execute`], and every
//! binding is cleared before it returns, so no pointer outlives the call.
//!
//! This is the crate's only `unsafe` code: the few FFI calls rusqlite has no
//! safe form for. Errors of binding and running come back as rusqlite's
//! own, built as rusqlite builds them, so callers read them the same way
//! (a unique violation still names its columns). A statement that does not
//! prepare gives SQLite's message as a plain `SqliteFailure`, without
//! rusqlite's offset into the SQL: only fixed statements of this crate come
//! here.

use std::ffi::{c_int, CStr};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use rusqlite::{ffi, Connection};

use super::value::Value;

/// A prepared statement of `conn` that writes: no rows are read from it.
pub(crate) struct BorrowedStmt<'c> {
    stmt: NonNull<ffi::sqlite3_stmt>,
    db: *mut ffi::sqlite3,
    params: usize,
    /// Borrows the connection, which must outlive the statement.
    conn: PhantomData<&'c Connection>,
}

/// The error rusqlite would give for `code` from `db` (its `error_from_handle`):
/// the connection's message when the failure is its latest, else SQLite's
/// text for the code.
///
/// # Safety
/// `db` is an open connection handle.
unsafe fn error(db: *mut ffi::sqlite3, code: c_int) -> rusqlite::Error {
    // SAFETY: `db` is open; both messages are C strings that SQLite owns.
    let message = unsafe {
        let text = if ffi::sqlite3_errcode(db) == code { ffi::sqlite3_errmsg(db) } else { ffi::sqlite3_errstr(code) };
        (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned())
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), message)
}

impl<'c> BorrowedStmt<'c> {
    pub(crate) fn prepare(conn: &'c Connection, sql: &str) -> rusqlite::Result<Self> {
        let len = c_int::try_from(sql.len()).map_err(|_| rusqlite::Error::InvalidQuery)?;
        // SAFETY: the handle belongs to `conn`, which the statement borrows.
        let db = unsafe { conn.handle() };
        let mut stmt = ptr::null_mut();
        let mut tail = ptr::null();
        // SAFETY: SQLite reads `len` bytes of `sql` and writes the statement
        // and the end of its text.
        let code = unsafe {
            ffi::sqlite3_prepare_v3(db, sql.as_ptr().cast(), len, ffi::SQLITE_PREPARE_PERSISTENT, &mut stmt, &mut tail)
        };
        if code != ffi::SQLITE_OK {
            // SAFETY: `db` is open.
            return Err(unsafe { error(db, code) });
        }
        // No statement in `sql`: nothing to finalize.
        let stmt = NonNull::new(stmt).ok_or(rusqlite::Error::InvalidQuery)?;
        // SAFETY: `stmt` is a live statement (finalized by its Drop from here on).
        let params = usize::try_from(unsafe { ffi::sqlite3_bind_parameter_count(stmt.as_ptr()) }).unwrap_or(0);
        let prepared = BorrowedStmt { stmt, db, params, conn: PhantomData };
        // As rusqlite: a second statement after the first is an error, not ignored.
        let used = (tail as usize).saturating_sub(sql.as_ptr() as usize);
        if !sql.get(used..).unwrap_or_default().trim().is_empty() {
            return Err(rusqlite::Error::MultipleStatement);
        }
        Ok(prepared)
    }

    /// Binds `params` in place, runs the statement to its end and returns
    /// the number of rows it changed.
    pub(crate) fn execute(&mut self, params: &[Value<'_>]) -> rusqlite::Result<usize> {
        if params.len() != self.params {
            return Err(rusqlite::Error::InvalidParameterCount(params.len(), self.params));
        }
        let stmt = self.stmt.as_ptr();
        let result = self.bind(params).and_then(|()| {
            // SAFETY: `stmt` is live and every parameter is bound.
            match unsafe { ffi::sqlite3_step(stmt) } {
                // SAFETY: `db` is open.
                ffi::SQLITE_DONE => Ok(usize::try_from(unsafe { ffi::sqlite3_changes64(self.db) }).unwrap_or(0)),
                ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
                // SAFETY: `db` is open; read before the reset below.
                code => Err(unsafe { error(self.db, code) }),
            }
        });
        // SAFETY: `stmt` is live. The reset repeats the step's error (already
        // taken); clearing leaves no pointer into `params` behind.
        unsafe {
            ffi::sqlite3_reset(stmt);
            ffi::sqlite3_clear_bindings(stmt);
        }
        result
    }

    fn bind(&mut self, params: &[Value<'_>]) -> rusqlite::Result<()> {
        let stmt = self.stmt.as_ptr();
        for (i, value) in params.iter().enumerate() {
            // At most the statement's parameter count, an int.
            let at = (i + 1) as c_int;
            // SAFETY: `stmt` is live; a text's bytes stay borrowed until
            // `execute` clears the bindings, before `params` can go away.
            let code = unsafe {
                match *value {
                    Value::Null => ffi::sqlite3_bind_null(stmt, at),
                    Value::Int(v) => ffi::sqlite3_bind_int64(stmt, at, v),
                    Value::Real(v) => ffi::sqlite3_bind_double(stmt, at, v),
                    // An empty text gets a pointer that is valid, not merely non-null.
                    Value::Text(t) => ffi::sqlite3_bind_text64(
                        stmt,
                        at,
                        if t.is_empty() { c"".as_ptr() } else { t.as_ptr().cast() },
                        t.len() as ffi::sqlite3_uint64,
                        ffi::SQLITE_STATIC(),
                        ffi::SQLITE_UTF8 as u8,
                    ),
                    Value::Ints(_) | Value::Texts(_) => {
                        return Err(rusqlite::Error::SqliteFailure(
                            ffi::Error::new(ffi::SQLITE_MISUSE),
                            Some(format!("parameter {at}: a list is bound only for rarray()")),
                        ))
                    }
                }
            };
            if code != ffi::SQLITE_OK {
                // SAFETY: `db` is open.
                return Err(unsafe { error(self.db, code) });
            }
        }
        Ok(())
    }
}

impl Drop for BorrowedStmt<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement is live and finalized once, here.
        unsafe {
            ffi::sqlite3_finalize(self.stmt.as_ptr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, r REAL, note TEXT)").unwrap();
        conn
    }

    type Row = (String, Option<i64>, Option<f64>, Option<String>);

    fn rows(conn: &Connection) -> Vec<Row> {
        let mut stmt = conn.prepare("SELECT k, n, r, note FROM t ORDER BY rowid").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn writes_each_kind_of_value_as_rusqlite_would() {
        let conn = table();
        let mut insert = BorrowedStmt::prepare(&conn, "INSERT INTO t VALUES (?1, ?2, ?3, ?4)").unwrap();
        let key = String::from("ké\u{1F600}");
        assert_eq!(insert.execute(&[Value::Text(&key), Value::Int(-7), Value::Real(0.25), Value::Null]).unwrap(), 1);
        drop(key); // the row holds its own copy
        assert_eq!(insert.execute(&[Value::Text(""), Value::Null, Value::Null, Value::Text("x")]).unwrap(), 1);
        assert_eq!(
            rows(&conn),
            vec![
                ("ké\u{1F600}".to_owned(), Some(-7), Some(0.25), None),
                (String::new(), None, None, Some("x".to_owned())),
            ]
        );
    }

    #[test]
    fn errors_read_like_rusqlites_and_leave_the_statement_usable() {
        let conn = table();
        let sql = "INSERT INTO t VALUES (?1, ?2, ?3, ?4)";
        let mut insert = BorrowedStmt::prepare(&conn, sql).unwrap();
        let row = [Value::Text("a"), Value::Int(1), Value::Null, Value::Null];
        insert.execute(&row).unwrap();
        let ours = insert.execute(&row).unwrap_err();
        let theirs = conn.execute(sql, rusqlite::params!["a", 1, None::<f64>, None::<String>]).unwrap_err();
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
        assert_eq!(ours.sqlite_error_code(), Some(rusqlite::ErrorCode::ConstraintViolation));

        assert!(matches!(insert.execute(&row[..3]), Err(rusqlite::Error::InvalidParameterCount(3, 4))));
        let list = insert.execute(&[Value::Text("b"), Value::Ints(&[1]), Value::Null, Value::Null]).unwrap_err();
        assert!(list.to_string().contains("parameter 2: a list"), "{list}");
        // Nothing half-bound stays behind: the next row goes in whole.
        insert.execute(&[Value::Text("b"), Value::Null, Value::Null, Value::Null]).unwrap();
        assert_eq!(rows(&conn).len(), 2);
        assert!(
            matches!(BorrowedStmt::prepare(&conn, "INSERT INTO nowhere VALUES (1)"), Err(e) if e.to_string().contains("no such table: nowhere"))
        );
    }
}
