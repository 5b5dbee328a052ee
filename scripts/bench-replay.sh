#!/usr/bin/env bash
# Replay benchmark as a table: full replay with re-scoring of a 1,000,000-event log from
# 4 validators, and verification alone, at 1, 2, 4, ... threads up to the machine's
# cores (speed-up and the serial fraction it implies), next to blake3 over the same
# bytes in memory on one thread and on every core, in the same run; and the incremental
# fold of one new 1,024-event block. AF_BENCH_EVENTS=N sets the
# log size. Needs about 2 GiB of free disk under target/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench replay
rm -rf target/bench-data
