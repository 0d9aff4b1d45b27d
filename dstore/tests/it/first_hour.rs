//! What a new user meets in the first hour (issue 37): the demo leaves a
//! store of theirs alone, a killed writer never locks readers out, ids are
//! typed as people type them, plans say what they are for, budgets keep the
//! focus, staleness has one answer, and messages speak the user's words.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{dstore, dstore_with_stdin, fails, json, ok, s};

/// The demo store in a temp dir, with the plan and id the demo's text names.
fn demo(dir: &Path) -> String {
    let db = dir.join("demo.db");
    ok(&["demo", s(&db)]);
    s(&db).to_owned()
}

fn main_plan(db: &str) -> String {
    let plans = json(&["plans", db, "--format", "json"]);
    let main = plans.as_array().unwrap().iter().max_by_key(|p| p["decisions"].as_u64()).unwrap();
    main["plan_id"].as_str().unwrap().to_owned()
}

#[test]
fn the_demo_replaces_only_a_demo_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    // Again on its own store: the same store, silently.
    let first = ok(&["export", &db]);
    ok(&["demo", &db]);
    assert_eq!(ok(&["export", &db]), first, "the demo is the same store every time");
    // A store of one's own is never replaced without --force.
    let mine = dir.path().join("mine.db");
    let plan = main_plan(&db);
    let three: String = first.lines().filter(|l| l.contains(&plan)).take(3).map(|l| format!("{l}\n")).collect();
    dstore_with_stdin(&["import", s(&mine), "-"], Some(&three));
    let r = dstore(&["demo", s(&mine)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("holds 3 decisions and 0 graph nodes") && r.stderr.contains("--force"), "{}", r.stderr);
    assert_eq!(json(&["info", s(&mine), "--format", "json"])["decisions"], 3, "nothing of it changed");
    ok(&["demo", s(&mine), "--force"]);
    assert_eq!(json(&["info", s(&mine), "--format", "json"])["decisions"], 17);
    // A file that is no store is never replaced, forced or not.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "my notes").unwrap();
    fails(&["demo", s(&other), "--force"], 2, "not a decision store");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "my notes");
}

#[test]
fn readers_read_what_a_killed_first_load_left() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.jsonl");
    decision_store::testing::write_decisions_file(&file, 60, 2000).unwrap();
    let db = dir.path().join("fresh.db");
    let journal = dir.path().join("fresh.db-journal");
    // A first load writes without the log, under a rollback journal: kill it mid-load.
    let mut child = Command::new(env!("CARGO_BIN_EXE_dstore"))
        .args(["import", s(&db), s(&file)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Its journal, once the load has written rows (the new store's schema
    // alone is under 1 MiB).
    while !(journal.exists() && std::fs::metadata(&db).is_ok_and(|m| m.len() > 2 << 20)) {
        assert!(child.try_wait().unwrap().is_none(), "the import ended before it could be killed mid-load");
        assert!(started.elapsed() < Duration::from_secs(60), "the import never began its first load");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Every reader reads the store, and what was committed is there.
    let checked = dstore(&["check", s(&db)]);
    assert_eq!(checked.code, 0, "check: {} {}", checked.stdout, checked.stderr);
    let info = json(&["info", s(&db), "--format", "json"]);
    let kept = info["decisions"].as_u64().unwrap();
    assert!(kept < 120_000, "{kept} decisions: the import was not killed mid-load");
    assert_eq!(kept % 65_536, 0, "{kept} decisions: a first load commits every 65,536");
    ok(&["plans", s(&db)]);
    assert!(!journal.exists(), "the journal was rolled back");
    // Importing again completes it.
    ok(&["import", s(&db), s(&file)]);
    assert_eq!(json(&["info", s(&db), "--format", "json"])["decisions"], 120_000);
}

#[test]
fn ids_are_taken_as_people_type_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let plan = main_plan(&db);
    let tree = json(&["tree", &db, &plan, "--format", "json"]);
    let third = tree["roots"][0]["children"][2]["decision_id"].as_str().unwrap().to_owned();
    let seq = tree["roots"][0]["children"][2]["sequence"].as_u64().unwrap();
    // PLAN#SEQ, as `tree` shows a decision; a unique beginning of the id, any case.
    let by_seq = json(&["show", &db, &format!("{plan}#{seq}"), "--format", "json"]);
    assert_eq!(by_seq["decision"]["decision_id"], third);
    let by_prefix = json(&["show", &db, &third[..14].to_lowercase(), "--format", "json"]);
    assert_eq!(by_prefix["decision"]["decision_id"], third);
    assert!(by_prefix["made_at"].as_str().unwrap().starts_with("2026-11-02T09:"), "{by_prefix}");
    ok(&["chain", &db, &format!("{}#{seq}", &plan[..12])]);
    // A plan's id where a decision's goes: said so.
    fails(&["show", &db, &plan], 2, "is a plan's id");
    // Several ids begin so: some are named.
    fails(&["show", &db, &third[..6]], 2, "give more of it");
    // A plan by the beginning of its id.
    assert!(ok(&["tree", &db, &plan[..12]]).starts_with(&format!("plan {plan}  (13 decisions")));
    // The demo's last words name a decision to show, as one can type it.
    let out = ok(&["demo", &db]);
    let next = out.lines().last().unwrap_or_default();
    assert!(out.contains(&format!("dstore show {db} {plan}#3")), "{next}");
}

#[test]
fn plans_say_what_they_are_for_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let plans = json(&["plans", &db, "--format", "json"]);
    let goals: Vec<&str> = plans.as_array().unwrap().iter().map(|p| p["goal"].as_str().unwrap()).collect();
    // The subplan started an hour after the main plan: newest first.
    assert_eq!(goals, ["Implement RateLimitMiddleware", "Add per-key rate limiting to the public API"]);
    let text = ok(&["plans", &db]);
    assert!(text.lines().next().unwrap().contains("GOAL"), "{text}");
    assert!(text.contains("2026-11-02 10:01") && text.contains("Add per-key rate limiting"), "{text}");
    let found = json(&["plans", &db, "RATE", "limiting", "--format", "json"]);
    assert_eq!(found.as_array().unwrap().len(), 1);
    assert_eq!(ok(&["plans", &db, "nothing", "matches"]), "no plans: no plan's goal holds \"nothing matches\"\n");
}

#[test]
fn a_budget_keeps_the_focus_first_and_says_when_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let project = |budget: &str| {
        dstore(&[
            "project",
            &db,
            "--focus",
            "class://TokenBucket",
            "--fragments",
            "--budget",
            budget,
            "--format",
            "json",
        ])
    };
    // Too small for even the focus's name: said, not answered with nothing.
    let r = project("1");
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stderr.contains("cannot hold the focus class://TokenBucket"), "{}", r.stderr);
    // A small budget: the focus comes first, at a view that fits, then the nearest.
    for budget in ["12", "30", "80"] {
        let doc: Value = serde_json::from_str(&project(budget).stdout).unwrap();
        let fragments = doc["fragments"].as_array().unwrap();
        assert_eq!(fragments[0]["uko_node"], "class://TokenBucket", "budget {budget}: {doc}");
        assert!(doc["total_tokens"].as_u64().unwrap() <= budget.parse().unwrap());
        let distances: Vec<u64> = fragments.iter().map(|f| f["metadata"]["distance"].as_u64().unwrap_or(0)).collect();
        assert!(distances.windows(2).all(|w| w[0] <= w[1]), "nearer before farther at {budget}: {distances:?}");
    }
    // A child plan's skeleton at a small budget still inherits what fits.
    let plan = main_plan(&db);
    let child = json(&["child-context", &db, "--plan", &plan, "--budget", "200", "--format", "json"]);
    assert!(!child["skeleton_fragments"].as_array().unwrap().is_empty(), "{child}");
    assert!(child["skeleton_tokens"].as_u64().unwrap() <= 50, "{child}");
}

#[test]
fn staleness_has_one_answer_and_a_store_without_a_graph_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let stale_of = |args: &[&str]| -> Value {
        let r = dstore(args);
        assert_eq!(r.code, 1, "stale: {}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    };
    let stale = stale_of(&["stale", &db, "--format", "json"]);
    assert!(!stale["stale"].as_array().unwrap().is_empty(), "{stale}");
    let at_risk = stale["at_risk"].as_array().unwrap().len();
    // Overturned decisions are counted only when asked for.
    let all = stale_of(&["stale", &db, "--all", "--format", "json"]);
    assert!(!all["stale"].as_array().unwrap().is_empty());
    assert!(stale["at_risk"].as_array().unwrap().iter().all(|a| a["effective"] == true), "{stale}");
    assert!(at_risk > 0);
    // Without a graph: one answer, bad input.
    let bare = dir.path().join("bare.db");
    let export = ok(&["export", &db]);
    dstore_with_stdin(&["import", s(&bare), "-"], Some(&export));
    fails(&["stale", s(&bare)], 2, "nothing to compare with: the graph is empty");
}

#[test]
fn messages_speak_the_users_words() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let plan = main_plan(&db);
    let line = |field: &str, value: &str| {
        format!(r#"{{"decision_id":"01M6DR0M00VS0000000000XXXX","plan_id":"{plan}","sequence":99,"decision_type":"strategy_choice","parent_decision_id":null,{field}:{value}}}"#)
            .replace("XXXX", "0099")
    };
    let r = dstore_with_stdin(&["import", &db, "-"], Some(&line("\"confidence_score\"", "\"high\"")));
    assert!(r.stderr.contains("invalid confidence_score: text \"high\" is not a number"), "{}", r.stderr);
    let r = dstore_with_stdin(&["import", &db, "-"], Some(&line("\"confidence_score\"", "1.5")));
    assert!(r.stderr.contains("1.5 is not between 0 and 1"), "{}", r.stderr);
    let bad_type = line("\"rationale\"", "\"x\"").replace("strategy_choice", "strategy");
    let r = dstore_with_stdin(&["import", &db, "-"], Some(&bad_type));
    assert!(r.stderr.contains("\"strategy\" is not one of prompt_definition,"), "{}", r.stderr);
    // One of a thing is one, not "1 decisions".
    let project =
        ok(&["project", &db, "--focus", "function://Settings.load", "--breadth", "0", "--ranking", "distance"]);
    assert!(project.contains(": 1 node\n"), "{project}");
    // `info` shows the counts by type under the decisions.
    let info = ok(&["info", &db]);
    let rows: Vec<&str> = info.lines().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    let (decisions, graph) = (rows.iter().position(|r| *r == "decisions"), rows.iter().position(|r| *r == "graph"));
    let first_type = rows.iter().position(|r| *r == "error_recovery");
    assert!(decisions < first_type && first_type < graph, "{info}");
    // The demo's validation names what builds on it downstream, never its own ancestor.
    let tree = json(&["tree", &db, &plan, "--format", "json"]);
    let strategy = tree["roots"][0]["children"][3]["decision_id"].as_str().unwrap().to_owned();
    let impact = json(&["impact", &db, &strategy, "--format", "json"]);
    assert!(!impact["downstream_decisions"].as_array().unwrap().iter().any(|d| d == &Value::from(strategy.clone())));
}
