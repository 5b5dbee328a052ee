#!/usr/bin/env bash
# The HTTP API under load: one validator plays the same match (same key, same miners,
# so the same challenges) twice against reference miners on loopback, first with no
# readers, then with N concurrent readers polling its API (scripts/http-readers.py).
# Prints the match's challenge throughput in both runs, their ratio, and what the
# readers got. The load generator runs under `nice -n 19`: on a 2-core machine its own
# CPU would otherwise be counted against the node. Usage: scripts/bench-http.sh [READERS] [PERIOD_S]  (defaults 200 and 1)
set -euo pipefail
cd "$(dirname "$0")/.."
READERS=${1:-200}
PERIOD=${2:-1}
cargo build --release --locked --bin af >/dev/null
AF=target/release/af
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

start_miner() { # policy; not in a subshell, so the trap can stop it
    "$AF" miner serve --listen 127.0.0.1:0 --policy "$1" --model m > "$WORK/miner-$1.out" 2>/dev/null &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q listening "$WORK/miner-$1.out" && break; sleep 0.05; done
}
url_of() { awk '{print $3; exit}' "$WORK/miner-$1.out"; }
start_miner noisy:0.45
start_miner noisy:0.44
CHAMPION=$(url_of noisy:0.45)
CONTENDER=$(url_of noisy:0.44)
cat > "$WORK/v.toml" <<TOML
[evaluation]
[[miners]]
hotkey = "5Champion"
uid = 0
base_url = "$CHAMPION"
model = "m"
[[miners]]
hotkey = "5Contender"
uid = 1
base_url = "$CONTENDER"
model = "m"
TOML
"$AF" key generate --out "$WORK/validator.key" >/dev/null

run() { # label readers -> "seconds transcripts reader-json"
    local data="$WORK/data-$1"
    mkdir -p "$data" && cp "$WORK/validator.key" "$data/validator.key"
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    local started ended readers=""
    started=$(date +%s.%N)
    "$AF" validate --data "$data" --config "$WORK/v.toml" --http "127.0.0.1:$port" --json > "$WORK/$1.json" 2>/dev/null &
    local validator=$!
    if [ "$2" -gt 0 ]; then
        for _ in $(seq 100); do [ -f "$data/http.addr" ] && break; sleep 0.05; done
        # The readers stand for clients on other machines: the load generator runs at the
        # lowest priority so that what is measured is the node's own cost of answering.
        nice -n 19 python3 scripts/http-readers.py "http://127.0.0.1:$port/" "$2" "$PERIOD" > "$WORK/$1.readers" &
        readers=$!
    fi
    wait "$validator"
    ended=$(date +%s.%N)
    if [ -n "$readers" ]; then kill -TERM "$readers"; wait "$readers" || true; fi
    local transcripts
    transcripts=$("$AF" ledger find --data "$data" --miner 5Contender --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    echo "$(python3 -c "print($ended - $started)") $transcripts $(cat "$WORK/$1.readers" 2>/dev/null || echo '{}')"
}
read -r S0 T0 _ <<< "$(run quiet 0)"
read -r S1 T1 R1 <<< "$(run loaded "$READERS")"
python3 - "$S0" "$T0" "$S1" "$T1" "$R1" "$READERS" "$PERIOD" <<'PY'
import json, sys
s0, t0, s1, t1 = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
readers = json.loads(sys.argv[5]); n, period = sys.argv[6], sys.argv[7]
print(f"| run | challenges | seconds | challenges/s |")
print(f"|---|---:|---:|---:|")
print(f"| no readers | {t0} | {s0:.2f} | {t0/s0:.1f} |")
print(f"| {n} readers, one request each per {period} s | {t1} | {s1:.2f} | {t1/s1:.1f} |")
print()
print(f"loaded/unloaded throughput: {(t1/s1)/(t0/s0):.3f} (target: at least 0.8)")
print(f"readers: {readers.get('requests', 0)} requests answered, {readers.get('errors', 0)} errors, "
      f"p50 {readers.get('p50_ms', 0):.1f} ms, p99 {readers.get('p99_ms', 0):.1f} ms")
PY
