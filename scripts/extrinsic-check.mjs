// An outside codec for what af sends to subtensor: polkadot-js (@polkadot/types, the
// codec of the field's own tools; we wrote none of it) reads the real finney metadata
// and, for every extrinsic the tests captured from the loopback node
// (target/extrinsics/*.jsonl, written by tests/it/subtensor_node.rs):
//   - decodes it, and re-encodes it to the very same bytes;
//   - checks the signer, the nonce and the call's pallet and name;
//   - encodes the call itself from the intended arguments and compares the bytes;
//   - verifies the sr25519 signature over the signing payload it builds itself.
// Run by .ci/run after the tests: node scripts/extrinsic-check.mjs METADATA DIR
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(join(process.cwd(), 'scripts/extrinsic-check/package.json'));
const { TypeRegistry, Metadata } = require('@polkadot/types');
const { expandMetadata } = require('@polkadot/types/metadata');
const { blake2AsU8a, cryptoWaitReady, signatureVerify } = require('@polkadot/util-crypto');
const { u8aToHex, stringCamelCase } = require('@polkadot/util');

const [metadataPath, dir] = process.argv.slice(2);
if (!metadataPath || !dir) {
  console.error('usage: extrinsic-check.mjs METADATA_FILE CAPTURE_DIR');
  process.exit(2);
}
await cryptoWaitReady();
const registry = new TypeRegistry();
const metadata = new Metadata(registry, readFileSync(metadataPath));
registry.setMetadata(metadata);
const decorated = expandMetadata(registry, metadata);

let passed = 0;
const counts = {};
function check(condition, what) {
  if (!condition) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  passed += 1;
}

const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort();
check(files.length > 0, `capture files in ${dir}`);
for (const file of files) {
  const lines = readFileSync(join(dir, file), 'utf8').split('\n').filter((l) => l.trim());
  lines.forEach((text, i) => {
    const line = JSON.parse(text);
    const where = `${file}:${i + 1} ${line.call}`;
    const extrinsic = registry.createType('Extrinsic', line.extrinsic);
    check(extrinsic.toHex() === line.extrinsic, `${where}: decodes and re-encodes to the same bytes`);
    check(extrinsic.isSigned && (extrinsic.version & 0x7f) === 4, `${where}: a signed v4 extrinsic`);
    check(extrinsic.signer.toHex() === line.signer || u8aToHex(extrinsic.signer.toU8a().slice(-32)) === line.signer,
      `${where}: signed by ${line.signer}`);
    check(extrinsic.nonce.toNumber() === line.nonce, `${where}: nonce ${line.nonce}`);
    const [pallet, call] = line.call.split('.');
    const method = extrinsic.method;
    check(method.section === stringCamelCase(pallet) && method.method === stringCamelCase(call),
      `${where}: the call is ${line.call} (polkadot-js: ${method.section}.${method.method})`);
    // The call as polkadot-js encodes it from what af meant to send.
    const fn = decorated.tx[stringCamelCase(pallet)][stringCamelCase(call)];
    const args = fn.meta.args.map((arg) => {
      // polkadot-js names arguments in camelCase; the metadata (and the intent) in snake_case.
      const name = arg.name.toString().replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
      check(name in line.args, `${where}: the intent names ${name}`);
      return line.args[name];
    });
    const intended = fn(...args);
    check(u8aToHex(intended.toU8a()) === u8aToHex(method.toU8a()),
      `${where}: the call equals polkadot-js's encoding of the intended arguments`);
    // The signature, over the payload polkadot-js builds from the extrinsic's own
    // extensions and the chain's genesis, era block and versions.
    const payload = registry.createType('ExtrinsicPayload', {
      method: method.toHex(),
      era: extrinsic.era,
      nonce: extrinsic.nonce,
      tip: extrinsic.tip,
      mode: extrinsic.inner.signature.mode,
      metadataHash: null,
      specVersion: line.spec_version,
      transactionVersion: line.transaction_version,
      genesisHash: line.genesis_hash,
      blockHash: line.era_block_hash,
    }, { version: 4 });
    // Substrate signs the blake2-256 of a payload longer than 256 bytes.
    const signed = (bytes) => (bytes.length > 256 ? blake2AsU8a(bytes, 256) : bytes);
    const verified = signatureVerify(signed(payload.toU8a({ method: true })), extrinsic.signature.toU8a(), line.signer);
    check(verified.isValid && verified.crypto === 'sr25519', `${where}: a valid sr25519 signature`);
    const tampered = payload.toU8a({ method: true }).slice();
    tampered[tampered.length - 1] ^= 1;
    check(!signatureVerify(signed(tampered), extrinsic.signature.toU8a(), line.signer).isValid,
      `${where}: the signature fails on a changed payload`);
    counts[line.call] = (counts[line.call] || 0) + 1;
  });
}
const total = Object.values(counts).reduce((a, b) => a + b, 0);
for (const [call, n] of Object.entries(counts).sort()) {
  console.log(`ok   ${n} x ${call}`);
}
console.log(`extrinsic-check: ${total} extrinsics decoded, re-encoded, compared and verified by polkadot-js (${passed} checks)`);
