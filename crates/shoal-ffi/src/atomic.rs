//! Atomic read-modify-write calls (swap, compare-and-swap, add, update, get-or-insert),
//! batches (get_many, put_many, remove_many) and per-handle timeouts of variable-size
//! maps, with the types the calls of both kinds of map take. The calls fixed maps have
//! too forward to `kv`.

use crate::*;
use std::ffi::{c_int, c_void};

/// `shoal_map_compare_and_swap` flag: expect the key to be absent (`expected` and
/// `expected_len` are ignored).
pub const SHOAL_CAS_EXPECT_ABSENT: u32 = 1;
/// `shoal_map_compare_and_swap` flag: on a match, remove the key (`new_value` and
/// `new_len` are ignored).
pub const SHOAL_CAS_REMOVE: u32 = 2;

/// What a `shoal_update_fn` wants done: store `*new_value` (of `*new_len` bytes).
pub const SHOAL_UPDATE_SET: c_int = 0;
/// What a `shoal_update_fn` wants done: remove the key (or leave it absent).
pub const SHOAL_UPDATE_REMOVE: c_int = 1;

/// A byte string passed in: `len` bytes at `data` (NULL allowed when `len` is 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_bytes {
    /// The bytes.
    pub data: *const c_void,
    /// Their number.
    pub len: usize,
}

/// An entry passed in (`shoal_map_put_many`, `shoal_fixed_put_many`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_kv {
    /// The key (NULL allowed when `key_len` is 0).
    pub key: *const c_void,
    /// Its length.
    pub key_len: usize,
    /// The value (NULL allowed when `value_len` is 0).
    pub value: *const c_void,
    /// Its length.
    pub value_len: usize,
}

/// Computes a new value from the current one (`shoal_map_update`, `shoal_map_update_by_uid`,
/// `shoal_fixed_update`).
///
/// * `current`, `current_len`, `present`: the current value (`present` false: the key is
///   absent; `current` is then NULL). Valid only during the call.
/// * `new_value`, `new_len`: where the callback stores the new value when it returns
///   `SHOAL_UPDATE_SET`; the bytes must stay valid until the callback is called again or
///   the update call returns.
///
/// Returns `SHOAL_UPDATE_SET` or `SHOAL_UPDATE_REMOVE`; any other value cancels the
/// update (nothing is changed and the update call returns `SHOAL_INVALID`). It may be
/// called several times (when another write to the key comes in between), so it must
/// have no side effects beyond `ctx`; it runs with no lock held. It must not unwind.
pub type shoal_update_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        current: *const c_void,
        current_len: usize,
        present: bool,
        new_value: *mut *const c_void,
        new_len: *mut usize,
    ) -> c_int,
>;

/// Receives the result for one key of `shoal_map_get_many` or `shoal_fixed_get_many`: its
/// `index` in the keys array and its value (`present` false and `value` NULL when the key
/// is absent). The value is valid only during the call. Called once per key, in order.
/// Must not unwind.
pub type shoal_many_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        index: usize,
        value: *const c_void,
        value_len: usize,
        present: bool,
    ),
>;

pub(crate) fn ptr_of(b: &[u8]) -> *const c_void {
    if b.is_empty() {
        std::ptr::null()
    } else {
        b.as_ptr() as *const c_void
    }
}

/// Inserts or replaces the value of `key` and hands the previous value, if any, to `cb`.
///
/// * `replaced`: NULL, or receives whether the key was present.
/// * `cb`: NULL, or receives `ctx` and the previous value (valid during the call); not
///   called when the key was absent.
///
/// Errors: as `shoal_map_put`.
///
/// # Safety
/// As `shoal_map_put`; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_swap(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    replaced: *mut bool,
    cb: shoal_value_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        let old = m.swap(key, value)?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(replaced, old.is_some()) };
        if let (Some(cb), Some(old)) = (cb, old) {
            // SAFETY: a C function pointer of the declared type; `old` outlives the call.
            unsafe { cb(ctx, ptr_of(&old), old.len()) };
        }
        Ok(SHOAL_OK)
    })
}

/// Atomically: if the current value of `key` is `expected` (or the key is absent, with
/// `SHOAL_CAS_EXPECT_ABSENT`), sets it to `new_value` (or removes it, with
/// `SHOAL_CAS_REMOVE`).
///
/// * `flags`: 0, or `SHOAL_CAS_EXPECT_ABSENT` and/or `SHOAL_CAS_REMOVE`.
///
/// Returns `SHOAL_OK` (the value matched and was replaced) or `SHOAL_MISMATCH` (it did
/// not; nothing changed). Errors: `SHOAL_INVALID` (unknown flags, key or value too
/// large), and those of `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key`, `expected` and `new_value` are NULL or have
/// their length in readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_compare_and_swap(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    expected: *const c_void,
    expected_len: usize,
    new_value: *const c_void,
    new_len: usize,
    flags: u32,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe {
        kv::compare_and_swap(
            map,
            key,
            key_len,
            expected,
            expected_len,
            new_value,
            new_len,
            flags,
        )
    }
}

/// Atomically adds `delta` (wrapping) to the 8-byte little-endian signed integer value of
/// `key`; an absent key counts as 0 and is created.
///
/// * `result`: NULL, or receives the new value.
///
/// Errors: `SHOAL_INVALID` (the current value is not 8 bytes long, or the key is too
/// large), and those of `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `result` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_add(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    delta: i64,
    result: *mut i64,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::add(map, key, key_len, delta, result) }
}

/// Atomic read-modify-write: `f` computes the new value of `key` from the current one;
/// no other write to the key comes in between (if one does, `f` runs again on the newer
/// value). The value `f` returned last is the one installed.
///
/// Returns `SHOAL_OK`. Errors: `SHOAL_INVALID` (`f` returned neither `SHOAL_UPDATE_SET`
/// nor `SHOAL_UPDATE_REMOVE`, or a value too large), `SHOAL_TIMEOUT` (retried for longer
/// than the lock timeout), and those of `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `f`
/// follows the contract of `shoal_update_fn`.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_update(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    f: shoal_update_fn,
    ctx: *mut c_void,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::update(map, key, key_len, f, ctx) }
}

/// Copies the value of `key` into the caller's buffer, first inserting `default_value`
/// if the key is absent (atomically: of several racing callers, exactly one inserts).
///
/// Buffers as `shoal_map_get`; on `SHOAL_BUFFER_TOO_SMALL` the key is present all the
/// same, so calling again with a larger buffer returns its value.
/// Errors: as `shoal_map_get` and `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key`/`default_value` are NULL or have their length
/// in readable bytes; `buf` is NULL or has `cap` writable bytes; `value_len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get_or_insert(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    default_value: *const c_void,
    default_len: usize,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: forwarded contract.
        let default = unsafe { bytes(default_value, default_len, "default_value") }?;
        let value_len = out_ptr(value_len, "value_len")?;
        if buf.is_null() && cap > 0 {
            return Err(null("buf"));
        }
        let v = m.get_or_insert(key, default)?;
        // SAFETY: forwarded contract.
        unsafe { copy_out(&v, buf, cap, value_len, false, "buf") }?;
        Ok(SHOAL_OK)
    })
}

/// Builds the key slices of a batch.
///
/// # Safety
/// `keys` is NULL or points to `n` `shoal_bytes`, each valid as for `bytes`.
pub(crate) unsafe fn key_slices<'a>(keys: *const shoal_bytes, n: usize) -> Res<Vec<&'a [u8]>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if keys.is_null() {
        return Err(null("keys"));
    }
    // SAFETY: n elements readable at keys (caller's contract).
    let ks = unsafe { std::slice::from_raw_parts(keys, n) };
    ks.iter()
        // SAFETY: each element's contract is the caller's.
        .map(|k| unsafe { bytes(k.data, k.len, "keys[i].data") })
        .collect()
}

/// Looks up `n` keys at once, overlapping their memory misses (several times faster per
/// key than single gets on maps much larger than the cache), and passes each result to
/// `cb` in key order. Each lookup is individually consistent.
///
/// Errors: `SHOAL_INVALID` (a key too large; no callback was made), `SHOAL_NOT_FOUND` (the
/// map was dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `keys` is NULL or points to `n` readable `shoal_bytes`
/// whose `data` are NULL or have `len` readable bytes; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get_many(
    map: *const shoal_map,
    keys: *const shoal_bytes,
    n: usize,
    cb: shoal_many_fn,
    ctx: *mut c_void,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::get_many(map, keys, n, cb, ctx) }
}

/// Puts `n` entries; each put is atomic on its own (the batch is not). NULL pointers
/// are refused before anything is written; otherwise the call stops at the first error
/// (earlier entries stay written). With sync writes, flushes once.
///
/// Errors: as `shoal_map_put` (the message names the failing item).
///
/// # Safety
/// `map` is NULL or a live handle; `items` is NULL or points to `n` readable `shoal_kv`
/// whose pointers are NULL or have their length in readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_put_many(
    map: *const shoal_map,
    items: *const shoal_kv,
    n: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_many(map, items, n) }
}

/// Removes `n` keys (each removal atomic on its own). NULL pointers are refused before
/// anything is removed; otherwise the call stops at the first error (earlier keys stay
/// removed). With sync writes, flushes once.
///
/// * `removed`: NULL, or receives how many of the keys were present (left unchanged on
///   failure).
///
/// Errors: as `shoal_map_remove` (the message names the failing item).
///
/// # Safety
/// `map` is NULL or a live handle; `keys` as for `shoal_map_get_many`; `removed` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_remove_many(
    map: *const shoal_map,
    keys: *const shoal_bytes,
    n: usize,
    removed: *mut u64,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::remove_many(map, keys, n, removed) }
}

/// Opens a second handle on the same map whose calls wait at most `timeout_ms` for a lock
/// held by a live process before failing with `SHOAL_TIMEOUT` (the store's
/// `lock_timeout_ms` applies to other handles).
///
/// * `out`: receives the new handle (NULL on failure); close it with `shoal_map_close`.
///
/// Errors: `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_with_timeout(
    map: *const shoal_map,
    timeout_ms: u32,
    out: *mut *mut shoal_map,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::with_timeout(map, timeout_ms, out) }
}
