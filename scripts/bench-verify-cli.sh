#!/usr/bin/env bash
# `af ledger verify` end to end through the CLI (open and page-checksum pass included) at
# 1, 2, 4, ... threads up to this machine's cores, over a compacted demo store of
# AF_BENCH_LOG_MIB MiB of blocks (default 1024), beside b3sum of the same store file on
# one thread and on every core. Prints a table: wall seconds (median of 3), speed-up over
# 1 thread, the serial fraction each speed-up implies (Amdahl), and the ratios to b3sum.
# AF_BIN and B3SUM name the binaries (defaults: target/release/af, b3sum on PATH);
# AF_BIN_BEFORE, if set, is another af build timed beside it on the same store (a paired
# before/after in one run).
set -euo pipefail
cd "$(dirname "$0")/.."
AF=${AF_BIN:-target/release/af}
B3=${B3SUM:-b3sum}
MIB=${AF_BENCH_LOG_MIB:-1024}
CORES=$(nproc)
if ! command -v "$B3" >/dev/null; then
  echo "b3sum not found: cargo install b3sum --locked (or set B3SUM)" >&2
  exit 2
fi
mkdir -p target/bench-data
dir=$(mktemp -d target/bench-data/verify-cli.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$AF" ledger demo --data "$dir" --blocks "$MIB" --events-per-block 1024 --blocks-per-commit 16 --json >/dev/null
"$AF" ledger compact --data "$dir" >/dev/null
file="$dir/ledger.redb"
file_bytes=$(stat -c %s "$file")

# Wall seconds of a command, median of three (after one warm-up run: the file is then in
# the page cache for every figure alike).
median3() {
  "$@" >/dev/null 2>&1 || true
  local runs=()
  for _ in 1 2 3; do
    local start end
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    end=$(date +%s%N)
    runs+=("$(( (end - start) / 1000 ))")
  done
  printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p | awk '{ printf "%.3f", $1 / 1e6 }'
}

b3_one=$(median3 "$B3" --num-threads 1 "$file")
b3_all=$(median3 "$B3" "$file")
threads=()
t=1
while [ "$t" -lt "$CORES" ]; do threads+=("$t"); t=$((t * 2)); done
threads+=("$CORES")

echo "## af ledger verify through the CLI, $MIB blocks of 1,024 events, store file $((file_bytes / 1048576)) MiB compacted, $CORES cores"
echo
echo "| threads | seconds | speed-up over 1 | serial fraction (Amdahl) | x b3sum 1 thread | x b3sum all cores | before, seconds |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
one=""
for t in "${threads[@]}"; do
  s=$(median3 "$AF" ledger verify --data "$dir" --threads "$t" --json)
  before="-"
  [ -n "${AF_BIN_BEFORE:-}" ] && before=$(median3 "$AF_BIN_BEFORE" ledger verify --data "$dir" --threads "$t" --json)
  [ -z "$one" ] && one=$s
  awk -v t="$t" -v s="$s" -v one="$one" -v b1="$b3_one" -v ba="$b3_all" -v before="$before" 'BEGIN {
    up = one / s
    f = (t > 1) ? sprintf("%.3f", (t / up - 1) / (t - 1)) : "-"
    printf "| %d | %.3f | %.2fx | %s | %.2fx | %.2fx | %s |\n", t, s, up, f, s / b1, s / ba, before
  }'
done
echo
echo "b3sum --num-threads 1: $b3_one s; b3sum on $CORES cores: $b3_all s (the same file)"
