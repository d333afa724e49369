'use strict';
// Many writers on the same keys at once: worker threads, cluster workers and child
// processes, one of them killed with SIGKILL mid-run. The totals must be exact: an
// atomic add or update is never lost, and a writer killed at any instant leaves the
// store consistent (check()) and usable.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const cluster = require('node:cluster');
const { Worker } = require('node:worker_threads');
const { fork } = require('node:child_process');
const shoal = require('..');

const COUNTER = path.join(__dirname, 'fixtures', 'counter.js');
/** Generous: the machine may have 2 busy cores. */
const WAIT_MS = 120_000;

function freshStore(tag) {
  const p = `/dev/shm/shoal-node-test-${tag}-${process.pid}.shoal`;
  shoal.remove(p, { missingOk: true });
  const store = shoal.open(p);
  store.map('counters', { key: 'string', value: 'bigint' });
  store.map('docs', { key: 'string', value: 'json' });
  return { p, store };
}

/** Resolves with the message `pred` accepts, rejects after WAIT_MS or on exit first. */
function waitFor(emitter, pred, what) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ${what} within ${WAIT_MS} ms`)), WAIT_MS);
    const onMsg = (m) => {
      if (pred(m)) {
        clearTimeout(t);
        emitter.off('message', onMsg);
        emitter.off('exit', onExit);
        resolve(m);
      }
    };
    const onExit = (code) => {
      clearTimeout(t);
      reject(new Error(`exited (${code}) before ${what}`));
    };
    emitter.on('message', onMsg);
    emitter.on('exit', onExit);
  });
}

function exited(emitter) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no exit within ${WAIT_MS} ms`)), WAIT_MS);
    emitter.once('exit', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal });
    });
  });
}

function checkTotals(store, writers, rounds, delta, victims = []) {
  const counters = store.map('counters', { key: 'string', value: 'bigint' });
  const log = store.map('docs', { key: 'string', value: 'json' }).get('log');
  const survivors = writers.length * rounds;
  for (const k of ['c0', 'c1', 'c2', 'c3']) {
    const v = counters.get(k);
    // Survivors add `delta` (< 2^32) per round; a victim adds 2^32, so the low 32 bits
    // are exactly the survivors' sum whatever the victim did before it died.
    assert.equal(v & 0xffffffffn, BigInt(survivors) * BigInt(delta), `counter ${k} = ${v}`);
    if (victims.length) assert.ok(v >> 32n > 0n, `the victim never added to ${k}`);
  }
  for (const id of writers) assert.equal(log.by[id], rounds, `log.by[${id}]`);
  const sum = Object.values(log.by).reduce((a, b) => a + b, 0);
  assert.equal(log.n, sum, 'log.n is the sum of every writer rounds');
  const report = store.check();
  assert.ok(report.ok, report.problems.join('\n'));
}

test('worker_threads: 4 threads add and update the same keys, exact totals', async () => {
  const { p, store } = freshStore('threads');
  try {
    const rounds = 10000;
    const ids = ['t0', 't1', 't2', 't3'];
    const workers = ids.map((id) => new Worker(COUNTER, { workerData: { path: p, id, rounds, delta: 3 } }));
    const exits = workers.map((w) => exited(w));
    await Promise.all(workers.map((w) => waitFor(w, (m) => m.done, 'done')));
    await Promise.all(exits);
    // The main thread's handles work on alongside its workers'.
    checkTotals(store, ids, rounds, 3);
  } finally {
    store.close();
    shoal.remove(p, { missingOk: true });
  }
});

test('cluster workers and a child process killed with SIGKILL mid-run: exact totals', async () => {
  const { p, store } = freshStore('procs');
  try {
    const rounds = 8000;
    cluster.setupPrimary({ exec: COUNTER, silent: false });
    const ids = ['w0', 'w1'];
    const workers = ids.map((id) =>
      cluster.fork({ SHOAL_JOB: JSON.stringify({ path: p, id, rounds, delta: 1 }) }),
    );
    const exits = workers.map((w) => exited(w));
    const dones = workers.map((w) => waitFor(w, (m) => m.done, 'done'));
    const victim = fork(COUNTER, [], {
      env: { ...process.env, SHOAL_JOB: JSON.stringify({ path: p, id: 'victim', victim: true, delta: 2 ** 32 }) },
    });
    const victimExit = exited(victim);
    await waitFor(victim, (m) => m.running, 'victim under way');
    // A little later, at a moment that differs from run to run: the victim is then
    // somewhere in an add or an update, maybe holding a lock.
    await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 30)));
    victim.kill('SIGKILL');
    const { signal } = await victimExit;
    assert.equal(signal, 'SIGKILL');
    await Promise.all(dones);
    await Promise.all(exits);
    checkTotals(store, ids, rounds, 1, ['victim']);
    // The store stays usable: the dead writer's locks were recovered.
    const counters = store.map('counters', { key: 'string', value: 'bigint' });
    const before = counters.get('c0');
    assert.equal(counters.add('c0', 1n), before + 1n);
  } finally {
    store.close();
    shoal.remove(p, { missingOk: true });
  }
});

test('threads that end give their slot back: 12 workers one after another, maxThreads 8', async () => {
  const p = `/dev/shm/shoal-node-test-slots-${process.pid}.shoal`;
  shoal.remove(p, { missingOk: true });
  const store = shoal.open(p, { maxThreads: 8 });
  store.map('counters', { key: 'string', value: 'bigint' });
  store.map('docs', { key: 'string', value: 'json' });
  try {
    for (let i = 0; i < 12; i++) {
      const w = new Worker(COUNTER, { workerData: { path: p, id: `s${i}`, rounds: 10, delta: 1 } });
      const exit = exited(w);
      await waitFor(w, (m) => m.done, 'done');
      await exit;
    }
    checkTotals(store, Array.from({ length: 12 }, (_, i) => `s${i}`), 10, 1);
  } finally {
    store.close();
    shoal.remove(p, { missingOk: true });
  }
});
