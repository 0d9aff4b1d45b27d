#!/usr/bin/env python3
"""Round trips of the MCP tools, over stdio and HTTP (issue 26's figures).

    cargo build --release --bin dstore --example insert_loop --example mcp_load
    python3 benches/mcp.py [--calls 2000] [--tree PATH]

The client speaks raw JSON-RPC (a line on a pipe; HTTP/1.1 with keep-alive)
so that the figures are the server's, not a client library's. It reports:

- record_decision over stdio and over HTTP, one client: p50 and p99;
- the rate that 8 concurrent HTTP clients sustain, against one client
  calling `Store::insert` in a loop in process (examples/insert_loop.rs)
  on the same kind of file. Twice: with 8 Python threads (a connection
  each, one interpreter), and with 8 lean agents in Rust
  (examples/mcp_load.rs). On two cores the clients take CPU from the
  server: the Python threads as much as the server itself, the lean
  agents little, as agents on other hosts would;
- get_context at 4,000 tokens over stdio on an ingested tree (this
  repository by default): p50 and p99.
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = os.environ.get("DSTORE_BIN", str(ROOT / "target" / "release" / "dstore"))
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(i, name, args):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def ms(ns):
    return f"{ns / 1e6:.3f} ms"


class Stdio:
    def __init__(self, db):
        self.p = subprocess.Popen([BIN, "mcp", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.ask(INIT)
        self.tell(INITED)

    def tell(self, msg):
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def ask(self, msg):
        self.tell(msg)
        reply = json.loads(self.p.stdout.readline())
        assert "result" in reply and not reply["result"].get("isError"), reply
        return reply["result"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


class Http:
    def __init__(self, host, port, path):
        self.c = http.client.HTTPConnection(host, port, timeout=60)
        self.path = path
        self.version = self.ask(INIT)["protocolVersion"]
        self.tell(INITED)

    def post(self, msg):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if getattr(self, "version", None):
            headers["MCP-Protocol-Version"] = self.version
        self.c.request("POST", self.path, json.dumps(msg), headers)
        r = self.c.getresponse()
        return r.status, r.read()

    def tell(self, msg):
        status, _ = self.post(msg)
        assert status == 202, status

    def ask(self, msg):
        status, body = self.post(msg)
        assert status == 200, (status, body)
        reply = json.loads(body)
        assert "result" in reply and not reply["result"].get("isError"), reply
        return reply["result"]


def serve(db):
    p = subprocess.Popen([BIN, "serve", str(db), "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"http://([\d.]+):(\d+)(/mcp)", line)
    assert m, line
    return p, (m.group(1), int(m.group(2)), m.group(3))


def record_loop(client, n):
    root = client.ask(call(1, "record_decision", {"decision_type": "prompt_definition", "chosen_option": "bench"}))
    root = root["structuredContent"]
    times = []
    for i in range(n):
        args = {"plan_id": root["plan_id"], "parent_decision_id": root["decision_id"],
                "decision_type": "strategy_choice", "chosen_option": f"option {i}", "confidence_score": 0.5,
                "rationale": "a rationale of a realistic length for a decision that an agent records"}
        t = time.perf_counter_ns()
        client.ask(call(i + 2, "record_decision", args))
        times.append(time.perf_counter_ns() - t)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--tree", default=str(ROOT), help="the tree to ingest for get_context")
    ap.add_argument("--focus", default="src/store/mod.rs")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())

    s = Stdio(tmp / "stdio.db")
    t = record_loop(s, a.calls)
    s.close()
    print(f"record_decision, stdio, 1 client: p50 {ms(pct(t, 50))}  p99 {ms(pct(t, 99))}  ({a.calls} calls)")

    p, (host, port, path) = serve(tmp / "http.db")
    t = record_loop(Http(host, port, path), a.calls)
    print(f"record_decision, HTTP, 1 client:  p50 {ms(pct(t, 50))}  p99 {ms(pct(t, 99))}  ({a.calls} calls)")

    per = a.calls // 8
    clients = [Http(host, port, path) for _ in range(8)]
    barrier = threading.Barrier(9)
    lat: list[list[int]] = [[] for _ in clients]

    def run(k):
        barrier.wait()
        lat[k] = record_loop(clients[k], per)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    barrier.wait()
    start = time.perf_counter()
    for th in threads:
        th.join()
    wall = time.perf_counter() - start
    every = [x for l in lat for x in l]
    rate = 8 * (per + 1) / wall
    print(f"record_decision, HTTP, 8 Python clients: {rate:,.0f} calls/s  p50 {ms(pct(every, 50))}  "
          f"p99 {ms(pct(every, 99))}")
    p.terminate()
    p.wait(timeout=30)

    p, (host, port, path) = serve(tmp / "lean.db")
    load = ROOT / "target" / "release" / "examples" / "mcp_load"
    out = subprocess.run([str(load), f"{host}:{port}", "8", str(per)], capture_output=True, text=True, check=True)
    lean, *lat = out.stdout.split()
    lean, lat = float(lean), [int(x) * 1000 for x in lat]
    print(f"record_decision, HTTP, 8 lean clients:   {lean:,.0f} calls/s  p50 {ms(pct(lat, 50))}  "
          f"p99 {ms(pct(lat, 99))}")
    p.terminate()
    p.wait(timeout=30)

    loop = ROOT / "target" / "release" / "examples" / "insert_loop"
    out = subprocess.run([str(loop), str(tmp / "loop.db"), str(a.calls)], capture_output=True, text=True, check=True)
    inproc = float(out.stdout.split()[0])
    print(f"Store::insert in a loop, in process: {inproc:,.0f} decisions/s  "
          f"(8 Python clients: {rate / inproc:.2f}x, 8 lean clients: {lean / inproc:.2f}x)")

    db = tmp / "tree.db"
    subprocess.run([BIN, "ingest", str(db), a.tree], check=True, capture_output=True)
    s = Stdio(db)
    times = []
    for i in range(50):
        t0 = time.perf_counter_ns()
        r = s.ask(call(i + 1, "get_context", {"focus": [a.focus], "budget_tokens": 4000}))
        times.append(time.perf_counter_ns() - t0)
    s.close()
    total = r["structuredContent"]["total_tokens"]
    print(f"get_context 4,000 tokens on {a.tree} ({a.focus}, {total} tokens): "
          f"p50 {ms(pct(times, 50))}  p99 {ms(pct(times, 99))}")


if __name__ == "__main__":
    sys.exit(main())
