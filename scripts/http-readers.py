#!/usr/bin/env python3
"""N concurrent HTTP readers of an af node (ledger-spec/11), as monitors, dashboards and
mirrors poll it: each makes one request every PERIOD seconds, rotating over the log
list, a signed tip, the state and a consistency proof over the last 16 blocks; every
tenth request is a mirror's poll instead, the chain's newest bundle fetched as a caching
client (If-None-Match). Runs until SIGTERM, then prints one JSON line: requests
answered, errors, latency percentiles.

Usage: http-readers.py BASE_URL N PERIOD_S
"""
import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

base, n, period = sys.argv[1].rstrip("/") + "/", int(sys.argv[2]), float(sys.argv[3])
WIDTH = 16  # blocks per bundle (ledger-spec/11)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
lock = threading.Lock()
latencies, errors = [], [0]


def get(path, known=None):
    """GET; with `known` (path -> ETag), as a caching client."""
    started = time.perf_counter()
    request = urllib.request.Request(base + path)
    if known is not None and path in known:
        request.add_header("If-None-Match", known[path])
    try:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                body = response.read()
                if known is not None and response.headers.get("ETag"):
                    known[path] = response.headers["ETag"]
        except urllib.error.HTTPError as error:
            if error.code != 304:
                raise
            body = b""
        with lock:
            latencies.append(time.perf_counter() - started)
        return body
    except Exception:
        with lock:
            errors[0] += 1
        return None


def tile_index(n):
    parts = [f"{n % 1000:03d}"]
    n //= 1000
    while n > 0:
        parts.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(parts))


def reader(index):
    time.sleep(period * index / n)  # spread the readers over one period
    logs, turn, etags = [], index, {}
    while not stop.is_set():
        started = time.perf_counter()
        step = turn % 10
        turn += 1
        if step == 0 or not logs:
            listed = get("af/v1/logs")
            logs = json.loads(listed)["logs"] if listed else []
        else:
            log = logs[index % len(logs)]
            key, size = log["validator"], log["size"]
            if step == 9:
                tile, width = (size - 1) // WIDTH, size - WIDTH * ((size - 1) // WIDTH)
                suffix = "" if width == WIDTH else f".p/{width}"
                get(f"af/v1/log/{key}/tile/entries/{tile_index(tile)}{suffix}", etags)
            elif step % 3 == 0:
                get("af/v1/state")
            elif step % 3 == 1:
                get(f"af/v1/log/{key}/tip")
            else:
                get(f"af/v1/log/{key}/consistency?old={max(1, size - 16)}")
        stop.wait(max(0.0, period - (time.perf_counter() - started)))


threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(n)]
for thread in threads:
    thread.start()
while not stop.is_set():
    stop.wait(0.5)
latencies.sort()
pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3 if latencies else 0.0
print(json.dumps({"requests": len(latencies), "errors": errors[0], "p50_ms": pick(0.5), "p99_ms": pick(0.99)}))
