"""`af wallet show` against the PyPI package bittensor-wallet (what btcli uses): fresh
wallets written by the package, plain and password-encrypted hotkeys, the coldkey's
public file, btcli's "default" wallet name, and a wrong password. Run by .ci/run.

Usage: wallet-check.py PATH_TO_AF
"""
import json
import os
import subprocess
import sys
import tempfile

from bittensor_wallet import Keypair, Wallet

AF = sys.argv[1]
PASSWORD = "pa55 word, with spaces"
PASSED = []


def check(condition, what):
    if not condition:
        sys.exit(f"FAIL: {what}")
    PASSED.append(what)
    print(f"ok   {what}")


def show(root, *args, password=None, expect=0):
    env = dict(os.environ)
    env.pop("AF_HOTKEY_PASSWORD", None)
    if password is not None:
        env["AF_HOTKEY_PASSWORD"] = password
    run = subprocess.run([AF, "wallet", "show", "--wallets-dir", root, *args, "--json"], capture_output=True, text=True,
                         env=env, stdin=subprocess.DEVNULL)
    if run.returncode != expect:
        sys.exit(f"FAIL: af wallet show {' '.join(args)} exited {run.returncode}, not {expect}: {run.stderr.strip()}")
    return json.loads(run.stdout) if expect == 0 else run.stderr


with tempfile.TemporaryDirectory() as root:
    for words in (12, 24):
        name = f"w{words}"
        wallet = Wallet(name=name, hotkey="plain", path=root)
        wallet.create_new_coldkey(use_password=False, overwrite=True, suppress=True, n_words=words)
        wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True, n_words=words)
        shown = show(root, "--wallet", name, "--hotkey", "plain")
        check(shown["hotkey"] == wallet.hotkey.ss58_address and shown["hotkey_source"] == "secret",
              f"{words}-word plain hotkey: af's address is bittensor-wallet's")
        check(shown["coldkey"] == wallet.coldkeypub.ss58_address, f"{words}-word coldkey: af's address is bittensor-wallet's")

        sealed = Wallet(name=name, hotkey="sealed", path=root)
        keypair = Keypair.create_from_mnemonic(Keypair.generate_mnemonic(words))
        sealed.hotkey_file.set_keypair(keypair, encrypt=True, overwrite=True, password=PASSWORD)
        check(sealed.hotkey_file.is_encrypted(), "bittensor-wallet encrypted the hotkey")
        opened = show(root, "--wallet", name, "--hotkey", "sealed", password=PASSWORD)
        check(opened["hotkey"] == keypair.ss58_address and opened["hotkey_source"] == "secret",
              f"{words}-word encrypted hotkey opens with the password to bittensor-wallet's address")
        wrong = show(root, "--wallet", name, "--hotkey", "sealed", password="not it", expect=1)
        check("wrong password" in wrong, "a wrong password is refused by name")

    # Hotkeys made from a derivation URI (btcli --uri, create_hotkey_from_uri): the
    # keyfile holds privateKey and public fields, no secretSeed or secretPhrase.
    Wallet(name="uri", path=root).create_new_coldkey(use_password=False, overwrite=True, suppress=True, n_words=12)
    for uri in ("//Alice", "//af-validator/7"):
        wallet = Wallet(name="uri", hotkey="h" + str(len(uri)), path=root)
        wallet.create_hotkey_from_uri(uri, use_password=False, overwrite=True, suppress=True)
        keyfile = json.loads(open(wallet.hotkey_file.path).read())
        check("privateKey" in keyfile and "secretSeed" not in keyfile and "secretPhrase" not in keyfile,
              f"bittensor-wallet's {uri} keyfile holds privateKey alone")
        shown = show(root, "--wallet", "uri", "--hotkey", "h" + str(len(uri)))
        check(shown["hotkey"] == Keypair.create_from_uri(uri).ss58_address and shown["hotkey_source"] == "secret",
              f"URI hotkey {uri}: af's address is bittensor-wallet's")
    sealed = Wallet(name="uri", hotkey="sealed", path=root)
    sealed.hotkey_file.set_keypair(Keypair.create_from_uri("//Bob"), encrypt=True, overwrite=True, password=PASSWORD)
    opened = show(root, "--wallet", "uri", "--hotkey", "sealed", password=PASSWORD)
    check(opened["hotkey"] == Keypair.create_from_uri("//Bob").ss58_address,
          "an encrypted URI hotkey opens to bittensor-wallet's address")

    # btcli's default wallet name, when only --hotkey is given.
    default = Wallet(name="default", hotkey="validator", path=root)
    default.create_new_coldkey(use_password=False, overwrite=True, suppress=True, n_words=12)
    default.create_new_hotkey(use_password=False, overwrite=True, suppress=True, n_words=12)
    shown = show(root, "--hotkey", "validator")
    check(shown["wallet"] == "default" and shown["hotkey"] == default.hotkey.ss58_address,
          "--hotkey without --wallet reads wallet \"default\", as btcli does")

print(f"wallet-check: {len(PASSED)} checks passed")
