//! A decision as an agent asks to record it (MCP's `record_decision`): the
//! fields it names, with the store filling in the rest.

use serde_json::{Map, Value};

use super::limits;
use crate::decision::{Decision, DecisionId, DecisionType, PlanId};
use crate::error::{Error, Result};
use crate::store::{Insertion, Placement, Store};

/// The fields of `fields` (and `observed`) over [`limits`], as bad input naming the first.
fn within_limits(fields: &Map<String, Value>, observed: &[String]) -> Result<()> {
    use limits::*;
    let text = |name: &str, value: Option<&Value>, max: usize| -> Result<()> {
        let n = value.and_then(Value::as_str).map_or(0, |s| s.chars().count());
        if n > max {
            return Err(Error::validation(name, format!("holds {n} characters; at most {max}")));
        }
        Ok(())
    };
    text("chosen_option", fields.get("chosen_option"), OPTION_CHARS)?;
    text("rationale", fields.get("rationale"), RATIONALE_CHARS)?;
    for list in ["alternatives", "artifacts_produced", "downstream_decision_ids", "downstream_plan_ids"] {
        let n = fields.get(list).and_then(Value::as_array).map_or(0, Vec::len);
        if n > LIST_ITEMS {
            return Err(Error::validation(list, format!("holds {n} items; at most {LIST_ITEMS}")));
        }
    }
    if observed.len() > LIST_ITEMS {
        return Err(Error::validation("observed", format!("holds {} items; at most {LIST_ITEMS}", observed.len())));
    }
    for (i, a) in fields.get("alternatives").and_then(Value::as_array).into_iter().flatten().enumerate() {
        text(&format!("alternatives[{i}].option"), a.get("option"), OPTION_CHARS)?;
        text(&format!("alternatives[{i}].rationale"), a.get("rationale"), RATIONALE_CHARS)?;
    }
    if let Some(m) = fields.get("metadata") {
        let n = m.to_string().len();
        if n > METADATA_BYTES {
            return Err(Error::validation("metadata", format!("holds {n} bytes of JSON; at most {METADATA_BYTES}")));
        }
    }
    Ok(())
}

impl Store {
    /// The decision that `fields` (a decision in the interchange format,
    /// without `decision_id` and `is_correction`) ask to record, and where
    /// it goes in its plan:
    ///
    /// - a new `decision_id`; `is_correction` when `corrects_decision_id` is given;
    /// - no `plan_id` (or null): a new plan, which only a `prompt_definition` starts;
    /// - no `sequence` (or null): the plan's next, read inside the write
    ///   ([`Placement::Next`]); a given one is kept ([`Placement::AsGiven`]);
    /// - `observed` (node URIs or relative file paths, as
    ///   [`Store::resolve_focus`] takes them): its `context_snapshot` records
    ///   their current versions;
    /// - `supersedes` (a decision id): the stored decision this one replaces,
    ///   linked in the same write.
    ///
    /// Reads the graph only; the caller stores the decision ([`Store::insert_each`]).
    ///
    /// # Errors
    /// [`Error::Validation`] naming the field at fault (one over its
    /// [`limits`], `plan_id` for a
    /// new plan that does not start with a `prompt_definition`, `observed`
    /// for an entry that names no node), or the decoding error of a field.
    pub fn prepare_record(&self, mut fields: Map<String, Value>, observed: &[String]) -> Result<Insertion> {
        within_limits(&fields, observed)?;
        let given = |fields: &Map<String, Value>, key: &str| fields.get(key).is_some_and(|v| !v.is_null());
        let supersedes = match fields.remove("supersedes") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(DecisionId::parse_field("supersedes", &id)?),
            Some(_) => return Err(Error::validation("supersedes", "must be a decision id")),
        };
        let new_plan = !given(&fields, "plan_id");
        let placement = if given(&fields, "sequence") { Placement::AsGiven } else { Placement::Next };
        let corrects = given(&fields, "corrects_decision_id");
        if new_plan {
            fields.insert("plan_id".into(), PlanId::generate().to_string().into());
        }
        if placement == Placement::Next {
            fields.insert("sequence".into(), 0.into());
        }
        fields.insert("decision_id".into(), DecisionId::generate().to_string().into());
        fields.insert("is_correction".into(), corrects.into());
        let decision = Decision::from_json_value(Value::Object(fields))?;
        if new_plan && decision.decision_type() != DecisionType::PromptDefinition {
            return Err(Error::validation(
                "plan_id",
                "is required unless the decision starts a new plan, which a prompt_definition does",
            ));
        }
        let decision = if observed.is_empty() {
            decision
        } else {
            let snapshot = self.snapshot_of(&self.resolve_focus("observed", observed)?)?;
            decision.to_builder().context_snapshot(snapshot).build()?
        };
        Ok(Insertion { decision, placement, supersedes })
    }
}
