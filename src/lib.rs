//! # decision-store
//!
//! An embedded store for the decisions AI agents make and the UKO context
//! graph they plan from, in one SQLite file.
//!
//! - [`decision`]: the typed, always-valid [`Decision`] record, its ids and
//!   types, and [`DecisionTree`] (trees, correction chains, supersession,
//!   the effective set) rebuilt from stored rows.
//! - [`store`]: [`Store`], the SQLite file with its migrations.
//! - [`uko`]: graph nodes and edges; [`projection`]: depth/breadth
//!   projection of context from the graph; [`inheritance`]: a child plan's
//!   skeleton of its parent's context; [`context`]: both from a store
//!   ([`Store::project`], [`Store::child_context`]).
//! - [`stale`], [`calibration`]: decisions whose recorded context moved;
//!   confidence against outcomes.
//! - [`hash`]: SHA-256 values and their `sha256:` text.
//! - [`ingest`] (feature `ingest`): source trees into the graph.
//!
//! Import and export in the interchange format are methods of [`Store`]
//! (`import_decisions`, `export_decisions`, `import_graph`, `export_graph`).
//!
//! ```
//! use decision_store::{Decision, DecisionType, PlanId, Store};
//! # let dir = tempfile::tempdir()?;
//! let mut store = Store::open(dir.path().join("agent.db"))?;
//! let plan = PlanId::generate();
//! let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).chosen_option("ship it").build()?;
//! let step = Decision::builder(plan, DecisionType::ToolInvocation, 1).parent(root.decision_id()).build()?;
//! store.insert_many([&root, &step])?;
//! let tree = store.decision_tree(plan)?;
//! assert_eq!(tree.children(root.decision_id())[0].decision_id(), step.decision_id());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod calibration;
pub mod context;
pub mod decision;
pub mod error;
pub mod hash;
#[cfg(feature = "ingest")]
pub mod ingest;
pub mod inheritance;
pub mod projection;
pub mod stale;
pub mod store;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod time;
pub mod uko;

pub use decision::{
    Alternative, ArtifactRef, ContextSnapshot, Decision, DecisionBuilder, DecisionId, DecisionTree, DecisionType,
    Impact, Phase, PlanId, ResourceRef, TreeView, ViewNode, EXECUTE_TYPES, STRATEGIZE_TYPES,
};
pub use error::{Error, ErrorKind, Result};
pub use store::Store;
