/**
 * Shoal for Node.js: named hash maps in one memory-mapped file (by default in
 * `/dev/shm`), read and written directly by every process and worker thread that opens
 * it, with no server.
 *
 * ```js
 * const shoal = require('shoal');
 * const store = shoal.open('demo');                 // /dev/shm/demo.shoal
 * const hits = store.map('hits', { key: 'string', value: 'int' });
 * hits.add('/index.html');                          // atomic across processes
 * for (const [page, n] of hits) console.log(page, n);
 * store.close();
 * ```
 *
 * @packageDocumentation
 */

import { codec, describe, notUtf8, STRING, type Codec, type CodecName, type Decoded, type Encodable } from './codecs';
import { ClosedError, InvalidArgumentError, ShoalError, TimeoutError, convert, typeError, valueError } from './errors';
import type { NativeFixedMap, NativeStore } from '../native';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const native: typeof import('../native') = require('../native');

export * from './errors';
export { canonicalJson } from './codecs';
export type { CodecName, Decoded, Encodable, JsonValue } from './codecs';

/** Options of {@link open}. Size and table options apply when the store is created. */
export interface OpenOptions {
  /** Create the store if it does not exist (default true); false: NotFoundError if absent. */
  create?: boolean;
  /** Create a new store; AlreadyExistsError if the file exists (default false). */
  exclusive?: boolean;
  /**
   * Open an existing store for reading only; needs no write access to the file. Every
   * write throws ReadOnlyError.
   */
  readOnly?: boolean;
  /** Largest size the file may grow to, in bytes (default 1 TiB of address space, not memory). */
  maxSize?: number;
  /** Bytes allocated when the store is created. */
  initialSize?: number;
  /**
   * How long a call waits for a lock held by a live but stuck process, in milliseconds
   * (default 5000). Locks of dead processes are recovered within milliseconds anyway.
   */
  lockTimeout?: number;
  /** Processes that may have the store open at once (default 1024). */
  maxProcesses?: number;
  /** Threads, over all processes, that may use the store at once (default 1024). */
  maxThreads?: number;
  /** Named maps the store can hold (default 1024). */
  maxMaps?: number;
  /** Size of a chunk, the unit of file growth: a power of two, 64 KiB to 64 MiB (default 256 KiB). */
  chunkSize?: number;
  /** Permission bits of a new file (default 0o600). */
  mode?: number;
  /** Fault in new space from a background thread before writers reach it (default true). */
  pretouch?: boolean;
}

/** Options of {@link Store.map}. */
export interface MapOptions<KC extends CodecName, VC extends CodecName> {
  /**
   * The key codec. Default: the one the map's recorded key type names, else `'bytes'`
   * (the static type assumes `'bytes'`: name the codec to type a typed map's keys).
   */
  key?: KC;
  /** The value codec; its default as for `key`. */
  value?: VC;
  /** Create the map if it does not exist (default true); false: NotFoundError if absent. */
  create?: boolean;
}

/** Options of {@link Store.fixedMap}. */
export interface FixedMapOptions<KC extends CodecName, VC extends CodecName> extends MapOptions<KC, VC> {
  /**
   * The key type to record in a map created now when the key codec is `'bytes'` (raw
   * bytes of a typed map): a type name of FORMAT.md, `'bytes'`, `'utf8'`, `'i64'`,
   * `'u64'`, `'f64'` or `'json'`. A map that recorded another throws InvalidArgumentError.
   */
  keyType?: string;
  /** The value type to record, as `keyType`. */
  valueType?: string;
}

/** What {@link Store.check} found. */
export interface CheckReport {
  /** True when no problem was found. */
  ok: boolean;
  /** Every violation found, each saying what and where. */
  problems: string[];
  /** Maps checked. */
  maps: number;
  /** Entries checked, over all maps. */
  entries: number;
}

const OPTION_KEYS = new Set([
  'create', 'exclusive', 'readOnly', 'maxSize', 'initialSize', 'lockTimeout', 'maxProcesses',
  'maxThreads', 'maxMaps', 'chunkSize', 'mode', 'pretouch',
]);

function checkPath(path: unknown): string {
  if (typeof path !== 'string') throw typeError(`path must be a string, not ${describe(path)}`);
  if (path === '' || path.includes('\0')) throw valueError(`path must be a non-empty string without NUL, not ${JSON.stringify(path)}`);
  return path;
}

/**
 * Opens the store at `path`, creating it unless `create: false`. A bare name (no `/`)
 * means `/dev/shm/NAME.shoal`. Every process and worker thread opens the store itself;
 * a Store cannot be passed to a worker (pass the path).
 */
export function open(path: string, options: OpenOptions = {}): Store {
  checkPath(path);
  if (options === null || typeof options !== 'object') throw typeError(`options must be an object, not ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (!OPTION_KEYS.has(k)) throw valueError(`unknown option ${JSON.stringify(k)}`);
  }
  const o = options;
  const num = (k: keyof OpenOptions): number | undefined => {
    const v = o[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'number') throw typeError(`option ${k} must be a number, not ${describe(v)}`);
    return v;
  };
  const bool = (k: keyof OpenOptions): boolean | undefined => {
    const v = o[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') throw typeError(`option ${k} must be a boolean, not ${describe(v)}`);
    return v;
  };
  const u32 = (k: keyof OpenOptions): number | undefined => {
    const v = num(k);
    if (v !== undefined && !(Number.isInteger(v) && v >= 0 && v <= 0xffffffff)) {
      throw valueError(`option ${k} must be an integer in [0, 2^32), not ${v}`);
    }
    return v;
  };
  try {
    const s = native.openStore(path, {
      create: bool('create'),
      exclusive: bool('exclusive'),
      readOnly: bool('readOnly'),
      maxSize: num('maxSize'),
      initialSize: num('initialSize'),
      lockTimeoutMs: num('lockTimeout'),
      maxProcesses: u32('maxProcesses'),
      maxThreads: u32('maxThreads'),
      maxMaps: u32('maxMaps'),
      chunkSize: num('chunkSize'),
      mode: u32('mode'),
      pretouch: bool('pretouch'),
    });
    return new Store(s, o.lockTimeout ?? 5000);
  } catch (e) {
    throw convert(e);
  }
}

/**
 * Deletes the store file at `path` (a bare name means `/dev/shm/NAME.shoal`). Processes
 * that have it open keep working on their mapping; a later open creates a new store.
 * With `missingOk`, a missing file is not an error.
 */
export function remove(path: string, options: { missingOk?: boolean } = {}): void {
  checkPath(path);
  try {
    native.removeStore(path);
  } catch (e) {
    const c = convert(e);
    if (options.missingOk && c instanceof ShoalError && c.code === 'ERR_SHOAL_NOT_FOUND') return;
    throw c;
  }
}

/** The file a store path names: a bare name means `/dev/shm/NAME.shoal`. */
export function resolvePath(path: string): string {
  return native.resolveStorePath(checkPath(path));
}

/**
 * Closes the map handles of a Store that was garbage-collected without `close()`. A
 * ShoalMap keeps its Store alive, so once a Store is collected no map of it is left to
 * use the handles.
 */
const unclosed = new FinalizationRegistry((maps: Map<string, number>) => {
  for (const h of maps.values()) native.mapClose(h);
});

/**
 * An open store: one file holding named maps, shared by every process that opens it.
 * `close()` closes it and every map opened from it; it never deletes the file.
 */
/** The type (FORMAT.md, "Key and value types") a map created with each codec records. */
const TYPE_OF: Record<CodecName, string> = {
  bytes: 'bytes',
  string: 'utf8',
  int: 'i64',
  bigint: 'i64',
  float: 'f64',
  json: 'json',
};

/** The codec a map opened without one takes for each recorded type. */
const CODEC_OF_TYPE: Record<string, CodecName> = { utf8: 'string', i64: 'int', f64: 'float', json: 'json' };

export class Store {
  #native: NativeStore | null;
  /** The native map handle of each map name opened (codecs are per wrapper). */
  #maps = new Map<string, number>();
  /** The fixed-size maps opened, closed with the store. */
  #fixed = new Set<NativeFixedMap>();
  readonly #path: string;
  readonly #lockTimeout: number;

  /** @internal Use {@link open}. */
  constructor(s: NativeStore, lockTimeout: number) {
    this.#native = s;
    this.#path = s.path();
    this.#lockTimeout = lockTimeout;    unclosed.register(this, this.#maps, this);
  }

  #s(): NativeStore {
    if (this.#native === null) throw new ClosedError('operation on a closed shoal store', 'ERR_SHOAL_CLOSED');
    return this.#native;
  }

  /** The store file's path. */
  get path(): string {
    return this.#path;
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#native === null;
  }

  /**
   * Opens (or creates) the map `name`, with the codecs its keys and values are stored
   * with. A map created with codecs records their types in the file (FORMAT.md, "Key and
   * value types"), so that every process and language decodes it alike: opened without
   * codecs, a map takes the ones its types name (`'bytes'` when it recorded none, or a
   * type no codec here reads), and opened with a codec of another type it throws
   * `InvalidArgumentError` (`'bytes'` reads any map).
   */
  map<KC extends CodecName = 'bytes', VC extends CodecName = 'bytes'>(
    name: string,
    options: MapOptions<KC, VC> = {},
  ): ShoalMap<Decoded[KC], Decoded[VC], Encodable[KC], Encodable[VC]> {
    if (typeof name !== 'string') throw typeError(`map name must be a string, not ${describe(name)}`);
    if (options === null || typeof options !== 'object') throw typeError(`options must be an object, not ${describe(options)}`);
    for (const k of Object.keys(options)) {
      if (k !== 'key' && k !== 'value' && k !== 'create') throw valueError(`unknown option ${JSON.stringify(k)}`);
    }
    const ka = options.key === undefined ? undefined : codec(options.key, 'key');
    const va = options.value === undefined ? undefined : codec(options.value, 'value');
    const create = options.create ?? true;
    if (typeof create !== 'boolean') throw typeError(`option create must be a boolean, not ${describe(create)}`);
    const s = this.#s();
    let m = this.#maps.get(name);
    if (m === undefined) {
      try {
        m = s.map(name, create, ka && TYPE_OF[ka.name], va && TYPE_OF[va.name]);
      } catch (e) {
        throw convert(e);
      }
      this.#maps.set(name, m);
    }
    let recorded: (string | null | undefined)[];
    try {
      recorded = native.mapTypes(m);
    } catch (e) {
      throw convert(e);
    }
    const pick = (asked: Codec | undefined, rec: string | null, what: string): Codec => {
      if (asked === undefined) return codec(rec === null ? 'bytes' : CODEC_OF_TYPE[rec] ?? 'bytes', what);
      const t = TYPE_OF[asked.name];
      if (rec !== null && t !== rec && t !== 'bytes') {
        throw new InvalidArgumentError(
          `map ${JSON.stringify(name)} records its ${what}s as ${rec}, not ${t} (codec '${asked.name}')`,
          'ERR_SHOAL_INVALID_ARGUMENT',
        );
      }
      return asked;
    };
    const kc = pick(ka, recorded[0] ?? null, 'key');
    const vc = pick(va, recorded[1] ?? null, 'value');
    return new ShoalMap(m, this, name, kc, vc, this.#lockTimeout);
  }

  /**
   * Opens (or creates) the fixed-size map `name`: every key `keySize` bytes encoded (1 to
   * 512), every value `valueSize` (0 to 128), stored in the index itself (an *inline* map
   * when they add up to 16 or less). Codecs and recorded types as in {@link map}; a codec
   * must encode to exactly the map's size (`'int'`, `'bigint'` and `'float'` for 8 bytes,
   * `'bytes'` and `'string'` of that length), else the call throws InvalidArgumentError.
   * `keyType`/`valueType` record a type for a `'bytes'` codec.
   */
  fixedMap<KC extends CodecName = 'bytes', VC extends CodecName = 'bytes'>(
    name: string,
    keySize: number,
    valueSize: number,
    options: FixedMapOptions<KC, VC> = {},
  ): ShoalFixedMap<Decoded[KC], Decoded[VC], Encodable[KC], Encodable[VC]> {
    if (typeof name !== 'string') throw typeError(`map name must be a string, not ${describe(name)}`);
    for (const [what, n] of [['keySize', keySize], ['valueSize', valueSize]] as const) {
      if (!Number.isInteger(n) || n < 0 || n > 0xffff_ffff) throw valueError(`${what} must be a size in bytes, not ${describe(n)}`);
    }
    if (options === null || typeof options !== 'object') throw typeError(`options must be an object, not ${describe(options)}`);
    for (const k of Object.keys(options)) {
      if (!['key', 'value', 'create', 'keyType', 'valueType'].includes(k)) throw valueError(`unknown option ${JSON.stringify(k)}`);
    }
    const ka = options.key === undefined ? undefined : codec(options.key, 'key');
    const va = options.value === undefined ? undefined : codec(options.value, 'value');
    const create = options.create ?? true;
    if (typeof create !== 'boolean') throw typeError(`option create must be a boolean, not ${describe(create)}`);
    const typeFor = (asked: Codec | undefined, raw: unknown, what: string): string | undefined => {
      if (raw === undefined) return asked && TYPE_OF[asked.name];
      if (typeof raw !== 'string') throw typeError(`option ${what}Type must be a string, not ${describe(raw)}`);
      if (asked !== undefined && asked.name !== 'bytes') {
        throw valueError(`option ${what}Type goes with the '${what}' codec 'bytes', not '${asked.name}'`);
      }
      return raw;
    };
    const kt = typeFor(ka, options.keyType, 'key');
    const vt = typeFor(va, options.valueType, 'value');
    let f: NativeFixedMap;
    let recorded: (string | null | undefined)[];
    try {
      f = this.#s().fixedMap(name, keySize, valueSize, create, kt, vt);
      recorded = f.types();
    } catch (e) {
      throw convert(e);
    }
    this.#fixed.add(f);
    const pick = (asked: Codec | undefined, rec: string | null): Codec =>
      asked ?? codec(rec === null ? 'bytes' : CODEC_OF_TYPE[rec] ?? 'bytes', 'key');
    return new ShoalFixedMap(f, this, name, pick(ka, recorded[0] ?? null), pick(va, recorded[1] ?? null));
  }

  /** The names of the store's maps. */
  maps(): string[] {
    try {
      return this.#s().maps();
    } catch (e) {
      throw convert(e);
    }
  }

  /** Deletes the map `name` and its entries, for every process; false if there was none. */
  dropMap(name: string): boolean {
    if (typeof name !== 'string') throw typeError(`map name must be a string, not ${describe(name)}`);
    try {
      const m = this.#maps.get(name);
      const r = this.#s().dropMap(name);
      if (m !== undefined) {
        native.mapClose(m);
        this.#maps.delete(name);
      }
      return r;
    } catch (e) {
      throw convert(e);
    }
  }

  /** Verifies every invariant of the file (run it on a quiet store). */
  check(): CheckReport {
    try {
      return this.#s().check();
    } catch (e) {
      throw convert(e);
    }
  }

  /** Flushes the store to its file (for stores on disk; nothing to do on tmpfs). */
  flush(): void {
    try {
      this.#s().flush();
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Closes the store and every map opened from it: later calls on them throw
   * ClosedError. Never deletes the file. Closing twice is allowed.
   */
  close(): void {
    if (this.#native === null) return;
    for (const m of this.#maps.values()) native.mapClose(m);
    this.#maps.clear();
    for (const f of this.#fixed) f.close();
    this.#fixed.clear();
    this.#native.close();
    this.#native = null;
    unclosed.unregister(this);
  }

  /** `using store = shoal.open(...)` closes the store at the end of the block. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/** Entries fetched from the engine per call while iterating. */
const ITER_BATCH = 256;

const [HEADER, KEY_CAP, VALUE_CAP] = native.scratchLayout();
/**
 * This thread's scratch Buffer, shared by all maps: a header with a call's arguments
 * (map handle, key length, value length or flag), then the key area (KOFF), then the
 * value area (VOFF). The single-key calls pass everything through it and take no
 * arguments: a Node-API call with arguments costs several times one without. Made by
 * the addon, off the V8 heap (its memory never moves), once per thread: a second instance
 * of this module in the thread gets the same Buffer.
 */
const S = native.scratch() as Buffer;
/** The header, as the doubles the addon reads. */
const ARGS = new Float64Array(S.buffer, S.byteOffset, HEADER / 8);
const KOFF = HEADER;
const VOFF = HEADER + KEY_CAP;

/** @internal Sleeps `ms` milliseconds without spinning (an update's back-off). */
function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function keyTooLarge(): ShoalError {
  return convert(Object.assign(new Error(`invalid argument: key larger than ${KEY_CAP} bytes`), { code: 'ERR_SHOAL_INVALID_ARGUMENT' })) as ShoalError;
}


/** Items encoded one after the other into a Buffer that grows by doubling, with their lengths. */
class Packed {
  #codec: Codec;
  #buf = Buffer.allocUnsafe(4096);
  #at = 0;
  #lens: number[] = [];

  constructor(codec: Codec) {
    this.#codec = codec;
  }

  /** Encodes the prepared item `p`; returns its length. */
  add(p: unknown, what: string): number {
    for (;;) {
      const n = this.#codec.write(p, this.#buf, this.#at, this.#buf.length - this.#at);
      if (n >= 0) {
        this.#at += n;
        this.#lens.push(n);
        return n;
      }
      const need = this.#codec.bytes(p).length;
      if (need > 0x7fffffff) throw new RangeError(`${what} too large`);
      const grown = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#at + need));
      this.#buf.copy(grown, 0, 0, this.#at);
      this.#buf = grown;
    }
  }

  data(): Buffer {
    return this.#buf.subarray(0, this.#at);
  }

  lens(): Uint32Array {
    return Uint32Array.from(this.#lens);
  }
}

/**
 * A named map of a store, shared by every process and thread that opens it, with the
 * interface of a JavaScript `Map`: `get`, `set`, `has`, `delete`, `size`, `clear`,
 * iteration (`entries()`, `keys()`, `values()`, `for...of`, `forEach`). Keys are
 * compared by their encoded bytes, so two `'json'` keys are the same key when their
 * canonical JSON is the same.
 *
 * Each single-key call is atomic across processes. `add`, `compareAndSwap`,
 * `setIfAbsent`, `take` and `update` are atomic read-modify-writes. Iteration is weakly
 * consistent: every key present for the whole iteration is seen exactly once; keys added
 * or removed meanwhile may or may not be; changing the map while iterating never throws.
 *
 * Values are copies: changing an object that `get` returned changes nothing stored.
 *
 * @typeParam K - the type of keys returned (by iteration)
 * @typeParam V - the type of values returned
 * @typeParam KIn - the type of keys accepted
 * @typeParam VIn - the type of values accepted
 */
export class ShoalMap<K = Buffer, V = Buffer, KIn = K, VIn = V> implements Iterable<[K, V]> {
  /** The addon's handle of the map (this thread's). */
  readonly #h: number;
  readonly #store: Store;
  readonly #name: string;
  readonly #kc: Codec;
  readonly #vc: Codec;
  readonly #lockTimeout: number;

  /** @internal Use {@link Store.map}. */
  constructor(h: number, store: Store, name: string, kc: Codec, vc: Codec, lockTimeout: number) {
    this.#h = h;
    this.#store = store;
    this.#name = name;
    this.#kc = kc;
    this.#vc = vc;
    this.#lockTimeout = lockTimeout;
  }

  /** The map's name. */
  get name(): string {
    return this.#name;
  }

  /** The key codec's name. */
  get keyCodec(): CodecName {
    return this.#kc.name;
  }

  /** The value codec's name. */
  get valueCodec(): CodecName {
    return this.#vc.name;
  }

  /** The store this map was opened from. */
  get store(): Store {
    return this.#store;
  }

  /** `'ShoalMap'`, for `Object.prototype.toString`. */
  get [Symbol.toStringTag](): string {
    return 'ShoalMap';
  }

  /** Writes the prepared key `p` to the scratch Buffer: its length. */
  #putKey(p: unknown): number {
    const n = this.#kc.write(p, S, KOFF, KEY_CAP);
    if (n < 0) throw keyTooLarge();
    return n;
  }

  /** Sets the header for a single-key call on this map. */
  #args(klen: number, extra: number): void {
    ARGS[0] = this.#h;
    ARGS[1] = klen;
    ARGS[2] = extra;
  }

  /** The key of `klen` bytes in the scratch Buffer, for the calls that take a Buffer. */
  #scratchKey(klen: number): Buffer {
    return S.subarray(KOFF, KOFF + klen);
  }

  /** `key` encoded into the scratch Buffer: its length. */
  #key(key: unknown): number {
    return this.#putKey(this.#kc.prep(key, 'key'));
  }

  /** `key` encoded into bytes of its own. */
  #keyBytes(key: unknown): Uint8Array {
    const b = this.#kc.bytes(this.#kc.prep(key, 'key'));
    if (b.length > KEY_CAP) throw keyTooLarge();
    return b;
  }

  /** `v`, a value as stored, decoded (checking UTF-8 for a codec that needs it). */
  #decode(b: Buffer, start: number, end: number): V {
    return this.#vc.decode(b, start, end, false) as V;
  }

  /** The value of the key of `klen` bytes in the scratch Buffer, decoded, or undefined. */
  #read(klen: number): V | undefined {
    const vc = this.#vc;
    if (vc === STRING) {
      // The addon makes the string itself: one call, no decode in JavaScript.
      this.#args(klen, 0);
      const r = native.opGetString();
      if (typeof r === 'string') return r as V;
      return this.#readOdd(r, klen);
    }
    this.#args(klen, vc.utf8 ? 1 : 0);
    const n = native.opGet();
    if (n >= 0 && n <= VALUE_CAP) return vc.decode(S, VOFF, VOFF + n, true) as V;
    return this.#readOdd(n, klen);
  }

  /** A read's answers other than a value in the scratch Buffer: absent, not UTF-8, too long. */
  #readOdd(r: number, klen: number): V | undefined {
    if (r === -1) return undefined;
    if (r === -2) throw notUtf8(this.#vc.name);
    // Longer than the scratch Buffer (or replaced by a longer value since): copy it whole.
    const b = native.mapGetBuffer(this.#h, this.#scratchKey(klen));
    return b === null ? undefined : this.#decode(b, 0, b.length);
  }

  /** The value of `key`, or undefined if it is absent. */
  get(key: KIn): V | undefined {
    try {
      return this.#read(this.#key(key));
    } catch (e) {
      throw convert(e);
    }
  }

  /** Sets `key` to `value`. Returns the map, like `Map.prototype.set`. */
  set(key: KIn, value: VIn): this {
    try {
      const kp = this.#kc.prep(key, 'key');
      const vp = this.#vc.prep(value, 'value');
      const klen = this.#putKey(kp);
      const vlen = this.#vc.write(vp, S, VOFF, VALUE_CAP);
      if (vlen >= 0) {
        this.#args(klen, vlen);
        native.opSet();
      } else {
        native.mapSetBuffer(this.#h, this.#scratchKey(klen), this.#vc.bytes(vp));
      }
      return this;
    } catch (e) {
      throw convert(e);
    }
  }

  /** Whether `key` is present. */
  has(key: KIn): boolean {
    try {
      this.#args(this.#key(key), 0);
      return native.opHas();
    } catch (e) {
      throw convert(e);
    }
  }

  /** Removes `key`; true if it was present. */
  delete(key: KIn): boolean {
    try {
      this.#args(this.#key(key), 0);
      return native.opDelete();
    } catch (e) {
      throw convert(e);
    }
  }

  /** The number of entries (counted by the engine: exact when no write is in flight). */
  get size(): number {
    try {
      return native.mapSize(this.#h);
    } catch (e) {
      throw convert(e);
    }
  }

  /** Removes every entry (other processes' operations go on meanwhile). */
  clear(): void {
    try {
      native.mapClear(this.#h);
    } catch (e) {
      throw convert(e);
    }
  }

  /** Sets `key` to `value` only if `key` is absent, atomically; true if it did. */
  setIfAbsent(key: KIn, value: VIn): boolean {
    try {
      const k = this.#keyBytes(key);
      return native.mapSetIfAbsent(this.#h, k, this.#vc.bytes(this.#vc.prep(value, 'value')));
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Removes `key` and returns its value (undefined if absent), atomically: of several
   * processes taking the same key, exactly one gets the value.
   */
  take(key: KIn): V | undefined {
    try {
      const b = native.mapTake(this.#h, this.#keyBytes(key));
      return b === null ? undefined : this.#decode(b, 0, b.length);
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Adds `delta` (default 1) to the value of `key` atomically, across processes, and
   * returns the new value. An absent key counts as 0. The value codec must be `'int'`
   * (number in and out) or `'bigint'`; the sum wraps at 64 bits like C's int64.
   * With `'int'`, a result beyond Number.MAX_SAFE_INTEGER throws a RangeError after the
   * add was done (read such counters with the `'bigint'` codec).
   */
  add(key: KIn, delta: number | bigint = 1): V {
    const vc = this.#vc;
    if (vc.name !== 'int' && vc.name !== 'bigint') {
      throw typeError(`add needs a map with value codec 'int' or 'bigint', not '${vc.name}'`);
    }
    try {
      const kp = this.#kc.prep(key, 'key');
      const dp = vc.prep(delta, 'delta');
      const klen = this.#putKey(kp);
      vc.write(dp, S, VOFF, 8);
      this.#args(klen, 0);
      native.opAdd();
      return vc.decode(S, VOFF, VOFF + 8) as V;
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Atomically: if the value of `key` is `expected` (undefined: absent), sets it to
   * `replacement` (undefined: removes the key) and returns true; otherwise changes
   * nothing and returns false. Values are compared by their encoded bytes.
   */
  compareAndSwap(key: KIn, expected: VIn | undefined, replacement: VIn | undefined): boolean {
    try {
      const k = this.#keyBytes(key);
      const e = expected === undefined ? null : this.#vc.bytes(this.#vc.prep(expected, 'expected'));
      const r = replacement === undefined ? null : this.#vc.bytes(this.#vc.prep(replacement, 'replacement'));
      return native.mapCompareAndSwap(this.#h, k, e, r);
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Atomic read-modify-write: stores `fn(current)` (`current` is undefined if the key is
   * absent; returning undefined removes the key) and returns what `fn` returned. `fn`
   * runs with no lock held: its result is installed only if the value is still the one
   * it saw (compare-and-swap), otherwise it runs again on the new value, so it may run
   * several times and must not have side effects. If `fn` throws, nothing is written and
   * the error propagates. Throws TimeoutError if the key kept changing for longer than
   * the store's lock timeout.
   */
  update<R extends VIn | undefined>(key: KIn, fn: (current: V | undefined) => R): R {
    if (typeof fn !== 'function') throw typeError(`update needs a function, not ${describe(fn)}`);
    let k: Uint8Array;
    try {
      k = this.#keyBytes(key);
    } catch (e) {
      throw convert(e);
    }
    const h = this.#h;
    const start = Date.now();
    for (let tries = 1; ; tries++) {
      let cur: Buffer | null;
      try {
        cur = native.mapGetBuffer(h, k);
      } catch (e) {
        throw convert(e);
      }
      const next = fn(cur === null ? undefined : this.#decode(cur, 0, cur.length));
      let done: boolean;
      try {
        const nb = next === undefined ? null : this.#vc.bytes(this.#vc.prep(next, 'value'));
        if (cur === null && nb === null) {
          // Absent stays absent: nothing to write, but the key must still be absent.
          this.#args(this.#putKey(this.#kc.prep(key, 'key')), 0);
          done = !native.opHas();
        } else {
          done = native.mapCompareAndSwap(h, k, cur, nb);
        }
      } catch (e) {
        throw convert(e);
      }
      if (done) return next;
      const waited = Date.now() - start;
      if (waited > this.#lockTimeout) {
        throw new TimeoutError(`update of a key of map ${JSON.stringify(this.#name)} gave up after ${tries} tries in ${waited} ms: the key kept changing`, 'ERR_SHOAL_TIMEOUT');
      }
      // Back off once the race repeats: 1, 2, 4... up to 16 ms, so that the winner finishes.
      if (tries > 4) sleep(Math.min(16, 1 << Math.min(tries - 5, 4)));
    }
  }

  /**
   * The values of many keys, in order (undefined for an absent key), in one call to the
   * engine. Each key is read atomically; the batch is not a snapshot.
   */
  getMany(keys: Iterable<KIn>): (V | undefined)[] {
    try {
      const parts: Uint8Array[] = [];
      for (const k of keys) parts.push(this.#keyBytes(k));
      const lens = Uint32Array.from(parts, (b) => b.length);
      const r = native.mapGetMany(this.#h, Buffer.concat(parts), lens);
      const out: (V | undefined)[] = new Array(parts.length);
      let at = 0;
      for (let i = 0; i < parts.length; i++) {
        const n = r.lens[i];
        if (n < 0) {
          out[i] = undefined;
        } else {
          out[i] = this.#decode(r.data, at, at + n);
          at += n;
        }
      }
      return out;
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Sets many entries in one call to the engine: each key on its own (the batch is not
   * atomic; everything is encoded before anything is written).
   */
  setMany(entries: Iterable<readonly [KIn, VIn]>): void {
    try {
      // Keys and values are encoded straight into two Buffers that grow by doubling:
      // no Buffer per entry and no concatenation, so a batch costs less per entry than
      // single sets.
      const keys = new Packed(this.#kc);
      const vals = new Packed(this.#vc);
      for (const [k, v] of entries) {
        if (keys.add(this.#kc.prep(k, 'key'), 'key') > KEY_CAP) throw keyTooLarge();
        vals.add(this.#vc.prep(v, 'value'), 'value');
      }
      native.mapSetMany(this.#h, keys.data(), keys.lens(), vals.data(), vals.lens());
    } catch (e) {
      throw convert(e);
    }
  }

  /** Iterates over batches of decoded items; `values`: entries, else keys. */
  *#walk<T>(values: boolean, make: (k: K, v: V) => T): Generator<T, undefined, undefined> {
    let it;
    try {
      it = native.mapIter(this.#h, values);
    } catch (e) {
      throw convert(e);
    }
    for (;;) {
      if (this.#store.closed) throw new ClosedError('operation on a closed shoal store', 'ERR_SHOAL_CLOSED');
      let b;
      try {
        b = it.nextBatch(ITER_BATCH);
      } catch (e) {
        throw convert(e);
      }
      if (b === null) return undefined;
      const items: T[] = [];
      let at = 0;
      for (let i = 0; i < b.lens.length; ) {
        const kl = b.lens[i++];
        const k = this.#kc.decode(b.data, at, at + kl, false) as K;
        at += kl;
        let v = undefined as V;
        if (values) {
          const vl = b.lens[i++];
          v = this.#decode(b.data, at, at + vl);
          at += vl;
        }
        items.push(make(k, v));
      }
      for (const item of items) {
        if (this.#store.closed) throw new ClosedError('operation on a closed shoal store', 'ERR_SHOAL_CLOSED');
        yield item;
      }
    }
  }

  /** The `[key, value]` pairs (see the class for the consistency of iteration). */
  entries(): IterableIterator<[K, V]> {
    return this.#walk(true, (k, v) => [k, v] as [K, V]);
  }

  /** The keys. */
  keys(): IterableIterator<K> {
    return this.#walk(false, (k) => k);
  }

  /** The values. */
  values(): IterableIterator<V> {
    return this.#walk(true, (_k, v) => v);
  }

  /** `for (const [k, v] of map)`: the entries. */
  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }

  /** Calls `fn(value, key, map)` for each entry, like `Map.prototype.forEach`. */
  forEach(fn: (value: V, key: K, map: this) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
  }

  /** The entries in a plain JavaScript `Map` (a copy). */
  toMap(): Map<K, V> {
    return new Map(this.entries());
  }
}

/**
 * A fixed-size map of a store ({@link Store.fixedMap}): keys and values of one encoded
 * size each, stored in the index itself. Each call is atomic across processes; `add` on
 * a present key takes no lock. Iteration is weakly consistent, as for {@link ShoalMap}.
 */
export class ShoalFixedMap<K = Buffer, V = Buffer, KIn = K, VIn = V> implements Iterable<[K, V]> {
  readonly #f: NativeFixedMap;
  readonly #store: Store;
  readonly #kc: Codec;
  readonly #vc: Codec;
  readonly #ks: number;
  readonly #vs: number;
  /** The map's name in its store. */
  readonly name: string;

  /** @internal Use {@link Store.fixedMap}. */
  constructor(f: NativeFixedMap, store: Store, name: string, kc: Codec, vc: Codec) {
    this.#f = f;
    this.#store = store;
    this.name = name;
    this.#kc = kc;
    this.#vc = vc;
    [this.#ks, this.#vs] = f.sizes();
  }

  #live(): void {
    if (this.#store.closed) throw new ClosedError('operation on a closed shoal store', 'ERR_SHOAL_CLOSED');
  }

  #bytes(c: Codec, v: unknown, what: string): Buffer {
    const b = c.bytes(c.prep(v, what));
    return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  }

  #decode(c: Codec, b: Buffer): unknown {
    return c.decode(b, 0, b.length, false);
  }

  /** The key codec's name (for a map opened without codecs: the one its key type names). */
  get keyCodec(): CodecName {
    return this.#kc.name;
  }

  /** The value codec's name. */
  get valueCodec(): CodecName {
    return this.#vc.name;
  }

  /** The key size in bytes. */
  get keySize(): number {
    return this.#ks;
  }

  /** The value size in bytes. */
  get valueSize(): number {
    return this.#vs;
  }

  /** The key type the map recorded when it was created (`'u64'`, ...), or null. */
  get keyType(): string | null {
    this.#live();
    return this.#f.types()[0] ?? null;
  }

  /** The value type the map recorded when it was created, or null. */
  get valueType(): string | null {
    this.#live();
    return this.#f.types()[1] ?? null;
  }

  /** The value of `key`, or undefined. */
  get(key: KIn): V | undefined {
    this.#live();
    try {
      const b = this.#f.get(this.#bytes(this.#kc, key, 'key'));
      return b === null || b === undefined ? undefined : (this.#decode(this.#vc, b) as V);
    } catch (e) {
      throw convert(e);
    }
  }

  /** Sets `key` to `value`. */
  set(key: KIn, value: VIn): this {
    this.#live();
    try {
      this.#f.set(this.#bytes(this.#kc, key, 'key'), this.#bytes(this.#vc, value, 'value'));
    } catch (e) {
      throw convert(e);
    }
    return this;
  }

  /** Sets `key` to `value` if it is absent; true if it did (atomic across processes). */
  setIfAbsent(key: KIn, value: VIn): boolean {
    this.#live();
    try {
      return this.#f.setIfAbsent(this.#bytes(this.#kc, key, 'key'), this.#bytes(this.#vc, value, 'value'));
    } catch (e) {
      throw convert(e);
    }
  }

  /** Whether `key` is present. */
  has(key: KIn): boolean {
    this.#live();
    try {
      return this.#f.has(this.#bytes(this.#kc, key, 'key'));
    } catch (e) {
      throw convert(e);
    }
  }

  /** Removes `key`; true if it was present. */
  delete(key: KIn): boolean {
    this.#live();
    try {
      return this.#f.delete(this.#bytes(this.#kc, key, 'key'));
    } catch (e) {
      throw convert(e);
    }
  }

  /**
   * Atomically adds `delta` to the value of `key` (absent counts as 0) and returns the
   * new value; the value codec must be `'int'` or `'bigint'` (8 bytes, wrapping at 64 bits).
   */
  add(key: KIn, delta: number | bigint = 1): V {
    const vc = this.#vc;
    if (vc.name !== 'int' && vc.name !== 'bigint') {
      throw typeError(`add needs a map with value codec 'int' or 'bigint', not '${vc.name}'`);
    }
    this.#live();
    try {
      const r = this.#f.add(this.#bytes(this.#kc, key, 'key'), this.#bytes(vc, delta, 'delta'));
      return this.#decode(vc, r) as V;
    } catch (e) {
      throw convert(e);
    }
  }

  /** The number of entries. */
  get size(): number {
    this.#live();
    try {
      return this.#f.size();
    } catch (e) {
      throw convert(e);
    }
  }

  /** The `[key, value]` pairs, read in one call (weakly consistent). */
  *entries(): IterableIterator<[K, V]> {
    this.#live();
    let all: Buffer;
    try {
      all = this.#f.entries();
    } catch (e) {
      throw convert(e);
    }
    const step = this.#ks + this.#vs;
    for (let off = 0; off + step <= all.length; off += step) {
      yield [
        this.#kc.decode(all, off, off + this.#ks, false) as K,
        this.#vc.decode(all, off + this.#ks, off + step, false) as V,
      ];
    }
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }
}
