//! The PostgreSQL schema (`migrations/postgres`) against the SQLite one:
//! the groundwork of the PostgreSQL backend (issue 12), so the two dialects
//! cannot drift while the backend is built on them.
//!
//! Runs against the server named by `DSTORE_TEST_POSTGRES_URL`, each test in
//! a database of its own; `scripts/pg-test-server cargo test` starts a
//! throwaway server for it. Without the variable it says on stdout that it
//! skipped the server tests. The file checks run either way.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use decision_store::Store;

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

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
        let admin = postgres::Config::from_str(url).unwrap();
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

    fn migrated(url: &str, test: &str) -> TestDatabase {
        let mut db = TestDatabase::new(url, test);
        embedded::migrations::runner().run(&mut db.client).unwrap();
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
    let embedded: Vec<(u32, String)> = embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| (m.version() as u32, m.name().to_owned()))
        .collect();
    assert_eq!(embedded, postgres);
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
        }
        Err(_) => println!(
            "postgres: SKIPPED 2 server tests: DSTORE_TEST_POSTGRES_URL is not set \
             (scripts/pg-test-server cargo test --test postgres starts a throwaway server)"
        ),
    }
    if failed > 0 {
        println!("postgres: {failed} test(s) failed");
        std::process::exit(1);
    }
}
