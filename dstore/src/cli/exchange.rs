//! `init`, `import`, `import-graph`, `ingest`, `export`, `export-graph`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use decision_store::ingest::IngestOptions;
use decision_store::store::{Commit, ImportOptions, ImportReport};

use super::{print_json, render, stderr_is_terminal, Format};
use crate::app::errors::{CmdResult, Failure};
use crate::app::open::{open_read, open_write};
use crate::app::text::count;

/// `dstore redact`: the library's `Store::redact`, by the login name unless `--by`.
pub fn redact(db: &Path, id: &str, fields: &[String], reason: &str, by: Option<String>, format: Format) -> CmdResult {
    let actor = by
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| Failure::usage("say who redacts with --by NAME (no $USER is set)"))?;
    // Found in a read-only open first: a path that holds no store is not created.
    let id = open_read(db)?.find_decision(id)?;
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let redaction = open_write(db)?.redact(id, &fields, reason, &actor)?;
    if format == Format::Json {
        print_json(&redaction)?;
    } else {
        println!(
            "{id}: {} redacted by {} at {}; the log holds the redaction, and check still verifies it",
            redaction.fields.join(", "),
            redaction.actor,
            redaction.redacted_at
        );
    }
    Ok(0)
}

pub fn init(db: &Path) -> CmdResult {
    let store = open_write(db)?;
    eprintln!("dstore: {} is a decision store (schema version {})", store.display_name(), store.schema_version()?);
    Ok(0)
}

/// Opens an input file, or stdin for `-`; also returns its size when known.
fn input(path: &Path) -> Result<(Box<dyn BufRead>, Option<u64>), Failure> {
    if path == Path::new("-") {
        return Ok((Box::new(BufReader::with_capacity(1 << 16, io::stdin().lock())), None));
    }
    let file = File::open(path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let size = file.metadata().ok().map(|m| m.len());
    Ok((Box::new(BufReader::with_capacity(1 << 16, file)), size))
}

/// A progress line on a terminal; nothing when stderr is piped.
fn progress(total: Option<u64>) -> impl FnMut(&ImportReport) {
    let show = stderr_is_terminal();
    move |r: &ImportReport| {
        if show {
            let pct = total
                .filter(|t| *t > 0)
                .map(|t| format!(" ({:.0}%)", r.bytes as f64 * 100.0 / t as f64))
                .unwrap_or_default();
            eprint!("\r\x1b[Kdstore: {} lines, {}{pct}", r.lines, render::bytes(r.bytes));
        }
    }
}

fn clear_progress() {
    if stderr_is_terminal() {
        eprint!("\r\x1b[K");
    }
}

fn options(args: &super::CommitArgs) -> ImportOptions {
    let commit = match (args.batch, args.atomic) {
        (_, true) => Commit::Atomic,
        (Some(n), false) => Commit::Every(usize::try_from(n).unwrap_or(usize::MAX)),
        (None, false) => Commit::Bounded,
    };
    ImportOptions { commit }
}

pub fn import(db: &Path, file: &Path, commit: &super::CommitArgs) -> CmdResult {
    let (reader, size) = input(file)?;
    let mut store = open_write(db)?;
    let result = store.import_decisions(reader, options(commit), progress(size));
    clear_progress();
    let report = result.map_err(|e| about(file, e.into()))?;
    eprintln!("dstore: {}: {report}", file.display());
    Ok(0)
}

pub fn copy(src: &Path, dst: &Path, format: super::Format) -> CmdResult {
    let from = open_read(src)?;
    let mut to = open_write(dst)?;
    let report = from.copy_into(&mut to, |r| {
        if stderr_is_terminal() {
            eprint!("\rdstore: copied {} decisions, {} nodes, {} edges", r.decisions, r.nodes, r.edges);
        }
    });
    clear_progress();
    let report = report?;
    if format == super::Format::Json {
        super::print_json(&report)?;
    } else {
        let (from, to) = (from.display_name(), to.display_name());
        let mut log = vec![count(report.decisions, "decision"), count(report.supersessions, "supersession")];
        if report.redactions > 0 {
            log.push(count(report.redactions, "redaction"));
        }
        eprintln!(
            "dstore: copied {}, {} and {} from {from} to {to}; both have digest {}",
            log.join(", "),
            count(report.nodes, "node"),
            count(report.edges, "edge"),
            report.digest
        );
    }
    Ok(0)
}

pub fn import_graph(db: &Path, nodes: &Path, edges: &Path, commit: &super::CommitArgs) -> CmdResult {
    let (n, n_size) = input(nodes)?;
    let (e, e_size) = input(edges)?;
    let mut store = open_write(db)?;
    let total = n_size.zip(e_size).map(|(a, b)| a + b);
    let result = store.import_graph(n, e, options(commit), progress(total));
    clear_progress();
    let (nr, er) =
        result.map_err(|e| about(Path::new(&format!("{} / {}", nodes.display(), edges.display())), e.into()))?;
    let batches = nr.batches + er.batches;
    eprintln!(
        "dstore: imported {} nodes and {} edges, {batches} batch{} committed",
        nr.imported,
        er.imported,
        if batches == 1 { "" } else { "es" }
    );
    Ok(0)
}

pub fn export(db: &Path, plan: Option<&str>) -> CmdResult {
    let store = open_read(db)?;
    let plan = plan.map(|p| store.find_plan(p)).transpose()?;
    store.export_decisions(plan, BufWriter::with_capacity(1 << 16, io::stdout().lock()))?;
    Ok(0)
}

pub fn export_graph(db: &Path, nodes: &Path, edges: &Path) -> CmdResult {
    let store = open_read(db)?;
    let create = |p: &Path| {
        File::create(p)
            .map(BufWriter::new)
            .map_err(|e| Failure::from(io::Error::new(e.kind(), format!("{}: {e}", p.display()))))
    };
    let (mut n, mut e) = (create(nodes)?, create(edges)?);
    let (nc, ec) = store.export_graph(&mut n, &mut e)?;
    n.flush()?;
    e.flush()?;
    eprintln!("dstore: wrote {nc} nodes to {} and {ec} edges to {}", nodes.display(), edges.display());
    Ok(0)
}

/// `failure` with its message prefixed by the input it is about.
fn about(path: &Path, mut failure: Failure) -> Failure {
    failure.message = format!("{}: {}", path.display(), failure.message);
    failure
}

pub fn ingest(db: &Path, path: &Path, max_file_bytes: u64, history: bool, format: super::Format) -> CmdResult {
    let mut store = open_write(db)?;
    let report =
        store.ingest(path, IngestOptions::default().with_max_file_bytes(max_file_bytes).with_history(history))?;
    if format == super::Format::Json {
        super::print_json(&report)?;
        return Ok(0);
    }
    let mut out = super::stdout();
    let r = &report;
    writeln!(
        out,
        "ingested {}: {} files ({} parsed, {} unchanged, {} removed); nodes +{} ~{} -{}; edges +{} -{}",
        path.display(),
        r.files,
        r.parsed,
        r.unchanged,
        r.removed_files,
        r.nodes_added,
        r.nodes_changed,
        r.nodes_removed,
        r.edges_added,
        r.edges_removed
    )?;
    let h = &r.history;
    match (&h.head, &h.none) {
        (Some(head), _) => writeln!(
            out,
            "history: {} commits read to {} ({} linked no files), {} co_changed links{}",
            h.commits,
            &head[..head.len().min(12)],
            h.skipped,
            h.links,
            if h.restarted { "; read afresh: the last commit read is no longer an ancestor of HEAD" } else { "" }
        )?,
        (None, Some(why)) => writeln!(out, "history: none ({why})")?,
        (None, None) => {}
    }
    // On a first ingest every file is new: list them only when some were not.
    if r.unchanged > 0 || r.removed_files > 0 {
        for p in &r.parsed_files {
            writeln!(out, "  parsed   {p}")?;
        }
        for p in &r.removed {
            writeln!(out, "  removed  {}", p.trim_start_matches("project://"))?;
        }
    }
    if !r.parse_errors.is_empty() {
        writeln!(out, "{} files with syntax errors (ingested as far as they parse):", r.parse_errors.len())?;
        for p in &r.parse_errors {
            writeln!(out, "  {p}")?;
        }
    }
    if !r.skipped.is_empty() {
        writeln!(out, "{} skipped:", r.skipped.len())?;
        for s in &r.skipped {
            writeln!(out, "  {}: {}", s.path, s.reason)?;
        }
    }
    out.flush()?;
    Ok(0)
}
