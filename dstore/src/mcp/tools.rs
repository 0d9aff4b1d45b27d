//! The tools of `docs/agent-tools.md`: each reads its arguments (naming
//! the field of any bad value), calls the library, and shapes the answer.
//! What a tool computes is the library's; nothing here decides.

use std::sync::Arc;

use decision_store::calibration::{CalibrationOptions, GroupBy, Metrics};
use decision_store::context::StoredContextOptions;
use decision_store::decision::JSON_SCHEMA;
use decision_store::projection::{
    Cl100k, ContextFragment, Depth, ProjectionSpec, Ranking, DEFAULT_BUDGET, DEFAULT_RANKING,
};
use decision_store::stale::StaleOptions;
use decision_store::time::utc_ms;
use decision_store::uko::Direction;
use serde_json::{json, Map, Value};

use super::args::{Args, Outcome, Refusal};
use crate::app::stores::Stores;
use crate::app::text::count;

/// What a tool gives back: the structured result and a line for the model.
pub struct Answer {
    pub structured: Value,
    pub text: String,
}

/// One tool: its description and schemas, and the function that runs it.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub writes: bool,
    /// Calling it twice with the same arguments changes nothing more.
    pub idempotent: bool,
    pub input: Value,
    pub output: Value,
    pub run: fn(&Stores, Args) -> Outcome<Answer>,
    /// The argument names it takes.
    pub fields: &'static [&'static str],
}

/// Every tool, writes first.
pub fn all() -> Vec<Tool> {
    let decision = decision_schema();
    // Inline, not a `$ref`: the decision schema's `$defs` are not at the root of the other tools' schemas.
    let ulid = decision["$defs"]["ulid"].clone();
    let ids = json!({"type": "array", "items": {"type": "string"}});
    let uris = |what: &str| json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "description": what});
    let page = json!({
        "limit": {"type": "integer", "minimum": 1, "description": "Page size: 50 by default, at most 500."},
        "cursor": {"type": "string", "description": "The next_cursor of the previous page."}
    });
    let next = json!({"type": ["string", "null"]});
    let budget = json!({"type": "integer", "minimum": 0, "description": "Tokens (cl100k) to fill: 4000 by default."});
    let fragments = json!({
        "type": "array",
        "items": {"type": "object", "required": ["uko_node", "detail_depth", "tokens", "content"], "properties": {
            "uko_node": {"type": "string"}, "resource_uri": {"type": ["string", "null"]},
            "detail_depth": {"type": "integer"}, "tokens": {"type": "integer"}, "content": {"type": "string"}}}
    });
    let context = object(
        &["fragments", "total_tokens", "dropped"],
        json!({"fragments": fragments, "total_tokens": {"type": "integer"}, "dropped": {"type": "integer"}}),
    );
    let metrics = json!({"type": "object", "required": ["count", "mean_confidence", "held_rate", "brier", "ece"],
        "properties": {"count": {"type": "integer"}, "mean_confidence": {"type": ["number", "null"]},
            "held_rate": {"type": ["number", "null"]}, "brier": {"type": ["number", "null"]},
            "ece": {"type": ["number", "null"]}}});
    let mut group = metrics.clone();
    group["required"].as_array_mut().expect("an array").push("key".into());
    group["properties"]["key"] = json!({"type": "string"});

    vec![
        Tool {
            name: "record_decision",
            description: "Record a decision that you made: what you chose, why, how sure you are, the options you \
                turned down, and the graph nodes you looked at (`observed`), so that later you and others can see \
                it, build on it and notice when what it rested on changes. Omit plan_id to start a new plan with a \
                prompt_definition; omit sequence to append to the plan. Returns the stored decision.",
            writes: true,
            idempotent: false,
            input: record_input(&decision),
            output: decision.clone(),
            run: record_decision,
            fields: RECORD_FIELDS,
        },
        Tool {
            name: "supersede_decision",
            description: "Say that a decision was replaced by a later one of the same plan (record the new one \
                first). The old one stays in the log, marked superseded. Recording the same link again is a no-op.",
            writes: true,
            idempotent: true,
            input: input(&["decision_id", "superseded_by"], json!({"decision_id": ulid, "superseded_by": ulid})),
            output: object(
                &["decision_id", "superseded_by", "standing_decision_id"],
                json!({"decision_id": ulid, "superseded_by": ulid, "standing_decision_id": ulid}),
            ),
            run: supersede_decision,
            fields: &["decision_id", "superseded_by"],
        },
        Tool {
            name: "get_decision",
            description: "One decision in full, when it was recorded, the ids of its children, its correction \
                chain (original first) and the decision that stands now in its place.",
            writes: false,
            idempotent: true,
            input: input(&["decision_id"], json!({"decision_id": ulid})),
            output: with_defs(
                object(
                    &["decision", "children", "correction_chain", "standing_decision_id"],
                    json!({"decision": decision, "made_at": {"type": "string", "description": "When it was recorded (RFC 3339, from its id)."},
                        "children": ids, "correction_chain": ids, "standing_decision_id": ulid,
                        "redactions": {"type": "array", "description": "Present when content of the decision was \
                            redacted: each with the fields, reason, actor and redacted_at.",
                            "items": {"type": "object"}}}),
                ),
                &decision,
            ),
            run: get_decision,
            fields: &["decision_id"],
        },
        Tool {
            name: "list_plans",
            description: "The plans in the store, the most recently changed first: each with its goal (its \
                prompt_definition's chosen option), when it started and last changed, its decision count and \
                sequence range. `query` keeps the plans whose goal holds all of its words.",
            writes: false,
            idempotent: true,
            input: input(
                &[],
                with(&page, json!({"query": {"type": "string", "description": "Words the plan's goal must hold."}})),
            ),
            output: object(
                &["plans", "next_cursor"],
                json!({"plans": {"type": "array", "items": {"type": "object",
                    "required": ["plan_id", "decisions", "first_sequence", "last_sequence"],
                    "properties": {"plan_id": ulid, "decisions": {"type": "integer"},
                        "first_sequence": {"type": "integer"}, "last_sequence": {"type": "integer"},
                        "goal": {"type": ["string", "null"]},
                        "started_at": {"type": "string", "description": "RFC 3339, from its first decision's id."},
                        "updated_at": {"type": "string", "description": "RFC 3339, from its last decision's id."}}}},
                    "next_cursor": next}),
            ),
            run: list_plans,
            fields: &["query", "limit", "cursor"],
        },
        Tool {
            name: "plan_tree",
            description: "A plan's decisions as a tree in depth-first order, each with its level and whether it \
                stands (`effective`: neither corrected nor superseded). effective_only hides the overturned ones.",
            writes: false,
            idempotent: true,
            input: input(&["plan_id"], with(&page, json!({"plan_id": ulid, "effective_only": {"type": "boolean"}}))),
            output: object(
                &["plan_id", "total", "nodes", "next_cursor"],
                json!({"plan_id": ulid, "total": {"type": "integer"}, "next_cursor": next,
                    "nodes": {"type": "array", "items": {"type": "object",
                        "required": ["decision_id", "parent_decision_id", "level", "sequence", "decision_type",
                            "chosen_option", "confidence_score", "effective"],
                        "properties": {"decision_id": ulid, "parent_decision_id": {"type": ["string", "null"]},
                            "level": {"type": "integer"}, "sequence": {"type": "integer"},
                            "decision_type": {"type": "string"}, "chosen_option": {"type": "string"},
                            "confidence_score": {"type": ["number", "null"]}, "effective": {"type": "boolean"}}}}}),
            ),
            run: plan_tree,
            fields: &["plan_id", "effective_only", "limit", "cursor"],
        },
        Tool {
            name: "get_context",
            description: "Context for working on some nodes of the code graph, within a token budget: the \
                focus's outline, then the files you are most likely to need with it (the ones it uses and that \
                use it, those that changed with it in the git history, those with the same words, its \
                directory's), best first, each by its definitions' signatures. Ask for it before you plan a \
                change. `focus` takes node URIs such as class://AuthManager, or file paths relative to the \
                ingested tree (src/auth.py means project://src/auth.py).",
            writes: false,
            idempotent: true,
            input: input(
                &["focus"],
                json!({"focus": uris("Node URIs or relative file paths."), "budget_tokens": budget,
                    "breadth": {"type": "integer", "minimum": 0, "description": "How far to walk from the focus: file hops (at most 2, the default) with the relevance ranking, node hops with the distance ranking (default 6)."},
                    "depth": {"type": ["integer", "string"], "description": "Full detail depth: a number or a level name such as SIGNATURES or FULL_SOURCE."},
                    "direction": {"type": "string", "enum": ["out", "in", "both"], "description": "Which edges to follow: both by default; out is what the focus uses, in what uses it."},
                    "ranking": {"type": "string", "enum": ["relevance", "distance"], "description": "relevance (the default): ranked files by their signatures; distance: a breadth-first walk, nearer nodes in more detail."}}),
            ),
            output: context.clone(),
            run: get_context,
            fields: &["focus", "budget_tokens", "breadth", "depth", "direction", "ranking"],
        },
        Tool {
            name: "child_context",
            description: "The skeleton of a plan's context that a sub-plan inherits: the parent's context \
                compressed around the child's focus, within a token budget.",
            writes: false,
            idempotent: true,
            input: input(
                &["plan_id", "child_focus"],
                json!({"plan_id": ulid, "child_focus": uris("The child plan's focus: node URIs."), "budget_tokens": budget}),
            ),
            output: context,
            run: child_context,
            fields: &["plan_id", "child_focus", "budget_tokens"],
        },
        Tool {
            name: "stale_decisions",
            description: "Decisions whose observed context has changed since they were made (a node's version \
                moved or the node is gone), and the decisions that build on them and are at risk through them. \
                Check before you rely on an old decision.",
            writes: false,
            idempotent: true,
            input: input(&[], with(&page, json!({"plan_id": ulid}))),
            output: object(
                &["stale", "at_risk", "next_cursor"],
                json!({"stale": {"type": "array", "items": {"type": "object", "required": ["decision_id", "resources"],
                        "properties": {"decision_id": ulid, "resources": {"type": "array", "items": {"type": "object",
                            "required": ["resource_id", "recorded_version", "current_version"],
                            "properties": {"resource_id": {"type": "string"},
                                "recorded_version": {"type": ["string", "null"]},
                                "current_version": {"type": ["string", "null"]}}}}}}},
                    "at_risk": ids, "next_cursor": next}),
            ),
            run: stale_decisions,
            fields: &["plan_id", "limit", "cursor"],
        },
        Tool {
            name: "calibration",
            description: "How well your confidence scores have matched what became of the decisions (a decision \
                holds when it was neither corrected nor superseded): Brier score and expected calibration error, \
                overall and per decision type, phase or plan.",
            writes: false,
            idempotent: true,
            input: input(
                &[],
                json!({"plan_id": ulid, "group_by": {"type": "string", "enum": ["type", "phase", "plan"]}}),
            ),
            output: object(
                &["overall", "groups"],
                json!({"overall": metrics, "groups": {"type": "array", "items": group}}),
            ),
            run: calibration,
            fields: &["plan_id", "group_by"],
        },
    ]
}

/// The decision JSON Schema that `dstore schema` prints, as a value.
fn decision_schema() -> Value {
    let mut schema: Value = serde_json::from_str(JSON_SCHEMA).expect("the decision schema is JSON");
    let map = schema.as_object_mut().expect("the decision schema is an object");
    map.remove("$schema");
    map.remove("$id");
    schema
}

const RECORD_FIELDS: &[&str] = &[
    "decision_type",
    "chosen_option",
    "plan_id",
    "parent_decision_id",
    "corrects_decision_id",
    "rationale",
    "confidence_score",
    "alternatives",
    "artifacts_produced",
    "metadata",
    "observed",
    "supersedes",
    "sequence",
];

/// `record_decision`'s input: the decision schema's definitions of the
/// fields it takes, so that the two cannot drift.
fn record_input(decision: &Value) -> Value {
    let mut properties = Map::new();
    for &field in RECORD_FIELDS {
        if let Some(p) = decision["properties"].get(field) {
            properties.insert(field.into(), p.clone());
        }
    }
    properties.insert(
        "observed".into(),
        json!({"type": "array", "items": {"type": "string"},
            "description": "URIs of the graph nodes this decision rests on; the store records their current versions as its context_snapshot."}),
    );
    properties.insert(
        "supersedes".into(),
        json!({"type": "string", "description": "A decision of the same plan that this one replaces: the decision and the link are stored together."}),
    );
    properties["plan_id"]["description"] =
        "Omitted: a new plan, whose first decision must be a prompt_definition.".into();
    properties["sequence"]["description"] = "Omitted: the plan's next.".into();
    let mut schema = input(&["decision_type", "chosen_option"], Value::Object(properties));
    schema["$defs"] = decision["$defs"].clone();
    schema
}

/// `schema` with the decision schema's `$defs` at its root, where the
/// decision's `$ref`s point.
fn with_defs(mut schema: Value, decision: &Value) -> Value {
    schema["$defs"] = decision["$defs"].clone();
    schema
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

/// An input schema: an object of these properties and no others.
fn input(required: &[&str], properties: Value) -> Value {
    let mut schema = object(required, properties);
    schema["additionalProperties"] = false.into();
    schema
}

fn with(a: &Value, b: Value) -> Value {
    let mut out = a.clone();
    for (k, v) in b.as_object().expect("an object") {
        out[k] = v.clone();
    }
    out
}

fn answer(structured: Value, text: impl Into<String>) -> Outcome<Answer> {
    Ok(Answer { structured, text: text.into() })
}

fn record_decision(stores: &Stores, args: Args) -> Outcome<Answer> {
    args.str("decision_type")?;
    args.str("chosen_option")?;
    let observed = args.strings("observed")?;
    args.opt_u32("sequence")?;
    let mut fields = args.into_map();
    fields.remove("observed");
    let insertion = stores.read(|store| store.prepare_record(fields, &observed))?;
    let stored = stores.insert(insertion)?;
    let text = format!(
        "recorded {} {} (plan {}, sequence {})",
        stored.decision_type().as_str(),
        stored.decision_id(),
        stored.plan_id(),
        stored.sequence()
    );
    answer(stored.to_json_value(), text)
}

fn supersede_decision(stores: &Stores, args: Args) -> Outcome<Answer> {
    let (old, new) = (args.decision_id("decision_id")?, args.decision_id("superseded_by")?);
    let standing = stores.write(move |store| {
        store.supersede(old, new)?;
        store.standing_decision(old).map(|d| d.decision_id())
    })?;
    answer(
        json!({"decision_id": old.to_string(), "superseded_by": new.to_string(), "standing_decision_id": standing.to_string()}),
        format!("{old} is superseded by {new}; {standing} stands"),
    )
}

fn get_decision(stores: &Stores, args: Args) -> Outcome<Answer> {
    let id = args.decision_id("decision_id")?;
    stores.read(|store| {
        let (decision, children, chain, standing, redactions) = store.read_snapshot(|store| {
            let decision = store.decision(id)?;
            let children: Vec<String> = store.children(id)?.iter().map(ToString::to_string).collect();
            let chain: Vec<String> = store.correction_chain(id)?.iter().map(|d| d.decision_id().to_string()).collect();
            let standing = store.standing_decision(id)?.decision_id().to_string();
            Ok((decision, children, chain, standing, store.redactions(id)?))
        })?;
        let text = format!(
            "{} {id}: {} ({}; {standing} stands)",
            decision.decision_type().as_str(),
            decision.chosen_option(),
            match children.len() {
                1 => "1 child".to_owned(),
                n => format!("{n} children"),
            },
        );
        let mut data = json!({"decision": decision.to_json_value(), "made_at": utc_ms(id.timestamp_ms()),
            "children": children, "correction_chain": chain, "standing_decision_id": standing});
        if !redactions.is_empty() {
            data["redactions"] = json!(redactions);
        }
        answer(data, text)
    })
}

fn list_plans(stores: &Stores, args: Args) -> Outcome<Answer> {
    let page = args.page()?;
    let words = args.opt_str("query")?.unwrap_or("").to_owned();
    let plans = stores.read(|store| store.recent_plans(&words))?;
    let total = plans.len();
    let (rows, next) = page.of(
        plans.into_iter().map(|p| {
            json!({"plan_id": p.plan_id.to_string(), "decisions": p.decisions,
                "first_sequence": p.first_sequence, "last_sequence": p.last_sequence, "goal": p.goal,
                "started_at": utc_ms(p.first_ms), "updated_at": utc_ms(p.last_ms)})
        }),
        total,
    );
    let text = format!("{} of {total} plans", rows.len());
    answer(json!({"plans": rows, "next_cursor": next}), text)
}

fn plan_tree(stores: &Stores, args: Args) -> Outcome<Answer> {
    let plan = args.plan_id("plan_id")?;
    let effective_only = args.opt_bool("effective_only")?.unwrap_or(false);
    let page = args.page()?;
    let tree = stores.read(|store| store.decision_tree_outline(plan))?;
    let view = tree.view(effective_only);
    let total = view.nodes.len();
    let (nodes, next) = page.of(
        view.nodes.iter().map(|n| {
            let d = n.decision;
            json!({
                "decision_id": d.decision_id().to_string(),
                "parent_decision_id": n.parent.map(|p| view.nodes[p].decision.decision_id().to_string()),
                "level": n.level,
                "sequence": d.sequence(),
                "decision_type": d.decision_type().as_str(),
                "chosen_option": d.chosen_option(),
                "confidence_score": d.confidence_score(),
                "effective": tree.is_effective_at(n.index),
            })
        }),
        total,
    );
    let text = format!("plan {plan}: {} of {total} decisions from position {}", nodes.len(), page.offset);
    answer(json!({"plan_id": plan.to_string(), "total": total, "nodes": nodes, "next_cursor": next}), text)
}

fn fragments_json(fragments: &[ContextFragment]) -> Vec<Value> {
    fragments
        .iter()
        .map(|f| {
            let resource = Some(f.resource_uri()).filter(|r| !r.is_empty());
            json!({"uko_node": f.uko_node(), "resource_uri": resource, "detail_depth": f.detail_depth(),
                "tokens": f.tokens(), "content": f.content()})
        })
        .collect()
}

fn context_answer(fragments: &[ContextFragment], total: usize, dropped: usize) -> Outcome<Answer> {
    let text = format!(
        "{}, {} ({dropped} left out by the budget)",
        count(fragments.len() as u64, "fragment"),
        count(total as u64, "token")
    );
    answer(json!({"fragments": fragments_json(fragments), "total_tokens": total, "dropped": dropped}), text)
}

fn get_context(stores: &Stores, args: Args) -> Outcome<Answer> {
    let focus = args.nonempty_strings("focus")?;
    let budget = budget_of(&args)?;
    let ranking = args.opt_str("ranking")?.map(str::parse::<Ranking>).transpose()?.unwrap_or(DEFAULT_RANKING);
    let mut spec = ProjectionSpec::ranked(focus, ranking)?;
    if let Some(breadth) = args.opt_u32("breadth")? {
        spec = spec.with_breadth(breadth);
    }
    if args.has("depth") {
        let depth = match args.opt_u64("depth") {
            Ok(Some(n)) => Depth::Level(u32::try_from(n).map_err(|_| Refusal::field("depth", "is too large"))?),
            _ => Depth::named(
                args.str("depth").map_err(|_| Refusal::field("depth", "must be a number or a level name"))?,
            ),
        };
        spec = spec.with_depth(depth);
    }
    if let Some(direction) = args.opt_str("direction")? {
        spec = spec.with_direction(direction.parse::<Direction>()?);
    }
    let (_, set) = stores.read(|store| store.project(&spec, &Cl100k, Some(budget)))?;
    context_answer(&set.fragments, set.total_tokens, set.dropped.len())
}

fn budget_of(args: &Args) -> Outcome<usize> {
    Ok(args.opt_u64("budget_tokens")?.map_or(DEFAULT_BUDGET, |n| usize::try_from(n).unwrap_or(usize::MAX)))
}

fn child_context(stores: &Stores, args: Args) -> Outcome<Answer> {
    let plan = args.plan_id("plan_id")?;
    let options = StoredContextOptions {
        budget: budget_of(&args)?,
        child_focus: Some(args.nonempty_strings("child_focus")?),
        ..StoredContextOptions::default()
    };
    let result = stores.read(|store| store.child_context(plan, &options))?;
    context_answer(result.skeleton_fragments(), result.skeleton_tokens(), result.dropped())
}

fn stale_decisions(stores: &Stores, args: Args) -> Outcome<Answer> {
    let plan = args.opt_plan_id("plan_id")?;
    let page = args.page()?;
    let report = stores.read(|store| store.stale(StaleOptions { plan, all: false }))?;
    let total = report.stale.len();
    let (stale, next) = page.of(
        report.stale.iter().map(|s| {
            let resources: Vec<Value> = s
                .resources
                .iter()
                .map(|r| {
                    json!({"resource_id": r.resource_id, "recorded_version": r.recorded_version,
                        "current_version": r.current_version})
                })
                .collect();
            json!({"decision_id": s.decision_id.to_string(), "resources": resources})
        }),
        total,
    );
    let at_risk: Vec<String> = report.at_risk.iter().map(|a| a.decision_id.to_string()).collect();
    let text = format!("{total} stale decisions, {} at risk through them", at_risk.len());
    answer(json!({"stale": stale, "at_risk": at_risk, "next_cursor": next}), text)
}

fn metrics_json(m: &Metrics) -> Map<String, Value> {
    let Value::Object(map) = json!({"count": m.scored, "mean_confidence": m.mean_confidence,
        "held_rate": m.share_held, "brier": m.brier, "ece": m.ece})
    else {
        unreachable!("json! of an object")
    };
    map
}

fn calibration(stores: &Stores, args: Args) -> Outcome<Answer> {
    let plan = args.opt_plan_id("plan_id")?;
    let by = args.opt_str("group_by")?.map(str::parse::<GroupBy>).transpose()?;
    let report = stores.read(|store| store.calibration(CalibrationOptions { plan, by, settled_after: 0 }))?;
    let groups: Vec<Value> = report
        .groups
        .iter()
        .map(|g| {
            let mut m = metrics_json(&g.metrics);
            m.insert("key".into(), g.key.clone().into());
            Value::Object(m)
        })
        .collect();
    let o = &report.overall;
    let text = match (o.brier, o.ece) {
        (Some(brier), Some(ece)) => format!("{} scored decisions: Brier {brier:.3}, ECE {ece:.3}", o.scored),
        _ => "no scored decisions yet".to_owned(),
    };
    answer(json!({"overall": metrics_json(o), "groups": groups}), text)
}

/// The tools that a store opened `read_only` serves.
pub fn served(read_only: bool) -> Arc<Vec<Tool>> {
    Arc::new(all().into_iter().filter(|t| !(read_only && t.writes)).collect())
}
