// Every vector of fixtures/ledger/vectors.json through the explorer's verifier, and every
// mutation of one refused: the spec's third implementation, run by `.ci/run`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as v from '../verify.mjs';

const root = new URL('../../../fixtures/ledger/', import.meta.url);
const vectors = v.parseStrictJson(readFileSync(new URL('vectors.json', root), 'utf8'));
const publicKey = vectors.key.public_key;

const flip = (bytes, i) => {
  const copy = Uint8Array.from(bytes);
  copy[i] ^= 1;
  return copy;
};

test('every event decodes by the spec to its JSON, with its leaf hash', () => {
  for (const [i, e] of vectors.events.entries()) {
    const bytes = v.fromHex(e.bytes, 'event');
    assert.equal(v.canonical(v.decodeEvent(bytes)), v.canonical(e.json), `event ${i}`);
    assert.equal(v.toHex(v.leafHash(bytes)), e.leaf_hash, `event ${i} leaf hash`);
  }
});

test('every refused event is refused', () => {
  for (const e of vectors.events_refused) {
    assert.throws(() => v.decodeEvent(v.fromHex(e.bytes, 'event')), v.Refused, e.why);
  }
});

test('Merkle root, empty root and the inclusion path of event 2', () => {
  const leaves = vectors.merkle.leaf_hashes.map((h) => v.fromHex(h, 'leaf', 32));
  const root = v.merkleRoot(leaves);
  assert.equal(v.toHex(root), vectors.merkle.root);
  assert.equal(v.toHex(v.merkleRoot([])), vectors.merkle.empty_root);
  const path = vectors.merkle.proof_of_event_2.map((h) => v.fromHex(h, 'path', 32));
  assert.ok(v.verifyInclusion(leaves[2], 2, leaves.length, path, root));
  assert.ok(!v.verifyInclusion(leaves[3], 2, leaves.length, path, root), 'another leaf');
  assert.ok(!v.verifyInclusion(leaves[2], 3, leaves.length, path, root), 'another index');
  assert.ok(!v.verifyInclusion(leaves[2], 2, 4, path, root), 'another size, another shape');
  assert.ok(!v.verifyInclusion(leaves[2], 2, leaves.length, path.slice(1), root), 'a shorter path');
  for (let i = 0; i < path.length; i++) {
    const bad = path.slice();
    bad[i] = flip(bad[i], 0);
    assert.ok(!v.verifyInclusion(leaves[2], 2, leaves.length, bad, root), `path item ${i} changed`);
  }
});

test('the blocks verify and link, and any changed byte is refused', () => {
  let previous = null;
  for (const [height, b] of vectors.blocks.entries()) {
    const bytes = v.fromHex(b.block_bytes, 'block');
    const block = v.verifyBlock(bytes, publicKey, height, previous);
    assert.equal(v.toHex(block.hash), b.block_hash);
    assert.equal(v.toHex(v.encodeHeader(block.header)), b.header_bytes);
    assert.equal(v.toHex(block.signature), b.signature);
    // Every byte of the header, signature and first events, then a spread of the rest,
    // changed one at a time.
    const at = [...Array(Math.min(bytes.length, 400)).keys()];
    for (let i = 400; i < bytes.length; i += Math.max(1, Math.floor(bytes.length / 300))) at.push(i);
    at.push(bytes.length - 1);
    for (const i of at) {
      assert.throws(() => v.verifyBlock(flip(bytes, i), publicKey, height, previous), v.Refused, `byte ${i} of block ${height}`);
    }
    assert.throws(() => v.verifyBlock(bytes.subarray(0, bytes.length - 1), publicKey, height, previous), v.Refused);
    assert.throws(() => v.verifyBlock(new Uint8Array([...bytes, 0]), publicKey, height, previous), v.Refused);
    assert.throws(() => v.verifyBlock(bytes, publicKey, height + 1, previous), v.Refused, 'another height');
    previous = { hash: block.hash, time_ms: block.header.time_ms, height };
  }
  // Block 1 does not link to a predecessor of another hash.
  const one = v.fromHex(vectors.blocks[1].block_bytes, 'block');
  assert.throws(() => v.verifyBlock(one, publicKey, 1, { hash: new Uint8Array(32), time_ms: 0n }), v.Refused);
});

test('the checkpoint verifies, names the tip, and every tampered note is refused', () => {
  const note = vectors.checkpoint.note;
  const checked = v.verifyCheckpoint(note);
  assert.equal(checked.validator, publicKey);
  assert.equal(checked.size, BigInt(vectors.blocks.length));
  assert.equal(checked.tipHash, vectors.blocks.at(-1).block_hash);
  const [text, signatures] = note.split('\n\n');
  const line = signatures.split('\n')[0];
  const blob = v.strictBase64(line.split(' ')[2]);
  const bad = '\u2014 ' + vectors.checkpoint.key_name + ' ' + v.encodeBase64(flip(blob, 10));
  const tampered = [
    note.replace(/\n(\d+)\n/, (_, n) => `\n${BigInt(n) + 1n}\n`), // another size
    note.replace('\n\n', '\nextra\n\n').replace(line, line), // an unsigned extension line
    `${text}\n\n${bad}\n`, // a bad signature
    `${text}\n\n${line}\n${bad}\n`, // a good and a bad line by the same key
    `${text}\n\n${bad}\n${line}\n`,
    note.replace(/\n/g, '\r\n'), // CRLF
    note.slice(0, -1), // no final newline
    `${text}\n\n`, // no signature line
    note.replace('af.ledger/v1/', 'af.ledger/v2/'),
  ];
  // Non-zero padding bits in the signature's base64.
  const b64 = line.split(' ')[2];
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const sloppy = b64.slice(0, -2) + alphabet[alphabet.indexOf(b64.at(-2)) | 1] + b64.at(-1);
  tampered.push(note.replace(b64, sloppy));
  for (const [i, t] of tampered.entries()) {
    assert.throws(() => v.verifyCheckpoint(t), v.Refused, `tampered note ${i}`);
  }
  // Another key's cosignature is skipped, not refused.
  const other = '\u2014 someone-else ' + v.encodeBase64(new Uint8Array(68));
  assert.equal(v.verifyCheckpoint(`${text}\n\n${line}\n${other}\n`).tipHash, checked.tipHash);
});

test('strict ed25519: small-order and non-canonical keys and signatures are refused', () => {
  const b = vectors.blocks[0];
  const key = v.fromHex(publicKey, 'key', 32);
  const message = v.fromHex(b.signing_message, 'message');
  const signature = v.fromHex(b.signature, 'signature', 64);
  assert.ok(v.verifyStrict(key, message, signature));
  // S + L: the same signature in a non-canonical spelling.
  const L = (1n << 252n) + 27742317777372353535851937790883648493n;
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(signature[i]);
  const high = Uint8Array.from(signature);
  let t = s + L;
  for (let i = 32; i < 64; i++) {
    high[i] = Number(t & 0xffn);
    t >>= 8n;
  }
  assert.ok(!v.verifyStrict(key, message, high), 'S not below the group order');
  const identity = new Uint8Array(32);
  identity[0] = 1;
  assert.ok(!v.verifyStrict(identity, message, signature), 'a small-order key');
  const smallR = Uint8Array.from(signature);
  smallR.set(identity, 0);
  assert.ok(!v.verifyStrict(key, message, smallR), 'a small-order R');
  assert.throws(() => v.checkValidatorKey(identity), v.Refused);
  const nonCanonical = new Uint8Array(32).fill(0xff);
  nonCanonical[31] = 0x7f;
  nonCanonical[0] = 0xee; // y = p + 1 (y >= p)
  assert.throws(() => v.checkValidatorKey(nonCanonical), v.Refused);
});

test('the challenge id derivation', () => {
  const c = vectors.challenge_id;
  assert.equal(v.challengeId(c.env, c.env_version.value, c.validator, c.match_id, c.index.value), c.challenge_id);
});

test("strict JSON refuses each of the spec's probes", () => {
  const probes = v.parseStrictJson(readFileSync(new URL('json-probes.json', root), 'utf8')).probes;
  for (const probe of probes) {
    let refused = false;
    try {
      const value = v.parseStrictJson(probe.example);
      // An integer probe parses as JSON; the rule that reads it as an integer refuses it.
      v.canonical(value);
      refused = JSON.stringify(value, (_, x) => (x && x.isLosslessNumber ? x.value : x)).match(/"(-0|\d+[.eE][^"]*)"/) !== null;
    } catch (error) {
      refused = error instanceof v.Refused;
    }
    assert.ok(refused, `probe ${probe.name}`);
  }
});
