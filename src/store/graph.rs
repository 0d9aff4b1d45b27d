//! Queries of the UKO graph tables (`uko_nodes`, `uko_node_views`, `uko_edges`).
//!
//! Traversal reads one BFS frontier per query: the frontier's node keys are
//! bound as one `rarray` parameter and the edge table is searched through its
//! primary key (outgoing) or `uko_edges_by_target` (incoming), so a
//! projection touches only the nodes it reaches, whatever the graph's size.

use std::collections::HashMap;

use serde::Serialize;

use super::db::{vals, Conn, Row};
use super::decisions::count;
use super::Store;
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
pub(super) const URIS: &str = "SELECT node_id, uri FROM uko_nodes WHERE node_id IN rarray(?1)";
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

/// A view's depth as stored.
fn view_depth(r: &Row<'_>, i: usize) -> Result<u32> {
    let d = r.i64(i)?;
    u32::try_from(d).map_err(|_| Error::Corrupt(format!("a view depth of {d}; run `dstore check`")))
}

/// Adds or replaces nodes and their views inside a transaction.
pub(crate) fn upsert_nodes_in(conn: &Conn, nodes: &[UkoNode]) -> Result<()> {
    let mut upsert = conn.prepare(
        "INSERT INTO uko_nodes (uri, domain, kind, label, version, resource_uri) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (uri) DO UPDATE SET domain = excluded.domain, kind = excluded.kind, label = excluded.label,
             version = excluded.version, resource_uri = excluded.resource_uri
         RETURNING node_id",
    )?;
    let mut clear = conn.prepare("DELETE FROM uko_node_views WHERE node_id = ?1")?;
    let mut view = conn.prepare("INSERT INTO uko_node_views (node_id, depth, content) VALUES (?1, ?2, ?3)")?;
    for node in nodes {
        node.validate()?;
        if conn.is_postgres() {
            for (field, text) in
                [("uri", &node.uri), ("domain", &node.domain), ("kind", &node.kind), ("label", &node.label)]
            {
                super::db::no_nul(field, text)?;
            }
            for (field, text) in [("version", &node.version), ("resource_uri", &node.resource_uri)] {
                super::db::no_nul(field, text.as_deref().unwrap_or_default())?;
            }
            for v in &node.views {
                super::db::no_nul("views.content", &v.content)?;
            }
        }
        let id = upsert
            .query_opt(
                vals![&node.uri, &node.domain, &node.kind, &node.label, &node.version, &node.resource_uri],
                |r| r.i64(0),
            )?
            .ok_or_else(|| Error::Storage("the node upsert returned no key".into()))?;
        clear.execute(vals![id])?;
        for v in &node.views {
            view.execute(vals![id, v.depth, &v.content])?;
        }
    }
    Ok(())
}

/// Removes nodes, their views and every edge touching them, inside a transaction.
pub(crate) fn remove_nodes_in(conn: &Conn, uris: &[String]) -> Result<usize> {
    let keys: Vec<NodeKey> = conn.query_vec(RESOLVE, vals![uris], |r| r.i64(1))?;
    for sql in [
        "DELETE FROM uko_edges WHERE source_id IN rarray(?1)",
        "DELETE FROM uko_edges WHERE target_id IN rarray(?1)",
        "DELETE FROM uko_node_views WHERE node_id IN rarray(?1)",
        "DELETE FROM uko_nodes WHERE node_id IN rarray(?1)",
    ] {
        conn.execute(sql, vals![&keys[..]])?;
    }
    Ok(keys.len())
}

/// Adds edges (or updates their weight) inside a transaction.
pub(crate) fn upsert_edges_in(conn: &Conn, edges: &[UkoEdge]) -> Result<()> {
    let mut find = conn.prepare("SELECT node_id FROM uko_nodes WHERE uri = ?1")?;
    let mut upsert = conn.prepare(
        "INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (source_id, relation, target_id) DO UPDATE SET weight = excluded.weight",
    )?;
    for edge in edges {
        edge.validate()?;
        if conn.is_postgres() {
            super::db::no_nul("relation", &edge.relation)?;
        }
        let mut key = |uri: &str| -> Result<i64> {
            find.query_opt(vals![uri], |r| r.i64(0))?.ok_or_else(|| Error::UnknownNode(uri.to_owned()))
        };
        let (s, t) = (key(&edge.source)?, key(&edge.target)?);
        upsert.execute(vals![s, t, &edge.relation, edge.weight])?;
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
            self.conn.for_each(sql, vals![key], |r| {
                let n = Neighbour { uri: r.string(0)?, relation: r.string(1)?, weight: r.opt_f64(2)?, direction: dir };
                if relations.is_none_or(|rs| rs.contains(&n.relation)) {
                    out.push(n);
                }
                Ok(())
            })?;
        }
        Ok(out)
    }

    /// Which of these URIs name stored nodes, in one query.
    ///
    /// # Errors
    /// [`Error::Storage`] when the table cannot be read.
    pub fn known_uris(&self, uris: &[String]) -> Result<std::collections::HashSet<String>> {
        Ok(self.conn.query_vec(RESOLVE, vals![uris], |r| r.string(0))?.into_iter().collect())
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
        let mut states = HashMap::with_capacity(uris.len());
        let mut unversioned: Vec<(NodeKey, String, String)> = Vec::new();
        let rows = self.conn.query_vec(
            "SELECT node_id, uri, kind, version FROM uko_nodes WHERE uri IN rarray(?1)",
            vals![uris],
            |r| Ok((r.i64(0)?, r.string(1)?, r.string(2)?, r.opt_string(3)?)),
        )?;
        for row in rows {
            match row {
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
        self.conn.query_one("SELECT (SELECT count(*) FROM uko_nodes), (SELECT count(*) FROM uko_edges)", &[], |r| {
            Ok(GraphCounts { nodes: count(r, 0)?, edges: count(r, 1)? })
        })
    }

    /// Every node with its views, ordered by URI, streamed to `f`.
    ///
    /// # Errors
    /// The first error of reading or of `f`.
    pub fn for_each_node(&self, mut f: impl FnMut(UkoNode) -> Result<()>) -> Result<()> {
        let mut current: Option<UkoNode> = None;
        self.read_snapshot(|store| {
            store.conn.for_each_streamed(
                "SELECT n.uri, n.domain, n.kind, n.label, n.version, n.resource_uri, v.depth, v.content
             FROM uko_nodes n LEFT JOIN uko_node_views v ON v.node_id = n.node_id
             ORDER BY n.uri, v.depth",
                &[],
                |r| {
                    let uri = r.str(0)?;
                    if current.as_ref().is_none_or(|n| n.uri != uri) {
                        if let Some(done) = current.take() {
                            f(done)?;
                        }
                        let mut node = UkoNode::new(uri, r.str(1)?, r.str(2)?, r.str(3)?);
                        node.version = r.opt_string(4)?;
                        node.resource_uri = r.opt_string(5)?;
                        current = Some(node);
                    }
                    if r.opt_i64(6)?.is_some() {
                        let view = NodeView { depth: view_depth(r, 6)?, content: r.string(7)? };
                        current.as_mut().expect("set above").views.push(view);
                    }
                    Ok(())
                },
            )
        })?;
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
        let sql = "SELECT source, target, relation, weight FROM uko_edge_list ORDER BY source, relation, target";
        self.read_snapshot(|store| {
            store.conn.for_each_streamed(sql, &[], |r| {
                f(UkoEdge { source: r.string(0)?, target: r.string(1)?, relation: r.string(2)?, weight: r.opt_f64(3)? })
            })
        })
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
        let found: HashMap<String, NodeKey> =
            self.conn.query_vec(RESOLVE, vals![uris], |r| Ok((r.string(0)?, r.i64(1)?)))?.into_iter().collect();
        uris.iter().map(|u| found.get(u).copied().ok_or_else(|| Error::UnknownNode(u.clone()))).collect()
    }

    fn expand(
        &self,
        frontier: &[NodeKey],
        direction: Direction,
        relations: Option<&[String]>,
    ) -> Result<Vec<(NodeKey, NodeKey)>> {
        let mut out = Vec::new();
        let keys = vals![frontier];
        for (dir, plain, filtered) in
            [(Direction::Outgoing, EXPAND_OUT, EXPAND_OUT_REL), (Direction::Incoming, EXPAND_IN, EXPAND_IN_REL)]
        {
            if direction != Direction::Both && direction != dir {
                continue;
            }
            let push = |r: &Row<'_>| {
                out.push((r.i64(0)?, r.i64(1)?));
                Ok(())
            };
            match relations {
                Some(rels) => self.conn.for_each(filtered, vals![frontier, rels], push)?,
                None => self.conn.for_each(plain, keys, push)?,
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn records(&self, keys: &[NodeKey], with_views: bool) -> Result<Vec<NodeRecord>> {
        let at = positions(keys);
        let mut slots: Vec<Option<NodeRecord>> = Vec::with_capacity(keys.len());
        slots.resize_with(keys.len(), || None);
        self.conn.for_each(RECORDS, vals![keys], |r| {
            let key = r.i64(0)?;
            if let Some(&i) = at.get(&key) {
                slots[i] = Some(NodeRecord {
                    key,
                    uri: r.string(1)?,
                    domain: r.string(2)?,
                    resource_uri: r.opt_string(3)?,
                    views: Vec::new(),
                });
            }
            Ok(())
        })?;
        if with_views {
            self.conn.for_each(VIEWS, vals![keys], |r| {
                if let Some(rec) = at.get(&r.i64(0)?).and_then(|&i| slots[i].as_mut()) {
                    rec.views.push(NodeView { depth: view_depth(r, 1)?, content: r.string(2)? });
                }
                Ok(())
            })?;
        }
        in_order(slots, keys)
    }

    fn uris(&self, keys: &[NodeKey]) -> Result<Vec<String>> {
        let at = positions(keys);
        let mut slots: Vec<Option<String>> = vec![None; keys.len()];
        self.conn.for_each(URIS, vals![keys], |r| {
            if let Some(&i) = at.get(&r.i64(0)?) {
                slots[i] = Some(r.string(1)?);
            }
            Ok(())
        })?;
        in_order(slots, keys)
    }
}

/// Where each key was asked for: rows arrive in key order, and each goes to
/// its place (the map holds positions, not the rows, which are large to move).
fn positions(keys: &[NodeKey]) -> IdMap<NodeKey, usize> {
    keys.iter().enumerate().map(|(i, &k)| (k, i)).collect()
}

/// The rows found, in the order asked for; the first key without one is an error.
fn in_order<T>(slots: Vec<Option<T>>, keys: &[NodeKey]) -> Result<Vec<T>> {
    slots.into_iter().zip(keys).map(|(r, k)| r.ok_or_else(|| Error::UnknownNode(format!("node key {k}")))).collect()
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
    fn records_and_uris_come_in_the_order_asked_for() {
        use crate::uko::GraphSource;
        let s = store();
        let keys = s.resolve(&["c".into(), "a".into(), "b".into()]).unwrap();
        let records: Vec<String> = s.records(&keys, true).unwrap().into_iter().map(|r| r.uri).collect();
        assert_eq!(records, ["c", "a", "b"]);
        assert_eq!(s.uris(&keys).unwrap(), ["c", "a", "b"]);
        let missing = keys.iter().max().unwrap() + 100;
        for err in [s.uris(&[keys[0], missing]).unwrap_err(), s.records(&[missing], false).unwrap_err()] {
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
}
