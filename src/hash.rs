//! SHA-256 values and their text: the one module that spells a hash.
//!
//! The store keeps hashes as 64 lower-case hex digits (content and chain
//! hashes of the log), and versions as `sha256:` and those digits (a file's
//! or a definition's text, a node's views, a context snapshot). Every layer
//! that needs either calls this leaf module, which imports nothing of the
//! crate.

use sha2::{Digest, Sha256};

/// A raw SHA-256 value.
pub type Hash = [u8; 32];

/// What a version text starts with.
pub const VERSION_PREFIX: &str = "sha256:";

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// SHA-256 fed in parts, for values hashed from several pieces.
#[derive(Clone, Default)]
pub(crate) struct Hasher(Sha256);

impl Hasher {
    pub(crate) fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes);
    }

    pub(crate) fn finish(self) -> Hash {
        self.0.finalize().into()
    }
}

/// Lower-case hex, as the store keeps hashes.
pub fn to_hex(hash: &Hash) -> String {
    hex_into(hash, &mut [0; 64]).to_owned()
}

/// [`to_hex`] written into `buf`, without an allocation.
pub fn hex_into<'b>(hash: &Hash, buf: &'b mut [u8; 64]) -> &'b str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in buf.chunks_exact_mut(2).zip(hash) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    std::str::from_utf8(buf).expect("hex digits are ASCII")
}

/// Parses 64 hex digits (either case).
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

/// `sha256:` and the hex of `hash`: a version text.
pub fn version_text(hash: &Hash) -> String {
    let mut buf = [0; 64];
    let mut out = String::with_capacity(VERSION_PREFIX.len() + 64);
    out.push_str(VERSION_PREFIX);
    out.push_str(hex_into(hash, &mut buf));
    out
}

/// The version of `bytes`: `sha256:` and the hex SHA-256 of them.
pub fn version_of(bytes: &[u8]) -> String {
    version_text(&sha256(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_text() {
        let h = sha256(b"abc");
        assert_eq!(to_hex(&h), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(from_hex(&to_hex(&h)), Some(h));
        assert_eq!(from_hex(&to_hex(&h).to_uppercase()), Some(h));
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(&format!("+{}", &to_hex(&h)[1..])), None);
        assert_eq!(from_hex(&"é".repeat(32)), None);
    }

    #[test]
    fn versions_are_prefixed_hex() {
        assert_eq!(version_of(b"abc"), format!("sha256:{}", to_hex(&sha256(b"abc"))));
        let mut h = Hasher::default();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(h.finish(), sha256(b"abc"));
    }
}
