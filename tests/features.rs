//! Cucumber runner for `features/*.feature` (run by `cargo test`).
//!
//! Every scenario gets a fresh [`World`] with its own temp-file store; the
//! run fails on any failed, skipped or undefined step. Step definitions live
//! in `steps/`, one module per subject; the seed files are kept byte-for-byte
//! and their Python wording is mapped in the step modules (see their docs).

mod steps;

use cucumber::World as _;
use decision_store::testing::{BACKEND_VAR, POSTGRES_URL_VAR};

fn main() {
    let features = concat!(env!("CARGO_MANIFEST_DIR"), "/features");
    let backend = std::env::var(BACKEND_VAR).unwrap_or_else(|_| "sqlite".into());
    println!("features: the scenarios on {backend}");
    // Panics (failing the test) when a step fails or is skipped.
    futures::executor::block_on(
        steps::World::cucumber().max_concurrent_scenarios(4).fail_on_skipped().run_and_exit(features),
    );
    if backend != "sqlite" {
        return;
    }
    // The same scenarios once more, each store in a schema of its own on the server.
    if std::env::var_os(POSTGRES_URL_VAR).is_none() {
        println!(
            "features: {POSTGRES_URL_VAR} is not set, so the scenarios did not run on PostgreSQL \
             (`scripts/pg-test-server cargo test` runs them there too)"
        );
        return;
    }
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let status = std::process::Command::new(exe).env(BACKEND_VAR, "postgres").status().expect("the runner starts");
    if !status.success() {
        eprintln!("features: the scenarios failed on PostgreSQL");
        std::process::exit(1);
    }
}
