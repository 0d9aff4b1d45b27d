//! Keeping the graph in step with a source tree (`Store::ingest`).
//!
//! An ingest works in four steps, and only the last one writes:
//!
//! 1. **Walk** the tree (no transaction): ripgrep's walker finds the source
//!    files, which are read and hashed.
//! 2. **Read** the stored graph (one read transaction, a snapshot): the
//!    graph's generation, each file's stored version and, when anything
//!    changed, the ingested nodes, references and edges.
//! 3. **Plan** (no transaction): the new and changed files are parsed on
//!    every core; their nodes, the nodes of files that went, and every
//!    reference resolved against the nodes that will be there give the
//!    changes to make: nodes to replace or remove per file, edges to remove
//!    and add. Re-ingesting an unchanged tree plans nothing and writes nothing.
//! 4. **Apply** the plan in write transactions of at most [`BOUND`] rows
//!    and about [`MAX_HOLD`] each. Each one first checks that the graph's generation is the one the
//!    plan was made from (or the one the previous transaction left): when
//!    another writer changed the graph meanwhile, the ingest reads and plans
//!    again, keeping what it parsed.
//!
//! ## Locking
//!
//! Parsing, which is most of an ingest's time, holds no lock. A plan that
//! fits in one transaction (an edit of a few files) is applied atomically:
//! a failure leaves the graph as it was. A larger one (the first ingest of
//! a large tree) is applied in several, each holding the write lock
//! (SQLite) or the graph's row lock (PostgreSQL, where writers of the
//! decision log never wait for it) for [`BOUND`] rows or [`MAX_HOLD`] at
//! most (one file's changes are never split), with the
//! lock left free between two of them. Should it fail part-way, each file
//! is either as it was or as it is now, and the next ingest finishes the
//! work: the graph is marked resolved (`graph_state.resolved`) only by the
//! transaction that completes a plan.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

// Keyed by URIs, hundreds of thousands of them: a fast hash, not SipHash.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::error::{Error, Result};
use crate::ingest::lexical;
use crate::ingest::resolve::{resolve, CodeEdge, CodeNode};
use crate::ingest::walk::{parse_all, walk, Found};
use crate::ingest::{FileGraph, IngestOptions, IngestReport, Root, SkippedFile};
use crate::store::engine::{Conn, WriteTx, NUL_REASON};
use crate::store::tables::{graph, lexical as terms_table, references};
use crate::store::workflows::{FIRST_LOAD_BATCH, FIRST_LOAD_HOLD, MAX_HOLD};
use crate::uko::NodeKey;

/// The most rows (nodes, views, references, edges) one transaction writes.
pub const BOUND: usize = 4096;

/// How many times an ingest plans again when other writers keep changing the graph.
const ROUNDS: usize = 5;

/// A stored ingested node.
struct StoredNode {
    file: String,
    kind: String,
    version: Option<String>,
}

/// What the plan is made from: one snapshot of the stored graph.
struct Snapshot {
    generation: i64,
    /// The last ingest completed its plan, and no one wrote the graph since.
    resolved: bool,
    /// Each ingested file's stored version.
    files: HashMap<String, Option<String>>,
    /// Each indexed file's version, as its terms were read (`code_term_docs`).
    indexed: HashMap<String, String>,
    /// The rest, read only when something is to be planned.
    graph: Option<StoredGraph>,
}

struct StoredGraph {
    /// Ingested nodes (domain `uko-code:`, with a file), by URI.
    code: HashMap<String, StoredNode>,
    /// Every other node's URI.
    other: HashSet<String>,
    /// Code references by file: (from, relation, name).
    references: HashMap<String, Vec<(String, String, String)>>,
    /// Edges of the code relations between ingested nodes.
    edges: BTreeSet<CodeEdge>,
}

fn read(conn: &Conn, full: impl FnOnce(&Snapshot) -> bool) -> Result<Snapshot> {
    let tx = conn.begin_read()?;
    let (generation, resolved) = graph::code::state(&tx)?;
    let files = graph::code::files(&tx)?;
    let indexed = terms_table::versions(&tx)?;
    let mut snapshot = Snapshot { generation, resolved: resolved == generation, files, indexed, graph: None };
    if full(&snapshot) {
        let mut code = HashMap::default();
        let mut other = HashSet::default();
        for (uri, domain, kind, version, file) in graph::code::nodes(&tx)? {
            match file {
                Some(file) if domain == crate::ingest::DOMAIN => {
                    code.insert(uri, StoredNode { file, kind, version });
                }
                _ => {
                    other.insert(uri);
                }
            }
        }
        let mut by_file: HashMap<String, Vec<(String, String, String)>> = HashMap::default();
        for (file, from, relation, name) in references::all(&tx)? {
            by_file.entry(file).or_default().push((from, relation, name));
        }
        let edges = graph::code::edges(&tx)?.into_iter().collect();
        snapshot.graph = Some(StoredGraph { code, other, references: by_file, edges });
    }
    tx.commit()?;
    Ok(snapshot)
}

/// A node as the plan leaves it.
struct PlannedNode {
    file: String,
    kind: String,
    version: Option<String>,
    /// The node to write, when the plan changes it: a node of a parsed file.
    write: Option<(Arc<FileGraph>, usize)>,
}

/// The changes of one file: net node removals and writes, its references.
#[derive(Default)]
struct FileChange {
    file: String,
    remove: Vec<String>,
    /// Nodes to write (a node of a parsed file), each with whether it is
    /// new (no node of its URI is stored).
    upsert: Vec<(Arc<FileGraph>, usize, bool)>,
    /// Its references from now on (all of them replaced): the parsed file's.
    references: Option<Arc<FileGraph>>,
    added: u64,
    changed: u64,
    removed: u64,
}

/// A file's terms to index (`Some`, read from `version`) or to drop (`None`).
struct TermChange {
    file: String,
    version: String,
    terms: Option<Vec<(String, u32)>>,
}

impl TermChange {
    /// The rows it writes, for a transaction's bound: its postings and its document.
    fn rows(&self) -> usize {
        1 + self.terms.as_ref().map_or(0, Vec::len)
    }
}

/// Everything an ingest writes.
#[derive(Default)]
struct Plan {
    files: Vec<FileChange>,
    remove_edges: Vec<CodeEdge>,
    add_edges: Vec<CodeEdge>,
    terms: Vec<TermChange>,
}

/// The plan's picture of the graph while it replays the old per-file sync
/// in walk order: the last file synced owns a URI that two files define,
/// and when it drops it, the other claims it again.
struct Planner<'s> {
    stored: &'s StoredGraph,
    nodes: HashMap<String, PlannedNode>,
    /// URIs each file owns.
    owned: HashMap<String, HashSet<String>>,
    /// Each synced file as parsed: its references from now on.
    references: HashMap<String, Arc<FileGraph>>,
    /// Per synced file, in order: its counts and the URIs it dropped.
    synced: Vec<FileChange>,
    at: HashMap<String, usize>,
}

impl<'s> Planner<'s> {
    fn new(stored: &'s StoredGraph) -> Self {
        let mut owned: HashMap<String, HashSet<String>> = HashMap::default();
        let nodes = stored
            .code
            .iter()
            .map(|(uri, n)| {
                owned.entry(n.file.clone()).or_default().insert(uri.clone());
                let planned =
                    PlannedNode { file: n.file.clone(), kind: n.kind.clone(), version: n.version.clone(), write: None };
                (uri.clone(), planned)
            })
            .collect();
        Planner { stored, nodes, owned, references: HashMap::default(), synced: Vec::new(), at: HashMap::default() }
    }

    fn change(&mut self, file: &str) -> &mut FileChange {
        let i = *self.at.entry(file.to_owned()).or_insert_with(|| {
            self.synced.push(FileChange { file: file.to_owned(), ..FileChange::default() });
            self.synced.len() - 1
        });
        &mut self.synced[i]
    }

    /// Replaces `file`'s nodes and references with `graph`'s.
    fn sync(&mut self, file: &str, graph: &Arc<FileGraph>) {
        let fresh: HashSet<&str> = graph.nodes.iter().map(|n| n.uri.as_str()).collect();
        let mine: Vec<String> =
            self.owned.get(file).into_iter().flatten().filter(|u| !fresh.contains(u.as_str())).cloned().collect();
        for uri in mine {
            self.nodes.remove(&uri);
            self.owned.get_mut(file).expect("listed above").remove(&uri);
            let change = self.change(file);
            change.removed += 1;
            change.remove.push(uri);
        }
        for (at, node) in graph.nodes.iter().enumerate() {
            let (added, changed) = match self.nodes.get(&node.uri) {
                Some(n) if n.file == file && n.version == node.version => continue,
                Some(n) if n.file == file => (0, 1),
                _ => (1, 0),
            };
            if let Some(previous) = self.nodes.get(&node.uri) {
                let owner = previous.file.clone();
                if let Some(set) = self.owned.get_mut(&owner) {
                    set.remove(&node.uri);
                }
            }
            self.owned.entry(file.to_owned()).or_default().insert(node.uri.clone());
            self.nodes.insert(
                node.uri.clone(),
                PlannedNode {
                    file: file.to_owned(),
                    kind: node.kind.clone(),
                    version: node.version.clone(),
                    write: Some((graph.clone(), at)),
                },
            );
            let change = self.change(file);
            change.added += added;
            change.changed += changed;
        }
        self.references.insert(file.to_owned(), graph.clone());
        self.change(file);
    }

    /// The `contains` names of `file`'s references (from now on).
    fn claims(&self, file: &str) -> Vec<String> {
        match self.references.get(file) {
            Some(graph) => {
                graph.references.iter().filter(|r| r.relation == "contains").map(|r| r.name.clone()).collect()
            }
            None => self
                .stored
                .references
                .get(file)
                .into_iter()
                .flatten()
                .filter(|(_, relation, _)| relation == "contains")
                .map(|(_, _, name)| name.clone())
                .collect(),
        }
    }

    /// Files whose references claim a URI that no node has any more:
    /// another file took a URI they define too, and has dropped it since.
    fn orphaned(&self, files: &[&Found]) -> Vec<usize> {
        (0..files.len())
            .filter(|&i| {
                self.claims(&files[i].uri).iter().any(|u| !self.nodes.contains_key(u) && !self.stored.other.contains(u))
            })
            .collect()
    }

    /// The plan: the net changes of every synced file, then the edges.
    fn finish(mut self) -> Plan {
        // Net removals: a URI dropped by one file and claimed by a later one is not removed.
        for change in &mut self.synced {
            change.remove.retain(|u| !self.nodes.contains_key(u));
        }
        // Net writes, each with the file that owns the node in the end.
        let mut writes: HashMap<String, Vec<(Arc<FileGraph>, usize)>> = HashMap::default();
        for n in self.nodes.values_mut() {
            if let Some(node) = n.write.take() {
                writes.entry(n.file.clone()).or_default().push(node);
            }
        }
        let stored = |uri: &str| self.stored.code.contains_key(uri) || self.stored.other.contains(uri);
        for change in &mut self.synced {
            let mut nodes = writes.remove(&change.file).unwrap_or_default();
            nodes.sort_by(|(a, i), (b, j)| a.nodes[*i].uri.cmp(&b.nodes[*j].uri));
            change.upsert = nodes
                .into_iter()
                .map(|(graph, at)| {
                    let fresh = !stored(&graph.nodes[at].uri);
                    (graph, at, fresh)
                })
                .collect();
            change.references = self.references.remove(&change.file);
        }
        let nodes: HashMap<String, CodeNode> = self
            .nodes
            .iter()
            .map(|(uri, n)| (uri.clone(), CodeNode { kind: n.kind.clone(), file: n.file.clone() }))
            .collect();
        let stored_refs =
            self.stored.references.iter().filter(|(file, _)| !self.at.contains_key(*file)).flat_map(|(file, refs)| {
                refs.iter().map(move |(f, r, n)| (file.as_str(), f.as_str(), r.as_str(), n.as_str()))
            });
        let synced_refs = self.synced.iter().flat_map(|c| {
            c.references
                .iter()
                .flat_map(|g| g.references.iter())
                .map(move |r| (c.file.as_str(), r.from.as_str(), r.relation, r.name.as_str()))
        });
        let wanted = resolve(&nodes, stored_refs.chain(synced_refs));
        // Edges whose end goes with its node are removed with it, not counted here.
        let remove_edges = self
            .stored
            .edges
            .iter()
            .filter(|(s, _, t)| nodes.contains_key(s) && nodes.contains_key(t))
            .filter(|e| !wanted.contains(*e))
            .cloned()
            .collect();
        let add_edges = wanted.difference(&self.stored.edges).cloned().collect();
        Plan { files: self.synced, remove_edges, add_edges, terms: Vec::new() }
    }
}

/// Files parsed so far, by URI, with the version they were parsed at.
type Parsed = HashMap<String, (String, Arc<FileGraph>)>;

/// Parses those of `files` not parsed yet at their version (on every core).
fn parse_missing(root: &Root, files: &[&Found], parsed: &mut Parsed) {
    let missing: Vec<&Found> =
        files.iter().copied().filter(|f| parsed.get(&f.uri).is_none_or(|(v, _)| *v != f.version)).collect();
    for (f, graph) in missing.iter().zip(parse_all(root, &missing)) {
        parsed.insert(f.uri.clone(), (f.version.clone(), Arc::new(graph)));
    }
}

/// Files' terms read so far, by URI, with the version they were read from.
type Lexed = HashMap<String, (String, Vec<(String, u32)>)>;

/// The term changes that bring the lexical index in step with the tree:
/// files not indexed at their version are (re)indexed (their terms read on
/// every core, once per version), and files gone from the tree dropped.
fn plan_terms(snapshot: &Snapshot, found: &[Found], kept: impl Fn(&str) -> bool, lexed: &mut Lexed) -> Vec<TermChange> {
    let stale: Vec<&Found> = found
        .iter()
        .filter(|f| snapshot.indexed.get(&f.uri).is_none_or(|v| *v != f.version))
        .filter(|f| lexed.get(&f.uri).is_none_or(|(v, _)| *v != f.version))
        .collect();
    for (f, terms) in stale.iter().zip(in_parallel(&stale, |f| lexical::terms(&f.text))) {
        lexed.insert(f.uri.clone(), (f.version.clone(), terms));
    }
    let mut changes: Vec<TermChange> = found
        .iter()
        .filter(|f| snapshot.indexed.get(&f.uri).is_none_or(|v| *v != f.version))
        .map(|f| TermChange { file: f.uri.clone(), version: f.version.clone(), terms: Some(lexed[&f.uri].1.clone()) })
        .collect();
    let mut gone: Vec<&String> = snapshot.indexed.keys().filter(|u| !kept(u)).collect();
    gone.sort();
    changes.extend(gone.into_iter().map(|u| TermChange { file: u.clone(), version: String::new(), terms: None }));
    changes
}

/// `f` of each item, on every core, in order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> =
            items.chunks(chunk).map(|part| scope.spawn(|| part.iter().map(&f).collect::<Vec<R>>())).collect();
        workers.into_iter().flat_map(|w| w.join().expect("a worker thread panicked")).collect()
    })
}

/// Brings the graph in step with the tree under `root`: see the module doc.
/// With `first_load` (an empty store file that no other connection has
/// open), the changes are written without the log, in larger transactions
/// (see `engine::Bulk`).
pub(crate) fn ingest(conn: &Conn, root: &Path, options: IngestOptions, first_load: bool) -> Result<IngestReport> {
    if !std::fs::metadata(root)?.is_dir() {
        return Err(Error::validation("path", format!("{} is not a directory", root.display())));
    }
    let root_name = std::fs::canonicalize(root)?
        .file_name()
        .map_or_else(|| "root".to_owned(), |n| n.to_string_lossy().replace(['.', ' '], "_"));
    let mut report = IngestReport::default();
    let (mut found, imports) = walk(root, options, &mut report);
    let package = Root { name: root_name, python_package: root.join("__init__.py").is_file(), imports };
    if conn.is_postgres() {
        // PostgreSQL text cannot hold NUL: such a file is skipped (and keeps what it had), not the ingest failed.
        found.retain(|f| {
            let keep = !f.text.contains('\0');
            if !keep {
                report.skipped.push(SkippedFile { path: f.relative.display().to_string(), reason: NUL_REASON.into() });
            }
            keep
        });
    }
    let present: HashSet<&str> = found.iter().map(|f| f.uri.as_str()).collect();
    // A skipped file, or a directory the walk could not read, keeps what it had.
    let skipped: Vec<String> = report.skipped.iter().map(|s| format!("project://{}", s.path)).collect();
    let kept = |uri: &str| {
        present.contains(uri)
            || skipped.iter().any(|s| uri == s || (uri.starts_with(s.as_str()) && uri[s.len()..].starts_with('/')))
    };
    let mut parsed = Parsed::default();
    let mut lexed = Lexed::default();
    let (mut first, mut done) = (true, false);
    for _ in 0..ROUNDS {
        let changed = |snapshot: &Snapshot| -> (Vec<&Found>, Vec<String>) {
            let changed: Vec<&Found> = found
                .iter()
                .filter(|f| snapshot.files.get(&f.uri).is_none_or(|v| v.as_deref() != Some(f.version.as_str())))
                .collect();
            let mut gone: Vec<String> = snapshot.files.keys().filter(|u| !kept(u)).cloned().collect();
            gone.sort();
            (changed, gone)
        };
        let snapshot = read(conn, |s| {
            let (changed, gone) = changed(s);
            !s.resolved || !changed.is_empty() || !gone.is_empty()
        })?;
        let (changed, gone) = changed(&snapshot);
        if first {
            first = false;
            report.unchanged = (found.len() - changed.len()) as u64;
            report.parsed = changed.len() as u64;
            report.parsed_files = changed.iter().map(|f| f.relative.display().to_string()).collect();
            report.removed_files = gone.len() as u64;
            report.removed.clone_from(&gone);
        }
        let terms = plan_terms(&snapshot, &found, kept, &mut lexed);
        let Some(stored) = &snapshot.graph else {
            if terms.is_empty() {
                done = true;
                break;
            }
            // The graph is as the tree is; only the lexical index is behind (a store of schema 9).
            let plan = Plan { terms, ..Plan::default() };
            match apply(conn, &plan, snapshot.generation, first_load, &mut report)? {
                Applied::Done => {
                    done = true;
                    break;
                }
                Applied::Moved => continue,
            }
        };
        parse_missing(&package, &changed, &mut parsed);
        let mut planner = Planner::new(stored);
        for f in &changed {
            planner.sync(&f.uri, &parsed[&f.uri].1);
        }
        let nothing = Arc::new(FileGraph::default());
        for uri in &gone {
            planner.sync(uri, &nothing);
        }
        // A URI two files define belongs to the one synced last; when that
        // one drops it, the other claims it again.
        let all: Vec<&Found> = found.iter().collect();
        let mut reclaimed = HashSet::default();
        loop {
            let orphans: Vec<&Found> = planner
                .orphaned(&all)
                .into_iter()
                .map(|i| all[i])
                .filter(|f| reclaimed.insert(f.uri.clone()))
                .collect();
            if orphans.is_empty() {
                break;
            }
            parse_missing(&package, &orphans, &mut parsed);
            for f in orphans {
                planner.sync(&f.uri, &parsed[&f.uri].1);
            }
        }
        let mut plan = planner.finish();
        plan.terms = terms;
        match apply(conn, &plan, snapshot.generation, first_load, &mut report)? {
            Applied::Done => {
                report.parse_errors = changed
                    .iter()
                    .filter(|f| parsed[&f.uri].1.has_errors)
                    .map(|f| f.relative.display().to_string())
                    .collect();
                done = true;
                break;
            }
            // Another writer changed the graph: plan again from what is stored now.
            Applied::Moved => continue,
        }
    }
    if !done {
        return Err(Error::Busy);
    }
    Ok(report)
}

/// How an [`apply`] ended.
enum Applied {
    Done,
    /// The graph's generation moved under the plan: nothing more was written.
    Moved,
}

/// One step of a plan, in the order they are written.
enum Step<'p> {
    File(&'p FileChange),
    Terms(&'p [TermChange]),
    RemoveEdges(&'p [CodeEdge]),
    AddEdges(&'p [CodeEdge]),
}

impl Step<'_> {
    /// The rows it writes, for the transaction's bound.
    fn rows(&self) -> usize {
        match self {
            Step::File(c) => {
                c.remove.len() + 2 + c.upsert.iter().map(|(g, i, _)| 2 + g.nodes[*i].views.len()).sum::<usize>()
            }
            Step::Terms(files) => files.iter().map(TermChange::rows).sum(),
            Step::RemoveEdges(e) | Step::AddEdges(e) => e.len(),
        }
    }
}

/// Writes `plan` in transactions of at most [`BOUND`] rows (a step larger
/// than that, one file's, goes alone), each checked against the generation
/// the previous one left, starting from `generation`.
fn apply(
    conn: &Conn,
    plan: &Plan,
    mut generation: i64,
    first_load: bool,
    report: &mut IngestReport,
) -> Result<Applied> {
    let mut steps: Vec<Step<'_>> = plan.files.iter().map(Step::File).collect();
    steps.extend(plan.remove_edges.chunks(BOUND).map(Step::RemoveEdges));
    steps.extend(plan.add_edges.chunks(BOUND).map(Step::AddEdges));
    // Files' terms in runs of about a transaction's rows, each run's postings written in term order.
    let run = if first_load { FIRST_LOAD_BATCH } else { BOUND };
    let mut rest: &[TermChange] = &plan.terms;
    while !rest.is_empty() {
        let (mut n, mut rows) = (0, 0);
        while n < rest.len() && (n == 0 || rows + rest[n].rows() <= run) {
            rows += rest[n].rows();
            n += 1;
        }
        steps.push(Step::Terms(&rest[..n]));
        rest = &rest[n..];
    }
    let bulk = conn.bulk(first_load);
    let mut steps = steps.into_iter().peekable();
    // The key of each node written (or looked up) so far: keys stay as they are.
    let mut keys: HashMap<String, NodeKey> = HashMap::default();
    loop {
        let tx = bulk.begin()?;
        if graph::lock(&tx)? != generation {
            return Ok(Applied::Moved);
        }
        let (bound, hold) = if bulk.is_unlogged() { (FIRST_LOAD_BATCH, FIRST_LOAD_HOLD) } else { (BOUND, MAX_HOLD) };
        let (mut rows, began) = (0, Instant::now());
        let mut writer = graph::code::Writer::new(&tx)?;
        while let Some(step) = steps.next_if(|s| rows == 0 || (rows + s.rows() <= bound && began.elapsed() < hold)) {
            rows += step.rows();
            write(&tx, &mut writer, &mut keys, &step, report)?;
        }
        writer.finish(&tx)?;
        let done = steps.peek().is_none();
        if rows > 0 {
            generation = graph::bump(&tx, generation)?;
        }
        if done {
            // The plan is whole: the next ingest need not resolve again.
            graph::code::set_resolved(&tx, generation)?;
        }
        tx.commit()?;
        report.batches += u64::from(rows > 0);
        if done {
            return Ok(Applied::Done);
        }
        bulk.between();
    }
}

fn write(
    tx: &WriteTx<'_>,
    writer: &mut graph::code::Writer<'_>,
    keys: &mut HashMap<String, NodeKey>,
    step: &Step<'_>,
    report: &mut IngestReport,
) -> Result<()> {
    match step {
        Step::File(c) => {
            writer.remove(tx, &c.remove)?;
            for uri in &c.remove {
                keys.remove(uri);
            }
            for (graph, at, fresh) in &c.upsert {
                writer.node(tx, &graph.nodes[*at], *fresh, keys)?;
            }
            references::set_file(
                tx,
                &c.file,
                c.references
                    .iter()
                    .flat_map(|g| g.references.iter())
                    .map(|r| (r.from.as_str(), r.relation, r.name.as_str())),
            )?;
            report.nodes_added += c.added;
            report.nodes_changed += c.changed;
            report.nodes_removed += c.removed;
        }
        Step::Terms(files) => {
            let files: Vec<terms_table::FileTerms<'_>> =
                files.iter().map(|t| (t.file.as_str(), t.version.as_str(), t.terms.as_deref())).collect();
            terms_table::index_files(tx, &files)?;
            report.indexed += files.iter().filter(|f| f.2.is_some()).count() as u64;
        }
        Step::RemoveEdges(edges) => {
            graph::code::remove_edges(tx, edges.iter().map(|(s, r, t)| (s.as_str(), r.as_str(), t.as_str())))?;
            report.edges_removed += edges.len() as u64;
        }
        Step::AddEdges(edges) => {
            for (source, relation, target) in *edges {
                writer.edge(source, relation, target, keys)?;
            }
            report.edges_added += edges.len() as u64;
        }
    }
    Ok(())
}
