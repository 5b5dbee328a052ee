#!/usr/bin/env python3
"""An independent check of fixtures/ledger/vectors.json, written from ledger-spec/ alone.

It shares no code with the Rust implementation: it parses block and event bytes by the
spec's tables, recomputes hashes, Merkle roots and proofs, challenge ids and checkpoint
key ids, and verifies every ed25519 signature. If this passes, the spec describes the
bytes the Rust code writes. Needs: pip install blake3 cryptography.
"""
import base64
import hashlib
import json
import struct
import sys
from pathlib import Path

from blake3 import blake3
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import spec_replay  # ledger-spec/14 and 02's statistics, shared with the replay vectors' check


def b3(data: bytes) -> bytes:
    return blake3(data).digest()


class Reader:
    """Reads the 01-encoding.md primitives from a byte string."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        return struct.unpack("<" + fmt, self.take(size))[0]

    def u8(self): return self.int("B")
    def u16(self): return self.int("H")
    def u32(self): return self.int("I")
    def u64(self): return self.int("Q")
    def i32(self): return self.int("i")
    def hash(self): return self.take(32).hex()

    def bool(self):
        b = self.u8()
        if b not in (0, 1):
            raise ValueError("bad bool")
        return b == 1

    def string(self):
        return self.take(self.u64()).decode("utf-8")

    def vec(self, item, most=None):
        n = self.u64()
        # 02 Bounds: a list's count is checked on its length prefix, before any item.
        bound(most is None or n <= most, f"a list of at most {most} items, by its length prefix")
        return [item() for _ in range(n)]

    def option(self, item):
        tag = self.u8()
        if tag not in (0, 1):
            raise ValueError("bad option tag")
        return item() if tag == 1 else None


def header(r: Reader) -> dict:
    return {
        "format_version": r.u16(), "validator": r.hash(), "height": r.u64(), "prev_hash": r.hash(),
        "time_ms": r.u64(), "events_root": r.hash(), "n_events": r.u32(),
    }


def name(r):
    text = r.string()
    bound(len(text.encode()) <= 256, "a short name is at most 256 bytes")
    return text


def short_list(r, item):
    return r.vec(item, 4096)


def miner(r): return {"hotkey": name(r), "uid": r.u16(), "model": name(r)}
def env_ref(r): return {"name": name(r), "version": r.u32()}


def event(r: Reader) -> dict:
    """02-events.md, the kinds table, in JSON form ({kind: fields})."""
    tag = r.u32()
    if tag == 0:
        return {"match_started": {"match_id": r.hash(), "contender": miner(r), "champion": miner(r),
                                  "envs": short_list(r, lambda: env_ref(r)), "rule": name(r), "ratio_to_beat_ppm": r.u32(),
                                  "chain_block": r.u64(), "chain_block_hash": r.hash()}}
    if tag == 1:
        t = transcript(r)
        check_miner_texts(t, [])
        return {"transcript": t}
    if tag == 2:
        outcomes = ["contender_better", "contender_not_better", "inconclusive"]
        return {"env_decision": {"match_id": r.hash(), "env": env_ref(r), "outcome": outcomes[r.u32()], "wins": r.u32(),
                                 "losses": r.u32(), "draws": r.u32(), "n_challenges": r.u64(), "rule": name(r)}}
    if tag == 3:
        return {"match_decided": {"match_id": r.hash(), "contender_won": r.bool(), "champion_hotkey": name(r),
                                  "win_rates": short_list(r, lambda: {"env": env_ref(r), "win_rate_ppm": r.u32()}),
                                  "new_ratio_to_beat_ppm": r.u32()}}
    if tag == 4:
        return {"weights_set": {"netuid": r.u16(), "uids": short_list(r, r.u16), "weights": short_list(r, r.u16),
                                "version_key": r.u64(), "chain_block": r.u64()}}
    if tag == 5:
        return {"chain_commitment": {"netuid": r.u16(), "chain_block": r.u64(), "committed_height": r.u64(),
                                     "committed_hash": r.hash()}}
    if tag == 6:
        return {"evidence": {"validator": r.hash(), "height": r.u64(), "header_a": header(r),
                             "signature_a": r.take(64).hex(), "header_b": header(r), "signature_b": r.take(64).hex()}}
    if tag == 7:
        t = transcript(r)
        cuts = r.vec(lambda: {"message_idx": r.option(r.u32), "full_bytes": r.u64(), "full_blake3": r.hash()}, 257)
        check_cuts(t, cuts)
        return {"transcript_cut": {"transcript": t, "cuts": cuts}}
    if tag == 8:
        return {"weights_committed": {"netuid": r.u16(), "uids": short_list(r, r.u16), "weights": short_list(r, r.u16),
                                      "version_key": r.u64(), "chain_block": r.u64(), "reveal_round": r.u64(),
                                      "reveal_block": r.u64(), "ciphertext_hash": r.hash()}}
    if tag == 9:
        return {"miner_skipped": {"netuid": r.u16(), "hotkey": name(r), "uid": r.u16(), "model": name(r),
                                  "revision": name(r), "commit_block": r.u64(),
                                  "reason": ["duplicate", "same_as_champion"][r.u32()], "kept_by": name(r),
                                  "kept_block": r.u64(), "chain_block": r.u64()}}
    if tag == 10:
        fold_version = r.u32()
        points = short_list(r, lambda: {"validator": r.hash(), "height": r.u64(), "block_hash": r.hash(),
                                        "fold_hash": r.hash()})
        keys = [p["validator"] for p in points]
        bound(all(a < b for a, b in zip(keys, keys[1:])), "fold checkpoint points in ascending validator order")
        return {"fold_checkpoint": {"fold_version": fold_version, "points": points}}
    if tag == 11:  # 16: the old key's last event
        return {"key_rotated": {"new_key": r.hash(), "chain_block": r.u64()}}
    if tag == 12:  # 16: the new key's first event
        return {"key_succeeded": {"old_key": r.hash(), "old_height": r.u64(), "old_hash": r.hash(),
                                  "chain_block": r.u64()}}
    if tag == 13:  # 13, "The champion's life"
        return {"champion_left": {"champion": miner(r), "reason": ["deregistered", "recommitted"][r.u32()],
                                  "chain_block": r.u64()}}
    raise ValueError(f"unknown event tag {tag}")


def transcript(r: Reader) -> dict:
    t = {"match_id": r.hash(), "env": env_ref(r), "challenge_id": r.hash(), "challenge_index": r.u64(),
         "invocation_id": r.hash(), "miner": miner(r),
         "messages": r.vec(lambda: {"role": name(r), "content": r.string()}, 256),
         "answer": r.string(), "reward_milli": r.i32(), "latency_ms": r.u64(), "error": r.option(r.string)}
    bound(len(t["messages"]) <= 256, "at most 256 messages")
    for m in t["messages"]:
        bound(len(m["role"].encode()) <= 256 and len(m["content"].encode()) <= 1 << 20, "message bounds")
    bound(len(t["answer"].encode()) <= 1 << 20, "answer bound")
    bound(t["error"] is None or len(t["error"].encode()) <= 1 << 20, "error bound")
    return t


def check_cuts(t: dict, cuts: list):
    """02-events.md, TranscriptCut: 1 to 257 cuts naming existing texts in order, once
    each; only miner texts are cut; the answer's cut repeats the last miner text's."""
    bound(1 <= len(cuts) <= 257, "1..=257 cuts")
    last = -1
    for c in cuts:
        position = c["message_idx"] if c["message_idx"] is not None else 1 << 32
        bound(position > last, "cuts in order, each text once")
        last = position
        if c["message_idx"] is not None:
            bound(c["message_idx"] < len(t["messages"]), "a cut names an existing message")
            bound(t["messages"][c["message_idx"]]["role"] == "assistant", "only miner texts (assistant) are cut")
    check_miner_texts(t, cuts)
    if cuts[-1]["message_idx"] is None:
        miner = [i for i, m in enumerate(t["messages"]) if m["role"] == "assistant"]
        cut_of = {c["message_idx"]: c for c in cuts}
        bound(bool(miner) and miner[-1] in cut_of and t["messages"][miner[-1]]["content"] == t["answer"]
              and (cut_of[miner[-1]]["full_bytes"], cut_of[miner[-1]]["full_blake3"])
              == (cuts[-1]["full_bytes"], cuts[-1]["full_blake3"]),
              "the answer's cut repeats the last miner text's, and the answer is that text")


def check_miner_texts(t: dict, cuts: list):
    """02-events.md, recording rules: miner texts within their caps (256 KiB, and the
    1 MiB budget left); a cut text is the longest prefix within its cap."""
    budget = 1 << 20
    cut_of = {c["message_idx"]: c for c in cuts if c["message_idx"] is not None}
    for i, m in enumerate(t["messages"]):
        if m["role"] != "assistant":
            continue
        cap = min(256 * 1024, budget)
        n = len(m["content"].encode())
        bound(n <= cap, "a miner text is within its cap")
        if i in cut_of:
            bound(cut_of[i]["full_bytes"] > cap, "a cut full text is longer than its cap")
            bound(n + 4 > cap, "a cut text is the longest prefix within its cap")
        budget -= n


def bound(condition: bool, what: str):
    if not condition:
        raise ValueError(f"bound violated: {what}")


def leaf_hash(b: bytes) -> bytes: return b3(b"\x00" + b)
def node_hash(l: bytes, r: bytes) -> bytes: return b3(b"\x01" + l + r)


def mth(leaves: list) -> bytes:
    """03-blocks.md: RFC 6962's recursive definition."""
    if not leaves:
        return b3(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def verify_inclusion(leaf: bytes, index: int, size: int, path: list, root: bytes) -> bool:
    """RFC 9162 §2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


PASSED = []


def parse_score_plan(text: str) -> dict:
    """A score plan as ledger-spec/02 spells it: integers only, one spelling."""
    import re
    m = re.fullmatch(
        r"score alpha_ppm=(0|[1-9][0-9]*) prior=(0|[1-9][0-9]*),(0|[1-9][0-9]*) challenges=(0|[1-9][0-9]*) "
        r"epsilon_ppm=(0|[1-9][0-9]*) half_life_blocks=(0|[1-9][0-9]*)"
        r"(?: (dominance|dominance-reach) rate_ppm=(0|[1-9][0-9]*) alpha_ppm=(0|[1-9][0-9]*) share_ppm=(0|[1-9][0-9]*)"
        r" share_alpha_ppm=(0|[1-9][0-9]*))?"
        r"(?: futility margin_ppm=(0|[1-9][0-9]*) alpha_ppm=(0|[1-9][0-9]*)"
        r"(?: mean_margin_ppm=(0|[1-9][0-9]*)| rise_ppm=(0|[1-9][0-9]*))?)?",
        text,
    )
    if m is None:
        raise ValueError(f"not a score plan: {text!r}")
    keys = ["alpha_ppm", "a", "b", "challenges", "epsilon_ppm", "half_life_blocks", "clause", "rate_ppm",
            "dominance_alpha_ppm", "share_ppm", "share_alpha_ppm", "margin_ppm", "futility_alpha_ppm",
            "mean_margin_ppm", "rise_ppm"]
    plan = {k: (g if k == "clause" or g is None else int(g)) for k, g in zip(keys, m.groups())}
    plan["reach"] = plan.pop("clause") == "dominance-reach"
    if plan["rise_ppm"] is not None:  # 02: rise_ppm stands where mean_margin_ppm=0 stood
        plan["mean_margin_ppm"] = 0
    return plan


def score_decision(plan: dict, P: int, w: int, l: int, d: int):
    """(what the rule says, whether the futility stop applies, whether a "not better" stop
    may end the env), by ledger-spec/02's formulas at the exact thresholds (no slack)."""
    crown, not_better, out = spec_replay.conditions(plan, P, w, l, d, 0.0)
    says = "better" if crown else "not_better" if not_better and out else "continue"
    return says, spec_replay.futile(plan, P, w, l, d, 0.0), out


def check_decisions(v: dict):
    for x in v["decisions"]:
        plan = parse_score_plan(x["plan"])
        w, l, d, P = x["wins"], x["losses"], x["draws"], x["ratio_to_beat_ppm"]
        says, futile, dismissable = score_decision(plan, P, w, l, d)
        check(says == x["rule_says"] and futile == x["futile"] and dismissable == x["dismissable"],
              f"score plan at {w}/{l}/{d} against {P}: rule {says}, futility {futile}, dismissable {dismissable} (02)")
        check(x["score_ppm"] == spec_replay.score_ppm(w, l, d), f"score of {w}/{l}/{d} (02)")
    r = v["ratio"]
    floor = 500_000 + r["epsilon_ppm"]
    for x in r["geometric_means"]:
        want = min(max(spec_replay.geometric_mean(x["rates"]), floor), 950_000)
        check(x["new_ratio_to_beat_ppm"] == want, f"geometric mean of {x['rates']} (02)")
    for x in r["decays"]:
        want = spec_replay.decayed(floor, r["half_life_blocks"], x["set_ppm"], x["set_at_block"], x["block"])
        check(x["ppm"] == want, f"ratio {x['set_ppm']} set at {x['set_at_block']} read at {x['block']} (02)")


def check(condition: bool, what: str):
    if not condition:
        print(f"spec-check: {len(PASSED)} passed, 1 failed")
        sys.exit(f"FAIL: {what}")
    PASSED.append(what)
    print(f"ok   {what}")


# 03-blocks.md: the canonical encodings of the 8 points of small order, refused as keys.
SMALL_ORDER = {bytes.fromhex(h) for h in [
    "00" * 32, "00" * 31 + "80", "01" + "00" * 31, "ec" + "ff" * 30 + "7f",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
]}
P = 2**255 - 19
D = -121665 * pow(121666, P - 2, P) % P


def canonical_point(key: bytes) -> bool:
    """03-blocks.md: y < p, and x recoverable with x = 0 only when the sign bit is 0."""
    y = int.from_bytes(key, "little") & ((1 << 255) - 1)
    sign = key[31] >> 7
    if y >= P:
        return False
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * pow(2, (P - 1) // 4, P) % P
    if (x * x - x2) % P != 0:
        return False
    return not (x == 0 and sign == 1)


def need(condition: bool, what: str):
    if not condition:
        raise ValueError(what)


def export_blocks(data: bytes):
    """08-export.md: every block of a block export, checked by 01-04 alone, as
    (header, block hash, events), in the export's order."""
    magic = b"af-ledger-blocks/v1\n"
    need(data.startswith(magic), "export starts with the magic (08)")
    pos, tips, n_blocks = len(magic), {}, 0
    while pos < len(data):
        need(pos + 4 <= len(data), f"record {n_blocks} has its length (08)")
        length = struct.unpack_from("<I", data, pos)[0]
        need(length <= 32 << 20 and pos + 4 + length <= len(data), f"record {n_blocks} is whole and within 32 MiB (08)")
        raw = data[pos + 4:pos + 4 + length]
        pos += 4 + length
        r = Reader(raw)
        h = header(r)
        validator = bytes.fromhex(h["validator"])
        need(h["format_version"] == 1 and h["n_events"] <= 65536, f"record {n_blocks}: header rules (03)")
        need(canonical_point(validator) and validator not in SMALL_ORDER, f"record {n_blocks}: validator key (03)")
        prev = tips.get(validator)
        expected = (0, bytes(32), None) if prev is None else (prev[0] + 1, prev[1], prev[2])
        need(h["height"] == expected[0] and bytes.fromhex(h["prev_hash"]) == expected[1]
              and (expected[2] is None or h["time_ms"] >= expected[2]), f"record {n_blocks}: links (03)")
        block_hash = b3(raw[:118])
        Ed25519PublicKey.from_public_bytes(validator).verify(r.take(64), b"af-ledger/v1/block\x00" + block_hash)
        n = r.u64()
        need(n == h["n_events"], f"record {n_blocks}: event count (03)")
        leaves, events = [], []
        for _ in range(n):
            start = r.pos
            events.append(event(r))
            need(r.pos - start <= 4 << 20, f"record {n_blocks}: event within 4 MiB (01)")
            leaves.append(leaf_hash(raw[start:r.pos]))
        need(r.pos == len(raw) and mth(leaves).hex() == h["events_root"], f"record {n_blocks}: events root, no trailing bytes (03)")
        tips[validator] = (h["height"], block_hash, h["time_ms"])
        n_blocks += 1
        yield h, block_hash, events


def verify_export(path: Path):
    """08-export.md: every block of a block export, by 01-04 alone."""
    tips, n_blocks, n_events = {}, 0, 0
    for h, block_hash, events in export_blocks(path.read_bytes()):
        tips[bytes.fromhex(h["validator"])] = (h["height"], block_hash)
        n_blocks += 1
        n_events += len(events)
    for validator, (height, block_hash) in sorted(tips.items()):
        print(f"chain {validator.hex()}: {height + 1} blocks, tip {block_hash.hex()}")
    print(f"export verified by the spec alone: {n_blocks} blocks, {n_events} events, {len(tips)} chain(s)")


class ReplayTools:
    """What ledger-spec/14's fold needs from the rest of the spec, and the one input it
    takes from a vector: the rewards an environment re-scores otherwise."""

    def __init__(self, rescored: list):
        self.rescored_list = {(bytes.fromhex(x["validator"]), x["height"], x["event_idx"]): x["reward_milli"]
                              for x in rescored}
        self.n_taken = 0
        self.parse_plan = parse_score_plan
        self.evidence_proven = evidence_proven
        self.header_hash = header_hash

    def rescored(self, validator, height, idx, recorded):
        key = (validator, height, idx)
        if key in self.rescored_list:
            return self.rescored_list[key]
        self.n_taken += 1
        return recorded


def replay_export(data: bytes, tools):
    """ledger-spec/14 over a block export: (state bytes, vTrust by validator)."""
    folds = {}
    for h, block_hash, events in export_blocks(data):
        validator = bytes.fromhex(h["validator"])
        fold = folds.setdefault(validator, spec_replay.Fold(validator))
        fold.block(h["height"], block_hash.hex(), h["time_ms"], events, tools)
    state_bytes, vtrust = spec_replay.combine(list(folds.values()), parse_score_plan)
    return folds, state_bytes, vtrust


def check_replay_of_audit(export: Path, audit: Path):
    """`--replay EXPORT AUDIT.json`: the state hash `af audit --json` printed for a store,
    recomputed from that store's block export and ledger-spec/14. The environments'
    verdicts are the one input taken from the audit: the transcripts it found `false_score`
    at (every other reward is taken as re-scored equal). An audit that did not list every
    finding leaves that input unknown, and is refused."""
    report = strict_json(audit.read_text())
    need(report["state"]["n_discrepancies_omitted"] == 0, "the audit lists every finding (14)")
    rescored = [{"validator": f["validator"], "height": f["height"], "event_idx": f["event_idx"], "reward_milli": None}
                for f in report["state"]["discrepancies"] if f["kind"] == "false_score"]
    tools = ReplayTools(rescored)
    _, state_bytes, _ = replay_export(export.read_bytes(), tools)
    need(b3(state_bytes).hex() == report["state_hash"],
         f"state hash {b3(state_bytes).hex()} from the spec, {report['state_hash']} from af audit (14)")
    print(f"state hash {report['state_hash']} recomputed from {export.name} by ledger-spec/14 alone; "
          f"{len(rescored)} false scores and {tools.n_taken} rewards re-scored equal taken from the audit")


def check_claims_fixture(path: Path):
    """02, "Fold checkpoints": every fold hash of claims.afblocks recomputed in fold format
    15 from the logs, and each log's newest claim of each log checked against it."""
    v = strict_json(path.read_text())
    folds, _, _ = replay_export((path.parent / v["blocks"]).read_bytes(), ReplayTools([]))
    agree, false = 0, []
    for claimer, fold in sorted(folds.items()):
        for claimed, (at, point) in sorted(fold.claims.items()):
            ours = folds.get(bytes.fromhex(claimed))
            ours = ours and ours.points.get(point["height"])
            if ours == point["fold_hash"]:
                agree += 1
            elif ours is not None:
                false.append({"at": at, "claimed": point["fold_hash"], "claimer": claimer.hex(), "fold_hash": ours,
                              "height": point["height"], "validator": claimed})
    check(agree == v["n_agree"] and false == v["false_claims"],
          f"{agree} fold checkpoint claims agree with the folds recomputed from the logs, {len(false)} false (02)")


def first_difference(a: str, b: str) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first differs at byte {at // 2} of {len(a) // 2} and {len(b) // 2}: {a[at:at + 32]} / {b[at:at + 32]}"


def check_replay_vectors(path: Path):
    """ledger-spec/14: every scenario's state hash from its block export and the spec."""
    v = strict_json(path.read_text())
    check([k["name"] for k in v["finding_kinds"]] == spec_replay.KINDS, "finding kinds and their tags (14)")
    n_taken = 0
    for sc in v["scenarios"]:
        tools = ReplayTools(sc["rescored"])
        folds, state_bytes, vtrust = replay_export((path.parent / sc["blocks"]).read_bytes(), tools)
        for f in sc["folds"]:
            mine = folds[bytes.fromhex(f["validator"])]
            found = {k: n for k, n in mine.findings.items() if n}
            check(found == f["findings"] and len(mine.matches) == f["n_matches"],
                  f"{sc['name']}: the fold of {f['validator'][:16]}: findings {found} (14 section 1)")
            mine_bytes = spec_replay.fold_bytes(mine)
            check(mine_bytes.hex() == f["fold_bytes"] and b3(mine_bytes).hex() == f["fold_hash"],
                  f"{sc['name']}: the fold of {f['validator'][:16]} in fold format 15, and its hash (02)"
                  + ("" if mine_bytes.hex() == f["fold_bytes"] else "; " + first_difference(mine_bytes.hex(), f["fold_bytes"])))
        for x in sc["validators"]:
            check(vtrust[x["validator"]] == x["vtrust_ppm"],
                  f"{sc['name']}: vTrust of {x['validator'][:16]} is {vtrust[x['validator']]} (14 section 3)")
        check(state_bytes.hex() == sc["state_bytes"], f"{sc['name']}: the state's bytes (14 section 5)")
        check(b3(state_bytes).hex() == sc["state_hash"], f"{sc['name']}: state hash {sc['state_hash'][:16]} (14)")
        n_taken += tools.n_taken
    print(f"replay vectors: {len(v['scenarios'])} state hashes recomputed from their logs; "
          f"{n_taken} transcript rewards taken as re-scored equal (the environments' scorers are not in ledger-spec)")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--replay":
        try:
            check_replay_of_audit(Path(sys.argv[2]), Path(sys.argv[3]))
        except Exception as error:  # anything not recomputed is a failure
            sys.exit(f"FAIL: {error!r}")
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--blocks":
        try:
            verify_export(Path(sys.argv[2]))
        except Exception as error:  # any decode failure is a verification failure
            sys.exit(f"FAIL: {error!r}")
        return
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent / "fixtures/ledger/vectors.json")
    v = strict_json(path.read_text())
    for probe in strict_json((path.parent / "json-probes.json").read_text())["probes"]:
        try:
            strict_json(probe["example"])
            refused = False
        except ValueError:
            refused = True
        check(refused, f"JSON probe refused: {probe['name']} (10)")
    public = bytes.fromhex(v["key"]["public_key"])
    key = Ed25519PublicKey.from_public_bytes(public)

    c = v["challenge_id"]
    derived = spec_replay.challenge_id(c["env"], c["env_version"], bytes.fromhex(c["validator"]), c["match_id"], c["index"])
    check(derived == c["challenge_id"], "challenge id derivation (06)")

    m = v["match_id"]
    derived = spec_replay.match_id(bytes.fromhex(m["validator"]), m["contender"], m["champion"], m["n_decided"],
                                   m["chain_block"], m["chain_block_hash"])
    check(derived == m["match_id"], "match id derivation from the chain block (06)")

    for i, e in enumerate(v["events"]):
        raw = bytes.fromhex(e["bytes"])
        r = Reader(raw)
        decoded = event(r)
        check(r.pos == len(raw) and decoded == e["json"], f"event {i} decodes by the spec to its JSON (02)")
        check(leaf_hash(raw).hex() == e["leaf_hash"], f"event {i} leaf hash (03)")

    for e in v["events_refused"]:
        raw = bytes.fromhex(e["bytes"])
        try:
            r = Reader(raw)
            event(r)
            refused = r.pos != len(raw)
        except ValueError:
            refused = True
        check(refused, f"event refused: {e['why']} (02)")

    # 02 "Evidence": the vector's placeholder signatures make it false evidence; the same
    # evidence signed by its accused (the vector key, as both headers' validator) is
    # proven, and with a header that breaks 03's rules it is false again.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    evidence = next(e["json"]["evidence"] for e in v["events"] if "evidence" in e["json"])
    check(not evidence_proven(evidence), "the vectors' placeholder evidence is false evidence (02)")
    signer = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(v["key"]["secret_seed"]))
    real = json.loads(json.dumps(evidence))
    for side in "ab":
        real[f"header_{side}"]["validator"] = public.hex()
        real[f"header_{side}"]["height"] = real["height"]
    real["validator"] = public.hex()
    real["header_b"]["time_ms"] = real["header_a"]["time_ms"] + 1
    sign = lambda h: signer.sign(b"af-ledger/v1/block\x00" + header_hash(h)).hex()
    real["signature_a"], real["signature_b"] = sign(real["header_a"]), sign(real["header_b"])
    check(evidence_proven(real), "evidence of two signed headers at one height is proven (02)")
    real["header_b"]["format_version"] = 2
    real["signature_b"] = sign(real["header_b"])
    check(not evidence_proven(real), "evidence with a header breaking 03's rules is false (02)")

    leaves = [bytes.fromhex(h) for h in v["merkle"]["leaf_hashes"]]
    check(mth(leaves).hex() == v["merkle"]["root"], "Merkle root (03)")
    check(b3(b"").hex() == v["merkle"]["empty_root"], "empty Merkle root (03)")
    proof = [bytes.fromhex(h) for h in v["merkle"]["proof_of_event_2"]]
    check(verify_inclusion(leaves[2], 2, len(leaves), proof, mth(leaves)), "inclusion proof of event 2 (03)")

    prev_hash, prev_time = bytes(32), None
    for height, b in enumerate(v["blocks"]):
        raw = bytes.fromhex(b["block_bytes"])
        r = Reader(raw)
        h = header(r)
        header_bytes = raw[:118]
        check(header_bytes.hex() == b["header_bytes"] and h == b["header"], f"block {height} header layout (03)")
        block_hash = b3(header_bytes)
        check(block_hash.hex() == b["block_hash"], f"block {height} hash = blake3(header) (03)")
        check(header_hash(h) == block_hash, f"block {height} header re-encoded from its fields hashes the same (03)")
        message = b"af-ledger/v1/block\x00" + block_hash
        check(message.hex() == b["signing_message"], f"block {height} signing message (03)")
        signature = r.take(64)
        key.verify(signature, message)  # raises on a bad signature
        check(signature.hex() == b["signature"], f"block {height} ed25519 signature verifies (03)")
        n = r.u64()
        event_leaves = []
        for _ in range(n):
            start = r.pos
            event(r)
            event_leaves.append(leaf_hash(raw[start:r.pos]))
        check(r.pos == len(raw) and n == h["n_events"], f"block {height} holds exactly n_events events (03)")
        check(mth(event_leaves).hex() == h["events_root"], f"block {height} events root (03)")
        check(h["format_version"] == 1 and h["height"] == height and h["validator"] == public.hex(),
              f"block {height} version, height, validator (03)")
        check(bytes.fromhex(h["prev_hash"]) == prev_hash and (prev_time is None or h["time_ms"] >= prev_time),
              f"block {height} links to its predecessor (03)")
        prev_hash, prev_time = block_hash, h["time_ms"]

    note = v["checkpoint"]["note"]
    body, signatures = note.split("\n\n", 1)
    body += "\n"
    origin, size, root = body.splitlines()[:3]
    check(origin == "af.ledger/v1/" + public.hex() and int(size) == len(v["blocks"])
          and base64.b64decode(root) == prev_hash, "checkpoint text names the tip (04)")
    key_name = "af-" + public.hex()[:16]
    key_id = hashlib.sha256(key_name.encode() + b"\n\x01" + public).digest()[:4]
    line = signatures.splitlines()[0]
    check(line.startswith("\u2014 " + key_name + " ") and key_id.hex() == v["checkpoint"]["key_id"], "checkpoint key name and id (04)")
    blob = base64.b64decode(line.split(" ")[2])
    check(blob[:4] == key_id, "checkpoint signature line carries the key id (04)")
    key.verify(blob[4:], body.encode())
    check(True, "checkpoint signature verifies over the note text (04)")
    check(note_verifies(note, public), "checkpoint note verifies by the rules of 04")
    # Two lines by our key name and id, one of them bad, refuse the note in either order.
    bad_blob = bytearray(blob)
    bad_blob[10] ^= 1
    bad = "\u2014 " + key_name + " " + base64.b64encode(bytes(bad_blob)).decode()
    head = note[: note.index("\n\n") + 2]
    for lines in ([line, bad], [bad, line]):
        check(not note_verifies(head + "\n".join(lines) + "\n", public),
              "a second, bad signature line by our key refuses the note (04)")
    # Base64 whose padding bits are not zero is refused (the canonical encoding only).
    text = line.split(" ")[2]
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".index(text[-2])
    sloppy = text[:-2] + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last | 1] + text[-1]
    check(text.endswith("=") and not note_verifies(note.replace(text, sloppy), public),
          "a signature whose base64 has non-zero padding bits is refused (04)")
    check_decisions(v)
    check_replay_vectors(path.parent.parent / "replay/vectors.json")
    check_claims_fixture(path.parent.parent / "replay/claims.json")
    print("all vectors check out against ledger-spec/")
    print(f"spec-check: {len(PASSED)} passed, 0 failed")


def header_hash(h):
    """03: blake3 over the header's canonical bytes."""
    return blake3(struct.pack("<H", h["format_version"]) + bytes.fromhex(h["validator"]) + struct.pack("<Q", h["height"])
                  + bytes.fromhex(h["prev_hash"]) + struct.pack("<Q", h["time_ms"]) + bytes.fromhex(h["events_root"])
                  + struct.pack("<I", h["n_events"])).digest()


def evidence_proven(ev):
    """02 "Evidence": both headers the accused's at its height, 03's header rules, different
    hashes, strict signatures over each header's hash by the accused."""
    from cryptography.exceptions import InvalidSignature
    a, b = ev["header_a"], ev["header_b"]
    for h in (a, b):
        if h["validator"] != ev["validator"] or h["height"] != ev["height"]:
            return False
        if h["format_version"] != 1 or h["n_events"] > 65536 or (h["height"] == 0 and h["prev_hash"] != "00" * 32):
            return False
    if header_hash(a) == header_hash(b):
        return False
    key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(ev["validator"]))
    try:
        for h, sig in ((a, ev["signature_a"]), (b, ev["signature_b"])):
            key.verify(bytes.fromhex(sig), b"af-ledger/v1/block\x00" + header_hash(h))
    except InvalidSignature:
        return False
    return True


def strict_json(text):
    """ledger-spec/10's syntax: RFC 8259 JSON with each member named once, no lone
    surrogate escapes and no `-0`. (Leading zeros, NaN and the like are not JSON, and
    Python's parser refuses them already.)"""
    def pairs(items):
        names = [name for name, _ in items]
        if len(names) != len(set(names)):
            raise ValueError("duplicate member name")
        return dict(items)

    def integer(digits):
        if digits.startswith("-0"):
            raise ValueError("-0")
        return int(digits)

    def constant(name):
        raise ValueError(f"{name} is not JSON")

    value = json.loads(text, object_pairs_hook=pairs, parse_int=integer, parse_constant=constant)

    def walk(node):
        if isinstance(node, str):
            if any(0xD800 <= ord(c) <= 0xDFFF for c in node):
                raise ValueError("lone surrogate escape")
        elif isinstance(node, dict):
            for name, item in node.items():
                walk(name)
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(value)
    return value


def strict_b64(text):
    """Standard base64 with padding, refusing any other spelling of the same bytes."""
    data = base64.b64decode(text, validate=True)
    if base64.b64encode(data).decode() != text:
        raise ValueError("not the canonical base64 of its bytes")
    return data


def note_verifies(note, public):
    """ledger-spec/04: every signature line by the validator's key name and id verifies
    strictly, and there is at least one; other keys' lines are skipped."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.exceptions import InvalidSignature
    body, signatures = note.split("\n\n", 1)
    body += "\n"
    name = "af-" + public.hex()[:16]
    key_id = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
    key = Ed25519PublicKey.from_public_bytes(public)
    signed = False
    for line in signatures.splitlines():
        if not line.startswith("\u2014 "):
            return False
        line_name, _, text = line[2:].partition(" ")
        try:
            blob = strict_b64(text)
        except ValueError:
            return False
        if line_name != name or len(blob) != 68 or blob[:4] != key_id:
            continue
        try:
            key.verify(blob[4:], body.encode())
        except InvalidSignature:
            return False
        signed = True
    return signed


if __name__ == "__main__":
    main()
