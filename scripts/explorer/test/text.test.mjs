// What the explorer shows of a miner's text: overrides and invisible characters escaped
// as the CLI escapes them, newlines and tabs kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shown } from '../text.mjs';

test('bidirectional overrides, zero-width and control characters are shown escaped', () => {
  assert.equal(shown('abc\u202edef'), 'abc\\u{202e}def');
  assert.equal(shown('a\u200bb\u2066c\u2069'), 'a\\u{200b}b\\u{2066}c\\u{2069}');
  assert.equal(shown('x\u001b[31mred'), 'x\\u{1b}[31mred');
  assert.equal(shown('line one\nline\ttwo'), 'line one\nline\ttwo');
  assert.equal(shown('\ufeffbom\u00adsoft'), '\\u{feff}bom\\u{ad}soft');
  assert.equal(shown('plain <b>html</b>'), 'plain <b>html</b>', 'markup is text, set as text by the page');
});
