//! Any bytes as nodes and edges JSONL (split at the first NUL): no panic.
#![no_main]

use decision_store::store::ImportOptions;
use decision_store::Store;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (nodes, edges) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let mut store = Store::open_in_memory().unwrap();
    let _ = store.import_graph(nodes, edges, ImportOptions::default(), |_| {});
});
