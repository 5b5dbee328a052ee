// Transcript entries (09) as `af transcripts --json` writes them, through the explorer's
// verifier: each verifies, and each tampered field is refused. `.ci/run` writes the file
// from a demo store and names it in AF_ENTRIES; without it the test says it was skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { stringify } from 'lossless-json';
import * as v from '../verify.mjs';

const file = process.env.AF_ENTRIES;

test('entries written by af verify, and every tampered one is refused', { skip: !file && 'AF_ENTRIES not set' }, () => {
  const entries = v.parseStrictJson(readFileSync(file, 'utf8'));
  assert.ok(entries.length >= 10, `${entries.length} entries`);
  // A spread of them: every signature of every header is checked, which takes a while.
  const sample = entries.filter((_, i) => i % Math.ceil(entries.length / 40) === 0);
  for (const entry of sample) {
    const checked = v.verifyEntry(entry);
    assert.equal(checked.validator, entry.validator);
    assert.equal(checked.transcript.answer, entry.transcript.answer);
  }
  const withOpponent = entries.find((e) => e.opponent !== null);
  assert.ok(withOpponent, 'an entry with an opponent');
  v.verifyEntry(withOpponent);
  const copy = () => v.parseStrictJson(stringify(withOpponent));
  const edits = {
    'the answer': (e) => { e.transcript.answer += ' '; },
    'the reward': (e) => { e.transcript.reward_milli = v.parseStrictJson(`${BigInt(e.transcript.reward_milli.value) + 1n}`); },
    "the opponent's answer": (e) => { e.opponent.answer += '!'; },
    "the opponent's hotkey": (e) => { e.opponent.hotkey = 'someone'; },
    'the outcome': (e) => { e.outcome = e.outcome === 'win' ? 'loss' : 'win'; },
    'the height': (e) => { e.height = v.parseStrictJson(`${BigInt(e.height.value) + 1n}`); },
    'an event byte': (e) => {
      const b = e.proof.inclusion.event_bytes;
      e.proof.inclusion.event_bytes = b.slice(0, 10) + (b[10] === '0' ? '1' : '0') + b.slice(11);
    },
    'a Merkle path hash': (e) => {
      const p = e.proof.inclusion.merkle_path;
      p[0] = (p[0][0] === '0' ? '1' : '0') + p[0].slice(1);
    },
    'a header signature': (e) => {
      const h = e.proof.inclusion.headers.at(-1);
      h.signature = (h.signature[0] === '0' ? '1' : '0') + h.signature.slice(1);
    },
    'a header time': (e) => {
      const h = e.proof.inclusion.headers.at(-1).header;
      h.time_ms = v.parseStrictJson(`${BigInt(h.time_ms.value) + 1n}`);
    },
    'a dropped middle header': (e) => {
      const hs = e.proof.inclusion.headers;
      if (hs.length > 2) hs.splice(1, 1);
      else hs.push(hs[0]);
    },
    "the opponent's proof with two headers": (e) => { e.proof.opponent.headers.push(e.proof.opponent.headers[0]); },
    'an unknown field': (e) => { e.note = 'trust me'; },
    'an unknown unproven field': (e) => { e.unproven.extra = null; },
    'a role outside the three': (e) => { e.unproven.role = 'referee'; },
    'an uppercase hex': (e) => { e.validator = e.validator.toUpperCase(); },
    'the event JSON beside its bytes': (e) => { e.proof.inclusion.event.transcript.answer += 'x'; },
    'no opponent proof beside an opponent': (e) => { e.proof.opponent = null; },
  };
  for (const [what, edit] of Object.entries(edits)) {
    const e = copy();
    edit(e);
    assert.throws(() => v.verifyEntry(e), v.Refused, `tampered: ${what}`);
  }
});
