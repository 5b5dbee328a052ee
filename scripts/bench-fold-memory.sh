#!/usr/bin/env bash
# What a replay's folds hold per match, and what a replay with nothing new costs, as a
# table: synthetic networks of 4 validators playing 250 and 1,250 matches, replayed from
# genesis, the live heap counted by the benchmark's own allocator; the difference per
# match and per validator's chain; then the same replayed as a validator does, each
# log's matches spilled to a match file. AF_BENCH_AUDIT_PAGE_MIB=N runs the first part
# (an audit's replay) with an N MiB page cache for its file instead of `CacheSize::AUDIT`'s.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench fold_memory
rm -rf target/bench-data
