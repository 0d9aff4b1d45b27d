//! Relevance ranking: the files most worth showing for a focus, each by
//! its definitions' signatures, within a token budget.
//!
//! Where the breadth-first projection shows what lies near the focus in
//! the graph, nearest first, this ranking asks which *files* an engineer
//! changing the focus will need, from four signals, each a ranked list of
//! files:
//!
//! - **graph**: personalized PageRank over the file graph around the focus
//!   (files linked by imports, calls, references, bases: every relation
//!   but `contains` and `co_changed`), walked `breadth` file hops (at most
//!   two) in the spec's direction;
//! - **history**: files that changed together with the focus in the git
//!   history (`co_changed` links, recency-weighted), each link's weight
//!   divided by the square root of the other file's total, so that a
//!   file that changes with everything does not lead every list;
//! - **words**: BM25 between the focus's most telling terms and every
//!   indexed file's;
//! - **directory**: the files of the focus's directory, then of its parent.
//!
//! The lists are fused ([`Fusion`]): by reciprocal rank (each file scores
//! `Σ weight / (K + rank)` over the lists that hold it), or as PageRank
//! whose restart vector is the focus and the other signals' files. The
//! budget is then spent in turns: the most telling definition of every
//! file in rank order, then the second of each, and so on, each at its
//! signature view (its header and the first line of its documentation);
//! a file with no definition shows its head (its first lines). The focus itself comes
//! first as its outline (the symbols it defines), when that costs at
//! most a tenth of the budget.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use super::{ContextFragment, FragmentSet, ProjectedNode, Projection, ProjectionSpec, TokenCounter};
use crate::error::Result;
use crate::uko::{Definition, Direction, FileLink, GraphSource, NodeKey, NodeView, CO_CHANGED};

/// How the signals' lists become one ranking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal-rank fusion: `Σ weight / (K + rank)`.
    ReciprocalRank,
    /// PageRank over the file graph and the history's links, restarting at
    /// the focus and, in proportion to their fused weight, at the files
    /// the words and the directory name.
    PageRank,
}

/// The weights of the four signals (0 leaves one out) and how they are fused.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Signals {
    pub graph: f64,
    pub history: f64,
    pub words: f64,
    pub directory: f64,
    pub fusion: Fusion,
}

impl Signals {
    /// The weights the context benchmark found best (`docs/ingest.md`).
    pub const DEFAULT: Signals =
        Signals { graph: 1.0, history: 1.0, words: 1.0, directory: 0.5, fusion: Fusion::ReciprocalRank };
}

impl Default for Signals {
    fn default() -> Self {
        Signals::DEFAULT
    }
}

/// Reciprocal-rank fusion's constant: how much the first places count
/// more than the tenth.
const K: f64 = 10.0;
/// The most files each signal contributes.
const PER_SIGNAL: usize = 200;
/// The hop-one files whose own links the graph signal follows.
const SECOND_HOP: usize = 32;
/// The focus's terms BM25 queries with: the most telling ones.
const QUERY_TERMS: usize = 40;
/// A term held by more files than this, or a tenth of them if that is
/// more, is too common to query with.
const COMMON_FLOOR: u64 = 50;
/// The depth of a definition's signature view, and of a file's outline.
const SIGNATURE: u32 = 4;
const OUTLINE: u32 = 1;

/// One ranked file.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedFile {
    pub file: String,
    /// The fused score, the best file's 1.
    pub score: f64,
}

/// The files other than the focus's, best first, with their fused scores.
///
/// # Errors
/// The source's errors.
pub fn rank_files(
    graph: &impl GraphSource,
    focus_files: &[String],
    direction: Direction,
    hops: u32,
    signals: &Signals,
) -> Result<Vec<RankedFile>> {
    let others = |list: Vec<String>| -> Vec<String> {
        let mut list: Vec<String> = list.into_iter().filter(|f| !focus_files.contains(f)).collect();
        list.truncate(PER_SIGNAL);
        list
    };
    let wants_graph = (signals.graph > 0.0 || signals.fusion == Fusion::PageRank) && hops > 0;
    let code = if wants_graph { code_links(graph, focus_files, direction, hops)? } else { Vec::new() };
    let co_changed = if signals.history > 0.0 || signals.fusion == Fusion::PageRank {
        graph.file_links(focus_files, Some(CO_CHANGED))?.into_iter().filter(|l| l.outgoing).collect()
    } else {
        Vec::new()
    };
    let history = if signals.history > 0.0 { others(history(graph, &co_changed)?) } else { Vec::new() };
    let words = if signals.words > 0.0 { others(similar_files(graph, focus_files)?) } else { Vec::new() };
    let directory = if signals.directory > 0.0 { others(directory(graph, focus_files)?) } else { Vec::new() };
    let fused = match signals.fusion {
        Fusion::ReciprocalRank => {
            let graph_rank = if signals.graph > 0.0 {
                others(pagerank(focus_files, &undirected(&code), &HashMap::new()).into_iter().map(|(f, _)| f).collect())
            } else {
                Vec::new()
            };
            reciprocal_rank(&[
                (signals.graph, graph_rank),
                (signals.history, history),
                (signals.words, words),
                (signals.directory, directory),
            ])
        }
        Fusion::PageRank => {
            // Restart at the focus (half) and at the other signals' files, by their fused rank.
            let restart: HashMap<String, f64> =
                reciprocal_rank(&[(signals.history, history), (signals.words, words), (signals.directory, directory)])
                    .into_iter()
                    .collect();
            let mut edges = undirected(&code);
            if signals.history > 0.0 {
                for (pair, w) in undirected(&co_changed) {
                    *edges.entry(pair).or_default() += signals.history * w;
                }
            }
            pagerank(focus_files, &edges, &restart)
        }
    };
    let best = fused.first().map_or(1.0, |(_, s)| *s).max(f64::MIN_POSITIVE);
    Ok(fused.into_iter().map(|(file, s)| RankedFile { file, score: s / best }).collect())
}

/// The code's links of the focus files (in `direction`), and with two hops
/// those of the [`SECOND_HOP`] files they link to most.
fn code_links(
    graph: &impl GraphSource,
    focus_files: &[String],
    direction: Direction,
    hops: u32,
) -> Result<Vec<FileLink>> {
    let mut links: Vec<FileLink> =
        graph.file_links(focus_files, None)?.into_iter().filter(|l| follows(direction, l.outgoing)).collect();
    if hops > 1 {
        let near = top(tally(links.iter().map(|l| (&l.other_file, l.weight))), SECOND_HOP);
        let near: Vec<String> = near.into_iter().filter(|f| !focus_files.contains(f)).collect();
        links.extend(graph.file_links(&near, None)?.into_iter().filter(|l| follows(direction, l.outgoing)));
    }
    Ok(links)
}

fn follows(direction: Direction, outgoing: bool) -> bool {
    match direction {
        Direction::Both => true,
        Direction::Outgoing => outgoing,
        Direction::Incoming => !outgoing,
    }
}

/// Sums weights by key.
fn tally<'a>(items: impl Iterator<Item = (&'a String, f64)>) -> HashMap<&'a String, f64> {
    let mut sums: HashMap<&String, f64> = HashMap::new();
    for (k, w) in items {
        *sums.entry(k).or_default() += w;
    }
    sums
}

/// The `n` keys of the largest sums, ties by name.
fn top(sums: HashMap<&String, f64>, n: usize) -> Vec<String> {
    let mut v: Vec<(&String, f64)> = sums.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    v.into_iter().take(n).map(|(k, _)| k.clone()).collect()
}

/// The file graph of `links`, both ways: (a, b) -> summed weight. An
/// edge between two files that were both asked about is met from both
/// ends; it counts once, as its source's.
fn undirected(links: &[FileLink]) -> HashMap<(String, String), f64> {
    let sent: HashSet<(&str, &str)> =
        links.iter().filter(|l| l.outgoing).map(|l| (l.file.as_str(), l.other_file.as_str())).collect();
    let mut out: HashMap<(String, String), f64> = HashMap::new();
    for l in links {
        if !l.outgoing && sent.contains(&(l.other_file.as_str(), l.file.as_str())) {
            continue;
        }
        *out.entry((l.file.clone(), l.other_file.clone())).or_default() += l.weight;
        *out.entry((l.other_file.clone(), l.file.clone())).or_default() += l.weight;
    }
    out
}

/// Personalized PageRank (damping 0.85, 30 rounds) over `edges`,
/// restarting at `focus` (half the restart when `extra` is not empty) and
/// at `extra`'s files in proportion to their weights; files by rank,
/// highest first, ties by name.
fn pagerank(
    focus: &[String],
    edges: &HashMap<(String, String), f64>,
    extra: &HashMap<String, f64>,
) -> Vec<(String, f64)> {
    let mut names: Vec<&String> = focus.iter().collect();
    for (a, b) in edges.keys() {
        names.push(a);
        names.push(b);
    }
    names.extend(extra.keys());
    names.sort();
    names.dedup();
    let index: HashMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let n = names.len();
    if n == 0 {
        return Vec::new();
    }
    let mut restart = vec![0.0; n];
    let extra_total: f64 = extra.values().sum();
    let focus_share = if extra_total > 0.0 { 0.5 } else { 1.0 };
    for f in focus {
        restart[index[f]] += focus_share / focus.len() as f64;
    }
    for (f, w) in extra {
        restart[index[f]] += (1.0 - focus_share) * w / extra_total;
    }
    let mut out_weight = vec![0.0; n];
    let mut pairs: Vec<(usize, usize, f64)> = edges.iter().map(|((a, b), w)| (index[a], index[b], *w)).collect();
    pairs.sort_by_key(|p| (p.0, p.1));
    for &(a, _, w) in &pairs {
        out_weight[a] += w;
    }
    let mut rank = restart.clone();
    for _ in 0..30 {
        let mut next: Vec<f64> = restart.iter().map(|r| 0.15 * r).collect();
        let mut stranded = 0.0;
        for (i, r) in rank.iter().enumerate() {
            if out_weight[i] == 0.0 {
                stranded += r;
            }
        }
        for &(a, b, w) in &pairs {
            next[b] += 0.85 * rank[a] * w / out_weight[a];
        }
        for (i, r) in restart.iter().enumerate() {
            next[i] += 0.85 * stranded * r;
        }
        rank = next;
    }
    let mut ranked: Vec<(String, f64)> = names.iter().map(|n| (*n).clone()).zip(rank).collect();
    ranked.retain(|(f, r)| *r > 0.0 && !focus.contains(f));
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
}

/// Files that changed with the focus (its outgoing `co_changed` links),
/// by link weight over the square root of the file's whole history weight.
fn history(graph: &impl GraphSource, links: &[FileLink]) -> Result<Vec<String>> {
    let mine = tally(links.iter().map(|l| (&l.other_file, l.weight)));
    if mine.is_empty() {
        return Ok(Vec::new());
    }
    let others: Vec<String> = mine.keys().map(|f| (*f).clone()).collect();
    let totals = graph.link_totals(&others, CO_CHANGED)?;
    let mut scored: Vec<(String, f64)> = mine
        .into_iter()
        .map(|(f, w)| (f.clone(), w / totals.get(f).copied().unwrap_or(w).max(f64::MIN_POSITIVE).sqrt()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(scored.into_iter().map(|(f, _)| f).collect())
}

/// BM25 (k1 1.2, b 0.75) of every indexed file against the focus files'
/// most telling terms (by count times inverse document frequency).
fn similar_files(graph: &impl GraphSource, focus_files: &[String]) -> Result<Vec<String>> {
    let mut query: HashMap<String, u32> = HashMap::new();
    for f in focus_files {
        for (term, n) in graph.file_terms(f)? {
            *query.entry(term).or_default() += n;
        }
    }
    if query.is_empty() {
        return Ok(Vec::new());
    }
    let terms: Vec<String> = query.keys().cloned().collect();
    let stats = graph.term_statistics(&terms)?;
    let n = stats.files as f64;
    let idf = |df: u64| (1.0 + (n - df as f64 + 0.5) / (df as f64 + 0.5)).ln();
    // Terms that no other file holds match nothing; those that a tenth of
    // the files hold tell little and have the longest postings to read.
    let common = (stats.files / 10).max(COMMON_FLOOR);
    let mut telling: Vec<(String, f64)> = query
        .iter()
        .filter_map(|(t, &q)| {
            let df = stats.document_frequency.get(t).copied().unwrap_or(0);
            (df >= 2 && df <= common).then(|| (t.clone(), (1.0 + f64::from(q).ln()) * idf(df)))
        })
        .collect();
    telling.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    telling.truncate(QUERY_TERMS);
    let (k1, b) = (1.2, 0.75);
    let mean = stats.mean_length.max(1.0);
    let terms: Vec<String> = telling.iter().map(|(t, _)| t.clone()).collect();
    let mut scores: HashMap<i64, f64> = HashMap::new();
    for (term, doc, tf, length) in graph.postings(&terms)? {
        let tf = f64::from(tf);
        let norm = k1 * (1.0 - b + b * f64::from(length) / mean);
        *scores.entry(doc).or_default() += telling[term].1 * tf * (k1 + 1.0) / (tf + norm);
    }
    let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // The focus's own files are among the best: name one more than a list holds.
    ranked.truncate(PER_SIGNAL + focus_files.len());
    let docs: Vec<i64> = ranked.iter().map(|(d, _)| *d).collect();
    let files = graph.document_files(&docs)?;
    Ok(files.into_iter().filter(|f| !focus_files.contains(f)).collect())
}

/// The files of the focus's directory, then of its parent's (the nearest
/// directories first; within one, by name).
fn directory(graph: &impl GraphSource, focus_files: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = focus_files.iter().cloned().collect();
    for f in focus_files {
        let Some(rest) = f.strip_prefix("project://") else { continue };
        let mut dir = rest.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        for _ in 0..2 {
            let prefix = if dir.is_empty() { "project://".to_owned() } else { format!("project://{dir}/") };
            let mut here: Vec<String> = graph.files_under(&prefix, PER_SIGNAL)?;
            // Files directly in the directory before those in its subdirectories.
            here.sort_by_key(|f| (f[prefix.len()..].contains('/'), f.clone()));
            for file in here {
                if seen.insert(file.clone()) {
                    out.push(file);
                }
            }
            if dir.is_empty() {
                break;
            }
            dir = dir.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        }
    }
    Ok(out)
}

/// `Σ weight / (K + rank)` over the lists holding each file (rank from 1).
fn reciprocal_rank(lists: &[(f64, Vec<String>)]) -> Vec<(String, f64)> {
    let mut scores: HashMap<String, f64> = HashMap::new();
    for (weight, list) in lists {
        if *weight <= 0.0 {
            continue;
        }
        for (i, f) in list.iter().enumerate() {
            *scores.entry(f.clone()).or_default() += weight / (K + i as f64 + 1.0);
        }
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
}

/// The relevance projection of `spec` (see the module doc): the focus's
/// outline, then the ranked files' definitions within `budget` (with no
/// budget, every definition of the 30 best files).
pub(super) fn project(
    graph: &impl GraphSource,
    spec: &ProjectionSpec,
    full: u32,
    signals: &Signals,
    counter: &dyn TokenCounter,
    budget: Option<usize>,
) -> Result<Option<(Projection, FragmentSet)>> {
    let focus = graph.resolve(spec.focus())?;
    let focus_records = graph.records_to_depth(&focus, OUTLINE)?;
    let mut focus_files: Vec<String> = focus_records.iter().filter_map(|r| r.resource_uri.clone()).collect();
    focus_files.sort();
    focus_files.dedup();
    if focus_files.is_empty() {
        // Nothing here comes from a file: only the graph's distances can rank it.
        return Ok(None);
    }
    let ranked = rank_files(graph, &focus_files, spec.direction(), spec.breadth().min(2), signals)?;
    let depth = full.min(SIGNATURE);
    let mut fragments = Vec::new();
    let mut nodes = Vec::new();
    let mut used = 0;
    // The focus: each node's outline, when it is cheap enough.
    for r in &focus_records {
        let view = r.views.iter().filter(|v| v.depth <= OUTLINE.min(full)).max_by_key(|v| v.depth);
        let none = || NodeView { depth: 0, content: String::new() };
        let mut view = view.cloned().unwrap_or_else(none);
        let mut tokens = counter.count(&view.content);
        if budget.is_some_and(|b| tokens * 10 > b) {
            view = r.views.iter().find(|v| v.depth == 0).cloned().unwrap_or_else(none);
            tokens = counter.count(&view.content);
        }
        if let Some(b) = budget.filter(|b| used + tokens > *b) {
            // The focus comes first: a budget that cannot hold even its name says so.
            return Err(super::budget_too_small(b, &r.uri, used + tokens));
        }
        used += tokens;
        nodes.push(ProjectedNode::new(r.uri.clone(), 0, view.depth));
        fragments.push(
            fragment(r.uri.clone(), r.resource_uri.clone(), r.domain.clone(), view.content, tokens, view.depth, 1.0)
                .with_metadata("distance", Value::from(0)),
        );
    }
    let files: Vec<&RankedFile> = match budget {
        Some(_) => ranked.iter().collect(),
        None => ranked.iter().take(30).collect(),
    };
    let (kept, dropped) = fill(graph, &files, depth, counter, budget.map(|b| b.saturating_sub(used)))?;
    for k in kept {
        used += k.tokens();
        nodes.push(ProjectedNode::new(k.uko_node().to_owned(), 1, k.detail_depth()));
        fragments.push(k);
    }
    let projection = Projection { spec: spec.clone(), full_depth: full, nodes, cut: Vec::new() };
    Ok(Some((projection, FragmentSet { fragments, dropped, covered: Vec::new(), total_tokens: used })))
}

fn fragment(
    uri: String,
    resource: Option<String>,
    domain: String,
    content: String,
    tokens: usize,
    depth: u32,
    score: f64,
) -> ContextFragment {
    let mut f = ContextFragment::new(uri, content, tokens, depth)
        .with_domain(domain)
        .with_score(score)
        .with_metadata("projected", Value::Bool(true))
        .with_metadata("ranking", Value::from("relevance"));
    if let Some(r) = resource {
        f = f.with_resource_uri(r);
    }
    f
}

/// How many ranked files' definitions, or fragments' views, are read at a time.
const AT_A_TIME: usize = 64;
/// A budget with fewer tokens left than this is spent: no signature is shorter.
const SMALLEST: usize = 4;
/// After this many fragments in a row that did not fit, the budget is spent.
const MISSES: usize = 2 * AT_A_TIME;

/// Spends `budget` in turns over `files` (see the module doc); returns the
/// fragments kept, in rank order (each file's in its definitions' order),
/// and the URIs of those read but left out. Definitions are read a chunk
/// of files at a time and views a batch of fragments at a time, only as
/// far as the budget reaches.
fn fill(
    graph: &impl GraphSource,
    files: &[&RankedFile],
    depth: u32,
    counter: &dyn TokenCounter,
    budget: Option<usize>,
) -> Result<(Vec<ContextFragment>, Vec<String>)> {
    // Each file's fragment keys, most telling first; files are read in as the turns reach them.
    let mut keys: Vec<Vec<NodeKey>> = Vec::new();
    let mut kept: Vec<Vec<(usize, ContextFragment)>> = Vec::new();
    let mut dropped = Vec::new();
    let mut used = 0;
    // Fragments in a row that did not fit: past MISSES, the budget is as good as spent.
    let mut misses = 0;
    let fits = |used: usize, tokens: usize| budget.is_none_or(|b| used + tokens <= b);
    let spent = |used: usize, misses: usize| budget.is_some_and(|b| used + SMALLEST > b || misses >= MISSES);
    for turn in 0.. {
        let mut any = false;
        let mut at = 0;
        while at < files.len() {
            if spent(used, misses) {
                break;
            }
            while keys.len() < files.len() && keys.len() < at + AT_A_TIME {
                let chunk: Vec<&RankedFile> = files[keys.len()..files.len().min(keys.len() + AT_A_TIME)].to_vec();
                keys.extend(definition_keys(graph, &chunk)?);
                kept.resize_with(keys.len(), Vec::new);
            }
            // The next batch: the turn's fragment of each file from `at` on that has one.
            let mut batch: Vec<(usize, NodeKey)> = Vec::new();
            while at < files.len() && batch.len() < AT_A_TIME {
                if let Some(&k) = keys.get(at).and_then(|ks| ks.get(turn)) {
                    batch.push((at, k));
                }
                at += 1;
                if at >= keys.len() {
                    break;
                }
            }
            if batch.is_empty() {
                continue;
            }
            any = true;
            let records = graph.records_to_depth(&batch.iter().map(|b| b.1).collect::<Vec<_>>(), depth)?;
            for ((i, _), r) in batch.into_iter().zip(records) {
                let Some(view) = r.views.iter().filter(|v| v.depth <= depth).max_by_key(|v| v.depth) else { continue };
                let tokens = counter.count(&view.content);
                if fits(used, tokens) {
                    used += tokens;
                    misses = 0;
                    let f = fragment(
                        r.uri,
                        r.resource_uri,
                        r.domain,
                        view.content.clone(),
                        tokens,
                        view.depth,
                        files[i].score,
                    )
                    .with_metadata("distance", Value::from(1));
                    kept[i].push((turn, f));
                } else {
                    misses += 1;
                    dropped.push(r.uri);
                }
            }
        }
        if !any || spent(used, misses) {
            break;
        }
    }
    let mut out: Vec<ContextFragment> = Vec::new();
    for mut frags in kept {
        frags.sort_by_key(|(turn, _)| *turn);
        out.extend(frags.into_iter().map(|(_, f)| f));
    }
    Ok((out, dropped))
}

/// Each file's fragment keys, most telling first: its definitions, or the
/// file itself when it defines nothing.
fn definition_keys(graph: &impl GraphSource, files: &[&RankedFile]) -> Result<Vec<Vec<NodeKey>>> {
    let names: Vec<String> = files.iter().map(|f| f.file.clone()).collect();
    let mut defs: HashMap<String, Vec<Definition>> = HashMap::new();
    for d in graph.definitions(&names)? {
        defs.entry(d.file.clone()).or_default().push(d);
    }
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        out.push(match defs.get(&f.file) {
            Some(ds) => order_definitions(ds).into_iter().map(|d| d.key).collect(),
            None => graph.resolve(std::slice::from_ref(&f.file)).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// A file's definitions, most telling first: its classes and functions
/// at the top level before methods, each group in the order written.
fn order_definitions(defs: &[Definition]) -> Vec<&Definition> {
    let path = |d: &Definition| d.uri.split_once("://").map_or(String::new(), |(_, p)| p.to_owned());
    let classes: HashSet<String> = defs.iter().filter(|d| d.kind == "class").map(path).collect();
    let nested = |d: &Definition| path(d).rsplit_once('.').is_some_and(|(parent, _)| classes.contains(parent));
    let mut ordered: Vec<&Definition> = defs.iter().collect();
    ordered.sort_by_key(|d| (nested(d), d.key));
    ordered
}
