#!/usr/bin/env bash
# Issue 53's and 74's attacks, one row each: how long an honest validator's 40-block chain takes
# to sync (its node's start included) under each, and the attacked node's peak resident
# memory above idle (the budget is 256 MiB). Runs the hostile tests that stage them over
# real sockets on loopback (tests/it/p2p_hostile.rs, tests/it/http_hostile.rs) and
# tabulates the `attack-row` line each prints; every test also asserts its own bound
# (sync within 5 s, memory within the budget), so a row that breaks one fails the run.
#
# Usage: scripts/bench-attacks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
cargo test --locked --test it -- --nocapture --test-threads 1 \
    p2p_hostile::sockets_that_never_finish_the_handshake \
    p2p_hostile::a_crowd_of_throwaway_identities \
    p2p_hostile::junk_chains_and_made_up_equivocations \
    p2p_hostile::answers_over_any_limit_are_refused \
    http_hostile::slow_readers_of_big_blocks_do_not_starve_sync \
    http_hostile::slow_readers_of_long_consistency_proofs \
    http_hostile::slowloris_cannot_take_the_health_probe_away \
    chain_node::a_lying_subnet_size_is_refused \
    chain_node::a_serving_validator_rides_out_a_node_restart \
    chain_node::a_serving_validator_sends_each_extrinsic_once \
    p2p_trust::one_dialed_peer_takes_half_the_cap \
    >"$out" 2>&1 || status=$?
echo "| attack | honest sync, s | peak RSS over idle, MiB |"
echo "|---|---:|---:|"
grep -o 'attack-row | .*' "$out" | sed 's/^attack-row //; s/$/ |/'
echo
echo "| case (issue 74) | outcome |"
echo "|---|---|"
grep -o 'case-row | .*' "$out" | sed 's/^case-row //'
grep -E '^test result' "$out" || true
if [ "$status" -ne 0 ]; then
    grep -E 'panicked|FAILED' "$out" | head -20
    exit "$status"
fi
