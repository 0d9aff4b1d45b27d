//! Redaction on a file (the server's run is in tests/postgres.rs).

use decision_store::testing::TempStore;

#[test]
fn a_redaction_removes_content_and_keeps_the_log_verifiable() {
    let (mut store, mut copy) = (TempStore::new().unwrap(), TempStore::new().unwrap());
    crate::common::a_redaction_removes_content_and_keeps_the_log_verifiable(
        store.store().unwrap(),
        copy.store().unwrap(),
    );
    // What a reopened file holds.
    let copy = copy.reopen().unwrap();
    assert_eq!(copy.check().unwrap(), vec![]);
}
