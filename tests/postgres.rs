//! The library on a PostgreSQL server: its schema (`migrations/postgres`)
//! against the SQLite one, so that the two dialects cannot drift, and the
//! store's writes, reads and refusals on the server as on a file. (The
//! `dstore` command on a server: `dstore/tests/postgres.rs`.)
//!
//! Runs against the server named by `DSTORE_TEST_POSTGRES_URL`, each test in
//! a database of its own; `scripts/pg-test-server cargo test` starts a
//! throwaway server for it. Without the variable it says on stdout that it
//! skipped the server tests. The file checks run either way.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use decision_store::Store;

/// (version, name) of every migration file in `dir`.
fn migration_files(dir: &str) -> Vec<(u32, String)> {
    let mut found: Vec<(u32, String)> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|f| {
            let (v, name) = f.strip_suffix(".sql")?.strip_prefix('V')?.split_once("__")?;
            Some((v.parse().unwrap(), name.to_owned()))
        })
        .collect();
    found.sort();
    found
}

/// A column as both dialects can state it: table, column, nullable, part of the primary key.
type Columns = BTreeMap<(String, String), (bool, bool)>;

fn sqlite_columns() -> Columns {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT m.name, c.name, c.\"notnull\", c.pk FROM sqlite_master m JOIN pragma_table_info(m.name) c \
             WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%'",
        )
        .unwrap();
    stmt.query_map([], |r| {
        let (not_null, pk): (bool, i64) = (r.get(2)?, r.get(3)?);
        // SQLite lets a primary-key column hold NULL unless it says NOT NULL; PostgreSQL never does.
        Ok(((r.get(0)?, r.get(1)?), (!not_null && pk == 0, pk > 0)))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn postgres_columns(client: &mut postgres::Client) -> Columns {
    let pk: Vec<(String, String)> = client
        .query(
            "SELECT k.table_name::text, k.column_name::text FROM information_schema.table_constraints t \
             JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name \
               AND k.table_schema = t.table_schema \
             WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_schema = current_schema()",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    client
        .query(
            "SELECT table_name::text, column_name::text, is_nullable::text FROM information_schema.columns \
             WHERE table_schema = current_schema()",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| {
            let key: (String, String) = (r.get(0), r.get(1));
            let in_pk = pk.contains(&key);
            (key, (r.get::<_, String>(2) == "YES" && !in_pk, in_pk))
        })
        .collect()
}

/// A database of its own for one test on the server, dropped afterwards.
struct TestDatabase {
    admin: postgres::Config,
    name: String,
    pub client: postgres::Client,
}

impl TestDatabase {
    fn new(url: &str, test: &str) -> TestDatabase {
        let admin = postgres::Config::from_str(&direct_url(url)).unwrap();
        let name = format!("dstore_{test}_{}", std::process::id());
        let mut c = admin.connect(postgres::NoTls).unwrap();
        // One statement each: several in one call run as a transaction, which these refuse.
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let mut config = admin.clone();
        config.dbname(&name);
        let client = config.connect(postgres::NoTls).unwrap();
        TestDatabase { admin, name, client }
    }

    /// A database with a store's schema, made by the library.
    fn migrated(url: &str, test: &str) -> TestDatabase {
        let db = TestDatabase::new(url, test);
        let (base, query) = url.split_once('?').map_or((url, String::new()), |(b, q)| (b, format!("?{q}")));
        let (server, _) = base.rsplit_once('/').unwrap();
        drop(Store::connect(&format!("{server}/{}{query}", db.name)).unwrap());
        db
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(mut c) = self.admin.connect(postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

fn the_dialects_have_the_same_migrations() {
    let (sqlite, postgres) = (migration_files("migrations/sqlite"), migration_files("migrations/postgres"));
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, postgres, "every version exists in both dialects, under the same name");
    assert_eq!(postgres.last().map(|m| i64::from(m.0)), Some(decision_store::store::supported_schema_version()));
}

fn the_schemas_have_the_same_tables_and_columns(url: &str) {
    let mut db = TestDatabase::migrated(url, "schema");
    let (sqlite, postgres) = (sqlite_columns(), postgres_columns(&mut db.client));
    let only = |a: &Columns, b: &Columns| -> Vec<String> {
        a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).map(|((t, c), v)| format!("{t}.{c} {v:?}")).collect()
    };
    assert!(
        sqlite == postgres,
        "SQLite only: {:?}\nPostgreSQL only: {:?}",
        only(&sqlite, &postgres),
        only(&postgres, &sqlite)
    );
    assert!(sqlite.contains_key(&("decisions".into(), "chain_hash".into())));
    // Text compares as bytes, as SQLite's BINARY does (V7), whatever the server's default collation.
    let linguistic: Vec<String> = db
        .client
        .query(
            "SELECT table_name::text || '.' || column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C' \
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(linguistic.is_empty(), "text columns without COLLATE \"C\" (a new one must say it): {linguistic:?}");
}

const ROW: &str = "INSERT INTO decisions (decision_id, plan_id, sequence, decision_type, chosen_option, rationale, \
     alternatives, context_snapshot, artifacts_produced, downstream_decision_ids, downstream_plan_ids, metadata) \
     VALUES ($1, $2, $3, $4, '', '', '[]', '{}', '[]', '[]', '[]', '{}')";

fn the_server_refuses_what_the_file_refuses(url: &str) {
    let mut db = TestDatabase::migrated(url, "rules");
    let c = &mut db.client;
    let (a, b, other) = ("01JGFJJZEVCVC2373KMQTT8K9A", "01JGFJJZEVCVC2373KMQTT8K9B", "01JGFJJZEVCVC2373KMQTT8K9C");
    let (plan, plan2) = ("01JGFJJZEVCVC2373KMQTT8K90", "01JGFJJZEVCVC2373KMQTT8K91");
    c.execute(ROW, &[&a, &plan, &0i64, &"prompt_definition"]).unwrap();
    c.execute(ROW, &[&b, &plan, &1i64, &"strategy_choice"]).unwrap();
    c.execute(ROW, &[&other, &plan2, &0i64, &"prompt_definition"]).unwrap();
    let refused = |c: &mut postgres::Client, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)], why: &str| {
        let e = c.execute(sql, params).expect_err(sql);
        let text =
            e.as_db_error().map_or(e.to_string(), |d| format!("{} [{}]", d.message(), d.constraint().unwrap_or("")));
        assert!(text.contains(why), "{sql}: {text}");
    };
    refused(c, "UPDATE decisions SET rationale = 'rewritten'", &[], "append-only: decisions cannot be updated");
    refused(c, "DELETE FROM decisions", &[], "append-only: decisions cannot be deleted");
    refused(c, "TRUNCATE decisions CASCADE", &[], "append-only: decisions cannot be truncated");
    refused(
        c,
        ROW,
        &[&"01JGFJJZEVCVC2373KMQTT8K9D", &plan, &1i64, &"strategy_choice"],
        "decisions_plan_id_sequence_key",
    );
    refused(c, ROW, &[&"01JGFJJZEVCVC2373KMQTT8K9E", &plan, &2i64, &"no_such_type"], "decisions_decision_type_check");
    let link = "INSERT INTO supersessions (decision_id, superseded_by) VALUES ($1, $2)";
    refused(c, link, &[&a, &other], "cross-plan superseded_by");
    c.execute(link, &[&a, &b]).unwrap();
    refused(c, link, &[&a, &b], "supersessions_pkey");
    refused(c, "DELETE FROM supersessions", &[], "append-only: supersessions cannot be deleted");
    refused(c, "UPDATE supersessions SET superseded_by = decision_id", &[], "append-only");
}

// ---------------------------------------------------------------- the store on the server

use decision_store::testing::{direct_url, in_schema, write_decisions_file, PlanBuilder, TempStore};
use decision_store::{Decision, DecisionId, DecisionType, Error, PlanId};

mod common;

/// `plans` plans of `per_plan` decisions each, as an export file.
fn decisions_file(dir: &Path, name: &str, plans: usize, per_plan: u32) -> std::path::PathBuf {
    let path = dir.join(name);
    write_decisions_file(&path, plans, per_plan).unwrap();
    path
}

/// Bulk writes go to the server in batches (one COPY per run of rows,
/// issue 29), with the answers of a row at a time: a record already
/// stored is skipped, one that differs or takes a sequence names its line
/// and leaves the store as it was, and the chains are the file's.
fn batched_writes_keep_lines_chains_and_skips(url: &str) {
    use decision_store::store::ImportOptions;
    let dir = tempfile::tempdir().unwrap();
    // Enough rows for several runs and transactions, supersessions among them.
    let file = decisions_file(dir.path(), "d.jsonl", 3, 700);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut server = TempStore::on_server(url).unwrap();
    let mut sqlite = TempStore::new().unwrap();
    let import = |store: &mut Store| store.import_decisions(text.as_bytes(), ImportOptions::default(), |_| {}).unwrap();
    import(server.store().unwrap());
    import(sqlite.store().unwrap());
    let digest = server.store().unwrap().digest().unwrap();
    assert_eq!(digest, sqlite.store().unwrap().digest().unwrap(), "the chains are the file's");
    let store = server.store().unwrap();
    assert_eq!(store.check().unwrap(), vec![]);
    // Importing again skips every record.
    let again = store.import_decisions(text.as_bytes(), ImportOptions::default(), |_| {}).unwrap();
    assert_eq!((again.imported, again.skipped), (0, lines.len() as u64));
    // New records, and at line 151 one stored with other content: named, and nothing is written.
    let fresh = std::fs::read_to_string(decisions_file(dir.path(), "fresh.jsonl", 1, 300)).unwrap();
    let mut mixed: Vec<String> = fresh.lines().map(str::to_owned).collect();
    let mut changed: serde_json::Value = serde_json::from_str(lines[5]).unwrap();
    changed["chosen_option"] = "another option".into();
    mixed.insert(150, changed.to_string());
    let e = store.import_decisions(mixed.join("\n").as_bytes(), ImportOptions::atomic(), |_| {}).unwrap_err();
    assert!(matches!(e, Error::Line { line: 151, .. }) && e.to_string().contains("different content"), "{e}");
    assert_eq!(store.digest().unwrap(), digest, "nothing of the failed import was stored");
    // Two new records taking one (plan, sequence) in one run: the second's line is named.
    let mut twice: Vec<serde_json::Value> = fresh.lines().take(60).map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut copy = twice[40].clone();
    copy["decision_id"] = DecisionId::generate().to_string().into();
    copy["superseded_by"] = serde_json::Value::Null;
    twice.insert(50, copy);
    let twice: String = twice.iter().map(|v| v.to_string() + "\n").collect();
    let e = store.import_decisions(twice.as_bytes(), ImportOptions::atomic(), |_| {}).unwrap_err();
    assert!(
        matches!(*e_inner(&e), Error::DuplicateSequence { .. }) && matches!(e, Error::Line { line: 51, .. }),
        "{e}"
    );
    assert_eq!(store.digest().unwrap(), digest, "nothing of the failed import was stored");
    // insert_many names the item already stored, and writes nothing.
    let unlinked = |l: &str| {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["superseded_by"] = serde_json::Value::Null;
        Decision::from_json(&v.to_string()).unwrap()
    };
    let ds: Vec<Decision> = fresh.lines().map(unlinked).collect();
    store.insert_many(&ds[..100]).unwrap();
    let before = store.digest().unwrap();
    let e = store.insert_many(&ds[50..]).unwrap_err();
    assert!(matches!(e, Error::Batch { index: 0, .. }), "{e}");
    assert_eq!(store.digest().unwrap(), before);
    assert_eq!(store.insert_many(&ds[100..]).unwrap(), ds.len() - 100);
    assert!(store.check().unwrap().is_empty());
    // A batch whose first row is a supersession, then a decision, then a
    // supersession of that decision: the decisions reach the server first.
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build().unwrap();
    let a = Decision::builder(plan, DecisionType::ToolInvocation, 1).parent(root.decision_id()).build().unwrap();
    store.insert_many([&root, &a]).unwrap();
    let f = Decision::builder(plan, DecisionType::ToolInvocation, 2).parent(root.decision_id()).build().unwrap();
    let h = Decision::builder(plan, DecisionType::ToolInvocation, 3)
        .parent(root.decision_id())
        .superseded_by(f.decision_id())
        .build()
        .unwrap();
    let a_linked = a.to_builder().superseded_by(root.decision_id()).build().unwrap();
    let text = [&a_linked, &f, &h].iter().map(|d| d.to_json() + "\n").collect::<String>();
    let report = store.import_decisions(text.as_bytes(), ImportOptions::default(), |_| {}).unwrap();
    assert_eq!((report.imported, report.skipped, report.supersessions), (2, 1, 2));
    assert!(store.check().unwrap().is_empty());
}

/// The error inside an error of a line or an item.
fn e_inner(e: &Error) -> &Error {
    match e {
        Error::Line { error, .. } | Error::Batch { error, .. } => e_inner(error),
        e => e,
    }
}

/// Several hosts in one URL and `target_session_attrs` (libpq's syntax and
/// values), and a connection that the server ends is replaced: the next
/// read and the next write succeed on a fresh one.
fn several_hosts_and_a_lost_connection(url: &str) {
    let temp = TempStore::on_server(url).unwrap();
    let target = temp.url().unwrap().to_owned();
    // A host where nothing listens, before the real one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (scheme_user, rest) = target.split_once('@').unwrap();
    let two = format!("{scheme_user}@127.0.0.1:{dead},{rest}");
    let with = |attrs: &str| format!("{two}&target_session_attrs={attrs}");
    let mut store = Store::connect(&with("read-write")).unwrap();
    for attrs in ["any", "primary", "prefer-standby", "read-write"] {
        assert!(Store::connect_read_only(&with(attrs)).is_ok(), "{attrs}");
    }
    for (attrs, says) in [("standby", "not a standby"), ("read-only", "not read-only"), ("sometimes", "prefer-standby")]
    {
        let e = Store::connect(&with(attrs)).unwrap_err().to_string();
        assert!(e.contains(says) && !e.contains("password"), "{attrs}: {e}");
    }
    let e = Store::connect(&format!("{scheme_user}@127.0.0.1:{dead}/x")).unwrap_err();
    assert!(matches!(e, Error::Connect { .. }), "{e}");
    // The URL's options are settings of each transaction: one the server refuses is named.
    let e = Store::connect_read_only(&format!("{target}%20-cno_such_setting%3D1")).unwrap_err();
    assert!(matches!(e, Error::Connect { .. }) && e.to_string().contains("no_such_setting"), "{e}");
    let e = Store::connect(&format!("{target}%20-d%205")).unwrap_err();
    assert!(matches!(e, Error::Connect { .. }) && e.to_string().contains("`-d` is not a setting"), "{e}");
    // The server ends the session: reads and writes go on over a fresh connection.
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build().unwrap();
    store.insert(&root).unwrap();
    // The server itself: behind a pooler, the sessions ended are the pooler's.
    let mut admin = postgres::Client::connect(&direct_url(url), postgres::NoTls).unwrap();
    let terminate = |admin: &mut postgres::Client| {
        let n = admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() \
                 AND datname = current_database() AND query NOT ILIKE '%pg_stat_activity%' AND state IS NOT NULL",
                &[],
            )
            .unwrap();
        assert!(n > 0, "a session to end");
    };
    terminate(&mut admin);
    assert_eq!(store.get(root.decision_id()).unwrap().unwrap(), root);
    terminate(&mut admin);
    let child = Decision::builder(plan, DecisionType::ToolInvocation, 1).parent(root.decision_id()).build().unwrap();
    store.insert(&child).unwrap();
    terminate(&mut admin);
    assert_eq!(store.decision_tree(plan).unwrap().len(), 2);
    assert!(store.check().unwrap().is_empty());
    // A server without standbys says so.
    let replication = store.replication().unwrap().expect("a server");
    assert!(!replication.standby && replication.standbys.is_empty());
}

/// A TCP proxy in front of the server that, once armed, ends a client's
/// connection at its next COMMIT: before passing it on (nothing commits),
/// or after (the server commits; its answer never reaches the client).
struct CutAtCommit {
    port: u16,
    /// `Some(true)`: cut after passing the COMMIT on; `Some(false)`: before.
    arm: std::sync::Arc<std::sync::Mutex<Option<bool>>>,
}

impl CutAtCommit {
    fn start(server: std::net::SocketAddr) -> CutAtCommit {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let arm: Arc<Mutex<Option<bool>>> = Arc::default();
        let armed = arm.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let mut client = client.unwrap();
                let mut upstream = std::net::TcpStream::connect(server).unwrap();
                let muted = Arc::new(AtomicBool::new(false));
                let (mut down_from, mut down_to, mute) =
                    (upstream.try_clone().unwrap(), client.try_clone().unwrap(), muted.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = down_from.read(&mut buf) {
                        if mute.load(Ordering::SeqCst) || down_to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
                let armed = armed.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = client.read(&mut buf) {
                        // The simple query protocol's COMMIT: 'Q', its length (11), the text.
                        let commit = buf[..n].windows(12).any(|w| w == b"Q\0\0\0\x0bCOMMIT\0");
                        let cut = if commit { armed.lock().unwrap().take() } else { None };
                        if let Some(after) = cut {
                            muted.store(true, Ordering::SeqCst);
                            if after {
                                upstream.write_all(&buf[..n]).unwrap();
                                // The server commits; nothing of its answer goes back.
                                std::thread::sleep(std::time::Duration::from_millis(300));
                            }
                            let _ = client.shutdown(std::net::Shutdown::Both);
                            let _ = upstream.shutdown(std::net::Shutdown::Both);
                            break;
                        }
                        if upstream.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        CutAtCommit { port, arm }
    }
}

/// A write whose COMMIT's answer is lost: the ledger tells whether it was
/// stored. Stored: the call succeeds, the decision is there once. Not
/// stored: the call runs once more on a fresh connection and succeeds.
fn a_commit_whose_answer_is_lost_is_settled_by_the_ledger(url: &str) {
    let temp = TempStore::on_server(url).unwrap();
    let target = temp.url().unwrap().to_owned();
    let config: postgres::Config = url.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("a TCP server, not {other:?}"),
    };
    let server =
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), config.get_ports()[0])).unwrap().next().unwrap();
    let proxy = CutAtCommit::start(server);
    let (scheme_user, rest) = target.split_once('@').unwrap();
    let through = format!("{scheme_user}@127.0.0.1:{}/{}", proxy.port, rest.split_once('/').unwrap().1);
    let mut store = Store::connect(&through).unwrap();
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build().unwrap();
    store.insert(&root).unwrap();
    let mut parent = root.decision_id();
    for (sequence, after) in [(1, true), (2, false), (3, true), (4, false)] {
        *proxy.arm.lock().unwrap() = Some(after);
        let d = Decision::builder(plan, DecisionType::ToolInvocation, sequence).parent(parent).build().unwrap();
        store.insert(&d).unwrap_or_else(|e| panic!("cut {}: {e}", if after { "after" } else { "before" }));
        assert!(proxy.arm.lock().unwrap().is_none(), "the connection was cut");
        parent = d.decision_id();
    }
    // Each decision once, the chain whole: nothing was written twice or lost.
    let direct = Store::connect_read_only(&target).unwrap();
    assert_eq!(direct.decision_tree(plan).unwrap().len(), 5);
    assert!(direct.check().unwrap().is_empty());
}

fn racing_supersessions_leave_one_winner(url: &str) {
    let mut server = TempStore::on_server(url).unwrap();
    let target = server.url().unwrap().to_owned();
    for round in 0..10 {
        let built = PlanBuilder::new()
            .root("R")
            .child("A", "R", DecisionType::StrategyChoice)
            .child("B", "R", DecisionType::StrategyChoice)
            .child("C", "R", DecisionType::StrategyChoice)
            .build()
            .unwrap();
        server.store().unwrap().insert_many(built.decisions()).unwrap();
        let (a, b, c) = (built.id("A"), built.id("B"), built.id("C"));
        let barrier = std::sync::Barrier::new(2);
        let outcomes: Vec<Result<(), Error>> = std::thread::scope(|scope| {
            let racers: Vec<_> = [b, c]
                .into_iter()
                .map(|by| {
                    let (barrier, target) = (&barrier, &target);
                    scope.spawn(move || {
                        let mut store = Store::connect(target).unwrap();
                        barrier.wait();
                        store.supersede(a, by)
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let won: Vec<DecisionId> =
            [b, c].into_iter().zip(&outcomes).filter(|(_, o)| o.is_ok()).map(|(by, _)| by).collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        let lost = outcomes.iter().find(|o| o.is_err()).unwrap();
        assert!(matches!(lost, Err(Error::AlreadySuperseded { .. })), "round {round}: {lost:?}");
        let stored = server.store().unwrap().decision(a).unwrap();
        assert_eq!(stored.superseded_by(), Some(won[0]), "round {round}");
    }
    assert_eq!(server.store().unwrap().check().unwrap(), vec![]);
}

fn a_source_file_holding_nul_is_skipped_on_the_server(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.py"), "class Kept:\n    def run(self):\n        return 1\n").unwrap();
    std::fs::write(dir.path().join("odd.py"), "SEP = '\0'\n\nclass Odd:\n    pass\n").unwrap();
    let mut server = TempStore::on_server(url).unwrap();
    let report = server.store().unwrap().ingest(dir.path(), Default::default()).unwrap();
    assert_eq!(report.parsed_files, vec!["good.py".to_owned()]);
    assert!(report.skipped.iter().any(|s| s.path == "odd.py" && s.reason.contains("U+0000")), "{:?}", report.skipped);
    let known = server.store().unwrap().known_uris(&["class://good.Kept".into(), "class://odd.Odd".into()]).unwrap();
    assert!(known.contains("class://good.Kept") && !known.contains("class://odd.Odd"), "{known:?}");
    // A file store keeps it.
    let mut file = TempStore::new().unwrap();
    let report = file.store().unwrap().ingest(dir.path(), Default::default()).unwrap();
    assert_eq!(report.parsed_files.len(), 2, "{report:?}");
    assert!(report.skipped.is_empty());
}

fn agents_connecting_to_a_new_database_at_once_migrate_it_once(url: &str) {
    let mut admin = postgres::Client::connect(&direct_url(url), postgres::NoTls).unwrap();
    admin.batch_execute("DROP SCHEMA IF EXISTS fresh_race CASCADE; CREATE SCHEMA fresh_race").unwrap();
    let target = in_schema(url, "fresh_race");
    let opened: Vec<Result<i64, Error>> = std::thread::scope(|scope| {
        let racers: Vec<_> =
            (0..8).map(|_| scope.spawn(|| Store::connect(&target).and_then(|s| s.schema_version()))).collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for o in &opened {
        assert_eq!(o.as_ref().ok(), Some(&decision_store::store::supported_schema_version()), "{opened:?}");
    }
    let history: i64 = admin.query_one("SELECT count(*) FROM fresh_race.refinery_schema_history", &[]).unwrap().get(0);
    assert_eq!(history, decision_store::store::supported_schema_version());
    admin.batch_execute("DROP SCHEMA fresh_race CASCADE").unwrap();
}

fn hostile_input_and_refusals(url: &str) {
    let mut server = TempStore::on_server(url).unwrap();
    let store = server.store().unwrap();
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build().unwrap();
    let hostile = [
        "'; DROP TABLE decisions; --",
        "$1 $2 ?1 \\x00 \\\\",
        "\u{1}\u{7f}\u{2028}\u{feff}",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦀 é\u{301}",
        "COLLATE \"C\" E'\\n'",
    ];
    let mut ds = vec![root.clone()];
    for (i, h) in hostile.iter().enumerate() {
        ds.push(
            Decision::builder(plan, DecisionType::ToolInvocation, i as u32 + 1)
                .parent(root.decision_id())
                .chosen_option(*h)
                .rationale(h.repeat(1000))
                .build()
                .unwrap(),
        );
    }
    store.insert_many(&ds).unwrap();
    assert_eq!(store.plan_decisions(plan).unwrap(), ds);
    // NUL: PostgreSQL text cannot hold it; refused by field name, nothing written.
    let nul = Decision::builder(plan, DecisionType::ToolInvocation, 99)
        .parent(root.decision_id())
        .rationale("before\u{0}after")
        .build()
        .unwrap();
    match store.insert(&nul) {
        Err(Error::Validation { field, reason }) => assert!(field == "rationale" && reason.contains("NUL"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.plan_decisions(plan).unwrap().len(), ds.len());
    assert_eq!(store.check().unwrap(), vec![]);

    // A newer schema: refused.
    let newer = TempStore::on_server(url).unwrap();
    let mut c = postgres::Client::connect(&direct_url(newer.url().unwrap()), postgres::NoTls).unwrap();
    c.batch_execute("INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (99, 'future', '2030-01-01', '1')").unwrap();
    assert!(matches!(Store::connect(newer.url().unwrap()), Err(Error::IncompatibleVersion { found: 99, .. })));
}

/// Graph imports go to the server in batches (a run's new nodes, views and
/// edges in one COPY each, node keys drawn from the sequence in one query):
/// the server's graph is the file's after the same imports, including
/// nodes and edges given twice or stored already (the last one stays), and
/// an edge naming an unknown node is named by its line, nothing written.
fn graph_imports_in_batches_match_the_file(url: &str) {
    use decision_store::store::ImportOptions;
    use decision_store::uko::{UkoEdge, UkoNode};
    let line = |v: &dyn erased::Json| v.json() + "\n";
    let node = |i: usize, label: &str| {
        UkoNode::new(format!("class://pkg{}.C{i}", i % 7), "uko-code:", "class", format!("{label} {i} ✓ '\""))
            .with_version(format!("v{}", i % 3))
            .with_view(0, format!("C{i}"))
            .with_view(1, format!("class C{i}:\n    {label}"))
    };
    let edge = |a: usize, b: usize, w: Option<f64>| {
        let mut e = UkoEdge::new(node(a, "").uri, node(b, "").uri, ["contains", "imports", "calls"][(a + b) % 3]);
        e.weight = w;
        e
    };
    // First: 700 nodes, 1,200 edges (the first 500 twice, 700 lines apart); node 5 and edge
    // (600, 1) given twice in one run, the last different.
    let mut nodes: Vec<String> = (0..700).map(|i| line(&node(i, "first"))).collect();
    nodes.insert(10, line(&node(5, "again")));
    let mut edges: Vec<String> = (0..1200).map(|i| line(&edge(i % 700, (i * 7 + 1) % 700, None))).collect();
    edges.insert(605, line(&edge(600, 1, Some(0.25))));
    let (nodes, edges) = (nodes.concat(), edges.concat());
    // Then: nodes stored already with new labels beside new ones, an edge's weight changed, new edges.
    let later_nodes: String = (600..800).map(|i| line(&node(i, "later"))).collect();
    let later_edges: String = (0..300).map(|i| line(&edge(600 + i % 200, (i * 3) % 800, Some(0.5)))).collect();
    let mut server = TempStore::on_server(url).unwrap();
    let mut file = TempStore::new().unwrap();
    for store in [server.store().unwrap(), file.store().unwrap()] {
        for (n, e) in [(&nodes, &edges), (&later_nodes, &later_edges)] {
            let (rn, re) = store.import_graph(n.as_bytes(), e.as_bytes(), ImportOptions::default(), |_| {}).unwrap();
            assert_eq!((rn.imported, re.imported), (n.lines().count() as u64, e.lines().count() as u64));
        }
    }
    let export = |store: &Store| {
        let (mut n, mut e) = (Vec::new(), Vec::new());
        store.export_graph(&mut n, &mut e).unwrap();
        (String::from_utf8(n).unwrap(), String::from_utf8(e).unwrap())
    };
    let on_server = export(server.store().unwrap());
    assert!(on_server == export(file.store().unwrap()), "the server's graph differs from the file's");
    assert_eq!(on_server.0.lines().count(), 800);
    assert!(on_server.0.contains("again 5") && !on_server.0.contains("first 5 ") && on_server.0.contains("later 650"));
    assert!(on_server.1.contains(r#""weight":0.25"#), "the edge given twice has the last weight");
    // An edge to a node that is nowhere: its line is named, and nothing of the import is written.
    let mut bad: Vec<String> = (0..40).map(|i| line(&edge(i, i + 1, Some(0.75)))).collect();
    let mut unknown = edge(1, 2, None);
    unknown.target = "class://nowhere.X".into();
    bad.insert(30, line(&unknown));
    let fresh: String = (900..950).map(|i| line(&node(i, "fresh"))).collect();
    let store = server.store().unwrap();
    let e = store.import_graph(fresh.as_bytes(), bad.concat().as_bytes(), ImportOptions::atomic(), |_| {}).unwrap_err();
    assert!(e.to_string().contains("line 31") && e.to_string().contains("class://nowhere.X"), "{e}");
    assert!(export(store) == on_server, "nothing of the failed import was written");
    assert_eq!(store.check().unwrap(), vec![]);
}

/// JSON lines of the graph's records, for the test above.
mod erased {
    pub trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap()
        }
    }
}

/// Through a pooler that gives every transaction a server session of a
/// pool (PgBouncer in transaction mode), the store works and leaves
/// nothing in the session for the next client: no prepared statement,
/// setting, cursor or lock. The pool here holds one session, so the check
/// afterwards reads the very session the store's transactions ran on.
fn the_store_leaves_nothing_in_a_pooled_session(one_session: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = decisions_file(dir.path(), "d.jsonl", 2, 300);
    let schema = format!("dstore_pooled_{}", std::process::id());
    let direct = std::env::var("DSTORE_TEST_POSTGRES_DIRECT_URL").expect("set beside the one-session URL");
    let mut admin = postgres::Client::connect(&direct, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")).unwrap();
    let target = in_schema(one_session, &schema);
    // A new store (the migration), a batched import, reads, a write, a read-only connection.
    let mut store = Store::connect(&target).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let report = store.import_decisions(text.as_bytes(), Default::default(), |_| {}).unwrap();
    assert_eq!(report.imported, 600);
    let plans = store.plans().unwrap();
    assert_eq!(plans.len(), 2);
    let tree = store.decision_tree(plans[0].plan_id).unwrap();
    let parent = tree.decisions().last().unwrap();
    let next = Decision::builder(plans[0].plan_id, DecisionType::ToolInvocation, 300)
        .parent(parent.decision_id())
        .build()
        .unwrap();
    store.insert(&next).unwrap();
    assert!(store.check().unwrap().is_empty());
    let reader = Store::connect_read_only(&target).unwrap();
    assert_eq!(reader.get(next.decision_id()).unwrap().as_ref(), Some(&next));
    let direct_store = Store::connect_read_only(&in_schema(&direct, &schema)).unwrap();
    assert_eq!(reader.digest().unwrap(), direct_store.digest().unwrap());
    drop(direct_store);
    drop((store, reader));
    // The one session, as the next client finds it (the simple protocol: nothing prepared by asking).
    let mut next_client = postgres::Client::connect(one_session, postgres::NoTls).unwrap();
    let rows = next_client
        .simple_query(
            "SELECT (SELECT count(*) FROM pg_prepared_statements)::text, (SELECT count(*) FROM pg_cursors)::text, \
             (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::text, \
             current_setting('search_path'), current_setting('client_min_messages'), \
             current_setting('idle_in_transaction_session_timeout'), current_setting('default_transaction_read_only')",
        )
        .unwrap();
    let row = rows
        .iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => {
                Some((0..7).map(|i| r.get(i).unwrap().to_owned()).collect::<Vec<_>>())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(row, ["0", "0", "0", "\"$user\", public", "notice", "0", "off"], "what the store left in the session");
    admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).unwrap();
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
    run("the_dialects_have_the_same_migrations", &the_dialects_have_the_same_migrations);
    match std::env::var("DSTORE_TEST_POSTGRES_URL") {
        Ok(url) => {
            run("the_schemas_have_the_same_tables_and_columns", &|| the_schemas_have_the_same_tables_and_columns(&url));
            run("the_server_refuses_what_the_file_refuses", &|| the_server_refuses_what_the_file_refuses(&url));
            run("batched_writes_keep_lines_chains_and_skips", &|| batched_writes_keep_lines_chains_and_skips(&url));
            run("graph_imports_in_batches_match_the_file", &|| graph_imports_in_batches_match_the_file(&url));
            run("several_hosts_and_a_lost_connection", &|| several_hosts_and_a_lost_connection(&url));
            run("a_commit_whose_answer_is_lost_is_settled_by_the_ledger", &|| {
                a_commit_whose_answer_is_lost_is_settled_by_the_ledger(&url)
            });
            run("racing_supersessions_leave_one_winner", &|| racing_supersessions_leave_one_winner(&url));
            run("hostile_input_and_refusals", &|| hostile_input_and_refusals(&url));
            run("a_group_commit_stores_each_decision_or_says_why_not", &|| {
                let mut temp = TempStore::on_server(&url).unwrap();
                common::a_group_commit_stores_each_decision_or_says_why_not(temp.store().unwrap());
            });
            run("a_redaction_removes_content_and_keeps_the_log_verifiable", &|| {
                // On the server, copied to a file; on a file, copied to the server.
                let (mut server, mut file) = (TempStore::on_server(&url).unwrap(), TempStore::new().unwrap());
                common::a_redaction_removes_content_and_keeps_the_log_verifiable(
                    server.store().unwrap(),
                    file.store().unwrap(),
                );
                let (mut server, mut file) = (TempStore::on_server(&url).unwrap(), TempStore::new().unwrap());
                common::a_redaction_removes_content_and_keeps_the_log_verifiable(
                    file.store().unwrap(),
                    server.store().unwrap(),
                );
            });
            run("the_kept_state_equals_a_recomputation", &|| {
                for seed in 1..=4 {
                    let mut server = TempStore::on_server(&url).unwrap();
                    common::the_kept_state_equals_a_recomputation(server.store().unwrap(), seed, 60);
                }
            });
            run("a_source_file_holding_nul_is_skipped_on_the_server", &|| {
                a_source_file_holding_nul_is_skipped_on_the_server(&url)
            });
            run("agents_connecting_to_a_new_database_at_once_migrate_it_once", &|| {
                agents_connecting_to_a_new_database_at_once_migrate_it_once(&url)
            });
        }
        Err(_) => println!(
            "postgres: SKIPPED 13 server tests: DSTORE_TEST_POSTGRES_URL is not set \
             (scripts/pg-test-server cargo test --test postgres starts a throwaway server)"
        ),
    }
    match std::env::var("DSTORE_TEST_PGBOUNCER_ONE_SESSION_URL") {
        Ok(one) => {
            run("the_store_leaves_nothing_in_a_pooled_session", &|| the_store_leaves_nothing_in_a_pooled_session(&one))
        }
        Err(_) => println!(
            "postgres: SKIPPED the_store_leaves_nothing_in_a_pooled_session: not behind PgBouncer \
             (scripts/pg-test-server --pgbouncer cargo test --test postgres puts one in front)"
        ),
    }
    if failed > 0 {
        println!("postgres: {failed} test(s) failed");
        std::process::exit(1);
    }
}
