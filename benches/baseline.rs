//! The floor: the fastest simple rusqlite program doing the same work as
//! the library, for the benchmarks' ratios (`benches/store.rs`) and, through
//! `examples/floor.rs`, for whole-process comparisons (`benches/cli.sh`).
//!
//! Decisions: one table with the decision's fields as columns and nested
//! fields as JSON text; each line is parsed into a typed struct that borrows
//! its strings from the line (nested fields stay raw JSON text), one
//! prepared insert, 10,000-row transactions, WAL, `synchronous=NORMAL`; no
//! validation, no links, no hashes, no extra indexes. Graph: integer-keyed
//! node, view and edge tables like the library's, a BFS that asks for one
//! frontier per query.
#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::rc::Rc;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub fn create(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    // The store's page size: it speeds up both sides (the floor more), so
    // the ratio measures the code, not a setting either could use.
    conn.pragma_update(None, "page_size", 16384).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())).unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    rusqlite::vtab::array::load_module(&conn).unwrap();
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS decisions (
            decision_id TEXT PRIMARY KEY, plan_id TEXT, parent_decision_id TEXT, sequence INTEGER,
            decision_type TEXT, chosen_option TEXT, rationale TEXT, confidence_score REAL,
            alternatives TEXT, context_snapshot TEXT, artifacts_produced TEXT, is_correction INTEGER,
            corrects_decision_id TEXT, superseded_by TEXT, downstream_decision_ids TEXT,
            downstream_plan_ids TEXT, metadata TEXT);
         CREATE TABLE IF NOT EXISTS nodes (node_id INTEGER PRIMARY KEY, uri TEXT NOT NULL UNIQUE,
            domain TEXT, kind TEXT, label TEXT);
         CREATE TABLE IF NOT EXISTS views (node_id INTEGER, depth INTEGER, content TEXT,
            PRIMARY KEY (node_id, depth)) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS edges (source_id INTEGER, target_id INTEGER, relation TEXT, weight REAL,
            PRIMARY KEY (source_id, relation, target_id)) WITHOUT ROWID;",
    )
    .unwrap();
    conn
}

pub fn open(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    rusqlite::vtab::array::load_module(&conn).unwrap();
    conn
}

/// One decision line, borrowing from the line where JSON escapes allow.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    decision_id: Cow<'a, str>,
    #[serde(borrow)]
    plan_id: Cow<'a, str>,
    #[serde(borrow)]
    parent_decision_id: Option<Cow<'a, str>>,
    sequence: i64,
    #[serde(borrow)]
    decision_type: Cow<'a, str>,
    #[serde(borrow)]
    chosen_option: Cow<'a, str>,
    #[serde(borrow)]
    rationale: Cow<'a, str>,
    confidence_score: Option<f64>,
    #[serde(borrow)]
    alternatives: &'a RawValue,
    #[serde(borrow)]
    context_snapshot: &'a RawValue,
    #[serde(borrow)]
    artifacts_produced: &'a RawValue,
    is_correction: bool,
    #[serde(borrow)]
    corrects_decision_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    superseded_by: Option<Cow<'a, str>>,
    #[serde(borrow)]
    downstream_decision_ids: &'a RawValue,
    #[serde(borrow)]
    downstream_plan_ids: &'a RawValue,
    #[serde(borrow)]
    metadata: &'a RawValue,
}

/// Runs `f` on every non-blank line, committing every 10,000 calls.
fn each_line(conn: &mut Connection, mut reader: impl BufRead, mut f: impl FnMut(&Connection, &str)) -> usize {
    let mut n = 0;
    let mut tx = conn.transaction().unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        f(&tx, text);
        n += 1;
        if n % 10_000 == 0 {
            tx.commit().unwrap();
            tx = conn.transaction().unwrap();
        }
    }
    tx.commit().unwrap();
    n
}

/// Reads decision JSONL and inserts every line; returns the row count.
pub fn import(conn: &mut Connection, reader: impl BufRead) -> usize {
    each_line(conn, reader, |tx, text| {
        let d: Line<'_> = serde_json::from_str(text).unwrap();
        let mut stmt = tx
            .prepare_cached("INSERT INTO decisions VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)")
            .unwrap();
        stmt.execute(params![
            d.decision_id,
            d.plan_id,
            d.parent_decision_id,
            d.sequence,
            d.decision_type,
            d.chosen_option,
            d.rationale,
            d.confidence_score,
            d.alternatives.get(),
            d.context_snapshot.get(),
            d.artifacts_produced.get(),
            d.is_correction,
            d.corrects_decision_id,
            d.superseded_by,
            d.downstream_decision_ids.get(),
            d.downstream_plan_ids.get(),
            d.metadata.get(),
        ])
        .unwrap();
    })
}

/// A plan read for its rows: the index the library's key gives it.
pub fn index_plans(conn: &Connection) {
    conn.execute_batch("CREATE INDEX IF NOT EXISTS decisions_plan ON decisions (plan_id, sequence)").unwrap();
}

#[derive(Deserialize)]
pub struct Alternative {
    pub option: String,
    pub rationale: Option<String>,
}

#[derive(Deserialize)]
pub struct Resource {
    pub resource_id: String,
    pub resource_type: Option<String>,
    pub version: Option<String>,
}

#[derive(Deserialize)]
pub struct Snapshot {
    pub hash: String,
    pub resources: Vec<Resource>,
    pub actor_state_ref: Option<String>,
}

#[derive(Deserialize)]
pub struct Artifact {
    pub artifact_path: String,
    pub content_hash: Option<String>,
}

/// One row as the floor reads it: scalars plus typed JSON columns.
pub struct Row {
    pub decision_id: String,
    pub parent: Option<String>,
    pub sequence: i64,
    pub decision_type: String,
    pub chosen_option: String,
    pub rationale: String,
    pub confidence: Option<f64>,
    pub alternatives: Vec<Alternative>,
    pub snapshot: Snapshot,
    pub artifacts: Vec<Artifact>,
    pub corrects: Option<String>,
    pub superseded_by: Option<String>,
    pub downstream_decisions: Vec<String>,
    pub downstream_plans: Vec<String>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Reads the rows of one plan into typed values (the work of materialising
/// decisions, without validation or history).
pub fn read_plan(conn: &Connection, plan: &str) -> Vec<Row> {
    let mut stmt = conn.prepare_cached("SELECT * FROM decisions WHERE plan_id = ?1 ORDER BY sequence").unwrap();
    let rows = stmt
        .query_map([plan], |r| {
            fn j<T: serde::de::DeserializeOwned>(r: &rusqlite::Row<'_>, i: usize) -> T {
                serde_json::from_str(r.get_ref(i).unwrap().as_str().unwrap()).unwrap()
            }
            Ok(Row {
                decision_id: r.get(0)?,
                parent: r.get(2)?,
                sequence: r.get(3)?,
                decision_type: r.get(4)?,
                chosen_option: r.get(5)?,
                rationale: r.get(6)?,
                confidence: r.get(7)?,
                alternatives: j(r, 8),
                snapshot: j(r, 9),
                artifacts: j(r, 10),
                corrects: r.get(12)?,
                superseded_by: r.get(13)?,
                downstream_decisions: j(r, 14),
                downstream_plans: j(r, 15),
                metadata: j(r, 16),
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// One decision as the tree floor writes it: the fields `dstore tree --format json` shows.
#[derive(Serialize)]
struct TreeLine<'a> {
    decision_id: &'a str,
    parent_decision_id: Option<&'a str>,
    decision_type: &'a str,
    sequence: i64,
    confidence_score: Option<f64>,
    chosen_option: &'a str,
    corrects_decision_id: Option<&'a str>,
    superseded_by: Option<&'a str>,
}

/// Writes every decision of a plan as a JSON line, in sequence order; returns the count.
pub fn write_plan(conn: &Connection, plan: &str, out: &mut impl Write) -> usize {
    let mut stmt = conn
        .prepare_cached(
            "SELECT decision_id, parent_decision_id, decision_type, sequence, confidence_score, chosen_option,
                    corrects_decision_id, superseded_by FROM decisions WHERE plan_id = ?1 ORDER BY sequence",
        )
        .unwrap();
    let mut rows = stmt.query([plan]).unwrap();
    let mut n = 0;
    while let Some(r) = rows.next().unwrap() {
        let text = |i: usize| r.get_ref(i).unwrap().as_str_or_null().unwrap();
        let line = TreeLine {
            decision_id: text(0).unwrap(),
            parent_decision_id: text(1),
            decision_type: text(2).unwrap(),
            sequence: r.get(3).unwrap(),
            confidence_score: r.get(4).unwrap(),
            chosen_option: text(5).unwrap(),
            corrects_decision_id: text(6),
            superseded_by: text(7),
        };
        serde_json::to_writer(&mut *out, &line).unwrap();
        out.write_all(b"\n").unwrap();
        n += 1;
    }
    n
}

#[derive(Deserialize)]
struct NodeLine<'a> {
    #[serde(borrow)]
    uri: Cow<'a, str>,
    #[serde(borrow)]
    domain: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    label: Cow<'a, str>,
    #[serde(borrow, default)]
    views: Vec<ViewLine<'a>>,
}

#[derive(Deserialize)]
struct ViewLine<'a> {
    depth: i64,
    #[serde(borrow)]
    content: Cow<'a, str>,
}

#[derive(Deserialize)]
struct EdgeLine<'a> {
    #[serde(borrow)]
    source: Cow<'a, str>,
    #[serde(borrow)]
    target: Cow<'a, str>,
    #[serde(borrow)]
    relation: Cow<'a, str>,
    weight: Option<f64>,
}

/// Reads node and edge JSONL; returns (nodes, edges).
pub fn import_graph(conn: &mut Connection, nodes: impl BufRead, edges: impl BufRead) -> (usize, usize) {
    let n = each_line(conn, nodes, |tx, text| {
        let node: NodeLine<'_> = serde_json::from_str(text).unwrap();
        let id: i64 = tx
            .prepare_cached("INSERT INTO nodes (uri, domain, kind, label) VALUES (?1, ?2, ?3, ?4) RETURNING node_id")
            .unwrap()
            .query_row(params![node.uri, node.domain, node.kind, node.label], |r| r.get(0))
            .unwrap();
        let mut view = tx.prepare_cached("INSERT INTO views VALUES (?1, ?2, ?3)").unwrap();
        for v in &node.views {
            view.execute(params![id, v.depth, v.content]).unwrap();
        }
    });
    let e = each_line(conn, edges, |tx, text| {
        let edge: EdgeLine<'_> = serde_json::from_str(text).unwrap();
        tx.prepare_cached(
            "INSERT INTO edges SELECT s.node_id, t.node_id, ?3, ?4 FROM nodes s, nodes t WHERE s.uri = ?1 AND t.uri = ?2",
        )
        .unwrap()
        .execute(params![edge.source, edge.target, edge.relation, edge.weight])
        .unwrap();
    });
    (n, e)
}

/// One node as the projection floor writes it.
#[derive(Serialize)]
struct NodeOut<'a> {
    uri: &'a str,
    distance: u32,
    resolved_depth: u32,
}

/// Breadth-first over outgoing edges from `focus`, `breadth` hops, one query
/// per frontier; writes each node reached as a JSON line with the depth the
/// gradient gives it (`round(full × (1 − distance / breadth))`); returns the count.
pub fn project(conn: &Connection, focus: &str, breadth: u32, full: u32, out: &mut impl Write) -> usize {
    let start: i64 = conn.query_row("SELECT node_id FROM nodes WHERE uri = ?1", [focus], |r| r.get(0)).unwrap();
    let mut seen: HashMap<i64, u32> = HashMap::from([(start, 0)]);
    let mut order = vec![start];
    let mut frontier = vec![start];
    let mut expand = conn.prepare("SELECT target_id FROM edges WHERE source_id IN rarray(?1)").unwrap();
    for hop in 1..=breadth {
        let ids = Rc::new(frontier.iter().map(|&i| SqlValue::Integer(i)).collect::<Vec<_>>());
        let mut next = Vec::new();
        let mut rows = expand.query([ids]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let t: i64 = r.get(0).unwrap();
            if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(t) {
                e.insert(hop);
                next.push(t);
            }
        }
        order.extend(&next);
        frontier = next;
    }
    let mut uris = conn.prepare("SELECT node_id, uri FROM nodes WHERE node_id IN rarray(?1)").unwrap();
    let ids = Rc::new(order.iter().map(|&i| SqlValue::Integer(i)).collect::<Vec<_>>());
    let mut by_id: HashMap<i64, String> = HashMap::with_capacity(order.len());
    let mut rows = uris.query([ids]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        by_id.insert(r.get(0).unwrap(), r.get(1).unwrap());
    }
    for id in &order {
        let distance = seen[id];
        let resolved_depth = if breadth == 0 {
            full
        } else {
            (f64::from(full) * (1.0 - f64::from(distance) / f64::from(breadth))).round_ties_even() as u32
        };
        serde_json::to_writer(&mut *out, &NodeOut { uri: &by_id[id], distance, resolved_depth }).unwrap();
        out.write_all(b"\n").unwrap();
    }
    order.len()
}
