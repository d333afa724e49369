//! The native half of the Node binding: a Node-API addon (napi-rs) over the engine's Rust
//! API. It deals in bytes only; `lib/index.ts` (compiled to `dist/index.js`) is the public
//! API, with the codecs, the `Map`-like methods and the error classes.
//!
//! Every call is synchronous and runs on the calling JavaScript thread: a single-key call
//! takes well under a microsecond, far less than handing work to the libuv thread pool
//! would cost. A call that meets a lock held by a stopped process waits, blocking that
//! thread, up to the store's lock timeout (5 s by default), then throws
//! `ERR_SHOAL_TIMEOUT`.
//!
//! The single-key calls (`opGet`, `opGetString`, `opSet`, `opHas`, `opDelete`, `opAdd`)
//! take no arguments: the JavaScript layer writes their arguments (map handle, key
//! length, value length) into the header of the scratch Buffer that `scratch()` gives
//! each environment (one per thread that loads the addon), and their key and value after
//! it. Measured on this addon, a call without arguments cost ~30 ns, with one number
//! ~130 ns, with a Buffer ~115 ns more, and as a method of a class ~300 ns more, against
//! ~20-150 ns for the engine's lookup itself. Map handles index a table per thread, so no
//! lock is taken.

#![deny(missing_docs)]

use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::time::Duration;

/// The `code` of a thrown error: a string such as `ERR_SHOAL_NOT_FOUND`, which the
/// JavaScript layer maps to its error class.
pub struct Code(&'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// A result whose error carries an `ERR_SHOAL_*` code.
type Result<T> = std::result::Result<T, Error<Code>>;

fn err(code: &'static str, msg: impl ToString) -> Error<Code> {
    Error::new(Code(code), msg)
}

/// The error for any use of a closed store or map.
fn closed() -> Error<Code> {
    err("ERR_SHOAL_CLOSED", "operation on a closed shoal store")
}

/// The message of an engine error in Node's words: where the engine's text names a Rust
/// call, the JavaScript call that does it instead.
fn message(e: &shoal::Error) -> String {
    use shoal::{Error as E, MapKind};
    match e {
        E::WrongMapKind { name, found, .. } => match found {
            MapKind::Variable { .. } => {
                format!("map {name:?} is a {found}: open it with store.map({name:?})")
            }
            _ => format!(
                "{name:?} is a {found}: the Node API opens variable-size maps only \
                 (store.map)"
            ),
        },
        E::NoUids { name } => format!("map {name:?} has no UIDs"),
        e => e.to_string(),
    }
}

/// Converts an engine error into a JavaScript error with an `ERR_SHOAL_*` code.
fn js(e: shoal::Error) -> Error<Code> {
    use shoal::Error as E;
    let code = match e {
        E::NotFound(_) => "ERR_SHOAL_NOT_FOUND",
        E::AlreadyExists(_) => "ERR_SHOAL_ALREADY_EXISTS",
        E::StoreFull(_) => "ERR_SHOAL_STORE_FULL",
        E::NoSpace { .. } => "ERR_SHOAL_NO_SPACE",
        E::Corrupt { .. } | E::NeedsRepair { .. } => "ERR_SHOAL_CORRUPT",
        E::NotAStore { .. } => "ERR_SHOAL_NOT_A_STORE",
        E::VersionMismatch { .. } | E::UpgradeBlocked { .. } => "ERR_SHOAL_VERSION_MISMATCH",
        E::Permission { .. } => "ERR_SHOAL_PERMISSION_DENIED",
        E::InvalidArgument(_) | E::WrongMapKind { .. } | E::NoUids { .. } => {
            "ERR_SHOAL_INVALID_ARGUMENT"
        }
        E::Timeout(_) => "ERR_SHOAL_TIMEOUT",
        E::TooManyUsers(_) => "ERR_SHOAL_TOO_MANY_USERS",
        E::ReadOnly { .. } => "ERR_SHOAL_READ_ONLY",
        E::Io { .. } => "ERR_SHOAL_IO",
        _ => "ERR_SHOAL",
    };
    err(code, message(&e))
}

trait ResultExt<T> {
    fn js(self) -> Result<T>;
}

impl<T> ResultExt<T> for shoal::Result<T> {
    #[inline]
    fn js(self) -> Result<T> {
        self.map_err(js)
    }
}

/// Options of `openStore`; sizes apply when the store is created.
#[napi(object)]
pub struct NativeOpenOptions {
    /// Create the store if it does not exist (default true).
    pub create: Option<bool>,
    /// Fail with ERR_SHOAL_ALREADY_EXISTS if the store exists (default false).
    pub exclusive: Option<bool>,
    /// Open an existing store for reading only.
    pub read_only: Option<bool>,
    /// Largest size the file may grow to, in bytes.
    pub max_size: Option<f64>,
    /// Bytes allocated when the store is created.
    pub initial_size: Option<f64>,
    /// How long a call waits for a lock held by a live process, in milliseconds.
    pub lock_timeout_ms: Option<f64>,
    /// Processes that may have the store open at once.
    pub max_processes: Option<u32>,
    /// Threads (over all processes) that may use the store at once.
    pub max_threads: Option<u32>,
    /// Named maps the store can hold.
    pub max_maps: Option<u32>,
    /// Size of a chunk, the unit of file growth (a power of two, 64 KiB to 64 MiB).
    pub chunk_size: Option<f64>,
    /// Permission bits of a new file.
    pub mode: Option<u32>,
    /// Fault in new space from a background thread (default true).
    pub pretouch: Option<bool>,
}

/// A size option: a whole, non-negative number of bytes.
fn size_opt(name: &str, v: Option<f64>, default: u64) -> Result<u64> {
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(63) => {
            Ok(x as u64)
        }
        Some(x) => Err(err(
            "ERR_SHOAL_INVALID_ARGUMENT",
            format!("{name} must be a whole number of bytes >= 0, not {x}"),
        )),
    }
}

/// Opens (or creates) the store at `path`; a bare name means `/dev/shm/NAME.shoal`.
#[napi]
pub fn open_store(path: String, opts: NativeOpenOptions) -> Result<NativeStore> {
    let d = shoal::Options::default();
    let lock_timeout = match opts.lock_timeout_ms {
        None => d.lock_timeout,
        Some(ms) if ms.is_finite() && ms >= 0.0 => Duration::from_secs_f64(ms / 1000.0),
        Some(ms) => {
            return Err(err(
                "ERR_SHOAL_INVALID_ARGUMENT",
                format!("lockTimeout must be a number of milliseconds >= 0, not {ms}"),
            ))
        }
    };
    let o = shoal::Options {
        max_size: size_opt("maxSize", opts.max_size, d.max_size)?,
        initial_size: size_opt("initialSize", opts.initial_size, d.initial_size)?,
        mode: opts.mode.unwrap_or(d.mode),
        lock_timeout,
        max_processes: opts.max_processes.unwrap_or(d.max_processes),
        max_threads: opts.max_threads.unwrap_or(d.max_threads),
        max_maps: opts.max_maps.unwrap_or(d.max_maps),
        chunk_size: size_opt("chunkSize", opts.chunk_size, d.chunk_size)?,
        pretouch: opts.pretouch.unwrap_or(d.pretouch),
        ..d
    };
    let mode = if opts.read_only.unwrap_or(false) {
        shoal::OpenMode::ReadOnly
    } else if opts.exclusive.unwrap_or(false) {
        shoal::OpenMode::CreateNew
    } else if opts.create.unwrap_or(true) {
        shoal::OpenMode::OpenOrCreate
    } else {
        shoal::OpenMode::Open
    };
    let store = shoal::Store::open_with(&path, &o, mode).js()?;
    Ok(NativeStore { store: Some(store) })
}

/// Deletes a store file (processes that have it open keep working on their mapping).
#[napi]
pub fn remove_store(path: String) -> Result<()> {
    shoal::Store::destroy(path).js()
}

/// The path a store name resolves to (a bare name means `/dev/shm/NAME.shoal`).
#[napi]
pub fn resolve_store_path(path: String) -> String {
    shoal::resolve_path(path).to_string_lossy().into_owned()
}

/// What `check` found.
#[napi(object)]
pub struct NativeCheckReport {
    /// True when no problem was found.
    pub ok: bool,
    /// Every violation found, each saying what and where.
    pub problems: Vec<String>,
    /// Maps checked.
    pub maps: f64,
    /// Entries checked.
    pub entries: f64,
}

/// An open store (one per `open()` in JavaScript).
#[napi]
pub struct NativeStore {
    store: Option<shoal::Store>,
}

impl NativeStore {
    fn s(&self) -> Result<&shoal::Store> {
        self.store.as_ref().ok_or_else(closed)
    }
}

#[napi]
impl NativeStore {
    /// The store file's path.
    #[napi]
    pub fn path(&self) -> Result<String> {
        Ok(self.s()?.path().to_string_lossy().into_owned())
    }

    /// Opens (or, with `create`, creates) the variable-size map `name`; returns a handle
    /// for the `map*` functions, valid on this thread only. `key_type` and `value_type`
    /// (FORMAT.md's type names: `bytes`, `utf8`, `i64`, `u64`, `f64`, `json`) are recorded in a
    /// map created now; an existing map that recorded others is `ERR_SHOAL_INVALID_ARGUMENT`.
    #[napi]
    pub fn map(
        &self,
        name: String,
        create: bool,
        key_type: Option<String>,
        value_type: Option<String>,
    ) -> Result<f64> {
        let s = self.s()?;
        let opts = shoal::MapOptions {
            key_type: key_type.as_deref().map(data_type).transpose()?,
            value_type: value_type.as_deref().map(data_type).transpose()?,
            ..Default::default()
        };
        let m = s.map_with(&name, &opts, create).js()?;
        new_handle(m)
    }

    /// Opens (or, with `create`, creates) the fixed-size map `name`: keys of `key_size`
    /// bytes, values of `value_size` bytes, stored in the index itself. `key_type` and
    /// `value_type` are recorded in a map created now, as in [`NativeStore::map`] (`i64`,
    /// `u64` and `f64` need 8 bytes).
    #[napi]
    pub fn fixed_map(
        &self,
        name: String,
        key_size: u32,
        value_size: u32,
        create: bool,
        key_type: Option<String>,
        value_type: Option<String>,
    ) -> Result<NativeFixedMap> {
        let s = self.s()?;
        let opts = shoal::FixedOptions {
            key_type: key_type.as_deref().map(data_type).transpose()?,
            value_type: value_type.as_deref().map(data_type).transpose()?,
            ..Default::default()
        };
        let m = s
            .fixed_map_with(&name, key_size as usize, value_size as usize, &opts, create)
            .js()?;
        Ok(NativeFixedMap { map: Some(m) })
    }

    /// The names of the store's maps.
    #[napi]
    pub fn maps(&self) -> Result<Vec<String>> {
        self.s()?.maps().js()
    }

    /// Deletes a map and its entries; false if there was none.
    #[napi]
    pub fn drop_map(&self, name: String) -> Result<bool> {
        self.s()?.drop_map(&name).js()
    }

    /// Verifies every invariant of the file.
    #[napi]
    pub fn check(&self) -> Result<NativeCheckReport> {
        let r = self.s()?.check().js()?;
        Ok(NativeCheckReport {
            ok: r.is_ok(),
            problems: r.problems,
            maps: r.maps as f64,
            entries: r.entries as f64,
        })
    }

    /// Flushes the store to its file (meaningful for stores on disk).
    #[napi]
    pub fn flush(&self) -> Result<()> {
        self.s()?.flush().js()
    }

    /// Closes this handle; later calls throw ERR_SHOAL_CLOSED. The mapping goes when the
    /// last map opened from it is closed too.
    #[napi]
    pub fn close(&mut self) {
        self.store = None;
    }
}

/// Bytes of the header at the start of the scratch Buffer: the arguments of a call, as
/// little-endian doubles (the map handle, the key's length, the value's length or a flag).
pub const HEADER: u32 = 32;
/// Bytes of the key area after the header: the largest key.
pub const KEY_CAP: u32 = shoal::MAX_KEY_LEN as u32;
/// Bytes of the value area after it: values up to this size pass through the scratch
/// Buffer; larger ones through Buffers of their own.
pub const VALUE_CAP: u32 = 64 * 1024;

/// The scratch Buffers of this thread, and the maps it opened.
struct Local {
    /// Per Node-API environment on this thread (one per instance of the addon: usually
    /// one), its scratch Buffer: `(env, start of the Buffer, a strong reference to it)`.
    scratch: Vec<(napi::sys::napi_env, *mut u8, napi::sys::napi_ref)>,
    /// The maps opened on this thread, by handle index.
    maps: Vec<Slot>,
    /// Indexes of closed slots, for reuse.
    free: Vec<u32>,
}

struct Slot {
    /// Bumped when the slot is reused, so that a closed map's handle stays closed.
    generation: u32,
    map: Option<shoal::Map>,
}

thread_local! {
    // Per thread, not global: every JavaScript thread (the main one, each worker) has
    // its own instance of the module and calls only its own maps, so no lock is needed,
    // and a handle of one thread means nothing on another.
    static LOCAL: std::cell::RefCell<Local> = const {
        std::cell::RefCell::new(Local { scratch: Vec::new(), maps: Vec::new(), free: Vec::new() })
    };
}

/// Handle bits for the slot index; the generation is above them (a handle is a double:
/// 53 bits pass through a JavaScript number exactly).
const INDEX_BITS: u32 = 20;

fn new_handle(map: shoal::Map) -> Result<f64> {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let i = match l.free.pop() {
            Some(i) => {
                let s = &mut l.maps[i as usize];
                s.generation = s.generation.wrapping_add(1);
                s.map = Some(map);
                i
            }
            None => {
                let i = l.maps.len() as u32;
                if i >= 1 << INDEX_BITS {
                    return Err(err(
                        "ERR_SHOAL_INVALID_ARGUMENT",
                        "too many maps open on this thread",
                    ));
                }
                l.maps.push(Slot {
                    generation: 0,
                    map: Some(map),
                });
                i
            }
        };
        let g = l.maps[i as usize].generation;
        Ok(g as f64 * (1u64 << INDEX_BITS) as f64 + i as f64)
    })
}

/// The map of handle `h` in `l`, or ERR_SHOAL_CLOSED.
#[inline(always)]
fn slot(l: &Local, h: f64) -> Result<&shoal::Map> {
    let hi = h as u64;
    let (i, g) = (
        (hi & ((1 << INDEX_BITS) - 1)) as usize,
        (hi >> INDEX_BITS) as u32,
    );
    match l.maps.get(i) {
        Some(Slot {
            generation,
            map: Some(m),
        }) if *generation == g => Ok(m),
        _ => Err(closed()),
    }
}

/// The scratch Buffer of environment `env` on this thread, if it has one.
#[inline(always)]
fn scratch_of(l: &Local, env: napi::sys::napi_env) -> Option<*mut u8> {
    l.scratch.iter().find(|s| s.0 == env).map(|s| s.1)
}

/// Runs a single-key call: reads its arguments from the header of the calling
/// environment's scratch Buffer (handle, key length, and `extra`: a value length or a
/// flag), and gives `f` the map, the key (in the key area) and the value area.
#[inline(always)]
fn with_call<T>(
    env: &Env,
    f: impl FnOnce(&shoal::Map, &[u8], &mut [u8], f64) -> Result<T>,
) -> Result<T> {
    LOCAL.with(|l| {
        let l = l.borrow();
        let Some(p) = scratch_of(&l, env.raw()) else {
            return Err(err("ERR_SHOAL", "no scratch Buffer: call scratch() first"));
        };
        // SAFETY: `p` is the start of a Buffer of HEADER + KEY_CAP + VALUE_CAP bytes made
        // by `scratch` for this environment and kept alive by a strong reference that is
        // never released (so until the environment ends, and with it every call from it);
        // its memory is outside the V8 heap and never moves; no JavaScript runs during
        // this synchronous call, so nothing else touches it. The header, key and value
        // areas do not overlap; the header's three doubles lie within its 32 bytes (read
        // unaligned, whatever the Buffer's address).
        let (h, klen, extra, key_area, vals) = unsafe {
            let hd = p as *const f64;
            (
                hd.read_unaligned(),
                hd.add(1).read_unaligned(),
                hd.add(2).read_unaligned(),
                p.add(HEADER as usize),
                std::slice::from_raw_parts_mut(
                    p.add((HEADER + KEY_CAP) as usize),
                    VALUE_CAP as usize,
                ),
            )
        };
        let m = slot(&l, h)?;
        if !(klen >= 0.0 && klen <= KEY_CAP as f64) {
            return Err(err(
                "ERR_SHOAL_INVALID_ARGUMENT",
                "key length past the scratch Buffer",
            ));
        }
        // SAFETY: as above; `klen` <= KEY_CAP was just checked.
        let key = unsafe { std::slice::from_raw_parts(key_area, klen as usize) };
        f(m, key, vals, extra)
    })
}

/// Runs `f` on the map of handle `h` (for calls whose keys and values come as Buffers).
fn map_of<T>(h: f64, f: impl FnOnce(&shoal::Map) -> Result<T>) -> Result<T> {
    LOCAL.with(|l| f(slot(&l.borrow(), h)?))
}

/// Forgets the scratch Buffer of an environment that ends, so that a later environment
/// at the same address does not take it for its own.
unsafe extern "C" fn forget_scratch(arg: *mut std::ffi::c_void) {
    let env = arg as napi::sys::napi_env;
    // try_with: the thread's locals may be gone already when the process exits.
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            l.scratch.retain(|s| s.0 != env);
        }
    });
}

/// This environment's scratch Buffer (`HEADER + KEY_CAP + VALUE_CAP` bytes), made on the
/// first call and the same Buffer on every later one, so that two instances of the
/// JavaScript module in one thread (a module registry reset, for example) share it
/// instead of each pointing the addon at its own. The arguments, keys and values of the
/// single-key calls pass through it, so that those calls take no arguments at all
/// (napi-rs gives a call without arguments a path that skips reading them: ~30 ns a call
/// against ~130 ns with one number, and more with a Buffer).
#[napi]
pub fn scratch(env: &Env) -> Result<Unknown<'_>> {
    use napi::sys;
    let raw = env.raw();
    let failed = |what: &str| err("ERR_SHOAL", format!("scratch Buffer: {what} failed"));
    let known = LOCAL.with(|l| l.borrow().scratch.iter().find(|s| s.0 == raw).map(|s| s.2));
    let mut value = std::ptr::null_mut();
    if let Some(r) = known {
        // SAFETY: `r` is a strong reference made below in this same environment and
        // never released, so it still holds the Buffer.
        if unsafe { sys::napi_get_reference_value(raw, r, &mut value) } != sys::Status::napi_ok
            || value.is_null()
        {
            return Err(failed("napi_get_reference_value"));
        }
    } else {
        let mut data = std::ptr::null_mut();
        let size = (HEADER + KEY_CAP + VALUE_CAP) as usize;
        let mut r = std::ptr::null_mut();
        // SAFETY: plain Node-API calls on this environment, on its own thread, with valid
        // out-pointers. napi_create_buffer allocates the memory outside the V8 heap (it
        // never moves); the strong reference, never released, keeps it alive as long as
        // the environment, which outlives every call that can read it.
        unsafe {
            if sys::napi_create_buffer(raw, size, &mut data, &mut value) != sys::Status::napi_ok
                || data.is_null()
            {
                return Err(failed("napi_create_buffer"));
            }
            if sys::napi_create_reference(raw, value, 1, &mut r) != sys::Status::napi_ok {
                return Err(failed("napi_create_reference"));
            }
        }
        // SAFETY: registers `forget_scratch` with this environment's address as its
        // argument; Node runs it on this thread when the environment ends.
        if unsafe { sys::napi_add_env_cleanup_hook(raw, Some(forget_scratch), raw.cast()) }
            != sys::Status::napi_ok
        {
            return Err(failed("napi_add_env_cleanup_hook"));
        }
        LOCAL.with(|l| l.borrow_mut().scratch.push((raw, data as *mut u8, r)));
    }
    // SAFETY: `value` is a live value of this environment, returned in this call's scope.
    Ok(unsafe { Unknown::from_raw_unchecked(raw, value) })
}

/// The sizes of the scratch Buffer's areas: `[HEADER, KEY_CAP, VALUE_CAP]`.
#[napi]
pub fn scratch_layout() -> Vec<u32> {
    vec![HEADER, KEY_CAP, VALUE_CAP]
}

/// Closes a map handle; later calls with it throw ERR_SHOAL_CLOSED.
#[napi]
pub fn map_close(h: f64) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let hi = h as u64;
        let (i, g) = (
            (hi & ((1 << INDEX_BITS) - 1)) as u32,
            (hi >> INDEX_BITS) as u32,
        );
        if let Some(s) = l.maps.get_mut(i as usize) {
            if s.generation == g && s.map.is_some() {
                s.map = None;
                l.free.push(i);
            }
        }
    });
}

/// The value of the call's key (header: handle, key length, and 1 to check that the value
/// is UTF-8 or 0), copied into the value area: returns its length, -1 if the key is
/// absent, or -2 if the value is not UTF-8 and the check was asked (done here, where it is
/// cheaper than in JavaScript). A length above VALUE_CAP means nothing was copied: use
/// `mapGetBuffer`.
#[napi]
pub fn op_get(env: &Env) -> Result<i64> {
    with_call(env, |m, k, out, utf8| {
        match m.get_to_slice(k, out).js()? {
            None => Ok(-1),
            Some(n) if utf8 != 0.0 && n <= out.len() && std::str::from_utf8(&out[..n]).is_err() => {
                Ok(-2)
            }
            Some(n) => Ok(n as i64),
        }
    })
}

/// The value of the call's key (header: handle, key length) as a string, for the
/// `'string'` codec: the addon makes the JavaScript string from the bytes, instead of a
/// second step decoding them from the scratch Buffer. Returns -1 if the key is absent,
/// -2 if the value is not UTF-8, and the value's length if it is longer than VALUE_CAP
/// (nothing was read: use `mapGetBuffer`).
#[napi]
pub fn op_get_string(env: &Env) -> Result<Either<napi::JsString<'_>, i64>> {
    with_call(env, |m, k, out, _| match m.get_to_slice(k, out).js()? {
        None => Ok(Either::B(-1)),
        Some(n) if n > out.len() => Ok(Either::B(n as i64)),
        Some(n) => match std::str::from_utf8(&out[..n]) {
            Ok(s) => Ok(Either::A(
                env.create_string(s)
                    .map_err(|e| err("ERR_SHOAL", e.reason.clone()))?,
            )),
            Err(_) => Ok(Either::B(-2)),
        },
    })
}

/// The value of `key` in a new Buffer, or null.
#[napi]
pub fn map_get_buffer(h: f64, key: &[u8]) -> Result<Option<Buffer>> {
    map_of(h, |m| Ok(m.get(key).js()?.map(Buffer::from)))
}

/// Sets the call's key (header: handle, key length, value length) to the bytes at the
/// start of the value area; true if it replaced a value.
#[napi]
pub fn op_set(env: &Env) -> Result<bool> {
    with_call(env, |m, k, vals, vlen| {
        if !(vlen >= 0.0 && vlen <= VALUE_CAP as f64) {
            return Err(err(
                "ERR_SHOAL_INVALID_ARGUMENT",
                "value length past the scratch Buffer",
            ));
        }
        Ok(m.put(k, &vals[..vlen as usize]).js()? == shoal::PutOutcome::Replaced)
    })
}

/// Sets `key` to `value` (values too large for the scratch Buffer); true if it replaced.
#[napi]
pub fn map_set_buffer(h: f64, key: &[u8], value: &[u8]) -> Result<bool> {
    map_of(h, |m| {
        Ok(m.put(key, value).js()? == shoal::PutOutcome::Replaced)
    })
}

/// Whether the call's key (header: handle, key length) is present.
#[napi]
pub fn op_has(env: &Env) -> Result<bool> {
    with_call(env, |m, k, _, _| m.contains(k).js())
}

/// Removes the call's key (header: handle, key length); true if it was present.
#[napi]
pub fn op_delete(env: &Env) -> Result<bool> {
    with_call(env, |m, k, _, _| m.remove(k).js())
}

/// Atomically adds the 8-byte little-endian signed integer at the start of the value
/// area to the 8-byte value of the call's key (header: handle, key length; absent counts
/// as 0, wrapping at 64 bits) and writes the result there. Bytes, not numbers, so that
/// no 64-bit integer passes through a double.
#[napi]
pub fn op_add(env: &Env) -> Result<()> {
    with_call(env, |m, k, vals, _| {
        let mut d = [0u8; 8];
        d.copy_from_slice(&vals[..8]);
        let r = m.add(k, i64::from_le_bytes(d)).js()?;
        vals[..8].copy_from_slice(&r.to_le_bytes());
        Ok(())
    })
}

/// Sets `key` to `value` if it is absent; true if it did.
#[napi]
pub fn map_set_if_absent(h: f64, key: &[u8], value: &[u8]) -> Result<bool> {
    map_of(h, |m| m.put_if_absent(key, value).js())
}

/// Removes `key` and returns its value (null if absent), atomically.
#[napi]
pub fn map_take(h: f64, key: &[u8]) -> Result<Option<Buffer>> {
    map_of(h, |m| Ok(m.take(key).js()?.map(Buffer::from)))
}

/// A type of FORMAT.md's "Key and value types" by the name the codecs give it.
fn data_type(name: &str) -> Result<shoal::DataType> {
    Ok(match name {
        "bytes" => shoal::DataType::Bytes,
        "utf8" => shoal::DataType::Utf8,
        "i64" => shoal::DataType::I64,
        "u64" => shoal::DataType::U64,
        "f64" => shoal::DataType::F64,
        "json" => shoal::DataType::Json,
        n => {
            return Err(err(
                "ERR_SHOAL_INVALID_ARGUMENT",
                format!("unknown type {n:?}"),
            ))
        }
    })
}

/// The key and value types the map of handle `h` recorded when it was created
/// (`DataType::name`: `utf8`, `i64`, `user:0x2a`...; null for none).
#[napi]
pub fn map_types(h: f64) -> Result<Vec<Option<String>>> {
    map_of(h, |m| {
        Ok(vec![
            m.key_type().map(|t| t.name()),
            m.value_type().map(|t| t.name()),
        ])
    })
}

/// The number of entries.
#[napi]
pub fn map_size(h: f64) -> Result<f64> {
    map_of(h, |m| Ok(m.len().js()? as f64))
}

/// Removes every entry.
#[napi]
pub fn map_clear(h: f64) -> Result<()> {
    map_of(h, |m| m.clear().js())
}

/// Atomically: if the value of `key` is `expected` (null: absent), sets it to
/// `replacement` (null: remove) and returns true; else changes nothing and returns false.
#[napi]
pub fn map_compare_and_swap(
    h: f64,
    key: &[u8],
    expected: Option<&[u8]>,
    replacement: Option<&[u8]>,
) -> Result<bool> {
    map_of(h, |m| m.compare_and_swap(key, expected, replacement).js())
}

/// A batch of entries from an iterator: every key and value one after the other in
/// `data`, and their lengths in `lens` (key, value, key, value... or keys only).
#[napi(object)]
pub struct NativeBatch {
    /// The bytes of the batch's keys (and values).
    pub data: Buffer,
    /// Their lengths, in order.
    pub lens: Vec<u32>,
}

/// The values of a `getMany`: their bytes one after the other, and per key its length
/// (-1: absent).
#[napi(object)]
pub struct NativeValues {
    /// The bytes of the values found.
    pub data: Buffer,
    /// Per key, the length of its value in `data`, or -1 if absent.
    pub lens: Vec<f64>,
}

/// Splits `data` into consecutive slices of `lens` bytes.
fn split<'a>(data: &'a [u8], lens: &[u32], what: &str) -> Result<Vec<&'a [u8]>> {
    let mut out = Vec::with_capacity(lens.len());
    let mut at = 0usize;
    for &n in lens {
        let end = at + n as usize;
        if end > data.len() {
            return Err(err(
                "ERR_SHOAL_INVALID_ARGUMENT",
                format!("{what}: lengths add up past the data"),
            ));
        }
        out.push(&data[at..end]);
        at = end;
    }
    Ok(out)
}

/// The values of many keys in one call: `keys` holds the keys one after the other,
/// `lens` their lengths.
#[napi]
pub fn map_get_many(h: f64, keys: &[u8], lens: &[u32]) -> Result<NativeValues> {
    map_of(h, |m| {
        let ks = split(keys, lens, "getMany")?;
        let mut data = Vec::new();
        let mut out = vec![-1f64; ks.len()];
        m.get_many_with(&ks, |i, v| {
            if let Some(v) = v {
                out[i] = v.len() as f64;
                data.extend_from_slice(v);
            }
        })
        .js()?;
        Ok(NativeValues {
            data: data.into(),
            lens: out,
        })
    })
}

/// Sets many keys in one call (each on its own: the batch is not atomic).
#[napi]
pub fn map_set_many(h: f64, keys: &[u8], klens: &[u32], vals: &[u8], vlens: &[u32]) -> Result<()> {
    map_of(h, |m| {
        let ks = split(keys, klens, "setMany keys")?;
        let vs = split(vals, vlens, "setMany values")?;
        if ks.len() != vs.len() {
            return Err(err(
                "ERR_SHOAL_INVALID_ARGUMENT",
                "setMany: as many keys as values",
            ));
        }
        let items: Vec<(&[u8], &[u8])> = ks.into_iter().zip(vs).collect();
        m.put_many(&items).js()
    })
}

/// An iterator over the entries (`values` true) or the keys of a map.
#[napi]
pub fn map_iter(h: f64, values: bool) -> Result<NativeIter> {
    map_of(h, |m| {
        let it = if values {
            Walk::Items(m.iter())
        } else {
            Walk::Keys(m.keys())
        };
        Ok(NativeIter { it: Some(it) })
    })
}

enum Walk {
    Items(shoal::Iter),
    Keys(shoal::Keys),
}

/// A weakly consistent iteration over a map (see the engine's `Map::iter`): every key
/// present for the whole iteration is seen exactly once.
#[napi]
pub struct NativeIter {
    it: Option<Walk>,
}

#[napi]
impl NativeIter {
    /// Up to `max` more entries (or keys), or null at the end.
    #[napi]
    pub fn next_batch(&mut self, max: u32) -> Result<Option<NativeBatch>> {
        let Some(it) = self.it.as_mut() else {
            return Ok(None);
        };
        let mut data = Vec::new();
        let mut lens = Vec::new();
        let mut n = 0;
        while n < max {
            let item = match it {
                Walk::Items(i) => i.next().map(|r| r.map(|(k, v)| (k, Some(v)))),
                Walk::Keys(i) => i.next().map(|r| r.map(|k| (k, None))),
            };
            match item {
                None => {
                    self.it = None;
                    break;
                }
                Some(Err(e)) => {
                    self.it = None;
                    return Err(js(e));
                }
                Some(Ok((k, v))) => {
                    lens.push(k.len() as u32);
                    data.extend_from_slice(&k);
                    if let Some(v) = v {
                        lens.push(v.len() as u32);
                        data.extend_from_slice(&v);
                    }
                    n += 1;
                }
            }
        }
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(NativeBatch {
            data: data.into(),
            lens,
        }))
    }
}

/// A fixed-size map (`Store.fixedMap` in JavaScript): its calls take and give Buffers of
/// exactly the map's sizes (others are `ERR_SHOAL_INVALID_ARGUMENT`). Its calls are
/// methods with Buffer arguments, not the scratch-Buffer path of variable-size maps: a
/// fixed map's keys and values are a few bytes, and it is not the hot path this addon
/// was measured on.
#[napi]
pub struct NativeFixedMap {
    map: Option<shoal::FixedMap>,
}

impl NativeFixedMap {
    fn m(&self) -> Result<&shoal::FixedMap> {
        self.map.as_ref().ok_or_else(closed)
    }
}

#[napi]
impl NativeFixedMap {
    /// The value of `key` in a new Buffer, or null.
    #[napi]
    pub fn get(&self, key: &[u8]) -> Result<Option<Buffer>> {
        Ok(self.m()?.get(key).js()?.map(Buffer::from))
    }

    /// Sets `key` to `value`; true if it replaced a value.
    #[napi]
    pub fn set(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        Ok(self.m()?.put(key, value).js()? == shoal::PutOutcome::Replaced)
    }

    /// Sets `key` to `value` if it is absent; true if it did.
    #[napi]
    pub fn set_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.m()?.put_if_absent(key, value).js()
    }

    /// Whether `key` is present.
    #[napi]
    pub fn has(&self, key: &[u8]) -> Result<bool> {
        self.m()?.contains(key).js()
    }

    /// Removes `key`; true if it was present.
    #[napi]
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.m()?.remove(key).js()
    }

    /// Atomically adds `delta` (8 bytes, little-endian, signed) to the 8-byte value of
    /// `key` (absent counts as 0; wraps at 64 bits) and returns the new value's 8 bytes.
    /// Bytes, not numbers, so that no 64-bit integer passes through a double.
    #[napi]
    pub fn add(&self, key: &[u8], delta: &[u8]) -> Result<Buffer> {
        let d: [u8; 8] = delta
            .try_into()
            .map_err(|_| err("ERR_SHOAL_INVALID_ARGUMENT", "delta must be 8 bytes"))?;
        let r = self.m()?.add(key, i64::from_le_bytes(d)).js()?;
        Ok(Buffer::from(r.to_le_bytes().to_vec()))
    }

    /// The number of entries.
    #[napi]
    pub fn size(&self) -> Result<f64> {
        Ok(self.m()?.len().js()? as f64)
    }

    /// The key and value sizes.
    #[napi]
    pub fn sizes(&self) -> Result<Vec<u32>> {
        let m = self.m()?;
        Ok(vec![m.key_size() as u32, m.value_size() as u32])
    }

    /// The key and value types the map recorded when it was created (null: none).
    #[napi]
    pub fn types(&self) -> Result<Vec<Option<String>>> {
        let m = self.m()?;
        Ok(vec![
            m.key_type().map(|t| t.name()),
            m.value_type().map(|t| t.name()),
        ])
    }

    /// Every entry: keys and values one after the other in a Buffer (the map's sizes tell
    /// where each starts). Weakly consistent, as the engine's iteration.
    #[napi]
    pub fn entries(&self) -> Result<Buffer> {
        let m = self.m()?;
        let mut out = Vec::new();
        for e in m.iter() {
            let (k, v) = e.js()?;
            out.extend_from_slice(&k);
            out.extend_from_slice(&v);
        }
        Ok(Buffer::from(out))
    }

    /// Releases the handle; later calls throw ERR_SHOAL_CLOSED.
    #[napi]
    pub fn close(&mut self) {
        self.map = None;
    }
}
