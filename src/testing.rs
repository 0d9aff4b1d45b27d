//! Test support for suites that persist decisions with this crate
//! (cargo feature `test-support`).
//!
//! - **Generators**: proptest strategies that produce only valid values
//!   ([`decision`], [`plan`] and the parts), and [`invalid_decision`], valid
//!   JSON broken in one way, paired with the field the error must name.
//! - **Builders**: [`PlanBuilder`] writes a plan tree in a few lines.
//! - **Temp stores**: [`TempStore`], a store file that lives as long as the value.
//! - **Assertions**: [`assert_json_round_trip`], [`assert_store_round_trip`],
//!   [`assert_exchange_round_trip`]; each reports the first differing field
//!   by name with both values ([`Mismatch`]).
//! - **Upgrade checks**: [`check_upgrade`] migrates a copy of an old store
//!   file and compares every decision with the expected list.
//!
//! # Example
//! ```
//! use decision_store::testing::{assert_store_round_trip, PlanBuilder};
//! use decision_store::DecisionType::*;
//! let plan = PlanBuilder::new()
//!     .root("goal")
//!     .child("plan", "goal", StrategyChoice)
//!     .child("try", "plan", ToolInvocation)
//!     .correction("retry", "try")
//!     .child("other", "plan", ToolInvocation)
//!     .supersede("other", "retry")
//!     .build()?;
//! assert_store_round_trip(plan.decisions())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::decision::{
    Alternative, ArtifactRef, ContextSnapshot, Decision, DecisionBuilder, DecisionId, DecisionType, PlanId, ResourceRef,
};
use crate::error::{Error, Result};
use crate::store::{ImportOptions, Store};

// ------------------------------------------------------------------ generators

/// Any plan id (a valid ULID with a timestamp between 2020 and 2100).
///
/// Every strategy here can drive a `proptest!` test or be sampled by hand:
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
/// let mut runner = TestRunner::deterministic();
/// let plan = decision_store::testing::plan_id().new_tree(&mut runner).unwrap().current();
/// let id = decision_store::testing::decision_id().new_tree(&mut runner).unwrap().current();
/// assert_eq!(plan.to_string().len(), 26);
/// assert!(decision_store::DecisionId::parse(&id.to_string()).is_ok());
/// ```
pub fn plan_id() -> impl Strategy<Value = PlanId> {
    ulid_value().prop_map(PlanId::from_u128)
}

/// Any decision id.
pub fn decision_id() -> impl Strategy<Value = DecisionId> {
    ulid_value().prop_map(DecisionId::from_u128)
}

fn ulid_value() -> impl Strategy<Value = u128> {
    (1_577_836_800_000u64..4_102_444_800_000u64, any::<u128>())
        .prop_map(|(ms, r)| (u128::from(ms) << 80) | (r & ((1u128 << 80) - 1)))
}

/// Any of the 11 decision types.
pub fn decision_type() -> impl Strategy<Value = DecisionType> {
    proptest::sample::select(DecisionType::ALL.to_vec())
}

/// Text as agents write it: any Unicode (NUL, quotes and SQL included), sometimes long.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => ".{0,40}",
        1 => Just(String::new()),
        1 => Just("'; DROP TABLE decisions; -- \" \\ \u{0} ✓".to_owned()),
        1 => ".{200,3000}",
    ]
}

fn non_empty_text() -> impl Strategy<Value = String> {
    prop_oneof![".{1,40}", "[a-z]{2,8}://[A-Za-z0-9_./]{1,40}"]
}

/// A resource reference (non-empty id, optional type and version).
pub fn resource_ref() -> impl Strategy<Value = ResourceRef> {
    (non_empty_text(), proptest::option::of(text()), proptest::option::of(text()))
        .prop_map(|(id, t, v)| ResourceRef::new(id, t, v).expect("non-empty id"))
}

/// An artifact reference (non-empty path, optional hash).
pub fn artifact_ref() -> impl Strategy<Value = ArtifactRef> {
    (non_empty_text(), proptest::option::of("[0-9a-f]{32}"))
        .prop_map(|(p, h)| ArtifactRef::new(p, h).expect("non-empty path"))
}

/// An alternative (option text, optional rationale).
pub fn alternative() -> impl Strategy<Value = Alternative> {
    (text(), proptest::option::of(text())).prop_map(|(o, r)| Alternative::new(o, r))
}

/// A context snapshot, empty about one time in four.
pub fn context_snapshot() -> impl Strategy<Value = ContextSnapshot> {
    prop_oneof![
        1 => Just(ContextSnapshot::default()),
        3 => ("[0-9a-f]{0,64}", proptest::collection::vec(resource_ref(), 0..4), proptest::option::of(text()))
            .prop_map(|(h, r, a)| ContextSnapshot::new(h, r, a)),
    ]
}

/// Free-form JSON: scalars, arrays and objects nested a few levels.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::vec((".{0,10}", inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A metadata object.
pub fn metadata() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec(("[a-z_]{1,12}", json_value()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

/// Everything of a decision but its ids and links.
#[derive(Clone, Debug)]
pub struct Content {
    pub chosen_option: String,
    pub rationale: String,
    pub confidence_score: Option<f64>,
    pub alternatives: Vec<Alternative>,
    pub context_snapshot: ContextSnapshot,
    pub artifacts: Vec<ArtifactRef>,
    pub downstream_decisions: Vec<DecisionId>,
    pub downstream_plans: Vec<PlanId>,
    pub metadata: Map<String, Value>,
}

/// The content of a decision, every optional part sometimes set.
pub fn content() -> impl Strategy<Value = Content> {
    (
        (text(), text(), proptest::option::of(0.0..=1.0f64), proptest::collection::vec(alternative(), 0..4)),
        (
            context_snapshot(),
            proptest::collection::vec(artifact_ref(), 0..3),
            proptest::collection::vec(decision_id(), 0..3),
            proptest::collection::vec(plan_id(), 0..2),
            metadata(),
        ),
    )
        .prop_map(
            |(
                (chosen_option, rationale, confidence_score, alternatives),
                (context_snapshot, artifacts, dd, dp, metadata),
            )| {
                Content {
                    chosen_option,
                    rationale,
                    confidence_score,
                    alternatives,
                    context_snapshot,
                    artifacts,
                    downstream_decisions: dd,
                    downstream_plans: dp,
                    metadata,
                }
            },
        )
}

fn with_content(mut b: DecisionBuilder, c: Content) -> DecisionBuilder {
    b = b
        .chosen_option(c.chosen_option)
        .rationale(c.rationale)
        .confidence_score(c.confidence_score)
        .context_snapshot(c.context_snapshot);
    for a in c.alternatives {
        b = b.alternative(a);
    }
    for a in c.artifacts {
        b = b.artifact(a);
    }
    for d in c.downstream_decisions {
        b = b.downstream_decision(d);
    }
    for p in c.downstream_plans {
        b = b.downstream_plan(p);
    }
    for (k, v) in c.metadata {
        b = b.metadata(k, v);
    }
    b
}

/// One valid decision of any type; parent, correction and supersession
/// links name random ids (so it is valid, but not storable on its own).
///
/// ```
/// use proptest::prelude::*;
/// use decision_store::testing;
/// proptest!(|(d in testing::decision())| {
///     testing::assert_json_round_trip(&d).map_err(|m| TestCaseError::fail(m.to_string()))?;
/// });
/// ```
pub fn decision() -> impl Strategy<Value = Decision> {
    (
        (decision_id(), plan_id(), decision_type(), 0u32..100_000),
        (proptest::option::of(decision_id()), proptest::option::of(decision_id()), proptest::option::of(decision_id())),
        content(),
    )
        .prop_filter_map(
            "links must not name the decision itself",
            |((id, plan, t, seq), (parent, corrects, by), c)| {
                let mut b = Decision::builder(plan, t, seq).decision_id(id);
                if let Some(p) = parent.filter(|_| t != DecisionType::PromptDefinition) {
                    b = b.parent(p);
                }
                if let Some(x) = corrects {
                    b = b.corrects(x);
                }
                if let Some(x) = by {
                    b = b.superseded_by(x);
                }
                with_content(b, c).build().ok()
            },
        )
}

/// A storable plan of 1 to `max` decisions in sequence order: a
/// prompt_definition root, children under earlier decisions, corrections of
/// earlier decisions and supersessions by later ones (never a cycle).
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
/// let mut runner = TestRunner::deterministic();
/// let plan = decision_store::testing::plan(20).new_tree(&mut runner).unwrap().current();
/// let tree = decision_store::DecisionTree::from_decisions(plan.clone());
/// assert_eq!(tree.roots().len(), 1);
/// decision_store::testing::assert_store_round_trip(&plan).unwrap();
/// ```
pub fn plan(max: usize) -> impl Strategy<Value = Vec<Decision>> {
    let max = max.max(1);
    (1..=max).prop_flat_map(|n| {
        (
            plan_id(),
            ulid_value(),
            proptest::collection::vec((any::<u32>(), any::<u32>(), 0u8..100, decision_type()), n),
            proptest::collection::vec(content(), n),
        )
            .prop_map(move |(plan, base, shape, contents)| build_plan(plan, base, &shape, contents))
    })
}

fn build_plan(
    plan: PlanId,
    base: u128,
    shape: &[(u32, u32, u8, DecisionType)],
    contents: Vec<Content>,
) -> Vec<Decision> {
    let n = shape.len();
    let ids: Vec<DecisionId> = (0..n).map(|i| DecisionId::from_u128(base.wrapping_add(i as u128))).collect();
    // Later decisions supersede earlier ones; each at most once. A
    // decision is corrected or superseded only while it stands (the plan
    // model's rule), so each chain has one standing decision.
    let mut superseded_by: Vec<Option<DecisionId>> = vec![None; n];
    let mut overturned = vec![false; n];
    let mut out = Vec::with_capacity(n);
    for (i, ((pick, pick2, roll, t), c)) in shape.iter().zip(contents).enumerate() {
        let mut b;
        if i == 0 {
            b = Decision::builder(plan, DecisionType::PromptDefinition, 0);
        } else {
            let t = if *t == DecisionType::PromptDefinition { DecisionType::StrategyChoice } else { *t };
            let parent = (*pick as usize) % i;
            b = Decision::builder(plan, t, i as u32).parent(ids[parent]);
            let target = 1 + (*pick2 as usize) % i.max(1);
            if *roll < 15 && target < i && !overturned[target] {
                overturned[target] = true;
                b = b.corrects(ids[target]);
            } else if *roll >= 90 {
                let old = (*pick2 as usize) % i;
                if !overturned[old] {
                    overturned[old] = true;
                    superseded_by[old] = Some(ids[i]);
                }
            }
        }
        out.push(with_content(b.decision_id(ids[i]), c));
    }
    out.into_iter()
        .zip(superseded_by)
        .map(|(b, by)| match by {
            Some(by) => b.superseded_by(by),
            None => b,
        })
        .map(|b| b.build().expect("generated plans are valid"))
        .collect()
}

/// A valid decision's JSON broken in one way, and the field the error must name.
///
/// ```
/// use proptest::prelude::*;
/// use decision_store::{testing, Decision};
/// proptest!(|((json, field) in testing::invalid_decision())| {
///     let err = Decision::from_json_value(json).unwrap_err();
///     prop_assert!(err.to_string().contains(field), "{err}");
/// });
/// ```
pub fn invalid_decision() -> impl Strategy<Value = (Value, &'static str)> {
    type Mutation = (&'static str, fn(&mut Value));
    let mutations: Vec<Mutation> = vec![
        ("plan_id", |v| v["plan_id"] = json!("not-a-ulid")),
        ("decision_id", |v| v["decision_id"] = json!(v["decision_id"].as_str().unwrap_or("").to_lowercase())),
        ("decision_id", |v| {
            v.as_object_mut().map(|o| o.remove("decision_id"));
        }),
        ("parent_decision_id", |v| v["parent_decision_id"] = json!("bad-id")),
        ("root", |v| {
            v["decision_type"] = json!("prompt_definition");
            v["parent_decision_id"] = json!("01ARZ3NDEKTSV4RRFFQ69G5FAV");
        }),
        ("confidence_score", |v| v["confidence_score"] = json!(1.5)),
        ("confidence_score", |v| v["confidence_score"] = json!(-0.1)),
        ("corrects_decision_id", |v| {
            v["is_correction"] = json!(true);
            v["corrects_decision_id"] = Value::Null;
        }),
        ("is_correction", |v| {
            v["is_correction"] = json!(false);
            v["corrects_decision_id"] = json!("01ARZ3NDEKTSV4RRFFQ69G5FAV");
        }),
        ("corrects_decision_id", |v| {
            v["is_correction"] = json!(true);
            v["corrects_decision_id"] = json!("0000");
        }),
        ("superseded_by", |v| v["superseded_by"] = json!("invalid")),
        ("superseded_by", |v| v["superseded_by"] = v["decision_id"].clone()),
        ("parent_decision_id", |v| {
            v["decision_type"] = json!("strategy_choice");
            v["parent_decision_id"] = v["decision_id"].clone();
        }),
        ("resource_id", |v| v["context_snapshot"]["resources"] = json!([{"resource_id": ""}])),
        ("artifact_path", |v| v["artifacts_produced"] = json!([{"artifact_path": ""}])),
        ("decision_type", |v| v["decision_type"] = json!("plan_everything")),
        ("sequence", |v| v["sequence"] = json!(-1)),
        ("downstream_plan_ids", |v| v["downstream_plan_ids"] = json!(["nope"])),
        ("extra_field", |v| v["extra_field"] = json!(1)),
    ];
    (decision(), proptest::sample::select(mutations)).prop_map(|(d, (field, mutate))| {
        let mut v = d.to_json_value();
        mutate(&mut v);
        (v, field)
    })
}

// ------------------------------------------------------------------ builders

/// Writes a plan tree in a few lines, with names instead of ids.
///
/// Sequences follow the order of the calls; [`PlanBuilder::build`] checks
/// every decision and returns them with their ids. A correction takes the
/// type and parent of the decision it corrects.
///
/// ```
/// use decision_store::testing::PlanBuilder;
/// use decision_store::DecisionType::*;
/// let plan = PlanBuilder::new()
///     .root("goal")
///     .child("pick", "goal", StrategyChoice)
///     .correction("pick again", "pick")
///     .build()?;
/// assert_eq!(plan.get("pick again").corrects_decision_id(), Some(plan.id("pick")));
/// assert_eq!(plan.get("pick again").sequence(), 2);
/// # Ok::<(), decision_store::Error>(())
/// ```
#[derive(Debug)]
pub struct PlanBuilder {
    plan: PlanId,
    steps: Vec<(String, DecisionId, DecisionBuilder)>,
    supersede: Vec<(String, String)>,
    error: Option<String>,
}

impl Default for PlanBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PlanBuilder {
    /// A builder for a new plan id.
    pub fn new() -> Self {
        Self::for_plan(PlanId::generate())
    }

    /// A builder for the given plan.
    pub fn for_plan(plan: PlanId) -> Self {
        PlanBuilder { plan, steps: Vec::new(), supersede: Vec::new(), error: None }
    }

    fn id_of(&mut self, name: &str) -> Option<String> {
        let found = self.steps.iter().find(|(n, _, _)| n == name).map(|(_, id, _)| id.to_string());
        if found.is_none() && self.error.is_none() {
            self.error = Some(format!("no decision named {name:?} before this step"));
        }
        found
    }

    fn push(mut self, name: &str, b: DecisionBuilder) -> Self {
        let id = DecisionId::generate();
        self.steps.push((name.to_owned(), id, b.decision_id(id)));
        self
    }

    fn next(&self, t: DecisionType) -> DecisionBuilder {
        Decision::builder(self.plan, t, self.steps.len() as u32)
    }

    /// The root prompt_definition.
    pub fn root(self, name: &str) -> Self {
        let b = self.next(DecisionType::PromptDefinition).chosen_option(name);
        self.push(name, b)
    }

    /// A decision of type `t` under `parent`.
    pub fn child(mut self, name: &str, parent: &str, t: DecisionType) -> Self {
        let parent_id = self.id_of(parent);
        let mut b = self.next(t).chosen_option(name);
        if let Some(p) = parent_id {
            b = b.parent(p);
        }
        self.push(name, b)
    }

    /// A correction of `target`: same type and parent as the target.
    pub fn correction(mut self, name: &str, target: &str) -> Self {
        let Some(target_b) = self.steps.iter().find(|(n, _, _)| n == target).map(|(_, _, b)| b.clone()) else {
            self.error.get_or_insert(format!("no decision named {target:?} before this step"));
            return self;
        };
        let target_d = match target_b.build() {
            Ok(d) => d,
            Err(e) => {
                self.error.get_or_insert(e.to_string());
                return self;
            }
        };
        let mut b = self.next(target_d.decision_type()).chosen_option(name).corrects(target_d.decision_id());
        if let Some(p) = target_d.parent_decision_id() {
            b = b.parent(p);
        }
        self.push(name, b)
    }

    /// Records that `old` is superseded by `new` (both named in this builder).
    pub fn supersede(mut self, old: &str, new: &str) -> Self {
        self.supersede.push((old.to_owned(), new.to_owned()));
        self
    }

    /// Builds and validates every decision.
    ///
    /// # Errors
    /// [`Error::Validation`] for an unknown name or an invalid decision.
    pub fn build(mut self) -> Result<BuiltPlan> {
        for (old, new) in std::mem::take(&mut self.supersede) {
            let new_id = self.id_of(&new);
            match (self.steps.iter_mut().find(|(n, _, _)| *n == old), new_id) {
                (Some((_, _, b)), Some(id)) => *b = b.clone().superseded_by(id),
                _ => {
                    self.error.get_or_insert(format!("no decision named {old:?}"));
                }
            }
        }
        if let Some(e) = self.error {
            return Err(Error::validation("plan", e));
        }
        let mut names = HashMap::new();
        let mut decisions = Vec::new();
        for (name, _, b) in self.steps {
            let d = b.build()?;
            names.insert(name, d.decision_id());
            decisions.push(d);
        }
        Ok(BuiltPlan { plan: self.plan, decisions, names })
    }
}

/// The decisions of a [`PlanBuilder`], in sequence order, with their names.
#[derive(Clone, Debug)]
pub struct BuiltPlan {
    plan: PlanId,
    decisions: Vec<Decision>,
    names: HashMap<String, DecisionId>,
}

impl BuiltPlan {
    pub fn plan_id(&self) -> PlanId {
        self.plan
    }
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }
    /// The id of a named decision.
    ///
    /// # Panics
    /// When no decision has that name (a bug in the test).
    pub fn id(&self, name: &str) -> DecisionId {
        *self.names.get(name).unwrap_or_else(|| panic!("no decision named {name:?}"))
    }
    /// A named decision.
    pub fn get(&self, name: &str) -> &Decision {
        let id = self.id(name);
        self.decisions.iter().find(|d| d.decision_id() == id).expect("named decisions are in the plan")
    }
}

// ------------------------------------------------------------------ temp stores

/// A store in a temp directory that lives as long as this value.
///
/// ```
/// use decision_store::testing::{PlanBuilder, TempStore};
/// let plan = PlanBuilder::new().root("goal").build()?;
/// let mut temp = TempStore::new()?.keep_on_failure();
/// temp.store()?.insert_many(plan.decisions())?;
/// let back = temp.reopen()?.plan_decisions(plan.plan_id())?; // read from disk
/// assert_eq!(back, plan.decisions());
/// let path = temp.path().to_owned();
/// drop(temp);
/// assert!(!path.exists());
/// # Ok::<(), decision_store::Error>(())
/// ```
///
/// The directory is removed on drop, unless [`TempStore::keep_on_failure`]
/// was asked for and the thread is panicking (a failed test): then its path
/// is printed so the file can be inspected with `sqlite3` or `dstore`.
#[derive(Debug)]
pub struct TempStore {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    /// A store in a schema of its own on a PostgreSQL server instead of the file.
    server: Option<TempSchema>,
    store: Option<Store>,
    keep_on_failure: bool,
}

/// A throwaway schema on a PostgreSQL server.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
#[derive(Debug)]
struct TempSchema {
    /// The server's URL, as given.
    server: String,
    schema: String,
    /// `server` with the schema as the session's search path.
    url: String,
}

/// The environment variable that names a PostgreSQL server for
/// [`TempStore::for_tests`]: `postgres://user@host:port/db`.
pub const POSTGRES_URL_VAR: &str = "DSTORE_TEST_POSTGRES_URL";
/// Set to `postgres` to make [`TempStore::for_tests`] use the server.
pub const BACKEND_VAR: &str = "DSTORE_TEST_BACKEND";
/// Set beside [`POSTGRES_URL_VAR`] when that names a pooler (PgBouncer in
/// transaction mode, `scripts/pg-test-server --pgbouncer`): the server itself.
pub const POSTGRES_DIRECT_URL_VAR: &str = "DSTORE_TEST_POSTGRES_DIRECT_URL";

/// `url`, of the server [`POSTGRES_URL_VAR`] names (with a schema, say),
/// made to reach the server itself when that variable names a pooler
/// ([`POSTGRES_DIRECT_URL_VAR`]): for a plain client that keeps session
/// state, as a person's SQL shell does, where the store keeps none.
pub fn direct_url(url: &str) -> String {
    match (std::env::var(POSTGRES_URL_VAR), std::env::var(POSTGRES_DIRECT_URL_VAR)) {
        (Ok(pooled), Ok(direct)) if url.starts_with(&pooled) => format!("{direct}{}", &url[pooled.len()..]),
        _ => url.to_owned(),
    }
}

/// `url` with `schema` as its session's search path (the URL's `options`).
pub fn in_schema(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-csearch_path%3D{schema}")
}

/// Writes `plans` plans of `per_plan` decisions each to `path` as
/// `decisions.jsonl`, in export order: a root, then a tree whose chosen
/// options carry quotes and a check mark, every seventh a correction of
/// the one before, and in each plan one supersession.
///
/// # Errors
/// [`Error::Io`] when the file cannot be written; a store error when the
/// temporary store they pass through fails.
pub fn write_decisions_file(path: &Path, plans: usize, per_plan: u32) -> Result<()> {
    let mut temp = TempStore::new()?;
    let store = temp.store()?;
    for _ in 0..plans {
        let plan = PlanId::generate();
        let mut ds: Vec<Decision> = vec![Decision::builder(plan, DecisionType::PromptDefinition, 0).build()?];
        for seq in 1..per_plan {
            let parent = ds[((seq - 1) / 2) as usize].decision_id();
            let mut b = Decision::builder(plan, DecisionType::ALL[1 + seq as usize % 10], seq)
                .parent(parent)
                .chosen_option(format!("option {seq} ' \" ; -- ✓"))
                .confidence_score(Some(f64::from(seq % 11) / 10.0));
            if seq % 7 == 0 {
                b = b.corrects(ds[seq as usize - 1].decision_id());
            }
            ds.push(b.build()?);
        }
        store.insert_many(&ds)?;
        if ds.len() > 2 {
            store.supersede(ds[1].decision_id(), ds[2].decision_id())?;
        }
    }
    store.export_decisions(None, std::io::BufWriter::new(std::fs::File::create(path)?))?;
    Ok(())
}

impl TempStore {
    /// A new, empty store file.
    ///
    /// # Errors
    /// [`Error::Io`] or a store error when the file cannot be created.
    pub fn new() -> Result<TempStore> {
        let dir = tempfile::Builder::new().prefix("decision-store-").tempdir()?;
        let path = dir.path().join("store.db");
        let store = Store::open(&path)?;
        Ok(TempStore { dir: Some(dir), path, server: None, store: Some(store), keep_on_failure: false })
    }

    /// A new, empty store in a schema of its own (`dstore_test_<ulid>`) on
    /// the PostgreSQL server at `server_url`, dropped with the value.
    ///
    /// # Errors
    /// [`Error::Connect`] when the server cannot be reached or refuses to
    /// create the schema.
    #[cfg(feature = "postgres")]
    pub fn on_server(server_url: &str) -> Result<TempStore> {
        let schema = format!("dstore_test_{}", ulid::Ulid::new().to_string().to_lowercase());
        admin(server_url, &format!("CREATE SCHEMA {schema}"))?;
        let separator = if server_url.contains('?') { '&' } else { '?' };
        let url = format!("{server_url}{separator}options=-csearch_path%3D{schema}");
        let dir = tempfile::Builder::new().prefix("decision-store-").tempdir()?;
        let path = dir.path().join("store.db");
        let mut temp = TempStore {
            dir: Some(dir),
            path,
            server: Some(TempSchema { server: server_url.to_owned(), schema, url }),
            store: None,
            keep_on_failure: false,
        };
        temp.store()?;
        Ok(temp)
    }

    /// The store a test suite asks for: on the PostgreSQL server named by
    /// `DSTORE_TEST_POSTGRES_URL` when `DSTORE_TEST_BACKEND=postgres`, else
    /// a file ([`TempStore::new`]).
    ///
    /// # Errors
    /// The errors of [`TempStore::new`] and [`TempStore::on_server`], and
    /// [`Error::Connect`] when the server is asked for but not named.
    pub fn for_tests() -> Result<TempStore> {
        if std::env::var(BACKEND_VAR).as_deref() != Ok("postgres") {
            return TempStore::new();
        }
        let url = std::env::var(POSTGRES_URL_VAR).map_err(|_| Error::Connect {
            url: String::new(),
            reason: format!("{BACKEND_VAR}=postgres needs {POSTGRES_URL_VAR}"),
        })?;
        #[cfg(feature = "postgres")]
        return TempStore::on_server(&url);
        #[cfg(not(feature = "postgres"))]
        Err(Error::Connect { url, reason: "decision-store was built without its `postgres` feature".into() })
    }

    /// The URL of the store's schema on the server, `None` for a file.
    pub fn url(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.url.as_str())
    }

    /// Keeps the files when the test fails (panics).
    pub fn keep_on_failure(mut self) -> Self {
        self.keep_on_failure = true;
        self
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open store (reopened if it was closed).
    ///
    /// # Errors
    /// The errors of [`Store::open`].
    pub fn store(&mut self) -> Result<&mut Store> {
        if self.store.is_none() {
            self.store = Some(match &self.server {
                #[cfg(feature = "postgres")]
                Some(s) => Store::connect(&s.url)?,
                #[cfg(not(feature = "postgres"))]
                Some(_) => unreachable!("a schema on a server is made by on_server only"),
                None => Store::open(&self.path)?,
            });
        }
        Ok(self.store.as_mut().expect("opened above"))
    }

    /// Closes the connection, leaving the file.
    pub fn close(&mut self) {
        self.store = None;
    }

    /// Closes and opens the file again, so what follows reads from disk.
    ///
    /// # Errors
    /// The errors of [`Store::open`].
    pub fn reopen(&mut self) -> Result<&mut Store> {
        self.close();
        self.store()
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        self.store = None;
        if let Some(s) = &self.server {
            if self.keep_on_failure && std::thread::panicking() {
                eprintln!("decision-store: kept the failed test's store at {}", s.url);
            } else {
                #[cfg(feature = "postgres")]
                if let Err(e) = admin(&s.server, &format!("DROP SCHEMA {} CASCADE", s.schema)) {
                    eprintln!("decision-store: could not drop the test schema {}: {e}", s.schema);
                }
            }
            return;
        }
        if self.keep_on_failure && std::thread::panicking() {
            if let Some(dir) = self.dir.take() {
                let kept = dir.keep();
                eprintln!("decision-store: kept the failed test's store at {}", kept.join("store.db").display());
            }
        }
    }
}

/// Runs one statement on the server as the URL's user.
#[cfg(feature = "postgres")]
fn admin(server_url: &str, sql: &str) -> Result<()> {
    let fail = |e: postgres::Error| Error::Connect { url: server_url.to_owned(), reason: e.to_string() };
    let mut client = postgres::Client::connect(&direct_url(server_url), postgres::NoTls).map_err(fail)?;
    // Nothing set for the session: through a pooler, the next client would have it.
    client.batch_execute(&format!("BEGIN; SET LOCAL client_min_messages = warning; {sql}; COMMIT")).map_err(fail)
}

// ------------------------------------------------------------------ assertions

/// The first difference between what went in and what came back.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The route that changed the value: `json`, `store`, `export/import` or `upgrade`.
    pub route: &'static str,
    /// The decision, when one is at fault.
    pub decision_id: Option<String>,
    /// The field path, e.g. `context_snapshot.resources[1].version`, or `(missing)`.
    pub field: String,
    pub expected: Value,
    pub actual: Value,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} round trip", self.route)?;
        if let Some(id) = &self.decision_id {
            write!(f, " of decision {id}")?;
        }
        write!(f, ": field `{}` differs: expected {}, got {}", self.field, self.expected, self.actual)
    }
}

impl std::error::Error for Mismatch {}

/// The outcome of a round-trip assertion.
pub type RoundTrip = std::result::Result<(), Box<Mismatch>>;

/// The path and values of the first difference between two JSON values.
///
/// ```
/// use serde_json::json;
/// let (field, a, b) = decision_store::testing::first_difference(
///     &json!({"context_snapshot": {"resources": [{"version": "v1"}]}}),
///     &json!({"context_snapshot": {"resources": [{"version": null}]}}),
/// ).unwrap();
/// assert_eq!(field, "context_snapshot.resources[0].version");
/// assert_eq!((a, b), (json!("v1"), json!(null)));
/// ```
pub fn first_difference(expected: &Value, actual: &Value) -> Option<(String, Value, Value)> {
    fn walk(path: &str, a: &Value, b: &Value) -> Option<(String, Value, Value)> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, va) in x {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    match y.get(k) {
                        Some(vb) => {
                            if let Some(d) = walk(&p, va, vb) {
                                return Some(d);
                            }
                        }
                        None => return Some((p, va.clone(), Value::Null)),
                    }
                }
                y.iter().find(|(k, _)| !x.contains_key(*k)).map(|(k, v)| {
                    (if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, Value::Null, v.clone())
                })
            }
            (Value::Array(x), Value::Array(y)) => {
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    if let Some(d) = walk(&format!("{path}[{i}]"), va, vb) {
                        return Some(d);
                    }
                }
                (x.len() != y.len()).then(|| (format!("{path}.len()"), Value::from(x.len()), Value::from(y.len())))
            }
            _ => (a != b).then(|| (path.to_owned(), a.clone(), b.clone())),
        }
    }
    walk("", expected, actual)
}

fn compare(route: &'static str, expected: &[Decision], actual: &[Decision]) -> RoundTrip {
    let by_id: HashMap<DecisionId, &Decision> = actual.iter().map(|d| (d.decision_id(), d)).collect();
    for e in expected {
        let Some(a) = by_id.get(&e.decision_id()) else {
            return Err(Box::new(Mismatch {
                route,
                decision_id: Some(e.decision_id().to_string()),
                field: "(missing)".into(),
                expected: Value::String("stored".into()),
                actual: Value::Null,
            }));
        };
        if let Some((field, x, y)) = first_difference(&e.to_json_value(), &a.to_json_value()) {
            return Err(Box::new(Mismatch {
                route,
                decision_id: Some(e.decision_id().to_string()),
                field,
                expected: x,
                actual: y,
            }));
        }
    }
    if actual.len() != expected.len() {
        return Err(Box::new(Mismatch {
            route,
            decision_id: None,
            field: "(count)".into(),
            expected: Value::from(expected.len()),
            actual: Value::from(actual.len()),
        }));
    }
    Ok(())
}

fn failed(route: &'static str, e: Error) -> Box<Mismatch> {
    Box::new(Mismatch {
        route,
        decision_id: None,
        field: "(error)".into(),
        expected: Value::Null,
        actual: Value::String(e.to_string()),
    })
}

/// Encodes a decision as JSON text and decodes it again.
///
/// ```
/// let plan = decision_store::testing::PlanBuilder::new().root("goal").build()?;
/// decision_store::testing::assert_json_round_trip(&plan.decisions()[0]).unwrap();
/// # Ok::<(), decision_store::Error>(())
/// ```
///
/// # Errors
/// The first differing field, or the decoding error.
pub fn assert_json_round_trip(decision: &Decision) -> RoundTrip {
    let back = Decision::from_json(&decision.to_json()).map_err(|e| failed("json", e))?;
    compare("json", std::slice::from_ref(decision), &[back])
}

/// Inserts decisions into a fresh temp-file store, closes it, reopens it and reads every one back.
///
/// ```
/// use decision_store::testing::{assert_store_round_trip, PlanBuilder};
/// let plan = PlanBuilder::new().root("goal").child("step", "goal", decision_store::DecisionType::ToolInvocation).build()?;
/// assert_store_round_trip(plan.decisions()).unwrap();
/// # Ok::<(), decision_store::Error>(())
/// ```
///
/// # Errors
/// The first differing field, or the store's error.
pub fn assert_store_round_trip(decisions: &[Decision]) -> RoundTrip {
    let mut temp = TempStore::new().map_err(|e| failed("store", e))?;
    temp.store().and_then(|s| s.insert_many(decisions)).map_err(|e| failed("store", e))?;
    let store = temp.reopen().map_err(|e| failed("store", e))?;
    let problems = store.check().map_err(|e| failed("store", e))?;
    if let Some(p) = problems.first() {
        return Err(Box::new(Mismatch {
            route: "store",
            decision_id: p.decision_id.clone(),
            field: "(check after storing)".into(),
            expected: Value::Array(Vec::new()),
            actual: Value::from(format!("{} problem(s), the first: {}", problems.len(), p.message)),
        }));
    }
    let mut back = Vec::new();
    store
        .for_each_decision(None, |d| {
            back.push(d);
            Ok(())
        })
        .map_err(|e| failed("store", e))?;
    compare("store", decisions, &back)
}

/// Stores decisions, exports them as JSON Lines, imports that into a second
/// store and exports again: both exports and every decision must match.
///
/// ```
/// use decision_store::testing::{assert_exchange_round_trip, PlanBuilder};
/// use decision_store::DecisionType::*;
/// let plan = PlanBuilder::new().root("r").child("a", "r", ToolInvocation).child("b", "r", ToolInvocation).supersede("a", "b").build()?;
/// assert_exchange_round_trip(plan.decisions()).unwrap();
/// # Ok::<(), decision_store::Error>(())
/// ```
///
/// # Errors
/// The first differing field, or a store's error.
pub fn assert_exchange_round_trip(decisions: &[Decision]) -> RoundTrip {
    let route = "export/import";
    let mut first = TempStore::new().map_err(|e| failed(route, e))?;
    first.store().and_then(|s| s.insert_many(decisions)).map_err(|e| failed(route, e))?;
    let mut exported = Vec::new();
    first.reopen().and_then(|s| s.export_decisions(None, &mut exported)).map_err(|e| failed(route, e))?;
    let mut second = TempStore::new().map_err(|e| failed(route, e))?;
    second
        .store()
        .and_then(|s| s.import_decisions(&exported[..], ImportOptions::default(), |_| {}))
        .map_err(|e| failed(route, e))?;
    let mut again = Vec::new();
    second.reopen().and_then(|s| s.export_decisions(None, &mut again)).map_err(|e| failed(route, e))?;
    let parse = |bytes: &[u8]| -> std::result::Result<Vec<Decision>, Box<Mismatch>> {
        std::str::from_utf8(bytes)
            .map_err(|e| failed(route, Error::validation("export", e.to_string())))?
            .lines()
            .map(|l| Decision::from_json(l).map_err(|e| failed(route, e)))
            .collect()
    };
    compare(route, decisions, &parse(&exported)?)?;
    compare(route, &parse(&exported)?, &parse(&again)?)
}

// ------------------------------------------------------------------ upgrade checks

/// Copies an old store file into a temp directory, opens the copy (which
/// migrates it to the current schema) and compares its decisions, by id,
/// with `expected`. The original file is not touched.
///
/// ```
/// use decision_store::testing::{check_upgrade, PlanBuilder, TempStore};
/// // In a real suite the file is a fixture written by an older version.
/// let plan = PlanBuilder::new().root("goal").build()?;
/// let mut old = TempStore::new()?;
/// old.store()?.insert_many(plan.decisions())?;
/// old.close();
/// check_upgrade(old.path(), plan.decisions()).unwrap();
/// let wrong = plan.decisions()[0].to_builder().rationale("edited").build()?;
/// let mismatch = check_upgrade(old.path(), &[wrong]).unwrap_err();
/// assert_eq!(mismatch.field, "rationale");
/// # Ok::<(), decision_store::Error>(())
/// ```
///
/// # Errors
/// The first differing field, or the store's error.
pub fn check_upgrade(old_file: impl AsRef<Path>, expected: &[Decision]) -> RoundTrip {
    let route = "upgrade";
    let dir = tempfile::tempdir().map_err(|e| failed(route, e.into()))?;
    let copy = dir.path().join("upgraded.db");
    std::fs::copy(old_file.as_ref(), &copy).map_err(|e| failed(route, e.into()))?;
    let store = Store::open(&copy).map_err(|e| failed(route, e))?;
    let version = store.schema_version().map_err(|e| failed(route, e))?;
    if version != crate::store::supported_schema_version() {
        return Err(Box::new(Mismatch {
            route,
            decision_id: None,
            field: "(schema_version)".into(),
            expected: Value::from(crate::store::supported_schema_version()),
            actual: Value::from(version),
        }));
    }
    let problems = store.check().map_err(|e| failed(route, e))?;
    if let Some(p) = problems.first() {
        return Err(Box::new(Mismatch {
            route,
            decision_id: p.decision_id.clone(),
            field: "(check after upgrade)".into(),
            expected: Value::Array(Vec::new()),
            actual: Value::from(format!("{} problem(s), the first: {}", problems.len(), p.message)),
        }));
    }
    let mut back = Vec::new();
    store
        .for_each_decision(None, |d| {
            back.push(d);
            Ok(())
        })
        .map_err(|e| failed(route, e))?;
    compare(route, expected, &back)
}
