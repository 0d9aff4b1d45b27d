//! `Store::ingest` on small Python and Rust trees made
//! here and TypeScript/JavaScript and Go trees in `tests/fixtures/ingest/`:
//! the nodes, views and edges of each language, re-ingest that touches
//! nothing, edits, removed files, bad input, and decisions that go stale
//! when the code they saw changes.

use std::collections::BTreeSet;
use std::path::Path;

use decision_store::ingest::IngestOptions;
use decision_store::projection::{Cl100k, Depth, DepthBreadthProjector, ProjectionSpec, Ranking};
use decision_store::stale::StaleOptions;
use decision_store::uko::Direction;
use decision_store::{Decision, DecisionType, ErrorKind, PlanId, Store};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const MODELS: &str = r#""""Data models."""
from .util import helper


class Base:
    """The root of all models."""

    def save(self):
        return helper(self)


class User(Base):
    def greet(self, name: str) -> str:
        """Says hello.

        Politely."""
        return f"hello {name}"
"#;

const UTIL: &str = "def helper(x):\n    return x\n\n\ndef other():\n    return 2\n";

const APP: &str =
    "import pkg.models\nfrom pkg.models import User\n\n\ndef main():\n    User().greet('a')\n    unknown_function()\n\n\ndef make(user: User) -> list[User]:\n    return [user]\n";

fn python_tree(root: &Path) {
    write(root, "pkg/__init__.py", "");
    write(root, "pkg/models.py", MODELS);
    write(root, "pkg/util.py", UTIL);
    write(root, "app.py", APP);
}

fn edges(store: &Store, uri: &str, relation: &str) -> BTreeSet<String> {
    store
        .neighbours(uri, Direction::Outgoing, Some(&[relation.to_owned()]))
        .unwrap()
        .into_iter()
        .map(|n| n.uri)
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn graph_dump(store: &Store) -> (Vec<u8>, Vec<u8>) {
    let (mut n, mut e) = (Vec::new(), Vec::new());
    store.export_graph(&mut n, &mut e).unwrap();
    (n, e)
}

#[test]
fn a_python_tree_becomes_files_modules_classes_and_functions_with_their_edges() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    python_tree(&tree);
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((report.files, report.parsed, report.unchanged), (4, 4, 0));
    assert!(report.skipped.is_empty() && report.parse_errors.is_empty(), "{report:?}");

    let g = store.load_graph().unwrap();
    let user = g.node("class://pkg.models.User").expect("class node");
    assert_eq!(user.resource_uri.as_deref(), Some("project://pkg/models.py"));
    assert_eq!(user.domain, "uko-code:");
    assert!(user.version.as_deref().unwrap().starts_with("sha256:"));
    let greet = g.node("function://pkg.models.User.greet").unwrap();
    assert_eq!(greet.view_at(0).unwrap().content, "greet");
    assert_eq!(greet.view_at(4).unwrap().content, "def greet(self, name: str) -> str\n    Says hello.");
    assert!(greet.view_at(9).unwrap().content.contains("return f\"hello {name}\""));
    let module = g.node("module://pkg.models").unwrap();
    assert_eq!(module.view_at(3).unwrap().content, "[MODULE_GRAPH]: symbols=Base,User");
    assert_eq!(g.node("module://pkg").unwrap().resource_uri.as_deref(), Some("project://pkg/__init__.py"));
    assert!(g.node("project://app.py").unwrap().view_at(9).unwrap().content.starts_with("import pkg.models"));

    assert_eq!(edges(&store, "project://pkg/models.py", "contains"), set(&["module://pkg.models"]));
    assert_eq!(
        edges(&store, "module://pkg.models", "contains"),
        set(&["class://pkg.models.Base", "class://pkg.models.User"])
    );
    assert_eq!(edges(&store, "class://pkg.models.Base", "contains"), set(&["function://pkg.models.Base.save"]));
    assert_eq!(edges(&store, "class://pkg.models.User", "inherits"), set(&["class://pkg.models.Base"]));
    // `from .util import helper` (relative) and `import pkg.models`, `from pkg.models import User`.
    assert_eq!(edges(&store, "module://pkg.models", "imports"), set(&["function://pkg.util.helper"]));
    assert_eq!(edges(&store, "module://app", "imports"), set(&["module://pkg.models", "class://pkg.models.User"]));
    // Calls resolve by name within the tree; `unknown_function` is left out, not guessed.
    assert_eq!(edges(&store, "function://pkg.models.Base.save", "calls"), set(&["function://pkg.util.helper"]));
    assert_eq!(edges(&store, "function://app.main", "calls"), set(&["function://pkg.models.User.greet"]));
    // Annotations name classes: `references`; `str` is not defined here and is left out.
    assert_eq!(edges(&store, "function://app.make", "references"), set(&["class://pkg.models.User"]));
    assert!(edges(&store, "function://pkg.models.User.greet", "references").is_empty());

    // The projection's fragments name the file each node comes from; with a
    // budget, the definitions of a file shown whole are covered by it.
    let spec = ProjectionSpec::new(["project://app.py"], 6, Depth::named("FULL_SOURCE")).unwrap();
    let set = DepthBreadthProjector::new().project_fragments(&store, &spec, &Cl100k, Some(8000)).unwrap();
    let greet = set.fragments.iter().find(|f| f.uko_node() == "function://pkg.models.User.greet").unwrap();
    assert_eq!(greet.resource_uri(), "project://pkg/models.py");
    assert!(set.covered.contains(&"function://app.main".to_owned()), "{:?}", set.covered);
    assert!(set.fragments.iter().all(|f| f.uko_node() != "function://app.main"));
}

#[test]
fn a_rust_tree_becomes_modules_types_traits_and_methods() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("shapes");
    write(&tree, "src/lib.rs", "//! Shapes.\nmod shape;\npub mod util;\nuse crate::shape::Area;\n\n/// Sums areas.\npub fn total(xs: &[shape::Square]) -> f64 {\n    xs.iter().map(|x| x.area()).sum()\n}\n");
    write(
        &tree,
        "src/shape.rs",
        "pub trait Area {\n    fn area(&self) -> f64;\n}\n\n/// A square.\n#[derive(Debug)]\npub struct Square(pub f64);\n\nimpl Area for Square {\n    fn area(&self) -> f64 {\n        util::square(self.0)\n    }\n}\n",
    );
    write(&tree, "src/util/mod.rs", "pub fn square(x: f64) -> f64 {\n    x * x\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn four() {\n        assert_eq!(super::square(2.0), 4.0);\n    }\n}\n");
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((report.files, report.parsed), (3, 3), "{report:?}");

    let g = store.load_graph().unwrap();
    assert_eq!(
        edges(&store, "module://shapes", "contains"),
        set(&["function://shapes.total", "module://shape", "module://util"])
    );
    assert_eq!(edges(&store, "module://shape", "contains"), set(&["class://shape.Area", "class://shape.Square"]));
    assert_eq!(edges(&store, "class://shape.Square", "implements"), set(&["class://shape.Area"]));
    assert_eq!(edges(&store, "class://shape.Square", "contains"), set(&["function://shape.Square.area"]));
    assert_eq!(edges(&store, "class://shape.Area", "contains"), set(&["function://shape.Area.area"]));
    assert_eq!(edges(&store, "module://shapes", "imports"), set(&["class://shape.Area"]));
    assert_eq!(edges(&store, "function://shape.Square.area", "calls"), set(&["function://util.square"]));
    // An inline test module is a module of its own, in the same file.
    assert_eq!(edges(&store, "module://util", "contains"), set(&["function://util.square", "module://util.tests"]));
    assert_eq!(
        g.node("function://util.tests.four").unwrap().resource_uri.as_deref(),
        Some("project://src/util/mod.rs")
    );
    assert_eq!(edges(&store, "function://shapes.total", "references"), set(&["class://shape.Square"]));
    // `x.area()` names two definitions in another file: left out, not guessed.
    assert!(edges(&store, "function://shapes.total", "calls").is_empty());
    let square = g.node("class://shape.Square").unwrap();
    assert_eq!(square.view_at(4).unwrap().content, "pub struct Square(pub f64);\n    A square.");
    assert_eq!(
        g.node("function://shapes.total").unwrap().view_at(4).unwrap().content,
        "pub fn total(xs: &[shape::Square]) -> f64\n    Sums areas."
    );
}

#[test]
fn re_ingest_touches_nothing_and_an_edit_changes_only_what_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    python_tree(&tree);
    let db = dir.path().join("g.db");
    let mut store = Store::open(&db).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    let before = graph_dump(&store);
    let other = store.node_version("function://pkg.util.other").unwrap();

    let again = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert!(again.is_unchanged(), "{again:?}");
    assert_eq!(again.unchanged, 4);
    assert_eq!(graph_dump(&store), before);

    // Edit one function of one file: that file, its module and the function change; nothing else.
    write(&tree, "pkg/util.py", &UTIL.replace("return x", "return [x]"));
    let edit = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(
        (edit.parsed, edit.unchanged, edit.nodes_added, edit.nodes_changed, edit.nodes_removed),
        (1, 3, 0, 3, 0)
    );
    assert_eq!((edit.edges_added, edit.edges_removed), (0, 0));
    assert_eq!(edit.parsed_files, ["pkg/util.py"]);
    assert_eq!(store.node_version("function://pkg.util.other").unwrap(), other);

    // A new file defining what an unchanged file calls: the call links now, without parsing the caller.
    write(&tree, "pkg/extra.py", "def unknown_function():\n    pass\n");
    let added = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(added.parsed, 1);
    assert_eq!(
        edges(&store, "function://app.main", "calls"),
        set(&["function://pkg.extra.unknown_function", "function://pkg.models.User.greet"])
    );

    // A removed file takes its nodes and every edge to them along.
    std::fs::remove_file(tree.join("pkg/util.py")).unwrap();
    let removed = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((removed.removed_files, removed.nodes_removed), (1, 4));
    assert_eq!(removed.removed, ["project://pkg/util.py"]);
    let g = store.load_graph().unwrap();
    assert!(g.node("function://pkg.util.helper").is_none() && g.node("project://pkg/util.py").is_none());
    assert!(edges(&store, "function://pkg.models.Base.save", "calls").is_empty());
    assert!(edges(&store, "module://pkg.models", "imports").is_empty());

    let quiet = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((quiet.files, quiet.parsed, quiet.unchanged, quiet.removed_files), (4, 0, 4, 0));
}

#[test]
fn bad_input_is_counted_and_reported_never_a_panic_or_half_a_graph() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    python_tree(&tree);
    write(&tree, "broken.py", "def good():\n    return 1\n\n\ndef bad(:\n    return\n\n\nclass Fine:\n    pass\n");
    std::fs::write(tree.join("latin1.py"), b"name = '\xe9t\xe9'\n").unwrap();
    write(&tree, "big.py", &"x = 1\n".repeat(400));
    write(&tree, "ignored.py", "def hidden():\n    pass\n");
    write(&tree, ".gitignore", "ignored.py\n");
    write(&tree, "target/gen.rs", "fn generated() {}\n");
    write(&tree, ".venv/lib/site.py", "def vendored():\n    pass\n");
    write(&tree, "node_modules/x/y.py", "def vendored():\n    pass\n");
    write(&tree, "vendor/x/y.py", "def vendored():\n    pass\n");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&tree, tree.join("pkg/loop")).unwrap();
        std::os::unix::fs::symlink(tree.join("nowhere.py"), tree.join("dangling.py")).unwrap();
    }
    let db = dir.path().join("g.db");
    let mut store = Store::open(&db).unwrap();
    let report = store.ingest(&tree, IngestOptions::default().with_max_file_bytes(2000)).unwrap();
    assert_eq!(report.parse_errors, ["broken.py"]);
    let skipped: Vec<(String, String)> = report.skipped.iter().map(|s| (s.path.clone(), s.reason.clone())).collect();
    let reason = |path: &str| {
        skipped
            .iter()
            .find(|(p, _)| p.ends_with(path))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("{path} not reported: {skipped:?}"))
    };
    assert!(reason("big.py").contains("over the limit of 2000 bytes"));
    assert!(reason("latin1.py").contains("not UTF-8"));
    #[cfg(unix)]
    {
        assert!(reason("loop").contains("loop"), "{}", reason("loop"));
        assert!(reason("dangling.py").contains("nowhere.py") || reason("dangling.py").contains("No such file"));
    }
    let g = store.load_graph().unwrap();
    // What parsed of the broken file is there.
    assert!(g.node("function://broken.good").is_some() && g.node("class://broken.Fine").is_some());
    for gone in ["function://ignored.hidden", "function://gen.generated", "project://big.py", "project://latin1.py"] {
        assert!(g.node(gone).is_none(), "{gone} was ingested");
    }
    assert!(g.nodes().all(|n| !n.uri.contains("vendored")));

    // Not a directory, or missing: a clear error, the store untouched.
    let before = graph_dump(&store);
    let e = store.ingest(tree.join("app.py"), IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("is not a directory") && e.kind() == ErrorKind::InvalidInput, "{e}");
    assert!(store.ingest(dir.path().join("nope"), IngestOptions::default()).is_err());
    assert_eq!(graph_dump(&store), before);
}

#[test]
fn a_decision_goes_stale_when_the_code_it_saw_is_edited_or_removed() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    python_tree(&tree);
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0)
        .context_snapshot(store.snapshot_of(&["function://pkg.util.helper"]).unwrap())
        .build()
        .unwrap();
    let child = Decision::builder(plan, DecisionType::ImplementationChoice, 1)
        .parent(root.decision_id())
        .context_snapshot(store.snapshot_of(&["class://pkg.models.User"]).unwrap())
        .build()
        .unwrap();
    store.insert_many([&root, &child]).unwrap();
    assert!(store.stale(StaleOptions::default()).unwrap().is_clean());

    // Editing another function of the same file leaves both decisions standing.
    write(&tree, "pkg/util.py", &UTIL.replace("return 2", "return 3"));
    store.ingest(&tree, IngestOptions::default()).unwrap();
    assert!(store.stale(StaleOptions::default()).unwrap().is_clean());

    write(&tree, "pkg/util.py", &UTIL.replace("return x", "return [x]"));
    store.ingest(&tree, IngestOptions::default()).unwrap();
    let report = store.stale(StaleOptions::default()).unwrap();
    assert_eq!(report.stale.len(), 1);
    assert_eq!(report.stale[0].decision_id, root.decision_id());
    assert_eq!(report.at_risk.len(), 1);
    assert_eq!(report.at_risk[0].decision_id, child.decision_id());

    std::fs::remove_file(tree.join("pkg/util.py")).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    let report = store.stale(StaleOptions::default()).unwrap();
    assert_eq!(report.stale[0].resources[0].current_version, None, "removed with its file");
}

#[test]
fn ingest_then_project_gives_a_files_neighbourhood_with_signatures_and_sources() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    python_tree(&tree);
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    // The projection and its fragments as `dstore project --format json` prints them.
    let project = |spec: ProjectionSpec| -> serde_json::Value {
        let (projection, set) = store.project(&spec, &Cl100k, Some(8000)).unwrap();
        serde_json::json!({"spec": projection.spec, "fragments": set.fragments, "covered": set.covered,
            "total_tokens": set.total_tokens})
    };
    // By default: the focus's outline, then the files it uses and that use
    // it, by their definitions' signatures.
    let doc = project(ProjectionSpec::for_focus(["app.py"]).unwrap());
    let fragments = doc["fragments"].as_array().unwrap_or_else(|| panic!("no fragments: {doc}"));
    assert_eq!(fragments[0]["uko_node"], "project://app.py");
    assert_eq!(fragments[0]["content"], "[MODULE_GRAPH]: symbols=main,make");
    let of = |uri: &str| fragments.iter().find(|f| f["uko_node"] == uri).unwrap_or_else(|| panic!("{uri}: {doc}"));
    assert_eq!(of("class://pkg.models.User")["content"], "class User(Base)");
    assert_eq!(of("class://pkg.models.User")["detail_depth"], 4);
    assert_eq!(of("function://pkg.util.helper")["resource_uri"], "project://pkg/util.py");
    assert_eq!(doc["spec"]["direction"], "both");
    // The breadth-first walk, as before the relevance ranking: the file in
    // full, and what it uses with its signatures.
    let doc = project(
        ProjectionSpec::ranked(["project://app.py"], Ranking::Distance).unwrap().with_direction(Direction::Outgoing),
    );
    let fragments = doc["fragments"].as_array().unwrap_or_else(|| panic!("no fragments: {doc}"));
    let of = |uri: &str| fragments.iter().find(|f| f["uko_node"] == uri).unwrap_or_else(|| panic!("{uri}: {doc}"));
    // The file itself in full (which covers its own definitions), and what it
    // uses from other files with their signatures.
    assert_eq!(of("project://app.py")["content"], APP);
    assert!(doc["covered"].as_array().unwrap().iter().any(|c| c == "function://app.main"), "{doc}");
    assert_eq!(of("class://pkg.models.User")["content"], "class User(Base)");
    let greet = of("function://pkg.models.User.greet");
    assert_eq!(greet["content"], "def greet(self, name: str) -> str\n    Says hello.");
    assert_eq!(greet["resource_uri"], "project://pkg/models.py");
    assert!(doc["total_tokens"].as_u64().unwrap() <= 8000);
}

#[test]
fn the_review_cases_of_resolution_ownership_and_odd_input() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    // A package's own relative import; a common method on an unknown receiver;
    // the same module path from two files.
    write(&tree, "pkg/__init__.py", "from .models import User\n");
    write(
        &tree,
        "pkg/models.py",
        "class User:\n    def append(self, x):\n        return x\n\n    def add_all(self, xs):\n        for x in xs:\n            self.append(x)\n\n\ndef collect(items):\n    items.append(1)\n    return items\n",
    );
    write(&tree, "x.py", "def from_top():\n    pass\n");
    write(&tree, "src/x.py", "def from_src():\n    pass\n");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        std::fs::write(tree.join(std::ffi::OsStr::from_bytes(b"caf\xe9.py")), "def odd():\n    pass\n").unwrap();
    }
    // Twenty thousand nested modules: no stack overflow, the rest of the nest left out.
    write(&tree, "deep/src/lib.rs", &format!("{}fn bottom() {{}}{}", "mod a {".repeat(20_000), "}".repeat(20_000)));
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    // A node of another domain that names a code file as its resource, with an edge to code.
    let mut concept = decision_store::uko::UkoNode::new("concept://users", "uko-docs:", "concept", "users");
    concept.resource_uri = Some("project://pkg/models.py".into());
    store.upsert_nodes(&[concept]).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    #[cfg(unix)]
    assert!(report.skipped.iter().any(|s| s.reason.contains("not UTF-8")), "{report:?}");
    store
        .upsert_edges(&[decision_store::uko::UkoEdge::new("class://pkg.models.User", "concept://users", "references")])
        .unwrap();

    assert_eq!(edges(&store, "module://pkg", "imports"), set(&["class://pkg.models.User"]));
    assert_eq!(
        edges(&store, "function://pkg.models.User.add_all", "calls"),
        set(&["function://pkg.models.User.append"])
    );
    assert!(edges(&store, "function://pkg.models.collect", "calls").is_empty(), "items.append is not ours");
    let g = store.load_graph().unwrap();
    let deepest = g.nodes().filter(|n| n.uri.starts_with("module://deep.a")).map(|n| n.uri.matches(".a").count()).max();
    assert_eq!(deepest, Some(32));
    // Both x.py and src/x.py are module x: the last walked holds it; when it goes, the other takes it back.
    let owner = |store: &Store| store.load_graph().unwrap().node("module://x").and_then(|n| n.resource_uri.clone());
    assert_eq!(owner(&store).as_deref(), Some("project://x.py"));
    std::fs::remove_file(tree.join("x.py")).unwrap();
    // An edit elsewhere at the same time: the other domain's node and its edge stay.
    write(
        &tree,
        "pkg/models.py",
        &std::fs::read_to_string(tree.join("pkg/models.py")).unwrap().replace("return x", "return [x]"),
    );
    store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(owner(&store).as_deref(), Some("project://src/x.py"));
    assert!(store.load_graph().unwrap().node("function://x.from_src").is_some());
    assert!(store.load_graph().unwrap().node("function://x.from_top").is_none());
    assert!(store.load_graph().unwrap().node("concept://users").is_some());
    assert_eq!(edges(&store, "class://pkg.models.User", "references"), set(&["concept://users"]));
}

#[test]
fn a_rust_doc_comment_is_part_of_its_items_version() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("c");
    let src = "/// A square.\n#[derive(Debug)]\npub struct Square(pub f64);\n\n/// Adds.\npub fn add(a: i32) -> i32 {\n    a\n}\n";
    write(&tree, "src/lib.rs", src);
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    let before = store.load_graph().unwrap();
    write(&tree, "src/lib.rs", &src.replace("/// A square.", "/// A big square."));
    let r = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(r.nodes_changed, 3, "the struct, its file and its module: {r:?}");
    let after = store.load_graph().unwrap();
    let square = |g: &decision_store::uko::UkoGraph| g.node("class://c.Square").unwrap().clone();
    assert_ne!(square(&before).version, square(&after).version);
    assert_eq!(square(&after).view_at(4).unwrap().content, "pub struct Square(pub f64);\n    A big square.");
    assert!(square(&after).view_at(9).unwrap().content.starts_with("/// A big square.\n#[derive(Debug)]"));
    assert_eq!(before.node("function://c.add").unwrap().version, after.node("function://c.add").unwrap().version);
}

#[test]
fn an_ingest_that_fails_part_way_leaves_the_graph_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("proj");
    python_tree(&tree);
    let db = dir.path().join("g.db");
    let mut store = Store::open(&db).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    let before = graph_dump(&store);
    drop(store);
    // A fault injected after the first files are written: storing this one call fails.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER fault BEFORE INSERT ON uko_code_reference_lists WHEN new.refs LIKE '%boom%'
             BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
        )
        .unwrap();
    write(&tree, "pkg/util.py", &UTIL.replace("return 2", "return 3"));
    write(&tree, "zzz.py", "def last():\n    boom()\n");
    let mut store = Store::open(&db).unwrap();
    let err = store.ingest(&tree, IngestOptions::default()).unwrap_err();
    assert!(err.to_string().contains("injected fault"), "{err}");
    assert_eq!(graph_dump(&store), before, "half an ingest was kept");
}

/// A copy of `tests/fixtures/ingest/<name>` in `to`, to ingest and edit.
fn fixture(name: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest").join(name);
    let mut stack = vec![from.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(&from).unwrap().to_str().unwrap().to_owned();
                write(to, &rel, &std::fs::read_to_string(&path).unwrap());
            }
        }
    }
}

fn view(g: &decision_store::uko::UkoGraph, uri: &str, depth: u32) -> String {
    g.node(uri).unwrap_or_else(|| panic!("no node {uri}")).view_at(depth).unwrap().content.clone()
}

#[test]
fn a_typescript_and_javascript_tree_becomes_modules_classes_interfaces_and_functions() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("web");
    fixture("typescript", &tree);
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((report.files, report.parsed), (9, 9), "tsconfig files are read, not ingested: {report:?}");
    assert!(report.parse_errors.is_empty() && report.skipped.is_empty(), "{report:?}");

    let g = store.load_graph().unwrap();
    let kind = |uri: &str| g.node(uri).unwrap_or_else(|| panic!("no node {uri}")).kind.clone();
    // Interfaces, type aliases and enums are classes; arrow functions and
    // function expressions bound to a name are functions; `index.ts` is its directory.
    for class in
        ["models.user.User", "models.user.Named", "models.user.UserId", "models.user.Role", "models.shape.Shape"]
    {
        assert_eq!(kind(&format!("class://{class}")), "class");
    }
    for function in [
        "models.user.User.displayName",
        "models.user.User.constructor",
        "models.user.Named.displayName",
        "models.shape.Shape.area",
        "util.text.slugify",
        "lazy.later",
        "utils.misc.helper",
        "utils.misc.other",
        "web.components.Button.Button",
        "web.page.Page",
    ] {
        assert_eq!(kind(&format!("function://{function}")), "function");
    }
    assert_eq!(g.node("module://models").unwrap().resource_uri.as_deref(), Some("project://src/models/index.ts"));
    assert_eq!(
        g.node("function://utils.misc.helper").unwrap().resource_uri.as_deref(),
        Some("project://utils/misc.js")
    );

    // Views: the header with the JSDoc's first line; the outline; the whole definition with its JSDoc.
    let user = "class://models.user.User";
    assert_eq!(view(&g, user, 4), "export class User extends Base implements Named\n    A user of the service.");
    assert_eq!(
        view(&g, user, 1),
        "export class User extends Base implements Named: methods=constructor,displayName,save"
    );
    assert!(
        view(&g, user, 9).starts_with("/**\n * A user of the service.\n * More about users.\n */\nexport class User")
    );
    assert_eq!(
        view(&g, "function://models.user.User.displayName", 4),
        "displayName(): string\n    The name, made safe for a URL."
    );
    assert_eq!(view(&g, "function://models.user.Named.displayName", 4), "displayName(): string\n    The name shown.");
    assert_eq!(
        view(&g, "function://util.text.slugify", 4),
        "export const slugify = (s: string): string =>\n    Lower case, dashes for spaces."
    );
    assert_eq!(view(&g, "function://utils.misc.helper", 4), "function helper()\n    A helper in plain JavaScript.");
    assert_eq!(view(&g, "class://models.user.UserId", 4), "export type UserId = string | number");
    assert_eq!(view(&g, "module://models.user", 3), "[MODULE_GRAPH]: symbols=Named,User,Base,persist,UserId,Role");

    // Imports, to the files they name: tsconfig `paths` (from the config it
    // extends), `baseUrl`, a directory's index, `import type`, a `.js`
    // specifier of a `.ts` file, `export ... from`, `export *`, `import()`,
    // `require()`, the nearest tsconfig (web/'s `~/*`); `react` is a package's.
    assert_eq!(edges(&store, "module://models.user", "imports"), set(&["function://util.text.slugify"]));
    assert_eq!(
        edges(&store, "module://app", "imports"),
        set(&["module://models", "class://models.user.UserId", "function://utils.misc.helper", "module://lazy"])
    );
    assert_eq!(
        edges(&store, "module://models", "imports"),
        set(&["class://models.user.User", "module://models.shape"])
    );
    assert_eq!(edges(&store, "module://utils.misc", "imports"), set(&["module://util.text"]));
    assert_eq!(edges(&store, "module://web.page", "imports"), set(&["function://web.components.Button.Button"]));

    // Classes: `extends`, `implements`, members.
    assert_eq!(edges(&store, user, "inherits"), set(&["class://models.user.Base"]));
    assert_eq!(edges(&store, user, "implements"), set(&["class://models.user.Named"]));
    assert_eq!(
        edges(&store, "class://models.user.Named", "contains"),
        set(&["function://models.user.Named.displayName"])
    );
    // Calls: `f()`, `this.f()` (the class's own, not the interface's of the same name),
    // `x.f()` (`u.save()`, `text.slugify()`), JSX components; `[].map()` is left out.
    assert_eq!(
        edges(&store, "function://models.user.User.save", "calls"),
        set(&["function://models.user.User.displayName", "function://models.user.persist"])
    );
    assert_eq!(
        edges(&store, "function://app.main", "calls"),
        set(&["function://models.user.User.save", "function://utils.misc.helper"])
    );
    assert_eq!(edges(&store, "function://utils.misc.helper", "calls"), set(&["function://util.text.slugify"]));
    assert_eq!(edges(&store, "function://web.page.Page", "calls"), set(&["function://web.components.Button.Button"]));
    // References: types named and classes made with `new`.
    assert_eq!(
        edges(&store, "function://app.main", "references"),
        set(&["class://models.user.User", "class://models.user.UserId"])
    );
    assert_eq!(edges(&store, "function://models.user.persist", "references"), set(&["class://models.user.Base"]));
}

#[test]
fn a_typescript_file_with_errors_keeps_its_good_definitions_and_an_edit_changes_only_what_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("web");
    fixture("typescript", &tree);
    write(&tree, "src/broken.ts", "export function good(): number {\n  return 1;\n}\n\nexport function bad(: {\n  return\n}\n\nexport class Fine {}\n");
    // Twenty thousand nested namespaces: no stack overflow, the rest of the nest left out.
    write(
        &tree,
        "src/deep.ts",
        &format!("{}function bottom() {{}}{}", "namespace a {".repeat(20_000), "}".repeat(20_000)),
    );
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(report.parse_errors, ["src/broken.ts"]);
    let g = store.load_graph().unwrap();
    assert!(g.node("function://broken.good").is_some() && g.node("class://broken.Fine").is_some());
    let deepest = g.nodes().filter(|n| n.uri.starts_with("module://deep.a")).map(|n| n.uri.matches(".a").count()).max();
    assert_eq!(deepest, Some(32));
    let unused = store.node_version("function://util.text.unused").unwrap();

    assert!(store.ingest(&tree, IngestOptions::default()).unwrap().is_unchanged());
    let text = std::fs::read_to_string(tree.join("src/util/text.ts")).unwrap();
    write(&tree, "src/util/text.ts", &text.replace("s.toLowerCase()", "s.trim().toLowerCase()"));
    let edit = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(edit.parsed_files, ["src/util/text.ts"]);
    assert_eq!((edit.nodes_added, edit.nodes_changed, edit.nodes_removed), (0, 3, 0), "file, module, slugify");
    assert_eq!((edit.edges_added, edit.edges_removed), (0, 0));
    assert_eq!(store.node_version("function://util.text.unused").unwrap(), unused);
}

#[test]
fn a_go_tree_becomes_packages_of_files_with_types_functions_and_methods() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("svc");
    fixture("go", &tree);
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((report.files, report.parsed), (5, 5), "go.mod is read, not ingested: {report:?}");
    assert!(report.parse_errors.is_empty() && report.skipped.is_empty(), "{report:?}");

    let g = store.load_graph().unwrap();
    // Definitions are named in their package (the directory), files are modules.
    for class in ["internal.store.Store", "internal.store.Value", "internal.store.Keys", "internal.api.Getter"] {
        assert_eq!(g.node(&format!("class://{class}")).unwrap().kind, "class");
    }
    for function in [
        "internal.store.New",
        "internal.store.Store.Get",
        "internal.store.Store.Put",
        "internal.store.normalize",
        "internal.store.TestNew",
        "internal.api.Getter.Get",
        "internal.api.Handler.Serve",
        "cmd.svc.main",
        // Each file's own `init`.
        "internal.store.store.init",
        "internal.store.helper.init",
    ] {
        assert_eq!(g.node(&format!("function://{function}")).unwrap().kind, "function", "{function}");
    }
    let put = g.node("function://internal.store.Store.Put").unwrap();
    assert_eq!(put.resource_uri.as_deref(), Some("project://internal/store/helper.go"));

    // Views: the header with the first line of the comment above (directives aside).
    let get = "function://internal.store.Store.Get";
    assert_eq!(view(&g, get, 4), "func (s *Store) Get(key string) (Value, bool)\n    Get returns the value of key.");
    assert!(view(&g, get, 9).starts_with("// Get returns the value of key.\n//\n//go:noinline\nfunc (s *Store) Get("));
    assert_eq!(view(&g, "class://internal.store.Store", 4), "type Store struct\n    Store keeps values by key.");
    assert_eq!(view(&g, "class://internal.store.Store", 1), "type Store struct: methods=Get");
    assert_eq!(view(&g, "class://internal.store.Value", 4), "type Value = string\n    Value is what a Store keeps.");
    assert_eq!(
        view(&g, "function://internal.api.Getter.Get", 4),
        "Get(key string) (store.Value, bool)\n    Get returns the value of key."
    );
    assert_eq!(view(&g, "module://internal.store.store", 1), "[MODULE_GRAPH]: symbols=Store,Value,Keys,New,init");

    // An import of a package reaches every file of it (its tests aside), through go.mod; `fmt` is not ours.
    assert_eq!(
        edges(&store, "module://internal.api.api", "imports"),
        set(&["module://internal.store.store", "module://internal.store.helper"])
    );
    assert_eq!(edges(&store, "module://cmd.svc.main", "imports"), set(&["module://internal.api.api"]));
    // A method defined beside its type belongs to it; one in another file to both its file and its type.
    assert_eq!(
        edges(&store, "class://internal.store.Store", "contains"),
        set(&["function://internal.store.Store.Get", "function://internal.store.Store.Put"])
    );
    assert!(edges(&store, "module://internal.store.helper", "contains").contains("function://internal.store.Store.Put"));
    // Calls: in the package (another file), through an import, on the receiver,
    // on a value (`api.Run().Serve()`); `fmt.Println` and the promoted `h.Get` are left out.
    assert_eq!(edges(&store, get, "calls"), set(&["function://internal.store.normalize"]));
    assert_eq!(edges(&store, "function://internal.api.Run", "calls"), set(&["function://internal.store.New"]));
    assert_eq!(
        edges(&store, "function://internal.api.Handler.Serve", "calls"),
        set(&["function://internal.api.Handler.log"])
    );
    assert_eq!(
        edges(&store, "function://cmd.svc.main", "calls"),
        set(&["function://internal.api.Run", "function://internal.api.Handler.Serve"])
    );
    // Embedding `inherits`; types named `references` (`string` and `sync.Mutex` are not ours).
    assert_eq!(edges(&store, "class://internal.api.Handler", "inherits"), set(&["class://internal.store.Store"]));
    assert!(edges(&store, "class://internal.api.Handler", "references").is_empty());
    assert_eq!(edges(&store, "class://internal.store.Store", "references"), set(&["class://internal.store.Value"]));
    assert_eq!(
        edges(&store, "function://internal.api.Getter.Get", "references"),
        set(&["class://internal.store.Value"])
    );
}

#[test]
fn a_go_package_import_follows_the_files_of_the_package_and_a_broken_file_keeps_its_good_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("svc");
    fixture("go", &tree);
    write(
        &tree,
        "internal/api/broken.go",
        "package api\n\n// Fine parses.\nfunc Fine() int { return 1 }\n\nfunc Bad( {\n}\n",
    );
    let mut store = Store::open(dir.path().join("g.db")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(report.parse_errors, ["internal/api/broken.go"]);
    let g = store.load_graph().unwrap();
    assert_eq!(view(&g, "function://internal.api.Fine", 4), "func Fine() int\n    Fine parses.");
    let put = store.node_version("function://internal.store.Store.Put").unwrap();

    // An edit of one function: its file, module and itself change; nothing else.
    let helper = std::fs::read_to_string(tree.join("internal/store/helper.go")).unwrap();
    write(&tree, "internal/store/helper.go", &helper.replace("{ return v }", "{\n\treturn v\n}"));
    let edit = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(edit.parsed_files, ["internal/store/helper.go"]);
    assert_eq!((edit.nodes_added, edit.nodes_changed, edit.nodes_removed), (0, 3, 0), "file, module, normalize");
    assert_eq!((edit.edges_added, edit.edges_removed), (0, 0));
    assert_eq!(store.node_version("function://internal.store.Store.Put").unwrap(), put);

    // A new file of the package: the files importing it reach it without being parsed again.
    write(&tree, "internal/store/extra.go", "package store\n\nfunc Extra() {}\n");
    let added = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(added.parsed_files, ["internal/store/extra.go"]);
    assert_eq!(
        edges(&store, "module://internal.api.api", "imports"),
        set(&["module://internal.store.store", "module://internal.store.helper", "module://internal.store.extra"])
    );
    std::fs::remove_file(tree.join("internal/store/helper.go")).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(
        edges(&store, "module://internal.api.api", "imports"),
        set(&["module://internal.store.store", "module://internal.store.extra"])
    );
    assert!(edges(&store, "function://internal.store.Store.Get", "calls").is_empty(), "normalize went with its file");
}
