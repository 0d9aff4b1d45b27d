//! ULID newtypes: a `PlanId` or `DecisionId` always holds a valid ULID.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use ulid::{Generator, Ulid};

use crate::error::{Error, Result};

/// One generator for the process, so ids minted in the same millisecond
/// still sort in creation order.
static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

fn next_ulid() -> Ulid {
    let mut guard = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let generator = guard.get_or_insert_with(Generator::new);
    // Overflow needs 2^80 ids within one millisecond; fall back to a fresh one.
    generator.generate().unwrap_or_else(|_| Ulid::new())
}

/// Crockford base32 digit values of the canonical (upper-case) alphabet; 0xFF elsewhere.
const DIGITS: [u8; 256] = {
    let alphabet = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut table = [0xFF; 256];
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// One pass over a canonical ULID; `None` for anything else (the slow
/// path then names the problem). Stores read ids by the million.
fn decode_canonical(s: &[u8]) -> Option<Ulid> {
    // 26 digits hold 130 bits: the first digit must leave the top two clear.
    if s.len() != ulid::ULID_LEN || DIGITS[s[0] as usize] > 7 {
        return None;
    }
    let mut value: u128 = 0;
    for &c in s {
        let digit = DIGITS[c as usize];
        if digit == 0xFF {
            return None;
        }
        value = (value << 5) | u128::from(digit);
    }
    Some(Ulid(value))
}

/// Parses a canonical ULID: 26 characters of Crockford base32, upper case.
fn parse_ulid(field: &str, s: &str) -> Result<Ulid> {
    if let Some(ulid) = decode_canonical(s.as_bytes()) {
        return Ok(ulid);
    }
    if s.len() != 26 {
        return Err(Error::validation(
            field,
            format!("{s:?} is not a ULID (expected 26 characters, got {})", s.chars().count()),
        ));
    }
    let ulid = Ulid::from_string(s).map_err(|e| Error::validation(field, format!("{s:?} is not a ULID ({e})")))?;
    // The ulid crate also reads lower case and Crockford's look-alike letters;
    // only the canonical spelling keeps ids byte-comparable in the store.
    let mut canonical = [0u8; ulid::ULID_LEN];
    if ulid.array_to_str(&mut canonical) != s {
        return Err(Error::validation(field, format!("{s:?} is not a canonical ULID (upper-case Crockford base32)")));
    }
    Ok(ulid)
}

macro_rules! ulid_newtype {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Ulid);

        impl $name {
            /// A new id from the process-wide monotonic generator.
            pub fn generate() -> Self {
                Self(next_ulid())
            }

            /// Parses a ULID; the error names the field `
            #[doc = $field]
            /// `.
            ///
            /// # Errors
            /// [`Error::Validation`] when `s` is not a canonical ULID.
            pub fn parse(s: &str) -> Result<Self> {
                Self::parse_field($field, s)
            }

            /// Parses a ULID, naming `field` in the error.
            ///
            /// # Errors
            /// [`Error::Validation`] when `s` is not a canonical ULID.
            pub fn parse_field(field: &str, s: &str) -> Result<Self> {
                parse_ulid(field, s).map(Self)
            }

            /// Parses a ULID from text that may not be UTF-8 (a stored
            /// column's bytes), naming `field` in the error.
            pub(crate) fn parse_text(field: &str, s: &[u8]) -> Result<Self> {
                match decode_canonical(s) {
                    Some(ulid) => Ok(Self(ulid)),
                    None => match std::str::from_utf8(s) {
                        Ok(s) => Self::parse_field(field, s),
                        Err(_) => Err(Error::validation(field, format!("{} is not UTF-8 text", String::from_utf8_lossy(s)))),
                    },
                }
            }

            /// The id with this 128-bit value: 48 bits of milliseconds since
            /// the epoch, then 80 bits of randomness.
            pub fn from_u128(value: u128) -> Self {
                Self(Ulid(value))
            }

            /// The canonical 26-character text, written into `buf`: the
            /// [`Display`](fmt::Display) form without the formatter.
            pub fn encode<'b>(&self, buf: &'b mut [u8; ulid::ULID_LEN]) -> &'b str {
                self.0.array_to_str(buf)
            }

            /// The 128-bit value of the id.
            pub fn to_u128(&self) -> u128 {
                self.0 .0
            }

            /// Milliseconds since the Unix epoch encoded in the id.
            pub fn timestamp_ms(&self) -> u64 {
                self.0.timestamp_ms()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                // Encoded on the stack: no formatter machinery for ids written by the million.
                s.serialize_str(self.encode(&mut [0u8; ulid::ULID_LEN]))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

ulid_newtype!(
    /// The id of a plan: a ULID.
    PlanId,
    "plan_id"
);
ulid_newtype!(
    /// The id of a decision: a ULID, generated monotonically when not given.
    DecisionId,
    "decision_id"
);

/// Hashes ids and graph node keys for the maps keyed by them. A ULID's low
/// 80 bits are random already, and node keys are distinct integers, so one
/// multiply spreads them well; the default SipHash guards against chosen
/// keys, which maps built from the store's own rows do not need, and costs
/// several times more.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u128(&mut self, v: u128) {
        self.0 = ((v as u64) ^ ((v >> 64) as u64) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// Node keys of the graph: sequential integers, spread by the multiply.
    fn write_i64(&mut self, v: i64) {
        self.0 = ((v as u64) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// Anything else (not used by ids): FNV-1a.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
}

/// A map keyed by ids, hashed by [`IdHasher`].
pub(crate) type IdMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;
/// A set of ids, hashed by [`IdHasher`].
pub(crate) type IdSet<K> = std::collections::HashSet<K, std::hash::BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_sort_in_creation_order() {
        let ids: Vec<DecisionId> = (0..1000).map(|_| DecisionId::generate()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }

    #[test]
    fn rejects_bad_ulids_naming_the_field() {
        for bad in [
            "",
            "not-a-ulid",
            "01ARZ3NDEKTSV4RRFFQ69G5FA",
            "01arz3ndektsv4rrffq69g5fav",
            "01ARZ3NDEKTSV4RRFFQ69G5FAI",
            "81ARZ3NDEKTSV4RRFFQ69G5FAV",
        ] {
            let err = PlanId::parse(bad).unwrap_err().to_string();
            assert!(err.contains("plan_id"), "{bad}: {err}");
        }
        let id = DecisionId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        assert_eq!(id.to_string(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
    }

    #[test]
    fn the_one_pass_decoder_reads_exactly_the_canonical_spellings() {
        let mut values = vec![0u128, 1, u128::MAX];
        values.extend((0..1000u128).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835) ^ (i << 100)));
        for v in values {
            let text = Ulid(v).to_string();
            assert_eq!(decode_canonical(text.as_bytes()), Some(Ulid(v)), "{text}");
            // Lower case and the look-alike letters decode in the ulid crate, never here.
            let lower = text.to_lowercase();
            if lower != text {
                assert_eq!(decode_canonical(lower.as_bytes()), None, "{lower}");
                assert!(DecisionId::parse(&lower).is_err());
            }
        }
        for bad in ["01ARZ3NDEKTSV4RRFFQ69G5FAI", "01ARZ3NDEKTSV4RRFFQ69G5FAO", "81ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3"]
        {
            assert_eq!(decode_canonical(bad.as_bytes()), None, "{bad}");
        }
    }
}
