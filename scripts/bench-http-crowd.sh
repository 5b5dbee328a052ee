#!/usr/bin/env bash
# What a crowd of readers costs a node: for each af binary given (default: this
# checkout's release build), a copy of the data directory DATA is served with `af node
# --http`, then READERS connections (from 8 loopback addresses, as the per-address limit
# is 32) each ask one path and read nothing for HOLD seconds. Prints, per binary and
# path, the node's resident memory before and at its peak, and the first reader's
# answer once read. DATA must hold logs with matches: a validator's directory from
# scripts/bench-soak.sh (kept in SOAK_DIR) will do.
#
# Usage: scripts/bench-http-crowd.sh DATA [AF_BINARY ...]
# Environment: READERS (default 250), HOLD (default 8), MINER (the hotkey whose
# transcripts are asked for; default 5SoakMiner0, the soak's first champion), PATHS
# (space-separated paths to ask instead of the default three).
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:?usage: scripts/bench-http-crowd.sh DATA [AF_BINARY ...]}"
shift
binaries=("$@")
if [ "${#binaries[@]}" -eq 0 ]; then
    cargo build --release --locked >&2
    binaries=(target/release/af)
fi
readers="${READERS:-250}"
hold="${HOLD:-8}"
miner="${MINER:-5SoakMiner0}"
work="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
read -r -a paths <<<"${PATHS:-/miners.html /matches.html /af/v1/transcripts?miner=$miner&limit=100}"

printf '%-28s %-48s %8s %9s %9s %s\n' binary path readers rss_mib peak_mib first_answer
for bin in "${binaries[@]}"; do
    for path in "${paths[@]}"; do
        rm -rf "$work/data" && cp -r "$data" "$work/data" && rm -f "$work/data/http.addr"
        port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        "$bin" node --data "$work/data" --http "127.0.0.1:$port" >"$work/node.out" 2>"$work/node.err" &
        pid=$!
        for _ in $(seq 120); do
            curl -fsS -o /dev/null "http://127.0.0.1:$port/af/v1/state" 2>/dev/null && break
            sleep 1
        done
        read -r before peak answer <<<"$(python3 - "$port" "$path" "$readers" "$hold" "$pid" <<'PYEOF'
import socket, sys, time
port, path, n, hold, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
before = peak = rss()
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), source_address=(f"127.0.1.{2 + i // 32}", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    socks.append(s)
end = time.time() + hold
while time.time() < end:
    peak = max(peak, rss())
    time.sleep(0.05)
socks[0].settimeout(30)
got = b""
try:
    while True:
        chunk = socks[0].recv(1 << 16)
        if not chunk:
            break
        got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        length = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        if length and len(body) >= int(length[0].split(b":")[1]):
            break
except socket.timeout:
    pass
for s in socks:
    s.close()
status = got.split(b"\r\n", 1)[0].decode(errors="replace").replace(" ", "_") or "none_in_30_s"
print(before, peak, f"{status},{len(got)}_bytes")
PYEOF
)"
        printf '%-28s %-48s %8s %9s %9s %s\n' "$(basename "$bin")" "$path" "$readers" "$before" "$peak" "$answer"
        kill -INT "$pid"
        wait "$pid" || true
    done
done
