//! The `dstore` command on a PostgreSQL server: every command takes a URL
//! where it takes a file and answers the same, processes import at once,
//! a killed import leaves whole batches, and a server that refuses or is
//! not there is one line and exit 3. (The library on a server:
//! `tests/postgres.rs` at the root.)
//!
//! Runs against the server named by `DSTORE_TEST_POSTGRES_URL`; without it
//! it says on stdout that it skipped.

use std::path::Path;
use std::process::{Command, Stdio};

use decision_store::testing::{direct_url, in_schema, write_decisions_file, TempStore};
use decision_store::Store;

mod common;
use common::{all_at_once, dstore, fails, ok};

/// `plans` plans of `per_plan` decisions each, as an export file.
fn decisions_file(dir: &Path, name: &str, plans: usize, per_plan: u32) -> std::path::PathBuf {
    let path = dir.join(name);
    write_decisions_file(&path, plans, per_plan).unwrap();
    path
}

fn a_decisions_file_exports_byte_for_byte(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = decisions_file(dir.path(), "d.jsonl", 5, 40);
    let server = TempStore::on_server(url).unwrap();
    let target = server.url().unwrap();
    ok(&["import", target, file.to_str().unwrap()]);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v1-demo.decisions.jsonl");
    ok(&["import", target, fixture.to_str().unwrap()]);
    let sqlite = dir.path().join("s.db");
    ok(&["import", sqlite.to_str().unwrap(), fixture.to_str().unwrap()]);
    ok(&["import", sqlite.to_str().unwrap(), file.to_str().unwrap()]);
    let (on_server, in_file) = (ok(&["export", target]), ok(&["export", sqlite.to_str().unwrap()]));
    assert!(on_server == in_file, "the server's export differs from the file's");
    assert_eq!(ok(&["digest", target]), ok(&["digest", sqlite.to_str().unwrap()]));
    assert_eq!(ok(&["check", target]).trim(), "ok: no problems found");
    // Each file on its own is in export order: the store gives back its bytes.
    let alone = TempStore::on_server(url).unwrap();
    ok(&["import", alone.url().unwrap(), file.to_str().unwrap()]);
    assert!(ok(&["export", alone.url().unwrap()]) == std::fs::read_to_string(&file).unwrap(), "not byte for byte");
}

fn copy_round_trips_file_to_server_to_file(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.db");
    ok(&["demo", source.to_str().unwrap()]);
    let file = decisions_file(dir.path(), "d.jsonl", 3, 30);
    ok(&["import", source.to_str().unwrap(), file.to_str().unwrap()]);
    ok(&["ingest", source.to_str().unwrap(), concat!(env!("CARGO_MANIFEST_DIR"), "/../src/ingest")]);
    // A redacted store copies like any other.
    let redact = ["redact", source.to_str().unwrap(), "01M6DQS9M0#2", "--fields", "rationale", "--reason", "a test"];
    ok(&[&redact[..], &["--by", "ci"]].concat());
    let server = TempStore::on_server(url).unwrap();
    let back = dir.path().join("back.db");
    let (s, u, b) = (source.to_str().unwrap(), server.url().unwrap(), back.to_str().unwrap());
    ok(&["copy", s, u]);
    ok(&["copy", u, b]);
    for args in [&["export"][..], &["digest"][..]] {
        let of = |db: &str| ok(&[args, &[db]].concat());
        assert!(of(s) == of(u) && of(s) == of(b), "{args:?} differs after the copies");
    }
    let graph = |db: &str| {
        let (n, e) = (dir.path().join(format!("{}.n", db.len())), dir.path().join(format!("{}.e", db.len())));
        ok(&["export-graph", db, n.to_str().unwrap(), e.to_str().unwrap()]);
        (std::fs::read(n).unwrap(), std::fs::read(e).unwrap())
    };
    assert!(graph(s) == graph(u) && graph(s) == graph(b), "the graph differs after the copies");
    for db in [s, u, b] {
        assert_eq!(ok(&["check", db]).trim(), "ok: no problems found", "{db}");
    }
    // The server's place in replication, as `info` shows it.
    assert!(ok(&["info", u]).contains("primary, no standby"));
    // Every read command answers the same on the server as on the file.
    // The demo's first plan: its decisions name resources of the graph.
    let plan = "01M6DQS9M0VS00000000000000".to_owned();
    let first = ok(&["export", s]);
    let id = first.split("\"decision_id\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let reads: [&[&str]; 13] = [
        &["plans", "--format", "json"],
        &["tree", &plan, "--format", "json"],
        &["tree", &plan, "--effective"],
        &["show", &id, "--format", "json"],
        &["show", "01M6DQS9M0#2", "--format", "json"],
        &["chain", &id, "--format", "json"],
        &["impact", &id, "--format", "json"],
        &["digest", "--plan", &plan],
        &["stale", "--all", "--format", "json"],
        &["calibration", "--format", "json"],
        &["project", "--focus", "class://TokenBucket", "--breadth", "2", "--format", "json"],
        &["project", "--focus", "class://TokenBucket", "--fragments", "--budget", "400", "--format", "json"],
        &["child-context", "--plan", &plan, "--budget", "2000", "--format", "json"],
    ];
    for args in reads {
        let on = |db: &str| {
            let run = dstore(&[&args[..1], &[db], &args[1..]].concat());
            (run.code, run.stdout, run.stderr)
        };
        let (file, server) = (on(s), on(u));
        assert!(file.0 <= 1, "{args:?} failed on the file: {}", file.2);
        assert_eq!((file.0, &file.1), (server.0, &server.1), "{args:?} differs on the server: {}", server.2);
    }
    // Ingest's references came along: ingesting the same tree again changes nothing.
    let again = dstore(&["ingest", u, concat!(env!("CARGO_MANIFEST_DIR"), "/../src/ingest")]);
    let said = again.stderr + &again.stdout;
    assert!(said.contains("nodes +0 ~0 -0; edges +0 -0"), "{said}");
    // Into a store that holds something: refused, nothing written.
    fails(&["copy", s, b], 2, "empty store only");
}

fn eight_processes_import_into_one_server_at_once(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<_> = (0..8).map(|i| decisions_file(dir.path(), &format!("{i}.jsonl"), 4, 60)).collect();
    let server = TempStore::on_server(url).unwrap();
    let target = server.url().unwrap().to_owned();
    all_at_once(
        &files.iter().map(|f| vec!["import", &target, f.to_str().unwrap(), "--batch", "25"]).collect::<Vec<_>>(),
    );
    let mut store = Store::connect_read_only(&target).unwrap();
    let counts = store.decision_counts().unwrap();
    assert_eq!((counts.plans, counts.decisions, counts.supersessions), (32, 32 * 60, 32));
    assert_eq!(store.check().unwrap(), vec![]);
    // Every file's decisions, each exactly as written.
    let mut all: Vec<String> = files
        .iter()
        .flat_map(|f| std::fs::read_to_string(f).unwrap().lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    all.sort();
    let mut out = Vec::new();
    store.export_decisions(None, &mut out).unwrap();
    let mut back: Vec<String> = String::from_utf8(out).unwrap().lines().map(str::to_owned).collect();
    back.sort();
    assert!(all == back, "the server lost or changed decisions");
    store = Store::connect(&target).unwrap();
    assert!(store.digest().is_ok());
}

fn a_killed_writer_leaves_whole_batches(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = decisions_file(dir.path(), "big.jsonl", 40, 500);
    let server = TempStore::on_server(url).unwrap();
    let target = server.url().unwrap().to_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dstore"))
        .args(["import", &target, file.to_str().unwrap(), "--batch", "1000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once some batches are in, before it can finish.
    let store = Store::connect_read_only(&target).unwrap();
    let started = std::time::Instant::now();
    while store.decision_counts().unwrap().decisions < 2000 && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let counts = store.decision_counts().unwrap();
    assert!(counts.decisions > 0 && counts.decisions < 20_000, "{} decisions: not killed mid-import", counts.decisions);
    // Every commit holds 1,000 lines, and the file has one supersession per 500 decisions.
    assert_eq!(counts.decisions % 1000, 0, "a half-written batch: {counts:?}");
    assert_eq!(store.check().unwrap(), vec![]);
    drop(store);
    // Importing again completes it: what is there is skipped, nothing doubles.
    ok(&["import", &target, file.to_str().unwrap()]);
    let store = Store::connect_read_only(&target).unwrap();
    assert_eq!(store.decision_counts().unwrap().decisions, 20_000);
    assert_eq!(store.check().unwrap(), vec![]);
}

/// A server that is not there, a refused login, another application's tables.
fn refusals_are_one_line(url: &str) {
    // A server that is not there, a refused login: exit 3 and one line.
    fails(&["info", "postgres://dstore@127.0.0.1:1/none"], 3, "cannot connect");
    let config: postgres::Config = url.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("{other:?}"),
    };
    let stranger =
        format!("postgres://nobody:secret@{host}:{}/{}", config.get_ports()[0], config.get_dbname().unwrap());
    fails(&["info", &stranger], 3, "nobody");
    assert!(!dstore(&["info", &stranger]).stderr.contains("secret"));
    // Another application's tables: refused, untouched.
    let mut admin = postgres::Client::connect(&direct_url(url), postgres::NoTls).unwrap();
    admin.batch_execute("DROP SCHEMA IF EXISTS foreign_app CASCADE; CREATE SCHEMA foreign_app; CREATE TABLE foreign_app.notes (body text)").unwrap();
    let foreign = in_schema(url, "foreign_app");
    for args in [&["init", &foreign][..], &["info", &foreign][..]] {
        // As for another application's SQLite file: bad input, exit 2.
        fails(args, 2, "another application");
    }
    let tables: i64 =
        admin.query_one("SELECT count(*) FROM pg_tables WHERE schemaname = 'foreign_app'", &[]).unwrap().get(0);
    assert_eq!(tables, 1, "the foreign schema was changed");
    admin.batch_execute("DROP SCHEMA foreign_app CASCADE").unwrap();
}

fn main() {
    let mut failed = 0;
    let mut run = |name: &str, test: &dyn Fn()| match std::panic::catch_unwind(std::panic::AssertUnwindSafe(test)) {
        Ok(()) => println!("test {name} ... ok"),
        Err(_) => {
            println!("test {name} ... FAILED");
            failed += 1;
        }
    };
    let Ok(url) = std::env::var("DSTORE_TEST_POSTGRES_URL") else {
        println!(
            "postgres (dstore): SKIPPED 5 server tests: DSTORE_TEST_POSTGRES_URL is not set \
             (scripts/pg-test-server cargo test --test postgres starts a throwaway server)"
        );
        return;
    };
    run("a_decisions_file_exports_byte_for_byte", &|| a_decisions_file_exports_byte_for_byte(&url));
    run("copy_round_trips_file_to_server_to_file", &|| copy_round_trips_file_to_server_to_file(&url));
    run("eight_processes_import_into_one_server_at_once", &|| eight_processes_import_into_one_server_at_once(&url));
    run("a_killed_writer_leaves_whole_batches", &|| a_killed_writer_leaves_whole_batches(&url));
    run("refusals_are_one_line", &|| refusals_are_one_line(&url));
    if failed > 0 {
        println!("postgres (dstore): {failed} test(s) failed");
        std::process::exit(1);
    }
}
