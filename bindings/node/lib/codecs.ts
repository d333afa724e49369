/**
 * Codecs: how JavaScript keys and values become the bytes the store holds. The layouts
 * are the ones the other bindings use (Python's `bytes`, `str`, `int`, `float` and
 * `json` codecs, C's raw bytes), so every language reads what the others write.
 *
 * | codec      | JavaScript type               | stored bytes                                   |
 * |------------|-------------------------------|------------------------------------------------|
 * | `'bytes'`  | Buffer (any Uint8Array in)    | as they are                                    |
 * | `'string'` | string                        | UTF-8                                          |
 * | `'int'`    | number (safe integer; bigint in) | 8 bytes, two's complement, little-endian   |
 * | `'bigint'` | bigint in [-2^63, 2^63)       | 8 bytes, two's complement, little-endian       |
 * | `'float'`  | number                        | 8 bytes, IEEE 754 binary64, little-endian      |
 * | `'json'`   | JSON value                    | compact UTF-8 JSON, object keys sorted         |
 */

import { isUtf8 } from 'node:buffer';
import { DecodeError, rangeError, typeError, valueError } from './errors';

/** The name of a codec. */
export type CodecName = 'bytes' | 'string' | 'int' | 'bigint' | 'float' | 'json';

/** A value the `'json'` codec stores. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** What each codec returns when it decodes. */
export interface Decoded {
  bytes: Buffer;
  string: string;
  int: number;
  bigint: bigint;
  float: number;
  json: JsonValue;
}

/** What each codec accepts to encode. */
export interface Encodable {
  bytes: Uint8Array;
  string: string;
  int: number | bigint;
  bigint: bigint;
  float: number;
  json: unknown;
}

/** @internal The codecs' names, in documentation order. */
export const CODEC_NAMES: readonly CodecName[] = ['bytes', 'string', 'int', 'bigint', 'float', 'json'];

const TWO32 = 4294967296;
/** The high word of 8-byte integers whose value is a safe integer: |hi| < 2^21. */
const SAFE_HI = 2097152;

/**
 * @internal A codec. `prep` checks a key or value and does everything that can run user
 * code (a JSON value's `toJSON` and getters) before anything is written to the scratch
 * Buffer, since user code may itself use a map, and so the scratch Buffer. What it
 * returns goes to `write` (into a Buffer at `off`, at most `cap` bytes: the length, or -1
 * if it does not fit) or `bytes` (bytes of their own).
 */
export interface Codec {
  readonly name: CodecName;
  /** Stored values must be UTF-8 (the addon checks values it copies to the scratch Buffer). */
  readonly utf8: boolean;
  prep(v: unknown, what: string): unknown;
  write(p: unknown, buf: Buffer, off: number, cap: number): number;
  bytes(p: unknown): Uint8Array;
  /** Decodes `buf[start, end)`; `checked`: the addon verified it is UTF-8 already. */
  decode(buf: Buffer, start: number, end: number, checked?: boolean): unknown;
}

/** Code units rearranged so that `<` on them is code point order (as Python sorts). */
function cpUnit(c: number): number {
  if (c >= 0xd800 && c <= 0xdfff) return c + 0x2000;
  if (c >= 0xe000) return c - 0x800;
  return c;
}

/** Compares two strings by code points (JavaScript's `<` compares UTF-16 code units). */
function cmpCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return cpUnit(x) - cpUnit(y);
  }
  return a.length - b.length;
}

/**
 * Canonical JSON: compact, object keys sorted by code point, so that equal values are
 * equal bytes (as Python's `json.dumps(v, sort_keys=True, separators=(',', ':'),
 * ensure_ascii=False)` writes them, and JSON keys can be compared as bytes). Follows
 * `JSON.stringify` (toJSON, undefined members skipped, undefined in arrays as null) but
 * refuses what JSON cannot hold faithfully: NaN and infinities, bigints, cycles.
 */
export function canonicalJson(v: unknown): string {
  const seen = new Set<object>();
  const walk = (x: unknown, key: string, inArray: boolean): string | undefined => {
    if (x !== null && typeof x === 'object' && typeof (x as { toJSON?: unknown }).toJSON === 'function') {
      x = (x as { toJSON(k: string): unknown }).toJSON(key);
    }
    switch (typeof x) {
      case 'string':
        return JSON.stringify(x);
      case 'number':
        if (!Number.isFinite(x)) throw valueError(`JSON cannot hold ${x}`);
        return JSON.stringify(x);
      case 'boolean':
        return x ? 'true' : 'false';
      case 'bigint':
        throw typeError('JSON cannot hold a bigint');
      case 'undefined':
      case 'function':
      case 'symbol':
        return inArray ? 'null' : undefined;
    }
    if (x === null) return 'null';
    const o = x as object;
    if (seen.has(o)) throw typeError('cannot encode a circular structure as JSON');
    seen.add(o);
    let out: string;
    if (Array.isArray(o)) {
      const parts: string[] = [];
      for (let i = 0; i < o.length; i++) parts.push(walk(o[i], String(i), true) as string);
      out = '[' + parts.join(',') + ']';
    } else {
      const keys = Object.keys(o).sort(cmpCodePoints);
      const parts: string[] = [];
      for (const k of keys) {
        const s = walk((o as Record<string, unknown>)[k], k, false);
        if (s !== undefined) parts.push(JSON.stringify(k) + ':' + s);
      }
      out = '{' + parts.join(',') + '}';
    }
    seen.delete(o);
    return out;
  };
  const s = walk(v, '', false);
  if (s === undefined) throw typeError(`cannot encode ${typeof v} as JSON`);
  return s;
}

/** Writes string `s` as UTF-8 at `buf[off]`: its length, or -1 past `cap` bytes. */
function writeUtf8(s: string, buf: Buffer, off: number, cap: number): number {
  const n = s.length;
  if (n <= 64 && n <= cap) {
    // Short ASCII strings byte by byte: cheaper than Buffer.write's call into C++.
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[off + i] = c;
    }
    if (i === n) return n;
  }
  if (n * 3 <= cap) return buf.write(s, off, 'utf8');
  const len = Buffer.byteLength(s, 'utf8');
  if (len > cap) return -1;
  return buf.write(s, off, len, 'utf8');
}

const slice = (Buffer.prototype as unknown as { utf8Slice?: (start: number, end: number) => string }).utf8Slice;

function decodeUtf8(buf: Buffer, start: number, end: number, checked: boolean | undefined, codec: string): string {
  // Node's toString would replace invalid sequences with U+FFFD without a word: a value
  // that is not UTF-8 was written with another codec, which must not pass silently.
  if (!checked && !isUtf8(buf.subarray(start, end))) throw notUtf8(codec);
  return slice !== undefined ? slice.call(buf, start, end) : buf.toString('utf8', start, end);
}

/** @internal The DecodeError of stored bytes that are not UTF-8. */
export function notUtf8(codec: string): DecodeError {
  return new DecodeError(`stored bytes are not UTF-8: the map was not written with the '${codec}' codec`, 'ERR_SHOAL_DECODE');
}

function eightBytes(start: number, end: number, codec: string): void {
  if (end - start !== 8) {
    throw new DecodeError(
      `stored value of ${end - start} bytes, not 8: the map was not written with the '${codec}' codec`,
      'ERR_SHOAL_DECODE',
    );
  }
}

/** Bytes of their own for a codec that writes into Buffers. */
function ownBytes(c: Codec, p: unknown, size: number): Uint8Array {
  const b = Buffer.allocUnsafe(size);
  return b.subarray(0, c.write(p, b, 0, size));
}

const bytes: Codec = {
  name: 'bytes',
  utf8: false,
  prep(v, what) {
    if (v instanceof Uint8Array) return v;
    throw typeError(`${what} must be a Buffer or Uint8Array (codec 'bytes'), not ${describe(v)}`);
  },
  write(p, buf, off, cap) {
    const u = p as Uint8Array;
    if (u.length > cap) return -1;
    buf.set(u, off);
    return u.length;
  },
  bytes(p) {
    return p as Uint8Array;
  },
  decode(buf, start, end) {
    const out = Buffer.allocUnsafe(end - start);
    buf.copy(out, 0, start, end);
    return out;
  },
};

const string: Codec = {
  name: 'string',
  utf8: true,
  prep(v, what) {
    if (typeof v !== 'string') throw typeError(`${what} must be a string (codec 'string'), not ${describe(v)}`);
    if (!v.isWellFormed()) throw valueError(`${what} has a lone surrogate: it has no UTF-8 form`);
    return v;
  },
  write(p, buf, off, cap) {
    return writeUtf8(p as string, buf, off, cap);
  },
  bytes(p) {
    return Buffer.from(p as string, 'utf8');
  },
  decode(buf, start, end, checked) {
    return decodeUtf8(buf, start, end, checked, 'string');
  },
};

/** Writes a 64-bit integer given as a safe-integer number. */
function writeSafeInt(v: number, buf: Buffer, off: number): void {
  // ToUint32 is the value modulo 2^32; floor division gives the two's complement high word.
  buf.writeUInt32LE(v >>> 0, off);
  buf.writeInt32LE(Math.floor(v / TWO32), off + 4);
}

function prepBigint(v: unknown, what: string): bigint {
  if (typeof v !== 'bigint') throw typeError(`${what} must be a bigint (codec 'bigint'), not ${describe(v)}`);
  if (v < -(1n << 63n) || v >= 1n << 63n) throw rangeError(`${what} ${v} is outside the signed 64-bit range`);
  return v;
}

const int: Codec = {
  name: 'int',
  utf8: false,
  prep(v, what) {
    if (typeof v === 'number') {
      if (!Number.isSafeInteger(v)) {
        throw rangeError(`${what} ${v} is not a safe integer (codec 'int'; use 'bigint' for the full 64-bit range)`);
      }
      return v;
    }
    if (typeof v === 'bigint') return prepBigint(v, what);
    throw typeError(`${what} must be an integer number (codec 'int'), not ${describe(v)}`);
  },
  write(p, buf, off, cap) {
    if (cap < 8) return -1;
    if (typeof p === 'bigint') buf.writeBigInt64LE(p, off);
    else writeSafeInt(p as number, buf, off);
    return 8;
  },
  bytes(p) {
    return ownBytes(int, p, 8);
  },
  decode(buf, start, end) {
    eightBytes(start, end, 'int');
    const hi = buf.readInt32LE(start + 4);
    if (hi >= SAFE_HI || hi < -SAFE_HI) {
      throw rangeError(`stored integer ${buf.readBigInt64LE(start)} is beyond Number.MAX_SAFE_INTEGER: read it with the 'bigint' codec`);
    }
    return hi * TWO32 + buf.readUInt32LE(start);
  },
};

const bigint: Codec = {
  name: 'bigint',
  utf8: false,
  prep: prepBigint,
  write(p, buf, off, cap) {
    if (cap < 8) return -1;
    buf.writeBigInt64LE(p as bigint, off);
    return 8;
  },
  bytes(p) {
    return ownBytes(bigint, p, 8);
  },
  decode(buf, start, end) {
    eightBytes(start, end, 'bigint');
    return buf.readBigInt64LE(start);
  },
};

const float: Codec = {
  name: 'float',
  utf8: false,
  prep(v, what) {
    if (typeof v !== 'number') throw typeError(`${what} must be a number (codec 'float'), not ${describe(v)}`);
    return v;
  },
  write(p, buf, off, cap) {
    if (cap < 8) return -1;
    buf.writeDoubleLE(p as number, off);
    return 8;
  },
  bytes(p) {
    return ownBytes(float, p, 8);
  },
  decode(buf, start, end) {
    eightBytes(start, end, 'float');
    return buf.readDoubleLE(start);
  },
};

const json: Codec = {
  name: 'json',
  utf8: true,
  prep(v) {
    return canonicalJson(v);
  },
  write(p, buf, off, cap) {
    return writeUtf8(p as string, buf, off, cap);
  },
  bytes(p) {
    return Buffer.from(p as string, 'utf8');
  },
  decode(buf, start, end, checked) {
    const s = decodeUtf8(buf, start, end, checked, 'json');
    try {
      return JSON.parse(s);
    } catch (e) {
      throw new DecodeError(`stored bytes are not JSON (${(e as Error).message}): the map was not written with the 'json' codec`, 'ERR_SHOAL_DECODE');
    }
  },
};

const codecs: Record<CodecName, Codec> = { bytes, string, int, bigint, float, json };

/** @internal The `'string'` codec (whose values the addon can return as strings). */
export const STRING: Codec = string;

/** @internal The codec named `name`, or a TypeError naming the choices. */
export function codec(name: unknown, what: string): Codec {
  if (typeof name === 'string' && Object.prototype.hasOwnProperty.call(codecs, name)) {
    return codecs[name as CodecName];
  }
  throw valueError(`${what} codec must be one of ${CODEC_NAMES.map((n) => `'${n}'`).join(', ')}, not ${describe(name)}`);
}

/** @internal A short description of a value for error messages. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return `string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v)}`;
  if (typeof v === 'object') return `an instance of ${(v as object).constructor?.name ?? 'Object'}`;
  return `${typeof v} ${String(v)}`;
}
