//! Depth/breadth projection: context materialised from the UKO graph.
//!
//! A [`ProjectionSpec`] names focus nodes, a breadth (BFS hops) and a full
//! depth (a number or a named level of the domain's [`DetailLevelMap`]).
//! [`DepthBreadthProjector`] walks the graph breadth-first from all focus
//! nodes at once; every node keeps its smallest distance and gets a detail
//! depth that falls linearly with distance (the depth gradient), and
//! [`ContextFragment`]s carry the node's view at that depth.
//!
//! ## Determinism
//!
//! Output is ordered by (distance, uri); a gradient depth is
//! `round(D × (1 − d / b))` with ties to even, in exact integer arithmetic.
//!
//! ## Performance
//!
//! The projector asks its [`GraphSource`] once per hop for the whole
//! frontier and keeps the visited set in memory; only reached nodes are read.
//! With `max_fan_out` set, a hub contributes at most that many new
//! neighbours per hop and the cut is reported.

mod levels;
pub mod relevance;
mod tokens;

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

pub use levels::{DetailLevelMap, DetailLevelRegistry};
pub use relevance::{Fusion, Signals};
pub use tokens::{CharEstimate, Cl100k, TokenCounter};

use crate::decision::IdMap;
use crate::error::{Error, Result};
use crate::uko::{Direction, GraphSource, NodeKey};

/// The full detail depth of a projection: a number or a named level.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Depth {
    Level(u32),
    Named(String),
}

impl Depth {
    /// A numeric depth; negative numbers are refused.
    ///
    /// # Errors
    /// [`Error::Validation`] on `depth` saying it must be non-negative.
    pub fn level(n: i64) -> Result<Depth> {
        u32::try_from(n)
            .map(Depth::Level)
            .map_err(|_| Error::validation("depth", format!("must be a non-negative integer, got {n}")))
    }

    /// A named level such as `FULL_SOURCE`.
    pub fn named(name: impl Into<String>) -> Depth {
        Depth::Named(name.into())
    }
}

impl std::str::FromStr for Depth {
    type Err = Error;
    /// Digits (optionally signed) are a level, anything else a name.
    fn from_str(s: &str) -> Result<Depth> {
        match s.parse::<i64>() {
            Ok(n) => Depth::level(n),
            Err(_) if s.is_empty() => Err(Error::validation("depth", "must not be empty")),
            Err(_) => Ok(Depth::named(s)),
        }
    }
}

impl fmt::Display for Depth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Depth::Level(n) => write!(f, "{n}"),
            Depth::Named(s) => f.write_str(s),
        }
    }
}

impl Serialize for Depth {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Depth::Level(n) => s.serialize_u32(*n),
            Depth::Named(name) => s.serialize_str(name),
        }
    }
}

/// What to project. Immutable: `with_*` methods return a new spec.
///
/// ```compile_fail
/// let mut spec = decision_store::projection::ProjectionSpec::new(["class://A"], 2, 9).unwrap();
/// spec.breadth = 3; // fields are private
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProjectionSpec {
    focus: Vec<String>,
    breadth: u32,
    depth: Depth,
    depth_gradient: bool,
    domain: String,
    direction: Direction,
    relations: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_fan_out: Option<usize>,
    ranking: Ranking,
}

/// How a projection chooses and orders what it shows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    /// Breadth-first from the focus: nearer nodes first, each at the depth
    /// the gradient gives it ([`ProjectionSpec::new`]'s).
    Distance,
    /// The files most relevant to the focus's files, by the graph, the git
    /// history, their words and their directories fused, each shown by its
    /// definitions' signatures ([`relevance`]; the default of
    /// [`ProjectionSpec::for_focus`]). `breadth` bounds the graph signal's
    /// file hops (at most 2); a focus that comes from no file falls back to
    /// the distance ranking, at three node hops for each file hop.
    Relevance(Signals),
}

impl Ranking {
    /// The names [`Ranking`]'s `FromStr` takes, the default first.
    pub const NAMES: [&'static str; 2] = ["relevance", "distance"];

    /// Its name: `relevance` or `distance`.
    pub fn name(&self) -> &'static str {
        match self {
            Ranking::Relevance(_) => "relevance",
            Ranking::Distance => "distance",
        }
    }

    /// The breadth a projection of this ranking walks when its caller names
    /// none: two file hops for the relevance ranking's graph signal
    /// ([`DEFAULT_BREADTH`]); six node hops for the distance ranking, where
    /// with the default depth a file focus gets its source, its classes and
    /// methods their signatures, and what they use their names
    /// ([`DEFAULT_DISTANCE_BREADTH`]).
    pub fn default_breadth(&self) -> u32 {
        match self {
            Ranking::Relevance(_) => DEFAULT_BREADTH,
            Ranking::Distance => DEFAULT_DISTANCE_BREADTH,
        }
    }
}

impl std::str::FromStr for Ranking {
    type Err = Error;
    /// `relevance` (with [`Signals::DEFAULT`]) or `distance`.
    fn from_str(s: &str) -> Result<Ranking> {
        match s {
            "relevance" => Ok(DEFAULT_RANKING),
            "distance" => Ok(Ranking::Distance),
            _ => Err(Error::validation("ranking", format!("{s:?} is not one of {}", Ranking::NAMES.join(", ")))),
        }
    }
}

/// The breadth that a projection walks when its caller names none (`dstore
/// project`, the MCP tool `get_context`, [`ProjectionSpec::for_focus`]):
/// the relevance ranking's graph signal follows links two files deep.
pub const DEFAULT_BREADTH: u32 = 2;
/// The breadth of the distance ranking when its caller names none (see
/// [`Ranking::default_breadth`]).
pub const DEFAULT_DISTANCE_BREADTH: u32 = 6;
/// The token budget of a context when its caller names none (`get_context`,
/// `child_context`, the web view's context page, Python's `child_context`).
pub const DEFAULT_BUDGET: usize = 4000;
/// The full detail depth when the caller names none.
pub const DEFAULT_DEPTH: &str = "FULL_SOURCE";
/// The direction when the caller names none: links both ways (the files
/// the focus uses and those that use it).
pub const DEFAULT_DIRECTION: Direction = Direction::Both;
/// The ranking when the caller names none.
pub const DEFAULT_RANKING: Ranking = Ranking::Relevance(Signals::DEFAULT);

impl ProjectionSpec {
    /// A spec of `focus` with the defaults that the context benchmark found
    /// best (`docs/ingest.md`): [`DEFAULT_BREADTH`], [`DEFAULT_DEPTH`],
    /// [`DEFAULT_DIRECTION`], [`DEFAULT_RANKING`], and those of
    /// [`ProjectionSpec::new`] for the rest.
    ///
    /// # Errors
    /// As [`ProjectionSpec::new`].
    pub fn for_focus<S: Into<String>>(focus: impl IntoIterator<Item = S>) -> Result<Self> {
        ProjectionSpec::ranked(focus, DEFAULT_RANKING)
    }

    /// [`ProjectionSpec::for_focus`] with `ranking`, at its
    /// [default breadth](Ranking::default_breadth).
    ///
    /// # Errors
    /// As [`ProjectionSpec::new`].
    pub fn ranked<S: Into<String>>(focus: impl IntoIterator<Item = S>, ranking: Ranking) -> Result<Self> {
        Ok(ProjectionSpec::new(focus, ranking.default_breadth(), Depth::named(DEFAULT_DEPTH))?
            .with_direction(DEFAULT_DIRECTION)
            .with_ranking(ranking))
    }

    /// A spec with the defaults of a breadth-first walk: gradient on, domain
    /// `uko-code:`, outgoing edges of every relation, no fan-out cap, the
    /// distance ranking.
    ///
    /// # Errors
    /// [`Error::Validation`] for an empty focus list or an empty URI.
    ///
    /// # Example
    /// ```
    /// use decision_store::projection::{Depth, ProjectionSpec};
    /// let spec = ProjectionSpec::new(["class://AuthManager"], 2, Depth::named("SIGNATURES"))?;
    /// assert!(spec.depth_gradient());
    /// assert_eq!(spec.domain(), "uko-code:");
    /// # Ok::<(), decision_store::Error>(())
    /// ```
    pub fn new<S: Into<String>>(
        focus: impl IntoIterator<Item = S>,
        breadth: u32,
        depth: impl Into<Depth>,
    ) -> Result<Self> {
        let focus: Vec<String> = focus.into_iter().map(Into::into).collect();
        if focus.is_empty() {
            return Err(Error::validation("focus", "must name at least one node"));
        }
        if focus.iter().any(String::is_empty) {
            return Err(Error::validation("focus", "a focus URI must not be empty"));
        }
        Ok(ProjectionSpec {
            focus,
            breadth,
            depth: depth.into(),
            depth_gradient: true,
            domain: "uko-code:".into(),
            direction: Direction::Outgoing,
            relations: None,
            max_fan_out: None,
            ranking: Ranking::Distance,
        })
    }

    pub fn with_depth_gradient(&self, on: bool) -> Self {
        ProjectionSpec { depth_gradient: on, ..self.clone() }
    }
    pub fn with_domain(&self, domain: impl Into<String>) -> Self {
        ProjectionSpec { domain: domain.into(), ..self.clone() }
    }
    pub fn with_direction(&self, direction: Direction) -> Self {
        ProjectionSpec { direction, ..self.clone() }
    }
    pub fn with_breadth(&self, breadth: u32) -> Self {
        ProjectionSpec { breadth, ..self.clone() }
    }
    /// Follows only edges of these relations.
    pub fn with_relations<S: Into<String>>(&self, relations: impl IntoIterator<Item = S>) -> Self {
        ProjectionSpec { relations: Some(relations.into_iter().map(Into::into).collect()), ..self.clone() }
    }
    /// Hub guard: at most `cap` new neighbours per node and hop (None: plain BFS).
    pub fn with_max_fan_out(&self, cap: Option<usize>) -> Self {
        ProjectionSpec { max_fan_out: cap, ..self.clone() }
    }
    pub fn with_depth(&self, depth: impl Into<Depth>) -> Self {
        ProjectionSpec { depth: depth.into(), ..self.clone() }
    }
    pub fn with_ranking(&self, ranking: Ranking) -> Self {
        ProjectionSpec { ranking, ..self.clone() }
    }
    /// The same spec of other focus nodes.
    ///
    /// # Errors
    /// As [`ProjectionSpec::new`] for an empty list or URI.
    pub fn with_focus<S: Into<String>>(&self, focus: impl IntoIterator<Item = S>) -> Result<Self> {
        Ok(ProjectionSpec { focus: ProjectionSpec::new(focus, 0, 0)?.focus, ..self.clone() })
    }

    pub fn focus(&self) -> &[String] {
        &self.focus
    }
    pub fn breadth(&self) -> u32 {
        self.breadth
    }
    pub fn depth(&self) -> &Depth {
        &self.depth
    }
    pub fn depth_gradient(&self) -> bool {
        self.depth_gradient
    }
    pub fn domain(&self) -> &str {
        &self.domain
    }
    pub fn direction(&self) -> Direction {
        self.direction
    }
    pub fn relations(&self) -> Option<&[String]> {
        self.relations.as_deref()
    }
    pub fn max_fan_out(&self) -> Option<usize> {
        self.max_fan_out
    }
    pub fn ranking(&self) -> Ranking {
        self.ranking
    }
}

impl From<u32> for Depth {
    fn from(n: u32) -> Depth {
        Depth::Level(n)
    }
}

/// One node reached by a projection. Immutable.
///
/// ```compile_fail
/// let mut node = decision_store::projection::ProjectedNode::new("class://Foo", 1, 4);
/// node.distance = 0; // fields are private
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ProjectedNode {
    uri: String,
    distance: u32,
    resolved_depth: u32,
}

impl ProjectedNode {
    pub fn new(uri: impl Into<String>, distance: u32, resolved_depth: u32) -> Self {
        ProjectedNode { uri: uri.into(), distance, resolved_depth }
    }
    pub fn uri(&self) -> &str {
        &self.uri
    }
    pub fn distance(&self) -> u32 {
        self.distance
    }
    pub fn resolved_depth(&self) -> u32 {
        self.resolved_depth
    }
}

/// The depth a node at `distance` gets: `round(full × (1 − distance / breadth))`,
/// ties to even; `full` everywhere without the gradient or with breadth 0.
pub fn gradient_depth(full: u32, distance: u32, breadth: u32, gradient: bool) -> u32 {
    if !gradient || breadth == 0 {
        return full;
    }
    let remaining = u64::from(breadth.saturating_sub(distance));
    let num = u64::from(full) * remaining;
    let den = u64::from(breadth);
    let (q, r) = (num / den, num % den);
    let q = match (2 * r).cmp(&den) {
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q & 1),
        std::cmp::Ordering::Less => q,
    };
    q as u32
}

/// The result of a projection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Projection {
    pub spec: ProjectionSpec,
    /// The resolved full depth.
    pub full_depth: u32,
    /// In (distance, uri) order.
    pub nodes: Vec<ProjectedNode>,
    /// Nodes whose neighbours the fan-out cap cut, with how many were left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<(String, usize)>,
}

/// A piece of context: one node's view at its resolved depth.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContextFragment {
    uko_node: String,
    content: String,
    tokens: usize,
    detail_depth: u32,
    domain: String,
    resource_uri: String,
    score: f64,
    metadata: Map<String, Value>,
}

impl ContextFragment {
    /// A fragment whose resource is its node, score 1 and no metadata.
    pub fn new(uko_node: impl Into<String>, content: impl Into<String>, tokens: usize, detail_depth: u32) -> Self {
        let uko_node = uko_node.into();
        ContextFragment {
            resource_uri: uko_node.clone(),
            uko_node,
            content: content.into(),
            tokens,
            detail_depth,
            domain: String::new(),
            score: 1.0,
            metadata: Map::new(),
        }
    }
    pub fn with_domain(self, domain: impl Into<String>) -> Self {
        ContextFragment { domain: domain.into(), ..self }
    }
    pub fn with_resource_uri(self, uri: impl Into<String>) -> Self {
        ContextFragment { resource_uri: uri.into(), ..self }
    }
    pub fn with_score(self, score: f64) -> Self {
        ContextFragment { score, ..self }
    }
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }
    pub fn with_content(self, content: impl Into<String>, tokens: usize, detail_depth: u32) -> Self {
        ContextFragment { content: content.into(), tokens, detail_depth, ..self }
    }

    pub fn uko_node(&self) -> &str {
        &self.uko_node
    }
    pub fn content(&self) -> &str {
        &self.content
    }
    pub fn tokens(&self) -> usize {
        self.tokens
    }
    pub fn detail_depth(&self) -> u32 {
        self.detail_depth
    }
    pub fn domain(&self) -> &str {
        &self.domain
    }
    pub fn resource_uri(&self) -> &str {
        &self.resource_uri
    }
    pub fn score(&self) -> f64 {
        self.score
    }
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }
}

/// Fragments of a projection, and what a token budget left out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FragmentSet {
    pub fragments: Vec<ContextFragment>,
    /// URIs of fragments the budget dropped, in (distance, uri) order.
    pub dropped: Vec<String>,
    /// URIs of fragments a budget left out because a kept fragment already
    /// holds them whole: their resource's own node at its fullest view (a
    /// file in full covers its functions), in (distance, uri) order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub covered: Vec<String>,
    pub total_tokens: usize,
}

/// Projects specs over a graph, resolving named depths with a registry.
#[derive(Clone, Debug, Default)]
pub struct DepthBreadthProjector {
    registry: DetailLevelRegistry,
}

impl DepthBreadthProjector {
    /// A projector with the three preset detail level maps.
    pub fn new() -> Self {
        Self::default()
    }

    /// A projector with the caller's registry.
    pub fn with_registry(registry: DetailLevelRegistry) -> Self {
        DepthBreadthProjector { registry }
    }

    pub fn registry(&self) -> &DetailLevelRegistry {
        &self.registry
    }

    /// The full depth of a spec.
    ///
    /// # Errors
    /// [`Error::Validation`] when a named depth has no map or level.
    pub fn resolve_depth(&self, spec: &ProjectionSpec) -> Result<u32> {
        match spec.depth() {
            Depth::Level(n) => Ok(*n),
            Depth::Named(name) => self.registry.resolve(spec.domain(), name),
        }
    }

    /// Multi-source BFS from every focus node, up to `breadth` hops.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] for a focus not in the graph, the errors of
    /// [`DepthBreadthProjector::resolve_depth`], and the source's errors.
    pub fn project(&self, graph: &impl GraphSource, spec: &ProjectionSpec) -> Result<Projection> {
        if let Ranking::Relevance(signals) = spec.ranking() {
            let full = self.resolve_depth(spec)?;
            if let Some((projection, _)) = relevance::project(graph, spec, full, &signals, &CharEstimate, None)? {
                return Ok(projection);
            }
            let Walk { projection, .. } = self.walk(graph, &fallback(spec), false)?;
            return Ok(Projection { spec: spec.clone(), ..projection });
        }
        let Walk { projection, .. } = self.walk(graph, spec, false)?;
        Ok(projection)
    }

    /// The BFS; with `keep_met`, also the edges it met between reached nodes
    /// (for the fragments' scores; a plain projection needs none).
    fn walk(&self, graph: &impl GraphSource, spec: &ProjectionSpec, keep_met: bool) -> Result<Walk> {
        let full = self.resolve_depth(spec)?;
        let focus = graph.resolve(spec.focus())?;
        let mut distance: IdMap<NodeKey, u32> = IdMap::default();
        let mut order: Vec<NodeKey> = Vec::new();
        let mut frontier: Vec<NodeKey> = Vec::new();
        for k in focus {
            if distance.insert(k, 0).is_none() {
                order.push(k);
                frontier.push(k);
            }
        }
        let mut cut: IdMap<NodeKey, usize> = IdMap::default();
        let mut met: Vec<(NodeKey, NodeKey)> = Vec::new();
        for hop in 1..=spec.breadth() {
            if frontier.is_empty() {
                break;
            }
            frontier.sort_unstable();
            let pairs = graph.expand(&frontier, spec.direction(), spec.relations())?;
            if keep_met {
                met.extend_from_slice(&pairs);
            }
            let mut next = Vec::new();
            let mut taken_from: (NodeKey, usize) = (NodeKey::MIN, 0);
            for (from, to) in pairs {
                if distance.contains_key(&to) {
                    continue;
                }
                if let Some(cap) = spec.max_fan_out() {
                    if taken_from.0 != from {
                        taken_from = (from, 0);
                    }
                    if taken_from.1 >= cap {
                        *cut.entry(from).or_default() += 1;
                        continue;
                    }
                    taken_from.1 += 1;
                }
                distance.insert(to, hop);
                order.push(to);
                next.push(to);
            }
            frontier = next;
        }
        // URIs come back in the order asked for, and move into the nodes.
        let uris = graph.uris(&order)?;
        let mut cut: Vec<(String, usize)> = if cut.is_empty() {
            Vec::new()
        } else {
            let uri_of: HashMap<NodeKey, &str> = order.iter().copied().zip(uris.iter().map(String::as_str)).collect();
            cut.into_iter().map(|(k, n)| (uri_of[&k].to_owned(), n)).collect()
        };
        cut.sort();
        let mut nodes: Vec<(ProjectedNode, NodeKey)> = uris
            .into_iter()
            .zip(&order)
            .map(|(uri, &key)| {
                let d = distance[&key];
                (ProjectedNode::new(uri, d, gradient_depth(full, d, spec.breadth(), spec.depth_gradient())), key)
            })
            .collect();
        nodes.sort_unstable_by(|a, b| (a.0.distance, &a.0.uri).cmp(&(b.0.distance, &b.0.uri)));
        let keys = nodes.iter().map(|n| n.1).collect();
        let projection =
            Projection { spec: spec.clone(), full_depth: full, nodes: nodes.into_iter().map(|n| n.0).collect(), cut };
        met.retain(|(a, b)| distance.contains_key(a) && distance.contains_key(b));
        Ok(Walk { projection, keys, met })
    }

    /// Projects and materialises fragments: each node's view with the largest
    /// depth not above its resolved depth, counted with `counter`. Each
    /// fragment's score is its node's personalized PageRank from the focus
    /// over the edges the walk met (1 for the most central). With a budget,
    /// fragments are kept while they fit, visited nearest first and within a
    /// distance by score, but one fragment of each resource (the file a
    /// node comes from) before a second of any; the rest are reported as
    /// dropped, and fragments whose file is kept whole as covered. Without
    /// `resource_uri`s every node is its own resource: nearest first.
    ///
    /// # Errors
    /// As [`DepthBreadthProjector::project`].
    pub fn project_fragments(
        &self,
        graph: &impl GraphSource,
        spec: &ProjectionSpec,
        counter: &dyn TokenCounter,
        budget: Option<usize>,
    ) -> Result<FragmentSet> {
        self.project_with_fragments(graph, spec, counter, budget).map(|(_, set)| set)
    }

    /// The projection and its fragments from one walk of the graph.
    ///
    /// # Errors
    /// As [`DepthBreadthProjector::project`].
    pub fn project_with_fragments(
        &self,
        graph: &impl GraphSource,
        spec: &ProjectionSpec,
        counter: &dyn TokenCounter,
        budget: Option<usize>,
    ) -> Result<(Projection, FragmentSet)> {
        if let Ranking::Relevance(signals) = spec.ranking() {
            let full = self.resolve_depth(spec)?;
            if let Some(found) = relevance::project(graph, spec, full, &signals, counter, budget)? {
                return Ok(found);
            }
            let (projection, set) = self.project_with_fragments(graph, &fallback(spec), counter, budget)?;
            return Ok((Projection { spec: spec.clone(), ..projection }, set));
        }
        let Walk { projection, keys, met } = self.walk(graph, spec, true)?;
        let rank = personalized_rank(&keys, projection.nodes.iter().take_while(|n| n.distance == 0).count(), &met);
        let records = graph.records(&keys, true)?;
        let mut fragments = Vec::with_capacity(records.len());
        // Whether each fragment shows its node's deepest view.
        let mut whole = Vec::with_capacity(records.len());
        for ((node, rec), score) in projection.nodes.iter().zip(&records).zip(rank) {
            let view = rec.views.iter().filter(|v| v.depth <= node.resolved_depth).max_by_key(|v| v.depth);
            whole.push(view.is_some_and(|v| rec.views.iter().all(|w| w.depth <= v.depth)));
            let content = view.map(|v| v.content.clone()).unwrap_or_default();
            let tokens = counter.count(&content);
            let mut f = ContextFragment::new(rec.uri.clone(), content, tokens, node.resolved_depth)
                .with_domain(rec.domain.clone())
                .with_score(score)
                .with_metadata("projected", Value::Bool(true))
                .with_metadata("distance", Value::from(node.distance));
            if !projection.cut.is_empty() {
                f = f.with_metadata("fan_out_capped", Value::Bool(true));
            }
            if let Some(resource) = &rec.resource_uri {
                f = f.with_resource_uri(resource.clone());
            }
            fragments.push(f);
        }
        if let Some(budget) = budget {
            fit_focus(&mut fragments, &mut whole, &records, counter, budget)?;
        }
        let mut set = FragmentSet { fragments, dropped: Vec::new(), covered: Vec::new(), total_tokens: 0 };
        if let Some(budget) = budget {
            set = apply_budget(set.fragments, &whole, budget);
        }
        set.total_tokens = set.fragments.iter().map(ContextFragment::tokens).sum();
        Ok((projection, set))
    }
}

/// The distance ranking that a relevance spec falls back to when its focus
/// comes from no file: three node hops for each file hop (a definition
/// reaches another file's through its module and that module's).
fn fallback(spec: &ProjectionSpec) -> ProjectionSpec {
    spec.with_ranking(Ranking::Distance).with_breadth(spec.breadth().saturating_mul(3))
}

/// What a BFS found: the projection, its nodes' keys in its order, and
/// every edge met between reached nodes (for ranking).
struct Walk {
    projection: Projection,
    keys: Vec<NodeKey>,
    met: Vec<(NodeKey, NodeKey)>,
}

/// How central each reached node is to the focus: personalized PageRank
/// (damping 0.85, 30 rounds) over the edges met by the walk, taken both
/// ways, restarting at the focus nodes (the first `focus` of `keys`);
/// scaled so that the highest is 1. A budget fills each distance ring in
/// this order: among nodes equally far, those that many paths from the
/// focus run through come first.
fn personalized_rank(keys: &[NodeKey], focus: usize, met: &[(NodeKey, NodeKey)]) -> Vec<f64> {
    let n = keys.len();
    if n == 0 {
        return Vec::new();
    }
    let index: IdMap<NodeKey, usize> = keys.iter().enumerate().map(|(i, &k)| (k, i)).collect();
    let mut pairs: Vec<(usize, usize)> =
        met.iter().map(|(a, b)| (index[a], index[b])).filter(|(a, b)| a != b).collect();
    pairs.extend(pairs.clone().into_iter().map(|(a, b)| (b, a)));
    pairs.sort_unstable();
    pairs.dedup();
    let mut degree = vec![0usize; n];
    for &(a, _) in &pairs {
        degree[a] += 1;
    }
    let focus = focus.clamp(1, n);
    let restart = 1.0 / focus as f64;
    let mut rank: Vec<f64> = (0..n).map(|i| if i < focus { restart } else { 0.0 }).collect();
    for _ in 0..30 {
        let mut next: Vec<f64> = (0..n).map(|i| if i < focus { 0.15 * restart } else { 0.0 }).collect();
        let mut stranded = 0.0;
        for (i, r) in rank.iter().enumerate() {
            if degree[i] == 0 {
                stranded += r;
            }
        }
        for &(a, b) in &pairs {
            next[b] += 0.85 * rank[a] / degree[a] as f64;
        }
        for r in next.iter_mut().take(focus) {
            *r += 0.85 * stranded * restart;
        }
        rank = next;
    }
    let top = rank.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
    rank.into_iter().map(|r| r / top).collect()
}

/// Keeps fragments in their (distance, uri) order while they fit the budget,
/// visiting them by relevance: the first fragment of every resource before
/// the second of any, and at each turn nearest first, then higher score. A
/// fragment whose resource is kept whole (its own node's fragment at its
/// deepest view, `whole`) costs nothing new and is left out as covered.
/// The error of a budget that cannot hold the focus even at its shortest:
/// an answer without the focus would be no answer.
pub(crate) fn budget_too_small(budget: usize, focus: &str, needed: usize) -> Error {
    Error::validation(
        "budget",
        format!(
            "{budget} token{} cannot hold the focus {focus}, which takes {needed} at its shortest; give more",
            if budget == 1 { "" } else { "s" }
        ),
    )
}

/// The focus comes first within a budget: a focus fragment too large for
/// it (together with the focus before it) shows the deepest view of its
/// node that fits instead, down to its name; when not even that fits, the
/// budget is too small ([`budget_too_small`]).
fn fit_focus(
    fragments: &mut [ContextFragment],
    whole: &mut [bool],
    records: &[crate::uko::NodeRecord],
    counter: &dyn TokenCounter,
    budget: usize,
) -> Result<()> {
    let mut used = 0;
    for (i, f) in fragments.iter_mut().enumerate() {
        if f.metadata.get("distance").and_then(Value::as_u64) != Some(0) {
            continue;
        }
        if used + f.tokens > budget {
            let rec = &records[i];
            let mut views: Vec<&crate::uko::NodeView> = rec.views.iter().filter(|v| v.depth < f.detail_depth).collect();
            views.sort_by_key(|v| std::cmp::Reverse(v.depth));
            let fits = views.into_iter().map(|v| (v, counter.count(&v.content))).find(|(_, t)| used + t <= budget);
            let Some((view, tokens)) = fits else {
                let shortest = rec.views.iter().map(|v| counter.count(&v.content)).min().unwrap_or(f.tokens);
                return Err(budget_too_small(budget, &f.uko_node, used + shortest));
            };
            f.content = view.content.clone();
            f.tokens = tokens;
            f.detail_depth = view.depth;
            whole[i] = false;
        }
        used += f.tokens;
    }
    Ok(())
}

fn apply_budget(fragments: Vec<ContextFragment>, whole: &[bool], budget: usize) -> FragmentSet {
    let distance = |f: &ContextFragment| f.metadata.get("distance").and_then(Value::as_u64).unwrap_or(u64::MAX);
    let mut by_relevance: Vec<usize> = (0..fragments.len()).collect();
    by_relevance.sort_by(|&a, &b| {
        let (fa, fb) = (&fragments[a], &fragments[b]);
        distance(fa).cmp(&distance(fb)).then(fb.score.total_cmp(&fa.score)).then(a.cmp(&b))
    });
    // One fragment of each resource before a second of any: a look at
    // every neighbouring file before more of one. A fragment is the `turn`-th
    // of its resource in relevance order; nodes without a resource of their
    // own are their own resource, so for them this is plain nearest first.
    let mut turn = vec![0usize; fragments.len()];
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for &i in &by_relevance {
        // The focus comes first, whatever its resources.
        if distance(&fragments[i]) == 0 {
            continue;
        }
        let n = seen.entry(fragments[i].resource_uri.as_str()).or_default();
        turn[i] = *n;
        *n += 1;
    }
    by_relevance.sort_by(|&a, &b| {
        let (fa, fb) = (&fragments[a], &fragments[b]);
        turn[a].cmp(&turn[b]).then(distance(fa).cmp(&distance(fb))).then(fb.score.total_cmp(&fa.score)).then(a.cmp(&b))
    });
    let mut used = 0;
    let mut keep = HashSet::new();
    let mut covered = HashSet::new();
    let mut shown_whole: HashSet<&str> = HashSet::new();
    for i in by_relevance {
        let f = &fragments[i];
        // Only code knows that a file's text holds its definitions'.
        let code = f.domain == "uko-code:";
        if code && f.resource_uri != f.uko_node && shown_whole.contains(f.resource_uri.as_str()) {
            covered.insert(i);
            continue;
        }
        if used + f.tokens <= budget {
            used += f.tokens;
            keep.insert(i);
            if code && whole[i] && f.resource_uri == f.uko_node {
                shown_whole.insert(f.uko_node.as_str());
            }
        }
    }
    let mut set = FragmentSet { fragments: Vec::new(), dropped: Vec::new(), covered: Vec::new(), total_tokens: used };
    for (i, f) in fragments.into_iter().enumerate() {
        if keep.contains(&i) {
            set.fragments.push(f);
        } else if covered.contains(&i) {
            set.covered.push(f.uko_node);
        } else {
            set.dropped.push(f.uko_node);
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_rounds_half_to_even() {
        assert_eq!(gradient_depth(9, 0, 2, true), 9);
        assert_eq!(gradient_depth(9, 1, 2, true), 4); // 4.5 -> 4
        assert_eq!(gradient_depth(9, 2, 2, true), 0);
        assert_eq!(gradient_depth(3, 1, 2, true), 2); // 1.5 -> 2
        assert_eq!(gradient_depth(9, 1, 3, true), 6);
        assert_eq!(gradient_depth(10, 1, 3, true), 7); // 6.67 -> 7
        assert_eq!(gradient_depth(9, 5, 0, true), 9);
        assert_eq!(gradient_depth(9, 2, 2, false), 9);
    }

    #[test]
    fn depth_parsing() {
        assert_eq!("9".parse::<Depth>().unwrap(), Depth::Level(9));
        assert_eq!("FULL_SOURCE".parse::<Depth>().unwrap(), Depth::named("FULL_SOURCE"));
        assert!("-1".parse::<Depth>().unwrap_err().to_string().contains("non-negative"));
    }
}
