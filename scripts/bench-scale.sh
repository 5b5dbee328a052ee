#!/usr/bin/env bash
# The network at a subnet's scale: the seeded simulator with 16 and 64 validators, then
# 16 real node processes on loopback writing MINUTES (default 60) of subnet traffic
# (a block of two 5-60 kB transcripts every 12 s per validator, compressed 48x) while one
# validator is down, and that validator's catch-up. Prints bytes against the minimum,
# propagation p50/p99, catch-up time and peak RSS per validator.
set -euo pipefail
cd "$(dirname "$0")/.."
AF_SCALE_MINUTES="${1:-60}" cargo bench --locked --bench scale
