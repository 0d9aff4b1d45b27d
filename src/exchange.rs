//! JSON Lines import and export in the interchange format
//! (`Store::import_decisions`, `Store::export_decisions`,
//! `Store::import_graph`, `Store::export_graph`).

pub use crate::store::{ImportOptions, ImportReport};
