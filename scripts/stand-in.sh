# Sourced by scripts/bench-soak.sh and scripts/chaos.sh: the stand-in subnet they both
# run validators on. Expects `dir` (the run's folder, replaced) and `AF` (a built af
# binary, else this checkout's release build); `prepare_run` sets `af` and `pids`
# (processes to clean up), `start_stand_in` sets `chain_addr`, `chain`, `policies` and
# `urls`.

prepare_run() {
    if [ -z "${AF:-}" ]; then
        cargo build --release --locked --bin af >&2
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    # A copy, so a rebuild during the run does not change the binary under the validators.
    cp "${AF:-target/release/af}" "$dir/af"
    af="$dir/af"
    pids=()
}

# The first line a process prints on stdout, read from its log file (bounded wait).
first_line() {
    local file="$1"
    for _ in $(seq 100); do
        if [ -s "$file" ]; then head -n1 "$file"; return; fi
        sleep 0.1
    done
    echo "no output in $file" >&2
    exit 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The stand-in chain with 250 ms blocks, a 20-block tempo and commit-reveal, and four
# reference miners (perfect, noisy 0.1 and 0.3, random) each on its own port.
start_stand_in() {
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
}

# The [client] and [chain] sections of a validator's config on the stand-in chain.
stand_in_config() {
    cat <<EOF
[client]
timeout_ms = 10000
[chain]
endpoint = "$chain"
netuid = 1
discover_every_ms = 500
EOF
}
