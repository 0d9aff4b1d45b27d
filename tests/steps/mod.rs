//! The shared world and helpers of the step modules.

mod decision;
mod graph;
mod inheritance;
mod persistence;
mod projection;
mod repository;

use std::path::PathBuf;

use decision_store::inheritance::{AssembledContext, ChildContextResult, InheritanceConfig, PlanContextInheritance};
use decision_store::projection::{
    DetailLevelMap, DetailLevelRegistry, FragmentSet, ProjectedNode, Projection, ProjectionSpec,
};
use decision_store::testing::TempStore;
use decision_store::{ContextSnapshot, Decision, DecisionId, Error, PlanId, Store};

/// The outcome of a step: an error message fails the step.
pub type StepResult = Result<(), String>;

/// Fails the step with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}
pub(crate) use ensure;

/// One scenario's state. Each scenario has its own temp directory and store file.
#[derive(Debug, cucumber::World)]
#[world(init = Self::new)]
pub struct World {
    /// For scenarios about files that are not (yet) stores.
    pub dir: tempfile::TempDir,
    /// The scenario's store file (the crate's own test-support type).
    pub temp: Option<TempStore>,
    /// A store opened from a file of `dir` by a scenario.
    pub opened: Option<Store>,

    // decisions
    pub plan: Option<PlanId>,
    pub parent: Option<DecisionId>,
    pub corrected: Option<DecisionId>,
    pub snapshot: Option<ContextSnapshot>,
    pub decision: Option<Decision>,
    pub copy: Option<Decision>,
    pub restored: Option<Decision>,
    pub originals: Vec<Decision>,
    pub restored_all: Vec<Decision>,
    pub error: Option<Error>,
    pub named: std::collections::HashMap<String, Decision>,
    pub snapshot_before: Option<Vec<String>>,

    // projection
    pub registry: DetailLevelRegistry,
    pub spec: Option<ProjectionSpec>,
    pub projected_node: Option<ProjectedNode>,
    pub projection: Option<Projection>,
    pub fragments: Option<FragmentSet>,
    pub code_map: Option<DetailLevelMap>,

    // inheritance
    pub parent_context: Option<AssembledContext>,
    pub mock_fragments: Option<usize>,
    pub service: Option<PlanContextInheritance>,
    pub config: Option<InheritanceConfig>,
    pub child: Option<ChildContextResult>,
    pub child_focus: Vec<String>,
}

impl World {
    fn new() -> Self {
        World {
            dir: tempfile::tempdir().expect("temp dir"),
            temp: None,
            opened: None,
            plan: None,
            parent: None,
            corrected: None,
            snapshot: None,
            decision: None,
            copy: None,
            restored: None,
            originals: Vec::new(),
            restored_all: Vec::new(),
            error: None,
            named: Default::default(),
            snapshot_before: None,
            registry: DetailLevelRegistry::empty(),
            spec: None,
            projected_node: None,
            projection: None,
            fragments: None,
            code_map: None,
            parent_context: None,
            mock_fragments: None,
            service: None,
            config: None,
            child: None,
            child_focus: Vec::new(),
        }
    }

    /// The scenario's store file, or the file a file scenario writes.
    pub fn db_path(&self) -> PathBuf {
        match &self.temp {
            Some(t) => t.path().to_owned(),
            None => self.dir.path().join("scenario.db"),
        }
    }

    /// The scenario's store, created on first use.
    pub fn store(&mut self) -> Result<&mut Store, String> {
        if self.temp.is_none() {
            self.temp = Some(TempStore::for_tests().map_err(|e| e.to_string())?.keep_on_failure());
        }
        self.temp.as_mut().expect("created above").store().map_err(|e| e.to_string())
    }

    /// Closes the store and opens the file again, so reads come from disk.
    pub fn reopen(&mut self) -> Result<&mut Store, String> {
        self.store()?;
        self.temp.as_mut().expect("created above").reopen().map_err(|e| e.to_string())
    }

    /// Runs one statement with a `?1` parameter on the scenario's store
    /// around the library, as a person with a SQL shell would: on the file
    /// with SQLite, or on the store's schema on the server.
    pub fn raw_sql(&mut self, sql: &str, arg: &str) -> Result<Result<(), String>, String> {
        self.store()?;
        let temp = self.temp.as_ref().expect("created above");
        Ok(match temp.url() {
            #[cfg(not(feature = "postgres"))]
            Some(url) => unreachable!("no server store without the postgres feature: {url}"),
            #[cfg(feature = "postgres")]
            Some(url) => {
                let url = decision_store::testing::direct_url(url);
                let mut client = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
                client.execute(&sql.replace("?1", "$1"), &[&arg]).map(|_| ()).map_err(|e| match e.as_db_error() {
                    Some(db) => db.message().to_owned(),
                    None => e.to_string(),
                })
            }
            None => {
                let conn = rusqlite::Connection::open(temp.path()).map_err(|e| e.to_string())?;
                conn.execute(sql, [arg]).map(|_| ()).map_err(|e| e.to_string())
            }
        })
    }

    pub fn plan(&mut self) -> PlanId {
        *self.plan.get_or_insert_with(PlanId::generate)
    }

    pub fn decision(&self) -> Result<&Decision, String> {
        match (&self.decision, &self.error) {
            (Some(d), _) => Ok(d),
            (None, Some(e)) => Err(format!("no decision was created: {e}")),
            (None, None) => Err("no decision was created".into()),
        }
    }

    pub fn restored(&self) -> Result<&Decision, String> {
        self.restored.as_ref().ok_or_else(|| "nothing was restored".to_owned())
    }

    /// Records the outcome of an attempt to build a decision.
    pub fn record(&mut self, result: decision_store::Result<Decision>) {
        match result {
            Ok(d) => {
                self.decision = Some(d);
                self.error = None;
            }
            Err(e) => {
                self.decision = None;
                self.error = Some(e);
            }
        }
    }

    pub fn error(&self) -> Result<&Error, String> {
        self.error.as_ref().ok_or_else(|| "no error was raised".to_owned())
    }
}

/// Parses "True"/"true"/"False"/"false".
pub fn parse_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// Parses a confidence score as the seed writes it: "None" or a number.
pub fn parse_confidence(s: &str) -> Result<Option<f64>, String> {
    if s == "None" {
        Ok(None)
    } else {
        s.parse::<f64>().map(Some).map_err(|e| format!("confidence {s:?}: {e}"))
    }
}
