//! Embeds the migrations of both dialects (`MIGRATIONS` for SQLite,
//! `PG_MIGRATIONS` for PostgreSQL): each file's version, name, text and
//! checksum, in version order, for `store::schema` to apply and to check a
//! store's recorded history against.
//!
//! The checksum is the one refinery, which applied migrations until schema
//! version 9, recorded in `refinery_schema_history`: SipHash-1-3 of the
//! name, the version and the text, written as a decimal `u64`. Stores
//! migrated by it keep verifying; the test
//! `store::schema::tests::checksums_are_the_ones_refinery_recorded` compares
//! with the history of an old fixture.

use std::hash::{Hash, Hasher};
use std::path::Path;

/// (version, name, checksum, path) of every migration in `dir`, by version.
fn migrations(dir: &Path) -> Vec<(i32, String, u64, String)> {
    let mut migrations = Vec::new();
    let shown = dir.display();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{shown} is not readable: {e}")) {
        let path = entry.unwrap_or_else(|e| panic!("{shown} is not readable: {e}")).path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else { continue };
        let Some((version, name)) = file.strip_suffix(".sql").and_then(|f| f.strip_prefix('V')?.split_once("__"))
        else {
            continue;
        };
        let version: i32 = version.parse().unwrap_or_else(|_| panic!("{shown}/{file}: the version is not a number"));
        let sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{shown}/{file}: {e}"));
        // refinery-core's Migration::unapplied: SipHash-1-3 of name, version and text, kept stable on purpose.
        let mut hasher = siphasher::sip::SipHasher13::new();
        name.hash(&mut hasher);
        version.hash(&mut hasher);
        sql.hash(&mut hasher);
        migrations.push((version, name.to_owned(), hasher.finish(), path.display().to_string()));
    }
    migrations.sort();
    for pair in migrations.windows(2) {
        assert!(pair[0].0 != pair[1].0, "{shown}: two migrations of version {}", pair[0].0);
    }
    migrations
}

/// The Rust constant `name` listing the migrations of `dir`.
fn constant(doc: &str, name: &str, dir: &Path) -> String {
    let rows: String = migrations(dir)
        .iter()
        .map(|(v, n, c, path)| {
            format!("    Migration {{ version: {v}, name: {n:?}, checksum: \"{c}\", sql: include_str!({path:?}) }},\n")
        })
        .collect();
    format!("/// {doc}\npub(crate) const {name}: &[Migration] = &[\n{rows}];\n")
}

fn main() {
    // Rebuild when a migration is added or changed.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations/sqlite");
    println!("cargo:rerun-if-changed=migrations/postgres");
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).to_owned();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("migrations.rs");
    let code = constant("Every SQLite migration, by version.", "MIGRATIONS", &root.join("migrations/sqlite"))
        + &constant("Every PostgreSQL migration, by version.", "PG_MIGRATIONS", &root.join("migrations/postgres"));
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
