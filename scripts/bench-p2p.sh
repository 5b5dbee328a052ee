#!/usr/bin/env bash
# Network benchmarks on loopback: block propagation to 8 validators (p50/p99) and the
# catch-up throughput of a validator joining 100,000 events late.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench p2p
