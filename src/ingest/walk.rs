//! Walking a source tree: which files an ingest takes, read and hashed,
//! with the files that map imports to them (tsconfig.json, go.mod), and
//! parsing many of them at once on every core.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{
    content_version, file_uri, parse_file, FileGraph, ImportConfig, IngestOptions, IngestReport, Language, Root,
    SkippedFile, SKIPPED_DIRS,
};

/// A source file read from the tree.
pub(crate) struct Found {
    pub(crate) relative: PathBuf,
    pub(crate) uri: String,
    pub(crate) language: Language,
    pub(crate) text: String,
    pub(crate) version: String,
}

/// The walk: source files read (in path order), and those that could not
/// be; and what the files that map imports say.
pub(crate) fn walk(root: &Path, options: IngestOptions, report: &mut IngestReport) -> (Vec<Found>, ImportConfig) {
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
    let mut imports = ImportConfig::default();
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
        if entry.file_name().to_str().is_some_and(ImportConfig::wants) {
            // One that cannot be read maps nothing: imports through it are left out.
            let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
            let small = entry.metadata().is_ok_and(|m| m.len() <= options.max_file_bytes);
            if let (Some(relative), true, Ok(text)) = (relative.to_str(), small, std::fs::read_to_string(entry.path()))
            {
                imports.add(&relative.replace(std::path::MAIN_SEPARATOR, "/"), &text);
            }
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
    (found, imports)
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

/// Parses `files` on every core (tree-sitter parsers are per thread), in order.
pub(crate) fn parse_all(root: &Root, files: &[&Found]) -> Vec<FileGraph> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let mut parsed: Vec<(usize, FileGraph)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        mine.push((i, parse_file(root, &f.relative, f.language, &f.text)));
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a parser thread panicked")).collect()
    });
    parsed.sort_unstable_by_key(|(i, _)| *i);
    parsed.into_iter().map(|(_, g)| g).collect()
}
