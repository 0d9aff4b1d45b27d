//! `decision_store._native`: the Rust library behind the Python package.
//!
//! Values cross the boundary as JSON-shaped Python objects (dict, list,
//! str, int, float, bool, None) in the interchange format, converted here
//! directly (no JSON text in between) so a bad value is named by its path.
//! Store work runs with the GIL released; a store is shared between
//! threads behind a mutex.

use std::path::PathBuf;
use std::sync::mpsc::TrySendError;
use std::sync::Mutex;

mod de;

use decision_store::context::StoredContextOptions;
use decision_store::decision::{Decision, DecisionId, DecisionTree, PlanId};
use decision_store::ingest::IngestOptions;
use decision_store::projection::{Cl100k, Depth, ProjectionSpec, Ranking, DEFAULT_BUDGET, DEFAULT_RANKING};
use decision_store::store::{ImportOptions, PreparedDecision, Store};
use decision_store::uko::{Direction, UkoEdge, UkoNode};
use decision_store::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

// The Rust side's allocations (decisions, row texts) are made on one thread
// and freed on another in insert_many; glibc's malloc made that slower than
// the work itself, mimalloc does not (as in dstore).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// C's `calloc` on mimalloc's `malloc` (its own `mi_calloc` is behind a feature of the -sys crate).
unsafe extern "C" fn mi_calloc(count: usize, size: usize) -> *mut std::ffi::c_void {
    let Some(bytes) = count.checked_mul(size) else { return std::ptr::null_mut() };
    // SAFETY: mi_malloc returns `bytes` writable bytes, or null.
    unsafe {
        let p = libmimalloc_sys::mi_malloc(bytes);
        if !p.is_null() {
            std::ptr::write_bytes(p.cast::<u8>(), 0, bytes);
        }
        p
    }
}

/// Raises the `decision_store.errors` exception that fits `e`.
fn raise(py: Python<'_>, e: Error) -> PyErr {
    let class = match e.kind() {
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::InvalidInput => "ValidationError",
        ErrorKind::Incompatible => match e.innermost() {
            Error::IncompatibleVersion { .. } | Error::NeedsUpgrade { .. } | Error::MigrationMismatch { .. } => {
                "IncompatibleVersionError"
            }
            _ => "NotAStoreError",
        },
        ErrorKind::Busy => "BusyError",
        ErrorKind::Unavailable => "ConnectError",
        ErrorKind::ReadOnly | ErrorKind::Internal => "DecisionStoreError",
    };
    error(py, class, e.to_string())
}

fn error(py: Python<'_>, class: &str, message: String) -> PyErr {
    let made =
        py.import("decision_store.errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1((message.clone(),)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

fn invalid(py: Python<'_>, field: &str, reason: impl std::fmt::Display) -> PyErr {
    error(py, "ValidationError", format!("{field}: {reason}"))
}

/// A JSON-shaped Python object as JSON (read by [`de::PyDe`]), naming
/// the path of a bad value under `path`.
fn to_json(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<Value> {
    serde_path_to_error::deserialize(de::PyDe(obj)).map_err(|e| {
        let at = e.path().to_string();
        let field = match (path, at.as_str()) {
            ("", ".") => "value".to_owned(),
            (_, ".") => path.to_owned(),
            ("", _) => at,
            _ if at.starts_with('[') => format!("{path}{at}"),
            _ => format!("{path}.{at}"),
        };
        invalid(obj.py(), &field, e.into_inner())
    })
}

/// JSON as Python objects.
fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// A decision on its way to the writer of `insert_many`. Items are written
/// into a chunk's vector and read out of it once: boxing the larger variant
/// would cost an allocation each instead of a copy.
#[allow(clippy::large_enum_variant)]
enum Item {
    Raw(Decision),
    Ready(PreparedDecision),
}

impl Item {
    fn prepared(self) -> PreparedDecision {
        match self {
            Item::Raw(d) => PreparedDecision::new(d),
            Item::Ready(p) => p,
        }
    }
}

fn decision_of(obj: &Bound<'_, PyAny>) -> PyResult<Decision> {
    if let Ok(d) = obj.cast::<PyDecision>() {
        return Ok(d.get().inner.clone());
    }
    Decision::from_reusable_deserializer(de::PyDe(obj)).map_err(|e| raise(obj.py(), e))
}

fn decision_id(py: Python<'_>, s: &str) -> PyResult<DecisionId> {
    DecisionId::parse(s).map_err(|e| raise(py, e))
}

fn plan_id(py: Python<'_>, s: &str) -> PyResult<PlanId> {
    PlanId::parse(s).map_err(|e| raise(py, e))
}

/// A new plan id (a ULID, monotonic within the process).
#[pyfunction]
fn new_plan_id() -> String {
    PlanId::generate().to_string()
}

/// A new decision id (a ULID, monotonic within the process).
#[pyfunction]
fn new_decision_id() -> String {
    DecisionId::generate().to_string()
}

/// One decision: immutable and always valid, in the interchange format's shape.
#[pyclass(name = "Decision", module = "decision_store", frozen, eq)]
struct PyDecision {
    inner: Decision,
}

impl PartialEq for PyDecision {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

fn wrap(d: Decision) -> PyDecision {
    PyDecision { inner: d }
}

#[pymethods]
impl PyDecision {
    /// A decision from a dict in the interchange format; ValidationError names a bad field.
    #[staticmethod]
    fn model_validate(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        decision_of(obj).map(wrap)
    }

    /// A decision from one JSON document (a line of decisions.jsonl).
    #[staticmethod]
    fn model_validate_json(py: Python<'_>, text: &str) -> PyResult<Self> {
        Decision::from_json(text).map(wrap).map_err(|e| raise(py, e))
    }

    /// A new decision with a fresh ULID: the other fields as keywords, with
    /// the interchange names (`parent_decision_id`, `chosen_option`, ...).
    #[staticmethod]
    #[pyo3(signature = (plan_id, decision_type, sequence, **fields))]
    fn create(
        py: Python<'_>,
        plan_id: &str,
        decision_type: &str,
        sequence: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut map = match fields {
            Some(f) => match to_json(f.as_any(), "")? {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            None => Map::new(),
        };
        if map.contains_key("decision_id") {
            return Err(invalid(py, "decision_id", "is generated by create(); use model_validate to give one"));
        }
        map.insert("decision_id".into(), Value::String(DecisionId::generate().to_string()));
        map.insert("plan_id".into(), Value::String(plan_id.to_owned()));
        map.insert("decision_type".into(), Value::String(decision_type.to_owned()));
        map.insert("sequence".into(), to_json(sequence, "sequence")?);
        Decision::from_json_value(Value::Object(map)).map(wrap).map_err(|e| raise(py, e))
    }

    /// Every field, as a dict in the interchange format.
    fn model_dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json_value())
    }

    /// One JSON document, as a line of decisions.jsonl.
    fn model_dump_json(&self) -> String {
        self.inner.to_json()
    }

    fn __repr__(&self) -> String {
        format!(
            "Decision({} {} #{} in plan {})",
            self.inner.decision_id(),
            self.inner.decision_type(),
            self.inner.sequence(),
            self.inner.plan_id()
        )
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner.decision_id().to_string().hash(&mut h);
        h.finish()
    }

    #[getter]
    fn decision_id(&self) -> String {
        self.inner.decision_id().to_string()
    }
    #[getter]
    fn plan_id(&self) -> String {
        self.inner.plan_id().to_string()
    }
    #[getter]
    fn parent_decision_id(&self) -> Option<String> {
        self.inner.parent_decision_id().map(|p| p.to_string())
    }
    #[getter]
    fn sequence(&self) -> u32 {
        self.inner.sequence()
    }
    #[getter]
    fn decision_type(&self) -> &'static str {
        self.inner.decision_type().as_str()
    }
    #[getter]
    fn phase(&self) -> String {
        self.inner.decision_type().phase().to_string()
    }
    #[getter]
    fn chosen_option(&self) -> &str {
        self.inner.chosen_option()
    }
    #[getter]
    fn rationale(&self) -> &str {
        self.inner.rationale()
    }
    #[getter]
    fn confidence_score(&self) -> Option<f64> {
        self.inner.confidence_score()
    }
    #[getter]
    fn is_correction(&self) -> bool {
        self.inner.is_correction()
    }
    #[getter]
    fn corrects_decision_id(&self) -> Option<String> {
        self.inner.corrects_decision_id().map(|p| p.to_string())
    }
    #[getter]
    fn superseded_by(&self) -> Option<String> {
        self.inner.superseded_by().map(|p| p.to_string())
    }
    #[getter]
    fn downstream_decision_ids(&self) -> Vec<String> {
        self.inner.downstream_decision_ids().iter().map(|d| d.to_string()).collect()
    }
    #[getter]
    fn downstream_plan_ids(&self) -> Vec<String> {
        self.inner.downstream_plan_ids().iter().map(|d| d.to_string()).collect()
    }
    #[getter]
    fn alternatives<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, self.inner.alternatives())
    }
    #[getter]
    fn context_snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, self.inner.context_snapshot())
    }
    #[getter]
    fn artifacts_produced<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, self.inner.artifacts_produced())
    }
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, self.inner.metadata())
    }
}

/// One field as Python objects (serialized alone, not the whole decision).
fn field<'py, T: serde::Serialize + ?Sized>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &serde_json::to_value(value).unwrap_or_default())
}

/// A plan's decisions as a tree, with its correction chains, supersessions and effective set.
#[pyclass(name = "DecisionTree", module = "decision_store", frozen)]
struct PyDecisionTree {
    inner: DecisionTree,
}

fn decisions<'a>(ds: impl IntoIterator<Item = &'a Decision>) -> Vec<PyDecision> {
    ds.into_iter().cloned().map(wrap).collect()
}

#[pymethods]
impl PyDecisionTree {
    /// Every decision, in sequence order.
    fn decisions(&self) -> Vec<PyDecision> {
        decisions(self.inner.decisions())
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
    fn roots(&self) -> Vec<PyDecision> {
        decisions(self.inner.roots())
    }
    fn children(&self, py: Python<'_>, decision_id: &str) -> PyResult<Vec<PyDecision>> {
        Ok(decisions(self.inner.children(self::decision_id(py, decision_id)?)))
    }
    fn parent(&self, py: Python<'_>, decision_id: &str) -> PyResult<Option<PyDecision>> {
        Ok(self.inner.parent(self::decision_id(py, decision_id)?).cloned().map(wrap))
    }
    /// Levels below its root (a root is 0); None for an id not in the plan.
    fn depth(&self, py: Python<'_>, decision_id: &str) -> PyResult<Option<usize>> {
        Ok(self.inner.depth(self::decision_id(py, decision_id)?))
    }
    fn max_depth(&self) -> usize {
        self.inner.max_depth()
    }
    /// The decision and every correction of it, original first.
    fn correction_chain(&self, py: Python<'_>, decision_id: &str) -> PyResult<Vec<PyDecision>> {
        Ok(decisions(self.inner.correction_chain(self::decision_id(py, decision_id)?)))
    }
    /// The decisions that stand (not corrected, not superseded), in sequence order.
    fn effective(&self) -> Vec<PyDecision> {
        decisions(self.inner.effective())
    }
    fn is_effective(&self, py: Python<'_>, decision_id: &str) -> PyResult<bool> {
        Ok(self.inner.is_effective(self::decision_id(py, decision_id)?))
    }
    /// What stands for the decision now (following corrections and supersession).
    fn standing(&self, py: Python<'_>, decision_id: &str) -> PyResult<Option<PyDecision>> {
        Ok(self.inner.standing(self::decision_id(py, decision_id)?).cloned().map(wrap))
    }
}

/// A decision store file. Usable as a context manager; safe to share between threads.
#[pyclass(name = "Store", module = "decision_store")]
struct PyStore {
    inner: Mutex<Option<Store>>,
    path: String,
}

impl PyStore {
    /// Runs `f` on the store with the GIL released.
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Store) -> Result<T, Error> + Send) -> PyResult<T> {
        let result = py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_mut() {
                Some(store) => Ok(f(store)),
                None => Err(()),
            }
        });
        match result {
            Ok(r) => r.map_err(|e| raise(py, e)),
            Err(()) => Err(error(py, "DecisionStoreError", format!("{}: the store is closed", self.path))),
        }
    }

    fn connected(py: Python<'_>, url: String, read_only: bool) -> PyResult<Self> {
        let store = py
            .detach(|| if read_only { Store::connect_read_only(&url) } else { Store::connect(&url) })
            .map_err(|e| raise(py, e))?;
        let shown = store.url().unwrap_or_default().to_owned();
        Ok(PyStore { inner: Mutex::new(Some(store)), path: shown })
    }

    fn opened(py: Python<'_>, path: PathBuf, read_only: bool) -> PyResult<Self> {
        let shown = path.display().to_string();
        let store = py
            .detach(|| if read_only { Store::open_read_only(&path) } else { Store::open(&path) })
            .map_err(|e| raise(py, e))?;
        Ok(PyStore { inner: Mutex::new(Some(store)), path: shown })
    }
}

fn graph_items<T: serde::de::DeserializeOwned>(items: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<T>> {
    let py = items.py();
    let mut out = Vec::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let path = format!("{what}[{i}]");
        let value = to_json(&item?, &path)?;
        out.push(serde_json::from_value(value).map_err(|e| invalid(py, &path, e))?);
    }
    Ok(out)
}

#[pymethods]
impl PyStore {
    /// Opens (creating and migrating) the store at `path`.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        Self::opened(py, path, false)
    }

    /// Opens an existing store for reading only; it is never created or changed.
    #[staticmethod]
    fn open_read_only(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        Self::opened(py, path, true)
    }

    /// Connects to the store in a PostgreSQL database
    /// (`postgres://user@host:port/db`), creating its tables in an empty one.
    #[staticmethod]
    fn connect(py: Python<'_>, url: String) -> PyResult<Self> {
        Self::connected(py, url, false)
    }

    /// Connects to an existing PostgreSQL store for reading only.
    #[staticmethod]
    fn connect_read_only(py: Python<'_>, url: String) -> PyResult<Self> {
        Self::connected(py, url, true)
    }

    /// Closes the file; later calls raise DecisionStoreError.
    fn close(&self) {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!("Store({:?})", self.path)
    }

    /// Stores one decision (a Decision or a dict).
    fn insert(&self, py: Python<'_>, decision: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = decision_of(decision)?;
        self.with(py, move |s| s.insert(&d))
    }

    /// Stores many decisions (Decisions or dicts) in one transaction, each
    /// after its parent and the decision it corrects; returns how many. All
    /// or nothing. (`import_jsonl` takes records in any order.)
    fn insert_many(&self, py: Python<'_>, decisions: &Bound<'_, PyAny>) -> PyResult<usize> {
        // This thread turns Python objects into decisions (it needs the GIL)
        // while a second one writes them (it needs none): the two overlap.
        // Decisions go over in chunks: one hand-over (and thread wake-up) per
        // item cost as much as a tenth of the time. When the writer falls
        // behind (the channel is full), this thread also prepares the rows
        // of the chunk it holds (column texts and content hashes, without
        // the GIL) instead of waiting, so the two threads share the work.
        const CHUNK: usize = 256;
        let (items, incoming) = std::sync::mpsc::sync_channel::<Vec<Result<Item, Error>>>(8);
        let mut failed: Option<PyErr> = None;
        let written = std::thread::scope(|scope| {
            let writer = scope.spawn(move || {
                let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                let rows = incoming.into_iter().flatten().map(|item| item.map(Item::prepared));
                guard.as_mut().map(|store| store.try_insert_prepared(rows))
            });
            let mut chunk = Vec::with_capacity(CHUNK);
            let mut feed = || -> PyResult<()> {
                for (i, item) in decisions.try_iter()?.enumerate() {
                    match decision_of(&item?) {
                        Ok(d) => chunk.push(Ok(Item::Raw(d))),
                        Err(e) => {
                            return Err(error(py, "ValidationError", format!("decisions[{i}]: {}", e.value(py))));
                        }
                    }
                    if chunk.len() < CHUNK {
                        continue;
                    }
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                    let sent = match items.try_send(full) {
                        Ok(()) => Ok(()),
                        Err(TrySendError::Full(full)) => py.detach(|| {
                            let ready = full.into_iter().map(|item| item.map(|i| Item::Ready(i.prepared()))).collect();
                            items.send(ready).map_err(|_| ())
                        }),
                        Err(TrySendError::Disconnected(_)) => Err(()),
                    };
                    if sent.is_err() {
                        return Ok(()); // the writer stopped at a stored decision's error
                    }
                }
                Ok(())
            };
            match feed() {
                Ok(()) => {
                    let _ = items.send(std::mem::take(&mut chunk));
                }
                Err(e) => {
                    // Any failure here (a bad item, an iterator that raised): the writer rolls back.
                    let _ = items.send(vec![Err(Error::validation("decisions", "the input failed"))]);
                    failed = Some(e);
                }
            }
            drop(items);
            py.detach(|| writer.join().expect("the writer does not panic"))
        });
        match (written, failed) {
            (None, _) => Err(error(py, "DecisionStoreError", format!("{}: the store is closed", self.path))),
            (Some(Ok(n)), None) => Ok(n),
            // A value that could not be converted, named by its index.
            (_, Some(e)) => Err(e),
            (Some(Err(e)), None) => Err(raise(py, e)),
        }
    }

    /// Records that `new_id` supersedes `old_id` (the one change a stored decision allows).
    fn supersede(&self, py: Python<'_>, old_id: &str, new_id: &str) -> PyResult<()> {
        let (old, new) = (decision_id(py, old_id)?, decision_id(py, new_id)?);
        self.with(py, move |s| s.supersede(old, new))
    }

    /// The decision with this id, or None.
    fn get(&self, py: Python<'_>, decision_id: &str) -> PyResult<Option<PyDecision>> {
        let id = self::decision_id(py, decision_id)?;
        Ok(self.with(py, move |s| s.get(id))?.map(wrap))
    }

    /// A plan's decisions in sequence order.
    fn plan(&self, py: Python<'_>, plan_id: &str) -> PyResult<Vec<PyDecision>> {
        let p = self::plan_id(py, plan_id)?;
        Ok(self.with(py, move |s| s.plan_decisions(p))?.into_iter().map(wrap).collect())
    }

    /// The ids of every plan, in id order.
    fn plans(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.with(py, |s| s.plans())?.into_iter().map(|p| p.plan_id.to_string()).collect())
    }

    fn decision_tree(&self, py: Python<'_>, plan_id: &str) -> PyResult<PyDecisionTree> {
        let p = self::plan_id(py, plan_id)?;
        Ok(PyDecisionTree { inner: self.with(py, move |s| s.decision_tree(p))? })
    }

    /// What stands for the decision now.
    fn standing_decision(&self, py: Python<'_>, decision_id: &str) -> PyResult<PyDecision> {
        let id = self::decision_id(py, decision_id)?;
        Ok(wrap(self.with(py, move |s| s.standing_decision(id))?))
    }

    /// The decision and every correction of it, original first.
    fn correction_chain(&self, py: Python<'_>, decision_id: &str) -> PyResult<Vec<PyDecision>> {
        let id = self::decision_id(py, decision_id)?;
        Ok(self.with(py, move |s| s.correction_chain(id))?.into_iter().map(wrap).collect())
    }

    /// Imports decisions.jsonl; returns the import report as a dict.
    fn import_jsonl<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
        let report = self.with(py, move |s| {
            let file = std::io::BufReader::new(std::fs::File::open(&path)?);
            s.import_decisions(file, ImportOptions::default(), |_| {})
        })?;
        to_py(py, &serde_json::to_value(report).unwrap_or_default())
    }

    /// Writes every decision (or one plan's) as decisions.jsonl; returns how many.
    #[pyo3(signature = (path, plan_id=None))]
    fn export_jsonl(&self, py: Python<'_>, path: PathBuf, plan_id: Option<&str>) -> PyResult<u64> {
        let plan = plan_id.map(|p| self::plan_id(py, p)).transpose()?;
        self.with(py, move |s| {
            let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
            s.export_decisions(plan, file)
        })
    }

    /// Removes the content of `fields` of a decision (a secret, personal
    /// data): each holds "[redacted]" from now on, and the log records the
    /// redaction (who, why, when) as an entry of its own; returns it as a dict.
    fn redact<'py>(
        &self,
        py: Python<'py>,
        decision_id: &str,
        fields: Vec<String>,
        reason: &str,
        actor: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = self::decision_id(py, decision_id)?;
        let (reason, actor) = (reason.to_owned(), actor.to_owned());
        let redaction = self.with(py, move |s| {
            let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            s.redact(id, &fields, &reason, &actor)
        })?;
        field(py, &redaction)
    }

    /// A decision's redactions, oldest first, as dicts.
    fn redactions<'py>(&self, py: Python<'py>, decision_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let id = self::decision_id(py, decision_id)?;
        let list = self.with(py, move |s| s.redactions(id))?;
        field(py, &list)
    }

    /// Every problem `dstore check` would report, as dicts; empty when the store is sound.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let problems = self.with(py, |s| s.check())?;
        to_py(py, &serde_json::to_value(problems).unwrap_or_default())
    }

    /// Adds or replaces graph nodes (dicts in the nodes.jsonl shape).
    fn upsert_nodes(&self, py: Python<'_>, nodes: &Bound<'_, PyAny>) -> PyResult<()> {
        let nodes: Vec<UkoNode> = graph_items(nodes, "nodes")?;
        self.with(py, move |s| s.upsert_nodes(&nodes))
    }

    /// Adds graph edges (dicts in the edges.jsonl shape), or updates their weight.
    fn add_edges(&self, py: Python<'_>, edges: &Bound<'_, PyAny>) -> PyResult<()> {
        let edges: Vec<UkoEdge> = graph_items(edges, "edges")?;
        self.with(py, move |s| s.upsert_edges(&edges))
    }

    /// Builds or updates the graph of the Python, Rust, TypeScript, JavaScript
    /// and Go files under `path`, their lexical index and, with `history`
    /// (when `path` is in a git work tree), the `co_changed` links of the
    /// commits not read yet; returns the report.
    #[pyo3(signature = (path, history=true))]
    fn ingest<'py>(&self, py: Python<'py>, path: PathBuf, history: bool) -> PyResult<Bound<'py, PyAny>> {
        let options = IngestOptions::default().with_history(history);
        let report = self.with(py, move |s| s.ingest(&path, options))?;
        to_py(py, &serde_json::to_value(report).unwrap_or_default())
    }

    /// Context fragments for `focus` within `budget` tokens when given: dicts
    /// with `uko_node`, `content`, `tokens`, `detail_depth`, `resource_uri`,
    /// ... By default (`ranking="relevance"`) the focus's outline, then the
    /// files most relevant to it (graph, git history, words, directory),
    /// each by its definitions' signatures; `ranking="distance"` walks the
    /// graph breadth-first, depth falling with distance (breadth 6 unless
    /// given). Other arguments left out keep `dstore project`'s defaults.
    #[pyo3(signature = (focus, breadth=None, depth=None, budget=None, direction=None, ranking=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, each optional
    fn project<'py>(
        &self,
        py: Python<'py>,
        focus: Vec<String>,
        breadth: Option<u32>,
        depth: Option<&Bound<'py, PyAny>>,
        budget: Option<usize>,
        direction: Option<&str>,
        ranking: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ranking = ranking.map(str::parse::<Ranking>).transpose().map_err(|e| raise(py, e))?;
        let mut spec = ProjectionSpec::ranked(focus, ranking.unwrap_or(DEFAULT_RANKING)).map_err(|e| raise(py, e))?;
        match depth {
            None => {}
            Some(d) if d.is_instance_of::<PyInt>() => {
                spec = spec.with_depth(Depth::level(d.extract()?).map_err(|e| raise(py, e))?);
            }
            Some(d) => spec = spec.with_depth(Depth::named(d.extract::<String>()?)),
        }
        if let Some(b) = breadth {
            spec = spec.with_breadth(b);
        }
        if let Some(d) = direction {
            spec = spec.with_direction(d.parse::<Direction>().map_err(|e| raise(py, e))?);
        }
        let (_, set) = self.with(py, move |s| s.project(&spec, &Cl100k, budget))?;
        to_py(py, &serde_json::to_value(&set.fragments).unwrap_or_default())
    }

    /// The inherited context of a child of `plan_id` within `budget` tokens
    /// (4000 unless given), as a dict; `child_focus` (node URIs or relative
    /// file paths) by default the resources of the plan's subplan spawns.
    #[pyo3(signature = (plan_id, budget=None, child_focus=None))]
    fn child_context<'py>(
        &self,
        py: Python<'py>,
        plan_id: &str,
        budget: Option<usize>,
        child_focus: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = self::plan_id(py, plan_id)?;
        let options =
            StoredContextOptions { budget: budget.unwrap_or(DEFAULT_BUDGET), child_focus, ..Default::default() };
        let result = self.with(py, move |s| s.child_context(p, &options))?;
        to_py(py, &serde_json::to_value(&result).unwrap_or_default())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // tree-sitter's parsers allocate a node at a time in C: from mimalloc
    // too, as in dstore. SAFETY: mimalloc's four functions, set when the
    // module loads, before this copy of tree-sitter has made any object.
    unsafe {
        tree_sitter::set_allocator(Some(tree_sitter::Allocator {
            malloc: libmimalloc_sys::mi_malloc,
            calloc: mi_calloc,
            realloc: libmimalloc_sys::mi_realloc,
            free: libmimalloc_sys::mi_free,
        }));
    }
    m.add_class::<PyDecision>()?;
    m.add_class::<PyDecisionTree>()?;
    m.add_class::<PyStore>()?;
    m.add_function(wrap_pyfunction!(new_plan_id, m)?)?;
    m.add_function(wrap_pyfunction!(new_decision_id, m)?)?;
    Ok(())
}
