#!/usr/bin/env bash
# The store on PostgreSQL beside the store in a SQLite file: the release
# `dstore`, whole process, on the same workload, median of RUNS (default 5).
#
#   benches/server.sh          # starts a throwaway server (scripts/pg-test-server)
#   benches/server.sh URL      # or uses the server at postgres://...
#
# Prints the import time (and rate), the plan's tree as JSON and a
# breadth-3 projection, for the file and the server.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}

if [ $# -eq 0 ]; then
    exec scripts/pg-test-server "$0" "${DSTORE_TEST_POSTGRES_URL:-from-the-server}"
fi
URL=$1
[ "$URL" = from-the-server ] && URL=$DSTORE_TEST_POSTGRES_URL

cargo build --release --quiet --bin dstore --example floor
DSTORE=$PWD/target/release/dstore
DATA=$("$PWD/target/release/examples/floor" gen)
PLAN=$(head -1 "$DATA/decisions.jsonl" | sed 's/.*"plan_id":"\([^"]*\)".*/\1/')
FOCUS=$(grep -m1 '"kind":"class"' "$DATA/nodes.jsonl" | sed 's/.*"uri":"\([^"]*\)".*/\1/')
DECISIONS=$(grep -c . "$DATA/decisions.jsonl")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

secs() {
    local start=$EPOCHREALTIME
    "$@" > /dev/null 2>&1 || { echo "server.sh: failed: $*" >&2; exit 1; }
    local end=$EPOCHREALTIME
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# A fresh schema on the server for each run: the URL with its own search path.
fresh_schema() {
    local name="bench_$1"
    psql -q "$URL" -c "DROP SCHEMA IF EXISTS $name CASCADE" -c "CREATE SCHEMA $name" > /dev/null 2>&1 ||
        { echo "server.sh: psql could not make schema $name on $URL" >&2; exit 1; }
    echo "$URL?options=-csearch_path%3D$name"
}
command -v psql > /dev/null || PATH=$PATH:$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)

echo "server.sh: $RUNS runs each; $DECISIONS decisions, plan $PLAN, focus $FOCUS" >&2
for _ in $(seq "$RUNS"); do
    rm -f "$WORK"/f.db*
    secs "$DSTORE" import "$WORK/f.db" "$DATA/decisions.jsonl" >> "$WORK/imp.file"
    S=$(fresh_schema import)
    secs "$DSTORE" import "$S" "$DATA/decisions.jsonl" >> "$WORK/imp.server"
done
S=$(fresh_schema read)
"$DSTORE" import "$S" "$DATA/decisions.jsonl" 2> /dev/null
"$DSTORE" import-graph "$S" "$DATA/nodes.jsonl" "$DATA/edges.jsonl" 2> /dev/null
"$DSTORE" import-graph "$WORK/f.db" "$DATA/nodes.jsonl" "$DATA/edges.jsonl" 2> /dev/null
for _ in $(seq "$RUNS"); do
    for where in file server; do
        db=$WORK/f.db; [ $where = server ] && db=$S
        secs "$DSTORE" tree "$db" "$PLAN" --format json >> "$WORK/tree.$where"
        secs "$DSTORE" project "$db" --focus "$FOCUS" --breadth 3 --depth 9 --format json >> "$WORK/proj.$where"
    done
done
[ "$("$DSTORE" export "$S" | md5sum)" = "$("$DSTORE" export "$WORK/f.db" | md5sum)" ] ||
    { echo "server.sh: the two stores differ" >&2; exit 1; }

ms() { awk '{ printf "%.0f ms", $1 * 1000 }'; }
rate() { awk -v n="$DECISIONS" '{ printf "%.1f s, %.0f decisions/s", $1, n / $1 }'; }
echo
echo "| whole process, median of $RUNS | SQLite file | PostgreSQL (local, 127.0.0.1) | server / file |"
echo "|---|---|---|---|"
for row in "import $DECISIONS decisions:imp:rate" "tree PLAN --format json:tree:ms" "project --breadth 3 --depth 9 --format json:proj:ms"; do
    IFS=: read -r name key fmt <<< "$row"
    f=$(median < "$WORK/$key.file"); s=$(median < "$WORK/$key.server")
    echo "| $name | $(echo "$f" | $fmt) | $(echo "$s" | $fmt) | $(awk -v a="$s" -v b="$f" 'BEGIN { printf "%.2fx", a / b }') |"
done
echo
echo "server: $("$DSTORE" info "$S" | grep 'postgres version')"
