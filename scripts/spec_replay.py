"""ledger-spec/14, written from the spec alone: a set of logs (a block export, 08) folded
and combined into the network's state, its bytes and its hash. Used by spec-check.py on
fixtures/replay/vectors.json. Shares no code with af.

What it cannot check from the spec alone it says: re-scoring a transcript needs its
environment's scorer, so the rewards the vector lists as re-scored otherwise are taken
from it, and every other reward is taken as re-scored equal.
"""
import math
import struct

from blake3 import blake3

KINDS = ["invalid_block", "equivocation", "false_evidence", "false_score", "bad_challenge_id", "bad_match_id",
         "false_block_hash", "schedule_gap", "schedule_repeat", "false_tally", "disagreement", "false_commitment",
         "false_decision", "false_weights"]
NOT_PROOFS = {"invalid_block", "disagreement"}
EVENT_TAGS = {"match_started": 0, "transcript": 1, "env_decision": 2, "match_decided": 3, "weights_set": 4,
              "chain_commitment": 5, "evidence": 6, "transcript_cut": 7, "weights_committed": 8, "miner_skipped": 9,
              "fold_checkpoint": 10, "key_rotated": 11, "key_succeeded": 12, "champion_left": 13}
SLACK = 1e-6  # 02: every statistic is compared with its threshold moved by 10^-6
# ledger-spec/15: the network's protocol table, version 2 from block 0.
ENVS_V2 = {("abd", 1), ("coin", 1), ("ded", 1), ("mult", 1), ("sat", 1), ("tictactoe", 1)}
N_EVENT_KINDS_V2 = 11
# 02, "Fold checkpoints": a log's fold is hashed at heights h with (h + 1) % 360 == 0.
CHECKPOINT_EVERY = 360
FOLD_FORMAT = 15
# 02: the events that name a chain block (the protocol version's clock, 15).
CHAIN_BLOCK_KINDS = {"match_started", "weights_set", "chain_commitment", "weights_committed"}
OUTCOMES = ["contender_better", "contender_not_better", "inconclusive"]
NETWORK_PLAN = ("score alpha_ppm=50000 prior=4,4 challenges=4000 epsilon_ppm=10000 half_life_blocks=7200 "
                "dominance rate_ppm=950000 alpha_ppm=5000 share_ppm=40000 share_alpha_ppm=50000 "
                "futility margin_ppm=60000 alpha_ppm=50000 mean_margin_ppm=0")


# --- 02: the score plan's statistics, each threshold moved by `slack` ---------------------

def log_mean_exp8(logs, all_in_half=False):
    """ln of the mean of exp(logs); with `all_in_half` (02, `dominance-reach`) the first
    weighs 1/2 and the seven others 1/14 each."""
    weights = [0.5] + [1 / 14] * 7 if all_in_half else [1 / 8] * 8
    pairs = [(wt, x) for wt, x in zip(weights, logs) if x != -math.inf]
    if not pairs:
        return -math.inf
    top = max(x for _, x in pairs)
    return top + math.log(sum(wt * math.exp(x - top) for wt, x in pairs))


def term(count, factor):
    if count == 0:
        return 0.0
    return -math.inf if factor == 0 else count * math.log(factor)


def conditions(plan, P, w, l, d, slack):
    """(a crown holds, "not better" holds, the dominance crown is out of reach)."""
    n, h, m = w + l + d, 2 * w + d, w + l
    T = h / 2
    lnB = lambda x, y: math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
    p, a, b = P / 1e6, plan["a"], plan["b"]
    L = lnB(a + T, b + n - T) - lnB(a, b) - T * math.log(p) - (n - T) * math.log(1 - p)
    reached = L >= math.log(10**6 / plan["alpha_ppm"]) + slack
    crown = h * 10**6 > 2 * n * P and reached
    not_better = h * 10**6 < 2 * n * P and reached
    out = True
    if plan["rate_ppm"] is not None:
        R, S = plan["rate_ppm"], plan["share_ppm"]
        r, s = R / 1e6, S / 1e6
        half = plan.get("reach", False)

        def dominance_crown(w, l, slack):
            D = log_mean_exp8([term(w, 1 + 2.0 ** -k * (1 - r) / r) + term(l, 1 - 2.0 ** -k) for k in range(8)], half)
            return w * 10**6 > (w + l) * R and D >= math.log(10**6 / plan["dominance_alpha_ppm"]) + slack

        crown = crown or dominance_crown(w, l, slack)
        E = log_mean_exp8([term(n - w, 1 + 2.0 ** -k * s / (1 - s)) + term(w, 1 - 2.0 ** -k) for k in range(8)], half)
        out = (m > 0 and w * 10**6 < m * R) or (
            w * 10**6 < n * S and E >= math.log(10**6 / plan["share_alpha_ppm"]) + slack)
        if half and not out:  # 02, `dominance-reach`: winning s of the challenges left would not crown
            more = max(plan["challenges"] - n, 0) * S // 10**6
            out = not dominance_crown(w + more, l, -slack)
    return crown, not_better, out


def futile(plan, P, w, l, d, slack):
    if plan["margin_ppm"] is None:
        return False
    n, h = w + l + d, 2 * w + d
    P1 = min(P + plan["margin_ppm"], (10**6 + P) // 2)
    p1 = P1 / 1e6
    caps = []
    for k in range(1, 9):
        lam = 2.0 ** -k / (1 - p1)
        caps.append(term(l, 1 + lam * p1) + term(d, 1 + lam * (p1 - 0.5)) + term(w, 1 - lam * (1 - p1)))
    M = P1 if plan["mean_margin_ppm"] is None else min(P + plan["mean_margin_ppm"], P1)
    below = h * 10**6 < 2 * n * M
    if plan.get("rise_ppm") is not None:  # 02: the mean condition rises U n / c over the bar
        c = plan["challenges"]
        below = h * 10**6 < 2 * n * P1 and h * 10**6 * c < 2 * n * (M * c + plan["rise_ppm"] * n)
    return below and log_mean_exp8(caps) >= math.log(10**6 / plan["futility_alpha_ppm"]) + slack


def decision_allowed(parse_plan, rule, P, dec):
    """02 "What is checked": whether the recorded env decision follows from its plan."""
    try:
        plan = parse_plan(rule)
    except ValueError:
        return False
    if P == 0 or P >= 10**6:
        return False
    w, l, d = dec["wins"], dec["losses"], dec["draws"]
    if w + l + d != dec["n_challenges"] or dec["n_challenges"] > plan["challenges"]:
        return False
    stop, go_on = conditions(plan, P, w, l, d, -SLACK), conditions(plan, P, w, l, d, SLACK)
    f_stop, f_go = futile(plan, P, w, l, d, -SLACK), futile(plan, P, w, l, d, SLACK)
    outcome = dec["outcome"]
    if outcome == "contender_better":
        return stop[0]
    if outcome == "contender_not_better":
        return not go_on[0] and stop[2] and (stop[1] or f_stop)
    return not go_on[0] and not (go_on[2] and (go_on[1] or f_go))


def score_ppm(w, l, d):
    n = w + l + d
    return 500_000 if n == 0 else ((2 * w + d) * 10**6 + n) // (2 * n)


def geometric_mean(rates):
    rates = [min(max(1, q), 10**6) for q in rates]
    k, product = len(rates), 1
    for q in rates:
        product *= q
    lo, hi = 1, 1_000_001
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (2 * mid - 1) ** k <= (product << k):
            lo = mid
        else:
            hi = mid
    return lo


def decayed(floor, half_life, set_ppm, set_at, block):
    if set_ppm <= floor:
        return floor
    q, rem = divmod(max(0, block - set_at), half_life)
    x = 0 if q >= 32 else (set_ppm - floor) >> q
    return floor + x - (x * rem) // (2 * half_life)


# --- 06: derived ids -----------------------------------------------------------------------

def lp(text):
    raw = text.encode()
    return struct.pack("<I", len(raw)) + raw


def challenge_id(env, version, validator, match_id, index):
    material = lp(env) + struct.pack("<I", version) + validator + bytes.fromhex(match_id) + struct.pack("<Q", index)
    return blake3(material, derive_key_context="af 2026-11 challenge_id v1").hexdigest()


def match_id(validator, contender, champion, n_decided, chain_block, chain_block_hash):
    material = (validator + lp(contender) + lp(champion) + struct.pack("<QQ", n_decided, chain_block)
                + bytes.fromhex(chain_block_hash))
    return blake3(material, derive_key_context="af 2026-11 match_id v2").hexdigest()


# --- 14 section 1: the fold of one log -----------------------------------------------------

class Fold:
    def __init__(self, validator: bytes):
        self.validator = validator
        self.tip = None  # (height, hash hex)
        self.invalid_at = None
        self.n_events = self.n_transcripts = self.n_decided = 0
        self.matches = {}  # match id hex -> match dict
        self.findings = {k: 0 for k in KINDS}
        self.equivocations = []  # (accused hex, height, hash a hex, hash b hex, recorded height, event index)
        self.chain_block_seen = 0
        self.time_ms = None  # the tip's
        self.points = {}  # checkpoint height -> fold hash hex (02, "The fold format")
        self.claims = {}  # log claimed (hex) -> (recorded at, point): its newest claim (02)

    def find(self, kind):
        self.findings[kind] += 1

    def block(self, height, block_hash, time_ms, events, tools):
        for ev in events:
            # 15: every kind of the export is one of version 2, active from block 0.
            assert EVENT_TAGS[next(iter(ev))] < N_EVENT_KINDS_V2
        for idx, ev in enumerate(events):
            (kind, e), = ev.items()
            if kind in CHAIN_BLOCK_KINDS:
                self.chain_block_seen = max(self.chain_block_seen, e["chain_block"])
            self.event(height, idx, time_ms, kind, e, tools)
        self.n_events += len(events)
        self.tip = (height, block_hash)
        self.time_ms = time_ms
        if (height + 1) % CHECKPOINT_EVERY == 0:
            self.points[height] = blake3(fold_bytes(self)).hexdigest()

    def event(self, height, idx, time_ms, kind, e, tools):
        if kind == "match_started":
            due = match_id(self.validator, e["contender"]["hotkey"], e["champion"]["hotkey"], self.n_decided,
                           e["chain_block"], e["chain_block_hash"])
            if e["match_id"] != due and e["match_id"] not in self.matches:
                self.find("bad_match_id")
            if e["match_id"] in self.matches:
                return
            self.matches[e["match_id"]] = {
                "id": e["match_id"], "contender": e["contender"], "champion": e["champion"], "envs": e["envs"],
                "rule": e["rule"], "ratio": e["ratio_to_beat_ppm"], "place": (height, idx), "started_ms": time_ms,
                "chain_block": e["chain_block"], "chain_block_hash": e["chain_block_hash"], "envs_state": {},
                "decided": None, "n_transcripts": 0,
                "network_rules": e["rule"] == NETWORK_PLAN and all(
                    (env["name"], env["version"]) in ENVS_V2 for env in e["envs"])}
        elif kind in ("transcript", "transcript_cut"):
            t = e if kind == "transcript" else e["transcript"]
            self.n_transcripts += 1
            if t["challenge_id"] != challenge_id(t["env"]["name"], t["env"]["version"], self.validator, t["match_id"],
                                                 t["challenge_index"]):
                self.find("bad_challenge_id")
            if tools.rescored(self.validator, height, idx, t["reward_milli"]) != t["reward_milli"]:
                self.find("false_score")
            self.transcript(t)
        elif kind == "env_decision":
            m = self.matches.get(e["match_id"])
            if m is None:
                self.find("false_tally")
                return
            if not decision_allowed(tools.parse_plan, m["rule"], m["ratio"], e):
                self.find("false_decision")
            env = env_state(m, e["env"]["name"])
            if (e["wins"], e["losses"], e["draws"]) != (env["w"], env["l"], env["d"]):
                self.find("false_tally")
            env["decision"] = e["outcome"]
            env["decided_tally"] = (e["wins"], e["losses"], e["draws"])
            env["slots"] = {}
        elif kind == "match_decided":
            m = self.matches.get(e["match_id"])
            if m is None:
                self.find("false_decision")
                return
            if not match_decision_ok(m, e, tools.parse_plan):
                self.find("false_decision")
            if not m["network_rules"]:
                self.find("false_decision")
            if m["decided"] is None:
                self.n_decided += 1
            m["decided"] = {"won": e["contender_won"], "new_ratio": e["new_ratio_to_beat_ppm"],
                            "rates": [r["win_rate_ppm"] for r in e["win_rates"]], "time_ms": time_ms,
                            "height": height}
        elif kind == "fold_checkpoint":
            # 02, "Which points are claims": of this format, at a checkpoint height, the
            # greatest height per log (at equal heights, the later).
            if e["fold_version"] != FOLD_FORMAT:
                return
            for p in e["points"]:
                if (p["height"] + 1) % CHECKPOINT_EVERY != 0:
                    continue
                held = self.claims.get(p["validator"])
                if held is None or p["height"] >= held[1]["height"]:
                    self.claims[p["validator"]] = (height, p)
        elif kind == "evidence":
            if tools.evidence_proven(e):
                self.equivocations.append((e["validator"], e["height"], tools.header_hash(e["header_a"]).hex(),
                                           tools.header_hash(e["header_b"]).hex(), height, idx))
            else:
                self.find("false_evidence")

    def transcript(self, t):
        m = self.matches.get(t["match_id"])
        if m is None:
            self.find("schedule_gap")
            return
        m["n_transcripts"] += 1
        hotkey = t["miner"]["hotkey"]
        env = env_state(m, t["env"]["name"])
        role = "contender" if hotkey == m["contender"]["hotkey"] else (
            "champion" if hotkey == m["champion"]["hotkey"] else "other:" + hotkey)
        due, index = env["next"].get(role, 0), t["challenge_index"]
        repeat = index < due
        if index == due:
            env["next"][role] = due + 1
        elif index > due:
            env["next"][role] = index + 1
            self.find("schedule_gap")
        else:
            self.find("schedule_repeat")
        if env["decision"] is None and not repeat and role in ("contender", "champion"):
            slot = env["slots"].setdefault(index, {})
            slot[role] = t["reward_milli"]
            if len(slot) == 2:
                del env["slots"][index]
                a, b = slot["contender"], slot["champion"]
                env["w" if a > b else "l" if a < b else "d"] += 1


def env_state(m, name):
    return m["envs_state"].setdefault(name, {"next": {}, "slots": {}, "w": 0, "l": 0, "d": 0, "decision": None,
                                             "decided_tally": None})


def match_decision_ok(m, e, parse_plan):
    """02 "What is checked", the MatchDecided list."""
    n_envs = len(m["envs"])
    better = sum(1 for s in m["envs_state"].values() if s["decision"] == "contender_better")
    if e["contender_won"] != (better >= n_envs // 2 + 1):
        return False
    winner = m["contender"] if e["contender_won"] else m["champion"]
    if e["champion_hotkey"] != winner["hotkey"] or len(e["win_rates"]) != n_envs:
        return False
    try:
        plan = parse_plan(m["rule"])
    except ValueError:
        plan = None
    for rate, env in zip(e["win_rates"], m["envs"]):
        if rate["env"]["name"] != env["name"]:
            return False
        tally = m["envs_state"].get(env["name"], {}).get("decided_tally")
        if tally is not None and plan is not None and rate["win_rate_ppm"] != score_ppm(*tally):
            return False
    return e["contender_won"] or e["new_ratio_to_beat_ppm"] == m["ratio"]


def ratio_findings(fold, parse_plan):
    """14 section 2."""
    n, set_ppm, set_at = 0, 0, 0
    for m in sorted(fold.matches.values(), key=lambda m: m["place"]):
        plan = parse_plan(m["rule"])  # a text that is no score plan is outside these vectors: refused
        floor, half_life = 500_000 + plan["epsilon_ppm"], plan["half_life_blocks"]
        if m["ratio"] != decayed(floor, half_life, set_ppm, set_at, m["chain_block"]):
            n += 1
        dec = m["decided"]
        if dec is None or not dec["won"]:
            continue
        if dec["rates"] and dec["new_ratio"] != min(max(geometric_mean(dec["rates"]), floor), 950_000):
            n += 1
        set_ppm, set_at = dec["new_ratio"], m["chain_block"]
    return n


# --- 14 section 3: the combine, and section 5: the bytes -----------------------------------

def combine(folds, parse_plan):
    folds = sorted(folds, key=lambda f: f.validator)
    equivocators = {bytes.fromhex(e[0]) for f in folds for e in f.equivocations}
    proofs, base = {}, {}
    for f in folds:
        counts = dict(f.findings)
        counts["false_decision"] += ratio_findings(f, parse_plan)
        proofs[f.validator] = counts
        n = sum(c for k, c in counts.items() if k not in NOT_PROOFS)
        zeroed = f.invalid_at is not None or f.validator in equivocators
        base[f.validator] = 0 if zeroed else max(0, 1_000_000 - 200_000 * n)
    plays = sorted(((m["contender"]["hotkey"].encode(), m["champion"]["hotkey"].encode(), f.validator,
                     bytes.fromhex(mid)), m) for f in folds for mid, m in f.matches.items())
    pairs = {}
    for (c, ch, validator, mid), m in plays:
        pair = pairs.setdefault((c, ch), {"contender": m["contender"], "champion": m["champion"],
                                          "first_started_ms": m["started_ms"], "votes": {}})
        pair["first_started_ms"] = min(pair["first_started_ms"], m["started_ms"])
        if m["decided"] is not None and m["network_rules"]:
            pair["votes"][validator] = (m["decided"]["won"], m["decided"]["new_ratio"], m["decided"]["time_ms"],
                                        m["chain_block"])
    compared = {f.validator: [0, 0] for f in folds}
    for pair in pairs.values():
        for v, vote in pair["votes"].items():
            others = [o[0] for w, o in pair["votes"].items() if w != v and base[w] > 0]
            same = sum(1 for won in others if won == vote[0])
            if others:
                compared[v][0] += 1
                compared[v][1] += (len(others) - same) > same
    vtrust = {v: max(0, base[v] - (500_000 * bad // n if n else 0)) for v, (n, bad) in compared.items()}
    order = sorted(pairs.items(), key=lambda kv: (kv[1]["first_started_ms"], kv[0][0], kv[0][1]))
    champion, history, ratio, matches = None, [], (510_000, 0), []
    for (c, ch), pair in order:
        votes = sorted(pair["votes"].items())
        for_ppm = sum(vtrust[v] for v, vote in votes if vote[0])
        against = sum(vtrust[v] for v, vote in votes if not vote[0])
        verdict = None if not votes else (0 if for_ppm > against else 1)
        if champion is None:
            champion = pair["champion"]
            history.append((champion, None, pair["first_started_ms"]))
        if verdict == 0 and pair["champion"]["hotkey"] == champion["hotkey"]:
            winners = [(v, vote) for v, vote in votes if vote[0] and vtrust[v] > 0]
            ratios = sorted(vote[1] for _, vote in winners)
            ratio = (ratios[(len(ratios) - 1) // 2], min(vote[3] for _, vote in winners))
            champion = pair["contender"]
            history.append((champion, (c.decode(), ch.decode()), min(vote[2] for _, vote in winners)))
        matches.append((pair, votes, for_ppm, against, verdict))
    out = struct.pack("<I", 1) + struct.pack("<Q", len(folds))
    for f in folds:
        n_compared, n_bad = compared[f.validator]
        proof_kinds = [(i, proofs[f.validator][k]) for i, k in enumerate(KINDS)
                       if k not in NOT_PROOFS and proofs[f.validator][k] > 0]
        out += (f.validator + option(f.tip, lambda t: struct.pack("<Q", t[0]) + bytes.fromhex(t[1]))
                + struct.pack("<QQQ", f.n_events, f.n_transcripts, len(f.matches))
                + option(f.invalid_at, lambda h: struct.pack("<Q", h)) + bytes([f.validator in equivocators])
                + struct.pack("<Q", len(proof_kinds)) + b"".join(struct.pack("<IQ", k, n) for k, n in proof_kinds)
                + struct.pack("<QQI", n_compared, n_bad, vtrust[f.validator]))
    out += struct.pack("<Q", len(matches))
    for pair, votes, for_ppm, against, verdict in matches:
        out += miner_bytes(pair["contender"]) + miner_bytes(pair["champion"]) + struct.pack("<Q", pair["first_started_ms"])
        out += struct.pack("<Q", len(votes)) + b"".join(
            v + bytes([won]) + struct.pack("<IQQ", new_ratio, time_ms, block) for v, (won, new_ratio, time_ms, block) in votes)
        out += struct.pack("<QQ", for_ppm, against) + option(verdict, lambda x: struct.pack("<I", x))
    out += option(champion, miner_bytes) + struct.pack("<Q", len(history))
    for who, by, at in history:
        out += miner_bytes(who) + option(by, lambda p: string(p[0]) + string(p[1])) + struct.pack("<Q", at)
    out += struct.pack("<IQ", ratio[0], ratio[1])
    weights = [] if champion is None else [(champion["uid"], 65535)]
    out += struct.pack("<Q", len(weights)) + b"".join(struct.pack("<HH", u, w) for u, w in weights)
    return out, {f.validator.hex(): vtrust[f.validator] for f in folds}


def option(value, encode):
    return b"\x00" if value is None else b"\x01" + encode(value)


def string(text):
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def miner_bytes(m):
    return string(m["hotkey"]) + struct.pack("<H", m["uid"]) + string(m["model"])


# --- 02, "The fold format": a log's fold as checkpoints hash it ----------------------------

def fold_bytes(fold):
    """The fold's bytes in fold format 15, field by field as 02 lists them."""
    u32, u64 = (lambda x: struct.pack("<I", x)), (lambda x: struct.pack("<Q", x))
    out = u32(FOLD_FORMAT) + fold.validator
    out += option(fold.tip, lambda t: u64(t[0]) + bytes.fromhex(t[1]) + u64(fold.time_ms))
    out += option(fold.invalid_at, u64) + u64(fold.chain_block_seen)
    out += u64(fold.n_events) + u64(fold.n_transcripts) + u64(fold.n_decided)
    out += u64(len(KINDS)) + b"".join(u64(fold.findings[k]) for k in KINDS)
    out += u64(len(fold.equivocations)) + b"".join(
        bytes.fromhex(a) + u64(h) + bytes.fromhex(ha) + bytes.fromhex(hb) + u64(at) + u32(idx)
        for a, h, ha, hb, at, idx in fold.equivocations)
    matches = sorted(fold.matches.values(), key=lambda m: m["place"])
    out += u64(len(matches))
    for m in matches:
        out += bytes.fromhex(m["id"]) + miner_bytes(m["contender"]) + miner_bytes(m["champion"])
        out += u64(len(m["envs"])) + b"".join(string(e["name"]) + u32(e["version"]) for e in m["envs"])
        out += string(m["rule"]) + u32(m["ratio"]) + u64(m["place"][0]) + u32(m["place"][1]) + u64(m["started_ms"])
        out += u64(m["chain_block"]) + bytes.fromhex(m["chain_block_hash"]) + bytes([m["network_rules"]])
        out += u64(m["n_transcripts"])
        envs = sorted(m["envs_state"].items(), key=lambda kv: kv[0].encode())
        out += u64(len(envs))
        for name, env in envs:
            nxt = env["next"]
            others = sorted(((k[len("other:"):], v) for k, v in nxt.items() if k.startswith("other:")),
                            key=lambda kv: kv[0].encode())
            out += string(name) + u64(nxt.get("contender", 0)) + u64(nxt.get("champion", 0))
            out += u64(len(others)) + b"".join(string(h) + u64(n) for h, n in others)
            slots = sorted(env["slots"].items())
            out += u64(len(slots)) + b"".join(
                u64(i) + option(s.get("contender"), lambda r: struct.pack("<i", r))
                + option(s.get("champion"), lambda r: struct.pack("<i", r)) for i, s in slots)
            out += struct.pack("<III", env["w"], env["l"], env["d"])
            out += option(env["decision"], lambda o: u32(OUTCOMES.index(o)))
            out += option(env["decided_tally"], lambda t: struct.pack("<III", *t))
        out += option(m["decided"], lambda d: bytes([d["won"]]) + u32(d["new_ratio"]) + u64(len(d["rates"]))
                      + b"".join(u32(r) for r in d["rates"]) + u64(d["height"]) + u64(d["time_ms"]))
    return out
