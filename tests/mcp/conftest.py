"""Fixtures of the MCP suite: the `dstore` binary, stores, and servers.

The suite drives `dstore mcp` (stdio) and `dstore serve` (Streamable HTTP)
with the official Python MCP SDK as the client. It needs the binary that
`cargo test` builds (or DSTORE_BIN) and the `mcp` package; without either
it fails, saying which, rather than skipping.
"""

import json
import os
import queue
import re
import tempfile
import subprocess
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_report_header(config):
    return f"dstore: {binary()}"


def binary() -> str:
    path = os.environ.get("DSTORE_BIN") or str(ROOT / "target" / "debug" / "dstore")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no dstore binary at {path}: run `cargo build` first or set DSTORE_BIN", pytrace=False)
    return path


@pytest.fixture
def anyio_backend():
    return "asyncio"


def run(*args, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([binary(), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"dstore {' '.join(map(str, args))} exited {done.returncode}: {done.stderr}")
    return done


SERVER = os.environ.get("DSTORE_TEST_POSTGRES_URL")


def psql() -> str:
    """The psql of the newest PostgreSQL installed (scripts/pg-test-server's), or the one on PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), key=lambda p: int(p.parts[-3]))
    return str(found[-1]) if found else "psql"


@pytest.fixture(params=["file", "postgres"])
def store(request, tmp_path) -> str:
    """An empty store's target: a new file, or a new schema on the PostgreSQL
    server that DSTORE_TEST_POSTGRES_URL names (scripts/pg-test-server)."""
    if request.param == "file":
        yield str(tmp_path / "store.db")
        return
    if not SERVER:
        pytest.skip("DSTORE_TEST_POSTGRES_URL is not set (scripts/pg-test-server runs a server)")
    schema = f"mcp_{os.getpid()}_{time.monotonic_ns()}"
    subprocess.run([psql(), SERVER, "-q", "-c", f"CREATE SCHEMA {schema}"], check=True, capture_output=True)
    sep = "&" if "?" in SERVER else "?"
    yield f"{SERVER}{sep}options=-csearch_path%3D{schema}"
    subprocess.run([psql(), SERVER, "-q", "-c", f"DROP SCHEMA {schema} CASCADE"], check=True, capture_output=True)


@pytest.fixture
def demo(store, tmp_path) -> str:
    """The demo store (two plans and a code graph), in a file or on the server."""
    if store.startswith("postgres"):
        run("demo", tmp_path / "demo.db")
        run("copy", tmp_path / "demo.db", store)
    else:
        run("demo", store)
    return store


def graph_uris(target, kind: str | None = None) -> list[str]:
    """The URIs of the graph's nodes (of one kind), sorted."""
    with tempfile.TemporaryDirectory() as d:
        nodes = Path(d) / "nodes.jsonl"
        run("export-graph", target, nodes, Path(d) / "edges.jsonl")
        found = [json.loads(line) for line in nodes.read_text().splitlines()]
    return sorted(n["uri"] for n in found if kind is None or n["kind"] == kind)


def decision_ids(target) -> set[str]:
    """The ids of every stored decision."""
    return {json.loads(line)["decision_id"] for line in run("export", target).stdout.splitlines()}


def decision_count(target) -> int:
    return json.loads(run("info", target, "--format", "json").stdout)["decisions"]


class Served:
    """A `dstore serve` process and the URL it printed."""

    def __init__(self, db, *extra, env=None, command="serve"):
        self.lines: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(
            [binary(), command, str(db), "--listen", "127.0.0.1:0", *map(str, extra)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        threading.Thread(target=self._read, daemon=True).start()
        self.url = None
        # The web view's address, printed last (with ?token= when a token is set).
        self.web = None
        deadline = time.monotonic() + 60
        while self.web is None:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"dstore serve did not start: {self.stderr()}")
            try:
                line = self.lines.get(timeout=min(left, 1))
            except queue.Empty:
                continue
            m = re.search(r"at (http://\S+/mcp)", line)
            if m:
                self.url = m.group(1)
            m = re.search(r"open (http://\S+)", line)
            if m:
                self.web = m.group(1)

    def _read(self):
        for line in self.proc.stderr:
            self.lines.put(line)

    def stderr(self) -> str:
        out = []
        while not self.lines.empty():
            out.append(self.lines.get())
        return "".join(out)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def serve():
    started = []

    def start(db, *extra, env=None, command="serve") -> Served:
        s = Served(db, *extra, env=env, command=command)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@asynccontextmanager
async def session_over(transport: str, db: Path, serve=None, token=None, read_only=False, log=None):
    """A ClientSession with `dstore mcp` (stdio) or a `dstore serve` (http)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    flags = ["--read-only"] if read_only else []
    if transport == "stdio":
        params = StdioServerParameters(command=binary(), args=["mcp", str(db), *flags])
        errlog = open(log or os.devnull, "w")
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as s:
                    await s.initialize()
                    yield s
        finally:
            errlog.close()
        return
    server = serve if isinstance(serve, Served) else serve(db, *flags)
    async with http_session(server.url, token=token) as s:
        yield s


@asynccontextmanager
async def http_session(url, token=None, headers=None):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    http = httpx2.AsyncClient(headers=h, timeout=httpx2.Timeout(30.0, read=120.0))
    async with http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as s:
                await s.initialize()
                yield s


def structured(result):
    """The structured result of a successful call (failing with its text otherwise)."""
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    # The text for the model comes first, then the JSON of the result.
    assert json.loads(result.content[-1].text) == result.structured_content
    return result.structured_content


def refusal(result) -> str:
    """The message of a call refused as bad input."""
    assert result.is_error, result.structured_content
    return result.content[0].text
