'use strict';
// Randomized operations on a shoal map and on a JavaScript Map (the model) side by side:
// after every operation both must agree on the result, and at the end on the size and
// on every entry seen by iteration. The seed is printed when a run fails; rerun it with
// SHOAL_SEED=<seed> node --test test/model.test.js.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const shoal = require('..');

/** mulberry32: a small seeded generator, so that a failing run can be replayed. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const OPS = Number(process.env.SHOAL_MODEL_OPS ?? 20000);

function run(seed, keyCodec, valueCodec, genKey, genValue, show = (x) => x) {
  const r = rng(seed);
  const p = `/dev/shm/shoal-node-model-${process.pid}-${seed}.shoal`;
  shoal.remove(p, { missingOk: true });
  const store = shoal.open(p, { chunkSize: 64 * 1024 });
  const m = store.map('m', { key: keyCodec, value: valueCodec });
  const model = new Map();
  const log = [];
  try {
    for (let i = 0; i < OPS; i++) {
      const k = genKey(r);
      const ks = show(k);
      const op = r();
      if (op < 0.35) {
        const v = genValue(r);
        log.push(`set ${ks}`);
        assert.equal(m.set(k, v), m);
        model.set(ks, [k, v]);
      } else if (op < 0.6) {
        log.push(`get ${ks}`);
        assert.deepEqual(m.get(k), model.get(ks)?.[1]);
      } else if (op < 0.7) {
        log.push(`has ${ks}`);
        assert.equal(m.has(k), model.has(ks));
      } else if (op < 0.82) {
        log.push(`delete ${ks}`);
        assert.equal(m.delete(k), model.delete(ks));
      } else if (op < 0.87) {
        const v = genValue(r);
        log.push(`setIfAbsent ${ks}`);
        const absent = !model.has(ks);
        assert.equal(m.setIfAbsent(k, v), absent);
        if (absent) model.set(ks, [k, v]);
      } else if (op < 0.91) {
        log.push(`take ${ks}`);
        assert.deepEqual(m.take(k), model.get(ks)?.[1]);
        model.delete(ks);
      } else if (op < 0.95) {
        // compareAndSwap with the right expected value half of the time.
        const cur = model.get(ks)?.[1];
        const right = r() < 0.5;
        const expected = right ? cur : genValue(r);
        const repl = r() < 0.2 ? undefined : genValue(r);
        log.push(`compareAndSwap ${ks} right=${right}`);
        const canon = (x) => (x === undefined ? 'absent' : JSON.stringify(show(x)));
        const same = canon(expected) === canon(cur);
        assert.equal(m.compareAndSwap(k, expected, repl), same);
        if (same) {
          if (repl === undefined) model.delete(ks);
          else model.set(ks, [k, repl]);
        }
      } else if (op < 0.98) {
        const v = genValue(r);
        const remove = r() < 0.2;
        log.push(`update ${ks} remove=${remove}`);
        let seen = 'not called';
        m.update(k, (cur) => {
          seen = cur;
          return remove ? undefined : v;
        });
        assert.deepEqual(seen, model.get(ks)?.[1]);
        if (remove) model.delete(ks);
        else model.set(ks, [k, v]);
      } else if (op < 0.995) {
        const keys = [k, genKey(r), genKey(r)];
        log.push(`getMany ${keys.map(show)}`);
        assert.deepEqual(m.getMany(keys), keys.map((x) => model.get(show(x))?.[1]));
      } else {
        log.push('size');
        assert.equal(m.size, model.size);
      }
    }
    assert.equal(m.size, model.size);
    const seen = new Map();
    for (const [k, v] of m) {
      const ks = show(k);
      assert.ok(!seen.has(ks), `iteration returned ${ks} twice`);
      seen.set(ks, v);
    }
    assert.equal(seen.size, model.size);
    for (const [ks, [, v]] of model) assert.deepEqual(seen.get(ks), v, `entry ${ks}`);
    assert.deepEqual(new Set([...m.keys()].map(show)), new Set(model.keys()));
    const report = store.check();
    assert.ok(report.ok, report.problems.join('\n'));
  } catch (e) {
    e.message = `${e.message}\n  seed ${seed} (SHOAL_SEED=${seed}); last operations: ${log.slice(-5).join('; ')}`;
    console.error(`model test failed with seed ${seed}`);
    throw e;
  } finally {
    store.close();
    shoal.remove(p, { missingOk: true });
  }
}

const seed = Number(process.env.SHOAL_SEED ?? Math.floor(Math.random() * 2 ** 31));

test(`string keys, json values against a Map (seed ${seed})`, () => {
  run(
    seed,
    'string',
    'json',
    (r) => `k${Math.floor(r() * 300)}${r() < 0.05 ? 'é✓' : ''}`,
    (r) => (r() < 0.5 ? { n: Math.floor(r() * 1000), s: 'x'.repeat(Math.floor(r() * 40)) } : [r() < 0.5, null, 'v']),
  );
});

test(`Buffer keys, Buffer values of 0 B to 70 KiB against a Map (seed ${seed + 1})`, () => {
  run(
    seed + 1,
    'bytes',
    'bytes',
    (r) => Buffer.from([Math.floor(r() * 200), Math.floor(r() * 2)]),
    (r) => {
      const big = r() < 0.02;
      const b = Buffer.alloc(big ? 70_000 : Math.floor(r() * 100));
      for (let i = 0; i < b.length; i += 97) b[i] = Math.floor(r() * 256);
      return b;
    },
    (b) => b.toString('hex'),
  );
});

test(`int keys, float values against a Map (seed ${seed + 2})`, () => {
  run(
    seed + 2,
    'int',
    'float',
    (r) => Math.floor((r() - 0.5) * 400),
    (r) => (r() < 0.1 ? -0 : (r() - 0.5) * 1e6),
    (x) => (Object.is(x, -0) ? '-0' : String(x)),
  );
});
