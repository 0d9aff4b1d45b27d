"""`dstore serve` for many agents, and the protocol's edges on both transports."""

import json
import os
import selectors
import signal
import subprocess
import threading
import time

import anyio
import httpx2
import pytest
from mcp import MCPError

from conftest import Served, binary, decision_count, decision_ids, http_session, run, structured

pytestmark = pytest.mark.anyio

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def new_plan(s) -> tuple[str, str]:
    root = structured(await s.call_tool("record_decision", {
        "decision_type": "prompt_definition", "chosen_option": "shared plan"}))
    return root["plan_id"], root["decision_id"]


async def test_eight_agents_append_to_one_plan_without_collisions(store, serve):
    db = store
    server = serve(db)
    async with http_session(server.url) as s:
        plan, root = await new_plan(s)
    results: list[dict] = []

    async def agent(n):
        async with http_session(server.url) as s:
            for i in range(50):
                d = structured(await s.call_tool("record_decision", {
                    "plan_id": plan, "parent_decision_id": root, "decision_type": "strategy_choice",
                    "chosen_option": f"agent {n} step {i}", "confidence_score": 0.5}))
                results.append(d)

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(agent, n)
    assert len(results) == 400
    sequences = [d["sequence"] for d in results]
    assert len(set(sequences)) == 400 and 0 not in sequences
    async with http_session(server.url) as s:
        tree = structured(await s.call_tool("plan_tree", {"plan_id": plan, "limit": 500}))
        assert tree["total"] == 401
        assert {n["decision_id"] for n in tree["nodes"]} == {d["decision_id"] for d in results} | {root}
    assert run("check", db).returncode == 0


def post(url, body, headers=None) -> httpx2.Response:
    return httpx2.post(url, content=body, headers={**HEADERS, **(headers or {})}, timeout=30)


async def test_a_token_is_required_when_set(demo, serve, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("  s3cret-token\n")
    server = serve(demo, "--token-file", token_file)
    init = json.dumps(INIT)
    assert post(server.url, init).status_code == 401
    assert post(server.url, init, {"Authorization": "Bearer wrong"}).status_code == 401
    assert post(server.url, init, {"Authorization": "s3cret-token"}).status_code == 401
    assert post(server.url, init, {"Authorization": "Bearer s3cret-token"}).status_code == 200
    refused = False
    try:
        async with http_session(server.url, token="wrong") as s:
            await s.list_tools()
    except* MCPError:
        refused = True  # the SDK's word for a 401 answer (-32603, the status is not kept)
    assert refused
    async with http_session(server.url, token="s3cret-token") as s:
        assert structured(await s.call_tool("list_plans", {}))["plans"]
    # DSTORE_TOKEN does the same.
    by_env = serve(demo, env={"DSTORE_TOKEN": "from-env"})
    assert post(by_env.url, init).status_code == 401
    assert post(by_env.url, init, {"Authorization": "Bearer from-env"}).status_code == 200


def test_a_token_a_cookie_cannot_keep_is_refused_at_start(demo, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("semi;colon")
    done = run("serve", demo, "--listen", "127.0.0.1:0", "--token-file", token_file, check=False)
    assert done.returncode == 2 and "cookie" in done.stderr and "';'" in done.stderr, done.stderr


def test_listening_beyond_loopback_needs_a_token(demo, tmp_path):
    done = subprocess.run([binary(), "serve", str(demo), "--listen", "0.0.0.0:0"],
                          capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                                          if k != "DSTORE_TOKEN"})
    assert done.returncode == 2 and "token" in done.stderr
    done = run("serve", demo, "--listen", "nonsense", check=False)
    assert done.returncode == 2 and "--listen" in done.stderr
    missing = run("mcp", tmp_path / "none" / "x.db", "--read-only", check=False)
    assert missing.returncode != 0 and missing.stderr


async def test_other_origins_are_refused(demo, serve):
    server = serve(demo)
    init = json.dumps(INIT)
    for origin in ["http://evil.example", "null", "http://localhost.evil.example", "https://10.0.0.1"]:
        assert post(server.url, init, {"Origin": origin}).status_code == 403, origin
    for origin in ["http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]"]:
        assert post(server.url, init, {"Origin": origin}).status_code == 200, origin


async def test_a_body_over_4_mib_is_refused(demo, serve):
    server = serve(demo)
    big = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_plans","arguments":{"x":"' \
        + b"a" * (5 << 20) + b'"}}}'
    assert post(server.url, big).status_code == 413

    def chunks():
        for i in range(0, len(big), 1 << 16):
            yield big[i:i + 1 << 16]

    assert httpx2.post(server.url, content=chunks(), headers=HEADERS, timeout=30).status_code == 413
    # And it serves on.
    assert post(server.url, json.dumps(INIT)).status_code == 200


async def test_malformed_messages_get_protocol_errors_and_the_server_goes_on(demo, serve):
    server = serve(demo)
    bad = post(server.url, b"{oops")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32700
    assert post(server.url, json.dumps(INIT)).status_code == 200

    # stdio: a line that is not JSON, then one that is not JSON-RPC, then a good one.
    p = subprocess.Popen([binary(), "mcp", str(demo)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        replies = stdio_exchange(p, [
            json.dumps(INIT),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            "{not json",
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ], expect=3)
        by_id = {r["id"]: r for r in replies}
        assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
        assert by_id[None]["error"]["code"] == -32700
        assert len(by_id[2]["result"]["tools"]) == 9
    finally:
        p.stdin.close()
        assert p.wait(timeout=30) == 0


def stdio_exchange(p, lines, expect, timeout=30):
    """Writes `lines`, then reads `expect` JSON lines from stdout, within `timeout` seconds."""
    for line in lines:
        p.stdin.write(line.encode() + b"\n")
    p.stdin.flush()
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    deadline, buf, out = time.monotonic() + timeout, b"", []
    while len(out) < expect:
        left = deadline - time.monotonic()
        assert left > 0, f"only {out} within {timeout} s"
        if sel.select(timeout=left):
            chunk = os.read(p.stdout.fileno(), 1 << 16)
            assert chunk, f"stdout closed after {out}"
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                out.append(json.loads(line))
    return out


def test_sigterm_during_writes_keeps_every_acknowledged_decision(store):
    db = store
    server = Served(db)
    acknowledged: list[str] = []
    stop = threading.Event()

    def writer(n):
        async def go():
            try:
                async with http_session(server.url) as s:
                    plan, root = await new_plan(s)
                    acknowledged.append(root)
                    while not stop.is_set():
                        d = structured(await s.call_tool("record_decision", {
                            "plan_id": plan, "parent_decision_id": root, "decision_type": "strategy_choice",
                            "chosen_option": f"writer {n}"}))
                        acknowledged.append(d["decision_id"])
            except BaseException:
                pass  # the server went away mid-call: that call was not acknowledged

        anyio.run(go)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    # Wait until the writers are well under way (bounded), then stop the server.
    deadline = time.monotonic() + 60
    while len(acknowledged) < 100:
        assert time.monotonic() < deadline, f"only {len(acknowledged)} decisions in 60 s"
        time.sleep(0.01)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=60) == 0
    stop.set()
    for t in threads:
        t.join(timeout=60)
    print(f"{len(acknowledged)} decisions acknowledged before SIGTERM ended the server")
    stored = decision_ids(db)
    assert set(acknowledged) <= stored
    assert run("check", db).returncode == 0
    assert decision_count(db) >= len(acknowledged)
