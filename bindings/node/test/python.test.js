'use strict';
// One store, two languages: what the Python binding writes with its codecs, Node reads
// with the matching ones, and the other way round; both add to the same counters. Needs
// the Python binding built (bash scripts/test-python.sh makes bindings/python/.venv, or
// SHOAL_PYTHON names an interpreter that can import shoal); skipped, saying so, without.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const shoal = require('..');

const venv = path.resolve(__dirname, '../../python/.venv/bin/python');
const python = process.env.SHOAL_PYTHON || (fs.existsSync(venv) ? venv : null);
let skip = false;
if (!python) {
  skip = 'no Python binding: run bash scripts/test-python.sh first (or set SHOAL_PYTHON)';
} else {
  try {
    execFileSync(python, ['-c', 'import shoal'], { stdio: 'ignore' });
  } catch {
    skip = `${python} cannot import shoal`;
  }
}

function py(code, storePath) {
  return execFileSync(python, ['-c', code, storePath], { encoding: 'utf8', timeout: 60_000 });
}

test('Node reads what Python wrote, Python reads what Node wrote, both add', { skip }, () => {
  const p = `/dev/shm/shoal-node-python-${process.pid}.shoal`;
  shoal.remove(p, { missingOk: true });
  try {
    py(`
import sys, shoal
with shoal.open(sys.argv[1]) as s:
    s.map("str", key="str", value="str")["héllo"] = "wörld ✓"
    s.map("int", key="int", value="int")[-7] = -(2**62)
    s.map("float", key="str", value="float")["pi"] = 3.25
    s.map("json", key="json", value="json")[{"b": 1, "a": [1, 2]}] = {"z": None, "é": [True, "x"]}
    s.map("bytes")[b"\\x00k"] = b"\\xff\\x00v"
    c = s.map("count", key="str", value="int")
    for _ in range(1000):
        c.add("n")
`, p);
    const store = shoal.open(p, { create: false });
    try {
      assert.equal(store.map('str', { key: 'string', value: 'string' }).get('héllo'), 'wörld ✓');
      assert.equal(store.map('int', { key: 'int', value: 'bigint' }).get(-7), -(2n ** 62n));
      assert.equal(store.map('float', { key: 'string', value: 'float' }).get('pi'), 3.25);
      const j = store.map('json', { key: 'json', value: 'json' });
      assert.deepEqual(j.get({ a: [1, 2], b: 1 }), { z: null, 'é': [true, 'x'] }, 'same canonical JSON key');
      assert.deepEqual(store.map('bytes').get(Buffer.from('\x00k', 'latin1')), Buffer.from([0xff, 0, 0x76]));
      const c = store.map('count', { key: 'string', value: 'int' });
      for (let i = 0; i < 1000; i++) c.add('n');
      store.map('str', { key: 'string', value: 'string' }).set('from node', 'ünïcode');
      store.map('int', { key: 'int', value: 'int' }).set(2 ** 40, -(2 ** 50));
      store.map('json', { key: 'json', value: 'json' }).set({ y: [1, { b: 2, a: 1 }] }, { ok: true });
    } finally {
      store.close();
    }
    const out = py(`
import sys, json, shoal
with shoal.open(sys.argv[1], create=False) as s:
    print(json.dumps([
        s.map("str", key="str", value="str")["from node"],
        s.map("int", key="int", value="int")[2**40],
        s.map("json", key="json", value="json")[{"y": [1, {"a": 1, "b": 2}]}],
        s.map("count", key="str", value="int")["n"],
        s.check().ok,
    ]))
`, p);
    assert.deepEqual(JSON.parse(out), ['ünïcode', -(2 ** 50), { ok: true }, 2000, true]);
  } finally {
    shoal.remove(p, { missingOk: true });
  }
});
