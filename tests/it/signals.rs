//! What `ingest` keeps beside the code graph for ranking context: the git
//! history (`co_changed` links between files that changed together, read
//! incrementally) and the words of each file (the lexical index), both
//! kept in step with the tree; and the default context, which ranks files
//! by them and by the graph.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use decision_store::ingest::IngestOptions;
use decision_store::projection::{Cl100k, DepthBreadthProjector, ProjectionSpec, Ranking, Signals};
use decision_store::Store;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .env_remove("GIT_DIR")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `files` (path, text) and commits them.
fn commit(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        write(dir, path, text);
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "change"]);
}

fn py(name: &str, n: usize) -> String {
    format!("def {name}():\n    return {n}\n")
}

/// Every `co_changed` link as (a, b) with a < b, and its weight.
fn links(db: &Path) -> BTreeMap<(String, String), f64> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT s.uri, t.uri, e.weight FROM uko_edges e JOIN uko_nodes s ON s.node_id = e.source_id
             JOIN uko_nodes t ON t.node_id = e.target_id WHERE e.relation = 'co_changed'",
        )
        .unwrap();
    let all: Vec<(String, String, f64)> =
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    let mut out = BTreeMap::new();
    for (a, b, w) in &all {
        // Both ways, at one weight.
        assert!(all.iter().any(|(x, y, v)| x == b && y == a && (v - w).abs() < 1e-9), "{a} -> {b} alone");
        if a < b {
            out.insert(
                (a.trim_start_matches("project://").to_owned(), b.trim_start_matches("project://").to_owned()),
                *w,
            );
        }
    }
    out
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

#[test]
fn the_history_links_files_that_change_together_and_is_read_on_from_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    commit(&repo, &[("a.py", &py("a", 0)), ("b.py", &py("b", 0)), ("c.py", &py("c", 0)), ("notes.txt", "x")]);
    commit(&repo, &[("a.py", &py("a", 1)), ("b.py", &py("b", 1))]);
    // A commit of more than 30 files links none of them.
    let many: Vec<(String, String)> = (0..31).map(|i| (format!("gen/m{i}.py"), py("m", i))).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    commit(&repo, &many);
    // A commit of one file of the tree (and one other) links nothing.
    commit(&repo, &[("c.py", &py("c", 2)), ("notes.txt", "y")]);

    let db = dir.path().join("s.db");
    let mut store = Store::open(&db).unwrap();
    let report = store.ingest(&repo, IngestOptions::default()).unwrap();
    let h = &report.history;
    assert_eq!((h.commits, h.skipped, h.restarted), (4, 2, false), "{h:?}");
    assert_eq!(h.head.as_deref(), Some(git(&repo, &["rev-parse", "HEAD"]).trim()));
    let first = links(&db);
    assert_eq!(
        first.keys().cloned().collect::<Vec<_>>(),
        [pair("a.py", "b.py"), pair("a.py", "c.py"), pair("b.py", "c.py")]
    );
    // a and b changed together twice, the second time more recently.
    assert!(first[&pair("a.py", "b.py")] > 2.0 * first[&pair("a.py", "c.py")]);
    assert_eq!(first[&pair("a.py", "c.py")], first[&pair("b.py", "c.py")]);

    // Nothing new: nothing written.
    let again = store.ingest(&repo, IngestOptions::default()).unwrap();
    assert!(again.is_unchanged(), "{again:?}");
    assert_eq!(again.history.commits, 0);

    // One more commit: only its pair grows, by more than any older commit gave it.
    commit(&repo, &[("a.py", &py("a", 3)), ("c.py", &py("c", 3))]);
    let more = store.ingest(&repo, IngestOptions::default()).unwrap();
    assert_eq!((more.history.commits, more.history.links), (1, 1));
    let second = links(&db);
    assert_eq!(second[&pair("a.py", "b.py")], first[&pair("a.py", "b.py")]);
    assert_eq!(second[&pair("b.py", "c.py")], first[&pair("b.py", "c.py")]);
    assert!(second[&pair("a.py", "c.py")] - first[&pair("a.py", "c.py")] > first[&pair("a.py", "c.py")]);

    // History rewritten: the last commit read is gone, so it is read afresh.
    git(&repo, &["reset", "-q", "--hard", "HEAD~1"]);
    commit(&repo, &[("b.py", &py("b", 4)), ("c.py", &py("c", 4))]);
    let rewritten = store.ingest(&repo, IngestOptions::default()).unwrap();
    assert!(rewritten.history.restarted);
    assert_eq!(rewritten.history.commits, 5);
    let third = links(&db);
    assert!(third[&pair("b.py", "c.py")] > third[&pair("a.py", "c.py")], "{third:?}");
    assert_eq!(store.check().unwrap(), []);
}

#[test]
fn a_copy_keeps_the_words_and_the_history_read() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    commit(&repo, &[("a.py", &py("alpha_total", 0)), ("b.py", &py("beta_total", 0))]);
    commit(&repo, &[("a.py", &py("alpha_total", 1)), ("b.py", &py("beta_total", 1))]);
    let (src, dst) = (dir.path().join("src.db"), dir.path().join("dst.db"));
    let mut store = Store::open(&src).unwrap();
    store.ingest(&repo, IngestOptions::default()).unwrap();
    let mut copy = Store::open(&dst).unwrap();
    let report = store.copy_into(&mut copy, |_| {}).unwrap();
    assert_eq!(report.term_documents, 2);
    assert_eq!(index(&dst), index(&src));
    assert_eq!(links(&dst), links(&src));
    // The copy reads on from the source's last commit and indexes nothing again.
    let again = copy.ingest(&repo, IngestOptions::default()).unwrap();
    assert!(again.is_unchanged(), "{again:?}");
    assert_eq!((again.indexed, again.history.commits, again.history.restarted), (0, 0, false));
    commit(&repo, &[("a.py", &py("alpha_total", 2)), ("b.py", &py("beta_total", 2))]);
    let (ours, theirs) =
        (store.ingest(&repo, IngestOptions::default()).unwrap(), copy.ingest(&repo, IngestOptions::default()).unwrap());
    assert_eq!((theirs.history.commits, theirs.indexed), (ours.history.commits, ours.indexed));
    assert_eq!(links(&dst), links(&src));
    assert_eq!(index(&dst), index(&src));
    assert_eq!(copy.check().unwrap(), []);
}

#[test]
fn no_git_a_shallow_clone_and_no_history_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    // A tree outside any repository.
    let plain = dir.path().join("plain");
    write(&plain, "a.py", &py("a", 0));
    let mut store = Store::open(dir.path().join("plain.db")).unwrap();
    let report = store.ingest(&plain, IngestOptions::default()).unwrap();
    assert_eq!(report.files, 1);
    let why = report.history.none.expect("no history without git");
    assert!(why.contains("not a git repository"), "{why}");
    assert_eq!(report.history.head, None);

    // A clone of the last two commits: the boundary commit, whose parent
    // is missing, shows every file as added and links nothing.
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    commit(&repo, &[("a.py", &py("a", 0)), ("b.py", &py("b", 0)), ("c.py", &py("c", 0))]);
    commit(&repo, &[("a.py", &py("a", 1)), ("c.py", &py("c", 1))]);
    commit(&repo, &[("a.py", &py("a", 2)), ("b.py", &py("b", 2))]);
    let shallow = dir.path().join("shallow");
    let url = format!("file://{}", repo.display());
    git(dir.path(), &["clone", "-q", "--depth", "2", &url, shallow.to_str().unwrap()]);
    let db = dir.path().join("shallow.db");
    let mut store = Store::open(&db).unwrap();
    let report = store.ingest(&shallow, IngestOptions::default()).unwrap();
    assert_eq!(report.history.commits, 1, "{:?}", report.history);
    assert_eq!(links(&db).keys().cloned().collect::<Vec<_>>(), [pair("a.py", "b.py")]);

    // Not asked for: nothing read, and what was read stays.
    commit(&repo, &[("b.py", &py("b", 3)), ("c.py", &py("c", 3))]);
    git(&shallow, &["pull", "-q", "--depth", "2", "origin", "main"]);
    let report = store.ingest(&shallow, IngestOptions::default().with_history(false)).unwrap();
    assert!(report.history.none.unwrap().contains("--no-history"));
    assert_eq!(links(&db).keys().cloned().collect::<Vec<_>>(), [pair("a.py", "b.py")]);
    // A sub-directory of a repository reads its part of the history, by paths relative to it.
    let sub = dir.path().join("mono");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    commit(&sub, &[("svc/x.py", &py("x", 0)), ("svc/y.py", &py("y", 0)), ("other/z.py", &py("z", 0))]);
    commit(&sub, &[("svc/x.py", &py("x", 1)), ("svc/y.py", &py("y", 1)), ("other/z.py", &py("z", 1))]);
    let db = dir.path().join("sub.db");
    let report = Store::open(&db).unwrap().ingest(sub.join("svc"), IngestOptions::default()).unwrap();
    assert_eq!(report.history.commits, 2);
    assert_eq!(links(&db).keys().cloned().collect::<Vec<_>>(), [pair("x.py", "y.py")]);
}

/// Each indexed file: its version and length, and its terms.
fn index(db: &Path) -> BTreeMap<String, (usize, BTreeMap<String, i64>)> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut out: BTreeMap<String, (usize, BTreeMap<String, i64>)> = BTreeMap::new();
    let mut docs = c.prepare("SELECT resource_uri, terms FROM code_term_docs").unwrap();
    for row in docs.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))).unwrap() {
        let (file, length) = row.unwrap();
        out.insert(file, (length as usize, BTreeMap::new()));
    }
    let mut terms = c
        .prepare("SELECT d.resource_uri, t.term, t.tf FROM code_terms t JOIN code_term_docs d USING (doc_id)")
        .unwrap();
    for row in terms.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?))).unwrap() {
        let (file, term, tf) = row.unwrap();
        out.get_mut(&file).expect("a term of an indexed file").1.insert(term, tf);
    }
    out
}

#[test]
fn the_lexical_index_follows_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    write(
        &tree,
        "billing/invoice.py",
        "class InvoiceRenderer:\n    def render_invoice(self, invoice):\n        return invoice\n",
    );
    write(&tree, "billing/tax.py", "def tax_rate(invoice):\n    return 0.2\n");
    write(&tree, "util.py", "def helper():\n    return None\n");
    let db = dir.path().join("s.db");
    let mut store = Store::open(&db).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(report.indexed, 3);
    let first = index(&db);
    let invoice = &first["project://billing/invoice.py"].1;
    assert_eq!(invoice.get("invoice"), Some(&4), "{invoice:?}");
    assert_eq!(invoice.get("renderinvoice"), Some(&1));
    assert_eq!(invoice.get("invoicerenderer"), Some(&1));
    assert_eq!(invoice.get("self"), None);
    assert_eq!(first["project://billing/invoice.py"].0, invoice.values().sum::<i64>() as usize);

    // Unchanged: nothing indexed.
    assert_eq!(store.ingest(&tree, IngestOptions::default()).unwrap().indexed, 0);
    // An edit re-indexes that file alone; a removal drops its rows.
    write(&tree, "billing/tax.py", "def vat_rate(order):\n    return 0.2\n");
    std::fs::remove_file(tree.join("util.py")).unwrap();
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!(report.indexed, 1);
    let second = index(&db);
    assert_eq!(second.keys().collect::<Vec<_>>(), ["project://billing/invoice.py", "project://billing/tax.py"]);
    assert_eq!(second["project://billing/invoice.py"], first["project://billing/invoice.py"]);
    let tax = &second["project://billing/tax.py"].1;
    assert!(tax.contains_key("vat") && tax.contains_key("order") && !tax.contains_key("invoice"), "{tax:?}");

    // A store whose graph is whole but whose files were never indexed (one
    // upgraded from schema 9): the next ingest indexes them, parsing nothing.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "DELETE FROM code_terms; DELETE FROM code_term_vectors; DELETE FROM code_term_docs; DELETE FROM code_term_stats;",
    )
    .unwrap();
    drop(c);
    let report = store.ingest(&tree, IngestOptions::default()).unwrap();
    assert_eq!((report.parsed, report.indexed), (0, 2));
    assert_eq!(index(&db), second);
    // Each file's vector and its postings agree, and each term's kept
    // document frequency is its postings' count.
    let c = rusqlite::Connection::open(&db).unwrap();
    let (vectors, postings): (i64, i64) = c
        .query_row(
            "SELECT (SELECT sum(length(vector) - length(replace(vector, ':', ''))) FROM code_term_vectors),
                    (SELECT count(*) FROM code_terms)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(vectors, postings);
    let wrong: i64 = c
        .query_row(
            "SELECT count(*) FROM (SELECT term, count(*) AS n FROM code_terms GROUP BY term) p
             FULL JOIN code_term_stats s USING (term) WHERE p.n IS NOT s.df",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(wrong, 0, "kept document frequencies differ from the postings");
    assert_eq!(store.check().unwrap(), []);
}

/// The files of the default context, in the order they come (the focus's own first).
fn context_files(store: &Store, focus: &str, spec: Option<ProjectionSpec>) -> Vec<String> {
    let spec = spec.unwrap_or_else(|| ProjectionSpec::for_focus([focus]).unwrap());
    let set = DepthBreadthProjector::new().project_fragments(store, &spec, &Cl100k, Some(4000)).unwrap();
    let mut files: Vec<String> = Vec::new();
    for f in &set.fragments {
        let file = f.resource_uri().trim_start_matches("project://").to_owned();
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files
}

#[test]
fn the_default_context_ranks_files_by_the_graph_the_history_and_the_words() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    // The focus imports `rates`; `ledger` changes with it in every commit
    // but shares neither a link nor a word; `invoices` shares its rare words;
    // the fillers share nothing with it.
    let focus = "from rates import vat_rate\n\n\ndef settle_invoice_totals(amount):\n    return amount * vat_rate()\n";
    let mut files: Vec<(String, String)> = [
        ("billing.py", focus),
        ("rates.py", "def vat_rate():\n    return 0.2\n"),
        ("ledger.py", "def post_entry(book):\n    return book\n"),
        ("invoices.py", "def settle_invoice(x):\n    \"\"\"Invoice totals are settled here.\"\"\"\n    return x\n"),
    ]
    .iter()
    .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
    .collect();
    for i in 0..30 {
        files.push((format!("filler{i:02}.py"), format!("def noise_{i}():\n    return {i}\n")));
    }
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    commit(&repo, &files);
    for round in 0..4 {
        commit(&repo, &[("billing.py", &format!("{focus}# {round}\n")), ("ledger.py", &py("post_entry", round))]);
    }
    let db = dir.path().join("s.db");
    let mut store = Store::open(&db).unwrap();
    store.ingest(&repo, IngestOptions::default()).unwrap();
    let ranked = context_files(&store, "project://billing.py", None);
    assert_eq!(ranked[0], "billing.py", "the focus's outline first: {ranked:?}");
    let place = |f: &str| ranked.iter().position(|x| x == f).unwrap_or_else(|| panic!("{f} missing: {ranked:?}"));
    // Each signal brings its file ahead of every filler.
    for signalled in ["rates.py", "ledger.py", "invoices.py"] {
        assert!(place(signalled) < place("filler00.py"), "{signalled}: {ranked:?}");
    }
    // Without the history, the ledger is a filler like the others.
    let no_history = ProjectionSpec::for_focus(["project://billing.py"])
        .unwrap()
        .with_ranking(Ranking::Relevance(Signals { history: 0.0, ..Signals::DEFAULT }));
    let ranked = context_files(&store, "project://billing.py", Some(no_history));
    let place = |f: &str| ranked.iter().position(|x| x == f).unwrap_or(usize::MAX);
    assert!(place("ledger.py") > place("invoices.py") && place("ledger.py") > place("rates.py"), "{ranked:?}");
}

#[test]
fn two_ingests_at_once_count_each_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    commit(&repo, &[("a.py", &py("a", 0)), ("b.py", &py("b", 0)), ("c.py", &py("c", 0))]);
    let db = dir.path().join("s.db");
    Store::open(&db).unwrap().ingest(&repo, IngestOptions::default()).unwrap();
    for round in 1..=6 {
        commit(&repo, &[("a.py", &py("a", round)), ("b.py", &py("b", round))]);
        commit(&repo, &[("b.py", &py("b", 100 + round)), ("c.py", &py("c", round))]);
        // Two writers bring the same store up to date at the same moment.
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut store = Store::open(&db).unwrap();
                    start.wait();
                    store.ingest(&repo, IngestOptions::default()).unwrap();
                });
            }
        });
        // As one ingest of the whole history would have them.
        let fresh = dir.path().join(format!("fresh{round}.db"));
        Store::open(&fresh).unwrap().ingest(&repo, IngestOptions::default()).unwrap();
        let (ours, theirs) = (links(&db), links(&fresh));
        assert_eq!(ours.keys().collect::<Vec<_>>(), theirs.keys().collect::<Vec<_>>());
        for (pair, w) in &theirs {
            assert!((ours[pair] - w).abs() < 1e-9 * w.max(1.0), "round {round}: {pair:?} {} vs {w}", ours[pair]);
        }
    }
}
