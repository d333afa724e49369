//! Map handles: open, close, get, put, put-if-absent, put-if-present, remove, contains,
//! len, clear, for-each, stats. The calls fixed maps have too forward to `kv`.

use crate::kv::absent;
use crate::*;
use std::ffi::{c_char, c_void};

/// A named hash map in a store: binary keys (up to `SHOAL_MAX_KEY_LEN` bytes) and values
/// (up to `SHOAL_MAX_VALUE_LEN` bytes), shared by every process and thread that opens
/// the store.
///
/// Thread safety: a map handle may be used from any number of threads at once (every
/// call on it is thread-safe), except `shoal_map_close`, which must not run while
/// another call uses the same handle. Reads never block; writes lock one small index
/// segment. The handle keeps its store mapped: it stays valid after `shoal_store_close`.
pub struct shoal_map {
    pub(crate) map: shoal::Map,
}

/// Options for creating a map (`shoal_map_open`). Zero-initialise, set `struct_size`;
/// every field left 0 takes its default. An existing map keeps the options it was
/// created with.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_map_options {
    /// `sizeof(shoal_map_options)` as the caller was compiled with. Required.
    pub struct_size: usize,
    /// Main buckets per index segment (15 slots each), 1..=4096. Default 59 (an 8 KiB
    /// segment). Smaller segments split more often.
    pub segment_buckets: u32,
    /// Stash buckets per segment, for keys whose home bucket is full, 1..=1024.
    /// Default 4.
    pub stash_buckets: u32,
    /// 1: keep a stable UID per key (`shoal_map_uid` and the by-UID calls); 0 (default):
    /// no UIDs. Chosen at creation: opening an existing map without UIDs with `uids = 1`
    /// fails with `SHOAL_INVALID`. Added in 0.1 after `stash_buckets`: a caller compiled
    /// with the older 16-byte struct gets no UIDs.
    pub uids: u32,
    /// Reserved; must be 0.
    pub reserved: u32,
    /// The key type to record when the map is created: a `SHOAL_TYPE_` code (default
    /// `SHOAL_TYPE_NONE`). An existing map that recorded another is `SHOAL_INVALID`. The
    /// engine stores bytes whatever the type; it tells other programs, in any language,
    /// how to decode them (`shoal_map_types`). Added after `reserved`: a caller compiled
    /// with the older 24-byte struct records none.
    pub key_type: u32,
    /// The value type to record, as `key_type`.
    pub value_type: u32,
    /// With `key_type = SHOAL_TYPE_USER`: the application's tag naming its encoding; 0
    /// otherwise.
    pub key_tag: u64,
    /// With `value_type = SHOAL_TYPE_USER`: as `key_tag`.
    pub value_tag: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then six u32 and two u64 (48 bytes, no
// padding), any bit pattern valid.
unsafe impl Versioned for shoal_map_options {}
const _: () = assert!(std::mem::size_of::<shoal_map_options>() == 48);

/// Figures about one map (`shoal_map_get_stats`). Set `struct_size` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_map_stats {
    /// In: `sizeof(shoal_map_stats)` as the caller was compiled with. Out: the number of
    /// bytes the library filled in.
    pub struct_size: usize,
    /// Entries in the map.
    pub entries: u64,
    /// Bytes of the map's live records (headers, keys and values).
    pub live_bytes: u64,
    /// Index segments.
    pub segments: u64,
    /// Segment splits so far.
    pub splits: u64,
    /// Global depth of the directory (it has 2^depth entries).
    pub directory_depth: u64,
    /// Bytes of record space in the store no longer referenced by any map, not yet
    /// reclaimed.
    pub store_dead_bytes: u64,
    /// Bytes in the store's data chunks (live + dead).
    pub store_data_bytes: u64,
    /// Size of the store file.
    pub file_size: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s only.
unsafe impl Versioned for shoal_map_stats {}

/// The map handle behind a pointer.
///
/// # Safety
/// `p` is NULL or a live handle from `shoal_map_open`.
#[inline(always)]
pub(crate) unsafe fn map_ref<'a>(p: *const shoal_map) -> Res<&'a shoal::Map> {
    // SAFETY: forwarded contract.
    unsafe { kv::handle(p) }
}

/// Opens the map `name` of a store and returns a handle on it.
///
/// * `name`: NUL-terminated UTF-8, 1 to `SHOAL_MAX_NAME_LEN` bytes.
/// * `flags`: 0 or `SHOAL_MAP_CREATE` (create the map if it does not exist).
/// * `opts`: NULL for defaults, or the options a newly created map gets.
/// * `out`: receives the new handle (NULL on failure). Free it with `shoal_map_close`.
///
/// Errors: `SHOAL_NOT_FOUND` (no such map and no `SHOAL_MAP_CREATE`), `SHOAL_FULL` (the
/// store holds its maximum of maps, or has no room), `SHOAL_INVALID` (bad name, unknown
/// flags, bad options), `SHOAL_NO_SPACE`, `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `opts` is NULL or
/// has `opts->struct_size` readable bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_open(
    store: *const shoal_store,
    name: *const c_char,
    flags: u32,
    opts: *const shoal_map_options,
    out: *mut *mut shoal_map,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        if flags & !SHOAL_MAP_CREATE != 0 {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("unknown map flags {flags:#x}"),
            ));
        }
        let o = if opts.is_null() {
            shoal_map_options::default()
        } else {
            // SAFETY: forwarded contract.
            unsafe { read_versioned(opts, "opts") }?
        };
        let d = shoal::MapOptions::default();
        let mo = shoal::MapOptions {
            segment_buckets: if o.segment_buckets == 0 {
                d.segment_buckets
            } else {
                o.segment_buckets
            },
            stash_buckets: if o.stash_buckets == 0 {
                d.stash_buckets
            } else {
                o.stash_buckets
            },
            uids: match o.uids {
                0 => false,
                1 => true,
                u => {
                    return Err(Fail::new(
                        SHOAL_INVALID,
                        format!("opts->uids is {u}; it must be 0 or 1"),
                    ))
                }
            },
            key_type: crate::types::from_code(o.key_type, o.key_tag, "key")?,
            value_type: crate::types::from_code(o.value_type, o.value_tag, "value")?,
        };
        if o.reserved != 0 {
            return Err(Fail::new(SHOAL_INVALID, "opts->reserved must be 0"));
        }
        let map = s.map_with(name, &mo, flags & SHOAL_MAP_CREATE != 0)?;
        let h = Box::into_raw(Box::new(shoal_map { map }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Closes a map handle (the map and its entries stay). NULL is allowed and does nothing.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `map` is NULL or a live handle from `shoal_map_open`, not used again after this call
/// and not in use by another thread during it. Iterators opened on it hold their own
/// reference to the map and stay valid.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_close(map: *mut shoal_map) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::close(map) }
}

/// Copies the map's name (NUL-terminated) into `buf`.
///
/// * `buf`, `cap`: the caller's buffer and its size; `buf` may be NULL when `cap` is 0.
/// * `len`: receives the name's length, not counting the NUL, whatever the outcome.
///
/// Errors: `SHOAL_BUFFER_TOO_SMALL` when `cap < *len + 1` (nothing written to `buf`),
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `buf` is NULL or has `cap` writable bytes; `len` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_name(
    map: *const shoal_map,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let len = out_ptr(len, "len")?;
        // SAFETY: forwarded contract.
        unsafe {
            copy_out(
                m.name().as_bytes(),
                buf as *mut c_void,
                cap,
                len,
                true,
                "buf",
            )
        }?;
        Ok(SHOAL_OK)
    })
}

/// Copies the value of `key` into the caller's buffer.
///
/// * `key`, `key_len`: the key; `key` may be NULL when `key_len` is 0.
/// * `buf`, `cap`: the caller's buffer and its size; `buf` may be NULL when `cap` is 0
///   (to ask for the length only).
/// * `value_len`: receives the value's length when the key is present (also when the
///   buffer is too small).
///
/// Returns `SHOAL_OK` (the value is in `buf`), `SHOAL_NOT_FOUND` (no such key),
/// `SHOAL_BUFFER_TOO_SMALL` (`*value_len > cap`: call again with a buffer of
/// `*value_len` bytes — the value may have changed meanwhile, so loop). The value is
/// copied straight into `buf`, so `buf`'s contents are meaningful only after `SHOAL_OK`:
/// a get racing with a write to the key may have copied a value that was then replaced
/// by a larger one or removed.
/// Errors: `SHOAL_INVALID` (key longer than `SHOAL_MAX_KEY_LEN`), `SHOAL_NOT_FOUND` also
/// when the map was dropped, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `buf`
/// is NULL or has `cap` writable bytes; `value_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let value_len = out_ptr(value_len, "value_len")?;
        if buf.is_null() && cap > 0 {
            return Err(null("buf"));
        }
        // The value is copied straight into the caller's buffer when it fits (no
        // intermediate copy, no thread-local buffer).
        let dst: &mut [u8] = if cap == 0 {
            &mut []
        } else {
            // SAFETY: buf is non-NULL (checked above) with `cap` writable bytes (caller's
            // contract), clamped to what a slice may span; values are at most 4 GiB.
            unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, cap.min(isize::MAX as usize)) }
        };
        let n = m.get_to_slice(key, dst)?.ok_or_else(absent)?;
        // SAFETY: non-NULL (checked above), writable by contract.
        unsafe { value_len.write(n) };
        if n > cap {
            return Err(too_small(n, cap));
        }
        Ok(SHOAL_OK)
    })
}

#[cold]
fn too_small(need: usize, cap: usize) -> Fail {
    Fail::new(
        SHOAL_BUFFER_TOO_SMALL,
        format!("buf: {need} bytes needed, the buffer has {cap}"),
    )
}

/// Looks `key` up and, if present, calls `cb` once with its value, without copying it
/// into a caller's buffer first.
///
/// * `cb`: receives `ctx` and the value (pointer and length, valid only during the call).
///
/// Returns `SHOAL_OK` (cb was called) or `SHOAL_NOT_FOUND` (no such key; cb was not
/// called). Errors: as `shoal_map_get`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `cb`
/// does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get_cb(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    cb: shoal_value_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        with_value_buf(|v| {
            if !m.get_into(key, v)? {
                return Err(absent());
            }
            let p = if v.is_empty() {
                std::ptr::null()
            } else {
                v.as_ptr() as *const c_void
            };
            // SAFETY: a C function pointer of the declared type; `v` outlives the call
            // (the buffer is taken out of the thread-local, so a nested call is fine).
            unsafe { cb(ctx, p, v.len()) };
            Ok(SHOAL_OK)
        })
    })
}

/// Inserts or replaces the value of `key`.
///
/// * `key`, `key_len`; `value`, `value_len`: the entry; a pointer may be NULL when its
///   length is 0.
/// * `replaced`: NULL, or receives true if the key was present (its value replaced),
///   false if it was inserted.
///
/// Errors: `SHOAL_INVALID` (key or value too large), `SHOAL_FULL` (the store reached its
/// maximum size), `SHOAL_NO_SPACE`, `SHOAL_NOT_FOUND` (the map was dropped),
/// `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key`/`value` are NULL or have `key_len`/`value_len`
/// readable bytes; `replaced` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_put(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    replaced: *mut bool,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put(map, key, key_len, value, value_len, replaced) }
}

/// Inserts `key` only if it is absent.
///
/// Returns `SHOAL_OK` (inserted) or `SHOAL_EXISTS` (the key is present; nothing changed).
/// Errors: as `shoal_map_put`.
///
/// # Safety
/// As `shoal_map_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_put_if_absent(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_absent(map, key, key_len, value, value_len) }
}

/// Replaces the value of `key` only if it is present.
///
/// Returns `SHOAL_OK` (replaced) or `SHOAL_NOT_FOUND` (the key is absent; nothing
/// changed). Errors: as `shoal_map_put`.
///
/// # Safety
/// As `shoal_map_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_put_if_present(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_present(map, key, key_len, value, value_len) }
}

/// Deprecated: renamed `shoal_map_put_if_absent` (this name stays for one release).
///
/// # Safety
/// As `shoal_map_put_if_absent`.
#[no_mangle]
#[deprecated(since = "0.2.0", note = "renamed shoal_map_put_if_absent")]
pub unsafe extern "C" fn shoal_map_insert(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_absent(map, key, key_len, value, value_len) }
}

/// Deprecated: renamed `shoal_map_put_if_present` (this name stays for one release).
///
/// # Safety
/// As `shoal_map_put_if_present`.
#[no_mangle]
#[deprecated(since = "0.2.0", note = "renamed shoal_map_put_if_present")]
pub unsafe extern "C" fn shoal_map_replace(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_present(map, key, key_len, value, value_len) }
}

/// Removes `key`, optionally copying its old value out.
///
/// * `old_len`: NULL to just remove; otherwise receives the old value's length (0 when
///   the key was absent), and up to `old_cap` bytes of the old value are copied to
///   `old_buf`. The removal happens whatever the buffer's size: if `*old_len > old_cap`
///   the copy was truncated to `old_cap` bytes (the status is still `SHOAL_OK`).
///
/// Returns `SHOAL_OK` (removed) or `SHOAL_NOT_FOUND` (the key was absent).
/// Errors: `SHOAL_INVALID` (key too large), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER` (`old_buf` NULL with `old_cap` > 0).
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `old_buf` is NULL or has `old_cap` writable bytes; `old_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_remove(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    old_buf: *mut c_void,
    old_cap: usize,
    old_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        if old_len.is_null() {
            return if m.remove(key)? {
                Ok(SHOAL_OK)
            } else {
                Err(absent())
            };
        }
        if old_buf.is_null() && old_cap > 0 {
            return Err(null("old_buf"));
        }
        match m.take(key)? {
            Some(v) => {
                let n = v.len().min(old_cap);
                // SAFETY: old_len is non-NULL and writable; old_buf has old_cap >= n
                // writable bytes (non-NULL when n > 0, checked above), disjoint from `v`.
                unsafe {
                    old_len.write(v.len());
                    if n > 0 {
                        std::ptr::copy_nonoverlapping(v.as_ptr(), old_buf as *mut u8, n);
                    }
                }
                Ok(SHOAL_OK)
            }
            None => {
                // SAFETY: non-NULL and writable.
                unsafe { old_len.write(0) };
                Err(absent())
            }
        }
    })
}

/// Removes `key` and passes its old value to `cb` (never truncated, unlike the buffer of
/// `shoal_map_remove`).
///
/// * `cb`: receives `ctx` and the old value (valid only during the call); not called
///   when the key was absent.
///
/// Returns `SHOAL_OK` (removed; cb was called) or `SHOAL_NOT_FOUND` (the key was
/// absent). Errors: as `shoal_map_remove`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `cb`
/// does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_take(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    cb: shoal_value_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        let v = m.take(key)?.ok_or_else(absent)?;
        let p = if v.is_empty() {
            std::ptr::null()
        } else {
            v.as_ptr() as *const c_void
        };
        // SAFETY: a C function pointer of the declared type; `v` outlives the call.
        unsafe { cb(ctx, p, v.len()) };
        Ok(SHOAL_OK)
    })
}

/// Tells whether `key` is present.
///
/// * `present`: receives the answer.
///
/// Errors: `SHOAL_INVALID` (key too large), `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `present` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_contains(
    map: *const shoal_map,
    key: *const c_void,
    key_len: usize,
    present: *mut bool,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::contains(map, key, key_len, present) }
}

/// The number of entries.
///
/// * `len`: receives it.
///
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_len(map: *const shoal_map, len: *mut u64) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::len(map, len) }
}

/// Removes every entry, one index segment at a time (other calls go on meanwhile).
///
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_clear(map: *const shoal_map) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::clear(map) }
}

/// Calls `cb` for each entry until it returns non-zero, with the consistency of
/// `shoal_iter_next` (every key present for the whole call is seen exactly once).
///
/// Returns `SHOAL_OK` when every entry was passed or `cb` stopped the walk.
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_for_each(
    map: *const shoal_map,
    cb: shoal_entry_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        let ptr = |b: &[u8]| {
            if b.is_empty() {
                std::ptr::null()
            } else {
                b.as_ptr() as *const c_void
            }
        };
        for e in m.iter() {
            let (k, v) = e?;
            // SAFETY: a C function pointer of the declared type; k and v outlive the call.
            if unsafe { cb(ctx, ptr(&k), k.len(), ptr(&v), v.len()) } != 0 {
                break;
            }
        }
        Ok(SHOAL_OK)
    })
}

/// Fills `out` with figures about the map and its store.
///
/// * `out`: set `out->struct_size = sizeof *out` first.
///
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_INVALID` (bad
/// `struct_size`), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `out` is NULL or has `out->struct_size` writable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_get_stats(
    map: *const shoal_map,
    out: *mut shoal_map_stats,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        let s = m.stats()?;
        let v = shoal_map_stats {
            struct_size: std::mem::size_of::<shoal_map_stats>(),
            entries: s.entries,
            live_bytes: s.live_bytes,
            segments: s.segments,
            splits: s.splits,
            directory_depth: s.directory_depth,
            store_dead_bytes: s.store_dead_bytes,
            store_data_bytes: s.store_data_bytes,
            file_size: s.file_size,
        };
        // SAFETY: forwarded contract.
        unsafe { write_versioned(out, v, "out") }?;
        Ok(SHOAL_OK)
    })
}
