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
 * @internal A codec. `encode` may write into `scratch` and return a view of it (valid
 * until the next use of that scratch Buffer), or return another Uint8Array.
 */
export interface Codec {
  readonly name: CodecName;
  encode(v: unknown, scratch: Buffer, what: string): Uint8Array;
  decode(buf: Buffer, start: number, end: number): unknown;
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

/** Writes `s` as UTF-8 into `scratch` if it surely fits, else into a new Buffer. */
function utf8(s: string, scratch: Buffer): Uint8Array {
  if (s.length * 3 <= scratch.length) {
    const n = scratch.write(s, 0, 'utf8');
    return scratch.subarray(0, n);
  }
  return Buffer.from(s, 'utf8');
}

function decodeUtf8(buf: Buffer, start: number, end: number, codec: string): string {
  // Node's toString would replace invalid sequences with U+FFFD without a word: a value
  // that is not UTF-8 was written with another codec, which must not pass silently.
  if (!isUtf8(buf.subarray(start, end))) {
    throw new DecodeError(`stored bytes are not UTF-8: the map was not written with the '${codec}' codec`, 'ERR_SHOAL_DECODE');
  }
  return buf.toString('utf8', start, end);
}

function eightBytes(start: number, end: number, codec: string): void {
  if (end - start !== 8) {
    throw new DecodeError(
      `stored value of ${end - start} bytes, not 8: the map was not written with the '${codec}' codec`,
      'ERR_SHOAL_DECODE',
    );
  }
}

/** Writes a 64-bit integer given as a safe-integer number. */
function writeSafeInt(v: number, scratch: Buffer): Uint8Array {
  // ToUint32 is the value modulo 2^32; floor division gives the two's complement high word.
  scratch.writeUInt32LE(v >>> 0, 0);
  scratch.writeInt32LE(Math.floor(v / TWO32), 4);
  return scratch.subarray(0, 8);
}

const bytes: Codec = {
  name: 'bytes',
  encode(v, _scratch, what) {
    if (v instanceof Uint8Array) return v;
    throw typeError(`${what} must be a Buffer or Uint8Array (codec 'bytes'), not ${describe(v)}`);
  },
  decode(buf, start, end) {
    const out = Buffer.allocUnsafe(end - start);
    buf.copy(out, 0, start, end);
    return out;
  },
};

const string: Codec = {
  name: 'string',
  encode(v, scratch, what) {
    if (typeof v !== 'string') throw typeError(`${what} must be a string (codec 'string'), not ${describe(v)}`);
    if (!v.isWellFormed()) throw valueError(`${what} has a lone surrogate: it has no UTF-8 form`);
    return utf8(v, scratch);
  },
  decode(buf, start, end) {
    return decodeUtf8(buf, start, end, 'string');
  },
};

const int: Codec = {
  name: 'int',
  encode(v, scratch, what) {
    if (typeof v === 'number') {
      if (!Number.isSafeInteger(v)) {
        throw rangeError(`${what} ${v} is not a safe integer (codec 'int'; use 'bigint' for the full 64-bit range)`);
      }
      return writeSafeInt(v, scratch);
    }
    if (typeof v === 'bigint') return bigint.encode(v, scratch, what);
    throw typeError(`${what} must be an integer number (codec 'int'), not ${describe(v)}`);
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
  encode(v, scratch, what) {
    if (typeof v !== 'bigint') throw typeError(`${what} must be a bigint (codec 'bigint'), not ${describe(v)}`);
    if (v < -(1n << 63n) || v >= 1n << 63n) throw rangeError(`${what} ${v} is outside the signed 64-bit range`);
    scratch.writeBigInt64LE(v, 0);
    return scratch.subarray(0, 8);
  },
  decode(buf, start, end) {
    eightBytes(start, end, 'bigint');
    return buf.readBigInt64LE(start);
  },
};

const float: Codec = {
  name: 'float',
  encode(v, scratch, what) {
    if (typeof v !== 'number') throw typeError(`${what} must be a number (codec 'float'), not ${describe(v)}`);
    scratch.writeDoubleLE(v, 0);
    return scratch.subarray(0, 8);
  },
  decode(buf, start, end) {
    eightBytes(start, end, 'float');
    return buf.readDoubleLE(start);
  },
};

const json: Codec = {
  name: 'json',
  encode(v, scratch) {
    return utf8(canonicalJson(v), scratch);
  },
  decode(buf, start, end) {
    const s = decodeUtf8(buf, start, end, 'json');
    try {
      return JSON.parse(s);
    } catch (e) {
      throw new DecodeError(`stored bytes are not JSON (${(e as Error).message}): the map was not written with the 'json' codec`, 'ERR_SHOAL_DECODE');
    }
  },
};

const codecs: Record<CodecName, Codec> = { bytes, string, int, bigint, float, json };

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
