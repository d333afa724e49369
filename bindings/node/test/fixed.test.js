'use strict';
// Fixed-size maps (store.fixedMap): the Map-like calls, add, the types a map records and
// the codecs a map opened without them takes, and the errors for keys or values of
// another size and for a codec of another type.
const { test, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const shoal = require('..');

let p;
let store;
let n = 0;
beforeEach(() => {
  p = `/dev/shm/shoal-node-fixed-${process.pid}-${n++}.shoal`;
  shoal.remove(p, { missingOk: true });
  store = shoal.open(p, { chunkSize: 64 * 1024 });
});
afterEach(() => {
  store.close();
  shoal.remove(p, { missingOk: true });
});

test('an inline map of ints: set, get, has, delete, size, add, iteration', () => {
  const m = store.fixedMap('counts', 8, 8, { key: 'int', value: 'int' });
  assert.equal(m.keySize, 8);
  assert.equal(m.valueSize, 8);
  assert.equal(m.get(1), undefined);
  assert.equal(m.set(1, -5).set(2, 7), m);
  assert.equal(m.get(1), -5);
  assert.equal(m.has(2), true);
  assert.equal(m.has(3), false);
  assert.equal(m.size, 2);
  assert.equal(m.add(1, 10), 5);
  assert.equal(m.add(3), 1);
  assert.equal(m.setIfAbsent(3, 100), false);
  assert.equal(m.setIfAbsent(4, 100), true);
  assert.deepEqual(new Map(m), new Map([[1, 5], [2, 7], [3, 1], [4, 100]]));
  assert.equal(m.delete(2), true);
  assert.equal(m.delete(2), false);
  assert.equal(m.size, 3);
  // The bytes are the other bindings': 8 bytes little-endian.
  const raw = store.fixedMap('counts', 8, 8, { key: 'bytes', value: 'bytes' });
  assert.equal(raw.get(Buffer.from([1, 0, 0, 0, 0, 0, 0, 0])).toString('hex'), '0500000000000000');
});

test('recorded types: codecs record theirs, a map opened without codecs takes them', () => {
  store.fixedMap('f', 8, 8, { key: 'float', value: 'bigint' }).set(0.5, -3n);
  const again = store.fixedMap('f', 8, 8);
  assert.equal(again.keyType, 'f64');
  assert.equal(again.valueType, 'i64');
  assert.equal(again.keyCodec, 'float');
  assert.equal(again.valueCodec, 'int');
  assert.equal(again.get(0.5), -3);
  // A codec of another type is refused; 'bytes' reads anything.
  assert.throws(() => store.fixedMap('f', 8, 8, { key: 'int' }), { code: 'ERR_SHOAL_INVALID_ARGUMENT' });
  assert.equal(store.fixedMap('f', 8, 8, { key: 'bytes', value: 'bytes' }).size, 1);
  // keyType records a type for raw bytes keys (u64 has no codec here).
  const u = store.fixedMap('u', 8, 8, { keyType: 'u64', value: 'int' });
  u.set(Buffer.alloc(8, 0xff), 9);
  assert.equal(store.fixedMap('u', 8, 8).keyType, 'u64');
  assert.throws(() => store.fixedMap('u', 8, 8, { keyType: 'i64' }), { code: 'ERR_SHOAL_INVALID_ARGUMENT' });
  assert.throws(() => store.fixedMap('v', 8, 8, { key: 'int', keyType: 'u64' }), { code: 'ERR_INVALID_ARG_VALUE' });
});

test('errors: sizes, kinds, add on a non-integer map, a closed store', () => {
  const m = store.fixedMap('b', 4, 2);
  assert.throws(() => m.set(Buffer.alloc(3), Buffer.alloc(2)), { code: 'ERR_SHOAL_INVALID_ARGUMENT' });
  assert.throws(() => m.set(Buffer.alloc(4), Buffer.alloc(3)), { code: 'ERR_SHOAL_INVALID_ARGUMENT' });
  assert.throws(() => m.add(Buffer.alloc(4)), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => store.fixedMap('b', 8, 8), { code: 'ERR_SHOAL_INVALID_ARGUMENT' });
  store.map('var');
  assert.throws(() => store.fixedMap('var', 8, 8), { code: 'ERR_SHOAL_INVALID_ARGUMENT' });
  assert.throws(() => store.fixedMap('missing', 8, 8, { create: false }), { code: 'ERR_SHOAL_NOT_FOUND' });
  assert.throws(() => store.fixedMap('x', 8, 8, { other: 1 }), { code: 'ERR_INVALID_ARG_VALUE' });
  const f = store.fixedMap('c', 8, 8, { value: 'int' });
  store.close();
  assert.throws(() => f.get(Buffer.alloc(8)), { code: 'ERR_SHOAL_CLOSED' });
  store = shoal.open(p);
});
