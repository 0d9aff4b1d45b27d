//! The PostgreSQL side of the engine: the client, its prepared statements
//! and transactions, the rewriting of the tables' SQL into PostgreSQL's
//! placeholders, binding and reading values, and error mapping.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use postgres::types::{IsNull, ToSql as PgToSql, Type};

use super::value::{bad_column, Value, ValueRef, BUSY_TIMEOUT, NUL_REASON};
use crate::error::{EngineCode, Error, Result, StorageError};

/// The client and what it knows of its statements.
///
/// The connection keeps no state between transactions, so that it works
/// through a pooler that hands each transaction a server session of its
/// own (PgBouncer's transaction mode): every statement goes in one flight
/// as the unnamed statement, with the parameter types the server inferred
/// once ([`Shape`]); a named statement lives inside one transaction only
/// (a COPY's); settings are made per transaction (`SET LOCAL`).
pub(crate) struct Pg {
    client: RefCell<postgres::Client>,
    /// How to connect again when the connection is lost (a failover).
    connector: Connector,
    shapes: RefCell<HashMap<String, Arc<Shape>>>,
    in_transaction: Cell<bool>,
    /// A statement of the open transaction failed: PostgreSQL has aborted
    /// it, and its COMMIT would only roll it back.
    failed: Cell<bool>,
    /// Cursors declared so far, for unique names.
    cursors: Cell<u64>,
    /// Rows written but not yet sent (see [`Pg::defer`]), a COPY per
    /// table, kept in the order the tables are sent in.
    deferred: RefCell<Vec<Deferred>>,
}

/// A statement as the server sees it: its text in PostgreSQL's
/// placeholders and its parameters' types, as the server inferred them.
pub(crate) struct Shape {
    text: String,
    types: Vec<Type>,
}

/// Rows of one table waiting to be sent in one `COPY ... FROM STDIN`, in
/// PostgreSQL's binary copy format: a bulk write's rows go to the server a
/// batch per round trip instead of one each.
struct Deferred {
    /// The INSERT the rows are of: the COPY goes into its table and columns.
    insert: String,
    /// Lower first (see [`Pg::defer`]).
    order: u8,
    copy: String,
    /// The columns' types, as the server inferred them for the INSERT's values.
    types: Vec<Type>,
    data: bytes::BytesMut,
    rows: u64,
}

/// Deferred rows are sent once they hold this many bytes in all.
const DEFERRED_BYTES: usize = 4 << 20;

/// The COPY that writes the rows of `insert`, a statement
/// `INSERT INTO table (columns) VALUES (...)` with nothing after the values.
fn copy_of(insert: &str) -> std::result::Result<String, String> {
    let shape = || format!("cannot send rows of this statement in a batch: {insert}");
    let rest = insert.strip_prefix("INSERT INTO ").ok_or_else(shape)?;
    let (target, values) = rest.split_once(" VALUES (").ok_or_else(shape)?;
    if !target.ends_with(')') || !values.trim_end().ends_with(')') || values.contains(" ON ") {
        return Err(shape());
    }
    Ok(format!("COPY {target} FROM STDIN (FORMAT binary)"))
}

/// Appends a tuple of the binary copy format: the number of fields, then
/// each field's length (-1 for NULL) and its bytes as the parameter of the
/// column's type would be sent. A row that fails to encode leaves `out` as it was.
fn encode_row(out: &mut bytes::BytesMut, types: &[Type], params: &[Value<'_>]) -> Result<()> {
    use bytes::BufMut;
    let start = out.len();
    let fail = |out: &mut bytes::BytesMut, e: String| {
        out.truncate(start);
        Err(Error::storage(e))
    };
    let Ok(fields) = i16::try_from(params.len()) else { return fail(out, "too many columns".into()) };
    out.put_i16(fields);
    for (i, (value, ty)) in params.iter().zip(types).enumerate() {
        let at = out.len();
        out.put_i32(0);
        let len = match value.to_sql_checked(ty, out) {
            Ok(IsNull::Yes) => -1,
            Ok(IsNull::No) => match i32::try_from(out.len() - at - 4) {
                Ok(len) => len,
                Err(_) => return fail(out, format!("value {} is too long", i + 1)),
            },
            Err(e) => return fail(out, format!("value {}: {e}", i + 1)),
        };
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

/// What `target_session_attrs` asks of a server: libpq's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attrs {
    Any,
    ReadWrite,
    ReadOnly,
    Primary,
    Standby,
    PreferStandby,
}

/// `target_session_attrs`' values, as the URL writes them.
const ATTRS: [(&str, Attrs); 6] = [
    ("any", Attrs::Any),
    ("read-write", Attrs::ReadWrite),
    ("read-only", Attrs::ReadOnly),
    ("primary", Attrs::Primary),
    ("standby", Attrs::Standby),
    ("prefer-standby", Attrs::PreferStandby),
];

impl Attrs {
    fn parse(value: &str) -> std::result::Result<Attrs, String> {
        ATTRS.iter().find(|(name, _)| *name == value).map(|&(_, a)| a).ok_or_else(|| {
            let names: Vec<&str> = ATTRS.iter().map(|(name, _)| *name).collect();
            format!("target_session_attrs={value}: expected one of {}", names.join(", "))
        })
    }

    /// Does a server in recovery (a standby) or not, whose sessions are
    /// read-only or not, answer? `strict`: the first pass of prefer-standby.
    fn accepts(self, in_recovery: bool, read_only: bool, strict: bool) -> bool {
        match self {
            Attrs::Any => true,
            Attrs::ReadWrite => !read_only,
            Attrs::ReadOnly => read_only,
            Attrs::Primary => !in_recovery,
            Attrs::Standby => in_recovery,
            Attrs::PreferStandby => in_recovery || !strict,
        }
    }

    fn name(self) -> &'static str {
        ATTRS.iter().find(|(_, a)| *a == self).map_or("any", |(name, _)| name)
    }
}

/// How to connect, and connect again after a failover: one configuration
/// per host of the URL (libpq's `postgres://h1:p1,h2:p2/db`), tried in
/// order until one has what `target_session_attrs` asks for.
pub(crate) struct Connector {
    /// The URL without its password, for messages.
    shown: String,
    hosts: Vec<(String, postgres::Config)>,
    attrs: Attrs,
    /// Every transaction of the connection is read-only.
    read_only: bool,
    /// The settings every transaction makes (`SET LOCAL`), the URL's
    /// `options` among them: nothing is set for the session, which a
    /// pooler in transaction mode shares among its clients.
    settings: String,
    /// The URL named settings of its own: a statement outside a
    /// transaction then runs in one of its own, to have them.
    url_settings: bool,
}

/// The settings of every transaction: notices (such as "relation already
/// exists, skipping") are the server's business, and a session that dies
/// inside a transaction (a crashed host) frees its row locks after 5 minutes.
const SETTINGS: &str =
    "SET LOCAL client_min_messages = warning; SET LOCAL idle_in_transaction_session_timeout = '5min'";

/// The settings of a URL's `options` (libpq's: `-c name=value`,
/// `-cname=value` or `--name=value`, separated by spaces, a backslash escaping the
/// next character), percent-encoded as the URL has it.
fn options(encoded: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let bytes = encoded.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                decoded.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8(decoded).map_err(|_| "options: not UTF-8 once decoded".to_owned())?;
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => words.extend((!word.is_empty()).then(|| std::mem::take(&mut word))),
            c => word.push(c),
        }
    }
    words.extend((!word.is_empty()).then_some(word));
    let mut settings = Vec::new();
    let mut words = words.into_iter();
    while let Some(w) = words.next() {
        let setting = match w.as_str() {
            "-c" => words.next().ok_or("options: -c without a setting")?,
            _ => match w.strip_prefix("--").or_else(|| w.strip_prefix("-c")) {
                Some(s) => s.to_owned(),
                None => return Err(format!("options: `{w}` is not a setting (-c name=value)")),
            },
        };
        match setting.split_once('=') {
            Some((name, value)) if !name.is_empty() => settings.push((name.replace('-', "_"), value.to_owned())),
            _ => return Err(format!("options: `{setting}` is not name=value")),
        }
    }
    Ok(settings)
}

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// How long a connection attempt to one host waits, unless the URL says
/// (`connect_timeout`): a host that is down must not hold up the others.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Connector {
    /// Reads `url`; `shown` is the URL without its password.
    pub(crate) fn parse(url: &str, shown: &str, read_only: bool) -> std::result::Result<Connector, String> {
        let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
        // target_session_attrs is the library's to read: the driver knows only three of libpq's six values.
        let (path, query) = rest.split_once('?').map_or((rest, None), |(p, q)| (p, Some(q)));
        // So are `options`: they become settings of each transaction, which poolers keep.
        let mut attrs = Attrs::Any;
        let mut settings = SETTINGS.to_owned();
        let mut url_settings = false;
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", v)) => attrs = Attrs::parse(v)?,
                Some(("options", v)) => {
                    for (name, value) in options(v)? {
                        settings.push_str(&format!(
                            "; SELECT set_config({}, {}, true)",
                            literal(&name),
                            literal(&value)
                        ));
                        url_settings = true;
                    }
                }
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() { String::new() } else { format!("?{}", kept.join("&")) };
        let (authority, tail) = path.split_once('/').map_or((path, String::new()), |(a, t)| (a, format!("/{t}")));
        let (user, hosts) = authority.rsplit_once('@').map_or(("", authority), |(u, h)| (u, h));
        let user = if user.is_empty() { String::new() } else { format!("{user}@") };
        let mut configs = Vec::new();
        for host in hosts.split(',') {
            let one = format!("{scheme}://{user}{host}{tail}{query}");
            let mut config: postgres::Config = one.parse().map_err(|e| format!("not a PostgreSQL URL: {e}"))?;
            if config.get_connect_timeout().is_none() {
                config.connect_timeout(CONNECT_TIMEOUT);
            }
            configs.push((if host.is_empty() { "localhost".to_owned() } else { host.to_owned() }, config));
        }
        Ok(Connector { shown: shown.to_owned(), hosts: configs, attrs, read_only, settings, url_settings })
    }

    /// Opens a write transaction: READ COMMITTED whatever the server's
    /// default, so a writer that waited for a row lock then reads the rows
    /// its predecessor committed instead of failing to serialize. A lock is
    /// waited for [`BUSY_TIMEOUT`] at most, as SQLite's busy timeout does.
    fn begin_write(&self) -> String {
        let read_only = if self.read_only { " READ ONLY" } else { "" };
        let ms = BUSY_TIMEOUT.as_millis();
        format!("BEGIN ISOLATION LEVEL READ COMMITTED{read_only}; SET LOCAL lock_timeout = '{ms}ms'; {}", self.settings)
    }

    /// Opens a read transaction: one state of the store throughout.
    fn begin_read(&self) -> String {
        format!("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {}", self.settings)
    }

    /// Opens the transaction of one statement (see [`Connector::alone`]).
    fn begin_alone(&self) -> String {
        format!("BEGIN{}; {}", if self.read_only { " READ ONLY" } else { "" }, self.settings)
    }

    /// Does a statement outside a transaction need one of its own, for
    /// the URL's settings? (A read-only store's are reads: the library
    /// refuses its writes before any reaches the server.)
    fn alone(&self) -> bool {
        self.url_settings
    }

    /// A connection to the first host, in the URL's order, that answers
    /// and has what `target_session_attrs` asks for (prefer-standby: a
    /// standby if any answers, else any); its session set up.
    pub(crate) fn connect(&self) -> Result<postgres::Client> {
        let mut reasons = Vec::new();
        let passes: &[bool] = if self.attrs == Attrs::PreferStandby { &[true, false] } else { &[false] };
        for &strict in passes {
            for (host, config) in &self.hosts {
                match self.try_host(config, strict) {
                    Ok(Some(client)) => return Ok(client),
                    Ok(None) if self.hosts.len() == 1 && passes.len() == 1 => reasons.push(format!(
                        "the server is not {} (target_session_attrs={})",
                        self.wanted(),
                        self.attrs.name()
                    )),
                    Ok(None) => reasons.push(format!("{host}: not {}", self.wanted())),
                    Err(reason) if self.hosts.len() == 1 => reasons.push(reason),
                    Err(reason) => reasons.push(format!("{host}: {reason}")),
                }
            }
        }
        reasons.dedup();
        Err(Error::Connect { url: self.shown.clone(), reason: format!("cannot connect: {}", reasons.join("; ")) })
    }

    fn wanted(&self) -> &'static str {
        match self.attrs {
            Attrs::ReadWrite => "writable",
            Attrs::ReadOnly => "read-only",
            Attrs::Primary => "a primary",
            Attrs::Standby | Attrs::PreferStandby => "a standby",
            Attrs::Any => "answering",
        }
    }

    fn try_host(
        &self,
        config: &postgres::Config,
        strict: bool,
    ) -> std::result::Result<Option<postgres::Client>, String> {
        let reason = |e: postgres::Error| match e.as_db_error() {
            Some(db) => db.message().to_owned(),
            None => std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string()),
        };
        let mut client = config.connect(postgres::NoTls).map_err(reason)?;
        if self.attrs != Attrs::Any {
            // The simple protocol: no prepared statement, which a pooler may not keep.
            let rows = client
                .simple_query("SELECT pg_is_in_recovery()::text, current_setting('transaction_read_only')")
                .map_err(reason)?;
            let row = rows.iter().find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => Some((r.get(0) == Some("true"), r.get(1) == Some("on"))),
                _ => None,
            });
            let (in_recovery, read_only) = row.ok_or("no answer to the role query")?;
            if !self.attrs.accepts(in_recovery, read_only, strict) {
                return Ok(None);
            }
        }
        Ok(Some(client))
    }
}

/// True when `e` means the connection is gone (or going: the server shuts
/// down, or is a standby now), so that a fresh one may succeed.
pub(crate) fn lost(e: &postgres::Error) -> bool {
    match e.as_db_error() {
        // admin_shutdown, crash_shutdown, cannot_connect_now; connection_exception (08);
        // read_only_sql_transaction: the server this session reached is a standby now.
        Some(db) => {
            let code = db.code().code();
            matches!(code, "57P01" | "57P02" | "57P03" | "25006") || code.starts_with("08")
        }
        None => {
            e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        }
    }
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
    /// Connects with `connector`.
    pub(crate) fn connect(connector: Connector) -> Result<Pg> {
        let client = connector.connect()?;
        Ok(Pg {
            client: RefCell::new(client),
            connector,
            shapes: RefCell::default(),
            in_transaction: Cell::new(false),
            failed: Cell::new(false),
            cursors: Cell::new(0),
            deferred: RefCell::default(),
        })
    }

    /// Replaces the connection with a fresh one (after a failover: to
    /// whichever host now has what the URL asks for). Whatever the old one
    /// had open is gone: its transaction and deferred rows.
    pub(crate) fn reconnect(&self) -> Result<()> {
        let client = self.connector.connect()?;
        *self.client.borrow_mut() = client;
        self.deferred.borrow_mut().clear();
        self.in_transaction.set(false);
        self.failed.set(false);
        Ok(())
    }

    /// Connects again if the connection is known to be closed.
    fn ensure_connected(&self) -> Result<()> {
        if self.client.borrow().is_closed() {
            self.reconnect()?;
        }
        Ok(())
    }

    /// Runs `f`; outside a transaction, a statement that lost its
    /// connection runs once more on a fresh one (it is a read, or a write
    /// that was rolled back with the connection).
    fn once_more<T>(&self, f: impl Fn() -> Result<T>) -> Result<T> {
        if self.in_transaction.get() {
            return f();
        }
        self.ensure_connected()?;
        match f() {
            Err(Error::ConnectionLost { .. }) => {
                self.reconnect()?;
                f()
            }
            other => other,
        }
    }

    /// Maps the error of a BEGIN and its settings: a setting of the URL
    /// that the server refuses is the URL's fault, and says so.
    fn begin_err(&self, e: postgres::Error) -> Error {
        match e.as_db_error() {
            Some(db) if self.connector.url_settings && !lost(&e) => Error::Connect {
                url: self.connector.shown.clone(),
                reason: format!("a setting of the URL's options: {}", db.message()),
            },
            _ => self.err(e),
        }
    }

    /// Maps a driver error: a lost connection is [`Error::ConnectionLost`].
    fn err(&self, e: postgres::Error) -> Error {
        if lost(&e) {
            let reason = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            return Error::ConnectionLost { url: self.connector.shown.clone(), reason };
        }
        error(e)
    }

    /// Adds a row of `insert` (see [`copy_of`]) to the rows that go to
    /// the server together, in one COPY: before any other statement runs on
    /// this connection, at the commit, or once they are
    /// [`DEFERRED_BYTES`]. The tables' COPYs go out lower `order` first,
    /// each table's rows in the order they came: a row may refer to rows
    /// of its own table deferred before it, or of a lower order. An error of the COPY (a key taken, say) comes
    /// back from the statement that sent it and aborts the transaction, as
    /// every failure does on PostgreSQL; so rows are deferred only where
    /// the caller has made sure that they can be written.
    pub(crate) fn defer(&self, insert: &str, order: u8, params: &[Value<'_>]) -> Result<()> {
        if !self.in_transaction.get() {
            return Err(Error::storage("rows are sent in batches only inside a transaction"));
        }
        let known = self.deferred.borrow().iter().position(|d| d.insert == insert);
        let at = match known {
            Some(at) => at,
            None => {
                let copy = copy_of(insert).map_err(Error::storage)?;
                let types = self.shape(insert)?.types.clone();
                let data = bytes::BytesMut::with_capacity(64 << 10);
                let mut deferred = self.deferred.borrow_mut();
                // After the tables of its order and lower: its rows may refer to theirs.
                let at = deferred.iter().take_while(|d| d.order <= order).count();
                deferred.insert(at, Deferred { insert: insert.to_owned(), order, copy, types, data, rows: 0 });
                at
            }
        };
        let full = {
            let mut deferred = self.deferred.borrow_mut();
            let d = &mut deferred[at];
            if d.types.len() != params.len() {
                return Err(Error::storage(format!("{} values for {} columns", params.len(), d.types.len())));
            }
            encode_row(&mut d.data, &d.types, params)?;
            d.rows += 1;
            deferred.iter().map(|d| d.data.len()).sum::<usize>() >= DEFERRED_BYTES
        };
        if full {
            self.send_deferred()?;
        }
        Ok(())
    }

    /// True while rows wait to be sent.
    pub(crate) fn has_deferred(&self) -> bool {
        !self.deferred.borrow().is_empty()
    }

    /// Sends the deferred rows, a COPY per table, in order.
    pub(crate) fn send_deferred(&self) -> Result<()> {
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        deferred.into_iter().try_for_each(|d| self.send(d))
    }

    /// Sends the rows of one table in one COPY.
    fn send(&self, d: Deferred) -> Result<()> {
        if d.rows == 0 {
            return Ok(());
        }
        let sent = (|| -> std::result::Result<u64, postgres::Error> {
            use std::io::Write;
            let mut client = self.client.borrow_mut();
            let mut writer = client.copy_in(d.copy.as_str())?;
            // Signature, flags and header extension (none); the trailer is a
            // tuple of -1 fields. The writer only fails when sending does.
            let mut header = [0u8; 19];
            header[..11].copy_from_slice(b"PGCOPY\n\xff\r\n\0");
            let written = writer
                .write_all(&header)
                .and_then(|()| writer.write_all(&d.data))
                .and_then(|()| writer.write_all(&(-1i16).to_be_bytes()));
            if let Err(e) = written {
                return Err(match e.into_inner().map(|inner| inner.downcast::<postgres::Error>()) {
                    Some(Ok(pg)) => *pg,
                    // Dropping the writer aborts the COPY; the next call reports the connection's state.
                    _ => return Ok(u64::MAX),
                });
            }
            writer.finish()
        })();
        match sent {
            Ok(n) if n == d.rows => Ok(()),
            Ok(n) => Err(Error::storage(format!("a batch of {} rows wrote {n}", d.rows))),
            Err(e) => Err(self.fail(e)),
        }
    }

    pub(crate) fn in_transaction(&self) -> bool {
        self.in_transaction.get()
    }

    /// Maps a statement's error, remembering that it aborted the open transaction.
    fn fail(&self, e: postgres::Error) -> Error {
        let e = self.failing(e);
        self.err(e)
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
        self.deferred.borrow_mut().clear();
        // A connection that died while idle (a failover) fails at BEGIN, before anything ran: begin anew.
        self.once_more(|| self.client.borrow_mut().batch_execute(begin).map_err(|e| self.begin_err(e)))?;
        self.in_transaction.set(true);
        self.failed.set(false);
        Ok(())
    }

    /// A write transaction (see [`Connector::begin_write`]).
    pub(crate) fn begin_write(&self) -> Result<()> {
        self.begin(&self.connector.begin_write())
    }

    pub(crate) fn begin_read(&self) -> Result<()> {
        self.begin(&self.connector.begin_read())
    }

    pub(crate) fn end(&self, sql: &str) -> Result<()> {
        let commit = sql == "COMMIT";
        let sent = if commit { self.send_deferred() } else { Ok(()) };
        self.deferred.borrow_mut().clear();
        // PostgreSQL answers COMMIT of an aborted transaction by rolling it back, without an error.
        let aborted = self.failed.replace(false) && commit;
        let end = if commit && !aborted && sent.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let out = self.client.borrow_mut().batch_execute(end);
        self.in_transaction.set(false);
        sent?;
        if aborted {
            return Err(Error::storage("a statement of this transaction failed, so PostgreSQL rolled all of it back"));
        }
        out.map_err(|e| match self.err(e) {
            // The COMMIT went out and no answer came back: it may have been stored.
            Error::ConnectionLost { url, reason } if commit => {
                let check = "look once the server answers (an import: run it again, it skips what is stored)";
                Error::OutcomeUnknown { url, reason, check: check.into() }
            }
            e => e,
        })
    }

    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        self.send_deferred()?;
        self.client.borrow_mut().batch_execute(sql).map_err(|e| self.fail(e))
    }

    /// What the server inferred of `sql`, asked once per statement text:
    /// inside a transaction, or else in one of its own, so that the named
    /// statement the question needs is closed on the session it was made
    /// on (the close goes out ahead of whatever is sent next).
    pub(crate) fn shape(&self, sql: &str) -> Result<Arc<Shape>> {
        if let Some(s) = self.shapes.borrow().get(sql) {
            return Ok(s.clone());
        }
        if !self.in_transaction.get() {
            return self.own_transaction(|| self.shape(sql));
        }
        let text = rewrite(sql).map_err(Error::storage)?;
        // The statement is closed when dropped, at once: on this transaction's session.
        let types = self.client.borrow_mut().prepare(&text).map(|stmt| stmt.params().to_vec());
        let types = types.map_err(|e| self.fail(e))?;
        let shape = Arc::new(Shape { text, types });
        self.shapes.borrow_mut().insert(sql.to_owned(), shape.clone());
        Ok(shape)
    }

    /// Runs `f` as one statement: outside a transaction, in one of its own
    /// where the connection needs one (see [`Connector::alone`]), and once
    /// more on a fresh connection if the connection is lost.
    fn alone<T>(&self, f: impl Fn() -> Result<T>) -> Result<T> {
        if self.in_transaction.get() || !self.connector.alone() {
            return self.once_more(f);
        }
        self.once_more(|| self.own_transaction(&f))
    }

    /// Runs `f` in a transaction of its own, with the connection's
    /// settings; commits it when `f` succeeds.
    fn own_transaction<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.client.borrow_mut().batch_execute(&self.connector.begin_alone()).map_err(|e| self.begin_err(e))?;
        self.in_transaction.set(true);
        self.failed.set(false);
        let out = f();
        self.in_transaction.set(false);
        self.failed.set(false);
        let end = self.client.borrow_mut().batch_execute(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
        let value = out?;
        end.map_err(|e| self.err(e))?;
        Ok(value)
    }

    /// The parameters with the types the server expects.
    fn typed<'p>(shape: &Shape, params: &'p [Value<'p>]) -> Result<Vec<(&'p Value<'p>, Type)>> {
        if shape.types.len() != params.len() {
            let n = shape.types.len();
            return Err(Error::storage(format!("{} values for {n} parameters of {}", params.len(), shape.text)));
        }
        Ok(params.iter().zip(shape.types.iter().cloned()).collect())
    }

    /// Runs `shape` in one flight; its rows and the number it changed.
    fn run(
        &self,
        shape: &Shape,
        params: &[Value<'_>],
    ) -> Result<std::result::Result<(Vec<postgres::Row>, u64), postgres::Error>> {
        use postgres::fallible_iterator::FallibleIterator;
        let typed = Self::typed(shape, params)?;
        let mut client = self.client.borrow_mut();
        let out = client.query_typed_raw(shape.text.as_str(), typed).and_then(|mut it| {
            let mut rows = Vec::new();
            while let Some(r) = it.next()? {
                rows.push(r);
            }
            Ok((rows, it.rows_affected().unwrap_or(0)))
        });
        Ok(out.map_err(|e| self.failing(e)))
    }

    /// The rows of `sql`.
    fn rows(&self, sql: &str, params: &[Value<'_>]) -> Result<Vec<postgres::Row>> {
        self.alone(|| {
            let shape = self.shape(sql)?;
            self.run(&shape, params)?.map(|(rows, _)| rows).map_err(|e| self.err(e))
        })
    }

    pub(crate) fn query(&self, sql: &str, params: &[Value<'_>]) -> Result<Vec<postgres::Row>> {
        self.send_deferred()?;
        self.rows(sql, params)
    }

    /// [`Pg::query`] of a query that reads none of the deferred rows: they stay unsent.
    pub(crate) fn query_past_deferred(&self, sql: &str, params: &[Value<'_>]) -> Result<Vec<postgres::Row>> {
        self.rows(sql, params)
    }

    /// The first row of a statement whose shape its caller holds.
    pub(crate) fn query_opt_prepared(&self, shape: &Shape, params: &[Value<'_>]) -> Result<Option<postgres::Row>> {
        self.send_deferred()?;
        self.alone(|| self.run(shape, params)?.map(|(rows, _)| rows.into_iter().next()).map_err(|e| self.err(e)))
    }

    /// Runs a statement; its error is left for the caller to read (and
    /// counted as aborting the open transaction). The caller sends the
    /// deferred rows first.
    pub(crate) fn execute(
        &self,
        shape: &Shape,
        params: &[Value<'_>],
    ) -> Result<std::result::Result<usize, postgres::Error>> {
        self.alone(|| match self.run(shape, params)? {
            Ok((_, n)) => Ok(Ok(n as usize)),
            // Lost: run once more, on a fresh connection.
            Err(e) if lost(&e) => Err(self.err(e)),
            Err(e) => Ok(Err(e)),
        })
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
        let query = self.shape(sql)?;
        let declare =
            Shape { text: format!("DECLARE {cursor} NO SCROLL CURSOR FOR {}", query.text), types: query.types.clone() };
        let fetch = Shape { text: format!("FETCH {CURSOR_ROWS} FROM {cursor}"), types: Vec::new() };
        self.send_deferred()?;
        self.run(&declare, params)?.map_err(|e| self.err(e))?;
        loop {
            // The borrow ends before `f` runs, so `f` may query the store too.
            let (rows, _) = self.run(&fetch, &[])?.map_err(|e| self.err(e))?;
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
    use super::{options, rewrite, Connector, SETTINGS};
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

    #[test]
    fn options_become_settings_of_each_transaction() {
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(options("-csearch_path%3Dteam_a").unwrap(), pairs(&[("search_path", "team_a")]));
        assert_eq!(
            options("-c%20search_path=a,b%20--statement-timeout=5s -c x=y\\ z").unwrap(),
            pairs(&[("search_path", "a,b"), ("statement_timeout", "5s"), ("x", "y z")])
        );
        assert_eq!(options("").unwrap(), pairs(&[]));
        for (bad, says) in [("-d 5", "`-d` is not a setting"), ("-c", "-c without"), ("-cname", "not name=value")] {
            assert!(options(bad).unwrap_err().contains(says), "{bad}");
        }
        let c = Connector::parse("postgres://u@h/db?options=-csearch_path%3Dit%27s&sslmode=disable", "shown", true)
            .unwrap();
        assert!(c.url_settings && c.alone());
        assert!(
            !Connector::parse("postgres://u@h/db", "shown", true).unwrap().alone(),
            "a read-only store reads alone"
        );
        assert!(c.begin_read().ends_with("; SELECT set_config('search_path', 'it''s', true)"), "{}", c.begin_read());
        assert!(c.begin_write().contains("READ ONLY") && c.begin_alone().starts_with("BEGIN READ ONLY;"));
        let plain = Connector::parse("postgres://u@h/db", "shown", false).unwrap();
        assert!(!plain.alone() && !plain.begin_write().contains("READ ONLY"));
        assert_eq!(plain.begin_alone(), format!("BEGIN; {SETTINGS}"));
    }
}
