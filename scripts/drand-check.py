"""Commit-reveal v4 against bittensor-drand (PyPI, the Rust code bittensor's SDK commits
with): ciphertexts cross both ways on quicknet's real round 1000, a weights payload
sealed by either side opens on the other, and the reveal round `af chain tlock plan`
aims at equals the one bittensor-drand's get_encrypted_commit_v2 picks for the same
chain state. Run by .ci/run; needs no network (round 1000's signature is public).

Usage: drand-check.py PATH_TO_AF
"""
import json
import subprocess
import sys
import time

import bittensor_drand as drand

AF = sys.argv[1]
ROUND = 1000
SIGNATURE = "b44679b9a59af2ec876b1a6b1ad52ea9b1615fc3982b19576350f93447cb1125e342b73a8dd2bacbe47e4b6b63ed5e39"
PASSED = []


def check(condition, what):
    if not condition:
        sys.exit(f"FAIL: {what}")
    PASSED.append(what)
    print(f"ok   {what}")


def af(*args, expect=0):
    run = subprocess.run([AF, *args], capture_output=True, text=True)
    if run.returncode != expect:
        sys.exit(f"FAIL: af {' '.join(args)} exited {run.returncode}, not {expect}: {run.stderr.strip()}")
    return json.loads(run.stdout) if "--json" in args else run.stdout


def scale_payload(hotkey, uids, values, version_key):
    """WeightsTlockPayload, SCALE: compact-length vectors, then u64 little-endian."""
    def compact(n):
        assert n < 64
        return bytes([n << 2])
    body = compact(len(hotkey)) + hotkey
    body += compact(len(uids)) + b"".join(u.to_bytes(2, "little") for u in uids)
    body += compact(len(values)) + b"".join(v.to_bytes(2, "little") for v in values)
    return body + version_key.to_bytes(8, "little")


def compact_len(n):
    return bytes([n << 2]) if n < 64 else ((n << 2) | 1).to_bytes(2, "little") if n < 1 << 14 else ((n << 2) | 2).to_bytes(4, "little")


def user_data(ciphertext, round_):
    """bittensor-drand's encrypt_at_round/decrypt_with_signature wrap the ciphertext the
    chain stores in SCALE `UserData { encrypted_data: Vec<u8>, reveal_round: u64 }`."""
    return compact_len(len(ciphertext)) + ciphertext + round_.to_bytes(8, "little")


def unwrap_user_data(data):
    mode = data[0] & 3
    n, start = {0: (data[0] >> 2, 1), 1: (int.from_bytes(data[:2], "little") >> 2, 2),
                2: (int.from_bytes(data[:4], "little") >> 2, 4)}[mode]
    check(len(data) == start + n + 8, "bittensor-drand's UserData wraps exactly one ciphertext and a round")
    return data[start:start + n], int.from_bytes(data[start + n:], "little")


hotkey = bytes(range(32))
payload = scale_payload(hotkey, [3, 7], [0, 65535], 42)

# Theirs → ours.
wrapped, round_ = drand.encrypt_at_round(payload, ROUND)
theirs, inner_round = unwrap_user_data(wrapped)
check(round_ == ROUND == inner_round, "bittensor-drand encrypts to the round asked")
opened = af("chain", "tlock", "decrypt", "--ciphertext", theirs.hex(), "--signature", SIGNATURE, "--round", str(ROUND), "--json")
check(opened["ok"] and bytes.fromhex(opened["plaintext"]) == payload, "af opens bittensor-drand's ciphertext with round 1000's signature")
check(opened["weights"] == {"hotkey": hotkey.hex(), "uids": [3, 7], "values": [0, 65535], "version_key": 42},
      "af decodes the opened bytes as the weights payload")
wrong = af("chain", "tlock", "decrypt", "--ciphertext", theirs.hex(), "--signature", SIGNATURE, "--round", str(ROUND + 1), "--json", expect=3)
check(not wrong["ok"], "af refuses round 1000's signature as round 1001's (exit 3)")

# Ours → theirs.
ours = bytes.fromhex(af("chain", "tlock", "encrypt", "--round", str(ROUND), "--plaintext", payload.hex(), "--json")["ciphertext"])
check(drand.decrypt_with_signature(user_data(ours, ROUND), SIGNATURE) == payload, "bittensor-drand opens af's ciphertext with round 1000's signature")
check(len(ours) == len(theirs), f"both serialize the ciphertext alike ({len(ours)} bytes)")
tampered = bytearray(ours)
tampered[100] ^= 1
try:
    drand.decrypt_with_signature(user_data(bytes(tampered), ROUND), SIGNATURE)
    check(False, "a flipped byte of af's ciphertext does not open")
except ValueError:
    check(True, "a flipped byte of af's ciphertext does not open")

# The reveal round, for the same chain state (stateful epochs, tempo 360, last epoch at
# 1000): ordinary blocks, the block before an epoch fires, the fire block, a pending
# epoch, longer reveal periods, a fast chain.
CASES = [
    dict(current_block=1010), dict(current_block=1358), dict(current_block=1359), dict(current_block=1360),
    dict(current_block=1361), dict(current_block=1100, pending_epoch_at=1200),
    dict(current_block=1199, pending_epoch_at=1200), dict(current_block=1010, subnet_reveal_period_epochs=3),
    dict(current_block=1359, subnet_reveal_period_epochs=2), dict(current_block=1010, block_time=0.25),
]
for case in CASES:
    state = dict(last_epoch_block=1000, pending_epoch_at=0, subnet_epoch_index=5, tempo=360, blocks_since_last_step=10,
                 subnet_reveal_period_epochs=1, block_time=12.0)
    state.update(case)
    before = int(time.time() * 1000)
    commit, their_round = drand.get_encrypted_commit_v2(uids=[1], weights=[65535], version_key=0, hotkey=hotkey, **state)
    after = int(time.time() * 1000)
    rounds = set()
    for now in (before, after):
        plan = af("chain", "tlock", "plan", "--block", str(state["current_block"]), "--tempo", str(state["tempo"]),
                  "--reveal-period", str(state["subnet_reveal_period_epochs"]),
                  "--last-epoch-block", str(state["last_epoch_block"]), "--pending-epoch-at", str(state["pending_epoch_at"]),
                  "--block-ms", str(int(state["block_time"] * 1000)), "--now-ms", str(now), "--json")
        rounds.add(plan["plan"]["reveal_round"])
    # Our round for the instants just before and after their call brackets theirs.
    check(min(rounds) <= their_round <= max(rounds),
          f"reveal round for {case}: af {sorted(rounds)}, bittensor-drand {their_round}")
    check(len(commit) == len(ours) - len(payload) + len(scale_payload(hotkey, [1], [65535], 0)),
          f"bittensor-drand's commit for {case} has the ciphertext size af's format predicts")

print(f"drand-check: {len(PASSED)} checks passed")
