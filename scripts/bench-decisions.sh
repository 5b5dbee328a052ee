#!/usr/bin/env bash
# Decisions benchmark as tables, one run: the mixture plan of older logs against the score
# plan (default) on the same simulated games (common random numbers, 10,000 matches per
# cell, nine scenarios at ratio to beat 0.51 and 0.70); the score plan's exact per-env
# figures (worst false crown with adaptive drawers; median challenges at the bar and
# P(crowned) above it, with the futility stop: ledger-spec/02's table); its power curve
# (P(crowned) per match by points above the bar, exact, version 1 against the plan);
# never-worse improvers and copies with and without the dominance crown (exact); the bar
# a copy-and-patch sets and how long a broad improver then waits.
# AF_BENCH_MATCHES=N matches per cell, AF_BENCH_SEED=S,
# AF_BENCH_ONLY=simulated|exact|power|improvers|patches,
# or AF_BENCH_ONLY=candidates (not in the default run): futility stops compared exactly
# against issue 54's targets, over a grid of margins and mean margins (AF_BENCH_GRID=M:K,...
# in ppm for others). AF_BENCH_MARGIN_PPM / AF_BENCH_FUTILITY_ALPHA_PPM /
# AF_BENCH_MEAN_MARGIN_PPM (a number or `none`) try other futility parameters;
# AF_BENCH_MARGIN_PPM=65000 AF_BENCH_MEAN_MARGIN_PPM=none is the plan before issue 54.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench decisions
