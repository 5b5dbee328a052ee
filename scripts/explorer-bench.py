#!/usr/bin/env python3
"""Times the explorer in headless Chromium on a published site at scale (see
scripts/bench-explorer.sh): the first page of a miner's transcripts, a page deep in its
history, one match, and a page whose 20 entries come from 20 logs (each log's signed tip
fetched and checked). For each: the seconds to the page shown with every proof checked
(median of 3 loads, each in a fresh browser context: nothing cached), the requests and
bytes the browser fetched, and the JS heap after. Fails (exit 1) if an entry shown is
not verified.

Usage: explorer-bench.py SUMMARY_JSON   (the line benches/explorer_site.rs prints)
"""

import functools
import http.server
import json
import os
import shutil
import statistics
import sys
import threading
import time

from blake3 import blake3
from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
RUNS = 3


class Counting(http.server.SimpleHTTPRequestHandler):
    """Serves the site, counting requests and bytes (the server's view of the fetches)."""
    served = {"requests": 0, "bytes": 0}

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.translate_path(self.path)
        if os.path.isfile(path):
            Counting.served["requests"] += 1
            Counting.served["bytes"] += os.path.getsize(path)
        super().do_GET()


def serve(root):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Counting, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def load(path):
    with open(path) as f:
        return json.load(f)


def measure(browser, url):
    """(seconds, requests, bytes, heap bytes, statuses) of one cold load of `url`."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    Counting.served.update(requests=0, bytes=0)
    started = time.time()
    page.goto(url)
    page.wait_for_selector("#status[data-shown]", timeout=120_000)
    seconds = time.time() - started
    statuses = [e.get_attribute("data-status") for e in page.query_selector_all(".entry")]
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    served = dict(Counting.served)
    context.close()
    return seconds, served["requests"], served["bytes"], metrics.get("JSHeapUsedSize", 0), statuses


def main():
    summary = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    site, hotkey = summary["site"], summary["hotkey"]
    pages_dir = os.path.join(site, "af/v1/miner", blake3(hotkey.encode()).hexdigest(), "entries")
    n_pages = (summary["transcripts"] + 19) // 20
    deep = n_pages // 2
    first = load(os.path.join(pages_dir, "0"))
    middle = load(os.path.join(pages_dir, str(deep)))
    match_id = middle["entries"][0]["transcript"]["match_id"]

    # A page of 20 entries from 20 logs: the first entry of each of 20 logs, found by
    # reading pages at a stride (a log's entries are contiguous in index order).
    mixed, logs = [], set()
    for k in range(0, n_pages, max(1, n_pages // 64)):
        entry = load(os.path.join(pages_dir, str(k)))["entries"][0]
        if entry["validator"] not in logs:
            logs.add(entry["validator"])
            mixed.append(entry)
        if len(mixed) == 20:
            break


    cases = [
        ("first page", f"#miner={hotkey}", 1),
        (f"page {deep + 1} of {n_pages}", f"#miner={hotkey}&page={deep + 1}", 1),
        ("one match (its first page)", f"#miner={hotkey}&match={match_id}", 1),
    ]
    rows = []
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}/explorer.html"

    def run_case(browser, name, fragment, n_logs):
        print(f"explorer-bench: {name}", file=sys.stderr)
        runs = [measure(browser, base + fragment) for _ in range(RUNS)]
        statuses = runs[-1][4]
        verified = sum(s == "verified" for s in statuses)
        rows.append((name, n_logs, len(statuses), verified, statistics.median(r[0] for r in runs),
                     max(r[0] for r in runs), runs[-1][1], runs[-1][2], max(r[3] for r in runs)))

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for case in cases:
                run_case(browser, *case)
            # The first page replaced by one of 20 entries from 20 logs, for this run only.
            shutil.copy(os.path.join(pages_dir, "0"), os.path.join(pages_dir, "0.orig"))
            with open(os.path.join(pages_dir, "0"), "w") as f:
                json.dump({"entries": mixed, "offset": 0, "total": first["total"]}, f)
            run_case(browser, f"20 entries from {len(mixed)} logs", f"#miner={hotkey}", len(mixed))
            browser.close()
    finally:
        server.shutdown()
        if os.path.exists(os.path.join(pages_dir, "0.orig")):
            os.replace(os.path.join(pages_dir, "0.orig"), os.path.join(pages_dir, "0"))

    print(f"site: {summary['logs']} logs, {summary['matches']} matches, {summary['transcripts']} transcripts of "
          f"{hotkey} on {n_pages} pages, {summary['site_bytes'] / 2**20:.0f} MiB published")
    print()
    print("| page | logs on it | entries | verified | median s (of 3, cold) | worst s | requests | bytes fetched | "
          "share of the site | JS heap MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, n_logs, n, verified, med, worst, requests, fetched, heap in rows:
        print(f"| {name} | {n_logs} | {n} | {verified} | {med:.2f} | {worst:.2f} | {requests} | {fetched:,} | "
              f"{fetched / summary['site_bytes']:.5%} | {heap / 2**20:.1f} |")
    print()
    print("target: the first page within 2 s, fetching and verifying only what the page shows")
    bad = sum(1 for row in rows if row[2] == 0 or row[3] != row[2])
    if bad:
        print(f"FAIL: {bad} page(s) showed an entry not verified")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
