//! What a downstream project's suite looks like: an agent framework that
//! records its steps with decision-store proves they come back unchanged.
//! Public API only, with `features = ["test-support"]`.

use decision_store::testing::{self, PlanBuilder};
use decision_store::{DecisionType::*, Store};
use proptest::prelude::*;

#[test]
fn our_planner_s_history_survives_json_the_store_and_exchange() {
    let plan = PlanBuilder::new()
        .root("answer the ticket")
        .child("search docs", "answer the ticket", ToolInvocation)
        .correction("search the changelog", "search docs")
        .child("draft reply", "answer the ticket", ImplementationChoice)
        .child("send reply", "answer the ticket", ToolInvocation)
        .supersede("draft reply", "send reply")
        .build()
        .unwrap();
    testing::assert_store_round_trip(plan.decisions()).unwrap();
    testing::assert_exchange_round_trip(plan.decisions()).unwrap();
    let mut temp = testing::TempStore::new().unwrap();
    temp.store().unwrap().insert_many(plan.decisions()).unwrap();
    let store: &Store = temp.reopen().unwrap();
    assert_eq!(store.standing_decision(plan.id("search docs")).unwrap().decision_id(), plan.id("search the changelog"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn any_plan_we_could_write_round_trips(plan in testing::plan(25)) {
        testing::assert_store_round_trip(&plan).map_err(|m| TestCaseError::fail(m.to_string()))?;
    }
}
