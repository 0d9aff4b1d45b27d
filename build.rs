//! Lists the migrations with refinery's checksums, so that opening a store
//! checks its recorded history without building refinery's runner (which
//! compiles a regular expression: a millisecond of every command's start).
//! A unit test (`store::tests::migration_list_matches_refinery`) keeps this
//! list equal to refinery's own.

use std::hash::{Hash, Hasher};
use std::path::Path;

fn main() {
    // Rebuild when a migration is added or changed: refinery embeds them at compile time.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations/sqlite");
    println!("cargo:rerun-if-changed=migrations/postgres");
    let mut migrations = Vec::new();
    for entry in std::fs::read_dir("migrations/sqlite").expect("migrations/sqlite is readable") {
        let path = entry.expect("migrations/sqlite is readable").path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else { continue };
        let Some((version, name)) = file.strip_suffix(".sql").and_then(|f| f.strip_prefix('V')?.split_once("__"))
        else {
            continue;
        };
        let version: i32 = version.parse().unwrap_or_else(|_| panic!("{file}: the version is not a number"));
        let sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        // refinery-core's Migration::unapplied: SipHash-1-3 of name, version and text, kept stable on purpose.
        let mut hasher = siphasher::sip::SipHasher13::new();
        name.hash(&mut hasher);
        version.hash(&mut hasher);
        sql.hash(&mut hasher);
        migrations.push((version, name.to_owned(), hasher.finish()));
    }
    migrations.sort();
    let rows: String = migrations.iter().map(|(v, n, c)| format!("    ({v}, {n:?}, \"{c}\"),\n")).collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("migrations.rs");
    std::fs::write(out, format!("/// (version, name, checksum) of every migration, by version.\npub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[\n{rows}];\n"))
        .expect("OUT_DIR is writable");
}
