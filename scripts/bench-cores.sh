#!/usr/bin/env bash
# The many-core run of issue 55, as one script for a lent machine: `af ledger verify`
# through the CLI at 1, 2, 4, ... threads up to its cores (scripts/bench-verify-cli.sh),
# the replay benchmark's sweep, then `af audit` and `af ledger verify` through the CLI on
# the replay benchmark's store, each beside a build from before. Binaries come prebuilt
# (the machine may have no toolchain) in DIR (default target/device): af, af-before,
# replay (the `replay` bench binary: `cargo bench --no-run --bench replay`), b3sum; each
# may be gzipped. Tables go to OUT (default target/bench-cores) and stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
D=${DIR:-target/device}
OUT=${OUT:-target/bench-cores}
mkdir -p "$OUT"
for f in "$D"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$D/af" "$D/af-before" "$D/replay" "$D/b3sum"
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|L3"; grep -o -m1 "avx512f" /proc/cpuinfo; free -g | head -2; } > "$OUT/machine.txt" 2>&1
export B3SUM=$D/b3sum AF_BENCH_DIR=$PWD/target/bench-data
mkdir -p "$AF_BENCH_DIR"
# Wall seconds, median of three (a failed run is said on stderr).
med() {
  local r=()
  for _ in 1 2 3; do
    local s e rc
    s=$(date +%s%N); "$@" >/dev/null 2>&1; rc=$?; e=$(date +%s%N)
    [ $rc -le 1 ] || echo "rc $rc: $*" >&2
    r+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${r[@]}" | sort -n | sed -n 2p | awk '{printf "%.3f", $1/1e6}'
}
AF_BIN=$D/af AF_BIN_BEFORE=$D/af-before AF_BENCH_LOG_MIB=${MIB:-1024} scripts/bench-verify-cli.sh > "$OUT/verify.md" 2>&1
AF_BENCH_KEEP=1 "$D/replay" --bench > "$OUT/replay.md" 2> "$OUT/replay.err"
store=$(grep -o "store kept at .*" "$OUT/replay.err" | sed 's/store kept at //')
"$D/af" ledger compact --data "$store" >> "$OUT/replay.err" 2>&1
threads=""; t=1
while [ "$t" -lt "$(nproc)" ]; do threads="$threads $t"; t=$((t * 2)); done
threads="$threads $(nproc)"
{
  echo "## af audit and af ledger verify through the CLI on the replay benchmark's store, before and after, medians of 3"
  echo
  echo "| threads | audit before s | audit after s | verify before s | verify after s |"
  echo "|---:|---:|---:|---:|---:|"
  for t in $threads; do
    echo "| $t | $(med "$D/af-before" audit --data "$store" --threads "$t" --json) | $(med "$D/af" audit --data "$store" --threads "$t" --json) | $(med "$D/af-before" ledger verify --data "$store" --threads "$t" --json) | $(med "$D/af" ledger verify --data "$store" --threads "$t" --json) |"
  done
  for b in af-before af; do
    /usr/bin/time -f "$b audit, all cores: %e s, peak RSS %M KB" "$D/$b" audit --data "$store" --json >/dev/null
    /usr/bin/time -f "$b ledger verify, all cores: %e s, peak RSS %M KB" "$D/$b" ledger verify --data "$store" --json >/dev/null
  done
  echo "b3sum of that store file ($(stat -c %s "$store/ledger.redb") bytes, compacted): 1 thread $(med "$B3SUM" --num-threads 1 "$store/ledger.redb") s, all cores $(med "$B3SUM" "$store/ledger.redb") s"
} > "$OUT/audit.md" 2>&1
rm -rf "$store"
cat "$OUT/machine.txt" "$OUT/verify.md" "$OUT/replay.md" "$OUT/audit.md"
