#!/usr/bin/env bash
# The explorer at a subnet's scale: one miner with 1,024 matches over 64 logs (64
# validators, 16 matches each; benches/explorer_site.rs writes and publishes the site),
# then headless Chromium opens its first page, a page deep in its history, one match and
# a page of 20 entries from 20 logs: seconds to every proof checked, requests, bytes
# fetched and JS heap, as a table (scripts/explorer-bench.py). Needs /usr/bin/chromium
# and Playwright (installed into target/spec-venv if missing, as .ci/run does).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=target/spec-venv/bin/python
if ! "$PY" -c 'import playwright, blake3' 2>/dev/null; then
    python3 -m venv target/spec-venv
    "$PY" -m pip install --quiet --disable-pip-version-check -r scripts/spec-check-requirements.txt \
        -r scripts/page-check-requirements.txt
fi
cargo bench --locked --bench explorer_site > target/explorer-site.json
"$PY" scripts/explorer-bench.py target/explorer-site.json
rm -rf target/bench-data/explorer-site
