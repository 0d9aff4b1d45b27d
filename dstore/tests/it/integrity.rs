//! The decision log as an audit trail: tampering is refused or detected,
//! `check` reports instead of failing, closed pipes are quiet, migrations
//! are verified, graph imports are atomic, and a million-deep chain renders.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use decision_store::calibration::{calibrate, CalibrationOptions, GroupBy};
use decision_store::stale::StaleOptions;
use decision_store::store::{Anchor, AnchorScope, ImportOptions, ProblemKind};
use decision_store::testing::{PlanBuilder, TempStore};
use decision_store::{DecisionType, Error, PlanId, Store};
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{dstore, ok, s};

/// A ULID of the given prefix and number (Crockford base32).
fn ulid(prefix: &str, mut n: u64) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut tail = [b'0'; 16];
    for c in tail.iter_mut().rev() {
        *c = ALPHABET[(n % 32) as usize];
        n /= 32;
    }
    format!("{prefix}{}", std::str::from_utf8(&tail).unwrap())
}

const PLAN: &str = "01JD0000000000000000000000";

/// A plan in which every decision is the child of the one before and
/// corrects it: the tree is `n` levels deep and one correction chain `n` long.
fn chain_file(path: &Path, n: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..n {
        let id = ulid("01JD000001", i);
        let line = if i == 0 {
            format!(
                r#"{{"decision_id":"{id}","plan_id":"{PLAN}","sequence":0,"decision_type":"prompt_definition","chosen_option":"step 0"}}"#
            )
        } else {
            let prev = ulid("01JD000001", i - 1);
            format!(
                r#"{{"decision_id":"{id}","plan_id":"{PLAN}","parent_decision_id":"{prev}","corrects_decision_id":"{prev}","is_correction":true,"sequence":{i},"decision_type":"error_recovery","chosen_option":"step {i}"}}"#
            )
        };
        writeln!(f, "{line}").unwrap();
    }
    f.flush().unwrap();
}

/// Checks that `text` is one balanced JSON document without a recursive
/// parser (serde_json stops at 128 levels); returns its deepest nesting.
fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.checked_sub(1).expect("a closing bracket without an opening one"),
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced JSON");
    assert!(!in_string, "an unterminated string");
    deepest
}

#[test]
fn a_million_deep_chain_renders_in_every_command() {
    const N: u64 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let (file, db) = (dir.path().join("chain.jsonl"), dir.path().join("chain.db"));
    chain_file(&file, N);
    ok(&["import", s(&db), s(&file)]);
    std::fs::remove_file(&file).unwrap();
    let (first, middle, last) = (ulid("01JD000001", 0), ulid("01JD000001", N / 2), ulid("01JD000001", N - 1));
    let db = s(&db);
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("text", vec!["tree", db, PLAN]),
        ("json", vec!["tree", db, PLAN, "--format", "json"]),
        ("jsonl", vec!["tree", db, PLAN, "--format", "jsonl"]),
        ("dot", vec!["tree", db, PLAN, "--format", "dot"]),
        ("mermaid", vec!["tree", db, PLAN, "--format", "mermaid"]),
        ("effective", vec!["tree", db, PLAN, "--effective"]),
        ("effective json", vec!["tree", db, PLAN, "--effective", "--format", "json"]),
        ("show", vec!["show", db, &middle, "--format", "json"]),
        ("chain", vec!["chain", db, &first, "--format", "json"]),
        ("impact", vec!["impact", db, &first, "--format", "json"]),
        ("check", vec!["check", db]),
    ];
    // Two at a time: the machine has two cores.
    let outputs: Vec<(&str, String)> = std::thread::scope(|scope| {
        let mut out = Vec::new();
        for pair in runs.chunks(2) {
            let handles: Vec<_> = pair.iter().map(|(name, args)| (*name, scope.spawn(move || ok(args)))).collect();
            out.extend(handles.into_iter().map(|(name, h)| (name, h.join().unwrap())));
        }
        out
    });
    let get = |name: &str| &outputs.iter().find(|(n, _)| *n == name).unwrap().1;

    let text = get("text");
    assert_eq!(text.lines().count() as u64, N + 1, "a header and one line a decision");
    let last_line = text.lines().last().unwrap();
    assert!(last_line.contains(&format!("#{}", N - 1)) && last_line.starts_with('⋯'), "{last_line}");
    assert!(text.lines().all(|l| l.chars().count() < 200), "indentation is capped");

    let json = get("json");
    assert_eq!(
        json_depth(json) as u64,
        2 * N + 2,
        "the document and its roots, then an object and a children array per level"
    );
    assert_eq!(json.matches("\"decision_id\"").count() as u64, N);

    // Flat lines: every JSON reader takes them, however deep the plan.
    let jsonl = get("jsonl");
    assert_eq!(jsonl.lines().count() as u64, N);
    let last_line: Value = serde_json::from_str(jsonl.lines().last().unwrap()).unwrap();
    assert_eq!(last_line["level"], N - 1);
    assert_eq!(last_line["parent"], ulid("01JD000001", N - 2).as_str());
    assert_eq!(last_line["decision_id"], last.as_str());

    let dot = get("dot");
    assert_eq!(dot.lines().filter(|l| l.contains("[label=")).count() as u64, N);
    assert_eq!(dot.lines().filter(|l| l.contains("\" -> \"") && !l.contains("style=")).count() as u64, N - 1);
    let mermaid = get("mermaid");
    assert_eq!(mermaid.lines().filter(|l| l.contains(" --> ")).count() as u64, N - 1);

    // Only the last correction stands: it moves up to the top level.
    let effective = get("effective");
    assert_eq!(effective.lines().count(), 2, "{effective}");
    assert!(effective.lines().nth(1).unwrap().starts_with("└─ error_recovery #999999"), "{effective}");
    let effective: Value = serde_json::from_str(get("effective json")).unwrap();
    assert_eq!(effective["roots"][0]["decision_id"], last.as_str());

    let show: Value = serde_json::from_str(get("show")).unwrap();
    assert_eq!(show["correction_chain"].as_array().unwrap().len() as u64, N);
    assert_eq!(show["effective"], last.as_str());
    let chain: Value = serde_json::from_str(get("chain")).unwrap();
    assert_eq!(chain["corrections"].as_array().unwrap().len() as u64, N);
    let impact: Value = serde_json::from_str(get("impact")).unwrap();
    assert_eq!(impact["descendants"].as_array().unwrap().len() as u64, N - 1);
    assert!(get("check").starts_with("ok"));
}

// ------------------------------------------------------------------ tampering

/// A store with two plans, a correction and a supersession; returns its path and one decision id.
fn sample(dir: &Path) -> (PathBuf, String) {
    let path = dir.join("audit.db");
    let mut store = Store::open(&path).unwrap();
    for plan in 0..2 {
        let built = PlanBuilder::new()
            .root("goal")
            .child("pick", "goal", DecisionType::StrategyChoice)
            .child("run", "pick", DecisionType::ToolInvocation)
            .correction("rerun", "run")
            .child("alt", "goal", DecisionType::StrategyChoice)
            .supersede("pick", "alt")
            .build()
            .unwrap();
        store.insert_many(built.decisions()).unwrap();
        if plan == 1 {
            // A link recorded in a later transaction than its decisions.
            store.supersede(built.id("rerun"), built.id("alt")).unwrap();
            return (path, built.id("run").to_string());
        }
    }
    unreachable!()
}

fn raw(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

fn problems_of(path: &Path) -> Vec<(ProblemKind, Option<String>)> {
    Store::open_read_only(path).unwrap().check().unwrap().into_iter().map(|p| (p.kind, p.decision_id)).collect()
}

#[test]
fn a_fresh_store_checks_clean_and_updates_and_deletes_are_refused_by_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = sample(dir.path());
    assert_eq!(problems_of(&path), vec![]);
    let conn = raw(&path);
    for sql in [
        "INSERT OR REPLACE INTO supersessions (decision_id, superseded_by, plan_id) SELECT decision_id, superseded_by, plan_id FROM supersessions LIMIT 1",
        "UPDATE decisions SET rationale = 'nothing to see' WHERE decision_id = ?1",
        "DELETE FROM decisions WHERE decision_id = ?1",
        "UPDATE supersessions SET superseded_by = decision_id",
        "DELETE FROM supersessions",
        "DELETE FROM plans",
    ] {
        let result = if sql.contains("?1") { conn.execute(sql, [&id]) } else { conn.execute(sql, []) };
        match result {
            Err(e) => assert!(e.to_string().contains("append-only"), "{sql}: {e}"),
            Ok(_) => panic!("{sql}: accepted"),
        }
    }
    drop(conn);
    assert_eq!(problems_of(&path), vec![]);
    assert_eq!(Store::open_read_only(&path).unwrap().digest().unwrap().store.entries, 13);
}

#[test]
fn rows_changed_around_the_triggers_are_named_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = sample(dir.path());
    let conn = raw(&path);
    // INSERT OR REPLACE deletes without firing the delete trigger. Every
    // column but the text is kept, hashes included: only the content hash can tell.
    let replaced = conn
        .execute(
            "INSERT OR REPLACE INTO decisions SELECT decision_id, plan_id, parent_decision_id, sequence, decision_type,
                 'rewritten by hand', rationale, confidence_score, alternatives, context_snapshot, artifacts_produced,
                 corrects_decision_id, downstream_decision_ids, downstream_plan_ids, metadata,
                 depth, content_hash, chain_index, chain_hash, log_index
             FROM decisions WHERE decision_id = ?1",
            [&id],
        )
        .unwrap();
    assert_eq!(replaced, 1);
    drop(conn);
    assert_eq!(problems_of(&path), vec![(ProblemKind::HashMismatch, Some(id.clone()))]);
    let r = dstore(&["check", s(&path)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.contains("hash_mismatch") && r.stdout.contains(&id), "{}", r.stdout);

    // With the update trigger dropped, an UPDATE is named the same way.
    let (path2, id2) = sample(&dir.path().join("second").tap_create());
    let conn = raw(&path2);
    conn.execute_batch("DROP TRIGGER decisions_no_update;").unwrap();
    conn.execute("UPDATE decisions SET confidence_score = 0.99 WHERE decision_id = ?1", [&id2]).unwrap();
    drop(conn);
    assert_eq!(problems_of(&path2), vec![(ProblemKind::HashMismatch, Some(id2.clone()))]);

    // A new content hash without a new chain hash breaks the chain at that row.
    let conn = raw(&path2);
    conn.execute(
        "UPDATE decisions SET content_hash = (SELECT content_hash FROM decisions d2 WHERE d2.decision_id <> decisions.decision_id LIMIT 1) WHERE decision_id = ?1",
        [&id2],
    )
    .unwrap();
    drop(conn);
    let kinds = problems_of(&path2);
    assert!(kinds.contains(&(ProblemKind::ChainBroken, Some(id2.clone()))), "{kinds:?}");

    // A deleted decision leaves a gap, and the recorded head no longer matches.
    let (path3, _) = sample(&dir.path().join("third").tap_create());
    let conn = raw(&path3);
    conn.execute_batch("DROP TRIGGER decisions_no_delete; PRAGMA foreign_keys = OFF;").unwrap();
    let last: String = conn
        .query_row("SELECT decision_id FROM decisions ORDER BY log_index DESC LIMIT 1 OFFSET 3", [], |r| r.get(0))
        .unwrap();
    conn.execute("DELETE FROM decisions WHERE decision_id = ?1", [&last]).unwrap();
    drop(conn);
    let kinds = problems_of(&path3);
    assert!(kinds.iter().any(|(k, _)| *k == ProblemKind::ChainBroken), "{kinds:?}");
    assert_eq!(dstore(&["check", s(&path3)]).code, 1);
}

trait TapCreate {
    fn tap_create(self) -> Self;
}

impl TapCreate for PathBuf {
    fn tap_create(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

#[test]
fn an_anchored_digest_detects_a_full_rewrite_and_survives_appends() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = sample(dir.path());
    let printed = ok(&["digest", s(&path)]);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 3, "two plans and the store: {printed}");
    let store_anchor = lines[2].to_owned();
    assert!(store_anchor.starts_with("store:13:"), "{store_anchor}");
    let plan_anchor = lines[0].to_owned();
    let plan_id = plan_anchor.split(':').next().unwrap().to_owned();
    assert_eq!(ok(&["digest", s(&path), "--plan", &plan_id]).trim(), plan_anchor);

    // Appends keep every earlier anchor valid.
    let mut store = Store::open(&path).unwrap();
    let plan = PlanId::parse(&plan_id).unwrap();
    let root = store.plan_decisions(plan).unwrap()[0].decision_id();
    let extra = decision_store::Decision::builder(plan, DecisionType::UserIntervention, 99)
        .parent(root)
        .chosen_option("later")
        .build()
        .unwrap();
    store.insert(&extra).unwrap();
    drop(store);
    let r = dstore(&["check", s(&path), "--expect", &store_anchor, "--expect", &plan_anchor]);
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert!(r.stdout.contains("2 anchored digests verified"), "{}", r.stdout);
    assert_ne!(ok(&["digest", s(&path)]).lines().last().unwrap(), store_anchor);

    // A full rewrite: export, change one rationale, import into a new file.
    // Every hash is recomputed, so check alone finds nothing; the anchors do.
    let exported = ok(&["export", s(&path)]);
    let first_rationale = exported.lines().next().unwrap().to_owned();
    let v: Value = serde_json::from_str(&first_rationale).unwrap();
    let edited = exported.replacen(
        &first_rationale,
        &first_rationale.replace(v["chosen_option"].as_str().unwrap(), "something else entirely"),
        1,
    );
    assert_ne!(edited, exported);
    let (file, forged) = (dir.path().join("edited.jsonl"), dir.path().join("forged.db"));
    std::fs::write(&file, edited).unwrap();
    ok(&["import", s(&forged), s(&file)]);
    assert!(ok(&["check", s(&forged)]).starts_with("ok"));
    for anchor in [&store_anchor, &plan_anchor] {
        let r = dstore(&["check", s(&forged), "--expect", anchor]);
        assert_eq!(r.code, 1, "{anchor}: {}", r.stdout);
        assert!(r.stdout.contains("anchor_mismatch"), "{}", r.stdout);
    }
    // An anchor past the end, and a malformed one.
    let anchor: Anchor = store_anchor.parse().unwrap();
    let beyond = Anchor { entries: 1000, ..anchor.clone() };
    assert_eq!(anchor.scope, AnchorScope::Store);
    assert_eq!(dstore(&["check", s(&path), "--expect", &beyond.to_string()]).code, 1);
    let r = dstore(&["check", s(&path), "--expect", "store:12:xyz"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--expect") && r.stderr.contains("64 hex digits"), "{}", r.stderr);
}

#[test]
fn check_reports_dangling_rows_of_every_table_and_never_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = sample(dir.path());
    let mut store = Store::open(&path).unwrap();
    let node = |uri: &str| decision_store::uko::UkoNode {
        uri: uri.into(),
        domain: "d:".into(),
        kind: "k".into(),
        label: uri.into(),
        version: None,
        resource_uri: None,
        views: vec![],
    };
    store.upsert_nodes(&[node("a"), node("b")]).unwrap();
    drop(store);
    // A stock sqlite3 shell enforces no foreign keys (rusqlite's build does).
    let conn = raw(&path);
    conn.execute_batch("PRAGMA foreign_keys = OFF;").unwrap();
    conn.execute(
        "INSERT INTO supersessions (decision_id, superseded_by) VALUES (?1, '01JD9999999999999999999999')",
        [&id],
    )
    .unwrap();
    conn.execute_batch(
        "INSERT INTO uko_edges (source_id, target_id, relation, weight) VALUES (1, 4242, 'calls', NULL);
         INSERT INTO uko_node_views (node_id, depth, content) VALUES (4343, 0, 'ghost');",
    )
    .unwrap();
    drop(conn);
    let r = dstore(&["check", s(&path), "--format", "json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    let problems = report["problems"].as_array().unwrap();
    let has = |kind: &str, text: &str| {
        problems.iter().any(|p| p["kind"] == kind && p["message"].as_str().unwrap().contains(text))
    };
    assert!(has("dangling_supersession", "01JD9999999999999999999999"), "{problems:#?}");
    assert!(has("unhashed", &id), "{problems:#?}");
    assert!(has("foreign_key", "edge 1 -calls-> 4242"), "{problems:#?}");
    assert!(has("foreign_key", "node 4343"), "{problems:#?}");
    assert!(has("foreign_key", "a supersessions row refers to a missing decisions row"), "{problems:#?}");
}

// ------------------------------------------------------------------ pipes

/// A store big enough that its outputs overflow a pipe's buffer.
fn big_store(dir: &Path) -> PathBuf {
    let (file, db) = (dir.join("big.jsonl"), dir.join("big.db"));
    chain_file(&file, 10_000);
    ok(&["import", s(&db), s(&file)]);
    db
}

/// Runs dstore, reads one line of its output and closes the pipe, as `| head -1` does.
fn first_line_then_close(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dstore"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), line, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = big_store(dir.path());
    let db = s(&db);
    let first = ulid("01JD000001", 0);
    for args in [
        vec!["export", db],
        vec!["tree", db, PLAN],
        vec!["tree", db, PLAN, "--format", "json"],
        vec!["tree", db, PLAN, "--format", "jsonl"],
        vec!["tree", db, PLAN, "--format", "dot"],
        vec!["tree", db, PLAN, "--format", "mermaid"],
        vec!["chain", db, &first, "--format", "json"],
        vec!["impact", db, &first],
        vec!["show", db, &first],
    ] {
        // Only an output larger than the pipe's buffer meets the closed end.
        assert!(ok(&args).len() > 128 << 10, "{args:?}: too small to fill a pipe twice over");
        let (code, line, stderr) = first_line_then_close(&args);
        assert!(!line.is_empty(), "{args:?} printed nothing");
        assert_eq!((code, stderr.as_str()), (0, ""), "{args:?}");
    }
}

// ------------------------------------------------------------------ migrations

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

#[test]
fn a_changed_migration_checksum_is_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = sample(dir.path());
    raw(&path).execute("UPDATE refinery_schema_history SET checksum = '12345' WHERE version = 1", []).unwrap();
    let before = std::fs::read(&path).unwrap();
    for result in [Store::open(&path), Store::open_read_only(&path)] {
        match result {
            Err(e @ Error::MigrationMismatch { version: 1, .. }) => {
                assert!(e.to_string().contains("V1__initial"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }
    let r = dstore(&["import", s(&path), "-"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("V1__initial") && r.stderr.contains("refusing"), "{}", r.stderr);
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file was touched");
    let wal = path.with_extension("db-wal");
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0, "a WAL was written");
}

#[test]
fn a_version_1_store_needs_an_upgrade_to_be_read_and_upgrades_with_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("v1.db");
    std::fs::copy(fixture("v1-demo.db"), &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    assert!(matches!(Store::open_read_only(&copy), Err(Error::NeedsUpgrade { found: 1, supported: 12, .. })));
    let r = dstore(&["info", s(&copy)]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("older") && r.stderr.contains("dstore init"), "{}", r.stderr);
    assert_eq!(std::fs::read(&copy).unwrap(), before);

    // Upgrading computes every hash; the kept counts equal a fresh import's.
    ok(&["init", s(&copy)]);
    assert!(ok(&["check", s(&copy)]).starts_with("ok"));
    let fresh = dir.path().join("fresh.db");
    ok(&["import", s(&fresh), s(&fixture("v1-demo.decisions.jsonl"))]);
    let (upgraded, fresh) = (Store::open_read_only(&copy).unwrap(), Store::open_read_only(&fresh).unwrap());
    assert_eq!(upgraded.plans().unwrap(), fresh.plans().unwrap());
    assert_eq!(upgraded.decision_counts().unwrap(), fresh.decision_counts().unwrap());
    let digest = upgraded.digest().unwrap();
    assert_eq!(digest.store.entries, 17 + fresh.decision_counts().unwrap().supersessions);
    // The upgraded file keeps growing as a chain.
    drop(upgraded);
    let mut store = Store::open(&copy).unwrap();
    let plan = PlanBuilder::new().root("after the upgrade").build().unwrap();
    store.insert_many(plan.decisions()).unwrap();
    assert_eq!(store.check().unwrap(), vec![]);
    let anchor = digest.store.to_string();
    drop(store);
    assert_eq!(dstore(&["check", s(&copy), "--expect", &anchor]).code, 0);
}

/// The schema of a store file: every table, index, view and trigger with its
/// columns, for comparing an upgraded file with a fresh one.
fn schema_of(path: &Path) -> Vec<(String, String, String)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT m.type, m.name, coalesce(group_concat(i.name || ' ' || i.type || ' ' || i.pk || ' ' || i.\"notnull\", ', '), '') \
             FROM sqlite_master m LEFT JOIN pragma_table_info(m.name) i \
             WHERE m.name NOT LIKE 'sqlite_%' GROUP BY m.type, m.name ORDER BY m.type, m.name",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
}

#[test]
fn stores_of_versions_2_to_11_upgrade_without_rewriting_a_row() {
    for version in [2, 3, 4, 5, 6, 7, 8, 9, 10, 11] {
        upgrades_without_rewriting_a_row(version);
    }
}

fn upgrades_without_rewriting_a_row(version: i64) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("old.db");
    std::fs::copy(fixture(&format!("v{version}-demo.db")), &copy).unwrap();
    let rows = |p: &Path| -> Vec<Vec<String>> {
        let conn = Connection::open(p).unwrap();
        let mut stmt = conn.prepare("SELECT rowid, * FROM decisions ORDER BY rowid").unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        let mut out = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            out.push((0..n).map(|i| format!("{:?}", r.get_ref(i).unwrap())).collect());
        }
        out
    };
    let before = rows(&copy);
    assert_eq!(before.len(), 17);
    match Store::open_read_only(&copy) {
        Err(Error::NeedsUpgrade { found, supported: 12, .. }) if found == version => {}
        other => panic!("v{version}: {other:?}"),
    }
    // Taken by the binary of that version, which wrote the fixture.
    let digest = std::fs::read_to_string(fixture(&format!("v{version}-demo.digest"))).unwrap();

    ok(&["init", s(&copy)]);
    // Same rows, rowids and hashes: every anchor of the old file holds.
    assert_eq!(rows(&copy), before);
    assert!(ok(&["check", s(&copy)]).starts_with("ok"));
    assert_eq!(ok(&["digest", s(&copy)]), digest);
    for anchor in digest.lines() {
        assert_eq!(dstore(&["check", s(&copy), "--expect", anchor]).code, 0, "{anchor}");
    }
    let fresh = dir.path().join("fresh.db");
    drop(Store::open(&fresh).unwrap());
    assert_eq!(schema_of(&copy), schema_of(&fresh));
    // The upgrade built the kept staleness and calibration: they answer as
    // the rows do.
    let upgraded = Store::open_read_only(&copy).unwrap();
    for all in [false, true] {
        let options = StaleOptions { plan: None, all };
        let kept = upgraded.stale(options).unwrap();
        let again = upgraded.stale_recomputed(options).unwrap();
        assert_eq!((kept.stale, kept.at_risk), (again.stale, again.at_risk), "v{version}");
    }
    let options = CalibrationOptions { plan: None, by: Some(GroupBy::Type), settled_after: 0 };
    assert_eq!(upgraded.calibration(options).unwrap(), calibrate(&upgraded.outcomes(None).unwrap(), options.by, 0));
    drop(upgraded);

    // The rebuilt tables keep their rules: append-only, one supersession a decision, types checked.
    let conn = raw(&copy);
    for sql in [
        "UPDATE decisions SET rationale = 'x'",
        "DELETE FROM decisions",
        "DELETE FROM supersessions",
        "INSERT INTO supersessions (decision_id, superseded_by) SELECT decision_id, superseded_by FROM supersessions",
        "INSERT INTO decisions (decision_id, plan_id, sequence, decision_type, chosen_option, rationale, alternatives, \
         context_snapshot, artifacts_produced, downstream_decision_ids, downstream_plan_ids, metadata) \
         VALUES ('X', 'P', 0, 'not_a_type', '', '', '[]', '{}', '[]', '[]', '[]', '{}')",
    ] {
        assert!(conn.execute(sql, []).is_err(), "{sql} was allowed");
    }
    drop(conn);
    let mut store = Store::open(&copy).unwrap();
    let plan = PlanBuilder::new().root("after the upgrade").build().unwrap();
    store.insert_many(plan.decisions()).unwrap();
    assert_eq!(store.check().unwrap(), vec![]);
}

// ------------------------------------------------------------------ graph imports

#[test]
fn a_bad_edge_line_leaves_no_node_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (db, nodes, edges) = (dir.path().join("g.db"), dir.path().join("n.jsonl"), dir.path().join("e.jsonl"));
    std::fs::write(
        &nodes,
        "{\"uri\":\"a\",\"domain\":\"d:\",\"kind\":\"k\",\"label\":\"a\",\"views\":[]}\n{\"uri\":\"b\",\"domain\":\"d:\",\"kind\":\"k\",\"label\":\"b\",\"views\":[]}\n",
    )
    .unwrap();
    std::fs::write(
        &edges,
        "{\"source\":\"a\",\"target\":\"b\",\"relation\":\"calls\",\"weight\":null}\n{\"source\":\"a\",\"target\":\"zzz\",\"relation\":\"calls\",\"weight\":null}\n",
    )
    .unwrap();
    let r = dstore(&["import-graph", s(&db), s(&nodes), s(&edges)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("edges line 2") && r.stderr.contains("zzz"), "{}", r.stderr);
    let store = Store::open_read_only(&db).unwrap();
    assert_eq!((store.graph_counts().unwrap().nodes, store.graph_counts().unwrap().edges), (0, 0));

    // With --batch, earlier batches stay, as documented.
    let r = dstore(&["import-graph", s(&db), s(&nodes), s(&edges), "--batch", "1"]);
    assert_eq!(r.code, 2);
    assert_eq!(Store::open_read_only(&db).unwrap().graph_counts().unwrap().nodes, 2);

    let mut temp = TempStore::new().unwrap();
    let result = temp.store().unwrap().import_graph(
        std::fs::read(&nodes).unwrap().as_slice(),
        std::fs::read(&edges).unwrap().as_slice(),
        ImportOptions::default(),
        |_| {},
    );
    assert!(matches!(result, Err(Error::Input { name: "edges", .. })), "{result:?}");
    assert_eq!(temp.reopen().unwrap().graph_counts().unwrap().nodes, 0);
}

#[test]
fn importing_again_in_batches_leaves_the_log_sound_and_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = sample(dir.path());
    let file = dir.path().join("all.jsonl");
    std::fs::write(&file, ok(&["export", s(&path)])).unwrap();
    let copy = dir.path().join("copy.db");
    ok(&["import", s(&copy), s(&file), "--batch", "3"]);
    let digest = ok(&["digest", s(&copy)]);
    assert!(digest.lines().last().unwrap().starts_with("store:13:"), "{digest}");
    // Every record is skipped the second time: no entry, no gap, same digest.
    ok(&["import", s(&copy), s(&file), "--batch", "2"]);
    ok(&["import", s(&copy), s(&file)]);
    assert_eq!(ok(&["digest", s(&copy)]), digest);
    assert!(ok(&["check", s(&copy)]).starts_with("ok"));
    let (a, b) = (Store::open_read_only(&path).unwrap(), Store::open_read_only(&copy).unwrap());
    assert_eq!(a.plans().unwrap(), b.plans().unwrap());
    assert_eq!(a.decision_counts().unwrap(), b.decision_counts().unwrap());
}

#[test]
fn an_outline_tree_answers_every_tree_and_history_question_as_the_full_tree_does() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = sample(dir.path());
    let store = Store::open_read_only(&path).unwrap();
    let plan = store.decision(id.parse().unwrap()).unwrap().plan_id();
    let (full, outline) = (store.decision_tree(plan).unwrap(), store.decision_tree_outline(plan).unwrap());
    assert_eq!(full.len(), outline.len());
    let ids = |ds: Vec<&decision_store::Decision>| ds.iter().map(|d| d.decision_id()).collect::<Vec<_>>();
    assert_eq!(ids(full.roots()), ids(outline.roots()));
    assert_eq!(ids(full.effective()), ids(outline.effective()));
    for (a, b) in full.decisions().iter().zip(outline.decisions()) {
        let id = a.decision_id();
        assert_eq!(id, b.decision_id());
        assert_eq!(
            (a.parent_decision_id(), a.corrects_decision_id(), a.superseded_by(), a.sequence(), a.decision_type()),
            (b.parent_decision_id(), b.corrects_decision_id(), b.superseded_by(), b.sequence(), b.decision_type())
        );
        assert_eq!((a.chosen_option(), a.confidence_score()), (b.chosen_option(), b.confidence_score()));
        assert_eq!(ids(full.children(id)), ids(outline.children(id)));
        assert_eq!(full.depth(id), outline.depth(id));
        assert_eq!(ids(full.correction_chain(id)), ids(outline.correction_chain(id)));
        assert_eq!(full.standing(id).map(|d| d.decision_id()), outline.standing(id).map(|d| d.decision_id()));
    }
    let views = |t: &decision_store::DecisionTree| {
        t.view(true).nodes.iter().map(|n| (n.decision.decision_id(), n.level, n.last, n.parent)).collect::<Vec<_>>()
    };
    assert_eq!(views(&full), views(&outline));
    assert!(matches!(store.decision_tree_outline(PlanId::generate()), Err(Error::PlanNotFound(_))));
    let mut out = Vec::new();
    assert!(matches!(store.export_decisions(Some(PlanId::generate()), &mut out), Err(Error::PlanNotFound(_))));
    assert!(out.is_empty());
}

/// The import parses on a worker thread in chunks: errors still come in input order.
#[test]
fn import_errors_come_in_input_order_across_the_worker_chunks() {
    let mut lines: Vec<Vec<u8>> = (0..600u64)
        .map(|i| {
            let (id, parent) = (ulid("01JD000001", i), if i == 0 { None } else { Some(ulid("01JD000001", i - 1)) });
            let t = if i == 0 { "prompt_definition" } else { "tool_invocation" };
            let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
            format!(r#"{{"decision_id":"{id}","plan_id":"{PLAN}","parent_decision_id":{parent},"sequence":{i},"decision_type":"{t}"}}"#)
                .into_bytes()
        })
        .collect();
    let other_plan = ulid("01JD000009", 0);
    // Line 601: a parent in another plan (found while writing); line 700: not JSON (found while parsing).
    lines.push(
        format!(r#"{{"decision_id":"{}","plan_id":"{other_plan}","parent_decision_id":"{}","sequence":0,"decision_type":"tool_invocation"}}"#, ulid("01JD000002", 0), ulid("01JD000001", 5))
            .into_bytes(),
    );
    lines.extend((601..699).map(|_| b"".to_vec()));
    lines.push(b"{not json".to_vec());
    let text = lines.join(&b'\n');
    let mut temp = TempStore::new().unwrap();
    let store = temp.store().unwrap();
    let err = store.import_decisions(text.as_slice(), ImportOptions::default(), |_| {}).unwrap_err().to_string();
    assert!(err.starts_with("line 601: ") && err.contains("belongs to plan"), "{err}");
    assert_eq!(store.decision_counts().unwrap().decisions, 0, "nothing stays of a failed import");

    // Bad UTF-8 on line 300 ends the import there, after 299 good lines; with
    // batches of 100, the two committed batches stay and the third is undone.
    let mut bad = lines[..299].join(&b'\n');
    bad.extend_from_slice(b"\n\xff\xfe\n");
    bad.extend_from_slice(&lines[300]);
    let err = store.import_decisions(bad.as_slice(), ImportOptions::default(), |_| {}).unwrap_err().to_string();
    assert!(err.starts_with("line 300: ") && err.contains("UTF-8"), "{err}");
    assert_eq!(store.decision_counts().unwrap().decisions, 0);
    let batched = ImportOptions::every(100);
    assert!(store.import_decisions(bad.as_slice(), batched, |_| {}).is_err());
    assert_eq!(store.decision_counts().unwrap().decisions, 200, "the committed batches stay");
    // A batch that fills up on the line before the bad one is committed too.
    let exact = ImportOptions::every(299);
    let err = store.import_decisions(bad.as_slice(), exact, |_| {}).unwrap_err().to_string();
    assert!(err.starts_with("line 300: "), "{err}");
    assert_eq!(store.decision_counts().unwrap().decisions, 299);
    assert_eq!(store.check().unwrap(), vec![]);
}

/// `tree --format jsonl` is the nested document flattened: same nodes, same order, same parents.
#[test]
fn tree_jsonl_flattens_the_nested_json_in_both_views() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = sample(dir.path());
    let plan = Store::open_read_only(&path).unwrap().decision(id.parse().unwrap()).unwrap().plan_id().to_string();
    for effective in [false, true] {
        let mut args = vec!["tree", s(&path), &plan];
        if effective {
            args.push("--effective");
        }
        let nested: Value = serde_json::from_str(&ok(&[&args[..], &["--format", "json"]].concat())).unwrap();
        let mut expected = Vec::new();
        let mut stack: Vec<(Value, Value, u64)> =
            nested["roots"].as_array().unwrap().iter().rev().map(|n| (n.clone(), Value::Null, 0)).collect();
        while let Some((node, parent, level)) = stack.pop() {
            let children = node["children"].as_array().unwrap().clone();
            stack.extend(children.iter().rev().map(|c| (c.clone(), node["decision_id"].clone(), level + 1)));
            let mut flat = node.as_object().unwrap().clone();
            flat.remove("children");
            flat.insert("parent".into(), parent);
            flat.insert("level".into(), Value::from(level));
            expected.push(Value::Object(flat));
        }
        let lines: Vec<Value> = ok(&[&args[..], &["--format", "jsonl"]].concat())
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines, expected, "effective {effective}");
        assert!(!lines.is_empty());
    }
}

/// `tree --format json` and `jsonl` write their nodes by hand: a chosen
/// option of any text comes out as the same string.
#[test]
fn tree_json_carries_any_chosen_option_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let odd = "quote \" backslash \\ newline \n tab \t bell \u{7} é \u{1F600} </script>";
    let plan = PlanBuilder::new().root(odd).child("a child", odd, DecisionType::ToolInvocation).build().unwrap();
    Store::open(&db).unwrap().insert_many(plan.decisions()).unwrap();
    let plan_id = plan.decisions()[0].plan_id().to_string();
    let nested: Value = serde_json::from_str(&ok(&["tree", s(&db), &plan_id, "--format", "json"])).unwrap();
    assert_eq!(nested["roots"][0]["chosen_option"], odd);
    assert_eq!(nested["roots"][0]["children"][0]["depth"], 1);
    let lines: Vec<Value> = ok(&["tree", s(&db), &plan_id, "--format", "jsonl"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["chosen_option"], odd);
    assert_eq!(lines[1]["parent"], lines[0]["decision_id"]);
}

/// An anchor pins an entry in the middle of a plan's chain: removing that
/// entry fails the anchor even though later entries follow.
#[test]
fn an_anchor_whose_entry_was_removed_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = sample(dir.path());
    let mut store = Store::open(&path).unwrap();
    let plan = store.decision(id.parse().unwrap()).unwrap().plan_id();
    let anchor =
        store.digest().unwrap().plans.into_iter().find(|a| a.scope == AnchorScope::Plan(plan.to_string())).unwrap();
    let root = store.plan_decisions(plan).unwrap()[0].decision_id();
    let later =
        decision_store::Decision::builder(plan, DecisionType::UserIntervention, 50).parent(root).build().unwrap();
    store.insert(&later).unwrap();
    drop(store);
    assert_eq!(dstore(&["check", s(&path), "--expect", &anchor.to_string()]).code, 0);
    let conn = raw(&path);
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF; DROP TRIGGER decisions_no_delete; DROP TRIGGER supersessions_no_delete;",
    )
    .unwrap();
    let (plan, n) = (plan.to_string(), anchor.entries as i64);
    let removed = conn
        .execute("DELETE FROM decisions WHERE plan_id = ?1 AND chain_index = ?2", rusqlite::params![plan, n])
        .unwrap()
        + conn
            .execute("DELETE FROM supersessions WHERE plan_id = ?1 AND chain_index = ?2", rusqlite::params![plan, n])
            .unwrap();
    assert_eq!(removed, 1);
    drop(conn);
    let r = dstore(&["check", s(&path), "--expect", &anchor.to_string(), "--format", "json"]);
    assert_eq!(r.code, 1);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "anchor_mismatch" && p["message"].as_str().unwrap().contains("is missing")),
        "{report:#}"
    );
}

/// Every statement inside one `read_snapshot` sees the file as it was when it began.
#[test]
fn a_read_snapshot_does_not_see_a_commit_made_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = sample(dir.path());
    let reader = Store::open_read_only(&path).unwrap();
    let mut writer = Store::open(&path).unwrap();
    let (inside, after_commit) = reader
        .read_snapshot(|r| {
            let before = r.decision_counts()?.decisions;
            writer.insert_many(PlanBuilder::new().root("meanwhile").build()?.decisions())?;
            Ok((before, r.decision_counts()?.decisions))
        })
        .unwrap();
    assert_eq!(inside, after_commit, "the commit showed up inside the snapshot");
    assert_eq!(reader.decision_counts().unwrap().decisions, inside + 1, "and shows up after it");
}
