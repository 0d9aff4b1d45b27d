//! Context quality: does the context a focus gets hold the files that the
//! same change went on to touch?
//!
//!     benches/context_quality/setup-aider.sh            # the real Aider, in target/aider-venv
//!     cargo bench --bench context_quality -- [--no-aider] [--methods a,b] DATASET...
//!
//! A DATASET is `NAME=REPO[@REV][:N]`: a git repository (a work tree or a
//! bare mirror), read from REV (default HEAD) back. Its tasks are the last
//! N (default 40) commits of REV's first-parent history that are not
//! merges and modified 2 to 6 source files (the languages `ingest` reads)
//! without adding, deleting or renaming any. For each task, oldest first:
//!
//! - the tree *before* the commit is checked out (`git checkout --detach
//!   COMMIT^` in a clone of REPO), so that neither the tree nor the history
//!   `ingest` reads (`git log` from HEAD) shows the commit or any later one;
//! - one store is ingested incrementally from task to task, history and
//!   words included;
//! - the focus is the file with the largest change (lines added and
//!   removed), the gold the task's other source files;
//! - each method selects context for the focus at 2,000 and 8,000 tokens
//!   (cl100k_base, the tokenizer Aider's stand-in model counts with too).
//!
//! Measures, averaged over tasks: **recall** (the share of gold files that
//! the context comes from at all), **strict recall** (a gold file counts
//! only when a fragment at signature depth or deeper comes from it: for
//! Aider, when its map shows a code line of the file), files listed,
//! tokens used, milliseconds per query.
//!
//! Methods:
//!
//! - `dstore`: `ProjectionSpec::for_focus` (what `dstore project --focus
//!   project://FILE --fragments --budget N` does by default);
//! - `dstore-*`: variants of it, for choosing the defaults (`--methods`);
//! - `aider`: the real Aider's `RepoMap` (`aider_map.py`, aider-chat
//!   0.86.2) with the focus as its chat file, its map held within the
//!   budget (Aider itself allows 15 % over);
//! - `pagerank`: a repository map in Aider's manner on this crate's graph
//!   (personalized PageRank over the file graph, definitions by rank at the
//!   cost of their signatures);
//! - `same_dir`: files nearest the focus in the directory tree, each at the
//!   cost of its definitions' signatures; `random`: a seeded shuffle.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use decision_store::ingest::{IngestOptions, CODE_RELATIONS};
use decision_store::projection::{
    Cl100k, DepthBreadthProjector, Fusion, ProjectionSpec, Ranking, Signals, TokenCounter,
};
use decision_store::uko::Direction;
use decision_store::Store;

const BUDGETS: [usize; 2] = [2000, 8000];

/// The extensions of the languages `ingest` reads.
const SOURCE: &[&str] = &["py", "rs", "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "go"];

fn is_source(path: &str) -> bool {
    !path.ends_with(".d.ts") && path.rsplit_once('.').is_some_and(|(_, ext)| SOURCE.contains(&ext))
}

/// One task: the commit, the focus and the gold files (paths relative to the root).
struct Task {
    commit: String,
    focus: String,
    gold: Vec<String>,
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(repo).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?} in {}: {}", repo.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The last `n` tasks of `rev`'s first-parent history, oldest first.
fn tasks(repo: &Path, rev: &str, n: usize) -> Vec<Task> {
    let revs = git(repo, &["rev-list", "--first-parent", "--no-merges", "--max-count=20000", rev]);
    let mut found = Vec::new();
    for commit in revs.lines() {
        if found.len() == n {
            break;
        }
        // No parent (a root commit): nothing before it to ingest.
        if git(repo, &["rev-list", "--parents", "-n", "1", commit]).split_whitespace().count() < 2 {
            continue;
        }
        let status = git(repo, &["diff-tree", "--no-commit-id", "-r", "-M", "--name-status", commit]);
        let mut modified = Vec::new();
        let mut other = false;
        for line in status.lines() {
            let mut parts = line.split('\t');
            let (kind, path) = (parts.next().unwrap_or(""), parts.next_back().unwrap_or(""));
            if !is_source(path) {
                continue;
            }
            if kind == "M" {
                modified.push(path.to_owned());
            } else {
                other = true;
            }
        }
        if other || !(2..=6).contains(&modified.len()) {
            continue;
        }
        // The focus: the largest change.
        // Only the modified files: a mirror may lack some other file's large blob.
        let parent = format!("{commit}^");
        let mut args = vec!["diff", "--numstat", parent.as_str(), commit, "--"];
        args.extend(modified.iter().map(String::as_str));
        let numstat = git(repo, &args);
        let mut size: HashMap<&str, u64> = HashMap::new();
        for line in numstat.lines() {
            let parts: Vec<&str> = line.split('\t').collect();
            if let [a, d, p] = parts[..] {
                size.insert(p, a.parse::<u64>().unwrap_or(0) + d.parse::<u64>().unwrap_or(0));
            }
        }
        let focus = modified
            .iter()
            .max_by(|a, b| size.get(a.as_str()).cmp(&size.get(b.as_str())).then(b.cmp(a)))
            .unwrap()
            .clone();
        let gold = modified.into_iter().filter(|p| *p != focus).collect();
        found.push(Task { commit: commit.to_owned(), focus, gold });
    }
    found.reverse();
    found
}

/// What the baselines read of an ingested tree.
struct Tree {
    /// Every ingested file, as a path.
    files: Vec<String>,
    /// Tokens of each file's map: its definitions' signatures.
    cost: HashMap<String, usize>,
    /// The files that define something (have a signature to show).
    signed: BTreeSet<String>,
    links: BTreeMap<(String, String), f64>,
    uses: BTreeMap<(String, String), f64>,
    defs: HashMap<String, (String, usize)>,
}

fn path_of(uri: &str) -> &str {
    uri.strip_prefix("project://").unwrap_or(uri)
}

fn read_tree(store: &Store, counter: &dyn TokenCounter) -> Tree {
    let mut file_of: HashMap<String, String> = HashMap::new();
    let mut maps: BTreeMap<String, String> = BTreeMap::new();
    let mut defs = HashMap::new();
    store
        .for_each_node(|n| {
            if let Some(file) = &n.resource_uri {
                let file = path_of(file).to_owned();
                file_of.insert(n.uri.clone(), file.clone());
                let map = maps.entry(file.clone()).or_default();
                if n.kind == "class" || n.kind == "function" {
                    if let Some(v) = n.view_at(4) {
                        map.push_str(&v.content);
                        map.push('\n');
                        defs.insert(n.uri.clone(), (file, counter.count(&v.content).max(1)));
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    let mut links = BTreeMap::new();
    let mut uses = BTreeMap::new();
    store
        .for_each_edge(|e| {
            if e.relation != "contains" && CODE_RELATIONS.contains(&e.relation.as_str()) {
                if let (Some(a), Some(b)) = (file_of.get(&e.source), file_of.get(&e.target)) {
                    if a != b {
                        *links.entry((a.clone(), b.clone())).or_insert(0.0) += 1.0;
                        *uses.entry((a.clone(), e.target.clone())).or_insert(0.0) += 1.0;
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    let cost = maps.iter().map(|(f, m)| (f.clone(), counter.count(m).max(1))).collect();
    let signed = maps.iter().filter(|(_, m)| !m.is_empty()).map(|(f, _)| f.clone()).collect();
    Tree { files: maps.into_keys().collect(), cost, signed, links, uses, defs }
}

/// The files selected, those with a signature (or more) shown, and the tokens used.
struct Selection {
    files: BTreeSet<String>,
    strict: BTreeSet<String>,
    tokens: usize,
}

/// A repository map as Aider builds one, on this crate's graph.
fn repo_map(tree: &Tree, focus: &str, budget: usize) -> Selection {
    let rank = file_rank(tree, focus);
    let mut out_weight: HashMap<&str, f64> = HashMap::new();
    for ((from, _), w) in &tree.uses {
        *out_weight.entry(from.as_str()).or_default() += w;
    }
    let mut def_rank: HashMap<&str, f64> = HashMap::new();
    for ((from, def), w) in &tree.uses {
        *def_rank.entry(def.as_str()).or_default() += rank[from.as_str()] * w / out_weight[from.as_str()];
    }
    let mut ranked: Vec<(&str, f64)> = tree
        .defs
        .iter()
        .filter(|(_, (file, _))| file != focus)
        .map(|(d, _)| (d.as_str(), def_rank.get(d.as_str()).copied().unwrap_or(0.0)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let (mut used, mut chosen) = (0, BTreeSet::new());
    for (d, _) in ranked {
        let (file, cost) = &tree.defs[d];
        if used + cost <= budget {
            used += cost;
            chosen.insert(file.clone());
        }
    }
    Selection { files: chosen.clone(), strict: chosen, tokens: used }
}

fn file_rank<'t>(tree: &'t Tree, focus: &str) -> HashMap<&'t str, f64> {
    let n = tree.files.len();
    let index: HashMap<&str, usize> = tree.files.iter().enumerate().map(|(i, f)| (f.as_str(), i)).collect();
    let mut out: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for ((a, b), w) in &tree.links {
        out[index[a.as_str()]].push((index[b.as_str()], *w));
    }
    let mut rank = vec![0.0; n];
    let Some(&f) = index.get(focus) else { return tree.files.iter().map(|x| (x.as_str(), 0.0)).collect() };
    rank[f] = 1.0;
    for _ in 0..50 {
        let mut next = vec![0.0; n];
        next[f] += 0.15;
        for (i, edges) in out.iter().enumerate() {
            let total: f64 = edges.iter().map(|e| e.1).sum();
            if total == 0.0 {
                next[f] += 0.85 * rank[i];
                continue;
            }
            for &(j, w) in edges {
                next[j] += 0.85 * rank[i] * w / total;
            }
        }
        rank = next;
    }
    tree.files.iter().map(String::as_str).zip(rank).collect()
}

fn same_dir(tree: &Tree, focus: &str) -> Vec<String> {
    let dir = |f: &str| f.rsplit_once('/').map_or(String::new(), |(d, _)| d.to_owned());
    let fd = dir(focus);
    let shared = |f: &str| {
        let d = dir(f);
        let common = if fd.is_empty() || d.is_empty() {
            usize::from(fd == d)
        } else {
            fd.split('/').zip(d.split('/')).take_while(|(a, b)| a == b).count()
        };
        // Deeper directories of the same shared prefix come later.
        (common * 1000) as i64 - d.split('/').count() as i64
    };
    let mut files: Vec<&String> = tree.files.iter().filter(|f| *f != focus).collect();
    files.sort_by(|a, b| shared(b).cmp(&shared(a)).then(a.cmp(b)));
    files.into_iter().cloned().collect()
}

fn random(tree: &Tree, focus: &str, seed: u64) -> Vec<String> {
    let mut files: Vec<String> = tree.files.iter().filter(|f| *f != focus).cloned().collect();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    for i in (1..files.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        files.swap(i, (state % (i as u64 + 1)) as usize);
    }
    files
}

/// Files of a ranked list that fit the budget, each at its map's cost (a
/// file that defines nothing costs its name and counts for recall only).
fn fill(tree: &Tree, ranked: Vec<String>, budget: usize, counter: &dyn TokenCounter) -> Selection {
    let (mut used, mut chosen, mut strict) = (0, BTreeSet::new(), BTreeSet::new());
    for f in ranked {
        let signed = tree.cost.get(&f).copied().filter(|_| tree.signed.contains(&f));
        let c = signed.unwrap_or_else(|| counter.count(&f).max(1));
        if used + c <= budget {
            used += c;
            if signed.is_some() {
                strict.insert(f.clone());
            }
            chosen.insert(f);
        }
    }
    Selection { files: chosen, strict, tokens: used }
}

/// The projection of `spec` for the focus within the budget.
fn projection(store: &Store, spec: &ProjectionSpec, focus: &str, budget: usize) -> Selection {
    let set = DepthBreadthProjector::new().project_fragments(store, spec, &Cl100k, Some(budget)).unwrap();
    let others = || set.fragments.iter().filter(|f| path_of(f.resource_uri()) != focus);
    Selection {
        files: others().map(|f| path_of(f.resource_uri()).to_owned()).collect(),
        strict: others().filter(|f| f.detail_depth() >= 4).map(|f| path_of(f.resource_uri()).to_owned()).collect(),
        tokens: set.total_tokens,
    }
}

/// The `dstore` variants, by name: the defaults, and one change each.
fn variant(name: &str, focus: &str) -> Option<ProjectionSpec> {
    let spec = ProjectionSpec::for_focus([format!("project://{focus}")]).unwrap();
    let signals = |s: Signals| Some(spec.with_ranking(Ranking::Relevance(s)));
    let d = Signals::DEFAULT;
    match name {
        "dstore" => Some(spec),
        "dstore-graph" => signals(Signals { history: 0.0, words: 0.0, directory: 0.0, ..d }),
        "dstore-no-history" => signals(Signals { history: 0.0, ..d }),
        "dstore-no-words" => signals(Signals { words: 0.0, ..d }),
        "dstore-no-directory" => signals(Signals { directory: 0.0, ..d }),
        "dstore-no-graph" => signals(Signals { graph: 0.0, ..d }),
        "dstore-history-only" => signals(Signals { graph: 0.0, words: 0.0, directory: 0.0, ..d }),
        "dstore-words-only" => signals(Signals { graph: 0.0, history: 0.0, directory: 0.0, ..d }),
        "dstore-pagerank-fusion" => signals(Signals { fusion: Fusion::PageRank, ..d }),
        "dstore-out" => Some(spec.with_direction(Direction::Outgoing)),
        "dstore-breadth-1" => Some(spec.with_breadth(1)),
        "dstore-distance" => Some(spec.with_ranking(Ranking::Distance).with_breadth(6)),
        _ => None,
    }
}

/// The real Aider's repository map, a long-running `aider_map.py`.
struct Aider {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Aider {
    fn start(cache: &Path) -> Option<Aider> {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let venv = std::env::var("AIDER_VENV").map_or_else(|_| here.join("target/aider-venv"), PathBuf::from);
        let python = venv.join("bin/python");
        if !python.exists() {
            println!(
                "aider: no {} (run benches/context_quality/setup-aider.sh): the aider rows are left out",
                python.display()
            );
            return None;
        }
        let mut child = Command::new(python)
            .arg(here.join("benches/context_quality/aider_map.py"))
            .arg("--cache-dir")
            .arg(cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("aider_map.py starts");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Some(Aider { child, input, output })
    }

    fn map(&mut self, root: &Path, focus: &str, budget: usize, files: &[String]) -> (Selection, f64) {
        let request = serde_json::json!({"root": root, "focus": focus, "budget": budget, "files": files});
        writeln!(self.input, "{request}").unwrap();
        self.input.flush().unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let reply: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("aider: {e}: {line}"));
        if let Some(e) = reply.get("error") {
            panic!("aider on {focus}: {e}");
        }
        let list = |k: &str| -> BTreeSet<String> {
            reply[k].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
        };
        let seconds = reply["seconds"].as_f64().unwrap_or(0.0);
        (
            Selection {
                files: list("files"),
                strict: list("files_with_defs"),
                tokens: reply["tokens"].as_u64().unwrap() as usize,
            },
            seconds,
        )
    }
}

impl Drop for Aider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Default, Clone, Copy)]
struct Sum {
    recall: f64,
    strict: f64,
    files: f64,
    tokens: f64,
    secs: f64,
    n: f64,
}

impl Sum {
    fn add(&mut self, gold: &[String], s: &Selection, secs: f64) {
        let hit = |set: &BTreeSet<String>| gold.iter().filter(|g| set.contains(*g)).count() as f64 / gold.len() as f64;
        self.recall += hit(&s.files);
        self.strict += hit(&s.strict);
        self.files += s.files.len() as f64;
        self.tokens += s.tokens as f64;
        self.secs += secs;
        self.n += 1.0;
    }
}

fn run(name: &str, repo: &Path, rev: &str, n: usize, methods: &[String], aider: &mut Option<Aider>, work: &Path) {
    let tasks = tasks(repo, rev, n);
    let checkout = work.join(name);
    // A clone that shares the repository's objects, its HEAD moved task by task.
    let _ = std::fs::remove_dir_all(&checkout);
    git(
        work,
        &[
            "clone",
            "--quiet",
            "--shared",
            "--no-checkout",
            &repo.display().to_string(),
            &checkout.display().to_string(),
        ],
    );
    // Only source files and the configuration their imports resolve by: a
    // mirror may lack other files' large blobs, which a checkout would need.
    let mut sparse = vec!["sparse-checkout", "set", "--no-cone", "go.mod", "tsconfig*.json", "jsconfig.json"];
    let patterns: Vec<String> = SOURCE.iter().map(|ext| format!("*.{ext}")).collect();
    sparse.extend(patterns.iter().map(String::as_str));
    git(&checkout, &sparse);
    let mut store = Store::open(work.join(format!("{name}.db"))).unwrap();
    let mut results: BTreeMap<(usize, String), Sum> = BTreeMap::new();
    let (mut ingest_secs, mut queries) = (0.0, 0);
    for (i, task) in tasks.iter().enumerate() {
        git(&checkout, &["checkout", "--quiet", "--force", "--detach", &format!("{}^", task.commit)]);
        git(&checkout, &["clean", "--quiet", "-fdx"]);
        let started = Instant::now();
        store.ingest(&checkout, IngestOptions::default()).unwrap();
        ingest_secs += started.elapsed().as_secs_f64();
        let tree = read_tree(&store, &Cl100k);
        if !tree.cost.contains_key(&task.focus) {
            continue;
        }
        let gold: Vec<String> = task.gold.clone();
        queries += 1;
        for budget in BUDGETS {
            for method in methods {
                let started = Instant::now();
                let (selection, secs) = match method.as_str() {
                    "aider" => match aider.as_mut() {
                        Some(a) => a.map(&checkout, &task.focus, budget, &tree.files),
                        None => continue,
                    },
                    "pagerank" => (repo_map(&tree, &task.focus, budget), 0.0),
                    "same_dir" => (fill(&tree, same_dir(&tree, &task.focus), budget, &Cl100k), 0.0),
                    "random" => (fill(&tree, random(&tree, &task.focus, i as u64), budget, &Cl100k), 0.0),
                    m => {
                        let spec = variant(m, &task.focus).unwrap_or_else(|| panic!("no method {m}"));
                        (projection(&store, &spec, &task.focus, budget), 0.0)
                    }
                };
                let secs = if secs > 0.0 { secs } else { started.elapsed().as_secs_f64() };
                results.entry((budget, method.clone())).or_default().add(&gold, &selection, secs);
            }
        }
    }
    eprintln!("{name}: {queries} tasks, ingest {ingest_secs:.1} s in all");
    for ((budget, method), s) in &results {
        println!(
            "| {name} ({} tasks) | {budget} | {method} | {:.3} | {:.3} | {:.1} | {:.0} | {:.1} |",
            s.n,
            s.recall / s.n,
            s.strict / s.n,
            s.files / s.n,
            s.tokens / s.n,
            s.secs * 1000.0 / s.n
        );
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let mut methods: Vec<String> =
        ["dstore", "aider", "pagerank", "same_dir", "random"].iter().map(|m| (*m).to_owned()).collect();
    let mut use_aider = true;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--no-aider" => {
                use_aider = false;
                args.remove(i);
            }
            "--methods" => {
                methods = args[i + 1].split(',').map(str::to_owned).collect();
                args.drain(i..i + 2);
            }
            _ => i += 1,
        }
    }
    if args.is_empty() {
        eprintln!("usage: cargo bench --bench context_quality -- [--no-aider] [--methods a,b] NAME=REPO[@REV][:N]...");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/aider-cache");
    let mut aider = if use_aider && methods.iter().any(|m| m == "aider") { Aider::start(&cache) } else { None };
    println!("| dataset | budget | method | recall | strict recall | files | tokens | ms per query |");
    println!("|---|---|---|---|---|---|---|---|");
    for arg in &args {
        let (name, rest) = arg.split_once('=').unwrap_or_else(|| panic!("{arg}: NAME=REPO[@REV][:N]"));
        let (rest, n) = match rest.rsplit_once(':') {
            Some((r, n)) if n.parse::<usize>().is_ok() => (r, n.parse().unwrap()),
            _ => (rest, 40),
        };
        let (repo, rev) = rest.split_once('@').unwrap_or((rest, "HEAD"));
        run(name, Path::new(repo), rev, n, &methods, &mut aider, work.path());
    }
}
