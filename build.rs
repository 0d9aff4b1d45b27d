// Rebuild when a migration is added or changed: refinery embeds them at compile time.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
