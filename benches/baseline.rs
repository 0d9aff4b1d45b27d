//! The floor: a bare rusqlite implementation of the same work. One table with
//! the decision's fields as columns and nested fields as JSON text, a
//! prepared insert in transactions of 10,000 rows, WAL; no validation, no
//! links, no extra indexes.

use std::io::BufRead;
use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::Value;

pub fn create(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())).unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS decisions (
            decision_id TEXT PRIMARY KEY, plan_id TEXT, parent_decision_id TEXT, sequence INTEGER,
            decision_type TEXT, chosen_option TEXT, rationale TEXT, confidence_score REAL,
            alternatives TEXT, context_snapshot TEXT, artifacts_produced TEXT, is_correction INTEGER,
            corrects_decision_id TEXT, superseded_by TEXT, downstream_decision_ids TEXT,
            downstream_plan_ids TEXT, metadata TEXT)",
    )
    .unwrap();
    conn
}

fn text(v: &Value) -> Option<&str> {
    v.as_str()
}

/// Reads JSONL and inserts every line; returns the row count.
pub fn import(conn: &mut Connection, reader: impl BufRead) -> usize {
    let mut n = 0;
    let mut tx = conn.transaction().unwrap();
    for line in reader.lines() {
        let line = line.unwrap();
        if line.trim().is_empty() {
            continue;
        }
        let d: Value = serde_json::from_str(&line).unwrap();
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO decisions VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)",
                )
                .unwrap();
            stmt.execute(params![
                text(&d["decision_id"]),
                text(&d["plan_id"]),
                text(&d["parent_decision_id"]),
                d["sequence"].as_i64(),
                text(&d["decision_type"]),
                text(&d["chosen_option"]),
                text(&d["rationale"]),
                d["confidence_score"].as_f64(),
                d["alternatives"].to_string(),
                d["context_snapshot"].to_string(),
                d["artifacts_produced"].to_string(),
                d["is_correction"].as_bool(),
                text(&d["corrects_decision_id"]),
                text(&d["superseded_by"]),
                d["downstream_decision_ids"].to_string(),
                d["downstream_plan_ids"].to_string(),
                d["metadata"].to_string(),
            ])
            .unwrap();
        }
        n += 1;
        if n % 10_000 == 0 {
            tx.commit().unwrap();
            tx = conn.transaction().unwrap();
        }
    }
    tx.commit().unwrap();
    n
}

/// One row as the baseline reads it: scalars plus parsed JSON columns.
#[allow(dead_code)]
pub struct Row {
    pub decision_id: String,
    pub parent: Option<String>,
    pub sequence: i64,
    pub decision_type: String,
    pub chosen_option: String,
    pub rationale: String,
    pub confidence: Option<f64>,
    pub json: [Value; 6],
    pub corrects: Option<String>,
    pub superseded_by: Option<String>,
}

/// Reads the rows of one plan, parsing the JSON columns (the same work as
/// materialising decisions, without validation or history).
pub fn read_plan(conn: &Connection, plan: &str) -> Vec<Row> {
    let mut stmt = conn.prepare_cached("SELECT * FROM decisions WHERE plan_id = ?1").unwrap();
    let rows = stmt
        .query_map([plan], |r| {
            let j =
                |i: usize| -> rusqlite::Result<Value> { Ok(serde_json::from_str(&r.get::<_, String>(i)?).unwrap()) };
            Ok(Row {
                decision_id: r.get(0)?,
                parent: r.get(2)?,
                sequence: r.get(3)?,
                decision_type: r.get(4)?,
                chosen_option: r.get(5)?,
                rationale: r.get(6)?,
                confidence: r.get(7)?,
                json: [j(8)?, j(9)?, j(10)?, j(14)?, j(15)?, j(16)?],
                corrects: r.get(12)?,
                superseded_by: r.get(13)?,
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}
