"""Every tool of docs/agent-tools.md, over both transports, with a real client."""

import json

import pytest
from mcp import MCPError

from conftest import ROOT, decision_count, graph_uris, refusal, run, session_over, structured

pytestmark = pytest.mark.anyio

TRANSPORTS = ["stdio", "http"]

TOOLS = {
    "record_decision", "supersede_decision", "get_decision", "list_plans", "plan_tree",
    "get_context", "child_context", "stale_decisions", "calibration",
}
WRITES = {"record_decision", "supersede_decision"}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_tools_are_listed_with_schemas_and_annotations(transport, demo, serve):
    async with session_over(transport, demo, serve) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, t in tools.items():
            assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object", name
            assert t.description, name
            a = t.annotations
            if name in WRITES:
                assert a.read_only_hint is False and a.destructive_hint is False, name
            else:
                assert a.read_only_hint is True, name
        assert tools["supersede_decision"].annotations.idempotent_hint is True
        record = tools["record_decision"].input_schema
        assert set(record["required"]) == {"decision_type", "chosen_option"}
        # The same definitions as `dstore schema` prints.
        schema = json.loads(run("schema").stdout)
        for field in ["decision_type", "confidence_score", "alternatives", "artifacts_produced"]:
            assert record["properties"][field] == schema["properties"][field], field


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_plan_recorded_corrected_superseded_and_read_back(transport, demo, serve):
    node = graph_uris(demo, "class")[0]
    async with session_over(transport, demo, serve) as s:
        root = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "add rate limiting",
            "rationale": "the API is abused", "confidence_score": 0.9}))
        plan = root["plan_id"]
        assert root["sequence"] == 0 and root["parent_decision_id"] is None

        child = structured(await s.call_tool("record_decision", {
            "plan_id": plan, "parent_decision_id": root["decision_id"], "decision_type": "strategy_choice",
            "chosen_option": "token bucket", "confidence_score": 0.6, "observed": [node],
            "alternatives": [{"option": "fixed window", "rationale": "bursty"}]}))
        assert child["sequence"] == 1
        [resource] = child["context_snapshot"]["resources"]
        assert resource["resource_id"] == node and resource["version"]

        fix = structured(await s.call_tool("record_decision", {
            "plan_id": plan, "parent_decision_id": root["decision_id"], "decision_type": "strategy_choice",
            "chosen_option": "sliding window", "corrects_decision_id": child["decision_id"]}))
        assert fix["sequence"] == 2 and fix["is_correction"] is True

        later = structured(await s.call_tool("record_decision", {
            "plan_id": plan, "parent_decision_id": root["decision_id"], "decision_type": "strategy_choice",
            "chosen_option": "leaky bucket", "sequence": 10}))
        sup = structured(await s.call_tool("supersede_decision", {
            "decision_id": fix["decision_id"], "superseded_by": later["decision_id"]}))
        assert sup == {"decision_id": fix["decision_id"], "superseded_by": later["decision_id"],
                       "standing_decision_id": later["decision_id"]}
        # Idempotent: the same link again changes nothing.
        assert structured(await s.call_tool("supersede_decision", {
            "decision_id": fix["decision_id"], "superseded_by": later["decision_id"]})) == sup

        got = structured(await s.call_tool("get_decision", {"decision_id": child["decision_id"]}))
        assert got["decision"] == child
        assert got["correction_chain"] == [child["decision_id"], fix["decision_id"]]
        assert got["standing_decision_id"] == later["decision_id"]
        top = structured(await s.call_tool("get_decision", {"decision_id": root["decision_id"]}))
        assert top["children"] == [child["decision_id"], fix["decision_id"], later["decision_id"]]

        tree = structured(await s.call_tool("plan_tree", {"plan_id": plan}))
        assert tree["total"] == 4 and tree["next_cursor"] is None
        assert [n["decision_id"] for n in tree["nodes"]] == [
            root["decision_id"], child["decision_id"], fix["decision_id"], later["decision_id"]]
        assert [n["level"] for n in tree["nodes"]] == [0, 1, 1, 1]
        assert [n["effective"] for n in tree["nodes"]] == [True, False, False, True]
        standing = structured(await s.call_tool("plan_tree", {"plan_id": plan, "effective_only": True}))
        assert [n["decision_id"] for n in standing["nodes"]] == [root["decision_id"], later["decision_id"]]

        plans = structured(await s.call_tool("list_plans", {"limit": 500}))
        mine = [p for p in plans["plans"] if p["plan_id"] == plan]
        assert [{k: p[k] for k in ["plan_id", "decisions", "first_sequence", "last_sequence", "goal"]} for p in mine] \
            == [{"plan_id": plan, "decisions": 4, "first_sequence": 0, "last_sequence": 10, "goal": "add rate limiting"}]

        # The resources hold the same decisions.
        templates = (await s.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {"dstore://decision/{decision_id}", "dstore://plan/{plan_id}"}
        one = (await s.read_resource(f"dstore://decision/{child['decision_id']}")).contents[0]
        assert json.loads(one.text) == child and one.mime_type == "application/json"
        lines = (await s.read_resource(f"dstore://plan/{plan}")).contents[0].text.splitlines()
        assert [json.loads(line)["sequence"] for line in lines] == [0, 1, 2, 10]
        assert f"dstore://plan/{plan}" in {str(r.uri) for r in (await s.list_resources()).resources}
    assert run("check", demo).returncode == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_lists_come_in_pages(transport, demo, serve):
    async with session_over(transport, demo, serve) as s:
        every = structured(await s.call_tool("list_plans", {}))["plans"]
        assert len(every) >= 2
        seen, cursor = [], None
        while True:
            args = {"limit": 1} | ({"cursor": cursor} if cursor else {})
            page = structured(await s.call_tool("list_plans", args))
            assert len(page["plans"]) == 1
            seen += page["plans"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == every

        plan = every[0]["plan_id"]
        whole = structured(await s.call_tool("plan_tree", {"plan_id": plan}))
        nodes, cursor = [], None
        while True:
            args = {"plan_id": plan, "limit": 2} | ({"cursor": cursor} if cursor else {})
            page = structured(await s.call_tool("plan_tree", args))
            nodes += page["nodes"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert nodes == whole["nodes"] and len(nodes) == whole["total"]
        # A larger limit is clamped, not refused.
        assert structured(await s.call_tool("plan_tree", {"plan_id": plan, "limit": 10_000}))["total"] == whole["total"]
        assert "cursor" in refusal(await s.call_tool("plan_tree", {"plan_id": plan, "cursor": "bogus"}))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_context_child_context_staleness_and_calibration(transport, demo, serve, tmp_path):
    files = graph_uris(demo, "file")
    async with session_over(transport, demo, serve) as s:
        ctx = structured(await s.call_tool("get_context", {"focus": [files[0]], "budget_tokens": 2000}))
        assert ctx["fragments"] and ctx["total_tokens"] <= 2000
        assert sum(f["tokens"] for f in ctx["fragments"]) == ctx["total_tokens"]
        assert ctx["fragments"][0]["uko_node"] == files[0]
        small = structured(await s.call_tool("get_context", {"focus": [files[0]], "budget_tokens": 50}))
        assert small["total_tokens"] <= 50 and small["dropped"] > 0
        # A relative path means the project:// node.
        if files[0].startswith("project://"):
            rel = files[0].removeprefix("project://")
            assert structured(await s.call_tool("get_context", {"focus": [rel], "budget_tokens": 2000})) == ctx
        both = structured(await s.call_tool("get_context", {
            "focus": [files[0]], "direction": "both", "breadth": 1, "depth": "SIGNATURES"}))
        assert both["fragments"]

        plans = structured(await s.call_tool("list_plans", {}))["plans"]
        made = None
        for p in plans:
            r = await s.call_tool("child_context", {"plan_id": p["plan_id"], "child_focus": [files[-1]],
                                                    "budget_tokens": 4000})
            if not r.is_error:
                made = structured(r)
                break
        assert made is not None, "a demo plan names resources of the graph"
        assert made["total_tokens"] <= 4000 and made["dropped"] >= 0

        node = graph_uris(demo, "class")[0]
        root = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "refactor", "confidence_score": 0.8,
            "observed": [node]}))
        stale = structured(await s.call_tool("stale_decisions", {"plan_id": root["plan_id"]}))
        assert stale == {"stale": [], "at_risk": [], "next_cursor": None}

        calibration = structured(await s.call_tool("calibration", {"group_by": "type"}))
        assert calibration["overall"]["count"] >= 1
        assert {g["key"] for g in calibration["groups"]} >= {"prompt_definition"}
        for g in calibration["groups"]:
            assert set(g) == {"key", "count", "mean_confidence", "held_rate", "brier", "ece"}

    # The node changes under the decision: it is stale now.
    nodes, edges = tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl"
    run("export-graph", demo, nodes, edges)
    changed = []
    for line in nodes.read_text().splitlines():
        n = json.loads(line)
        if n.get("uri") == node:
            n["version"] = "sha256:" + "0" * 64
            changed.append(json.dumps(n))
    assert changed, f"{node} is exported"
    nodes.write_text("\n".join(changed) + "\n")
    edges.write_text("")
    run("import-graph", demo, nodes, edges)
    async with session_over(transport, demo, serve) as s:
        stale = structured(await s.call_tool("stale_decisions", {"plan_id": root["plan_id"]}))
        [entry] = stale["stale"]
        assert entry["decision_id"] == root["decision_id"]
        [moved] = entry["resources"]
        assert moved["resource_id"] == node and moved["current_version"] == "sha256:" + "0" * 64
        assert moved["recorded_version"] != moved["current_version"]


BAD = [
    ({"decision_type": "strategy_choice", "chosen_option": "x"}, "plan_id"),
    ({"decision_type": 5, "chosen_option": "x"}, "decision_type"),
    ({"decision_type": "no_such_type", "chosen_option": "x", "plan_id": "@plan"}, "decision_type"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan", "confidence_score": 1.5},
     "confidence_score"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan", "colour": "red"}, "colour"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan",
      "parent_decision_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "parent"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan",
      "parent_decision_id": "@other"}, "plan"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan",
      "observed": ["class://NoSuchThing"]}, "class://NoSuchThing"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan", "parent_decision_id": "@root",
      "sequence": 0}, "sequence"),
    ({"chosen_option": "x", "plan_id": "@plan"}, "decision_type"),
    # The plan model: a plan's one root is its prompt_definition, which starts it.
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "@plan"}, "parent_decision_id"),
    ({"decision_type": "prompt_definition", "chosen_option": "x", "plan_id": "@plan"}, "prompt_definition already"),
    ({"decision_type": "strategy_choice", "chosen_option": "x", "plan_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "plan_id"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_input_is_refused_by_field_and_stores_nothing(transport, demo, serve):
    async with session_over(transport, demo, serve) as s:
        plans = structured(await s.call_tool("list_plans", {}))["plans"]
        plan, other = plans[0]["plan_id"], plans[1]["plan_id"]
        other_root = structured(await s.call_tool("plan_tree", {"plan_id": other}))["nodes"][0]["decision_id"]
        root = structured(await s.call_tool("plan_tree", {"plan_id": plan}))["nodes"][0]["decision_id"]
        before = decision_count(demo)
        names = {"@plan": plan, "@other": other_root, "@root": root}
        for args, named in BAD:
            args = {k: names.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
            text = refusal(await s.call_tool("record_decision", args))
            assert named in text, (args, text)
        for tool, args, named in [
            ("get_decision", {"decision_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            ("get_decision", {"decision_id": "not-a-ulid"}, "decision_id"),
            ("get_decision", {}, "decision_id"),
            ("supersede_decision", {"decision_id": other_root, "superseded_by": other_root}, "superseded_by"),
            ("plan_tree", {"plan_id": plan, "limit": "ten"}, "limit"),
            ("plan_tree", {"plan_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            ("get_context", {"focus": ["class://NoSuchThing"]}, "class://NoSuchThing"),
            ("get_context", {"focus": []}, "focus"),
            ("get_context", {"focus": "class://A"}, "focus"),
            ("get_context", {"focus": [graph_uris(demo)[0]], "direction": "sideways"}, "direction"),
            ("child_context", {"plan_id": plan, "child_focus": ["class://NoSuchThing"]}, "class://NoSuchThing"),
            ("calibration", {"group_by": "colour"}, "group_by"),
            ("stale_decisions", {"plan_id": 7}, "plan_id"),
        ]:
            text = refusal(await s.call_tool(tool, args))
            assert named in text, (tool, args, text)
        # Still serving, and nothing was stored.
        assert structured(await s.call_tool("list_plans", {}))["plans"] == plans
    assert decision_count(demo) == before
    assert run("check", demo).returncode == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_read_only_serves_the_read_tools_alone(transport, demo, serve):
    async with session_over(transport, demo, serve, read_only=True) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == TOOLS - WRITES
        assert structured(await s.call_tool("list_plans", {}))["plans"]
        with pytest.raises(MCPError) as e:
            await s.call_tool("record_decision", {"decision_type": "prompt_definition", "chosen_option": "x"})
        assert e.value.code == -32602 and "record_decision writes, and this server is read-only" in e.value.message


async def test_an_unknown_tool_is_a_protocol_error(demo, serve):
    async with session_over("stdio", demo, serve) as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("no_such_tool", {})
        assert e.value.code == -32602
        assert structured(await s.call_tool("list_plans", {}))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_what_agents_expect_of_a_memory_server(transport, demo, serve):
    async with session_over(transport, demo, serve) as s:
        # The instruction text of docs/agents.md, as a prompt.
        [prompt] = (await s.list_prompts()).prompts
        got = await s.get_prompt(prompt.name)
        text = got.messages[0].content.text
        assert text.startswith("You have a decision store") and "record_decision" in text
        docs = (ROOT / "docs" / "agents.md").read_text()
        quoted = "\n".join(line[2:] if line.startswith("> ") else line.lstrip(">") for line in docs.splitlines())
        assert text in quoted, "the prompt is the instruction text of docs/agents.md"

        # Plans have goals and times, newest first, and a filter by the goal's words.
        old = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "migrate the billing tables"}))
        new = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "speed up the search page"}))
        plans = structured(await s.call_tool("list_plans", {}))["plans"]
        assert [p["plan_id"] for p in plans[:2]] == [new["plan_id"], old["plan_id"]]
        assert plans[0]["goal"] == "speed up the search page" and plans[0]["started_at"].endswith("Z")
        found = structured(await s.call_tool("list_plans", {"query": "Billing TABLES"}))["plans"]
        assert [p["plan_id"] for p in found] == [old["plan_id"]]
        recent = await s.read_resource("dstore://plans/recent")
        listed = json.loads(recent.contents[0].text)["plans"]
        assert listed[0]["plan_id"] == new["plan_id"] and listed[0]["goal"] == "speed up the search page"

        # A decision replaced in one call, and its time in the answer.
        first = structured(await s.call_tool("record_decision", {
            "plan_id": new["plan_id"], "parent_decision_id": new["decision_id"],
            "decision_type": "strategy_choice", "chosen_option": "cache the results"}))
        second = structured(await s.call_tool("record_decision", {
            "plan_id": new["plan_id"], "parent_decision_id": new["decision_id"],
            "decision_type": "strategy_choice", "chosen_option": "add an index", "supersedes": first["decision_id"]}))
        got = structured(await s.call_tool("get_decision", {"decision_id": first["decision_id"]}))
        assert got["standing_decision_id"] == second["decision_id"]
        assert got["decision"]["superseded_by"] == second["decision_id"]
        assert got["made_at"].endswith("Z") and got["made_at"][:4].isdigit()
        # Superseding what is superseded already stores nothing.
        before = decision_count(demo)
        text = refusal(await s.call_tool("record_decision", {
            "plan_id": new["plan_id"], "parent_decision_id": new["decision_id"],
            "decision_type": "strategy_choice", "chosen_option": "shard", "supersedes": first["decision_id"]}))
        assert "already superseded" in text
        assert decision_count(demo) == before


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_same_field_limits_on_every_transport(transport, demo, serve):
    before = decision_count(demo)
    async with session_over(transport, demo, serve) as s:
        text = refusal(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "x" * 10_001}))
        assert "chosen_option" in text and "at most 10000" in text, text
        text = refusal(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "ok",
            "alternatives": [{"option": "fine"}, {"option": "y" * 10_001}]}))
        assert "alternatives[1].option" in text, text
        # At the limit: stored.
        ok = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "z" * 10_000}))
        assert len(ok["chosen_option"]) == 10_000
    assert decision_count(demo) == before + 1


def test_a_message_over_4_mib_on_stdio_is_refused_and_the_server_goes_on(demo):
    import subprocess
    from conftest import binary
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    huge = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"pad": "x" * (5 << 20)}})
    done = subprocess.run([binary(), "mcp", str(demo)], input=f"{init}\n{huge}\n", capture_output=True,
                          text=True, timeout=60)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["id"] == 1 and "result" in answers[0]
    assert answers[1]["error"]["code"] == -32600 and "4194304 bytes" in answers[1]["error"]["message"]
