//! Property tests: arbitrary valid decisions and plans survive JSON, the
//! store and export/import unchanged, and every broken record is refused
//! with an error naming its field. Uses the crate's own `testing` module.

use decision_store::store::PreparedDecision;
use decision_store::testing::{
    self, assert_exchange_round_trip, assert_json_round_trip, assert_store_round_trip, TempStore,
};
use decision_store::{Decision, DecisionTree, Error};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_decision_survives_json(d in testing::decision()) {
        assert_json_round_trip(&d).map_err(|m| TestCaseError::fail(m.to_string()))?;
        let value = Decision::from_json_value(d.to_json_value()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(value, d);
    }

    #[test]
    fn every_broken_record_is_refused_naming_its_field((json, field) in testing::invalid_decision()) {
        let text = json.to_string();
        match Decision::from_json(&text) {
            Ok(d) => prop_assert!(false, "accepted {field} mutation: {d:?}"),
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(field), "error for {field} does not name it: {msg}");
                prop_assert!(matches!(e, Error::Validation { .. } | Error::Json(_)), "unexpected kind {e:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_plan_survives_the_store_and_exchange(plan in testing::plan(40)) {
        assert_store_round_trip(&plan).map_err(|m| TestCaseError::fail(m.to_string()))?;
        assert_exchange_round_trip(&plan).map_err(|m| TestCaseError::fail(m.to_string()))?;
    }

    #[test]
    fn generated_plans_are_single_trees_whose_history_resolves(plan in testing::plan(60)) {
        let tree = DecisionTree::from_decisions(plan.clone());
        prop_assert_eq!(tree.roots().len(), 1);
        prop_assert!(tree.orphans().is_empty());
        for d in &plan {
            let standing = tree.standing(d.decision_id());
            prop_assert!(standing.is_some(), "history of {} loops", d.decision_id());
            prop_assert!(tree.is_effective(standing.unwrap().decision_id()));
            prop_assert!(tree.correction_chain(d.decision_id()).iter().any(|c| c.decision_id() == d.decision_id()));
        }
    }
}

#[test]
fn a_mismatch_names_the_field_and_both_values() {
    let plan = testing::PlanBuilder::new().root("goal").build().unwrap();
    let d = &plan.decisions()[0];
    let changed = d.to_builder().rationale("edited").build().unwrap();
    let (field, expected, actual) = testing::first_difference(&d.to_json_value(), &changed.to_json_value()).unwrap();
    assert_eq!(field, "rationale");
    assert_eq!(expected, serde_json::json!(""));
    assert_eq!(actual, serde_json::json!("edited"));
}

#[test]
fn a_temp_store_is_kept_when_its_test_fails_and_removed_otherwise() {
    let kept = std::panic::catch_unwind(|| {
        let temp = testing::TempStore::new().unwrap().keep_on_failure();
        let path = temp.path().to_owned();
        std::panic::panic_any(path);
    })
    .unwrap_err();
    let path = kept.downcast_ref::<std::path::PathBuf>().unwrap().clone();
    assert!(path.exists(), "a failed test's store was removed");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();

    let quiet = std::panic::catch_unwind(|| {
        let temp = testing::TempStore::new().unwrap();
        std::panic::panic_any(temp.path().to_owned());
    })
    .unwrap_err();
    assert!(!quiet.downcast_ref::<std::path::PathBuf>().unwrap().exists(), "kept without being asked");
}

#[test]
fn store_mismatches_name_the_decision_field_and_values() {
    let plan = testing::PlanBuilder::new()
        .root("goal")
        .child("step", "goal", decision_store::DecisionType::ToolInvocation)
        .build()
        .unwrap();
    let mut old = testing::TempStore::new().unwrap();
    old.store().unwrap().insert_many(plan.decisions()).unwrap();
    old.close();
    let mut expected = plan.decisions().to_vec();
    expected[1] = expected[1].to_builder().confidence_score(0.5).build().unwrap();
    let m = testing::check_upgrade(old.path(), &expected).unwrap_err();
    assert_eq!(m.route, "upgrade");
    assert_eq!(m.decision_id, Some(plan.id("step").to_string()));
    assert_eq!(m.field, "confidence_score");
    assert_eq!((m.expected.clone(), m.actual.clone()), (serde_json::json!(0.5), serde_json::Value::Null));
    assert_eq!(
        m.to_string(),
        format!(
            "upgrade round trip of decision {}: field `confidence_score` differs: expected 0.5, got null",
            plan.id("step")
        )
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Rows prepared on another thread ([`PreparedDecision`]) are stored
    /// exactly as rows prepared by the writer: same digest, same export.
    #[test]
    fn prepared_decisions_are_stored_as_plain_ones(plan in testing::plan(40)) {
        let fail = |e: Error| TestCaseError::fail(e.to_string());
        let (mut plain, mut prepared) = (TempStore::new().map_err(fail)?, TempStore::new().map_err(fail)?);
        let n = plain.store().map_err(fail)?.try_insert_many(plan.iter().map(Ok)).map_err(fail)?;
        let mut half = 0;
        let items = plan.iter().cloned().map(|d| {
            half += 1;
            // Every other one prepared: a batch may mix both, as the Python writer's does.
            Ok(if half % 2 == 0 { PreparedDecision::new(d) } else { d.into() })
        });
        prop_assert_eq!(prepared.store().map_err(fail)?.try_insert_prepared(items).map_err(fail)?, n);
        let export = |t: &mut TempStore| -> Result<Vec<u8>, TestCaseError> {
            let mut out = Vec::new();
            t.store().map_err(fail)?.export_decisions(None, &mut out).map_err(fail)?;
            Ok(out)
        };
        prop_assert_eq!(export(&mut plain)?, export(&mut prepared)?);
        prop_assert_eq!(plain.store().map_err(fail)?.digest().map_err(fail)?, prepared.store().map_err(fail)?.digest().map_err(fail)?);
    }

    /// The tree's view (all, or only what stands) agrees with a direct
    /// reading of the parent links: each shown decision's parent is its
    /// nearest shown ancestor, children in sequence order.
    #[test]
    fn tree_views_follow_the_nearest_shown_ancestor(plan in testing::plan(60)) {
        let tree = DecisionTree::from_decisions(plan.clone());
        for effective_only in [false, true] {
            let view = tree.view(effective_only);
            let shown = |d: &Decision| !effective_only || tree.is_effective(d.decision_id());
            prop_assert_eq!(view.nodes.len(), plan.iter().filter(|d| shown(d)).count());
            for (i, n) in view.nodes.iter().enumerate() {
                let mut up = tree.parent(n.decision.decision_id());
                while let Some(p) = up.filter(|p| !shown(p)) {
                    up = tree.parent(p.decision_id());
                }
                let parent = n.parent.map(|p| view.nodes[p].decision.decision_id());
                prop_assert_eq!(parent, up.map(Decision::decision_id));
                prop_assert_eq!(n.level, n.parent.map_or(0, |p| view.nodes[p].level + 1));
                let kids: Vec<_> = view.nodes[i + 1..].iter().filter(|k| k.parent == Some(i)).collect();
                prop_assert_eq!(kids.len(), n.children);
                prop_assert!(kids.windows(2).all(|w| w[0].decision.sequence() < w[1].decision.sequence()));
            }
        }
    }
}
