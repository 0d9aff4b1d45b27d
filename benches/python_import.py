"""Importing 100,000 decisions from Python, three ways, on the same data:

- `decision_store`: Store.insert_many(dicts) through this crate's Python package;
- `dstore import`: the command line on the JSON Lines file;
- a pydantic + sqlite3 reference: how a Python agent stores decisions today
  (a pydantic model validates each dict, one table with JSON text columns,
  executemany in one transaction, WAL).

Usage (after `pip install ./python pydantic`):
    python benches/python_import.py [DECISIONS.jsonl]
(by default the bench workload, target/bench-data/v2/decisions.jsonl, which
`cargo bench --bench store` or `target/release/examples/floor gen` writes).
Supersession links are left out of all three: insert_many, like a Python
agent, stores each decision once and links them with supersede().
"""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import pydantic

import decision_store as ds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Alternative(pydantic.BaseModel):
    option: str
    rationale: Optional[str] = None


class ResourceRef(pydantic.BaseModel):
    resource_id: str
    resource_type: Optional[str] = None
    version: Optional[str] = None


class Snapshot(pydantic.BaseModel):
    hash: str = ""
    resources: List[ResourceRef] = []
    actor_state_ref: Optional[str] = None


class Artifact(pydantic.BaseModel):
    artifact_path: str
    content_hash: Optional[str] = None


class DecisionModel(pydantic.BaseModel):
    """The seeds' decision, as pydantic declares it."""

    decision_id: str
    plan_id: str
    parent_decision_id: Optional[str] = None
    sequence: int
    decision_type: str
    chosen_option: str = ""
    rationale: str = ""
    confidence_score: Optional[float] = pydantic.Field(default=None, ge=0.0, le=1.0)
    alternatives: List[Alternative] = []
    context_snapshot: Snapshot = Snapshot()
    artifacts_produced: List[Artifact] = []
    is_correction: bool = False
    corrects_decision_id: Optional[str] = None
    superseded_by: Optional[str] = None
    downstream_decision_ids: List[str] = []
    downstream_plan_ids: List[str] = []
    metadata: Dict[str, Any] = {}


def reference(rows: List[Dict[str, Any]], path: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE decisions (decision_id TEXT PRIMARY KEY, plan_id TEXT, parent_decision_id TEXT,"
        " sequence INTEGER, decision_type TEXT, chosen_option TEXT, rationale TEXT, confidence_score REAL,"
        " alternatives TEXT, context_snapshot TEXT, artifacts_produced TEXT, is_correction INTEGER,"
        " corrects_decision_id TEXT, downstream_decision_ids TEXT, downstream_plan_ids TEXT, metadata TEXT)"
    )
    values = []
    for row in rows:
        d = DecisionModel.model_validate(row)
        values.append((
            d.decision_id, d.plan_id, d.parent_decision_id, d.sequence, d.decision_type, d.chosen_option,
            d.rationale, d.confidence_score, json.dumps([a.model_dump() for a in d.alternatives]),
            d.context_snapshot.model_dump_json(), json.dumps([a.model_dump() for a in d.artifacts_produced]),
            d.is_correction, d.corrects_decision_id, json.dumps(d.downstream_decision_ids),
            json.dumps(d.downstream_plan_ids), json.dumps(d.metadata),
        ))
    with conn:
        conn.executemany("INSERT INTO decisions VALUES (" + ",".join("?" * 16) + ")", values)
    conn.close()


def timed(f) -> float:
    # Each run starts with no dirty pages of the runs before it waiting to
    # be written: otherwise the kernel's writeback lands on whichever way
    # runs next (all three write about 300 MB).
    os.sync()
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main() -> None:
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/bench-data/v2/decisions.jsonl")
    with open(source) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        row.pop("superseded_by", None)
    n = len(rows)
    dstore = os.path.join(ROOT, "target/release/dstore")
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "decisions.jsonl")
        with open(plain, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        runs = {"decision_store insert_many": [], "dstore import": [], "pydantic + sqlite3": []}
        for i in range(3):
            def lib():
                with ds.Store.open(os.path.join(tmp, f"lib{i}.db")) as store:
                    store.insert_many(rows)
            runs["decision_store insert_many"].append(timed(lib))
            runs["dstore import"].append(timed(lambda: subprocess.run(
                [dstore, "import", os.path.join(tmp, f"cli{i}.db"), plain], check=True, capture_output=True)))
            runs["pydantic + sqlite3"].append(timed(lambda: reference(rows, os.path.join(tmp, f"ref{i}.db"))))
    best = {k: min(v) for k, v in runs.items()}
    cli = best["dstore import"]
    print(f"| way ({n:,} decisions, best of 3) | time | decisions/s | rate vs dstore import |")
    print("|---|---|---|---|")
    for name, t in best.items():
        print(f"| {name} | {t:.2f} s | {n / t:,.0f} | {cli / t:.2f}x |")
    ratio = best["pydantic + sqlite3"] / best["decision_store insert_many"]
    print(f"\ninsert_many against pydantic + sqlite3: {ratio:.2f}x the rate")


if __name__ == "__main__":
    main()
