//! The decision record and its parts.
//!
//! A [`Decision`] is immutable and always valid: the only ways to get one are
//! [`DecisionBuilder::build`] and JSON decoding, and both run the same checks
//! ([`Decision::try_from`]). Changes such as [`Decision::with_superseded_by`]
//! return a new value.
//!
//! ```compile_fail
//! // Fields are private: a stored decision cannot be edited in place.
//! use decision_store::{Decision, DecisionType, PlanId};
//! let mut d = Decision::builder(PlanId::generate(), DecisionType::PromptDefinition, 0).build().unwrap();
//! d.sequence = 7;
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ids::{DecisionId, PlanId};
use super::types::DecisionType;
use crate::error::{Error, Result};

/// A reference to a resource (usually a UKO node URI) the decision looked at.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawResourceRef")]
pub struct ResourceRef {
    resource_id: String,
    resource_type: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResourceRef {
    resource_id: String,
    #[serde(default)]
    resource_type: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

impl TryFrom<RawResourceRef> for ResourceRef {
    type Error = Error;
    fn try_from(r: RawResourceRef) -> Result<Self> {
        ResourceRef::new(r.resource_id, r.resource_type, r.version)
    }
}

impl ResourceRef {
    /// A resource reference; `resource_id` must not be empty.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `resource_id` when it is empty.
    pub fn new(resource_id: impl Into<String>, resource_type: Option<String>, version: Option<String>) -> Result<Self> {
        let resource_id = resource_id.into();
        if resource_id.is_empty() {
            return Err(Error::validation("resource_id", "must not be empty"));
        }
        Ok(Self { resource_id, resource_type, version })
    }
    pub fn resource_id(&self) -> &str {
        &self.resource_id
    }
    pub fn resource_type(&self) -> Option<&str> {
        self.resource_type.as_deref()
    }
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
}

/// A file or other artifact a decision produced.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawArtifactRef")]
pub struct ArtifactRef {
    artifact_path: String,
    content_hash: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArtifactRef {
    artifact_path: String,
    #[serde(default)]
    content_hash: Option<String>,
}

impl TryFrom<RawArtifactRef> for ArtifactRef {
    type Error = Error;
    fn try_from(r: RawArtifactRef) -> Result<Self> {
        ArtifactRef::new(r.artifact_path, r.content_hash)
    }
}

impl ArtifactRef {
    /// An artifact reference; `artifact_path` must not be empty.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `artifact_path` when it is empty.
    pub fn new(artifact_path: impl Into<String>, content_hash: Option<String>) -> Result<Self> {
        let artifact_path = artifact_path.into();
        if artifact_path.is_empty() {
            return Err(Error::validation("artifact_path", "must not be empty"));
        }
        Ok(Self { artifact_path, content_hash })
    }
    pub fn artifact_path(&self) -> &str {
        &self.artifact_path
    }
    pub fn content_hash(&self) -> Option<&str> {
        self.content_hash.as_deref()
    }
}

/// An option the decision considered and did not choose.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alternative {
    option: String,
    #[serde(default)]
    rationale: Option<String>,
}

impl Alternative {
    pub fn new(option: impl Into<String>, rationale: Option<String>) -> Self {
        Self { option: option.into(), rationale }
    }
    pub fn option(&self) -> &str {
        &self.option
    }
    pub fn rationale(&self) -> Option<&str> {
        self.rationale.as_deref()
    }
}

/// What the agent saw when it decided. `hash` is empty for an empty snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSnapshot {
    #[serde(default)]
    hash: String,
    #[serde(default)]
    resources: Vec<ResourceRef>,
    #[serde(default)]
    actor_state_ref: Option<String>,
}

impl ContextSnapshot {
    pub fn new(hash: impl Into<String>, resources: Vec<ResourceRef>, actor_state_ref: Option<String>) -> Self {
        Self { hash: hash.into(), resources, actor_state_ref }
    }
    pub fn hash(&self) -> &str {
        &self.hash
    }
    pub fn resources(&self) -> &[ResourceRef] {
        &self.resources
    }
    pub fn actor_state_ref(&self) -> Option<&str> {
        self.actor_state_ref.as_deref()
    }
    /// No hash, no resources, no actor state.
    pub fn is_empty(&self) -> bool {
        self.hash.is_empty() && self.resources.is_empty() && self.actor_state_ref.is_none()
    }
}

/// One decision of an agent's plan. Immutable and always valid.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "DecisionBuilder")]
pub struct Decision {
    pub(crate) decision_id: DecisionId,
    pub(crate) plan_id: PlanId,
    pub(crate) parent_decision_id: Option<DecisionId>,
    pub(crate) sequence: u32,
    pub(crate) decision_type: DecisionType,
    pub(crate) chosen_option: String,
    pub(crate) confidence_score: Option<f64>,
    pub(crate) is_correction: bool,
    pub(crate) corrects_decision_id: Option<DecisionId>,
    pub(crate) superseded_by: Option<DecisionId>,
    /// The rest, behind one pointer and `None` when all of it is empty (as
    /// in a tree's outline): a plan of thousands of decisions then takes a
    /// third of the memory, and moving a decision copies 200 bytes, not 450.
    pub(crate) details: Option<Box<Details>>,
}

/// The fields of a [`Decision`] that trees and listings do not need.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Details {
    pub(crate) rationale: String,
    pub(crate) alternatives: Vec<Alternative>,
    pub(crate) context_snapshot: ContextSnapshot,
    pub(crate) artifacts_produced: Vec<ArtifactRef>,
    pub(crate) downstream_decision_ids: Vec<DecisionId>,
    pub(crate) downstream_plan_ids: Vec<PlanId>,
    pub(crate) metadata: Map<String, Value>,
}

impl Details {
    /// Boxed, or `None` when every field is empty, so that equal decisions
    /// hold equal `details`.
    pub(crate) fn boxed(self) -> Option<Box<Details>> {
        let empty = self.rationale.is_empty()
            && self.alternatives.is_empty()
            && self.context_snapshot.is_empty()
            && self.artifacts_produced.is_empty()
            && self.downstream_decision_ids.is_empty()
            && self.downstream_plan_ids.is_empty()
            && self.metadata.is_empty();
        (!empty).then(|| Box::new(self))
    }
}

/// The snapshot of a decision without details.
static NO_SNAPSHOT: ContextSnapshot =
    ContextSnapshot { hash: String::new(), resources: Vec::new(), actor_state_ref: None };

/// The interchange shape: every field, in the order of the format.
impl Serialize for Decision {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Decision", 17)?;
        s.serialize_field("decision_id", &self.decision_id)?;
        s.serialize_field("plan_id", &self.plan_id)?;
        s.serialize_field("parent_decision_id", &self.parent_decision_id)?;
        s.serialize_field("sequence", &self.sequence)?;
        s.serialize_field("decision_type", &self.decision_type)?;
        s.serialize_field("chosen_option", &self.chosen_option)?;
        s.serialize_field("rationale", self.rationale())?;
        s.serialize_field("confidence_score", &self.confidence_score)?;
        s.serialize_field("alternatives", self.alternatives())?;
        s.serialize_field("context_snapshot", self.context_snapshot())?;
        s.serialize_field("artifacts_produced", self.artifacts_produced())?;
        s.serialize_field("is_correction", &self.is_correction)?;
        s.serialize_field("corrects_decision_id", &self.corrects_decision_id)?;
        s.serialize_field("superseded_by", &self.superseded_by)?;
        s.serialize_field("downstream_decision_ids", self.downstream_decision_ids())?;
        s.serialize_field("downstream_plan_ids", self.downstream_plan_ids())?;
        s.serialize_field("metadata", self.metadata())?;
        s.end()
    }
}

/// The unvalidated form of a decision: the JSON wire shape, and the builder.
///
/// Ids are kept as text until [`DecisionBuilder::build`] (or decoding)
/// validates them, so every error names the offending field.
///
/// # Example
/// ```
/// use decision_store::{Decision, DecisionType, PlanId};
/// let plan = PlanId::generate();
/// let root = Decision::builder(plan, DecisionType::PromptDefinition, 0)
///     .chosen_option("build a CLI")
///     .confidence_score(0.9)
///     .build()?;
/// let child = Decision::builder(plan, DecisionType::StrategyChoice, 1)
///     .parent(root.decision_id())
///     .build()?;
/// assert_eq!(child.parent_decision_id(), Some(root.decision_id()));
/// # Ok::<(), decision_store::Error>(())
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBuilder {
    #[serde(default)]
    decision_id: Option<String>,
    plan_id: String,
    #[serde(default)]
    parent_decision_id: Option<String>,
    sequence: u32,
    decision_type: DecisionType,
    #[serde(default)]
    chosen_option: String,
    #[serde(default)]
    rationale: String,
    #[serde(default)]
    confidence_score: Option<f64>,
    #[serde(default)]
    alternatives: Vec<Alternative>,
    #[serde(default)]
    context_snapshot: ContextSnapshot,
    #[serde(default)]
    artifacts_produced: Vec<ArtifactRef>,
    #[serde(default)]
    is_correction: bool,
    #[serde(default)]
    corrects_decision_id: Option<String>,
    #[serde(default)]
    superseded_by: Option<String>,
    #[serde(default)]
    downstream_decision_ids: Vec<String>,
    #[serde(default)]
    downstream_plan_ids: Vec<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

impl DecisionBuilder {
    /// Sets the decision id; without one, [`build`](Self::build) generates it.
    pub fn decision_id(mut self, id: impl ToString) -> Self {
        self.decision_id = Some(id.to_string());
        self
    }
    /// Sets the plan id (validated by `build`).
    pub fn plan_id(mut self, id: impl ToString) -> Self {
        self.plan_id = id.to_string();
        self
    }
    /// Sets the parent decision.
    pub fn parent(mut self, id: impl ToString) -> Self {
        self.parent_decision_id = Some(id.to_string());
        self
    }
    pub fn sequence(mut self, sequence: u32) -> Self {
        self.sequence = sequence;
        self
    }
    pub fn decision_type(mut self, t: DecisionType) -> Self {
        self.decision_type = t;
        self
    }
    pub fn chosen_option(mut self, s: impl Into<String>) -> Self {
        self.chosen_option = s.into();
        self
    }
    pub fn rationale(mut self, s: impl Into<String>) -> Self {
        self.rationale = s.into();
        self
    }
    pub fn confidence_score(mut self, c: impl Into<Option<f64>>) -> Self {
        self.confidence_score = c.into();
        self
    }
    pub fn alternative(mut self, a: Alternative) -> Self {
        self.alternatives.push(a);
        self
    }
    pub fn context_snapshot(mut self, s: ContextSnapshot) -> Self {
        self.context_snapshot = s;
        self
    }
    pub fn artifact(mut self, a: ArtifactRef) -> Self {
        self.artifacts_produced.push(a);
        self
    }
    /// Marks the decision as a correction of `id` (sets both halves of the pair).
    pub fn corrects(mut self, id: impl ToString) -> Self {
        self.is_correction = true;
        self.corrects_decision_id = Some(id.to_string());
        self
    }
    /// Sets `is_correction` alone (both halves must agree by `build`).
    pub fn is_correction(mut self, flag: bool) -> Self {
        self.is_correction = flag;
        self
    }
    /// Sets `corrects_decision_id` alone (both halves must agree by `build`).
    pub fn corrects_decision_id(mut self, id: Option<String>) -> Self {
        self.corrects_decision_id = id;
        self
    }
    pub fn superseded_by(mut self, id: impl ToString) -> Self {
        self.superseded_by = Some(id.to_string());
        self
    }
    pub fn downstream_decision(mut self, id: impl ToString) -> Self {
        self.downstream_decision_ids.push(id.to_string());
        self
    }
    pub fn downstream_plan(mut self, id: impl ToString) -> Self {
        self.downstream_plan_ids.push(id.to_string());
        self
    }
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// Validates and builds the decision, generating a `decision_id` if none was set.
    ///
    /// # Errors
    /// [`Error::Validation`] naming the first field that breaks a rule.
    pub fn build(mut self) -> Result<Decision> {
        if self.decision_id.is_none() {
            self.decision_id = Some(DecisionId::generate().to_string());
        }
        Decision::try_from(self)
    }
}

/// A decoding error, naming the field where the decoder was (e.g. `context_snapshot.resources[0]`).
pub(crate) fn field_error(e: serde_path_to_error::Error<serde_json::Error>) -> Error {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if path == "." || inner.is_syntax() || inner.is_eof() {
        Error::Json(inner)
    } else {
        // The position is that of the text being decoded; callers name the line.
        let message = inner.to_string();
        let message = message.rfind(" at line ").map_or(message.as_str(), |i| &message[..i]);
        Error::validation(path, in_words(message))
    }
}

/// A decoder's message in the words of the interchange format rather than
/// Rust's: "\"high\" is text; it must be a number", not "invalid type:
/// string \"high\", expected f64".
pub(crate) fn in_words(message: &str) -> String {
    let kind = |expected: &str| -> String {
        let e = expected.trim().trim_matches('`');
        match e {
            "f64" | "f32" => "a number".into(),
            "u32" => "a whole number from 0 to 4294967295".into(),
            "u64" | "usize" => "a whole number of 0 or more".into(),
            "i64" | "i32" => "a whole number".into(),
            "a string" | "string" => "text (a JSON string)".into(),
            "a boolean" | "bool" => "true or false".into(),
            "a sequence" => "a list (a JSON array)".into(),
            "a map" => "an object (a JSON object)".into(),
            other => other.to_owned(),
        }
    };
    let names = |list: &str| list.replace('`', "");
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        if let Some((value, expected)) = rest.split_once(", expected one of ") {
            return format!("\"{}\" is not one of {}", value.trim_matches('`'), names(expected));
        }
        if let Some((value, expected)) = rest.split_once(", expected ") {
            return format!("\"{}\" is not {}", value.trim_matches('`'), names(expected));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        if let Some((field, expected)) = rest.split_once(", expected one of ") {
            return format!("{} is not a field here (the fields are {})", field.trim_matches('`'), names(expected));
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("{} is required", rest.trim_matches('`'));
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((found, expected)) = rest.rsplit_once(", expected ") {
                let found = found
                    .replace("string ", "text ")
                    .replace("integer `", "")
                    .replace("floating point `", "")
                    .replace('`', "");
                return format!("{found} is not {}", kind(expected));
            }
        }
    }
    message.to_owned()
}

/// Decodes a builder tracking the path, so that an error names the field.
fn tracked<'de, D>(deserializer: D) -> Result<DecisionBuilder>
where
    D: serde::Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let reason = in_words(&e.into_inner().to_string());
        Error::validation(if path == "." { "decision".to_owned() } else { path }, reason)
    })
}

fn parse_opt(field: &'static str, s: Option<&str>) -> Result<Option<DecisionId>> {
    s.map(|s| DecisionId::parse_field(field, s)).transpose()
}

impl TryFrom<DecisionBuilder> for Decision {
    type Error = Error;

    /// Validates a decoded record. Unlike `build`, a missing `decision_id` is
    /// an error: ids are never invented for records read from outside.
    fn try_from(b: DecisionBuilder) -> Result<Self> {
        let decision_id = match b.decision_id.as_deref() {
            Some(s) => DecisionId::parse_field("decision_id", s)?,
            None => return Err(Error::validation("decision_id", "missing")),
        };
        let plan_id = PlanId::parse_field("plan_id", &b.plan_id)?;
        let parent_decision_id = parse_opt("parent_decision_id", b.parent_decision_id.as_deref())?;
        let corrects_decision_id = parse_opt("corrects_decision_id", b.corrects_decision_id.as_deref())?;
        let superseded_by = parse_opt("superseded_by", b.superseded_by.as_deref())?;
        let downstream_decision_ids = b
            .downstream_decision_ids
            .iter()
            .map(|s| DecisionId::parse_field("downstream_decision_ids", s))
            .collect::<Result<Vec<_>>>()?;
        let downstream_plan_ids = b
            .downstream_plan_ids
            .iter()
            .map(|s| PlanId::parse_field("downstream_plan_ids", s))
            .collect::<Result<Vec<_>>>()?;

        let d = Decision {
            decision_id,
            plan_id,
            parent_decision_id,
            sequence: b.sequence,
            decision_type: b.decision_type,
            chosen_option: b.chosen_option,
            // -0.0 is 0.0: SQLite stores both as 0, and the content hash must not see a difference.
            confidence_score: b.confidence_score.map(|c| if c == 0.0 { 0.0 } else { c }),
            is_correction: b.is_correction,
            corrects_decision_id,
            superseded_by,
            details: Details {
                rationale: b.rationale,
                alternatives: b.alternatives,
                context_snapshot: b.context_snapshot,
                artifacts_produced: b.artifacts_produced,
                downstream_decision_ids,
                downstream_plan_ids,
                metadata: b.metadata,
            }
            .boxed(),
        };
        d.check()?;
        Ok(d)
    }
}

impl Decision {
    /// The rules between fields that parsing each field cannot check: every
    /// decision is checked by them, whether decoded, built or read from a row.
    pub(crate) fn check(&self) -> Result<()> {
        if self.decision_type == DecisionType::PromptDefinition && self.parent_decision_id.is_some() {
            return Err(Error::validation(
                "parent_decision_id",
                "a prompt_definition must be a root decision (no parent)",
            ));
        }
        if let Some(c) = self.confidence_score {
            if !c.is_finite() || !(0.0..=1.0).contains(&c) {
                return Err(Error::validation("confidence_score", format!("{c} is not between 0 and 1")));
            }
        }
        match (self.is_correction, self.corrects_decision_id) {
            (true, None) => {
                return Err(Error::validation(
                    "corrects_decision_id",
                    "is_correction is true but corrects_decision_id is missing",
                ))
            }
            (false, Some(_)) => {
                return Err(Error::validation(
                    "is_correction",
                    "corrects_decision_id is set but is_correction is false",
                ))
            }
            _ => {}
        }
        for (field, id) in [
            ("parent_decision_id", self.parent_decision_id),
            ("corrects_decision_id", self.corrects_decision_id),
            ("superseded_by", self.superseded_by),
        ] {
            if id == Some(self.decision_id) {
                return Err(Error::validation(field, "a decision cannot name itself"));
            }
        }
        Ok(())
    }
}

impl Decision {
    /// Starts a decision of `plan` at `sequence`.
    pub fn builder(plan_id: PlanId, decision_type: DecisionType, sequence: u32) -> DecisionBuilder {
        DecisionBuilder {
            decision_id: None,
            plan_id: plan_id.to_string(),
            parent_decision_id: None,
            sequence,
            decision_type,
            chosen_option: String::new(),
            rationale: String::new(),
            confidence_score: None,
            alternatives: Vec::new(),
            context_snapshot: ContextSnapshot::default(),
            artifacts_produced: Vec::new(),
            is_correction: false,
            corrects_decision_id: None,
            superseded_by: None,
            downstream_decision_ids: Vec::new(),
            downstream_plan_ids: Vec::new(),
            metadata: Map::new(),
        }
    }

    /// Back to the editable form, e.g. to derive a variant of a decision.
    pub fn to_builder(&self) -> DecisionBuilder {
        DecisionBuilder {
            decision_id: Some(self.decision_id.to_string()),
            plan_id: self.plan_id.to_string(),
            parent_decision_id: self.parent_decision_id.map(|i| i.to_string()),
            sequence: self.sequence,
            decision_type: self.decision_type,
            chosen_option: self.chosen_option.clone(),
            rationale: self.rationale().to_owned(),
            confidence_score: self.confidence_score,
            alternatives: self.alternatives().to_vec(),
            context_snapshot: self.context_snapshot().clone(),
            artifacts_produced: self.artifacts_produced().to_vec(),
            is_correction: self.is_correction,
            corrects_decision_id: self.corrects_decision_id.map(|i| i.to_string()),
            superseded_by: self.superseded_by.map(|i| i.to_string()),
            downstream_decision_ids: self.downstream_decision_ids().iter().map(|i| i.to_string()).collect(),
            downstream_plan_ids: self.downstream_plan_ids().iter().map(|i| i.to_string()).collect(),
            metadata: self.metadata().clone(),
        }
    }

    /// Decodes one decision from a JSON value (the interchange shape).
    ///
    /// # Errors
    /// [`Error::Validation`] naming the field for a rule broken, [`Error::Json`]
    /// for a value of the wrong shape or an unknown field.
    pub fn from_json_value(value: Value) -> Result<Self> {
        let builder: DecisionBuilder = serde_path_to_error::deserialize(value).map_err(field_error)?;
        Decision::try_from(builder)
    }

    /// Decodes one decision from any serde data format, validating it as
    /// [`Decision::from_json_value`] does; an error names the field's path
    /// (`context_snapshot.resources[0].resource_id`).
    ///
    /// # Errors
    /// [`Error::Validation`] naming the field.
    pub fn from_deserializer<'de, D>(deserializer: D) -> Result<Self>
    where
        D: serde::Deserializer<'de>,
        D::Error: std::fmt::Display,
    {
        Decision::try_from(tracked(deserializer)?)
    }

    /// [`Decision::from_deserializer`] for a deserializer that is cheap to
    /// clone (one that refers to its input): the input is read once without
    /// tracking the path, which costs an allocation per key, and a second
    /// time with it only when the first reading fails. The Python package
    /// reads Python objects through it without making JSON values first.
    ///
    /// # Errors
    /// As [`Decision::from_deserializer`].
    pub fn from_reusable_deserializer<'de, D>(deserializer: D) -> Result<Self>
    where
        D: serde::Deserializer<'de> + Clone,
        D::Error: std::fmt::Display,
    {
        let builder = match DecisionBuilder::deserialize(deserializer.clone()) {
            Ok(b) => b,
            Err(_) => tracked(deserializer)?,
        };
        Decision::try_from(builder)
    }

    /// Decodes one decision from JSON text.
    ///
    /// # Errors
    /// As [`Decision::from_json_value`].
    pub fn from_json(text: &str) -> Result<Self> {
        let builder: DecisionBuilder = match serde_json::from_str(text) {
            Ok(b) => b,
            // Decode again, tracking the path, only to name the field at fault.
            Err(_) => {
                let mut de = serde_json::Deserializer::from_str(text);
                let b: DecisionBuilder = serde_path_to_error::deserialize(&mut de).map_err(field_error)?;
                de.end()?;
                b
            }
        };
        Decision::try_from(builder)
    }

    /// The interchange JSON value of this decision.
    pub fn to_json_value(&self) -> Value {
        serde_json::to_value(self).expect("a decision always serializes")
    }

    /// The interchange JSON text of this decision (one line).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a decision always serializes")
    }

    /// A copy superseded by `by`; `self` is left as it was.
    ///
    /// # Errors
    /// [`Error::Validation`] when `by` is this decision's own id.
    pub fn with_superseded_by(&self, by: DecisionId) -> Result<Decision> {
        if by == self.decision_id {
            return Err(Error::validation("superseded_by", "a decision cannot name itself"));
        }
        Ok(Decision { superseded_by: Some(by), ..self.clone() })
    }

    /// A compact map for command-line listings: `decision_id`, `type`, `confidence`, `parent`.
    pub fn as_cli_dict(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("decision_id".into(), Value::String(self.decision_id.to_string()));
        m.insert("type".into(), Value::String(self.decision_type.as_str().into()));
        m.insert("confidence".into(), self.confidence_score.map_or(Value::Null, Value::from));
        m.insert("parent".into(), self.parent_decision_id.map_or(Value::Null, |p| Value::String(p.to_string())));
        m.insert("sequence".into(), Value::from(self.sequence));
        m
    }

    pub fn decision_id(&self) -> DecisionId {
        self.decision_id
    }
    pub fn plan_id(&self) -> PlanId {
        self.plan_id
    }
    pub fn parent_decision_id(&self) -> Option<DecisionId> {
        self.parent_decision_id
    }
    /// True when the decision has no parent.
    pub fn is_root(&self) -> bool {
        self.parent_decision_id.is_none()
    }
    pub fn sequence(&self) -> u32 {
        self.sequence
    }
    pub fn decision_type(&self) -> DecisionType {
        self.decision_type
    }
    pub fn is_strategize_type(&self) -> bool {
        self.decision_type.is_strategize_type()
    }
    pub fn is_execute_type(&self) -> bool {
        self.decision_type.is_execute_type()
    }
    pub fn is_any_phase_type(&self) -> bool {
        self.decision_type.is_any_phase_type()
    }
    pub fn chosen_option(&self) -> &str {
        &self.chosen_option
    }
    pub fn rationale(&self) -> &str {
        self.details.as_ref().map_or("", |d| &d.rationale)
    }
    pub fn confidence_score(&self) -> Option<f64> {
        self.confidence_score
    }
    pub fn alternatives(&self) -> &[Alternative] {
        self.details.as_ref().map_or(&[], |d| &d.alternatives)
    }
    pub fn context_snapshot(&self) -> &ContextSnapshot {
        self.details.as_ref().map_or(&NO_SNAPSHOT, |d| &d.context_snapshot)
    }
    pub fn artifacts_produced(&self) -> &[ArtifactRef] {
        self.details.as_ref().map_or(&[], |d| &d.artifacts_produced)
    }
    pub fn is_correction(&self) -> bool {
        self.is_correction
    }
    pub fn corrects_decision_id(&self) -> Option<DecisionId> {
        self.corrects_decision_id
    }
    pub fn superseded_by(&self) -> Option<DecisionId> {
        self.superseded_by
    }
    pub fn is_superseded(&self) -> bool {
        self.superseded_by.is_some()
    }
    pub fn downstream_decision_ids(&self) -> &[DecisionId] {
        self.details.as_ref().map_or(&[], |d| &d.downstream_decision_ids)
    }
    pub fn downstream_plan_ids(&self) -> &[PlanId] {
        self.details.as_ref().map_or(&[], |d| &d.downstream_plan_ids)
    }
    pub fn metadata(&self) -> &Map<String, Value> {
        static NONE: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.details.as_ref().map_or_else(|| NONE.get_or_init(Map::new), |d| &d.metadata)
    }
}

#[cfg(test)]
mod words_tests {
    use super::in_words;

    #[test]
    fn decoders_speak_the_formats_words() {
        assert_eq!(in_words("invalid type: string \"high\", expected f64"), "text \"high\" is not a number");
        assert_eq!(
            in_words("invalid value: integer `-1`, expected u32"),
            "-1 is not a whole number from 0 to 4294967295"
        );
        assert_eq!(
            in_words("unknown variant `strategy`, expected one of `prompt_definition`, `strategy_choice`"),
            "\"strategy\" is not one of prompt_definition, strategy_choice"
        );
        assert_eq!(in_words("missing field `plan_id`"), "plan_id is required");
        assert_eq!(in_words("something else"), "something else");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> DecisionBuilder {
        Decision::builder(PlanId::generate(), DecisionType::StrategyChoice, 1)
    }

    #[test]
    fn rejections_name_the_field() {
        let me = DecisionId::generate();
        let cases: Vec<(DecisionBuilder, &str)> = vec![
            (base().plan_id("nope"), "plan_id"),
            (base().parent("bad-id"), "parent_decision_id"),
            (base().superseded_by("x"), "superseded_by"),
            (base().corrects("not-valid"), "corrects_decision_id"),
            (base().is_correction(true), "corrects_decision_id"),
            (base().corrects_decision_id(Some(me.to_string())), "is_correction"),
            (base().confidence_score(f64::NAN), "confidence_score"),
            (base().confidence_score(1.000001), "confidence_score"),
            (base().decision_id(me).parent(me), "parent_decision_id"),
            (base().decision_id(me).corrects(me), "corrects_decision_id"),
            (base().decision_id(me).superseded_by(me), "superseded_by"),
            (base().decision_type(DecisionType::PromptDefinition).parent(DecisionId::generate()), "root"),
            (base().downstream_plan("zzz"), "downstream_plan_ids"),
        ];
        for (b, field) in cases {
            let err = b.build().unwrap_err();
            assert!(matches!(err, Error::Validation { .. }), "{err}");
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn decoding_runs_the_same_checks() {
        let d = base().build().unwrap();
        let mut v = d.to_json_value();
        v["confidence_score"] = Value::from(1.5);
        assert!(Decision::from_json_value(v).unwrap_err().to_string().contains("confidence_score"));
        let mut v = d.to_json_value();
        v["surprise"] = Value::Null;
        assert!(Decision::from_json_value(v).unwrap_err().to_string().contains("surprise"));
        let mut v = d.to_json_value();
        v.as_object_mut().unwrap().remove("decision_id");
        assert!(Decision::from_json_value(v).unwrap_err().to_string().contains("decision_id"));
        let mut v = d.to_json_value();
        v["context_snapshot"]["resources"] = serde_json::json!([{"resource_id": ""}]);
        assert!(Decision::from_json_value(v).unwrap_err().to_string().contains("resource_id"));
    }

    #[test]
    fn json_has_every_interchange_field_in_order() {
        let d = base().build().unwrap();
        let keys: Vec<String> = d.to_json_value().as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "decision_id",
                "plan_id",
                "parent_decision_id",
                "sequence",
                "decision_type",
                "chosen_option",
                "rationale",
                "confidence_score",
                "alternatives",
                "context_snapshot",
                "artifacts_produced",
                "is_correction",
                "corrects_decision_id",
                "superseded_by",
                "downstream_decision_ids",
                "downstream_plan_ids",
                "metadata"
            ]
        );
    }
}
