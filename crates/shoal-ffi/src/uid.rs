//! Stable per-key handles (UIDs) of maps created with `shoal_map_options.uids = 1`:
//! key -> handle, and get, key, put, remove, add, update by handle.

use crate::*;
use std::ffi::c_void;

/// Marks a handle made from the 32-bit form of a UID (see `shoal_uid_from_u32`): the
/// by-UID calls then skip the generation check. Bit 47 is never set in a 64-bit handle
/// the library returns (UID indexes stay below 2^27).
pub const SHOAL_UID_UNCHECKED: u64 = 0x800000000000;

/// The engine handle for a C `uint64_t` handle.
fn uid_of(uid: u64) -> shoal::Uid {
    if uid & SHOAL_UID_UNCHECKED != 0 {
        shoal::Uid::from_u32(uid as u32)
    } else {
        shoal::Uid::from_u64(uid)
    }
}

/// The 32-bit form of a 64-bit handle: its bare table index (to embed in other keys or
/// values where 4 bytes matter). It names the key while the key exists, but carries no
/// generation: once the key is removed and its table entry reused by a later key, it
/// names that key. Keep 32-bit handles only where keys are not removed while handles on
/// them live. Pure: no status, no error.
#[no_mangle]
pub extern "C" fn shoal_uid_to_u32(uid: u64) -> u32 {
    uid as u32
}

/// The handle to pass to the by-UID calls for a 32-bit form `uid32` (from
/// `shoal_uid_to_u32`): `uid32 | SHOAL_UID_UNCHECKED`. Those calls then return
/// `SHOAL_STALE_UID` only while the table entry is free; see `shoal_uid_to_u32`. Pure.
#[no_mangle]
pub extern "C" fn shoal_uid_from_u32(uid32: u32) -> u64 {
    uid32 as u64 | SHOAL_UID_UNCHECKED
}

/// Tells whether the map keeps a UID per key (it was created with
/// `shoal_map_options.uids = 1`). The by-UID calls on a map without UIDs return
/// `SHOAL_INVALID`.
///
/// * `has_uids`: receives the answer.
///
/// Errors: `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `has_uids` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_has_uids(
    map: *const shoal_map,
    has_uids: *mut bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let out = out_ptr(has_uids, "has_uids")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(m.has_uids()) };
        Ok(SHOAL_OK)
    })
}

/// The version of `key`'s UID entry: every change to the key (a put, in place or not, a
/// remove and re-insert) moves it, so a transaction's `SHOAL_TXN_VERSION` condition can
/// require that nothing changed the key since it was read.
///
/// * `version`: receives the version.
///
/// Errors: `SHOAL_NOT_FOUND` (the key is absent), `SHOAL_INVALID` (a map without UIDs),
/// `SHOAL_TIMEOUT`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or readable for `key_len` bytes;
/// `version` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_version(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    version: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let out = out_ptr(version, "version")?;
        let v = m.version(key)?.ok_or_else(kv::absent)?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(v) };
        Ok(SHOAL_OK)
    })
}

/// The stable 64-bit handle of `key`: valid while the key exists, however often its
/// value is replaced; after the key is removed every by-UID call on it returns
/// `SHOAL_STALE_UID`, even once its table entry names a later key. Never 0.
///
/// * `uid`: receives the handle (0 when the call fails).
///
/// Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (no such key, or the map was dropped).
/// Errors: `SHOAL_INVALID` (the map has no UIDs, or the key is too large),
/// `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `uid`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_uid(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    uid: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let out = out_ptr(uid, "uid")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(0) };
        let u = m
            .uid(key)?
            .ok_or_else(|| Fail::new(SHOAL_NOT_FOUND, "key not found"))?;
        // SAFETY: as above.
        unsafe { out.write(u.to_u64()) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_map_put` that also returns the key's handle: a new one for an inserted key,
/// the one it had for a replaced key.
///
/// * `uid`: receives the handle (0 when the call fails).
/// * `replaced`: NULL, or receives whether the key was present.
///
/// Errors: `SHOAL_INVALID` (the map has no UIDs, key or value too large), and those of
/// `shoal_map_put`.
///
/// # Safety
/// As `shoal_map_put`; `uid` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_put_uid(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    uid: *mut u64,
    replaced: *mut bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        let out = out_ptr(uid, "uid")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(0) };
        let (o, u) = m.put_with_uid(key, value)?;
        // SAFETY: as above; `replaced` is NULL or writable.
        unsafe {
            out.write(u.to_u64());
            write_opt(replaced, o == shoal::PutOutcome::Replaced);
        }
        Ok(SHOAL_OK)
    })
}

/// Copies the value of the key `uid` names into the caller's buffer: no hashing, no key
/// comparison.
///
/// * `uid`: a handle from `shoal_map_uid` / `shoal_map_put_uid`, or
///   `shoal_uid_from_u32(u)`.
/// * `buf`, `cap`, `value_len`: as `shoal_map_get` (`*value_len` is set also when the
///   buffer is too small; `buf` may be NULL when `cap` is 0).
///
/// Returns `SHOAL_OK`, `SHOAL_BUFFER_TOO_SMALL` (nothing written; call again with
/// `*value_len` bytes — the value may have changed meanwhile, so loop) or
/// `SHOAL_STALE_UID` (the key was removed). Errors: `SHOAL_INVALID` (the map has no
/// UIDs), `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `buf` is NULL or has `cap` writable bytes;
/// `value_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get_by_uid(
    map: *const shoal_map,
    uid: u64,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let value_len = out_ptr(value_len, "value_len")?;
        if buf.is_null() && cap > 0 {
            return Err(null("buf"));
        }
        with_value_buf(|v| {
            m.get_by_uid_into(uid_of(uid), v)?;
            // SAFETY: forwarded contract; `v` is the library's own buffer.
            unsafe { copy_out(v, buf, cap, value_len, false, "buf") }?;
            Ok(SHOAL_OK)
        })
    })
}

/// Calls `cb` once with the value of the key `uid` names, without copying it into a
/// caller's buffer first.
///
/// * `cb`: receives `ctx` and the value (valid only during the call; NULL when empty).
///
/// Returns `SHOAL_OK` (cb was called) or `SHOAL_STALE_UID` (cb was not called).
/// Errors: as `shoal_map_get_by_uid`.
///
/// # Safety
/// `map` is NULL or a live handle; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get_by_uid_cb(
    map: *const shoal_map,
    uid: u64,
    cb: shoal_value_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        with_value_buf(|v| {
            m.get_by_uid_into(uid_of(uid), v)?;
            // SAFETY: a C function pointer of the declared type; `v` outlives the call
            // (taken out of the thread-local, so a nested call is fine).
            unsafe { cb(ctx, ptr_of(v), v.len()) };
            Ok(SHOAL_OK)
        })
    })
}

/// Copies the key `uid` names into the caller's buffer (not NUL-terminated).
///
/// * `buf`, `cap`, `key_len`: as the value buffer of `shoal_map_get`: `*key_len`
///   receives the key's length, also when the buffer is too small.
///
/// Returns `SHOAL_OK`, `SHOAL_BUFFER_TOO_SMALL` (nothing written) or
/// `SHOAL_STALE_UID`. Errors: as `shoal_map_get_by_uid`.
///
/// # Safety
/// `map` is NULL or a live handle; `buf` is NULL or has `cap` writable bytes; `key_len`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_key_by_uid(
    map: *const shoal_map,
    uid: u64,
    buf: *mut c_void,
    cap: usize,
    key_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let key_len = out_ptr(key_len, "key_len")?;
        if buf.is_null() && cap > 0 {
            return Err(null("buf"));
        }
        let k = m.key_by_uid(uid_of(uid))?;
        // SAFETY: forwarded contract; `k` is the library's own buffer.
        unsafe { copy_out(&k, buf, cap, key_len, false, "buf") }?;
        Ok(SHOAL_OK)
    })
}

/// Replaces the value of the key `uid` names (the handle stays the same).
///
/// * `value`, `value_len`: the new value (`value` may be NULL when `value_len` is 0).
///
/// Returns `SHOAL_OK` or `SHOAL_STALE_UID` (nothing written). Errors: `SHOAL_INVALID`
/// (the map has no UIDs, the value is too large), and those of `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `value` is NULL or has `value_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_put_by_uid(
    map: *const shoal_map,
    uid: u64,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let value = unsafe { bytes(value, value_len, "value") }?;
        m.put_by_uid(uid_of(uid), value)?;
        Ok(SHOAL_OK)
    })
}

/// Removes the key `uid` names, optionally copying its old value out; the handle becomes
/// stale.
///
/// * `old_buf`, `old_cap`, `old_len`: as `shoal_map_remove`: `old_len` NULL to just
///   remove; otherwise it receives the old value's length and up to `old_cap` bytes are
///   copied (truncated if larger; the status is still `SHOAL_OK`).
///
/// Returns `SHOAL_OK` or `SHOAL_STALE_UID` (nothing removed; `*old_len` = 0).
/// Errors: `SHOAL_INVALID` (the map has no UIDs), `SHOAL_NOT_FOUND` (the map was
/// dropped), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`
/// (`old_buf` NULL with `old_cap` > 0).
///
/// # Safety
/// `map` is NULL or a live handle; `old_buf` is NULL or has `old_cap` writable bytes;
/// `old_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_remove_by_uid(
    map: *const shoal_map,
    uid: u64,
    old_buf: *mut c_void,
    old_cap: usize,
    old_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        if !old_len.is_null() {
            if old_buf.is_null() && old_cap > 0 {
                return Err(null("old_buf"));
            }
            // SAFETY: non-NULL, writable by contract.
            unsafe { old_len.write(0) };
        }
        let v = m.remove_by_uid(uid_of(uid))?;
        if !old_len.is_null() {
            let n = v.len().min(old_cap);
            // SAFETY: old_len is non-NULL and writable; old_buf has old_cap >= n writable
            // bytes (non-NULL when n > 0, checked above), disjoint from `v`.
            unsafe {
                old_len.write(v.len());
                if n > 0 {
                    std::ptr::copy_nonoverlapping(v.as_ptr(), old_buf as *mut u8, n);
                }
            }
        }
        Ok(SHOAL_OK)
    })
}

/// Removes the key `uid` names and passes its old value to `cb` (never truncated, unlike
/// the buffer of `shoal_map_remove_by_uid`); the handle becomes stale.
///
/// * `cb`: receives `ctx` and the old value (valid only during the call; NULL when
///   empty).
///
/// Returns `SHOAL_OK` (removed; cb was called) or `SHOAL_STALE_UID` (cb was not
/// called). Errors: as `shoal_map_remove_by_uid`.
///
/// # Safety
/// `map` is NULL or a live handle; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_take_by_uid(
    map: *const shoal_map,
    uid: u64,
    cb: shoal_value_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        let v = m.remove_by_uid(uid_of(uid))?;
        // SAFETY: a C function pointer of the declared type; `v` outlives the call.
        unsafe { cb(ctx, ptr_of(&v), v.len()) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_map_add` on the key `uid` names: adds `delta` (wrapping) to its 8-byte
/// little-endian signed integer value.
///
/// * `result`: NULL, or receives the new value.
///
/// Returns `SHOAL_OK` or `SHOAL_STALE_UID`. Errors: `SHOAL_INVALID` (the map has no
/// UIDs, or the value is not 8 bytes long), and those of `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `result` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_add_by_uid(
    map: *const shoal_map,
    uid: u64,
    delta: i64,
    result: *mut i64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let v = m.add_by_uid(uid_of(uid), delta)?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(result, v) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_map_update` on the key `uid` names: `f` computes the new value from the
/// current one (`present` is always true), with no lock held; it runs again if another
/// write to the key came in between. `SHOAL_UPDATE_REMOVE` removes the key (the handle
/// becomes stale).
///
/// Returns `SHOAL_OK` or `SHOAL_STALE_UID` (the key was removed, possibly while `f`
/// ran; `f` may not have been called). Errors: `SHOAL_INVALID` (the map has no UIDs, `f`
/// returned neither `SHOAL_UPDATE_SET` nor `SHOAL_UPDATE_REMOVE` — the update is then
/// cancelled and the value left as it was — or a value too large), `SHOAL_TIMEOUT`,
/// and those of `shoal_map_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `f` follows the contract of `shoal_update_fn`.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_update_by_uid(
    map: *const shoal_map,
    uid: u64,
    f: shoal_update_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let f = f.ok_or_else(|| null("f"))?;
        let mut bad: Option<Fail> = None;
        m.update_by_uid(uid_of(uid), |cur| {
            if bad.is_some() {
                return Some(cur.to_vec()); // cancelled: keep what is there
            }
            let mut out: *const c_void = std::ptr::null();
            let mut out_len: usize = 0;
            // SAFETY: a C function pointer of the declared type; `cur` outlives the call
            // and the out-pointers are valid locals.
            let r = unsafe { f(ctx, ptr_of(cur), cur.len(), true, &mut out, &mut out_len) };
            match r {
                SHOAL_UPDATE_SET => {
                    // SAFETY: the callback's contract: out_len readable bytes at out, valid
                    // until it is called again or this call returns; copied now.
                    match unsafe { bytes(out, out_len, "*new_value") } {
                        Ok(b) => Some(b.to_vec()),
                        Err(e) => {
                            bad = Some(e);
                            Some(cur.to_vec())
                        }
                    }
                }
                SHOAL_UPDATE_REMOVE => None,
                other => {
                    bad = Some(Fail::new(
                        SHOAL_INVALID,
                        format!("the update callback returned {other}: cancelled"),
                    ));
                    Some(cur.to_vec())
                }
            }
        })?;
        match bad {
            Some(e) => Err(e),
            None => Ok(SHOAL_OK),
        }
    })
}
