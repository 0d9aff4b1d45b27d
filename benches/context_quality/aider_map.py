#!/usr/bin/env python
"""Aider's real repository map as a baseline server for benches/context_quality.rs.

Runs Aider's own `aider.repomap.RepoMap` (aider-chat==0.86.2, see
requirements-aider.txt and setup-aider.sh) offline, one query per line:

    python aider_map.py [--cache-dir DIR] [--verbose]

Protocol: JSON Lines. Each request on stdin is one object

    {"root": "/abs/checkout", "focus": "rel/path.py", "budget": 2000,
     "files": ["rel/a.py", ...],   # optional candidates; default `git ls-files`
                                   # (or a walk of the tree when ROOT has no .git)
     "native": false,              # optional: Aider's own budget rule, see below
     "id": ...}                    # optional, echoed back

and each reply on stdout is one line:

    {"files": [...],            # files shown in the map, in Aider's rank order
     "files_with_defs": [...],  # those shown with at least one code line, rank order
     "tokens": N,               # exact cl100k_base count of the map text
     "seconds": t,              # wall time of the query (file listing, tags, ranking,
                                # rendering, strict re-fits)
     ...}                       # diagnostics: budget, internal_target, fallback,
                                # n_candidates, tags_parsed, aider_version
or {"error": "..."}.

The focus file is Aider's one chat file; every other candidate is an "other file"
for the map; no mentioned files or identifiers. The focus never counts in `files`.

Budget. Aider's binary search accepts any map within 15% of `map_tokens`, judged by a
sampled token estimate, so its maps often exceed the budget by a few percent. By
default (strict) the query is re-fitted with a lower internal target until the
exact count is <= budget; the ranking is computed once per query and only Aider's
own search over the ranked tags is repeated. `"native": true` reports Aider's map
for `map_tokens = budget` as it is.

Caches. One RepoMap per root directory lives as long as the server, as it would in
an Aider session, so its tags cache (keyed by absolute path + mtime, as Aider does)
and its rendering caches carry over from one query to the next: moving a checkout
forward with `git checkout` re-parses only the files git rewrote (a tree laid anew
by `git archive | tar -x` gives every file the commit's time, so every file is
parsed again). With --cache-dir the tags cache is a diskcache directory per root
under DIR (kept across runs); without it, an in-memory dict. Nothing is written
into the root.

Determinism: the process re-executes itself with PYTHONHASHSEED=0 (Aider orders
tag-less files through a set), and tree-sitter's captures are put in source order
(their order varies between processes, and with it the tags Aider derives from
them). No network: tiktoken's cl100k_base is read from the copy litellm ships.
"""

import os
import sys

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("AIDER_ANALYTICS", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "TIKTOKEN_CACHE_DIR" not in os.environ:
    import importlib.util

    _spec = importlib.util.find_spec("litellm")
    if _spec and _spec.submodule_search_locations:
        _d = os.path.join(
            list(_spec.submodule_search_locations)[0], "litellm_core_utils", "tokenizers"
        )
        if os.path.isdir(_d):
            os.environ["TIKTOKEN_CACHE_DIR"] = _d

import argparse  # noqa: E402
import contextlib  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

try:
    import tiktoken
    from aider import __version__ as AIDER_VERSION
    from aider.repomap import CACHE_VERSION, RepoMap, Tag
except ImportError as _err:
    sys.exit(
        f"aider_map.py: {_err}: run it with the venv's python that"
        " benches/context_quality/setup-aider.sh makes (target/aider-venv/bin/python)"
    )


# Bumped whenever this script changes the tags it caches (see _run_captures).
TAGS_FORMAT = 1


class TiktokenModel:
    """Stand-in for aider.models.Model: RepoMap only calls token_count(text)."""

    def __init__(self, name="cl100k_base"):
        self.enc = tiktoken.get_encoding(name)

    def token_count(self, text):
        if not isinstance(text, str):
            text = json.dumps(text)
        return len(self.enc.encode(text, disallowed_special=()))


class QuietIO:
    """Stand-in for aider.io.InputOutput: read_text and tool_* messages."""

    encoding = "utf-8"

    def __init__(self, verbose=False):
        self.verbose = verbose

    def read_text(self, filename, silent=False):
        try:
            with open(str(filename), "r", encoding=self.encoding) as f:
                return f.read()
        except (OSError, UnicodeError) as err:
            if not silent:
                self.tool_error(f"{filename}: {err}")
            return None

    def tool_output(self, *msgs, **kw):
        if self.verbose:
            print(*msgs, file=sys.stderr)

    tool_warning = tool_error = tool_output


class BenchRepoMap(RepoMap):
    """Aider's RepoMap with its tags cache outside the mapped tree, the ranking
    memoized within one query (for strict re-fits), and the rendered maps' tags
    recorded (to tell which files were shown with code lines)."""

    def __init__(self, *a, tags_cache_dir=None, **kw):
        self._tags_cache_dir = tags_cache_dir
        # tags_cache_error() rebuilds Path(root) / TAGS_CACHE_DIR: an absolute path
        # keeps that outside the root too.
        self.TAGS_CACHE_DIR = os.path.abspath(tags_cache_dir or "/nonexistent/aider-tags")
        self._trees = {}
        self._ranked_memo = None
        self.tags_parsed = 0
        super().__init__(*a, **kw)

    def load_tags_cache(self):
        if self._tags_cache_dir:
            from diskcache import Cache

            self.TAGS_CACHE = Cache(self._tags_cache_dir)
        else:
            self.TAGS_CACHE = dict()

    def _run_captures(self, query, node):
        # Tree-sitter hands a capture's nodes over in an order that varies from one
        # process to the next (seen for TypeScript and JavaScript). Aider's get_tags_raw
        # yields the last node of each capture name twice, so the tags themselves, not
        # only their order, varied between cold runs. Source order makes them stable.
        caps = super()._run_captures(query, node)
        return {
            name: sorted(nodes, key=lambda n: (n.start_byte, n.end_byte))
            for name, nodes in sorted(caps.items())
        }

    def get_tags_raw(self, fname, rel_fname):
        self.tags_parsed += 1
        return super().get_tags_raw(fname, rel_fname)

    def get_ranked_tags(self, chat_fnames, other_fnames, mentioned_fnames, mentioned_idents,
                        progress=None):
        key = (tuple(sorted(chat_fnames)), tuple(sorted(other_fnames)))
        if self._ranked_memo is not None and self._ranked_memo[0] == key:
            return list(self._ranked_memo[1])
        ranked = super().get_ranked_tags(
            chat_fnames, other_fnames, mentioned_fnames, mentioned_idents, progress
        )
        self._ranked_memo = (key, list(ranked))
        return ranked

    def to_tree(self, tags, chat_rel_fnames):
        out = super().to_tree(tags, chat_rel_fnames)
        self._trees[out] = list(tags)
        return out


def list_files(root):
    """Aider's candidates: git-tracked files; without .git, every file in the tree."""
    if os.path.exists(os.path.join(root, ".git")):
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True
        ).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    rels = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != ".git")
        for f in files:
            rels.append(os.path.relpath(os.path.join(d, f), root))
    return rels


class Server:
    def __init__(self, cache_dir=None, verbose=False):
        self.cache_dir = os.path.abspath(cache_dir) if cache_dir else None
        self.verbose = verbose
        self.model = TiktokenModel()
        self.maps = {}  # root -> BenchRepoMap

    def repo_map(self, root):
        rm = self.maps.get(root)
        if rm is None:
            tags_dir = None
            if self.cache_dir:
                h = hashlib.sha1(root.encode("utf-8", "surrogateescape")).hexdigest()[:16]
                tags_dir = os.path.join(
                    self.cache_dir, f"tags-aider{AIDER_VERSION}-v{CACHE_VERSION}.{TAGS_FORMAT}-{h}"
                )
                os.makedirs(tags_dir, exist_ok=True)
                with open(os.path.join(tags_dir, "ROOT"), "w") as f:
                    f.write(root + "\n")
            rm = BenchRepoMap(
                map_tokens=1024,
                root=root,
                main_model=self.model,
                io=QuietIO(self.verbose),
                repo_content_prefix=None,  # the map text only, no preamble
                verbose=False,
                max_context_window=None,  # no x8 "no chat files" multiplier
                map_mul_no_files=1,
                refresh="always",  # no map cache: every query is computed
                tags_cache_dir=tags_dir,
            )
            self.maps[root] = rm
        return rm

    def run_once(self, rm, chat_abs, other_abs, target):
        """One map as Aider's Coder.get_repo_map makes it (with its fallbacks)."""
        rm._trees.clear()
        rm.max_map_tokens = target
        text = rm.get_repo_map(chat_abs, other_abs, set(), set(), force_refresh=True)
        fallback = False
        if not text:
            fallback = True
            text = rm.get_repo_map(set(), chat_abs | other_abs, set(), set(),
                                   force_refresh=True)
        return text or "", fallback

    def query(self, req):
        t0 = time.perf_counter()
        root = os.path.realpath(req["root"])
        if not os.path.isdir(root):
            raise ValueError(f"root is not a directory: {root}")
        budget = int(req["budget"])
        if budget <= 0:
            raise ValueError("budget must be positive")
        focus = os.path.normpath(req["focus"])
        focus_abs = os.path.join(root, focus)
        if not os.path.isfile(focus_abs):
            raise ValueError(f"focus is not a file under root: {focus}")
        native = bool(req.get("native", False))
        rels = req.get("files")
        if rels is None:
            rels = list_files(root)
        rels = sorted({os.path.normpath(r) for r in rels} - {focus})
        chat_abs = {focus_abs}
        other_abs = {os.path.join(root, r) for r in rels}

        rm = self.repo_map(root)
        rm._ranked_memo = None
        parsed0 = rm.tags_parsed
        sink = io.StringIO()
        with contextlib.redirect_stderr(sys.stderr if self.verbose else sink):
            target = budget
            text, fallback = self.run_once(rm, chat_abs, other_abs, target)
            tokens = self.model.token_count(text)
            refits = 0
            while not native and tokens > budget and target > 1 and refits < 30:
                refits += 1
                target = max(1, min(target - 1, int(target * budget / tokens)))
                text, fallback = self.run_once(rm, chat_abs, other_abs, target)
                tokens = self.model.token_count(text)
        rm._ranked_memo = None

        tags = rm._trees.get(text, [])
        ranked, with_defs, seen = [], set(), set()
        for t in tags:
            f = t[0]
            if f == focus:
                continue
            if f not in seen:
                seen.add(f)
                ranked.append(f)
            if isinstance(t, Tag):
                with_defs.add(f)
        return {
            "files": ranked,
            "files_with_defs": [f for f in ranked if f in with_defs],
            "tokens": tokens,
            "seconds": round(time.perf_counter() - t0, 4),
            "budget": budget,
            "native": native,
            "internal_target": target,
            "fallback": fallback,
            "n_candidates": len(other_abs),
            "tags_parsed": rm.tags_parsed - parsed0,
            "aider_version": AIDER_VERSION,
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", help="persistent tags caches, one per root (outside roots)")
    ap.add_argument("--verbose", action="store_true", help="Aider's messages on stderr")
    args = ap.parse_args()

    # stdout carries the protocol only: anything else that writes to fd 1 (Aider's
    # spinner, prints from libraries) goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    server = Server(args.cache_dir, args.verbose)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rid = None
        try:
            req = json.loads(line)
            rid = req.get("id") if isinstance(req, dict) else None
            res = server.query(req)
        except Exception as err:  # one bad query must not end the server
            if args.verbose:
                traceback.print_exc()
            res = {"error": f"{type(err).__name__}: {err}"}
        if rid is not None:
            res["id"] = rid
        out.write(json.dumps(res, ensure_ascii=False) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
