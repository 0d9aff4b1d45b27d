//! The code references `ingest` keeps (`uko_code_reference_lists`): what
//! each ingested file's definitions name as written, resolved into edges
//! at every ingest. They are only read all at once and replaced a file at
//! a time, so each file's are one row: a line a reference, its three parts
//! separated by tabs (see [`encode`]).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::store::engine::{vals, Conn, WriteTx};

/// One code reference: (file it is in, node it is made from, relation, name).
pub(crate) type CodeReference = (String, String, String, String);

/// Every stored code reference, file by file.
pub(crate) fn all(conn: &Conn) -> Result<Vec<CodeReference>> {
    let mut out = Vec::new();
    conn.for_each("SELECT resource_uri, refs FROM uko_code_reference_lists", &[], |r| {
        let file = r.str(0)?;
        for line in r.str(1)?.split('\n').filter(|l| !l.is_empty()) {
            let mut parts = line.split('\t').map(unescape);
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(from), Some(relation), Some(name), None) => out.push((file.to_owned(), from, relation, name)),
                _ => {
                    return Err(Error::Corrupt {
                        table: "uko_code_reference_lists",
                        key: file.to_owned(),
                        reason: format!("the line {line:?} is not three fields"),
                    })
                }
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// How many files have references stored.
pub(crate) fn count(conn: &Conn) -> Result<i64> {
    conn.query_one("SELECT count(*) FROM uko_code_reference_lists", &[], |r| r.i64(0))
}

/// Replaces `file`'s references with `references` (from, relation, name);
/// none removes its row.
pub(crate) fn set_file<'a>(
    tx: &WriteTx<'_>,
    file: &str,
    references: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Result<()> {
    let mut lines: Vec<String> = references.into_iter().map(|(f, r, n)| encode(f, r, n)).collect();
    lines.sort_unstable();
    lines.dedup();
    if lines.is_empty() {
        return remove_file(tx, file);
    }
    let refs = lines.join("\n");
    tx.storable("references", &refs)?;
    tx.execute(
        "INSERT INTO uko_code_reference_lists (resource_uri, refs) VALUES (?1, ?2)
         ON CONFLICT (resource_uri) DO UPDATE SET refs = excluded.refs",
        vals![file, refs.as_str()],
    )
    .map(drop)
}

/// Stores references of several files (a copy): each file's replaced by those given.
pub(crate) fn insert<'a>(
    tx: &WriteTx<'_>,
    references: impl IntoIterator<Item = (&'a str, &'a str, &'a str, &'a str)>,
) -> Result<()> {
    let mut by_file: HashMap<&str, Vec<(&str, &str, &str)>> = HashMap::new();
    for (file, from, relation, name) in references {
        by_file.entry(file).or_default().push((from, relation, name));
    }
    for (file, refs) in by_file {
        set_file(tx, file, refs)?;
    }
    Ok(())
}

/// Removes every reference made in `file`.
pub(crate) fn remove_file(tx: &WriteTx<'_>, file: &str) -> Result<()> {
    tx.execute("DELETE FROM uko_code_reference_lists WHERE resource_uri = ?1", vals![file]).map(drop)
}

/// One reference's line: its parts, tab-separated, each with `\`, tab and
/// newline escaped as `\\`, `\t`, `\n`.
fn encode(from: &str, relation: &str, name: &str) -> String {
    let mut line = String::with_capacity(from.len() + relation.len() + name.len() + 2);
    for (i, part) in [from, relation, name].into_iter().enumerate() {
        if i > 0 {
            line.push('\t');
        }
        for c in part.chars() {
            match c {
                '\\' => line.push_str("\\\\"),
                '\t' => line.push_str("\\t"),
                '\n' => line.push_str("\\n"),
                c => line.push(c),
            }
        }
    }
    line
}

fn unescape(part: &str) -> String {
    if !part.contains('\\') {
        return part.to_owned();
    }
    let mut out = String::with_capacity(part.len());
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_whatever_the_names_hold() {
        for (f, r, n) in [("function://a.b", "calls", "c"), ("x\ty", "imports", "a\\b\nc"), ("", "calls", "\\t")] {
            let line = encode(f, r, n);
            assert!(!line.contains('\n'));
            let parts: Vec<String> = line.split('\t').map(unescape).collect();
            assert_eq!(parts, [f, r, n]);
        }
    }
}
