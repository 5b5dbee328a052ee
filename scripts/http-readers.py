#!/usr/bin/env python3
"""N concurrent HTTP readers of an af node (ledger-spec/11): each loops over the paths a
mirror, a monitor and a dashboard read (log list, a signed tip, a bundle, the state, a
consistency proof), one request every PERIOD seconds, until stopped by SIGTERM.
Prints one JSON line at exit: requests, errors, and latency percentiles.

Usage: http-readers.py BASE_URL N PERIOD_S
"""
import json
import signal
import sys
import threading
import time
import urllib.request

base, n, period = sys.argv[1].rstrip("/") + "/", int(sys.argv[2]), float(sys.argv[3])
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
lock = threading.Lock()
latencies, errors = [], [0]


def get(path):
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(base + path, timeout=30) as response:
            body = response.read()
        with lock:
            latencies.append(time.perf_counter() - started)
        return body
    except Exception:
        with lock:
            errors[0] += 1
        return None


def reader(index):
    time.sleep(period * index / n)  # spread the readers over one period
    while not stop.is_set():
        started = time.perf_counter()
        listed = get("af/v1/logs")
        logs = json.loads(listed)["logs"] if listed else []
        if logs:
            log = logs[index % len(logs)]
            key, size = log["validator"], log["size"]
            step = index % 4
            if step == 0:
                get(f"af/v1/log/{key}/tip")
            elif step == 1:
                width = min(size, 256)
                suffix = "" if width == 256 else f".p/{width}"
                get(f"af/v1/log/{key}/tile/entries/000{suffix}")
            elif step == 2:
                get("af/v1/state")
            else:
                get(f"af/v1/log/{key}/consistency?old={max(1, size // 2)}")
        stop.wait(max(0.0, period - (time.perf_counter() - started)))


threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(n)]
for thread in threads:
    thread.start()
while not stop.is_set():
    stop.wait(0.5)
latencies.sort()
pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3 if latencies else 0.0
print(json.dumps({"requests": len(latencies), "errors": errors[0], "p50_ms": pick(0.5), "p99_ms": pick(0.99)}))
