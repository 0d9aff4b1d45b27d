//! Any bytes as a decisions JSONL file: no panic, and a failed import leaves the store as it was.
#![no_main]

use decision_store::store::ImportOptions;
use decision_store::Store;
use libfuzzer_sys::fuzz_target;

fn dump(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    store.for_each_decision(None, |d| {
        out.push(d.to_json());
        Ok(())
    })
    .unwrap();
    out
}

fuzz_target!(|data: &[u8]| {
    let mut store = Store::open_in_memory().unwrap();
    let seed = r#"{"decision_id":"01JD0000000000000000000001","plan_id":"01JD0000000000000000000000","sequence":0,"decision_type":"prompt_definition"}"#;
    store.import_decisions(seed.as_bytes(), ImportOptions::default(), |_| {}).unwrap();
    let before = dump(&store);
    if store.import_decisions(data, ImportOptions::default(), |_| {}).is_err() {
        assert_eq!(dump(&store), before);
    }
});
