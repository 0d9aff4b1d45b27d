//! Import and export in the interchange format (JSON Lines).

use std::io::{BufRead, Write};

use serde::Serialize;

use crate::decision::PlanId;
use crate::error::{Error, Result};
use crate::store::workflows::import::{import, GraphImport, Pending};
use crate::store::{ImportOptions, ImportReport, Store};

/// One record of a JSON Lines output.
fn write_json_line(out: &mut impl Write, value: &impl Serialize) -> Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")?;
    Ok(())
}

impl Store {
    /// Imports decisions from JSON Lines (the interchange format).
    ///
    /// Records may come in any order; a record waits for its parent or
    /// corrected decision, and a supersession link for its superseding
    /// decision, until they arrive. A record already stored identically is
    /// skipped (its missing supersession link is added), so importing a
    /// file twice is harmless. `progress` is called every 10,000 lines.
    /// Lines are parsed and hashed on a second thread while this one
    /// writes; the reader itself is only read from this thread.
    ///
    /// Commits every few thousand records ([`ImportOptions::commit`]), so
    /// other writers never wait long for it (see the store's `## Locking`).
    ///
    /// # Errors
    /// [`Error::Line`] naming the line for a bad record; an error naming the
    /// records whose references never arrived. The batches committed before
    /// the error stay (importing the file again skips them); with
    /// [`ImportOptions::atomic`] nothing is written.
    ///
    /// # Example
    /// ```
    /// use decision_store::store::ImportOptions;
    /// # let dir = tempfile::tempdir()?;
    /// let mut store = decision_store::Store::open(dir.path().join("a.db"))?;
    /// let line = r#"{"decision_id":"01JD0000000000000000000001","plan_id":"01JD0000000000000000000000","sequence":0,"decision_type":"prompt_definition"}"#;
    /// let report = store.import_decisions(line.as_bytes(), ImportOptions::default(), |_| {})?;
    /// assert_eq!(report.imported, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn import_decisions(
        &mut self,
        reader: impl BufRead,
        options: ImportOptions,
        mut progress: impl FnMut(&ImportReport),
    ) -> Result<ImportReport> {
        self.writable()?;
        let mut reader = reader;
        let first_load = self.is_first_load()?;
        let [report] = import(
            &self.conn,
            first_load,
            [("decisions", &mut reader)],
            options,
            &mut progress,
            &mut Pending::default(),
        )?;
        Ok(report)
    }

    /// Writes decisions as JSON Lines, ordered by plan then sequence: every
    /// plan's, or one plan's.
    ///
    /// # Errors
    /// [`Error::PlanNotFound`] when `plan` has no decisions (nothing is
    /// written); [`Error::Io`] when writing fails, [`Error::Storage`] when
    /// reading does.
    pub fn export_decisions(&self, plan: Option<PlanId>, mut out: impl Write) -> Result<u64> {
        let mut n = 0;
        // One snapshot: a plan is not half written while another process appends to it.
        self.read_snapshot(|store| {
            store.for_each_decision(plan, |d| {
                write_json_line(&mut out, &d)?;
                n += 1;
                Ok(())
            })
        })?;
        if let (Some(plan), 0) = (plan, n) {
            return Err(Error::PlanNotFound(plan.to_string()));
        }
        out.flush()?;
        Ok(n)
    }

    /// Imports UKO nodes, then edges, from JSON Lines (either may be empty),
    /// in batches as [`Store::import_decisions`] does: with
    /// [`ImportOptions::atomic`], a bad line in either leaves the graph
    /// exactly as it was.
    ///
    /// # Errors
    /// [`Error::Input`] naming the input (`nodes` or `edges`) around
    /// [`Error::Line`] naming the line (and, for edges, the unknown node).
    pub fn import_graph(
        &mut self,
        mut nodes: impl BufRead,
        mut edges: impl BufRead,
        options: ImportOptions,
        mut progress: impl FnMut(&ImportReport),
    ) -> Result<(ImportReport, ImportReport)> {
        self.writable()?;
        let sources: [(&'static str, &mut dyn BufRead); 2] = [("nodes", &mut nodes), ("edges", &mut edges)];
        let first_load = self.is_first_load()?;
        let reports = import(&self.conn, first_load, sources, options, &mut progress, &mut GraphImport::default())?;
        Ok((reports[0], reports[1]))
    }

    /// Writes the graph as two JSON Lines streams: nodes by URI, edges by source, relation, target.
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails, [`Error::Storage`] when reading does.
    pub fn export_graph(&self, mut nodes: impl Write, mut edges: impl Write) -> Result<(u64, u64)> {
        // Nodes and edges from one snapshot: no edge names a node the file lacks.
        self.read_snapshot(|store| {
            let (mut n, mut e) = (0, 0);
            store.for_each_node(|node| {
                write_json_line(&mut nodes, &node)?;
                n += 1;
                Ok(())
            })?;
            store.for_each_edge(|edge| {
                write_json_line(&mut edges, &edge)?;
                e += 1;
                Ok(())
            })?;
            nodes.flush()?;
            edges.flush()?;
            Ok((n, e))
        })
    }
}
