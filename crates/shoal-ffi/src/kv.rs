//! The calls `shoal_map` and `shoal_fixed` share, written once over `shoal::KvMap`.
//!
//! Each exported symbol (`shoal_map_put`, `shoal_fixed_put`, ...) stays a function of its
//! own in its kind's module, with the documentation the header carries, and forwards
//! here: cbindgen reads the sources without expanding macros, so exported functions made
//! by a macro would be missing from `include/shoal.h`.
//!
//! Where the kinds differ, `KvMap::key_size` and `KvMap::value_size` say so: a fixed
//! map's key and value arguments must have exactly its sizes (`SHOAL_INVALID`, naming the
//! length argument), a variable map's any length the engine accepts.

use crate::*;
use shoal::KvMap;
use std::ffi::c_void;
use std::time::Duration;

/// A C handle on a map of some kind.
pub(crate) trait CMap: Sized {
    /// The engine's handle inside.
    type Map: KvMap;
    /// How a NULL handle argument is named in the error message.
    const ARG: &'static str;
    /// The engine's handle.
    fn map(&self) -> &Self::Map;
    /// A C handle on `map`.
    fn new(map: Self::Map) -> Self;
}

impl CMap for shoal_map {
    type Map = shoal::Map;
    const ARG: &'static str = "map";
    #[inline(always)]
    fn map(&self) -> &shoal::Map {
        &self.map
    }
    fn new(map: shoal::Map) -> Self {
        shoal_map { map }
    }
}

impl CMap for shoal_fixed {
    type Map = shoal::FixedMap;
    const ARG: &'static str = "fixed";
    #[inline(always)]
    fn map(&self) -> &shoal::FixedMap {
        &self.map
    }
    fn new(map: shoal::FixedMap) -> Self {
        shoal_fixed { map }
    }
}

/// The engine handle behind a C handle pointer.
///
/// # Safety
/// `p` is NULL or a live handle from its kind's open call.
#[inline(always)]
pub(crate) unsafe fn handle<'a, H: CMap + 'a>(p: *const H) -> Res<&'a H::Map> {
    if p.is_null() {
        return Err(null(H::ARG));
    }
    // SAFETY: a live handle (caller's contract); handles are only read through & refs.
    Ok(unsafe { (*p).map() })
}

/// Checks a length against the map's size for that kind of argument (`None`: any).
#[inline(always)]
pub(crate) fn exact(len: usize, size: Option<usize>, what: &'static str) -> Res<()> {
    match size {
        Some(size) if len != size => Err(wrong_len(len, size, what)),
        _ => Ok(()),
    }
}

#[cold]
fn wrong_len(len: usize, size: usize, what: &'static str) -> Fail {
    Fail::new(
        SHOAL_INVALID,
        format!("{what}: {len} bytes given; this map's are exactly {size}"),
    )
}

/// A key argument (`key`, `key_len`).
///
/// # Safety
/// As [`bytes`].
#[inline(always)]
pub(crate) unsafe fn key_arg<'a, M: KvMap>(m: &M, key: *const c_void, len: usize) -> Res<&'a [u8]> {
    exact(len, m.key_size(), "key_len")?;
    // SAFETY: forwarded contract.
    unsafe { bytes(key, len, "key") }
}

/// A value argument: the pointer `ptr` named `what`, its length named `len_what`.
///
/// # Safety
/// As [`bytes`].
#[inline(always)]
pub(crate) unsafe fn value_arg<'a, M: KvMap>(
    m: &M,
    ptr: *const c_void,
    len: usize,
    what: &'static str,
    len_what: &'static str,
) -> Res<&'a [u8]> {
    exact(len, m.value_size(), len_what)?;
    // SAFETY: forwarded contract.
    unsafe { bytes(ptr, len, what) }
}

pub(crate) fn absent() -> Fail {
    Fail::new(SHOAL_NOT_FOUND, "key not found")
}

/// Prefixes a failure's message with the batch item it is about.
#[cold]
pub(crate) fn item(i: usize, e: Fail) -> Fail {
    // SAFETY: the message is NUL-terminated and valid until the next failing call, which
    // is the Fail::new below (it is copied before).
    let msg = unsafe { std::ffi::CStr::from_ptr(shoal_last_error_message()) }
        .to_string_lossy()
        .into_owned();
    Fail::new(e.code, format!("item {i}: {msg}"))
}

/// The failure of an indexed batch of `n` items (`KvMap::put_many_indexed`): the item's
/// error, named after it, or the flush's after them.
#[cold]
fn batch_failure((i, e): (usize, shoal::Error), n: usize) -> Fail {
    if i < n {
        item(i, Fail::from(e))
    } else {
        Fail::from(e)
    }
}

/// The keys of a batch, each checked: non-NULL when not empty, and of the map's key size
/// (a failure names the item).
///
/// # Safety
/// `keys` is NULL or points to `n` `shoal_bytes`, each valid as for `bytes`.
unsafe fn batch_keys<'a, M: KvMap>(
    m: &M,
    keys: *const shoal_bytes,
    n: usize,
) -> Res<Vec<&'a [u8]>> {
    // SAFETY: forwarded contract.
    let ks = unsafe { key_slices(keys, n) }?;
    if let Some(size) = m.key_size() {
        for (i, k) in ks.iter().enumerate() {
            exact(k.len(), Some(size), "keys[i].len").map_err(|e| item(i, e))?;
        }
    }
    Ok(ks)
}

/// `shoal_*_close`.
///
/// # Safety
/// `h` is NULL or a live handle made by `Box::into_raw` in this crate, given back once
/// and in use by no other thread.
pub(crate) unsafe fn close<H: CMap>(h: *mut H) -> shoal_status {
    ffi(|| {
        if !h.is_null() {
            // SAFETY: made by Box::into_raw in this crate's open calls, given back exactly
            // once (caller's contract).
            drop(unsafe { Box::from_raw(h) });
        }
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_with_timeout`.
///
/// # Safety
/// `h` is NULL or a live handle; `out` is NULL or writable.
pub(crate) unsafe fn with_timeout<H: CMap>(
    h: *const H,
    timeout_ms: u32,
    out: *mut *mut H,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        let t = m.with_timeout(Duration::from_millis(timeout_ms as u64));
        let new = Box::into_raw(Box::new(H::new(t)));
        // SAFETY: as above.
        unsafe { out.write(new) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_contains`.
///
/// # Safety
/// `h` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes;
/// `present` is NULL or writable.
#[inline(always)]
pub(crate) unsafe fn contains<H: CMap>(
    h: *const H,
    key: *const c_void,
    key_len: usize,
    present: *mut bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        let present = out_ptr(present, "present")?;
        let r = m.contains(key)?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { present.write(r) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_put`.
///
/// # Safety
/// `h` is NULL or a live handle; `key`/`value` are NULL or have `key_len`/`value_len`
/// readable bytes; `replaced` is NULL or writable.
#[inline(always)]
pub(crate) unsafe fn put<H: CMap>(
    h: *const H,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    replaced: *mut bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        // SAFETY: forwarded contract.
        let value = unsafe { value_arg(m, value, value_len, "value", "value") }?;
        let o = m.put(key, value)?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(replaced, o == shoal::PutOutcome::Replaced) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_put_if_absent`: `SHOAL_EXISTS` when the key is present.
///
/// # Safety
/// As [`put`].
pub(crate) unsafe fn put_if_absent<H: CMap>(
    h: *const H,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        // SAFETY: forwarded contract.
        let value = unsafe { value_arg(m, value, value_len, "value", "value") }?;
        if m.put_if_absent(key, value)? {
            Ok(SHOAL_OK)
        } else {
            Err(Fail::new(SHOAL_EXISTS, "key already present"))
        }
    })
}

/// `shoal_*_put_if_present`: `SHOAL_NOT_FOUND` when the key is absent.
///
/// # Safety
/// As [`put`].
pub(crate) unsafe fn put_if_present<H: CMap>(
    h: *const H,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        // SAFETY: forwarded contract.
        let value = unsafe { value_arg(m, value, value_len, "value", "value") }?;
        if m.put_if_present(key, value)? {
            Ok(SHOAL_OK)
        } else {
            Err(absent())
        }
    })
}

/// `shoal_*_compare_and_swap`.
///
/// # Safety
/// `h` is NULL or a live handle; `key`, `expected` and `new_value` are NULL or have their
/// length in readable bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn compare_and_swap<H: CMap>(
    h: *const H,
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
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        if flags & !(SHOAL_CAS_EXPECT_ABSENT | SHOAL_CAS_REMOVE) != 0 {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("unknown compare-and-swap flags {flags:#x}"),
            ));
        }
        let expected = if flags & SHOAL_CAS_EXPECT_ABSENT != 0 {
            None
        } else {
            // SAFETY: forwarded contract.
            Some(unsafe { value_arg(m, expected, expected_len, "expected", "expected_len") }?)
        };
        let new = if flags & SHOAL_CAS_REMOVE != 0 {
            None
        } else {
            // SAFETY: forwarded contract.
            Some(unsafe { value_arg(m, new_value, new_len, "new_value", "new_len") }?)
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

/// `shoal_*_add`.
///
/// # Safety
/// `h` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `result`
/// is NULL or writable.
pub(crate) unsafe fn add<H: CMap>(
    h: *const H,
    key: *const c_void,
    key_len: usize,
    delta: i64,
    result: *mut i64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        let v = m.add(key, delta)?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(result, v) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_update`. A cancelled update (the callback returned neither
/// `SHOAL_UPDATE_SET` nor `SHOAL_UPDATE_REMOVE`, or a value of the wrong size or a NULL
/// one) returns the callback's failure and calls it no more.
///
/// # Safety
/// `h` is NULL or a live handle; `key` is NULL or has `key_len` readable bytes; `f`
/// follows the contract of `shoal_update_fn`.
pub(crate) unsafe fn update<H: CMap>(
    h: *const H,
    key: *const c_void,
    key_len: usize,
    f: shoal_update_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, key, key_len) }?;
        let f = f.ok_or_else(|| null("f"))?;
        let mut bad: Option<Fail> = None;
        // What the engine gets once the update is cancelled: in a map with a value size,
        // a value of another size, which `update` refuses before it writes anything and
        // without calling back again; otherwise the current value, which it installs
        // again unchanged.
        let keep = |cur: Option<&[u8]>| match m.value_size() {
            Some(n) => Some(vec![0; n + 1]),
            None => cur.map(<[u8]>::to_vec),
        };
        let r = m.update(key, |cur| {
            if bad.is_some() {
                return keep(cur);
            }
            let (p, n) = match cur {
                Some(c) => (ptr_of(c), c.len()),
                None => (std::ptr::null(), 0),
            };
            let mut out: *const c_void = std::ptr::null();
            let mut out_len: usize = 0;
            // SAFETY: a C function pointer of the declared type; `cur` outlives the call
            // and the out-pointers are valid locals.
            let rc = unsafe { f(ctx, p, n, cur.is_some(), &mut out, &mut out_len) };
            let new = match rc {
                SHOAL_UPDATE_SET => {
                    // SAFETY: the callback's contract: out_len readable bytes at out, valid
                    // until it is called again or this call returns; copied now.
                    unsafe { value_arg(m, out, out_len, "*new_value", "*new_len") }
                        .map(|b| Some(b.to_vec()))
                }
                SHOAL_UPDATE_REMOVE => Ok(None),
                other => Err(Fail::new(
                    SHOAL_INVALID,
                    format!("the update callback returned {other}: cancelled"),
                )),
            };
            new.unwrap_or_else(|e| {
                bad = Some(e);
                keep(cur)
            })
        });
        // The callback's failure first: the engine's error then is only the cancellation's.
        if let Some(e) = bad {
            return Err(e);
        }
        r?;
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_get_many`. Every key is checked before the first callback.
///
/// # Safety
/// `h` is NULL or a live handle; `keys` is NULL or points to `n` readable `shoal_bytes`
/// whose `data` are NULL or have `len` readable bytes; `cb` does not unwind.
pub(crate) unsafe fn get_many<H: CMap>(
    h: *const H,
    keys: *const shoal_bytes,
    n: usize,
    cb: shoal_many_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        // SAFETY: forwarded contract.
        let ks = unsafe { batch_keys(m, keys, n) }?;
        m.get_many_with(&ks, |i, v| {
            let (p, l) = v.map_or((std::ptr::null(), 0), |v| (ptr_of(v), v.len()));
            // SAFETY: a C function pointer of the declared type; `v` outlives the call.
            unsafe { cb(ctx, i, p, l, v.is_some()) };
        })?;
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_put_many`. Every item is checked before the first put; a failure names its
/// item.
///
/// # Safety
/// `h` is NULL or a live handle; `items` is NULL or points to `n` readable `shoal_kv`
/// whose pointers are NULL or have their length in readable bytes.
pub(crate) unsafe fn put_many<H: CMap>(
    h: *const H,
    items: *const shoal_kv,
    n: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        if n == 0 {
            return Ok(SHOAL_OK);
        }
        if items.is_null() {
            return Err(null("items"));
        }
        // SAFETY: n elements readable at items (caller's contract).
        let its = unsafe { std::slice::from_raw_parts(items, n) };
        let pairs = its
            .iter()
            .enumerate()
            .map(|(i, kv)| {
                // SAFETY: each element's contract is the caller's.
                let k = unsafe { key_arg(m, kv.key, kv.key_len) }.map_err(|e| item(i, e))?;
                // SAFETY: as above.
                let v = unsafe { value_arg(m, kv.value, kv.value_len, "value", "value") }
                    .map_err(|e| item(i, e))?;
                Ok((k, v))
            })
            .collect::<Res<Vec<(&[u8], &[u8])>>>()?;
        m.put_many_indexed(&pairs)
            .map_err(|e| batch_failure(e, n))?;
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_remove_many`. Every key is checked before the first removal; a failure names
/// its item.
///
/// # Safety
/// `h` is NULL or a live handle; `keys` as for [`get_many`]; `removed` is NULL or
/// writable.
pub(crate) unsafe fn remove_many<H: CMap>(
    h: *const H,
    keys: *const shoal_bytes,
    n: usize,
    removed: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        // SAFETY: forwarded contract.
        let ks = unsafe { batch_keys(m, keys, n) }?;
        let r = m
            .remove_many_indexed(&ks)
            .map_err(|e| batch_failure(e, n))?;
        // SAFETY: forwarded contract.
        unsafe { write_opt(removed, r) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_len`.
///
/// # Safety
/// `h` is NULL or a live handle; `len` is NULL or writable.
pub(crate) unsafe fn len<H: CMap>(h: *const H, len: *mut u64) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        let len = out_ptr(len, "len")?;
        let n = m.len()?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { len.write(n) };
        Ok(SHOAL_OK)
    })
}

/// `shoal_*_clear`.
///
/// # Safety
/// `h` is NULL or a live handle.
pub(crate) unsafe fn clear<H: CMap>(h: *const H) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(h) }?;
        m.clear()?;
        Ok(SHOAL_OK)
    })
}
