//! `cargo bench`: the performance targets of decision-store, each measured
//! against a bare-SQLite baseline in the same run (see BENCHMARKS.md).
//!
//! The workload (`workload.rs`) is generated once under target/bench-data.
//! After criterion's groups, a summary prints every target as a ratio or a
//! figure, with the per-focus percentiles and peak memory that criterion
//! does not give (measured in child processes of this binary).

mod baseline;
mod workload;

// The allocator both shipped forms of the library run with (`dstore` and
// the Python package), so the library is measured as it ships; the floor,
// in the same process, gets it too. With glibc's malloc the import's parser
// thread, which decodes each decision into owned strings, becomes its
// slowest part (BENCHMARKS.md gives both figures).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use decision_store::ingest::IngestOptions;
use decision_store::projection::{Cl100k, Depth, DepthBreadthProjector, ProjectionSpec};
use decision_store::store::ImportOptions;
use decision_store::{PlanId, Store};

/// The `dstore` of this profile's target directory (the bench runs from
/// its `deps/`), when it has been built.
fn release_dstore() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("dstore");
    path.is_file().then_some(path)
}

fn reader(path: &Path) -> BufReader<std::fs::File> {
    BufReader::with_capacity(1 << 16, std::fs::File::open(path).unwrap())
}

/// The library store with every decision and the graph, imported once.
fn full_store(files: &workload::Files) -> PathBuf {
    let path = files.dir.join("store.db");
    let done = files.dir.join("store.done");
    // A store written by an earlier schema (or a changed migration) is rebuilt.
    if !done.exists() || Store::open_read_only(&path).is_err() {
        let _ = std::fs::remove_file(&path);
        eprintln!("bench: importing the workload into {} (once)", path.display());
        let mut store = Store::open(&path).unwrap();
        store.import_decisions(reader(&files.decisions), ImportOptions::default(), |_| {}).unwrap();
        store.import_graph(reader(&files.nodes), reader(&files.edges), ImportOptions::default(), |_| {}).unwrap();
        std::fs::write(&done, "").unwrap();
    }
    path
}

/// The floor's tables with every decision, an index on (plan_id, sequence)
/// (a stricter floor for reads) and the graph.
fn baseline_store(files: &workload::Files) -> PathBuf {
    let path = files.dir.join("floor.db");
    let done = files.dir.join("floor.done");
    if !done.exists() {
        let _ = std::fs::remove_file(&path);
        let mut conn = baseline::create(&path);
        baseline::import(&mut conn, reader(&files.decisions));
        baseline::index_plans(&conn);
        baseline::import_graph(&mut conn, reader(&files.nodes), reader(&files.edges));
        std::fs::write(&done, "").unwrap();
    }
    path
}

/// The first package node: the focus of the breadth-4 projection.
fn package_focus(files: &workload::Files) -> String {
    use std::io::BufRead;
    let line = reader(&files.nodes)
        .lines()
        .map(Result::unwrap)
        .find(|l| l.contains("\"kind\":\"package\""))
        .expect("the workload has packages");
    serde_json::from_str::<serde_json::Value>(&line).unwrap()["uri"].as_str().unwrap().to_owned()
}

/// One decision as the tree benchmarks write it (the floor writes the same fields).
#[derive(serde::Serialize)]
struct TreeLine<'a> {
    decision_id: decision_store::DecisionId,
    parent_decision_id: Option<decision_store::DecisionId>,
    decision_type: &'static str,
    sequence: u32,
    confidence_score: Option<f64>,
    chosen_option: &'a str,
    corrects_decision_id: Option<decision_store::DecisionId>,
    superseded_by: Option<decision_store::DecisionId>,
}

/// What `dstore tree --format json` and `dstore project --format json`
/// write, without the process: the library's share of the whole-process rows.
fn bench_outputs(c: &mut Criterion, lib: &Path, base: &Path, plan: &str, focus: &str) {
    use std::io::Write;
    let store = Store::open_read_only(lib).unwrap();
    let conn = baseline::open(base);
    let plan_id = PlanId::parse(plan).unwrap();
    let mut g = c.benchmark_group("tree_json");
    g.bench_function("floor", |b| b.iter(|| baseline::write_plan(&conn, plan, &mut std::io::sink())));
    g.bench_function("library", |b| {
        b.iter(|| {
            // What `dstore tree --format json` does: the outline, its view, a line of fields per node.
            let tree = store.decision_tree_outline(plan_id).unwrap();
            let view = tree.view(false);
            let mut out = std::io::sink();
            for n in &view.nodes {
                let d = n.decision;
                let line = TreeLine {
                    decision_id: d.decision_id(),
                    parent_decision_id: d.parent_decision_id(),
                    decision_type: d.decision_type().as_str(),
                    sequence: d.sequence(),
                    confidence_score: d.confidence_score(),
                    chosen_option: d.chosen_option(),
                    corrects_decision_id: d.corrects_decision_id(),
                    superseded_by: d.superseded_by(),
                };
                serde_json::to_writer(&mut out, &line).unwrap();
                out.write_all(b"\n").unwrap();
            }
            view.nodes.len()
        })
    });
    g.finish();
    let projector = DepthBreadthProjector::new();
    let spec = ProjectionSpec::new([focus], 4, Depth::Level(9)).unwrap();
    let mut g = c.benchmark_group("project_b4");
    g.sample_size(20);
    g.bench_function("floor", |b| b.iter(|| baseline::project(&conn, focus, 4, 9, &mut std::io::sink())));
    g.bench_function("library", |b| {
        b.iter(|| {
            let p = projector.project(&store, &spec).unwrap();
            let mut out = std::io::sink();
            for n in &p.nodes {
                serde_json::to_writer(&mut out, n).unwrap();
                out.write_all(b"\n").unwrap();
            }
            p.nodes.len()
        })
    });
    g.finish();
}

/// 100 class nodes, the same every run.
fn foci(files: &workload::Files) -> Vec<String> {
    let mut rng = workload::Rng::new(100);
    (0..100).map(|_| files.class_uris[rng.below(files.class_uris.len())].clone()).collect()
}

fn fresh_db(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

fn bench_import(c: &mut Criterion, files: &workload::Files) {
    let rows = 100_000;
    let mut g = c.benchmark_group("import");
    g.sample_size(10).measurement_time(Duration::from_secs(40)).throughput(Throughput::Elements(rows));
    g.bench_function("baseline", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (_dir, path) = fresh_db("base.db");
                let mut conn = baseline::create(&path);
                let t = Instant::now();
                assert_eq!(baseline::import(&mut conn, reader(&files.decisions)) as u64, rows);
                total += t.elapsed();
            }
            total
        })
    });
    g.bench_function("library", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (_dir, path) = fresh_db("lib.db");
                let mut store = Store::open(&path).unwrap();
                let t = Instant::now();
                let report =
                    store.import_decisions(reader(&files.decisions), ImportOptions::default(), |_| {}).unwrap();
                total += t.elapsed();
                assert_eq!(report.imported, rows);
            }
            total
        })
    });
    // The release `dstore` beside this bench (`cargo build --release -p dstore`).
    let Some(dstore) = release_dstore() else {
        println!("store: SKIPPED import/dstore_process: no release dstore beside the bench (cargo build --release -p dstore)");
        g.finish();
        return;
    };
    g.bench_function("dstore_process", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (_dir, path) = fresh_db("cli.db");
                drop(Store::open(&path).unwrap());
                let t = Instant::now();
                let out = Command::new(&dstore).arg("import").arg(&path).arg(&files.decisions).output().unwrap();
                total += t.elapsed();
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            }
            total
        })
    });
    g.finish();
}

fn bench_plan_load(c: &mut Criterion, lib: &Path, base: &Path, plan: &str) {
    let store = Store::open_read_only(lib).unwrap();
    let conn = rusqlite::Connection::open_with_flags(base, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let plan_id = PlanId::parse(plan).unwrap();
    let mut g = c.benchmark_group("plan_load");
    g.throughput(Throughput::Elements(5000));
    g.bench_function("baseline", |b| b.iter(|| assert_eq!(baseline::read_plan(&conn, plan).len(), 5000)));
    g.bench_function("library", |b| {
        b.iter(|| {
            let tree = store.decision_tree(plan_id).unwrap();
            let effective = tree.effective().len();
            let chains: usize = tree
                .decisions()
                .iter()
                .filter(|d| d.corrects_decision_id().is_none() && !tree.corrected_by(d.decision_id()).is_empty())
                .map(|d| tree.correction_chain(d.decision_id()).len())
                .sum();
            assert!(tree.len() == 5000 && effective > 0 && chains > 0);
        })
    });
    g.finish();
}

fn spec(focus: &str, breadth: u32) -> ProjectionSpec {
    ProjectionSpec::new([focus], breadth, Depth::named("FULL_SOURCE")).unwrap()
}

fn bench_projection(c: &mut Criterion, lib: &Path, foci: &[String]) {
    let store = Store::open_read_only(lib).unwrap();
    let projector = DepthBreadthProjector::new();
    let mut g = c.benchmark_group("projection");
    for breadth in [2u32, 3] {
        g.bench_with_input(BenchmarkId::new("nodes", format!("breadth{breadth}")), &breadth, |b, &breadth| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % foci.len();
                projector.project(&store, &spec(&foci[i], breadth)).unwrap().nodes.len()
            })
        });
    }
    g.bench_function("fragments_breadth3_budget8000", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % foci.len();
            projector.project_fragments(&store, &spec(&foci[i], 3), &Cl100k, Some(8000)).unwrap().total_tokens
        })
    });
    g.finish();
}

/// Per-focus timings (each focus projected `reps` times): p50, p99 and max in ms, and mean nodes.
fn percentiles(lib: &Path, foci: &[String], breadth: u32, fragments: bool, reps: usize) -> (f64, f64, f64, f64) {
    let store = Store::open_read_only(lib).unwrap();
    let projector = DepthBreadthProjector::new();
    let mut times = Vec::new();
    let mut nodes = 0usize;
    for _ in 0..reps {
        for f in foci {
            let t = Instant::now();
            nodes += if fragments {
                projector.project_fragments(&store, &spec(f, breadth), &Cl100k, Some(8000)).unwrap().fragments.len()
            } else {
                projector.project(&store, &spec(f, breadth)).unwrap().nodes.len()
            };
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), *times.last().unwrap(), nodes as f64 / times.len() as f64)
}

/// Peak resident memory of this process (VmHWM), in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Runs in a child process: one measured job, then prints `peak_mib seconds`.
fn probe(kind: &str, args: &[String]) {
    let t = Instant::now();
    match kind {
        "import" => {
            let mut store = Store::open(&args[1]).unwrap();
            store.import_decisions(reader(Path::new(&args[0])), ImportOptions::default(), |_| {}).unwrap();
        }
        "fragments" => {
            let store = Store::open_read_only(&args[0]).unwrap();
            let projector = DepthBreadthProjector::new();
            for f in &args[1..] {
                projector.project_fragments(&store, &spec(f, 3), &Cl100k, Some(8000)).unwrap();
            }
        }
        other => panic!("unknown probe {other}"),
    }
    println!("{} {}", peak_mib(), t.elapsed().as_secs_f64());
}

fn run_probe(kind: &str, args: &[&str]) -> (f64, f64) {
    let out =
        Command::new(std::env::current_exe().unwrap()).env("DSTORE_BENCH_PROBE", kind).args(args).output().unwrap();
    assert!(out.status.success(), "probe {kind}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut it = text.split_whitespace().map(|x| x.parse::<f64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// Criterion's median estimate of one benchmark, in seconds.
fn median(id: &str) -> Option<f64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion").join(id).join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64().map(|ns| ns / 1e9)
}

fn summary(files: &workload::Files, lib: &Path, foci: &[String]) {
    println!("\n== decision-store targets (this run) ==");
    let row = |work: &str, figure: String, target: &str, met: bool| {
        println!("{work:<58} {figure:<34} {target:<22} {}", if met { "met" } else { "NOT MET" });
    };
    if let (Some(base), Some(libt), Some(cli)) =
        (median("import/baseline"), median("import/library"), median("import/dstore_process"))
    {
        let ratio = base / libt;
        row(
            "import 100k decisions, library vs baseline rows/s",
            format!("{:.0} vs {:.0} rows/s = {ratio:.2}x", 1e5 / libt, 1e5 / base),
            ">= 0.80x",
            ratio >= 0.80,
        );
        let r = cli / libt;
        row(
            "dstore import process vs library import",
            format!("{cli:.2} s vs {libt:.2} s = {r:.2}x"),
            "<= 1.3x",
            r <= 1.3,
        );
    }
    if let (Some(base), Some(libt)) = (median("plan_load/baseline"), median("plan_load/library")) {
        let r = libt / base;
        row(
            "load a 5,000-decision plan + tree, chains, effective",
            format!("{:.1} ms vs {:.1} ms = {r:.2}x", libt * 1e3, base * 1e3),
            "<= 1.5x baseline",
            r <= 1.5,
        );
    }
    for (group, work) in [
        ("tree_json", "tree of a 5,000-decision plan as JSON lines"),
        ("project_b4", "project breadth 4, depth 9, JSON lines"),
    ] {
        if let (Some(base), Some(libt)) = (median(&format!("{group}/floor")), median(&format!("{group}/library"))) {
            let r = libt / base;
            row(work, format!("{:.1} ms vs {:.1} ms = {r:.2}x", libt * 1e3, base * 1e3), "<= 1.25x floor", r <= 1.25);
        }
    }
    let (p50, p99, max, n) = percentiles(lib, foci, 2, false, 5);
    row(
        "projection breadth 2, 100 class foci (per focus)",
        format!("p50 {p50:.3} ms, p99 {p99:.2} ms ({n:.0} nodes)"),
        "<= 2 ms median",
        p50 <= 2.0,
    );
    let _ = max;
    let (p50, p99, max, n) = percentiles(lib, foci, 3, false, 5);
    row(
        "projection breadth 3, same foci (per focus)",
        format!("p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.1} ({n:.0} nodes)"),
        "<= 25 ms p99",
        p99 <= 25.0,
    );
    let (p50, p99, _, n) = percentiles(lib, foci, 3, true, 2);
    let mut args: Vec<&str> = vec![lib.to_str().unwrap()];
    args.extend(foci.iter().map(String::as_str));
    let (peak, _) = run_probe("fragments", &args);
    row(
        "fragments breadth 3, exact tokens, 8,000 budget",
        format!("p50 {p50:.1} ms, p99 {p99:.1} ms ({n:.0} frags), peak {peak:.0} MiB"),
        "<= 100 ms median, 100 MB",
        p50 <= 100.0 && peak <= 100.0,
    );
    if let (Some(fresh), Some(again)) = (median("ingest/python_tree"), median("ingest/python_tree_unchanged")) {
        let lines = std::fs::read_to_string(files.dir.join("tree-132k.done")).unwrap_or_default();
        row(&format!("ingest a source tree of {lines} lines"), format!("{fresh:.2} s"), "<= 10 s", fresh <= 10.0);
        row("ingest it again, unchanged", format!("{:.0} ms", again * 1e3), "<= 1 s", again <= 1.0);
    }
    if std::env::var_os("DSTORE_BENCH_SKIP_1M").is_none() {
        let big = files.dir.join("decisions-1m.jsonl");
        if !big.exists() {
            eprintln!("bench: writing 1,000,000 decisions to {} (once)", big.display());
            let resources: Vec<String> = files.class_uris.iter().take(20_000).cloned().collect();
            workload::write_decisions(&big, 200, 5000, &resources, 11);
        }
        let (_d1, db1) = fresh_db("m100k.db");
        let (_d2, db2) = fresh_db("m1m.db");
        let (small, t_small) = run_probe("import", &[files.decisions.to_str().unwrap(), db1.to_str().unwrap()]);
        let (large, t_large) = run_probe("import", &[big.to_str().unwrap(), db2.to_str().unwrap()]);
        let r = large / small;
        row(
            "import memory: peak for 1,000,000 vs 100,000 decisions",
            format!("{large:.1} vs {small:.1} MiB = {r:.2}x ({t_large:.0} s, {t_small:.1} s)"),
            "<= 1.2x",
            r <= 1.2,
        );
    }
}

/// A source tree of 132,000 lines (written once): Python packages and Rust
/// crates whose modules import and call one another
/// ([`workload::write_source_tree`], the tree `tests/it/writers.rs` ingests).
fn python_tree(files: &workload::Files) -> PathBuf {
    let root = files.dir.join("tree-132k");
    let done = files.dir.join("tree-132k.done");
    if done.exists() {
        return root;
    }
    let _ = std::fs::remove_dir_all(&root);
    let stats = workload::write_source_tree(&root, 132_000, 3).unwrap();
    eprintln!("bench: wrote a source tree of {} lines to {}", stats.lines, root.display());
    std::fs::write(&done, stats.lines.to_string()).unwrap();
    root
}

fn bench_ingest(c: &mut Criterion, files: &workload::Files) {
    let tree = python_tree(files);
    let mut g = c.benchmark_group("ingest");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("python_tree", |b| {
        b.iter_with_setup(
            || fresh_db("ingest.db"),
            |(_dir, db)| Store::open(&db).unwrap().ingest(&tree, IngestOptions::default()).unwrap(),
        )
    });
    let (_dir, db) = fresh_db("ingest-again.db");
    let mut store = Store::open(&db).unwrap();
    store.ingest(&tree, IngestOptions::default()).unwrap();
    g.bench_function("python_tree_unchanged", |b| {
        b.iter(|| assert!(store.ingest(&tree, IngestOptions::default()).unwrap().is_unchanged()))
    });
    g.finish();
}

fn main() {
    if let Ok(kind) = std::env::var("DSTORE_BENCH_PROBE") {
        let args: Vec<String> = std::env::args().skip(1).collect();
        probe(&kind, &args);
        return;
    }
    let files = workload::standard();
    let lib = full_store(&files);
    let base = baseline_store(&files);
    let foci = foci(&files);
    let mut c = Criterion::default().configure_from_args();
    bench_import(&mut c, &files);
    bench_plan_load(&mut c, &lib, &base, &files.plan_ids[0]);
    bench_outputs(&mut c, &lib, &base, &files.plan_ids[0], &package_focus(&files));
    bench_projection(&mut c, &lib, &foci);
    bench_ingest(&mut c, &files);
    c.final_summary();
    summary(&files, &lib, &foci);
}
