//! Steps of the decision model (`consolidated_decision.feature`, first half).
//!
//! Python wording mapped to Rust: "the DecisionType enum" is
//! `DecisionType::ALL`; "a decision validation error" is
//! `Error::Validation` (the error names the field); "None" is `Option::None`;
//! "model_dump"/"model_validate" are `to_json_value`/`from_json_value`.

use cucumber::{given, then, when};
use decision_store::{
    Alternative, ArtifactRef, ContextSnapshot, Decision, DecisionId, DecisionType, Error, ResourceRef, EXECUTE_TYPES,
    STRATEGIZE_TYPES,
};

use super::{ensure, parse_bool, parse_confidence, StepResult, World};

fn dtype(s: &str) -> Result<DecisionType, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

#[then(regex = r"^the DecisionType enum should have exactly (\d+) members$")]
fn enum_members(_w: &mut World, n: usize) -> StepResult {
    let mut names: Vec<&str> = DecisionType::ALL.iter().map(|t| t.as_str()).collect();
    names.sort();
    names.dedup();
    ensure!(
        DecisionType::ALL.len() == n && names.len() == n,
        "{} types, {} distinct names",
        DecisionType::ALL.len(),
        names.len()
    );
    Ok(())
}

fn phase_set(name: &str) -> &'static [DecisionType] {
    if name == "STRATEGIZE" {
        &STRATEGIZE_TYPES
    } else {
        &EXECUTE_TYPES
    }
}

#[then(regex = r#"^(STRATEGIZE|EXECUTE)_TYPES should contain "(\w+)"$"#)]
fn set_contains(_w: &mut World, set: String, t: String) -> StepResult {
    let t = dtype(&t)?;
    ensure!(phase_set(&set).contains(&t), "{set}_TYPES lacks {t}");
    let by_method = if set == "STRATEGIZE" { t.is_strategize_type() } else { t.is_execute_type() };
    ensure!(by_method, "the method disagrees with {set}_TYPES for {t}");
    Ok(())
}

#[then(regex = r"^(STRATEGIZE|EXECUTE)_TYPES should have exactly (\d+) members$")]
fn set_size(_w: &mut World, set: String, n: usize) -> StepResult {
    let members = phase_set(&set);
    ensure!(members.len() == n, "{set}_TYPES has {}", members.len());
    let by_method = DecisionType::ALL
        .iter()
        .filter(|t| if set == "STRATEGIZE" { t.is_strategize_type() } else { t.is_execute_type() })
        .count();
    ensure!(by_method == n, "{by_method} types answer true for {set}");
    Ok(())
}

#[given(regex = r"^a (?:valid|decision persistence) plan ULID$")]
fn plan(w: &mut World) {
    w.plan();
}

#[given(regex = r"^a (?:valid parent decision|decision persistence parent) ULID$")]
fn parent(w: &mut World) {
    w.parent = Some(DecisionId::generate());
}

#[given(regex = r"^a (?:valid|decision persistence) corrected decision ULID$")]
fn corrected(w: &mut World) {
    w.corrected = Some(DecisionId::generate());
}

#[when(regex = r#"^I create an? "?(\w+)"? decision with sequence (\d+)( and a parent)?$"#)]
fn create_typed(w: &mut World, t: String, seq: u32, with_parent: String) -> StepResult {
    let mut b = Decision::builder(w.plan(), dtype(&t)?, seq);
    if !with_parent.is_empty() {
        b = b.parent(w.parent.ok_or("no parent ULID was given")?);
    }
    w.record(b.build());
    Ok(())
}

#[when(regex = r#"^I create a decision of type "(\w+)"$"#)]
fn create_of_type(w: &mut World, t: String) -> StepResult {
    let r = Decision::builder(w.plan(), dtype(&t)?, 0).build();
    w.record(r);
    Ok(())
}

#[when(regex = r#"^I try to create a decision with (plan_id|parent_decision_id|superseded_by) "([^"]*)"$"#)]
fn create_with_bad_id(w: &mut World, field: String, value: String) {
    let b = Decision::builder(w.plan(), DecisionType::StrategyChoice, 1);
    let b = match field.as_str() {
        "plan_id" => b.plan_id(value),
        "parent_decision_id" => b.parent(value),
        _ => b.superseded_by(value),
    };
    w.record(b.build());
}

#[when(regex = r#"^I try to create a decision with corrects_decision_id ULID "([^"]*)"$"#)]
fn create_with_bad_corrects(w: &mut World, value: String) {
    let r = Decision::builder(w.plan(), DecisionType::StrategyChoice, 1).corrects(value).build();
    w.record(r);
}

#[when(regex = r"^I try to create a prompt_definition with a parent$")]
fn prompt_with_parent(w: &mut World) -> StepResult {
    let parent = w.parent.ok_or("no parent ULID was given")?;
    let r = Decision::builder(w.plan(), DecisionType::PromptDefinition, 0).parent(parent).build();
    w.record(r);
    Ok(())
}

#[then(regex = r"^a decision validation error should be raised$")]
fn validation_error(w: &mut World) -> StepResult {
    ensure!(w.decision.is_none(), "a decision was created: {:?}", w.decision);
    ensure!(matches!(w.error()?, Error::Validation { .. }), "not a validation error: {:?}", w.error);
    Ok(())
}

#[then(regex = r#"^the decision error should mention "([^"]*)"$"#)]
fn error_mentions(w: &mut World, text: String) -> StepResult {
    let msg = w.error()?.to_string();
    ensure!(msg.contains(&text), "{msg:?} does not mention {text:?}");
    Ok(())
}

#[when(regex = r"^I (?:try to |decision persistence )?create a decision with confidence(?: score)? (None|-?[0-9.]+)$")]
fn create_with_confidence(w: &mut World, score: String) -> StepResult {
    let score = parse_confidence(&score)?;
    let r = Decision::builder(w.plan(), DecisionType::StrategyChoice, 1).confidence_score(score).build();
    w.record(r);
    Ok(())
}

#[then(regex = r"^the decision should be created successfully$")]
fn created(w: &mut World) -> StepResult {
    let d = w.decision()?;
    ensure!(w.error.is_none(), "an error was raised too");
    // A created decision is valid by construction: decoding its JSON must accept it.
    let again = Decision::from_json_value(d.to_json_value()).map_err(|e| e.to_string())?;
    ensure!(&again == d, "the created decision does not survive its own validation");
    Ok(())
}

#[then(regex = r"^the decision should (not )?be a root decision$")]
fn root(w: &mut World, not: String) -> StepResult {
    let d = w.decision()?;
    ensure!(d.is_root() == not.is_empty(), "is_root is {}", d.is_root());
    ensure!(d.parent_decision_id().is_none() == not.is_empty(), "parent is {:?}", d.parent_decision_id());
    Ok(())
}

#[then(regex = r"^the decision should have a valid ULID as decision_id$")]
fn valid_ulid(w: &mut World) -> StepResult {
    let text = w.decision()?.decision_id().to_string();
    ensure!(text.len() == 26, "{text} is not 26 characters");
    DecisionId::parse(&text).map_err(|e| e.to_string())?;
    Ok(())
}

#[then(regex = r#"^the decision type should be "(\w+)"$"#)]
fn type_is(w: &mut World, t: String) -> StepResult {
    let d = w.decision()?;
    ensure!(d.decision_type().as_str() == t, "type is {}", d.decision_type());
    ensure!(d.to_json_value()["decision_type"] == t.as_str(), "wire name differs");
    Ok(())
}

#[then(
    regex = r"^the decision (is_strategize_type|is_execute_type|is_any_phase_type|is_correction|is_superseded) should be (true|false)$"
)]
fn flag(w: &mut World, which: String, expected: String) -> StepResult {
    let d = w.decision()?;
    let actual = match which.as_str() {
        "is_strategize_type" => d.is_strategize_type(),
        "is_execute_type" => d.is_execute_type(),
        "is_any_phase_type" => d.is_any_phase_type(),
        "is_correction" => d.is_correction(),
        _ => d.is_superseded(),
    };
    ensure!(actual == parse_bool(&expected), "{which} is {actual}");
    Ok(())
}

#[then(regex = r"^the decision confidence score should be (None|[0-9.]+)$")]
fn confidence_is(w: &mut World, expected: String) -> StepResult {
    let actual = w.decision()?.confidence_score();
    let expected = parse_confidence(&expected)?;
    ensure!(actual == expected, "confidence is {actual:?}");
    Ok(())
}

#[when(regex = r"^I create a correction decision$")]
fn create_correction(w: &mut World) -> StepResult {
    let target = w.corrected.ok_or("no corrected ULID was given")?;
    let r = Decision::builder(w.plan(), DecisionType::ErrorRecovery, 2).corrects(target).build();
    ensure!(r.as_ref().map_or(true, |d| d.corrects_decision_id() == Some(target)), "wrong corrected id");
    w.record(r);
    Ok(())
}

#[when(regex = r"^I try to create a decision with is_correction true but no corrects_decision_id$")]
fn correction_without_target(w: &mut World) {
    let r = Decision::builder(w.plan(), DecisionType::ErrorRecovery, 2).is_correction(true).build();
    w.record(r);
}

#[when(regex = r"^I try to create a decision with corrects_decision_id but is_correction false$")]
fn target_without_correction(w: &mut World) -> StepResult {
    let target = w.corrected.ok_or("no corrected ULID was given")?;
    let r = Decision::builder(w.plan(), DecisionType::ErrorRecovery, 2)
        .corrects_decision_id(Some(target.to_string()))
        .is_correction(false)
        .build();
    w.record(r);
    Ok(())
}

#[when(
    regex = r"^I (?:create a decision that is superseded|decision persistence create a decision superseded by another)$"
)]
fn create_superseded(w: &mut World) {
    let r = Decision::builder(w.plan(), DecisionType::StrategyChoice, 1).superseded_by(DecisionId::generate()).build();
    w.record(r);
}

#[when(regex = r"^I call with_superseded_by on the decision$")]
fn call_with_superseded_by(w: &mut World) -> StepResult {
    let copy = w.decision()?.with_superseded_by(DecisionId::generate()).map_err(|e| e.to_string())?;
    w.copy = Some(copy);
    Ok(())
}

#[then(regex = r"^the original decision should not be superseded$")]
fn original_not_superseded(w: &mut World) -> StepResult {
    let d = w.decision()?;
    ensure!(!d.is_superseded() && d.superseded_by().is_none(), "the original changed: {:?}", d.superseded_by());
    Ok(())
}

#[then(regex = r"^the superseded copy should be superseded$")]
fn copy_superseded(w: &mut World) -> StepResult {
    let copy = w.copy.as_ref().ok_or("no copy was made")?;
    let original = w.decision()?;
    ensure!(copy.is_superseded(), "the copy is not superseded");
    ensure!(copy.decision_id() == original.decision_id(), "the copy is another decision");
    let by = copy.superseded_by().ok_or("the copy has no superseding id")?;
    ensure!(original.with_superseded_by(by).ok().as_ref() == Some(copy), "the copy differs in more than superseded_by");
    Ok(())
}

#[given(regex = r"^a context snapshot with hash and resources$")]
fn snapshot(w: &mut World) -> StepResult {
    let resources = vec![
        ResourceRef::new("class://AuthManager", Some("class".into()), Some("v3".into())).map_err(|e| e.to_string())?,
        ResourceRef::new("project://src/auth.py", None, None).map_err(|e| e.to_string())?,
    ];
    w.snapshot = Some(ContextSnapshot::new("sha256:9f2c1e", resources, None));
    Ok(())
}

#[when(regex = r"^I create a decision with the context snapshot$")]
fn create_with_snapshot(w: &mut World) -> StepResult {
    let s = w.snapshot.clone().ok_or("no snapshot was given")?;
    let r = Decision::builder(w.plan(), DecisionType::ResourceSelection, 1).context_snapshot(s).build();
    w.record(r);
    Ok(())
}

#[then(regex = r"^the decision context snapshot hash should (not )?be empty$")]
fn snapshot_hash(w: &mut World, not: String) -> StepResult {
    let hash = w.decision()?.context_snapshot().hash();
    ensure!(hash.is_empty() == not.is_empty(), "hash is {hash:?}");
    Ok(())
}

#[then(regex = r"^the decision context snapshot should have resources$")]
fn snapshot_resources(w: &mut World) -> StepResult {
    let expected = w.snapshot.as_ref().ok_or("no snapshot was given")?.resources();
    let actual = w.decision()?.context_snapshot().resources();
    ensure!(!actual.is_empty() && actual == expected, "resources are {actual:?}");
    Ok(())
}

#[when(regex = r"^I try to create a ResourceRef with empty resource_id$")]
fn empty_resource(w: &mut World) {
    w.decision = None;
    w.error = ResourceRef::new("", None, None).err();
}

#[when(regex = r"^I try to create an ArtifactRef with empty artifact_path$")]
fn empty_artifact(w: &mut World) {
    w.decision = None;
    w.error = ArtifactRef::new("", None).err();
}

#[when(regex = r"^I create a decision with artifacts$")]
fn create_with_artifacts(w: &mut World) -> StepResult {
    let a = ArtifactRef::new("src/auth.rs", Some("sha256:01".into())).map_err(|e| e.to_string())?;
    let b = ArtifactRef::new("tests/auth.rs", None).map_err(|e| e.to_string())?;
    let r = Decision::builder(w.plan(), DecisionType::ImplementationChoice, 3).artifact(a).artifact(b).build();
    w.record(r);
    Ok(())
}

#[then(regex = r"^the decision should have (\d+) artifacts produced$")]
fn artifacts_count(w: &mut World, n: usize) -> StepResult {
    let got = w.decision()?.artifacts_produced().len();
    ensure!(got == n, "{got} artifacts");
    Ok(())
}

/// A decision with every field set, for round trips.
pub fn fully_populated(plan: decision_store::PlanId, parent: DecisionId) -> decision_store::Result<Decision> {
    Decision::builder(plan, DecisionType::StrategyChoice, 7)
        .parent(parent)
        .chosen_option("use a write-ahead log")
        .rationale("Readers must not block the single writer; WAL gives that with one file.")
        .confidence_score(0.72)
        .alternative(Alternative::new("rollback journal", Some("simpler, but readers block".into())))
        .alternative(Alternative::new("separate files per plan", None))
        .alternative(Alternative::new("an external server", Some("not embedded".into())))
        .context_snapshot(ContextSnapshot::new(
            "sha256:abc123",
            vec![ResourceRef::new("class://Store", Some("class".into()), Some("v2".into()))?],
            Some("checkpoint://actor/7".into()),
        ))
        .artifact(ArtifactRef::new("src/store.rs", Some("sha256:ff".into()))?)
        .corrects(DecisionId::generate())
        .superseded_by(DecisionId::generate())
        .downstream_decision(DecisionId::generate())
        .downstream_plan(decision_store::PlanId::generate())
        .metadata("agent", serde_json::json!("planner-1"))
        .metadata("nested", serde_json::json!({"k": [1, 2, {"x": null}], "unicode": "ü ✓"}))
        .build()
}

#[when(regex = r"^I create a fully populated decision$")]
fn create_full(w: &mut World) {
    let r = fully_populated(w.plan(), DecisionId::generate());
    w.record(r);
}

#[then(regex = r"^the decision should round-trip through model_dump and model_validate$")]
fn full_round_trip(w: &mut World) -> StepResult {
    let d = w.decision()?;
    let dumped = d.to_json_value();
    let back = Decision::from_json_value(dumped.clone()).map_err(|e| e.to_string())?;
    ensure!(&back == d, "decoded decision differs:\n{back:?}\n{d:?}");
    ensure!(back.to_json_value() == dumped, "dump of the decoded decision differs");
    ensure!(dumped.as_object().map_or(0, |o| o.len()) == 17, "not all 17 fields were dumped");
    Ok(())
}

#[then(regex = r#"^as_cli_dict should contain key "(\w+)"$"#)]
fn cli_dict(w: &mut World, key: String) -> StepResult {
    let d = w.decision()?;
    let m = d.as_cli_dict();
    let v = m.get(&key).ok_or_else(|| format!("no key {key} in {m:?}"))?;
    let expected = match key.as_str() {
        "decision_id" => serde_json::json!(d.decision_id().to_string()),
        "type" => serde_json::json!(d.decision_type().as_str()),
        "confidence" => serde_json::json!(d.confidence_score()),
        "parent" => serde_json::json!(d.parent_decision_id().map(|p| p.to_string())),
        _ => v.clone(),
    };
    ensure!(*v == expected, "{key} is {v}, expected {expected}");
    Ok(())
}
