#!/usr/bin/env bash
# A chaos run: three validators on the stand-in chain (commit-reveal on) with four
# reference miners and a new contender every CONTENDER_EVERY seconds, while every
# CHAOS_EVERY seconds one validator, picked at random, is killed with SIGKILL, stopped
# with SIGINT, frozen with SIGSTOP for a few seconds, or put in a crash loop (killed
# with SIGKILL CRASH_LOOP times, each 0.1 to 2.9 s after it started: in its store's
# open, its replay, its first blocks or its networking's start), and then restarted (or
# thawed).
# At the end every validator is stopped with SIGINT at once, and the run fails unless:
# every store verifies, every audit gives the same state hash (no copy by hand), no
# every audit is clean, no validator blocked a peer (every peer here is honest), and no
# process panicked.
#
# Usage: scripts/chaos.sh [MINUTES] (default 5)
# Environment: CHAOS_DIR (default /tmp/af-chaos, replaced), CHAOS_EVERY (default 12),
# CONTENDER_EVERY (default 15), CHAOS_SEED (default 1), CRASH_LOOP (default 4), AF (a
# built af binary to run instead of building this checkout's).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
every="${CHAOS_EVERY:-12}"
contender_every="${CONTENDER_EVERY:-15}"
crash_loop="${CRASH_LOOP:-4}"
dir="${CHAOS_DIR:-/tmp/af-chaos}"
RANDOM="${CHAOS_SEED:-1}"
n_validators=3

. scripts/stand-in.sh
prepare_run
cleanup() {
    for pid in "${pids[@]}" "${vpids[@]:-}"; do
        [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

start_stand_in

commit() {
    "$af" chain register --chain "$chain" --hotkey "$1" --json >/dev/null
    "$af" mine commit --chain "$chain" --hotkey "$1" --model "$2" --revision "$3" --endpoint "$4" --json >/dev/null
}

{
    cat <<EOF
[evaluation]
window = 8
[ledger]
block_max_events = 32
block_max_ms = 300
EOF
    stand_in_config
} >"$dir/validator.toml"
for v in $(seq 0 $((n_validators - 1))); do
    "$af" chain register --chain "$chain" --hotkey "5ChaosValidator$v" --validator --json >/dev/null
done
commit 5ChaosMiner0 perfect r0 "${urls[0]}"
commit 5ChaosMiner1 noisy:0.1 r1 "${urls[1]}"

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
kills=0; interrupts=0; freezes=0; loops=0
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
        # Says what was done to validator $v, waits, and starts it again.
        restart_after() {
            wait "$pid" 2>/dev/null || true
            printf '%8s %3s %-8s %s\n' $((now - start)) "$v" "$1" "restart after ${pause} s"
            sleep "$pause"
            start_validator "$v"
        }
        case $((RANDOM % 4)) in
            0)
                kill -9 "$pid" 2>/dev/null || true
                kills=$((kills + 1))
                restart_after kill
                ;;
            1)
                kill -INT "$pid" 2>/dev/null || true
                # A clean stop takes at most its grace period and a chain send in flight.
                for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                if kill -0 "$pid" 2>/dev/null; then
                    echo "validator $v did not stop within 30 s of SIGINT" >&2
                    exit 1
                fi
                interrupts=$((interrupts + 1))
                restart_after sigint
                ;;
            2)
                kill -STOP "$pid" 2>/dev/null || true
                freezes=$((freezes + 1))
                printf '%8s %3s %-8s %s\n' $((now - start)) "$v" freeze "for $((pause * 2)) s"
                sleep $((pause * 2))
                kill -CONT "$pid" 2>/dev/null || true
                ;;
            3)
                for _ in $(seq "$crash_loop"); do
                    kill -9 "${vpids[$v]}" 2>/dev/null || true
                    wait "${vpids[$v]}" 2>/dev/null || true
                    start_validator "$v"
                    sleep "$((RANDOM % 25 / 10)).$((1 + RANDOM % 9))"
                done
                kill -9 "${vpids[$v]}" 2>/dev/null || true
                loops=$((loops + 1))
                pid="${vpids[$v]}"
                restart_after "crash loop"
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
echo "chaos: $kills SIGKILL, $interrupts SIGINT, $freezes SIGSTOP, $loops crash loops of $crash_loop kills in $minutes minutes"
for v in $(seq 1 $((n_validators - 1))); do
    if [ "${hashes[v]}" = none ] || [ "${hashes[v]}" != "${hashes[0]}" ]; then failed=1; fi
done
if [ "$failed" = 0 ]; then
    echo "every store verifies, every audit is clean and gives the same state hash, no peer was blocked, nothing panicked"
else
    echo "CHAOS RUN FAILED (logs in $dir)"
    # What each validator's networking saw when it stopped for the last time, for a
    # reader of CI's output who has no logs: a stop past its grace shows here.
    for v in $(seq 0 $((n_validators - 1))); do
        echo "v$v: $(grep '"event":"net_stopped"' "$dir/v$v/validate.log" | tail -1)"
    done
    exit 1
fi
