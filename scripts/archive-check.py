#!/usr/bin/env python3
"""`af ledger publish` to a real S3-compatible server and `af mirror` back from it.

Starts moto's S3 server (PyPI `moto[server]`) on loopback, makes a bucket with boto3,
and checks with the af binary given as the first argument:
  - a demo store published to s3://BUCKET/site holds, object for object and byte for
    byte, what a publish to a folder writes, and mirrors back to the same state hash;
  - publishing again with nothing new writes no bundle (every block already published);
  - a publish cut short before its tips and log list (the objects written last) is
    finished by the next one, which rewrites no bundle (each keeps its ETag);
  - a bundle changed on the server is refused by a fresh mirror (exit 3).
"""
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

AF = sys.argv[1]
BUCKET = "af-archive"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, env=None, expect=0):
    done = subprocess.run([AF, *args], capture_output=True, text=True, env=env)
    if done.returncode != expect:
        sys.exit(f"af {' '.join(args)}: exit {done.returncode}, expected {expect}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def state_hash(data, env):
    return json.loads(run("audit", "--data", str(data), "--json", env=env))["state_hash"]


def main():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env.update({
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true",
    })
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    s3.create_bucket(Bucket=BUCKET)
    checks = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            data = tmp / "demo"
            run("demo", "--data", str(data), "--json", env=env)
            url = f"s3://{BUCKET}/site"
            report = json.loads(run("ledger", "publish", "--data", str(data), "--out", url, "--json", env=env))
            folder = tmp / "folder"
            run("ledger", "publish", "--data", str(data), "--out", str(folder), "--json", env=env)

            def objects():
                found = {}
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="site/"):
                    for o in page.get("Contents", []):
                        found[o["Key"][len("site/"):]] = o["ETag"]
                return found

            held = objects()
            files = {str(p.relative_to(folder)): p for p in folder.rglob("*") if p.is_file()}
            assert set(held) == set(files), sorted(set(held) ^ set(files))
            for key, path in files.items():
                body = s3.get_object(Bucket=BUCKET, Key="site/" + key)["Body"].read()
                assert body == path.read_bytes(), key
            checks += 1
            copy = tmp / "copy"
            run("mirror", "--from", url, "--data", str(copy), "--json", env=env)
            assert state_hash(copy, env) == state_hash(data, env)
            checks += 1
            again = json.loads(run("ledger", "publish", "--data", str(data), "--out", url, "--json", env=env))
            assert again["bundles_written"] == 0, again
            assert again["blocks_already_published"] == report["blocks"], again
            checks += 1
            # A publish cut short before its last writes: the tips and the log list.
            bundles = {k: v for k, v in held.items() if "/tile/" in k}
            for key in held:
                if key.endswith("/tip") or key.endswith("/logs"):
                    s3.delete_object(Bucket=BUCKET, Key="site/" + key)
            run("ledger", "publish", "--data", str(data), "--out", url, "--json", env=env)
            after = objects()
            assert set(after) == set(held), sorted(set(after) ^ set(held))
            assert all(after[k] == etag for k, etag in bundles.items()), "a bundle was rewritten"
            checks += 1
            # A changed bundle on the server is refused.
            key = sorted(bundles)[0]
            body = bytearray(s3.get_object(Bucket=BUCKET, Key="site/" + key)["Body"].read())
            body[len(body) // 2] ^= 1
            s3.put_object(Bucket=BUCKET, Key="site/" + key, Body=bytes(body))
            run("mirror", "--from", url, "--data", str(tmp / "fresh"), "--json", env=env, expect=3)
            checks += 1
    finally:
        server.stop()
    print(f"archive-check: {checks}/5 checks passed against moto's S3 server on {endpoint}")


if __name__ == "__main__":
    main()
