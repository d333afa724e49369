//! Queue sets: a pool of fixed-size elements in the store file and named queues that pass
//! them between processes by reference. Open (create or open existing), close, queue
//! index by name, pull (now, waiting, many), push (one, many), release (back where it came
//! from), move between queues, length, reclaim of dead holders' elements.
//!
//! A pulled element is a `shoal_element`: the address and length of its bytes in this
//! process's mapping, read and written in place (no copy) while this process holds it,
//! and its index, which every process shares. The library does not track which thread
//! holds what: a held element must be pushed or released exactly once, by one thread.

use crate::*;
use std::ffi::c_char;
use std::time::Duration;

/// Options for creating a queue set (`shoal_queue_open`). Zero-initialise, set
/// `struct_size`, `element_size`, `elements`; every other field left 0 takes its default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_queue_options {
    /// `sizeof(shoal_queue_options)` as the caller was compiled with. Required.
    pub struct_size: usize,
    /// Bytes per element, 1 to 2^30.
    pub element_size: usize,
    /// Elements in the set, 1 to 2^32 - 1 (zeroed at creation).
    pub elements: u64,
    /// `n_queues` NUL-terminated UTF-8 names (1 to 120 bytes each), or NULL. The set has
    /// a queue `free` first unless `initial` names another queue.
    pub queues: *const *const c_char,
    /// Entries in `queues` (and in `limits`).
    pub n_queues: usize,
    /// NULL, or the depth limit of each queue of `queues` (0: none): a push that would pass
    /// it fails with `SHOAL_QUEUE_FULL`.
    pub limits: *const u64,
    /// NULL (`free`), or the name of the queue every element starts in, which is also where
    /// a dead holder's elements go unless `redeliver` is set.
    pub initial: *const c_char,
    /// Non-zero: a dead holder's elements go back to the queue each was pulled from,
    /// marked redelivered.
    pub redeliver: u32,
}

// SAFETY: repr(C), starts with struct_size: usize; pointers and integers, every bit
// pattern a valid value (the pointers are only read as the contract of
// `shoal_queue_open` says).
unsafe impl Versioned for shoal_queue_options {}

impl Default for shoal_queue_options {
    fn default() -> Self {
        shoal_queue_options {
            struct_size: 0,
            element_size: 0,
            elements: 0,
            queues: std::ptr::null(),
            n_queues: 0,
            limits: std::ptr::null(),
            initial: std::ptr::null(),
            redeliver: 0,
        }
    }
}

/// An element this process holds (`shoal_queue_pull`...): `data` and `len` are its bytes in
/// place, this process's to read and write until it pushes or releases the element
/// (`shoal_queue_push`, `shoal_queue_release`); the address stays mapped while the store
/// is open.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_element {
    /// The element's first byte in this process (64-byte aligned).
    pub data: *mut u8,
    /// The element's size in bytes.
    pub len: usize,
    /// The element's index in its set: the same in every process.
    pub index: u64,
    /// The queue it was pulled from (its index, as `shoal_queue_index` gives it).
    pub from: u32,
    /// Non-zero if it is back in its queue because a process died holding it.
    pub redelivered: u32,
}

/// The queue set handle behind a pointer.
///
/// # Safety
/// `p` is NULL or a live handle from `shoal_queue_open`.
unsafe fn set_ref<'a>(p: *const shoal_queue) -> Res<&'a shoal::QueueSet> {
    if p.is_null() {
        return Err(null("queue set"));
    }
    // SAFETY: a live handle (caller's contract), only read through & refs.
    Ok(unsafe { &(*p).set })
}

fn queue(set: &shoal::QueueSet, q: u32) -> Res<shoal::Queue> {
    Ok(set.queue_at(q as usize)?)
}

/// Hands a pulled element (if one came) to C through `out`: `SHOAL_OK`, or `SHOAL_EMPTY`
/// with `*out` untouched.
///
/// # Safety
/// `out` is writable.
unsafe fn give(got: Option<shoal::Element<'_>>, out: *mut shoal_element) -> shoal_status {
    match got {
        Some(e) => {
            // SAFETY: writable (contract).
            unsafe { out.write(to_c(e)) };
            SHOAL_OK
        }
        None => SHOAL_EMPTY,
    }
}

/// An element as C sees it, leaving it held.
fn to_c(e: shoal::Element<'_>) -> shoal_element {
    let (data, len) = (e.as_ptr(), e.len());
    let h = e.into_held();
    shoal_element {
        data,
        len,
        index: h.index,
        from: h.from.index() as u32,
        redelivered: (h.redelivered) as u32,
    }
}

/// The element `e` names, which this process must hold.
///
/// # Safety
/// `e` is NULL or points to a readable `shoal_element`.
unsafe fn from_c<'a>(set: &'a shoal::QueueSet, e: *const shoal_element) -> Res<shoal::Element<'a>> {
    if e.is_null() {
        return Err(null("element"));
    }
    // SAFETY: non-NULL, readable by contract.
    let e = unsafe { *e };
    Ok(set.adopt(shoal::Held {
        index: e.index,
        from: set.queue_at(e.from as usize)?,
        redelivered: e.redelivered != 0,
    })?)
}

/// Opens the queue set `name` of a store, creating it with `opts` if `opts` is not NULL
/// and there is none; returns a handle on it. An existing set keeps its geometry and
/// queues (`opts` is then not compared with them).
///
/// Errors: `SHOAL_NOT_FOUND` (no such set and `opts` NULL), `SHOAL_INVALID` (bad name or
/// options, a map of that name, a store of a format that predates queue sets),
/// `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_TIMEOUT`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `opts` is NULL or
/// has `opts->struct_size` readable bytes, its `queues` `n_queues` NUL-terminated strings,
/// its `limits` NULL or `n_queues` readable values, its `initial` NULL or NUL-terminated;
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_open(
    store: *const shoal_store,
    name: *const c_char,
    opts: *const shoal_queue_options,
    out: *mut *mut shoal_queue,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let set = if opts.is_null() {
            s.open_queue_set(name)?
        } else {
            // SAFETY: forwarded contract.
            let o: shoal_queue_options = unsafe { read_versioned(opts, "opts") }?;
            let mut qo = shoal::QueueSetOptions::new(o.element_size, o.elements);
            if !o.initial.is_null() {
                // SAFETY: forwarded contract.
                qo = qo.initial(unsafe { c_str(o.initial, "opts.initial") }?);
            }
            if o.n_queues > 0 && o.queues.is_null() {
                return Err(null("opts.queues"));
            }
            for i in 0..o.n_queues {
                // SAFETY: `queues` holds `n_queues` string pointers (contract).
                let q = unsafe { c_str(*o.queues.add(i), "opts.queues[i]") }?;
                let limit = if o.limits.is_null() {
                    0
                } else {
                    // SAFETY: `limits` holds `n_queues` values (contract).
                    unsafe { *o.limits.add(i) }
                };
                qo = qo.queue_with_limit(q, limit);
            }
            s.queue_set(name, &qo.redeliver(o.redeliver != 0))?
        };
        let h = Box::into_raw(Box::new(shoal_queue { set }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Closes a queue set handle. Elements this process still holds stay held (until it
/// ends); their `data` pointers stay valid while the store is open. NULL is allowed.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `set` is NULL or a live handle, not used again after this call and not in use by
/// another thread during it.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_close(set: *mut shoal_queue) -> shoal_status {
    ffi(|| {
        if !set.is_null() {
            // SAFETY: a live handle from Box::into_raw, not used again (contract).
            drop(unsafe { Box::from_raw(set) });
        }
        Ok(SHOAL_OK)
    })
}

/// The index of the queue named `name` (what every other call takes).
///
/// Errors: `SHOAL_NOT_FOUND`, `SHOAL_INVALID` (not UTF-8), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `name` is NULL or NUL-terminated; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_index(
    set: *const shoal_queue,
    name: *const c_char,
    out: *mut u32,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let q = s.queue(name)?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(q.index() as u32) };
        Ok(SHOAL_OK)
    })
}

/// Takes the element at the head of queue `q`, waiting up to `timeout_ms` milliseconds
/// for a push from any process if it is empty (0: not at all): a short spin, then a
/// sleep that a push wakes.
///
/// Errors: `SHOAL_EMPTY` (no element came; `*out` untouched), `SHOAL_INVALID` (no such
/// queue), `SHOAL_NOT_FOUND` (the set was dropped), `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_pull(
    set: *const shoal_queue,
    q: u32,
    timeout_ms: u64,
    out: *mut shoal_element,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let q = queue(s, q)?;
        let got = if timeout_ms == 0 {
            s.pull(q)?
        } else {
            s.pull_wait(q, Duration::from_millis(timeout_ms))?
        };
        // SAFETY: non-NULL, writable by contract.
        Ok(unsafe { give(got, out) })
    })
}

/// Takes up to `max` elements from the head of queue `q` in one step, into `out`;
/// `*got` receives how many (0 when it is empty: still `SHOAL_OK`).
///
/// Errors: `SHOAL_INVALID`, `SHOAL_NOT_FOUND`, `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `out` is NULL or valid for `max` writes; `got` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_pull_many(
    set: *const shoal_queue,
    q: u32,
    out: *mut shoal_element,
    max: usize,
    got: *mut usize,
) -> shoal_status {
    ffi(|| {
        let got = out_ptr(got, "got")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { got.write(0) };
        if max > 0 && out.is_null() {
            return Err(null("out"));
        }
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let q = queue(s, q)?;
        let elems = s.pull_many(q, max)?;
        let n = elems.len();
        for (i, e) in elems.into_iter().enumerate() {
            // SAFETY: `out` holds `max` >= n slots (contract).
            unsafe { out.add(i).write(to_c(e)) };
        }
        // SAFETY: as above.
        unsafe { got.write(n) };
        Ok(SHOAL_OK)
    })
}

/// Puts the held element `e` at the tail of queue `q`; it is no longer this process's.
///
/// Errors: `SHOAL_QUEUE_FULL` (the queue is at its depth limit: `e` stays held),
/// `SHOAL_INVALID` (no such queue, or `e` is not an element this process holds),
/// `SHOAL_NOT_FOUND`, `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `e` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_push(
    set: *const shoal_queue,
    q: u32,
    e: *const shoal_element,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let q = queue(s, q)?;
        // SAFETY: forwarded contract.
        let el = unsafe { from_c(s, e) }?;
        match s.try_push(q, el) {
            Ok(()) => Ok(SHOAL_OK),
            Err((err, back)) => {
                // Still held: the caller decides what to do with it.
                back.into_held();
                Err(err.into())
            }
        }
    })
}

/// Puts the `n` held elements of `elems` at the tail of queue `q`, in order, in one step:
/// all of them, or (`SHOAL_QUEUE_FULL`) none, which then stay held.
///
/// Errors: `SHOAL_QUEUE_FULL`, `SHOAL_INVALID` (no such queue, an element this process
/// does not hold, or one given twice), `SHOAL_NOT_FOUND`, `SHOAL_TIMEOUT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `elems` is NULL or valid for `n` reads.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_push_many(
    set: *const shoal_queue,
    q: u32,
    elems: *const shoal_element,
    n: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let q = queue(s, q)?;
        if n == 0 {
            return Ok(SHOAL_OK);
        }
        if elems.is_null() {
            return Err(null("elems"));
        }
        let mut seen = std::collections::HashSet::with_capacity(n);
        let mut adopted: Vec<shoal::Element<'_>> = Vec::with_capacity(n);
        let mut fail = None;
        for i in 0..n {
            // SAFETY: `elems` holds `n` elements (contract).
            match unsafe { from_c(s, elems.add(i)) } {
                Ok(e) if seen.insert(e.index()) => adopted.push(e),
                Ok(e) => {
                    e.into_held();
                    fail = Some(Fail::new(
                        SHOAL_INVALID,
                        format!("elems[{i}] (element {}) given twice", elems_index(elems, i)),
                    ));
                    break;
                }
                Err(f) => {
                    fail = Some(f);
                    break;
                }
            }
        }
        if let Some(f) = fail {
            // Every element stays held: the caller still owns them all.
            for e in adopted {
                e.into_held();
            }
            return Err(f);
        }
        match s.try_push_many(q, adopted) {
            Ok(()) => Ok(SHOAL_OK),
            Err((err, back)) => {
                for e in back {
                    e.into_held();
                }
                Err(err.into())
            }
        }
    })
}

/// The index of `elems[i]` (for a message).
fn elems_index(elems: *const shoal_element, i: usize) -> u64 {
    // SAFETY: called only for an `i` below the `n` of `shoal_queue_push_many`'s contract.
    unsafe { (*elems.add(i)).index }
}

/// Gives the held element `e` back to the queue it was pulled from (past that queue's
/// depth limit if need be).
///
/// Errors: `SHOAL_INVALID` (not an element this process holds), `SHOAL_NOT_FOUND`,
/// `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `e` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_release(
    set: *const shoal_queue,
    e: *const shoal_element,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        // SAFETY: forwarded contract.
        let el = unsafe { from_c(s, e) }?;
        Ok(s.release(el).map(|_| SHOAL_OK)?)
    })
}

/// Moves up to `max` elements from the head of queue `from` to the tail of queue `to` in
/// one step, within `to`'s depth limit; `*moved` receives how many.
///
/// Errors: `SHOAL_INVALID` (no such queue, or `from` = `to`), `SHOAL_NOT_FOUND`,
/// `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `moved` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_move(
    set: *const shoal_queue,
    from: u32,
    to: u32,
    max: usize,
    moved: *mut usize,
) -> shoal_status {
    ffi(|| {
        let moved = out_ptr(moved, "moved")?;
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let n = s.move_to(queue(s, from)?, queue(s, to)?, max)?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { moved.write(n) };
        Ok(SHOAL_OK)
    })
}

/// Elements in queue `q` now.
///
/// Errors: `SHOAL_INVALID`, `SHOAL_NOT_FOUND`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_len(
    set: *const shoal_queue,
    q: u32,
    out: *mut u64,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let n = s.len(queue(s, q)?)?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(n) };
        Ok(SHOAL_OK)
    })
}

/// Hands back now the elements of every process that died holding some; `*returned`
/// (if not NULL) receives how many went back. Pulls do this on their own when they find
/// a queue empty.
///
/// Errors: `SHOAL_NOT_FOUND`, `SHOAL_TIMEOUT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `returned` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_reclaim(
    set: *const shoal_queue,
    returned: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let n = s.reclaim()?;
        // SAFETY: NULL or writable by contract.
        unsafe { write_opt(returned, n) };
        Ok(SHOAL_OK)
    })
}

/// Takes the element at the head of the first non-empty queue among the `n` queues of
/// `queues` (looked at in that order), waiting up to `timeout_ms` milliseconds for a push
/// to any of them if all are empty (0: not at all). `out->from` says which queue it came
/// from.
///
/// Errors: `SHOAL_EMPTY` (no element came; `*out` untouched), `SHOAL_INVALID` (no such
/// queue, or `n` is 0), `SHOAL_NOT_FOUND` (the set was dropped), `SHOAL_TIMEOUT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `queues` is NULL or has `n` readable entries; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_pull_any(
    set: *const shoal_queue,
    queues: *const u32,
    n: usize,
    timeout_ms: u64,
    out: *mut shoal_element,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        if queues.is_null() && n > 0 {
            return Err(null("queues"));
        }
        let qs: &[u32] = if n == 0 {
            &[]
        } else {
            // SAFETY: non-NULL with `n` readable entries (contract).
            unsafe { std::slice::from_raw_parts(queues, n) }
        };
        let qs = qs.iter().map(|q| queue(s, *q)).collect::<Res<Vec<_>>>()?;
        let got = s.pull_any(&qs, Duration::from_millis(timeout_ms))?;
        // SAFETY: non-NULL, writable by contract.
        Ok(unsafe { give(got, out) })
    })
}

/// A queue set's geometry (`shoal_queue_get_info`). Set `struct_size` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_queue_info {
    /// In: `sizeof(shoal_queue_info)` as the caller was compiled with. Out: the number of
    /// bytes the library filled in.
    pub struct_size: usize,
    /// Bytes per element.
    pub element_size: u64,
    /// Elements in the set.
    pub elements: u64,
    /// Queues in the set; their indexes are 0 to `queues - 1`, in the order of creation.
    pub queues: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s only.
unsafe impl Versioned for shoal_queue_info {}

/// Fills `*out` with the set's element size, element count and number of queues.
///
/// Errors: `SHOAL_INVALID` (`out->struct_size` not set), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `out` is NULL or has `out->struct_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_get_info(
    set: *const shoal_queue,
    out: *mut shoal_queue_info,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let v = shoal_queue_info {
            struct_size: std::mem::size_of::<shoal_queue_info>(),
            element_size: s.element_size() as u64,
            elements: s.elements(),
            queues: s.queue_names().len() as u64,
        };
        // SAFETY: forwarded contract.
        unsafe { write_versioned(out, v, "out") }?;
        Ok(SHOAL_OK)
    })
}

/// Copies the name of queue `q` into `buf` as a NUL-terminated string.
///
/// * `len`: receives the name's length, not counting the NUL, whatever the outcome.
///
/// Errors: `SHOAL_BUFFER_TOO_SMALL` when `cap < *len + 1` (nothing written to `buf`),
/// `SHOAL_INVALID` (no such queue), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `buf` is NULL or has `cap` writable bytes; `len` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_name(
    set: *const shoal_queue,
    q: u32,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let len = out_ptr(len, "len")?;
        let name = &s.queue_names()[queue(s, q)?.index()];
        // SAFETY: forwarded contract.
        unsafe { copy_out(name.as_bytes(), buf as *mut c_void, cap, len, true, "buf") }?;
        Ok(SHOAL_OK)
    })
}

/// Figures of one queue (`shoal_queue_get_stats`). Set `struct_size` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_queue_stats {
    /// In: `sizeof(shoal_queue_stats)` as the caller was compiled with. Out: the number of
    /// bytes the library filled in.
    pub struct_size: usize,
    /// Elements in the queue now.
    pub len: u64,
    /// Its depth limit (0: none).
    pub limit: u64,
    /// Elements pushed into it so far (moved in and handed back included).
    pub pushes: u64,
    /// Elements pulled from it so far (moved out included).
    pub pulls: u64,
    /// Times a pull slept waiting for it.
    pub waits: u64,
}

// SAFETY: repr(C), starts with struct_size: usize, then u64s only.
unsafe impl Versioned for shoal_queue_stats {}

/// Fills `*out` with the figures of queue `q`.
///
/// Errors: `SHOAL_INVALID` (no such queue, or `out->struct_size` not set),
/// `SHOAL_NOT_FOUND` (the set was dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `out` is NULL or has `out->struct_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_get_stats(
    set: *const shoal_queue,
    q: u32,
    out: *mut shoal_queue_stats,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let st = s.stats(queue(s, q)?)?;
        let v = shoal_queue_stats {
            struct_size: std::mem::size_of::<shoal_queue_stats>(),
            len: st.len,
            limit: st.limit,
            pushes: st.pushes,
            pulls: st.pulls,
            waits: st.waits,
        };
        // SAFETY: forwarded contract.
        unsafe { write_versioned(out, v, "out") }?;
        Ok(SHOAL_OK)
    })
}

/// A process that holds elements of a set (`shoal_queue_holders`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct shoal_queue_holder {
    /// The process's id.
    pub pid: u32,
    /// Reserved (0).
    pub reserved: u32,
    /// Elements it holds.
    pub elements: u64,
}

/// The processes that hold elements of the set now, with how many each: up to `cap` of
/// them into `out`; `*n` receives how many there are (also when more than `cap`).
///
/// Errors: `SHOAL_BUFFER_TOO_SMALL` (`*n > cap`: the first `cap` were written),
/// `SHOAL_NOT_FOUND` (the set was dropped), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `set` is NULL or a live handle; `out` is NULL or valid for `cap` writes; `n` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_queue_holders(
    set: *const shoal_queue,
    out: *mut shoal_queue_holder,
    cap: usize,
    n: *mut usize,
) -> shoal_status {
    ffi(|| {
        let n = out_ptr(n, "n")?;
        if out.is_null() && cap > 0 {
            return Err(null("out"));
        }
        // SAFETY: forwarded contract.
        let s = unsafe { set_ref(set) }?;
        let held = s.held()?;
        for (i, h) in held.iter().take(cap).enumerate() {
            // SAFETY: `out` is valid for `cap` > i writes (contract).
            unsafe {
                out.add(i).write(shoal_queue_holder {
                    pid: h.pid,
                    reserved: 0,
                    elements: h.elements,
                })
            };
        }
        // SAFETY: non-NULL, writable by contract.
        unsafe { n.write(held.len()) };
        if held.len() > cap {
            return Err(Fail::new(
                SHOAL_BUFFER_TOO_SMALL,
                format!("out: {} holders, room for {cap}", held.len()),
            ));
        }
        Ok(SHOAL_OK)
    })
}
