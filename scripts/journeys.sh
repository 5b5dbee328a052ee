#!/usr/bin/env bash
# The journeys of a new operator, auditor and miner, run as README.md and docs/ tell them, against
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
# The devnet's state hash, as `af audit` prints it, recomputed from its logs by
# ledger-spec/14 alone (scripts/spec-check.py; SPEC_PY names a Python with its needs).
if [ -n "${SPEC_PY:-}" ]; then
    step "auditor: the devnet's state hash by the spec alone"
    "$AF" ledger export --data "$DATA" --format blocks > "$WORK/dev.afblocks"
    expect_code 0 "audit the devnet" "$AF" audit --data "$DATA" --json
    cp "$WORK/out" "$WORK/dev-audit.json"
    "$SPEC_PY" "$(dirname "$0")/spec-check.py" --replay "$WORK/dev.afblocks" "$WORK/dev-audit.json" \
        || fail "spec-check recomputes another state hash than af audit's for the devnet"
fi
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
# A static site links nothing it cannot answer, and its commands run as printed.
! grep -q 'af/v1/transcripts?' "$WORK/site/matches.html" || fail "the published matches page links an API a static site lacks"
COMMAND=$(grep -o 'af transcripts --data DIR --miner [^<]*' "$WORK/site/matches.html" | head -1)
[ -n "$COMMAND" ] || fail "the matches page prints no transcripts command"
read -r -a WORDS <<< "${COMMAND/DIR/$WORK/audit}"
expect_code 0 "the page's command, as printed" "$AF" "${WORDS[@]:1}"
grep -q 'data-log=' "$WORK/site/miners.html" || fail "the miners page does not say whose tallies it shows"
grep -q 'class="score"' "$WORK/site/miners.html" || fail "the miners page has no scores"
grep -Eq 'vtrust">[0-9]+\.[0-9]%' "$WORK/report.html" || fail "the report's vTrust is not in percent like the pages"

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
# Re-scoring straight from an export's JSON lines: the challenge and the miner pick one.
"$AF" ledger export --data "$WORK/audit" --format jsonl > "$WORK/all.jsonl"
CHALLENGE=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    t = json.loads(l)["event"].get("transcript")
    if t and t["miner"]["hotkey"] == sys.argv[2]: print(t["challenge_id"]); break' "$WORK/all.jsonl" "$MINER")
expect_code 1 "several transcripts, none picked" "$AF" env score --transcript "$WORK/all.jsonl"
grep -q "pass --challenge-id" "$WORK/err" || fail "env score does not say how to pick a transcript"
expect_code 0 "env score of an export line" "$AF" env score --transcript "$WORK/all.jsonl" --challenge-id "$CHALLENGE" --miner "$MINER"
grep -q "equals the reward the log recorded" "$WORK/out" || fail "the re-score does not compare with the log"

# --- Recovery: a store emptied behind the validator's back is never signed on, and a
# damaged one is salvaged.
step "operator: an emptied store, a damaged store"
cp -r "$WORK/audit" "$WORK/own" && "$AF" key generate --out "$WORK/own/validator.key" > /dev/null
expect_code 0 "init over the copy" "$AF" ledger init --data "$WORK/own"
expect_code 0 "our first block" "$AF" ledger demo --data "$WORK/own" --blocks 2 --events-per-block 1
"$AF" ledger export --data "$WORK/own" --format blocks > "$WORK/own.afblocks"
: > "$WORK/own/ledger.redb"
expect_code 1 "a writer on an emptied store" "$AF" ledger demo --data "$WORK/own" --blocks 1 --events-per-block 1
grep -q "equivocation" "$WORK/err" || fail "the refusal does not say why"
expect_code 0 "the import the refusal names" "$AF" ledger import --data "$WORK/own" --file "$WORK/own.afblocks"
expect_code 0 "writing again once the chain is back" "$AF" ledger demo --data "$WORK/own" --blocks 1 --events-per-block 1
python3 - "$WORK/audit/ledger.redb" <<'PY'
import os, sys
path = sys.argv[1]
size = os.path.getsize(path)
with open(path, "r+b") as f:
    f.seek(size // 2 // 4096 * 4096)
    f.write(bytes(4096))
PY
set +e; "$AF" ledger salvage --data "$WORK/audit" --out "$WORK/salvaged.afblocks" > "$WORK/out" 2> "$WORK/err"; CODE=$?; set -e
case "$CODE" in
    0|3) expect_code 0 "import what salvage saved" "$AF" ledger import --data "$WORK/fresh" --file "$WORK/salvaged.afblocks"
         expect_code 0 "verify the salvaged store" "$AF" ledger verify --data "$WORK/fresh" ;;
    1) grep -q "af mirror" "$WORK/err" || fail "salvage that saved nothing does not say what to do" ;;
    *) fail "salvage exited $CODE: $(tail -c 400 "$WORK/err")" ;;
esac

kill -INT "$NODE"
set +e; wait "$NODE"; CODE=$?; set -e
NODE=""
[ "$CODE" = 130 ] || fail "af node stopped with $CODE, expected 130"
echo "journeys: operator, auditor and miner passed"
