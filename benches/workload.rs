//! A deterministic synthetic workload with the shape and size of
//! `gen.py`'s defaults (kept in the benches so `cargo bench` needs nothing
//! else): P plans x N decisions with every field filled, corrections,
//! supersessions and downstream links; a code-like graph (package > module
//! > class > function, `contains` plus power-law `imports`/`calls`).
//!
//! Set `DSTORE_BENCH_DATA=DIR` to use `gen.py`'s own output instead.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::json;

/// SplitMix64: small, fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn pick<'a>(&mut self, xs: &'a [&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "cache",
    "index",
    "store",
    "query",
    "plan",
    "node",
    "edge",
    "graph",
    "tree",
    "schema",
    "token",
    "budget",
    "context",
    "fragment",
    "latency",
    "throughput",
    "retry",
    "timeout",
    "lock",
    "batch",
    "stream",
    "parser",
    "module",
    "class",
    "function",
    "config",
    "auth",
    "session",
    "user",
    "request",
    "response",
    "handler",
    "error",
    "failure",
    "fallback",
    "invariant",
    "because",
    "therefore",
    "however",
    "instead",
    "faster",
    "safer",
    "simpler",
    "stable",
    "deterministic",
    "durable",
    "keeps",
    "avoids",
];
const VERBS: &[&str] = &["load", "save", "parse", "build", "resolve", "fetch", "merge", "split", "render", "validate"];
const NOUNS: &[&str] =
    &["config", "session", "token", "user", "plan", "node", "edge", "graph", "cache", "index", "query"];
const CAPS: &[&str] =
    &["Auth", "Cache", "Index", "Graph", "Plan", "Session", "Token", "Query", "Store", "Parser", "Router"];
const TYPES: &[&str] = &[
    "invariant_enforced",
    "strategy_choice",
    "implementation_choice",
    "resource_selection",
    "subplan_spawn",
    "subplan_parallel_spawn",
    "tool_invocation",
    "error_recovery",
    "validation_response",
    "user_intervention",
];

fn prose(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let target = lo + rng.below(hi - lo + 1);
    let mut s = String::with_capacity(hi + 16);
    while s.len() < target {
        for i in 0..(5 + rng.below(10)) {
            if i > 0 || !s.is_empty() {
                s.push(' ');
            }
            s.push_str(rng.pick(WORDS));
        }
        s.push('.');
    }
    s.truncate(hi);
    s
}

/// ULIDs from a strictly increasing millisecond clock.
struct Ulids {
    ms: u64,
}

impl Ulids {
    fn next(&mut self, rng: &mut Rng) -> String {
        self.ms += 1 + rng.below(2000) as u64;
        let v: u128 = (u128::from(self.ms) << 80) | (u128::from(rng.next()) << 16 | u128::from(rng.next() & 0xffff));
        const B32: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
        (0..26).map(|i| B32[((v >> (125 - 5 * i)) & 31) as usize] as char).collect()
    }
}

/// Where the data of one workload lives.
pub struct Files {
    pub dir: PathBuf,
    pub decisions: PathBuf,
    pub nodes: PathBuf,
    pub edges: PathBuf,
    pub plan_ids: Vec<String>,
    pub class_uris: Vec<String>,
}

fn files(dir: &Path) -> Files {
    Files {
        dir: dir.to_owned(),
        decisions: dir.join("decisions.jsonl"),
        nodes: dir.join("nodes.jsonl"),
        edges: dir.join("edges.jsonl"),
        plan_ids: Vec::new(),
        class_uris: Vec::new(),
    }
}

/// Writes `plans` x `per_plan` decisions as JSONL; returns the plan ids.
pub fn write_decisions(path: &Path, plans: usize, per_plan: usize, resources: &[String], seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut ids = Ulids { ms: 1_735_689_600_000 };
    let plan_ids: Vec<String> = (0..plans).map(|_| ids.next(&mut rng)).collect();
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    for plan in &plan_ids {
        let mut ds: Vec<serde_json::Value> = Vec::with_capacity(per_plan);
        let mut corrected = vec![false; per_plan];
        for i in 0..per_plan {
            let id = ids.next(&mut rng);
            let (parent, dtype, corrects) = if i == 0 {
                (None, "prompt_definition".to_owned(), None)
            } else {
                let target = 1 + rng.below(i.max(2) - 1);
                if i > 1 && rng.unit() < 0.05 && target < i && !corrected[target] {
                    corrected[target] = true;
                    let t = &ds[target];
                    (
                        t["parent_decision_id"].as_str().map(str::to_owned),
                        t["decision_type"].as_str().unwrap().to_owned(),
                        Some(t["decision_id"].as_str().unwrap().to_owned()),
                    )
                } else {
                    let p = if rng.unit() < 0.45 { i - 1 } else { rng.below(i) };
                    (Some(ds[p]["decision_id"].as_str().unwrap().to_owned()), rng.pick(TYPES).to_owned(), None)
                }
            };
            let r1 = &resources[rng.below(resources.len())];
            let r2 = &resources[rng.below(resources.len())];
            let alternatives: Vec<serde_json::Value> = (0..3)
                .map(|k| {
                    let option = format!("{} {} option {k}", rng.pick(VERBS), rng.pick(NOUNS));
                    let rationale = if rng.unit() < 0.2 { None } else { Some(prose(&mut rng, 40, 90)) };
                    json!({"option": option, "rationale": rationale})
                })
                .collect();
            let resources: Vec<serde_json::Value> = [r1, r2]
                .iter()
                .map(|u| {
                    let version = if rng.unit() < 0.5 { None } else { Some(format!("v{}", 1 + rng.below(9))) };
                    json!({"resource_id": u, "resource_type": u.split(':').next(), "version": version})
                })
                .collect();
            let mut hash = String::with_capacity(64);
            for _ in 0..4 {
                let _ = write!(hash, "{:016x}", rng.next());
            }
            ds.push(json!({
                "decision_id": id,
                "plan_id": plan,
                "parent_decision_id": parent,
                "sequence": i,
                "decision_type": dtype,
                "chosen_option": format!("{} {} via {}{}", rng.pick(VERBS), rng.pick(NOUNS), rng.pick(CAPS), rng.pick(CAPS)),
                "rationale": prose(&mut rng, 190, 340),
                "confidence_score": if rng.unit() < 0.1 { None } else { Some((rng.unit() * 1000.0).round() / 1000.0) },
                "alternatives": alternatives,
                "context_snapshot": {
                    "hash": hash,
                    "resources": resources,
                    "actor_state_ref": if rng.unit() < 0.5 { None } else { Some(format!("checkpoint://actor/{}", rng.below(9999))) },
                },
                "artifacts_produced": [{"artifact_path": format!("src/{}/{}_{i}.py", rng.pick(NOUNS), rng.pick(VERBS)), "content_hash": format!("{:016x}{:016x}", rng.next(), rng.next())}],
                "is_correction": corrects.is_some(),
                "corrects_decision_id": corrects,
                "superseded_by": null,
                "downstream_decision_ids": [],
                "downstream_plan_ids": [],
                "metadata": {"agent": format!("agent-{}", 1 + rng.below(8)), "turn": i},
            }));
        }
        for i in 1..per_plan.saturating_sub(1) {
            // A decision is overturned once: a corrected one is never also superseded.
            if rng.unit() < 0.03 && !corrected[i] {
                let j = (i + 1 + rng.below(50)).min(per_plan - 1);
                ds[i]["superseded_by"] = ds[j]["decision_id"].clone();
            }
            if rng.unit() < 0.10 {
                let j = i + 1 + rng.below(per_plan - i - 1);
                ds[i]["downstream_decision_ids"] = json!([ds[j]["decision_id"]]);
            }
            if rng.unit() < 0.02 {
                ds[i]["downstream_plan_ids"] = json!([plan_ids[rng.below(plan_ids.len())]]);
            }
        }
        for d in &ds {
            serde_json::to_writer(&mut out, d).unwrap();
            out.write_all(b"\n").unwrap();
        }
    }
    out.flush().unwrap();
    plan_ids
}

/// Writes the graph JSONL; returns (resource URIs for decisions, class URIs).
pub fn write_graph(
    nodes_path: &Path,
    edges_path: &Path,
    n_nodes: usize,
    edges_per_node: usize,
    seed: u64,
) -> (Vec<String>, Vec<String>) {
    let mut rng = Rng::new(seed);
    let n_pkg = (n_nodes / 500).max(1);
    let n_mod = (n_nodes / 50).max(1);
    let n_cls = (n_nodes / 10).max(1);
    let n_fn = n_nodes - n_pkg - n_mod - n_cls;
    let mut nodes = BufWriter::with_capacity(1 << 20, std::fs::File::create(nodes_path).unwrap());
    let mut edges = BufWriter::with_capacity(1 << 20, std::fs::File::create(edges_path).unwrap());
    let mut n_edges = 0usize;
    let mut node = |uri: &str, kind: &str, label: &str, v4: String, v9: String, parent: Option<&str>| {
        serde_json::to_writer(
            &mut nodes,
            &json!({"uri": uri, "domain": "uko-code:", "kind": kind, "label": label,
            "views": [{"depth": 0, "content": label}, {"depth": 4, "content": v4}, {"depth": 9, "content": v9}]}),
        )
        .unwrap();
        nodes.write_all(b"\n").unwrap();
        if let Some(p) = parent {
            serde_json::to_writer(
                &mut edges,
                &json!({"source": p, "target": uri, "relation": "contains", "weight": null}),
            )
            .unwrap();
            edges.write_all(b"\n").unwrap();
            n_edges += 1;
        }
    };
    let source = |rng: &mut Rng, header: &str, lines: usize| -> String {
        let mut s = format!("{header}:\n    \"\"\"{}\"\"\"\n", prose(rng, 40, 90));
        for _ in 0..lines {
            let _ = writeln!(
                s,
                "    {} = {}_{}({}, {})",
                rng.pick(NOUNS),
                rng.pick(VERBS),
                rng.pick(NOUNS),
                rng.pick(NOUNS),
                rng.below(99)
            );
        }
        s.push_str("    return result");
        s
    };
    let pkgs: Vec<String> = (0..n_pkg).map(|i| format!("pkg{i}")).collect();
    for p in &pkgs {
        let v9 = format!("package {p}\n{}", prose(&mut rng, 80, 200));
        node(&format!("package://{p}"), "package", p, format!("package {p}"), v9, None);
    }
    let mut mods = Vec::with_capacity(n_mod);
    for i in 0..n_mod {
        let pkg = &pkgs[rng.below(n_pkg)];
        let q = format!("{pkg}.{}_{i}", rng.pick(NOUNS));
        let v9 = format!("\"\"\"{}\"\"\"\nimport {}", prose(&mut rng, 60, 160), rng.pick(NOUNS));
        node(&format!("module://{q}"), "module", &q, format!("module {q}"), v9, Some(&format!("package://{pkg}")));
        mods.push(q);
    }
    let mut classes = Vec::with_capacity(n_cls);
    for i in 0..n_cls {
        let m = &mods[rng.below(n_mod)];
        let name = format!("{}{}{i}", rng.pick(CAPS), rng.pick(CAPS));
        let q = format!("{m}.{name}");
        let lines = 2 + rng.below(4);
        let v9 = source(&mut rng, &format!("class {name}"), lines);
        node(
            &format!("class://{q}"),
            "class",
            &name,
            format!("class {name}(Base)"),
            v9,
            Some(&format!("module://{m}")),
        );
        classes.push(q);
    }
    let mut fns = Vec::with_capacity(n_fn);
    for i in 0..n_fn {
        let c = &classes[rng.below(n_cls)];
        let name = format!("{}_{}_{i}", rng.pick(VERBS), rng.pick(NOUNS));
        let sig = format!("def {name}(self, {}: str) -> {}", rng.pick(NOUNS), rng.pick(NOUNS));
        let lines = 3 + rng.below(7);
        let v9 = source(&mut rng, &sig, lines);
        node(&format!("function://{c}.{name}"), "function", &name, sig, v9, Some(&format!("class://{c}")));
        fns.push(format!("function://{c}.{name}"));
    }
    // Power-law extra edges: skewed picks make a few hubs.
    let mod_uris: Vec<String> = mods.iter().map(|m| format!("module://{m}")).collect();
    let target = n_nodes * edges_per_node;
    let mut seen = std::collections::HashSet::new();
    while n_edges < target {
        let (pool, rel) = if rng.unit() < 0.2 { (&mod_uris, "imports") } else { (&fns, "calls") };
        let s = &pool[(pool.len() as f64 * rng.unit().powi(2)) as usize];
        let t = &pool[(pool.len() as f64 * rng.unit().powi(3)) as usize];
        if s == t || !seen.insert((s.clone(), t.clone(), rel)) {
            continue;
        }
        serde_json::to_writer(&mut edges, &json!({"source": s, "target": t, "relation": rel, "weight": 1.0})).unwrap();
        edges.write_all(b"\n").unwrap();
        n_edges += 1;
    }
    nodes.flush().unwrap();
    edges.flush().unwrap();
    let mut resources: Vec<String> = classes.iter().map(|c| format!("class://{c}")).collect();
    resources.extend(fns.iter().step_by(7).cloned());
    let class_uris = classes.iter().map(|c| format!("class://{c}")).collect();
    (resources, class_uris)
}

/// The workload of `gen.py`'s defaults, written once under `target/bench-data`
/// (or read from `DSTORE_BENCH_DATA`).
pub fn standard() -> Files {
    if let Some(dir) = std::env::var_os("DSTORE_BENCH_DATA") {
        let mut f = files(Path::new(&dir));
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f.dir.join("meta.json")).unwrap()).unwrap();
        f.plan_ids = meta["plan_ids"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_owned()).collect();
        let nodes = std::io::BufRead::lines(std::io::BufReader::new(std::fs::File::open(&f.nodes).unwrap()));
        f.class_uris = nodes
            .map(|l| l.unwrap())
            .filter(|l| l.contains("\"kind\":\"class\""))
            .map(|l| serde_json::from_str::<serde_json::Value>(&l).unwrap()["uri"].as_str().unwrap().to_owned())
            .collect();
        return f;
    }
    // v2: the plan model's rules (a corrected decision is never also superseded).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/v2");
    std::fs::create_dir_all(&dir).unwrap();
    let mut f = files(&dir);
    let done = dir.join("done.json");
    if let Ok(text) = std::fs::read_to_string(&done) {
        let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
        f.plan_ids = serde_json::from_value(meta["plan_ids"].clone()).unwrap();
        f.class_uris = serde_json::from_value(meta["class_uris"].clone()).unwrap();
        return f;
    }
    eprintln!("bench: writing the workload to {} (once)", dir.display());
    let (resources, classes) = write_graph(&f.nodes, &f.edges, 200_000, 4, 42);
    f.plan_ids = write_decisions(&f.decisions, 20, 5000, &resources, 7);
    f.class_uris = classes;
    std::fs::write(&done, json!({"plan_ids": f.plan_ids, "class_uris": f.class_uris}).to_string()).unwrap();
    f
}

/// What [`write_source_tree`] wrote.
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeStats {
    pub files: usize,
    pub lines: usize,
}

/// Writes a deterministic source tree of about `lines` lines under `root`:
/// Python packages (four fifths of the modules) and Rust crates, each
/// module with classes or structs, methods and functions that import and
/// call one another across modules, as code does. Returns what it wrote.
pub fn write_source_tree(root: &Path, lines: usize, seed: u64) -> std::io::Result<TreeStats> {
    let mut rng = Rng::new(seed);
    let mut stats = TreeStats::default();
    // About 300 lines a module; 20 modules a package.
    let modules = (lines / 300).max(1);
    let name = |i: usize| format!("{}_{}", NOUNS[i % NOUNS.len()], i);
    let class =
        |i: usize, k: usize| format!("{}{}{}", CAPS[(i + k) % CAPS.len()], NOUNS[k % NOUNS.len()].to_uppercase(), i);
    let func = |i: usize, k: usize| format!("{}_{}_{}", VERBS[(i + k) % VERBS.len()], NOUNS[k % NOUNS.len()], i);
    while stats.lines < lines {
        let m = stats.files;
        let package = format!("pkg{}", m / 20);
        let rust = m % 5 == 4;
        let mut text = String::new();
        let others: Vec<usize> = (0..3).map(|_| rng.below(modules.max(m + 1))).collect();
        if rust {
            let _ = writeln!(text, "//! The {} of {package}: {}", name(m), prose(&mut rng, 40, 90));
            for &o in &others {
                let _ = writeln!(text, "use crate::{}::{};", name(o), class(o, 0));
            }
            text.push('\n');
            for k in 0..3 {
                let _ = writeln!(
                    text,
                    "/// {}\n#[derive(Debug, Clone, Default)]\npub struct {} {{",
                    prose(&mut rng, 30, 80),
                    class(m, k)
                );
                for f in 0..4 {
                    let _ = writeln!(text, "    pub {}: u64,", NOUNS[(f + k) % NOUNS.len()]);
                }
                let _ = writeln!(text, "}}\n\nimpl {} {{", class(m, k));
                for j in 0..5 {
                    let o = others[j % others.len()];
                    let _ = writeln!(
                        text,
                        "    /// {}\n    pub fn {}(&self, n: u64) -> u64 {{\n        let mut total = self.{};\n        for i in 0..n {{\n            total += {}(i);\n        }}\n        if total > {} {{\n            return {}::default().{}(total);\n        }}\n        total\n    }}\n",
                        prose(&mut rng, 20, 60),
                        func(m, j),
                        NOUNS[j % 4 + k],
                        func(o, 5),
                        rng.below(1000),
                        class(o, 0),
                        func(o, j % 5),
                    );
                }
                text.push_str("}\n\n");
            }
            for j in 5..9 {
                let _ = writeln!(
                    text,
                    "/// {}\npub fn {}(x: u64) -> u64 {{\n    let y = x.wrapping_mul({});\n    y ^ (y >> 7)\n}}\n",
                    prose(&mut rng, 20, 60),
                    func(m, j),
                    3 + rng.below(97)
                );
            }
        } else {
            let _ = writeln!(
                text,
                "\"\"\"The {} of {package}: {}\"\"\"\n\nimport os\nimport json",
                name(m),
                prose(&mut rng, 40, 90)
            );
            for &o in &others {
                let _ = writeln!(text, "from pkg{}.{} import {}, {}", o / 20, name(o), class(o, 0), func(o, 5));
            }
            let _ = writeln!(text, "\nLIMIT = {}\n", rng.below(10_000));
            for (k, field) in NOUNS.iter().enumerate().take(3) {
                let base = if k == 0 { class(others[0], 0) } else { class(m, 0) };
                let _ =
                    writeln!(text, "\nclass {}({base}):\n    \"\"\"{}\"\"\"\n", class(m, k), prose(&mut rng, 30, 80));
                let _ = writeln!(text, "    def __init__(self, {field}=None, limit=LIMIT):\n        self.{field} = {field}\n        self.limit = limit\n");
                for j in 0..5 {
                    let o = others[j % others.len()];
                    let _ = writeln!(
                        text,
                        "    def {}(self, items, key=None):\n        \"\"\"{}\"\"\"\n        total = 0\n        for item in items:\n            total += {}(item)\n        if key is not None and total > self.limit:\n            return {}(key).{}(items)\n        return self.{}(total)\n",
                        func(m, j),
                        prose(&mut rng, 20, 60),
                        func(o, 5),
                        class(o, 0),
                        func(o, j % 5),
                        func(m, (j + 1) % 5),
                    );
                }
            }
            for j in 5..9 {
                let _ = writeln!(text, "\ndef {}(value, scale=2):\n    \"\"\"{}\"\"\"\n    data = json.dumps({{\"v\": value}})\n    return len(data) * scale + {}\n", func(m, j), prose(&mut rng, 20, 60), rng.below(50));
            }
        }
        let dir = root.join(&package);
        let file =
            if rust { dir.join("src").join(format!("{}.rs", name(m))) } else { dir.join(format!("{}.py", name(m))) };
        std::fs::create_dir_all(file.parent().expect("a file has a directory"))?;
        std::fs::write(&file, &text)?;
        if !rust && !dir.join("__init__.py").exists() {
            std::fs::write(dir.join("__init__.py"), "")?;
        }
        stats.files += 1;
        stats.lines += text.lines().count();
    }
    Ok(stats)
}
