//! Any bytes into the decision decoder: no panic; whatever decodes re-encodes and decodes equal.
#![no_main]

use decision_store::Decision;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(d) = Decision::from_json(text) {
            assert_eq!(Decision::from_json(&d.to_json()).unwrap(), d);
        }
    }
});
