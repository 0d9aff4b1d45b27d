//! The SQLite side of the engine: opening a file, its settings, waiting for
//! the write lock, the first load that bypasses the log, and error mapping.
//!
//! ## Waiting for the lock
//!
//! SQLite's own busy handler sleeps longer the longer it waits (1, 2, 5, 10
//! ... up to 100 ms between tries), so a small write that queues behind a
//! bulk writer keeps missing the moment the lock is free: the bulk writer
//! takes it again within microseconds of its commit. Here every writer polls
//! every half millisecond up to [`BUSY_TIMEOUT`], and a bulk writer leaves a
//! gap of [`BULK_GAP`] after each of its commits (`Bulk::between`), which a
//! waiting writer is sure to see. The gap costs a bulk load about 6 % of its
//! time (1.5 ms per 25 ms transaction), waiting writers or not.

use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OpenFlags};

use super::value::{Value, ValueRef, BUSY_TIMEOUT};
use crate::error::{EngineCode, Error, Result, StorageError};

/// How often a writer that waits for the lock tries again.
const BUSY_POLL: Duration = Duration::from_micros(500);

/// How long a bulk writer leaves the lock free after each commit: more than
/// two [`BUSY_POLL`]s (a sleep overruns by 50-100 us), so a waiting writer
/// takes it.
pub(crate) const BULK_GAP: Duration = Duration::from_micros(1500);

/// Maps a SQLite error to the crate's, keeping SQLite's extended result code.
pub(crate) fn error(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseCorrupt, DatabaseLocked, NotADatabase};
    let Some(failure) = e.sqlite_error() else { return Error::storage(e.to_string()) };
    let code = failure.extended_code;
    if code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK {
        // A writer died in a bulk load (`Bulk`): its journal waits for a writable
        // connection, which `recover_journal` opens where the file allows it.
        return Error::Storage(StorageError::engine(
            EngineCode::Sqlite(code),
            "a write was interrupted and left its journal to roll back, which a read-only open cannot do, and \
             this process may not write the file; open the store for writing once as its owner (e.g. `dstore init`)",
        ));
    }
    let engine = StorageError::engine(EngineCode::Sqlite(code), e.to_string());
    match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => Error::Busy,
        Some(DatabaseCorrupt | NotADatabase) => Error::Damaged(engine),
        _ => Error::Storage(engine),
    }
}

/// True for the error of a file that is not a SQLite database.
pub(crate) fn is_not_a_database(e: &Error) -> bool {
    matches!(e, Error::Damaged(s) if s.sqlite_code() == Some(rusqlite::ffi::SQLITE_NOTADB))
}

/// The rule a unique violation broke: SQLite's column list (`decisions.decision_id`).
pub(crate) fn unique_violation(e: &rusqlite::Error) -> Option<String> {
    match e {
        rusqlite::Error::SqliteFailure(f, Some(m))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            Some(m.strip_prefix("UNIQUE constraint failed: ").unwrap_or(m).to_owned())
        }
        _ => None,
    }
}

pub(crate) fn value_ref(v: rusqlite::types::ValueRef<'_>) -> ValueRef<'_> {
    use rusqlite::types::ValueRef as V;
    match v {
        V::Null => ValueRef::Null,
        V::Integer(i) => ValueRef::Int(i),
        V::Real(r) => ValueRef::Real(r),
        // Text that is not UTF-8 reads as its bytes: it can only come from outside the library.
        V::Text(t) => std::str::from_utf8(t).map_or(ValueRef::Blob(t), ValueRef::Text),
        V::Blob(b) => ValueRef::Blob(b),
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value as Owned, ValueRef as R};
        use std::rc::Rc;
        Ok(match *self {
            Value::Null => ToSqlOutput::Borrowed(R::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(R::Integer(i)),
            Value::Real(r) => ToSqlOutput::Borrowed(R::Real(r)),
            Value::Text(t) => ToSqlOutput::Borrowed(R::Text(t.as_bytes())),
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

/// A deterministic SQL function of the tables (the hashes of the log), for
/// migrations and checks to compute with the same code as inserts.
pub(crate) struct ScalarFunction {
    pub(crate) name: &'static str,
    pub(crate) args: usize,
    /// The arguments as stored; an `Err` is the function's error message.
    pub(crate) call: fn(&[ValueRef<'_>]) -> std::result::Result<String, String>,
}

/// Opens a file (`read_only`: never written, never created), with the
/// settings of every connection: the busy handler, `rarray()` and `functions`.
pub(crate) fn open(path: &Path, read_only: bool, functions: &[ScalarFunction]) -> Result<Connection> {
    let conn = if read_only {
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
    } else {
        Connection::open(path)
    }
    .map_err(error)?;
    prepare(conn, functions)
}

/// SQLite's `secure_delete` on this connection: content deleted or
/// overwritten is zeroed in the file, not left in free space.
pub(crate) fn set_secure_delete(c: &Connection, on: bool) -> Result<()> {
    c.pragma_update(None, "secure_delete", on).map_err(error)
}

/// Moves the write-ahead log into the file and empties it, when no reader
/// holds it (best effort: a reader that does keeps the old pages a while).
pub(crate) fn checkpoint(c: &Connection) {
    let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// True for the error of a read-only open that found a journal a dead
/// writer left (SQLite's `SQLITE_READONLY_ROLLBACK`).
pub(crate) fn is_rollback_pending(e: &Error) -> bool {
    matches!(e, Error::Storage(s) if s.sqlite_code() == Some(rusqlite::ffi::SQLITE_READONLY_ROLLBACK))
}

/// Rolls back the journal that a writer killed in the middle of a write
/// left beside `path` (as any writable open does, `sqlite3`'s too), and
/// puts the file back into WAL: a crashed writer must not lock readers
/// out. False, with nothing changed, when this process may not write the
/// file. What the dead writer had committed stays; its unfinished
/// transaction is undone.
pub(crate) fn recover_journal(path: &Path) -> Result<bool> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let Ok(conn) = Connection::open_with_flags(path, flags) else { return Ok(false) };
    conn.busy_handler(Some(poll_busy)).map_err(error)?;
    // The first read of a writable connection rolls a hot journal back.
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)) {
        Ok(_) => {}
        Err(e) if e.sqlite_error().is_some_and(|f| f.code == rusqlite::ErrorCode::ReadOnly) => return Ok(false),
        Err(e) => return Err(error(e)),
    }
    let _ = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
    Ok(true)
}

/// A database in memory, with the settings of [`open`].
pub(crate) fn open_in_memory(functions: &[ScalarFunction]) -> Result<Connection> {
    prepare(Connection::open_in_memory().map_err(error)?, functions)
}

fn prepare(conn: Connection, functions: &[ScalarFunction]) -> Result<Connection> {
    conn.busy_handler(Some(poll_busy)).map_err(error)?;
    // rarray(): bind a whole id list as one parameter (BFS frontiers).
    rusqlite::vtab::array::load_module(&conn).map_err(error)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    for f in functions {
        let call = f.call;
        let args = i32::try_from(f.args).expect("a handful of arguments");
        conn.create_scalar_function(f.name, args, flags, move |ctx| {
            let values: Vec<ValueRef<'_>> = (0..ctx.len()).map(|i| value_ref(ctx.get_raw(i))).collect();
            call(&values).map_err(|m| rusqlite::Error::UserFunctionError(m.into()))
        })
        .map_err(error)?;
    }
    // Per connection, read-only ones too: the checks in queries rely on it.
    conn.pragma_update(None, "foreign_keys", true).map_err(error)?;
    Ok(conn)
}

thread_local! {
    /// When this thread's current wait for a lock began.
    static WAITING_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The busy handler of every connection: try again every [`BUSY_POLL`]
/// until [`BUSY_TIMEOUT`] has passed since the first try (`count` 0).
fn poll_busy(count: i32) -> bool {
    let now = Instant::now();
    let since = WAITING_SINCE.with(|w| {
        if count == 0 || w.get().is_none() {
            w.set(Some(now));
        }
        w.get().unwrap_or(now)
    });
    if now.duration_since(since) >= BUSY_TIMEOUT {
        WAITING_SINCE.with(|w| w.set(None));
        return false;
    }
    std::thread::sleep(BUSY_POLL);
    true
}

/// Settings of a writable connection; run outside any transaction.
/// `file`: the database is a file (WAL is required), not memory.
pub(crate) fn configure_writer(conn: &Connection, file: bool, shown: &str) -> Result<()> {
    // Statement journals in memory, not in temp files: every INSERT into
    // a table with triggers keeps one, a write per page in a file.
    // Not for readers: with it, a projection after a plan's tree on the
    // same connection took 133 ms instead of 95 (measured, cause unknown);
    // `check` sets it for its own sorts.
    conn.pragma_update(None, "temp_store", "MEMORY").map_err(error)?;
    // 8 MiB of page cache (SQLite's default is 2 MiB) for bulk imports,
    // which touch four indexes. With 8 KiB pages 32 MiB was faster; with
    // 16 KiB pages 8 MiB is as fast (100k import 715-778 ms against
    // 748-1034 ms) and the import's peak memory drops from 177 to 79 MB.
    // Not for readers: a short read pays for every page of a larger cache
    // as fresh memory (measured: `tree` 16 -> 21 ms, `project` 95 -> 121 ms).
    conn.pragma_update(None, "cache_size", -8_192).map_err(error)?;
    // 16 KiB pages for new files (a no-op on existing ones): a decision
    // row is about 1.5 KiB; 4 KiB pages hold two with a quarter of each
    // unused, and each size up means fewer pages to split, link and log.
    // Measured on a 100k import, whole process: 4 -> 8 KiB wrote 18 %
    // less and took 4 % less time; 8 -> 16 KiB 790 -> 685 ms and 4 %
    // less file, with a plan's tree 6.9 -> 6.3 ms and the breadth-4
    // projection 44 -> 43 ms.
    conn.pragma_update(None, "page_size", 16384).map_err(error)?;
    // WAL: readers and the writer do not block each other, and a commit is one append.
    // Changing the mode answers "locked" at once, without the busy handler,
    // while another connection switches a new file too: wait as it would.
    let started = std::time::Instant::now();
    let mode: String = loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Err(e)
                if matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy))
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(BUSY_POLL);
            }
            other => break other.map_err(error)?,
        }
    };
    if file && !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::storage(format!("{shown}: SQLite refused write-ahead logging (journal mode {mode})")));
    }
    // NORMAL is durable in WAL mode except for the last commits on power loss, and much faster than FULL.
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(error)?;
    Ok(())
}

/// Switches the file to rollback-journal mode for a load that bypasses the
/// write-ahead log. A rollback journal keeps only the pages the file had
/// before, so pages the load adds are written once, to the file, instead of
/// to the log and again by the checkpoint.
///
/// False (nothing changed) while another connection has the file open:
/// leaving WAL needs the file to itself, and this asks once, without
/// waiting. `synchronous` is FULL from here on: with a rollback journal
/// NORMAL can lose the file to a badly timed power cut; it costs one more
/// sync of a journal that holds only the few pages the file had. The
/// caller puts WAL back with [`resume_wal`] whatever happens next.
pub(crate) fn leave_wal(c: &Connection) -> Result<bool> {
    c.busy_timeout(Duration::ZERO).map_err(error)?;
    let mode = c.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get::<_, String>(0));
    c.busy_handler(Some(poll_busy)).map_err(error)?;
    if !mode.is_ok_and(|m| m.eq_ignore_ascii_case("delete")) {
        return Ok(false);
    }
    c.pragma_update(None, "synchronous", "FULL").map_err(error)?;
    Ok(true)
}

/// The next transaction of a load that left the log ([`leave_wal`]):
/// `BEGIN EXCLUSIVE`, which takes the file's exclusive lock at once (a
/// reader that got in before the first page is written would otherwise
/// make the load wait for it and fail). False, with nothing begun, when
/// another connection has put the file back into WAL meanwhile: the load
/// then goes on through the log, like any writer.
pub(crate) fn begin_unlogged(c: &Connection) -> Result<bool> {
    let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(error)?;
    if mode.eq_ignore_ascii_case("wal") {
        c.pragma_update(None, "synchronous", "NORMAL").map_err(error)?;
        return Ok(false);
    }
    begin_exclusive(c)?;
    Ok(true)
}

fn begin_exclusive(c: &Connection) -> Result<()> {
    c.execute_batch("BEGIN EXCLUSIVE").map_err(error)
}

/// Back to write-ahead logging (and `synchronous=NORMAL`) after an unlogged
/// load. Entering WAL needs only a moment's lock. Should it fail, the file
/// stays sound in rollback-journal mode, and the next writer to open it
/// restores WAL ([`configure_writer`]).
pub(crate) fn resume_wal(c: &Connection) {
    if !c.is_autocommit() {
        let _ = c.execute_batch("ROLLBACK");
    }
    let _ = c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
    let _ = c.pragma_update(None, "synchronous", "NORMAL");
}

/// SQLite's `integrity_check` and `foreign_key_check`: one line per problem.
pub(crate) fn integrity_problems(conn: &Connection) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(error)?;
    for row in stmt.query_map([], |r| r.get::<_, String>(0)).map_err(error)? {
        let line = row.map_err(error)?;
        if line != "ok" {
            problems.push(format!("integrity: {line}"));
        }
    }
    let mut stmt = conn.prepare("PRAGMA foreign_key_check").map_err(error)?;
    // The rowid is NULL for WITHOUT ROWID tables; their rows are named by the dangling-link checks.
    let rows = stmt
        .query_map([], |r| {
            let (table, rowid, parent) = (r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?, r.get::<_, String>(2)?);
            Ok(match rowid {
                Some(id) => format!("foreign key: {table} row {id} refers to a missing {parent} row"),
                None => format!("foreign key: a {table} row refers to a missing {parent} row"),
            })
        })
        .map_err(error)?;
    for row in rows {
        problems.push(row.map_err(error)?);
    }
    Ok(problems)
}

/// Sets the page cache to `kib` KiB.
pub(crate) fn set_cache_kib(conn: &Connection, kib: u32) -> Result<()> {
    conn.pragma_update(None, "cache_size", -i64::from(kib.max(1))).map_err(error)
}

/// Runs `f` with a page cache of at least 32 MiB and sorts in memory, then
/// puts both settings back: for a reader that reads every table (`check`).
pub(crate) fn with_large_cache<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    with_cache(conn, 32 << 10, f)
}

/// Runs `f` with a page cache of at least `kib` KiB and sorts in memory,
/// then puts both settings back.
pub(crate) fn with_cache<T>(conn: &Connection, kib: i64, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let previous: i64 = conn.query_row("PRAGMA cache_size", [], |r| r.get(0)).map_err(error)?;
    conn.pragma_update(None, "cache_size", previous.min(-kib)).map_err(error)?;
    // Only outside a transaction may the setting change.
    let temp_store: Option<i64> = if conn.is_autocommit() {
        let before = conn.query_row("PRAGMA temp_store", [], |r| r.get(0)).map_err(error)?;
        conn.pragma_update(None, "temp_store", "MEMORY").map_err(error)?;
        Some(before)
    } else {
        None
    };
    let result = f();
    conn.pragma_update(None, "cache_size", previous).map_err(error)?;
    if let Some(before) = temp_store {
        conn.pragma_update(None, "temp_store", before).map_err(error)?;
    }
    result
}

/// The SQLite library version in use.
pub(crate) fn version() -> &'static str {
    rusqlite::version()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_a_reader_cannot_roll_back_says_what_to_do() {
        let e =
            rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY_ROLLBACK), None);
        let shown = error(e).to_string();
        assert!(shown.contains("interrupted") && shown.contains("dstore init"), "{shown}");
        let other = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY), None);
        assert!(!error(other).to_string().contains("interrupted"));
    }

    #[test]
    fn errors_keep_sqlites_extended_code() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY); INSERT INTO t VALUES ('a')").unwrap();
        let e = conn.execute("INSERT INTO t VALUES ('a')", []).unwrap_err();
        assert_eq!(unique_violation(&e).as_deref(), Some("t.k"));
        match error(e) {
            Error::Storage(s) => assert_eq!(s.sqlite_code(), Some(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)),
            other => panic!("{other:?}"),
        }
        let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
        assert!(matches!(error(busy), Error::Busy));
        let corrupt = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT), None);
        assert!(matches!(error(corrupt), Error::Damaged(s) if s.sqlite_code() == Some(rusqlite::ffi::SQLITE_CORRUPT)));
    }

    #[test]
    fn a_writer_waits_for_the_lock_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock.db");
        let holder = open(&path, false, &[]).unwrap();
        configure_writer(&holder, true, "lock.db").unwrap();
        holder.execute_batch("CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1)").unwrap();
        let (started, wait) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let c = open(&path, false, &[]).unwrap();
            started.send(()).unwrap();
            c.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT")
        });
        wait.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        holder.execute_batch("COMMIT").unwrap();
        waiter.join().unwrap().unwrap();
        let n: i64 = holder.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 2);
    }
}
