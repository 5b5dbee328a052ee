#!/usr/bin/env bash
# A long run of two validators, compressed in time, as an operator would run them:
# the stand-in chain with 250 ms blocks, a 20-block tempo and commit-reveal, four
# reference miners, and a new contender committing every CONTENDER_EVERY seconds (every
# sixth one a sybil that copies an earlier model and revision). Both validators run with
# --serve --listen --http and find each other on the chain. Every SAMPLE seconds it
# prints each validator's resident memory (and its anonymous, file and allocator parts),
# file descriptors, threads, store size, the block bytes its store holds, and the matches
# its replay holds with how many of them are in memory (`replayed`, `in_mem`: the rest
# are in its match file), and the network state's matches (one per pair: `state`; `st_mem`
# read a gauge gone since every combine writes them to the file, and stays 0); at the end,
# a least-squares line over the last half of the run (the last hour of a run of two
# hours or more) for each, and the state hashes of the two stores after a clean stop: it
# exits non-zero if they differ.
#
# Usage: scripts/bench-soak.sh [MINUTES] [SAMPLE_SECONDS]   (defaults 10 and 30; the
# issue's figure is a run of 120 minutes or more)
# Environment: SOAK_DIR (default /tmp/af-soak, replaced), CONTENDER_EVERY (default 20),
# SUBNET_UIDS (miner uids before registration replaces the oldest; default 64), AF (a
# built af binary to run instead of building this checkout's), WRAP (a command to run
# validator 0 under, such as heaptrack; its samples are then the wrapper's),
# DASHBOARD_EVERY (seconds; when set, a reader asks validator 0 for every page and a
# page of each API that grows with the logs that often, as a dashboard or an explorer
# would: its caches are then part of what is measured).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
sample="${2:-30}"
every="${CONTENDER_EVERY:-20}"
uids="${SUBNET_UIDS:-64}"
dir="${SOAK_DIR:-/tmp/af-soak}"

. scripts/stand-in.sh
prepare_run
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_stand_in

registered=0
# Registers hotkey $1 and commits model $2, revision $3, endpoint $4. Once the subnet
# holds SUBNET_UIDS miners, each registration replaces the oldest miner uid, as a full
# subnet on subtensor deregisters one.
commit() {
    local replace=()
    if [ "$registered" -ge "$uids" ]; then replace=(--replace-uid $((2 + registered % uids))); fi
    "$af" chain register --chain "$chain" --hotkey "$1" "${replace[@]}" --json >/dev/null
    "$af" mine commit --chain "$chain" --hotkey "$1" --model "$2" --revision "$3" --endpoint "$4" --json >/dev/null
    registered=$((registered + 1))
}

{
    cat <<EOF
[evaluation]
window = 8
[ledger]
block_max_events = 64
block_max_ms = 500
EOF
    stand_in_config
} >"$dir/validator.toml"
for v in 0 1; do
    "$af" chain register --chain "$chain" --hotkey "5SoakValidator$v" --validator --json >/dev/null
done
commit 5SoakMiner0 perfect r0 "${urls[0]}"
commit 5SoakMiner1 noisy:0.1 r1 "${urls[1]}"

vpids=()
http=()
for v in 0 1; do
    mkdir -p "$dir/v$v"
    "$af" ledger init --data "$dir/v$v" >/dev/null
    port="$(free_port)"
    http+=("127.0.0.1:$(free_port)")
    wrap=()
    if [ "$v" = 0 ] && [ -n "${WRAP:-}" ]; then read -r -a wrap <<<"$WRAP"; fi
    AF_CHAIN__HOTKEY="5SoakValidator$v" "${wrap[@]}" "$af" validate --data "$dir/v$v" --config "$dir/validator.toml" --serve \
        --listen "/ip4/127.0.0.$((2 + v))/tcp/$port" --http "${http[$v]}" --json \
        >"$dir/v$v/summary.json" 2>"$dir/v$v/validate.log" &
    vpids+=($!)
    pids+=($!)
done

# A dashboard on validator 0: every page, the state's first and second pages, the log
# list, the first champion's newest transcripts, and a consistency proof over its log.
if [ -n "${DASHBOARD_EVERY:-}" ]; then
    (
        base="http://${http[0]}"
        while sleep "$DASHBOARD_EVERY"; do
            for path in / /subnet.html /miners.html /matches.html /history.html /af/v1/state \
                '/af/v1/state?offset=100&limit=100' /af/v1/logs /af/v1/live \
                '/af/v1/transcripts?miner=5SoakMiner0&limit=20'; do
                curl -fsS -m 30 -o /dev/null "$base$path" 2>/dev/null || echo "dashboard: $path failed" >>"$dir/dashboard.err"
            done
            validator="$(curl -fsS -m 5 "$base/af/v1/logs" 2>/dev/null |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["logs"][0]["validator"])' 2>/dev/null || true)"
            if [ -n "$validator" ]; then
                curl -fsS -m 30 -o /dev/null "$base/af/v1/log/$validator/consistency?old=1" 2>/dev/null ||
                    echo "dashboard: consistency failed" >>"$dir/dashboard.err"
            fi
        done
    ) &
    reader=$!
    pids+=("$reader")
fi

# One sample of validator $1: RSS KiB, fds, threads, store bytes, block bytes held, the
# allocator's live heap in KiB, what the RSS is made of (KiB): anonymous pages, pages of
# mapped files (the binary's code), and the pages the allocator holds resident; the
# matches of every log its latest replay holds, and of those the ones in memory (the
# rest are in its match file); and the allocator's active pages and metadata (KiB).
sample_of() {
    local pid="${vpids[$1]}" rss threads fds disk metrics blocks heap anon file resident replayed in_memory state state_mem active meta
    rss="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
    anon="$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")"
    file="$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status")"
    threads="$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")"
    fds="$(ls "/proc/$pid/fd" | wc -l)"
    disk="$(stat -c %s "$dir/v$1/ledger.redb")"
    metrics="$(curl -fsS -m 5 "http://${http[$1]}/metrics" || true)"
    blocks="$(awk '/^af_store_block_bytes / {print $2}' <<<"$metrics")"
    heap="$(awk '/^af_heap_allocated_bytes / {printf "%d", $2 / 1024}' <<<"$metrics")"
    resident="$(awk '/^af_heap_resident_bytes / {printf "%d", $2 / 1024}' <<<"$metrics")"
    active="$(awk '/^af_heap_active_bytes / {printf "%d", $2 / 1024}' <<<"$metrics")"
    meta="$(awk '/^af_heap_metadata_bytes / {printf "%d", $2 / 1024}' <<<"$metrics")"
    replayed="$(awk '/^af_replay_matches / {print $2}' <<<"$metrics")"
    in_memory="$(awk '/^af_replay_matches_in_memory / {print $2}' <<<"$metrics")"
    state="$(awk '/^af_state_matches / {print $2}' <<<"$metrics")"
    state_mem="$(awk '/^af_state_matches_in_memory / {print $2}' <<<"$metrics")"
    echo "$rss $fds $threads $disk ${blocks:-0} ${heap:-0} $anon $file ${resident:-0} ${replayed:-0} ${in_memory:-0} ${state:-0} ${state_mem:-0} ${active:-0} ${meta:-0}"
}

start=$(date +%s)
end=$((start + minutes * 60))
next_commit=$((start + every))
next_sample=$start
n=2
printf '%8s %3s %9s %9s %5s %5s %10s %10s %7s %8s %6s %6s %6s\n' minute v rss_kib heap_kib fds thr store_b blocks_b matches replayed in_mem state st_mem
: >"$dir/samples"
while [ "$(date +%s)" -lt "$end" ]; do
    now=$(date +%s)
    for v in 0 1; do
        if ! kill -0 "${vpids[$v]}" 2>/dev/null; then
            echo "validator $v exited; see $dir/v$v/validate.log" >&2
            exit 1
        fi
    done
    if [ "$now" -ge "$next_commit" ]; then
        i=$((n % 4))
        if [ $((n % 6)) -eq 5 ]; then
            # A sybil: an earlier contender's model and revision under a new hotkey.
            j=$((n - 3))
            commit "5SoakSybil$n" "${policies[$((j % 4))]}" "r$j" "${urls[$i]}"
        else
            commit "5SoakMiner$n" "${policies[$i]}" "r$n" "${urls[$i]}"
        fi
        n=$((n + 1))
        next_commit=$((next_commit + every))
    fi
    if [ "$now" -ge "$next_sample" ]; then
        minute=$(awk -v s="$start" -v n="$now" 'BEGIN {printf "%.2f", (n - s) / 60}')
        for v in 0 1; do
            read -r rss fds threads disk blocks heap anon file resident replayed in_memory state state_mem active meta <<<"$(sample_of "$v")"
            matches="$(grep -c '"event":"match_decided"' "$dir/v$v/validate.log" || true)"
            echo "$minute $v $rss $fds $threads $disk $blocks $matches $heap $anon $file $resident $replayed $in_memory $state $state_mem $active $meta" >>"$dir/samples"
            printf '%8s %3s %9s %9s %5s %5s %10s %10s %7s %8s %6s %6s %6s\n' "$minute" "$v" "$rss" "$heap" "$fds" "$threads" "$disk" "$blocks" "$matches" "$replayed" "$in_memory" "$state" "$state_mem"
        done
        next_sample=$((next_sample + sample))
    fi
    sleep 1
done

# Least squares over the last half of the run, or its last hour if it ran two or more.
python3 - "$dir/samples" "$minutes" <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
minutes = float(sys.argv[2])
since = minutes - 60 if minutes >= 120 else minutes / 2
print(f"\nline fit over minutes {since:.0f} to {minutes:.0f} (per hour)")
print(f"{'v':>3} {'rss MB/h':>10} {'heap MB/h':>10} {'anon MB/h':>10} {'file MB/h':>10} {'res. MB/h':>10} {'active MB/h':>12} {'meta MB/h':>10} {'fds/h':>8} {'threads/h':>10} {'store MB/h':>11} {'blocks MB/h':>12} {'store/blocks':>13}")
for v in ("0", "1"):
    pts = [[float(x) for x in r] for r in rows if r[1] == v and float(r[0]) >= since]
    def slope(col):
        xs = [p[0] / 60 for p in pts]; ys = [p[col] for p in pts]
        mx = sum(xs) / len(xs); my = sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0
    last = pts[-1]
    ratio = last[5] / last[6] if last[6] else float("nan")
    print(f"{v:>3} {slope(2) / 1024:>10.2f} {slope(8) / 1024:>10.2f} {slope(9) / 1024:>10.2f} {slope(10) / 1024:>10.2f} {slope(11) / 1024:>10.2f} {slope(16) / 1024:>12.2f} {slope(17) / 1024:>10.2f} {slope(3):>8.2f} {slope(4):>10.2f} {slope(5) / 1e6:>11.2f} {slope(6) / 1e6:>12.2f} {ratio:>13.2f}")
EOF

# A clean stop: each validator seals, announces and serves its last block, and then
# both stores must hold the same logs and replay to the same state. The reader stops
# first: its reads of a stopping validator would fail for that reason alone.
if [ -n "${reader:-}" ]; then
    kill "$reader" 2>/dev/null || true
    wait "$reader" 2>/dev/null || true
    echo "dashboard: $(cat "$dir/dashboard.err" 2>/dev/null | wc -l) failed reads (each named in $dir/dashboard.err)"
fi
for v in 0 1; do kill -INT "${vpids[$v]}"; done
for v in 0 1; do wait "${vpids[$v]}" || true; done
echo
# (An audit that finds discrepancies exits 1 and still prints the state hash.)
hashes=()
for v in 0 1; do
    hashes[v]="$("$af" audit --data "$dir/v$v" --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["state_hash"])' 2>/dev/null || true)"
    printf 'v%s state hash after the stop: %s\n' "$v" "${hashes[v]:-(none: the audit could not run)}"
done
agree=0
if [ -n "${hashes[0]}" ] && [ "${hashes[0]}" = "${hashes[1]}" ]; then
    echo "state hashes agree"
    agree=1
else
    echo "state hashes DIFFER"
fi
# Disk: the store against the block bytes it holds, before and after `af ledger compact`.
echo
printf '%3s %12s %12s %12s %8s %8s\n' v blocks_b store_b compacted_b ratio ratio_c
for v in 0 1; do
    blocks="$("$af" ledger export --data "$dir/v$v" --format blocks | wc -c)"
    read -r before after <<<"$("$af" ledger compact --data "$dir/v$v" --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["bytes_before"], d["bytes_after"])')"
    printf '%3s %12s %12s %12s %8.2f %8.2f\n' "$v" "$blocks" "$before" "$after" \
        "$(awk -v a="$before" -v b="$blocks" 'BEGIN {print a / b}')" "$(awk -v a="$after" -v b="$blocks" 'BEGIN {print a / b}')"
done
# A soak whose validators disagree after a clean stop failed, whatever its figures.
[ "$agree" = 1 ]
