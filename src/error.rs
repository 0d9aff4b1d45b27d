//! The one error type of the library.
//!
//! Every variant carries what a person needs to fix the problem: the field,
//! id, path, line, table or key at fault. A storage engine's failure is a
//! [`StorageError`] that keeps the engine's own code (SQLite's result code,
//! PostgreSQL's SQLSTATE) without exposing the driver's types, so another
//! backend produces the same errors.
//!
//! Each message is whole: a wrapper (`line 3: ...`) prints the error it
//! wraps, so `source()` does not return it again and a renderer that walks
//! the chain (`{:#}` of anyhow) prints every cause once.

use std::path::PathBuf;

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a store lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file, by the path it was opened with.
    File(PathBuf),
    /// A SQLite database in memory ([`crate::Store::open_in_memory`]).
    Memory,
    /// A PostgreSQL database, by its URL without the password.
    Server(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Memory => f.write_str(":memory:"),
            Location::Server(url) => f.write_str(url),
        }
    }
}

/// The code a storage engine gave with a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineCode {
    /// SQLite's extended result code (its low byte is the primary code:
    /// 5 `SQLITE_BUSY`, 11 `SQLITE_CORRUPT`, 19 `SQLITE_CONSTRAINT`, ...).
    Sqlite(i32),
    /// PostgreSQL's five-character SQLSTATE (`23505`, `57P01`, ...).
    Postgres(String),
}

/// A failure of the storage engine: its code when it gave one, and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageError {
    code: Option<EngineCode>,
    message: String,
}

impl StorageError {
    /// A failure the engine reported with `code`.
    pub fn engine(code: EngineCode, message: impl Into<String>) -> Self {
        StorageError { code: Some(code), message: message.into() }
    }

    /// A failure without an engine code: the connection broke, or a row came
    /// back in a shape the library did not expect.
    pub fn other(message: impl Into<String>) -> Self {
        StorageError { code: None, message: message.into() }
    }

    pub fn code(&self) -> Option<&EngineCode> {
        self.code.as_ref()
    }

    /// SQLite's extended result code, on SQLite.
    pub fn sqlite_code(&self) -> Option<i32> {
        match self.code {
            Some(EngineCode::Sqlite(c)) => Some(c),
            _ => None,
        }
    }

    /// PostgreSQL's SQLSTATE, on PostgreSQL.
    pub fn sqlstate(&self) -> Option<&str> {
        match &self.code {
            Some(EngineCode::Postgres(s)) => Some(s),
            _ => None,
        }
    }

    /// The engine's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match &self.code {
            Some(EngineCode::Sqlite(c)) => write!(f, " (SQLite code {c})"),
            Some(EngineCode::Postgres(s)) => write!(f, " (SQLSTATE {s})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for StorageError {}

/// Everything that can go wrong in `decision_store`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A value breaks a rule of the data model; `field` names the culprit.
    #[error("invalid {field}: {reason}")]
    Validation { field: String, reason: String },

    /// The path does not exist or is an empty file: no store has been created there yet.
    #[error("{}: no decision store here yet (the file is missing or empty)", path.display())]
    NotCreated { path: PathBuf },

    /// The file exists but is not a SQLite database.
    #[error("{}: not a SQLite database", path.display())]
    NotSqlite { path: PathBuf },

    /// The file is SQLite but was written by another application.
    #[error("{}: a SQLite database, but not a decision store", path.display())]
    NotAStore { path: PathBuf },

    /// A PostgreSQL server that cannot be reached or refuses the login.
    #[error("{url}: {reason}")]
    Connect { url: String, reason: String },

    /// The connection to the server was lost during a call, and the call
    /// could not be carried out on a fresh connection either; nothing of
    /// it was stored (a write's transaction was rolled back).
    #[error("{url}: the connection to the server was lost ({reason}); nothing of this call was stored")]
    ConnectionLost { url: String, reason: String },

    /// The connection was lost while a write was committing, and whether
    /// the server stored it could not be found out: `check` says how.
    #[error("{url}: the connection to the server was lost while the write was committing ({reason}): it may or may not be stored; {check}")]
    OutcomeUnknown { url: String, reason: String, check: String },

    /// A PostgreSQL schema without a store (read-only) or with another
    /// application's tables: the server's [`Error::NotAStore`].
    #[error("{url}: {reason}")]
    NotAStoreDatabase { url: String, reason: String },

    /// The store was written by a newer version of this library.
    #[error(
        "{store}: schema version {found} is newer than this library supports ({supported}); upgrade decision-store"
    )]
    IncompatibleVersion { store: Location, found: i64, supported: i64 },

    /// A read-only open of a store written by an older schema: open it writable once to upgrade it.
    #[error("{store}: schema version {found} is older than this library's ({supported}); open it for writing once (e.g. `dstore init`) to upgrade it")]
    NeedsUpgrade { store: Location, found: i64, supported: i64 },

    /// The store's recorded migration differs from the library's migration of the same version.
    #[error("{store}: migration V{version}__{name} recorded in the store differs from this library's (checksum {found}, expected {expected}); the schema was changed outside the library, refusing to touch it")]
    MigrationMismatch { store: Location, version: i64, name: String, found: String, expected: String },

    /// The file is damaged (truncated, overwritten): SQLite cannot read it.
    #[error("the store file is damaged ({0}); restore it from a copy")]
    Damaged(StorageError),

    /// A stored row does not decode: it was changed outside the library
    /// or damaged. `table` and `key` name the row.
    #[error("the stored {table} row {key} does not decode: {reason}; run `dstore check`")]
    Corrupt { table: &'static str, key: String, reason: String },

    /// A copy's digest differs from its source's: the source holds rows
    /// changed outside the library.
    #[error("the copy's digest {copy} differs from the source's {source_digest}: run `dstore check` on the source")]
    DigestMismatch { source_digest: String, copy: String },

    /// A write was attempted on a store opened read-only.
    #[error("the store is open read-only")]
    ReadOnly,

    /// A referenced decision is not stored in the decision's plan.
    #[error("{field} {id}: no such decision in plan {plan_id}")]
    MissingReference { field: &'static str, id: String, plan_id: String },

    /// A referenced decision belongs to another plan.
    #[error("{field} {id} belongs to plan {other_plan}, not to plan {plan_id}")]
    CrossPlanReference { field: &'static str, id: String, plan_id: String, other_plan: String },

    /// A decision with this id is already stored (with different content).
    #[error("decision {0} already exists")]
    DuplicateDecision(String),

    /// The plan already holds a decision at this sequence number.
    #[error("plan {plan_id} already has a decision at sequence {sequence}")]
    DuplicateSequence { plan_id: String, sequence: u32 },

    /// The decision already has a (different) superseding decision.
    #[error("decision {id} is already superseded by {by}")]
    AlreadySuperseded { id: String, by: String },

    /// Adding the link would make the history loop.
    #[error("{0}")]
    Cycle(String),

    /// No decision with this id is stored.
    #[error("decision {0} not found")]
    DecisionNotFound(String),

    /// No decision of this plan is stored.
    #[error("plan {0} not found")]
    PlanNotFound(String),

    /// A URI names no node of the stored UKO graph.
    #[error("unknown UKO node {0}")]
    UnknownNode(String),

    /// A question about the graph (what is stale) of a store whose graph is
    /// empty, while its decisions recorded resources of one.
    #[error(
        "nothing to compare with: the graph is empty, and the decisions recorded {resources} resources (ingest or import-graph first)"
    )]
    EmptyGraph { resources: u64 },

    /// One item of a batch failed; nothing of the batch was written.
    #[error("item {index}: {error}")]
    Batch { index: usize, error: Box<Error> },

    /// One line of an input file failed.
    #[error("line {line}: {error}")]
    Line { line: u64, error: Box<Error> },

    /// A failure in one of several inputs read together (`nodes`, `edges`).
    #[error("{name} {error}")]
    Input { name: &'static str, error: Box<Error> },

    /// The store stayed locked by another writer past the busy timeout.
    #[error("the database is locked by another process (busy timeout expired)")]
    Busy,

    /// The storage engine failed.
    #[error("storage: {0}")]
    Storage(StorageError),

    /// Reading or writing a file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),

    /// Input is not well-formed JSON of the expected shape.
    #[error("{0}")]
    Json(serde_json::Error),
}

impl From<serde_json::Error> for Error {
    /// A write that fails inside serde_json (a closed pipe, a full disk) is
    /// an I/O error, not a JSON one.
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            Error::Io(e.into())
        } else {
            Error::Json(e)
        }
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Storage(e)
    }
}

impl Error {
    /// A validation error for `field`.
    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Validation { field: field.into(), reason: reason.into() }
    }

    /// A storage error without an engine code (see [`StorageError::other`]).
    pub fn storage(message: impl Into<String>) -> Self {
        Error::Storage(StorageError::other(message))
    }

    /// The error inside any wrappers ([`Error::Line`], [`Error::Batch`], [`Error::Input`]).
    pub fn innermost(&self) -> &Error {
        match self {
            Error::Batch { error, .. } | Error::Line { error, .. } | Error::Input { error, .. } => error.innermost(),
            e => e,
        }
    }

    /// What kind of failure this is, for a face to answer it in its own
    /// terms (an exit status, an HTTP status, an exception class). Every
    /// variant is named here, so a new one is classified when it is added.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Batch { error, .. } | Error::Line { error, .. } | Error::Input { error, .. } => error.kind(),
            Error::DecisionNotFound(_) | Error::PlanNotFound(_) => ErrorKind::NotFound,
            Error::Validation { .. }
            | Error::MissingReference { .. }
            | Error::CrossPlanReference { .. }
            | Error::DuplicateDecision(_)
            | Error::DuplicateSequence { .. }
            | Error::AlreadySuperseded { .. }
            | Error::Cycle(_)
            | Error::UnknownNode(_)
            | Error::EmptyGraph { .. }
            | Error::Json(_) => ErrorKind::InvalidInput,
            Error::NotCreated { .. }
            | Error::NotSqlite { .. }
            | Error::NotAStore { .. }
            | Error::NotAStoreDatabase { .. }
            | Error::IncompatibleVersion { .. }
            | Error::NeedsUpgrade { .. }
            | Error::MigrationMismatch { .. }
            | Error::Damaged(_)
            | Error::Corrupt { .. }
            | Error::DigestMismatch { .. } => ErrorKind::Incompatible,
            Error::Busy => ErrorKind::Busy,
            Error::Connect { .. } | Error::ConnectionLost { .. } | Error::OutcomeUnknown { .. } => {
                ErrorKind::Unavailable
            }
            Error::ReadOnly => ErrorKind::ReadOnly,
            Error::Storage(_) | Error::Io(_) => ErrorKind::Internal,
        }
    }
}

/// The kinds of [`Error`], as [`Error::kind`] tells them apart: what a face
/// (the command, the web view, an agent's tool, Python) needs to answer a
/// failure in its own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A decision or plan that the store does not hold.
    NotFound,
    /// The caller's input breaks a rule: a field, an argument, a reference,
    /// a line of a file. Nothing of it was stored.
    InvalidInput,
    /// The store named is not one this library can use as it is: not
    /// created yet, not a store, another schema version, damaged, or
    /// holding rows changed outside the library.
    Incompatible,
    /// Another writer held the store past the busy timeout: try again.
    Busy,
    /// The server could not be reached, or the connection was lost.
    Unavailable,
    /// A write on a store opened read-only.
    ReadOnly,
    /// The storage engine or the file system failed.
    Internal,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cause of `e` as a chain renderer prints them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut next = e.source();
        while let Some(cause) = next {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            next = cause.source();
        }
        text
    }

    #[test]
    fn a_chain_prints_each_cause_once() {
        let inner = Error::validation("confidence_score", "above 1");
        let e = Error::Input { name: "nodes", error: Box::new(Error::Line { line: 3, error: Box::new(inner) }) };
        assert_eq!(chain(&e), "nodes line 3: invalid confidence_score: above 1");
        assert!(matches!(e.innermost(), Error::Validation { field, .. } if field == "confidence_score"));
        let storage = Error::Storage(StorageError::engine(EngineCode::Postgres("23505".into()), "duplicate key"));
        assert_eq!(chain(&storage), "storage: duplicate key (SQLSTATE 23505)");
        assert_eq!(storage.innermost().to_string(), storage.to_string());
    }

    #[test]
    fn engine_codes_are_kept() {
        let e = StorageError::engine(EngineCode::Sqlite(2067), "UNIQUE constraint failed");
        assert_eq!((e.sqlite_code(), e.sqlstate()), (Some(2067), None));
        let e = StorageError::engine(EngineCode::Postgres("40001".into()), "could not serialize");
        assert_eq!((e.sqlite_code(), e.sqlstate()), (None, Some("40001")));
        assert_eq!(StorageError::other("x").code(), None);
    }

    #[test]
    fn locations_print_as_given() {
        assert_eq!(Location::File("a/b.db".into()).to_string(), "a/b.db");
        assert_eq!(Location::Memory.to_string(), ":memory:");
        assert_eq!(Location::Server("postgres://u@h/db".into()).to_string(), "postgres://u@h/db");
    }
}
