#!/usr/bin/env python3
"""The live page and the audit report, checked in a real headless Chromium.

Starts two reference miners and a validator (networking and HTTP API on loopback),
loads the node's live page while a match is being played, and checks that every number
it shows equals what the API answered just before and just after (tallies only grow, so
the page's must lie between the two), that nothing scrolls sideways, and saves a
screenshot. Then it stops the validator with SIGTERM (exit 130 expected), writes the
audit report of its store, loads it, and checks the report's numbers against
`af audit --json`, its bars, and its width. Screenshots go to OUT/.

Usage: page-check.py AF_BINARY OUT_DIR   (needs playwright and /usr/bin/chromium)
"""

import json
import re
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import sync_playwright

AF, OUT = sys.argv[1], sys.argv[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
passed, failed = 0, 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def wait_for(predicate, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"page-check: timed out waiting for {what}")


def start_miner(policy):
    process = subprocess.Popen([AF, "miner", "serve", "--listen", "127.0.0.1:0", "--policy", policy,
                                "--model", "m"], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    return process, line.split()[2]


def no_sideways_scroll(page, what):
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        sizes = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        check(sizes[0] <= sizes[1], f"{what}: nothing scrolls sideways at {width} px", sizes)
    page.set_viewport_size({"width": 1280, "height": 900})


def live_page(browser, base):
    # Wait until a match is on and the replay behind vTrust is ready.
    wait_for(lambda: (lambda l: l["match"] and l["vtrust"] and
                      any(e["n_challenges"] > 0 for e in l["match"]["envs"]))(get_json(base + "af/v1/live")),
             "a match in progress")
    before = get_json(base + "af/v1/live")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(base)
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    try:
        page.wait_for_selector("body[data-loaded='1'] #match-head", timeout=30000)
    except Exception:
        page.screenshot(path=os.path.join(OUT, "live-page-failed.png"), full_page=True)
        raise SystemExit(f"page-check: the live page did not render: {errors} "
                         f"status {page.text_content('#status')!r}")
    shown = page.evaluate("""() => {
        const value = id => document.getElementById(id).dataset.value;
        const head = document.getElementById("match-head").dataset;
        const envs = {};
        for (const row of document.querySelectorAll("#envs tr")) {
            const cell = c => Number(row.querySelector("." + c).textContent);
            envs[row.dataset.env] = [cell("wins"), cell("losses"), cell("draws"), cell("challenges")];
        }
        const vtrust = {};
        for (const row of document.querySelectorAll("#vtrust tr[data-validator]")) {
            vtrust[row.dataset.validator] = Number(row.dataset.vtrustPpm);
        }
        const lag = {};
        for (const row of document.querySelectorAll("#peers tr[data-validator]")) {
            lag[row.dataset.validator] = Number(row.querySelector(".lag").textContent);
        }
        return { champion: value("champion"), ratio: Number(value("ratio")), decided: Number(value("decided")),
                 size: Number(value("size")), match_id: head.matchId, contender: head.contender,
                 match_champion: head.champion, envs, vtrust, lag,
                 role: document.getElementById("role").textContent, title: document.title,
                 champion_text: document.getElementById("champion").textContent,
                 match_contender_text: document.querySelector("#match-head b.contender").textContent,
                 match_champion_text: document.querySelector("#match-head b.champion").textContent,
                 ratio_text: document.getElementById("ratio").textContent,
                 vtrust_text: [...document.querySelectorAll("#vtrust td.vtrust")].map(td => td.textContent) };
    }""")
    after = get_json(base + "af/v1/live")
    check(not errors, "live page: no script errors", errors)
    check((shown["role"], shown["title"]) == ("af validator", "af validator: live"), "live page: titled by its role",
          (shown["role"], shown["title"]))
    check(shown["champion_text"].startswith("uid ") and before["champion"]["model"] in shown["champion_text"],
          "live page: the champion as uid, short hotkey and model", shown["champion_text"])
    check(shown["champion"] == before["champion"]["hotkey"] == after["champion"]["hotkey"],
          "live page: champion equals the API's", (shown["champion"], before["champion"]))
    check(shown["ratio"] in (before["ratio_to_beat_ppm"], after["ratio_to_beat_ppm"]),
          "live page: ratio to beat equals the API's", (shown["ratio"], before["ratio_to_beat_ppm"]))
    check(before["matches_decided"] <= shown["decided"] <= after["matches_decided"], "live page: matches decided")
    check(before["size"] <= shown["size"] <= after["size"], "live page: log size between the API's before and after",
          (before["size"], shown["size"], after["size"]))
    m = after["match"]
    check((shown["match_id"], shown["contender"], shown["match_champion"]) ==
          (m["match_id"], m["contender"]["hotkey"], m["champion"]["hotkey"]), "live page: the current match")
    for role in ("contender", "champion"):
        text, miner = shown[f"match_{role}_text"], m[role]
        check(text == f"uid {miner['uid']} {miner['hotkey'][:16]}… {miner['model']}",
              f"live page: the match's {role} as uid, short hotkey and model@revision", (text, miner))
    # One unit everywhere: shares in percent with one decimal, as the subnet pages.
    percent = re.compile(r"^\d{1,3}\.\d%$")
    check(percent.match(shown["ratio_text"]) and all(percent.match(t) for t in shown["vtrust_text"]),
          "live page: ratio and vTrust in percent, one decimal", (shown["ratio_text"], shown["vtrust_text"]))
    by_env = lambda live: {e["env"]: [e["wins"], e["losses"], e["draws"], e["n_challenges"]]
                           for e in live["match"]["envs"]}
    b, a = by_env(before), by_env(after)
    check(set(shown["envs"]) == set(a), "live page: every env of the match", (shown["envs"], a))
    for env, tally in shown["envs"].items():
        check(all(lo <= x <= hi for lo, x, hi in zip(b[env], tally, a[env])),
              f"live page: {env} W/L/D/n between the API's before and after", (b[env], tally, a[env]))
    check(shown["vtrust"] == {v["validator"]: v["vtrust_ppm"] for v in after["vtrust"]},
          "live page: vTrust equals the API's", (shown["vtrust"], after["vtrust"]))
    lags = lambda live: {c["validator"]: c["lag"] for c in live["peers"]["chains"]}
    check(shown["lag"] in (lags(before), lags(after)), "live page: peers' lag equals the API's",
          (shown["lag"], before["peers"], after["peers"]))
    no_sideways_scroll(page, "live page")
    page.screenshot(path=os.path.join(OUT, "live-page.png"), full_page=True)
    page.close()
    anchor_rows(browser, base, after)


def anchor_rows(browser, base, live):
    """Every kind of anchor row reads in full: the live answer is served with one of each
    (a timelocked weights commit being every row under commit-reveal, the default)."""
    zero = "00" * 32
    live = dict(live)
    live["anchors"] = [
        {"kind": "weights_committed", "block_time_ms": 1, "height": 7,
         "record": {"netuid": 1, "uids": [1, 2], "weights": [65535, 0], "version_key": 0, "chain_block": 120,
                    "reveal_round": 9, "reveal_block": 360, "ciphertext_hash": zero}},
        {"kind": "weights", "block_time_ms": 1, "height": 6,
         "record": {"netuid": 1, "uids": [1, 2], "weights": [49151, 16384], "version_key": 0, "chain_block": 110}},
        {"kind": "commitment", "block_time_ms": 1, "height": 5,
         "record": {"netuid": 1, "chain_block": 100, "committed_height": 4, "committed_hash": zero}},
    ]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/af/v1/live", lambda route: route.fulfill(status=200, content_type="application/json",
                                                            body=json.dumps(live)))
    page.goto(base)
    page.wait_for_selector("body[data-loaded='1'] #anchors tr")
    rows = page.evaluate("""() => [...document.querySelectorAll("#anchors tr")].map(r => r.textContent)""")
    check(len(rows) == 3 and not any("undefined" in r or "NaN" in r for r in rows),
          "live page: every kind of anchor row reads in full", rows)
    check("uid 1: 100.0%" in rows[0] and "reveal at block 360" in rows[0],
          "live page: a timelocked commit shows its weights as shares and its reveal block", rows[0])
    check("uid 1: 75.0%" in rows[1] and "uid 2: 25.0%" in rows[1], "live page: weights as shares", rows[1])
    page.close()


def match_page(browser, base):
    """A match's challenges side by side on the node, reached from its matches page."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(base + "matches.html")
    link = page.locator("a", has_text="answers side by side").first
    check(link.count() == 1, "matches page: each validator's play links to its answers side by side")
    link.click()
    page.wait_for_selector("#pairs")
    rows = page.evaluate("""() => [...document.querySelectorAll("#pairs tr[data-challenge]")].map(r =>
        [...r.querySelectorAll("td")].map(td => td.textContent))""")
    check(len(rows) > 0 and all(len(r) == 4 and "reward" in r[2] and "reward" in r[3] for r in rows),
          "match page: every challenge shows both players' rewards and answers", rows[:2])
    check(all("undefined" not in c and "NaN" not in c for r in rows for c in r), "match page: no undefined or NaN")
    no_sideways_scroll(page, "match page")
    page.screenshot(path=os.path.join(OUT, "match-page.png"), full_page=True)
    page.close()


def report_page(browser, audit, path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto("file://" + os.path.abspath(path))
    shown = page.evaluate("""() => {
        const rows = [];
        for (const row of document.querySelectorAll("#validators tr[data-validator]")) {
            const track = row.querySelector(".track").getBoundingClientRect();
            const fill = row.querySelector(".track > div").getBoundingClientRect();
            rows.push({ validator: row.dataset.validator, ppm: Number(row.dataset.vtrustPpm),
                        text: row.querySelector(".vtrust").textContent,
                        inside: fill.left >= track.left - 0.5 && fill.right <= track.right + 0.5,
                        visible: fill.width >= 1 && fill.height >= 1 });
        }
        const reigns = [];
        for (const bar of document.querySelectorAll("#reigns .reign")) {
            const track = bar.parentElement.getBoundingClientRect();
            const box = bar.getBoundingClientRect();
            reigns.push({ width: box.width, inside: box.left >= track.left - 0.5 && box.right <= track.right + 0.5 });
        }
        const matches = {};
        for (const row of document.querySelectorAll("#matches tr[data-match-id]")) {
            matches[row.dataset.matchId] = [...row.querySelectorAll("[data-env]")].map(e => e.textContent.trim());
        }
        return { rows, reigns, matches, version: document.getElementById("version").textContent,
                 generated: document.getElementById("generated").textContent };
    }""")
    expected = {v["validator"]: v["vtrust_ppm"] for v in audit["state"]["validators"]}
    check({r["validator"]: r["ppm"] for r in shown["rows"]} == expected, "report: every validator's vTrust")
    for row in shown["rows"]:
        check(row["text"] == f"{row['ppm'] / 1e4:.1f}%", "report: vTrust text, in percent as on every page", row)
        check(row["inside"] and row["visible"], "report: vTrust bar visible and inside its track", row)
    check(len(shown["reigns"]) == len(audit["state"]["champion_history"]), "report: a bar per reign")
    for reign in shown["reigns"]:
        check(reign["width"] >= 2 and reign["inside"], "report: reign bar visible and inside", reign)
    for m in audit["matches"]:
        tallies = [f"{e['env']} {e['wins']}W/{e['losses']}L/{e['draws']}D" for e in m["envs"]]
        got = shown["matches"].get(m["match_id"], [])
        check(len(got) == len(tallies) and all(t.startswith(x) for t, x in zip(got, tallies)),
              "report: match " + m["match_id"][:16] + " with its env tallies", (got, tallies))
    check(shown["version"] == "af " + audit["af_version"], "report: af version", shown["version"])
    check(shown["generated"].startswith("generated "), "report: generation time", shown["generated"])
    no_sideways_scroll(page, "report")
    page.screenshot(path=os.path.join(OUT, "audit-report.png"), full_page=True)
    page.close()


def subnet_pages(browser, audit, site):
    """The published subnet pages in Chromium: every validator with its vTrust, both
    miners and their states, one row group per match, the champions' table; no page
    scrolls sideways or shows an unfilled value."""
    shown = {}
    for name in ["subnet", "miners", "matches", "history"]:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto("file://" + os.path.abspath(os.path.join(site, name + ".html")))
        shown[name] = page.evaluate("""() => ({
            text: document.body.innerText,
            nav: [...document.querySelectorAll("nav a, nav b")].map(n => n.textContent),
            validators: [...document.querySelectorAll("#validators tr[data-validator]")].map(r =>
                ({ validator: r.dataset.validator, ppm: Number(r.dataset.vtrustPpm), cells: [...r.cells].map(c => c.innerText) })),
            miners: [...document.querySelectorAll("#miners tr[data-miner]")].map(r =>
                ({ miner: r.dataset.miner, state: r.cells[2].innerText,
                   score: (r.querySelector("td.score b") || {}).textContent || null })),
            matches: new Set([...document.querySelectorAll("#matches tr[data-match]")].map(r => r.dataset.match)).size,
            reigns: document.querySelectorAll("#champions tr").length - 1,
            played_logs: [...document.querySelectorAll("#miners div.played")].map(d => d.querySelectorAll("[data-log]").length),
            vtrust_lines: [...document.querySelectorAll("#vtrust-chart g[data-validator]")].map(g => g.dataset.validator),
            models: [...document.querySelectorAll("span.model")].map(m => ({ text: m.textContent, title: m.title,
                wrap: getComputedStyle(m).overflowWrap, lines: m.getClientRects().length })),
        })""")
        check(not errors, f"{name} page: no console errors", errors)
        check(shown[name]["nav"] == ["Subnet", "Miners", "Matches", "History"], f"{name} page: navigation", shown[name]["nav"])
        check("undefined" not in shown[name]["text"] and "NaN" not in shown[name]["text"],
              f"{name} page: every value filled")
        no_sideways_scroll(page, name + " page")
        # Issue 75, item 7: a model@revision breaks only after a "/" or before its "@".
        models = shown[name]["models"]
        check(all(m["text"] == m["title"] and m["wrap"] == "normal"
                  and m["lines"] <= 1 + m["text"].count("/") + m["text"].count("@") for m in models),
              f"{name} page: model names whole, broken only after a / or before the @", models)
        page.screenshot(path=os.path.join(OUT, name + "-page.png"), full_page=True)
        page.close()
    expected = {v["validator"]: v["vtrust_ppm"] for v in audit["state"]["validators"]}
    rows = shown["subnet"]["validators"]
    check({r["validator"]: r["ppm"] for r in rows} == expected, "subnet page: every validator's vTrust", rows)
    for row in rows:
        check(f"{row['ppm'] / 1e4:.1f}%" in row["cells"], "subnet page: vTrust as a share", row)
    champion = (audit["state"]["champion"] or {}).get("hotkey")
    miners = {m["miner"]: m["state"] for m in shown["miners"]["miners"]}
    seen = {m["contender"]["hotkey"] for m in audit["state"]["matches"]} | {m["champion"]["hotkey"] for m in audit["state"]["matches"]}
    check(set(miners) >= seen, "miners page: every miner a match names", (miners, seen))
    if champion:
        check(miners.get(champion) == "champion", "miners page: the champion", miners)
    scores = {m["miner"]: m["score"] for m in shown["miners"]["miners"]}
    check(all(scores.get(h) and re.match(r"^\d{1,3}\.\d% \(\d+\)$", scores[h]) for h in seen),
          "miners page: each miner that played has a score against the other side, with its count", scores)
    played_logs = shown["miners"]["played_logs"]
    check(played_logs and all(n >= 1 for n in played_logs),
          "miners page: each match's tallies labelled with the log they are from", played_logs)
    check(shown["miners"]["models"] and shown["matches"]["models"], "miners and matches pages: models shown as models")
    check(shown["matches"]["matches"] == len(audit["state"]["matches"]), "matches page: a row group per match",
          shown["matches"]["matches"])
    check(shown["history"]["reigns"] == len(audit["state"]["champion_history"]), "history page: a row per reign")
    lines = shown["history"]["vtrust_lines"]
    chained = any(v["chain_block"] > 0 for m in audit["state"]["matches"] for v in m["votes"])
    if chained:
        check(sorted(lines) == sorted(expected), "history page: a vTrust line per validator", lines)
    else:
        check("No match started at a chain block yet." in shown["history"]["text"],
              "history page: no vTrust chart without chain blocks, said so")


def main():
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="af-page-check-")
    processes = []
    try:
        # Two equally good, slow miners: every game a draw, so the match lasts until the
        # network plan's futility stop dismisses the copy (121 challenges per env).
        (champion, champion_url), (contender, contender_url) = start_miner("slow:1000"), start_miner("slow:1000")
        processes += [champion, contender]
        config = os.path.join(work, "v.toml")
        with open(config, "w") as f:
            f.write("[evaluation]\nwindow = 2\n"
                    "[ledger]\nblock_max_events = 32\nblock_max_ms = 200\n")
            for i, (hotkey, url) in enumerate([("5Champion", champion_url), ("5Contender", contender_url)]):
                f.write(f'\n[[miners]]\nhotkey = "{hotkey}"\nuid = {i}\nbase_url = "{url}"\nmodel = "m"\n')
        data = os.path.join(work, "data")
        validator = subprocess.Popen([AF, "validate", "--data", data, "--config", config, "--serve",
                                      "--listen", "/ip4/127.0.0.1/tcp/0", "--http", "127.0.0.1:0"],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "v.log"), "w"))
        processes.append(validator)
        address = os.path.join(data, "http.addr")
        base = wait_for(lambda: os.path.exists(address) and open(address).read().strip(), "the HTTP API")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            live_page(browser, base)
            match_page(browser, base)
            validator.send_signal(signal.SIGTERM)
            check(validator.wait(timeout=60) == 130, "SIGTERM stops the validator with exit 130")
            report = os.path.join(OUT, "audit-report.html")
            audit = subprocess.run([AF, "audit", "--data", data, "--json", "--report", report],
                                   capture_output=True, text=True)
            check(audit.returncode == 0, "the audit of the stopped store is clean", audit.stderr[-500:])
            report_page(browser, json.loads(audit.stdout), report)
            site = os.path.join(work, "site")
            published = subprocess.run([AF, "ledger", "publish", "--data", data, "--out", site],
                                       capture_output=True, text=True)
            check(published.returncode == 0, "af ledger publish writes the site", published.stderr[-500:])
            subnet_pages(browser, json.loads(audit.stdout), site)
            browser.close()
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    print(f"page-check: {passed} passed, {failed} failed (screenshots in {OUT})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
