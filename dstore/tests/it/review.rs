//! `stale` and `calibration`, through the library and the `dstore` binary,
//! against temp-file stores; calibration figures checked against values
//! worked out by hand.

use std::path::Path;

use crate::common::{dstore, json, ok, s};
use decision_store::calibration::{CalibrationOptions, GroupBy};
use decision_store::stale::{RiskPath, StaleOptions};
use decision_store::uko::{UkoEdge, UkoNode};
use decision_store::{Decision, DecisionType, Error, PlanId, Store};
use serde_json::Value;

fn node(uri: &str, body: &str) -> UkoNode {
    UkoNode::new(uri, "uko-code:", "class", uri).with_view(0, uri).with_view(9, body)
}

fn write_nodes(path: &Path, nodes: &[UkoNode]) {
    let text: String = nodes.iter().map(|n| serde_json::to_string(n).unwrap() + "\n").collect();
    std::fs::write(path, text).unwrap();
}

/// A store whose graph holds `class://A` (given version v1), `class://B`
/// (no version: derived from its views) and `class://C`, and two plans:
///
/// - plan 1: `root` saw A; `child` (below root) saw nothing; `grandchild`
///   below child; `old` saw A and was corrected by `fix`, which saw B; `side`
///   saw C; `old_child` (below `old`, effective); `loose` recorded B without
///   a version. `root` names `other` (plan 2) as downstream.
/// - plan 2: `other`, with a child `leaf`, which names `root` (a cycle) and
///   a decision never stored as downstream.
struct Fixture {
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    nodes: std::path::PathBuf,
    ids: std::collections::HashMap<&'static str, String>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent.db");
        let nodes = dir.path().join("nodes.jsonl");
        let edges = dir.path().join("edges.jsonl");
        write_nodes(
            &nodes,
            &[
                node("class://A", "class A: ...").with_version("v1"),
                node("class://B", "class B: ..."),
                node("class://C", "class C"),
            ],
        );
        std::fs::write(
            &edges,
            serde_json::to_string(&UkoEdge::new("class://A", "class://B", "imports")).unwrap() + "\n",
        )
        .unwrap();
        ok(&["import-graph", s(&db), s(&nodes), s(&edges)]);

        let mut store = Store::open(&db).unwrap();
        let (p1, p2) = (PlanId::generate(), PlanId::generate());
        use DecisionType::*;
        let other = Decision::builder(p2, PromptDefinition, 0).build().unwrap();
        let ghost = decision_store::DecisionId::generate();
        let leaf = Decision::builder(p2, ToolInvocation, 1).parent(other.decision_id()).downstream_decision(ghost);
        let root = Decision::builder(p1, PromptDefinition, 0)
            .context_snapshot(store.snapshot_of(&["class://A"]).unwrap())
            .downstream_decision(other.decision_id())
            .build()
            .unwrap();
        let leaf = leaf.downstream_decision(root.decision_id()).build().unwrap();
        let child = Decision::builder(p1, StrategyChoice, 1).parent(root.decision_id()).build().unwrap();
        let grandchild = Decision::builder(p1, ToolInvocation, 2).parent(child.decision_id()).build().unwrap();
        let old = Decision::builder(p1, StrategyChoice, 3)
            .parent(root.decision_id())
            .context_snapshot(store.snapshot_of(&["class://A"]).unwrap())
            .build()
            .unwrap();
        let fix = Decision::builder(p1, StrategyChoice, 4)
            .parent(root.decision_id())
            .corrects(old.decision_id())
            .context_snapshot(store.snapshot_of(&["class://B"]).unwrap())
            .build()
            .unwrap();
        let side = Decision::builder(p1, ResourceSelection, 5)
            .parent(root.decision_id())
            .context_snapshot(store.snapshot_of(&["class://C"]).unwrap())
            .build()
            .unwrap();
        let old_child = Decision::builder(p1, ToolInvocation, 6).parent(old.decision_id()).build().unwrap();
        let unversioned = decision_store::ResourceRef::new("class://B", None, None).unwrap();
        let loose = Decision::builder(p1, ToolInvocation, 7)
            .parent(root.decision_id())
            .context_snapshot(decision_store::ContextSnapshot::new("", vec![unversioned], None))
            .build()
            .unwrap();
        let all = [&other, &leaf, &root, &child, &grandchild, &old, &fix, &side, &old_child, &loose];
        store.insert_many(all).unwrap();
        let names = ["other", "leaf", "root", "child", "grandchild", "old", "fix", "side", "old_child", "loose"];
        let mut ids: std::collections::HashMap<&'static str, String> =
            names.iter().zip(all).map(|(n, d)| (*n, d.decision_id().to_string())).collect();
        ids.insert("ghost", ghost.to_string());
        Fixture { _dir: dir, db, nodes, ids }
    }

    fn db(&self) -> &str {
        s(&self.db)
    }

    fn id(&self, name: &str) -> &str {
        &self.ids[name]
    }

    fn import_nodes(&self, nodes: &[UkoNode]) {
        write_nodes(&self.nodes, nodes);
        let edges = self.nodes.with_file_name("none.jsonl");
        std::fs::write(&edges, "").unwrap();
        ok(&["import-graph", self.db(), s(&self.nodes), s(&edges)]);
    }

    fn stale(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["stale", self.db(), "--format", "json"];
        args.extend_from_slice(extra);
        let r = dstore(&args);
        (r.code, serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout)))
    }
}

fn ids_of(list: &Value) -> Vec<&str> {
    list.as_array().unwrap().iter().map(|x| x["decision_id"].as_str().unwrap()).collect()
}

#[test]
fn snapshots_record_the_graphs_versions_and_unknown_nodes_are_refused() {
    let f = Fixture::new();
    let store = Store::open_read_only(&f.db).unwrap();
    let snap = store.snapshot_of(&["class://A", "class://B", "class://A"]).unwrap();
    let versions: Vec<_> = snap.resources().iter().map(|r| (r.resource_id(), r.version().unwrap())).collect();
    assert_eq!(versions.len(), 2, "duplicates kept once");
    assert_eq!(versions[0], ("class://A", "v1"));
    // B was given no version: it is the hash of its views, as in memory.
    assert_eq!(versions[1].1, node("class://B", "class B: ...").current_version());
    assert!(versions[1].1.starts_with("sha256:") && versions[1].1.len() == 7 + 64);
    assert_eq!(snap.resources()[0].resource_type(), Some("class"));
    // The same versions hash alike; another version hashes otherwise.
    assert_eq!(store.snapshot_of(&["class://A", "class://B"]).unwrap().hash(), snap.hash());
    assert_ne!(store.snapshot_of(&["class://A"]).unwrap().hash(), snap.hash());
    assert!(
        matches!(store.snapshot_of(&["class://A", "class://Nope"]), Err(Error::UnknownNode(u)) if u == "class://Nope")
    );
    assert_eq!(store.node_version("class://A").unwrap().as_deref(), Some("v1"));
    assert_eq!(store.node_version("class://Nope").unwrap(), None);
}

#[test]
fn nothing_is_stale_until_the_graph_moves() {
    let f = Fixture::new();
    let (code, report) = f.stale(&[]);
    assert_eq!(code, 0);
    assert_eq!(report["stale"], Value::Array(vec![]));
    assert_eq!(report["checked_decisions"], 10);
    assert_eq!(report["checked_resources"], 5);
    assert!(ok(&["stale", f.db()]).starts_with("nothing stale: 10 decisions"));
    // Re-importing the same graph changes no version.
    f.import_nodes(&[node("class://A", "class A: ...").with_version("v1"), node("class://B", "class B: ...")]);
    assert_eq!(f.stale(&[]).0, 0);
}

#[test]
fn a_changed_node_makes_its_decisions_stale_and_puts_what_builds_on_them_at_risk() {
    let f = Fixture::new();
    f.import_nodes(&[node("class://A", "class A: changed").with_version("v2")]);
    let (code, report) = f.stale(&[]);
    assert_eq!(code, 1, "{report}");
    // `old` saw A too, but `fix` corrected it: an overturned decision no longer matters.
    assert_eq!(ids_of(&report["stale"]), [f.id("root")]);
    let changed = &report["stale"][0]["resources"][0];
    assert_eq!(changed["resource_id"], "class://A");
    assert_eq!(changed["recorded_version"], "v1");
    assert_eq!(changed["current_version"], "v2");
    // Below root: child, grandchild, fix, side, old_child, loose (old is overturned); downstream:
    // other in plan 2, its child, and the id that child names but nobody stored.
    // The cycle back to root ends there.
    let at_risk = &report["at_risk"];
    let mut risky = ids_of(at_risk);
    risky.sort_unstable();
    let mut want =
        ["child", "grandchild", "fix", "side", "old_child", "loose", "other", "leaf", "ghost"].map(|n| f.id(n));
    want.sort_unstable();
    assert_eq!(risky, want);
    let via = |name: &str| {
        let a = at_risk.as_array().unwrap().iter().find(|a| a["decision_id"] == f.id(name)).unwrap();
        assert_eq!(a["because_of"][0]["stale_decision_id"], f.id("root"));
        a["because_of"][0]["via"].as_str().unwrap().to_owned()
    };
    assert_eq!(via("grandchild"), "descendant");
    assert_eq!(via("other"), "downstream");
    assert_eq!(via("leaf"), "downstream");
    assert_eq!(via("old_child"), "descendant");
    let ghost = at_risk.as_array().unwrap().last().unwrap();
    assert_eq!((&ghost["decision_id"], &ghost["plan_id"]), (&Value::from(f.id("ghost")), &Value::Null));

    // --all reports the overturned decision too, marked as such, and the decision it risks.
    let (_, all) = f.stale(&["--all"]);
    let stale = ids_of(&all["stale"]);
    assert_eq!(stale, [f.id("root"), f.id("old")]);
    assert_eq!(all["stale"][1]["effective"], false);
    // An overturned stale decision steers nothing: it puts nothing more at risk.
    assert_eq!(ids_of(&all["at_risk"]), ids_of(at_risk));

    // One plan: only its decisions are checked; what is at risk may lie in another.
    let plan2 = json(&["plans", f.db(), "--format", "json"]);
    let plan_of_other = plan2.as_array().unwrap().iter().find(|p| p["decisions"] == 2).unwrap()["plan_id"].clone();
    let (code, only2) = f.stale(&["--plan", plan_of_other.as_str().unwrap()]);
    assert_eq!((code, only2["checked_decisions"].as_u64()), (0, Some(2)));

    // The text report names the resource and both versions.
    let text = dstore(&["stale", f.db()]);
    assert_eq!(text.code, 1);
    assert!(text.stdout.contains("changed  class://A  recorded v1, now v2"), "{}", text.stdout);
    assert!(text.stdout.contains(&format!("downstream of {}", f.id("root"))), "{}", text.stdout);
}

#[test]
fn a_view_change_moves_an_unversioned_node_and_a_removed_node_is_gone() {
    let f = Fixture::new();
    f.import_nodes(&[node("class://B", "class B: edited")]);
    let (code, report) = f.stale(&[]);
    assert_eq!(code, 1);
    // `loose` recorded B without a version: B is there, so it is not stale.
    assert_eq!(ids_of(&report["stale"]), [f.id("fix")]);
    let r = &report["stale"][0]["resources"][0];
    assert_ne!(r["recorded_version"], r["current_version"]);

    let mut store = Store::open(&f.db).unwrap();
    assert_eq!(store.remove_nodes(&["class://C".into(), "class://Nope".into()]).unwrap(), 1);
    let report = store.stale(StaleOptions::default()).unwrap();
    let side = report.stale.iter().find(|d| d.decision_id.to_string() == f.id("side")).unwrap();
    assert_eq!(side.resources[0].resource_id, "class://C");
    assert_eq!(side.resources[0].current_version, None, "gone from the graph");
    assert!(report.at_risk.iter().all(|a| a.decision_id.to_string() != f.id("side")));
    let text = ok_or_one(&["stale", f.db()]);
    assert!(text.contains("missing  class://C  recorded sha256:"), "{text}");
    // A removed node takes its edges with it.
    assert_eq!(store.graph_counts().unwrap().nodes, 2);
    store.remove_nodes(&["class://A".into()]).unwrap();
    assert_eq!(store.graph_counts().unwrap().edges, 0);
    let report = store.stale(StaleOptions::default()).unwrap();
    let root = report.stale.iter().find(|d| d.decision_id.to_string() == f.id("root")).unwrap();
    assert_eq!(root.resources[0].current_version, None);
    assert!(report.at_risk.iter().any(|a| a.because_of[0].via == RiskPath::Downstream));
    // Without a version, only presence is checked: B gone makes `loose` stale
    // (D keeps the graph from being empty).
    store.upsert_nodes(&[node("class://D", "class D: ...")]).unwrap();
    store.remove_nodes(&["class://B".into()]).unwrap();
    let report = store.stale(StaleOptions::default()).unwrap();
    let loose = report.stale.iter().find(|d| d.decision_id.to_string() == f.id("loose")).unwrap();
    assert_eq!(
        (loose.resources[0].recorded_version.as_deref(), loose.resources[0].current_version.as_deref()),
        (None, None)
    );
    // With no graph at all there is nothing to compare with: said, not reported as stale.
    store.remove_nodes(&["class://D".into()]).unwrap();
    assert_eq!(store.graph_counts().unwrap().nodes, 0);
    assert!(matches!(store.stale(StaleOptions::default()), Err(decision_store::Error::EmptyGraph { resources: 5 })));
    drop(store);
    let r = dstore(&["stale", f.db()]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("the graph is empty"), "{}", r.stderr);
}

fn ok_or_one(args: &[&str]) -> String {
    let r = dstore(args);
    assert!(r.code == 0 || r.code == 1, "dstore {args:?}: {}", r.stderr);
    r.stdout
}

#[test]
fn node_versions_round_trip_through_the_interchange_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let nodes = dir.path().join("nodes.jsonl");
    let edges = dir.path().join("edges.jsonl");
    let text = "{\"uri\":\"a\",\"domain\":\"d:\",\"kind\":\"k\",\"label\":\"a\",\"version\":\"git:1234\",\"views\":[]}\n\
                {\"uri\":\"b\",\"domain\":\"d:\",\"kind\":\"k\",\"label\":\"b\",\"views\":[{\"depth\":0,\"content\":\"b\"}]}\n";
    std::fs::write(&nodes, text).unwrap();
    std::fs::write(&edges, "").unwrap();
    ok(&["import-graph", s(&db), s(&nodes), s(&edges)]);
    let (n2, e2) = (dir.path().join("n2.jsonl"), dir.path().join("e2.jsonl"));
    ok(&["export-graph", s(&db), s(&n2), s(&e2)]);
    assert_eq!(std::fs::read_to_string(&n2).unwrap(), text, "an absent version stays absent");

    std::fs::write(&nodes, "{\"uri\":\"c\",\"domain\":\"d:\",\"kind\":\"k\",\"label\":\"c\",\"version\":\"\"}\n")
        .unwrap();
    let r = dstore(&["import-graph", s(&db), s(&nodes), s(&edges)]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("line 1") && r.stderr.contains("version"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&n2).unwrap(), text);
}

/// Worked out by hand (docs/calibration.md):
///
/// | decision | type | confidence | outcome |
/// |---|---|---|---|
/// | root | prompt_definition | 1.0 | held |
/// | s1 | strategy_choice | 0.9 | overturned (corrected by s2) |
/// | s2 | strategy_choice | 0.6 | held |
/// | t1 | tool_invocation | 0.75 | overturned (superseded by t2) |
/// | t2 | tool_invocation | 0.95 | held |
/// | v | validation_response | none | (counted apart) |
///
/// Brier = (0² + 0.9² + 0.4² + 0.75² + 0.05²) / 5 = 1.535 / 5 = 0.307.
/// Bins: [0.6,0.7) holds s2 (0.6, 1 held): gap 0.4; [0.7,0.8) holds t1
/// (0.75, 0 held): gap 0.75; [0.9,1.0] holds root, s1, t2 (mean 0.95, 2/3
/// held): gap 0.28333…. ECE = 0.4/5 + 0.75/5 + 3/5 × 0.28333… = 0.4.
fn hand_built(db: &Path) -> PlanId {
    use DecisionType::*;
    let plan = PlanId::generate();
    let mut store = Store::open(db).unwrap();
    let root = Decision::builder(plan, PromptDefinition, 0).confidence_score(1.0).build().unwrap();
    let r = root.decision_id();
    let s1 = Decision::builder(plan, StrategyChoice, 1).parent(r).confidence_score(0.9).build().unwrap();
    let s2 = Decision::builder(plan, StrategyChoice, 2)
        .parent(r)
        .corrects(s1.decision_id())
        .confidence_score(0.6)
        .build()
        .unwrap();
    let t1 = Decision::builder(plan, ToolInvocation, 3).parent(r).confidence_score(0.75).build().unwrap();
    let t2 = Decision::builder(plan, ToolInvocation, 4).parent(r).confidence_score(0.95).build().unwrap();
    let v = Decision::builder(plan, ValidationResponse, 5).parent(t2.decision_id()).build().unwrap();
    store.insert_many([&root, &s1, &s2, &t1, &t2, &v]).unwrap();
    store.supersede(t1.decision_id(), t2.decision_id()).unwrap();
    plan
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("{a} is not a number"));
    assert!((a - b).abs() < 1e-12, "{a} != {b}");
}

#[test]
fn calibration_figures_equal_the_hand_computed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let plan = hand_built(&db);
    let c = json(&["calibration", s(&db), "--by", "type", "--format", "json"]);
    let o = &c["overall"];
    assert_eq!((o["decisions"].as_u64(), o["scored"].as_u64(), o["unscored"].as_u64()), (Some(6), Some(5), Some(1)));
    assert_eq!(o["held"], 3);
    close(&o["mean_confidence"], 4.2 / 5.0);
    close(&o["share_held"], 0.6);
    close(&o["brier"], 0.307);
    close(&o["ece"], 0.4);
    let bins = o["bins"].as_array().unwrap();
    assert_eq!(bins.len(), 10);
    let counts: Vec<u64> = bins.iter().map(|b| b["count"].as_u64().unwrap()).collect();
    assert_eq!(counts, [0, 0, 0, 0, 0, 0, 1, 1, 0, 3]);
    close(&bins[9]["mean_confidence"], 0.95);
    close(&bins[9]["share_held"], 2.0 / 3.0);
    assert_eq!(bins[0]["mean_confidence"], Value::Null);

    let group = |key: &str| c["groups"].as_array().unwrap().iter().find(|g| g["key"] == key).unwrap().clone();
    let keys: Vec<&str> = c["groups"].as_array().unwrap().iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["prompt_definition", "strategy_choice", "tool_invocation", "validation_response"]);
    close(&group("prompt_definition")["brier"], 0.0);
    close(&group("strategy_choice")["brier"], (0.81 + 0.16) / 2.0);
    close(&group("strategy_choice")["ece"], (0.9 + 0.4) / 2.0);
    close(&group("tool_invocation")["brier"], (0.5625 + 0.0025) / 2.0);
    close(&group("tool_invocation")["ece"], (0.75 + 0.05) / 2.0);
    let v = group("validation_response");
    assert_eq!((v["scored"].as_u64(), v["unscored"].as_u64(), &v["brier"]), (Some(0), Some(1), &Value::Null));

    // The library answers the same, by phase too.
    let store = Store::open_read_only(&db).unwrap();
    let lib = store.calibration(CalibrationOptions { by: Some(GroupBy::Phase), ..Default::default() }).unwrap();
    assert!((lib.overall.brier.unwrap() - 0.307).abs() < 1e-12);
    let phases: Vec<&str> = lib.groups.iter().map(|g| g.key.as_str()).collect();
    // strategy_choice is strategize-only, the others any or execute.
    assert!(phases.contains(&"strategize"), "{phases:?}");
    assert_eq!(lib.groups.iter().map(|g| g.metrics.decisions).sum::<u64>(), 6);

    let text = ok(&["calibration", s(&db)]);
    assert!(text.contains("0.307") && text.contains("0.400"), "{text}");
    let by_plan = json(&["calibration", s(&db), "--by", "plan", "--format", "json"]);
    let groups = by_plan["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["key"], Value::from(plan.to_string()));
    close(&groups[0]["brier"], 0.307);
}

#[test]
fn settled_after_counts_only_decisions_with_enough_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    hand_built(&db);
    // Sequences 0..=5: with 3 after, only 0, 1 and 2 count (root, s1, s2).
    let c = json(&["calibration", s(&db), "--settled-after", "3", "--format", "json"]);
    assert_eq!((c["overall"]["decisions"].as_u64(), c["unsettled"].as_u64()), (Some(3), Some(3)));
    close(&c["overall"]["brier"], (0.0 + 0.81 + 0.16) / 3.0);
    assert!(ok(&["calibration", s(&db), "--settled-after", "3"]).contains("3 left out as not yet settled"));
}

#[test]
fn the_reliability_diagram_is_well_formed_svg_with_a_bar_and_count_per_bin() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    hand_built(&db);
    let svg = ok(&["calibration", s(&db), "--format", "svg"]);
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not well-formed: {e}\n{svg}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_owned())
        .collect();
    let mut counts: Vec<&str> = texts.iter().filter(|t| t.starts_with("n=")).map(String::as_str).collect();
    counts.sort_unstable();
    assert_eq!(counts, ["n=1", "n=1", "n=3"], "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("perfect calibration")));
    assert!(texts.iter().any(|t| t.contains("Brier 0.307")));
    // One bar per non-empty bin (the other rects are the background and the legend's box).
    let bars = doc.descendants().filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#4682B4")).count();
    assert_eq!(bars, 3);
    assert_eq!(
        doc.descendants().filter(|n| n.has_tag_name("circle")).count(),
        3 + 1,
        "a point per bin and the legend's"
    );
}

#[test]
fn bad_arguments_get_clear_messages_and_never_a_division_by_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    ok(&["init", s(&db)]);
    let fails = |args: &[&str], code: i32, message: &str| {
        let r = dstore(args);
        assert_eq!(r.code, code, "dstore {args:?}: {}", r.stderr);
        assert!(r.stderr.contains(message), "dstore {args:?}: {:?} lacks {message:?}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    };
    fails(&["calibration", s(&db)], 1, "nothing to calibrate: the store holds no decisions");
    let plan = PlanId::generate().to_string();
    fails(&["calibration", s(&db), "--plan", &plan], 2, &format!("plan {plan} not found"));
    fails(&["stale", s(&db), "--plan", &plan], 2, &format!("plan {plan} not found"));
    fails(&["stale", s(&db), "--plan", "nope"], 2, "invalid plan_id: \"nope\" is not an id");
    fails(&["calibration", s(&db), "--by", "colour"], 2, "invalid value 'colour'");
    fails(&["calibration", s(&db), "--settled-after=-1"], 2, "--settled-after");
    assert!(ok(&["stale", s(&db)]).contains("nothing stale"));

    let mut store = Store::open(&db).unwrap();
    let p = PlanId::generate();
    let d = Decision::builder(p, DecisionType::PromptDefinition, 0).build().unwrap();
    store.insert(&d).unwrap();
    drop(store);
    fails(&["calibration", s(&db)], 1, "the one decision counted has no confidence score");
    let r = dstore(&["calibration", s(&db), "--format", "json"]);
    assert_eq!(r.code, 1, "the document, and a status that says nothing was calibrated");
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!((&doc["overall"]["unscored"], &doc["overall"]["brier"]), (&Value::from(1), &Value::Null));
    fails(&["calibration", s(&db), "--settled-after", "5"], 1, "--settled-after");
    let lib = Store::open_read_only(&db).unwrap().calibration(CalibrationOptions::default()).unwrap();
    assert_eq!((lib.overall.scored, lib.overall.brier, lib.overall.ece), (0, None, None));
    fails(&["calibration", "/nonexistent/x.db"], 2, "no decision store here yet");
}

#[test]
fn each_plans_decisions_are_counted_by_type() {
    let f = Fixture::new();
    let store = Store::open(&f.db).unwrap();
    let counts = store.plan_type_counts().unwrap();
    assert_eq!(counts.len(), 2);
    let mut by_plan: Vec<Vec<(DecisionType, u64)>> =
        counts.values().map(|c| c.iter().map(|(t, n)| (*t, *n)).collect()).collect();
    by_plan.sort_by_key(|c| c.iter().map(|(_, n)| n).sum::<u64>());
    use DecisionType::*;
    assert_eq!(by_plan[0], [(PromptDefinition, 1), (ToolInvocation, 1)]);
    // Every decision of every plan is counted once.
    let total: u64 = counts.values().flat_map(|c| c.values()).sum();
    assert_eq!(total, store.decision_counts().unwrap().decisions);
    for (plan, c) in &counts {
        let summary = store.plans().unwrap().into_iter().find(|p| p.plan_id == *plan).unwrap();
        assert_eq!(c.values().sum::<u64>(), summary.decisions, "{plan}");
        // One plan's summary alone is the same row.
        assert_eq!(store.plan_summary(*plan).unwrap(), Some(summary));
    }
    assert_eq!(store.plan_summary(PlanId::generate()).unwrap(), None);
    assert_eq!(by_plan[1], [(PromptDefinition, 1), (StrategyChoice, 3), (ResourceSelection, 1), (ToolInvocation, 3)]);
}
