"""The client configuration in docs/agents.md, as written there, reaches the
store: the JSON blocks are read from the page, their path, URL and token
swapped for this test's, and the official SDK connects with them."""

import json
import re

import pytest

from conftest import ROOT, binary, http_session, structured

pytestmark = pytest.mark.anyio

TOOLS = 9


def configs() -> list[dict]:
    page = (ROOT / "docs" / "agents.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", page, re.S)
    found = [json.loads(b)["mcpServers"]["decisions"] for b in blocks if '"mcpServers"' in b]
    assert len(found) == 2, "docs/agents.md shows a stdio and an HTTP configuration"
    return found


async def test_the_stdio_configuration_of_the_docs_works(demo):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    [stdio, _] = configs()
    assert stdio["command"] == "dstore" and stdio["args"][0] == "mcp"
    args = [demo if a.endswith(".db") else a for a in stdio["args"]]
    async with stdio_client(StdioServerParameters(command=binary(), args=args)) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            assert len((await s.list_tools()).tools) == TOOLS
            plans = structured(await s.call_tool("list_plans", {}))["plans"]
            assert len(plans) == 2


async def test_the_http_configuration_of_the_docs_works(demo, serve, tmp_path):
    [_, http] = configs()
    assert http["type"] == "http" and http["url"].endswith("/mcp")
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    server = serve(demo, "--token-file", token)
    auth = http["headers"]["Authorization"].replace("<the token>", "t0ken")
    async with http_session(server.url, headers={"Authorization": auth}) as s:
        assert len((await s.list_tools()).tools) == TOOLS
        root = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "configured as the docs say"}))
        tree = structured(await s.call_tool("plan_tree", {"plan_id": root["plan_id"]}))
        assert [n["decision_id"] for n in tree["nodes"]] == [root["decision_id"]]


ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def session() -> list[tuple[str, dict, str]]:
    """The example session of docs/agents.md: (tool, arguments, the answer's text)."""
    page = (ROOT / "docs" / "agents.md").read_text()
    block = page.split("## An example session", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    calls = []
    for line in block.splitlines():
        if line.startswith("  -> "):
            calls[-1][2] = line[len("  -> "):]
        elif line.strip():
            tool, args = line.split(" ", 1)
            calls.append([tool, json.loads(args), None])
    return [tuple(c) for c in calls]


async def test_the_example_session_of_the_docs_is_what_the_tools_answer(demo):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    calls = session()
    assert len(calls) >= 6
    ids: dict[str, str] = {}  # the page's ids -> this run's
    async with stdio_client(StdioServerParameters(command=binary(), args=["mcp", str(demo)])) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            for tool, args, shown in calls:
                args = json.loads(ULID.sub(lambda m: ids.get(m.group(), m.group()), json.dumps(args)))
                result = await s.call_tool(tool, args)
                text = result.content[0].text
                # New ids differ: the page's stand for the ones this run made, in order.
                for page_id, new_id in zip(ULID.findall(shown), ULID.findall(text)):
                    ids.setdefault(page_id, new_id)
                assert ULID.sub(lambda m: ids.get(m.group(), m.group()), shown) == text, (tool, args)
