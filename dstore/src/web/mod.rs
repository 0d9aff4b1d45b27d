//! The web view of `dstore serve` (and `dstore ui`): pages for a person
//! and a JSON API under `/api/`, read-only by construction.
//!
//! Every route is a GET that reads through the server's pool of read-only
//! connections; no route writes. The API's documents are the CLI's
//! (`dstore plans`, `show`, `tree`, `stale`, `calibration` with `--format
//! json`), built by the same functions of the application floor
//! (`app::reports`), so the two cannot drift. Pages are
//! HTML rendered here, readable without JavaScript; `/assets/app.js` adds
//! search, keyboard navigation and the live update of an open plan.
//!
//! Stored text (options, rationales, metadata: agent output) is escaped
//! wherever a page shows it, and every response carries a
//! Content-Security-Policy that allows scripts and styles from this origin
//! only (no inline script), so escaped text could not run even if it were
//! not. The token, Host and Origin rules are `serve`'s, for every route.

mod pages;

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use decision_store::calibration::{CalibrationOptions, GroupBy};
use decision_store::decision::{DecisionId, DecisionTree, PlanId};
use decision_store::stale::StaleOptions;
use decision_store::store::Store;
use decision_store::Error;

use crate::app::chart::svg;
use crate::app::errors::http_status;
use crate::app::form::query_of;
use crate::app::reports::{json_tree, plan_rows, show_report};
use crate::app::stores::Stores;

/// What every response of the web view carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The routes of the web view over `stores`.
pub fn routes(stores: Arc<Stores>) -> Router {
    Router::new()
        .route("/", get(pages::plans))
        .route("/plan/{id}", get(pages::plan))
        .route("/decision/{id}", get(pages::decision))
        .route("/stale", get(pages::stale))
        .route("/calibration", get(pages::calibration))
        .route("/context", get(pages::context))
        .route("/api/plans", get(api_plans))
        .route("/api/plan/{id}/tree", get(api_tree))
        .route("/api/plan/{id}/count", get(api_count))
        .route("/api/decision/{id}", get(api_decision))
        .route("/api/stale", get(api_stale))
        .route("/api/calibration", get(api_calibration))
        .route("/api/calibration.svg", get(api_calibration_svg))
        .route("/assets/style.css", get(|| async { asset("text/css; charset=utf-8", include_str!("style.css")) }))
        .route("/assets/icon.svg", get(|| async { asset("image/svg+xml", include_str!("icon.svg")) }))
        .route("/favicon.ico", get(|| async { asset("image/svg+xml", include_str!("icon.svg")) }))
        .route("/assets/app.js", get(|| async { asset("text/javascript; charset=utf-8", include_str!("app.js")) }))
        .fallback(|| async { pages::not_found("no such page") })
        .layer(axum::middleware::map_response(secure))
        .with_state(stores)
}

/// The headers of every web response.
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

fn asset(kind: &'static str, text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "max-age=3600")], text).into_response()
}

/// Why a page or document is not shown, with its HTTP status: 404 for what
/// the store does not hold, 400 for a bad request, 500 when the store failed.
pub(crate) struct Miss {
    status: StatusCode,
    message: String,
}

impl Miss {
    fn bad(message: impl Into<String>) -> Self {
        Miss { status: StatusCode::BAD_REQUEST, message: message.into() }
    }

    fn not_found(message: impl Into<String>) -> Self {
        Miss { status: StatusCode::NOT_FOUND, message: message.into() }
    }
}

impl From<Error> for Miss {
    fn from(e: Error) -> Self {
        let status = StatusCode::from_u16(http_status(e.kind())).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Miss { status, message: e.to_string() }
    }
}

/// What a handler reads, or why it is not shown.
pub(crate) type Shown<T> = Result<T, Miss>;

/// Runs `f` on a read-only connection, off the async threads.
async fn read<T: Send + 'static>(stores: Arc<Stores>, f: impl FnOnce(&Store) -> Shown<T> + Send + 'static) -> Shown<T> {
    match tokio::task::spawn_blocking(move || stores.read(f)).await {
        Ok(shown) => shown,
        Err(e) => Err(Miss { status: StatusCode::INTERNAL_SERVER_ERROR, message: format!("internal error: {e}") }),
    }
}

/// The value of `key` in the request's query string, percent-decoded.
fn query(request: &Request, key: &str) -> Option<String> {
    query_of(request.uri().query()?, key)
}

fn json(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A JSON document as `print_json` writes it: pretty, with a final newline.
fn pretty<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_vec_pretty(value) {
        Ok(mut body) => {
            body.push(b'\n');
            json(StatusCode::OK, body)
        }
        Err(e) => api_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn api_error(status: StatusCode, message: &str) -> Response {
    json(status, serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default())
}

fn plan_id(text: &str) -> Shown<PlanId> {
    PlanId::parse(text).map_err(|e| Miss::bad(format!("plan id: {e}")))
}

fn decision_id(text: &str) -> Shown<DecisionId> {
    DecisionId::parse(text).map_err(|e| Miss::bad(format!("decision id: {e}")))
}

/// A plan's outline; a plan without decisions is not found.
fn outline_of(s: &Store, plan: PlanId) -> Shown<DecisionTree> {
    let tree = s.decision_tree_outline(plan)?;
    if tree.is_empty() {
        return Err(Miss::not_found(format!("no plan {plan} in the store")));
    }
    Ok(tree)
}

fn answer<T>(shown: Shown<T>, ok: impl FnOnce(T) -> Response) -> Response {
    match shown {
        Ok(v) => ok(v),
        Err(m) => api_error(m.status, &m.message),
    }
}

async fn api_plans(State(stores): State<Arc<Stores>>, request: Request) -> Response {
    let words = query(&request, "q").unwrap_or_default();
    answer(read(stores, move |s| Ok(plan_rows(s, &words)?)).await, |rows| pretty(&rows))
}

async fn api_tree(State(stores): State<Arc<Stores>>, Path(id): Path<String>, request: Request) -> Response {
    let effective = query(&request, "effective").is_some_and(|v| v == "1" || v == "true");
    let body = read(stores, move |s| {
        let plan = plan_id(&id)?;
        let tree = outline_of(s, plan)?;
        let mut out = Vec::new();
        json_tree(&tree, &plan.to_string(), &tree.view(effective), &mut out).map_err(|e| Miss::from(Error::Io(e)))?;
        Ok(out)
    })
    .await;
    answer(body, |b| json(StatusCode::OK, b))
}

/// How many decisions a plan holds now: what an open plan page polls.
async fn api_count(State(stores): State<Arc<Stores>>, Path(id): Path<String>) -> Response {
    let n = read(stores, move |s| {
        let plan = plan_id(&id)?;
        let summary = s.plan_summary(plan)?.ok_or_else(|| Error::PlanNotFound(plan.to_string()))?;
        Ok(summary.decisions)
    })
    .await;
    answer(n, |n| pretty(&serde_json::json!({ "decisions": n })))
}

async fn api_decision(State(stores): State<Arc<Stores>>, Path(id): Path<String>) -> Response {
    let report = read(stores, move |s| {
        let id = decision_id(&id)?;
        let (tree, redactions) = s.read_snapshot(|s| Ok((s.tree_of(id)?, s.redactions(id)?)))?;
        show_report(&tree, id, redactions).ok_or_else(|| Miss::from(Error::DecisionNotFound(id.to_string())))
    })
    .await;
    answer(report, |r| pretty(&r))
}

async fn api_stale(State(stores): State<Arc<Stores>>) -> Response {
    answer(read(stores, |s| Ok(s.stale(StaleOptions::default())?)).await, |r| pretty(&r))
}

/// `?by=`: a calibration grouping, or none.
pub(crate) fn group_by(name: Option<&str>) -> Shown<Option<GroupBy>> {
    Ok(name.filter(|n| !n.is_empty()).map(str::parse::<GroupBy>).transpose()?)
}

async fn api_calibration(State(stores): State<Arc<Stores>>, request: Request) -> Response {
    let by = group_by(query(&request, "by").as_deref());
    let report = match by {
        Ok(by) => {
            read(stores, move |s| Ok(s.calibration(CalibrationOptions { by, ..CalibrationOptions::default() })?)).await
        }
        Err(r) => Err(r),
    };
    answer(report, |r| pretty(&r))
}

async fn api_calibration_svg(State(stores): State<Arc<Stores>>) -> Response {
    let drawn = read(stores, |s| {
        let c = s.calibration(CalibrationOptions::default())?;
        svg(&c).map_err(|e| Miss { status: StatusCode::INTERNAL_SERVER_ERROR, message: format!("drawing: {e}") })
    })
    .await;
    match drawn {
        Ok(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
        Err(m) => api_error(m.status, &m.message),
    }
}
