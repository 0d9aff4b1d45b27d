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

/// The staleness and calibration the store keeps equal what a computation
/// from the rows gives, after every step of a random history: decisions
/// recorded (with resources, downstream links forward, backward and to ids
/// not stored yet), corrected and superseded, and nodes changed, added and
/// removed. `seed` picks the history; `steps` its length.
pub fn the_kept_state_equals_a_recomputation(store: &mut decision_store::Store, seed: u64, steps: usize) {
    use decision_store::calibration::{calibrate, CalibrationOptions, GroupBy};
    use decision_store::decision::{ContextSnapshot, ResourceRef};
    use decision_store::stale::{StaleOptions, StaleReport};
    use decision_store::uko::UkoNode;
    use decision_store::{Decision, DecisionId, DecisionType, Error, PlanId};

    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut rand = move |n: usize| -> usize {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    };
    let uris: Vec<String> = (0..10).map(|i| format!("class://N{i}")).collect();
    let versions = ["v1", "v2", "v3"];
    // Ids handed out ahead: a downstream link may name one before it is a decision.
    let future: Vec<DecisionId> = (0..40).map(|_| DecisionId::generate()).collect();
    let mut next_future = 0;
    let mut plans: Vec<(PlanId, Vec<(DecisionId, DecisionType)>)> = Vec::new();
    let node = |uri: &str, v: usize| {
        let n = UkoNode::new(uri, "uko-code:", "class", uri).with_view(0, format!("{uri} at {v}"));
        if v < 3 {
            n.with_version(versions[v])
        } else {
            n // its version is its views'
        }
    };
    store.upsert_nodes(&uris.iter().map(|u| node(u, 0)).collect::<Vec<_>>()).unwrap();

    let compare = |store: &decision_store::Store, step: usize, plans: &[PlanId]| {
        for all in [false, true] {
            let kept = store.stale(StaleOptions { plan: None, all });
            let again = store.stale_recomputed(StaleOptions { plan: None, all });
            let (kept, again) = match (kept, again) {
                (Ok(k), Ok(a)) => (k, a),
                (Err(Error::EmptyGraph { resources: a }), Err(Error::EmptyGraph { resources: b })) => {
                    assert_eq!(a, b, "seed {seed} step {step}");
                    continue;
                }
                (k, a) => panic!("seed {seed} step {step}: kept {k:?}, recomputed {a:?}"),
            };
            let expected = StaleReport {
                stale_total: again.stale.len() as u64,
                at_risk_total: again.at_risk.len() as u64,
                ..again.clone()
            };
            assert_eq!(kept, expected, "seed {seed} step {step} all {all}");
            // A page at a time gives the same lists.
            let (mut stale, mut at_risk, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
            loop {
                let (page, next) = store.stale_page(StaleOptions { plan: None, all }, 3, cursor.as_deref()).unwrap();
                assert!(page.stale.len() <= 3 && page.at_risk.len() <= 3);
                stale.extend(page.stale);
                at_risk.extend(page.at_risk);
                match next {
                    Some(n) => cursor = Some(n),
                    None => break,
                }
            }
            assert_eq!((stale, at_risk), (again.stale.clone(), again.at_risk.clone()), "seed {seed} step {step} pages");
            // One plan: its own stale decisions and decisions at risk.
            for plan in plans.iter().take(3) {
                let mine = store.stale(StaleOptions { plan: Some(*plan), all }).unwrap();
                let stale: Vec<_> = again.stale.iter().filter(|s| s.plan_id == *plan).cloned().collect();
                let at_risk: Vec<_> = again.at_risk.iter().filter(|a| a.plan_id == Some(*plan)).cloned().collect();
                assert_eq!((&mine.stale, &mine.at_risk), (&stale, &at_risk), "seed {seed} step {step} plan {plan}");
                assert_eq!((mine.stale_total, mine.at_risk_total), (stale.len() as u64, at_risk.len() as u64));
            }
        }
        for by in [None, Some(GroupBy::Type), Some(GroupBy::Phase), Some(GroupBy::Plan)] {
            let kept = store.calibration(CalibrationOptions { plan: None, by, settled_after: 0 }).unwrap();
            let again = calibrate(&store.outcomes(None).unwrap(), by, 0);
            assert_eq!(kept, again, "seed {seed} step {step} calibration by {by:?}");
            if let Some(plan) = plans.first() {
                let kept = store.calibration(CalibrationOptions { plan: Some(*plan), by, settled_after: 0 }).unwrap();
                let again = calibrate(&store.outcomes(Some(*plan)).unwrap(), by, 0);
                assert_eq!(kept, again, "seed {seed} step {step} calibration of a plan by {by:?}");
            }
        }
        assert_eq!(store.check().unwrap(), vec![], "seed {seed} step {step}");
    };

    let types = [DecisionType::StrategyChoice, DecisionType::ToolInvocation, DecisionType::ImplementationChoice];
    for step in 0..steps {
        let roll = rand(100);
        let result: Result<(), Error> = if roll < 8 || plans.is_empty() {
            // A new plan.
            let plan = PlanId::generate();
            let d = Decision::builder(plan, DecisionType::PromptDefinition, 0).chosen_option("goal").build().unwrap();
            plans.push((plan, vec![(d.decision_id(), DecisionType::PromptDefinition)]));
            store.insert(&d)
        } else if roll < 60 {
            // A decision under a random one of a random plan.
            let p = rand(plans.len());
            let (plan, ds) = &plans[p];
            let parent = ds[rand(ds.len())].0;
            let t = types[rand(types.len())];
            let mut resources = Vec::new();
            for _ in 0..rand(4) {
                let v = rand(4);
                let version = if v < 3 { Some(versions[v].to_owned()) } else { None };
                resources.push(ResourceRef::new(uris[rand(uris.len())].clone(), None, version).unwrap());
            }
            let id = if rand(4) == 0 && next_future < future.len() {
                next_future += 1;
                future[next_future - 1]
            } else {
                DecisionId::generate()
            };
            let mut b = Decision::builder(*plan, t, ds.len() as u32)
                .decision_id(id)
                .parent(parent)
                .confidence_score(if rand(5) == 0 { None } else { Some(rand(101) as f64 / 100.0) })
                .context_snapshot(ContextSnapshot::new(format!("h{step}"), resources, None));
            for _ in 0..(if rand(3) == 0 { 1 + rand(2) } else { 0 }) {
                let x = match rand(3) {
                    // A decision stored already, in any plan: the link may close a cycle.
                    0 => {
                        let (_, ds) = &plans[rand(plans.len())];
                        ds[rand(ds.len())].0
                    }
                    _ => future[rand(future.len())],
                };
                b = b.downstream_decision(x);
            }
            let d = b.build().unwrap();
            let r = store.insert(&d);
            if r.is_ok() {
                plans[p].1.push((d.decision_id(), t));
            }
            r
        } else if roll < 66 {
            // Several decisions in one transaction: a chain, links to those
            // after them in the batch, and a correction of one of the batch.
            let p = rand(plans.len());
            let (plan, ds) = &plans[p];
            let n = 2 + rand(4);
            let ids: Vec<DecisionId> = (0..n).map(|_| DecisionId::generate()).collect();
            let mut batch = Vec::new();
            let mut parent = ds[rand(ds.len())].0;
            for (i, id) in ids.iter().enumerate() {
                let v = rand(4);
                let version = if v < 3 { Some(versions[v].to_owned()) } else { None };
                let r = ResourceRef::new(uris[rand(uris.len())].clone(), None, version).unwrap();
                let mut b = Decision::builder(*plan, types[i % 3], (ds.len() + i) as u32)
                    .decision_id(*id)
                    .parent(parent)
                    .confidence_score(Some(rand(101) as f64 / 100.0))
                    .context_snapshot(ContextSnapshot::new(format!("b{step}.{i}"), vec![r], None));
                if i + 1 < n && rand(2) == 0 {
                    b = b.downstream_decision(ids[i + 1 + rand(n - i - 1)]);
                }
                if i == n - 1 && n > 2 && rand(2) == 0 {
                    // The last corrects the one before it (same parent, same type).
                    b = Decision::builder(*plan, types[(i - 1) % 3], (ds.len() + i) as u32)
                        .decision_id(*id)
                        .parent(batch.last().map_or(parent, |d: &Decision| d.parent_decision_id().unwrap()))
                        .corrects(ids[i - 1]);
                }
                let d = b.build().unwrap();
                parent = d.decision_id();
                batch.push(d);
            }
            let r = store.insert_many(&batch).map(drop);
            if r.is_ok() {
                for d in &batch {
                    plans[p].1.push((d.decision_id(), d.decision_type()));
                }
            }
            r.map_err(|e| match e {
                Error::Batch { error, .. } => *error,
                e => e,
            })
        } else if roll < 72 {
            // A correction of a random decision (refused unless it stands).
            let p = rand(plans.len());
            let (plan, ds) = &plans[p];
            let (target, t) = ds[rand(ds.len())];
            match store.get(target).unwrap().and_then(|d| d.parent_decision_id()) {
                None => Ok(()),
                Some(parent) => {
                    let d = Decision::builder(*plan, t, ds.len() as u32)
                        .parent(parent)
                        .corrects(target)
                        .confidence_score(Some(rand(101) as f64 / 100.0))
                        .build()
                        .unwrap();
                    let r = store.insert(&d);
                    if r.is_ok() {
                        plans[p].1.push((d.decision_id(), t));
                    }
                    r
                }
            }
        } else if roll < 80 {
            // A supersession within a plan.
            let (_, ds) = &plans[rand(plans.len())];
            let (old, new) = (ds[rand(ds.len())].0, ds[rand(ds.len())].0);
            store.supersede(old, new)
        } else if roll < 95 {
            // A node changes version (or to one its views give).
            let uri = &uris[rand(uris.len())];
            store.upsert_nodes(&[node(uri, rand(4))])
        } else {
            store.remove_nodes(&[uris[rand(uris.len())].clone()]).map(drop)
        };
        match result {
            Ok(()) | Err(Error::Validation { .. }) | Err(Error::AlreadySuperseded { .. }) | Err(Error::Cycle(_)) => {}
            Err(Error::CrossPlanReference { .. }) => {}
            Err(e) => panic!("seed {seed} step {step}: {e}"),
        }
        compare(store, step, &plans.iter().map(|p| p.0).collect::<Vec<_>>());
    }
    // A copy writes the log in large transactions, then the graph: its kept
    // state equals its recomputation too, and the source's.
    let mut copy = decision_store::testing::TempStore::new().unwrap();
    let copy = copy.store().unwrap();
    store.copy_into(copy, |_| {}).unwrap();
    for all in [false, true] {
        let options = StaleOptions { plan: None, all };
        let (kept, again) = (copy.stale(options), copy.stale_recomputed(options));
        match (kept, again) {
            (Ok(k), Ok(a)) => {
                let ids = |r: &StaleReport| {
                    (
                        r.stale.iter().map(|s| s.decision_id).collect::<Vec<_>>(),
                        r.at_risk.iter().map(|s| s.decision_id).collect::<Vec<_>>(),
                    )
                };
                assert_eq!(ids(&k), ids(&a), "seed {seed}: the copy's lists, all {all}");
                assert_eq!(k.stale, a.stale, "seed {seed}: the copy's stale decisions, all {all}");
                assert_eq!(k.at_risk, a.at_risk, "seed {seed}: the copy's decisions at risk, all {all}");
                assert!(k == store.stale(options).unwrap(), "seed {seed}: the copy's staleness and the source's");
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("seed {seed}: {a:?} / {b:?}"),
        }
    }
    let options = CalibrationOptions { plan: None, by: Some(GroupBy::Plan), settled_after: 0 };
    assert_eq!(store.calibration(options).unwrap(), copy.calibration(options).unwrap(), "seed {seed}");
}
