//! Queries of the UKO graph tables (`uko_nodes`, `uko_node_views`, `uko_edges`).
//!
//! Traversal reads one BFS frontier per query: the frontier's node keys are
//! bound as one `rarray` parameter and the edge table is searched through its
//! primary key (outgoing) or `uko_edges_by_target` (incoming), so a
//! projection touches only the nodes it reaches, whatever the graph's size.

use std::collections::HashMap;
use std::rc::Rc;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::{storage, Store};
use crate::decision::IdMap;
use crate::error::{Error, Result};
use crate::uko::{views_version, Direction, GraphSource, NodeKey, NodeRecord, NodeView, UkoEdge, UkoGraph, UkoNode};
use crate::{ContextSnapshot, ResourceRef};
use sha2::{Digest, Sha256};

use super::integrity::to_hex;

/// One BFS hop: the edges leaving (or entering) a whole frontier.
pub(super) const EXPAND_OUT: &str = "SELECT source_id, target_id FROM uko_edges WHERE source_id IN rarray(?1)";
pub(super) const EXPAND_OUT_REL: &str =
    "SELECT source_id, target_id FROM uko_edges WHERE source_id IN rarray(?1) AND relation IN rarray(?2)";
pub(super) const EXPAND_IN: &str = "SELECT target_id, source_id FROM uko_edges WHERE target_id IN rarray(?1)";
pub(super) const EXPAND_IN_REL: &str =
    "SELECT target_id, source_id FROM uko_edges WHERE target_id IN rarray(?1) AND relation IN rarray(?2)";
pub(super) const RESOLVE: &str = "SELECT uri, node_id FROM uko_nodes WHERE uri IN rarray(?1)";
pub(super) const RECORDS: &str = "SELECT node_id, uri, domain, resource_uri FROM uko_nodes WHERE node_id IN rarray(?1)";
pub(super) const VIEWS: &str =
    "SELECT node_id, depth, content FROM uko_node_views WHERE node_id IN rarray(?1) ORDER BY node_id, depth";

/// Node and edge totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GraphCounts {
    pub nodes: u64,
    pub edges: u64,
}

/// A neighbour of a node, as [`Store::neighbours`] lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Neighbour {
    pub uri: String,
    pub relation: String,
    pub weight: Option<f64>,
    /// `Outgoing` when the edge leaves the node asked about.
    pub direction: Direction,
}

fn key_array(keys: &[NodeKey]) -> Rc<Vec<SqlValue>> {
    Rc::new(keys.iter().map(|&k| SqlValue::Integer(k)).collect())
}

fn text_array(items: &[String]) -> Rc<Vec<SqlValue>> {
    Rc::new(items.iter().map(|s| SqlValue::Text(s.clone())).collect())
}

/// Adds or replaces nodes and their views inside a transaction.
pub(crate) fn upsert_nodes_in(conn: &Connection, nodes: &[UkoNode]) -> Result<()> {
    let mut upsert = conn
        .prepare_cached(
            "INSERT INTO uko_nodes (uri, domain, kind, label, version, resource_uri) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (uri) DO UPDATE SET domain = excluded.domain, kind = excluded.kind, label = excluded.label,
                 version = excluded.version, resource_uri = excluded.resource_uri
             RETURNING node_id",
        )
        .map_err(storage)?;
    let mut clear = conn.prepare_cached("DELETE FROM uko_node_views WHERE node_id = ?1").map_err(storage)?;
    let mut view = conn
        .prepare_cached("INSERT INTO uko_node_views (node_id, depth, content) VALUES (?1, ?2, ?3)")
        .map_err(storage)?;
    for node in nodes {
        node.validate()?;
        let id: i64 = upsert
            .query_row(params![node.uri, node.domain, node.kind, node.label, node.version, node.resource_uri], |r| {
                r.get(0)
            })
            .map_err(storage)?;
        clear.execute([id]).map_err(storage)?;
        for v in &node.views {
            view.execute(params![id, v.depth, v.content]).map_err(storage)?;
        }
    }
    Ok(())
}

/// Removes nodes, their views and every edge touching them, inside a transaction.
pub(crate) fn remove_nodes_in(conn: &Connection, uris: &[String]) -> Result<usize> {
    let mut stmt = conn.prepare_cached(RESOLVE).map_err(storage)?;
    let keys: Vec<NodeKey> = stmt
        .query_map([text_array(uris)], |r| r.get(1))
        .map_err(storage)?
        .collect::<rusqlite::Result<_>>()
        .map_err(storage)?;
    let array = key_array(&keys);
    for sql in [
        "DELETE FROM uko_edges WHERE source_id IN rarray(?1)",
        "DELETE FROM uko_edges WHERE target_id IN rarray(?1)",
        "DELETE FROM uko_node_views WHERE node_id IN rarray(?1)",
        "DELETE FROM uko_nodes WHERE node_id IN rarray(?1)",
    ] {
        conn.prepare_cached(sql).map_err(storage)?.execute([array.clone()]).map_err(storage)?;
    }
    Ok(keys.len())
}

/// Adds edges (or updates their weight) inside a transaction.
pub(crate) fn upsert_edges_in(conn: &Connection, edges: &[UkoEdge]) -> Result<()> {
    let mut find = conn.prepare_cached("SELECT node_id FROM uko_nodes WHERE uri = ?1").map_err(storage)?;
    let mut upsert = conn
        .prepare_cached(
            "INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (source_id, relation, target_id) DO UPDATE SET weight = excluded.weight",
        )
        .map_err(storage)?;
    for edge in edges {
        edge.validate()?;
        let mut key = |uri: &str| -> Result<i64> {
            find.query_row([uri], |r| r.get(0))
                .optional()
                .map_err(storage)?
                .ok_or_else(|| Error::UnknownNode(uri.to_owned()))
        };
        let (s, t) = (key(&edge.source)?, key(&edge.target)?);
        upsert.execute(params![s, t, edge.relation, edge.weight]).map_err(storage)?;
    }
    Ok(())
}

impl Store {
    /// Adds or replaces nodes (and their views) in one transaction.
    ///
    /// # Errors
    /// [`Error::Validation`] for a bad node; nothing is written on error.
    pub fn upsert_nodes(&mut self, nodes: &[UkoNode]) -> Result<()> {
        self.write(|tx, _| upsert_nodes_in(tx, nodes))
    }

    /// Adds edges, or updates the weight of existing ones, in one transaction.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] naming an end that is not stored; nothing is written on error.
    pub fn upsert_edges(&mut self, edges: &[UkoEdge]) -> Result<()> {
        self.write(|tx, _| upsert_edges_in(tx, edges))
    }

    /// The neighbours of `uri` in `direction`, restricted to `relations` when given.
    ///
    /// # Errors
    /// [`Error::UnknownNode`] when `uri` is not stored.
    pub fn neighbours(&self, uri: &str, direction: Direction, relations: Option<&[String]>) -> Result<Vec<Neighbour>> {
        let key = self.resolve(&[uri.to_owned()])?[0];
        let mut out = Vec::new();
        let queries: &[(Direction, &str)] = &[
            (
                Direction::Outgoing,
                "SELECT n.uri, e.relation, e.weight FROM uko_edges e JOIN uko_nodes n ON n.node_id = e.target_id
                 WHERE e.source_id = ?1 ORDER BY n.uri, e.relation",
            ),
            (
                Direction::Incoming,
                "SELECT n.uri, e.relation, e.weight FROM uko_edges e JOIN uko_nodes n ON n.node_id = e.source_id
                 WHERE e.target_id = ?1 ORDER BY n.uri, e.relation",
            ),
        ];
        for &(dir, sql) in queries {
            if direction != Direction::Both && direction != dir {
                continue;
            }
            let mut stmt = self.conn.prepare_cached(sql).map_err(storage)?;
            let rows = stmt
                .query_map([key], |r| {
                    Ok(Neighbour { uri: r.get(0)?, relation: r.get(1)?, weight: r.get(2)?, direction: dir })
                })
                .map_err(storage)?;
            for n in rows {
                let n = n.map_err(storage)?;
                if relations.is_none_or(|rs| rs.contains(&n.relation)) {
                    out.push(n);
                }
            }
        }
        Ok(out)
    }

    /// Which of these URIs name stored nodes, in one query.
    ///
    /// # Errors
    /// [`Error::Storage`] when the table cannot be read.
    pub fn known_uris(&self, uris: &[String]) -> Result<std::collections::HashSet<String>> {
        let mut stmt = self.conn.prepare_cached(RESOLVE).map_err(storage)?;
        let rows = stmt.query_map([text_array(uris)], |r| r.get::<_, String>(0)).map_err(storage)?;
        rows.collect::<rusqlite::Result<_>>().map_err(storage)
    }

    /// Removes nodes with their views and every edge that touches them, in
    /// one transaction; URIs that name no node are passed over. Returns how
    /// many nodes went.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be written; nothing is removed then.
    pub fn remove_nodes(&mut self, uris: &[String]) -> Result<usize> {
        self.write(|tx, _| remove_nodes_in(tx, uris))
    }

    /// The current version ([`UkoNode::current_version`]) of each of these
    /// URIs that names a stored node, in two queries; a URI missing from the
    /// answer is not in the graph.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn node_versions(&self, uris: &[String]) -> Result<HashMap<String, String>> {
        self.read_snapshot(|store| store.node_versions_in_snapshot(uris))
    }

    fn node_versions_in_snapshot(&self, uris: &[String]) -> Result<HashMap<String, String>> {
        Ok(self.node_states(uris)?.into_iter().map(|(uri, (_, version))| (uri, version)).collect())
    }

    /// The kind and current version of each of these URIs that names a
    /// stored node: one query, and one more (through [`GraphSource::records`])
    /// for the views of the nodes given no version.
    fn node_states(&self, uris: &[String]) -> Result<HashMap<String, (String, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT node_id, uri, kind, version FROM uko_nodes WHERE uri IN rarray(?1)")
            .map_err(storage)?;
        let mut states = HashMap::with_capacity(uris.len());
        let mut unversioned: Vec<(NodeKey, String, String)> = Vec::new();
        let rows = stmt
            .query_map([text_array(uris)], |r| {
                Ok((r.get::<_, NodeKey>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get(3)?))
            })
            .map_err(storage)?;
        for row in rows {
            match row.map_err(storage)? {
                (_, uri, kind, Some(version)) => {
                    states.insert(uri, (kind, version));
                }
                (key, uri, kind, None) => unversioned.push((key, uri, kind)),
            }
        }
        let keys: Vec<NodeKey> = unversioned.iter().map(|u| u.0).collect();
        let records = if keys.is_empty() { Vec::new() } else { self.records(&keys, true)? };
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
        self.read_snapshot(|store| store.snapshot_in_snapshot(uris))
    }

    fn snapshot_in_snapshot(&self, uris: &[impl AsRef<str>]) -> Result<ContextSnapshot> {
        let mut wanted: Vec<String> = Vec::with_capacity(uris.len());
        for u in uris {
            if !wanted.iter().any(|w| w == u.as_ref()) {
                wanted.push(u.as_ref().to_owned());
            }
        }
        let mut states = self.node_states(&wanted)?;
        let mut h = Sha256::new();
        let mut resources = Vec::with_capacity(wanted.len());
        for uri in wanted {
            let (kind, version) = states.remove(&uri).ok_or_else(|| Error::UnknownNode(uri.clone()))?;
            for part in [&uri, &version] {
                h.update((part.len() as u64).to_be_bytes());
                h.update(part.as_bytes());
            }
            resources.push(ResourceRef::new(uri, Some(kind), Some(version))?);
        }
        let digest: [u8; 32] = h.finalize().into();
        Ok(ContextSnapshot::new(format!("sha256:{}", to_hex(&digest)), resources, None))
    }

    /// Node and edge totals.
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn graph_counts(&self) -> Result<GraphCounts> {
        self.conn
            .query_row("SELECT (SELECT count(*) FROM uko_nodes), (SELECT count(*) FROM uko_edges)", [], |r| {
                Ok(GraphCounts { nodes: r.get(0)?, edges: r.get(1)? })
            })
            .map_err(storage)
    }

    /// Every node with its views, ordered by URI, streamed to `f`.
    ///
    /// # Errors
    /// The first error of reading or of `f`.
    pub fn for_each_node(&self, mut f: impl FnMut(UkoNode) -> Result<()>) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT n.uri, n.domain, n.kind, n.label, n.version, n.resource_uri, v.depth, v.content
                 FROM uko_nodes n LEFT JOIN uko_node_views v ON v.node_id = n.node_id
                 ORDER BY n.uri, v.depth",
            )
            .map_err(storage)?;
        let mut rows = stmt.query([]).map_err(storage)?;
        let mut current: Option<UkoNode> = None;
        while let Some(r) = rows.next().map_err(storage)? {
            let uri: String = r.get(0).map_err(storage)?;
            if current.as_ref().is_none_or(|n| n.uri != uri) {
                if let Some(done) = current.take() {
                    f(done)?;
                }
                let mut node = UkoNode::new(
                    uri,
                    r.get::<_, String>(1).map_err(storage)?,
                    r.get::<_, String>(2).map_err(storage)?,
                    r.get::<_, String>(3).map_err(storage)?,
                );
                node.version = r.get(4).map_err(storage)?;
                node.resource_uri = r.get(5).map_err(storage)?;
                current = Some(node);
            }
            if let Some(depth) = r.get::<_, Option<u32>>(6).map_err(storage)? {
                let content: String = r.get(7).map_err(storage)?;
                current.as_mut().expect("set above").views.push(NodeView { depth, content });
            }
        }
        if let Some(done) = current {
            f(done)?;
        }
        Ok(())
    }

    /// Every edge, ordered by source, relation and target URI, streamed to `f`.
    ///
    /// # Errors
    /// The first error of reading or of `f`.
    pub fn for_each_edge(&self, mut f: impl FnMut(UkoEdge) -> Result<()>) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT source, target, relation, weight FROM uko_edge_list ORDER BY source, relation, target",
            )
            .map_err(storage)?;
        let mut rows = stmt.query([]).map_err(storage)?;
        while let Some(r) = rows.next().map_err(storage)? {
            f(UkoEdge {
                source: r.get(0).map_err(storage)?,
                target: r.get(1).map_err(storage)?,
                relation: r.get(2).map_err(storage)?,
                weight: r.get(3).map_err(storage)?,
            })?;
        }
        Ok(())
    }

    /// The whole stored graph in memory (petgraph).
    ///
    /// # Errors
    /// [`Error::Storage`] when the tables cannot be read.
    pub fn load_graph(&self) -> Result<UkoGraph> {
        let mut g = UkoGraph::new();
        self.for_each_node(|n| g.upsert_node(n))?;
        self.for_each_edge(|e| g.upsert_edge(e))?;
        Ok(g)
    }
}

impl GraphSource for Store {
    fn resolve(&self, uris: &[String]) -> Result<Vec<NodeKey>> {
        let mut stmt = self.conn.prepare_cached(RESOLVE).map_err(storage)?;
        let found: HashMap<String, NodeKey> = stmt
            .query_map([text_array(uris)], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(storage)?
            .collect::<rusqlite::Result<_>>()
            .map_err(storage)?;
        uris.iter().map(|u| found.get(u).copied().ok_or_else(|| Error::UnknownNode(u.clone()))).collect()
    }

    fn expand(
        &self,
        frontier: &[NodeKey],
        direction: Direction,
        relations: Option<&[String]>,
    ) -> Result<Vec<(NodeKey, NodeKey)>> {
        let mut out = Vec::new();
        let keys = key_array(frontier);
        let rels = relations.map(text_array);
        for (dir, plain, filtered) in
            [(Direction::Outgoing, EXPAND_OUT, EXPAND_OUT_REL), (Direction::Incoming, EXPAND_IN, EXPAND_IN_REL)]
        {
            if direction != Direction::Both && direction != dir {
                continue;
            }
            let mut stmt = self.conn.prepare_cached(if rels.is_some() { filtered } else { plain }).map_err(storage)?;
            let map = |r: &rusqlite::Row<'_>| Ok((r.get::<_, NodeKey>(0)?, r.get::<_, NodeKey>(1)?));
            let rows = match &rels {
                Some(rels) => stmt.query_map(params![keys.clone(), rels.clone()], map),
                None => stmt.query_map(params![keys.clone()], map),
            }
            .map_err(storage)?;
            for pair in rows {
                out.push(pair.map_err(storage)?);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn records(&self, keys: &[NodeKey], with_views: bool) -> Result<Vec<NodeRecord>> {
        let array = key_array(keys);
        let mut stmt = self.conn.prepare_cached(RECORDS).map_err(storage)?;
        let mut by_key: IdMap<NodeKey, NodeRecord> = IdMap::with_capacity_and_hasher(keys.len(), Default::default());
        let rows = stmt
            .query_map([array.clone()], |r| {
                let key: NodeKey = r.get(0)?;
                Ok((
                    key,
                    NodeRecord { key, uri: r.get(1)?, domain: r.get(2)?, resource_uri: r.get(3)?, views: Vec::new() },
                ))
            })
            .map_err(storage)?;
        for row in rows {
            let (key, record) = row.map_err(storage)?;
            by_key.insert(key, record);
        }
        if with_views {
            let mut stmt = self.conn.prepare_cached(VIEWS).map_err(storage)?;
            let rows = stmt
                .query_map([array], |r| {
                    Ok((r.get::<_, NodeKey>(0)?, NodeView { depth: r.get(1)?, content: r.get(2)? }))
                })
                .map_err(storage)?;
            for row in rows {
                let (key, view) = row.map_err(storage)?;
                if let Some(rec) = by_key.get_mut(&key) {
                    rec.views.push(view);
                }
            }
        }
        keys.iter().map(|k| by_key.remove(k).ok_or_else(|| Error::UnknownNode(format!("node key {k}")))).collect()
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
}
