//! No writer waits long on another (issue 25): while one process ingests a
//! source tree and another imports a decisions file, a third process
//! inserts one decision every few milliseconds (`DSTORE_WRITERS_EVERY_MS`,
//! 2 by default, so that a bulk writer that ends in half a second still
//! meets enough of them; `benches/writers.sh` uses 10). Every insert must succeed, and
//! afterwards the store holds everything and `check` finds nothing; the
//! test prints how long the inserts waited (p50, p99, max). Run on a file,
//! and on PostgreSQL when `DSTORE_TEST_POSTGRES_URL` names a server.
//!
//! The sizes default to a tree of 25,000 lines and 30,000 decisions;
//! `DSTORE_WRITERS_LINES` and `DSTORE_WRITERS_DECISIONS` set others
//! (`benches/writers.sh` runs 700,000 and 1,000,000 for BENCHMARKS.md).
//! Timings are printed, never asserted: the machine is shared.

#[allow(dead_code)]
#[path = "../../benches/workload.rs"]
mod workload;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use decision_store::ingest::IngestOptions;
use decision_store::store::ImportOptions;
use decision_store::testing::{TempStore, POSTGRES_URL_VAR};
use decision_store::{Decision, DecisionType, PlanId, Store};

/// Which part a child process plays, and its arguments.
const ROLE: &str = "DSTORE_WRITERS_ROLE";
const TARGET: &str = "DSTORE_WRITERS_TARGET";
const INPUT: &str = "DSTORE_WRITERS_INPUT";
const OUTPUT: &str = "DSTORE_WRITERS_OUTPUT";

fn size(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

fn open(target: &str) -> Store {
    let opened = if Store::is_url(target) { Store::connect(target) } else { Store::open(target) };
    opened.unwrap_or_else(|e| panic!("{target}: {e}"))
}

fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros()
}

/// Not a test on its own: the child processes of `three_writers_*`.
#[test]
fn writer_child() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let target = std::env::var(TARGET).unwrap();
    let output = PathBuf::from(std::env::var(OUTPUT).unwrap());
    let mut store = open(&target);
    match role.as_str() {
        "ingest" => {
            let start = Instant::now();
            let report = store.ingest(std::env::var(INPUT).unwrap(), IngestOptions::default()).unwrap();
            let line =
                format!("{} {} {} {}", start.elapsed().as_millis(), report.files, report.nodes_added, report.batches);
            std::fs::write(output, line).unwrap();
        }
        "import" => {
            let start = Instant::now();
            let file = std::io::BufReader::new(std::fs::File::open(std::env::var(INPUT).unwrap()).unwrap());
            let report = store.import_decisions(file, ImportOptions::default(), |_| {}).unwrap();
            std::fs::write(output, format!("{} {} {}", start.elapsed().as_millis(), report.imported, report.batches))
                .unwrap();
        }
        "insert" => {
            // Inserts until the stop file appears; writes (start in us since the epoch, wait in us).
            let stop = PathBuf::from(std::env::var(INPUT).unwrap());
            let plan = PlanId::generate();
            let root =
                Decision::builder(plan, DecisionType::PromptDefinition, 0).chosen_option("watch").build().unwrap();
            store.insert(&root).unwrap();
            let mut waits = String::new();
            let mut sequence = 1;
            while !stop.exists() {
                let d = Decision::builder(plan, DecisionType::ToolInvocation, sequence)
                    .parent(root.decision_id())
                    .chosen_option(format!("step {sequence}"))
                    .confidence_score(0.5)
                    .build()
                    .unwrap();
                let (at, start) = (now_us(), Instant::now());
                if let Err(e) = store.insert(&d) {
                    eprintln!("insert {sequence} failed after {:?}: {e}", start.elapsed());
                    std::process::exit(1);
                }
                waits.push_str(&format!("{at} {}\n", start.elapsed().as_micros()));
                if sequence == 1 {
                    std::fs::write(output.with_extension("ready"), "").unwrap();
                }
                sequence += 1;
                std::thread::sleep(Duration::from_millis(size("DSTORE_WRITERS_EVERY_MS", 2) as u64));
            }
            std::fs::write(output, waits).unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, target: &str, input: &Path, output: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writers::writer_child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(TARGET, target)
        .env(INPUT, input)
        .env(OUTPUT, output)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The inserter, stopped when the test ends however it ends: a failed
/// assertion must not leave it inserting forever.
struct Inserter {
    child: Option<Child>,
    stop: PathBuf,
}

impl Inserter {
    fn stop(mut self) {
        std::fs::write(&self.stop, "").unwrap();
        wait_ok(self.child.take().expect("stopped once"), "insert");
    }
}

impl Drop for Inserter {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_ok(mut child: Child, what: &str) {
    let status = child.wait().unwrap();
    assert!(status.success(), "the {what} process failed: {status}");
}

/// The generated inputs, made once per run and shared by both backends.
struct Inputs {
    _dir: tempfile::TempDir,
    tree: PathBuf,
    decisions: PathBuf,
    lines: usize,
    count: usize,
}

fn inputs() -> &'static Inputs {
    static INPUTS: std::sync::OnceLock<Inputs> = std::sync::OnceLock::new();
    INPUTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        let stats = workload::write_source_tree(&tree, size("DSTORE_WRITERS_LINES", 25_000), 7).unwrap();
        let count = size("DSTORE_WRITERS_DECISIONS", 30_000);
        let decisions = dir.path().join("decisions.jsonl");
        // Plans of 250 decisions, as gen.py's defaults.
        let per_plan = 250.min(count);
        let resources: Vec<String> = (0..64).map(|i| format!("class://pkg{}.Resource{i}", i % 8)).collect();
        workload::write_decisions(&decisions, count / per_plan, per_plan, &resources, 11);
        let count = count / per_plan * per_plan;
        Inputs { _dir: dir, tree, decisions, lines: stats.lines, count }
    })
}

fn percentile(sorted: &[u128], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// The three writers on the store at `target` (a file or a URL).
fn three_writers(target: &str, backend: &str) {
    let inputs = inputs();
    let work = tempfile::tempdir().unwrap();
    let out = |name: &str| work.path().join(name);
    let stop = out("stop");
    let inserter = Inserter { child: Some(child("insert", target, &stop, &out("waits"))), stop: stop.clone() };
    // The inserter is inserting before the others start.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out("waits.ready").exists() {
        assert!(Instant::now() < deadline, "the inserter never inserted");
        std::thread::sleep(Duration::from_millis(5));
    }
    let start = now_us();
    let ingester = child("ingest", target, &inputs.tree, &out("ingest"));
    let importer = child("import", target, &inputs.decisions, &out("import"));
    wait_ok(ingester, "ingest");
    wait_ok(importer, "import");
    let end = now_us();
    inserter.stop();

    let read = |name: &str| std::fs::read_to_string(out(name)).unwrap();
    let ingest: Vec<u64> = read("ingest").split(' ').map(|v| v.parse().unwrap()).collect();
    let import: Vec<u64> = read("import").split(' ').map(|v| v.parse().unwrap()).collect();
    let all: Vec<(u128, u128)> = read("waits")
        .lines()
        .map(|l| {
            let (at, wait) = l.split_once(' ').unwrap();
            (at.parse().unwrap(), wait.parse().unwrap())
        })
        .collect();
    // The inserts made while a bulk writer ran.
    let mut during: Vec<u128> = all.iter().filter(|(at, _)| *at >= start && *at <= end).map(|(_, w)| *w).collect();
    during.sort_unstable();
    assert!(during.len() >= 20, "only {} inserts overlapped the bulk writers: the test did not test", during.len());

    let store = open(target);
    let counts = store.decision_counts().unwrap();
    // Every decision is there: the import's, the inserter's root and its steps.
    assert_eq!(counts.decisions, inputs.count as u64 + 1 + all.len() as u64);
    assert_eq!(import[1], inputs.count as u64);
    assert!(store.graph_counts().unwrap().nodes > 0);
    assert_eq!(store.check().unwrap(), vec![], "problems after three writers");
    println!(
        "three writers on {backend}: ingest of {} lines ({} files, {} nodes) {:.1} s in {} transactions; \
         import of {} decisions {:.1} s in {} transactions; {} single inserts meanwhile, none failed, \
         waits p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        inputs.lines,
        ingest[1],
        ingest[2],
        ingest[0] as f64 / 1000.0,
        ingest[3],
        import[1],
        import[0] as f64 / 1000.0,
        import[2],
        during.len(),
        percentile(&during, 0.5),
        percentile(&during, 0.99),
        percentile(&during, 1.0),
    );
}

/// One backend after the other, so that neither run slows the other's.
#[test]
fn three_writers_on_a_file_and_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    drop(Store::open(&db).unwrap());
    three_writers(db.to_str().unwrap(), "SQLite");
    let Ok(server) = std::env::var(POSTGRES_URL_VAR) else {
        println!("three writers: {POSTGRES_URL_VAR} is not set, so they did not run on PostgreSQL");
        return;
    };
    let temp = TempStore::on_server(&server).unwrap();
    three_writers(temp.url().unwrap(), "PostgreSQL");
}

#[test]
fn a_group_commit_stores_each_decision_or_says_why_not() {
    let mut temp = TempStore::new().unwrap();
    crate::common::a_group_commit_stores_each_decision_or_says_why_not(temp.store().unwrap());
}
