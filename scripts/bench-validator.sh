#!/usr/bin/env bash
# Validator overhead against perfect reference miners on loopback: requests/s, latency and
# overhead percentiles, CPU per request, resident memory over the run.
# Usage: scripts/bench-validator.sh [SECONDS] [IN_FLIGHT]   (defaults 60 and 256; the
# issue's memory check is a 10-minute run: scripts/bench-validator.sh 600)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench validator -- --seconds "${1:-60}" --in-flight "${2:-256}"
