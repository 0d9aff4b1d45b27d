//! The PostgreSQL side of the engine: the client, its prepared statements
//! and transactions, the rewriting of the tables' SQL into PostgreSQL's
//! placeholders, binding and reading values, and error mapping.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::{IsNull, ToSql as PgToSql, Type};

use super::value::{bad_column, Value, ValueRef, BUSY_TIMEOUT, NUL_REASON};
use crate::error::{EngineCode, Error, Result, StorageError};

/// The client and its prepared statements.
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

/// Maps a PostgreSQL error to the crate's, keeping its SQLSTATE: lock
/// timeouts, deadlocks and serialization failures are [`Error::Busy`].
pub(crate) fn error(e: postgres::Error) -> Error {
    use postgres::error::SqlState;
    let Some(db) = e.as_db_error() else { return Error::storage(format!("PostgreSQL: {e}")) };
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
    Error::Storage(StorageError::engine(EngineCode::Postgres(code.code().to_owned()), db.message()))
}

/// The constraint a unique violation broke.
pub(crate) fn unique_violation(e: &postgres::Error) -> Option<String> {
    e.as_db_error()
        .filter(|d| *d.code() == postgres::error::SqlState::UNIQUE_VIOLATION)
        .map(|d| d.constraint().unwrap_or_default().to_owned())
}

/// Rewrites a statement of the tables (SQLite's dialect) for PostgreSQL:
/// `?N` -> `$N` and `IN rarray(?N)` -> `= ANY($N)`. Text in single quotes
/// (with `''` inside) and identifiers in double quotes are left as they are.
/// What this cannot rewrite safely is refused, naming it: comments (`--`,
/// `/*`), escape strings (`E'...'`), dollar signs (placeholders or dollar
/// quoting already in PostgreSQL's words), a `?` without a number, and an
/// unclosed quote.
pub(crate) fn rewrite(sql: &str) -> std::result::Result<String, String> {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    let mut i = 0;
    let refuse = |what: &str, at: usize| Err(format!("cannot rewrite {what} at byte {at} of: {sql}"));
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\'' | b'"' => {
                if c == b'\'' && i > 0 && matches!(bytes[i - 1], b'E' | b'e') && !is_word(bytes.get(i.wrapping_sub(2)))
                {
                    return refuse("an escape string (E'...')", i - 1);
                }
                let Some(len) = bytes[i + 1..].iter().position(|&b| b == c) else {
                    return refuse("an unclosed quote", i);
                };
                // A doubled quote inside is one quote: the scan goes on from there.
                out.push_str(&sql[i..i + len + 2]);
                i += len + 2;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => return refuse("a comment (--)", i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => return refuse("a comment (/*)", i),
            b'$' => return refuse("a dollar sign", i),
            b'?' => {
                let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
                if digits == 0 {
                    return refuse("a placeholder without a number", i);
                }
                out.push('$');
                out.push_str(&sql[i + 1..i + 1 + digits]);
                i += 1 + digits;
            }
            _ if sql[i..].starts_with("IN rarray(?") && !is_word(bytes.get(i.wrapping_sub(1))) => {
                out.push_str("= ANY(");
                i += "IN rarray(".len();
            }
            _ => {
                let ch = sql[i..].chars().next().expect("i is on a character boundary");
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    Ok(out)
}

/// A byte that continues an identifier or keyword.
fn is_word(b: Option<&u8>) -> bool {
    b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
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

    pub(crate) fn in_transaction(&self) -> bool {
        self.in_transaction.get()
    }

    /// Maps a statement's error, remembering that it aborted the open transaction.
    fn fail(&self, e: postgres::Error) -> Error {
        error(self.failing(e))
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
        self.client.borrow_mut().batch_execute(begin).map_err(error)?;
        self.in_transaction.set(true);
        self.failed.set(false);
        Ok(())
    }

    /// A write transaction: READ COMMITTED whatever the server's default,
    /// so a writer that waited for a row lock then reads the rows its
    /// predecessor committed instead of failing to serialize. A lock is
    /// waited for [`BUSY_TIMEOUT`] at most, as SQLite's busy timeout does.
    pub(crate) fn begin_write(&self) -> Result<()> {
        self.begin(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '{}ms'",
            BUSY_TIMEOUT.as_millis()
        ))
    }

    pub(crate) fn begin_read(&self) -> Result<()> {
        self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    pub(crate) fn end(&self, sql: &str) -> Result<()> {
        // PostgreSQL answers COMMIT of an aborted transaction by rolling it back, without an error.
        let aborted = self.failed.replace(false) && sql == "COMMIT";
        let out = self.client.borrow_mut().batch_execute(if aborted { "ROLLBACK" } else { sql }).map_err(error);
        self.in_transaction.set(false);
        if aborted {
            return Err(Error::storage("a statement of this transaction failed, so PostgreSQL rolled all of it back"));
        }
        out
    }

    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        self.client.borrow_mut().batch_execute(sql).map_err(|e| self.fail(e))
    }

    pub(crate) fn statement(&self, sql: &str) -> Result<postgres::Statement> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let text = rewrite(sql).map_err(Error::storage)?;
        let stmt = self.client.borrow_mut().prepare(&text).map_err(|e| self.fail(e))?;
        self.statements.borrow_mut().insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    fn params<'p>(params: &'p [Value<'p>]) -> Vec<&'p (dyn PgToSql + Sync)> {
        params.iter().map(|p| p as &(dyn PgToSql + Sync)).collect()
    }

    pub(crate) fn query(&self, sql: &str, params: &[Value<'_>]) -> Result<Vec<postgres::Row>> {
        let stmt = self.statement(sql)?;
        self.client.borrow_mut().query(&stmt, &Self::params(params)).map_err(|e| self.fail(e))
    }

    pub(crate) fn query_opt(&self, stmt: &postgres::Statement, params: &[Value<'_>]) -> Result<Option<postgres::Row>> {
        self.client.borrow_mut().query_opt(stmt, &Self::params(params)).map_err(|e| self.fail(e))
    }

    /// Runs a statement; its error is left for the caller to read (and
    /// counted as aborting the open transaction).
    pub(crate) fn execute(
        &self,
        stmt: &postgres::Statement,
        params: &[Value<'_>],
    ) -> std::result::Result<usize, postgres::Error> {
        let n = self.client.borrow_mut().execute(stmt, &Self::params(params));
        n.map(|n| n as usize).map_err(|e| self.failing(e))
    }

    /// Reads a query's rows through a server-side cursor, a thousand at a time.
    pub(crate) fn for_each_streamed(
        &self,
        sql: &str,
        params: &[Value<'_>],
        mut f: impl FnMut(&postgres::Row) -> Result<()>,
    ) -> Result<()> {
        let cursor = format!("dstore_rows_{}", self.cursors.get());
        self.cursors.set(self.cursors.get() + 1);
        let declare = format!("DECLARE {cursor} NO SCROLL CURSOR FOR {}", rewrite(sql).map_err(Error::storage)?);
        let fetch = format!("FETCH {CURSOR_ROWS} FROM {cursor}");
        self.client.borrow_mut().execute(declare.as_str(), &Self::params(params)).map_err(|e| self.fail(e))?;
        loop {
            // The borrow ends before `f` runs, so `f` may query the store too.
            let rows = self.client.borrow_mut().query(fetch.as_str(), &[]).map_err(|e| self.fail(e))?;
            for r in &rows {
                f(r)?;
            }
            if rows.len() < CURSOR_ROWS {
                break;
            }
        }
        self.batch(&format!("CLOSE {cursor}"))
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

/// A column's value as stored.
pub(crate) fn value_ref(r: &postgres::Row, i: usize) -> Result<ValueRef<'_>> {
    let ty = r.columns()[i].type_().clone();
    let err = |e| bad_column(i, "a value", e);
    Ok(match ty {
        Type::INT8 => r.try_get::<_, Option<i64>>(i).map_err(err)?.map_or(ValueRef::Null, ValueRef::Int),
        Type::INT4 => r.try_get::<_, Option<i32>>(i).map_err(err)?.map_or(ValueRef::Null, |v| ValueRef::Int(v.into())),
        Type::INT2 => r.try_get::<_, Option<i16>>(i).map_err(err)?.map_or(ValueRef::Null, |v| ValueRef::Int(v.into())),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i).map_err(err)?.map_or(ValueRef::Null, ValueRef::Real),
        Type::BYTEA => r.try_get::<_, Option<&[u8]>>(i).map_err(err)?.map_or(ValueRef::Null, ValueRef::Blob),
        _ => r.try_get::<_, Option<&str>>(i).map_err(err)?.map_or(ValueRef::Null, ValueRef::Text),
    })
}

/// An integer (or boolean) column that may be NULL, whatever its width.
pub(crate) fn opt_i64(r: &postgres::Row, i: usize) -> Result<Option<i64>> {
    let err = |e| bad_column(i, "an integer", e);
    match *r.columns()[i].type_() {
        Type::INT8 => r.try_get(i).map_err(err),
        Type::INT4 => Ok(r.try_get::<_, Option<i32>>(i).map_err(err)?.map(i64::from)),
        Type::INT2 => Ok(r.try_get::<_, Option<i16>>(i).map_err(err)?.map(i64::from)),
        Type::BOOL => Ok(r.try_get::<_, Option<bool>>(i).map_err(err)?.map(i64::from)),
        ref other => Err(bad_column(i, "an integer", other)),
    }
}

pub(crate) fn opt_f64(r: &postgres::Row, i: usize) -> Result<Option<f64>> {
    match *r.columns()[i].type_() {
        Type::FLOAT4 => Ok(r.try_get::<_, Option<f32>>(i).map_err(|e| bad_column(i, "a number", e))?.map(f64::from)),
        Type::FLOAT8 => r.try_get(i).map_err(|e| bad_column(i, "a number", e)),
        _ => Ok(opt_i64(r, i)?.map(|v| v as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;
    use std::path::{Path, PathBuf};

    /// The string literals of Rust source `text` before its tests, with the
    /// line each starts on: what a statement's text can be made of.
    fn string_literals(text: &str) -> Vec<(usize, String)> {
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
        let b = text.as_bytes();
        let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
        while i < b.len() {
            match b[i] {
                b'\n' => line += 1,
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    let end = text[i..].find("*/").map_or(b.len(), |e| i + e + 2);
                    line += text[i..end].matches('\n').count();
                    i = end;
                    continue;
                }
                // A char literal ('\'', '\n', 'x'), not a lifetime ('a).
                b'\'' if b.get(i + 1) == Some(&b'\\') => {
                    i += 3;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                }
                b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
                b'r' if matches!(b.get(i + 1), Some(b'"' | b'#')) && !is_ident(b.get(i.wrapping_sub(1))) => {
                    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                    let start = i + 2 + hashes;
                    let close = format!("\"{}", "#".repeat(hashes));
                    let end = start + text[start..].find(&close).expect("a raw string ends");
                    out.push((line, text[start..end].to_owned()));
                    line += text[i..end].matches('\n').count();
                    i = end + close.len();
                    continue;
                }
                b'"' => {
                    let (start, mut value) = (line, String::new());
                    i += 1;
                    while b[i] != b'"' {
                        match b[i] {
                            b'\\' => {
                                i += 1;
                                match b[i] {
                                    b'n' => value.push('\n'),
                                    b't' => value.push('\t'),
                                    b'0' => value.push('\0'),
                                    b'\n' => {
                                        // A continued line: its leading blanks are not part of the text.
                                        line += 1;
                                        while b[i + 1].is_ascii_whitespace() {
                                            line += usize::from(b[i + 1] == b'\n');
                                            i += 1;
                                        }
                                    }
                                    c => value.push(char::from(c)),
                                }
                                i += 1;
                            }
                            _ => {
                                let c = text[i..].chars().next().expect("inside the text");
                                line += usize::from(c == '\n');
                                value.push(c);
                                i += c.len_utf8();
                            }
                        }
                    }
                    out.push((start, value));
                }
                _ => {}
            }
            i += 1;
        }
        out
    }

    fn is_ident(b: Option<&u8>) -> bool {
        b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// A literal that is (part of) a statement.
    fn is_sql(text: &str) -> bool {
        const STARTS: [&str; 12] = [
            "SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WITH ", "CREATE ", "DROP ", "SET ", "BEGIN", "DECLARE ",
            "FETCH ", "CLOSE ",
        ];
        let t = text.trim_start();
        STARTS.iter().any(|s| t.starts_with(s))
            || text.contains(" FROM ")
            || text.contains(" WHERE ")
            || text.as_bytes().windows(2).any(|w| w[0] == b'?' && w[1].is_ascii_digit())
    }

    /// Every statement the crate holds goes through the rewriting: none may
    /// need what it refuses. Statements are scanned out of the source, so a
    /// new one is covered when it is written.
    #[test]
    fn every_statement_of_the_crate_rewrites() {
        let mut files = Vec::new();
        rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let mut statements = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (line, literal) in string_literals(&text) {
                if is_sql(&literal) {
                    statements += 1;
                    if let Err(e) = rewrite(&literal) {
                        panic!("{}:{line}: {e}", file.display());
                    }
                }
            }
        }
        // The scan itself works: it finds the crate's statements.
        assert!(statements > 80, "only {statements} statements found");
    }

    #[test]
    fn the_scan_reads_literals_as_rust_does() {
        let text = "let a = \"SELECT a \\\n     FROM t WHERE k = ?1\"; // \"not this\"\nlet c = '\"'; let q = '\\''; let r = r#\"x \"y\"\"#;\n";
        let found = string_literals(text);
        assert_eq!(found, vec![(1, "SELECT a FROM t WHERE k = ?1".to_owned()), (3, "x \"y\"".to_owned())]);
    }

    #[test]
    fn placeholders_and_lists_are_rewritten_outside_quotes() {
        assert_eq!(
            rewrite("SELECT a FROM t WHERE k IN rarray(?1) AND b = ?12 AND c = '?' AND \"d?\" = 'it''s ?3'").unwrap(),
            "SELECT a FROM t WHERE k = ANY($1) AND b = $12 AND c = '?' AND \"d?\" = 'it''s ?3'"
        );
        assert_eq!(rewrite("SELECT 'é' || ?1").unwrap(), "SELECT 'é' || $1");
        assert_eq!(rewrite("SELECT x FROM t WHERE kIN rarray(?1)").unwrap(), "SELECT x FROM t WHERE kIN rarray($1)");
    }

    #[test]
    fn what_cannot_be_rewritten_is_refused() {
        for (sql, what) in [
            ("SELECT 1 -- ?1", "comment"),
            ("SELECT 1 /* ?1 */", "comment"),
            ("SELECT E'\\n' || ?1", "escape string"),
            ("SELECT e'x'", "escape string"),
            ("SELECT $1", "dollar"),
            ("SELECT $$x$$", "dollar"),
            ("SELECT ?", "without a number"),
            ("SELECT 'open", "unclosed"),
            ("SELECT \"open", "unclosed"),
        ] {
            let e = rewrite(sql).unwrap_err();
            assert!(e.contains(what), "{sql}: {e}");
        }
        // A word that ends in E before a quote is not an escape string.
        assert_eq!(rewrite("SELECT x FROM t WHERE code = 'E'").unwrap(), "SELECT x FROM t WHERE code = 'E'");
    }
}
