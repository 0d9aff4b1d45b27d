//! Query strings as browsers send them (`application/x-www-form-urlencoded`):
//! the web view's forms and the token a page is opened with once.

/// The value of `key` in `query`, percent-decoded.
pub fn query_of(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(k) == key).then(|| decode(v))
    })
}

/// `text` as a query value: every byte but letters, digits and `-._~`
/// percent-encoded (a `+` in a token stays a `+`, not a space).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space); bytes
/// that do not make UTF-8 become U+FFFD.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_as_forms_do() {
        assert_eq!(query_of("focus=class%3A%2F%2FA+B&budget=10", "focus").as_deref(), Some("class://A B"));
        assert_eq!(query_of("a=1&b", "b").as_deref(), Some(""));
        assert_eq!(query_of("a=%zz%4", "a").as_deref(), Some("%zz%4"));
        assert_eq!(query_of("a=%E2%9C%93", "a").as_deref(), Some("✓"));
        assert_eq!(query_of("a=%FF", "a").as_deref(), Some("\u{FFFD}"));
        assert_eq!(query_of("a=1", "c"), None);
    }

    #[test]
    fn encoding_round_trips_through_decoding() {
        for text in ["a b&c=d/é", "tok+en/==", "plain-._~"] {
            assert_eq!(query_of(&format!("q={}", encode(text)), "q").as_deref(), Some(text));
        }
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
