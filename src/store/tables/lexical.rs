//! The lexical index of ingested files: a document a file
//! (`code_term_docs`: its version and length), its terms with their counts
//! (`code_term_vectors`), the postings of each term (`code_terms`, by the
//! file's `doc_id`), and each term's document frequency (`code_term_stats`):
//! what BM25 needs to rank files against a focus.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::store::engine::{vals, Conn, WriteTx};

/// Each indexed file's version: the version its terms were read from.
#[cfg(feature = "ingest")]
pub(crate) fn versions(conn: &Conn) -> Result<rustc_hash::FxHashMap<String, String>> {
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
pub(crate) fn index_files(tx: &WriteTx<'_>, files: &[FileTerms<'_>]) -> Result<()> {
    let mut find = tx.prepare(
        "SELECT d.doc_id, v.vector FROM code_term_docs d JOIN code_term_vectors v USING (doc_id)
         WHERE d.resource_uri = ?1",
    )?;
    let mut insert_doc =
        tx.prepare("INSERT INTO code_term_docs (resource_uri, version, terms) VALUES (?1, ?2, ?3) RETURNING doc_id")?;
    let mut update_doc = tx.prepare("UPDATE code_term_docs SET version = ?2, terms = ?3 WHERE doc_id = ?1")?;
    let mut set_vector = tx.prepare(
        "INSERT INTO code_term_vectors (doc_id, vector) VALUES (?1, ?2)
         ON CONFLICT (doc_id) DO UPDATE SET vector = excluded.vector",
    )?;
    let mut delete_vector = tx.prepare("DELETE FROM code_term_vectors WHERE doc_id = ?1")?;
    let mut delete_doc = tx.prepare("DELETE FROM code_term_docs WHERE doc_id = ?1")?;
    let mut delete = tx.prepare("DELETE FROM code_terms WHERE term = ?1 AND doc_id = ?2")?;
    let mut postings: Vec<(&str, i64, u32)> = Vec::new();
    // Each term's change of document frequency.
    let mut df: HashMap<String, i64> = HashMap::new();
    for &(file, version, terms) in files {
        let old = find.query_opt(vals![file], |r| Ok((r.i64(0)?, r.string(1)?)))?;
        if let Some((doc, old_vector)) = &old {
            for (term, _) in parse_vector(file, old_vector)? {
                delete.execute(vals![term.as_str(), *doc])?;
                *df.entry(term).or_default() -= 1;
            }
        }
        let Some(terms) = terms else {
            if let Some((doc, _)) = old {
                delete_vector.execute(vals![doc])?;
                delete_doc.execute(vals![doc])?;
            }
            continue;
        };
        let length: i64 = terms.iter().map(|(_, n)| i64::from(*n)).sum();
        let text = vector(terms);
        tx.storable("terms", &text)?;
        let doc = match old {
            Some((doc, _)) => {
                update_doc.execute(vals![doc, version, length])?;
                doc
            }
            None => insert_doc
                .query_opt(vals![file, version, length], |r| r.i64(0))?
                .ok_or_else(|| Error::storage("the term document insert returned no key"))?,
        };
        set_vector.execute(vals![doc, text.as_str()])?;
        for (term, n) in terms {
            postings.push((term.as_str(), doc, *n));
            *df.entry(term.clone()).or_default() += 1;
        }
    }
    postings.sort_unstable();
    let mut insert = tx.prepare_write("INSERT INTO code_terms (term, doc_id, tf) VALUES (?1, ?2, ?3)")?;
    for (term, doc, n) in postings {
        insert.execute(vals![term, doc, n])?;
    }
    let mut changes: Vec<(String, i64)> = df.into_iter().filter(|(_, d)| *d != 0).collect();
    changes.sort_unstable();
    let mut count = tx.prepare(
        "INSERT INTO code_term_stats (term, df) VALUES (?1, ?2)
         ON CONFLICT (term) DO UPDATE SET df = code_term_stats.df + excluded.df",
    )?;
    let mut forget = tx.prepare("DELETE FROM code_term_stats WHERE term = ?1 AND df <= 0")?;
    for (term, change) in &changes {
        count.execute(vals![term.as_str(), *change])?;
        if *change < 0 {
            forget.execute(vals![term.as_str()])?;
        }
    }
    Ok(())
}

/// Calls `each` with every indexed file's URI, version and terms, a page of
/// [`PAGE`] files at a time (a copy indexes them again, page by page).
pub(crate) fn for_each_document(
    conn: &Conn,
    mut each: impl FnMut(Vec<(String, String, Vec<(String, u32)>)>) -> Result<()>,
) -> Result<()> {
    let mut after = String::new();
    loop {
        let page = conn.query_vec(
            "SELECT d.resource_uri, d.version, v.vector FROM code_term_docs d JOIN code_term_vectors v USING (doc_id)
             WHERE d.resource_uri > ?1 ORDER BY d.resource_uri LIMIT ?2",
            vals![after.as_str(), PAGE as i64],
            |r| Ok((r.string(0)?, r.string(1)?, r.string(2)?)),
        )?;
        let Some((last, _, _)) = page.last() else { return Ok(()) };
        after = last.clone();
        let full = page.len() == PAGE;
        let docs = page
            .into_iter()
            .map(|(file, version, text)| {
                let terms = parse_vector(&file, &text)?;
                Ok((file, version, terms))
            })
            .collect::<Result<Vec<_>>>()?;
        each(docs)?;
        if !full {
            return Ok(());
        }
    }
}

/// The files [`for_each_document`] reads at a time.
pub(crate) const PAGE: usize = 1024;

/// The indexed files' count and mean length in terms.
pub(crate) fn corpus(conn: &Conn) -> Result<(u64, f64)> {
    conn.query_one("SELECT count(*), coalesce(avg(terms), 0) FROM code_term_docs", &[], |r| {
        Ok((u64::try_from(r.i64(0)?).unwrap_or(0), r.opt_f64(1)?.unwrap_or(0.0)))
    })
}

/// A file's terms and their counts (none when it is not indexed).
pub(crate) fn file_terms(conn: &Conn, file: &str) -> Result<Vec<(String, u32)>> {
    let vector = conn.query_opt(
        "SELECT v.vector FROM code_term_docs d JOIN code_term_vectors v USING (doc_id) WHERE d.resource_uri = ?1",
        vals![file],
        |r| r.string(0),
    )?;
    match vector {
        Some(text) => parse_vector(file, &text),
        None => Ok(Vec::new()),
    }
}

/// How many files hold each of `terms` (a term no file holds is left out).
pub(crate) fn document_frequencies(conn: &Conn, terms: &[String]) -> Result<HashMap<String, u64>> {
    Ok(conn
        .query_vec("SELECT term, df FROM code_term_stats WHERE term IN rarray(?1)", vals![terms], |r| {
            Ok((r.string(0)?, u64::try_from(r.i64(1)?).unwrap_or(0)))
        })?
        .into_iter()
        .collect())
}

/// Every posting of `terms`: (the term's index, doc_id, its count, the file's length), in one query.
pub(crate) fn postings(conn: &Conn, terms: &[String]) -> Result<Vec<(usize, i64, u32, u32)>> {
    let index: HashMap<&str, usize> = terms.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    let mut out = Vec::new();
    conn.for_each(
        "SELECT t.term, t.doc_id, t.tf, d.terms FROM code_terms t JOIN code_term_docs d USING (doc_id)
         WHERE t.term IN rarray(?1)",
        vals![terms],
        |r| {
            if let Some(&i) = index.get(r.str(0)?) {
                let count = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
                out.push((i, r.i64(1)?, count(r.i64(2)?), count(r.i64(3)?)));
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// The files of these documents, in the same order (an unknown key is an error).
pub(crate) fn document_files(conn: &Conn, docs: &[i64]) -> Result<Vec<String>> {
    let found: HashMap<i64, String> = conn
        .query_vec("SELECT doc_id, resource_uri FROM code_term_docs WHERE doc_id IN rarray(?1)", vals![docs], |r| {
            Ok((r.i64(0)?, r.string(1)?))
        })?
        .into_iter()
        .collect();
    docs.iter()
        .map(|d| {
            found.get(d).cloned().ok_or_else(|| Error::Corrupt {
                table: "code_term_docs",
                key: d.to_string(),
                reason: "a posting's document is missing".into(),
            })
        })
        .collect()
}
