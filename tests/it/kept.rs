//! The kept staleness and calibration against a recomputation, on a file
//! (the server's run is in tests/postgres.rs).

use decision_store::testing::TempStore;

#[test]
fn the_kept_state_equals_a_recomputation_after_random_histories() {
    // DSTORE_KEPT_SEEDS=N runs more histories (the default keeps the suite quick).
    let seeds: u64 = std::env::var("DSTORE_KEPT_SEEDS").ok().and_then(|n| n.parse().ok()).unwrap_or(12);
    let steps: usize = std::env::var("DSTORE_KEPT_STEPS").ok().and_then(|n| n.parse().ok()).unwrap_or(120);
    let first: u64 = std::env::var("DSTORE_KEPT_FIRST").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    for seed in first..first + seeds {
        let mut store = TempStore::new().unwrap();
        crate::common::the_kept_state_equals_a_recomputation(store.store().unwrap(), seed, steps);
    }
}
