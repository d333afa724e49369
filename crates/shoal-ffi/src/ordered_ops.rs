//! Ordered maps from C, beyond point calls and ranges: compare-and-swap, range removal,
//! sorted appends, the map's sequence, the store's markers and a multimap's values.

use crate::atomic::{shoal_bytes, SHOAL_CAS_EXPECT_ABSENT, SHOAL_CAS_REMOVE};
use crate::ordered::{bound, omap, shoal_ordered, shoal_ordered_txn, txn_map, txn_mut};
use crate::store::store_ref;
use crate::*;
use std::ffi::c_void;

/// Atomically, in a transaction of its own: if the value of `key` is `expected` (or
/// `key` is absent, with `SHOAL_CAS_EXPECT_ABSENT`), sets it to `new_value` (or removes
/// it, with `SHOAL_CAS_REMOVE`).
///
/// Returns `SHOAL_OK` (it matched and was changed) or `SHOAL_MISMATCH` (nothing
/// changed). Errors: `SHOAL_INVALID` (unknown flags, a multimap, a key too long), and
/// those of `shoal_ordered_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key`, `expected` and `new_value` NULL or readable
/// for their lengths.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_compare_and_swap(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    expected: *const c_void,
    expected_len: usize,
    new_value: *const c_void,
    new_len: usize,
    flags: u32,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        if flags & !(SHOAL_CAS_EXPECT_ABSENT | SHOAL_CAS_REMOVE) != 0 {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("unknown compare-and-swap flags {flags:#x}"),
            ));
        }
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let expected = match flags & SHOAL_CAS_EXPECT_ABSENT {
            0 => Some(
                // SAFETY: forwarded contract.
                unsafe { bytes(expected, expected_len, "expected") }?,
            ),
            _ => None,
        };
        let new = match flags & SHOAL_CAS_REMOVE {
            0 => Some(
                // SAFETY: forwarded contract.
                unsafe { bytes(new_value, new_len, "new_value") }?,
            ),
            _ => None,
        };
        if m.compare_and_swap(key, expected, new)? {
            Ok(SHOAL_OK)
        } else {
            Err(Fail::new(
                SHOAL_MISMATCH,
                "the current value is not the expected one",
            ))
        }
    })
}

/// Removes every entry with `lo <= key < hi` (NULL: no bound), in a transaction of its
/// own, and stores how many in `*removed` (NULL: not wanted).
///
/// Errors: those of `shoal_ordered_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `lo` and `hi` NULL or readable `shoal_bytes` whose
/// data is readable for its length; `removed` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_remove_range(
    map: *const shoal_ordered,
    lo: *const shoal_bytes,
    hi: *const shoal_bytes,
    removed: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let (lo, hi) = unsafe { (bound(lo, "lo")?, bound(hi, "hi")?) };
        let n = m.remove_range(lo.as_deref(), hi.as_deref())?;
        if !removed.is_null() {
            // SAFETY: non-NULL, writable (caller's contract).
            unsafe { removed.write(n) };
        }
        Ok(SHOAL_OK)
    })
}

/// Adds `key` → `value` to `map` in the transaction, past the map's largest key (in a
/// multimap, its largest pair): a sorted bulk load, which fills pages to the brim.
///
/// Errors: `SHOAL_INVALID` (a key not above the largest, which leaves the transaction
/// usable; a key too long; a map not in the transaction; another thread), and those of
/// `shoal_ordered_txn_put`.
///
/// # Safety
/// As `shoal_ordered_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_append(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let (t, m) = unsafe { txn_map(txn, map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        t.w().append(m, key, value)?;
        Ok(SHOAL_OK)
    })
}

/// Stores `map`'s sequence (a persistent counter, 0 in a new map) as the transaction has
/// it in `*value`, then adds `n` to it: the commit keeps the sum, an abort drops it.
///
/// Errors: `SHOAL_INVALID` (the sum passes 2^64, a map not in the transaction, another
/// thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `txn` is NULL or a live transaction; `map` NULL or a live handle; `value` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_next_sequence(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    n: u64,
    value: *mut u64,
) -> shoal_status {
    ffi(|| {
        let value = out_ptr(value, "value")?;
        // SAFETY: forwarded contract.
        let (t, m) = unsafe { txn_map(txn, map) }?;
        let v = t.w().next_sequence(m, n)?;
        // SAFETY: non-NULL, writable (caller's contract).
        unsafe { value.write(v) };
        Ok(SHOAL_OK)
    })
}

/// Stores `map`'s sequence as of the latest commit in `*value`.
///
/// Errors: `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `value` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_sequence(
    map: *const shoal_ordered,
    value: *mut u64,
) -> shoal_status {
    ffi(|| {
        let value = out_ptr(value, "value")?;
        // SAFETY: forwarded contract.
        let v = unsafe { omap(map) }?.map_sequence()?;
        // SAFETY: non-NULL, writable (caller's contract).
        unsafe { value.write(v) };
        Ok(SHOAL_OK)
    })
}

/// Sets the store's marker `i` (below 14) to `v` when the transaction commits.
///
/// Errors: `SHOAL_INVALID` (`i` of no marker, another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `txn` is NULL or a live transaction.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_set_marker(
    txn: *mut shoal_ordered_txn,
    i: u64,
    v: u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let t = unsafe { txn_mut(txn) }?;
        t.w().set_marker(i, v)?;
        Ok(SHOAL_OK)
    })
}

/// Stores the store's marker `i` (below 14) in `*value`: 0 until a commit over ordered
/// maps sets it.
///
/// Errors: `SHOAL_INVALID` (`i` of no marker), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `value` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_ordered_marker(
    store: *const shoal_store,
    i: u64,
    value: *mut u64,
) -> shoal_status {
    ffi(|| {
        let value = out_ptr(value, "value")?;
        // SAFETY: forwarded contract.
        let v = unsafe { store_ref(store) }?.ordered_marker(i)?;
        // SAFETY: non-NULL, writable (caller's contract).
        unsafe { value.write(v) };
        Ok(SHOAL_OK)
    })
}

/// Calls `cb` with each value of `key`, in order (a multimap's; at most one in a map
/// without duplicates), all read from one snapshot, until `cb` returns non-zero; stores
/// how many values the key has in `*count` (NULL: not wanted).
///
/// Errors: `SHOAL_INVALID` (a key of the wrong form), `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` NULL or readable for `key_len`; `cb` NULL or a
/// function that does not unwind; `count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_values(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    cb: Option<unsafe extern "C" fn(ctx: *mut c_void, value: *const c_void, len: usize) -> i32>,
    ctx: *mut c_void,
    count: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let snap = m.snapshot()?;
        if let Some(cb) = cb {
            for v in snap.get_all(key)? {
                // SAFETY: `v` is readable for its length during the call; `cb` is a
                // function that does not unwind (caller's contract).
                if unsafe { cb(ctx, v.as_ptr().cast(), v.len()) } != 0 {
                    break;
                }
            }
        }
        if !count.is_null() {
            // SAFETY: non-NULL, writable (caller's contract).
            unsafe { count.write(snap.count_values(key)?) };
        }
        Ok(SHOAL_OK)
    })
}

/// Removes the pair (`key`, `value`) from a multimap (from a map without duplicates:
/// `key`, if its value is `value`), in a transaction of its own.
///
/// Returns `SHOAL_OK` (removed) or `SHOAL_NOT_FOUND` (no such pair). Errors: those of
/// `shoal_ordered_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` and `value` NULL or readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_remove_value(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        if !m.remove_value(key, value)? {
            return Err(crate::ordered::absent());
        }
        Ok(SHOAL_OK)
    })
}

/// Removes the pair (`key`, `value`) from `map` in the transaction. Returns `SHOAL_OK` or
/// `SHOAL_NOT_FOUND` (no such pair as the transaction sees it). Errors: as
/// `shoal_ordered_txn_put`.
///
/// # Safety
/// As `shoal_ordered_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_remove_value(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let (t, m) = unsafe { txn_map(txn, map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        if !t.w().remove_value(m, key, value)? {
            return Err(crate::ordered::absent());
        }
        Ok(SHOAL_OK)
    })
}
