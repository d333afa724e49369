'use strict';
// The Node worker of the cross-language matrix (scripts/test-matrix.sh describes the
// protocol every language's worker follows), on the Node binding (bindings/node, built
// by its own npm ci). The golden vectors are checked with @node-rs/xxhash's XXH3
// (pinned in this directory's package-lock.json). The other languages' keys are read
// through maps opened without codecs, whose codecs come from the types they recorded.
//
//   node worker.js STORE LANG LANGS KEYS ADDS VECTORS
const fs = require('node:fs');
const path = require('node:path');
const { xxh3 } = require('@node-rs/xxhash');
const shoal = require(path.join(__dirname, '..', '..', '..', 'bindings', 'node'));

const WAIT_MS = 180_000;

class Failure extends Error {}

function golden(file) {
  let n = 0;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const f = line.split('\t');
    if (f.length !== 8) throw new Failure(`golden vector line ${JSON.stringify(line)}: 8 fields expected`);
    const key = f[1] === '-' ? Buffer.alloc(0) : Buffer.from(f[1], 'hex');
    const h = xxh3.xxh64(key, BigInt(f[0]));
    const m16 = 0xffffn;
    const got = [h, h >> 48n, h >> 56n, (((h >> 32n) & m16) * 59n) >> 16n, ((h >> 16n) & m16) % 4n, h & 15n];
    const names = ['hash', 'tag', 'cell tag', 'home', 'stash', 'dir'];
    for (let i = 0; i < 6; i++) {
      if (got[i] !== BigInt(f[i + 2])) {
        throw new Failure(`golden vector ${n} (key ${f[1]}): ${names[i]} 0x${got[i].toString(16)}, want ${f[i + 2]}`);
      }
    }
    n++;
  }
  if (n === 0) throw new Failure(`${file}: no vectors`);
  return n;
}

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function waitFor(start, what, get) {
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() - start > WAIT_MS) throw new Failure(`timed out waiting for ${what()}`);
    sleep(5);
  }
}

const varValue = (lang, i) => `${lang}:${i}:é€`;
const fixedKey = (lang, i) => Buffer.from(lang.slice(0, 10).padEnd(10, '.') + String(i).padStart(6, '0'), 'ascii');
const u64 = (v) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
};

function run(file, lang, langs, keys, adds, vectorsFile) {
  const id = langs.indexOf(lang);
  if (id < 0) throw new Failure(`${lang} is not in ${langs}`);
  const vectors = golden(vectorsFile);
  const start = Date.now();

  const s = shoal.open(file);
  const sync = s.map('mx_sync', { key: 'string', value: 'string' });
  const vm = s.map('mx_var', { key: 'string', value: 'string' });
  const fixed = s.fixedMap('mx_fixed', 16, 8, { key: 'bytes', value: 'float' });
  const inline = s.fixedMap('mx_inline', 8, 8, { keyType: 'u64', value: 'int' });
  const countFixed = s.fixedMap('mx_count_fixed', 8, 8, { keyType: 'u64', value: 'int' });
  const countVar = s.map('mx_count_var', { key: 'string', value: 'int' });

  sync.set(`ready/${lang}`, '1');
  for (const l of langs) waitFor(start, () => `${l} to start (ready/${l})`, () => sync.get(`ready/${l}`));

  for (let i = 0; i < keys; i++) {
    vm.set(`${lang}/${i}`, varValue(lang, i));
    fixed.set(fixedKey(lang, i), id * 1000 + i + 0.25);
    inline.set(u64((BigInt(id + 1) << 32n) | BigInt(i)), -(id * 1000 + i) - 1);
  }
  for (let r = 0; r < adds; r++) {
    countFixed.add(u64(r % 4), 1);
    countVar.add('total', 1);
  }
  sync.set(`done/${lang}`, '1');

  // Opened without codecs: the codecs come from the types the maps recorded.
  const varAny = s.map('mx_var');
  const fixedAny = s.fixedMap('mx_fixed', 16, 8);
  const inlineAny = s.fixedMap('mx_inline', 8, 8);
  if (fixedAny.valueCodec !== 'float' || inlineAny.valueCodec !== 'int' || inlineAny.keyType !== 'u64') {
    throw new Failure(`recorded types differ from the protocol's: ${fixedAny.valueType}, ${inlineAny.keyType}/${inlineAny.valueType}`);
  }
  let checked = 0;
  langs.forEach((other, o) => {
    for (let i = 0; i < keys; i++) {
      const k = `${other}/${i}`;
      const v = waitFor(start, () => `${other}'s key "${k}" in mx_var`, () => varAny.get(k));
      if (v !== varValue(other, i)) throw new Failure(`${other}'s key "${k}" in mx_var: ${JSON.stringify(v)}, want ${JSON.stringify(varValue(other, i))}`);
      const fk = fixedKey(other, i);
      const d = waitFor(start, () => `${other}'s key "${fk}" in mx_fixed`, () => fixedAny.get(fk));
      if (d !== o * 1000 + i + 0.25) throw new Failure(`${other}'s key "${fk}" in mx_fixed: ${d}, want ${o * 1000 + i + 0.25}`);
      const ik = (BigInt(o + 1) << 32n) | BigInt(i);
      const iv = waitFor(start, () => `${other}'s key ${ik} in mx_inline`, () => inlineAny.get(u64(ik)));
      if (iv !== -(o * 1000 + i) - 1) throw new Failure(`${other}'s key ${ik} in mx_inline: ${iv}, want ${-(o * 1000 + i) - 1}`);
      checked += 3;
    }
  });

  for (const l of langs) waitFor(start, () => `${l} to finish (done/${l})`, () => sync.get(`done/${l}`));
  const n = langs.length;
  const total = s.map('mx_count_var').get('total');
  if (total !== n * adds) throw new Failure(`mx_count_var "total": ${total}, want ${n * adds}`);
  for (let c = 0; c < 4; c++) {
    const got = countFixed.get(u64(c));
    const want = n * (Math.floor(adds / 4) + (c < adds % 4 ? 1 : 0));
    if (got !== want) throw new Failure(`mx_count_fixed key ${c}: ${got}, want ${want}`);
  }
  s.close();
  console.log(`matrix ${lang}: ok (${vectors} golden vectors; ${checked} keys of ${n} languages; counters ${n * adds})`);
}

const args = process.argv.slice(2);
if (args.length !== 6) {
  console.error('usage: node worker.js STORE LANG LANGS KEYS ADDS VECTORS');
  process.exit(2);
}
try {
  run(args[0], args[1], args[2].split(','), Number(args[3]), Number(args[4]), args[5]);
} catch (e) {
  console.error(`matrix ${args[1]}: FAILED: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
}
