//! `Store::ingest`: keeps the graph in step with a source tree.
//!
//! Files are found by ripgrep's walker (`.gitignore` honoured, hidden files
//! and [`SKIPPED_DIRS`] left out, symlinks followed with loops detected),
//! read and hashed. Only files whose hash differs from the stored file
//! node's version are parsed; their nodes are replaced where their own
//! version (the hash of their text) changed, nodes that went are removed
//! with their edges, and the file's references are stored. Then every
//! stored reference is resolved against the nodes present, and only the
//! edges that differ from the stored ones are written. All in one
//! transaction: a failure leaves the graph as it was.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::db::{vals, Conn};
use super::graph::{remove_nodes_in, upsert_edges_in, upsert_nodes_in};
use super::Store;
use crate::error::{Error, Result};
use crate::ingest::{content_version, file_uri, parse_file, FileGraph, Language, Root, SKIPPED_DIRS};
use crate::uko::UkoEdge;

/// The relations `ingest` derives (and so owns between ingested nodes).
pub const CODE_RELATIONS: [&str; 6] = ["contains", "imports", "calls", "inherits", "implements", "references"];

/// How [`Store::ingest`] reads a tree.
#[derive(Clone, Copy, Debug)]
pub struct IngestOptions {
    /// Files larger than this are skipped (and reported).
    pub max_file_bytes: u64,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions { max_file_bytes: 1 << 20 }
    }
}

/// A file `ingest` could not take, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Relative to the root, or the walker's path when it named one.
    pub path: String,
    pub reason: String,
}

/// What [`Store::ingest`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IngestReport {
    /// Source files found (Python and Rust).
    pub files: u64,
    /// New or changed files, parsed.
    pub parsed: u64,
    pub unchanged: u64,
    /// Files stored before and gone from the tree now: their nodes went.
    pub removed_files: u64,
    pub nodes_added: u64,
    pub nodes_changed: u64,
    pub nodes_removed: u64,
    pub edges_added: u64,
    pub edges_removed: u64,
    /// The files parsed (new or changed), relative to the root.
    pub parsed_files: Vec<String>,
    /// The files gone from the tree whose nodes were removed, as `project://` URIs.
    pub removed: Vec<String>,
    /// Files parsed with syntax errors: what tree-sitter recovered is ingested.
    pub parse_errors: Vec<String>,
    /// Files not read: too large, unreadable, not UTF-8, a symlink loop. A
    /// skipped file that was ingested before keeps its nodes.
    pub skipped: Vec<SkippedFile>,
}

impl IngestReport {
    /// True when the store was not changed.
    pub fn is_unchanged(&self) -> bool {
        self.parsed == 0
            && self.removed_files == 0
            && self.nodes_added + self.nodes_changed + self.nodes_removed == 0
            && self.edges_added + self.edges_removed == 0
    }
}

/// A source file read from the tree.
struct Found {
    relative: PathBuf,
    uri: String,
    language: Language,
    text: String,
    version: String,
}

/// The walk: source files read, and those that could not be.
fn walk(root: &Path, options: IngestOptions, report: &mut IngestReport) -> Vec<Found> {
    let walker = ignore::WalkBuilder::new(root)
        .follow_links(true)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| {
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            !(is_dir && e.depth() > 0 && e.file_name().to_str().is_some_and(|n| SKIPPED_DIRS.contains(&n)))
        })
        .build();
    let mut found = Vec::new();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                report.skipped.push(SkippedFile { path: error_path(&e, root), reason: e.to_string() });
                continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(language) = Language::of(entry.path()) else { continue };
        let relative = entry.path().strip_prefix(root).unwrap_or(entry.path()).to_path_buf();
        let shown = relative.display().to_string();
        report.files += 1;
        if relative.to_str().is_none() {
            // Two such names could map to one URI: refuse rather than mix them up.
            report.skipped.push(SkippedFile { path: shown, reason: "the path is not UTF-8".into() });
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if size > options.max_file_bytes {
            report.skipped.push(SkippedFile {
                path: shown,
                reason: format!("{size} bytes, over the limit of {} bytes", options.max_file_bytes),
            });
            continue;
        }
        let bytes = match std::fs::read(entry.path()) {
            Ok(b) => b,
            Err(e) => {
                report.skipped.push(SkippedFile { path: shown, reason: format!("unreadable: {e}") });
                continue;
            }
        };
        let version = content_version(&bytes);
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                report
                    .skipped
                    .push(SkippedFile { path: shown, reason: format!("not UTF-8 (invalid byte at offset {at})") });
                continue;
            }
        };
        found.push(Found { uri: file_uri(&relative), relative, language, text, version });
    }
    found
}

/// The path an error of the walker names, relative to the root where it can be.
fn error_path(e: &ignore::Error, root: &Path) -> String {
    match e {
        ignore::Error::WithPath { path, .. } => path.strip_prefix(root).unwrap_or(path).display().to_string(),
        ignore::Error::Loop { child, .. } => child.strip_prefix(root).unwrap_or(child).display().to_string(),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => error_path(err, root),
        _ => String::new(),
    }
}

/// Replaces one file's nodes and references with `graph`'s, touching only what changed.
fn sync_file(tx: &Conn, file: &str, graph: FileGraph, report: &mut IngestReport) -> Result<()> {
    let stored: HashMap<String, Option<String>> = tx
        .query_vec(
            "SELECT uri, version FROM uko_nodes WHERE resource_uri = ?1 AND domain = 'uko-code:'",
            vals![file],
            |r| Ok((r.string(0)?, r.opt_string(1)?)),
        )?
        .into_iter()
        .collect();
    let fresh: HashSet<&str> = graph.nodes.iter().map(|n| n.uri.as_str()).collect();
    let gone: Vec<String> = stored.keys().filter(|u| !fresh.contains(u.as_str())).cloned().collect();
    report.nodes_removed += remove_nodes_in(tx, &gone)? as u64;
    for node in &graph.nodes {
        match stored.get(&node.uri) {
            Some(v) if *v == node.version => continue,
            Some(_) => report.nodes_changed += 1,
            None => report.nodes_added += 1,
        }
        upsert_nodes_in(tx, std::slice::from_ref(node))?;
    }
    tx.execute("DELETE FROM uko_code_references WHERE resource_uri = ?1", vals![file])?;
    let mut insert = tx.prepare(INSERT_REFERENCE)?;
    for r in &graph.references {
        insert.execute(vals![file, &r.from, r.relation, &r.name])?;
    }
    Ok(())
}

/// Files whose references say they contain a node that no longer exists:
/// another file took a URI they define too, and has dropped it since.
fn orphaned_claims(tx: &Conn) -> Result<HashSet<String>> {
    let files = tx.query_vec(
        "SELECT DISTINCT r.resource_uri FROM uko_code_references r
         WHERE r.relation = 'contains' AND NOT EXISTS (SELECT 1 FROM uko_nodes n WHERE n.uri = r.name)",
        &[],
        |r| r.string(0),
    )?;
    Ok(files.into_iter().collect())
}

/// Removes a file that left the tree: its nodes, their edges, its
/// references (a sync to an empty file graph).
fn remove_file(tx: &Conn, file: &str, report: &mut IngestReport) -> Result<()> {
    sync_file(tx, file, FileGraph::default(), report)?;
    report.removed_files += 1;
    report.removed.push(file.to_owned());
    Ok(())
}

/// Method names of the standard types of both languages: a call `x.f()` of
/// one of these on a receiver of unknown type is left out.
const COMMON_METHODS: &[&str] = &[
    "add",
    "append",
    "as_ref",
    "as_str",
    "clear",
    "clone",
    "close",
    "collect",
    "contains",
    "copy",
    "count",
    "decode",
    "encode",
    "endswith",
    "err",
    "expect",
    "extend",
    "filter",
    "find",
    "flush",
    "format",
    "get",
    "get_mut",
    "index",
    "insert",
    "into",
    "is_empty",
    "is_none",
    "is_some",
    "items",
    "iter",
    "iter_mut",
    "join",
    "keys",
    "len",
    "lower",
    "map",
    "map_err",
    "next",
    "ok",
    "ok_or",
    "pop",
    "push",
    "push_str",
    "read",
    "remove",
    "replace",
    "reverse",
    "send",
    "sort",
    "split",
    "startswith",
    "strip",
    "to_owned",
    "to_string",
    "unwrap",
    "unwrap_or",
    "unwrap_or_default",
    "update",
    "upper",
    "values",
    "write",
];

/// The last part of a definition's URI: `function://a.B.run` is `run`.
fn short_name(uri: &str) -> &str {
    let path = uri.split_once("://").map_or(uri, |(_, p)| p);
    path.rsplit('.').next().unwrap_or(path)
}

/// Resolves every stored reference against the ingested nodes, and writes
/// the edges that differ from the stored ones.
fn resolve(tx: &Conn, report: &mut IngestReport) -> Result<()> {
    // Ingested nodes: URI -> file, and definitions by short name.
    let mut file_of: HashMap<String, String> = HashMap::new();
    let mut by_name: HashMap<(&'static str, String), Vec<String>> = HashMap::new();
    {
        let rows = tx.query_vec(
            "SELECT uri, kind, resource_uri FROM uko_nodes WHERE resource_uri IS NOT NULL AND domain = 'uko-code:'",
            &[],
            |r| Ok((r.string(0)?, r.string(1)?, r.string(2)?)),
        )?;
        for (uri, kind, file) in rows {
            let group = match kind.as_str() {
                "function" => Some("function"),
                "class" => Some("class"),
                _ => None,
            };
            if let Some(g) = group {
                by_name.entry((g, short_name(&uri).to_owned())).or_default().push(uri.clone());
            }
            file_of.insert(uri, file);
        }
    }
    // By name: the one definition of that name, else the one in the referring file; else none.
    let pick = |group: &'static str, name: &str, file: &str| -> Option<String> {
        let all = by_name.get(&(group, name.to_owned()))?;
        if all.len() == 1 {
            return Some(all[0].clone());
        }
        let mut here = all.iter().filter(|u| file_of.get(*u).is_some_and(|f| f == file));
        match (here.next(), here.next()) {
            (Some(u), None) => Some(u.clone()),
            _ => None,
        }
    };
    let mut wanted: BTreeSet<(String, String, String)> = BTreeSet::new();
    {
        for (file, from, relation, name) in code_references(tx)? {
            if !file_of.contains_key(&from) {
                continue;
            }
            let target = match relation.as_str() {
                "contains" => file_of.contains_key(&name).then(|| name.clone()),
                "imports" => {
                    let parent = name.rsplit_once('.').map(|(p, _)| format!("module://{p}"));
                    ["module", "class", "function"]
                        .iter()
                        .map(|s| format!("{s}://{name}"))
                        .chain(parent)
                        .find(|u| file_of.contains_key(u))
                }
                "calls" => match name.strip_prefix('.') {
                    // `x.f()`: the receiver's type is unknown, so a name every
                    // library has (`append`, `get`, `clone`) is not taken for ours.
                    Some(method) if COMMON_METHODS.contains(&method) => None,
                    Some(method) => pick("function", method, &file),
                    None => pick("function", &name, &file),
                },
                "inherits" | "implements" | "references" => pick("class", &name, &file),
                _ => None,
            };
            if let Some(t) = target.filter(|t| *t != from) {
                wanted.insert((from, relation, t));
            }
        }
    }
    let stored: BTreeSet<(String, String, String)> = tx
        .query_vec(
            "SELECT s.uri, e.relation, t.uri FROM uko_edges e
             JOIN uko_nodes s ON s.node_id = e.source_id JOIN uko_nodes t ON t.node_id = e.target_id
             WHERE s.resource_uri IS NOT NULL AND s.domain = 'uko-code:'
               AND t.resource_uri IS NOT NULL AND t.domain = 'uko-code:'
               AND e.relation IN ('contains', 'imports', 'calls', 'inherits', 'implements', 'references')",
            &[],
            |r| Ok((r.string(0)?, r.string(1)?, r.string(2)?)),
        )?
        .into_iter()
        .collect();
    let mut delete = tx.prepare(
        "DELETE FROM uko_edges WHERE source_id = (SELECT node_id FROM uko_nodes WHERE uri = ?1)
           AND relation = ?2 AND target_id = (SELECT node_id FROM uko_nodes WHERE uri = ?3)",
    )?;
    for (s, r, t) in stored.difference(&wanted) {
        delete.execute(vals![s, r, t])?;
        report.edges_removed += 1;
    }
    let added: Vec<UkoEdge> = wanted
        .difference(&stored)
        .map(|(s, r, t)| UkoEdge { source: s.clone(), target: t.clone(), relation: r.clone(), weight: Some(1.0) })
        .collect();
    report.edges_added += added.len() as u64;
    upsert_edges_in(tx, &added)
}

impl Store {
    /// Builds (or brings up to date) the UKO graph of the Python and Rust
    /// files under `root`, in one transaction. Re-ingesting an unchanged
    /// tree writes nothing; after an edit only the changed files' nodes,
    /// and the edges that change with them, are written; files gone from
    /// the tree take their nodes with them. `docs/ingest.md` lists the nodes,
    /// views and edges of each language.
    ///
    /// # Errors
    /// [`Error::Io`] when `root` is not a readable directory,
    /// [`Error::Storage`] when the store cannot be written (nothing is then).
    pub fn ingest(&mut self, root: impl AsRef<Path>, options: IngestOptions) -> Result<IngestReport> {
        let root = root.as_ref();
        if !std::fs::metadata(root)?.is_dir() {
            return Err(Error::validation("path", format!("{} is not a directory", root.display())));
        }
        let root_name = std::fs::canonicalize(root)?
            .file_name()
            .map_or_else(|| "root".to_owned(), |n| n.to_string_lossy().replace(['.', ' '], "_"));
        let package = Root { name: root_name, python_package: root.join("__init__.py").is_file() };
        let mut report = IngestReport::default();
        let mut found = walk(root, options, &mut report);
        if self.conn.is_postgres() {
            // PostgreSQL text cannot hold NUL: such a file is skipped (and keeps what it had), not the ingest failed.
            found.retain(|f| {
                let keep = !f.text.contains('\0');
                if !keep {
                    report.skipped.push(SkippedFile {
                        path: f.relative.display().to_string(),
                        reason: "holds the NUL character (U+0000), which PostgreSQL text cannot store".into(),
                    });
                }
                keep
            });
        }
        self.write(|tx, _| {
            let stored: HashMap<String, Option<String>> = tx
                .query_vec(
                    "SELECT uri, version FROM uko_nodes WHERE kind = 'file' AND resource_uri = uri AND domain = 'uko-code:'",
                    &[],
                    |r| Ok((r.string(0)?, r.opt_string(1)?)),
                )?
                .into_iter()
                .collect();
            let present: HashSet<String> = found.iter().map(|f| f.uri.clone()).collect();
            // A skipped file, or a directory the walk could not read, keeps what it had.
            let skipped: Vec<String> = report.skipped.iter().map(|s| format!("project://{}", s.path)).collect();
            let kept = |uri: &str| {
                present.contains(uri)
                    || skipped.iter().any(|s| uri == s || (uri.starts_with(s.as_str()) && uri[s.len()..].starts_with('/')))
            };
            let mut parsed_any = false;
            for f in &found {
                if stored.get(&f.uri).is_some_and(|v| v.as_deref() == Some(f.version.as_str())) {
                    report.unchanged += 1;
                    continue;
                }
                let graph = parse_file(&package, &f.relative, f.language, &f.text);
                if graph.has_errors {
                    report.parse_errors.push(f.relative.display().to_string());
                }
                report.parsed += 1;
                report.parsed_files.push(f.relative.display().to_string());
                parsed_any = true;
                sync_file(tx, &f.uri, graph, &mut report)?;
            }
            let mut gone: Vec<&String> = stored.keys().filter(|u| !kept(u)).collect();
            gone.sort();
            for uri in gone {
                remove_file(tx, uri, &mut report)?;
            }
            // A URI two files define belongs to the one synced last; when that
            // one drops it, the other file must claim it again.
            if parsed_any || report.removed_files > 0 {
                let orphans = orphaned_claims(tx)?;
                for f in found.iter().filter(|f| orphans.contains(&f.uri)) {
                    let graph = parse_file(&package, &f.relative, f.language, &f.text);
                    sync_file(tx, &f.uri, graph, &mut report)?;
                }
                resolve(tx, &mut report)?;
            }
            Ok(())
        })?;
        Ok(report)
    }
}

/// One code reference: (file it is in, node it is made from, relation, name).
pub(super) type CodeReference = (String, String, String, String);

/// Stores one code reference; one already there is left as it is.
pub(super) const INSERT_REFERENCE: &str =
    "INSERT INTO uko_code_references (resource_uri, from_uri, relation, name) VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT DO NOTHING";

/// Every stored code reference.
pub(super) fn code_references(conn: &Conn) -> Result<Vec<CodeReference>> {
    conn.query_vec("SELECT resource_uri, from_uri, relation, name FROM uko_code_references", &[], |r| {
        Ok((r.string(0)?, r.string(1)?, r.string(2)?, r.string(3)?))
    })
}
