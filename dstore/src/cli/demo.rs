//! `demo`: a realistic sample store, then what `info`, `tree` and `project` show for it.

use std::path::Path;

use decision_store::decision::{Alternative, ArtifactRef, Decision, DecisionBuilder, DecisionId, DecisionType, PlanId};
use decision_store::store::Store;
use decision_store::uko::{UkoEdge, UkoNode};
use decision_store::Error;

use super::{inspect, Format, TreeFormat};
use crate::app::errors::{CmdResult, Failure};
use crate::app::open::url_of;
use crate::app::text::count;

/// (kind, uri, parent uri, signature) of the sample code graph.
const CODE: &[(&str, &str, &str, &str)] = &[
    ("package", "package://api", "", "package api"),
    ("package", "package://storage", "", "package storage"),
    ("module", "module://api.middleware", "package://api", "module api.middleware"),
    ("module", "module://api.routes", "package://api", "module api.routes"),
    ("module", "module://api.auth", "package://api", "module api.auth"),
    ("module", "module://api.ratelimit", "package://api", "module api.ratelimit"),
    ("module", "module://storage.redis", "package://storage", "module storage.redis"),
    ("module", "module://storage.settings", "package://storage", "module storage.settings"),
    ("class", "class://RateLimiter", "module://api.ratelimit", "class RateLimiter(Protocol)"),
    ("class", "class://TokenBucket", "module://api.ratelimit", "class TokenBucket(RateLimiter)"),
    ("class", "class://FixedWindow", "module://api.ratelimit", "class FixedWindow(RateLimiter)"),
    (
        "class",
        "class://RateLimitMiddleware",
        "module://api.middleware",
        "class RateLimitMiddleware(BaseHTTPMiddleware)",
    ),
    ("class", "class://AuthManager", "module://api.auth", "class AuthManager"),
    ("class", "class://Router", "module://api.routes", "class Router(APIRouter)"),
    ("class", "class://RedisClient", "module://storage.redis", "class RedisClient"),
    ("class", "class://Settings", "module://storage.settings", "class Settings(BaseSettings)"),
    ("function", "function://TokenBucket.take", "class://TokenBucket", "def take(self, key: str, n: int = 1) -> bool"),
    (
        "function",
        "function://TokenBucket.refill",
        "class://TokenBucket",
        "def refill(self, key: str, now: float) -> None",
    ),
    ("function", "function://FixedWindow.hit", "class://FixedWindow", "def hit(self, key: str) -> bool"),
    ("function", "function://RateLimiter.allow", "class://RateLimiter", "def allow(self, key: str) -> bool"),
    (
        "function",
        "function://RateLimitMiddleware.dispatch",
        "class://RateLimitMiddleware",
        "async def dispatch(self, request: Request, call_next) -> Response",
    ),
    (
        "function",
        "function://RateLimitMiddleware.key_for",
        "class://RateLimitMiddleware",
        "def key_for(self, request: Request) -> str",
    ),
    (
        "function",
        "function://AuthManager.api_key_for",
        "class://AuthManager",
        "def api_key_for(self, request: Request) -> str | None",
    ),
    ("function", "function://AuthManager.verify", "class://AuthManager", "def verify(self, key: str) -> Principal"),
    ("function", "function://Router.health", "class://Router", "async def health() -> dict"),
    ("function", "function://Router.orders", "class://Router", "async def orders(request: Request) -> list[Order]"),
    (
        "function",
        "function://RedisClient.eval",
        "class://RedisClient",
        "def eval(self, script: str, keys: list[str], args: list) -> Any",
    ),
    ("function", "function://RedisClient.connect", "class://RedisClient", "def connect(url: str) -> RedisClient"),
    ("function", "function://Settings.load", "class://Settings", "def load(path: Path | None = None) -> Settings"),
    ("file", "project://src/api/middleware.py", "", "src/api/middleware.py"),
    ("file", "project://src/api/ratelimit.py", "", "src/api/ratelimit.py"),
    ("file", "project://src/api/ratelimit.lua", "", "src/api/ratelimit.lua"),
    ("file", "project://src/storage/redis.py", "", "src/storage/redis.py"),
    ("file", "project://tests/test_ratelimit.py", "", "tests/test_ratelimit.py"),
];

/// (source, target, relation) beyond the `contains` hierarchy.
const LINKS: &[(&str, &str, &str)] = &[
    ("module://api.middleware", "module://api.ratelimit", "imports"),
    ("module://api.middleware", "module://api.auth", "imports"),
    ("module://api.ratelimit", "module://storage.redis", "imports"),
    ("module://api.routes", "module://api.middleware", "imports"),
    ("module://storage.redis", "module://storage.settings", "imports"),
    ("function://RateLimitMiddleware.dispatch", "function://RateLimitMiddleware.key_for", "calls"),
    ("function://RateLimitMiddleware.dispatch", "function://RateLimiter.allow", "calls"),
    ("function://RateLimitMiddleware.key_for", "function://AuthManager.api_key_for", "calls"),
    ("function://TokenBucket.take", "function://TokenBucket.refill", "calls"),
    ("function://TokenBucket.take", "function://RedisClient.eval", "calls"),
    ("function://FixedWindow.hit", "function://RedisClient.eval", "calls"),
    ("function://RedisClient.connect", "function://Settings.load", "calls"),
    ("class://TokenBucket", "class://RateLimiter", "references"),
    ("class://FixedWindow", "class://RateLimiter", "references"),
    ("project://src/api/middleware.py", "module://api.middleware", "references"),
    ("project://src/api/ratelimit.py", "module://api.ratelimit", "references"),
    ("project://src/api/ratelimit.lua", "function://TokenBucket.take", "references"),
    ("project://src/storage/redis.py", "module://storage.redis", "references"),
    ("project://tests/test_ratelimit.py", "class://TokenBucket", "references"),
];

fn graph() -> (Vec<UkoNode>, Vec<UkoEdge>) {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for (kind, uri, parent, sig) in CODE {
        let name = uri.split_once("://").map_or(*uri, |(_, n)| n);
        let label = name.rsplit(['.', '/']).next().unwrap_or(name);
        let body = match *kind {
            "function" => format!("{sig}:\n    \"\"\"{label}: see the rate limiting design.\"\"\"\n    ..."),
            "class" => format!("{sig}:\n    \"\"\"{label} keeps per-key state.\"\"\"\n    def __init__(self, settings: Settings) -> None: ..."),
            _ => format!("{sig}\n\"\"\"{name}\"\"\""),
        };
        let domain = if *kind == "file" { "uko-py:" } else { "uko-code:" };
        nodes.push(UkoNode::new(*uri, domain, *kind, label).with_view(0, label).with_view(4, *sig).with_view(9, body));
        if !parent.is_empty() {
            edges.push(UkoEdge::new(*parent, *uri, "contains"));
        }
    }
    for (s, t, r) in LINKS {
        let mut e = UkoEdge::new(*s, *t, *r);
        e.weight = Some(1.0);
        edges.push(e);
    }
    (nodes, edges)
}

/// The two sample plans: a rate-limiting plan and the subplan it spawns.
///
/// Snapshots record the graph's nodes as `store` holds them now.
fn plans(store: &Store) -> decision_store::Result<(PlanId, Vec<Decision>)> {
    use DecisionType::*;
    let refs = |uris: &[&str]| store.snapshot_of(uris);
    let (main, sub) = (PlanId::from_u128(ulid(0, 0)), PlanId::from_u128(ulid(1, 0)));
    let mut ds: Vec<Decision> = Vec::new();
    let mut add = |b: DecisionBuilder| -> decision_store::Result<Decision> {
        let d = b.build()?;
        ds.push(d.clone());
        Ok(d)
    };
    // Fixed ids, a minute apart from the plan's start: every demo is the
    // same store, so its output (and the docs' examples) can be checked.
    let at = |plan: PlanId, t, seq: u32| {
        let which = u128::from(plan == sub);
        Decision::builder(plan, t, seq).decision_id(DecisionId::from_u128(ulid(which, u64::from(seq) + 1)))
    };
    let root = add(at(main, PromptDefinition, 0)
        .chosen_option("Add per-key rate limiting to the public API")
        .confidence_score(1.0))?;
    let r = root.decision_id();
    add(at(main, InvariantEnforced, 1)
        .parent(r)
        .chosen_option("Never throttle internal service keys")
        .confidence_score(0.95))?;
    let s1 = add(at(main, StrategyChoice, 2)
        .parent(r)
        .chosen_option("Token bucket per user")
        .rationale("Users are the unit the product team talks about.")
        .confidence_score(0.6)
        .alternative(Alternative::new("fixed window per user", Some("bursts at window edges".into())))
        .context_snapshot(refs(&["class://RateLimiter", "class://TokenBucket"])?))?;
    let s2 = add(at(main, StrategyChoice, 3)
        .parent(r)
        .corrects(s1.decision_id())
        .chosen_option("Token bucket per API key")
        .rationale("One user holds many keys across services; limits belong to keys.")
        .confidence_score(0.8)
        .context_snapshot(refs(&["class://TokenBucket", "function://AuthManager.api_key_for"])?))?;
    let s3 = add(at(main, StrategyChoice, 4)
        .parent(r)
        .corrects(s2.decision_id())
        .chosen_option("Token bucket per API key, burst of 2x the rate")
        .rationale("Load tests showed legitimate clients burst at startup.")
        .confidence_score(0.9)
        .context_snapshot(refs(&["class://TokenBucket", "function://TokenBucket.take"])?))?;
    let store_choice = add(at(main, ResourceSelection, 5)
        .parent(s3.decision_id())
        .chosen_option("Keep bucket state in Redis")
        .rationale("Several API replicas must share the buckets.")
        .confidence_score(0.85)
        .alternative(Alternative::new("process memory", Some("wrong with several replicas".into())))
        .context_snapshot(refs(&["class://RedisClient", "module://storage.redis"])?))?;
    add(at(main, SubplanSpawn, 6)
        .parent(s3.decision_id())
        .chosen_option("Spawn a subplan to implement RateLimitMiddleware")
        .confidence_score(0.9)
        .downstream_plan(sub)
        .context_snapshot(refs(&["class://RateLimitMiddleware", "project://src/api/middleware.py"])?))?;
    let lua = add(at(main, ImplementationChoice, 7)
        .parent(store_choice.decision_id())
        .chosen_option("Take tokens atomically with a Lua script")
        .confidence_score(0.8)
        .artifact(ArtifactRef::new("src/api/ratelimit.lua", Some("sha256:5be1c0de".into()))?)
        .context_snapshot(refs(&["function://TokenBucket.take", "function://RedisClient.eval"])?))?;
    let k6 = at(main, ToolInvocation, 10)
        .parent(lua.decision_id())
        .chosen_option("Load test with k6 at 500 rps")
        .confidence_score(0.9)
        .build()?;
    let ab = add(at(main, ToolInvocation, 8)
        .parent(lua.decision_id())
        .chosen_option("Load test with ab at 500 rps")
        .confidence_score(0.5)
        .superseded_by(k6.decision_id()))?;
    add(at(main, ErrorRecovery, 9)
        .parent(ab.decision_id())
        .chosen_option("Retry after Redis connection timeout")
        .confidence_score(0.7))?;
    let k6 = add(k6.to_builder())?;
    add(at(main, ValidationResponse, 11)
        .parent(k6.decision_id())
        .chosen_option("p99 latency +4 ms under the limit: accept")
        .confidence_score(0.88)
        // The subplan's middleware builds on this acceptance.
        .downstream_decision(DecisionId::from_u128(ulid(1, 2))))?;
    add(at(main, UserIntervention, 12)
        .parent(r)
        .chosen_option("User: exempt /health from limiting")
        .confidence_score(1.0))?;

    let sroot = add(at(sub, PromptDefinition, 0).chosen_option("Implement RateLimitMiddleware").confidence_score(1.0))?;
    let imp = add(at(sub, ImplementationChoice, 1)
        .parent(sroot.decision_id())
        .chosen_option("A Starlette middleware keyed by API key")
        .confidence_score(0.8)
        .artifact(ArtifactRef::new("src/api/middleware.py", None)?)
        .context_snapshot(refs(&["class://RateLimitMiddleware", "function://RateLimitMiddleware.key_for"])?))?;
    let test = add(at(sub, ToolInvocation, 2)
        .parent(imp.decision_id())
        .chosen_option("pytest tests/test_ratelimit.py")
        .artifact(ArtifactRef::new("tests/test_ratelimit.py", None)?))?;
    add(at(sub, ValidationResponse, 3)
        .parent(test.decision_id())
        .chosen_option("14 tests pass")
        .confidence_score(0.97))?;
    Ok((main, ds))
}

/// When the demo's plans start: 2026-11-02 09:00 UTC.
const DEMO_START_MS: u64 = 1_793_610_000_000;

/// The fixed id of the demo's decision `n` of plan `plan` (0 the main plan,
/// 1 the subplan; decision 0 is the plan itself): a ULID `n` minutes after
/// the plan's start, with a random part that names the demo.
fn ulid(plan: u128, n: u64) -> u128 {
    let ms = DEMO_START_MS + plan as u64 * 3_600_000 + n * 60_000;
    (u128::from(ms) << 80) | (0xDE40_0000_0000_0000_0000 + (plan << 16) + u128::from(n))
}

/// `TokenBucket.take` after a later commit gave it a cost per request.
fn changed_take() -> UkoNode {
    let sig = "def take(self, key: str, cost: int = 1) -> bool";
    UkoNode::new("function://TokenBucket.take", "uko-code:", "function", "take")
        .with_view(0, "take")
        .with_view(4, sig)
        .with_view(9, format!("{sig}:\n    \"\"\"take: requests may cost more than one token.\"\"\"\n    ..."))
}

/// Makes room for the demo at `db`: nothing there, an empty store, or a
/// demo store (its decisions the demo's and its graph the demo's size) is
/// removed with its WAL files; a store that holds anything else stays,
/// unless `force`; a file that is not a store always stays.
fn clear(db: &Path, force: bool) -> Result<(), Failure> {
    let store = match Store::open_read_only(db) {
        Ok(store) => Some(store),
        Err(Error::NotCreated { .. }) => None,
        // A store whose interrupted write left a journal that only a
        // writable open rolls back; the writable open refuses anything else untouched.
        Err(e) => match Store::open(db) {
            Ok(store) => Some(store),
            Err(_) => {
                return Err(Failure::usage(format!(
                    "{} is not a decision store; refusing to replace it ({e})",
                    db.display()
                )))
            }
        },
    };
    if let Some(store) = store {
        let (counts, graph) = store.read_snapshot(|s| Ok((s.decision_counts()?, s.graph_counts()?)))?;
        let demo_ids = store.read_snapshot(|s| {
            let mut n = 0u64;
            for p in [PlanId::from_u128(ulid(0, 0)), PlanId::from_u128(ulid(1, 0))] {
                n += s.plan_summary(p)?.map_or(0, |p| p.decisions);
            }
            Ok(n)
        })?;
        let demo = counts.decisions == demo_ids && graph.nodes == CODE.len() as u64;
        let empty = counts.decisions == 0 && graph.nodes == 0;
        if !(empty || demo || force) {
            return Err(Failure::usage(format!(
                "{} holds {} and {}, not the demo's, and the demo replaces its store: give the demo another file \
                 (dstore demo demo.db), or --force to replace this one",
                db.display(),
                count(counts.decisions, "decision"),
                count(graph.nodes, "graph node"),
            )));
        }
    }
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = format!("{}{suffix}", db.display());
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::Io(e).into()),
            _ => {}
        }
    }
    Ok(())
}

pub fn run(db: &Path, force: bool) -> CmdResult {
    if url_of(db).is_some() {
        return Err(Failure::usage(
            "the demo replaces its store: give it a file, then `dstore copy FILE postgres://...` to try a server",
        ));
    }
    clear(db, force)?;
    let (nodes, edges) = graph();
    let (main_plan, decisions) = {
        let mut store = Store::open(db)?;
        store.upsert_nodes(&nodes)?;
        store.upsert_edges(&edges)?;
        let (main_plan, decisions) = plans(&store)?;
        store.insert_many(&decisions)?;
        // The code moved on after the plan: `dstore stale` has something to say.
        store.upsert_nodes(&[changed_take()])?;
        (main_plan, decisions)
    };
    eprintln!(
        "dstore: wrote {} decisions in 2 plans and a graph of {} nodes to {}\n",
        decisions.len(),
        nodes.len(),
        db.display()
    );
    println!("$ dstore info {}", db.display());
    inspect::info(db, Format::Text)?;
    println!("\n$ dstore tree {} {main_plan}", db.display());
    inspect::tree(db, &main_plan.to_string(), false, TreeFormat::Text)?;
    let focus = "class://TokenBucket";
    println!("\n$ dstore project {} --focus {focus} --breadth 2 --depth FULL_SOURCE", db.display());
    let args = super::project::ProjectArgsBuilder::new(db, focus, 2, "FULL_SOURCE").build();
    super::project::project(&args)?;
    let corrected = decisions.iter().find(|d| d.corrects_decision_id().is_some()).expect("the demo corrects");
    println!(
        "\nNext: dstore show {0} {main_plan}#{1} (a decision by plan and sequence, as the tree shows them, or by id: {2}),\n\
         dstore chain {0} {2}, dstore stale {0}, dstore calibration {0}, dstore ui {0}",
        db.display(),
        corrected.sequence(),
        corrected.decision_id(),
    );
    Ok(0)
}
