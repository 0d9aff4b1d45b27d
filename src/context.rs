//! Context from a store: a projection of its graph, and the skeleton a
//! child plan inherits, each read in one snapshot of the store, with the
//! focus taken as every face takes it (the command, the agents' tools, the
//! web view, Python) so that all of them answer the same input alike.
//!
//! A focus is taken as [`Store::resolve_focus`] takes it: a node URI
//! (`class://AuthManager`), or a path relative to the ingested root
//! (`src/auth.py`) for its file's `project://` node; an entry that names no
//! node of the graph is bad input naming the argument it came in.

use std::collections::HashMap;

use crate::decision::{Decision, DecisionType, PlanId};
use crate::error::{Error, Result};
use crate::inheritance::{extract_child_focus, AssembledContext, ChildContextResult, PlanContextInheritance};
use crate::projection::{
    Depth, DepthBreadthProjector, FragmentSet, Projection, ProjectionSpec, TokenCounter, DEFAULT_BUDGET,
};
use crate::store::Store;
use crate::uko::Direction;

/// How [`Store::child_context`] builds the parent's context.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredContextOptions {
    /// The child's token budget.
    pub budget: usize,
    /// Breadth of the parent's projection.
    pub parent_breadth: u32,
    /// Full depth of the parent's projection.
    pub parent_depth: Depth,
    /// Domain for named depths.
    pub domain: String,
    pub parent_depth_in_tree: u32,
    pub child_depth_in_tree: u32,
    /// The child's focus (node URIs or relative paths, as the module docs
    /// say); by default the resources of the plan's effective subplan
    /// spawns, else those of all its effective decisions.
    pub child_focus: Option<Vec<String>>,
}

impl Default for StoredContextOptions {
    fn default() -> Self {
        StoredContextOptions {
            budget: DEFAULT_BUDGET,
            parent_breadth: 2,
            parent_depth: Depth::named("SIGNATURES"),
            domain: "uko-code:".into(),
            parent_depth_in_tree: 0,
            child_depth_in_tree: 1,
            child_focus: None,
        }
    }
}

impl Store {
    /// The nodes that `spec` reaches, in one read snapshot, its focus
    /// resolved first ([`Store::resolve_focus`], as `focus`).
    ///
    /// # Errors
    /// As [`Store::resolve_focus`] and [`DepthBreadthProjector::project`].
    pub fn projection(&self, spec: &ProjectionSpec) -> Result<Projection> {
        let projector = DepthBreadthProjector::new();
        // What needs no store first: a named depth that no map has.
        projector.resolve_depth(spec)?;
        self.read_snapshot(|store| {
            let spec = spec.with_focus(store.resolve_focus("focus", spec.focus())?)?;
            projector.project(store, &spec)
        })
    }

    /// The projection of `spec` and its fragments, counted by `counter`
    /// within `budget` tokens when one is given, from one walk of the graph
    /// in one read snapshot, its focus resolved first.
    ///
    /// # Errors
    /// As [`Store::projection`].
    pub fn project(
        &self,
        spec: &ProjectionSpec,
        counter: &dyn TokenCounter,
        budget: Option<usize>,
    ) -> Result<(Projection, FragmentSet)> {
        let projector = DepthBreadthProjector::new();
        projector.resolve_depth(spec)?;
        self.read_snapshot(|store| {
            let spec = spec.with_focus(store.resolve_focus("focus", spec.focus())?)?;
            projector.project_with_fragments(store, &spec, counter, budget)
        })
    }

    /// The context a child of `plan` inherits: the parent's context (the
    /// projection of the resources its effective decisions name that are in
    /// the graph) compressed around the child's focus, within the budget.
    /// Graph distances from the child focus (both directions, up to 3 hops)
    /// refine the skeleton's priority. Reads one snapshot.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`]; [`Error::Validation`] naming `child_focus`
    /// for a focus entry that names no node, or `plan` when no decision of
    /// the plan names a resource that is in the graph; the errors of
    /// projection and [`PlanContextInheritance::compute_child_context`].
    pub fn child_context(&self, plan: PlanId, options: &StoredContextOptions) -> Result<ChildContextResult> {
        self.read_snapshot(|store| store.child_context_in_snapshot(plan, options))
    }

    fn child_context_in_snapshot(&self, plan: PlanId, options: &StoredContextOptions) -> Result<ChildContextResult> {
        let service = PlanContextInheritance::default();
        let tree = self.decision_tree(plan)?;
        let effective: Vec<Decision> = tree.effective().into_iter().cloned().collect();
        // One query per list; storage errors surface instead of reading as "not in the graph".
        let in_graph = |uris: Vec<String>| -> Result<Vec<String>> {
            let known = self.known_uris(&uris)?;
            Ok(uris.into_iter().filter(|u| known.contains(u)).collect())
        };
        let parent_focus = in_graph(extract_child_focus(&effective, &[]))?;
        if parent_focus.is_empty() {
            return Err(Error::validation(
                "plan",
                format!("no effective decision of plan {plan} names a resource that is in the graph"),
            ));
        }
        let projector = DepthBreadthProjector::new();
        let spec = ProjectionSpec::new(parent_focus.clone(), options.parent_breadth, options.parent_depth.clone())?
            .with_domain(options.domain.clone());
        let detail_depth = projector.resolve_depth(&spec)?;
        let fragments = projector.project_fragments(self, &spec, service.counter(), None)?.fragments;
        let parent = AssembledContext { fragments, detail_depth, breadth: options.parent_breadth };

        let (child_focus, known) = match &options.child_focus {
            Some(f) => {
                let resolved = self.resolve_focus("child_focus", f)?;
                (resolved.clone(), resolved)
            }
            None => {
                let spawns: Vec<Decision> = effective
                    .iter()
                    .filter(|d| {
                        matches!(d.decision_type(), DecisionType::SubplanSpawn | DecisionType::SubplanParallelSpawn)
                    })
                    .cloned()
                    .collect();
                let focus = extract_child_focus(&spawns, &parent_focus);
                let known = in_graph(focus.clone())?;
                (focus, known)
            }
        };
        let distances: Option<HashMap<String, u32>> = if known.is_empty() {
            None
        } else {
            let near = ProjectionSpec::new(known, 3, 0)?.with_direction(Direction::Both);
            Some(projector.project(self, &near)?.nodes.iter().map(|n| (n.uri().to_owned(), n.distance())).collect())
        };
        service.compute_child_context_near(
            &parent,
            &child_focus,
            options.budget,
            options.parent_depth_in_tree,
            options.child_depth_in_tree,
            distances.as_ref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uko::UkoNode;

    #[test]
    fn a_focus_is_a_node_uri_or_a_relative_path_and_anything_else_names_its_argument() {
        let mut store = Store::open_in_memory().unwrap();
        store
            .upsert_nodes(&[
                UkoNode::new("project://src/app.py", "uko-py:", "file", "app.py").with_view(0, "app.py"),
                UkoNode::new("class://App", "uko-code:", "class", "App").with_view(0, "App"),
                UkoNode::new("A", "uko-code:", "class", "A").with_view(0, "A"),
            ])
            .unwrap();
        let focus = |e: &[&str]| store.resolve_focus("focus", &e.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            focus(&["src/app.py", "./src/app.py", "class://App", "A"]).unwrap(),
            ["project://src/app.py", "project://src/app.py", "class://App", "A"]
        );
        let e = focus(&["class://App", "src/nope.py"]).unwrap_err().to_string();
        assert_eq!(e, "invalid focus: project://src/nope.py is not a node of the graph; nearest: project://src/app.py");
        let e = store.resolve_focus("child_focus", &["class://Nope".into()]).unwrap_err().to_string();
        assert_eq!(e, "invalid child_focus: class://Nope is not a node of the graph");
        let spec = ProjectionSpec::for_focus(["src/app.py"]).unwrap();
        let (projection, set) = store.project(&spec, &crate::projection::CharEstimate, None).unwrap();
        assert_eq!(projection.spec.focus(), ["project://src/app.py"]);
        assert_eq!(set.fragments[0].uko_node(), "project://src/app.py");
    }
}
