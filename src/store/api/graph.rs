//! The UKO graph's public methods, and [`GraphSource`] for the projector.

use std::collections::HashMap;

use crate::decision::{ContextSnapshot, ResourceRef};
use crate::error::{Error, Result};
use crate::hash::{self, Hasher};
use crate::store::tables::{graph, lexical};
use crate::store::{GraphCounts, Neighbour, Store};
use crate::uko::{
    views_version, Definition, Direction, FileLink, GraphSource, NodeKey, NodeRecord, TermStatistics, UkoEdge,
    UkoGraph, UkoNode,
};

impl Store {
    /// Adds or replaces nodes (and their views) in one transaction.
    ///
    /// # Errors
    /// [`Error::Validation`] for a bad node; nothing is written on error.
    pub fn upsert_nodes(&mut self, nodes: &[UkoNode]) -> Result<()> {
        self.write_graph(|tx| graph::upsert_nodes(tx, nodes))
    }

    /// Adds edges, or updates the weight of existing ones, in one transaction.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] naming an end that is not stored; nothing is written on error.
    pub fn upsert_edges(&mut self, edges: &[UkoEdge]) -> Result<()> {
        self.write_graph(|tx| graph::upsert_edges(tx, edges))
    }

    /// Removes nodes with their views and every edge that touches them, in
    /// one transaction; URIs that name no node are passed over. Returns how
    /// many nodes went.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be written; nothing is removed then.
    pub fn remove_nodes(&mut self, uris: &[String]) -> Result<usize> {
        self.write_graph(|tx| graph::remove_nodes(tx, uris))
    }

    /// The neighbours of `uri` in `direction`, restricted to `relations` when given.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] when `uri` is not stored.
    pub fn neighbours(&self, uri: &str, direction: Direction, relations: Option<&[String]>) -> Result<Vec<Neighbour>> {
        self.read_snapshot(|store| {
            let key = graph::resolve(&store.conn, &[uri.to_owned()])?[0];
            graph::neighbours(&store.conn, key, direction, relations)
        })
    }

    /// The graph's URIs of the focus `entries`, in their order: a node URI
    /// as given (`class://AuthManager`), a path relative to the ingested
    /// root (`src/auth.py`, `./src/auth.py`) as its file's `project://`
    /// node. Every face takes a focus (and `observed` nodes) so.
    ///
    /// # Errors
    /// [`Error::Validation`] naming `field` for an entry that names no node
    /// of the graph; [`Error::Storage`] when the graph cannot be read.
    pub fn resolve_focus(&self, field: &str, entries: &[String]) -> Result<Vec<String>> {
        let candidates: Vec<Vec<String>> = entries.iter().map(|e| focus_candidates(e)).collect();
        let all: Vec<String> = candidates.iter().flatten().cloned().collect();
        let known = self.known_uris(&all)?;
        candidates
            .into_iter()
            .map(|c| match c.iter().find(|u| known.contains(*u)) {
                Some(uri) => Ok(uri.clone()),
                None => {
                    let shown = c.last().expect("every entry has a candidate");
                    Err(Error::validation(field, format!("{shown} is not a node of the graph{}", self.nearest(shown)?)))
                }
            })
            .collect()
    }

    /// ", nearest: A, B" for the nodes named most like `uri`, or nothing.
    fn nearest(&self, uri: &str) -> Result<String> {
        let path = uri.split_once("://").map_or(uri, |(_, p)| p);
        // The last part of a path or a dotted name: what a person types.
        let name = path.rsplit(['/', '.']).find(|p| !p.is_empty()).unwrap_or(path);
        if name.len() < 2 || name.contains(['%', '_']) {
            return Ok(String::new());
        }
        let near = graph::near(&self.conn, name)?;
        Ok(if near.is_empty() { String::new() } else { format!("; nearest: {}", near.join(", ")) })
    }

    /// Which of these URIs name stored nodes, in one query.
    ///
    /// # Errors
    /// [`Error::Storage`] when the table cannot be read.
    pub fn known_uris(&self, uris: &[String]) -> Result<std::collections::HashSet<String>> {
        Ok(graph::keys_of(&self.conn, uris)?.into_keys().collect())
    }

    /// The current version ([`UkoNode::current_version`]) of each of these
    /// URIs that names a stored node, in two queries; a URI missing from the
    /// answer is not in the graph.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn node_versions(&self, uris: &[String]) -> Result<HashMap<String, String>> {
        self.read_snapshot(|store| {
            Ok(store.node_states(uris)?.into_iter().map(|(uri, (_, version))| (uri, version)).collect())
        })
    }

    /// The kind and current version of each of these URIs that names a
    /// stored node: one query, and one more for the views of the nodes
    /// given no version.
    fn node_states(&self, uris: &[String]) -> Result<HashMap<String, (String, String)>> {
        let mut states = HashMap::with_capacity(uris.len());
        let mut unversioned: Vec<(NodeKey, String, String)> = Vec::new();
        for row in graph::node_rows(&self.conn, uris)? {
            match row {
                (_, uri, kind, Some(version)) => {
                    states.insert(uri, (kind, version));
                }
                (key, uri, kind, None) => unversioned.push((key, uri, kind)),
            }
        }
        let keys: Vec<NodeKey> = unversioned.iter().map(|u| u.0).collect();
        let records = if keys.is_empty() { Vec::new() } else { graph::records(&self.conn, &keys, true)? };
        for ((_, uri, kind), record) in unversioned.into_iter().zip(records) {
            states.insert(uri, (kind, views_version(&record.views)));
        }
        Ok(states)
    }

    /// The current version of one node, `None` when it is not in the graph.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn node_version(&self, uri: &str) -> Result<Option<String>> {
        Ok(self.node_versions(&[uri.to_owned()])?.remove(uri))
    }

    /// A context snapshot of these graph nodes as they are now, for a
    /// decision to record what it saw: each becomes a resource with its kind
    /// and current version, and the snapshot's `hash` is `sha256:` and the
    /// SHA-256 of the (URI, version) pairs, so two snapshots of the same
    /// versions hash alike. Duplicates are kept once, in the order given.
    ///
    /// ```
    /// # use decision_store::{Store, uko::UkoNode};
    /// let mut store = Store::open_in_memory()?;
    /// store.upsert_nodes(&[UkoNode::new("class://A", "uko-code:", "class", "A").with_version("v1")])?;
    /// let snapshot = store.snapshot_of(&["class://A"])?;
    /// assert_eq!(snapshot.resources()[0].version(), Some("v1"));
    /// # Ok::<(), decision_store::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::UnknownNode`] naming the first URI that is not in the graph.
    pub fn snapshot_of(&self, uris: &[impl AsRef<str>]) -> Result<ContextSnapshot> {
        let mut wanted: Vec<String> = Vec::with_capacity(uris.len());
        for u in uris {
            if !wanted.iter().any(|w| w == u.as_ref()) {
                wanted.push(u.as_ref().to_owned());
            }
        }
        let mut states = self.read_snapshot(|store| store.node_states(&wanted))?;
        let mut h = Hasher::default();
        let mut resources = Vec::with_capacity(wanted.len());
        for uri in wanted {
            let (kind, version) = states.remove(&uri).ok_or_else(|| Error::UnknownNode(uri.clone()))?;
            for part in [&uri, &version] {
                h.update((part.len() as u64).to_be_bytes());
                h.update(part.as_bytes());
            }
            resources.push(ResourceRef::new(uri, Some(kind), Some(version))?);
        }
        Ok(ContextSnapshot::new(hash::version_text(&h.finish()), resources, None))
    }

    /// Node and edge totals.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn graph_counts(&self) -> Result<GraphCounts> {
        graph::counts(&self.conn)
    }

    /// Every node with its views, ordered by URI, streamed to `f`.
    ///
    /// # Errors
    /// The first error of reading or of `f`.
    pub fn for_each_node(&self, f: impl FnMut(UkoNode) -> Result<()>) -> Result<()> {
        self.read_snapshot(|store| graph::for_each_node(&store.conn, f))
    }

    /// Every edge, ordered by source, relation and target URI, streamed to `f`.
    ///
    /// # Errors
    /// The first error of reading or of `f`.
    pub fn for_each_edge(&self, f: impl FnMut(UkoEdge) -> Result<()>) -> Result<()> {
        self.read_snapshot(|store| graph::for_each_edge(&store.conn, f))
    }

    /// The whole stored graph in memory (petgraph).
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn load_graph(&self) -> Result<UkoGraph> {
        let mut g = UkoGraph::new();
        self.read_snapshot(|store| {
            graph::for_each_node(&store.conn, |n| g.upsert_node(n))?;
            graph::for_each_edge(&store.conn, |e| g.upsert_edge(e))
        })?;
        Ok(g)
    }
}

/// The URIs a focus entry may mean, the one to report last: a URI as
/// given; a relative path as given (a node may be named so) or as its
/// file's `project://` node.
fn focus_candidates(entry: &str) -> Vec<String> {
    if entry.contains("://") {
        return vec![entry.to_owned()];
    }
    let path = entry.trim_start_matches("./");
    vec![entry.to_owned(), format!("project://{path}")]
}

impl GraphSource for Store {
    fn resolve(&self, uris: &[String]) -> Result<Vec<NodeKey>> {
        graph::resolve(&self.conn, uris)
    }

    fn expand(
        &self,
        frontier: &[NodeKey],
        direction: Direction,
        relations: Option<&[String]>,
    ) -> Result<Vec<(NodeKey, NodeKey)>> {
        graph::expand(&self.conn, frontier, direction, relations)
    }

    fn records(&self, keys: &[NodeKey], with_views: bool) -> Result<Vec<NodeRecord>> {
        graph::records(&self.conn, keys, with_views)
    }

    fn uris(&self, keys: &[NodeKey]) -> Result<Vec<String>> {
        graph::uris(&self.conn, keys)
    }

    fn records_to_depth(&self, keys: &[NodeKey], max_depth: u32) -> Result<Vec<NodeRecord>> {
        graph::records_to_depth(&self.conn, keys, Some(max_depth))
    }

    fn file_links(&self, files: &[String], relation: Option<&str>) -> Result<Vec<FileLink>> {
        graph::file_links(&self.conn, files, relation)
    }

    fn link_totals(&self, files: &[String], relation: &str) -> Result<HashMap<String, f64>> {
        graph::link_totals(&self.conn, files, relation)
    }

    fn definitions(&self, files: &[String]) -> Result<Vec<Definition>> {
        graph::definitions(&self.conn, files)
    }

    fn files_under(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        graph::files_under(&self.conn, prefix, limit)
    }

    fn file_terms(&self, file: &str) -> Result<Vec<(String, u32)>> {
        lexical::file_terms(&self.conn, file)
    }

    fn term_statistics(&self, terms: &[String]) -> Result<TermStatistics> {
        let (files, mean_length) = lexical::corpus(&self.conn)?;
        Ok(TermStatistics { files, mean_length, document_frequency: lexical::document_frequencies(&self.conn, terms)? })
    }

    fn postings(&self, terms: &[String]) -> Result<Vec<(usize, i64, u32, u32)>> {
        lexical::postings(&self.conn, terms)
    }

    fn document_files(&self, docs: &[i64]) -> Result<Vec<String>> {
        lexical::document_files(&self.conn, docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        let mut s = Store::open_in_memory().unwrap();
        let nodes: Vec<UkoNode> = ["a", "b", "c"].iter().map(|u| UkoNode::new(*u, "d:", "k", *u)).collect();
        s.upsert_nodes(&nodes).unwrap();
        s.upsert_edges(&[
            UkoEdge::new("a", "b", "calls"),
            UkoEdge::new("a", "c", "imports"),
            UkoEdge::new("c", "a", "calls"),
        ])
        .unwrap();
        s
    }

    fn uris(ns: &[Neighbour]) -> Vec<(&str, &str, Direction)> {
        ns.iter().map(|n| (n.uri.as_str(), n.relation.as_str(), n.direction)).collect()
    }

    /// A snapshot read on the writer's own connection leaves nothing open:
    /// the decision written next is committed for every other connection.
    #[test]
    fn a_write_after_a_snapshot_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = Store::open(&path).unwrap();
        s.upsert_nodes(&[
            UkoNode::new("class://A", "d:", "class", "A"),
            UkoNode::new("class://B", "d:", "class", "B").with_version("v2"),
        ])
        .unwrap();
        let snapshot = s.snapshot_of(&["class://A", "class://B"]).unwrap();
        assert!(!s.conn.in_transaction());
        let d = crate::decision::Decision::builder(
            crate::decision::PlanId::generate(),
            crate::decision::DecisionType::PromptDefinition,
            0,
        )
        .context_snapshot(snapshot)
        .build()
        .unwrap();
        s.insert_next(&d).unwrap();
        assert!(!s.conn.in_transaction());
        let other = Store::open_read_only(&path).unwrap();
        assert_eq!(other.decision(d.decision_id()).unwrap(), d);
    }

    #[test]
    fn records_and_uris_come_in_the_order_asked_for() {
        let s = store();
        let keys = s.resolve(&["c".into(), "a".into(), "b".into()]).unwrap();
        let records: Vec<String> = s.records(&keys, true).unwrap().into_iter().map(|r| r.uri).collect();
        assert_eq!(records, ["c", "a", "b"]);
        assert_eq!(GraphSource::uris(&s, &keys).unwrap(), ["c", "a", "b"]);
        let missing = keys.iter().max().unwrap() + 100;
        for err in [GraphSource::uris(&s, &[keys[0], missing]).unwrap_err(), s.records(&[missing], false).unwrap_err()]
        {
            assert!(matches!(&err, Error::UnknownNode(m) if m.contains(&missing.to_string())), "{err}");
        }
    }

    #[test]
    fn neighbours_by_direction_and_relation() {
        let s = store();
        assert_eq!(
            uris(&s.neighbours("a", Direction::Outgoing, None).unwrap()),
            [("b", "calls", Direction::Outgoing), ("c", "imports", Direction::Outgoing)]
        );
        assert_eq!(uris(&s.neighbours("a", Direction::Incoming, None).unwrap()), [("c", "calls", Direction::Incoming)]);
        let calls = ["calls".to_owned()];
        assert_eq!(
            uris(&s.neighbours("a", Direction::Both, Some(&calls)).unwrap()),
            [("b", "calls", Direction::Outgoing), ("c", "calls", Direction::Incoming)]
        );
        assert!(matches!(s.neighbours("zzz", Direction::Both, None), Err(Error::UnknownNode(u)) if u == "zzz"));
    }

    #[test]
    fn upserts_replace_views_and_weights_and_reject_unknown_ends_whole() {
        let mut s = store();
        s.upsert_nodes(&[UkoNode::new("a", "d2:", "k2", "A").with_view(1, "one")]).unwrap();
        let mut e = UkoEdge::new("a", "b", "calls");
        e.weight = Some(2.5);
        s.upsert_edges(&[e]).unwrap();
        let g = s.load_graph().unwrap();
        assert_eq!(g.node("a").unwrap(), &UkoNode::new("a", "d2:", "k2", "A").with_view(1, "one"));
        assert_eq!(g.edge_count(), 3);
        assert!(g.edges().any(|e| e.source == "a" && e.target == "b" && e.weight == Some(2.5)));
        let before = s.graph_counts().unwrap();
        let err = s.upsert_edges(&[UkoEdge::new("b", "c", "x"), UkoEdge::new("b", "ghost", "x")]).unwrap_err();
        assert!(matches!(err, Error::UnknownNode(u) if u == "ghost"));
        assert_eq!(s.graph_counts().unwrap(), before, "the batch was not all or nothing");
    }

    #[test]
    fn every_graph_write_moves_the_generation() {
        let mut s = store();
        let at = |s: &Store| graph::generation(&s.conn).unwrap();
        let before = at(&s);
        s.upsert_nodes(&[UkoNode::new("d", "d:", "k", "d")]).unwrap();
        assert_eq!(at(&s), before + 1);
        s.upsert_edges(&[UkoEdge::new("d", "a", "calls")]).unwrap();
        s.remove_nodes(&["d".into()]).unwrap();
        assert_eq!(at(&s), before + 3);
        assert!(s.upsert_edges(&[UkoEdge::new("a", "ghost", "x")]).is_err());
        assert_eq!(at(&s), before + 3, "a failed write changes nothing");
    }
}
