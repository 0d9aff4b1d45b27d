//! Steps of decision persistence round trips (`consolidated_decision.feature`, second half).
//!
//! "model_dump" round trips go through `serde_json::Value`
//! (`to_json_value`/`from_json_value`), "JSON" ones through a JSON string.
//! The same round trips through a temp-file store are in
//! `features/repository.feature`. The "plan/parent/corrected ULID" givens
//! are shared with the decision model steps (`decision.rs`).

use cucumber::{given, then, when};
use decision_store::{
    Alternative, ArtifactRef, ContextSnapshot, Decision, DecisionId, DecisionTree, DecisionType, PlanId, ResourceRef,
};

use super::{ensure, parse_confidence, StepResult, World};

fn dump_validate(d: &Decision) -> Result<Decision, String> {
    Decision::from_json_value(d.to_json_value()).map_err(|e| e.to_string())
}

#[given(regex = r"^a decision persistence context snapshot with (\d+) resources$")]
fn snapshot(w: &mut World, n: usize) -> StepResult {
    let resources = (0..n)
        .map(|i| ResourceRef::new(format!("class://Resource{i}"), Some("class".into()), None))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    w.snapshot = Some(ContextSnapshot::new(format!("sha256:{n:04}beef"), resources, None));
    Ok(())
}

#[given(regex = r#"^a decision persistence snapshot with actor state ref "([^"]*)"$"#)]
fn actor_snapshot(w: &mut World, actor: String) {
    w.snapshot = Some(ContextSnapshot::new("sha256:actor", Vec::new(), Some(actor)));
}

#[when(regex = r"^I decision persistence create a root prompt_definition with sequence (\d+)$")]
fn root(w: &mut World, seq: u32) {
    let r = Decision::builder(w.plan(), DecisionType::PromptDefinition, seq).chosen_option("plan the release").build();
    w.record(r);
}

#[when(regex = r"^I decision persistence create a full strategy_choice child at sequence (\d+)$")]
fn full_child(w: &mut World, seq: u32) -> StepResult {
    let parent = w.parent.ok_or("no parent ULID")?;
    let r = Decision::builder(w.plan(), DecisionType::StrategyChoice, seq)
        .parent(parent)
        .chosen_option("incremental rollout")
        .rationale("Smaller blast radius.")
        .confidence_score(0.8)
        .alternative(Alternative::new("big bang", Some("faster but risky".into())))
        .alternative(Alternative::new("feature flag", None))
        .alternative(Alternative::new("do nothing", Some("keeps the bug".into())))
        .metadata("turn", serde_json::json!(3))
        .build();
    w.record(r);
    Ok(())
}

#[when(regex = r"^I decision persistence create an? (implementation_choice|strategy_choice) with the snapshot$")]
fn with_snapshot(w: &mut World, t: String) -> StepResult {
    let t: DecisionType = t.parse().map_err(|e: decision_store::Error| e.to_string())?;
    let s = w.snapshot.clone().ok_or("no snapshot")?;
    let mut b = Decision::builder(w.plan(), t, 2).context_snapshot(s);
    if let Some(p) = w.parent {
        b = b.parent(p);
    }
    w.record(b.build());
    Ok(())
}

#[when(regex = r"^I decision persistence round-trip the decision through (model_dump|JSON)$")]
fn round_trip(w: &mut World, how: String) -> StepResult {
    let d = w.decision()?;
    let back = if how == "JSON" {
        let text = d.to_json();
        ensure!(!text.contains('\n'), "JSON text spans lines");
        Decision::from_json(&text).map_err(|e| e.to_string())?
    } else {
        dump_validate(d)?
    };
    w.restored = Some(back);
    Ok(())
}

#[then(regex = r"^the decision persistence restored decision should match the original$")]
fn matches(w: &mut World) -> StepResult {
    let (d, r) = (w.decision()?, w.restored()?);
    ensure!(d == r, "restored differs:\n{r:?}\n{d:?}");
    Ok(())
}

#[then(regex = r"^the decision persistence restored alternatives should have (\d+) entries$")]
fn alternatives(w: &mut World, n: usize) -> StepResult {
    let r = w.restored()?;
    ensure!(r.alternatives().len() == n, "{} alternatives", r.alternatives().len());
    ensure!(r.alternatives() == w.decision()?.alternatives(), "alternatives differ");
    Ok(())
}

#[then(regex = r"^the decision persistence restored snapshot hash should (match|be empty)$")]
fn snapshot_hash(w: &mut World, how: String) -> StepResult {
    let hash = w.restored()?.context_snapshot().hash();
    if how == "match" {
        let original = w.decision()?.context_snapshot().hash();
        ensure!(!original.is_empty() && hash == original, "{hash:?} vs {original:?}");
    } else {
        ensure!(hash.is_empty(), "hash is {hash:?}");
    }
    Ok(())
}

#[then(regex = r"^the decision persistence restored snapshot should have (\d+) resources$")]
fn snapshot_resources(w: &mut World, n: usize) -> StepResult {
    let r = w.restored()?.context_snapshot().resources();
    ensure!(r.len() == n, "{} resources", r.len());
    ensure!(r == w.decision()?.context_snapshot().resources(), "resources differ");
    Ok(())
}

#[when(regex = r"^I decision persistence create a decision with (\d+) artifacts$")]
fn with_artifacts(w: &mut World, n: usize) -> StepResult {
    let mut b = Decision::builder(w.plan(), DecisionType::ImplementationChoice, 4);
    if let Some(p) = w.parent {
        b = b.parent(p);
    }
    for i in 0..n {
        b = b.artifact(
            ArtifactRef::new(format!("src/gen_{i}.rs"), Some(format!("{i:032x}"))).map_err(|e| e.to_string())?,
        );
    }
    w.record(b.build());
    Ok(())
}

#[then(regex = r"^the decision persistence restored decision should have (\d+) artifacts$")]
fn restored_artifacts(w: &mut World, n: usize) -> StepResult {
    let r = w.restored()?.artifacts_produced();
    ensure!(r.len() == n && r == w.decision()?.artifacts_produced(), "artifacts {r:?}");
    Ok(())
}

#[then(regex = r#"^the decision persistence restored actor state ref should be "([^"]*)"$"#)]
fn actor_ref(w: &mut World, expected: String) -> StepResult {
    let got = w.restored()?.context_snapshot().actor_state_ref();
    ensure!(got == Some(expected.as_str()), "actor state ref {got:?}");
    Ok(())
}

#[when(regex = r"^I decision persistence create a correction decision$")]
fn correction(w: &mut World) -> StepResult {
    let target = w.corrected.ok_or("no corrected ULID")?;
    let r = Decision::builder(w.plan(), DecisionType::ErrorRecovery, 5).corrects(target).build();
    w.record(r);
    Ok(())
}

#[then(regex = r"^the decision persistence restored is_correction should be true$")]
fn restored_is_correction(w: &mut World) -> StepResult {
    ensure!(w.restored()?.is_correction(), "not a correction");
    Ok(())
}

#[then(regex = r"^the decision persistence restored corrects_decision_id should match$")]
fn restored_corrects(w: &mut World) -> StepResult {
    let got = w.restored()?.corrects_decision_id();
    ensure!(got.is_some() && got == w.corrected, "{got:?} vs {:?}", w.corrected);
    Ok(())
}

#[then(regex = r"^the decision persistence restored is_superseded should be true$")]
fn restored_superseded(w: &mut World) -> StepResult {
    let r = w.restored()?;
    ensure!(r.is_superseded() && r.superseded_by() == w.decision()?.superseded_by(), "{:?}", r.superseded_by());
    Ok(())
}

/// A root and a correction chain of `n` decisions under it (the original first).
pub fn correction_chain(plan: PlanId, n: usize) -> decision_store::Result<Vec<Decision>> {
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build()?;
    let mut out = vec![root.clone()];
    let first = Decision::builder(plan, DecisionType::StrategyChoice, 1).parent(root.decision_id()).build()?;
    out.push(first);
    for i in 1..n {
        let prev = out.last().expect("non-empty").decision_id();
        let d = Decision::builder(plan, DecisionType::StrategyChoice, (i + 1) as u32)
            .parent(root.decision_id())
            .corrects(prev)
            .chosen_option(format!("revision {i}"))
            .build()?;
        out.push(d);
    }
    Ok(out)
}

#[when(regex = r"^I decision persistence build a correction chain of (\d+) decisions$")]
fn build_chain(w: &mut World, n: usize) -> StepResult {
    w.originals = correction_chain(w.plan(), n).map_err(|e| e.to_string())?;
    Ok(())
}

#[when(
    regex = r"^I decision persistence (?:round-trip all decisions through model_dump|serialize and deserialize all tree nodes)$"
)]
fn round_trip_all(w: &mut World) -> StepResult {
    w.restored_all = w.originals.iter().map(dump_validate).collect::<Result<_, _>>()?;
    Ok(())
}

#[then(regex = r"^the decision persistence correction chain should be reconstructable$")]
fn chain_reconstructable(w: &mut World) -> StepResult {
    let tree = DecisionTree::from_decisions(w.restored_all.clone());
    let expected: Vec<DecisionId> = w.originals[1..].iter().map(Decision::decision_id).collect();
    for id in &expected {
        let chain: Vec<DecisionId> = tree.correction_chain(*id).iter().map(|d| d.decision_id()).collect();
        ensure!(chain == expected, "chain through {id}: {chain:?}, expected {expected:?}");
    }
    let last = *expected.last().ok_or("empty chain")?;
    let standing = tree.standing(expected[0]).map(|d| d.decision_id());
    ensure!(standing == Some(last), "the original's standing decision is {standing:?}, expected {last}");
    Ok(())
}

/// A 3-level tree: one root, two children, two grandchildren under each (7 nodes).
pub fn three_level_tree(plan: PlanId) -> decision_store::Result<Vec<Decision>> {
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).build()?;
    let mut out = vec![root.clone()];
    let mut seq = 1;
    for c in 0..2 {
        let child = Decision::builder(plan, DecisionType::StrategyChoice, seq)
            .parent(root.decision_id())
            .chosen_option(format!("branch {c}"))
            .build()?;
        seq += 1;
        out.push(child.clone());
        for g in 0..2 {
            out.push(
                Decision::builder(plan, DecisionType::ToolInvocation, seq)
                    .parent(child.decision_id())
                    .chosen_option(format!("step {c}.{g}"))
                    .build()?,
            );
            seq += 1;
        }
    }
    Ok(out)
}

#[when(regex = r"^I decision persistence build a 3-level decision tree$")]
fn build_tree(w: &mut World) -> StepResult {
    w.originals = three_level_tree(w.plan()).map_err(|e| e.to_string())?;
    Ok(())
}

#[then(regex = r"^the decision persistence tree parent links should be intact$")]
fn parent_links(w: &mut World) -> StepResult {
    ensure!(w.restored_all.len() == w.originals.len(), "{} restored", w.restored_all.len());
    for (o, r) in w.originals.iter().zip(&w.restored_all) {
        ensure!(o.parent_decision_id() == r.parent_decision_id(), "parent of {} changed", o.decision_id());
    }
    let tree = DecisionTree::from_decisions(w.restored_all.clone());
    ensure!(
        tree.roots().len() == 1 && tree.orphans().is_empty(),
        "roots {}, orphans {}",
        tree.roots().len(),
        tree.orphans().len()
    );
    ensure!(tree.max_depth() == 2, "max depth {}", tree.max_depth());
    Ok(())
}

#[then(regex = r"^the decision persistence tree should have (\d+) nodes$")]
fn tree_nodes(w: &mut World, n: usize) -> StepResult {
    let tree = DecisionTree::from_decisions(w.restored_all.clone());
    let root = tree.roots()[0].decision_id();
    ensure!(
        tree.len() == n && tree.subtree(root).len() == n,
        "{} nodes, {} reachable",
        tree.len(),
        tree.subtree(root).len()
    );
    Ok(())
}

#[when(regex = r"^I decision persistence create a decision with (\d+) downstream (plan )?IDs$")]
fn downstream(w: &mut World, n: usize, plans: String) {
    let mut b = Decision::builder(w.plan(), DecisionType::SubplanSpawn, 3);
    for _ in 0..n {
        b = if plans.is_empty() {
            b.downstream_decision(DecisionId::generate())
        } else {
            b.downstream_plan(PlanId::generate())
        };
    }
    w.record(b.build());
}

#[then(regex = r"^the decision persistence restored should have (\d+) downstream (plan )?IDs$")]
fn restored_downstream(w: &mut World, n: usize, plans: String) -> StepResult {
    let (r, d) = (w.restored()?, w.decision()?);
    if plans.is_empty() {
        ensure!(
            r.downstream_decision_ids().len() == n && r.downstream_decision_ids() == d.downstream_decision_ids(),
            "ids differ"
        );
    } else {
        ensure!(
            r.downstream_plan_ids().len() == n && r.downstream_plan_ids() == d.downstream_plan_ids(),
            "plan ids differ"
        );
    }
    Ok(())
}

#[when(regex = r"^I decision persistence create a decision with no alternatives$")]
fn no_alternatives(w: &mut World) {
    let r = Decision::builder(w.plan(), DecisionType::ToolInvocation, 1).build();
    w.record(r);
}

#[then(regex = r"^the decision persistence restored confidence should be (None|[0-9.]+)$")]
fn restored_confidence(w: &mut World, c: String) -> StepResult {
    let expected = parse_confidence(&c)?;
    let got = w.restored()?.confidence_score();
    ensure!(got == expected, "confidence {got:?}");
    Ok(())
}

#[when(regex = r"^I decision persistence create and round-trip all decision types$")]
fn all_types(w: &mut World) -> StepResult {
    w.originals.clear();
    w.restored_all.clear();
    for (i, t) in DecisionType::ALL.into_iter().enumerate() {
        let d = Decision::builder(w.plan(), t, i as u32).build().map_err(|e| format!("{t}: {e}"))?;
        let back = dump_validate(&d).map_err(|e| format!("{t}: {e}"))?;
        w.originals.push(d);
        w.restored_all.push(back);
    }
    Ok(())
}

#[then(regex = r"^all decision persistence round-trips should succeed$")]
fn all_succeeded(w: &mut World) -> StepResult {
    ensure!(w.originals.len() == 11, "{} types round-tripped", w.originals.len());
    ensure!(w.originals == w.restored_all, "some round trip changed a decision");
    Ok(())
}

#[when(regex = r"^I decision persistence create a decision with a (\d+) character rationale$")]
fn long_rationale(w: &mut World, n: usize) {
    let text: String = "Because ünïcode ✓ and plain words. ".chars().cycle().take(n).collect();
    let r = Decision::builder(w.plan(), DecisionType::StrategyChoice, 1).rationale(text).build();
    w.record(r);
}

#[then(regex = r"^the decision persistence restored rationale length should be (\d+)$")]
fn rationale_len(w: &mut World, n: usize) -> StepResult {
    let r = w.restored()?.rationale();
    ensure!(r.chars().count() == n && r == w.decision()?.rationale(), "rationale of {} chars", r.chars().count());
    Ok(())
}
