//! The words of a source file, for the lexical channel of context ranking.
//!
//! A file's terms are its identifiers (comments and strings included: a
//! word there names a thing as well), each split at `snake_case` and
//! `camelCase` boundaries into lower-case parts (`parseHTTPHeader` gives
//! `parse`, `http`, `header`), plus the whole identifier in lower case
//! without underscores when it has more than one part (`parsehttpheader`),
//! so that files naming the same thing match more strongly than files
//! sharing its words. Parts shorter than two letters, numbers and the
//! keywords of the languages `ingest` reads are left out.
//!
//! `dstore ingest` keeps each file's terms in the store; the projection
//! ranks files by BM25 between the focus's terms and theirs.

use rustc_hash::FxHashMap;

/// The longest term kept, in bytes: longer identifiers are generated code.
const MAX_TERM: usize = 48;

/// Words every file of a language has: keywords and the most common
/// built-in names, which say nothing about what a file is about.
const STOPWORDS: &[&str] = &[
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "crate",
    "def",
    "default",
    "del",
    "do",
    "dyn",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "is",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "none",
    "not",
    "null",
    "of",
    "or",
    "package",
    "pass",
    "pub",
    "raise",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "switch",
    "the",
    "this",
    "throw",
    "to",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "use",
    "var",
    "void",
    "where",
    "while",
    "with",
    "yield",
    "str",
    "int",
    "string",
    "bool",
    "i32",
    "i64",
    "u32",
    "u64",
    "usize",
    "f64",
    "err",
    "error",
    "ok",
    "some",
    "result",
    "option",
    "vec",
    "args",
    "kwargs",
    "cls",
    "any",
    "number",
    "boolean",
    "object",
    "get",
    "set",
];

/// The terms of `text` with how often each occurs, sorted by term.
pub fn terms(text: &str) -> Vec<(String, u32)> {
    // A term met again is counted without allocating; a new one is checked
    // once (length, stopword) and kept with 0 when it is not a term.
    let mut counts: FxHashMap<String, u32> = FxHashMap::default();
    let mut count = |term: &str| match counts.get_mut(term) {
        Some(n) => *n += u32::from(*n > 0),
        None => {
            let keep = term.len() >= 2 && term.len() <= MAX_TERM && !STOPWORDS.contains(&term);
            counts.insert(term.to_owned(), u32::from(keep));
        }
    };
    let (mut parts, mut whole, mut part) = (Vec::new(), String::new(), String::new());
    for identifier in identifiers(text) {
        split_into(identifier, &mut parts);
        whole.clear();
        for &(from, to) in &parts {
            part.clear();
            part.extend(identifier[from..to].chars().map(|c| c.to_ascii_lowercase()));
            whole.push_str(&part);
            count(&part);
        }
        if parts.len() > 1 {
            count(&whole);
        }
    }
    let mut terms: Vec<(String, u32)> = counts.into_iter().filter(|(_, n)| *n > 0).collect();
    terms.sort_unstable();
    terms
}

/// The ASCII identifiers of `text`: a letter or `_`, then letters, digits and `_`.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let b = bytes[at];
            if b.is_ascii_alphabetic() || b == b'_' {
                let start = at;
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                    at += 1;
                }
                return Some(&text[start..at]);
            }
            // Skip a number or any other run, so `0x1fAb` yields no identifier.
            if b.is_ascii_digit() {
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                    at += 1;
                }
            } else {
                at += 1;
            }
        }
        None
    })
}

/// An identifier's parts in lower case: split at `_`, at a lower-case
/// letter or digit followed by an upper-case one, and before the last
/// capital of a run followed by a lower-case letter (`HTTPServer`: `http`,
/// `server`). Digits stay with the part before them.
#[cfg(test)]
fn split(identifier: &str) -> Vec<String> {
    let mut parts = Vec::new();
    split_into(identifier, &mut parts);
    parts.into_iter().map(|(from, to)| identifier[from..to].to_ascii_lowercase()).collect()
}

/// [`split`]'s parts as byte ranges of `identifier` (ASCII), into `parts`.
fn split_into(identifier: &str, parts: &mut Vec<(usize, usize)>) {
    parts.clear();
    let b = identifier.as_bytes();
    let mut start = 0;
    for i in 0..=b.len() {
        if i == b.len() || b[i] == b'_' {
            if i > start {
                parts.push((start, i));
            }
            start = i + 1;
            continue;
        }
        if i > start {
            let (prev, cur) = (b[i - 1], b[i]);
            let next_lower = b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            let boundary = cur.is_ascii_uppercase()
                && (prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower));
            if boundary {
                parts.push((start, i));
                start = i;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_at_case_and_underscores() {
        assert_eq!(split("parseHTTPHeader"), ["parse", "http", "header"]);
        assert_eq!(split("get_user_name"), ["get", "user", "name"]);
        assert_eq!(split("HTTPServer"), ["http", "server"]);
        assert_eq!(split("utf8Decode"), ["utf8", "decode"]);
        assert_eq!(split("__init__"), ["init"]);
        assert_eq!(split("ABC"), ["abc"]);
    }

    #[test]
    fn terms_count_parts_and_whole_identifiers_without_keywords() {
        let t = terms("def parse_header(self):\n    return HeaderParser(0x1fAb).parse_header()  # parse it");
        let get = |w: &str| t.iter().find(|(term, _)| term == w).map(|(_, n)| *n);
        assert_eq!(get("parseheader"), Some(2));
        assert_eq!(get("parse"), Some(3));
        assert_eq!(get("header"), Some(3));
        assert_eq!(get("headerparser"), Some(1));
        assert_eq!(get("def"), None);
        assert_eq!(get("self"), None);
        assert_eq!(get("fab"), None, "digits start no identifier");
        assert_eq!(get("it"), Some(1));
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0), "sorted by term");
    }
}
