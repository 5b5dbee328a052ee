#!/usr/bin/env bash
# A chaos run: three validators on the stand-in chain (commit-reveal on) with four
# reference miners and a new contender every CONTENDER_EVERY seconds, while every
# CHAOS_EVERY seconds one validator, picked at random, is killed with SIGKILL, stopped
# with SIGINT, or frozen with SIGSTOP for a few seconds, and then restarted (or thawed).
# At the end every validator is stopped with SIGINT at once, and the run fails unless:
# every store verifies, every audit gives the same state hash (no copy by hand), no
# every audit is clean, no validator blocked a peer (every peer here is honest), and no
# process panicked.
#
# Usage: scripts/chaos.sh [MINUTES] (default 5)
# Environment: CHAOS_DIR (default /tmp/af-chaos, replaced), CHAOS_EVERY (default 12),
# CONTENDER_EVERY (default 15), CHAOS_SEED (default 1), AF (a built af binary to run
# instead of building this checkout's).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
every="${CHAOS_EVERY:-12}"
contender_every="${CONTENDER_EVERY:-15}"
dir="${CHAOS_DIR:-/tmp/af-chaos}"
RANDOM="${CHAOS_SEED:-1}"
n_validators=3

if [ -z "${AF:-}" ]; then
    cargo build --release --locked --bin af >&2
fi
rm -rf "$dir"
mkdir -p "$dir"
cp "${AF:-target/release/af}" "$dir/af"
af="$dir/af"
pids=()
cleanup() {
    for pid in "${pids[@]}" "${vpids[@]:-}"; do
        [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

first_line() {
    local file="$1"
    for _ in $(seq 100); do
        if [ -s "$file" ]; then head -n1 "$file"; return; fi
        sleep 0.1
    done
    echo "no output in $file" >&2
    exit 1
}

"$af" chain serve --data "$dir/chain" --listen 127.0.0.1:0 --block-ms 250 --tempo 20 >"$dir/chain.out" 2>"$dir/chain.log" &
pids+=($!)
chain_addr="$(first_line "$dir/chain.out" | sed 's/^listening on //')"
chain="local:$chain_addr"
curl -fsS -X POST -H 'content-type: application/json' \
    -d '{"commit_reveal_enabled":true,"rate_limit_blocks":8,"reveal_period_epochs":1}' \
    "http://$chain_addr/v1/subnets/1/settings" >/dev/null

policies=(perfect noisy:0.1 noisy:0.3 random)
urls=()
for i in "${!policies[@]}"; do
    "$af" miner serve --listen 127.0.0.1:0 --policy "${policies[$i]}" --model "${policies[$i]}" --seed "$i" \
        >"$dir/miner$i.out" 2>"$dir/miner$i.log" &
    pids+=($!)
    urls+=("$(first_line "$dir/miner$i.out" | awk '{print $3}')")
done
commit() {
    "$af" chain register --chain "$chain" --hotkey "$1" --json >/dev/null
    "$af" mine commit --chain "$chain" --hotkey "$1" --model "$2" --revision "$3" --endpoint "$4" --json >/dev/null
}

cat >"$dir/validator.toml" <<EOF
[evaluation]
cap = 200
max_challenges = 400
window = 8
[ledger]
block_max_events = 32
block_max_ms = 300
[client]
timeout_ms = 10000
[chain]
endpoint = "$chain"
netuid = 1
discover_every_ms = 500
EOF
for v in $(seq 0 $((n_validators - 1))); do
    "$af" chain register --chain "$chain" --hotkey "5ChaosValidator$v" --validator --json >/dev/null
done
commit 5ChaosMiner0 perfect r0 "${urls[0]}"
commit 5ChaosMiner1 noisy:0.1 r1 "${urls[1]}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
vpids=()
ports=()
start_validator() {
    local v="$1"
    AF_CHAIN__HOTKEY="5ChaosValidator$v" "$af" validate --data "$dir/v$v" --config "$dir/validator.toml" --serve \
        --listen "/ip4/127.0.0.$((2 + v))/tcp/${ports[$v]}" --json \
        >>"$dir/v$v/summary.json" 2>>"$dir/v$v/validate.log" &
    vpids[v]=$!
}
for v in $(seq 0 $((n_validators - 1))); do
    mkdir -p "$dir/v$v"
    "$af" ledger init --data "$dir/v$v" >/dev/null
    ports[v]="$(free_port)"
    start_validator "$v"
done

start=$(date +%s)
end=$((start + minutes * 60))
next_commit=$((start + contender_every))
next_chaos=$((start + every))
n=2
kills=0; interrupts=0; freezes=0
printf '%8s %3s %-8s %s\n' second v action detail
while [ "$(date +%s)" -lt "$end" ]; do
    now=$(date +%s)
    if [ "$now" -ge "$next_commit" ]; then
        i=$((n % 4))
        commit "5ChaosMiner$n" "${policies[$i]}" "r$n" "${urls[$i]}"
        n=$((n + 1))
        next_commit=$((next_commit + contender_every))
    fi
    if [ "$now" -ge "$next_chaos" ]; then
        v=$((RANDOM % n_validators))
        pause=$((1 + RANDOM % 4))
        pid="${vpids[$v]}"
        case $((RANDOM % 3)) in
            0)
                kill -9 "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
                kills=$((kills + 1))
                printf '%8s %3s %-8s %s\n' $((now - start)) "$v" kill "restart after ${pause} s"
                sleep "$pause"
                start_validator "$v"
                ;;
            1)
                kill -INT "$pid" 2>/dev/null || true
                # A clean stop takes at most its grace period and a match's last answer.
                for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                if kill -0 "$pid" 2>/dev/null; then
                    echo "validator $v did not stop within 30 s of SIGINT" >&2
                    exit 1
                fi
                wait "$pid" 2>/dev/null || true
                interrupts=$((interrupts + 1))
                printf '%8s %3s %-8s %s\n' $((now - start)) "$v" sigint "restart after ${pause} s"
                sleep "$pause"
                start_validator "$v"
                ;;
            2)
                kill -STOP "$pid" 2>/dev/null || true
                freezes=$((freezes + 1))
                printf '%8s %3s %-8s %s\n' $((now - start)) "$v" freeze "for $((pause * 2)) s"
                sleep $((pause * 2))
                kill -CONT "$pid" 2>/dev/null || true
                ;;
        esac
        next_chaos=$(($(date +%s) + every))
    fi
    for v in $(seq 0 $((n_validators - 1))); do
        if ! kill -0 "${vpids[$v]}" 2>/dev/null; then
            echo "validator $v exited by itself; see $dir/v$v/validate.log" >&2
            exit 1
        fi
    done
    sleep 1
done

# Every validator stops at once, cleanly; then the stores are read from disk.
for v in $(seq 0 $((n_validators - 1))); do kill -INT "${vpids[$v]}"; done
for v in $(seq 0 $((n_validators - 1))); do wait "${vpids[$v]}" || true; done
vpids=()
echo
failed=0
hashes=()
printf '%3s %8s %8s %8s %9s %8s %7s %s\n' v verify audit matches blocked warn panics state_hash
for v in $(seq 0 $((n_validators - 1))); do
    log="$dir/v$v/validate.log"
    verify=ok
    "$af" ledger verify --data "$dir/v$v" --json >"$dir/v$v/verify.json" 2>&1 || { verify=FAILED; failed=1; }
    # A crash, a stop or a freeze is no reason for a finding against anyone: the audit
    # must be clean (exit 0), not only agree.
    audit=clean
    "$af" audit --data "$dir/v$v" --json >"$dir/v$v/audit.json" 2>/dev/null || { audit=FINDINGS; failed=1; }
    hashes[v]="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state_hash"])' "$dir/v$v/audit.json" 2>/dev/null || echo none)"
    matches="$(grep -c '"event":"match_decided"' "$log" || true)"
    blocked="$(grep -c '"event":"peer_blocked"' "$log" || true)"
    warn="$(grep -c '"level":"WARN"\|"level":"ERROR"' "$log" || true)"
    panics="$(grep -c 'panicked' "$log" || true)"
    [ "$blocked" = 0 ] && [ "$panics" = 0 ] || failed=1
    printf '%3s %8s %8s %8s %9s %8s %7s %s\n' "$v" "$verify" "$audit" "$matches" "$blocked" "$warn" "$panics" "${hashes[v]}"
done
echo "chaos: $kills SIGKILL, $interrupts SIGINT, $freezes SIGSTOP in $minutes minutes"
for v in $(seq 1 $((n_validators - 1))); do
    if [ "${hashes[v]}" = none ] || [ "${hashes[v]}" != "${hashes[0]}" ]; then failed=1; fi
done
if [ "$failed" = 0 ]; then
    echo "every store verifies, every audit is clean and gives the same state hash, no peer was blocked, nothing panicked"
else
    echo "CHAOS RUN FAILED (logs in $dir)"
    exit 1
fi
