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
