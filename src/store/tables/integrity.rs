//! Tamper evidence: content hashes, per-plan hash chains and digests.
//!
//! Every entry of the log (a decision row or a supersession row) carries
//! - `content_hash`: SHA-256 of the row's canonical encoding (below);
//! - `chain_index`: its 1-based position in its plan's chain, in insertion order;
//! - `chain_hash`: SHA-256 of the previous entry's `chain_hash` and this
//!   entry's `content_hash` (32 zero bytes before the first entry);
//! - `log_index`: its 1-based position in the whole store's log.
//!
//! The `plans` table keeps each plan's head (`entries`, `head_hash`). A
//! plan anchor `PLAN_ID:N:HEX` pins the first N entries of a plan; the store
//! anchor `store:N:HEX` pins the first N entries of the whole log: HEX is
//! SHA-256 over, for each plan (in plan id order) with entries among the
//! first N, its id, the chain index of its last such entry and that entry's
//! chain hash. Both stay verifiable while the log grows. The encodings are
//! fixed byte strings, so another backend or a script in any language
//! computes the same hashes from the same values (see `docs/integrity.md`).

use crate::error::{Error, Result};
use crate::hash::{from_hex, to_hex, Hash, Hasher};
use crate::store::engine::sqlite::ScalarFunction;
use crate::store::engine::ValueRef as Field;

/// The value before a plan's first entry.
pub(crate) const GENESIS: Hash = [0; 32];

const DECISION_TAG: &[u8] = b"dstore/decision/v1\n";
const SUPERSESSION_TAG: &[u8] = b"dstore/supersession/v1\n";
const REDACTION_TAG: &[u8] = b"dstore/redaction/v1\n";
const LINK_TAG: &[u8] = b"dstore/link/v1\n";
const STORE_TAG: &[u8] = b"dstore/store/v1\n";

/// Appends one field: a type byte, then a fixed-width or length-prefixed value.
fn encode(h: &mut Hasher, f: Field<'_>) {
    match f {
        Field::Null => h.update([0]),
        Field::Int(i) => {
            h.update([1]);
            h.update(i.to_be_bytes());
        }
        Field::Real(r) => {
            h.update([2]);
            h.update(r.to_bits().to_be_bytes());
        }
        Field::Text(t) => {
            h.update([3]);
            h.update((t.len() as u64).to_be_bytes());
            h.update(t.as_bytes());
        }
        Field::Blob(b) => {
            h.update([4]);
            h.update((b.len() as u64).to_be_bytes());
            h.update(b);
        }
    }
}

/// The columns of a decision row that its content hash covers, in this order.
pub(crate) const DECISION_COLUMNS: [&str; 15] = [
    "decision_id",
    "plan_id",
    "parent_decision_id",
    "sequence",
    "decision_type",
    "chosen_option",
    "rationale",
    "confidence_score",
    "alternatives",
    "context_snapshot",
    "artifacts_produced",
    "corrects_decision_id",
    "downstream_decision_ids",
    "downstream_plan_ids",
    "metadata",
];

/// SHA-256 of a decision row's canonical encoding (`fields` in [`DECISION_COLUMNS`] order).
pub(crate) fn decision_hash(fields: &[Field<'_>; 15]) -> Hash {
    tagged(DECISION_TAG, fields)
}

/// SHA-256 of `tag`, then each of `fields` encoded.
fn tagged(tag: &[u8], fields: &[Field<'_>]) -> Hash {
    let mut h = Hasher::default();
    h.update(tag);
    for &f in fields {
        encode(&mut h, f);
    }
    h.finish()
}

/// SHA-256 of a supersession row: its plan, the replaced and the replacing decision.
pub(crate) fn supersession_hash(plan_id: Field<'_>, decision_id: Field<'_>, superseded_by: Field<'_>) -> Hash {
    tagged(SUPERSESSION_TAG, &[plan_id, decision_id, superseded_by])
}

/// The columns of a redaction row that its content hash covers, in this order.
pub(crate) const REDACTION_COLUMNS: [&str; 8] =
    ["plan_id", "decision_id", "fields", "reason", "actor", "redacted_at", "before_hash", "after_hash"];

/// SHA-256 of a redaction row: its plan and decision, the fields redacted,
/// why, by whom, when, and the decision row's content hash before and
/// after (`fields` in [`REDACTION_COLUMNS`] order).
pub(crate) fn redaction_hash(fields: &[Field<'_>; 8]) -> Hash {
    tagged(REDACTION_TAG, fields)
}

/// The chain hash of an entry: the previous entry's chain hash, then this entry's content hash.
pub(crate) fn link(previous: &Hash, content: &Hash) -> Hash {
    let mut h = Hasher::default();
    h.update(LINK_TAG);
    h.update(previous);
    h.update(content);
    h.finish()
}

/// The store digest over plan heads `(plan_id, entries, head)`, given in plan id order.
pub(crate) fn store_digest<'a>(heads: impl IntoIterator<Item = (&'a str, u64, &'a Hash)>) -> Hash {
    let mut h = Hasher::default();
    h.update(STORE_TAG);
    for (plan, entries, head) in heads {
        encode(&mut h, Field::Text(plan));
        h.update(entries.to_be_bytes());
        h.update(head);
    }
    h.finish()
}

/// What an anchor pins: a plan's first entries, or the store log's first entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnchorScope {
    Store,
    Plan(String),
}

/// A digest to verify a store against: `store:N:HEX` or `PLAN_ID:N:HEX`, as `dstore digest` prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub scope: AnchorScope,
    /// How many entries of the plan or of the store it covers.
    pub entries: u64,
    pub hash: Hash,
}

impl std::fmt::Display for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.scope {
            AnchorScope::Store => write!(f, "store:{}:{}", self.entries, to_hex(&self.hash)),
            AnchorScope::Plan(p) => write!(f, "{p}:{}:{}", self.entries, to_hex(&self.hash)),
        }
    }
}

impl std::str::FromStr for Anchor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Anchor> {
        let bad =
            |why: &str| Error::validation("digest", format!("{s:?}: {why} (expected store:N:HEX or PLAN_ID:N:HEX)"));
        let mut parts = s.trim().split(':');
        let (Some(scope), Some(n), Some(hex), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad("not three parts separated by ':'"));
        };
        let entries: u64 = n.parse().map_err(|_| bad("the entry count is not a number"))?;
        if entries == 0 {
            return Err(bad("an anchor covers at least one entry"));
        }
        let hash = from_hex(hex).ok_or_else(|| bad("the hash is not 64 hex digits"))?;
        let scope = if scope == "store" {
            AnchorScope::Store
        } else {
            crate::decision::PlanId::parse(scope).map_err(|_| bad("the scope is neither 'store' nor a plan id"))?;
            AnchorScope::Plan(scope.to_owned())
        };
        Ok(Anchor { scope, entries, hash })
    }
}

/// `dstore_decision_hash(15 columns)`, `dstore_supersession_hash(plan, id, by)`
/// and `dstore_link(previous_hex_or_null, content_hex)`, registered on every
/// SQLite connection: the migration that adds the hashes computes with the
/// same code as inserts and `check`.
pub(crate) const FUNCTIONS: [ScalarFunction; 3] = [
    ScalarFunction {
        name: "dstore_decision_hash",
        args: 15,
        call: |args| {
            let mut fields = [Field::Null; 15];
            fields.copy_from_slice(args);
            Ok(to_hex(&decision_hash(&fields)))
        },
    },
    ScalarFunction {
        name: "dstore_supersession_hash",
        args: 3,
        call: |args| Ok(to_hex(&supersession_hash(args[0], args[1], args[2]))),
    },
    ScalarFunction {
        name: "dstore_link",
        args: 2,
        call: |args| {
            let previous = match args[0] {
                Field::Null => GENESIS,
                Field::Text(t) => from_hex(t).ok_or("dstore_link: the previous hash is not 64 hex digits")?,
                _ => return Err("dstore_link: the previous hash is not 64 hex digits".into()),
            };
            let content = match args[1] {
                Field::Text(t) => from_hex(t),
                _ => None,
            }
            .ok_or("dstore_link: the content hash is not 64 hex digits")?;
            Ok(to_hex(&link(&previous, &content)))
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_and_its_type_changes_the_hash() {
        let base = [Field::Text("a"); 15];
        let h = decision_hash(&base);
        for i in 0..15 {
            for other in [Field::Null, Field::Int(1), Field::Real(1.0), Field::Text("b"), Field::Blob(b"a")] {
                let mut f = base;
                f[i] = other;
                assert_ne!(decision_hash(&f), h, "field {i} as {other:?}");
            }
        }
        // Length prefixes keep field boundaries: ("ab", "") differs from ("a", "b").
        let mut a = base;
        a[0] = Field::Text("ab");
        a[1] = Field::Text("");
        let mut b = base;
        b[0] = Field::Text("a");
        b[1] = Field::Text("b");
        assert_ne!(decision_hash(&a), decision_hash(&b));
    }

    #[test]
    fn anchors_parse_what_they_print() {
        let a = Anchor { scope: AnchorScope::Store, entries: 12, hash: [0xab; 32] };
        assert_eq!(a.to_string().parse::<Anchor>().unwrap(), a);
        let p = Anchor { scope: AnchorScope::Plan("01JD0000000000000000000000".into()), entries: 3, hash: [1; 32] };
        assert_eq!(p.to_string().parse::<Anchor>().unwrap(), p);
        for bad in ["", "store:1", "store:x:00", "nope:1:", "store:1:abc", &format!("store:0:{}", "0".repeat(64))] {
            let e = bad.parse::<Anchor>().unwrap_err().to_string();
            assert!(e.contains("digest"), "{bad}: {e}");
        }
    }
}
