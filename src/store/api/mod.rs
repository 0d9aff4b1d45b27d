//! The `Store` API: thin public methods, each beginning its transaction
//! (or read snapshot) and calling the floors below. One file per subject;
//! `Store` itself, opening and the transaction helpers are in the parent
//! module.

mod decisions;
mod exchange;
mod graph;
#[cfg(feature = "ingest")]
mod ingest;
mod kept;
pub mod limits;
mod record;
mod redact;
