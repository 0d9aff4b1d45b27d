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

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A raw SHA-256 value.
pub type Hash = [u8; 32];

/// The value before a plan's first entry.
pub const GENESIS: Hash = [0; 32];

const DECISION_TAG: &[u8] = b"dstore/decision/v1\n";
const SUPERSESSION_TAG: &[u8] = b"dstore/supersession/v1\n";
const LINK_TAG: &[u8] = b"dstore/link/v1\n";
const STORE_TAG: &[u8] = b"dstore/store/v1\n";

/// One column value in the canonical encoding.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Field<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl<'a> From<ValueRef<'a>> for Field<'a> {
    fn from(v: ValueRef<'a>) -> Self {
        match v {
            ValueRef::Null => Field::Null,
            ValueRef::Integer(i) => Field::Int(i),
            ValueRef::Real(r) => Field::Real(r),
            // Text that is not UTF-8 is hashed as its bytes: it can only come from outside the library.
            ValueRef::Text(t) => std::str::from_utf8(t).map_or(Field::Blob(t), Field::Text),
            ValueRef::Blob(b) => Field::Blob(b),
        }
    }
}

impl<'a> From<Option<&'a str>> for Field<'a> {
    fn from(v: Option<&'a str>) -> Self {
        v.map_or(Field::Null, Field::Text)
    }
}

/// Appends one field: a type byte, then a fixed-width or length-prefixed value.
fn encode(h: &mut Sha256, f: Field<'_>) {
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
    let mut h = Sha256::new();
    h.update(DECISION_TAG);
    for &f in fields {
        encode(&mut h, f);
    }
    h.finalize().into()
}

/// SHA-256 of a supersession row: its plan, the replaced and the replacing decision.
pub(crate) fn supersession_hash(plan_id: Field<'_>, decision_id: Field<'_>, superseded_by: Field<'_>) -> Hash {
    let mut h = Sha256::new();
    h.update(SUPERSESSION_TAG);
    for f in [plan_id, decision_id, superseded_by] {
        encode(&mut h, f);
    }
    h.finalize().into()
}

/// The chain hash of an entry: the previous entry's chain hash, then this entry's content hash.
pub fn link(previous: &Hash, content: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update(LINK_TAG);
    h.update(previous);
    h.update(content);
    h.finalize().into()
}

/// The store digest over plan heads `(plan_id, entries, head)`, given in plan id order.
pub fn store_digest<'a>(heads: impl IntoIterator<Item = (&'a str, u64, &'a Hash)>) -> Hash {
    let mut h = Sha256::new();
    h.update(STORE_TAG);
    for (plan, entries, head) in heads {
        encode(&mut h, Field::Text(plan));
        h.update(entries.to_be_bytes());
        h.update(head);
    }
    h.finalize().into()
}

/// Lower-case hex, as stored in the file.
pub fn to_hex(hash: &Hash) -> String {
    hex_into(hash, &mut [0; 64]).to_owned()
}

/// [`to_hex`] written into `buf`, without an allocation.
pub(crate) fn hex_into<'b>(hash: &Hash, buf: &'b mut [u8; 64]) -> &'b str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in buf.chunks_exact_mut(2).zip(hash) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    std::str::from_utf8(buf).expect("hex digits are ASCII")
}

/// Parses 64 hex digits.
pub fn from_hex(text: &str) -> Option<Hash> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
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

/// Registers `dstore_decision_hash(15 columns)`, `dstore_supersession_hash(plan, id, by)`
/// and `dstore_link(previous_hex_or_null, content_hex)` on a connection: the
/// migration that adds the hashes and `check` compute with the same code as inserts.
pub(crate) fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("dstore_decision_hash", 15, flags, |ctx| {
        let mut fields = [Field::Null; 15];
        for (i, f) in fields.iter_mut().enumerate() {
            *f = ctx.get_raw(i).into();
        }
        Ok(to_hex(&decision_hash(&fields)))
    })?;
    conn.create_scalar_function("dstore_supersession_hash", 3, flags, |ctx| {
        Ok(to_hex(&supersession_hash(ctx.get_raw(0).into(), ctx.get_raw(1).into(), ctx.get_raw(2).into())))
    })?;
    conn.create_scalar_function("dstore_link", 2, flags, |ctx| {
        let previous = match ctx.get_raw(0) {
            ValueRef::Null => GENESIS,
            v => v.as_str().ok().and_then(from_hex).ok_or_else(|| {
                rusqlite::Error::UserFunctionError("dstore_link: the previous hash is not 64 hex digits".into())
            })?,
        };
        let content = ctx.get_raw(1).as_str().ok().and_then(from_hex).ok_or_else(|| {
            rusqlite::Error::UserFunctionError("dstore_link: the content hash is not 64 hex digits".into())
        })?;
        Ok(to_hex(&link(&previous, &content)))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_text() {
        let h = link(&GENESIS, &[7; 32]);
        assert_eq!(from_hex(&to_hex(&h)), Some(h));
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(&format!("+{}", &to_hex(&h)[1..])), None);
        assert_eq!(from_hex(&"é".repeat(32)), None);
    }

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
