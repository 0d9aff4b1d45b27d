//! Ingest and context on a large tree (issue 27's speed targets):
//!
//!     cargo bench --bench big_tree [-- LINES [COMMITS]]
//!
//! Writes, once, under target/bench-data, a generated source tree of LINES
//! lines (default 1,000,000; Python packages and Rust crates that import
//! and call one another, `benches/workload.rs`) in a git repository with
//! COMMITS commits (default 2,000) after the first, each changing 2 to 5
//! files. Then measures, each in a fresh store:
//!
//! - ingest of the tree with its history and lexical index (target: 10 s),
//!   by `target/release/dstore ingest` (build it first) and in this process;
//! - ingest again, unchanged (target: 1 s);
//! - `project` at 8,000 tokens with the defaults, from 60 files (target: p50
//!   50 ms), in this process and through `dstore project` (a process each).

#[allow(dead_code)]
#[path = "workload.rs"]
mod workload;

// The allocator `dstore` ships with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use decision_store::ingest::IngestOptions;
use decision_store::projection::{Cl100k, DepthBreadthProjector, ProjectionSpec};
use decision_store::Store;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The tree, written with its history unless it is there already.
fn tree(lines: usize, commits: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/bench-data/tree-{lines}-{commits}"));
    if dir.join(".git").join("done").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stats = workload::write_source_tree(&dir, lines, 27).unwrap();
    eprintln!("wrote {} files, {} lines; committing {commits} changes", stats.files, stats.lines);
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "the tree"]);
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "py" || x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut rng = workload::Rng::new(7);
    for c in 0..commits {
        // Files of one package change together more often than not.
        let first = rng.below(files.len());
        for k in 0..2 + rng.below(4) {
            let i = if rng.below(3) == 0 { rng.below(files.len()) } else { (first + k).min(files.len() - 1) };
            let comment = if files[i].extension().is_some_and(|x| x == "rs") { "//" } else { "#" };
            let mut text = std::fs::read_to_string(&files[i]).unwrap();
            text.push_str(&format!("{comment} change {c}\n"));
            std::fs::write(&files[i], text).unwrap();
        }
        git(&dir, &["commit", "-q", "-a", "-m", &format!("change {c}")]);
    }
    std::fs::write(dir.join(".git").join("done"), "").unwrap();
    dir
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.replace('_', "").parse().ok()).collect();
    let lines = args.first().copied().unwrap_or(1_000_000);
    let commits = args.get(1).copied().unwrap_or(2000);
    let dir = tree(lines, commits);
    // Warm: the tree's files (and the repository's) read once, as after a checkout.
    let warm = Command::new("sh")
        .arg("-c")
        .arg(format!("find '{}' -type f -exec cat {{}} + > /dev/null", dir.display()))
        .status();
    assert!(warm.is_ok_and(|s| s.success()));
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("big.db");

    let dstore = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/dstore");
    if dstore.exists() {
        // What a user runs: the release binary, with its allocator for the parsers too.
        let scratch = work.path().join("cli.db");
        let started = Instant::now();
        let out = Command::new(&dstore).arg("ingest").arg(&scratch).arg(&dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        println!("dstore ingest, a fresh store: {:.2} s (goal 10 s)", started.elapsed().as_secs_f64());
        let started = Instant::now();
        let out = Command::new(&dstore).arg("ingest").arg(&scratch).arg(&dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        println!("dstore ingest again, unchanged: {:.0} ms (goal 1 s)", started.elapsed().as_secs_f64() * 1e3);
    } else {
        println!("dstore ingest: no target/release/dstore (cargo build --release): not measured");
    }
    let started = Instant::now();
    let report = Store::open(&db).unwrap().ingest(&dir, IngestOptions::default()).unwrap();
    let fresh = started.elapsed().as_secs_f64();
    println!(
        "Store::ingest, in process, {lines} lines, {} files, {} commits: {fresh:.2} s: {} nodes, {} edges, {} files indexed, {} co_changed links, {} transactions",
        report.files,
        report.history.commits,
        report.nodes_added,
        report.edges_added,
        report.indexed,
        report.history.links,
        report.batches
    );
    let started = Instant::now();
    let again = Store::open(&db).unwrap().ingest(&dir, IngestOptions::default()).unwrap();
    let unchanged = started.elapsed().as_secs_f64();
    assert!(again.is_unchanged(), "{again:?}");
    println!("Store::ingest again, unchanged, in process: {:.0} ms", unchanged * 1e3);

    let store = Store::open_read_only(&db).unwrap();
    let mut files: Vec<String> = Vec::new();
    store
        .for_each_node(|n| {
            if n.kind == "file" {
                files.push(n.uri);
            }
            Ok(())
        })
        .unwrap();
    let step = (files.len() / 60).max(1);
    let focus: Vec<&String> = files.iter().step_by(step).take(60).collect();
    let mut times = Vec::new();
    let mut tokens = 0;
    for f in &focus {
        let spec = ProjectionSpec::for_focus([f.as_str()]).unwrap();
        let started = Instant::now();
        let set = store
            .read_snapshot(|s| DepthBreadthProjector::new().project_fragments(s, &spec, &Cl100k, Some(8000)))
            .unwrap();
        times.push(started.elapsed().as_secs_f64() * 1e3);
        tokens += set.total_tokens;
    }
    times.sort_by(f64::total_cmp);
    println!(
        "project, 8,000 tokens, defaults, in process: p50 {:.1} ms, p99 {:.1} ms (goal p50 50 ms), {} tokens on average",
        pct(&times, 0.5),
        pct(&times, 0.99),
        tokens / focus.len()
    );
    if dstore.exists() {
        let mut times = Vec::new();
        for f in focus.iter().take(20) {
            let started = Instant::now();
            let out = Command::new(&dstore)
                .args([
                    "project",
                    db.to_str().unwrap(),
                    "--focus",
                    f,
                    "--fragments",
                    "--budget",
                    "8000",
                    "--format",
                    "json",
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!("dstore project --fragments --budget 8000, a process each: p50 {:.1} ms", pct(&times, 0.5));
    }
}
