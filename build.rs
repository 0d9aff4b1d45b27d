//! Lists the migrations of both dialects with refinery's checksums
//! (`MIGRATIONS` for SQLite, `PG_MIGRATIONS` for PostgreSQL), so that opening
//! a store checks its recorded history without building refinery's runner
//! (which compiles a regular expression: a millisecond of every command's
//! start). A unit test (`store::tests::migration_list_matches_refinery`)
//! keeps `MIGRATIONS` equal to refinery's own list.

use std::hash::{Hash, Hasher};
use std::path::Path;

/// (version, name, refinery checksum) of every migration in `dir`, by version.
fn migrations(dir: &str) -> Vec<(i32, String, u64)> {
    let mut migrations = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir} is not readable: {e}")) {
        let path = entry.unwrap_or_else(|e| panic!("{dir} is not readable: {e}")).path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else { continue };
        let Some((version, name)) = file.strip_suffix(".sql").and_then(|f| f.strip_prefix('V')?.split_once("__"))
        else {
            continue;
        };
        let version: i32 = version.parse().unwrap_or_else(|_| panic!("{dir}/{file}: the version is not a number"));
        let sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{dir}/{file}: {e}"));
        // refinery-core's Migration::unapplied: SipHash-1-3 of name, version and text, kept stable on purpose.
        let mut hasher = siphasher::sip::SipHasher13::new();
        name.hash(&mut hasher);
        version.hash(&mut hasher);
        sql.hash(&mut hasher);
        migrations.push((version, name.to_owned(), hasher.finish()));
    }
    migrations.sort();
    migrations
}

/// The Rust constant `name` listing the migrations of `dir`.
fn constant(doc: &str, name: &str, dir: &str) -> String {
    let rows: String = migrations(dir).iter().map(|(v, n, c)| format!("    ({v}, {n:?}, \"{c}\"),\n")).collect();
    format!("/// {doc}\npub(crate) const {name}: &[(i64, &str, &str)] = &[\n{rows}];\n")
}

fn main() {
    // Rebuild when a migration is added or changed: refinery embeds them at compile time.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations/sqlite");
    println!("cargo:rerun-if-changed=migrations/postgres");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("migrations.rs");
    let code = constant("(version, name, checksum) of every migration, by version.", "MIGRATIONS", "migrations/sqlite")
        + &constant(
            "(version, name, checksum) of every PostgreSQL migration, by version.",
            "PG_MIGRATIONS",
            "migrations/postgres",
        );
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
