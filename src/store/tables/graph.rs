//! Queries of the UKO graph tables (`uko_nodes`, `uko_node_views`,
//! `uko_edges`) and of the graph's generation (`graph_state`).
//!
//! Traversal reads one BFS frontier per query: the frontier's node keys are
//! bound as one `rarray` parameter and the edge table is searched through its
//! primary key (outgoing) or `uko_edges_by_target` (incoming), so a
//! projection touches only the nodes it reaches, whatever the graph's size.
//!
//! Every transaction that writes the graph begins with [`lock`] and ends
//! with [`bump`]: the generation tells a reader that planned changes from a
//! snapshot (ingest) whether the graph moved since. On PostgreSQL the lock
//! is the `graph_state` row's, so graph writers queue among themselves and
//! never behind writers of the decision log.

use std::collections::HashMap;

use serde::Serialize;

use super::decisions::count;
use super::kept;
use crate::decision::IdMap;
use crate::error::{Error, Result};
use crate::store::engine::{vals, Conn, Row, WriteTx};
use crate::uko::{Definition, Direction, FileLink, NodeKey, NodeRecord, NodeView, UkoEdge, UkoNode};

/// One BFS hop: the edges leaving (or entering) a whole frontier.
pub(crate) const EXPAND_OUT: &str = "SELECT source_id, target_id FROM uko_edges WHERE source_id IN rarray(?1)";
pub(crate) const EXPAND_OUT_REL: &str =
    "SELECT source_id, target_id FROM uko_edges WHERE source_id IN rarray(?1) AND relation IN rarray(?2)";
pub(crate) const EXPAND_IN: &str = "SELECT target_id, source_id FROM uko_edges WHERE target_id IN rarray(?1)";
pub(crate) const EXPAND_IN_REL: &str =
    "SELECT target_id, source_id FROM uko_edges WHERE target_id IN rarray(?1) AND relation IN rarray(?2)";
pub(crate) const RESOLVE: &str = "SELECT uri, node_id FROM uko_nodes WHERE uri IN rarray(?1)";
pub(crate) const RECORDS: &str = "SELECT node_id, uri, domain, resource_uri FROM uko_nodes WHERE node_id IN rarray(?1)";
pub(crate) const URIS: &str = "SELECT node_id, uri FROM uko_nodes WHERE node_id IN rarray(?1)";
pub(crate) const VIEWS: &str = "SELECT node_id, depth, content FROM uko_node_views
     WHERE node_id IN rarray(?1) AND depth <= ?2 ORDER BY node_id, depth";
const GENERATION: &str = "SELECT generation FROM graph_state WHERE id = 1";
const LOCK_GENERATION: &str = "SELECT generation FROM graph_state WHERE id = 1 FOR UPDATE";
const BUMP: &str = "UPDATE graph_state SET generation = generation + 1 WHERE id = 1";

/// Node and edge totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GraphCounts {
    pub nodes: u64,
    pub edges: u64,
}

/// A neighbour of a node, as [`crate::Store::neighbours`] lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Neighbour {
    pub uri: String,
    pub relation: String,
    pub weight: Option<f64>,
    /// `Outgoing` when the edge leaves the node asked about.
    pub direction: Direction,
}

/// The graph's generation as of `conn`'s snapshot.
#[cfg(test)]
pub(crate) fn generation(conn: &Conn) -> Result<i64> {
    conn.query_one(GENERATION, &[], |r| r.i64(0))
}

/// Begins writing the graph in `tx`: on PostgreSQL it locks the
/// generation's row until the commit. Returns the generation the writes
/// start from.
pub(crate) fn lock(tx: &WriteTx<'_>) -> Result<i64> {
    let sql = tx.dialect().pick(GENERATION, LOCK_GENERATION);
    tx.query_one(sql, &[], |r| r.i64(0))
}

/// Marks the graph changed by `tx` with a change that leaves the code
/// relations' resolution as it was (the history's links): a graph that
/// `ingest` resolved stays resolved. Returns the new generation.
#[cfg(feature = "ingest")]
pub(crate) fn bump_resolved(tx: &WriteTx<'_>, from: i64) -> Result<i64> {
    tx.execute(
        "UPDATE graph_state SET resolved = CASE WHEN resolved = generation THEN generation + 1 ELSE resolved END,
             generation = generation + 1 WHERE id = 1",
        &[],
    )?;
    Ok(from + 1)
}

/// Marks the graph changed by `tx`; returns the new generation.
pub(crate) fn bump(tx: &WriteTx<'_>, from: i64) -> Result<i64> {
    tx.execute(BUMP, &[])?;
    Ok(from + 1)
}

/// A view's depth as stored.
fn view_depth(r: &Row<'_>, i: usize, node: NodeKey) -> Result<u32> {
    let d = r.i64(i)?;
    u32::try_from(d).map_err(|_| Error::Corrupt {
        table: "uko_node_views",
        key: format!("node {node}"),
        reason: format!("a depth of {d}"),
    })
}

/// Inserts a node, or replaces the one of its URI; returns its key.
const UPSERT_NODE: &str = "INSERT INTO uko_nodes (uri, domain, kind, label, version, resource_uri, current_version)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (uri) DO UPDATE SET domain = excluded.domain, kind = excluded.kind, label = excluded.label,
         version = excluded.version, resource_uri = excluded.resource_uri, current_version = excluded.current_version
     RETURNING node_id";

/// `node` follows the model's rules and every text of it can be stored.
fn checked(tx: &WriteTx<'_>, node: &UkoNode) -> Result<()> {
    node.validate()?;
    for (field, text) in [("uri", &node.uri), ("domain", &node.domain), ("kind", &node.kind), ("label", &node.label)] {
        tx.storable(field, text)?;
    }
    for (field, text) in [("version", &node.version), ("resource_uri", &node.resource_uri)] {
        tx.storable(field, text.as_deref().unwrap_or_default())?;
    }
    for v in &node.views {
        tx.storable("views.content", &v.content)?;
    }
    Ok(())
}

/// Adds or replaces nodes and their views.
pub(crate) fn upsert_nodes(tx: &WriteTx<'_>, nodes: &[UkoNode]) -> Result<()> {
    let nodes: Vec<&UkoNode> = nodes.iter().collect();
    write_nodes(tx, &nodes, &mut HashMap::new()).map_err(|(_, e)| e)
}

/// What the kept staleness learns of written nodes: each one's URI and current version.
fn changes<'n>(nodes: impl Iterator<Item = &'n UkoNode>) -> Vec<(String, Option<String>)> {
    nodes.map(|n| (n.uri.clone(), Some(n.current_version()))).collect()
}

/// Adds edges (or updates their weight).
pub(crate) fn upsert_edges(tx: &WriteTx<'_>, edges: &[UkoEdge]) -> Result<()> {
    let edges: Vec<&UkoEdge> = edges.iter().collect();
    write_edges(tx, &edges, &mut HashMap::new()).map_err(|(_, e)| e)
}

/// [`RESOLVE`] on PostgreSQL: each URI looked up in the index. (`OFFSET 0`
/// keeps the planner, which sees hundreds of URIs, from scanning and hashing
/// the whole table for each batch instead: a graph import then slowed with
/// the graph's size, 6 ms a batch at 50,000 nodes.)
const RESOLVE_EACH: &str = "SELECT x.uri, n.node_id FROM unnest(CAST(?1 AS TEXT[])) AS x(uri) \
     CROSS JOIN LATERAL (SELECT node_id FROM uko_nodes WHERE uri = x.uri OFFSET 0) AS n";

/// The error of a batch's item, with the item's place in the batch.
pub(crate) type ItemError = (usize, Error);

/// The place of `e` in a batch whose items are checked before any is written: the first.
fn first(e: Error) -> ItemError {
    (0, e)
}

/// [`upsert_nodes`], naming the node that fails. On PostgreSQL the nodes
/// not stored yet go to the server in one batch (see `Conn::defer`), their
/// keys drawn from the table's sequence in one query; a node already stored
/// is replaced on its own, as on SQLite. Of a URI given twice, the last
/// node is the one stored, as one after the other would leave it. The keys
/// of the nodes written are added to `known` (on PostgreSQL).
pub(crate) fn write_nodes(
    tx: &WriteTx<'_>,
    nodes: &[&UkoNode],
    known: &mut HashMap<String, NodeKey>,
) -> std::result::Result<(), ItemError> {
    for (i, node) in nodes.iter().enumerate() {
        checked(tx, node).map_err(|e| (i, e))?;
    }
    if !tx.is_postgres() || nodes.len() < 2 {
        upsert_checked(tx, nodes.iter().copied()).map_err(first)?;
        return kept::nodes_changed(tx, &changes(nodes.iter().copied())).map_err(first);
    }
    let uris: Vec<String> = nodes.iter().map(|n| n.uri.clone()).collect();
    let stored = keys_of(tx, &uris).map_err(first)?;
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        last.insert(n.uri.as_str(), i);
    }
    let is_last = |i: usize, n: &UkoNode| last.get(n.uri.as_str()) == Some(&i);
    let fresh: Vec<&UkoNode> = nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| is_last(i, n) && !stored.contains_key(&n.uri))
        .map(|(_, n)| *n)
        .collect();
    let keys: Vec<NodeKey> = tx
        .query_vec(
            "SELECT nextval(pg_get_serial_sequence('uko_nodes', 'node_id')) FROM generate_series(1, ?1)",
            vals![fresh.len() as i64],
            |r| r.i64(0),
        )
        .map_err(first)?;
    for (node, key) in fresh.iter().zip(keys) {
        known.insert(node.uri.clone(), key);
        let current = node.current_version();
        let row =
            vals![key, &node.uri, &node.domain, &node.kind, &node.label, &node.version, &node.resource_uri, &current];
        tx.defer(
            "INSERT INTO uko_nodes (node_id, uri, domain, kind, label, version, resource_uri, current_version) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            0,
            row,
        )
        .map_err(first)?;
        for v in &node.views {
            tx.defer(
                "INSERT INTO uko_node_views (node_id, depth, content) VALUES (?1, ?2, ?3)",
                1,
                vals![key, v.depth, &v.content],
            )
            .map_err(first)?;
        }
    }
    let replaced = nodes.iter().enumerate().filter(|&(i, n)| is_last(i, n) && stored.contains_key(&n.uri));
    upsert_checked(tx, replaced.map(|(_, n)| *n)).map_err(first)?;
    // A stored node keeps its key when replaced.
    known.extend(stored);
    let written = nodes.iter().enumerate().filter(|&(i, n)| is_last(i, n)).map(|(_, n)| *n);
    kept::nodes_changed(tx, &changes(written)).map_err(first)
}

/// Adds or replaces checked nodes, a statement each.
fn upsert_checked<'n>(tx: &WriteTx<'_>, nodes: impl Iterator<Item = &'n UkoNode>) -> Result<()> {
    let mut upsert = tx.prepare(UPSERT_NODE)?;
    let mut clear = tx.prepare("DELETE FROM uko_node_views WHERE node_id = ?1")?;
    let mut view = tx.prepare("INSERT INTO uko_node_views (node_id, depth, content) VALUES (?1, ?2, ?3)")?;
    for node in nodes {
        let current = node.current_version();
        let id = upsert
            .query_opt(
                vals![&node.uri, &node.domain, &node.kind, &node.label, &node.version, &node.resource_uri, &current],
                |r| r.i64(0),
            )?
            .ok_or_else(|| Error::storage("the node upsert returned no key"))?;
        clear.execute(vals![id])?;
        for v in &node.views {
            view.execute(vals![id, v.depth, &v.content])?;
        }
    }
    Ok(())
}

/// Removes nodes, their views and every edge touching them; URIs that name
/// no node are passed over. Returns how many nodes went.
pub(crate) fn remove_nodes(tx: &WriteTx<'_>, uris: &[String]) -> Result<usize> {
    let gone = remove_nodes_only(tx, uris)?;
    let changes: Vec<(String, Option<String>)> = gone.iter().map(|u| (u.clone(), None)).collect();
    kept::nodes_changed(tx, &changes)?;
    Ok(gone.len())
}

/// [`remove_nodes`] without telling the kept staleness (the caller does):
/// returns the URIs of the nodes that went.
pub(crate) fn remove_nodes_only(tx: &WriteTx<'_>, uris: &[String]) -> Result<Vec<String>> {
    let found: Vec<(String, NodeKey)> =
        tx.query_vec(tx.dialect().pick(RESOLVE, RESOLVE_EACH), vals![uris], |r| Ok((r.string(0)?, r.i64(1)?)))?;
    let keys: Vec<NodeKey> = found.iter().map(|f| f.1).collect();
    for sql in [
        "DELETE FROM uko_edges WHERE source_id IN rarray(?1)",
        "DELETE FROM uko_edges WHERE target_id IN rarray(?1)",
        "DELETE FROM uko_node_views WHERE node_id IN rarray(?1)",
        "DELETE FROM uko_nodes WHERE node_id IN rarray(?1)",
    ] {
        tx.execute(sql, vals![&keys[..]])?;
    }
    Ok(found.into_iter().map(|f| f.0).collect())
}

/// [`upsert_edges`], naming the edge that fails. Each edge's ends are
/// looked up in one query; on PostgreSQL the edges not stored yet go to
/// the server in one batch, and one stored already has its weight set on
/// its own, as on SQLite. Of an edge given twice, the last weight stays.
/// The ends' keys are looked up where `known` lacks them, and added to it.
pub(crate) fn write_edges(
    tx: &WriteTx<'_>,
    edges: &[&UkoEdge],
    known: &mut HashMap<String, NodeKey>,
) -> std::result::Result<(), ItemError> {
    for (i, edge) in edges.iter().enumerate() {
        edge.validate().and_then(|()| tx.storable("relation", &edge.relation)).map_err(|e| (i, e))?;
    }
    let mut uris: Vec<String> = edges
        .iter()
        .flat_map(|e| [&e.source, &e.target])
        .filter(|uri| !known.contains_key(uri.as_str()))
        .cloned()
        .collect();
    uris.sort_unstable();
    uris.dedup();
    if !uris.is_empty() {
        known.extend(keys_of(tx, &uris).map_err(first)?);
    }
    let keys = &*known;
    let mut ends = Vec::with_capacity(edges.len());
    for (i, edge) in edges.iter().enumerate() {
        let key = |uri: &str| keys.get(uri).copied().ok_or_else(|| (i, Error::UnknownNode(uri.to_owned())));
        ends.push((key(&edge.source)?, key(&edge.target)?));
    }
    let mut upsert = tx
        .prepare(
            "INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (source_id, relation, target_id) DO UPDATE SET weight = excluded.weight",
        )
        .map_err(first)?;
    if !tx.is_postgres() || edges.len() < 2 {
        for (edge, (s, t)) in edges.iter().zip(&ends) {
            upsert.execute(vals![*s, *t, &edge.relation, edge.weight]).map_err(first)?;
        }
        return Ok(());
    }
    let (sources, targets): (Vec<i64>, Vec<i64>) = ends.iter().copied().unzip();
    let relations: Vec<String> = edges.iter().map(|e| e.relation.clone()).collect();
    let stored: std::collections::HashSet<(i64, String, i64)> = tx
        .query_vec(
            "SELECT x.s, x.r, x.t FROM unnest(CAST(?1 AS BIGINT[]), CAST(?2 AS TEXT[]), CAST(?3 AS BIGINT[])) \
             AS x(s, r, t) WHERE EXISTS (SELECT 1 FROM uko_edges e \
             WHERE e.source_id = x.s AND e.relation = x.r AND e.target_id = x.t OFFSET 0)",
            vals![&sources[..], &relations[..], &targets[..]],
            |r| Ok((r.i64(0)?, r.string(1)?, r.i64(2)?)),
        )
        .map_err(first)?
        .into_iter()
        .collect();
    let mut last: HashMap<(i64, &str, i64), usize> = HashMap::new();
    for (i, (edge, &(s, t))) in edges.iter().zip(&ends).enumerate() {
        last.insert((s, edge.relation.as_str(), t), i);
    }
    for (i, (edge, &(s, t))) in edges.iter().zip(&ends).enumerate() {
        if last.get(&(s, edge.relation.as_str(), t)) != Some(&i) {
            continue;
        }
        let row = vals![s, t, &edge.relation, edge.weight];
        if stored.contains(&(s, edge.relation.clone(), t)) {
            upsert.execute(row).map_err(first)?;
        } else {
            tx.defer("INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (?1, ?2, ?3, ?4)", 2, row)
                .map_err(first)?;
        }
    }
    Ok(())
}

/// The neighbours of the node `key` in `direction`, restricted to `relations` when given.
pub(crate) fn neighbours(
    conn: &Conn,
    key: NodeKey,
    direction: Direction,
    relations: Option<&[String]>,
) -> Result<Vec<Neighbour>> {
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
        conn.for_each(sql, vals![key], |r| {
            let n = Neighbour { uri: r.string(0)?, relation: r.string(1)?, weight: r.opt_f64(2)?, direction: dir };
            if relations.is_none_or(|rs| rs.contains(&n.relation)) {
                out.push(n);
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Which of these URIs name stored nodes, with their keys, in one query.
pub(crate) fn keys_of(conn: &Conn, uris: &[String]) -> Result<HashMap<String, NodeKey>> {
    let sql = conn.dialect().pick(RESOLVE, RESOLVE_EACH);
    Ok(conn.query_vec(sql, vals![uris], |r| Ok((r.string(0)?, r.i64(1)?)))?.into_iter().collect())
}

/// A stored node's key, URI, kind and version.
pub(crate) type NodeRow = (NodeKey, String, String, Option<String>);

/// The [`NodeRow`] of each of these URIs that names a stored node.
pub(crate) fn node_rows(conn: &Conn, uris: &[String]) -> Result<Vec<NodeRow>> {
    conn.query_vec("SELECT node_id, uri, kind, version FROM uko_nodes WHERE uri IN rarray(?1)", vals![uris], |r| {
        Ok((r.i64(0)?, r.string(1)?, r.string(2)?, r.opt_string(3)?))
    })
}

/// Node and edge totals.
pub(crate) fn counts(conn: &Conn) -> Result<GraphCounts> {
    conn.query_one("SELECT (SELECT count(*) FROM uko_nodes), (SELECT count(*) FROM uko_edges)", &[], |r| {
        Ok(GraphCounts { nodes: count(r, 0)?, edges: count(r, 1)? })
    })
}

/// Every node with its views, ordered by URI, streamed to `f`; run it in one read transaction.
pub(crate) fn for_each_node(conn: &Conn, mut f: impl FnMut(UkoNode) -> Result<()>) -> Result<()> {
    let mut current: Option<UkoNode> = None;
    conn.for_each_streamed(
        "SELECT n.uri, n.domain, n.kind, n.label, n.version, n.resource_uri, v.depth, v.content, n.node_id
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
                let view = NodeView { depth: view_depth(r, 6, r.i64(8)?)?, content: r.string(7)? };
                current.as_mut().expect("set above").views.push(view);
            }
            Ok(())
        },
    )?;
    if let Some(done) = current {
        f(done)?;
    }
    Ok(())
}

/// Every edge, ordered by source, relation and target URI, streamed to `f`.
pub(crate) fn for_each_edge(conn: &Conn, mut f: impl FnMut(UkoEdge) -> Result<()>) -> Result<()> {
    let sql = "SELECT source, target, relation, weight FROM uko_edge_list ORDER BY source, relation, target";
    conn.for_each_streamed(sql, &[], |r| {
        f(UkoEdge { source: r.string(0)?, target: r.string(1)?, relation: r.string(2)?, weight: r.opt_f64(3)? })
    })
}

/// The node keys of `uris`, in order; the first URI not stored is an error.
pub(crate) fn resolve(conn: &Conn, uris: &[String]) -> Result<Vec<NodeKey>> {
    let found = keys_of(conn, uris)?;
    uris.iter().map(|u| found.get(u).copied().ok_or_else(|| Error::UnknownNode(u.clone()))).collect()
}

/// The edges leaving (or entering) a whole frontier, as (frontier node, neighbour).
pub(crate) fn expand(
    conn: &Conn,
    frontier: &[NodeKey],
    direction: Direction,
    relations: Option<&[String]>,
) -> Result<Vec<(NodeKey, NodeKey)>> {
    let mut out = Vec::new();
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
            Some(rels) => conn.for_each(filtered, vals![frontier, rels], push)?,
            None => conn.for_each(plain, vals![frontier], push)?,
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The records of `keys`, in order, with their views when asked.
pub(crate) fn records(conn: &Conn, keys: &[NodeKey], with_views: bool) -> Result<Vec<NodeRecord>> {
    records_to_depth(conn, keys, with_views.then_some(u32::MAX))
}

/// The records of `keys`, in order, with their views up to `max_depth` (none without).
pub(crate) fn records_to_depth(conn: &Conn, keys: &[NodeKey], max_depth: Option<u32>) -> Result<Vec<NodeRecord>> {
    let at = positions(keys);
    let mut slots: Vec<Option<NodeRecord>> = Vec::with_capacity(keys.len());
    slots.resize_with(keys.len(), || None);
    conn.for_each(RECORDS, vals![keys], |r| {
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
    if let Some(max_depth) = max_depth {
        conn.for_each(VIEWS, vals![keys, i64::from(max_depth)], |r| {
            let key = r.i64(0)?;
            if let Some(rec) = at.get(&key).and_then(|&i| slots[i].as_mut()) {
                rec.views.push(NodeView { depth: view_depth(r, 1, key)?, content: r.string(2)? });
            }
            Ok(())
        })?;
    }
    in_order(slots, keys)
}

/// The URIs of `keys`, in order.
pub(crate) fn uris(conn: &Conn, keys: &[NodeKey]) -> Result<Vec<String>> {
    let at = positions(keys);
    let mut slots: Vec<Option<String>> = vec![None; keys.len()];
    conn.for_each(URIS, vals![keys], |r| {
        if let Some(&i) = at.get(&r.i64(0)?) {
            slots[i] = Some(r.string(1)?);
        }
        Ok(())
    })?;
    in_order(slots, keys)
}

/// The edges between the nodes of `files` and nodes of other files, summed
/// by pair of files, of one relation (`?2`) or of the code's own (every
/// relation but `contains` and `co_changed`, `?2` NULL): one query each
/// way, over the resource index.
pub(crate) const FILE_LINKS_OUT: &str = "SELECT s.resource_uri, t.resource_uri, sum(coalesce(e.weight, 1.0))
     FROM uko_nodes s JOIN uko_edges e ON e.source_id = s.node_id JOIN uko_nodes t ON t.node_id = e.target_id
     WHERE s.resource_uri IN rarray(?1)
       AND (e.relation = ?2 OR (?2 IS NULL AND e.relation NOT IN ('contains', 'co_changed')))
       AND t.resource_uri IS NOT NULL AND t.resource_uri <> s.resource_uri
     GROUP BY s.resource_uri, t.resource_uri";
pub(crate) const FILE_LINKS_IN: &str = "SELECT t.resource_uri, s.resource_uri, sum(coalesce(e.weight, 1.0))
     FROM uko_nodes t JOIN uko_edges e ON e.target_id = t.node_id JOIN uko_nodes s ON s.node_id = e.source_id
     WHERE t.resource_uri IN rarray(?1)
       AND (e.relation = ?2 OR (?2 IS NULL AND e.relation NOT IN ('contains', 'co_changed')))
       AND s.resource_uri IS NOT NULL AND s.resource_uri <> t.resource_uri
     GROUP BY t.resource_uri, s.resource_uri";

pub(crate) fn file_links(conn: &Conn, files: &[String], relation: Option<&str>) -> Result<Vec<FileLink>> {
    let mut out = Vec::new();
    for (sql, outgoing) in [(FILE_LINKS_OUT, true), (FILE_LINKS_IN, false)] {
        conn.for_each(sql, vals![files, relation], |r| {
            out.push(FileLink {
                file: r.string(0)?,
                other_file: r.string(1)?,
                outgoing,
                weight: r.opt_f64(2)?.unwrap_or(0.0),
            });
            Ok(())
        })?;
    }
    Ok(out)
}

/// The summed weight of the edges of a relation (`?2`) leaving each of the nodes named (`?1`).
pub(crate) const LINK_TOTALS: &str = "SELECT s.uri, sum(coalesce(e.weight, 1.0)) FROM uko_nodes s
     JOIN uko_edges e ON e.source_id = s.node_id WHERE s.uri IN rarray(?1) AND e.relation = ?2 GROUP BY s.uri";

pub(crate) fn link_totals(conn: &Conn, files: &[String], relation: &str) -> Result<HashMap<String, f64>> {
    Ok(conn
        .query_vec(LINK_TOTALS, vals![files, relation], |r| Ok((r.string(0)?, r.opt_f64(1)?.unwrap_or(0.0))))?
        .into_iter()
        .collect())
}

/// The class and function nodes of `files`, each file's by key (the order they were added).
pub(crate) fn definitions(conn: &Conn, files: &[String]) -> Result<Vec<Definition>> {
    conn.query_vec(
        "SELECT resource_uri, node_id, uri, kind FROM uko_nodes
         WHERE resource_uri IN rarray(?1) AND kind IN ('class', 'function') ORDER BY resource_uri, node_id",
        vals![files],
        |r| Ok(Definition { file: r.string(0)?, key: r.i64(1)?, uri: r.string(2)?, kind: r.string(3)? }),
    )
}

/// The files whose URIs start with `prefix` (nodes that are their own resource), at most `limit`.
pub(crate) fn files_under(conn: &Conn, prefix: &str, limit: usize) -> Result<Vec<String>> {
    // Every URI that starts with `prefix` sorts in [prefix, prefix + U+10FFFF).
    let end = format!("{prefix}\u{10FFFF}");
    conn.query_vec(
        "SELECT uri FROM uko_nodes WHERE resource_uri >= ?1 AND resource_uri < ?2 AND resource_uri = uri
         ORDER BY resource_uri LIMIT ?3",
        vals![prefix, end.as_str(), i64::try_from(limit).unwrap_or(i64::MAX)],
        |r| r.string(0),
    )
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

/// What `ingest` reads and writes beyond the other graph writers: the
/// graph's state, the ingested files and nodes, and edges by their ends.
#[cfg(feature = "ingest")]
pub(crate) mod code {
    use rustc_hash::FxHashMap;

    use super::{checked, UPSERT_NODE};
    use crate::error::{Error, Result};
    use crate::store::engine::{vals, Conn, Stmt, WriteTx};
    use crate::uko::{NodeKey, UkoNode};

    const STATE: &str = "SELECT generation, resolved FROM graph_state WHERE id = 1";
    const SET_RESOLVED: &str = "UPDATE graph_state SET resolved = ?1 WHERE id = 1";

    /// The graph's generation and the generation at which `ingest` last
    /// completed a plan (see `workflows::ingest`).
    pub(crate) fn state(conn: &Conn) -> Result<(i64, i64)> {
        conn.query_one(STATE, &[], |r| Ok((r.i64(0)?, r.i64(1)?)))
    }

    /// Records that `ingest` completed a plan at `generation`.
    pub(crate) fn set_resolved(tx: &WriteTx<'_>, generation: i64) -> Result<()> {
        tx.execute(SET_RESOLVED, vals![generation]).map(drop)
    }

    /// Each ingested file's stored version, by its `project://` URI.
    pub(crate) fn files(conn: &Conn) -> Result<FxHashMap<String, Option<String>>> {
        Ok(conn
            .query_vec(
                "SELECT uri, version FROM uko_nodes WHERE kind = 'file' AND resource_uri = uri AND domain = 'uko-code:'",
                &[],
                |r| Ok((r.string(0)?, r.opt_string(1)?)),
            )?
            .into_iter()
            .collect())
    }

    /// A stored node without its views: (uri, domain, kind, version, resource_uri).
    pub(crate) type NodeSummary = (String, String, String, Option<String>, Option<String>);

    /// Every node, without its views.
    pub(crate) fn nodes(conn: &Conn) -> Result<Vec<NodeSummary>> {
        conn.query_vec("SELECT uri, domain, kind, version, resource_uri FROM uko_nodes", &[], |r| {
            Ok((r.string(0)?, r.string(1)?, r.string(2)?, r.opt_string(3)?, r.opt_string(4)?))
        })
    }

    /// Every edge of the code relations between ingested nodes: (source, relation, target).
    pub(crate) fn edges(conn: &Conn) -> Result<Vec<(String, String, String)>> {
        conn.query_vec(
            "SELECT s.uri, e.relation, t.uri FROM uko_edges e
             JOIN uko_nodes s ON s.node_id = e.source_id JOIN uko_nodes t ON t.node_id = e.target_id
             WHERE s.resource_uri IS NOT NULL AND s.domain = 'uko-code:'
               AND t.resource_uri IS NOT NULL AND t.domain = 'uko-code:'
               AND e.relation IN ('contains', 'imports', 'calls', 'inherits', 'implements', 'references')",
            &[],
            |r| Ok((r.string(0)?, r.string(1)?, r.string(2)?)),
        )
    }

    /// The statements that write an ingest's nodes and edges, prepared once
    /// for a transaction; node keys are remembered as nodes are written, so
    /// an edge between written nodes looks neither end up.
    pub(crate) struct Writer<'c> {
        insert: Stmt<'c>,
        upsert: Stmt<'c>,
        clear: Stmt<'c>,
        view: Stmt<'c>,
        edge: Stmt<'c>,
        find: Stmt<'c>,
        /// The nodes written and removed, in order, for the kept staleness ([`Writer::finish`]).
        changed: Vec<(String, Option<String>)>,
    }

    impl<'c> Writer<'c> {
        pub(crate) fn new(tx: &'c WriteTx<'_>) -> Result<Self> {
            Ok(Writer {
                // SQLite: a plain insert binding the texts in place, its key
                // read back with last_insert_rowid (RETURNING costs about a
                // fifth of a first load's node writes); PostgreSQL returns it.
                insert: match tx.sqlite() {
                    Some(_) => tx.prepare_write(
                        "INSERT INTO uko_nodes (uri, domain, kind, label, version, resource_uri, current_version)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?,
                    None => tx.prepare(
                        "INSERT INTO uko_nodes (uri, domain, kind, label, version, resource_uri, current_version)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING node_id",
                    )?,
                },
                upsert: tx.prepare(UPSERT_NODE)?,
                clear: tx.prepare("DELETE FROM uko_node_views WHERE node_id = ?1")?,
                view: tx.prepare_write("INSERT INTO uko_node_views (node_id, depth, content) VALUES (?1, ?2, ?3)")?,
                edge: tx.prepare_write(
                    "INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (?1, ?2, ?3, 1.0)
                     ON CONFLICT (source_id, relation, target_id) DO UPDATE SET weight = excluded.weight",
                )?,
                find: tx.prepare("SELECT node_id FROM uko_nodes WHERE uri = ?1")?,
                changed: Vec::new(),
            })
        }

        /// Removes nodes (see [`super::remove_nodes`]); returns how many went.
        pub(crate) fn remove(&mut self, tx: &WriteTx<'_>, uris: &[String]) -> Result<usize> {
            let gone = super::remove_nodes_only(tx, uris)?;
            let n = gone.len();
            self.changed.extend(gone.into_iter().map(|u| (u, None)));
            Ok(n)
        }

        /// Tells the kept staleness what this writer changed: call before the commit.
        pub(crate) fn finish(self, tx: &WriteTx<'_>) -> Result<()> {
            let changed = self.changed;
            drop((self.insert, self.upsert, self.clear, self.view, self.edge, self.find));
            crate::store::tables::kept::nodes_changed(tx, &changed)
        }

        /// Writes `node` and its views: inserted when `fresh` (no node of its
        /// URI is stored), else replaced. Remembers its key in `keys`.
        pub(crate) fn node(
            &mut self,
            tx: &WriteTx<'_>,
            node: &UkoNode,
            fresh: bool,
            keys: &mut FxHashMap<String, NodeKey>,
        ) -> Result<()> {
            checked(tx, node)?;
            let current = node.current_version();
            let values =
                vals![&node.uri, &node.domain, &node.kind, &node.label, &node.version, &node.resource_uri, &current];
            let id = match (fresh, tx.sqlite()) {
                (true, Some(c)) => {
                    self.insert.execute(values)?;
                    c.last_insert_rowid()
                }
                _ => {
                    let statement = if fresh { &mut self.insert } else { &mut self.upsert };
                    statement
                        .query_opt(values, |r| r.i64(0))?
                        .ok_or_else(|| Error::storage("the node insert returned no key"))?
                }
            };
            if !fresh {
                self.clear.execute(vals![id])?;
            }
            for v in &node.views {
                self.view.execute(vals![id, v.depth, v.content.as_str()])?;
            }
            keys.insert(node.uri.clone(), id);
            self.changed.push((node.uri.clone(), Some(current)));
            Ok(())
        }

        /// Adds the edge `source -relation-> target` (both stored nodes) at weight 1.
        pub(crate) fn edge(
            &mut self,
            source: &str,
            relation: &str,
            target: &str,
            keys: &mut FxHashMap<String, NodeKey>,
        ) -> Result<()> {
            let (s, t) = (self.key(source, keys)?, self.key(target, keys)?);
            self.edge.execute(vals![s, t, relation]).map(drop)
        }

        fn key(&mut self, uri: &str, keys: &mut FxHashMap<String, NodeKey>) -> Result<NodeKey> {
            if let Some(&k) = keys.get(uri) {
                return Ok(k);
            }
            let k = self.find.query_opt(vals![uri], |r| r.i64(0))?.ok_or_else(|| Error::UnknownNode(uri.to_owned()))?;
            keys.insert(uri.to_owned(), k);
            Ok(k)
        }
    }

    /// Removes edges named by their ends' URIs and relation; those not stored are passed over.
    pub(crate) fn remove_edges<'a>(
        tx: &WriteTx<'_>,
        edges: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Result<usize> {
        let mut delete = tx.prepare(
            "DELETE FROM uko_edges WHERE source_id = (SELECT node_id FROM uko_nodes WHERE uri = ?1)
               AND relation = ?2 AND target_id = (SELECT node_id FROM uko_nodes WHERE uri = ?3)",
        )?;
        let mut n = 0;
        for (s, r, t) in edges {
            n += delete.execute(vals![s, r, t])?;
        }
        Ok(n)
    }
}

/// Up to five node URIs whose label or URI holds `name` (any case), shorter
/// first: what a person most likely meant by a focus that names no node.
/// Scans the nodes: for an error's hint, not a hot path.
const NEAR: &str =
    "SELECT uri FROM uko_nodes WHERE lower(label) = lower(?1) OR lower(uri) LIKE '%' || lower(?1) || '%' \
     ORDER BY lower(label) = lower(?1) DESC, length(uri), uri LIMIT 5";

/// See [`NEAR`].
pub(crate) fn near(conn: &Conn, name: &str) -> Result<Vec<String>> {
    conn.query_vec(NEAR, vals![name], |r| r.string(0))
}
