#!/usr/bin/env bash
# Decisions benchmark as a table: model calls per match, P(crowned) and P(wrong crown) for
# today's default rule and the futility options, on the seven scenarios at ratio to beat
# 0.51 and 0.70, all in one run. AF_BENCH_MATCHES=N matches per cell (default 400),
# AF_BENCH_SEED=S.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench decisions
