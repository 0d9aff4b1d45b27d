//! The lexical index of ingested files (`code_term_docs`, `code_terms`):
//! each file's terms with their counts, and what BM25 needs to rank files
//! against a focus (document frequencies, lengths).

use std::collections::HashMap;

use crate::error::Result;
use crate::store::engine::{vals, Conn, WriteTx};

/// Each indexed file's version: the version its terms were read from.
pub(crate) fn versions(conn: &Conn) -> Result<HashMap<String, String>> {
    Ok(conn
        .query_vec("SELECT resource_uri, version FROM code_term_docs", &[], |r| Ok((r.string(0)?, r.string(1)?)))?
        .into_iter()
        .collect())
}

/// Replaces `file`'s terms with `terms` (sorted, distinct), read from `version`.
pub(crate) fn replace_file(tx: &WriteTx<'_>, file: &str, version: &str, terms: &[(String, u32)]) -> Result<()> {
    remove_file(tx, file)?;
    let length: i64 = terms.iter().map(|(_, n)| i64::from(*n)).sum();
    tx.execute(
        "INSERT INTO code_term_docs (resource_uri, version, terms) VALUES (?1, ?2, ?3)",
        vals![file, version, length],
    )?;
    let mut insert = tx.prepare("INSERT INTO code_terms (term, resource_uri, tf) VALUES (?1, ?2, ?3)")?;
    for (term, n) in terms {
        insert.execute(vals![term.as_str(), file, *n])?;
    }
    Ok(())
}

/// Removes `file`'s terms (none stored is fine).
pub(crate) fn remove_file(tx: &WriteTx<'_>, file: &str) -> Result<()> {
    tx.execute("DELETE FROM code_terms WHERE resource_uri = ?1", vals![file])?;
    tx.execute("DELETE FROM code_term_docs WHERE resource_uri = ?1", vals![file])?;
    Ok(())
}

/// The indexed files' count and mean length in terms.
pub(crate) fn corpus(conn: &Conn) -> Result<(u64, f64)> {
    conn.query_one("SELECT count(*), coalesce(avg(terms), 0) FROM code_term_docs", &[], |r| {
        Ok((u64::try_from(r.i64(0)?).unwrap_or(0), r.opt_f64(1)?.unwrap_or(0.0)))
    })
}

/// A file's terms and their counts (none when it is not indexed).
pub(crate) fn file_terms(conn: &Conn, file: &str) -> Result<Vec<(String, u32)>> {
    conn.query_vec("SELECT term, tf FROM code_terms WHERE resource_uri = ?1", vals![file], |r| {
        Ok((r.string(0)?, u32::try_from(r.i64(1)?).unwrap_or(u32::MAX)))
    })
}

/// How many files hold each of `terms` (0 for a term no file holds).
pub(crate) fn document_frequencies(conn: &Conn, terms: &[String]) -> Result<HashMap<String, u64>> {
    Ok(conn
        .query_vec("SELECT term, count(*) FROM code_terms WHERE term IN rarray(?1) GROUP BY term", vals![terms], |r| {
            Ok((r.string(0)?, u64::try_from(r.i64(1)?).unwrap_or(0)))
        })?
        .into_iter()
        .collect())
}

/// The files holding `term`, each with its count of it and its length.
pub(crate) fn postings(conn: &Conn, term: &str) -> Result<Vec<(String, u32, u32)>> {
    conn.query_vec(
        "SELECT t.resource_uri, t.tf, d.terms FROM code_terms t JOIN code_term_docs d USING (resource_uri)
         WHERE t.term = ?1",
        vals![term],
        |r| {
            Ok((
                r.string(0)?,
                u32::try_from(r.i64(1)?).unwrap_or(u32::MAX),
                u32::try_from(r.i64(2)?).unwrap_or(u32::MAX),
            ))
        },
    )
}
