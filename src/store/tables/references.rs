//! The code references `ingest` keeps (`uko_code_references`): what each
//! ingested file's definitions name as written, resolved into edges at
//! every ingest.

use crate::error::Result;
use crate::store::engine::{vals, Conn, WriteTx};

/// One code reference: (file it is in, node it is made from, relation, name).
pub(crate) type CodeReference = (String, String, String, String);

/// Stores one code reference; one already there is left as it is.
const INSERT_REFERENCE: &str = "INSERT INTO uko_code_references (resource_uri, from_uri, relation, name) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING";

/// Every stored code reference.
pub(crate) fn all(conn: &Conn) -> Result<Vec<CodeReference>> {
    conn.query_vec("SELECT resource_uri, from_uri, relation, name FROM uko_code_references", &[], |r| {
        Ok((r.string(0)?, r.string(1)?, r.string(2)?, r.string(3)?))
    })
}

/// How many references are stored.
pub(crate) fn count(conn: &Conn) -> Result<i64> {
    conn.query_one("SELECT count(*) FROM uko_code_references", &[], |r| r.i64(0))
}

/// Adds references (those stored already are left as they are).
pub(crate) fn insert<'a>(
    tx: &WriteTx<'_>,
    references: impl IntoIterator<Item = (&'a str, &'a str, &'a str, &'a str)>,
) -> Result<()> {
    let mut insert = tx.prepare(INSERT_REFERENCE)?;
    for (file, from, relation, name) in references {
        insert.execute(vals![file, from, relation, name])?;
    }
    Ok(())
}

/// Removes every reference made in `file`.
#[cfg(feature = "ingest")]
pub(crate) fn remove_file(tx: &WriteTx<'_>, file: &str) -> Result<()> {
    tx.execute("DELETE FROM uko_code_references WHERE resource_uri = ?1", vals![file])?;
    Ok(())
}
