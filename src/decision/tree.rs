//! A plan's decision tree and its history links, rebuilt from stored rows.
//!
//! [`DecisionTree`] takes every decision of one plan (as one batched read
//! gives them) and answers tree questions (roots, children in sequence order,
//! depth, path to root, descendants, subtree) from flat arrays indexed by a
//! decision's position, and history questions (correction chains,
//! supersession, the effective set) from two id maps. Nothing here touches
//! storage, so every backend shares it.

use super::ids::{DecisionId, IdMap, PlanId};
use super::model::Decision;

/// No parent in the plan (a root, or an orphan whose parent is elsewhere).
const NONE: usize = usize::MAX;

/// The decisions of one plan as a tree, with their corrections and supersessions.
#[derive(Debug, Clone)]
pub struct DecisionTree {
    plan_id: Option<PlanId>,
    /// Sorted by sequence; a decision's position here indexes every array below.
    decisions: Vec<Decision>,
    index: IdMap<DecisionId, usize>,
    /// The position of each decision's parent, [`NONE`] when the plan holds none.
    parent: Vec<usize>,
    /// Children of position `p`: `children[first_child[p]..first_child[p + 1]]`,
    /// in sequence order (one array for the whole tree, not one per node).
    first_child: Vec<usize>,
    children: Vec<usize>,
    /// Positions without a parent in the plan, in sequence order.
    roots: Vec<usize>,
    /// corrected id -> the decisions correcting it, in sequence order.
    corrected_by: IdMap<DecisionId, Vec<DecisionId>>,
    /// Depth of each node from its root; `None` where no root reaches it.
    depth: Vec<Option<usize>>,
}

impl DecisionTree {
    /// Builds the tree from the decisions of one plan (in any order).
    /// A decision whose parent is not among them counts as a root; see
    /// [`DecisionTree::orphans`]. Ids are expected to be unique (a store
    /// holds each once); given twice, lookups by id find the later one.
    pub fn from_decisions(mut decisions: Vec<Decision>) -> Self {
        decisions.sort_by_key(|d| (d.sequence(), d.decision_id()));
        let n = decisions.len();
        let mut index = IdMap::with_capacity_and_hasher(n, Default::default());
        for (i, d) in decisions.iter().enumerate() {
            index.insert(d.decision_id(), i);
        }
        let parent: Vec<usize> = decisions
            .iter()
            .map(|d| d.parent_decision_id().and_then(|p| index.get(&p).copied()).unwrap_or(NONE))
            .collect();
        // Children grouped by parent with a counting sort, which keeps the
        // sequence order of `decisions` within each group.
        let mut first_child = vec![0usize; n + 1];
        for &p in parent.iter().filter(|&&p| p != NONE) {
            first_child[p + 1] += 1;
        }
        for k in 1..=n {
            first_child[k] += first_child[k - 1];
        }
        let mut children = vec![0usize; first_child[n]];
        let mut next = first_child.clone();
        let mut roots = Vec::new();
        for (i, &p) in parent.iter().enumerate() {
            if p == NONE {
                roots.push(i);
            } else {
                children[next[p]] = i;
                next[p] += 1;
            }
        }
        let mut corrected_by: IdMap<DecisionId, Vec<DecisionId>> = IdMap::default();
        for d in &decisions {
            if let Some(c) = d.corrects_decision_id() {
                corrected_by.entry(c).or_default().push(d.decision_id());
            }
        }
        let plan_id = decisions.first().map(|d| d.plan_id());
        let mut tree = DecisionTree {
            plan_id,
            decisions,
            index,
            parent,
            first_child,
            children,
            roots,
            corrected_by,
            depth: vec![None; n],
        };
        // Breadth first from the roots: a node's depth is its parent's plus one.
        for i in tree.breadth_first(&tree.roots) {
            let p = tree.parent[i];
            tree.depth[i] = Some(if p == NONE { 0 } else { tree.depth[p].map_or(0, |d| d + 1) });
        }
        tree
    }

    /// Direct children of the decision at position `i`, in sequence order.
    fn kids(&self, i: usize) -> &[usize] {
        &self.children[self.first_child[i]..self.first_child[i + 1]]
    }

    /// Positions reachable from `start`, breadth first, each once (a
    /// parent cycle, which no store lets in, cannot make it loop).
    fn breadth_first(&self, start: &[usize]) -> Vec<usize> {
        let mut seen = vec![false; self.decisions.len()];
        let mut order = Vec::with_capacity(start.len());
        for &s in start {
            if !std::mem::replace(&mut seen[s], true) {
                order.push(s);
            }
        }
        let mut at = 0;
        while let Some(&i) = order.get(at) {
            at += 1;
            for &c in self.kids(i) {
                if !std::mem::replace(&mut seen[c], true) {
                    order.push(c);
                }
            }
        }
        order
    }

    /// The plan, or `None` for an empty tree.
    pub fn plan_id(&self) -> Option<PlanId> {
        self.plan_id
    }

    /// Every decision, in sequence order.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    pub fn len(&self) -> usize {
        self.decisions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }

    /// One decision by id.
    pub fn get(&self, id: DecisionId) -> Option<&Decision> {
        self.index.get(&id).map(|&i| &self.decisions[i])
    }

    /// Decisions without a parent in the plan, in sequence order.
    pub fn roots(&self) -> Vec<&Decision> {
        self.roots.iter().map(|&i| &self.decisions[i]).collect()
    }

    /// Decisions that name a parent which is not in the plan.
    pub fn orphans(&self) -> Vec<&Decision> {
        self.decisions.iter().filter(|d| d.parent_decision_id().is_some_and(|p| !self.index.contains_key(&p))).collect()
    }

    /// The parent in the plan.
    pub fn parent(&self, id: DecisionId) -> Option<&Decision> {
        let p = self.parent[*self.index.get(&id)?];
        (p != NONE).then(|| &self.decisions[p])
    }

    /// Direct children, in sequence order.
    pub fn children(&self, id: DecisionId) -> Vec<&Decision> {
        match self.index.get(&id) {
            Some(&i) => self.kids(i).iter().map(|&c| &self.decisions[c]).collect(),
            None => Vec::new(),
        }
    }

    /// Distance from the root (a root has depth 0).
    pub fn depth(&self, id: DecisionId) -> Option<usize> {
        self.index.get(&id).and_then(|&i| self.depth[i])
    }

    /// The largest depth in the tree.
    pub fn max_depth(&self) -> usize {
        self.depth.iter().flatten().copied().max().unwrap_or(0)
    }

    /// From the decision up to its root, the decision first.
    pub fn path_to_root(&self, id: DecisionId) -> Vec<&Decision> {
        let mut path = Vec::new();
        let mut cur = self.get(id);
        while let Some(d) = cur {
            if path.len() > self.decisions.len() {
                break; // a parent cycle; cannot come from a store
            }
            path.push(d);
            cur = self.parent(d.decision_id());
        }
        path
    }

    /// Every decision below this one, breadth first.
    pub fn descendants(&self, id: DecisionId) -> Vec<&Decision> {
        let mut out = self.subtree(id);
        if !out.is_empty() {
            out.remove(0);
        }
        out
    }

    /// The decision and everything below it, breadth first.
    pub fn subtree(&self, id: DecisionId) -> Vec<&Decision> {
        let Some(&start) = self.index.get(&id) else { return Vec::new() };
        self.breadth_first(&[start]).into_iter().map(|i| &self.decisions[i]).collect()
    }

    /// The decisions that correct `id`, in sequence order.
    pub fn corrected_by(&self, id: DecisionId) -> &[DecisionId] {
        self.corrected_by.get(&id).map_or(&[], Vec::as_slice)
    }

    /// The correction chain through `id`: the original decision first, then
    /// each correction after the one it corrects (following the latest
    /// correction where there are several).
    pub fn correction_chain(&self, id: DecisionId) -> Vec<&Decision> {
        let Some(start) = self.get(id) else { return Vec::new() };
        let mut back = vec![start];
        while let Some(prev) = back.last().and_then(|d| d.corrects_decision_id()).and_then(|c| self.get(c)) {
            if back.len() > self.decisions.len() {
                break;
            }
            back.push(prev);
        }
        back.reverse();
        let mut cur = id;
        while let Some(&next) = self.corrected_by(cur).last() {
            if back.len() > self.decisions.len() {
                break;
            }
            back.extend(self.get(next));
            cur = next;
        }
        back
    }

    /// The supersession path from `id`: each decision that replaced the one before, oldest first (without `id`).
    pub fn supersession_path(&self, id: DecisionId) -> Vec<&Decision> {
        let mut out: Vec<&Decision> = Vec::new();
        let mut cur = self.get(id).and_then(|d| d.superseded_by());
        while let Some(next) = cur.and_then(|n| self.get(n)) {
            if out.len() > self.decisions.len() {
                break;
            }
            out.push(next);
            cur = next.superseded_by();
        }
        out
    }

    /// True when nothing corrects the decision and it is not superseded.
    pub fn is_effective(&self, id: DecisionId) -> bool {
        self.index.get(&id).is_some_and(|&i| self.is_effective_at(i))
    }

    /// [`DecisionTree::depth`] of the decision at `index` in [`DecisionTree::decisions`].
    ///
    /// # Panics
    /// When `index` is out of bounds.
    pub fn depth_at(&self, index: usize) -> Option<usize> {
        self.depth[index]
    }

    /// [`DecisionTree::corrected_by`] of the decision at `index` in [`DecisionTree::decisions`].
    ///
    /// # Panics
    /// When `index` is out of bounds.
    pub fn corrected_by_at(&self, index: usize) -> &[DecisionId] {
        self.corrected_by(self.decisions[index].decision_id())
    }

    /// [`DecisionTree::is_effective`] of the decision at `index` in [`DecisionTree::decisions`].
    ///
    /// # Panics
    /// When `index` is out of bounds.
    pub fn is_effective_at(&self, index: usize) -> bool {
        !self.decisions[index].is_superseded() && self.corrected_by_at(index).is_empty()
    }

    /// The effective decisions, in sequence order.
    pub fn effective(&self) -> Vec<&Decision> {
        self.decisions.iter().filter(|d| self.is_effective(d.decision_id())).collect()
    }

    /// The decision that stands for `id` now: follow the latest correction and
    /// the supersession link, repeatedly, until neither applies.
    pub fn standing(&self, id: DecisionId) -> Option<&Decision> {
        let mut cur = self.get(id)?;
        for _ in 0..=self.decisions.len() {
            match self.replaced_by(cur) {
                Some(n) => cur = n,
                None => return Some(cur),
            }
        }
        None // a loop, which a store never lets in
    }

    /// One step towards what stands: the latest correction of `d`, else what supersedes it.
    fn replaced_by(&self, d: &Decision) -> Option<&Decision> {
        let next = self.corrected_by(d.decision_id()).last().copied().or(d.superseded_by());
        next.and_then(|n| self.get(n))
    }

    /// The decision that stands for each decision, in [`DecisionTree::decisions`]
    /// order (`None` where the history loops), in linear time however long
    /// the chains are.
    pub fn standing_all(&self) -> Vec<Option<&Decision>> {
        // Each decision has at most one next step; resolve every path once.
        const UNKNOWN: usize = usize::MAX;
        const LOOPS: usize = usize::MAX - 1;
        let n = self.decisions.len();
        let next = |i: usize| self.replaced_by(&self.decisions[i]).map(|d| self.index[&d.decision_id()]);
        let mut result = vec![UNKNOWN; n];
        let mut on_path = vec![false; n];
        let mut path = Vec::new();
        for start in 0..n {
            let mut cur = start;
            let found = loop {
                if result[cur] != UNKNOWN {
                    break result[cur];
                }
                if on_path[cur] {
                    break LOOPS;
                }
                on_path[cur] = true;
                path.push(cur);
                match next(cur) {
                    Some(x) => cur = x,
                    None => break cur,
                }
            };
            for i in path.drain(..) {
                on_path[i] = false;
                result[i] = found;
            }
        }
        result.into_iter().map(|r| (r != LOOPS).then(|| &self.decisions[r])).collect()
    }

    /// The tree for display: every decision reachable from a root, depth
    /// first, children in sequence order. With `effective_only`, decisions
    /// that no longer stand (corrected or superseded) are left out and their
    /// children move up to the nearest ancestor shown. Built without
    /// recursion, so a plan a million levels deep is fine.
    pub fn view(&self, effective_only: bool) -> TreeView<'_> {
        let n = self.decisions.len();
        let shown = |i: usize| !effective_only || self.is_effective(self.decisions[i].decision_id());
        // The nearest shown ancestor of each decision (`n`: the top level),
        // breadth first from the roots so that a parent comes first.
        let mut anchor = vec![n; n];
        if effective_only {
            for i in self.breadth_first(&self.roots) {
                let p = self.parent[i];
                if p != NONE {
                    anchor[i] = if shown(p) { p } else { anchor[p] };
                }
            }
        } else {
            for (a, &p) in anchor.iter_mut().zip(&self.parent) {
                if p != NONE {
                    *a = p;
                }
            }
        }
        // Children lists in sequence order, as one array sliced by the shown
        // parent (a counting sort keeps the sequence order of `decisions`).
        let listed: Vec<usize> = (0..n).filter(|&i| self.depth[i].is_some() && shown(i)).collect(); // reached from a root
        let mut start = vec![0usize; n + 2];
        for &i in &listed {
            start[anchor[i] + 1] += 1;
        }
        for k in 1..start.len() {
            start[k] += start[k - 1];
        }
        let mut kids_of = vec![0usize; listed.len()];
        let mut next = start.clone();
        for &i in &listed {
            kids_of[next[anchor[i]]] = i;
            next[anchor[i]] += 1;
        }
        let kids = |a: usize| &kids_of[start[a]..start[a + 1]];
        let mut nodes = Vec::with_capacity(listed.len());
        // (decision, parent position in `nodes`, level, last among siblings), pushed in reverse.
        let top = kids(n);
        let mut stack: Vec<(usize, Option<usize>, usize, bool)> =
            top.iter().enumerate().rev().map(|(k, &i)| (i, None, 0, k + 1 == top.len())).collect();
        while let Some((i, parent, level, last)) = stack.pop() {
            let at = nodes.len();
            let children = kids(i);
            nodes.push(ViewNode {
                decision: &self.decisions[i],
                index: i,
                parent,
                level,
                last,
                children: children.len(),
            });
            let count = children.len();
            stack.extend(children.iter().enumerate().rev().map(|(k, &c)| (c, Some(at), level + 1, k + 1 == count)));
        }
        TreeView { nodes }
    }

    /// What depends on a decision: everything below it, and the downstream
    /// decisions, plans and artifacts that it and its descendants name.
    pub fn impact(&self, id: DecisionId) -> Impact<'_> {
        let subtree = self.subtree(id);
        let mut impact = Impact {
            descendants: subtree.iter().skip(1).copied().collect(),
            downstream_decisions: Vec::new(),
            downstream_plans: Vec::new(),
            artifacts: Vec::new(),
        };
        let (mut seen_d, mut seen_p, mut seen_a) =
            (std::collections::HashSet::new(), std::collections::HashSet::new(), std::collections::HashSet::new());
        for d in &subtree {
            impact.downstream_decisions.extend(d.downstream_decision_ids().iter().filter(|x| seen_d.insert(**x)));
            impact.downstream_plans.extend(d.downstream_plan_ids().iter().filter(|x| seen_p.insert(**x)));
            for a in d.artifacts_produced() {
                if seen_a.insert(a.artifact_path()) {
                    impact.artifacts.push(a.artifact_path());
                }
            }
        }
        impact
    }
}

/// A plan's tree laid out for display by [`DecisionTree::view`].
#[derive(Debug, Clone)]
pub struct TreeView<'a> {
    /// Depth-first pre-order: a decision, then its subtree, then its next sibling.
    pub nodes: Vec<ViewNode<'a>>,
}

/// One decision of a [`TreeView`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ViewNode<'a> {
    pub decision: &'a Decision,
    /// Its position in [`DecisionTree::decisions`] of the tree that made the
    /// view, for the `*_at` lookups, which find the decision without its id
    /// (given to another tree, they answer for another decision or panic).
    pub index: usize,
    /// Position of the parent shown in [`TreeView::nodes`]; `None` at the top level.
    pub parent: Option<usize>,
    /// 0 at the top level.
    pub level: usize,
    /// The last of its siblings.
    pub last: bool,
    /// How many children it has in the view.
    pub children: usize,
}

/// What [`DecisionTree::impact`] finds: what to recheck when a decision changes.
#[derive(Debug, Clone)]
pub struct Impact<'a> {
    /// Every decision below it, breadth first.
    pub descendants: Vec<&'a Decision>,
    /// Downstream decisions named by it or its descendants, first mention first.
    pub downstream_decisions: Vec<DecisionId>,
    pub downstream_plans: Vec<PlanId>,
    pub artifacts: Vec<&'a str>,
}
