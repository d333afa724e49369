//! Fixed-size maps: every key has one size and every value has one size, stored as
//! cells in the index itself. Open (with options), close, get, contains, put,
//! put-if-absent, put-if-present, remove, compare-and-swap, add, update, batches
//! (get_many, put_many, remove_many), per-handle timeouts, len, clear, stats, iterators;
//! and `shoal_map_kind`. The calls variable-size maps have too forward to `kv`.
//!
//! A fixed-size map has a handle type of its own, `shoal_fixed`, rather than being a
//! `shoal_map` with a kind: its calls have a different contract (every key buffer is
//! exactly `key_size` bytes and every value buffer exactly `value_size` bytes, with no
//! needed-length protocol, no UIDs, no variable-length callbacks), so a distinct type
//! lets the compiler reject passing one kind of map to the other kind's calls instead of
//! failing at run time.

use crate::kv::{absent, key_arg, value_arg};
use crate::*;
use std::ffi::{c_char, c_void};

/// `shoal_map_kind`: a map of variable-size keys and values without UIDs
/// (`shoal_map_open`).
pub const SHOAL_MAP_KIND_VARIABLE: u32 = 1;
/// `shoal_map_kind`: a map of variable-size keys and values with a UID per key
/// (`shoal_map_open` with `shoal_map_options.uids = 1`).
pub const SHOAL_MAP_KIND_VARIABLE_UIDS: u32 = 2;
/// `shoal_map_kind`: a fixed-size map (`shoal_fixed_open`).
pub const SHOAL_MAP_KIND_FIXED: u32 = 3;
/// `shoal_map_kind`: an ordered map (`shoal_ordered_open`).
pub const SHOAL_MAP_KIND_ORDERED: u32 = 4;
/// The largest key of a fixed-size map, in bytes.
pub const SHOAL_FIXED_MAX_KEY_SIZE: usize = 512;
/// The largest value of a fixed-size map, in bytes.
pub const SHOAL_FIXED_MAX_VALUE_SIZE: usize = 128;

/// A named fixed-size map in a store (`shoal_fixed_open`): every key is exactly
/// `key_size` bytes (1 to `SHOAL_FIXED_MAX_KEY_SIZE`) and every value exactly
/// `value_size` bytes (0 to `SHOAL_FIXED_MAX_VALUE_SIZE`), stored as cells in the index buckets themselves (no records, values
/// updated in place; `shoal_fixed_add` on a present key takes no lock). Every key and
/// value buffer passed to its calls must be exactly that many bytes: any other length is
/// `SHOAL_INVALID`.
///
/// Thread safety: as `shoal_map` (any number of threads at once, except
/// `shoal_fixed_close`). The handle keeps its store mapped.
pub struct shoal_fixed {
    pub(crate) map: shoal::FixedMap,
}

/// Options for creating a fixed-size map (`shoal_fixed_open_with`). Zero-initialise, set
/// `struct_size`; every field left 0 takes its default. An existing map keeps the options
/// it was created with.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_fixed_options {
    /// `sizeof(shoal_fixed_options)` as the caller was compiled with. Required.
    pub struct_size: usize,
    /// Main buckets per index segment, 1..=4096. Default: segments of about 8 KiB (how
    /// many buckets that is depends on the cell size; see `shoal_fixed_stats`). Smaller
    /// segments fill and grow more often.
    pub segment_buckets: u32,
    /// Stash buckets per segment, for keys whose home bucket and its neighbours are full,
    /// 1..=1024. Default: a twelfth of the segment's buckets (a sixteenth in stores of
    /// format version 6; at least 2).
    pub stash_buckets: u32,
    /// The key type to record when the map is created, as `shoal_map_options.key_type`;
    /// `SHOAL_TYPE_I64`, `_U64` and `_F64` need 8-byte keys. Added after `stash_buckets`:
    /// a caller compiled with the older struct records none.
    pub key_type: u32,
    /// The value type to record; the numbers need 8-byte values.
    pub value_type: u32,
    /// With `key_type = SHOAL_TYPE_USER`: the application's tag; 0 otherwise.
    pub key_tag: u64,
    /// With `value_type = SHOAL_TYPE_USER`: the application's tag; 0 otherwise.
    pub value_tag: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then four u32 and two u64 (40 bytes on
// 64-bit targets: no padding), any bit pattern valid.
unsafe impl Versioned for shoal_fixed_options {}
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<shoal_fixed_options>() == 40);

/// Figures about one fixed-size map (`shoal_fixed_get_stats`). Set `struct_size` before
/// the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_fixed_stats {
    /// In: `sizeof(shoal_fixed_stats)` as the caller was compiled with. Out: the number
    /// of bytes the library filled in.
    pub struct_size: usize,
    /// Entries in the map.
    pub entries: u64,
    /// Key size in bytes.
    pub key_size: u64,
    /// Value size in bytes.
    pub value_size: u64,
    /// Bytes per cell (key, padding, value).
    pub cell_bytes: u64,
    /// Bytes per bucket.
    pub bucket_bytes: u64,
    /// Cells per bucket.
    pub cells_per_bucket: u64,
    /// Index segments.
    pub segments: u64,
    /// Bytes of the segments (cells, bucket headers, segment headers).
    pub segment_bytes: u64,
    /// Cells in all segments (the map's capacity before it next grows).
    pub capacity: u64,
    /// Growth steps so far: moves of a directory group to another segment (stores of
    /// format version 7), or segment splits (fixed maps of older stores).
    pub splits: u64,
    /// Global depth of the directory (it has 2^depth entries).
    pub directory_depth: u64,
    /// Size of the store file.
    pub file_size: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s only.
unsafe impl Versioned for shoal_fixed_stats {}

/// An iteration over a fixed-size map's entries (`shoal_fixed_iter_open`), with the
/// consistency of `shoal_iter`: every key present for the whole iteration is returned
/// exactly once. Used by one thread at a time; it holds its own reference to the map.
pub struct shoal_fixed_iter {
    inner: shoal::FixedIter,
    key_size: usize,
    value_size: usize,
}

/// The fixed map handle behind a pointer.
///
/// # Safety
/// `p` is NULL or a live handle from `shoal_fixed_open`.
#[inline(always)]
pub(crate) unsafe fn fixed_ref<'a>(p: *const shoal_fixed) -> Res<&'a shoal::FixedMap> {
    // SAFETY: forwarded contract.
    unsafe { kv::handle(p) }
}

/// Checks that a length is the map's size for that kind of buffer.
fn exact(len: usize, size: usize, what: &'static str) -> Res<()> {
    kv::exact(len, Some(size), what)
}

/// Opens the fixed-size map `name` of a store and returns a handle on it, with default
/// options for a newly created map (`shoal_fixed_open_with` with `opts` NULL).
///
/// * `name`: NUL-terminated UTF-8, 1 to `SHOAL_MAX_NAME_LEN` bytes.
/// * `key_size`: bytes per key, 1 to `SHOAL_FIXED_MAX_KEY_SIZE`.
/// * `value_size`: bytes per value, 0 to `SHOAL_FIXED_MAX_VALUE_SIZE`.
/// * `flags`: 0 or `SHOAL_MAP_CREATE` (create the map if it does not exist).
/// * `out`: receives the new handle (NULL on failure). Free it with `shoal_fixed_close`.
///
/// Errors: `SHOAL_NOT_FOUND` (no such map and no `SHOAL_MAP_CREATE`), `SHOAL_INVALID`
/// (bad name, unknown flags, sizes out of range, a map of that name exists with other
/// sizes or is a variable-size map), `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_TIMEOUT`,
/// `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_open(
    store: *const shoal_store,
    name: *const c_char,
    key_size: usize,
    value_size: usize,
    flags: u32,
    out: *mut *mut shoal_fixed,
) -> shoal_status {
    // SAFETY: forwarded contract (no options).
    unsafe {
        shoal_fixed_open_with(
            store,
            name,
            key_size,
            value_size,
            flags,
            std::ptr::null(),
            out,
        )
    }
}

/// Opens the fixed-size map `name` of a store and returns a handle on it; a newly
/// created map gets the options `opts`.
///
/// * `name`: NUL-terminated UTF-8, 1 to `SHOAL_MAX_NAME_LEN` bytes.
/// * `key_size`: bytes per key, 1 to `SHOAL_FIXED_MAX_KEY_SIZE`.
/// * `value_size`: bytes per value, 0 to `SHOAL_FIXED_MAX_VALUE_SIZE`.
/// * `flags`: 0 or `SHOAL_MAP_CREATE` (create the map if it does not exist).
/// * `opts`: NULL for defaults, or the options a newly created map gets (an existing
///   map keeps its own; they are still checked).
/// * `out`: receives the new handle (NULL on failure). Free it with `shoal_fixed_close`.
///
/// Errors: `SHOAL_NOT_FOUND` (no such map and no `SHOAL_MAP_CREATE`), `SHOAL_INVALID`
/// (bad name, unknown flags, sizes out of range, bad options: a `struct_size` below
/// `sizeof(size_t)`, a field out of range, or non-zero fields this library does not
/// know; a map of that name exists with other sizes or is a variable-size map),
/// `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `opts` is NULL or
/// has `opts->struct_size` readable bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_open_with(
    store: *const shoal_store,
    name: *const c_char,
    key_size: usize,
    value_size: usize,
    flags: u32,
    opts: *const shoal_fixed_options,
    out: *mut *mut shoal_fixed,
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
            shoal_fixed_options::default()
        } else {
            // SAFETY: forwarded contract.
            unsafe { read_versioned(opts, "opts") }?
        };
        // 0 is the default in both structs; the engine checks the ranges.
        let fo = shoal::FixedOptions {
            segment_buckets: o.segment_buckets,
            stash_buckets: o.stash_buckets,
            key_type: crate::types::from_code(o.key_type, o.key_tag, "key")?,
            value_type: crate::types::from_code(o.value_type, o.value_tag, "value")?,
        };
        let map = s.fixed_map_with(
            name,
            key_size,
            value_size,
            &fo,
            flags & SHOAL_MAP_CREATE != 0,
        )?;
        let h = Box::into_raw(Box::new(shoal_fixed { map }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Closes a fixed map handle (the map and its entries stay). NULL is allowed and does
/// nothing.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `fixed` is NULL or a live handle from `shoal_fixed_open`, not used again after this
/// call and not in use by another thread during it. Iterators opened on it stay valid.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_close(fixed: *mut shoal_fixed) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::close(fixed) }
}

/// The map's key and value sizes.
///
/// * `key_size`, `value_size`: NULL, or receive the sizes in bytes.
///
/// Errors: `SHOAL_NULL_POINTER` (`fixed`).
///
/// # Safety
/// `fixed` is NULL or a live handle; `key_size`/`value_size` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_sizes(
    fixed: *const shoal_fixed,
    key_size: *mut usize,
    value_size: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        // SAFETY: forwarded contract.
        unsafe {
            write_opt(key_size, m.key_size());
            write_opt(value_size, m.value_size());
        }
        Ok(SHOAL_OK)
    })
}

/// Copies the value of `key` into the caller's buffer.
///
/// * `key`, `key_len`: the key; `key_len` must be the map's key size.
/// * `buf`, `buf_len`: the caller's buffer; `buf_len` must be the map's value size.
///
/// Returns `SHOAL_OK` (the value is in `buf`) or `SHOAL_NOT_FOUND` (no such key; `buf`
/// is left as it was). Errors: `SHOAL_INVALID` (a length other than the map's sizes),
/// `SHOAL_NOT_FOUND` also when the map was dropped, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `buf` is NULL or has `buf_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_get(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    buf: *mut c_void,
    buf_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        exact(buf_len, m.value_size(), "buf_len")?;
        let dst: &mut [u8] = if buf_len == 0 {
            &mut []
        } else if buf.is_null() {
            return Err(null("buf"));
        } else {
            // SAFETY: non-NULL with buf_len writable bytes (caller's contract); buf_len is
            // the map's value size, far below isize::MAX.
            unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, buf_len) }
        };
        if m.get_into(key, dst)? {
            Ok(SHOAL_OK)
        } else {
            Err(absent())
        }
    })
}

/// Tells whether `key` is present.
///
/// * `present`: receives the answer.
///
/// Errors: `SHOAL_INVALID` (wrong key length), `SHOAL_NOT_FOUND` (the map was dropped),
/// `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `present` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_contains(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    present: *mut bool,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::contains(fixed, key, key_len, present) }
}

/// Inserts or replaces the value of `key`.
///
/// * `key_len`, `value_len`: must be the map's key and value sizes.
/// * `replaced`: NULL, or receives true if the key was present (its value replaced),
///   false if it was inserted.
///
/// Errors: `SHOAL_INVALID` (wrong lengths), `SHOAL_FULL`, `SHOAL_NO_SPACE`,
/// `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key`/`value` are NULL or have
/// `key_len`/`value_len` readable bytes; `replaced` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_put(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    replaced: *mut bool,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put(fixed, key, key_len, value, value_len, replaced) }
}

/// Inserts `key` only if it is absent.
///
/// Returns `SHOAL_OK` (inserted) or `SHOAL_EXISTS` (the key is present; nothing
/// changed). Errors: as `shoal_fixed_put`.
///
/// # Safety
/// As `shoal_fixed_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_put_if_absent(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_absent(fixed, key, key_len, value, value_len) }
}

/// Replaces the value of `key` only if it is present.
///
/// Returns `SHOAL_OK` (replaced) or `SHOAL_NOT_FOUND` (the key is absent; nothing
/// changed). Errors: as `shoal_fixed_put`.
///
/// # Safety
/// As `shoal_fixed_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_put_if_present(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_present(fixed, key, key_len, value, value_len) }
}

/// Deprecated: renamed `shoal_fixed_put_if_absent` (this name stays for one release).
///
/// # Safety
/// As `shoal_fixed_put_if_absent`.
#[no_mangle]
#[deprecated(since = "0.2.0", note = "renamed shoal_fixed_put_if_absent")]
pub unsafe extern "C" fn shoal_fixed_insert(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_absent(fixed, key, key_len, value, value_len) }
}

/// Deprecated: renamed `shoal_fixed_put_if_present` (this name stays for one release).
///
/// # Safety
/// As `shoal_fixed_put_if_present`.
#[no_mangle]
#[deprecated(since = "0.2.0", note = "renamed shoal_fixed_put_if_present")]
pub unsafe extern "C" fn shoal_fixed_replace(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_if_present(fixed, key, key_len, value, value_len) }
}

/// Removes `key`.
///
/// Returns `SHOAL_OK` (removed) or `SHOAL_NOT_FOUND` (the key was absent).
/// Errors: `SHOAL_INVALID` (wrong key length), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_remove(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        if m.remove(key)? {
            Ok(SHOAL_OK)
        } else {
            Err(absent())
        }
    })
}

/// The caller's value buffer of a fixed map call: NULL (the value is not wanted) or
/// exactly `value_size` writable bytes.
///
/// # Safety
/// `buf` is NULL or has `len` writable bytes.
unsafe fn out_arg<'a>(
    m: &shoal::FixedMap,
    buf: *mut c_void,
    len: usize,
) -> Res<Option<&'a mut [u8]>> {
    if buf.is_null() {
        return Ok(None);
    }
    exact(len, m.value_size(), "buf_len")?;
    if len == 0 {
        return Ok(Some(&mut []));
    }
    // SAFETY: non-NULL with len writable bytes (caller's contract); len is the map's value
    // size, far below isize::MAX.
    Ok(Some(unsafe {
        std::slice::from_raw_parts_mut(buf as *mut u8, len)
    }))
}

/// Inserts or replaces the value of `key`, and copies the previous value, if any, into
/// `old` (atomically: no other write comes between the two).
///
/// * `old`, `old_len`: NULL, or a buffer of exactly the map's value size; left as it
///   was when the key was absent.
/// * `replaced`: NULL, or receives whether the key was present.
///
/// Errors: as `shoal_fixed_put`, and `SHOAL_INVALID` for an `old_len` other than the
/// value size.
///
/// # Safety
/// As `shoal_fixed_put`; `old` is NULL or has `old_len` writable bytes; `replaced` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_swap(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    old: *mut c_void,
    old_len: usize,
    replaced: *mut bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        // SAFETY: forwarded contract.
        let value = unsafe { value_arg(m, value, value_len, "value", "value") }?;
        // SAFETY: forwarded contract.
        let out = unsafe { out_arg(m, old, old_len) }?;
        let prev = m.swap(key, value)?;
        if let (Some(out), Some(prev)) = (out, &prev) {
            out.copy_from_slice(prev);
        }
        // SAFETY: forwarded contract.
        unsafe { write_opt(replaced, prev.is_some()) };
        Ok(SHOAL_OK)
    })
}

/// Removes `key` and copies its value into `old`.
///
/// * `old`, `old_len`: NULL, or a buffer of exactly the map's value size.
///
/// Returns `SHOAL_OK` (removed; its value is in `old`) or `SHOAL_NOT_FOUND` (the key was
/// absent; `old` is left as it was). Errors: as `shoal_fixed_remove`, and `SHOAL_INVALID`
/// for an `old_len` other than the value size.
///
/// # Safety
/// As `shoal_fixed_remove`; `old` is NULL or has `old_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_take(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    old: *mut c_void,
    old_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        // SAFETY: forwarded contract.
        let out = unsafe { out_arg(m, old, old_len) }?;
        match m.take(key)? {
            Some(prev) => {
                if let Some(out) = out {
                    out.copy_from_slice(&prev);
                }
                Ok(SHOAL_OK)
            }
            None => Err(absent()),
        }
    })
}

/// Copies the value of `key` into `buf`, first inserting `default_value` if the key is
/// absent (atomically: of several racing callers, exactly one inserts).
///
/// * `default_value`, `default_len`: exactly the map's value size.
/// * `buf`, `buf_len`: NULL, or a buffer of exactly the map's value size; receives the
///   value the key has after the call.
///
/// Errors: as `shoal_fixed_put_if_absent`, and `SHOAL_INVALID` for a `buf_len` other than the
/// value size.
///
/// # Safety
/// As `shoal_fixed_put_if_absent`; `buf` is NULL or has `buf_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_get_or_insert(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    default_value: *const c_void,
    default_len: usize,
    buf: *mut c_void,
    buf_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        // SAFETY: forwarded contract.
        let default = unsafe {
            value_arg(
                m,
                default_value,
                default_len,
                "default_value",
                "default_value",
            )
        }?;
        // SAFETY: forwarded contract.
        let out = unsafe { out_arg(m, buf, buf_len) }?;
        let v = m.get_or_insert(key, default)?;
        if let Some(out) = out {
            out.copy_from_slice(&v);
        }
        Ok(SHOAL_OK)
    })
}

/// Atomically: if the current value of `key` is `expected` (or the key is absent, with
/// `SHOAL_CAS_EXPECT_ABSENT`), sets it to `new_value` (or removes it, with
/// `SHOAL_CAS_REMOVE`). Decided under the segment lock.
///
/// * `expected_len`, `new_len`: the map's value size (ignored, with their pointers, when
///   the corresponding flag is set).
/// * `flags`: 0, or `SHOAL_CAS_EXPECT_ABSENT` and/or `SHOAL_CAS_REMOVE`.
///
/// Returns `SHOAL_OK` (the value matched and was replaced) or `SHOAL_MISMATCH` (it did
/// not; nothing changed). Errors: `SHOAL_INVALID` (unknown flags, wrong lengths), and
/// those of `shoal_fixed_put`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key`, `expected` and `new_value` are NULL or have
/// their length in readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_compare_and_swap(
    fixed: *const shoal_fixed,
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
            fixed,
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
/// `key`; an absent key counts as 0 and is created. Lock-free on a present key.
///
/// * `result`: NULL, or receives the new value.
///
/// Errors: `SHOAL_INVALID` (wrong key length, or the map's values are not 8 bytes), and
/// those of `shoal_fixed_put`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `result` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_add(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    delta: i64,
    result: *mut i64,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::add(fixed, key, key_len, delta, result) }
}

/// Atomic read-modify-write: `f` computes the new value of `key` from the current one;
/// no other write to the key comes in between (if one does, `f` runs again on the newer
/// value). The value `f` returned last is the one installed.
///
/// * `key`, `key_len`: the key; `key_len` must be the map's key size.
/// * `f`: sees the current value (exactly the map's value size, NULL for 0-byte values;
///   `present` false and `current` NULL when the key is absent) and returns `SHOAL_UPDATE_SET` with
///   `*new_value` and `*new_len` set (`*new_len` must be the map's value size; the bytes
///   are copied before `f` is called again or this call returns), or
///   `SHOAL_UPDATE_REMOVE` to remove the key (or leave it absent). Any other return
///   value cancels the update. It follows the contract of `shoal_update_fn`: it may run
///   several times, with no lock held, so it must have no side effects beyond `ctx`, and
///   it must not unwind.
/// * `ctx`: passed to `f` as is.
///
/// A cancelled update, or a new value of the wrong size, changes nothing and returns at
/// once (`f` is not called again).
///
/// Returns `SHOAL_OK`. Errors: `SHOAL_INVALID` (`key_len` is not the map's key size, `f`
/// returned neither `SHOAL_UPDATE_SET` nor `SHOAL_UPDATE_REMOVE` — the message says
/// "cancelled" — or a `*new_len` other than the map's value size), `SHOAL_NULL_POINTER`
/// (`fixed`, `f`, `key` with a non-zero `key_len`, or a NULL `*new_value` with a
/// non-zero `*new_len`), `SHOAL_TIMEOUT` (retried for longer than the handle's lock
/// timeout), and those of `shoal_fixed_put`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `f`
/// follows the contract of `shoal_update_fn`.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_update(
    fixed: *const shoal_fixed,
    key: *const c_void,
    key_len: usize,
    f: shoal_update_fn,
    ctx: *mut c_void,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::update(fixed, key, key_len, f, ctx) }
}

/// Looks up `n` keys at once, prefetching their buckets so that their memory misses
/// overlap (faster per key than single gets on maps much larger than the cache), and
/// passes each result to `cb` in key order. Each lookup is individually consistent.
///
/// * `keys`, `n`: the keys; every `keys[i].len` must be the map's key size. `keys` may
///   be NULL when `n` is 0.
/// * `cb`: called once per key, in order, with `ctx`, the key's index and its value
///   (exactly the map's value size, NULL for 0-byte values, valid only during the call;
///   `present` false and `value` NULL when the key is absent). Every key is looked up
///   before the first call, so after an error `cb` was not called at all.
///
/// Errors: `SHOAL_INVALID` (a key of the wrong length; the message names the item),
/// `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER` (`fixed`, `cb`, `keys` with `n` > 0, a key's `data`).
///
/// # Safety
/// `fixed` is NULL or a live handle; `keys` is NULL or points to `n` readable
/// `shoal_bytes` whose `data` are NULL or have `len` readable bytes; `cb` does not
/// unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_get_many(
    fixed: *const shoal_fixed,
    keys: *const shoal_bytes,
    n: usize,
    cb: shoal_many_fn,
    ctx: *mut c_void,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::get_many(fixed, keys, n, cb, ctx) }
}

/// Puts `n` entries, one `shoal_fixed_put` after the other: each put is atomic on its
/// own; the batch is not (another thread may see some of the entries and not others).
/// NULL pointers and lengths other than the map's sizes are refused before anything is
/// written; otherwise the call stops at the first error (earlier entries stay written).
/// With sync writes, flushes once for the batch (also when it stops at an error). Faster
/// than the same puts one by one on a large map: the buckets and segment locks of the
/// puts a few entries ahead are loaded while one is written.
///
/// * `items`, `n`: the entries; every `key_len` and `value_len` must be the map's key
///   and value sizes. `items` may be NULL when `n` is 0.
///
/// Errors: as `shoal_fixed_put` (the message names the failing item).
///
/// # Safety
/// `fixed` is NULL or a live handle; `items` is NULL or points to `n` readable
/// `shoal_kv` whose pointers are NULL or have their length in readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_put_many(
    fixed: *const shoal_fixed,
    items: *const shoal_kv,
    n: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::put_many(fixed, items, n) }
}

/// Removes `n` keys, one `shoal_fixed_remove` after the other: each removal is atomic on
/// its own; the batch is not. NULL pointers and key lengths other than the map's key
/// size are refused before anything is removed; otherwise the call stops at the first
/// error (earlier keys stay removed). With sync writes, flushes once for the batch. Looks
/// ahead as `shoal_fixed_put_many` does.
///
/// * `keys`, `n`: the keys; every `keys[i].len` must be the map's key size. `keys` may
///   be NULL when `n` is 0.
/// * `removed`: NULL, or receives how many of the keys were present (left unchanged on
///   failure).
///
/// Errors: as `shoal_fixed_remove` (the message names the failing item).
///
/// # Safety
/// `fixed` is NULL or a live handle; `keys` as for `shoal_fixed_get_many`; `removed` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_remove_many(
    fixed: *const shoal_fixed,
    keys: *const shoal_bytes,
    n: usize,
    removed: *mut u64,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::remove_many(fixed, keys, n, removed) }
}

/// Opens a second handle on the same fixed-size map whose calls wait at most
/// `timeout_ms` for a lock held by a live process before failing with `SHOAL_TIMEOUT`
/// (`shoal_fixed_update` also gives up after retrying for that long). The store's
/// `lock_timeout_ms` applies to other handles.
///
/// * `timeout_ms`: the deadline, in milliseconds.
/// * `out`: receives the new handle (NULL on failure); close it with
///   `shoal_fixed_close`. It is independent of `fixed` (either may be closed first).
///
/// Errors: `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_with_timeout(
    fixed: *const shoal_fixed,
    timeout_ms: u32,
    out: *mut *mut shoal_fixed,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::with_timeout(fixed, timeout_ms, out) }
}

/// The number of entries.
///
/// * `len`: receives it.
///
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_len(fixed: *const shoal_fixed, len: *mut u64) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::len(fixed, len) }
}

/// Removes every entry, one index segment at a time (other calls go on meanwhile).
///
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_clear(fixed: *const shoal_fixed) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { kv::clear(fixed) }
}

/// Fills `out` with figures about the map.
///
/// * `out`: set `out->struct_size = sizeof *out` first.
///
/// Errors: `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_INVALID` (bad
/// `struct_size`), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `out` is NULL or has `out->struct_size` writable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_get_stats(
    fixed: *const shoal_fixed,
    out: *mut shoal_fixed_stats,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        let s = m.stats()?;
        let v = shoal_fixed_stats {
            struct_size: std::mem::size_of::<shoal_fixed_stats>(),
            entries: s.entries,
            key_size: s.key_size,
            value_size: s.value_size,
            cell_bytes: s.cell_bytes,
            bucket_bytes: s.bucket_bytes,
            cells_per_bucket: s.cells_per_bucket,
            segments: s.segments,
            segment_bytes: s.segment_bytes,
            capacity: s.capacity,
            splits: s.splits,
            directory_depth: s.directory_depth,
            file_size: s.file_size,
        };
        // SAFETY: forwarded contract.
        unsafe { write_versioned(out, v, "out") }?;
        Ok(SHOAL_OK)
    })
}

/// Starts an iteration over a fixed-size map.
///
/// * `out`: receives the iterator (NULL on failure). Free it with
///   `shoal_fixed_iter_close`.
///
/// Errors: `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `fixed` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_iter_open(
    fixed: *const shoal_fixed,
    out: *mut *mut shoal_fixed_iter,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let m = unsafe { fixed_ref(fixed) }?;
        let h = Box::into_raw(Box::new(shoal_fixed_iter {
            inner: m.iter(),
            key_size: m.key_size(),
            value_size: m.value_size(),
        }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Copies the next entry into the caller's buffers.
///
/// * `key_buf`, `key_len`: the key's buffer; `key_len` must be the map's key size.
/// * `value_buf`, `value_len`: the value's buffer; `value_len` must be the map's value
///   size, or 0 with `value_buf` NULL to skip values.
///
/// Returns `SHOAL_OK` (an entry was copied) or `SHOAL_DONE` (no more entries; again on
/// later calls). Errors: `SHOAL_INVALID` (wrong lengths; the entry is not consumed),
/// `SHOAL_NOT_FOUND` (the map was dropped), `SHOAL_CORRUPT`, `SHOAL_TOO_MANY`,
/// `SHOAL_NULL_POINTER`; an engine error ends the iteration (`SHOAL_DONE` afterwards).
///
/// # Safety
/// `iter` is NULL or a live iterator not in use by another thread; each buffer is NULL
/// or has its length in writable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_iter_next(
    iter: *mut shoal_fixed_iter,
    key_buf: *mut c_void,
    key_len: usize,
    value_buf: *mut c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        if iter.is_null() {
            return Err(null("iter"));
        }
        // SAFETY: a live iterator used by this thread only (caller's contract).
        let it = unsafe { &mut *iter };
        exact(key_len, it.key_size, "key_len")?;
        if key_buf.is_null() {
            return Err(null("key_buf"));
        }
        let skip_values = value_buf.is_null() && value_len == 0;
        if !skip_values {
            exact(value_len, it.value_size, "value_len")?;
            if value_buf.is_null() && value_len > 0 {
                return Err(null("value_buf"));
            }
        }
        let (k, v) = match it.inner.next() {
            None => return Err(Fail::new(SHOAL_DONE, "end of iteration")),
            Some(r) => r?,
        };
        // SAFETY: key_buf has key_len == k.len() writable bytes, value_buf (when values
        // are copied and non-empty) value_len == v.len(); the caller's, disjoint from k, v.
        unsafe {
            std::ptr::copy_nonoverlapping(k.as_ptr(), key_buf as *mut u8, k.len());
            if !skip_values && !v.is_empty() {
                std::ptr::copy_nonoverlapping(v.as_ptr(), value_buf as *mut u8, v.len());
            }
        }
        Ok(SHOAL_OK)
    })
}

/// Ends an iteration and frees the iterator. NULL is allowed and does nothing.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `iter` is NULL or a live iterator from `shoal_fixed_iter_open`, not used after this
/// call.
#[no_mangle]
pub unsafe extern "C" fn shoal_fixed_iter_close(iter: *mut shoal_fixed_iter) -> shoal_status {
    ffi(|| {
        if !iter.is_null() {
            // SAFETY: made by Box::into_raw in shoal_fixed_iter_open, given back once.
            drop(unsafe { Box::from_raw(iter) });
        }
        Ok(SHOAL_OK)
    })
}

/// Tells what kind of map `name` is, without opening it.
///
/// * `kind`: receives `SHOAL_MAP_KIND_VARIABLE`, `SHOAL_MAP_KIND_VARIABLE_UIDS`,
///   `SHOAL_MAP_KIND_FIXED` or `SHOAL_MAP_KIND_ORDERED` (0 on failure).
/// * `key_size`, `value_size`: NULL, or receive the sizes of a fixed-size map (0 for the
///   other kinds, and on failure).
///
/// Errors: `SHOAL_NOT_FOUND` (no such map), `SHOAL_INVALID` (bad name), `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER` (`store`, `name`, `kind`).
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `kind`,
/// `key_size` and `value_size` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_map_kind(
    store: *const shoal_store,
    name: *const c_char,
    kind: *mut u32,
    key_size: *mut usize,
    value_size: *mut usize,
) -> shoal_status {
    ffi(|| {
        let kind = out_ptr(kind, "kind")?;
        // SAFETY: non-NULL and writable / NULL or writable, by contract.
        unsafe {
            kind.write(0);
            write_opt(key_size, 0);
            write_opt(value_size, 0);
        }
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let k = s
            .map_kind(name)?
            .ok_or_else(|| Fail::new(SHOAL_NOT_FOUND, format!("no map {name:?}")))?;
        let (c, ks, vs) = match k {
            shoal::MapKind::Variable { uids: false } => (SHOAL_MAP_KIND_VARIABLE, 0, 0),
            shoal::MapKind::Variable { uids: true } => (SHOAL_MAP_KIND_VARIABLE_UIDS, 0, 0),
            shoal::MapKind::Fixed {
                key_size,
                value_size,
            } => (SHOAL_MAP_KIND_FIXED, key_size, value_size),
            shoal::MapKind::Ordered { .. } => (SHOAL_MAP_KIND_ORDERED, 0, 0),
            k => {
                return Err(Fail::new(
                    SHOAL_ERROR,
                    format!("map {name:?} is a {k}, which this C ABI has no kind code for"),
                ))
            }
        };
        // SAFETY: as above.
        unsafe {
            kind.write(c);
            write_opt(key_size, ks);
            write_opt(value_size, vs);
        }
        Ok(SHOAL_OK)
    })
}
