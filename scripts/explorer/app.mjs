// The explorer page: a miner types its hotkey (or opens `explorer.html#miner=HOTKEY`) and
// sees every transcript of its matches on the logs the site holds, each challenge's two
// answers side by side, with every proof checked here, in this browser, by verify.mjs.
// It has no server logic: it reads the published layout of ledger-spec/11 (a site written
// by `af ledger publish`, or a running node, which serves the same paths and, for a
// miner's pages, its `af/v1/transcripts` API). What a proof covers is shown as verified;
// replay's context as unproven; an entry whose proof fails as failed, with the rule, and
// none of its data. Text from the logs is only ever set as text, never as markup.

import { blake3 } from '@noble/hashes/blake3.js';
import * as v from './verify.mjs';
import { shown } from './text.mjs';

const PAGE = 20;
// The most a page of entries, or a miner's index, may be for this browser to check it
// within 2 s and 64 MB of heap whatever a site serves (issue 75): a node's API cuts its
// pages there (ledger-spec/11), and a longer document is refused as it streams in,
// before any of it is decoded.
const MAX_PAGE_BYTES = 8 * 1024 * 1024;
const MAX_TIP_BYTES = 16 * 1024;
const MAX_MATCH_PAGES = 4096;

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, value] of Object.entries(attrs)) {
    if (k === 'class') node.className = value;
    else node.setAttribute(k, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

/** What to do with a page too big for a browser to check. */
const tooBig = (limit) => limit === MAX_PAGE_BYTES
  ? ': more than this page checks in a browser; read it with `af mirror --from URL --data DIR`, then `af transcripts --data DIR --miner HOTKEY`'
  : '';

/** A document of the site, at most `limit` bytes, as text (null when it is not there). */
async function fetchText(path, limit) {
  const response = await fetch(path, { cache: 'no-cache' });
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  const length = Number(response.headers.get('content-length') ?? 0);
  if (length > limit) throw new v.Refused(`${path} is ${length} bytes, over ${limit}${tooBig(limit)}`);
  // Read as it arrives and stop past the limit: a server that says nothing of the length,
  // or lies about it, cannot make the page hold more.
  const reader = response.body.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.length;
    if (received > limit) {
      await reader.cancel();
      throw new v.Refused(`${path} is over ${limit} bytes${tooBig(limit)}`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new v.Refused(`${path} is not UTF-8 (10)`);
  }
}

const hotkeyPath = (hotkey) => v.toHex(blake3(new TextEncoder().encode(hotkey)));

/** The miner's whole count of entries on a published site, from its index (a hint for
 * paging, like the index's matches: a published page counts only the entries through
 * itself, so that it stays the same bytes as the log grows; 11). */
async function publishedTotal(hotkey) {
  const text = await fetchText(`af/v1/miner/${hotkeyPath(hotkey)}/matches`, MAX_PAGE_BYTES);
  if (text === null) return null;
  const index = v.parseStrictJson(text);
  return index !== null && typeof index === 'object' && index.total !== undefined ? v.integer(index.total, 'the index\'s total') : null;
}

/** Page `page` of a miner's entries: the published file, else a node's API. */
async function entriesPage(hotkey, page) {
  let text = await fetchText(`af/v1/miner/${hotkeyPath(hotkey)}/entries/${page}`, MAX_PAGE_BYTES);
  const published = text !== null;
  if (text === null) {
    const query = new URLSearchParams({ miner: hotkey, offset: String(page * PAGE), limit: String(PAGE) });
    text = await fetchText(`af/v1/transcripts?${query}`, MAX_PAGE_BYTES);
  }
  if (text === null) return null;
  const body = v.parseStrictJson(text);
  if (body === null || typeof body !== 'object' || !Array.isArray(body.entries) ||
      Object.keys(body).sort().join() !== 'entries,offset,total') {
    throw new v.Refused('a page of entries is {"entries", "offset", "total"} (11)');
  }
  if (body.entries.length > PAGE) throw new v.Refused(`a page holds at most ${PAGE} entries, not ${body.entries.length}`);
  const offset = v.integer(body.offset, 'offset');
  if (offset !== BigInt(page * PAGE)) throw new v.Refused(`page ${page + 1} starts at entry ${page * PAGE + 1}, not ${offset + 1n}`);
  let total = v.integer(body.total, 'total');
  if (published) {
    const whole = await publishedTotal(hotkey);
    if (whole !== null && whole > total) total = whole;
  }
  return { entries: body.entries, offset, total };
}

// The signed tip of each log, fetched and verified once a page names the log.
const tips = new Map();

function signedTip(validator) {
  if (!tips.has(validator)) {
    tips.set(validator, (async () => {
      const text = await fetchText(`af/v1/log/${validator}/tip`, MAX_TIP_BYTES);
      if (text === null) return { error: 'the site has no signed tip for this log' };
      try {
        const tip = v.parseStrictJson(text);
        if (Object.keys(tip).sort().join() !== 'header,signature') throw new v.Refused('a tip is {"header", "signature"} (11)');
        const h = { ...tip.header };
        for (const k of ['format_version', 'height', 'time_ms', 'n_events']) h[k] = v.integer(h[k], `tip.${k}`);
        if (h.validator !== validator) throw new v.Refused("the tip is the log's validator's (11)");
        const hash = v.checkHeaderSignature(h, v.fromHex(tip.signature, 'tip.signature', 64));
        // The owner's checkpoint (04), where the site has one: it must verify, and name
        // this tip when it is of the same size.
        const note = await fetchText(`af/v1/log/${validator}/checkpoint`, MAX_TIP_BYTES);
        if (note !== null) {
          const checkpoint = v.verifyCheckpoint(note);
          if (checkpoint.validator !== validator) throw new v.Refused("the checkpoint is the log's validator's (04)");
          if (checkpoint.size === h.height + 1n && checkpoint.tipHash !== v.toHex(hash)) {
            throw new v.Refused('the checkpoint names another block at the tip\'s height: two histories (04)');
          }
        }
        return { height: h.height, hash: v.toHex(hash) };
      } catch (error) {
        return { error: error.message };
      }
    })());
  }
  return tips.get(validator);
}

/** How an entry's proven tip stands against the log's signed tip: a `[class, words]`. */
async function againstTip(checked) {
  const tip = await signedTip(checked.validator);
  if (tip.error) return ['failed', `the log's signed tip: ${tip.error}`];
  if (tip.height === checked.tip.height) {
    return tip.hash === checked.tip.hash
      ? ['verified', `chained to the log's signed tip, block ${tip.height}`]
      : ['failed', `the proof reaches block ${checked.tip.height} with another hash than the log's signed tip: two histories`];
  }
  if (tip.height < checked.tip.height) {
    return ['verified', `chained to block ${checked.tip.height}, signed by the validator; warning: this site serves an older signed tip (block ${tip.height}) than the entry's block`];
  }
  return ['verified', `chained to block ${checked.tip.height}, signed by the validator (the site's tip is block ${tip.height})`];
}


const short = (hex) => `${hex.slice(0, 12)}…`;
const reward = (milli) => (Number(milli) / 1000).toFixed(3);

function badge(cls, words) {
  return el('span', { class: `badge ${cls}`, 'data-status': cls }, cls === 'verified' ? '✓ ' : cls === 'failed' ? '✗ ' : '? ', words);
}

/** One entry: failed (the rule, nothing else), or its proven fields and its context. */
async function renderEntry(entry, index) {
  const card = el('div', { class: 'entry', 'data-entry': String(index) });
  let checked;
  try {
    checked = v.verifyEntry(entry);
  } catch (error) {
    card.classList.add('failed');
    card.setAttribute('data-status', 'failed');
    card.append(badge('failed', `entry ${index + 1} is not proven: this rule does not hold for it: "${shown(error.message)}"`));
    return { card, match: null };
  }
  const [cls, words] = await againstTip(checked);
  card.setAttribute('data-status', cls);
  card.classList.add(cls);
  if (cls === 'failed') {
    // A failed entry shows the rule it breaks and none of its data (docs/auditor.md).
    card.append(badge('failed', `entry ${index + 1} is not proven: ${shown(words)}`));
    return { card, match: null };
  }
  const t = checked.transcript;
  card.append(
    el('div', { class: 'head' },
      badge(cls, words),
      el('span', {}, ` ${t.env.name} v${t.env.version}, challenge #${t.challenge_index} `),
      el('code', { title: t.challenge_id }, short(t.challenge_id)),
      el('span', {}, ` · block ${checked.height}, event ${checked.eventIdx}`)),
  );
  const outcome = checked.opponent === null
    ? el('div', { class: 'outcome' }, 'no opponent answer in this block: no result')
    : el('div', { class: 'outcome', 'data-outcome': checked.outcome },
      `${checked.outcome === 'win' ? 'won' : checked.outcome === 'loss' ? 'lost' : 'drew'}: reward ${reward(t.reward_milli)} against ${reward(checked.opponent.reward_milli)} (the env's rule, proven)`);
  card.append(outcome);
  const prompt = t.messages.filter((m) => m.role !== 'assistant').map((m) => `${shown(m.role)}: ${shown(m.content)}`).join('\n\n');
  if (prompt) card.append(el('details', {}, el('summary', {}, 'the challenge, as the env put it (proven)'), el('pre', {}, prompt)));
  const answer = (who, hotkey, text) => el('div', { class: 'answer' },
    el('div', { class: 'who' }, `${who} `, el('code', {}, shown(hotkey))),
    el('pre', {}, shown(text)));
  card.append(el('div', { class: 'pair' },
    answer('this miner', t.miner.hotkey, t.answer),
    checked.opponent === null ? el('div', { class: 'answer' }, el('div', { class: 'who' }, 'no opponent')) :
      answer('opponent', checked.opponent.miner.hotkey, checked.opponent.answer)));
  if (t.error !== null) card.append(el('div', { class: 'error' }, `error recorded: ${shown(t.error)}`));
  const u = entry.unproven;
  card.append(el('div', { class: 'unproven', 'data-status': 'unproven' },
    badge('unproven', `replay's context, not covered by the proofs: role ${u.role}; ` +
      `env ${t.env.name}: ` +
      (u.env_tally ? `the contender won ${u.env_tally.wins}, lost ${u.env_tally.losses}, drew ${u.env_tally.draws} ` +
        `of ${u.env_tally.n_challenges} challenges: ` : 'no tally: ') +
      `${ENV_DECISION_WORDS[u.env_decision] ?? 'undecided'}; ` +
      `match ${u.match_contender_won === null ? 'not decided' : u.match_contender_won ? 'won by the contender' : 'kept by the champion'}` +
      (u.match_reason ? ` (${u.match_reason})` : ''))));
  if (checked.commitment) {
    card.append(el('div', { class: 'commitment' },
      badge('verified', `the validator's log commits this tip on netuid ${checked.commitment.netuid} at chain block ${checked.commitment.chain_block} (not checked against the chain here)`)));
  }
  return { card, match: { validator: checked.validator, id: t.match_id } };
}

// The env decisions in the words `af transcripts` uses.
const ENV_DECISION_WORDS = {
  contender_better: 'the contender is better',
  contender_not_better: 'the contender is not better',
  inconclusive: 'inconclusive (a cap was reached, or the match was decided first)',
};

/** Page `page` of one match of a miner: the site's match index (a hint) names the pages
 * of the miner's entries holding the match; of the `page`-th of them only the entries of
 * that match are kept, each still checked on its own. */
async function matchEntries(hotkey, matchId, page) {
  const text = await fetchText(`af/v1/miner/${hotkeyPath(hotkey)}/matches`, MAX_PAGE_BYTES);
  if (text === null) throw new v.Refused('this site has no match index for the miner (a running node has none): open the miner\'s pages');
  const index = v.parseStrictJson(text);
  if (!Array.isArray(index?.matches)) throw new v.Refused('a match index is {"matches": [...]}');
  const pages = new Set();
  for (const m of index.matches) {
    if (m?.match_id === matchId && Array.isArray(m.pages) && m.pages.length === 2) {
      const [first, last] = m.pages.map((p) => Number(v.integer(p, 'page', 1n << 20n)));
      // A match's transcripts of one miner fill a few hundred pages at most (4 envs of
      // up to 4,000 challenges): an index naming more is refused, not walked.
      if (last < first || last - first >= MAX_MATCH_PAGES || pages.size >= MAX_MATCH_PAGES) {
        throw new v.Refused(`the match index names pages ${first} to ${last}: at most ${MAX_MATCH_PAGES} per match`);
      }
      for (let p = first; p <= last; p++) pages.add(p);
    }
  }
  const list = [...pages].sort((a, b) => a - b);
  const entries = [];
  let total = 0n;
  if (page < list.length) {
    const body = await entriesPage(hotkey, list[page]);
    if (body !== null) {
      total = body.total;
      body.entries.forEach((entry, i) => {
        if (entry?.transcript?.match_id === matchId) entries.push({ entry, index: Number(body.offset) + i });
      });
    }
  }
  return { entries, total, pages: list.length };
}

async function show(hotkey, page, matchId) {
  const results = $('results');
  results.replaceChildren(el('p', { id: 'status' }, `Fetching page ${page + 1} of ${hotkey}'s transcripts…`));
  const started = performance.now();
  let body;
  try {
    if (matchId) {
      const found = await matchEntries(hotkey, matchId, page);
      body = { entries: found.entries.map((e) => e.entry), indexes: found.entries.map((e) => e.index), offset: 0n,
        total: found.total, match: matchId, matchPages: found.pages };
    } else {
      body = await entriesPage(hotkey, page);
    }
  } catch (error) {
    results.replaceChildren(el('p', { class: 'failed', 'data-status': 'failed' }, `The page could not be read: ${error.message}`));
    return;
  }
  if (body === null) {
    results.replaceChildren(el('p', { id: 'status' }, `No transcript of ${shown(hotkey)} on this site: no validator ` +
      'whose log it holds played this miner (a duplicate of an older commitment or a copy of the champion is never ' +
      "played, and a miner still queued has played nothing yet). The ", el('a', { href: 'miners.html' }, 'Miners'),
      ' page lists every miner and why it was or was not played.'));
    return;
  }
  const groups = new Map();
  const list = el('div', { id: 'entries' });
  let failed = 0;
  for (const [i, entry] of body.entries.entries()) {
    const index = body.indexes ? body.indexes[i] : Number(body.offset) + i;
    const { card, match } = await renderEntry(entry, index);
    if (match === null) {
      failed += 1;
      list.append(card);
      continue;
    }
    if (entry.transcript?.miner?.hotkey !== hotkey || (body.match && match.id !== body.match)) {
      card.classList.add('failed');
      card.setAttribute('data-status', 'failed');
      card.replaceChildren(badge('failed', `entry ${index + 1} is another miner's transcript, or of another match`));
      failed += 1;
      list.append(card);
      continue;
    }
    const key = `${match.validator}/${match.id}`;
    if (!groups.has(key)) {
      const group = el('section', { class: 'match', 'data-match': match.id },
        el('h2', {}, 'match ', el('code', { title: match.id }, short(match.id)), ' in the log of validator ',
          el('code', { title: match.validator }, short(match.validator)), ' ',
          body.match ? null : el('a', { href: `#miner=${encodeURIComponent(hotkey)}&match=${match.id}` }, '(this match only)')));
      groups.set(key, group);
      list.append(group);
    }
    groups.get(key).append(card);
  }
  const total = Number(body.total);
  const pages = Math.max(1, Math.ceil(total / PAGE));
  const here = `#miner=${encodeURIComponent(hotkey)}`;
  const nav = body.match ? el('nav', {},
    page > 0 ? el('a', { href: `${here}&match=${body.match}&page=${page}` }, '← earlier') : null,
    ` match ${short(body.match)} only, page ${page + 1} of ${body.matchPages}; `,
    page + 1 < body.matchPages ? el('a', { href: `${here}&match=${body.match}&page=${page + 2}` }, 'later →') : null,
    ' ', el('a', { href: here }, `all of ${hotkey}'s transcripts`)) : el('nav', {},
    page > 0 ? el('a', { href: `#miner=${encodeURIComponent(hotkey)}&page=${page}` }, '← earlier') : null,
    ` page ${page + 1} of ${pages} (${total} transcripts) `,
    page + 1 < pages ? el('a', { href: `#miner=${encodeURIComponent(hotkey)}&page=${page + 2}` }, 'later →') : null);
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  failed = list.querySelectorAll('.entry[data-status=failed]').length;
  const summary = el('p', { id: 'status', 'data-failed': String(failed), 'data-shown': String(body.entries.length) },
    `${body.entries.length} transcripts checked in this browser in ${seconds} s: ` +
    `${body.entries.length - failed} verified, ${failed} failed.`);
  if (!body.match && body.entries.length < Math.min(PAGE, total - page * PAGE)) {
    summary.append(` The page holds ${body.entries.length} of the ${Math.min(PAGE, total - page * PAGE)} it should: the rest were not served.`);
  }
  results.replaceChildren(summary, nav, list);
}

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  const hotkey = params.get('miner');
  if (hotkey) {
    $('hotkey').value = hotkey;
    const page = Math.max(1, Number.parseInt(params.get('page') ?? '1', 10) || 1) - 1;
    const matchId = params.get('match');
    show(hotkey, page, matchId && /^[0-9a-f]{64}$/.test(matchId) ? matchId : null);
  }
}

document.addEventListener('DOMContentLoaded', () => {
  $('search').addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = `miner=${encodeURIComponent($('hotkey').value.trim())}`;
  });
  window.addEventListener('hashchange', route);
  route();
});
