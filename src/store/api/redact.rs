//! `Store::redact`: content removed from a decision, tamper-evidently.

use crate::decision::DecisionId;
use crate::error::{Error, Result};
use crate::store::tables::decisions::get_in;
use crate::store::tables::redactions::{self, Redaction, FIELDS};
use crate::store::Store;

impl Store {
    /// Removes the content of `fields` of decision `id` (a secret, personal
    /// data written into a rationale): each becomes [`redactions::MARKER`],
    /// and a redaction entry records who (`actor`), why (`reason`) and when,
    /// in the plan's hash chain. The chain keeps its hashes, so every
    /// anchor taken before still verifies and `check` still verifies the
    /// whole log (the redacted row against the redaction's hash of it).
    ///
    /// On SQLite the overwritten content is zeroed in the file and its
    /// write-ahead log is checkpointed (when no reader holds it); on
    /// PostgreSQL the old row version stays until the table is vacuumed
    /// (`docs/integrity.md`).
    ///
    /// # Errors
    /// [`Error::Validation`] naming `fields` (none, or one that cannot be
    /// redacted) or `reason`/`actor` (empty); [`Error::DecisionNotFound`];
    /// [`Error::Corrupt`] for a row that no longer matches its hash.
    pub fn redact(&mut self, id: DecisionId, fields: &[&str], reason: &str, actor: &str) -> Result<Redaction> {
        if let Some(f) = fields.iter().find(|f| !FIELDS.contains(f)) {
            return Err(Error::validation(
                "fields",
                format!("{f:?} cannot be redacted; the fields that can are {}", FIELDS.join(", ")),
            ));
        }
        // In the order of FIELDS, once each: the entry's hash covers the list.
        let fields: Vec<String> = FIELDS.iter().filter(|f| fields.contains(f)).map(|f| (*f).to_owned()).collect();
        if fields.is_empty() {
            return Err(Error::validation("fields", format!("name at least one of {}", FIELDS.join(", "))));
        }
        for (name, value) in [("reason", reason), ("actor", actor)] {
            if value.trim().is_empty() {
                return Err(Error::validation(name, "must not be empty: a redaction says why and by whom"));
            }
        }
        let at = now();
        if let Some(c) = self.conn.sqlite() {
            // Zero what the update overwrites, in the file and its journal.
            crate::store::engine::sqlite::set_secure_delete(c, true)?;
        }
        let done = self.write_log(|tx, ledger| {
            let d = get_in(tx, id)?.ok_or_else(|| Error::DecisionNotFound(id.to_string()))?;
            redactions::redact(tx, ledger, &d, fields.clone(), reason.trim(), actor.trim(), at.clone())
        });
        if let Some(c) = self.conn.sqlite() {
            crate::store::engine::sqlite::set_secure_delete(c, false)?;
            if done.is_ok() {
                // The old page images leave the write-ahead log (best effort: a reader may hold it).
                crate::store::engine::sqlite::checkpoint(c);
            }
        }
        done
    }

    /// The redactions of decision `id`, oldest first.
    ///
    /// # Errors
    /// [`Error::Storage`] when rows cannot be read.
    pub fn redactions(&self, id: DecisionId) -> Result<Vec<Redaction>> {
        redactions::of_decision(&self.conn, id)
    }
}

/// Now, as RFC 3339 to the millisecond.
fn now() -> String {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    crate::time::utc_ms(since.as_millis() as u64)
}
