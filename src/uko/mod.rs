//! The UKO graph: nodes (with views at increasing detail) and directed edges.
//!
//! The graph normally lives in the store's tables and is read a BFS frontier
//! at a time ([`crate::Store`] implements [`GraphSource`]). [`UkoGraph`] is
//! the same graph in memory (petgraph), for callers that want the whole of
//! it and as an independent implementation the store is tested against.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A rendering of a node at one detail depth.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeView {
    pub depth: u32,
    pub content: String,
}

/// A node of the graph (interchange shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UkoNode {
    pub uri: String,
    pub domain: String,
    pub kind: String,
    pub label: String,
    /// The version given by `ingest` (a content hash) or by `nodes.jsonl`;
    /// `None` when none was given. [`UkoNode::current_version`] is what
    /// staleness compares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The resource the node comes from, e.g. the file
    /// `project://src/app.py` of a function that `ingest` found there;
    /// projection fragments carry it as their `resource_uri`. `None` when
    /// the node stands for itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_uri: Option<String>,
    #[serde(default)]
    pub views: Vec<NodeView>,
}

impl UkoNode {
    /// A node without views.
    pub fn new(
        uri: impl Into<String>,
        domain: impl Into<String>,
        kind: impl Into<String>,
        label: impl Into<String>,
    ) -> Self {
        UkoNode {
            uri: uri.into(),
            domain: domain.into(),
            kind: kind.into(),
            label: label.into(),
            version: None,
            resource_uri: None,
            views: Vec::new(),
        }
    }

    /// Sets the version.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// The version a decision records for this node: the given one, or else
    /// [`views_version`] of its views.
    pub fn current_version(&self) -> String {
        self.version.clone().unwrap_or_else(|| views_version(&self.views))
    }

    /// Adds a view at `depth`.
    pub fn with_view(mut self, depth: u32, content: impl Into<String>) -> Self {
        self.views.push(NodeView { depth, content: content.into() });
        self
    }

    /// Checks the node's own rules: a non-empty URI, a non-empty version
    /// when one is given, one view per depth.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `uri`, `version` or `views`.
    pub fn validate(&self) -> Result<()> {
        if self.uri.is_empty() {
            return Err(Error::validation("uri", "must not be empty"));
        }
        if self.version.as_deref() == Some("") {
            return Err(Error::validation("version", format!("{}: must not be empty when given", self.uri)));
        }
        let mut depths: Vec<u32> = self.views.iter().map(|v| v.depth).collect();
        depths.sort_unstable();
        if let Some(w) = depths.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::validation("views", format!("{}: two views at depth {}", self.uri, w[0])));
        }
        Ok(())
    }

    /// The view with the largest depth not above `depth`.
    pub fn view_at(&self, depth: u32) -> Option<&NodeView> {
        self.views.iter().filter(|v| v.depth <= depth).max_by_key(|v| v.depth)
    }
}

/// The version of a node that was given none: `sha256:` and the hex SHA-256
/// of its views in depth order, each as its depth (4 bytes, big-endian), its
/// content's length in bytes (8 bytes, big-endian) and the content. Any change
/// of a view changes it; the order the views were given in does not.
pub fn views_version<'a>(views: impl IntoIterator<Item = &'a NodeView>) -> String {
    let mut sorted: Vec<&NodeView> = views.into_iter().collect();
    sorted.sort_by_key(|v| v.depth);
    let mut h = crate::hash::Hasher::default();
    for v in sorted {
        h.update(v.depth.to_be_bytes());
        h.update((v.content.len() as u64).to_be_bytes());
        h.update(v.content.as_bytes());
    }
    crate::hash::version_text(&h.finish())
}

/// A directed edge (interchange shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UkoEdge {
    pub source: String,
    pub target: String,
    pub relation: String,
    #[serde(default)]
    pub weight: Option<f64>,
}

impl UkoEdge {
    pub fn new(source: impl Into<String>, target: impl Into<String>, relation: impl Into<String>) -> Self {
        UkoEdge { source: source.into(), target: target.into(), relation: relation.into(), weight: None }
    }

    /// Checks the edge's own rules: non-empty ends and relation, a finite weight.
    ///
    /// # Errors
    /// [`Error::Validation`] naming the field.
    pub fn validate(&self) -> Result<()> {
        for (field, v) in [("source", &self.source), ("target", &self.target), ("relation", &self.relation)] {
            if v.is_empty() {
                return Err(Error::validation(field, "must not be empty"));
            }
        }
        if self.weight.is_some_and(|w| !w.is_finite()) {
            return Err(Error::validation("weight", "must be a finite number"));
        }
        Ok(())
    }
}

/// Which edges a traversal follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From source to target (the default).
    #[default]
    Outgoing,
    /// From target to source.
    Incoming,
    /// Both ways.
    Both,
}

impl Direction {
    /// The short names [`Direction`]'s `FromStr` takes (it also takes
    /// `outgoing` and `incoming`).
    pub const NAMES: [&'static str; 3] = ["out", "in", "both"];

    /// What a traversal in this direction follows, in words: `outgoing`,
    /// `incoming` or `all` edges.
    pub fn as_words(self) -> &'static str {
        match self {
            Direction::Outgoing => "outgoing",
            Direction::Incoming => "incoming",
            Direction::Both => "all",
        }
    }
}

impl std::str::FromStr for Direction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "out" | "outgoing" => Ok(Direction::Outgoing),
            "in" | "incoming" => Ok(Direction::Incoming),
            "both" => Ok(Direction::Both),
            _ => Err(Error::validation("direction", format!("{s:?} is not one of {}", Direction::NAMES.join(", ")))),
        }
    }
}

/// A node key of a [`GraphSource`]: opaque outside its source.
pub type NodeKey = i64;

/// A node as the projector needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRecord {
    pub key: NodeKey,
    pub uri: String,
    pub domain: String,
    /// The resource the node comes from, when it is not the node itself.
    pub resource_uri: Option<String>,
    pub views: Vec<NodeView>,
}

/// The edges between the nodes of one file and those of another, summed:
/// what the relevance ranking of files reads of the graph (see `projection`).
#[derive(Clone, Debug, PartialEq)]
pub struct FileLink {
    /// The file asked about.
    pub file: String,
    /// The other file.
    pub other_file: String,
    /// The edges leave `file` (true) or arrive at it (false).
    pub outgoing: bool,
    /// Their weights summed (an edge without one counts 1).
    pub weight: f64,
}

/// The relation of the edges between files that changed together in the
/// git history (`dstore ingest`, weighted by how often and how recently).
pub const CO_CHANGED: &str = "co_changed";

/// A definition (a `class` or `function` node) of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub file: String,
    pub key: NodeKey,
    pub uri: String,
    pub kind: String,
}

/// Where a projection reads the graph from: the store or memory.
///
/// The methods past [`GraphSource::records`] serve the relevance ranking of
/// files; a source without them (their defaults answer nothing) ranks by
/// what it has.
pub trait GraphSource {
    /// Keys of the nodes with these URIs, in the same order.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] naming the first URI that is not in the graph.
    fn resolve(&self, uris: &[String]) -> Result<Vec<NodeKey>>;

    /// The edges leaving the frontier in `direction`, as (frontier node,
    /// neighbour) pairs sorted by frontier node then neighbour, restricted to
    /// `relations` when given. One call per BFS hop.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn expand(
        &self,
        frontier: &[NodeKey],
        direction: Direction,
        relations: Option<&[String]>,
    ) -> Result<Vec<(NodeKey, NodeKey)>>;

    /// URIs, domains and (when `with_views`) views of these nodes, in the same order.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn records(&self, keys: &[NodeKey], with_views: bool) -> Result<Vec<NodeRecord>>;

    /// The URIs of these nodes, in the same order: what a projection reads
    /// of each node. A source may answer it without the rest of each record.
    ///
    /// # Errors
    /// As [`GraphSource::records`].
    fn uris(&self, keys: &[NodeKey]) -> Result<Vec<String>> {
        Ok(self.records(keys, false)?.into_iter().map(|r| r.uri).collect())
    }

    /// [`GraphSource::records`] with only the views of depth `max_depth` or
    /// less: a projection that shows signatures need not read whole sources.
    ///
    /// # Errors
    /// As [`GraphSource::records`].
    fn records_to_depth(&self, keys: &[NodeKey], max_depth: u32) -> Result<Vec<NodeRecord>> {
        let mut records = self.records(keys, true)?;
        for r in &mut records {
            r.views.retain(|v| v.depth <= max_depth);
        }
        Ok(records)
    }

    /// The edges between the nodes of one of `files` (nodes whose
    /// `resource_uri` it is) and the nodes of another file, either way,
    /// summed by pair of files and way: of `relation`, or with `None` of
    /// every relation but `contains` and [`CO_CHANGED`] (the code's own links).
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn file_links(&self, files: &[String], relation: Option<&str>) -> Result<Vec<FileLink>> {
        let _ = (files, relation);
        Ok(Vec::new())
    }

    /// The total weight of the edges of `relation` that leave each of
    /// `files`' own nodes (the file nodes), by file; files without any are
    /// left out.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn link_totals(&self, files: &[String], relation: &str) -> Result<HashMap<String, f64>> {
        let mut totals: HashMap<String, f64> = HashMap::new();
        for l in self.file_links(files, Some(relation))? {
            if l.outgoing {
                *totals.entry(l.file).or_default() += l.weight;
            }
        }
        Ok(totals)
    }

    /// The definitions of `files`, each file's in the order they were added.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn definitions(&self, files: &[String]) -> Result<Vec<Definition>> {
        let _ = files;
        Ok(Vec::new())
    }

    /// The files (nodes that are their own resource) whose URIs start
    /// with `prefix`, at most `limit`, in URI order.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn files_under(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let _ = (prefix, limit);
        Ok(Vec::new())
    }

    /// The terms of `file` in the lexical index, with their counts: empty
    /// when the source has no index, or `file` is not in it.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn file_terms(&self, file: &str) -> Result<Vec<(String, u32)>> {
        let _ = file;
        Ok(Vec::new())
    }

    /// What BM25 needs of the lexical index for `terms`: the indexed files'
    /// count and mean length, and how many files hold each term.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn term_statistics(&self, terms: &[String]) -> Result<TermStatistics> {
        let _ = terms;
        Ok(TermStatistics::default())
    }

    /// Every posting of `terms`: (the term's index in `terms`, the file's
    /// document key, the term's count there, the file's length in terms).
    /// Keys are opaque; [`GraphSource::document_files`] names their files.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn postings(&self, terms: &[String]) -> Result<Vec<(usize, i64, u32, u32)>> {
        let _ = terms;
        Ok(Vec::new())
    }

    /// The files of these document keys, in the same order.
    ///
    /// # Errors
    /// [`Error::Storage`] when the source cannot be read.
    fn document_files(&self, docs: &[i64]) -> Result<Vec<String>> {
        let _ = docs;
        Ok(Vec::new())
    }
}

/// The lexical index's statistics for a set of terms (see [`GraphSource::term_statistics`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TermStatistics {
    pub files: u64,
    pub mean_length: f64,
    pub document_frequency: HashMap<String, u64>,
}

/// The whole graph in memory, on petgraph.
#[derive(Clone, Debug, Default)]
pub struct UkoGraph {
    graph: DiGraph<UkoNode, (String, Option<f64>)>,
    by_uri: HashMap<String, NodeIndex>,
}

impl UkoGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a node.
    ///
    /// # Errors
    /// [`Error::Validation`] for a node that breaks its rules.
    pub fn upsert_node(&mut self, node: UkoNode) -> Result<()> {
        node.validate()?;
        match self.by_uri.get(&node.uri) {
            Some(&i) => self.graph[i] = node,
            None => {
                let uri = node.uri.clone();
                let i = self.graph.add_node(node);
                self.by_uri.insert(uri, i);
            }
        }
        Ok(())
    }

    /// Adds an edge, or updates the weight of the same (source, relation, target).
    ///
    /// # Errors
    /// [`Error::UnknownNode`] naming an end that is not in the graph.
    pub fn upsert_edge(&mut self, edge: UkoEdge) -> Result<()> {
        edge.validate()?;
        let s = *self.by_uri.get(&edge.source).ok_or_else(|| Error::UnknownNode(edge.source.clone()))?;
        let t = *self.by_uri.get(&edge.target).ok_or_else(|| Error::UnknownNode(edge.target.clone()))?;
        let existing = self.graph.edges_connecting(s, t).find(|e| e.weight().0 == edge.relation).map(|e| e.id());
        match existing {
            Some(e) => self.graph[e].1 = edge.weight,
            None => {
                self.graph.add_edge(s, t, (edge.relation, edge.weight));
            }
        }
        Ok(())
    }

    pub fn node(&self, uri: &str) -> Option<&UkoNode> {
        self.by_uri.get(uri).map(|&i| &self.graph[i])
    }

    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    pub fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// The petgraph graph, for algorithms of the caller's own.
    pub fn as_petgraph(&self) -> &DiGraph<UkoNode, (String, Option<f64>)> {
        &self.graph
    }

    /// Every node, in insertion order.
    pub fn nodes(&self) -> impl Iterator<Item = &UkoNode> {
        self.graph.node_weights()
    }

    /// Every edge as an interchange record.
    pub fn edges(&self) -> impl Iterator<Item = UkoEdge> + '_ {
        self.graph.edge_references().map(|e| UkoEdge {
            source: self.graph[e.source()].uri.clone(),
            target: self.graph[e.target()].uri.clone(),
            relation: e.weight().0.clone(),
            weight: e.weight().1,
        })
    }
}

impl GraphSource for UkoGraph {
    fn resolve(&self, uris: &[String]) -> Result<Vec<NodeKey>> {
        uris.iter()
            .map(|u| self.by_uri.get(u).map(|i| i.index() as NodeKey).ok_or_else(|| Error::UnknownNode(u.clone())))
            .collect()
    }

    fn expand(
        &self,
        frontier: &[NodeKey],
        direction: Direction,
        relations: Option<&[String]>,
    ) -> Result<Vec<(NodeKey, NodeKey)>> {
        let keep = |rel: &String| relations.is_none_or(|rs| rs.contains(rel));
        let mut out = Vec::new();
        for &k in frontier {
            let n = NodeIndex::new(k as usize);
            let dirs: &[petgraph::Direction] = match direction {
                Direction::Outgoing => &[petgraph::Direction::Outgoing],
                Direction::Incoming => &[petgraph::Direction::Incoming],
                Direction::Both => &[petgraph::Direction::Outgoing, petgraph::Direction::Incoming],
            };
            for &d in dirs {
                for e in self.graph.edges_directed(n, d) {
                    if keep(&e.weight().0) {
                        let other = if d == petgraph::Direction::Outgoing { e.target() } else { e.source() };
                        out.push((k, other.index() as NodeKey));
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn records(&self, keys: &[NodeKey], with_views: bool) -> Result<Vec<NodeRecord>> {
        Ok(keys
            .iter()
            .map(|&k| {
                let n = &self.graph[NodeIndex::new(k as usize)];
                NodeRecord {
                    key: k,
                    uri: n.uri.clone(),
                    domain: n.domain.clone(),
                    resource_uri: n.resource_uri.clone(),
                    views: if with_views { n.views.clone() } else { Vec::new() },
                }
            })
            .collect())
    }

    fn file_links(&self, files: &[String], relation: Option<&str>) -> Result<Vec<FileLink>> {
        let file_of = |i: NodeIndex| self.graph[i].resource_uri.as_deref();
        let mut sums: HashMap<(String, String, bool), f64> = HashMap::new();
        for e in self.graph.edge_references() {
            let r = e.weight().0.as_str();
            if relation.map_or(r == "contains" || r == CO_CHANGED, |only| r != only) {
                continue;
            }
            let (Some(a), Some(b)) = (file_of(e.source()), file_of(e.target())) else { continue };
            if a == b {
                continue;
            }
            for (here, there, outgoing) in [(a, b, true), (b, a, false)] {
                if files.iter().any(|f| f == here) {
                    *sums.entry((here.to_owned(), there.to_owned(), outgoing)).or_default() +=
                        e.weight().1.unwrap_or(1.0);
                }
            }
        }
        let mut links: Vec<FileLink> = sums
            .into_iter()
            .map(|((file, other_file, outgoing), weight)| FileLink { file, other_file, outgoing, weight })
            .collect();
        links.sort_by(|a, b| (&a.file, &a.other_file, a.outgoing).cmp(&(&b.file, &b.other_file, b.outgoing)));
        Ok(links)
    }

    fn definitions(&self, files: &[String]) -> Result<Vec<Definition>> {
        Ok(self
            .graph
            .node_indices()
            .filter_map(|i| {
                let n = &self.graph[i];
                let file = n.resource_uri.as_ref().filter(|f| files.contains(f))?;
                (n.kind == "class" || n.kind == "function").then(|| Definition {
                    file: file.clone(),
                    key: i.index() as NodeKey,
                    uri: n.uri.clone(),
                    kind: n.kind.clone(),
                })
            })
            .collect())
    }

    fn files_under(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let mut files: Vec<String> = self
            .graph
            .node_weights()
            .filter(|n| n.resource_uri.as_deref() == Some(n.uri.as_str()) && n.uri.starts_with(prefix))
            .map(|n| n.uri.clone())
            .collect();
        files.sort();
        files.truncate(limit);
        Ok(files)
    }
}
