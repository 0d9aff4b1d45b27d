#!/usr/bin/env bash
# Makes the venv that benches/context_quality/aider_map.py runs in: Aider's real
# RepoMap (aider-chat==0.86.2, requirements-aider.txt), ~700 MB, no torch.
#
#   benches/context_quality/setup-aider.sh      # venv at $AIDER_VENV or target/aider-venv
#   $AIDER_VENV/bin/python benches/context_quality/aider_map.py --cache-dir DIR
#
# The Python is $PYTHON, else the first of python3.12, python3.11, python3.10, python3
# that is >=3.10 and <3.13 (aider-chat's own bounds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
venv=${AIDER_VENV:-target/aider-venv}
req="$here/requirements-aider.txt"

fail() { echo "setup-aider.sh: $*" >&2; exit 1; }

if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$req" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
want = [l.split("==") for l in open(sys.argv[1]) if "==" in l and not l.startswith("#")]
sys.exit(0 if all(version(n.strip()) == v.strip() for n, v in want) else 1)
PY
    echo "setup-aider.sh: $venv already has $(grep -v '^#' "$req" | tr '\n' ' ')"
    exit 0
fi

py=${PYTHON:-}
if [ -z "$py" ]; then
    for c in python3.12 python3.11 python3.10 python3; do
        if command -v "$c" >/dev/null &&
            "$c" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] < (3, 13)))' 2>/dev/null; then
            py=$c
            break
        fi
    done
fi
[ -n "$py" ] || fail "no Python >=3.10,<3.13 found (aider-chat 0.86.2 needs one); set PYTHON=/path/to/python"
"$py" -c 'import venv, ensurepip' 2>/dev/null ||
    fail "$py cannot make a venv with pip (Debian: apt-get install python3-venv)"

echo "setup-aider.sh: making $venv with $("$py" --version 2>&1)"
"$py" -m venv "$venv" || fail "could not make the venv at $venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip ||
    fail "could not upgrade pip in $venv (no access to the package registry?)"
"$venv/bin/python" -m pip install --quiet -r "$req" ||
    fail "could not install $req into $venv (no access to the package registry?)"
# aider_map.py runs offline: cl100k_base must come from litellm's bundled copy.
TIKTOKEN_CACHE_DIR=$("$venv/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("litellm"); print(os.path.join(list(s.submodule_search_locations)[0], "litellm_core_utils", "tokenizers"))') \
    "$venv/bin/python" -c 'import tiktoken, aider.repomap; tiktoken.get_encoding("cl100k_base")' ||
    fail "installed, but aider.repomap or the bundled cl100k_base tokenizer does not load"
echo "setup-aider.sh: ready: $venv/bin/python benches/context_quality/aider_map.py"
