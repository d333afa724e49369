// Type-checked (never run) by scripts/test-node.sh against the generated dist/index.d.ts:
// the codecs give each map its key and value types, and misuse is a compile error
// (each @ts-expect-error fails the check if the line below it compiles).
import * as shoal from '../..';

const store: shoal.Store = shoal.open('types-demo', { lockTimeout: 1000 });
const hits = store.map('hits', { key: 'string', value: 'int' });
const n: number = hits.add('/index.html');
hits.set('/a', 1).set('/b', 2);
const v: number | undefined = hits.get('/a');
for (const [page, count] of hits) {
  const p: string = page;
  const c: number = count;
  void p, c;
}
const many: (number | undefined)[] = hits.getMany(['/a', '/b']);
const after: number | undefined = hits.update('/a', (cur) => (cur ?? 0) + 1);

const raw = store.map('raw');
const b: Buffer | undefined = raw.get(Buffer.from('k'));
raw.set(new Uint8Array([1]), Buffer.from('v'));

const big = store.map('big', { key: 'bigint', value: 'bigint' });
const total: bigint = big.add(1n, 5n);

const docs = store.map('docs', { key: 'string', value: 'json' });
docs.set('a', { any: ['json', 1, null] });
const d: shoal.JsonValue | undefined = docs.get('a');

// @ts-expect-error a string map takes string keys
hits.get(1);
// @ts-expect-error an int map takes numbers
hits.set('/c', 'three');
// @ts-expect-error a bytes map takes Buffers, not strings
raw.set('k', Buffer.from('v'));
// @ts-expect-error no such codec
store.map('x', { key: 'str' });

function handle(e: unknown): string | undefined {
  if (e instanceof shoal.NotFoundError) return e.code;
  if (e instanceof shoal.ShoalError) return e.message;
  return undefined;
}
void [n, v, many, after, b, total, d, handle];
store.close();
