//! The one error type of the library.
//!
//! Every variant carries what a person needs to fix the problem: the field,
//! id, path or line at fault. Storage-engine errors are wrapped without
//! exposing the engine's own types, so a different backend can produce the
//! same errors.

use std::path::PathBuf;

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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

    /// A PostgreSQL schema without a store (read-only) or with another
    /// application's tables: the server's [`Error::NotAStore`].
    #[error("{url}: {reason}")]
    NotAStoreDatabase { url: String, reason: String },

    /// The store was written by a newer version of this library.
    #[error("{}: schema version {found} is newer than this library supports ({supported}); upgrade decision-store", path.display())]
    IncompatibleVersion { path: PathBuf, found: i64, supported: i64 },

    /// A read-only open of a store written by an older schema: open it writable once to upgrade it.
    #[error("{}: schema version {found} is older than this library's ({supported}); open it for writing once (e.g. `dstore init`) to upgrade it", path.display())]
    NeedsUpgrade { path: PathBuf, found: i64, supported: i64 },

    /// The file's recorded migration differs from the library's migration of the same version.
    #[error("{}: migration V{version}__{name} recorded in the file differs from this library's (checksum {found}, expected {expected}); the schema was changed outside the library, refusing to touch it", path.display())]
    MigrationMismatch { path: PathBuf, version: i64, name: String, found: String, expected: String },

    /// The file is damaged (truncated, overwritten): SQLite cannot read it.
    #[error("the store file is damaged ({0}); restore it from a copy")]
    Corrupt(String),

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

    /// One item of a batch failed; nothing of the batch was written.
    #[error("item {index}: {source}")]
    Batch {
        index: usize,
        #[source]
        source: Box<Error>,
    },

    /// One line of an input file failed.
    #[error("line {line}: {source}")]
    Line {
        line: u64,
        #[source]
        source: Box<Error>,
    },

    /// A failure in one of several inputs read together (`nodes`, `edges`).
    #[error("{name} {source}")]
    Input {
        name: &'static str,
        #[source]
        source: Box<Error>,
    },

    /// The database stayed locked by another writer past the busy timeout.
    #[error("the database is locked by another process (busy timeout expired)")]
    Busy,

    /// The storage engine failed.
    #[error("storage: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),

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

impl Error {
    /// A validation error for `field`.
    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Validation { field: field.into(), reason: reason.into() }
    }

    /// True for errors caused by the caller's input rather than the environment.
    pub fn is_input_error(&self) -> bool {
        match self {
            Error::Batch { source, .. } | Error::Line { source, .. } | Error::Input { source, .. } => {
                source.is_input_error()
            }
            Error::Storage(_) | Error::Io(_) | Error::Busy | Error::ReadOnly | Error::Connect { .. } => false,
            _ => true,
        }
    }
}
