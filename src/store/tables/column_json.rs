//! The JSON columns of a decision row, written as serde_json writes them.
//!
//! An import serialises five JSON columns per decision. serde_json looks up
//! every byte of every string (keys included) in its escape table, which
//! was most of that work; here keys are constants and a string is checked
//! sixteen bytes at a time, and copied whole when nothing in it needs an
//! escape (any that does goes through serde_json). The output must be the
//! bytes serde_json writes for the same value, or content hashes would
//! change: the tests compare the two, and debug builds check every row.

use crate::decision::{Alternative, ArtifactRef, ContextSnapshot, DecisionId, PlanId, ResourceRef};

/// A value that writes its own canonical (serde_json, compact) JSON.
pub(super) trait ColumnJson {
    fn write_json(&self, out: &mut Vec<u8>);
}

/// True when serde_json writes `s` as it is, between quotes: no quote,
/// backslash or control character. Sixteen bytes at a time, without a
/// branch per byte, so the compiler can compare them as one vector.
fn needs_no_escape(s: &[u8]) -> bool {
    let plain = |b: u8| b >= 0x20 && b != b'"' && b != b'\\';
    let mut chunks = s.chunks_exact(16);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |all, &b| all & plain(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| plain(b))
}

fn string(out: &mut Vec<u8>, s: &str) {
    if needs_no_escape(s.as_bytes()) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(out, s).expect("a string always serializes");
    }
}

fn opt_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// `[a,b,...]`, each item written by `item`.
fn array<T>(out: &mut Vec<u8>, items: &[T], mut item: impl FnMut(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(out, x);
    }
    out.push(b']');
}

/// `{"key":value,...}` of text fields, keys in the order given (the
/// fields' declaration order, as serde derives it); `None` is `null`.
fn object(out: &mut Vec<u8>, fields: &[(&str, Option<&str>)]) {
    for (i, (key, value)) in fields.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"{\"" } else { b",\"" });
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        opt_string(out, *value);
    }
    out.push(b'}');
}

impl ColumnJson for [Alternative] {
    fn write_json(&self, out: &mut Vec<u8>) {
        array(out, self, |out, a| object(out, &[("option", Some(a.option())), ("rationale", a.rationale())]));
    }
}

impl ColumnJson for ResourceRef {
    fn write_json(&self, out: &mut Vec<u8>) {
        object(
            out,
            &[
                ("resource_id", Some(self.resource_id())),
                ("resource_type", self.resource_type()),
                ("version", self.version()),
            ],
        );
    }
}

impl ColumnJson for ContextSnapshot {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"hash\":");
        string(out, self.hash());
        out.extend_from_slice(b",\"resources\":");
        array(out, self.resources(), |out, r| r.write_json(out));
        out.extend_from_slice(b",\"actor_state_ref\":");
        opt_string(out, self.actor_state_ref());
        out.push(b'}');
    }
}

impl ColumnJson for [ArtifactRef] {
    fn write_json(&self, out: &mut Vec<u8>) {
        array(out, self, |out, a| {
            object(out, &[("artifact_path", Some(a.artifact_path())), ("content_hash", a.content_hash())]);
        });
    }
}

impl ColumnJson for [DecisionId] {
    fn write_json(&self, out: &mut Vec<u8>) {
        array(out, self, |out, id| string(out, id.encode(&mut [0; 26])));
    }
}

impl ColumnJson for [PlanId] {
    fn write_json(&self, out: &mut Vec<u8>) {
        array(out, self, |out, id| string(out, id.encode(&mut [0; 26])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same<T: ColumnJson + serde::Serialize + ?Sized>(v: &T) {
        let mut ours = Vec::new();
        v.write_json(&mut ours);
        assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(v).unwrap());
    }

    /// Texts that need every kind of escape, at every place in a 16-byte chunk.
    fn texts() -> Vec<String> {
        let mut texts: Vec<String> = [
            "",
            "plain",
            "a \"quote\"",
            "back\\slash",
            "new\nline",
            "tab\t",
            "\u{1}\u{1f}\u{7f}",
            "é ü 漢字 🦀",
            "</script>",
        ]
        .map(String::from)
        .to_vec();
        for at in [0, 1, 15, 16, 17, 31, 32, 40] {
            for bad in ['"', '\\', '\n', '\u{0}', '\u{1f}'] {
                let mut s = "x".repeat(41);
                s.replace_range(at..=at, &bad.to_string());
                texts.push(s);
            }
        }
        texts
    }

    #[test]
    fn columns_are_the_bytes_serde_json_writes() {
        let texts = texts();
        let opt = |i: usize| (i % 3 != 0).then(|| texts[i % texts.len()].clone());
        let alternatives: Vec<Alternative> =
            texts.iter().enumerate().map(|(i, t)| Alternative::new(t, opt(i))).collect();
        same(&alternatives[..]);
        same(&alternatives[..0]);
        let resources: Vec<ResourceRef> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| ResourceRef::new(format!("r{t}"), opt(i), opt(i + 1)).unwrap())
            .collect();
        for (i, t) in texts.iter().enumerate() {
            same(&ContextSnapshot::new(t.clone(), resources[..i % 4].to_vec(), opt(i)));
        }
        same(&ContextSnapshot::default());
        let artifacts: Vec<ArtifactRef> =
            texts.iter().enumerate().map(|(i, t)| ArtifactRef::new(format!("p{t}"), opt(i)).unwrap()).collect();
        same(&artifacts[..]);
        let ids: Vec<DecisionId> = (0..3).map(|_| DecisionId::generate()).collect();
        same(&ids[..]);
        same(&ids[..0]);
        let plans: Vec<PlanId> = (0..2).map(|_| PlanId::generate()).collect();
        same(&plans[..]);
    }

    #[test]
    fn only_quotes_backslashes_and_control_characters_need_escapes() {
        for b in 0..=255u8 {
            let want = b >= 0x20 && b != b'"' && b != b'\\';
            for len in [1, 16, 17, 33] {
                let mut s = vec![b'a'; len];
                s[len - 1] = b;
                assert_eq!(needs_no_escape(&s), want, "byte {b:#x} at {}", len - 1);
            }
        }
    }
}
