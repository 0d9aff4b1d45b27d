//! Redactions: content removed from a decision, each an entry of the log
//! (`docs/integrity.md`, "Redaction").
//!
//! The decision row keeps the content hash its chain committed to; its
//! redacted fields hold [`MARKER`]; the redaction row holds the row's
//! content hash before and after, so `check` verifies the redacted row
//! against the redaction, and the redaction through the chain.

use serde::Serialize;

use super::integrity::{self, REDACTION_COLUMNS};
use super::ledger::Ledger;
use super::rows::PreparedRow;
use crate::decision::{Decision, DecisionId, PlanId};
use crate::error::{Error, Result};
use crate::hash::{self, Hash};
use crate::store::engine::{vals, Conn, Row, ValueRef, WriteTx};

/// What a redacted field holds instead of its content.
pub const MARKER: &str = "[redacted]";

/// The fields a redaction may empty: what an agent writes in its own words.
/// (Ids, the type, the tree and the snapshot are the log's structure.)
pub const FIELDS: [&str; 5] = ["chosen_option", "rationale", "alternatives", "artifacts_produced", "metadata"];

/// One redaction of a decision, as the log holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Redaction {
    pub decision_id: DecisionId,
    pub plan_id: PlanId,
    /// The fields emptied, in the order of [`FIELDS`].
    pub fields: Vec<String>,
    pub reason: String,
    /// Who redacted it.
    pub actor: String,
    /// When (RFC 3339).
    pub redacted_at: String,
    /// The decision row's content hash before and after (hex).
    pub before_hash: String,
    pub after_hash: String,
}

const INSERT: &str = "INSERT INTO redactions (plan_id, decision_id, fields, reason, actor, redacted_at, before_hash, \
     after_hash, content_hash, chain_index, chain_hash, log_index) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
const UPDATE: &str = "UPDATE decisions SET chosen_option = ?2, rationale = ?3, alternatives = ?4, \
     artifacts_produced = ?5, metadata = ?6 WHERE decision_id = ?1";
const OF_DECISION: &str = "SELECT decision_id, plan_id, fields, reason, actor, redacted_at, before_hash, after_hash \
     FROM redactions WHERE decision_id = ?1 ORDER BY log_index";
/// Every redaction, in log order: for `check` and `copy`.
pub(crate) const ALL: &str =
    "SELECT decision_id, plan_id, fields, reason, actor, redacted_at, before_hash, after_hash, \
     log_index FROM redactions ORDER BY log_index";
const STORED_HASH: &str = "SELECT content_hash FROM decisions WHERE decision_id = ?1";

/// A redaction from a row of [`OF_DECISION`] or [`ALL`].
pub(crate) fn from_row(r: &Row<'_>) -> Result<Redaction> {
    Ok(Redaction {
        decision_id: DecisionId::parse_field("decision_id", r.str(0)?)?,
        plan_id: PlanId::parse_field("plan_id", r.str(1)?)?,
        fields: r.str(2)?.split(',').filter(|f| !f.is_empty()).map(str::to_owned).collect(),
        reason: r.string(3)?,
        actor: r.string(4)?,
        redacted_at: r.string(5)?,
        before_hash: r.string(6)?,
        after_hash: r.string(7)?,
    })
}

/// The redactions of one decision, oldest first.
pub(crate) fn of_decision(conn: &Conn, id: DecisionId) -> Result<Vec<Redaction>> {
    conn.query_vec(OF_DECISION, vals![&id.to_string()], from_row)
}

/// The content hash of a redaction row.
pub(crate) fn content_hash(r: &Redaction) -> Hash {
    let (decision, plan, fields) = (r.decision_id.to_string(), r.plan_id.to_string(), r.fields.join(","));
    let texts = [
        plan.as_str(),
        decision.as_str(),
        fields.as_str(),
        r.reason.as_str(),
        r.actor.as_str(),
        r.redacted_at.as_str(),
        r.before_hash.as_str(),
        r.after_hash.as_str(),
    ];
    const _: () = assert!(REDACTION_COLUMNS.len() == 8);
    integrity::redaction_hash(&texts.map(ValueRef::Text))
}

/// `d` with `fields` replaced by the marker (alternatives and artifacts
/// keep their number, each option, rationale and path marked).
pub(crate) fn marked(d: &Decision, fields: &[String]) -> Result<Decision> {
    let mut v = d.to_json_value();
    for field in fields {
        match field.as_str() {
            "chosen_option" | "rationale" => v[field.as_str()] = MARKER.into(),
            "alternatives" => {
                for a in v["alternatives"].as_array_mut().into_iter().flatten() {
                    a["option"] = MARKER.into();
                    if !a["rationale"].is_null() {
                        a["rationale"] = MARKER.into();
                    }
                }
            }
            "artifacts_produced" => {
                for a in v["artifacts_produced"].as_array_mut().into_iter().flatten() {
                    a["artifact_path"] = MARKER.into();
                }
            }
            "metadata" => v["metadata"] = serde_json::json!({"redacted": true}),
            other => {
                return Err(Error::validation(
                    "fields",
                    format!("{other:?} cannot be redacted; the fields that can are {}", FIELDS.join(", ")),
                ))
            }
        }
    }
    Decision::from_json_value(v)
}

/// Redacts `fields` of the stored decision `d` (as stored now) in the
/// open transaction: the redaction entry first, then the row, whose
/// update the schema allows only beside it.
pub(crate) fn redact(
    tx: &WriteTx<'_>,
    ledger: &mut Ledger,
    d: &Decision,
    fields: Vec<String>,
    reason: &str,
    actor: &str,
    at: String,
) -> Result<Redaction> {
    let id = d.decision_id();
    // What the row must hash to now: its own hash, or its last redaction's.
    let earlier = of_decision(tx, id)?;
    let stored = match earlier.last() {
        Some(r) => r.after_hash.clone(),
        None => tx
            .query_opt(STORED_HASH, vals![&id.to_string()], |r| r.opt_string(0))?
            .flatten()
            .ok_or_else(|| Error::DecisionNotFound(id.to_string()))?,
    };
    let content = PreparedRow::of(d).content;
    let before = hash::to_hex(&content);
    if before != stored {
        return Err(Error::Corrupt {
            table: "decisions",
            key: id.to_string(),
            reason: "the row no longer matches its content hash, so a redaction would hide a change".into(),
        });
    }
    let after_decision = marked(d, &fields)?;
    let after = PreparedRow::of(&after_decision);
    if after.content == content {
        return Err(Error::validation(
            "fields",
            format!("{} of {id} hold nothing to redact (redacted already, or empty)", fields.join(", ")),
        ));
    }
    let redaction = Redaction {
        decision_id: id,
        plan_id: d.plan_id(),
        fields,
        reason: reason.to_owned(),
        actor: actor.to_owned(),
        redacted_at: at,
        before_hash: before,
        after_hash: hash::to_hex(&after.content),
    };
    write_entry(tx, ledger, &redaction)?;
    tx.execute(
        UPDATE,
        vals![
            &id.to_string(),
            after_decision.chosen_option(),
            after_decision.rationale(),
            &json(&after_decision.alternatives()),
            &json(&after_decision.artifacts_produced()),
            &json(after_decision.metadata())
        ],
    )?;
    Ok(redaction)
}

/// Appends `r` to its plan's chain and writes its row (a copy replays a
/// source's redactions with this alone: their rows are redacted already).
pub(crate) fn write_entry(tx: &WriteTx<'_>, ledger: &mut Ledger, r: &Redaction) -> Result<()> {
    let content = content_hash(r);
    let entry = ledger.next_entry(tx, r.plan_id, &content)?;
    tx.execute(
        INSERT,
        vals![
            &r.plan_id.to_string(),
            &r.decision_id.to_string(),
            &r.fields.join(","),
            &r.reason,
            &r.actor,
            &r.redacted_at,
            &r.before_hash,
            &r.after_hash,
            &hash::to_hex(&content),
            entry.chain_index,
            &hash::to_hex(&entry.chain_hash),
            entry.log_index
        ],
    )?;
    ledger.redaction_appended(r.plan_id, r.decision_id, &entry);
    Ok(())
}

/// A field's JSON, as the row stores it (the text its hash covers).
fn json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("in-memory values always serialize")
}
