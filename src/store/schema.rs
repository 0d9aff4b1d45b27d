//! The schema: the migrations of both dialects, embedded at build time
//! (`build.rs`), the versions they give, and applying the pending ones.
//!
//! Migrations are append-only: a store's recorded history
//! (`refinery_schema_history`, named after the library that applied them
//! before schema version 9) must match the embedded list, version by
//! version, checksum by checksum, before anything is written (see
//! `Store::verify_history`).

use std::time::{SystemTime, UNIX_EPOCH};

use super::engine::{vals, Conn, Dialect};
use crate::error::Result;

/// One migration file: `migrations/<dialect>/V<version>__<name>.sql`.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    /// SipHash-1-3 of the name, version and text, as refinery recorded it.
    pub(crate) checksum: &'static str,
    pub(crate) sql: &'static str,
}

// `MIGRATIONS` and `PG_MIGRATIONS`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The newest version in the history table.
pub(super) const HISTORY_VERSION: &str = "SELECT coalesce(max(version), 0) FROM refinery_schema_history";
/// The history table, as refinery created it.
const HISTORY_TABLE: &str = "CREATE TABLE IF NOT EXISTS refinery_schema_history (
     version int4 PRIMARY KEY, name VARCHAR(255), applied_on VARCHAR(255), checksum VARCHAR(255))";
const RECORD: &str =
    "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (?1, ?2, ?3, ?4)";

/// The newest schema version this library knows.
pub fn supported_schema_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The migrations of a dialect.
pub(super) fn migrations(dialect: Dialect) -> &'static [Migration] {
    dialect.pick(MIGRATIONS, PG_MIGRATIONS)
}

/// Applies the migrations that `conn`'s store has not recorded yet, each
/// with its history row. On SQLite each one is a write transaction of its
/// own, which looks at the history again once it holds the lock, so that
/// two processes opening a new file at once apply each migration once; on
/// PostgreSQL (whose DDL is transactional) all of them are one
/// transaction, under the caller's migration lock, so that a crash
/// mid-migration leaves the schema as it was.
pub(super) fn migrate(conn: &Conn) -> Result<()> {
    let list = migrations(conn.dialect());
    match conn.dialect() {
        Dialect::Sqlite => {
            for m in list {
                let tx = conn.begin_write()?;
                tx.batch(HISTORY_TABLE)?;
                if tx.query_one(HISTORY_VERSION, &[], |r| r.i64(0))? < m.version {
                    apply(&tx, m)?;
                }
                tx.commit()?;
            }
        }
        Dialect::Postgres => {
            let tx = conn.begin_write()?;
            migrate_in(&tx)?;
            tx.commit()?;
        }
    }
    Ok(())
}

/// Applies PostgreSQL's pending migrations inside the caller's write
/// transaction: all of them or, with the transaction, none.
pub(super) fn migrate_in(tx: &Conn) -> Result<()> {
    tx.batch(HISTORY_TABLE)?;
    let current = tx.query_one(HISTORY_VERSION, &[], |r| r.i64(0))?;
    for m in migrations(Dialect::Postgres).iter().filter(|m| m.version > current) {
        apply(tx, m)?;
    }
    Ok(())
}

fn apply(conn: &Conn, m: &Migration) -> Result<()> {
    conn.batch(m.sql)
        .map_err(|e| crate::error::Error::storage(format!("migration V{}__{}: {e}", m.version, m.name)))?;
    conn.execute(RECORD, vals![m.version, m.name, &rfc3339(SystemTime::now()), m.checksum])?;
    Ok(())
}

/// `t` in RFC 3339 (UTC, to the nanosecond), as refinery wrote the history's `applied_on`.
fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    crate::time::utc(since.as_secs(), since.subsec_nanos(), 9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn applied_on_is_rfc3339_to_the_nanosecond() {
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::new(1, 875_296_042)), "1970-01-01T00:00:01.875296042Z");
    }

    #[test]
    fn both_dialects_have_every_version_in_order() {
        for list in [MIGRATIONS, PG_MIGRATIONS] {
            let versions: Vec<i64> = list.iter().map(|m| m.version).collect();
            assert_eq!(versions, (1..=supported_schema_version()).collect::<Vec<_>>());
        }
        let names = |l: &[Migration]| l.iter().map(|m| m.name).collect::<Vec<_>>();
        assert_eq!(names(MIGRATIONS), names(PG_MIGRATIONS));
        assert_eq!(supported_schema_version(), 12);
    }

    /// The checksums are refinery's: a store it migrated records the same ones.
    #[test]
    fn checksums_are_the_ones_refinery_recorded() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v8-demo.db");
        let conn = rusqlite::Connection::open_with_flags(fixture, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let mut stmt =
            conn.prepare("SELECT version, name, checksum FROM refinery_schema_history ORDER BY version").unwrap();
        let recorded: Vec<(i64, String, String)> =
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
        assert_eq!(recorded.len(), 8);
        for (version, name, checksum) in recorded {
            let m = &MIGRATIONS[(version - 1) as usize];
            assert_eq!((m.version, m.name, m.checksum), (version, name.as_str(), checksum.as_str()));
        }
    }

    #[test]
    fn a_new_store_records_every_migration_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        // Two processes' worth of opens at once: each migration is applied once.
        std::thread::scope(|scope| {
            let openers: Vec<_> = (0..4).map(|_| scope.spawn(|| crate::store::Store::open(&path).map(drop))).collect();
            for o in openers {
                o.join().unwrap().unwrap();
            }
        });
        let conn = rusqlite::Connection::open(&path).unwrap();
        let versions: Vec<i64> = conn
            .prepare("SELECT version FROM refinery_schema_history ORDER BY version")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(versions, (1..=supported_schema_version()).collect::<Vec<_>>());
    }
}
