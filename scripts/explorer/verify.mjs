// The explorer's verifier of ledger-spec/, written from the spec alone (a third
// implementation, after af's Rust and scripts/spec-check.py): block bytes and headers
// (03), checkpoints as C2SP signed notes (04), inclusion proofs (03) and transcript
// entries (09), with the strict JSON of 10. It runs unchanged in Node (its tests) and in
// the browser (the explorer). Cryptography comes from @noble/hashes (BLAKE3, SHA-2) and
// @noble/curves (ed25519 points); only the spec's own rules are written here.
//
// Every check fails closed: a function returns only what it verified, and throws a
// `Refused` naming the rule otherwise. Integers are BigInt throughout (u64 values are
// exact), and JSON numbers are kept as their text until a rule reads them.

import { blake3 } from '@noble/hashes/blake3.js';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { ed25519 } from '@noble/curves/ed25519.js';
import { parse as losslessParse, isLosslessNumber } from 'lossless-json';

/** A check that failed: `rule` names it (with the spec section), as the explorer shows it. */
export class Refused extends Error {
  constructor(rule) {
    super(rule);
    this.name = 'Refused';
  }
}

function need(condition, rule) {
  if (!condition) throw new Refused(rule);
}

// ---- bytes -----------------------------------------------------------------------------

const HEX = /^(?:[0-9a-f]{2})*$/;

/** Lowercase hex, two digits a byte (10): anything else is refused. */
export function fromHex(text, what, n) {
  need(typeof text === 'string' && HEX.test(text), `${what} is lowercase hex (10)`);
  const bytes = new Uint8Array(text.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  need(n === undefined || bytes.length === n, `${what} is ${n} bytes (10)`);
  return bytes;
}

export function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function equalBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function le(value, n) {
  const out = new Uint8Array(n);
  let v = BigInt(value);
  for (let i = 0; i < n; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

const utf8 = new TextEncoder();
const fatal = new TextDecoder('utf-8', { fatal: true });

// ---- 01: the canonical encoding ---------------------------------------------------------

/** Reads 01-encoding.md's primitives, refusing anything truncated or non-canonical. */
class Reader {
  constructor(bytes) {
    this.bytes = bytes;
    this.pos = 0;
  }
  take(n) {
    need(n >= 0n && BigInt(this.pos) + BigInt(n) <= BigInt(this.bytes.length), 'the bytes are not truncated (01)');
    n = Number(n);
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  uint(n) {
    const b = this.take(n);
    let v = 0n;
    for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(b[i]);
    return v;
  }
  u8() { return this.uint(1); }
  u16() { return this.uint(2); }
  u32() { return this.uint(4); }
  u64() { return this.uint(8); }
  i32() {
    const v = this.uint(4);
    return v >= 0x80000000n ? v - 0x100000000n : v;
  }
  hash() { return toHex(this.take(32)); }
  bool() {
    const b = this.u8();
    need(b === 0n || b === 1n, 'a bool is 0 or 1 (01)');
    return b === 1n;
  }
  string() {
    const n = this.u64();
    let text;
    try {
      text = fatal.decode(this.take(n));
    } catch {
      throw new Refused('a string is UTF-8 (01)');
    }
    return text;
  }
  vec(item, most) {
    const n = this.u64();
    // 02 "Bounds": a list's count is checked on its length prefix, before any item.
    need(most === undefined || n <= BigInt(most), `a list of at most ${most} items, by its length prefix (02)`);
    const out = [];
    for (let i = 0n; i < n; i++) out.push(item());
    return out;
  }
  option(item) {
    const tag = this.u8();
    need(tag === 0n || tag === 1n, 'an option tag is 0 or 1 (01)');
    return tag === 1n ? item() : null;
  }
}

// ---- 02: events --------------------------------------------------------------------------

const KIB = 1024;
const MIB = 1024 * 1024;

function name(r) {
  const text = r.string();
  need(utf8.encode(text).length <= 256, 'a short name is at most 256 bytes (02)');
  return text;
}
const miner = (r) => ({ hotkey: name(r), uid: r.u16(), model: name(r) });
const envRef = (r) => ({ name: name(r), version: r.u32() });
const shortList = (r, item) => r.vec(item, 4096);

function transcript(r) {
  const t = {
    match_id: r.hash(), env: envRef(r), challenge_id: r.hash(), challenge_index: r.u64(),
    invocation_id: r.hash(), miner: miner(r),
    messages: r.vec(() => ({ role: name(r), content: r.string() }), 256),
    answer: r.string(), reward_milli: r.i32(), latency_ms: r.u64(), error: r.option(() => r.string()),
  };
  for (const m of t.messages) need(utf8.encode(m.content).length <= MIB, 'a message is at most 1 MiB (02)');
  need(utf8.encode(t.answer).length <= MIB, 'the answer is at most 1 MiB (02)');
  need(t.error === null || utf8.encode(t.error).length <= MIB, 'the error is at most 1 MiB (02)');
  return t;
}

/** 02, recording rules: miner texts within their caps (256 KiB, and what is left of 1 MiB);
 * a cut text is the longest prefix within its cap; the answer is a recorded miner text. */
function checkMinerTexts(t, cuts) {
  let budget = MIB;
  const cutOf = new Map(cuts.filter((c) => c.message_idx !== null).map((c) => [Number(c.message_idx), c]));
  t.messages.forEach((m, i) => {
    if (m.role !== 'assistant') return;
    const cap = Math.min(256 * KIB, budget);
    const n = utf8.encode(m.content).length;
    need(n <= cap, 'a miner text is within its cap (02)');
    if (cutOf.has(i)) {
      need(cutOf.get(i).full_bytes > BigInt(cap), 'a cut full text is longer than its cap (02)');
      need(n + 4 > cap, 'a cut text is the longest prefix within its cap (02)');
    }
    budget -= n;
  });
  need(utf8.encode(t.answer).length <= 256 * KIB, 'the answer is a recorded miner text, at most 256 KiB (02)');
}

function checkCuts(t, cuts) {
  need(cuts.length >= 1 && cuts.length <= 257, '1 to 257 cuts (02)');
  let last = -1n;
  for (const c of cuts) {
    const position = c.message_idx === null ? 1n << 32n : c.message_idx;
    need(position > last, 'cuts in order, each text once (02)');
    last = position;
    if (c.message_idx !== null) {
      need(c.message_idx < BigInt(t.messages.length), 'a cut names an existing message (02)');
      need(t.messages[Number(c.message_idx)].role === 'assistant', 'only miner texts are cut (02)');
    }
  }
  checkMinerTexts(t, cuts);
  const lastCut = cuts[cuts.length - 1];
  const assistants = t.messages.map((m, i) => [m, i]).filter(([m]) => m.role === 'assistant');
  if (lastCut.message_idx === null) {
    const lastMiner = assistants.length ? assistants[assistants.length - 1][1] : -1;
    const cutOfLast = cuts.find((c) => c.message_idx !== null && Number(c.message_idx) === lastMiner);
    need(
      lastMiner >= 0 && cutOfLast !== undefined && t.messages[lastMiner].content === t.answer &&
        cutOfLast.full_bytes === lastCut.full_bytes && cutOfLast.full_blake3 === lastCut.full_blake3,
      "the answer's cut repeats the last miner text's, and the answer is that text (02)",
    );
  } else if (assistants.length) {
    // The last miner text cut without the answer's cut, when the answer is that text.
    const lastMiner = assistants[assistants.length - 1][1];
    const cutLast = cuts.some((c) => c.message_idx !== null && Number(c.message_idx) === lastMiner);
    need(!(cutLast && t.messages[lastMiner].content === t.answer), 'an answer that is a cut text is cut with it (02)');
  }
}

const OUTCOMES = ['contender_better', 'contender_not_better', 'inconclusive'];
const SKIP_REASONS = ['duplicate', 'same_as_champion'];
const LEAVE_REASONS = ['deregistered', 'recommitted'];

function pick(list, index, what) {
  need(index < BigInt(list.length), `${what} is one of ${list.length} (02)`);
  return list[Number(index)];
}

function header(r) {
  return {
    format_version: r.u16(), validator: r.hash(), height: r.u64(), prev_hash: r.hash(),
    time_ms: r.u64(), events_root: r.hash(), n_events: r.u32(),
  };
}

/** One event, by 02's kinds table, in the JSON form of 10 (integers as BigInt). */
function event(r) {
  const tag = r.u32();
  switch (tag) {
    case 0n:
      return { match_started: { match_id: r.hash(), contender: miner(r), champion: miner(r),
        envs: shortList(r, () => envRef(r)), rule: name(r), ratio_to_beat_ppm: r.u32(),
        chain_block: r.u64(), chain_block_hash: r.hash() } };
    case 1n: {
      const t = transcript(r);
      checkMinerTexts(t, []);
      return { transcript: t };
    }
    case 2n:
      return { env_decision: { match_id: r.hash(), env: envRef(r), outcome: pick(OUTCOMES, r.u32(), 'an outcome'),
        wins: r.u32(), losses: r.u32(), draws: r.u32(), n_challenges: r.u64(), rule: name(r) } };
    case 3n:
      return { match_decided: { match_id: r.hash(), contender_won: r.bool(), champion_hotkey: name(r),
        win_rates: shortList(r, () => ({ env: envRef(r), win_rate_ppm: r.u32() })),
        new_ratio_to_beat_ppm: r.u32() } };
    case 4n:
      return { weights_set: { netuid: r.u16(), uids: shortList(r, () => r.u16()), weights: shortList(r, () => r.u16()),
        version_key: r.u64(), chain_block: r.u64() } };
    case 5n:
      return { chain_commitment: { netuid: r.u16(), chain_block: r.u64(), committed_height: r.u64(),
        committed_hash: r.hash() } };
    case 6n:
      return { evidence: { validator: r.hash(), height: r.u64(), header_a: header(r), signature_a: toHex(r.take(64)),
        header_b: header(r), signature_b: toHex(r.take(64)) } };
    case 7n: {
      const t = transcript(r);
      const cuts = r.vec(() => ({ message_idx: r.option(() => r.u32()), full_bytes: r.u64(), full_blake3: r.hash() }), 257);
      checkCuts(t, cuts);
      return { transcript_cut: { transcript: t, cuts } };
    }
    case 8n:
      return { weights_committed: { netuid: r.u16(), uids: shortList(r, () => r.u16()),
        weights: shortList(r, () => r.u16()), version_key: r.u64(), chain_block: r.u64(), reveal_round: r.u64(),
        reveal_block: r.u64(), ciphertext_hash: r.hash() } };
    case 9n:
      return { miner_skipped: { netuid: r.u16(), hotkey: name(r), uid: r.u16(), model: name(r), revision: name(r),
        commit_block: r.u64(), reason: pick(SKIP_REASONS, r.u32(), 'a skip reason'), kept_by: name(r),
        kept_block: r.u64(), chain_block: r.u64() } };
    case 10n: {
      const fold_version = r.u32();
      const points = shortList(r, () => ({ validator: r.hash(), height: r.u64(), block_hash: r.hash(), fold_hash: r.hash() }));
      points.forEach((p, i) => need(i === 0 || points[i - 1].validator < p.validator,
        'a fold checkpoint names each log once, in ascending order of validator key (02)'));
      return { fold_checkpoint: { fold_version, points } };
    }
    case 11n: // 16: the old key's last event
      return { key_rotated: { new_key: r.hash(), chain_block: r.u64() } };
    case 12n: // 16: the new key's first event
      return { key_succeeded: { old_key: r.hash(), old_height: r.u64(), old_hash: r.hash(), chain_block: r.u64() } };
    case 13n: // 13, "The champion's life"
      return { champion_left: { champion: miner(r), reason: pick(LEAVE_REASONS, r.u32(), 'a leave reason'),
        chain_block: r.u64() } };
    default:
      throw new Refused(`event tag ${tag} is defined (02)`);
  }
}

/** One event's canonical bytes, decoded whole (no trailing bytes), at most 4 MiB. */
export function decodeEvent(bytes) {
  need(bytes.length <= 4 * MIB, 'an event is at most 4 MiB (01)');
  const r = new Reader(bytes);
  const decoded = event(r);
  need(r.pos === bytes.length, 'the event has no trailing bytes (01)');
  return decoded;
}

// ---- 03: hashes, Merkle tree, keys, signatures --------------------------------------------

export const b3 = (bytes) => blake3(bytes);
export const leafHash = (eventBytes) => b3(concat(new Uint8Array([0]), eventBytes));
const nodeHash = (l, r) => b3(concat(new Uint8Array([1]), l, r));

/** RFC 6962's Merkle tree hash with BLAKE3 (03). */
export function merkleRoot(leaves) {
  if (leaves.length === 0) return b3(new Uint8Array());
  if (leaves.length === 1) return leaves[0];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(merkleRoot(leaves.slice(0, k)), merkleRoot(leaves.slice(k)));
}

/** RFC 9162 §2.1.3.2: whether `path` proves `leaf` at `index` in a tree of `size` under `root`. */
export function verifyInclusion(leaf, index, size, path, root) {
  index = BigInt(index);
  size = BigInt(size);
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of path) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equalBytes(r, root);
}

export const HEADER_BYTES = 118;

export function encodeHeader(h) {
  return concat(le(h.format_version, 2), fromHex(h.validator, 'validator', 32), le(h.height, 8),
    fromHex(h.prev_hash, 'prev_hash', 32), le(h.time_ms, 8), fromHex(h.events_root, 'events_root', 32),
    le(h.n_events, 4));
}

export const headerHash = (h) => b3(encodeHeader(h));

/** 03's validator key rule: canonical, and not of small order. */
export function checkValidatorKey(key) {
  let point;
  try {
    point = ed25519.Point.fromBytes(key, false);
  } catch {
    throw new Refused('the validator key is a canonical ed25519 point (03)');
  }
  need(!point.isSmallOrder(), 'the validator key is not of small order (03)');
  need(equalBytes(point.toBytes(), key), 'the validator key is a canonical ed25519 point (03)');
  return point;
}

/** 03's header rules, on their own. */
export function checkHeaderRules(h) {
  need(h.format_version === 1n, 'format_version is 1 (03)');
  need(h.n_events <= 65536n, 'n_events is at most 65,536 (03)');
  need(h.height !== 0n || h.prev_hash === '00'.repeat(32), 'a block at height 0 has a zero prev_hash (03)');
  checkValidatorKey(fromHex(h.validator, 'validator', 32));
}

/** Ed25519 verified strictly (03, ed25519-dalek's `verify_strict`): the key's rule, `S`
 * below the group order, `R` canonical and not of small order, and the cofactorless
 * equation [S]B = R + [k]A. */
export function verifyStrict(publicKey, message, signature) {
  if (signature.length !== 64) return false;
  let A;
  let R;
  try {
    A = checkValidatorKey(publicKey);
    R = ed25519.Point.fromBytes(signature.subarray(0, 32), false);
  } catch {
    return false;
  }
  if (R.isSmallOrder() || !equalBytes(R.toBytes(), signature.subarray(0, 32))) return false;
  const Fn = ed25519.Point.Fn;
  const s = bytesToNumberLE(signature.subarray(32));
  if (s >= Fn.ORDER) return false;
  const k = Fn.create(bytesToNumberLE(sha512(concat(signature.subarray(0, 32), publicKey, message))));
  // Public values only: the variable-time multiplications are safe and faster.
  return ed25519.Point.BASE.multiplyUnsafe(s).equals(R.add(A.multiplyUnsafe(k)));
}

function bytesToNumberLE(bytes) {
  let v = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[i]);
  return v;
}

const SIGNING_CONTEXT = utf8.encode('af-ledger/v1/block\u0000');

// Headers that passed, by their exact bytes and signature: the same check of the same
// bytes again (every entry of a page carries the headers to the tip) is not redone. Only
// passes are remembered, at most MAX_VERIFIED of them.
const verified = new Set();
const MAX_VERIFIED = 65536;

export function checkHeaderSignature(h, signature) {
  checkHeaderRules(h);
  const hash = headerHash(h);
  const key = toHex(hash) + toHex(signature);
  if (verified.has(key)) return hash;
  need(verifyStrict(fromHex(h.validator, 'validator', 32), concat(SIGNING_CONTEXT, hash), signature),
    `the signature of block ${h.height} verifies strictly (03)`);
  if (verified.size >= MAX_VERIFIED) verified.clear();
  verified.add(key);
  return hash;
}

/** A block's bytes by every rule of 03 on its own; `previous` ({hash, time_ms, height})
 * adds the chain rules. Returns its header, hash and events (bytes and JSON). */
export function verifyBlock(bytes, validator, height, previous) {
  need(bytes.length <= 32 * MIB, 'a block is at most 32 MiB (03)');
  const r = new Reader(bytes);
  const h = header(r);
  const signature = r.take(64);
  need(h.validator === validator, `block ${height} is validator ${validator.slice(0, 16)}…'s (03)`);
  need(h.height === BigInt(height), `the block is at height ${height} (03)`);
  const hash = checkHeaderSignature(h, signature);
  const n = r.u64();
  need(n === h.n_events, 'the block holds n_events events (03)');
  const events = [];
  for (let i = 0n; i < n; i++) {
    const start = r.pos;
    const json = event(r);
    need(r.pos - start <= 4 * MIB, 'an event is at most 4 MiB (01)');
    events.push({ bytes: bytes.subarray(start, r.pos), json });
  }
  need(r.pos === bytes.length, 'the block has no trailing bytes (03)');
  need(toHex(merkleRoot(events.map((e) => leafHash(e.bytes)))) === h.events_root, 'the events root (03)');
  if (previous) {
    need(h.prev_hash === toHex(previous.hash), `block ${height} links to block ${height - 1} (03)`);
    need(h.time_ms >= previous.time_ms, `block ${height}'s time is not before its predecessor's (03)`);
  } else if (h.height === 0n) {
    need(h.prev_hash === '00'.repeat(32), 'block 0 has a zero prev_hash (03)');
  }
  return { header: h, hash, signature, events };
}

// ---- 04: checkpoints ---------------------------------------------------------------------

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard base64 with padding, in the one canonical spelling of its bytes. */
export function strictBase64(text) {
  need(typeof text === 'string' && text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text),
    'base64 is standard with padding (04)');
  const bytes = [];
  for (let i = 0; i < text.length; i += 4) {
    const quad = text.slice(i, i + 4);
    const values = [...quad].map((c) => (c === '=' ? 0 : B64.indexOf(c)));
    const n = (values[0] << 18) | (values[1] << 12) | (values[2] << 6) | values[3];
    bytes.push((n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
    const pad = quad.endsWith('==') ? 2 : quad.endsWith('=') ? 1 : 0;
    need(pad === 0 || i + 4 === text.length, 'padding only at the end (04)');
    bytes.length -= pad;
  }
  const out = new Uint8Array(bytes);
  need(encodeBase64(out) === text, 'base64 in its canonical spelling (04)');
  return out;
}

export function encodeBase64(bytes) {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const chunk = [bytes[i], bytes[i + 1] ?? 0, bytes[i + 2] ?? 0];
    const n = (chunk[0] << 16) | (chunk[1] << 8) | chunk[2];
    const left = bytes.length - i;
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (left > 1 ? B64[(n >> 6) & 63] : '=') + (left > 2 ? B64[n & 63] : '=');
  }
  return out;
}

/** A checkpoint note (04): returns `{validator, size, tipHash}` once every signature line
 * by the validator's key name and id verifies strictly, and at least one does. */
export function verifyCheckpoint(note) {
  need(typeof note === 'string' && note.endsWith('\n'), 'the note ends with a newline (04)');
  need(!/[\u0000-\u0009\u000b-\u001f\u007f]/.test(note), 'the note has no control character but newline (04)');
  const split = note.indexOf('\n\n');
  need(split > 0, 'the note has a signed text and signature lines (04)');
  const text = note.slice(0, split + 1);
  const lines = text.split('\n').slice(0, -1);
  need(lines.length >= 3, 'the signed text has origin, size and hash lines (04)');
  const origin = /^af\.ledger\/v1\/([0-9a-f]{64})$/.exec(lines[0]);
  need(origin !== null, 'the origin is af.ledger/v1/<validator> (04)');
  const validator = origin[1];
  need(/^[1-9][0-9]*$/.test(lines[1]), 'the size is a decimal of at least 1 without leading zeros (04)');
  const size = BigInt(lines[1]);
  const tipHash = strictBase64(lines[2]);
  need(tipHash.length === 32, 'the hash line holds 32 bytes (04)');
  const publicKey = fromHex(validator, 'validator', 32);
  checkValidatorKey(publicKey);
  const keyName = 'af-' + validator.slice(0, 16);
  const keyId = sha256(concat(utf8.encode(keyName), new Uint8Array([0x0a, 0x01]), publicKey)).subarray(0, 4);
  const signatureLines = note.slice(split + 2).split('\n').slice(0, -1);
  let signed = 0;
  for (const line of signatureLines) {
    need(line.startsWith('\u2014 '), 'a signature line starts with an em dash and a space (04)');
    const rest = line.slice(2);
    const space = rest.indexOf(' ');
    need(space > 0, 'a signature line names its key (04)');
    const blob = strictBase64(rest.slice(space + 1));
    if (rest.slice(0, space) !== keyName || blob.length !== 68 || !equalBytes(blob.subarray(0, 4), keyId)) continue;
    need(verifyStrict(publicKey, utf8.encode(text), blob.subarray(4)), "the validator's signature on the note verifies (04)");
    signed += 1;
  }
  need(signed > 0, "the note carries the validator's signature (04)");
  return { validator, size, tipHash: toHex(tipHash) };
}

// ---- 10: strict JSON -------------------------------------------------------------------

/** JSON by 10's rules: RFC 8259, each member named once, no lone surrogate escape, no
 * `-0`; numbers kept as their text (lossless-json) until a rule reads them. */
export function parseStrictJson(text) {
  let value;
  try {
    value = losslessParse(text);
  } catch (error) {
    throw new Refused(`the JSON is well formed, each member once (10): ${error.message}`);
  }
  refuseDuplicateMembers(text);
  const walk = (node) => {
    if (typeof node === 'string') {
      need(!/(?:[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff])/.test(node),
        'no lone surrogate escape (10)');
    } else if (isLosslessNumber(node)) {
      need(node.value !== '-0', 'no -0 (10)');
    } else if (Array.isArray(node)) {
      node.forEach(walk);
    } else if (node !== null && typeof node === 'object') {
      for (const [key, item] of Object.entries(node)) {
        walk(key);
        walk(item);
      }
    }
  };
  walk(value);
  return value;
}

/** lossless-json refuses a member named twice only when its two values differ; 10 refuses
 * any. Run on text already parsed as JSON: it walks the tokens, each object's member
 * names (their escapes decoded) in a set per open object. */
function refuseDuplicateMembers(text) {
  const open = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{') open.push(new Set());
    else if (c === '[') open.push(null);
    else if (c === '}' || c === ']') open.pop();
    else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const token = text.slice(i, j + 1);
      let k = j + 1;
      while (' \t\n\r'.includes(text[k])) k++;
      const names = open[open.length - 1];
      if (text[k] === ':' && names) {
        const name = JSON.parse(token);
        need(!names.has(name), `each member is named once: ${JSON.stringify(name)} twice (10)`);
        names.add(name);
      }
      i = j;
    }
  }
}

/** One canonical text of a JSON value (members sorted, integers as decimal text), so a
 * decoded event and its JSON form compare exactly, u64 values included. */
export function canonical(value) {
  if (value === null) return 'null';
  if (typeof value === 'bigint') return value.toString();
  if (isLosslessNumber(value)) return value.value;
  if (typeof value === 'number') return Number.isInteger(value) ? value.toString() : `float:${value}`;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return '[' + value.map(canonical).join(',') + ']';
  const keys = Object.keys(value).sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonical(value[k])).join(',') + '}';
}

/** A JSON integer (10): no fraction, exponent or sign where unsigned, within `max`. */
export function integer(value, what, max = (1n << 64n) - 1n, min = 0n) {
  need(isLosslessNumber(value) && /^-?(0|[1-9][0-9]*)$/.test(value.value), `${what} is an integer (10)`);
  const v = BigInt(value.value);
  need(v >= min && v <= max, `${what} is within its type (10)`);
  return v;
}

function exactFields(object, fields, what) {
  need(object !== null && typeof object === 'object' && !Array.isArray(object), `${what} is an object (10)`);
  const keys = Object.keys(object);
  need(keys.length === fields.length && fields.every((f) => keys.includes(f)),
    `${what} has exactly the fields ${fields.join(', ')} (10)`);
}

function headerFromJson(json, what) {
  exactFields(json, ['format_version', 'validator', 'height', 'prev_hash', 'time_ms', 'events_root', 'n_events'], what);
  fromHex(json.validator, `${what}.validator`, 32);
  fromHex(json.prev_hash, `${what}.prev_hash`, 32);
  fromHex(json.events_root, `${what}.events_root`, 32);
  return {
    format_version: integer(json.format_version, `${what}.format_version`, 0xffffn),
    validator: json.validator, height: integer(json.height, `${what}.height`), prev_hash: json.prev_hash,
    time_ms: integer(json.time_ms, `${what}.time_ms`), events_root: json.events_root,
    n_events: integer(json.n_events, `${what}.n_events`, 0xffffffffn),
  };
}

// ---- 03: inclusion proofs --------------------------------------------------------------

export const MAX_PROOF_HEADERS = 131072;

/** An inclusion proof (03), parsed JSON: returns the event it proves and the tip
 * `{height, hash}` its headers reach, or throws naming the rule that failed. */
export function verifyInclusionProof(proof, what = 'the proof') {
  exactFields(proof, ['validator', 'height', 'event_idx', 'event_bytes', 'event', 'merkle_path', 'headers'], what);
  need(Array.isArray(proof.headers) && proof.headers.length >= 1, `${what} has headers (03)`);
  need(proof.headers.length <= MAX_PROOF_HEADERS, `${what} has at most ${MAX_PROOF_HEADERS} headers (03)`);
  const validator = proof.validator;
  fromHex(validator, `${what}.validator`, 32);
  const height = integer(proof.height, `${what}.height`);
  const eventIdx = integer(proof.event_idx, `${what}.event_idx`, 0xffffffffn);
  const eventBytes = fromHex(proof.event_bytes, `${what}.event_bytes`);
  const decoded = decodeEvent(eventBytes);
  need(canonical(decoded) === canonical(proof.event), `${what}'s event equals its bytes decoded (03)`);
  need(Array.isArray(proof.merkle_path), `${what}.merkle_path is a list (03)`);
  const path = proof.merkle_path.map((p, i) => fromHex(p, `${what}.merkle_path[${i}]`, 32));
  let previous = null;
  proof.headers.forEach((item, i) => {
    exactFields(item, ['header', 'signature'], `${what}.headers[${i}]`);
    const h = headerFromJson(item.header, `${what}.headers[${i}].header`);
    need(h.validator === validator, `${what}'s headers are all validator ${validator.slice(0, 16)}…'s (03)`);
    const hash = checkHeaderSignature(h, fromHex(item.signature, `${what}.headers[${i}].signature`, 64));
    if (previous === null) {
      need(h.height === height, `${what}'s first header is at its height (03)`);
      need(verifyInclusion(leafHash(eventBytes), eventIdx, h.n_events, path, fromHex(h.events_root, 'events_root', 32)),
        `${what}'s Merkle path proves event ${eventIdx} of block ${height} (03)`);
    } else {
      need(h.height === previous.height + 1n && h.prev_hash === toHex(previous.hash) && h.time_ms >= previous.time_ms,
        `${what}'s header ${h.height} follows header ${previous.height} by the chain rules (03)`);
    }
    previous = { height: h.height, hash, time_ms: h.time_ms, header: item.header, signature: item.signature };
  });
  return { validator, height, eventIdx, event: decoded, tip: { height: previous.height, hash: toHex(previous.hash) } };
}

// ---- 09: transcript entries -------------------------------------------------------------

const ROLES = ['contender', 'champion', 'unknown'];

function checkUnproven(u) {
  exactFields(u, ['role', 'env_decision', 'match_contender_won', 'env_tally', 'rule', 'match_reason'], 'unproven');
  need(ROLES.includes(u.role), 'unproven.role is contender, champion or unknown (09)');
  need(u.env_decision === null || OUTCOMES.includes(u.env_decision), 'unproven.env_decision is an outcome (09)');
  need(u.match_contender_won === null || typeof u.match_contender_won === 'boolean', 'unproven.match_contender_won (09)');
  if (u.env_tally !== null) {
    exactFields(u.env_tally, ['wins', 'losses', 'draws', 'n_challenges'], 'unproven.env_tally');
    for (const f of ['wins', 'losses', 'draws']) integer(u.env_tally[f], `unproven.env_tally.${f}`, 0xffffffffn);
    integer(u.env_tally.n_challenges, 'unproven.env_tally.n_challenges');
  }
  need(u.rule === null || typeof u.rule === 'string', 'unproven.rule (09)');
  need(u.match_reason === null || typeof u.match_reason === 'string', 'unproven.match_reason (09)');
}

function transcriptOf(event) {
  return event.transcript ?? event.transcript_cut?.transcript ?? null;
}

/** A transcript entry (09), parsed JSON: what its proofs prove, or throws naming the
 * rule. `unproven` is checked for its schema only and returned as it is. */
export function verifyEntry(entry) {
  exactFields(entry, ['validator', 'height', 'event_idx', 'transcript', 'opponent', 'outcome', 'unproven', 'proof'], 'the entry');
  exactFields(entry.proof, ['inclusion', 'opponent', 'commitment'], 'proof');
  const present = [entry.opponent, entry.proof.opponent, entry.outcome].filter((x) => x !== null).length;
  need(present === 0 || present === 3, 'opponent, its proof and the outcome are all null or all present (09)');
  if (entry.proof.opponent !== null) {
    need(Array.isArray(entry.proof.opponent.headers) && entry.proof.opponent.headers.length === 1,
      "the opponent's proof holds exactly one header (09)");
  }
  checkUnproven(entry.unproven);
  const inclusion = verifyInclusionProof(entry.proof.inclusion, 'the inclusion proof');
  need(entry.validator === inclusion.validator && integer(entry.height, 'height') === inclusion.height &&
    integer(entry.event_idx, 'event_idx', 0xffffffffn) === inclusion.eventIdx, 'the entry names the proven event (09)');
  const t = transcriptOf(inclusion.event);
  need(t !== null, 'the proven event is a transcript (09)');
  need(canonical(t) === canonical(entry.transcript), 'the transcript equals the proven one (09)');
  let opponent = null;
  if (entry.proof.opponent !== null) {
    const proof = verifyInclusionProof(entry.proof.opponent, "the opponent's proof");
    need(proof.validator === inclusion.validator, "the opponent's proof is the same log's (09)");
    need(canonical(entry.proof.opponent.headers[0]) === canonical(entry.proof.inclusion.headers[0]),
      "the opponent's block is the entry's block (09)");
    const o = transcriptOf(proof.event);
    need(o !== null && o.challenge_id === t.challenge_id && o.match_id === t.match_id && o.miner.hotkey !== t.miner.hotkey,
      "the opponent's event is another miner's transcript of the same challenge and match (09)");
    exactFields(entry.opponent, ['hotkey', 'reward_milli', 'answer'], 'opponent');
    need(entry.opponent.hotkey === o.miner.hotkey && entry.opponent.answer === o.answer &&
      integer(entry.opponent.reward_milli, 'opponent.reward_milli', 0x7fffffffn, -0x80000000n) === o.reward_milli,
      "the opponent's hotkey, reward and answer are the proven ones (09)");
    const want = t.reward_milli > o.reward_milli ? 'win' : t.reward_milli < o.reward_milli ? 'loss' : 'draw';
    need(entry.outcome === want, `the outcome is ${want} by the two rewards (09)`);
    opponent = o;
  }
  let commitment = null;
  if (entry.proof.commitment !== null) {
    const proof = verifyInclusionProof(entry.proof.commitment, 'the commitment proof');
    need(proof.validator === inclusion.validator, 'the commitment is the same log\'s (09)');
    const c = proof.event.chain_commitment;
    need(c !== undefined && c.committed_height === inclusion.tip.height && c.committed_hash === inclusion.tip.hash,
      'the commitment commits the tip the inclusion proof reaches (09)');
    commitment = { netuid: c.netuid, chain_block: c.chain_block };
  }
  return { validator: inclusion.validator, height: inclusion.height, eventIdx: inclusion.eventIdx, tip: inclusion.tip,
    transcript: t, opponent, outcome: entry.outcome, commitment };
}

// ---- 06: challenge ids -----------------------------------------------------------------

/** A challenge id from its parts (06). */
export function challengeId(env, envVersion, validator, matchId, index) {
  const nameBytes = utf8.encode(env);
  const material = concat(le(nameBytes.length, 4), nameBytes, le(envVersion, 4), fromHex(validator, 'validator', 32),
    fromHex(matchId, 'match_id', 32), le(index, 8));
  return toHex(blake3(material, { context: utf8.encode('af 2026-11 challenge_id v1') }));
}
