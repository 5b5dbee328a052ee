#!/usr/bin/env bash
# The journeys of a new operator, auditor and miner, run as the README tells them, against
# a devnet on loopback. Each step checks what a user would look at: exit codes, the
# answers of health and metrics (metrics linted by promtool), the subnet pages, and that
# every file af writes is taken back by the command that reads it.
# Usage: scripts/journeys.sh [AF_BINARY]   (default target/debug/af)
set -euo pipefail
AF=${1:-target/debug/af}
AF=$(realpath "$AF")
WORK=$(mktemp -d)
NODE=""
cleanup() { [ -n "$NODE" ] && kill "$NODE" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
step() { echo "journey: $*"; }
fail() { echo "journey FAILED: $*" >&2; exit 1; }
expect_code() { # expect_code CODE what... -- command
    local want=$1; shift
    local what=$1; shift
    set +e; "$@" > "$WORK/out" 2> "$WORK/err"; local got=$?; set -e
    [ "$got" = "$want" ] || fail "$what: exit $got, expected $want: $(tail -c 400 "$WORK/err")"
}
# get URL: the whole body into $WORK/body. A pipe into `grep -q` would close early on a
# match and fail curl (exit 23) under pipefail whenever the body outgrows the pipe buffer.
get() { curl -fsS -o "$WORK/body" "$1"; }

# --- Operator: the devnet, then a node over one validator's data, probed as Prometheus would.
step "operator: af devnet --rounds 2"
expect_code 0 "the devnet" "$AF" devnet --data "$WORK/dev" --rounds 2 --json
DATA="$WORK/dev/v0"
expect_code 0 "ledger verify" "$AF" ledger verify --data "$DATA"
expect_code 0 "peers after the devnet stopped" "$AF" peers --data "$DATA"
grep -q "no node is running" "$WORK/err" || fail "af peers shows a stopped node's status as if it ran"
"$AF" node --data "$DATA" --listen /ip4/127.0.0.1/tcp/0 --http 127.0.0.1:0 > "$WORK/node.out" 2> "$WORK/node.err" &
NODE=$!
for _ in $(seq 100); do [ -s "$DATA/http.addr" ] && break; sleep 0.1; done
BASE=$(cat "$DATA/http.addr")
step "operator: node at $BASE"
get "${BASE}healthz" && grep -qx ok "$WORK/body" || fail "healthz is not ok"
curl -fsS "${BASE}metrics" > "$WORK/metrics.txt"
grep -q '^# TYPE af_games_total counter' "$WORK/metrics.txt" || fail "metrics are not the classic text format"
if command -v promtool >/dev/null; then
    promtool check metrics < "$WORK/metrics.txt" || fail "promtool finds the metrics malformed"
fi
for page in subnet miners matches history; do
    get "${BASE}${page}.html" && grep -q '<nav>' "$WORK/body" || fail "${page}.html is not served"
done
get "${BASE}af/v1/live" && grep -q '"role":"node"' "$WORK/body" || fail "the live answer does not call an af node a node"
for _ in $(seq 50); do [ -s "$DATA/status.json" ] && break; sleep 0.1; done
expect_code 0 "peers of a running node" "$AF" peers --data "$DATA"

# --- Auditor: a mirror from the URL a browser shows, then the audit.
step "auditor: mirror, verify, audit"
expect_code 0 "mirror from a URL ending in af/v1/" "$AF" mirror --from "${BASE}af/v1/" --data "$WORK/audit" --json
expect_code 0 "verify the mirror" "$AF" ledger verify --data "$WORK/audit"
expect_code 0 "audit the mirror" "$AF" audit --data "$WORK/audit" --report "$WORK/report.html"
grep -q "uid" "$WORK/report.html" || fail "the report names no uid"
expect_code 0 "publish the mirror" "$AF" ledger publish --data "$WORK/audit" --out "$WORK/site"
[ -s "$WORK/site/subnet.html" ] || fail "publish wrote no subnet page"

# --- Miner: its transcripts in every format, each verified offline.
MINER=$("$AF" audit --data "$WORK/audit" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"]["champion"]["hotkey"])')
step "miner: $MINER"
"$AF" transcripts --data "$WORK/audit" --miner "$MINER" --json > "$WORK/mine.json"
"$AF" transcripts --data "$WORK/audit" --miner "$MINER" --jsonl > "$WORK/mine.jsonl"
expect_code 0 "verify --json output" "$AF" transcripts verify "$WORK/mine.json"
expect_code 0 "verify --jsonl output" "$AF" transcripts verify "$WORK/mine.jsonl"
expect_code 0 "the text view" "$AF" transcripts --data "$WORK/audit" --miner "$MINER" --result win
grep -q "^match " "$WORK/out" || fail "the text view has no match header"
expect_code 1 "an env that does not exist" "$AF" transcripts --data "$WORK/audit" --miner "$MINER" --env nosuch

kill -INT "$NODE"
set +e; wait "$NODE"; CODE=$?; set -e
NODE=""
[ "$CODE" = 130 ] || fail "af node stopped with $CODE, expected 130"
echo "journeys: operator, auditor and miner passed"
