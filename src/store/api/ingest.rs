//! `Store::ingest`: the graph of a source tree.

use std::path::Path;

use crate::error::Result;
use crate::ingest::{IngestOptions, IngestReport};
use crate::store::workflows::history;
use crate::store::workflows::ingest::ingest;
use crate::store::Store;

impl Store {
    /// Builds (or brings up to date) the UKO graph of the source files under
    /// `root` (Python and Rust, and TypeScript, JavaScript and Go with their
    /// features `lang-typescript`, `lang-javascript`, `lang-go`), their
    /// lexical index, and (with `options.history`, when `root` is in a git
    /// work tree) the `co_changed` links of its history. Re-ingesting an
    /// unchanged tree writes nothing; after an edit only the changed files'
    /// nodes, and the edges that change with them, are written; files gone
    /// from the tree take their nodes with them. `docs/ingest.md` lists the
    /// nodes, views and edges of each language.
    ///
    /// The tree is read and parsed (on every core) outside any transaction;
    /// the changes are then written in transactions of at most
    /// [`INGEST_BOUND`](crate::store::INGEST_BOUND) rows, so other writers never
    /// wait long for an ingest. Changes that fit in one (an edit of a few
    /// files) are written atomically.
    ///
    /// # Errors
    /// [`crate::Error::Validation`] when `root` is not a directory,
    /// [`crate::Error::Io`] when it cannot be read, [`crate::Error::Storage`]
    /// when the store cannot be written, [`crate::Error::Busy`] when other
    /// writers kept changing the graph while the ingest planned.
    pub fn ingest(&mut self, root: impl AsRef<Path>, options: IngestOptions) -> Result<IngestReport> {
        self.writable()?;
        let first_load = self.is_first_load()?;
        // `git log` runs beside the parsing.
        let reading = if options.history { Some(history::start(&self.conn, root.as_ref())?) } else { None };
        let run = || ingest(&self.conn, root.as_ref(), options, first_load);
        // The graph's indexes take keys in no order (URIs, terms): a cache
        // of 128 MiB while the ingest writes keeps them in memory.
        let mut report = match self.conn.sqlite() {
            Some(c) => crate::store::engine::sqlite::with_cache(c, 128 << 10, run)?,
            None => run()?,
        };
        if let Some(reading) = reading {
            history::update(&self.conn, root.as_ref(), reading, &mut report.history)?;
        } else {
            report.history.none = Some("not read (--no-history)".into());
        }
        Ok(report)
    }
}
