#!/usr/bin/env bash
# Whole-process benchmark: the release `dstore` against the release floor
# (examples/floor.rs, the fastest simple rusqlite program doing the same
# work) on the same data, run alternately, median of RUNS (default 7).
#
#   benches/cli.sh             # on the standard workload (written once under target/bench-data)
#   benches/cli.sh DIR         # on gen.py's output: python3 gen.py --out DIR
#
# Prints one row per target with both medians and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}

cargo build --release --quiet --bin dstore --example floor
DSTORE=$PWD/target/release/dstore
FLOOR=$PWD/target/release/examples/floor
DATA=${1:-$("$FLOOR" gen)}
for f in decisions nodes edges; do
    [ -s "$DATA/$f.jsonl" ] || { echo "cli.sh: $DATA/$f.jsonl is missing" >&2; exit 2; }
done
PLAN=$(head -1 "$DATA/decisions.jsonl" | sed 's/.*"plan_id":"\([^"]*\)".*/\1/')
FOCUS=$(grep -m1 '"kind":"package"' "$DATA/nodes.jsonl" | sed 's/.*"uri":"\([^"]*\)".*/\1/')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Wall-clock seconds of one command, its output discarded.
secs() {
    local start=$EPOCHREALTIME
    "$@" > /dev/null 2>&1
    local end=$EPOCHREALTIME
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -a ROWS
row() { # name, dstore times file, floor times file, goal
    local d f
    d=$(median < "$2"); f=$(median < "$3")
    ROWS+=("$(awk -v n="$1" -v d="$d" -v f="$f" -v g="$4" 'function t(x) { return x < 1 ? sprintf("%.1f ms", x * 1000) : sprintf("%.3f s", x) }
        BEGIN { printf "| %s | %s | %s | %.2fx | %s |", n, t(d), t(f), d / f, g }')")
}

echo "cli.sh: $RUNS runs each on $DATA (plan $PLAN, focus $FOCUS)" >&2
# A store that already holds a decision: its import goes through the
# write-ahead log, as every write but the first load into an empty store.
head -1 "$DATA/decisions.jsonl" > "$WORK/one.jsonl"
: > "$WORK/imp.d"; : > "$WORK/imp.f"; : > "$WORK/imp.w"
for _ in $(seq "$RUNS"); do
    rm -f "$WORK"/d.db* "$WORK"/f.db* "$WORK"/w.db*
    "$DSTORE" import "$WORK/w.db" "$WORK/one.jsonl" 2> /dev/null
    # Each import starts with no dirty pages of the one before waiting to be written.
    sync
    secs "$DSTORE" import "$WORK/d.db" "$DATA/decisions.jsonl" >> "$WORK/imp.d"
    sync
    secs "$FLOOR" import "$WORK/f.db" "$DATA/decisions.jsonl" >> "$WORK/imp.f"
    sync
    secs "$DSTORE" import "$WORK/w.db" "$DATA/decisions.jsonl" >> "$WORK/imp.w"
done
row "import 100k decisions (time; the goal is on the rate)" "$WORK/imp.d" "$WORK/imp.f" "rate >= 0.80x the floor's: time <= 1.25x"
row "the same into a store holding one decision (through the log)" "$WORK/imp.w" "$WORK/imp.f" "(not a goal: shown for comparison)"
rm -f "$WORK"/w.db*

"$DSTORE" import-graph "$WORK/d.db" "$DATA/nodes.jsonl" "$DATA/edges.jsonl" 2> /dev/null
"$FLOOR" index "$WORK/f.db"
"$FLOOR" import-graph "$WORK/f.db" "$DATA/nodes.jsonl" "$DATA/edges.jsonl" 2> /dev/null

: > "$WORK/tree.d"; : > "$WORK/tree.f"; : > "$WORK/proj.d"; : > "$WORK/proj.f"
: > "$WORK/info.d"; : > "$WORK/plans.d"
for _ in $(seq "$RUNS"); do
    secs "$DSTORE" tree "$WORK/d.db" "$PLAN" --format json >> "$WORK/tree.d"
    secs "$FLOOR" tree "$WORK/f.db" "$PLAN" >> "$WORK/tree.f"
    secs "$DSTORE" project "$WORK/d.db" --focus "$FOCUS" --breadth 4 --depth 9 --format json >> "$WORK/proj.d"
    secs "$FLOOR" project "$WORK/f.db" "$FOCUS" 4 9 >> "$WORK/proj.f"
    secs "$DSTORE" info "$WORK/d.db" >> "$WORK/info.d"
    secs "$DSTORE" plans "$WORK/d.db" >> "$WORK/plans.d"
done
row "tree PLAN --format json" "$WORK/tree.d" "$WORK/tree.f" "<= 1.25x"
row "project --breadth 4 --depth 9 --format json" "$WORK/proj.d" "$WORK/proj.f" "<= 1.25x"

echo
echo "| whole process, median of $RUNS | dstore | floor | ratio | goal |"
echo "|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
printf '| info | %.0f ms | | | <= 50 ms |\n' "$(median < "$WORK/info.d" | awk '{ print $1 * 1000 }')"
printf '| plans | %.0f ms | | | <= 50 ms |\n' "$(median < "$WORK/plans.d" | awk '{ print $1 * 1000 }')"
echo
echo "nodes projected: $("$DSTORE" project "$WORK/d.db" --focus "$FOCUS" --breadth 4 --depth 9 --format json | grep -c '"uri"'); floor: $("$FLOOR" project "$WORK/f.db" "$FOCUS" 4 9 | wc -l)"
echo "tree lines: floor $("$FLOOR" tree "$WORK/f.db" "$PLAN" | wc -l) decisions"
