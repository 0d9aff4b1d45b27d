"""The store from Python: round trips, ports of seed scenarios, threads."""

import os
import threading

import pytest

import decision_store as ds
from test_decision import full


@pytest.fixture
def path(tmp_path):
    return tmp_path / "agent.db"


def test_every_field_round_trips_through_the_store(path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0, chosen_option="root")
    d = ds.Decision.model_validate(full(plan, parent=root.decision_id))
    with ds.Store.open(path) as store:
        store.insert_many([root, d.model_dump()])
    with ds.Store.open_read_only(path) as store:
        assert store.get(d.decision_id) == d
        assert store.plan(plan) == [root, d]
        assert store.get(ds.new_decision_id()) is None
        assert store.check() == []


def test_correction_chain(path):
    # Seed: "Correction chain is reconstructed in order".
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0)
    a = ds.Decision.create(plan, "strategy_choice", 1, parent_decision_id=root.decision_id, chosen_option="per user")
    b = ds.Decision.create(
        plan, "strategy_choice", 2, parent_decision_id=root.decision_id, is_correction=True,
        corrects_decision_id=a.decision_id, chosen_option="per key",
    )
    c = ds.Decision.create(
        plan, "strategy_choice", 3, parent_decision_id=root.decision_id, is_correction=True,
        corrects_decision_id=b.decision_id, chosen_option="per key, burst 2x",
    )
    with ds.Store.open(path) as store:
        store.insert_many([root, a, b, c])
        assert [x.chosen_option for x in store.correction_chain(a.decision_id)] == ["per user", "per key", "per key, burst 2x"]
        assert store.standing_decision(a.decision_id) == c
        tree = store.decision_tree(plan)
        assert [x.decision_id for x in tree.effective()] == [root.decision_id, c.decision_id]
        assert not tree.is_effective(a.decision_id)


def test_supersession(path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0)
    old = ds.Decision.create(plan, "tool_invocation", 1, parent_decision_id=root.decision_id)
    new = ds.Decision.create(plan, "tool_invocation", 2, parent_decision_id=root.decision_id)
    with ds.Store.open(path) as store:
        store.insert_many([root, old, new])
        store.supersede(old.decision_id, new.decision_id)
        assert store.get(old.decision_id).superseded_by == new.decision_id
        assert store.standing_decision(old.decision_id) == new
        with pytest.raises(ds.ValidationError, match="already superseded"):
            store.supersede(old.decision_id, root.decision_id)


def test_tree_reconstruction(path):
    # Seed: "Decision tree is reconstructed from stored rows".
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0)
    s = ds.Decision.create(plan, "strategy_choice", 1, parent_decision_id=root.decision_id)
    i1 = ds.Decision.create(plan, "implementation_choice", 2, parent_decision_id=s.decision_id)
    i2 = ds.Decision.create(plan, "implementation_choice", 3, parent_decision_id=s.decision_id)
    t = ds.Decision.create(plan, "tool_invocation", 4, parent_decision_id=i2.decision_id)
    with ds.Store.open(path) as store:
        store.insert_many([root, s, i1, i2, t])
        tree = store.decision_tree(plan)
    assert len(tree) == 5
    assert tree.roots() == [root]
    assert tree.children(s.decision_id) == [i1, i2]
    assert tree.depth(t.decision_id) == 3 and tree.max_depth() == 3
    assert tree.parent(t.decision_id) == i2


def test_projection_gradient_and_child_context(path):
    # Seed: "Depth decreases with distance from the focus".
    chain = ["class://A", "class://B", "class://C"]
    nodes = [
        {"uri": u, "domain": "uko-code:", "kind": "class", "label": u,
         "views": [{"depth": 0, "content": u}, {"depth": 4, "content": f"class {u}(Base)"}, {"depth": 9, "content": f"class {u}: ..."}]}
        for u in chain
    ]
    with ds.Store.open(path) as store:
        store.upsert_nodes(nodes)
        store.add_edges([{"source": a, "target": b, "relation": "contains", "weight": None} for a, b in zip(chain, chain[1:])])
        fragments = store.project(["class://A"], breadth=2, depth=9, ranking="distance")
        assert [(f["uko_node"], f["detail_depth"]) for f in fragments] == [("class://A", 9), ("class://B", 4), ("class://C", 0)]
        assert {f["resource_uri"] for f in fragments} == set(chain)
        assert all(f["tokens"] > 0 for f in fragments)
        small = store.project(["class://A"], breadth=2, depth="FULL_SOURCE", budget=6, ranking="distance")
        assert sum(f["tokens"] for f in small) <= 6
        with pytest.raises(ds.ValidationError, match="class://Ghost"):
            store.project(["class://Ghost"])
        plan = ds.new_plan_id()
        snap = {"hash": "", "resources": [{"resource_id": "class://A", "resource_type": None, "version": None}], "actor_state_ref": None}
        store.insert(ds.Decision.create(plan, "prompt_definition", 0, context_snapshot=snap))
        ctx = store.child_context(plan, budget=1000)
        assert ctx["skeleton_fragments"] and ctx["request"]["budget"] == 1000


def test_errors_map_to_the_exception_hierarchy(tmp_path):
    with pytest.raises(ds.NotAStoreError):
        ds.Store.open_read_only(tmp_path / "missing.db")
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ds.NotAStoreError):
        ds.Store.open(foreign)
    store = ds.Store.open(tmp_path / "s.db")
    with pytest.raises(ds.NotFoundError):
        store.decision_tree(ds.new_plan_id())
    with pytest.raises(ds.ValidationError, match="parent"):
        plan = ds.new_plan_id()
        store.insert(ds.Decision.create(plan, "tool_invocation", 1, parent_decision_id=ds.new_decision_id()))
    with pytest.raises(ds.ValidationError, match=r"decisions\[1\]"):
        store.insert_many([ds.Decision.create(ds.new_plan_id(), "prompt_definition", 0).model_dump(), {"bad": 1}])
    store.close()
    with pytest.raises(ds.DecisionStoreError, match="closed"):
        store.plans()


def test_import_and_export_jsonl(tmp_path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0)
    with ds.Store.open(tmp_path / "a.db") as a:
        a.insert(root)
        assert a.export_jsonl(tmp_path / "out.jsonl") == 1
    with ds.Store.open(tmp_path / "b.db") as b:
        report = b.import_jsonl(tmp_path / "out.jsonl")
        assert report["imported"] == 1
        assert b.export_jsonl(tmp_path / "again.jsonl") == 1
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "again.jsonl").read_bytes()


def test_two_threads_write_at_once(path):
    store = ds.Store.open(path)
    plans = [ds.new_plan_id(), ds.new_plan_id()]
    errors = []

    def write(plan):
        try:
            root = ds.Decision.create(plan, "prompt_definition", 0)
            store.insert(root)
            for i in range(1, 200):
                store.insert(ds.Decision.create(plan, "tool_invocation", i, parent_decision_id=root.decision_id))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [len(store.plan(p)) for p in plans] == [200, 200]
    assert store.check() == []
    store.close()


def test_a_failed_insert_many_writes_nothing(path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0)
    good = [root] + [ds.Decision.create(plan, "tool_invocation", i, parent_decision_id=root.decision_id) for i in range(1, 3000)]

    def raising():
        yield from good[:2000]
        raise RuntimeError("the source broke")

    with ds.Store.open(path) as store:
        with pytest.raises(RuntimeError, match="the source broke"):
            store.insert_many(raising())
        with pytest.raises(ds.ValidationError, match=r"decisions\[2500\].*confidence_score"):
            store.insert_many([d.model_dump() for d in good[:2500]] + [{**good[2500].model_dump(), "confidence_score": 7}])
        with pytest.raises(TypeError):
            store.insert_many(42)
        assert store.plans() == []
        assert store.insert_many(d.model_dump() for d in good) == 3000
        assert len(store.plan(plan)) == 3000


def test_an_unreachable_server_raises_connect_error():
    with pytest.raises(ds.ConnectError, match="cannot connect"):
        ds.Store.connect("postgres://nobody@127.0.0.1:1/none")
    with pytest.raises(ds.ConnectError, match="not a PostgreSQL URL"):
        ds.Store.connect("postgres://[broken")


SERVER = os.environ.get("DSTORE_TEST_POSTGRES_URL")


@pytest.mark.skipif(not SERVER, reason="DSTORE_TEST_POSTGRES_URL is not set (scripts/pg-test-server runs a server)")
def test_the_same_calls_on_a_postgres_server(path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0, chosen_option="root")
    d = ds.Decision.model_validate(full(plan, parent=root.decision_id))
    fix = ds.Decision.create(
        plan, "strategy_choice", 7, parent_decision_id=root.decision_id, is_correction=True,
        corrects_decision_id=d.decision_id, chosen_option="the fix",
    )
    with ds.Store.connect(SERVER) as store:
        store.insert_many([root, d.model_dump(), fix])
        assert store.check() == []
    with ds.Store.connect_read_only(SERVER) as store:
        assert store.plan(plan) == [root, d, fix]
        assert [x.decision_id for x in store.correction_chain(fix.decision_id)] == [d.decision_id, fix.decision_id]
        assert store.standing_decision(d.decision_id) == fix
        with pytest.raises(ds.DecisionStoreError):
            store.insert(ds.Decision.create(plan, "tool_invocation", 8, parent_decision_id=root.decision_id))
    # The file and the server hold the same decisions, byte for byte.
    with ds.Store.open(path) as local:
        local.insert_many([root, d, fix])
        local.export_jsonl(path.with_suffix(".jsonl"))
    with ds.Store.connect(SERVER) as store:
        store.import_jsonl(path.with_suffix(".jsonl"))
        assert store.plan(plan) == [root, d, fix]


def test_ingest_and_the_default_context_rank_files(tmp_path):
    tree = tmp_path / "tree"
    (tree / "billing").mkdir(parents=True)
    (tree / "billing" / "invoice.py").write_text(
        "from billing.tax import tax_rate\n\n\nclass Invoice:\n    def total(self):\n        return tax_rate(self)\n")
    (tree / "billing" / "tax.py").write_text('def tax_rate(invoice):\n    """The rate of tax."""\n    return 0.2\n')
    (tree / "unrelated.py").write_text("def helper():\n    return 1\n")
    with ds.Store.open(tmp_path / "s.db") as store:
        report = store.ingest(tree, history=False)
        assert report["files"] == 3 and report["indexed"] == 3
        assert "--no-history" in report["history"]["none"]
        fragments = store.project(["project://billing/invoice.py"], budget=500)
        # The focus's outline, then what it uses, by its signature.
        assert fragments[0]["uko_node"] == "project://billing/invoice.py"
        assert fragments[1]["uko_node"] == "function://billing.tax.tax_rate"
        assert fragments[1]["content"] == "def tax_rate(invoice)\n    The rate of tax."
        assert fragments[1]["detail_depth"] == 4
        assert sum(f["tokens"] for f in fragments) <= 500
        walked = store.project(["project://billing/invoice.py"], ranking="distance", direction="out")
        assert walked[0]["content"].startswith("from billing.tax import tax_rate")
        with pytest.raises(ds.ValidationError, match="ranking"):
            store.project(["project://billing/invoice.py"], ranking="sideways")


def test_the_plan_model_is_enforced_and_refusals_name_the_field(path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0, chosen_option="goal")
    a = ds.Decision.create(plan, "strategy_choice", 1, parent_decision_id=root.decision_id)
    b = ds.Decision.create(
        plan, "strategy_choice", 2, parent_decision_id=root.decision_id, is_correction=True,
        corrects_decision_id=a.decision_id,
    )
    with ds.Store.open(path) as store:
        # A typo in plan_id must not start a new plan.
        stray = ds.Decision.create(ds.new_plan_id(), "tool_invocation", 0)
        with pytest.raises(ds.ValidationError, match="plan_id"):
            store.insert(stray)
        store.insert_many([root, a, b])
        with pytest.raises(ds.ValidationError, match="decision_type"):
            store.insert(ds.Decision.create(plan, "prompt_definition", 3))
        # A second correction of an overturned decision names the one standing now.
        again = ds.Decision.create(
            plan, "strategy_choice", 3, parent_decision_id=root.decision_id, is_correction=True,
            corrects_decision_id=a.decision_id,
        )
        with pytest.raises(ds.ValidationError, match=f"corrects_decision_id.*{b.decision_id}"):
            store.insert(again)
        assert store.plan(plan) == [root, a, b]
        assert store.check() == []


def test_redaction_keeps_the_log_verifiable(path):
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0, chosen_option="goal")
    leaky = ds.Decision.create(
        plan, "tool_invocation", 1, parent_decision_id=root.decision_id, rationale="used key sk-123",
    )
    with ds.Store.open(path) as store:
        store.insert_many([root, leaky])
        r = store.redact(leaky.decision_id, ["rationale"], "a key was pasted in", "alice")
        assert (r["fields"], r["actor"], r["reason"]) == (["rationale"], "alice", "a key was pasted in")
        assert store.get(leaky.decision_id).rationale == "[redacted]"
        assert store.redactions(leaky.decision_id) == [r]
        assert store.check() == []
        with pytest.raises(ds.ValidationError, match="fields"):
            store.redact(leaky.decision_id, ["decision_type"], "no", "alice")
