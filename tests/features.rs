//! Cucumber runner for `features/*.feature` (run by `cargo test`).
//!
//! Every scenario gets a fresh [`World`] with its own temp-file store; the
//! run fails on any failed, skipped or undefined step. Step definitions live
//! in `steps/`, one module per subject; the seed files are kept byte-for-byte
//! and their Python wording is mapped in the step modules (see their docs).

mod steps;

use cucumber::World as _;

fn main() {
    let features = concat!(env!("CARGO_MANIFEST_DIR"), "/features");
    futures::executor::block_on(
        steps::World::cucumber().max_concurrent_scenarios(4).fail_on_skipped().run_and_exit(features),
    );
}
