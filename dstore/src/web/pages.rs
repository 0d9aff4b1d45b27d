//! The pages: HTML written here, every stored text through [`esc`].

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use decision_store::calibration::{CalibrationOptions, GroupBy, Metrics};
use decision_store::decision::{Decision, DecisionId, DecisionTree, DecisionType};
use decision_store::projection::{Cl100k, ContextFragment, ProjectionSpec, DEFAULT_BUDGET};
use decision_store::stale::{StaleOptions, StaleReport};
use decision_store::store::Redaction;
use decision_store::uko::{Direction, GraphSource, NodeKey};
use decision_store::Error;
use serde_json::Value;

use super::{decision_id, outline_of, plan_id, query, read, Shown};
use crate::app::form::encode;
use crate::app::reports::{plan_rows, PlanRow};
use crate::app::stores::Stores;
use crate::app::text::{confidence, count, figure};

/// Escapes text for HTML content and for quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Cuts `text` to `max` characters, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `2026-12-02T12:23:53.809Z` as `2026-12-02 12:23` (the title keeps it whole).
fn minutes(time: &str) -> String {
    time.get(..16).map_or_else(|| time.to_owned(), |t| t.replacen('T', " ", 1))
}

/// A whole page: the navigation, `title`, and `body` (already HTML).
fn page(title: &str, body: &str) -> Response {
    let mut html = String::with_capacity(body.len() + 1024);
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · dstore</title><link rel=\"icon\" href=\"/assets/icon.svg\" type=\"image/svg+xml\">\
         <link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <script src=\"/assets/app.js\" defer></script></head><body>\
         <header><a class=\"brand\" href=\"/\">dstore</a><nav>\
         <a href=\"/\">Plans</a><a href=\"/stale\">Stale</a><a href=\"/calibration\">Calibration</a>\
         <a href=\"/context\">Context</a></nav></header><main>{body}</main></body></html>",
        esc(title)
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

fn error_page(status: StatusCode, message: &str) -> Response {
    let mut r = page("Not shown", &format!("<h1>Not shown</h1><p class=\"error\">{}</p>", esc(message)));
    *r.status_mut() = status;
    r
}

pub fn not_found(message: &str) -> Response {
    error_page(StatusCode::NOT_FOUND, message)
}

fn shown(shown: Shown<Response>) -> Response {
    shown.unwrap_or_else(|m| error_page(m.status, &m.message))
}

// ---- plans ----

/// The plans' columns: the query's `sort` name and the header.
const PLAN_COLUMNS: &[(&str, &str)] = &[
    ("plan", "Plan"),
    ("goal", "Goal"),
    ("decisions", "Decisions"),
    ("depth", "Depth"),
    ("corrections", "Corrections"),
    ("superseded", "Superseded"),
    ("stale", "Stale"),
    ("types", "Types"),
    ("first", "First"),
    ("last", "Last"),
];

pub async fn plans(State(stores): State<Arc<Stores>>, request: Request) -> Response {
    let sort = query(&request, "sort").unwrap_or_else(|| "last".into());
    let desc = query(&request, "desc").map_or(sort == "last", |v| v == "1");
    let filter = query(&request, "q").unwrap_or_default();
    let words = filter.clone();
    let data = read(stores, move |s| {
        // An id, the beginning of one, or PLAN#SEQ: straight to it.
        if let Some(to) = found(s, words.trim()) {
            return Ok(Err(to));
        }
        let rows = plan_rows(s, &words)?;
        let total = s.decision_counts()?.plans;
        // Without a graph nothing can be compared: the column says so.
        let stale = compared(s.stale(StaleOptions::default()))?;
        let types = s.plan_type_counts()?;
        Ok(Ok((rows, total, stale, types)))
    })
    .await;
    shown(data.map(|found| {
        let (rows, total, stale, types) = match found {
            Ok(data) => data,
            Err(to) => return axum::response::Redirect::to(&to).into_response(),
        };
        let types: HashMap<String, String> = types
            .into_iter()
            .map(|(plan, counts)| {
                let mut counts: Vec<(DecisionType, u64)> = counts.into_iter().collect();
                counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let text = counts.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", ");
                (plan.to_string(), text)
            })
            .collect();
        plans_page(rows, total, stale.as_ref(), &types, &sort, desc, &filter)
    }))
}

/// Where a search for `text` goes when it names a decision (an id, the
/// beginning of one, `PLAN#SEQ`) or a plan rather than words of a goal.
fn found(s: &decision_store::store::Store, text: &str) -> Option<String> {
    if text.is_empty() || text.contains(char::is_whitespace) {
        return None;
    }
    if let Ok(id) = s.find_decision(text) {
        return Some(format!("/decision/{id}"));
    }
    s.find_plan(text).ok().map(|plan| format!("/plan/{plan}"))
}

#[allow(clippy::too_many_arguments)] // the page's data and the query's three parts
fn plans_page(
    mut rows: Vec<PlanRow>,
    total: u64,
    stale: Option<&StaleReport>,
    types: &HashMap<String, String>,
    sort: &str,
    desc: bool,
    filter: &str,
) -> Response {
    let mut stale_in: HashMap<String, u64> = HashMap::new();
    for s in stale.iter().flat_map(|r| &r.stale) {
        *stale_in.entry(s.plan_id.to_string()).or_default() += 1;
    }
    let stale_of = |r: &PlanRow| stale_in.get(&r.plan_id).copied().unwrap_or(0);
    match sort {
        "plan" => rows.sort_by(|a, b| a.plan_id.cmp(&b.plan_id)),
        "goal" => rows.sort_by(|a, b| a.goal.cmp(&b.goal)),
        "decisions" => rows.sort_by_key(|r| r.decisions),
        "depth" => rows.sort_by_key(|r| r.max_depth),
        "corrections" => rows.sort_by_key(|r| r.corrections),
        "superseded" => rows.sort_by_key(|r| r.superseded),
        "stale" => rows.sort_by_key(|r| stale_of(r)),
        "types" => rows.sort_by(|a, b| types.get(&a.plan_id).cmp(&types.get(&b.plan_id))),
        "first" => rows.sort_by(|a, b| a.first.cmp(&b.first)),
        _ => rows.sort_by(|a, b| a.last.cmp(&b.last)),
    }
    if desc {
        rows.reverse();
    }
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Plans</h1><form class=\"filter\" method=\"get\" action=\"/\">\
         <input type=\"hidden\" name=\"sort\" value=\"{}\"><input type=\"hidden\" name=\"desc\" value=\"{}\">\
         <label>Goal words, or an id <input name=\"q\" value=\"{}\" autocomplete=\"off\" \
         placeholder=\"rate limit, 01JD…, PLAN#3\"></label>\
         <button>Find</button></form><p class=\"muted\">{} of {total} plans</p>",
        esc(sort),
        u8::from(desc),
        esc(filter),
        rows.len()
    );
    if rows.is_empty() {
        if total > 0 {
            let _ = write!(body, "<p>No plan's goal holds “{}”.</p>", esc(filter));
        } else {
            body.push_str("<p>No plans here yet: agents record decisions with <code>record_decision</code>.</p>");
        }
        return page("Plans", &body);
    }
    body.push_str("<table class=\"grid\"><thead><tr>");
    for (key, name) in PLAN_COLUMNS {
        let next_desc = if *key == sort { !desc } else { *key != "plan" };
        let arrow = if *key == sort {
            if desc {
                " ▾"
            } else {
                " ▴"
            }
        } else {
            ""
        };
        let numeric = if matches!(*key, "plan" | "goal" | "types" | "first" | "last") { "" } else { " class=\"n\"" };
        let _ = write!(
            body,
            "<th{numeric}><a href=\"/?sort={key}&amp;desc={}&amp;q={}\">{name}{arrow}</a></th>",
            u8::from(next_desc),
            esc(&encode(filter))
        );
    }
    body.push_str("</tr></thead><tbody>");
    for r in &rows {
        let n = stale_of(r);
        let stale = if stale_in.is_empty() && stale.is_none() { "–".to_owned() } else { n.to_string() };
        let _ = write!(
            body,
            "<tr><td><a class=\"id\" href=\"/plan/{id}\">{id}</a></td><td class=\"goal\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n{}\">{stale}</td><td class=\"types\">{}</td><td class=\"time\" title=\"{first}\">{}</td>\
             <td class=\"time\" title=\"{last}\">{}</td></tr>",
            esc(&cut(r.goal.as_deref().unwrap_or(""), 80)),
            r.decisions,
            r.max_depth,
            r.corrections,
            r.superseded,
            if n > 0 { " warn" } else { "" },
            esc(types.get(&r.plan_id).map_or("", String::as_str)),
            esc(&minutes(&r.first)),
            esc(&minutes(&r.last)),
            id = esc(&r.plan_id),
            first = esc(&r.first),
            last = esc(&r.last),
        );
    }
    body.push_str("</tbody></table>");
    page("Plans", &body)
}

// ---- a plan ----

/// Outline levels nest this deep; deeper decisions are drawn at this level
/// with how many levels are not drawn (as `dstore tree` does).
const MAX_NEST: usize = 32;

pub async fn plan(State(stores): State<Arc<Stores>>, Path(id): Path<String>, request: Request) -> Response {
    let effective = query(&request, "effective").is_some_and(|v| v == "1");
    let fragment = query(&request, "fragment").is_some_and(|v| v == "tree");
    let data = read(stores, move |s| {
        let plan = plan_id(&id)?;
        Ok((plan, outline_of(s, plan)?))
    })
    .await;
    shown(data.map(|(plan, tree)| {
        let outline = outline(&tree, effective);
        if fragment {
            return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], outline).into_response();
        }
        let mut body = String::new();
        let _ = write!(
            body,
            "<h1>Plan <span class=\"id\">{plan}</span></h1>\
             <p class=\"muted\">{}, {} standing, depth {}. \
             <a href=\"/plan/{plan}{}\">{}</a> · <a href=\"/api/plan/{plan}/tree\">JSON</a></p>\
             <div class=\"tools\"><input id=\"search\" type=\"search\" placeholder=\"Search options and types (/)\" \
             autocomplete=\"off\"><button id=\"expand\" type=\"button\">Expand all</button>\
             <button id=\"collapse\" type=\"button\">Collapse all</button><span id=\"live\" class=\"muted\" \
             aria-live=\"polite\"></span></div>\
             <p class=\"legend\"><span class=\"tag standing\">standing</span> <span class=\"tag corrected\">corrected</span> \
             <span class=\"tag superseded\">superseded</span> · keys: <kbd>j</kbd>/<kbd>k</kbd> move, \
             <kbd>Enter</kbd> open, <kbd>←</kbd>/<kbd>→</kbd> collapse/expand</p>\
             <div id=\"tree\" data-plan=\"{plan}\" data-count=\"{}\" data-effective=\"{}\">{outline}</div>",
            count(tree.len() as u64, "decision"),
            tree.effective().len(),
            tree.max_depth(),
            if effective { "" } else { "?effective=1" },
            if effective { "Show every decision" } else { "Show only what stands" },
            tree.len(),
            u8::from(effective),
        );
        page(&format!("Plan {plan}"), &body)
    }))
}

/// The plan's tree as nested lists: a decision with children is a
/// `<details>` (collapsible without script), a leaf a row.
fn outline(tree: &DecisionTree, effective_only: bool) -> String {
    let view = tree.view(effective_only);
    let mut out = String::with_capacity(view.nodes.len() * 256);
    out.push_str("<ul class=\"tree\">");
    let level = |i: usize| view.nodes[i].level.min(MAX_NEST);
    let mut open = 0usize;
    for (i, n) in view.nodes.iter().enumerate() {
        let l = level(i);
        while open > l {
            out.push_str("</ul></details></li>");
            open -= 1;
        }
        let d = n.decision;
        let has_children = i + 1 < view.nodes.len() && level(i + 1) > l;
        let row = row(tree, d, n.level.saturating_sub(MAX_NEST));
        let _ = write!(out, "<li id=\"d-{}\">", d.decision_id());
        if has_children {
            let _ = write!(out, "<details open><summary>{row}</summary><ul>");
            open += 1;
        } else {
            let _ = write!(out, "<div class=\"leaf\">{row}</div></li>");
        }
    }
    while open > 0 {
        out.push_str("</ul></details></li>");
        open -= 1;
    }
    out.push_str("</ul>");
    out
}

/// One decision's line of the outline.
fn row(tree: &DecisionTree, d: &Decision, hidden_levels: usize) -> String {
    let id = d.decision_id();
    let corrected = tree.corrected_by(id);
    // Every link that overturned it (an old store may hold both kinds).
    let mut marks = Vec::new();
    if !corrected.is_empty() {
        marks.push(format!("corrected by {}", seqs(tree, corrected)));
    }
    if let Some(s) = d.superseded_by() {
        marks.push(format!("superseded by {}", seqs(tree, &[s])));
    }
    let state = match (corrected.is_empty(), d.superseded_by().is_some()) {
        (false, _) => "corrected",
        (true, true) => "superseded",
        (true, false) if tree.is_effective(id) => "standing",
        (true, false) => "overturned",
    };
    if marks.is_empty() {
        marks.push(if state == "standing" { "standing" } else { "overturned above" }.to_owned());
    }
    let mark = marks.join("; ");
    let deeper =
        if hidden_levels > 0 { format!("<span class=\"muted\">⋯{hidden_levels} </span>") } else { String::new() };
    format!(
        "{deeper}<a class=\"row {state}\" href=\"/decision/{id}\" data-search=\"{}\"><span class=\"type\">{}</span> \
         <span class=\"seq\">#{}</span> <span class=\"conf\">{}</span> <span class=\"opt\">{}</span> \
         <span class=\"tag {state}\">{}</span></a>",
        esc(&format!("{} {}", d.decision_type(), d.chosen_option()).to_lowercase()),
        d.decision_type(),
        d.sequence(),
        confidence(d.confidence_score()),
        esc(&cut(d.chosen_option(), 140)),
        esc(&mark),
    )
}

fn seqs(tree: &DecisionTree, ids: &[DecisionId]) -> String {
    ids.iter()
        .map(|i| tree.get(*i).map_or_else(|| i.to_string(), |d| format!("#{}", d.sequence())))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---- a decision ----

pub async fn decision(State(stores): State<Arc<Stores>>, Path(id): Path<String>) -> Response {
    let data = read(stores, move |s| {
        let id = decision_id(&id)?;
        let tree = s.tree_of(id)?;
        let plan = tree.get(id).ok_or_else(|| Error::DecisionNotFound(id.to_string()))?.plan_id();
        let stale = compared(s.stale(StaleOptions { plan: Some(plan), all: true }))?.unwrap_or_default();
        Ok((id, tree, stale, s.redactions(id)?))
    })
    .await;
    shown(data.map(|(id, tree, stale, redactions)| decision_page(id, &tree, &stale, &redactions)))
}

fn link(tree: &DecisionTree, id: DecisionId) -> String {
    match tree.get(id) {
        Some(d) => format!(
            "<a href=\"/decision/{id}\"><span class=\"type\">{}</span> #{}</a> <span class=\"opt\">{}</span>",
            d.decision_type(),
            d.sequence(),
            esc(&cut(d.chosen_option(), 100))
        ),
        None => format!("<a href=\"/decision/{id}\" class=\"id\">{id}</a>"),
    }
}

fn decision_page(id: DecisionId, tree: &DecisionTree, stale: &StaleReport, redactions: &[Redaction]) -> Response {
    let d = tree.get(id).expect("the page's decision is in its tree");
    let mut body = String::new();
    let standing = tree.standing(id);
    let status = if standing.is_some_and(|s| s.decision_id() == id) {
        "<span class=\"tag standing\">stands now</span>".to_owned()
    } else {
        "<span class=\"tag corrected\">overturned</span>".to_owned()
    };
    let _ = write!(
        body,
        "<p class=\"crumbs\"><a href=\"/plan/{plan}\">Plan <span class=\"id\">{plan}</span></a></p>\
         <h1><span class=\"type\">{}</span> #{} {status}</h1><p class=\"chosen\">{}</p>",
        d.decision_type(),
        d.sequence(),
        esc(d.chosen_option()),
        plan = d.plan_id(),
    );
    // What a person reads first: when, how sure, why, and what was turned down.
    let _ = write!(
        body,
        "<dl class=\"fields summary\"><dt>made</dt><dd class=\"time\">{}</dd><dt>confidence</dt><dd>{}</dd>",
        esc(&decision_store::time::utc_ms(id.timestamp_ms())),
        confidence(d.confidence_score()),
    );
    if !d.rationale().is_empty() {
        let _ = write!(body, "<dt>rationale</dt><dd>{}</dd>", esc(d.rationale()));
    }
    for a in d.alternatives() {
        let why = a.rationale().map(|r| format!(" <span class=\"muted\">({})</span>", esc(r))).unwrap_or_default();
        let _ = write!(body, "<dt>turned down</dt><dd>{}{why}</dd>", esc(a.option()));
    }
    body.push_str("</dl>");

    let chain = tree.correction_chain(id);
    let path = tree.supersession_path(id);
    body.push_str("<h2>History</h2>");
    if chain.len() > 1 {
        body.push_str("<p>Correction chain, the original first:</p><ol class=\"timeline\">");
        for c in &chain {
            let here = if c.decision_id() == id { " class=\"here\"" } else { "" };
            let _ = write!(body, "<li{here}>{}</li>", link(tree, c.decision_id()));
        }
        body.push_str("</ol>");
    }
    if !path.is_empty() {
        body.push_str("<p>Superseded by:</p><ol class=\"timeline\">");
        let _ = write!(body, "<li class=\"here\">{}</li>", link(tree, id));
        for c in &path {
            let _ = write!(body, "<li>{}</li>", link(tree, c.decision_id()));
        }
        body.push_str("</ol>");
    }
    if chain.len() <= 1 && path.is_empty() {
        body.push_str("<p class=\"muted\">Never corrected or superseded.</p>");
    }
    if !redactions.is_empty() {
        body.push_str("<p>Redacted:</p><ul class=\"redactions\">");
        for r in redactions {
            let _ = write!(
                body,
                "<li>{} by {} <span class=\"time\">{}</span>: {}</li>",
                esc(&r.fields.join(", ")),
                esc(&r.actor),
                esc(&r.redacted_at),
                esc(&r.reason)
            );
        }
        body.push_str("</ul>");
    }
    if let Some(s) = standing {
        let _ = write!(body, "<p>What stands now: {}</p>", link(tree, s.decision_id()));
    }

    body.push_str("<h2>In the tree</h2><dl class=\"fields\"><dt>parent</dt><dd>");
    match d.parent_decision_id() {
        Some(p) => body.push_str(&link(tree, p)),
        None => body.push_str("<span class=\"muted\">the plan's root</span>"),
    }
    body.push_str("</dd><dt>children</dt><dd>");
    let children = tree.children(id);
    if children.is_empty() {
        body.push_str("<span class=\"muted\">none</span>");
    } else {
        body.push_str("<ul>");
        for c in children {
            let _ = write!(body, "<li>{}</li>", link(tree, c.decision_id()));
        }
        body.push_str("</ul>");
    }
    body.push_str("</dd></dl>");

    let impact = tree.impact(id);
    let _ = write!(
        body,
        "<h2>Impact</h2><p>{} below it, {}, {}, {}.</p>",
        count(impact.descendants.len() as u64, "decision"),
        count(impact.downstream_decisions.len() as u64, "downstream decision"),
        count(impact.downstream_plans.len() as u64, "downstream plan"),
        count(impact.artifacts.len() as u64, "artifact")
    );
    if !impact.artifacts.is_empty() {
        body.push_str("<ul>");
        for a in &impact.artifacts {
            let _ = write!(body, "<li><code>{}</code></li>", esc(a));
        }
        body.push_str("</ul>");
    }

    let snapshot = d.context_snapshot();
    body.push_str("<h2>Context snapshot</h2>");
    if snapshot.resources().is_empty() {
        body.push_str("<p class=\"muted\">It recorded no resources.</p>");
    } else {
        let changed: HashMap<&str, &Option<String>> = stale
            .stale
            .iter()
            .filter(|s| s.decision_id == id)
            .flat_map(|s| s.resources.iter().map(|r| (r.resource_id.as_str(), &r.current_version)))
            .collect();
        body.push_str("<table class=\"grid\"><thead><tr><th>Resource</th><th>Recorded version</th><th>Now</th></tr></thead><tbody>");
        for r in snapshot.resources() {
            let now = match changed.get(r.resource_id()) {
                Some(Some(v)) => {
                    format!("<span class=\"tag stale\">stale</span> changed to <code>{}</code>", esc(&cut(v, 16)))
                }
                Some(None) => "<span class=\"tag stale\">stale</span> gone from the graph".to_owned(),
                None => "<span class=\"muted\">unchanged</span>".to_owned(),
            };
            let _ = write!(
                body,
                "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{now}</td></tr>",
                esc(r.resource_id()),
                esc(&cut(r.version().unwrap_or("–"), 16))
            );
        }
        body.push_str("</tbody></table>");
    }
    // Every field, as the interchange JSON has it: last, folded.
    body.push_str("<details class=\"all-fields\"><summary>Every field</summary><dl class=\"fields\">");
    if let Value::Object(fields) = d.to_json_value() {
        for (key, value) in &fields {
            let shown = match value {
                Value::Null => "<span class=\"muted\">–</span>".to_owned(),
                Value::String(s) if key == "plan_id" => format!("<a class=\"id\" href=\"/plan/{0}\">{0}</a>", esc(s)),
                Value::String(s) if key.ends_with("decision_id") || key == "superseded_by" => {
                    format!("<a class=\"id\" href=\"/decision/{0}\">{0}</a>", esc(s))
                }
                Value::String(s) => esc(s),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Array(a) if a.is_empty() => "<span class=\"muted\">none</span>".to_owned(),
                other => format!(
                    "<pre>{}</pre>",
                    esc(&serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()))
                ),
            };
            let _ = write!(body, "<dt>{}</dt><dd>{shown}</dd>", esc(key));
        }
    }
    body.push_str("</dl></details>");

    let _ = write!(body, "<p class=\"muted\"><a href=\"/api/decision/{id}\">JSON</a></p>");
    page(&format!("{} #{}", d.decision_type(), d.sequence()), &body)
}

// ---- stale ----

/// A staleness report, or `None` when the store has no graph to compare with.
fn compared(report: decision_store::Result<StaleReport>) -> decision_store::Result<Option<StaleReport>> {
    match report {
        Ok(r) => Ok(Some(r)),
        Err(Error::EmptyGraph { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

pub async fn stale(State(stores): State<Arc<Stores>>, request: Request) -> Response {
    // As `dstore stale`: the decisions that stand; `?all=1` adds the overturned ones.
    let all = query(&request, "all").is_some_and(|v| v == "1");
    let data = read(stores, move |s| match s.stale(StaleOptions { plan: None, all }) {
        Err(e @ Error::EmptyGraph { .. }) => Ok(Err(e.to_string())),
        other => Ok(Ok(other?)),
    })
    .await;
    shown(data.map(|report| {
        let report = match report {
            Ok(r) => r,
            Err(why) => {
                return page("Stale decisions", &format!("<h1>Stale decisions</h1><p>{}</p>", esc(&why)));
            }
        };
        let mut body = String::new();
        let _ = write!(
            body,
            "<h1>Stale decisions</h1><p class=\"muted\">{} and {} checked against the graph's {}: {} stale, {} at \
             risk through them.</p>",
            count(report.checked_decisions as u64, "decision"),
            count(report.checked_resources as u64, "snapshot resource"),
            count(report.graph_nodes as u64, "node"),
            report.stale.len(),
            report.at_risk.len()
        );
        if report.stale.is_empty() {
            body.push_str("<p>Nothing stale: every recorded resource is as the decisions saw it.</p>");
        } else {
            body.push_str(
                "<table class=\"grid\"><thead><tr><th>Decision</th><th>Plan</th><th>Chosen</th><th>Changed resources</th></tr></thead><tbody>",
            );
            for s in &report.stale {
                let resources: Vec<String> = s
                    .resources
                    .iter()
                    .map(|r| {
                        let what = if r.current_version.is_some() { "changed" } else { "gone" };
                        format!("<code>{}</code> {what}", esc(&r.resource_id))
                    })
                    .collect();
                let _ = write!(
                    body,
                    "<tr><td><a href=\"/decision/{}\"><span class=\"type\">{}</span> #{}</a>{}</td>\
                     <td><a class=\"id\" href=\"/plan/{plan}\">{plan}</a></td><td class=\"opt\">{}</td><td>{}</td></tr>",
                    s.decision_id,
                    s.decision_type,
                    s.sequence,
                    if s.effective { "" } else { " <span class=\"tag corrected\">overturned</span>" },
                    esc(&cut(&s.chosen_option, 100)),
                    resources.join("<br>"),
                    plan = s.plan_id,
                );
            }
            body.push_str("</tbody></table>");
        }
        if !report.at_risk.is_empty() {
            body.push_str("<h2>At risk</h2><p class=\"muted\">Decisions that build on a stale one.</p><table class=\"grid\"><thead><tr><th>Decision</th><th>Because</th></tr></thead><tbody>");
            for a in &report.at_risk {
                let what = match (a.decision_type, a.sequence) {
                    (Some(t), Some(n)) => format!("<span class=\"type\">{t}</span> #{n}"),
                    _ => format!("<span class=\"id\">{}</span> (not stored)", a.decision_id),
                };
                let because: Vec<String> = a
                    .because_of
                    .iter()
                    .map(|c| {
                        format!("{} <a class=\"id\" href=\"/decision/{1}\">{1}</a>", c.via.as_words(), c.stale_decision_id)
                    })
                    .collect();
                let _ = write!(
                    body,
                    "<tr><td><a href=\"/decision/{}\">{what}</a></td><td>{}</td></tr>",
                    a.decision_id,
                    because.join(", ")
                );
            }
            body.push_str("</tbody></table>");
        }
        page("Stale decisions", &body)
    }))
}

// ---- calibration ----

pub async fn calibration(State(stores): State<Arc<Stores>>) -> Response {
    let data = read(stores, |s| {
        let mut all = Vec::new();
        for by in [None, Some(GroupBy::Type), Some(GroupBy::Phase)] {
            all.push(s.calibration(CalibrationOptions { by, ..CalibrationOptions::default() })?);
        }
        Ok(all)
    })
    .await;
    shown(data.map(|all| {
        let mut body = String::from("<h1>Calibration</h1>");
        let overall = &all[0];
        if overall.overall.scored == 0 {
            body.push_str(
                "<p>Nothing to calibrate yet: no decision with a confidence score is followed by enough later ones in its plan.</p>",
            );
            return page("Calibration", &body);
        }
        let _ = write!(
            body,
            "<p class=\"muted\">How well the agents' confidence matched what held: a decision held when no later \
             decision corrected or superseded it.{}</p>\
             <img class=\"chart\" src=\"/api/calibration.svg\" alt=\"Reliability diagram: share held against confidence\" width=\"640\" height=\"560\">",
            match overall.settled_after {
                0 => String::new(),
                n => format!(
                    " Decisions followed by fewer than {n} later ones in their plan are too recent to tell ({} left out).",
                    overall.unsettled
                ),
            }
        );
        metrics_table(&mut body, "Overall", &[("all".to_owned(), &overall.overall)]);
        for (c, name) in all[1..].iter().zip(["By type", "By phase"]) {
            let rows: Vec<(String, &Metrics)> = c.groups.iter().map(|g| (g.key.clone(), &g.metrics)).collect();
            metrics_table(&mut body, name, &rows);
        }
        page("Calibration", &body)
    }))
}

fn metrics_table(body: &mut String, title: &str, rows: &[(String, &Metrics)]) {
    let _ = write!(
        body,
        "<h2>{}</h2><table class=\"grid\"><thead><tr><th></th><th class=\"n\">Decisions</th><th class=\"n\">Scored</th>\
         <th class=\"n\">Held</th><th class=\"n\">Mean confidence</th><th class=\"n\">Share held</th>\
         <th class=\"n\">Brier</th><th class=\"n\">ECE</th></tr></thead><tbody>",
        esc(title)
    );
    for (key, m) in rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(key),
            m.decisions,
            m.scored,
            m.held,
            figure(m.mean_confidence),
            figure(m.share_held),
            figure(m.brier),
            figure(m.ece)
        );
    }
    body.push_str("</tbody></table>");
}

// ---- context ----

/// The largest budget the page asks for.
const MAX_BUDGET: usize = 64_000;

pub async fn context(State(stores): State<Arc<Stores>>, request: Request) -> Response {
    let focus = query(&request, "focus").unwrap_or_default();
    let budget = query(&request, "budget")
        .and_then(|b| b.trim().parse::<usize>().ok())
        .unwrap_or(DEFAULT_BUDGET)
        .min(MAX_BUDGET);
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Context</h1><form class=\"filter\" method=\"get\" action=\"/context\">\
         <label>Focus <input name=\"focus\" value=\"{}\" placeholder=\"project://src/app.py or class://Name\" size=\"48\"></label>\
         <label>Budget <input name=\"budget\" value=\"{budget}\" size=\"6\" inputmode=\"numeric\"> tokens</label>\
         <button>Project</button></form>",
        esc(&focus)
    );
    let focus: Vec<String> = focus.split(',').map(str::trim).filter(|f| !f.is_empty()).map(str::to_owned).collect();
    if focus.is_empty() {
        body.push_str(
            "<p class=\"muted\">Name a node of the graph (comma-separated for several) to see the fragments that \
             <code>get_context</code> and <code>dstore project</code> select for it, coloured by detail depth.</p>",
        );
        return page("Context", &body);
    }
    let data = read(stores, move |s| {
        let spec = ProjectionSpec::for_focus(focus)?;
        Ok(s.read_snapshot(|s| {
            let (projection, set) = s.project(&spec, &Cl100k, Some(budget))?;
            let focus = projection.spec.focus();
            let shown = pictured(focus, &set.fragments);
            // The links between the nodes pictured: one step out of all of them at once.
            let keys = s.resolve(&shown)?;
            let at: HashMap<NodeKey, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
            let links: Vec<(usize, usize)> = s
                .expand(&keys, Direction::Outgoing, None)?
                .into_iter()
                .filter_map(|(a, b)| Some((at[&a], *at.get(&b)?)))
                .filter(|(i, j)| i != j)
                .collect();
            Ok((set, shown, focus.len(), links))
        })?)
    })
    .await;
    match data {
        Err(m) => {
            let _ = write!(body, "<p class=\"error\">{}</p>", esc(&m.message));
            let mut page = page("Context", &body);
            *page.status_mut() = m.status;
            page
        }
        Ok((set, shown, focused, links)) => {
            let files: HashSet<&str> =
                set.fragments.iter().map(|f| f.resource_uri()).filter(|r| !r.is_empty()).collect();
            let _ = write!(
                body,
                "<p class=\"muted\">{} from {}, {} of {budget} tokens; {} left out by the budget.</p>\
                 <p class=\"legend\"><span class=\"depth d9\">full source</span> <span class=\"depth d4\">signatures</span> \
                 <span class=\"depth d1\">outline</span> <span class=\"depth d0\">names</span></p>",
                count(set.fragments.len() as u64, "fragment"),
                count(files.len() as u64, "resource"),
                set.total_tokens,
                set.dropped.len()
            );
            let depths: HashMap<&str, u32> = set.fragments.iter().map(|f| (f.uko_node(), f.detail_depth())).collect();
            body.push_str(&picture(&shown, focused, &links, &depths));
            for f in &set.fragments {
                let depth = match f.detail_depth() {
                    d if d >= 9 => "d9",
                    d if d >= 4 => "d4",
                    d if d >= 1 => "d1",
                    _ => "d0",
                };
                let _ = write!(
                    body,
                    "<section class=\"fragment depth {depth}\"><h3><code>{}</code> <span class=\"muted\">depth {}, {}</span></h3><pre>{}</pre></section>",
                    esc(f.uko_node()),
                    f.detail_depth(),
                    count(f.tokens() as u64, "token"),
                    esc(f.content())
                );
            }
            page("Context", &body)
        }
    }
}

/// The most nodes the neighbourhood picture draws.
const PICTURED: usize = 36;

/// The nodes the picture draws: the focus, then the fragments' nodes in
/// the order the projection chose them.
fn pictured(focus: &[String], fragments: &[ContextFragment]) -> Vec<String> {
    let mut shown: Vec<String> = focus.to_vec();
    for f in fragments {
        if shown.len() >= PICTURED {
            break;
        }
        if !shown.iter().any(|u| u == f.uko_node()) {
            shown.push(f.uko_node().to_owned());
        }
    }
    shown
}

fn depth_class(depth: u32) -> &'static str {
    match depth {
        d if d >= 9 => "d9",
        d if d >= 4 => "d4",
        d if d >= 1 => "d1",
        _ => "d0",
    }
}

/// The neighbourhood as an SVG: the focus in the middle, the other nodes on
/// rings in the order they were chosen, coloured by their detail, and the
/// graph's links between them.
fn picture(shown: &[String], focus: usize, links: &[(usize, usize)], depths: &HashMap<&str, u32>) -> String {
    const W: f64 = 1120.0;
    const H: f64 = 600.0;
    let (cx, cy) = (W / 2.0, H / 2.0);
    let focus = focus.min(shown.len());
    let mut at: Vec<(f64, f64)> = Vec::with_capacity(shown.len());
    // The focus nodes share the middle; the rest fill rings of 8, 12 and 16.
    let rings = [(0usize, 8usize, 150.0f64), (8, 12, 290.0), (20, 16, 430.0)];
    for i in 0..shown.len() {
        if i < focus {
            // One focus in the middle; several around it, close together.
            let r = if focus == 1 { 0.0 } else { 40.0 };
            let angle = std::f64::consts::TAU * i as f64 / focus as f64;
            at.push((cx + r * angle.cos(), cy + r * angle.sin()));
            continue;
        }
        let k = i - focus;
        let &(start, size, r) = rings.iter().find(|(s, n, _)| k < s + n).unwrap_or(&rings[2]);
        let angle = std::f64::consts::TAU * ((k - start) as f64 + 0.5 * (start as f64 % 2.0)) / size as f64;
        at.push((cx + r * angle.cos(), cy + 0.62 * r * angle.sin()));
    }
    let mut svg = format!(
        "<figure class=\"neighbourhood\"><svg viewBox=\"0 0 {W} {H}\" role=\"img\" \
         aria-label=\"The focus and the nodes of its context, with the links between them\">"
    );
    for (a, b) in links {
        let ((x1, y1), (x2, y2)) = (at[*a], at[*b]);
        let _ = write!(svg, "<line x1=\"{x1:.0}\" y1=\"{y1:.0}\" x2=\"{x2:.0}\" y2=\"{y2:.0}\" class=\"link\"></line>");
    }
    for (i, uri) in shown.iter().enumerate() {
        let (x, y) = at[i];
        let class = if i < focus { "focus" } else { depth_class(depths.get(uri.as_str()).copied().unwrap_or(0)) };
        let name = uri.split_once("://").map_or(uri.as_str(), |(_, rest)| rest);
        let name = name.rsplit('/').next().unwrap_or(name);
        let _ = write!(
            svg,
            "<g class=\"node {class}\"><title>{}</title><circle cx=\"{x:.0}\" cy=\"{y:.0}\" r=\"{}\"></circle>\
             <text x=\"{x:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text></g>",
            esc(uri),
            if i < focus { 11 } else { 7 },
            y + 20.0,
            esc(&cut(name, 22))
        );
    }
    svg.push_str("</svg><figcaption class=\"muted\">The focus in the middle; the nodes of its context around it in the order they were chosen, coloured by detail; lines are the graph's links between them.</figcaption></figure>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_text_cannot_open_a_tag_or_leave_an_attribute() {
        assert_eq!(esc("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
        assert_eq!(esc("\" onmouseover=\"x"), "&quot; onmouseover=&quot;x");
        assert_eq!(esc("a & b"), "a &amp; b");
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
