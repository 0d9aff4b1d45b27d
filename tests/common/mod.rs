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

/// Redaction (`Store::redact`): the fields hold the marker, the entry says
/// who, why and when, every anchor taken before still verifies, `check`
/// passes, export carries the marker, and a copy into `copy` (empty) has
/// the same digest and checks clean. What cannot be redacted is refused.
pub fn a_redaction_removes_content_and_keeps_the_log_verifiable(
    store: &mut decision_store::Store,
    copy: &mut decision_store::Store,
) {
    use decision_store::decision::{Alternative, ArtifactRef};
    use decision_store::store::REDACTED;
    use decision_store::{Decision, DecisionType, Error, PlanId};

    const SECRET: &str = "sk-live-4f9a0c51e2b7";
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).chosen_option("ship it").build().unwrap();
    let leaky = Decision::builder(plan, DecisionType::ToolInvocation, 1)
        .parent(root.decision_id())
        .chosen_option("call the billing API")
        .rationale(format!("authenticated with {SECRET}"))
        .alternative(Alternative::new(format!("curl -H 'key: {SECRET}'"), Some(format!("{SECRET} again"))))
        .artifact(ArtifactRef::new(format!("/tmp/{SECRET}.log"), None).unwrap())
        .metadata("token", serde_json::json!(SECRET))
        .build()
        .unwrap();
    let later = Decision::builder(plan, DecisionType::ValidationResponse, 2)
        .parent(leaky.decision_id())
        .chosen_option("it answered")
        .build()
        .unwrap();
    store.insert_many(&[root.clone(), leaky.clone(), later]).unwrap();
    let before = store.digest().unwrap();

    // Refusals name the field, and leave nothing behind.
    let id = leaky.decision_id();
    for (fields, reason, field) in
        [(&["decision_type"][..], "why", "fields"), (&[][..], "why", "fields"), (&["rationale"][..], "  ", "reason")]
    {
        match store.redact(id, fields, reason, "alice") {
            Err(Error::Validation { field: f, .. }) => assert_eq!(f, field, "{fields:?}"),
            other => panic!("{fields:?}: {other:?}"),
        }
    }
    assert!(matches!(
        store.redact(decision_store::DecisionId::generate(), &["rationale"], "why", "alice"),
        Err(Error::DecisionNotFound(_))
    ));
    assert_eq!(store.digest().unwrap(), before, "a refused redaction wrote something");

    let r = store.redact(id, &["rationale", "alternatives"], "an API key was pasted in", "alice").unwrap();
    assert_eq!((r.fields.join(","), r.actor.as_str()), ("rationale,alternatives".into(), "alice"));
    let r2 = store.redact(id, &["metadata", "artifacts_produced"], "the key again", "bob").unwrap();
    match store.redact(id, &["rationale"], "once more", "alice") {
        Err(Error::Validation { field, .. }) => assert_eq!(field, "fields"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.redactions(id).unwrap(), vec![r, r2]);
    assert_eq!(store.redactions(root.decision_id()).unwrap(), vec![]);

    let now = store.decision(id).unwrap();
    assert_eq!(now.rationale(), REDACTED);
    assert_eq!(now.alternatives()[0].option(), REDACTED);
    assert_eq!(now.alternatives()[0].rationale(), Some(REDACTED));
    assert_eq!(now.artifacts_produced()[0].artifact_path(), REDACTED);
    assert_eq!(now.metadata().get("redacted"), Some(&serde_json::json!(true)));
    // What was not named stays.
    assert_eq!(now.chosen_option(), "call the billing API");
    assert_eq!(now.parent_decision_id(), Some(root.decision_id()));

    // Two entries more; every earlier anchor still verifies; check is clean.
    let after = store.digest().unwrap();
    assert_eq!(after.store.entries, before.store.entries + 2);
    let mut anchors = before.plans.clone();
    anchors.push(before.store.clone());
    assert_eq!(store.check_against(&anchors).unwrap(), vec![]);

    // Export carries the marker and never the secret; what it writes imports.
    let mut out = Vec::new();
    store.export_decisions(Some(plan), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(REDACTED) && !text.contains(SECRET), "{text}");

    // A copy has the same digest, the same redactions, and checks clean.
    let report = store.copy_into(copy, |_| {}).unwrap();
    assert_eq!(report.redactions, 2);
    assert_eq!(copy.digest().unwrap(), store.digest().unwrap());
    assert_eq!(copy.redactions(id).unwrap(), store.redactions(id).unwrap());
    assert_eq!(copy.check_against(&anchors).unwrap(), vec![]);
    assert_eq!(copy.decision(id).unwrap(), now);
    // The copy goes on as a log: a new decision and a redaction append.
    let more = Decision::builder(plan, DecisionType::ValidationResponse, 3)
        .parent(root.decision_id())
        .rationale("fine")
        .build()
        .unwrap();
    copy.insert(&more).unwrap();
    copy.redact(more.decision_id(), &["rationale"], "tidy", "carol").unwrap();
    assert_eq!(copy.check().unwrap(), vec![]);
}
