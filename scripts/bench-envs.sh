#!/usr/bin/env bash
# Environment benchmarks as a table: challenges generated and scored per second, one core.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench envs
