//! The decision domain: ids, types, the decision record and plan trees.

mod ids;
mod model;
mod tree;
mod types;

pub use ids::{DecisionId, PlanId};
pub(crate) use ids::{IdMap, IdSet};
pub(crate) use model::Details;
pub use model::{Alternative, ArtifactRef, ContextSnapshot, Decision, DecisionBuilder, ResourceRef};
pub use tree::{DecisionTree, Impact, TreeView, ViewNode};
pub use types::{DecisionType, Phase, EXECUTE_TYPES, STRATEGIZE_TYPES};

/// The JSON Schema (draft 2020-12) of one decision, a line of
/// `decisions.jsonl` in the interchange format: what `dstore schema` prints
/// and what the agents' `record_decision` tool takes its fields from.
pub const JSON_SCHEMA: &str = include_str!("schema.json");
