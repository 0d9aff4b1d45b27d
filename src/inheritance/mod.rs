//! Plan context inheritance: a child plan starts from a compressed skeleton
//! of its parent's context, within a share of its own token budget.
//!
//! [`PlanContextInheritance::compute_child_context`] turns a parent's
//! [`AssembledContext`] into a [`ChildContextResult`]: a [`ContextRequest`]
//! for the child (its own focus, more detail, narrower breadth) plus
//! skeleton fragments made by a [`SkeletonCompressor`].
//!
//! ## Priority
//!
//! Skeleton fragments near the child's focus come first: the same resource,
//! then the longest shared path prefix, then the graph distance when a graph
//! is at hand; the parent's score only breaks ties. The compressor spends
//! the skeleton budget in that order, so under a tight budget the fragments
//! the child is about keep their detail and the far ones shrink or drop.

use std::collections::HashMap;

use serde::Serialize;

use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::projection::{ContextFragment, TokenCounter};

/// Tuning of inheritance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InheritanceConfig {
    /// Share of the child's budget given to the parent's skeleton.
    pub skeleton_ratio: f64,
    /// The least a skeleton is worth: its share of the budget is raised to
    /// this when that is at most a quarter of the budget, and there is no
    /// skeleton when the share stays below it.
    pub min_skeleton_tokens: usize,
    /// Extra detail depth per level down the plan tree.
    pub depth_delta: u32,
    /// Breadth removed per level down the plan tree.
    pub breadth_narrowing: u32,
    /// The largest breadth a child request gets.
    pub max_child_breadth: u32,
}

impl Default for InheritanceConfig {
    fn default() -> Self {
        InheritanceConfig {
            skeleton_ratio: 0.15,
            min_skeleton_tokens: 32,
            depth_delta: 1,
            breadth_narrowing: 1,
            max_child_breadth: 2,
        }
    }
}

/// The parent's materialised context.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AssembledContext {
    pub fragments: Vec<ContextFragment>,
    /// The detail depth the parent's context was projected at.
    pub detail_depth: u32,
    /// The breadth the parent's context was projected with.
    pub breadth: u32,
}

/// What the child should project. Immutable.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContextRequest {
    focus: Vec<String>,
    breadth: u32,
    depth: u32,
    depth_gradient: bool,
    budget: usize,
}

impl ContextRequest {
    pub fn new(focus: Vec<String>, breadth: u32, depth: u32, depth_gradient: bool, budget: usize) -> Self {
        ContextRequest { focus, breadth, depth, depth_gradient, budget }
    }
    pub fn focus(&self) -> &[String] {
        &self.focus
    }
    pub fn breadth(&self) -> u32 {
        self.breadth
    }
    pub fn depth(&self) -> u32 {
        self.depth
    }
    pub fn depth_gradient(&self) -> bool {
        self.depth_gradient
    }
    pub fn budget(&self) -> usize {
        self.budget
    }
}

/// The child's request and the parent's skeleton. Immutable.
///
/// ```compile_fail
/// use decision_store::inheritance::{ChildContextResult, ContextRequest};
/// let mut r = ChildContextResult::new(ContextRequest::new(vec![], 1, 1, true, 10), vec![], 1);
/// r.depth_delta = 2; // fields are private
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChildContextResult {
    request: ContextRequest,
    skeleton_fragments: Vec<ContextFragment>,
    depth_delta: u32,
    /// Parent fragments that the skeleton's budget left out.
    #[serde(skip)]
    dropped: usize,
}

impl ChildContextResult {
    pub fn new(request: ContextRequest, skeleton_fragments: Vec<ContextFragment>, depth_delta: u32) -> Self {
        ChildContextResult { request, skeleton_fragments, depth_delta, dropped: 0 }
    }
    /// How many of the parent's fragments the skeleton's budget left out.
    pub fn dropped(&self) -> usize {
        self.dropped
    }
    pub fn request(&self) -> &ContextRequest {
        &self.request
    }
    pub fn skeleton_fragments(&self) -> &[ContextFragment] {
        &self.skeleton_fragments
    }
    /// How much more detail the child gets than the parent.
    pub fn depth_delta(&self) -> u32 {
        self.depth_delta
    }
    /// Tokens the skeleton takes.
    pub fn skeleton_tokens(&self) -> usize {
        self.skeleton_fragments.iter().map(ContextFragment::tokens).sum()
    }
}

/// Turns parent fragments into skeleton fragments within a token budget.
pub trait SkeletonCompressor {
    /// `fragments` come in priority order (most relevant to the child first).
    /// The result must fit `budget` tokens as `counter` counts them; the
    /// caller drops whatever does not, from the end.
    fn compress(
        &self,
        fragments: &[ContextFragment],
        budget: usize,
        counter: &dyn TokenCounter,
    ) -> Vec<ContextFragment>;
}

/// The default compressor: each fragment becomes its module listing (the
/// file name) followed by its module-graph line at detail depth 1
/// (`main.py` / `[MODULE_GRAPH]: symbols=main,run`), or, when the budget is
/// tight, the listing alone at depth 0. Lower-priority
/// fragments shrink first, and drop only when even listings do not fit; what
/// dropping frees goes back to detail, most relevant first.
#[derive(Clone, Copy, Debug, Default)]
pub struct DepthReductionCompressor;

/// Names defined in source text: the word after `def`, `class`, `fn`, `struct` and similar keywords.
pub fn defined_symbols(content: &str) -> Vec<String> {
    const KEYWORDS: [&str; 12] =
        ["def", "class", "fn", "struct", "enum", "trait", "function", "interface", "type", "func", "module", "impl"];
    let words: Vec<&str> =
        content.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    let mut out: Vec<String> = Vec::new();
    for pair in words.windows(2) {
        if KEYWORDS.contains(&pair[0])
            && !pair[1].chars().next().is_some_and(|c| c.is_ascii_digit())
            && !out.iter().any(|s| s == pair[1])
        {
            out.push(pair[1].to_owned());
        }
    }
    out
}

/// The last path segment of a URI: `project://src/app/main.py` -> `main.py`.
fn listing_name(uri: &str) -> &str {
    let path = uri.split_once("://").map_or(uri, |(_, p)| p);
    path.rsplit('/').find(|s| !s.is_empty()).unwrap_or(path)
}

impl SkeletonCompressor for DepthReductionCompressor {
    fn compress(
        &self,
        fragments: &[ContextFragment],
        budget: usize,
        counter: &dyn TokenCounter,
    ) -> Vec<ContextFragment> {
        let render = |f: &ContextFragment, depth: u32| -> ContextFragment {
            let name = listing_name(f.resource_uri());
            let symbols = defined_symbols(f.content());
            let text = if depth >= 1 && !symbols.is_empty() {
                format!("{name}\n[MODULE_GRAPH]: symbols={}", symbols.join(","))
            } else {
                name.to_owned()
            };
            let tokens = counter.count(&text);
            f.clone().with_content(text, tokens, depth).with_metadata("skeleton", serde_json::Value::Bool(true))
        };
        let mut out: Vec<ContextFragment> = fragments.iter().map(|f| render(f, f.detail_depth().min(1))).collect();
        let mut total: usize = out.iter().map(ContextFragment::tokens).sum();
        // Shrink from the least relevant end, then drop from it.
        for i in (0..out.len()).rev() {
            if total <= budget {
                break;
            }
            if out[i].detail_depth() == 1 {
                let small = render(&fragments[i], 0);
                total = total - out[i].tokens() + small.tokens();
                out[i] = small;
            }
        }
        while total > budget {
            match out.pop() {
                Some(f) => total -= f.tokens(),
                None => break,
            }
        }
        // Spend what the drops left over on detail, most relevant first.
        for i in 0..out.len() {
            if out[i].detail_depth() == 0 && fragments[i].detail_depth() >= 1 {
                let full = render(&fragments[i], 1);
                if total - out[i].tokens() + full.tokens() > budget {
                    break; // detail goes strictly in order of relevance
                }
                total = total - out[i].tokens() + full.tokens();
                out[i] = full;
            }
        }
        out
    }
}

/// Computes child contexts from a parent's.
pub struct PlanContextInheritance {
    config: InheritanceConfig,
    compressor: Box<dyn SkeletonCompressor + Send + Sync>,
    counter: Box<dyn TokenCounter>,
}

impl std::fmt::Debug for PlanContextInheritance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanContextInheritance")
            .field("config", &self.config)
            .field("counter", &self.counter.name())
            .finish()
    }
}

impl Default for PlanContextInheritance {
    fn default() -> Self {
        Self::new(InheritanceConfig::default())
    }
}

impl PlanContextInheritance {
    /// With the default compressor and the cl100k tokenizer.
    pub fn new(config: InheritanceConfig) -> Self {
        PlanContextInheritance {
            config,
            compressor: Box::new(DepthReductionCompressor),
            counter: Box::new(crate::projection::Cl100k),
        }
    }

    /// Replaces the compressor.
    pub fn with_compressor(self, compressor: impl SkeletonCompressor + Send + Sync + 'static) -> Self {
        PlanContextInheritance { compressor: Box::new(compressor), ..self }
    }

    /// Replaces the token counter.
    pub fn with_counter(self, counter: impl TokenCounter + 'static) -> Self {
        PlanContextInheritance { counter: Box::new(counter), ..self }
    }

    pub fn config(&self) -> &InheritanceConfig {
        &self.config
    }

    /// The token counter it measures skeletons with.
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// The child's request and skeleton; see the module docs for the rules.
    /// `graph_distance` (URI -> hops from the child focus) refines the
    /// priority when a graph is at hand.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `child_depth_in_tree` when it is not
    /// below (greater than) `parent_depth_in_tree`, or `child_focus` when empty.
    pub fn compute_child_context(
        &self,
        parent: &AssembledContext,
        child_focus: &[String],
        budget: usize,
        parent_depth_in_tree: u32,
        child_depth_in_tree: u32,
    ) -> Result<ChildContextResult> {
        self.compute_child_context_near(parent, child_focus, budget, parent_depth_in_tree, child_depth_in_tree, None)
    }

    /// [`compute_child_context`](Self::compute_child_context) with graph distances from the child focus.
    ///
    /// # Errors
    /// As [`compute_child_context`](Self::compute_child_context).
    pub fn compute_child_context_near(
        &self,
        parent: &AssembledContext,
        child_focus: &[String],
        budget: usize,
        parent_depth_in_tree: u32,
        child_depth_in_tree: u32,
        graph_distance: Option<&HashMap<String, u32>>,
    ) -> Result<ChildContextResult> {
        if child_depth_in_tree <= parent_depth_in_tree {
            return Err(Error::validation(
                "child_depth_in_tree",
                format!("must be greater than parent_depth_in_tree ({child_depth_in_tree} <= {parent_depth_in_tree})"),
            ));
        }
        if child_focus.is_empty() {
            return Err(Error::validation("child_focus", "must name at least one node"));
        }
        let levels = child_depth_in_tree - parent_depth_in_tree;
        let depth_delta = self.config.depth_delta.saturating_mul(levels);
        let breadth = parent
            .breadth
            .saturating_sub(self.config.breadth_narrowing.saturating_mul(levels))
            .min(self.config.max_child_breadth);
        let request =
            ContextRequest::new(child_focus.to_vec(), breadth, parent.detail_depth + depth_delta, true, budget);

        // The skeleton's share of the budget, raised to the least a skeleton
        // is worth when that is at most a quarter of the budget: a small
        // budget still inherits a small skeleton, and never more than a quarter.
        let share = (budget as f64 * self.config.skeleton_ratio).floor() as usize;
        let skeleton_budget = share.max(self.config.min_skeleton_tokens.min(budget / 4));
        let skeleton = if skeleton_budget < self.config.min_skeleton_tokens || parent.fragments.is_empty() {
            Vec::new()
        } else {
            let ordered = prioritise(&parent.fragments, child_focus, graph_distance);
            let mut out = self.compressor.compress(&ordered, skeleton_budget, self.counter.as_ref());
            // Hold any compressor to the budget.
            let mut total = 0;
            out.retain(|f| {
                total += f.tokens();
                total <= skeleton_budget
            });
            out
        };
        let dropped = parent.fragments.len().saturating_sub(skeleton.len());
        Ok(ChildContextResult { dropped, ..ChildContextResult::new(request, skeleton, depth_delta) })
    }
}

/// The path part of a URI, split into segments.
fn segments(uri: &str) -> Vec<&str> {
    uri.split_once("://").map_or(uri, |(_, p)| p).split('/').filter(|s| !s.is_empty()).collect()
}

/// Parent fragments ordered by closeness to the child focus (see the module docs).
pub fn prioritise(
    fragments: &[ContextFragment],
    child_focus: &[String],
    graph_distance: Option<&HashMap<String, u32>>,
) -> Vec<ContextFragment> {
    let focus_segments: Vec<Vec<&str>> = child_focus.iter().map(|f| segments(f)).collect();
    let key = |f: &ContextFragment| {
        let same = child_focus.iter().any(|c| c == f.resource_uri() || c == f.uko_node());
        let own = segments(f.resource_uri());
        // Shared leading directories (the file name itself does not count).
        let shared = focus_segments
            .iter()
            .map(|fs| fs.iter().zip(&own).take(own.len().saturating_sub(1)).take_while(|(a, b)| a == b).count())
            .max()
            .unwrap_or(0);
        let distance = graph_distance
            .and_then(|g| g.get(f.uko_node()).or_else(|| g.get(f.resource_uri())).copied())
            .unwrap_or(u32::MAX);
        (!same, std::cmp::Reverse(shared), distance)
    };
    let mut indexed: Vec<(usize, &ContextFragment)> = fragments.iter().enumerate().collect();
    indexed.sort_by(|(ia, a), (ib, b)| key(a).cmp(&key(b)).then(b.score().total_cmp(&a.score())).then(ia.cmp(ib)));
    indexed.into_iter().map(|(_, f)| f.clone()).collect()
}

/// Focus URIs from decisions' context resources, in order, without
/// duplicates; `fallback` when the decisions name none.
pub fn extract_child_focus(decisions: &[Decision], fallback: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in decisions {
        for r in d.context_snapshot().resources() {
            if !out.iter().any(|u| u == r.resource_id()) {
                out.push(r.resource_id().to_owned());
            }
        }
    }
    if out.is_empty() {
        fallback.to_vec()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_and_listing_names() {
        assert_eq!(defined_symbols("def main(): return runner()"), ["main"]);
        assert_eq!(defined_symbols("pub struct Store; fn open() {} class A: def b(self)"), ["Store", "open", "A", "b"]);
        assert_eq!(listing_name("project://src/app/main.py"), "main.py");
        assert_eq!(listing_name("class://AuthManager"), "AuthManager");
        assert_eq!(listing_name("module://pkg.auth"), "pkg.auth");
    }
}

#[cfg(test)]
mod compressor_tests {
    use super::*;
    use crate::projection::CharEstimate;

    fn frag(uri: &str, body: &str) -> ContextFragment {
        ContextFragment::new(uri, body, 100, 4)
    }

    #[test]
    fn tight_budgets_shrink_the_least_relevant_first_then_drop_then_restore_detail() {
        let fs: Vec<ContextFragment> = (0..6)
            .map(|i| frag(&format!("project://src/m{i}.py"), &format!("def f{i}(): pass\nclass C{i}: pass")))
            .collect();
        let c = DepthReductionCompressor;
        let full: usize = fs.iter().map(|f| c.compress(std::slice::from_ref(f), 1000, &CharEstimate)[0].tokens()).sum();
        // Everything fits: all at depth 1.
        let all = c.compress(&fs, full, &CharEstimate);
        assert!(all.iter().all(|f| f.detail_depth() == 1) && all.len() == 6);
        // A little less: the last one shrinks to its listing.
        let some = c.compress(&fs, full - 1, &CharEstimate);
        assert_eq!(some.iter().map(|f| f.detail_depth()).collect::<Vec<_>>(), [1, 1, 1, 1, 1, 0]);
        assert!(some.iter().map(ContextFragment::tokens).sum::<usize>() < full);
        // Very tight: the most relevant keep their place; every result fits.
        for budget in 0..full {
            let out = c.compress(&fs, budget, &CharEstimate);
            assert!(out.iter().map(ContextFragment::tokens).sum::<usize>() <= budget, "budget {budget}");
            for (i, f) in out.iter().enumerate() {
                assert_eq!(f.uko_node(), fs[i].uko_node(), "order changed at budget {budget}");
            }
            // Depth never increases towards the less relevant end.
            assert!(out.windows(2).all(|w| w[0].detail_depth() >= w[1].detail_depth()), "budget {budget}: {out:?}");
        }
        assert!(c.compress(&fs, 0, &CharEstimate).is_empty());
    }
}
