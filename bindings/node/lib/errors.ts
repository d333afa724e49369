/**
 * The errors Shoal throws. Every one is a {@link ShoalError} (an `Error`) with a string
 * `code` (`ERR_SHOAL_*`), so callers can test either `err instanceof NotFoundError` or
 * `err.code === 'ERR_SHOAL_NOT_FOUND'`, as with Node's own errors. Wrong argument types
 * are Node's usual `TypeError` with code `ERR_INVALID_ARG_TYPE` (or
 * `ERR_INVALID_ARG_VALUE`), not Shoal errors.
 */

/** The base class of every error Shoal throws about a store, a map or stored data. */
export class ShoalError extends Error {
  /** A stable identifier of the error, `ERR_SHOAL_*`. */
  readonly code: string;

  /** @internal */
  constructor(message: string, code = 'ERR_SHOAL') {
    super(message);
    this.code = code;
  }

  /** The class name, so that stack traces and `util.inspect` name the subclass. */
  override get name(): string {
    return this.constructor.name;
  }
}

/** The store file (with `create: false`) or the map (with `create: false`) does not exist. */
export class NotFoundError extends ShoalError {}
/** The store file exists and `exclusive: true` was asked. */
export class AlreadyExistsError extends ShoalError {}
/** The store reached its `maxSize`, or a table of it (maps, processes) is full. */
export class StoreFullError extends ShoalError {}
/** The filesystem holding the store (for example `/dev/shm`) is full. */
export class NoSpaceError extends ShoalError {}
/** The file is damaged: the message says what is wrong and where. */
export class CorruptError extends ShoalError {}
/** The file is not a Shoal store. */
export class NotAStoreError extends ShoalError {}
/** The file was written by a newer format version, or needs an upgrade that other processes block. */
export class VersionMismatchError extends ShoalError {}
/** The operating system refused access to the file. */
export class PermissionDeniedError extends ShoalError {}
/** A key, value or name too large, a bad option, or a map of another kind. */
export class InvalidArgumentError extends ShoalError {}
/**
 * A lock held by a live but stuck process (stopped, in a debugger) was not released
 * within the lock timeout (5 s by default), or an `update` kept losing its race that long.
 */
export class TimeoutError extends ShoalError {}
/** More processes or threads use the store than it was created for. */
export class TooManyUsersError extends ShoalError {}
/** A write to a store opened with `readOnly: true`. */
export class ReadOnlyError extends ShoalError {}
/** An input/output error from the operating system. */
export class ShoalIOError extends ShoalError {}
/** Stored bytes that the map's codec cannot decode (a map written with other codecs). */
export class DecodeError extends ShoalError {}
/** Use of a store, or of a map or iterator of a store, after `close()`. */
export class ClosedError extends ShoalError {}

const byCode: Record<string, new (message: string, code: string) => ShoalError> = {
  ERR_SHOAL_NOT_FOUND: NotFoundError,
  ERR_SHOAL_ALREADY_EXISTS: AlreadyExistsError,
  ERR_SHOAL_STORE_FULL: StoreFullError,
  ERR_SHOAL_NO_SPACE: NoSpaceError,
  ERR_SHOAL_CORRUPT: CorruptError,
  ERR_SHOAL_NOT_A_STORE: NotAStoreError,
  ERR_SHOAL_VERSION_MISMATCH: VersionMismatchError,
  ERR_SHOAL_PERMISSION_DENIED: PermissionDeniedError,
  ERR_SHOAL_INVALID_ARGUMENT: InvalidArgumentError,
  ERR_SHOAL_TIMEOUT: TimeoutError,
  ERR_SHOAL_TOO_MANY_USERS: TooManyUsersError,
  ERR_SHOAL_READ_ONLY: ReadOnlyError,
  ERR_SHOAL_IO: ShoalIOError,
  ERR_SHOAL_DECODE: DecodeError,
  ERR_SHOAL_CLOSED: ClosedError,
  ERR_SHOAL: ShoalError,
};

/**
 * @internal The error to throw for `e`, caught from the addon: its `ERR_SHOAL_*` errors
 * (plain `Error`s with a code) become the matching class; anything else (a TypeError from
 * an argument conversion) is returned as it is.
 */
export function convert(e: unknown): unknown {
  if (e instanceof Error && !(e instanceof ShoalError)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      const C = byCode[code];
      if (C) return new C(e.message, code);
    }
  }
  return e;
}

/** @internal A `TypeError` with Node's code for an argument of the wrong type. */
export function typeError(message: string): TypeError {
  const e = new TypeError(message) as TypeError & { code: string };
  e.code = 'ERR_INVALID_ARG_TYPE';
  return e;
}

/** @internal A `TypeError` with Node's code for an argument of the right type but a bad value. */
export function valueError(message: string): TypeError {
  const e = new TypeError(message) as TypeError & { code: string };
  e.code = 'ERR_INVALID_ARG_VALUE';
  return e;
}

/** @internal A `RangeError` with Node's code for a number out of range. */
export function rangeError(message: string): RangeError {
  const e = new RangeError(message) as RangeError & { code: string };
  e.code = 'ERR_OUT_OF_RANGE';
  return e;
}
