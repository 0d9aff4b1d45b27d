//! Steps of `features/repository.feature`: the store on a temp file.

use std::collections::HashMap;

use cucumber::{given, then, when};
use decision_store::testing::PlanBuilder;
use decision_store::{ContextSnapshot, Decision, DecisionId, DecisionType, Error, PlanId, ResourceRef, Store};

use super::persistence::three_level_tree;
use super::{ensure, StepResult, World};

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Every decision in the store as interchange JSON lines, plan then sequence.
pub fn dump(store: &Store) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    store
        .for_each_decision(None, |d| {
            out.push(d.to_json());
            Ok(())
        })
        .map_err(s)?;
    Ok(out)
}

/// The history plan of the feature's description, keyed by name.
pub fn history_plan(plan: PlanId) -> decision_store::Result<Vec<(&'static str, Decision)>> {
    let built = PlanBuilder::for_plan(plan)
        .root("R")
        .child("A", "R", DecisionType::StrategyChoice)
        .correction("A2", "A")
        .correction("A3", "A2")
        .child("B", "R", DecisionType::ToolInvocation)
        .child("C", "R", DecisionType::ToolInvocation)
        .supersede("B", "C")
        .build()?;
    Ok(["R", "A", "A2", "A3", "B", "C"].into_iter().map(|n| (n, built.get(n).clone())).collect())
}

fn named(w: &World, name: &str) -> Result<Decision, String> {
    w.named.get(name).cloned().ok_or_else(|| format!("no decision named {name}"))
}

fn names(w: &World, ids: impl IntoIterator<Item = DecisionId>) -> String {
    let by_id: HashMap<DecisionId, &str> = w.named.iter().map(|(n, d)| (d.decision_id(), n.as_str())).collect();
    ids.into_iter().map(|id| by_id.get(&id).copied().unwrap_or("?").to_owned()).collect::<Vec<_>>().join(" ")
}

#[given(regex = r"^a stored history plan$")]
fn stored_history(w: &mut World) -> StepResult {
    let plan = w.plan();
    let ds = history_plan(plan).map_err(s)?;
    w.store()?.insert_many(ds.iter().map(|(_, d)| d)).map_err(s)?;
    w.originals = ds.iter().map(|(_, d)| d.clone()).collect();
    w.named.extend(ds.into_iter().map(|(n, d)| (n.to_owned(), d)));
    Ok(())
}

#[given(regex = r"^a second stored plan$")]
fn second_plan(w: &mut World) -> StepResult {
    let other = PlanId::generate();
    let root = Decision::builder(other, DecisionType::PromptDefinition, 0).build().map_err(s)?;
    let child =
        Decision::builder(other, DecisionType::StrategyChoice, 1).parent(root.decision_id()).build().map_err(s)?;
    w.store()?.insert_many([&root, &child]).map_err(s)?;
    w.named.insert("OTHER".into(), root);
    w.named.insert("OTHER_CHILD".into(), child);
    Ok(())
}

#[given(regex = r"^a stored plan with every decision shape of the seed scenarios$")]
fn every_shape(w: &mut World) -> StepResult {
    let plan = w.plan();
    w.store()?;
    let mut ds = history_plan(plan).map_err(s)?.into_iter().map(|(_, d)| d).collect::<Vec<_>>();
    let root = ds[0].decision_id();
    let mut seq = 10;
    let mut next = |t: DecisionType| {
        seq += 1;
        Decision::builder(plan, t, seq).parent(root)
    };
    // The seed's fully populated decision, with references that exist in this plan.
    let full = super::decision::fully_populated(plan, root).map_err(s)?;
    let full = full
        .to_builder()
        .sequence(10)
        .corrects(ds[5].decision_id())
        .superseded_by(ds[3].decision_id())
        .build()
        .map_err(s)?;
    ds.push(full);
    for t in DecisionType::ALL.into_iter().filter(|t| *t != DecisionType::PromptDefinition) {
        ds.push(next(t).build().map_err(s)?);
    }
    for c in [Some(0.0), Some(1.0), None, Some(0.333_333_333_333_333_3)] {
        ds.push(next(DecisionType::ValidationResponse).confidence_score(c).build().map_err(s)?);
    }
    // PostgreSQL's text cannot hold NUL: there the store refuses it by field
    // name (tests/postgres.rs), so the shape goes without it.
    let hostile = if w.temp.as_ref().and_then(|t| t.url()).is_some() {
        "Ünïcode ✓, quotes ' \" ; -- DROP TABLE decisions; no NUL on a server. "
    } else {
        "Ünïcode ✓, quotes ' \" ; -- DROP TABLE decisions; \u{0} NUL too. "
    };
    let long: String = hostile.chars().cycle().take(100_000).collect();
    ds.push(next(DecisionType::StrategyChoice).rationale(long.clone()).chosen_option(long).build().map_err(s)?);
    let snapshot = ContextSnapshot::new(
        "sha256:42",
        vec![
            ResourceRef::new("class://AuthManager", Some("class".into()), Some("v1".into())).map_err(s)?,
            ResourceRef::new("project://src/a'b\";--.py", None, None).map_err(s)?,
        ],
        Some("checkpoint://actor/42".into()),
    );
    ds.push(next(DecisionType::ResourceSelection).context_snapshot(snapshot).build().map_err(s)?);
    let mut b = next(DecisionType::SubplanParallelSpawn);
    for _ in 0..4 {
        b = b.downstream_decision(DecisionId::generate()).downstream_plan(PlanId::generate());
    }
    ds.push(b.build().map_err(s)?);
    ds.push(Decision::builder(PlanId::generate(), DecisionType::PromptDefinition, 0).build().map_err(s)?);
    w.store()?.insert_many(&ds).map_err(s)?;
    w.originals = ds;
    Ok(())
}

#[when(regex = r"^I reopen the store$")]
fn reopen(w: &mut World) -> StepResult {
    w.reopen().map(|_| ())
}

#[then(regex = r"^every decision reads back equal to what was stored$")]
fn read_back(w: &mut World) -> StepResult {
    let originals = w.originals.clone();
    let store = &*w.store()?;
    let mut failures = Vec::new();
    for d in &originals {
        match store.get(d.decision_id()) {
            Ok(Some(back)) if &back == d => {}
            other => failures.push(format!("{}: {other:?}", d.decision_id())),
        }
    }
    ensure!(failures.is_empty(), "{} of {} differ: {}", failures.len(), originals.len(), failures.join("\n"));
    Ok(())
}

#[then(regex = r"^the plan lists its decisions in sequence order$")]
fn sequence_order(w: &mut World) -> StepResult {
    let plan = w.plan();
    let listed = w.store()?.plan_decisions(plan).map_err(s)?;
    let mut expected: Vec<Decision> = w.originals.iter().filter(|d| d.plan_id() == plan).cloned().collect();
    expected.sort_by_key(Decision::sequence);
    ensure!(listed == expected, "listed {} decisions, expected {}", listed.len(), expected.len());
    Ok(())
}

#[then(regex = r#"^the correction chain of A, A2 and A3 is each "([^"]+)"$"#)]
fn chains(w: &mut World, expected: String) -> StepResult {
    for name in ["A", "A2", "A3"] {
        let id = named(w, name)?.decision_id();
        let chain = w.store()?.correction_chain(id).map_err(s)?;
        let got = names(w, chain.iter().map(Decision::decision_id));
        ensure!(got == expected, "chain of {name} is {got:?}");
    }
    Ok(())
}

#[then(regex = r"^the decision that stands for (\w+) is (\w+)$")]
fn stands(w: &mut World, from: String, to: String) -> StepResult {
    let id = named(w, &from)?.decision_id();
    let standing = w.store()?.standing_decision(id).map_err(s)?;
    let got = names(w, [standing.decision_id()]);
    ensure!(got == to, "{from} stands as {got}");
    Ok(())
}

#[then(regex = r#"^the effective decisions of the plan are "([^"]+)"$"#)]
fn effective(w: &mut World, expected: String) -> StepResult {
    let plan = w.plan();
    let eff = w.store()?.effective_decisions(plan).map_err(s)?;
    let got = names(w, eff.iter().map(Decision::decision_id));
    ensure!(got == expected, "effective: {got:?}");
    Ok(())
}

#[given(regex = r"^a stored 3-level decision tree of 7 decisions$")]
fn stored_tree(w: &mut World) -> StepResult {
    let plan = w.plan();
    let ds = three_level_tree(plan).map_err(s)?;
    // Stored children first: the batch resolves references within itself.
    let mut shuffled = ds.clone();
    shuffled.sort_by_key(|d| d.parent_decision_id().is_none());
    let err = w.store()?.insert_many(&shuffled).err();
    ensure!(err.is_some(), "children were stored before their parents");
    w.store()?.insert_many(&ds).map_err(s)?;
    w.originals = ds;
    Ok(())
}

#[then(regex = r"^the tree has (\d+) roots?, (\d+) decisions and depth (\d+)$")]
fn tree_shape(w: &mut World, roots: usize, n: usize, depth: usize) -> StepResult {
    let plan = w.plan();
    let tree = w.store()?.decision_tree(plan).map_err(s)?;
    ensure!(
        tree.roots().len() == roots && tree.len() == n && tree.max_depth() == depth,
        "{} roots, {} decisions, depth {}",
        tree.roots().len(),
        tree.len(),
        tree.max_depth()
    );
    Ok(())
}

#[then(regex = r"^each decision's children come in sequence order$")]
fn children_order(w: &mut World) -> StepResult {
    let plan = w.plan();
    let tree = w.store()?.decision_tree(plan).map_err(s)?;
    for d in &w.originals {
        let got: Vec<DecisionId> = tree.children(d.decision_id()).iter().map(|c| c.decision_id()).collect();
        let mut expected: Vec<&Decision> =
            w.originals.iter().filter(|c| c.parent_decision_id() == Some(d.decision_id())).collect();
        expected.sort_by_key(|c| c.sequence());
        let expected: Vec<DecisionId> = expected.iter().map(|c| c.decision_id()).collect();
        ensure!(got == expected, "children of {}: {got:?} vs {expected:?}", d.decision_id());
    }
    Ok(())
}

#[then(regex = r"^every leaf's path to the root has (\d+) decisions$")]
fn leaf_paths(w: &mut World, n: usize) -> StepResult {
    let plan = w.plan();
    let tree = w.store()?.decision_tree(plan).map_err(s)?;
    let root = tree.roots()[0].decision_id();
    let leaves: Vec<&Decision> =
        tree.decisions().iter().filter(|d| tree.children(d.decision_id()).is_empty()).collect();
    ensure!(leaves.len() == 4, "{} leaves", leaves.len());
    for leaf in leaves {
        let path = tree.path_to_root(leaf.decision_id());
        ensure!(
            path.len() == n && path[0] == leaf && path[n - 1].decision_id() == root,
            "path of {}",
            leaf.decision_id()
        );
        ensure!(tree.depth(leaf.decision_id()) == Some(n - 1), "depth of leaf");
    }
    Ok(())
}

#[then(regex = r"^the root's subtree holds all (\d+) decisions and its descendants (\d+)$")]
fn subtree(w: &mut World, all: usize, desc: usize) -> StepResult {
    let plan = w.plan();
    let tree = w.store()?.decision_tree(plan).map_err(s)?;
    let root = tree.roots()[0].decision_id();
    ensure!(
        tree.subtree(root).len() == all && tree.descendants(root).len() == desc,
        "subtree {}",
        tree.subtree(root).len()
    );
    let child = tree.children(root)[0].decision_id();
    ensure!(tree.subtree(child).len() == 3, "a child's subtree has {}", tree.subtree(child).len());
    Ok(())
}

#[when(regex = r"^(\w+) is superseded by (\w+)$")]
fn supersede(w: &mut World, old: String, new: String) -> StepResult {
    let (old, new) = (named(w, &old)?.decision_id(), named(w, &new)?.decision_id());
    w.store()?.supersede(old, new).map_err(s)
}

#[then(regex = r"^(\w+) reads back superseded by (\w+)$")]
fn reads_superseded(w: &mut World, old: String, new: String) -> StepResult {
    let (old_d, new_id) = (named(w, &old)?, named(w, &new)?.decision_id());
    let back = w.store()?.decision(old_d.decision_id()).map_err(s)?;
    ensure!(back.superseded_by() == Some(new_id), "superseded_by {:?}", back.superseded_by());
    ensure!(back == old_d.with_superseded_by(new_id).map_err(s)?, "more than the link changed");
    Ok(())
}

#[then(regex = r"^recording that (\w+) is superseded by (\w+) again changes nothing$")]
fn again(w: &mut World, old: String, new: String) -> StepResult {
    let before = dump(w.store()?)?;
    supersede(w, old, new)?;
    ensure!(dump(w.reopen()?)? == before, "the store changed");
    Ok(())
}

#[then(regex = r#"^superseding (\w+) by (\w+) is refused with "([^"]+)"$"#)]
fn refused_supersede(w: &mut World, old: String, new: String, msg: String) -> StepResult {
    let err = supersede(w, old, new).err().ok_or("the supersession was accepted")?;
    ensure!(err.contains(&msg), "{err}");
    Ok(())
}

fn attempt(w: &mut World, write: &str) -> Result<decision_store::Result<()>, String> {
    let plan = w.plan();
    let r = named(w, "R")?.decision_id();
    let a = named(w, "A")?;
    let other = named(w, "OTHER")?.decision_id();
    let fresh = |seq| Decision::builder(plan, DecisionType::StrategyChoice, seq);
    let insert = |w: &mut World, d: decision_store::Result<Decision>| -> Result<decision_store::Result<()>, String> {
        let d = d.map_err(s)?;
        Ok(w.store()?.insert(&d))
    };
    let sql = |w: &mut World, stmt: &str, id: DecisionId| -> Result<decision_store::Result<()>, String> {
        Ok(w.raw_sql(stmt, &id.to_string())?.map_err(|e| Error::validation("sql", e)))
    };
    let by_name = |w: &World, n: &str| named(w, n).map(|d| d.decision_id());
    match write {
        "insert a decision whose parent is not stored" => insert(w, fresh(50).parent(DecisionId::generate()).build()),
        "insert a decision whose parent is in the second plan" => insert(w, fresh(50).parent(other).build()),
        "insert a correction of a decision that is not stored" => {
            insert(w, fresh(50).parent(r).corrects(DecisionId::generate()).build())
        }
        "insert a correction of a decision in the second plan" => insert(w, fresh(50).corrects(other).build()),
        "insert a decision at the sequence of A" => insert(w, fresh(a.sequence()).parent(r).build()),
        "insert a different decision under the id of A" => {
            insert(w, a.to_builder().chosen_option("something else").sequence(60).build())
        }
        "supersede A by a decision that is not stored" => {
            Ok(w.store()?.supersede(a.decision_id(), DecisionId::generate()))
        }
        "supersede A by a decision of the second plan" => Ok(w.store()?.supersede(a.decision_id(), other)),
        "supersede C by B" => {
            let (c, b) = (by_name(w, "C")?, by_name(w, "B")?);
            Ok(w.store()?.supersede(c, b))
        }
        "supersede A3 by A" => {
            let a3 = by_name(w, "A3")?;
            Ok(w.store()?.supersede(a3, a.decision_id()))
        }
        "supersede A by A3 after A3 is superseded by A" => {
            let a3 = by_name(w, "A3")?;
            // A3 -> A would itself close a loop through the corrections, so
            // the first link must already fail; the second must never be reached.
            match w.store()?.supersede(a3, a.decision_id()) {
                Err(e) => Ok(Err(e)),
                Ok(()) => Ok(w.store()?.supersede(a.decision_id(), a3)),
            }
        }
        "correct A2, which A3 corrected" | "correct B, which C superseded" => {
            let target = by_name(w, if write.contains("A2") { "A2" } else { "B" })?;
            insert(w, fresh(50).parent(r).corrects(target).build())
        }
        "supersede A2, which A3 corrected" => {
            let (a2, c) = (by_name(w, "A2")?, by_name(w, "C")?);
            Ok(w.store()?.supersede(a2, c))
        }
        "insert a second prompt_definition as a root of the plan" => {
            insert(w, Decision::builder(plan, DecisionType::PromptDefinition, 50).build())
        }
        "insert a strategy_choice without a parent into the plan" => insert(w, fresh(50).build()),
        "insert a strategy_choice without a parent into a new plan" => {
            insert(w, Decision::builder(PlanId::generate(), DecisionType::StrategyChoice, 0).build())
        }
        "update a decision row with SQL" => {
            sql(w, "UPDATE decisions SET rationale = 'rewritten' WHERE decision_id = ?1", a.decision_id())
        }
        "delete a decision row with SQL" => sql(w, "DELETE FROM decisions WHERE decision_id = ?1", by_name(w, "C")?),
        "delete a supersession row with SQL" => {
            sql(w, "DELETE FROM supersessions WHERE decision_id = ?1", by_name(w, "B")?)
        }
        other => Err(format!("unknown write {other:?}")),
    }
}

#[when(regex = r"^I attempt to (.+)$")]
fn try_write(w: &mut World, write: String) -> StepResult {
    w.snapshot_before = Some(dump(w.store()?)?);
    w.error = attempt(w, &write)?.err();
    Ok(())
}

#[then(regex = r#"^the write is refused with "([^"]+)"$"#)]
fn refused(w: &mut World, msg: String) -> StepResult {
    let e = w.error()?.to_string();
    // A decision's name in the message stands for its id.
    let msg = msg
        .split(' ')
        .map(|word| {
            let name = word.trim_end_matches(',');
            match w.named.get(name) {
                Some(d) => word.replacen(name, &d.decision_id().to_string(), 1),
                None => word.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    ensure!(e.contains(&msg), "{e:?} does not say {msg:?}");
    Ok(())
}

#[then(regex = r"^after reopening, the store holds exactly the rows it held before$")]
fn unchanged(w: &mut World) -> StepResult {
    let before = w.snapshot_before.clone().ok_or("no snapshot taken")?;
    let after = dump(w.reopen()?)?;
    ensure!(after == before, "{} rows before, {} after", before.len(), after.len());
    let problems = w.store()?.storage_problems().map_err(s)?;
    ensure!(problems.is_empty(), "{problems:?}");
    Ok(())
}

fn batch(w: &mut World) -> Result<Vec<Decision>, String> {
    let plan = w.plan();
    let r = named(w, "R")?.decision_id();
    let first = Decision::builder(plan, DecisionType::StrategyChoice, 20).parent(r).build().map_err(s)?;
    let mut out = vec![first.clone()];
    out.push(Decision::builder(plan, DecisionType::ToolInvocation, 21).parent(first.decision_id()).build().map_err(s)?);
    out.push(
        Decision::builder(plan, DecisionType::ToolInvocation, 22).parent(DecisionId::generate()).build().map_err(s)?,
    );
    out.push(Decision::builder(plan, DecisionType::ErrorRecovery, 23).parent(first.decision_id()).build().map_err(s)?);
    out.push(Decision::builder(plan, DecisionType::ValidationResponse, 24).parent(r).build().map_err(s)?);
    Ok(out)
}

#[when(regex = r"^I insert a batch of 5 new decisions whose third names a missing parent$")]
fn bad_batch(w: &mut World) -> StepResult {
    w.snapshot_before = Some(dump(w.store()?)?);
    let ds = batch(w)?;
    w.originals = ds.clone();
    match w.store()?.insert_many(&ds) {
        Err(e @ Error::Batch { index: 2, .. }) => w.error = Some(e),
        other => return Err(format!("expected a failure at item 2, got {other:?}")),
    }
    Ok(())
}

#[when(regex = r"^I insert the same batch without its third decision$")]
fn good_batch(w: &mut World) -> StepResult {
    let mut ds = w.originals.clone();
    ds.remove(2);
    let n = w.store()?.insert_many(&ds).map_err(s)?;
    ensure!(n == 4, "{n} stored");
    Ok(())
}

#[then(regex = r"^after reopening, the plan holds (\d+) decisions$")]
fn plan_holds(w: &mut World, n: usize) -> StepResult {
    let plan = w.plan();
    let got = w.reopen()?.plan_decisions(plan).map_err(s)?.len();
    ensure!(got == n, "{got} decisions");
    Ok(())
}

#[given(regex = r"^a file holding (.+)$")]
fn file_holding(w: &mut World, content: String) -> StepResult {
    let path = w.db_path();
    match content.as_str() {
        "random bytes" => {
            let bytes: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
            std::fs::write(&path, bytes).map_err(s)?;
        }
        "a SQLite database of another application" => {
            let conn = rusqlite::Connection::open(&path).map_err(s)?;
            conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');").map_err(s)?;
        }
        "a store with a newer schema version" => {
            drop(Store::open(&path).map_err(s)?);
            let conn = rusqlite::Connection::open(&path).map_err(s)?;
            conn.execute(
                "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (99, 'from_the_future', '2030-01-01T00:00:00Z', '1')",
                [],
            )
            .map_err(s)?;
        }
        "nothing (0 bytes)" => std::fs::write(&path, b"").map_err(s)?,
        other => return Err(format!("unknown content {other:?}")),
    }
    w.snapshot_before = Some(vec![format!("{:?}", std::fs::read(&path).map_err(s)?)]);
    Ok(())
}

#[when(regex = r"^I open it (read-only|for writing)$")]
fn open_it(w: &mut World, how: String) {
    let path = w.db_path();
    let result = if how == "read-only" { Store::open_read_only(&path) } else { Store::open(&path) };
    match result {
        Ok(store) => {
            w.opened = Some(store);
            w.error = None;
        }
        Err(e) => {
            w.opened = None;
            w.error = Some(e);
        }
    }
}

#[then(regex = r#"^opening fails with "([^"]+)"$"#)]
fn open_fails(w: &mut World, msg: String) -> StepResult {
    ensure!(w.opened.is_none(), "the file was opened");
    let e = w.error()?.to_string();
    ensure!(e.contains(&msg), "{e:?} does not say {msg:?}");
    Ok(())
}

#[then(regex = r"^the file is unchanged$")]
fn file_unchanged(w: &mut World) -> StepResult {
    let now = vec![format!("{:?}", std::fs::read(w.db_path()).map_err(s)?)];
    ensure!(Some(now) == w.snapshot_before, "the file changed");
    Ok(())
}

#[then(regex = r"^opening creates an empty store$")]
fn creates(w: &mut World) -> StepResult {
    let store = w.opened.as_ref().ok_or_else(|| format!("not opened: {:?}", w.error))?;
    ensure!(store.plans().map_err(s)?.is_empty(), "not empty");
    w.opened = None;
    let store = Store::open_read_only(w.db_path()).map_err(s)?;
    ensure!(store.schema_version().map_err(s)? == decision_store::store::supported_schema_version(), "not migrated");
    Ok(())
}
