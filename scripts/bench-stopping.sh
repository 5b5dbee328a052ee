#!/usr/bin/env bash
# Sample efficiency of the stopping rules: P(dethrone) and expected decisive games for
# true win rates 0.5-0.9, exact (dynamic program) beside a seeded simulation.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench stopping
