//! Context quality: does the projection pick the files an engineer needed?
//!
//! Co-change recall. For a change that touched several source files, one
//! changed file is the focus; a method selects context within a token
//! budget; recall is the share of the *other* changed files that the
//! selected context comes from. Methods, on the same graph (`Store::ingest`
//! of the code before the change):
//!
//! - `projection_names` and `projection_signatures`: this crate's projection
//!   from the focus file (breadth 6, both directions) at full depth 4 and 9,
//!   fragments within the budget (see `projection` below);
//! - `pagerank`: a repository map as Aider builds one: personalized PageRank
//!   over the file graph of references (calls, imports, bases, type
//!   references) from the focus file, each file's rank shared among the
//!   definitions it refers to, definitions taken by rank at the cost of
//!   their signatures (a file counts when one of its definitions is in);
//! - `same_dir`: files nearest the focus in the directory tree first;
//! - `random`: a seeded random order.
//!
//! Datasets: `git:REPO[:N]`, the last N commits of REPO's first-parent
//! history that modified 2 to 12 source files (the tree before each commit
//! is ingested, incrementally); `releases:OLD:NEW`, two extracted releases
//! of a project, the files modified between them the change.
//!
//!     cargo bench --bench context_quality -- git:. releases:OLD_DIR:NEW_DIR
//!
//! `benches/context_quality.sh` fetches the releases used in BENCHMARKS.md.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use decision_store::ingest::{IngestOptions, CODE_RELATIONS};
use decision_store::projection::{Cl100k, Depth, DepthBreadthProjector, ProjectionSpec, TokenCounter};
use decision_store::uko::Direction;
use decision_store::Store;

const BUDGETS: [usize; 2] = [2000, 8000];
const METHODS: [&str; 5] = ["projection_names", "projection_signatures", "pagerank", "same_dir", "random"];

/// One change: the files it modified, as `project://` URIs of the tree before it.
struct Case {
    files: Vec<String>,
}

/// What the baselines need of an ingested tree.
struct Tree {
    /// Every ingested file, sorted.
    files: Vec<String>,
    /// Tokens of each file's map: its definitions' signatures.
    cost: HashMap<String, usize>,
    /// References between files: (from file, to file) -> count.
    links: BTreeMap<(String, String), f64>,
    /// References into definitions: (from file, definition) -> count.
    uses: BTreeMap<(String, String), f64>,
    /// Each class and function: its file and the tokens of its signature.
    defs: HashMap<String, (String, usize)>,
}

fn read_tree(store: &Store, counter: &dyn TokenCounter) -> Tree {
    let mut file_of: HashMap<String, String> = HashMap::new();
    let mut maps: BTreeMap<String, String> = BTreeMap::new();
    let mut defs = HashMap::new();
    store
        .for_each_node(|n| {
            if let Some(file) = &n.resource_uri {
                file_of.insert(n.uri.clone(), file.clone());
                let map = maps.entry(file.clone()).or_default();
                if n.kind == "class" || n.kind == "function" {
                    if let Some(v) = n.view_at(4) {
                        map.push_str(&v.content);
                        map.push('\n');
                        defs.insert(n.uri.clone(), (file.clone(), counter.count(&v.content).max(1)));
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
    Tree { files: maps.into_keys().collect(), cost, links, uses, defs }
}

/// Aider's repository map: personalized PageRank over the file graph from
/// `focus` (damping 0.85), each file's rank shared among the definitions
/// it refers to in proportion to its references, and definitions taken in
/// that order, each at the cost of its signature, while they fit.
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
    (chosen.clone(), chosen, used)
}

/// Personalized PageRank over the file graph, from `focus` (damping 0.85).
fn file_rank<'t>(tree: &'t Tree, focus: &str) -> HashMap<&'t str, f64> {
    let n = tree.files.len();
    let index: HashMap<&str, usize> = tree.files.iter().enumerate().map(|(i, f)| (f.as_str(), i)).collect();
    let mut out: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for ((a, b), w) in &tree.links {
        out[index[a.as_str()]].push((index[b.as_str()], *w));
    }
    let f = index[focus];
    let mut rank = vec![0.0; n];
    rank[f] = 1.0;
    for _ in 0..50 {
        let mut next = vec![0.0; n];
        next[f] += 0.15;
        for (i, edges) in out.iter().enumerate() {
            let total: f64 = edges.iter().map(|e| e.1).sum();
            if total == 0.0 {
                next[f] += 0.85 * rank[i]; // dangling: back to the focus
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
        fd.split('/').zip(d.split('/')).take_while(|(a, b)| a == b).count() * 1000 - d.split('/').count()
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

/// Files of a ranked list that fit the budget, each at its map's cost.
fn fill(tree: &Tree, ranked: Vec<String>, budget: usize) -> Selection {
    let (mut used, mut chosen) = (0, BTreeSet::new());
    for f in ranked {
        let c = tree.cost[&f];
        if used + c <= budget {
            used += c;
            chosen.insert(f);
        }
    }
    (chosen.clone(), chosen, used)
}

/// The files selected, those selected with their signatures (or more), and the tokens used.
type Selection = (BTreeSet<String>, BTreeSet<String>, usize);

/// The projection from the focus file, breadth 6 both ways, at full depth
/// `depth`: 4 gives the focus its signatures and every other node less
/// (names), 9 gives the focus its source and nodes up to 3 hops away their
/// signatures.
fn projection(store: &Store, focus: &str, budget: usize, depth: i64) -> Selection {
    let spec = ProjectionSpec::new([focus], 6, Depth::level(depth).unwrap()).unwrap().with_direction(Direction::Both);
    let set = DepthBreadthProjector::new().project_fragments(store, &spec, &Cl100k, Some(budget)).unwrap();
    let others = || set.fragments.iter().filter(|f| f.resource_uri() != focus);
    let files = others().map(|f| f.resource_uri().to_owned()).collect();
    let signed = others().filter(|f| f.detail_depth() >= 4).map(|f| f.resource_uri().to_owned()).collect();
    (files, signed, set.total_tokens)
}

#[derive(Default, Clone, Copy)]
struct Sum {
    recall: f64,
    signed: f64,
    files: f64,
    tokens: f64,
    secs: f64,
    n: f64,
}

type Results = BTreeMap<(usize, &'static str), Sum>;

fn score(store: &Store, tree: &Tree, case: &Case, seed: u64, results: &mut Results) {
    let known: Vec<&String> = case.files.iter().filter(|f| tree.cost.contains_key(*f)).collect();
    if known.len() < 2 {
        return;
    }
    for focus in &known {
        let gold: BTreeSet<&str> = known.iter().filter(|f| *f != focus).map(|f| f.as_str()).collect();
        for budget in BUDGETS {
            for method in METHODS {
                let start = Instant::now();
                let (chosen, signed, used) = match method {
                    "projection_names" => projection(store, focus, budget, 4),
                    "projection_signatures" => projection(store, focus, budget, 9),
                    "pagerank" => repo_map(tree, focus, budget),
                    "same_dir" => fill(tree, same_dir(tree, focus), budget),
                    _ => fill(tree, random(tree, focus, seed), budget),
                };
                let secs = start.elapsed().as_secs_f64();
                let hit = gold.iter().filter(|g| chosen.contains(**g)).count();
                let s = results.entry((budget, method)).or_default();
                s.recall += hit as f64 / gold.len() as f64;
                s.signed += gold.iter().filter(|g| signed.contains(**g)).count() as f64 / gold.len() as f64;
                s.files += chosen.len() as f64;
                s.tokens += used as f64;
                s.secs += secs;
                s.n += 1.0;
            }
        }
    }
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(repo).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn is_source(path: &str) -> bool {
    path.ends_with(".py") || path.ends_with(".rs")
}

/// The tree of `rev` written to `dir` (emptied first).
fn checkout(repo: &Path, rev: &str, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let archive = Command::new("git").arg("-C").arg(repo).args(["archive", rev]).output().unwrap();
    let mut tar = Command::new("tar").arg("-x").arg("-C").arg(dir).stdin(std::process::Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    tar.stdin.take().unwrap().write_all(&archive.stdout).unwrap();
    assert!(tar.wait().unwrap().success());
}

fn git_dataset(repo: &Path, commits: usize, work: &Path) -> (Results, usize) {
    let mut results = Results::new();
    let mut cases = 0;
    let revs = git(repo, &["rev-list", "--first-parent", "--no-merges", "HEAD"]);
    let mut chosen = Vec::new();
    for rev in revs.lines() {
        if chosen.len() == commits {
            break;
        }
        let changed = git(repo, &["diff-tree", "--no-commit-id", "--name-status", "-r", rev]);
        let files: Vec<String> = changed
            .lines()
            .filter_map(|l| l.strip_prefix("M\t"))
            .filter(|p| is_source(p))
            .map(|p| format!("project://{p}"))
            .collect();
        if (2..=12).contains(&files.len())
            && git(repo, &["rev-list", "--parents", "-n", "1", rev]).split(' ').count() > 1
        {
            chosen.push((rev.to_owned(), files));
        }
    }
    chosen.reverse(); // oldest first: each ingest is incremental on the one before
    let tree_dir = work.join("tree");
    let mut store = Store::open(work.join("git.db")).unwrap();
    for (i, (rev, files)) in chosen.iter().enumerate() {
        checkout(repo, &format!("{rev}^"), &tree_dir);
        store.ingest(&tree_dir, IngestOptions::default()).unwrap();
        let tree = read_tree(&store, &Cl100k);
        score(&store, &tree, &Case { files: files.clone() }, i as u64, &mut results);
        cases += 1;
    }
    (results, cases)
}

/// Relative paths of the source files under `dir` with their contents.
fn sources(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if is_source(&p.to_string_lossy()) {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn releases_dataset(old: &Path, new: &Path, work: &Path) -> (Results, usize) {
    let (a, b) = (sources(old), sources(new));
    let files: Vec<String> = a
        .iter()
        .filter(|(p, text)| b.get(*p).is_some_and(|t| t != *text))
        .map(|(p, _)| format!("project://{p}"))
        .collect();
    let mut store = Store::open(work.join("release.db")).unwrap();
    store.ingest(old, IngestOptions::default()).unwrap();
    let tree = read_tree(&store, &Cl100k);
    let mut results = Results::new();
    score(&store, &tree, &Case { files }, 7, &mut results);
    (results, 1)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.is_empty() {
        eprintln!("usage: cargo bench --bench context_quality -- git:REPO[:N] releases:OLD_DIR:NEW_DIR ...");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    println!("| dataset | budget | method | recall | recall with signatures | files | tokens | ms per query |");
    println!("|---|---|---|---|---|---|---|---|");
    for (i, arg) in args.iter().enumerate() {
        let dir = work.path().join(i.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let (name, (results, cases)) = match arg.split(':').collect::<Vec<_>>().as_slice() {
            ["git", repo] => (format!("git {repo}"), git_dataset(Path::new(repo), 40, &dir)),
            ["git", repo, n] => (format!("git {repo}"), git_dataset(Path::new(repo), n.parse().unwrap(), &dir)),
            ["releases", old, new] => {
                let name = |p: &str| PathBuf::from(p).file_name().unwrap().to_string_lossy().into_owned();
                (format!("{} → {}", name(old), name(new)), releases_dataset(Path::new(old), Path::new(new), &dir))
            }
            _ => panic!("unknown dataset {arg:?}"),
        };
        for ((budget, method), s) in &results {
            println!(
                "| {name} ({cases} changes, {} queries) | {budget} | {method} | {:.3} | {:.3} | {:.1} | {:.0} | {:.1} |",
                s.n,
                s.recall / s.n,
                s.signed / s.n,
                s.files / s.n,
                s.tokens / s.n,
                s.secs * 1000.0 / s.n
            );
        }
    }
}
