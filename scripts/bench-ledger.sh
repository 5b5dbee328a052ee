#!/usr/bin/env bash
# Ledger benchmarks as a table: durable append at 1/64/1024 events per block, and
# verify over a 1 GiB log against raw blake3 of the same bytes (one run, one process);
# then `af ledger verify` through the CLI at 1, 2, 4, ... threads up to the machine's
# cores against b3sum of the same store file (scripts/bench-verify-cli.sh).
# AF_BENCH_LOG_MIB=N sets the log size (default 1024). Needs ~2x that in free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench ledger
rm -rf target/bench-data
command -v b3sum >/dev/null || cargo install b3sum --locked
cargo build --release --locked
scripts/bench-verify-cli.sh
