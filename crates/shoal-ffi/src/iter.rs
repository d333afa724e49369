//! Iterators over a map's entries.

use crate::*;
use std::ffi::c_void;

/// An iteration over a map's entries, weakly consistent: every key present for the whole
/// iteration is returned exactly once, no key twice; keys added or removed meanwhile may
/// or may not appear. Entries are copied out a segment at a time.
///
/// Thread safety: an iterator is used by one thread at a time (it may move between
/// threads, but calls on it must not overlap). It holds its own reference to the map:
/// closing the map handle does not invalidate it.
pub struct shoal_iter {
    inner: Inner,
    /// An entry that did not fit the caller's buffers, returned again by the next call.
    pending: Option<(Vec<u8>, Vec<u8>)>,
}

enum Inner {
    Entries(shoal::Iter),
    Keys(shoal::Keys),
}

impl Inner {
    fn next(&mut self) -> Option<shoal::Result<(Vec<u8>, Vec<u8>)>> {
        match self {
            Inner::Entries(i) => i.next(),
            Inner::Keys(i) => i.next().map(|r| r.map(|k| (k, Vec::new()))),
        }
    }
}

/// Starts an iteration over a map.
///
/// * `flags`: 0 for keys and values, or `SHOAL_ITER_KEYS_ONLY`.
/// * `out`: receives the iterator (NULL on failure). Free it with `shoal_iter_close`.
///
/// Errors: `SHOAL_INVALID` (unknown flags), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_iter_open(
    map: *const shoal_map,
    flags: u32,
    out: *mut *mut shoal_iter,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let m = unsafe { map_ref(map) }?;
        if flags & !SHOAL_ITER_KEYS_ONLY != 0 {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("unknown iterator flags {flags:#x}"),
            ));
        }
        let inner = if flags & SHOAL_ITER_KEYS_ONLY != 0 {
            Inner::Keys(m.keys())
        } else {
            Inner::Entries(m.iter())
        };
        let h = Box::into_raw(Box::new(shoal_iter {
            inner,
            pending: None,
        }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Copies the next entry into the caller's buffers.
///
/// * `key_buf`, `key_cap`: buffer for the key (NULL allowed when `key_cap` is 0).
/// * `key_len`: receives the key's length.
/// * `value_buf`, `value_cap`, `value_len`: the same for the value; ignored (and may be
///   NULL) for a `SHOAL_ITER_KEYS_ONLY` iterator.
///
/// Returns `SHOAL_OK` (an entry was copied), `SHOAL_DONE` (no more entries; `SHOAL_DONE`
/// again on later calls), or `SHOAL_BUFFER_TOO_SMALL` (`*key_len > key_cap` or
/// `*value_len > value_cap`: nothing was copied and the entry was not consumed; call
/// again with buffers that large). Errors: `SHOAL_NOT_FOUND` (the map was dropped),
/// `SHOAL_CORRUPT`, `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_NULL_POINTER`; an error
/// ends the iteration (`SHOAL_DONE` afterwards).
///
/// # Safety
/// `iter` is NULL or a live iterator not in use by another thread; each buffer is NULL
/// or has its capacity in writable bytes; `key_len`/`value_len` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_iter_next(
    iter: *mut shoal_iter,
    key_buf: *mut c_void,
    key_cap: usize,
    key_len: *mut usize,
    value_buf: *mut c_void,
    value_cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        if iter.is_null() {
            return Err(null("iter"));
        }
        // SAFETY: a live iterator used by this thread only (caller's contract).
        let it = unsafe { &mut *iter };
        let keys_only = matches!(it.inner, Inner::Keys(_));
        let key_len = out_ptr(key_len, "key_len")?;
        if key_buf.is_null() && key_cap > 0 {
            return Err(null("key_buf"));
        }
        if !keys_only {
            out_ptr(value_len, "value_len")?;
            if value_buf.is_null() && value_cap > 0 {
                return Err(null("value_buf"));
            }
        }
        let (k, v) = match it.pending.take() {
            Some(e) => e,
            None => match it.inner.next() {
                None => return Err(Fail::new(SHOAL_DONE, "end of iteration")),
                Some(r) => r?,
            },
        };
        // SAFETY: key_len and (unless keys only) value_len are non-NULL and writable.
        unsafe {
            key_len.write(k.len());
            if !keys_only {
                value_len.write(v.len());
            }
        }
        if k.len() > key_cap || (!keys_only && v.len() > value_cap) {
            let msg = format!(
                "the entry needs {} key and {} value bytes; the buffers have {key_cap} and {}",
                k.len(),
                v.len(),
                if keys_only { 0 } else { value_cap }
            );
            it.pending = Some((k, v));
            return Err(Fail::new(SHOAL_BUFFER_TOO_SMALL, msg));
        }
        // SAFETY: the buffers are non-NULL when their length is non-zero (checked above)
        // and hold at least that many writable bytes; they are the caller's, disjoint from
        // k and v.
        unsafe {
            if !k.is_empty() {
                std::ptr::copy_nonoverlapping(k.as_ptr(), key_buf as *mut u8, k.len());
            }
            if !keys_only && !v.is_empty() {
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
/// `iter` is NULL or a live iterator from `shoal_iter_open`, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn shoal_iter_close(iter: *mut shoal_iter) -> shoal_status {
    ffi(|| {
        if !iter.is_null() {
            // SAFETY: made by Box::into_raw in shoal_iter_open, given back exactly once.
            drop(unsafe { Box::from_raw(iter) });
        }
        Ok(SHOAL_OK)
    })
}
