//! Reliability and safety: crashes, concurrent use, hostile input, files the
//! store did not write, injection, old files and append-only history.
//! Each test is bounded (well under a minute in a debug build).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use decision_store::projection::{DepthBreadthProjector, ProjectionSpec};
use decision_store::store::ImportOptions;
use decision_store::testing::{self, PlanBuilder, TempStore};
use decision_store::uko::{UkoEdge, UkoNode};
use decision_store::{Decision, DecisionType, Error, ErrorKind, PlanId, Store};
use proptest::prelude::*;

/// Every decision in the store as JSON lines (plan, then sequence).
fn dump(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    store
        .for_each_decision(None, |d| {
            out.push(d.to_json());
            Ok(())
        })
        .unwrap();
    out
}

/// Every node and edge as JSON lines.
fn dump_graph(store: &Store) -> (Vec<u8>, Vec<u8>) {
    let (mut n, mut e) = (Vec::new(), Vec::new());
    store.export_graph(&mut n, &mut e).unwrap();
    (n, e)
}

/// A plan of `n` (at least 4) decisions with a correction and, from 5 on, a supersession.
fn batch_plan(n: usize) -> Vec<Decision> {
    use DecisionType::*;
    let mut b = PlanBuilder::new().root("root").child("a", "root", StrategyChoice).correction("a2", "a");
    for i in 3..n - 1 {
        b = b.child(&format!("c{i}"), if i % 2 == 0 { "a2" } else { "root" }, ToolInvocation);
    }
    b = b.child("last", "root", ValidationResponse);
    if n > 4 {
        b = b.supersede("c3", "last");
    }
    b.build().unwrap().decisions().to_vec()
}

// ---------------------------------------------------------------- 1. crash safety

const CRASH_ENV: &str = "DSTORE_CRASH_CHILD_DB";
const BATCH: usize = 40;

/// Runs the test `name` of this binary as a child process writing to `db`
/// (passed in the variable `env`), its stdout piped back.
fn spawn_child(name: &str, env: &str, db: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("reliability::{name}"), "--nocapture", "--test-threads=1"])
        .env(env, db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Not a test on its own: the child process of `killed_writers_never_leave_half_a_batch`.
#[test]
fn crash_child() {
    let Some(db) = std::env::var_os(CRASH_ENV) else { return };
    let mut store = Store::open(&db).unwrap();
    let mut out = std::io::stdout().lock();
    loop {
        let plan = batch_plan(BATCH);
        store.insert_many(&plan).unwrap();
        writeln!(out, "committed {}", plan[0].plan_id()).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn killed_writers_never_leave_half_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let mut reported: Vec<String> = Vec::new();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for kill in 0..20 {
        let mut child = spawn_child("crash_child", CRASH_ENV, &db);
        let stdout = child.stdout.take().unwrap();
        let wanted = 1 + next(6) as usize;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(plan) = line.strip_prefix("committed ") {
                    let _ = tx.send(plan.to_owned());
                }
            }
        });
        let mut this_run = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while this_run < wanted && Instant::now() < deadline {
            if let Ok(plan) = rx.recv_timeout(Duration::from_millis(50)) {
                reported.push(plan);
                this_run += 1;
            }
        }
        // Then at a random moment, in the middle of whatever it is writing.
        std::thread::sleep(Duration::from_micros(next(20_000)));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        reported.extend(rx.try_iter());
        assert!(this_run > 0, "kill {kill}: the child reported no batch");

        let store = Store::open(&db).unwrap();
        assert_eq!(store.check().unwrap(), Vec::new(), "kill {kill}: problems after the crash");
        let counts: HashMap<String, u64> =
            store.plans().unwrap().into_iter().map(|p| (p.plan_id.to_string(), p.decisions)).collect();
        for plan in &reported {
            assert_eq!(counts.get(plan), Some(&(BATCH as u64)), "kill {kill}: reported batch {plan} is not whole");
        }
        for (plan, n) in &counts {
            assert_eq!(*n, BATCH as u64, "kill {kill}: half a batch of plan {plan}");
        }
    }
    println!("20 kills, {} batches reported committed, all present and whole", reported.len());
}

/// The file's journal mode, asked of a connection of its own.
fn journal_mode(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap()
}

/// Bytes in the write-ahead log beside `db` (0 when there is none).
fn wal_bytes(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

fn jsonl(decisions: &[Decision]) -> Vec<u8> {
    decisions.iter().flat_map(|d| (d.to_json() + "\n").into_bytes()).collect()
}

#[test]
fn a_first_load_bypasses_the_log_and_later_writes_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (batch_plan(2_000), batch_plan(2_000));
    // Into an empty store: pages straight to the file, none to the log.
    let db = dir.path().join("import.db");
    let mut store = Store::open(&db).unwrap();
    import_text(&mut store, &jsonl(&first), None).unwrap();
    assert!(wal_bytes(&db) < 100_000, "the load went through the log: {} bytes", wal_bytes(&db));
    assert_eq!(journal_mode(&db), "wal", "WAL resumes after the load");
    // Into a store that holds decisions: through the log, as every write
    // (the log then holds at least as many bytes as the decisions took).
    let loaded = std::fs::metadata(&db).unwrap().len();
    import_text(&mut store, &jsonl(&second), None).unwrap();
    assert!(wal_bytes(&db) > loaded / 2, "the second import bypassed the log: {} bytes", wal_bytes(&db));
    assert_eq!(store.check().unwrap(), Vec::new());
    let expected: Vec<String> = {
        let mut all: Vec<&Decision> = first.iter().chain(&second).collect();
        all.sort_by_key(|d| (d.plan_id(), d.sequence()));
        all.iter().map(|d| d.to_json()).collect()
    };
    assert_eq!(dump(&store), expected);
    drop(store);
    // `insert_many` loads the same way.
    let db = dir.path().join("insert.db");
    let mut store = Store::open(&db).unwrap();
    store.insert_many(&first).unwrap();
    assert!(wal_bytes(&db) < 100_000, "insert_many went through the log: {} bytes", wal_bytes(&db));
    assert_eq!(journal_mode(&db), "wal");
    assert_eq!(store.check().unwrap(), Vec::new());
    drop(store);
    // A graph in an otherwise empty store loads the same way; a store that
    // holds a graph is no longer empty, so its decisions go through the log.
    let db = dir.path().join("graph.db");
    let mut store = Store::open(&db).unwrap();
    let nodes: String = (0..3_000)
        .map(|i| format!("{{\"uri\":\"class://C{i}\",\"domain\":\"uko-code:\",\"kind\":\"class\",\"label\":\"C{i}\",\"views\":[{{\"depth\":0,\"content\":\"{}\"}}]}}\n", "x".repeat(200)))
        .collect();
    store.import_graph(nodes.as_bytes(), &b""[..], ImportOptions::default(), |_| {}).unwrap();
    assert!(wal_bytes(&db) < 100_000, "the graph went through the log: {} bytes", wal_bytes(&db));
    let loaded = std::fs::metadata(&db).unwrap().len();
    import_text(&mut store, &jsonl(&first), None).unwrap();
    assert!(wal_bytes(&db) > loaded / 4, "decisions beside a graph bypassed the log: {} bytes", wal_bytes(&db));
    assert_eq!(journal_mode(&db), "wal");
    assert_eq!(store.check().unwrap(), Vec::new());
}

#[test]
fn a_failed_first_load_leaves_an_empty_store_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("failed.db");
    let mut store = Store::open(&db).unwrap();
    let plan = batch_plan(500);
    let mut text = jsonl(&plan);
    text.extend_from_slice(b"{\"decision_id\": 7}\n");
    let err = import_text(&mut store, &text, None).unwrap_err();
    assert!(err.to_string().contains("line 501"), "{err}");
    assert_eq!(store.plans().unwrap().len(), 0, "nothing of the failed load stays");
    assert_eq!(journal_mode(&db), "wal");
    assert_eq!(store.check().unwrap(), Vec::new());
    // The same decisions load afterwards.
    import_text(&mut store, &jsonl(&plan), None).unwrap();
    assert_eq!(dump(&store), plan.iter().map(Decision::to_json).collect::<Vec<_>>());
}

#[test]
fn a_store_open_elsewhere_gets_its_first_load_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let mut store = Store::open(&db).unwrap();
    let reader = Store::open_read_only(&db).unwrap();
    assert_eq!(reader.plans().unwrap().len(), 0);
    let plan = batch_plan(2_000);
    import_text(&mut store, &jsonl(&plan), None).unwrap();
    assert!(wal_bytes(&db) > 1_000_000, "the file was left WAL while another connection had it open");
    assert_eq!(reader.plans().unwrap()[0].decisions, 2_000, "the reader sees the load");
    assert_eq!(journal_mode(&db), "wal");
}

const LOAD_ENV: &str = "DSTORE_LOAD_CHILD_DB";

/// Not a test on its own: the child process of `a_writer_killed_in_a_first_load_leaves_an_empty_store`.
#[test]
fn load_child() {
    let Some(db) = std::env::var_os(LOAD_ENV) else { return };
    let plan = batch_plan(20_000);
    let mut store = Store::open(&db).unwrap();
    // A small cache spills pages to the file early in the load.
    store.set_cache_kib(256).unwrap();
    println!("loading");
    std::io::stdout().flush().unwrap();
    store.insert_many(&plan).unwrap();
    println!("loaded");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_writer_killed_in_a_first_load_leaves_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let (mut empty, mut whole, mut unlogged) = (0, 0, 0);
    // Kill sooner after a round that let the load commit, later after one
    // that left the store empty, until both have been seen (and one kill
    // found the load writing the file directly), 40 rounds at most.
    let mut delay_ms = 20u64;
    let mut round = 0;
    while (empty == 0 || whole == 0 || unlogged == 0) && round < 40 {
        let db = dir.path().join(format!("load{round}.db"));
        let mut child = spawn_child("load_child", LOAD_ENV, &db);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(lines.any(|l| l.is_ok_and(|l| l.ends_with("loading"))), "round {round}: the child did not start");
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        // The load wrote the file, not a log: proof that this path ran.
        if std::fs::metadata(&db).unwrap().len() > 1_000_000 && wal_bytes(&db) < 100_000 {
            unlogged += 1;
        }
        // Killed once it has journaled a page the file had (at the latest
        // in its COMMIT), the load leaves a journal that a read-only open
        // cannot roll back; it says so. Killed before, it leaves only pages
        // past the file's recorded end, which no reader sees.
        if let Err(err) = Store::open_read_only(&db) {
            assert!(err.to_string().contains("open the store for writing once"), "round {round}: {err}");
        }
        let mut store = Store::open(&db).unwrap();
        assert_eq!(store.check().unwrap(), Vec::new(), "round {round}");
        let counts: Vec<u64> = store.plans().unwrap().iter().map(|p| p.decisions).collect();
        assert!(counts.is_empty() || counts == [20_000], "round {round}: {counts:?}");
        assert_eq!(journal_mode(&db), "wal", "round {round}");
        if counts.is_empty() {
            empty += 1;
            delay_ms = delay_ms * 3 / 2 + 1;
            // What the killed load left behind does not get in the way of the next one.
            let plan = batch_plan(3_000);
            store.insert_many(&plan).unwrap();
            assert_eq!(store.check().unwrap(), Vec::new(), "round {round}: after loading again");
            assert_eq!(dump(&store), plan.iter().map(Decision::to_json).collect::<Vec<_>>());
        } else {
            whole += 1;
            delay_ms = (delay_ms * 2 / 3).max(1);
        }
        round += 1;
    }
    assert!(empty > 0, "every kill came after the load committed: the test did not test it");
    assert!(whole > 0, "no load ever committed before its kill: the test did not test it");
    assert!(unlogged > 0, "no kill found the load writing the file directly: the test did not test it");
    println!(
        "{round} kills in a first load: {empty} left an empty store, {whole} the whole load; {unlogged} caught it writing the file"
    );
}

// ---------------------------------------------------------------- 2. concurrent use

#[test]
fn four_writers_and_four_readers_share_one_file() {
    let temp = TempStore::new().unwrap();
    let path = temp.path().to_owned();
    {
        let mut store = Store::open(&path).unwrap();
        let nodes: Vec<UkoNode> = (0..50)
            .map(|i| {
                UkoNode::new(format!("class://C{i}"), "uko-code:", "class", format!("C{i}"))
                    .with_view(0, format!("C{i}"))
            })
            .collect();
        let edges: Vec<UkoEdge> = (0..50)
            .flat_map(|i| {
                [
                    UkoEdge::new(format!("class://C{i}"), format!("class://C{}", (i * 7 + 1) % 50), "calls"),
                    UkoEdge::new(format!("class://C{i}"), format!("class://C{}", (i + 1) % 50), "contains"),
                ]
            })
            .collect();
        store.upsert_nodes(&nodes).unwrap();
        store.upsert_edges(&edges).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Writers' batches and readers' rounds so far, one counter each.
    let progress: Arc<Vec<std::sync::atomic::AtomicUsize>> = Arc::new((0..8).map(|_| Default::default()).collect());
    const WRITE: usize = 10;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (path, stop, progress) = (path.clone(), stop.clone(), progress.clone());
            std::thread::spawn(move || -> (PlanId, usize) {
                let mut store = Store::open(&path).unwrap();
                let plan = PlanId::generate();
                let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build().unwrap();
                let mut last = root.decision_id();
                let mut seq = 1;
                let mut batch = vec![root];
                let mut written = 0;
                while !stop.load(Ordering::Relaxed) {
                    while batch.len() < WRITE {
                        let d = Decision::builder(plan, DecisionType::ToolInvocation, seq)
                            .parent(last)
                            .chosen_option(format!("writer {w} step {seq}"))
                            .build()
                            .unwrap();
                        last = d.decision_id();
                        seq += 1;
                        batch.push(d);
                    }
                    store.insert_many(&batch).unwrap_or_else(|e| panic!("writer {w}: {e}"));
                    written += batch.len();
                    batch.clear();
                    progress[w].fetch_add(1, Ordering::Relaxed);
                }
                (plan, written)
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (path, stop, progress) = (path.clone(), stop.clone(), progress.clone());
            std::thread::spawn(move || -> usize {
                let store = Store::open_read_only(&path).unwrap();
                let projector = DepthBreadthProjector::new();
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    for p in store.plans().unwrap_or_else(|e| panic!("reader {r}: {e}")) {
                        let tree = store.decision_tree(p.plan_id).unwrap_or_else(|e| panic!("reader {r}: {e}"));
                        assert_eq!(tree.len() % WRITE, 0, "reader {r} saw part of a transaction");
                        assert_eq!(tree.roots().len(), 1);
                        let leaf = tree.decisions().last().unwrap().decision_id();
                        assert_eq!(tree.path_to_root(leaf).len(), tree.len());
                        assert_eq!(store.correction_chain(leaf).unwrap().len(), 1);
                        reads += 1;
                    }
                    let spec = ProjectionSpec::new([format!("class://C{}", reads % 50)], 3, 4).unwrap();
                    assert!(projector.project(&store, &spec).unwrap().nodes.len() > 1);
                    reads += 1;
                    progress[4 + r].fetch_add(1, Ordering::Relaxed);
                }
                reads
            })
        })
        .collect();
    // Until every writer has committed 20 batches and every reader has
    // read 20 rounds of them, a minute at most.
    let deadline = Instant::now() + Duration::from_secs(60);
    while progress.iter().any(|p| p.load(Ordering::Relaxed) < 20) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<usize> = progress.iter().map(|p| p.load(Ordering::Relaxed)).collect();
    assert!(counts.iter().all(|&n| n >= 20), "not every writer and reader got to work in a minute: {counts:?}");
    let written: Vec<(PlanId, usize)> = writers.into_iter().map(|w| w.join().expect("a writer failed")).collect();
    let reads: usize = readers.into_iter().map(|r| r.join().expect("a reader failed")).sum();
    let store = Store::open_read_only(&path).unwrap();
    for (plan, n) in &written {
        assert!(*n > 0, "a writer never got to write");
        assert_eq!(store.plan_decisions(*plan).unwrap().len(), *n);
    }
    println!(
        "{} decisions written by 4 writers, {reads} reads by 4 readers",
        written.iter().map(|w| w.1).sum::<usize>()
    );
}

#[test]
fn a_supersession_is_recorded_once_even_when_two_writers_race() {
    for round in 0..10 {
        let temp = TempStore::new().unwrap();
        let plan = PlanBuilder::new()
            .root("r")
            .child("old", "r", DecisionType::StrategyChoice)
            .child("x", "r", DecisionType::StrategyChoice)
            .child("y", "r", DecisionType::StrategyChoice)
            .build()
            .unwrap();
        Store::open(temp.path()).unwrap().insert_many(plan.decisions()).unwrap();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let results: Vec<decision_store::Result<()>> = ["x", "y"]
            .into_iter()
            .map(|by| {
                let (path, barrier) = (temp.path().to_owned(), barrier.clone());
                let (old, new) = (plan.id("old"), plan.id(by));
                std::thread::spawn(move || {
                    let mut store = Store::open(&path).unwrap();
                    barrier.wait();
                    store.supersede(old, new)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let oks = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(oks, 1, "round {round}: {results:?}");
        assert!(
            results.iter().any(|r| matches!(r, Err(Error::AlreadySuperseded { .. }))),
            "round {round}: {results:?}"
        );
    }
}

// ---------------------------------------------------------------- 3. hostile input

fn import_text(
    store: &mut Store,
    text: &[u8],
    batch: Option<usize>,
) -> decision_store::Result<decision_store::store::ImportReport> {
    // `None`: one transaction, so that a failure leaves nothing behind.
    let options = batch.map_or_else(ImportOptions::atomic, ImportOptions::every);
    store.import_decisions(text, options, |_| {})
}

/// A store holding one plan, and its dump.
fn seeded() -> (TempStore, Vec<String>) {
    let mut temp = TempStore::new().unwrap();
    let plan = batch_plan(12);
    temp.store().unwrap().insert_many(&plan).unwrap();
    let before = dump(temp.store().unwrap());
    (temp, before)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_decoder_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Decision::from_json(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn the_decoder_never_panics_on_any_json(value in testing::json_value()) {
        let _ = Decision::from_json_value(value.clone());
        let _ = Decision::from_json(&value.to_string());
    }

    #[test]
    fn the_decoder_never_panics_on_damaged_decisions(d in testing::decision(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut text = d.to_json().into_bytes();
        let i = at.index(text.len());
        text[i] = byte;
        if let Ok(s) = std::str::from_utf8(&text) {
            if let Ok(back) = Decision::from_json(s) {
                // Whatever decodes is valid by construction.
                prop_assert!(Decision::from_json(&back.to_json()).is_ok());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_failed_import_leaves_the_store_as_it_was(
        plan in testing::plan(15),
        junk in proptest::collection::vec((any::<prop::sample::Index>(), "[\\PC]{0,40}"), 1..4),
    ) {
        let (mut temp, before) = seeded();
        let mut lines: Vec<String> = plan.iter().map(Decision::to_json).collect();
        for (at, text) in junk {
            let i = at.index(lines.len() + 1);
            lines.insert(i, format!("{{\"junk\": {text:?}}}"));
        }
        let result = import_text(temp.store().unwrap(), lines.join("\n").as_bytes(), None);
        prop_assert!(matches!(result, Err(Error::Line { .. })), "{result:?}");
        prop_assert_eq!(&dump(temp.reopen().unwrap()), &before);
        // Without the junk, the same plan imports whole, in any order.
        let mut good: Vec<String> = plan.iter().map(Decision::to_json).collect();
        good.reverse();
        let report = import_text(temp.store().unwrap(), good.join("\n").as_bytes(), Some(3)).unwrap();
        prop_assert_eq!(report.imported as usize, plan.len());
    }

    #[test]
    fn a_failed_graph_import_leaves_the_graph_as_it_was(
        edges in proptest::collection::vec((0usize..8, 0usize..8, "[a-z]{1,6}"), 1..20),
        bad in 0usize..20,
    ) {
        let mut temp = TempStore::new().unwrap();
        let nodes: String = (0..6).map(|i| format!("{{\"uri\":\"n{i}\",\"domain\":\"d:\",\"kind\":\"k\",\"label\":\"n{i}\",\"views\":[]}}\n")).collect();
        temp.store().unwrap().import_graph(nodes.as_bytes(), &b""[..], ImportOptions::default(), |_| {}).unwrap();
        let before = dump_graph(temp.store().unwrap());
        // Nodes 6 and 7 do not exist, and one line is broken on purpose.
        let mut lines: Vec<String> = edges.iter().map(|(s, t, r)| format!("{{\"source\":\"n{s}\",\"target\":\"n{t}\",\"relation\":\"{r}\",\"weight\":1.5}}")).collect();
        let at = bad.min(lines.len());
        lines.insert(at, "{\"source\": \"n0\", \"target\":".into());
        let result = temp.store().unwrap().import_graph(&b""[..], lines.join("\n").as_bytes(), ImportOptions::atomic(), |_| {});
        prop_assert!(
            matches!(&result, Err(Error::Input { name: "edges", error }) if matches!(**error, Error::Line { .. })),
            "{result:?}"
        );
        prop_assert_eq!(dump_graph(temp.reopen().unwrap()), before);
    }
}

/// Runs a hostile line through the importer: it must fail with a typed error
/// naming `expect`, and the store must be unchanged.
fn refused(line: &[u8], expect: &str) {
    let (mut temp, before) = seeded();
    let err = import_text(temp.store().unwrap(), line, None).expect_err("accepted hostile input");
    let msg = err.to_string();
    assert!(msg.contains(expect), "{msg:?} lacks {expect:?}");
    assert!(matches!(err, Error::Line { .. }), "{err:?}");
    assert_eq!(dump(temp.reopen().unwrap()), before);
}

fn valid_line() -> serde_json::Value {
    batch_plan(4)[0].to_json_value()
}

#[test]
fn hostile_records_are_refused_with_typed_errors() {
    refused(b"\xff\xfe{}\n", "not UTF-8");
    refused(b"NaN\n", "line 1");
    let mut v = valid_line();
    v["confidence_score"] = serde_json::json!("NaN");
    refused(v.to_string().as_bytes(), "confidence_score");
    let line = valid_line().to_string();
    assert!(line.contains("\"confidence_score\":null"), "{line}");
    refused(line.replacen("\"confidence_score\":null", "\"confidence_score\":1e400", 1).as_bytes(), "line 1");
    refused(
        valid_line().to_string().replacen("\"sequence\":0", "\"sequence\":18446744073709551616", 1).as_bytes(),
        "sequence",
    );
    refused(valid_line().to_string().replacen("\"sequence\":0", "\"sequence\":-1", 1).as_bytes(), "sequence");
    refused(
        valid_line()
            .to_string()
            .replacen("\"decision_type\":\"prompt_definition\"", "\"decision_type\":\"drop_tables\"", 1)
            .as_bytes(),
        "decision_type",
    );
    let v = valid_line();
    let dup = format!("{{\"plan_id\":\"{}\",{}", PlanId::generate(), &v.to_string()[1..]);
    refused(dup.as_bytes(), "duplicate field");
    for bad in [
        "01ARZ3NDEKTSV4RRFFQ69G5FA",
        "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
        "01ARZ3NDEKTSV4RRFFQ69G5FAU",
        "01arz3ndektsv4rrffq69g5fav",
        "81ARZ3NDEKTSV4RRFFQ69G5FAV",
    ] {
        let mut v = valid_line();
        v["decision_id"] = serde_json::json!(bad);
        refused(v.to_string().as_bytes(), "decision_id");
    }
    let mut deep = serde_json::json!(1);
    for _ in 0..100 {
        deep = serde_json::json!([deep]);
    }
    let mut v = valid_line();
    v["metadata"] = serde_json::json!({ "deep": deep });
    let (mut temp, _) = seeded();
    import_text(temp.store().unwrap(), v.to_string().as_bytes(), None).expect("100 levels of nesting are data");
    // 100,000 levels are refused by the decoder's depth limit, not by a stack overflow.
    let nested = format!("{}{}{}", "[".repeat(100_000), "1", "]".repeat(100_000));
    let text = valid_line().to_string().replacen("\"metadata\":{}", &format!("\"metadata\":{{\"deep\":{nested}}}"), 1);
    refused(text.as_bytes(), "line 1");
}

#[test]
fn parents_in_other_plans_and_history_cycles_are_refused_on_import() {
    let other = batch_plan(3);
    let mut v = batch_plan(3)[1].to_json_value();
    let (mut temp, _) = seeded();
    temp.store().unwrap().insert_many(&other).unwrap();
    let before = dump(temp.store().unwrap());
    // Re-parent a fresh decision under the other plan's root.
    let root = batch_plan(3);
    v["parent_decision_id"] = serde_json::json!(other[0].decision_id().to_string());
    let text = format!(
        "{}\n{}",
        root[0].to_json(),
        serde_json::to_string(&v).unwrap().replace(&root[1].plan_id().to_string(), &root[0].plan_id().to_string())
    );
    let err = import_text(temp.store().unwrap(), text.as_bytes(), None).unwrap_err();
    assert!(err.to_string().contains("belongs to plan"), "{err}");
    assert_eq!(dump(temp.reopen().unwrap()), before);

    // A superseded by B and B superseded by A, in one file.
    let plan = PlanBuilder::new()
        .root("r")
        .child("a", "r", DecisionType::StrategyChoice)
        .child("b", "r", DecisionType::StrategyChoice)
        .build()
        .unwrap();
    let mut a = plan.get("a").to_json_value();
    let mut b = plan.get("b").to_json_value();
    a["superseded_by"] = serde_json::json!(plan.id("b").to_string());
    b["superseded_by"] = serde_json::json!(plan.id("a").to_string());
    let text = format!("{}\n{a}\n{b}\n", plan.get("r").to_json());
    let err = import_text(temp.store().unwrap(), text.as_bytes(), None).unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
    assert_eq!(dump(temp.reopen().unwrap()), before);
}

#[test]
fn huge_strings_round_trip() {
    let mut temp = TempStore::new().unwrap();
    let big: String = "x'\"; -- ✓\u{0}".chars().cycle().take(10_000_000).collect();
    let d = Decision::builder(PlanId::generate(), DecisionType::PromptDefinition, 0)
        .rationale(big.clone())
        .metadata("big", serde_json::json!(big))
        .build()
        .unwrap();
    let line = d.to_json();
    import_text(temp.store().unwrap(), line.as_bytes(), None).unwrap();
    assert_eq!(temp.reopen().unwrap().decision(d.decision_id()).unwrap(), d);
}

#[test]
fn a_million_line_file_streams_and_names_its_last_line() {
    let (mut temp, before) = seeded();
    let mut text = Vec::with_capacity(2_100_000);
    for _ in 0..999_999 {
        text.extend_from_slice(b" \n");
    }
    text.extend_from_slice(b"{\"decision_id\": 7}\n");
    let err = import_text(temp.store().unwrap(), &text, Some(1000)).unwrap_err();
    assert!(err.to_string().starts_with("line 1000000:"), "{err}");
    assert_eq!(dump(temp.reopen().unwrap()), before);
}

#[test]
fn an_endless_line_is_refused_after_128_mib_not_read_to_the_end() {
    let (mut temp, before) = seeded();
    // A gigabyte of one line, generated as it is read.
    let endless = std::io::BufReader::new(std::io::Read::take(std::io::repeat(b'x'), 1 << 30));
    let err = temp.store().unwrap().import_decisions(endless, ImportOptions::default(), |_| {}).unwrap_err();
    assert!(err.to_string().starts_with("line 1: invalid line: longer than 128 MiB"), "{err}");
    assert_eq!(dump(temp.reopen().unwrap()), before);
}

// ---------------------------------------------------------------- 4. files the store did not write

fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// Opening `path` both ways fails with an error mentioning `expect`, and the file is unchanged.
fn refused_file(path: &Path, expect: &str) {
    let before = file_bytes(path);
    for (how, result) in [("read-only", Store::open_read_only(path)), ("writable", Store::open(path))] {
        let err = result.expect_err(&format!("{how}: opened {}", path.display()));
        assert!(err.to_string().contains(expect), "{how}: {err} lacks {expect:?}");
    }
    assert_eq!(file_bytes(path), before, "{} changed", path.display());
}

/// A checkpointed store file (no WAL beside it) with a few plans and a graph.
fn store_file(dir: &Path) -> PathBuf {
    let path = dir.join("good.db");
    let mut store = Store::open(&path).unwrap();
    for _ in 0..20 {
        store.insert_many(batch_plan(20)).unwrap();
    }
    drop(store);
    path
}

#[test]
fn damaged_and_foreign_files_get_their_own_errors_and_stay_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let good = store_file(dir.path());
    let len = std::fs::metadata(&good).unwrap().len();
    assert!(len > 20_000, "{len}");
    for cut in [50, 100, 4096, len / 2, len - 4096] {
        let path = dir.path().join(format!("cut{cut}.db"));
        std::fs::write(&path, &file_bytes(&good)[..cut as usize]).unwrap();
        let before = file_bytes(&path);
        for result in [
            Store::open_read_only(&path).and_then(|s| s.check().map(|p| (s, p))),
            Store::open(&path).and_then(|s| s.check().map(|p| (s, p))),
        ] {
            match result {
                Err(e) => assert!(matches!(e, Error::NotSqlite { .. } | Error::Damaged(_)), "cut {cut}: {e:?}"),
                Ok((_, problems)) => assert!(!problems.is_empty(), "cut {cut}: a truncated file checks clean"),
            }
        }
        assert_eq!(file_bytes(&path), before, "cut {cut}: the file changed");
    }
    let random = dir.path().join("random.db");
    std::fs::write(&random, (0..65536u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect::<Vec<_>>())
        .unwrap();
    refused_file(&random, "not a SQLite database");
    let header_only = dir.path().join("header.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(std::iter::repeat_n(0xAB, 4000));
    std::fs::write(&header_only, bytes).unwrap();
    refused_file(&header_only, "");
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE decisions (id); INSERT INTO decisions VALUES (1);")
        .unwrap();
    refused_file(&other, "not a decision store");
    let future = dir.path().join("future.db");
    std::fs::copy(&good, &future).unwrap();
    rusqlite::Connection::open(&future)
        .unwrap()
        .execute("INSERT INTO refinery_schema_history VALUES (999, 'next', 'now', '0')", [])
        .unwrap();
    refused_file(&future, "newer than this library");
    let a_dir = dir.path().join("a-directory.db");
    std::fs::create_dir(&a_dir).unwrap();
    assert!(Store::open(&a_dir).unwrap_err().to_string().contains("directory"));
    assert!(Store::open_read_only(&a_dir).unwrap_err().to_string().contains("directory"));
    // Empty files are stores not yet created.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(Store::open_read_only(&empty), Err(Error::NotCreated { .. })));
    assert_eq!(file_bytes(&empty), b"");
    Store::open(&empty).unwrap();
    Store::open_read_only(&empty).unwrap();
}

#[test]
fn a_read_only_store_refuses_writes_and_a_read_only_file_is_not_changed() {
    let dir = tempfile::tempdir().unwrap();
    let good = store_file(dir.path());
    let before = file_bytes(&good);
    let mut store = Store::open_read_only(&good).unwrap();
    assert!(matches!(store.insert(&batch_plan(2)[0]), Err(Error::ReadOnly)));
    assert!(matches!(store.upsert_nodes(&[UkoNode::new("u", "d", "k", "l")]), Err(Error::ReadOnly)));
    assert!(matches!(store.import_decisions(&b""[..], ImportOptions::default(), |_| {}), Err(Error::ReadOnly)));
    drop(store);
    let mut perms = std::fs::metadata(&good).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&good, perms).unwrap();
    // Root ignores file permissions; then only the read-only handle above applies.
    if std::fs::OpenOptions::new().write(true).open(&good).is_err() {
        let result = Store::open(&good).and_then(|mut s| s.insert(&batch_plan(2)[0]));
        let err = result.expect_err("wrote to a read-only file");
        assert!(
            matches!(err.kind(), ErrorKind::Internal | ErrorKind::ReadOnly),
            "a permission problem is the environment's: {err:?}"
        );
        assert_eq!(file_bytes(&good), before);
        Store::open_read_only(&good).unwrap();
    }
}

// ---------------------------------------------------------------- 5. injection

#[test]
fn quotes_semicolons_comments_nul_and_sql_are_just_data() {
    let hostile = [
        "'; DROP TABLE decisions; --",
        "\" OR 1=1 --",
        "a\u{0}b",
        "Robert'); DELETE FROM uko_edges;--",
        "%_\\*?[]",
        "SELECT * FROM sqlite_master",
    ];
    let mut temp = TempStore::new().unwrap();
    let nodes: Vec<UkoNode> =
        hostile.iter().map(|h| UkoNode::new(format!("class://{h}"), *h, *h, *h).with_view(0, *h)).collect();
    let edges: Vec<UkoEdge> = hostile
        .windows(2)
        .map(|w| UkoEdge::new(format!("class://{}", w[0]), format!("class://{}", w[1]), w[1]))
        .collect();
    let plan = PlanId::generate();
    let mut ds = vec![Decision::builder(plan, DecisionType::PromptDefinition, 0).build().unwrap()];
    for (i, h) in hostile.iter().enumerate() {
        let snapshot = decision_store::ContextSnapshot::new(
            *h,
            vec![decision_store::ResourceRef::new(format!("class://{h}"), Some(h.to_string()), Some(h.to_string()))
                .unwrap()],
            Some(h.to_string()),
        );
        ds.push(
            Decision::builder(plan, DecisionType::StrategyChoice, i as u32 + 1)
                .parent(ds[0].decision_id())
                .chosen_option(*h)
                .rationale(*h)
                .context_snapshot(snapshot)
                .artifact(decision_store::ArtifactRef::new(*h, Some(h.to_string())).unwrap())
                .metadata(*h, serde_json::json!(h))
                .build()
                .unwrap(),
        );
    }
    let store = temp.store().unwrap();
    store.upsert_nodes(&nodes).unwrap();
    store.upsert_edges(&edges).unwrap();
    store.insert_many(&ds).unwrap();
    let store = temp.reopen().unwrap();
    for d in &ds {
        assert_eq!(&store.decision(d.decision_id()).unwrap(), d);
    }
    let graph = store.load_graph().unwrap();
    assert_eq!(graph.node_count(), hostile.len());
    assert_eq!(graph.edge_count(), hostile.len() - 1);
    for n in &nodes {
        assert_eq!(graph.node(&n.uri), Some(n));
    }
    let spec = ProjectionSpec::new([format!("class://{}", hostile[0])], 10, 4)
        .unwrap()
        .with_relations(hostile.iter().map(|h| h.to_string()));
    let p = DepthBreadthProjector::new().project(store, &spec).unwrap();
    assert_eq!(p.nodes.len(), hostile.len());
    assert_eq!(store.check().unwrap(), Vec::new());
    // A plan id is a ULID: hostile text never gets that far.
    assert!(Decision::builder(plan, DecisionType::PromptDefinition, 0)
        .plan_id("'; DROP TABLE decisions; --")
        .build()
        .is_err());
}

// ---------------------------------------------------------------- 6. old files

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn a_store_written_by_schema_version_1_opens_migrates_and_reads_back_unchanged() {
    let expected: Vec<Decision> = std::fs::read_to_string(fixture("v1-demo.decisions.jsonl"))
        .unwrap()
        .lines()
        .map(|l| Decision::from_json(l).unwrap())
        .collect();
    assert_eq!(expected.len(), 17);
    let original = file_bytes(&fixture("v1-demo.db"));
    testing::check_upgrade(fixture("v1-demo.db"), &expected).unwrap_or_else(|m| panic!("{m}"));
    assert_eq!(file_bytes(&fixture("v1-demo.db")), original, "the fixture itself was changed");

    // The migrated copy's schema equals a fresh store's, and its graph reads back.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    std::fs::copy(fixture("v1-demo.db"), &copy).unwrap();
    let upgraded = Store::open(&copy).unwrap();
    let fresh_path = dir.path().join("fresh.db");
    drop(Store::open(&fresh_path).unwrap());
    let schema = |p: &Path| -> Vec<(String, String)> {
        let conn = rusqlite::Connection::open(p).unwrap();
        let mut stmt = conn.prepare("SELECT m.name, group_concat(i.name || ' ' || i.type || ' ' || i.pk, ', ') FROM sqlite_master m LEFT JOIN pragma_table_info(m.name) i WHERE m.name NOT LIKE 'sqlite_%' GROUP BY m.name ORDER BY m.name").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    drop(upgraded);
    assert_eq!(schema(&copy), schema(&fresh_path));
    let store = Store::open_read_only(&copy).unwrap();
    let (nodes, edges) = dump_graph(&store);
    assert_eq!(nodes, file_bytes(&fixture("v1-demo.nodes.jsonl")));
    assert_eq!(edges, file_bytes(&fixture("v1-demo.edges.jsonl")));
}

/// Two stores on one file in one process (a server's writer and its
/// readers), and another process that opens and closes the file with the
/// system's SQLite, as a `sqlite3` shell does (Python's module here: the
/// machine's Python is a given of the test suite): this process keeps its
/// locks, so the other one never takes the file for unused and deletes the
/// write-ahead log under the writer. (It did while opening a store read
/// the file's header through a descriptor of its own: closing it dropped
/// every POSIX lock of the process on the file. The bundled SQLite of a
/// child of this binary did not show it; the system's did.)
#[test]
fn a_second_open_in_the_process_keeps_the_writers_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let mut writer = Store::open(&db).unwrap();
    let first = batch_plan(3);
    writer.insert_many(&first).unwrap();
    // Opened anew, as a server opens a store that another command wrote.
    drop(writer);
    let mut writer = Store::open(&db).unwrap();
    let reader = Store::open_read_only(&db).unwrap();
    let peek = || {
        let script = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\n\
                      print(c.execute('SELECT count(*) FROM decisions').fetchone()[0])\nc.close()";
        let out = Command::new("python3").args(["-c", script]).arg(&db).output().expect("python3 runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().parse::<u64>().unwrap()
    };
    assert_eq!(peek(), first.len() as u64);
    let later = batch_plan(2);
    writer.insert_many(&later).unwrap();
    let all = (first.len() + later.len()) as u64;
    assert_eq!(peek(), all, "the other process sees the commit");
    drop((writer, reader));
    assert_eq!(Store::open_read_only(&db).unwrap().decision_counts().unwrap().decisions, all);
}
