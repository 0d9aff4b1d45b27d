//! The lexical index of ingested files: each file's terms with their
//! counts (`code_term_docs`, a row a file, its terms as a vector), the
//! postings of each term (`code_terms`, by the file's `doc_id`), and what
//! BM25 needs to rank files against a focus (document frequencies,
//! lengths).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::store::engine::{vals, Conn, WriteTx};

/// Each indexed file's version: the version its terms were read from.
pub(crate) fn versions(conn: &Conn) -> Result<HashMap<String, String>> {
    Ok(conn
        .query_vec("SELECT resource_uri, version FROM code_term_docs", &[], |r| Ok((r.string(0)?, r.string(1)?)))?
        .into_iter()
        .collect())
}

/// A file's terms as its row holds them: `term:count` separated by spaces.
fn vector(terms: &[(String, u32)]) -> String {
    let mut out = String::with_capacity(terms.iter().map(|(t, _)| t.len() + 4).sum());
    for (term, n) in terms {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(term);
        out.push(':');
        out.push_str(&n.to_string());
    }
    out
}

fn parse_vector(file: &str, text: &str) -> Result<Vec<(String, u32)>> {
    text.split(' ')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            pair.rsplit_once(':').and_then(|(t, n)| Some((t.to_owned(), n.parse().ok()?))).ok_or_else(|| {
                Error::Corrupt {
                    table: "code_term_docs",
                    key: file.to_owned(),
                    reason: format!("{pair:?} is not term:count"),
                }
            })
        })
        .collect()
}

/// A file to index: its URI, its version, and its terms (sorted, distinct),
/// or `None` to drop it from the index.
pub(crate) type FileTerms<'a> = (&'a str, &'a str, Option<&'a [(String, u32)]>);

/// Indexes each file of `files` at its version: its row replaced, its old postings
/// removed, and the new ones inserted in term order (a first load into an
/// empty index then appends to the postings' tree).
#[cfg(feature = "ingest")]
pub(crate) fn index_files(tx: &WriteTx<'_>, files: &[FileTerms<'_>]) -> Result<()> {
    let mut find = tx.prepare("SELECT doc_id, vector FROM code_term_docs WHERE resource_uri = ?1")?;
    let mut insert_doc = tx.prepare(
        "INSERT INTO code_term_docs (resource_uri, version, terms, vector) VALUES (?1, ?2, ?3, ?4) RETURNING doc_id",
    )?;
    let mut update_doc =
        tx.prepare("UPDATE code_term_docs SET version = ?2, terms = ?3, vector = ?4 WHERE doc_id = ?1")?;
    let mut delete_doc = tx.prepare("DELETE FROM code_term_docs WHERE doc_id = ?1")?;
    let mut delete = tx.prepare("DELETE FROM code_terms WHERE term = ?1 AND doc_id = ?2")?;
    let mut postings: Vec<(&str, i64, u32)> = Vec::new();
    for &(file, version, terms) in files {
        let old = find.query_opt(vals![file], |r| Ok((r.i64(0)?, r.string(1)?)))?;
        if let Some((doc, old_vector)) = &old {
            for (term, _) in parse_vector(file, old_vector)? {
                delete.execute(vals![term.as_str(), *doc])?;
            }
        }
        let Some(terms) = terms else {
            if let Some((doc, _)) = old {
                delete_doc.execute(vals![doc])?;
            }
            continue;
        };
        let length: i64 = terms.iter().map(|(_, n)| i64::from(*n)).sum();
        let text = vector(terms);
        tx.storable("terms", &text)?;
        let doc = match old {
            Some((doc, _)) => {
                update_doc.execute(vals![doc, version, length, text.as_str()])?;
                doc
            }
            None => insert_doc
                .query_opt(vals![file, version, length, text.as_str()], |r| r.i64(0))?
                .ok_or_else(|| Error::storage("the term document insert returned no key"))?,
        };
        postings.extend(terms.iter().map(|(t, n)| (t.as_str(), doc, *n)));
    }
    postings.sort_unstable();
    let mut insert = tx.prepare_write("INSERT INTO code_terms (term, doc_id, tf) VALUES (?1, ?2, ?3)")?;
    for (term, doc, n) in postings {
        insert.execute(vals![term, doc, n])?;
    }
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
    match conn.query_opt("SELECT vector FROM code_term_docs WHERE resource_uri = ?1", vals![file], |r| r.string(0))? {
        Some(text) => parse_vector(file, &text),
        None => Ok(Vec::new()),
    }
}

/// How many files hold each of `terms` (a term no file holds is left out).
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
        "SELECT d.resource_uri, t.tf, d.terms FROM code_terms t JOIN code_term_docs d USING (doc_id) WHERE t.term = ?1",
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
