#!/usr/bin/env bash
# Ledger benchmarks as a table: durable append at 1/64/1024 events per block, and
# verify over a 1 GiB log against raw blake3 of the same bytes (one run, one process).
# AF_BENCH_LOG_MIB=N sets the log size (default 1024). Needs ~2x that in free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench ledger
rm -rf target/bench-data
