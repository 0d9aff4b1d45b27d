#!/usr/bin/env bash
# Context-quality benchmark (co-change recall; see benches/context_quality.rs):
# this repository's history and two releases each of requests, flask and rich,
# fetched from PyPI as source distributions into target/bench-data/pypi.
#
#   benches/context_quality.sh          # prints the table BENCHMARKS.md shows
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=target/bench-data/pypi
mkdir -p "$DATA"
for spec in requests==2.31.0 requests==2.32.3 flask==2.3.3 flask==3.0.0 rich==13.6.0 rich==13.7.0; do
    name=${spec%%==*}; version=${spec##*==}
    [ -d "$DATA/$name-$version" ] && continue
    pip download --quiet --no-deps --no-binary :all: --dest "$DATA" "$spec"
    tar -xzf "$DATA/$name-$version.tar.gz" -C "$DATA"
done
# requests moved under src/ in 2.32.
cargo bench --bench context_quality -- \
    git:. \
    "releases:$DATA/requests-2.31.0/requests:$DATA/requests-2.32.3/src/requests" \
    "releases:$DATA/flask-2.3.3/src/flask:$DATA/flask-3.0.0/src/flask" \
    "releases:$DATA/rich-13.6.0/rich:$DATA/rich-13.7.0/rich"
