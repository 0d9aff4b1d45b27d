//! What several suites of the library share: tests that run on a file and on a server.

/// `Store::insert_each` (a group commit): each item stored or refused on its
/// own, in order, sequences assigned inside the write, nothing of a refused
/// item left behind, and the log whole afterwards.
pub fn a_group_commit_stores_each_decision_or_says_why_not(store: &mut decision_store::Store) {
    use decision_store::store::Insertion;
    use decision_store::store::Placement::{AsGiven, Next};
    use decision_store::{Decision, DecisionId, DecisionType, Error, PlanId};

    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).chosen_option("root").build().unwrap();
    let child = |n: &str| {
        Decision::builder(plan, DecisionType::StrategyChoice, 0)
            .parent(root.decision_id())
            .chosen_option(n)
            .build()
            .unwrap()
    };
    let (a, b, c) = (child("a"), child("b"), child("c"));
    let orphan =
        Decision::builder(plan, DecisionType::StrategyChoice, 0).parent(DecisionId::generate()).build().unwrap();
    let at_seven = Decision::builder(plan, DecisionType::ToolInvocation, 7).parent(root.decision_id()).build().unwrap();
    let taken_seven =
        Decision::builder(plan, DecisionType::ToolInvocation, 7).parent(root.decision_id()).build().unwrap();
    // A child of a refused item is refused too.
    let orphans_child =
        Decision::builder(plan, DecisionType::ToolInvocation, 0).parent(orphan.decision_id()).build().unwrap();
    let items: Vec<Insertion> = vec![
        (root.clone(), Next),
        (a.clone(), Next),
        (orphan, Next),
        (at_seven.clone(), AsGiven),
        (b.clone(), Next),
        (a.clone(), Next),
        (taken_seven, AsGiven),
        (orphans_child, Next),
        (c.clone(), Next),
    ]
    .into_iter()
    .map(Insertion::from)
    .collect();
    let outcomes = store.insert_each(&items).unwrap();
    assert_eq!(outcomes.len(), items.len());
    let sequence = |i: usize| outcomes[i].as_ref().map(|d| d.sequence()).unwrap_or_else(|e| panic!("item {i}: {e}"));
    assert_eq!([sequence(0), sequence(1), sequence(3), sequence(4), sequence(8)], [0, 1, 7, 8, 9]);
    assert!(
        matches!(&outcomes[2], Err(Error::MissingReference { field: "parent_decision_id", .. })),
        "{:?}",
        outcomes[2]
    );
    assert!(matches!(&outcomes[5], Err(Error::DuplicateDecision(id)) if *id == a.decision_id().to_string()));
    assert!(matches!(&outcomes[6], Err(Error::DuplicateSequence { sequence: 7, .. })), "{:?}", outcomes[6]);
    assert!(matches!(&outcomes[7], Err(Error::MissingReference { .. })), "{:?}", outcomes[7]);
    let stored: Vec<Decision> = store.plan_decisions(plan).unwrap();
    let expect: Vec<Decision> = [0, 1, 3, 4, 8].iter().map(|&i| outcomes[i].as_ref().unwrap().clone()).collect();
    assert_eq!(stored, expect);
    assert_eq!(stored[1].decision_id(), a.decision_id());
    assert_eq!(stored[3].chosen_option(), b.chosen_option());
    assert_eq!(store.check().unwrap(), []);
    // The next group continues the chain and the sequences.
    let d = child("d");
    let more = store.insert_each(&[(d.clone(), Next).into()]).unwrap();
    assert_eq!(more[0].as_ref().unwrap().sequence(), 10);
    assert_eq!(store.plans().unwrap().iter().find(|p| p.plan_id == plan).unwrap().decisions, 6);
    assert_eq!(store.check().unwrap(), []);
    assert!(store.insert_each(&[]).unwrap().is_empty());
    // A decision that replaces another is stored with its link, or not at all.
    let e = child("e");
    let replaced =
        store.insert_each(&[Insertion { decision: e.clone(), placement: Next, supersedes: Some(c.decision_id()) }]);
    assert_eq!(replaced.unwrap()[0].as_ref().unwrap().sequence(), 11);
    assert_eq!(store.decision(c.decision_id()).unwrap().superseded_by(), Some(e.decision_id()));
    let f = child("f");
    let again = store
        .insert_each(&[Insertion { decision: f.clone(), placement: Next, supersedes: Some(c.decision_id()) }])
        .unwrap();
    assert!(matches!(&again[0], Err(Error::AlreadySuperseded { .. })), "{:?}", again[0]);
    assert!(store.get(f.decision_id()).unwrap().is_none(), "a refused replacement stores nothing");
    assert_eq!(store.check().unwrap(), []);
}
