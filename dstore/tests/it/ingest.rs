//! `dstore ingest` and `dstore project` on a small Python tree: what the
//! command prints, its JSON report, and its refusals. (What ingest builds
//! is the library's suite: `tests/it/ingest.rs` at the root.)

use std::path::Path;

use crate::common::{dstore, json, ok, s};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn tree(root: &Path) {
    write(root, "app.py", "from pkg.util import helper\n\n\ndef main():\n    return helper(1)\n");
    write(root, "pkg/__init__.py", "");
    write(root, "pkg/util.py", "def helper(x):\n    \"\"\"Doubles.\"\"\"\n    return 2 * x\n");
    write(root, "broken.py", "def good():\n    return 1\n\n\ndef bad(:\n    return\n");
    write(root, "big.py", &"x = 1\n".repeat(400));
}

#[test]
fn ingest_reports_what_it_did_and_project_shows_the_neighbourhood() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    tree(&root);
    let db = dir.path().join("g.db");
    let report = json(&["ingest", s(&db), s(&root), "--max-file-bytes", "2000", "--format", "json"]);
    assert_eq!(report["parse_errors"], serde_json::json!(["broken.py"]));
    assert_eq!((report["files"].as_u64(), report["parsed"].as_u64()), (Some(5), Some(4)), "{report}");
    assert!(report["skipped"][0]["reason"].as_str().unwrap().contains("over the limit of 2000 bytes"), "{report}");
    // Again: nothing to parse, and the text says so.
    let text = ok(&["ingest", s(&db), s(&root), "--max-file-bytes", "2000"]);
    assert!(
        text.starts_with(&format!("ingested {}: 5 files (0 parsed, 4 unchanged, 0 removed)", root.display())),
        "{text}"
    );
    assert!(text.contains("1 skipped:\n  big.py: 2400 bytes, over the limit of 2000 bytes"), "{text}");
    // Not a directory, or missing: a clear error, exit 2 and 3.
    let r = dstore(&["ingest", s(&db), s(&root.join("app.py"))]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is not a directory"), "{}", r.stderr);
    assert_ne!(dstore(&["ingest", s(&db), s(&dir.path().join("nope"))]).code, 0);

    // The defaults: the focus's outline, then the files it uses, by their signatures.
    let doc = json(&["project", s(&db), "--focus", "app.py", "--fragments", "--budget", "8000", "--format", "json"]);
    assert_eq!(doc["spec"]["focus"], serde_json::json!(["project://app.py"]));
    assert_eq!(doc["spec"]["direction"], "both");
    assert_eq!(doc["spec"]["breadth"], 2);
    let fragments = doc["fragments"].as_array().unwrap();
    assert_eq!(fragments[0]["uko_node"], "project://app.py");
    let helper = fragments.iter().find(|f| f["uko_node"] == "function://pkg.util.helper").expect("helper shown");
    assert_eq!(helper["content"], "def helper(x)\n    Doubles.");
    // The distance ranking walks six node hops unless told otherwise.
    let doc = json(&["project", s(&db), "--focus", "project://app.py", "--ranking", "distance", "--format", "json"]);
    assert_eq!(doc["spec"]["breadth"], 6);
    assert_eq!(doc["spec"]["ranking"], "distance");
    assert!(doc["nodes"].as_array().unwrap().iter().any(|n| n["uri"] == "function://app.main"), "{doc}");
    // A focus that names no node: the same words as every face.
    let r = dstore(&["project", s(&db), "--focus", "nope.py"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("project://nope.py is not a node of the graph"), "{}", r.stderr);
}
