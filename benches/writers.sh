#!/usr/bin/env bash
# Three writers on one store at full size (tests/it/writers.rs): while one
# process ingests a 700,000-line tree and another imports 1,000,000
# decisions, a third inserts one decision every 10 ms. On a file, then on a
# throwaway PostgreSQL server (scripts/pg-test-server). Release build;
# prints the waits of the single inserts (p50, p99, max) per backend.
#
#   benches/writers.sh                  # full size
#   DSTORE_WRITERS_LINES=100000 DSTORE_WRITERS_DECISIONS=100000 benches/writers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export DSTORE_WRITERS_LINES=${DSTORE_WRITERS_LINES:-700000}
export DSTORE_WRITERS_DECISIONS=${DSTORE_WRITERS_DECISIONS:-1000000}
export DSTORE_WRITERS_EVERY_MS=${DSTORE_WRITERS_EVERY_MS:-10}
scripts/pg-test-server cargo test --release --locked --quiet --test it -- --nocapture writers::three_writers
