//! The `dstore` binary, run against temp-file stores.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{all_at_once, dstore, dstore_with_stdin, fails, json, ok, s};

struct Demo {
    dir: tempfile::TempDir,
    db: PathBuf,
}

impl Demo {
    fn new() -> Demo {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("demo.db");
        let out = ok(&["demo", s(&db)]);
        assert!(out.contains("$ dstore tree") && out.contains("└─ prompt_definition #0"), "{out}");
        Demo { dir, db }
    }
    fn db(&self) -> &str {
        s(&self.db)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn main_plan(&self) -> String {
        let plans = json(&["plans", self.db(), "--format", "json"]);
        plans.as_array().unwrap().iter().max_by_key(|p| p["decisions"].as_u64()).unwrap()["plan_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
    fn tree(&self) -> Value {
        json(&["tree", self.db(), &self.main_plan(), "--format", "json"])
    }
}

fn nodes(tree: &Value) -> Vec<Value> {
    fn walk(n: &Value, out: &mut Vec<Value>) {
        out.push(n.clone());
        for c in n["children"].as_array().unwrap() {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    for r in tree["roots"].as_array().unwrap() {
        walk(r, &mut out);
    }
    out
}

fn find<'a>(nodes: &'a [Value], chosen: &str) -> &'a Value {
    nodes
        .iter()
        .find(|n| n["chosen_option"].as_str().unwrap().starts_with(chosen))
        .unwrap_or_else(|| panic!("no {chosen}"))
}

#[test]
fn demo_writes_a_store_and_replaces_only_stores() {
    let demo = Demo::new();
    let info = json(&["info", demo.db(), "--format", "json"]);
    for key in [
        "schema_version",
        "sqlite_version",
        "plans",
        "decisions",
        "corrections",
        "supersessions",
        "nodes",
        "edges",
        "by_type",
    ] {
        assert!(info.get(key).is_some(), "info lacks {key}: {info}");
    }
    assert_eq!(info["plans"], 2);
    assert_eq!(info["corrections"], 2);
    assert_eq!(info["supersessions"], 1);
    assert!(info["nodes"].as_u64().unwrap() >= 24);
    // Running it again replaces the store.
    ok(&["demo", demo.db()]);
    assert_eq!(json(&["info", demo.db(), "--format", "json"])["decisions"], info["decisions"]);
    let other = demo.path("notes.txt");
    std::fs::write(&other, "my notes").unwrap();
    fails(&["demo", s(&other)], 2, "not a decision store");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "my notes");
}

#[test]
fn init_creates_and_leaves_stores_and_foreign_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    ok(&["init", s(&db)]);
    let before = std::fs::read(&db).unwrap();
    ok(&["init", s(&db)]);
    assert_eq!(std::fs::read(&db).unwrap(), before, "init changed an existing store");
    assert_eq!(json(&["info", s(&db), "--format", "json"])["decisions"], 0);
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    let before = std::fs::read(&other).unwrap();
    fails(&["init", s(&other)], 2, "not a decision store");
    assert_eq!(std::fs::read(&other).unwrap(), before);
}

#[test]
fn export_import_round_trips_with_any_batch_size() {
    let demo = Demo::new();
    let exported = ok(&["export", demo.db()]);
    assert_eq!(exported.lines().count(), 17);
    let file = demo.path("decisions.jsonl");
    // Reversed: children and correcting decisions come before what they name.
    let reversed: String = exported.lines().rev().map(|l| format!("{l}\n\n")).collect();
    std::fs::write(&file, &reversed).unwrap();
    for batch in [None, Some("1"), Some("2"), Some("7")] {
        let db = demo.path(&format!("copy-{batch:?}.db"));
        let mut args = vec!["import", s(&db), s(&file)];
        if let Some(b) = batch {
            args.extend(["--batch", b]);
        }
        let r = dstore(&args);
        assert_eq!(r.code, 0, "{batch:?}: {}", r.stderr);
        assert!(r.stderr.contains("imported 17, skipped 0"), "{}", r.stderr);
        assert_eq!(ok(&["export", s(&db)]), exported, "batch {batch:?}");
        // Importing again is harmless.
        let again = dstore(&args);
        assert!(again.code == 0 && again.stderr.contains("imported 0, skipped 17"), "{}", again.stderr);
        assert_eq!(ok(&["export", s(&db)]), exported);
    }
    // From stdin, and one plan only.
    let db = demo.path("stdin.db");
    assert_eq!(dstore_with_stdin(&["import", s(&db), "-"], Some(&exported)).code, 0);
    let plan = demo.main_plan();
    let one = ok(&["export", s(&db), "--plan", &plan]);
    assert_eq!(one.lines().count(), 13);
    assert!(one.lines().all(|l| l.contains(&plan)));
    let unknown = decision_store::PlanId::generate().to_string();
    fails(&["export", s(&db), "--plan", &unknown], 2, &format!("plan {unknown} not found"));
}

#[test]
fn a_bad_line_names_its_line_and_field_and_changes_nothing() {
    let demo = Demo::new();
    let exported = ok(&["export", demo.db()]);
    let mut lines: Vec<String> = exported.lines().map(str::to_owned).collect();
    let mut bad: Value = serde_json::from_str(&lines[3]).unwrap();
    bad["confidence_score"] = Value::from(7.5);
    lines.insert(5, bad.to_string());
    let file = demo.path("bad.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let target = demo.path("target.db");
    ok(&["init", s(&target)]);
    fails(&["import", s(&target), s(&file)], 2, "line 6: invalid confidence_score");
    assert_eq!(ok(&["export", s(&target)]), "");
    std::fs::write(&file, format!("{}\n{{\"decision_id\": \"nope\"", lines[0])).unwrap();
    fails(&["import", s(&target), s(&file)], 2, "line 2");
    std::fs::write(&file, b"\xff\xfe\n").unwrap();
    fails(&["import", s(&target), s(&file)], 2, "line 1: invalid encoding");
    let mut unknown: Value = serde_json::from_str(&lines[0]).unwrap();
    unknown["colour"] = Value::from("blue");
    std::fs::write(&file, unknown.to_string()).unwrap();
    fails(&["import", s(&target), s(&file)], 2, "colour");
    assert_eq!(ok(&["export", s(&target)]), "");
}

#[test]
fn unresolved_references_are_named_and_batches_already_committed_stay() {
    let demo = Demo::new();
    let exported = ok(&["export", demo.db()]);
    let plan = demo.main_plan();
    // Drop the root of the main plan: its children can never be stored.
    let kept: Vec<&str> = exported.lines().filter(|l| !(l.contains(&plan) && l.contains("\"sequence\":0,"))).collect();
    let file = demo.path("orphans.jsonl");
    std::fs::write(&file, kept.join("\n")).unwrap();
    let db = demo.path("partial.db");
    fails(&["import", s(&db), s(&file), "--atomic"], 2, "neither in the input nor in the store");
    assert_eq!(ok(&["export", s(&db)]), "", "one transaction: nothing stays");
    let both = dstore(&["import", s(&db), s(&file), "--atomic", "--batch", "2"]);
    assert!(both.code == 2 && both.stderr.contains("cannot be used with"), "{}", both.stderr);
    for batch in [&[][..], &["--batch", "2"][..]] {
        let fresh = demo.path(&format!("partial{}.db", batch.len()));
        let mut args = vec!["import", s(&fresh), s(&file)];
        args.extend_from_slice(batch);
        let r = dstore(&args);
        assert_eq!(r.code, 2);
        assert!(r.stderr.contains("line ") && r.stderr.contains("neither in the input"), "{}", r.stderr);
        // The subplan does not depend on the missing root: its 4 decisions were committed.
        assert_eq!(ok(&["export", s(&fresh)]).lines().count(), 4, "{batch:?}");
    }
}

#[test]
fn a_different_decision_under_an_existing_id_is_refused() {
    let demo = Demo::new();
    let exported = ok(&["export", demo.db()]);
    let mut first: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    first["rationale"] = Value::from("rewritten history");
    let file = demo.path("changed.jsonl");
    std::fs::write(&file, first.to_string()).unwrap();
    fails(&["import", demo.db(), s(&file)], 2, "stored with different content");
    assert_eq!(ok(&["export", demo.db()]), exported);
}

#[test]
fn graph_export_import_round_trips_and_unknown_nodes_are_named() {
    let demo = Demo::new();
    let (n, e) = (demo.path("nodes.jsonl"), demo.path("edges.jsonl"));
    ok(&["export-graph", demo.db(), s(&n), s(&e)]);
    let copy = demo.path("graph.db");
    ok(&["import-graph", s(&copy), s(&n), s(&e), "--batch", "5"]);
    let (n2, e2) = (demo.path("nodes2.jsonl"), demo.path("edges2.jsonl"));
    ok(&["export-graph", s(&copy), s(&n2), s(&e2)]);
    assert_eq!(std::fs::read(&n).unwrap(), std::fs::read(&n2).unwrap());
    assert_eq!(std::fs::read(&e).unwrap(), std::fs::read(&e2).unwrap());
    let bad = demo.path("bad-edges.jsonl");
    std::fs::write(
        &bad,
        "\n{\"source\":\"class://TokenBucket\",\"target\":\"class://Ghost\",\"relation\":\"calls\",\"weight\":null}\n",
    )
    .unwrap();
    let empty = demo.path("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let before = ok(&["info", s(&copy), "--format", "json"]);
    fails(&["import-graph", s(&copy), s(&empty), s(&bad)], 2, "line 2: unknown UKO node class://Ghost");
    assert_eq!(
        ok(&["info", s(&copy), "--format", "json"]).replace(char::is_numeric, ""),
        before.replace(char::is_numeric, "")
    );
}

#[test]
fn read_commands_never_change_the_file() {
    let demo = Demo::new();
    let plan = demo.main_plan();
    let tree = nodes(&demo.tree());
    let id = tree[2]["decision_id"].as_str().unwrap().to_owned();
    // Let the writer's WAL be checkpointed into the main file first.
    ok(&["init", demo.db()]);
    let before = std::fs::read(&demo.db).unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["info", demo.db()],
        vec!["plans", demo.db()],
        vec!["show", demo.db(), &id],
        vec!["tree", demo.db(), &plan, "--format", "dot"],
        vec!["chain", demo.db(), &id],
        vec!["impact", demo.db(), &id],
        vec!["check", demo.db()],
        vec!["export", demo.db()],
        vec!["project", demo.db(), "--focus", "class://TokenBucket", "--breadth", "2", "--depth", "9", "--fragments"],
        vec!["child-context", demo.db(), "--plan", &plan, "--budget", "500"],
    ];
    for args in runs {
        ok(&args);
        assert_eq!(std::fs::read(&demo.db).unwrap(), before, "{args:?} changed the file");
    }
}

#[test]
fn environment_and_input_errors_are_one_clear_line() {
    let demo = Demo::new();
    let missing = demo.path("missing.db");
    fails(&["info", s(&missing)], 2, "no decision store here yet");
    assert!(!missing.exists(), "a read command created a file");
    let garbage = demo.path("garbage.db");
    std::fs::write(&garbage, vec![0x42u8; 8192]).unwrap();
    fails(&["plans", s(&garbage)], 2, "not a SQLite database");
    let other = demo.path("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    fails(&["info", s(&other)], 2, "not a decision store");
    let future = demo.path("future.db");
    std::fs::copy(&demo.db, &future).unwrap();
    rusqlite::Connection::open(&future)
        .unwrap()
        .execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (42, 'x', 'y', 'z')",
            [],
        )
        .unwrap();
    fails(&["info", s(&future)], 2, "newer than this library");
    fails(&["import", s(&future), s(&demo.path("nothing"))], 2, "nothing");
    fails(&["show", demo.db(), "not-a-ulid"], 2, "\"not-a-ulid\" is not an id or the beginning of one");
    fails(&["show", demo.db(), "01ARZ3NDEKTSV4RRFFQ69G5FAV"], 2, "decision 01ARZ3NDEKTSV4RRFFQ69G5FAV not found");
    fails(&["tree", demo.db(), "01ARZ3NDEKTSV4RRFFQ69G5FAV"], 2, "plan 01ARZ3NDEKTSV4RRFFQ69G5FAV not found");
    fails(&["export", demo.db(), "--plan", "01ARZ3NDEKTSV4RRFFQ69G5FAV"], 2, "not found");
    fails(
        &["project", demo.db(), "--focus", "class://Ghost", "--breadth", "1", "--depth", "4"],
        2,
        "invalid focus: class://Ghost is not a node of the graph",
    );
    fails(
        &["project", demo.db(), "--focus", "class://TokenBucket", "--breadth", "1", "--depth", "-3"],
        2,
        "non-negative",
    );
    fails(
        &["project", demo.db(), "--focus", "class://TokenBucket", "--breadth", "1", "--depth", "HUGE"],
        2,
        "no level",
    );
    fails(
        &["project", demo.db(), "--focus", "A", "--breadth", "1", "--depth", "TITLE", "--domain", "nowhere:"],
        2,
        "no DetailLevelMap",
    );
    let usage = dstore(&["tree"]);
    assert_eq!(usage.code, 2);
}

#[test]
fn a_store_locked_past_the_busy_timeout_is_an_environment_error() {
    let demo = Demo::new();
    let conn = rusqlite::Connection::open(&demo.db).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let file = demo.path("one.jsonl");
    std::fs::write(&file, ok(&["export", demo.db()]).lines().next().unwrap()).unwrap();
    let r = dstore(&["import", demo.db(), s(&file)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("locked"), "{}", r.stderr);
    conn.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn show_tree_chain_and_impact_report_the_history() {
    let demo = Demo::new();
    let plan = demo.main_plan();
    let tree = demo.tree();
    assert_eq!(tree["plan_id"], plan.as_str());
    let all = nodes(&tree);
    assert_eq!(all.len(), 13);
    for n in &all {
        let seqs: Vec<u64> =
            n["children"].as_array().unwrap().iter().map(|c| c["sequence"].as_u64().unwrap()).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "children out of order: {seqs:?}");
    }
    let (s1, s2, s3) = (
        find(&all, "Token bucket per user"),
        find(&all, "Token bucket per API key"),
        find(&all, "Token bucket per API key, burst"),
    );
    assert_eq!(s1["corrected_by"][0], s2["decision_id"]);
    assert_eq!(s1["effective"], false);
    assert_eq!(s3["effective"], true);
    let ab = find(&all, "Load test with ab");
    let k6 = find(&all, "Load test with k6");
    assert_eq!(ab["superseded_by"], k6["decision_id"]);

    let id = s1["decision_id"].as_str().unwrap();
    let chain = json(&["chain", demo.db(), id, "--format", "json"]);
    assert_eq!(chain["corrections"], serde_json::json!([s1["decision_id"], s2["decision_id"], s3["decision_id"]]));
    assert_eq!(chain["effective"], s3["decision_id"]);
    let ab_chain = json(&["chain", demo.db(), ab["decision_id"].as_str().unwrap(), "--format", "json"]);
    assert_eq!(ab_chain["supersessions"], serde_json::json!([ab["decision_id"], k6["decision_id"]]));
    assert_eq!(ab_chain["effective"], k6["decision_id"]);

    let show = json(&["show", demo.db(), id, "--format", "json"]);
    assert_eq!(show["decision"]["decision_id"], id);
    assert_eq!(show["correction_chain"], chain["corrections"]);
    assert_eq!(show["superseded_by_chain"], serde_json::json!([]));

    let lua = find(&all, "Take tokens atomically");
    let impact = json(&["impact", demo.db(), lua["decision_id"].as_str().unwrap(), "--format", "json"]);
    assert_eq!(impact["descendants"].as_array().unwrap().len(), 4);
    assert_eq!(impact["artifacts"], serde_json::json!(["src/api/ratelimit.lua"]));
    // Downstream: what the subplan built on the load test's acceptance, never an ancestor.
    let downstream = impact["downstream_decisions"].as_array().unwrap();
    assert_eq!(downstream.len(), 1);
    assert_ne!(downstream[0], s3["decision_id"]);
    let built = json(&["show", demo.db(), downstream[0].as_str().unwrap(), "--format", "json"]);
    assert_eq!(built["decision"]["chosen_option"], "A Starlette middleware keyed by API key");
    let spawn = find(&all, "Spawn a subplan");
    let impact = json(&["impact", demo.db(), spawn["decision_id"].as_str().unwrap(), "--format", "json"]);
    assert_eq!(impact["downstream_plans"].as_array().unwrap().len(), 1);

    // --effective hides corrected and superseded decisions; their children move up.
    let eff = nodes(&json(&["tree", demo.db(), &plan, "--effective", "--format", "json"]));
    assert_eq!(eff.len(), 10);
    assert!(eff.iter().all(|n| n["effective"] == true));
    assert!(eff.iter().any(|n| n["chosen_option"].as_str().unwrap().starts_with("Retry after Redis")));

    let text = ok(&["tree", demo.db(), &plan]);
    assert!(text.contains("[corrected by #3]") && text.contains("[superseded by #10]"), "{text}");
}

#[test]
fn dot_and_mermaid_show_history_links_as_styled_edges() {
    let demo = Demo::new();
    let plan = demo.main_plan();
    let dot = ok(&["tree", demo.db(), &plan, "--format", "dot"]);
    assert!(dot.starts_with("digraph"));
    assert_eq!(dot.matches("label=\"corrects\"").count(), 2);
    assert_eq!(dot.matches("label=\"superseded by\"").count(), 1);
    if Command::new("dot").arg("-V").output().is_ok() {
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(dot.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "dot rejected the output: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mermaid = ok(&["tree", demo.db(), &plan, "--format", "mermaid"]);
    assert!(mermaid.starts_with("flowchart TD"));
    assert_eq!(mermaid.matches("-. corrects .->").count(), 2);
    assert_eq!(mermaid.matches("-. superseded by .->").count(), 1);
}

#[test]
fn check_reports_problems_in_a_damaged_store() {
    let demo = Demo::new();
    assert_eq!(json(&["check", demo.db(), "--format", "json"]), serde_json::json!({"ok": true, "problems": []}));
    let all = nodes(&demo.tree());
    let child = find(&all, "Never throttle")["decision_id"].as_str().unwrap().to_owned();
    let conn = rusqlite::Connection::open(&demo.db).unwrap();
    // Someone bypasses the schema's guards by hand.
    conn.execute_batch("DROP TRIGGER decisions_no_update;").unwrap();
    conn.execute(
        "UPDATE decisions SET parent_decision_id = '01ARZ3NDEKTSV4RRFFQ69G5FAV' WHERE decision_id = ?1",
        [&child],
    )
    .unwrap();
    conn.execute("UPDATE decisions SET metadata = '{broken' WHERE sequence = 12", []).unwrap();
    drop(conn);
    let r = dstore(&["check", demo.db(), "--format", "json"]);
    assert_eq!(r.code, 1);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let kinds: Vec<&str> = report["problems"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"orphan") && kinds.contains(&"unreadable"), "{kinds:?}");
    let text = dstore(&["check", demo.db()]);
    assert_eq!(text.code, 1);
    assert!(text.stdout.contains(&child));
}

#[test]
fn project_and_child_context_json() {
    let demo = Demo::new();
    let p = json(&[
        "project",
        demo.db(),
        "--focus",
        "class://TokenBucket",
        "--focus",
        "class://RedisClient",
        "--breadth",
        "2",
        "--depth",
        "FULL_SOURCE",
        "--format",
        "json",
    ]);
    assert_eq!(p["spec"]["focus"], serde_json::json!(["class://TokenBucket", "class://RedisClient"]));
    let nodes = p["nodes"].as_array().unwrap();
    let keys: Vec<(u64, String)> =
        nodes.iter().map(|n| (n["distance"].as_u64().unwrap(), n["uri"].as_str().unwrap().to_owned())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "not in (distance, uri) order");
    assert_eq!(nodes[0]["resolved_depth"], 9);
    let f = json(&[
        "project",
        demo.db(),
        "--focus",
        "class://TokenBucket",
        "--breadth",
        "2",
        "--depth",
        "9",
        "--fragments",
        "--budget",
        "40",
        "--format",
        "json",
    ]);
    let frags = f["fragments"].as_array().unwrap();
    let total: u64 = frags.iter().map(|x| x["tokens"].as_u64().unwrap()).sum();
    assert!(total <= 40 && !frags.is_empty());
    assert!(!f["dropped"].as_array().unwrap().is_empty());
    assert_eq!(frags[0]["metadata"]["projected"], true);
    for key in ["uko_node", "content", "tokens", "detail_depth", "domain", "resource_uri", "score", "metadata"] {
        assert!(frags[0].get(key).is_some(), "fragment lacks {key}");
    }
    let plan = demo.main_plan();
    let c = json(&["child-context", demo.db(), "--plan", &plan, "--budget", "2000", "--format", "json"]);
    assert_eq!(
        c["request"]["focus"],
        serde_json::json!(["class://RateLimitMiddleware", "project://src/api/middleware.py"])
    );
    assert_eq!(c["depth_delta"], 1);
    assert_eq!(c["request"]["depth_gradient"], true);
    let skeleton = c["skeleton_fragments"].as_array().unwrap();
    assert!(!skeleton.is_empty() && c["skeleton_tokens"].as_u64().unwrap() <= 300);
    assert!(
        skeleton[0]["uko_node"].as_str().unwrap().contains("RateLimitMiddleware")
            || skeleton[0]["uko_node"].as_str().unwrap().contains("middleware")
    );
    fails(
        &["child-context", demo.db(), "--plan", &plan, "--budget", "100", "--parent-depth", "2", "--child-depth", "1"],
        2,
        "child_depth_in_tree",
    );
}

#[test]
fn schema_describes_every_exported_field() {
    let schema: Value = serde_json::from_str(&ok(&["schema"])).unwrap();
    let props = schema["properties"].as_object().unwrap();
    let demo = Demo::new();
    for line in ok(&["export", demo.db()]).lines() {
        let d: Value = serde_json::from_str(line).unwrap();
        for (k, _) in d.as_object().unwrap() {
            assert!(props.contains_key(k), "schema lacks {k}");
        }
    }
    assert_eq!(props.len(), 17);
    assert_eq!(schema["properties"]["decision_type"]["enum"].as_array().unwrap().len(), 11);
}

#[test]
fn two_imports_into_one_file_at_once_both_succeed() {
    let demo = Demo::new();
    let exported = ok(&["export", demo.db()]);
    let plans: Vec<String> = json(&["plans", demo.db(), "--format", "json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["plan_id"].as_str().unwrap().to_owned())
        .collect();
    let target = demo.path("shared.db");
    ok(&["init", s(&target)]);
    let files: Vec<PathBuf> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = demo.path(&format!("plan{i}.jsonl"));
            let own = format!("\"plan_id\":\"{p}\"");
            std::fs::write(&f, exported.lines().filter(|l| l.contains(&own)).collect::<Vec<_>>().join("\n")).unwrap();
            f
        })
        .collect();
    all_at_once(&files.iter().map(|f| vec!["import", s(&target), s(f), "--batch", "1"]).collect::<Vec<_>>());
    assert_eq!(ok(&["export", s(&target)]), exported);
}

#[test]
fn progress_shows_on_a_terminal_and_never_when_piped() {
    let demo = Demo::new();
    let file = demo.path("all.jsonl");
    std::fs::write(&file, ok(&["export", demo.db()])).unwrap();
    let piped = dstore(&["import", s(&demo.path("piped.db")), s(&file)]);
    assert_eq!(piped.code, 0);
    assert!(!piped.stderr.contains('\r') && !piped.stderr.contains('%'), "progress on a pipe: {:?}", piped.stderr);
    // `script` gives the command a terminal, where available.
    let cmd = format!("{} import {} {}", env!("CARGO_BIN_EXE_dstore"), s(&demo.path("tty.db")), s(&file));
    let Ok(out) = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output() else { return };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("17 lines") && text.contains("(100%)") && text.contains("imported 17"), "{text:?}");
}
