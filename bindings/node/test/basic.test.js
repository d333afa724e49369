'use strict';
// The API one call at a time: the Map-like methods, the codecs' exact bytes (the ones
// the other bindings write, read back through a 'bytes' map of the same name), the
// atomic read-modify-writes, the errors (class and code) for every kind of bad input,
// and what close() does.
const { test, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const shoal = require('..');

let p;
let store;
let n = 0;
beforeEach(() => {
  p = `/dev/shm/shoal-node-basic-${process.pid}-${n++}.shoal`;
  shoal.remove(p, { missingOk: true });
  store = shoal.open(p, { chunkSize: 64 * 1024 });
});
afterEach(() => {
  store.close();
  shoal.remove(p, { missingOk: true });
});

const raw = () => store.map('m', { key: 'bytes', value: 'bytes' }); // any map, as its bytes
const hex = (b) => Buffer.from(b).toString('hex');

test('Map-like API: get, set, has, delete, size, clear, iteration', () => {
  const m = store.map('m', { key: 'string', value: 'string' });
  assert.equal(m.get('a'), undefined);
  assert.equal(m.set('a', '1').set('b', '2'), m);
  assert.equal(m.get('a'), '1');
  assert.equal(m.has('a'), true);
  assert.equal(m.has('z'), false);
  assert.equal(m.size, 2);
  assert.deepEqual(new Map(m), new Map([['a', '1'], ['b', '2']]));
  assert.deepEqual([...m.keys()].sort(), ['a', 'b']);
  assert.deepEqual([...m.values()].sort(), ['1', '2']);
  assert.deepEqual([...m.entries()].sort(), [['a', '1'], ['b', '2']]);
  const seen = [];
  m.forEach((v, k, mm) => {
    assert.equal(mm, m);
    seen.push(k + v);
  });
  assert.deepEqual(seen.sort(), ['a1', 'b2']);
  assert.deepEqual(m.toMap(), new Map([['a', '1'], ['b', '2']]));
  assert.equal(m.delete('a'), true);
  assert.equal(m.delete('a'), false);
  assert.equal(m.size, 1);
  m.clear();
  assert.equal(m.size, 0);
  assert.deepEqual([...m], []);
  assert.equal(Object.prototype.toString.call(m), '[object ShoalMap]');
  assert.equal(m.name, 'm');
  assert.equal(m.keyCodec, 'string');
  assert.equal(m.valueCodec, 'string');
  assert.equal(m.store, store);
});

test('iteration over thousands of entries, changed while iterating', () => {
  const m = store.map('m', { key: 'int', value: 'int' });
  for (let i = 0; i < 5000; i++) m.set(i, i * 2);
  const seen = new Set();
  for (const [k, v] of m) {
    assert.equal(v, k < 5000 ? k * 2 : 0);
    assert.ok(!seen.has(k), `key ${k} twice`);
    seen.add(k);
    if (k % 2 === 0) m.set(10000 + k, 0); // never throws; new keys may or may not be seen
  }
  for (let i = 0; i < 5000; i++) assert.ok(seen.has(i), `key ${i} present throughout not seen`);
});

test('codec bytes: the layouts of FORMAT.md conventions and the Python binding', () => {
  const cases = [
    ['string', 'héllo', '68c3a96c6c6f'],
    ['int', 1, '0100000000000000'],
    ['int', -2, 'feffffffffffffff'],
    ['int', Number.MAX_SAFE_INTEGER, 'ffffffffffff1f00'],
    ['int', -(2 ** 40), '0000000000ffffff'],
    ['bigint', -(2n ** 63n), '0000000000000080'],
    ['bigint', 2n ** 63n - 1n, 'ffffffffffffff7f'],
    ['float', 1.5, '000000000000f83f'],
    ['float', -0, '0000000000000080'],
    ['json', { b: [1, 'x'], a: null, 'é': true }, Buffer.from('{"a":null,"b":[1,"x"],"é":true}').toString('hex')],
    ['bytes', Buffer.from([0, 255]), '00ff'],
  ];
  // Created without codecs, the maps record no types: every codec below may open them.
  store.map('m');
  store.map('keys');
  for (const [codec, v, bytes] of cases) {
    const m = store.map('m', { key: 'string', value: codec });
    m.set('k', v);
    assert.equal(hex(raw().get(Buffer.from('k'))), bytes, `${codec} ${String(v)}`);
    assert.deepEqual(m.get('k'), v);
    // The same bytes as keys.
    const km = store.map('keys', { key: codec, value: 'int' });
    km.set(v, 7);
    assert.deepEqual([...store.map('keys').keys()].map(hex), [bytes]);
    assert.deepEqual([...km.keys()], [v]);
    km.clear();
  }
});

test('json: canonical (sorted keys by code point, compact), strict', () => {
  assert.equal(shoal.canonicalJson({ b: 1, 10: 2, 9: 3, a: { d: 1, c: [2, { z: 0, y: 1 }] } }), '{"10":2,"9":3,"a":{"c":[2,{"y":1,"z":0}],"d":1},"b":1}');
  assert.equal(shoal.canonicalJson({ '\u{1F600}': 1, '\uFFFF': 2 }), '{"\uFFFF":2,"\u{1F600}":1}');
  assert.equal(shoal.canonicalJson([undefined, () => 1]), '[null,null]');
  assert.equal(shoal.canonicalJson({ d: new Date(0), u: undefined }), '{"d":"1970-01-01T00:00:00.000Z"}');
  const m = store.map('m', { key: 'json', value: 'json' });
  m.set({ x: 1, y: 2 }, 'v');
  assert.equal(m.get({ y: 2, x: 1 }), 'v', 'equal objects are the same key');
  assert.throws(() => m.set('k', NaN), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => m.set('k', 1n), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  const cyc = {};
  cyc.self = cyc;
  assert.throws(() => m.set('k', cyc), { name: 'TypeError' });
  assert.throws(() => m.set(undefined, 1), { name: 'TypeError' });
});

test('wrong key and value types: TypeError or RangeError with a code, nothing written', () => {
  const s = store.map('s', { key: 'string', value: 'int' });
  assert.throws(() => s.get(1), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => s.has(Buffer.from('a')), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => s.set('a', '1'), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => s.set('a', 1.5), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => s.set('a', 2 ** 53), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => s.set('\uD800', 1), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => s.set('a', 2n ** 63n), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
  assert.equal(s.size, 0);
  const b = store.map('b');
  assert.throws(() => b.set('a', Buffer.alloc(1)), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => store.map('x', { key: 'str' }), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => store.map('x', { keys: 'string' }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => store.map(5), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('sizes: large values round-trip, a key over 64 KiB is InvalidArgumentError', () => {
  const m = store.map('m', { key: 'string', value: 'bytes' });
  for (const size of [0, 1, 65535, 65536, 65537, 1 << 20]) {
    const v = Buffer.alloc(size, size % 251);
    m.set(`k${size}`, v);
    assert.ok(m.get(`k${size}`).equals(v), `value of ${size} bytes`);
    assert.ok(m.getMany([`k${size}`])[0].equals(v));
  }
  const s = store.map('s', { key: 'string', value: 'string' });
  const long = 'é'.repeat(40000);
  s.set('long', long);
  assert.equal(s.get('long'), long);
  assert.throws(() => s.set('x'.repeat(70000), 'v'), (e) => e instanceof shoal.InvalidArgumentError && e.code === 'ERR_SHOAL_INVALID_ARGUMENT');
  assert.throws(() => s.get('x'.repeat(70000)), shoal.InvalidArgumentError);
});

test('values written with another codec: DecodeError, never a silent wrong value', () => {
  // Created without codecs, the maps record no types: every codec below may open them.
  store.map('m');
  raw().set(Buffer.from('k'), Buffer.from([0xff, 0xfe]));
  raw().set(Buffer.from('j'), Buffer.from('{nope'));
  assert.throws(() => store.map('m', { key: 'string', value: 'string' }).get('k'), { name: 'DecodeError', code: 'ERR_SHOAL_DECODE' });
  assert.throws(() => store.map('m', { key: 'string', value: 'int' }).get('k'), shoal.DecodeError);
  assert.throws(() => store.map('m', { key: 'string', value: 'json' }).get('j'), shoal.DecodeError);
  assert.throws(() => [...store.map('m', { key: 'string', value: 'string' }).values()], shoal.DecodeError);
  raw().set(Buffer.from('big'), Buffer.from('0000000000000040', 'hex'));
  assert.throws(() => store.map('m', { key: 'string', value: 'int' }).get('big'), { name: 'RangeError' });
  assert.equal(store.map('m', { key: 'string', value: 'bigint' }).get('big'), 2n ** 62n);
});

test('add: atomic counters, int and bigint, wrapping at 64 bits', () => {
  // Created without codecs, the maps record no types: every codec below may open them.
  store.map('m');
  const m = store.map('m', { key: 'string', value: 'int' });
  assert.equal(m.add('c'), 1);
  assert.equal(m.add('c', 41), 42);
  assert.equal(m.add('c', -50), -8);
  assert.equal(m.add('c', 8n), 0);
  const b = store.map('m', { key: 'string', value: 'bigint' });
  b.set('w', 2n ** 63n - 1n);
  assert.equal(b.add('w', 1n), -(2n ** 63n));
  assert.throws(() => store.map('m', { key: 'string', value: 'string' }).add('c'), { name: 'TypeError' });
  assert.throws(() => m.add('c', 0.5), { name: 'RangeError' });
});

test('compareAndSwap, setIfAbsent, take, update', () => {
  const m = store.map('m', { key: 'string', value: 'json' });
  assert.equal(m.compareAndSwap('k', undefined, { v: 1 }), true);
  assert.equal(m.compareAndSwap('k', undefined, { v: 2 }), false);
  assert.equal(m.compareAndSwap('k', { v: 9 }, { v: 2 }), false);
  assert.equal(m.compareAndSwap('k', { v: 1 }, { v: 2 }), true);
  assert.deepEqual(m.get('k'), { v: 2 });
  assert.equal(m.compareAndSwap('k', { v: 2 }, undefined), true);
  assert.equal(m.has('k'), false);
  assert.equal(m.setIfAbsent('s', 1), true);
  assert.equal(m.setIfAbsent('s', 2), false);
  assert.equal(m.get('s'), 1);
  assert.equal(m.take('s'), 1);
  assert.equal(m.take('s'), undefined);
  assert.deepEqual(m.update('u', (cur) => [...(cur ?? []), 'a']), ['a']);
  assert.deepEqual(m.update('u', (cur) => [...(cur ?? []), 'b']), ['a', 'b']);
  assert.throws(() => m.update('u', () => {
    throw new Error('boom');
  }), /boom/);
  assert.deepEqual(m.get('u'), ['a', 'b'], 'a throwing function writes nothing');
  assert.equal(m.update('u', () => undefined), undefined);
  assert.equal(m.has('u'), false);
  // fn may use the map itself (the scratch Buffer is reused meanwhile).
  m.set('other', 5);
  assert.equal(m.update('u', () => m.get('other') + 1), 6);
  assert.equal(m.get('u'), 6);
  assert.throws(() => m.update('u', 5), { name: 'TypeError' });
});

test('update under contention: a racing writer makes fn run again on the new value', () => {
  const m = store.map('m', { key: 'string', value: 'int' });
  m.set('k', 0);
  let calls = 0;
  const r = m.update('k', (cur) => {
    calls++;
    if (calls === 1) m.set('k', 100); // another writer gets in first
    return cur + 1;
  });
  assert.equal(r, 101);
  assert.equal(calls, 2);
  assert.equal(m.get('k'), 101);
});

test('update gives up with TimeoutError when the key keeps changing', () => {
  store.close();
  store = shoal.open(p, { lockTimeout: 200 });
  const m = store.map('m', { key: 'string', value: 'int' });
  let i = 0;
  assert.throws(() => m.update('k', (cur) => {
    m.set('k', ++i); // always changed behind its back
    return (cur ?? 0) + 1;
  }), { name: 'TimeoutError', code: 'ERR_SHOAL_TIMEOUT' });
});

test('getMany and setMany', () => {
  const m = store.map('m', { key: 'string', value: 'string' });
  m.setMany([['a', '1'], ['b', '2'], ['c', 'é']]);
  assert.deepEqual(m.getMany(['c', 'x', 'a', 'b', 'a']), ['é', undefined, '1', '2', '1']);
  assert.deepEqual(m.getMany([]), []);
  assert.throws(() => m.setMany([['d', '4'], ['e', 5]]), { name: 'TypeError' });
  assert.equal(m.has('d'), false, 'everything is encoded before anything is written');
});

test('setMany: batches past its first buffers, of every size, and keys too long', () => {
  const m = store.map('many', { key: 'string', value: 'bytes' });
  // Values from empty to 70 KiB, so that the packed buffers grow several times, and
  // from small steps and big jumps alike.
  const entries = [];
  for (let i = 0; i < 3000; i++) {
    const len = i % 97 === 0 ? 70_000 + i : (i * 37) % 300;
    entries.push([`key-${i}-${'x'.repeat(i % 50)}`, Buffer.alloc(len, i & 0xff)]);
  }
  m.setMany(entries);
  assert.equal(m.size, 3000);
  for (const [k, v] of entries) assert.deepEqual(m.get(k), v, k);
  const tooLong = 'k'.repeat(70_000);
  assert.throws(() => m.setMany([['ok', Buffer.from('1')], [tooLong, Buffer.from('2')]]), { name: 'InvalidArgumentError' });
  assert.equal(m.has('ok'), false, 'a key too long stops the batch before anything is written');
});

test('errors: classes, codes, messages', () => {
  assert.throws(() => shoal.open(`/dev/shm/shoal-node-missing-${process.pid}.shoal`, { create: false }),
    (e) => e instanceof shoal.NotFoundError && e instanceof shoal.ShoalError && e instanceof Error && e.code === 'ERR_SHOAL_NOT_FOUND' && e.name === 'NotFoundError');
  assert.throws(() => shoal.open(p, { exclusive: true }), { name: 'AlreadyExistsError', code: 'ERR_SHOAL_ALREADY_EXISTS' });
  assert.throws(() => store.map('nope', { create: false }), { name: 'NotFoundError' });
  const junk = `/dev/shm/shoal-node-junk-${process.pid}.shoal`;
  fs.writeFileSync(junk, Buffer.alloc(8192, 1));
  try {
    assert.throws(() => shoal.open(junk), (e) => e instanceof shoal.ShoalError && /not a Shoal store|corrupt|invalid/i.test(e.message));
  } finally {
    fs.rmSync(junk);
  }
  assert.throws(() => shoal.open(p, { chunkSize: 1000 }), { name: 'InvalidArgumentError' });
  assert.throws(() => shoal.open(p, { maxSize: -1 }), { name: 'InvalidArgumentError' });
  assert.throws(() => shoal.open(p, { lockTimout: 5 }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => shoal.open(p, { create: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => shoal.open(42), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => shoal.open(''), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => shoal.remove(`/dev/shm/shoal-node-missing-${process.pid}.shoal`), { name: 'NotFoundError' });
  shoal.remove(`/dev/shm/shoal-node-missing-${process.pid}.shoal`, { missingOk: true });
});

test('readOnly: reads work, writes throw ReadOnlyError', () => {
  store.map('m', { key: 'string', value: 'int' }).set('a', 1);
  const ro = shoal.open(p, { readOnly: true });
  try {
    const m = ro.map('m', { key: 'string', value: 'int', create: false });
    assert.equal(m.get('a'), 1);
    assert.deepEqual([...m], [['a', 1]]);
    assert.throws(() => m.set('b', 2), { name: 'ReadOnlyError', code: 'ERR_SHOAL_READ_ONLY' });
  } finally {
    ro.close();
  }
});

test('close: the store and its maps and iterators throw ClosedError; the file stays', () => {
  const m = store.map('m', { key: 'string', value: 'int' });
  m.set('a', 1);
  m.set('b', 2);
  const it = m.keys();
  it.next();
  store.close();
  store.close();
  assert.equal(store.closed, true);
  for (const f of [() => m.get('a'), () => m.set('a', 2), () => m.size, () => m.add('a'), () => [...m],
    () => it.next(), () => store.map('m'), () => store.maps(), () => m.update('a', (x) => x), () => m.getMany(['a'])]) {
    assert.throws(f, (e) => e instanceof shoal.ClosedError && e.code === 'ERR_SHOAL_CLOSED');
  }
  store = shoal.open(p, { create: false });
  assert.equal(store.map('m', { key: 'string', value: 'int' }).get('a'), 1);
});

test('store: maps, dropMap, check, path, resolvePath, two handles on one file', () => {
  store.map('a');
  store.map('b');
  assert.deepEqual(store.maps().sort(), ['a', 'b']);
  assert.equal(store.dropMap('a'), true);
  assert.equal(store.dropMap('a'), false);
  assert.deepEqual(store.maps(), ['b']);
  assert.equal(store.check().ok, true);
  assert.equal(store.path, p);
  assert.equal(shoal.resolvePath('demo'), '/dev/shm/demo.shoal');
  const other = shoal.open(p);
  try {
    other.map('b', { key: 'string', value: 'string' }).set('x', 'y');
    assert.equal(store.map('b', { key: 'string', value: 'string' }).get('x'), 'y');
  } finally {
    other.close();
  }
  assert.equal(store.map('b', { key: 'string', value: 'string' }).get('x'), 'y', 'closing one handle leaves the other working');
});

test('two instances of the module in one thread (a module registry reset) share the scratch Buffer', () => {
  const dist = require.resolve('..');
  const distDir = require('node:path').dirname(dist);
  const saved = {};
  for (const k of Object.keys(require.cache)) {
    if (k.startsWith(distDir)) {
      saved[k] = require.cache[k];
      delete require.cache[k];
    }
  }
  let again;
  try {
    again = require('..');
  } finally {
    Object.assign(require.cache, saved);
  }
  assert.notEqual(again, shoal, 'a second instance');
  const s2 = again.open(p);
  try {
    const a = store.map('a', { key: 'string', value: 'string' });
    const b = s2.map('b', { key: 'string', value: 'string' });
    for (let i = 0; i < 100; i++) {
      a.set(`k${i}`, `a${i}`);
      b.set(`k${i}`, `b${i}`);
      assert.equal(a.get(`k${i}`), `a${i}`);
      assert.equal(b.get(`k${i}`), `b${i}`);
    }
    assert.equal(store.map('b', { key: 'string', value: 'string' }).get('k7'), 'b7');
    assert.equal(s2.map('a', { key: 'string', value: 'string' }).get('k7'), 'a7');
  } finally {
    s2.close();
  }
});

test('a map records the types of its codecs, and a map opened without codecs takes them', () => {
  const m = store.map('people', { key: 'string', value: 'json' });
  m.set('ann', { age: 7 });
  const again = store.map('people');
  assert.equal(again.keyCodec, 'string');
  assert.equal(again.valueCodec, 'json');
  assert.deepEqual(again.get('ann'), { age: 7 });
  assert.throws(() => store.map('people', { value: 'float' }), (e) => e instanceof shoal.InvalidArgumentError && /values as json, not f64/.test(e.message));
  assert.deepEqual(store.map('people', { value: 'bytes' }).get('ann'), Buffer.from('{"age":7}'));
  assert.equal(store.map('plain').keyCodec, 'bytes');
  assert.equal(store.map('plain', { value: 'int' }).valueCodec, 'int');
  const n = store.map('n', { key: 'bigint', value: 'float' });
  n.set(5n, 0.5);
  assert.equal(store.map('n').keyCodec, 'int');
  assert.equal(store.map('n').get(5), 0.5);
});
