//! Ordered maps: keys kept sorted (bytewise), point calls, snapshots with range
//! iterators and exact range counts, and write transactions over one or several maps
//! that commit all or nothing. See the engine's `OrderedMap` and DESIGN.md, "Ordered
//! maps".
//!
//! Snapshots, their iterators and write transactions belong to the thread that made
//! them: the engine keeps a snapshot's pin and a transaction's locks in that thread's
//! slot of the store. Every call on them checks the calling thread and refuses another
//! one with `SHOAL_INVALID` rather than reading without a pin or writing under locks
//! it does not hold.

use crate::atomic::shoal_bytes;
use crate::store::store_ref;
use crate::*;
use shoal::{MultiWriteTxn, Nested, OrderedIter, OrderedMap, Snapshot};
use std::ffi::{c_char, c_void};
use std::rc::Rc;
use std::thread::ThreadId;

/// `shoal_ordered_range`, `shoal_ordered_snapshot_range` flag: iterate in descending
/// key order.
pub const SHOAL_ORDERED_REVERSE: u32 = 1;

/// The most bytes of key and value together a leaf of an ordered map keeps; a larger
/// value is kept out of line, in pages of its own (any size).
pub const SHOAL_MAX_ORDERED_ENTRY: usize = 1000;

/// The longest key of an ordered map (16 KiB), and the longest value of a multimap.
pub const SHOAL_MAX_ORDERED_KEY: usize = 16384;

/// `shoal_ordered_open` flag: a new map's keys are 8-byte little-endian unsigned
/// integers, sorted as numbers.
pub const SHOAL_ORDERED_U64_KEYS: u32 = 2;
/// `shoal_ordered_open` flag: a new map is a multimap (several sorted values per key).
pub const SHOAL_ORDERED_DUPS: u32 = 4;

/// An ordered map of a store (`shoal_ordered_open`): binary keys kept in bytewise order,
/// shared by every process that opens the store.
///
/// Thread safety: any number of threads may use one handle at once, except
/// `shoal_ordered_close`. The handle keeps its store mapped.
pub struct shoal_ordered {
    map: OrderedMap,
}

/// A snapshot and the map handle it borrows. Fields drop in order: the snapshot (which
/// releases its pin) before the map it refers to.
pub(crate) struct SnapHold {
    pub(crate) snap: Snapshot<'static>,
    _map: Box<OrderedMap>,
}

impl SnapHold {
    /// The snapshot, for a cursor kept beside the `Rc` that holds it.
    ///
    /// # Safety
    /// The reference must not outlive the `Rc<SnapHold>` it came from (whose contents
    /// never move): keep that `Rc` in the same struct, after the borrower.
    pub(crate) unsafe fn pinned(self: &Rc<Self>) -> &'static Snapshot<'static> {
        // SAFETY: the caller's contract.
        unsafe { &*(&self.snap as *const Snapshot<'static>) }
    }
}

/// A consistent view of an ordered map (`shoal_ordered_snapshot_open`): every read
/// through it sees the map as of one commit, whatever writers do meanwhile, and never
/// makes a writer wait.
///
/// Thread safety: used only by the thread that opened it (other threads get
/// `SHOAL_INVALID`). Iterators opened on it hold their own reference: closing the
/// snapshot before them is allowed.
pub struct shoal_ordered_snapshot {
    pub(crate) hold: Rc<SnapHold>,
    pub(crate) thread: ThreadId,
}

/// A range iteration over a snapshot (`shoal_ordered_range`,
/// `shoal_ordered_snapshot_range`), in key order or its reverse.
///
/// Thread safety: used only by the thread that opened it.
pub struct shoal_ordered_iter {
    /// The engine's iterator (a cursor at each end, which keeps a multimap's values of
    /// one key together and steps integer keys as numbers); None once done. Declared
    /// before `_hold`: it borrows the snapshot, so it must drop first.
    it: Option<OrderedIter<'static>>,
    _hold: Rc<SnapHold>,
    thread: ThreadId,
    rev: bool,
    /// The entry returned last: the pointers handed out point into it.
    current: Option<(Vec<u8>, Vec<u8>)>,
}

/// A write transaction over one or several ordered maps of a store
/// (`shoal_ordered_txn_begin`): its writes are seen by no one else until
/// `shoal_ordered_txn_commit`, and by everyone together then; `shoal_ordered_txn_abort`
/// (or a crash of its process) drops them all.
///
/// Thread safety: used only by the thread that began it.
pub struct shoal_ordered_txn {
    /// The open nested transactions, innermost last. Each borrows the one before (the
    /// first, `txn`), so they drop innermost first (`Drop`), and while one is open every
    /// write goes through the innermost.
    pub(crate) nested: Vec<Nested<'static, MultiWriteTxn<'static>>>,
    /// Boxed, so that the nested transactions' borrows never depend on where this
    /// struct is; declared before `maps`: it borrows them, so it must drop first.
    pub(crate) txn: Option<Box<MultiWriteTxn<'static>>>,
    /// Boxed one by one: the transaction's references stay valid whatever happens to the
    /// vector (the guarantee does not rest on never growing it).
    #[allow(clippy::vec_box)]
    _maps: Vec<Box<OrderedMap>>,
    thread: ThreadId,
    /// The cursors opened on the transaction hold weak references to it: a cursor used
    /// after the transaction ended finds it gone instead of following a freed pointer.
    pub(crate) alive: Rc<()>,
}

impl shoal_ordered_txn {
    /// The innermost open level: the transaction or its innermost nested transaction.
    pub(crate) fn w(&mut self) -> &mut MultiWriteTxn<'static> {
        if let Some(n) = self.nested.last_mut() {
            return n;
        }
        self.txn.as_deref_mut().expect("a live transaction")
    }
}

impl Drop for shoal_ordered_txn {
    fn drop(&mut self) {
        while self.nested.pop().is_some() {}
        self.txn = None;
    }
}

pub(crate) fn here() -> ThreadId {
    std::thread::current().id()
}

pub(crate) fn same_thread(t: ThreadId, what: &str) -> Res<()> {
    if t != here() {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("this {what} belongs to the thread that made it; use it only there"),
        ));
    }
    Ok(())
}

/// Frees a handle made by `Box::into_raw` that belongs to the thread `thread` names:
/// NULL is allowed; from another thread, `SHOAL_INVALID` and the handle stays.
///
/// # Safety
/// `p` is NULL or a live handle, not used again after `SHOAL_OK`.
pub(crate) unsafe fn close_bound<T>(
    p: *mut T,
    thread: impl FnOnce(&T) -> ThreadId,
    what: &str,
) -> shoal_status {
    ffi(|| {
        if p.is_null() {
            return Ok(SHOAL_OK);
        }
        // SAFETY: a live handle (contract).
        same_thread(thread(unsafe { &*p }), what)?;
        // SAFETY: made by Box::into_raw, given back once.
        drop(unsafe { Box::from_raw(p) });
        Ok(SHOAL_OK)
    })
}

/// # Safety
/// `p` is NULL or a live `shoal_ordered` handle.
pub(crate) unsafe fn omap<'a>(p: *const shoal_ordered) -> Res<&'a OrderedMap> {
    if p.is_null() {
        return Err(null("map"));
    }
    // SAFETY: a live handle (caller's contract).
    Ok(unsafe { &(*p).map })
}

/// A bound of a range: NULL for none.
///
/// # Safety
/// `p` is NULL or points to a `shoal_bytes` whose data is readable for its length.
pub(crate) unsafe fn bound(p: *const shoal_bytes, what: &'static str) -> Res<Option<Vec<u8>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, readable (caller's contract).
    let b = unsafe { *p };
    // SAFETY: forwarded contract.
    Ok(Some(unsafe { bytes(b.data, b.len, what) }?.to_vec()))
}

/// Opens the ordered map `name` of a store and returns a handle on it.
///
/// * `name`: NUL-terminated UTF-8, 1 to `SHOAL_MAX_NAME_LEN` bytes.
/// * `flags`: `SHOAL_MAP_CREATE` (create the map if it does not exist), and, for a map
///   it creates, `SHOAL_ORDERED_U64_KEYS` (keys are 8-byte little-endian unsigned
///   integers, sorted as numbers) and `SHOAL_ORDERED_DUPS` (a multimap: several sorted
///   values per key). An existing map opened with either of those must have been created
///   with the same ones (`SHOAL_INVALID` otherwise); opened with neither, it is what it
///   was made.
/// * `out`: receives the new handle (NULL on failure). Free it with `shoal_ordered_close`.
///
/// Errors: `SHOAL_NOT_FOUND` (no such map and no `SHOAL_MAP_CREATE`), `SHOAL_INVALID`
/// (an object of another kind has that name, a bad name, unknown flags, a store whose
/// format predates ordered maps), `SHOAL_FULL` (the store holds its maximum of 63
/// ordered maps), `SHOAL_READ_ONLY`, `SHOAL_TIMEOUT`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `name` is NULL or NUL-terminated; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_open(
    store: *const shoal_store,
    name: *const c_char,
    flags: u32,
    out: *mut *mut shoal_ordered,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable by contract.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        // SAFETY: forwarded contract.
        let name = unsafe { c_str(name, "name") }?;
        let forms = SHOAL_ORDERED_U64_KEYS | SHOAL_ORDERED_DUPS;
        if flags & !(SHOAL_MAP_CREATE | forms) != 0 {
            return Err(Fail::new(
                SHOAL_INVALID,
                format!("unknown map flags {flags:#x}"),
            ));
        }
        // An object of another kind by that name gets the engine's error (it names the
        // kind); only a missing name without the create flag stops here.
        if s.map_kind(name)?.is_none() && flags & SHOAL_MAP_CREATE == 0 {
            return Err(Fail::new(
                SHOAL_NOT_FOUND,
                format!("no ordered map {name:?} (pass SHOAL_MAP_CREATE to create it)"),
            ));
        }
        let map = if flags & forms == 0 {
            s.ordered_map(name)?
        } else {
            let opts = shoal::OrderedOptions {
                u64_keys: flags & SHOAL_ORDERED_U64_KEYS != 0,
                duplicates: flags & SHOAL_ORDERED_DUPS != 0,
            };
            s.ordered_map_with(name, &opts)?
        };
        // SAFETY: as above.
        unsafe { out.write(Box::into_raw(Box::new(shoal_ordered { map }))) };
        Ok(SHOAL_OK)
    })
}

/// Calls `cb` once for each ordered map of the store with its name (in no particular
/// order), until `cb` returns non-zero. (`shoal_store_maps` lists the hash maps.)
///
/// Errors: `SHOAL_CORRUPT`, `SHOAL_TOO_MANY`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_store_ordered_maps(
    store: *const shoal_store,
    cb: shoal_text_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        for name in s.ordered_maps()? {
            let len = name.len();
            let c = std::ffi::CString::new(name)
                .map_err(|_| Fail::new(SHOAL_CORRUPT, "map name with NUL"))?;
            // SAFETY: a C function pointer of the declared type; `c` outlives the call.
            if unsafe { cb(ctx, c.as_ptr(), len) } != 0 {
                break;
            }
        }
        Ok(SHOAL_OK)
    })
}

/// Closes an ordered map handle (the map and its entries stay). NULL is allowed.
/// Snapshots, iterators and transactions opened through it hold their own reference and
/// stay valid.
///
/// Errors: none (always `SHOAL_OK`).
///
/// # Safety
/// `map` is NULL or a live handle, not used again and not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_close(map: *mut shoal_ordered) -> shoal_status {
    ffi(|| {
        if !map.is_null() {
            // SAFETY: made by Box::into_raw in shoal_ordered_open, given back once.
            drop(unsafe { Box::from_raw(map) });
        }
        Ok(SHOAL_OK)
    })
}

pub(crate) fn absent() -> Fail {
    Fail::new(SHOAL_NOT_FOUND, "no such key")
}

/// # Safety
/// As `copy_out`; `len` non-NULL and writable.
unsafe fn give_value(v: &[u8], buf: *mut c_void, cap: usize, len: *mut usize) -> Res<()> {
    if buf.is_null() && cap > 0 {
        return Err(null("buf"));
    }
    // SAFETY: forwarded contract.
    unsafe { copy_out(v, buf, cap, len, false, "buf") }
}

/// Copies the value of `key` into the caller's buffer (the map as of the latest commit).
///
/// * `buf`, `cap`: the buffer and its size (`buf` may be NULL when `cap` is 0, to ask
///   for the length).
/// * `value_len`: receives the value's length when the key is present.
///
/// Returns `SHOAL_OK`, `SHOAL_NOT_FOUND` (no such key) or `SHOAL_BUFFER_TOO_SMALL`
/// (`*value_len > cap`; nothing copied). Errors: `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` NULL or readable for `key_len` bytes; `buf`
/// NULL or writable for `cap` bytes; `value_len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_get(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let value_len = out_ptr(value_len, "value_len")?;
        let v = m.get(key)?.ok_or_else(absent)?;
        // SAFETY: forwarded contract.
        unsafe { give_value(&v, buf, cap, value_len) }?;
        Ok(SHOAL_OK)
    })
}

/// The single-call writes, each a transaction of its own.
#[derive(Clone, Copy)]
enum Put {
    Upsert,
    IfAbsent,
    IfPresent,
}

/// # Safety
/// As `shoal_ordered_put`.
unsafe fn put_one(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    how: Put,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        match how {
            Put::Upsert => m.put(key, value)?,
            Put::IfAbsent if !m.put_if_absent(key, value)? => {
                return Err(Fail::new(SHOAL_EXISTS, "the key is present"))
            }
            Put::IfPresent if !m.put_if_present(key, value)? => return Err(absent()),
            _ => {}
        }
        Ok(SHOAL_OK)
    })
}

/// Sets `key` to `value` (insert or replace), committed at once.
///
/// Errors: `SHOAL_INVALID` (a key longer than `SHOAL_MAX_ORDERED_KEY`), `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_READ_ONLY`,
/// `SHOAL_TIMEOUT` (another writer of the map held it past the store's lock timeout),
/// `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` and `value` NULL or readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_put(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { put_one(map, key, key_len, value, value_len, Put::Upsert) }
}

/// Sets `key` to `value` only if `key` is absent.
///
/// Returns `SHOAL_OK` (inserted) or `SHOAL_EXISTS` (present; nothing changed).
/// Errors: as `shoal_ordered_put`.
///
/// # Safety
/// As `shoal_ordered_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_put_if_absent(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { put_one(map, key, key_len, value, value_len, Put::IfAbsent) }
}

/// Sets `key` to `value` only if `key` is present.
///
/// Returns `SHOAL_OK` (replaced) or `SHOAL_NOT_FOUND` (absent; nothing changed).
/// Errors: as `shoal_ordered_put`.
///
/// # Safety
/// As `shoal_ordered_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_put_if_present(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { put_one(map, key, key_len, value, value_len, Put::IfPresent) }
}

/// Removes `key`, committed at once.
///
/// Returns `SHOAL_OK` (removed) or `SHOAL_NOT_FOUND` (it was absent).
/// Errors: as `shoal_ordered_put`.
///
/// # Safety
/// `map` is NULL or a live handle; `key` NULL or readable for `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_remove(
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        if !m.remove(key)? {
            return Err(absent());
        }
        Ok(SHOAL_OK)
    })
}

/// Stores the number of entries in the map (as of the latest commit) in `*len`.
///
/// Errors: `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_len(
    map: *const shoal_ordered,
    len: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        let len = out_ptr(len, "len")?;
        let n = m.len()?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { len.write(n) };
        Ok(SHOAL_OK)
    })
}

/// Stores in `*count` the exact number of entries with `lo <= key < hi`, in time
/// logarithmic in the map's size.
///
/// * `lo`, `hi`: the bounds; NULL for none. (For an inclusive upper bound `k`, pass `k`
///   followed by a zero byte: it is the smallest key greater than `k`.)
///
/// Errors: as `shoal_ordered_len`.
///
/// # Safety
/// `map` is NULL or a live handle; `lo` and `hi` NULL or readable with their data
/// readable for their lengths; `count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_count_range(
    map: *const shoal_ordered,
    lo: *const shoal_bytes,
    hi: *const shoal_bytes,
    count: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        let count = out_ptr(count, "count")?;
        // SAFETY: forwarded contract.
        let (lo, hi) = unsafe { (bound(lo, "lo")?, bound(hi, "hi")?) };
        let n = m.count_range(lo.as_deref(), hi.as_deref())?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { count.write(n) };
        Ok(SHOAL_OK)
    })
}

/// The `n` maps of a C array (at least one), each cloned into a box, and `'static`
/// references to the boxes for an engine object that borrows them.
///
/// # Safety
/// `maps` is NULL or has `n` readable elements, each NULL or a live handle; the
/// references must not outlive the boxes.
#[allow(clippy::vec_box, clippy::type_complexity)] // each map boxed: borrows never depend on the vector
unsafe fn boxed_maps(
    maps: *const *const shoal_ordered,
    n: usize,
) -> Res<(Vec<Box<OrderedMap>>, Vec<&'static OrderedMap>)> {
    if maps.is_null() {
        return Err(null("maps"));
    }
    if n == 0 {
        return Err(Fail::new(SHOAL_INVALID, "n is 0: pass at least one map"));
    }
    let mut boxes = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < n readable elements, each NULL or live (contract).
        let m = unsafe { omap(*maps.add(i)) }.map_err(|f| kv::item(i, f))?;
        boxes.push(Box::new(m.clone()));
    }
    // SAFETY: a Box's contents never move; the caller drops the borrower first.
    let refs = boxes
        .iter()
        .map(|b| unsafe { &*(&**b as *const OrderedMap) })
        .collect();
    Ok((boxes, refs))
}

/// A snapshot of `map` bound to the map handle's clone it borrows.
fn hold_one(map: &OrderedMap) -> Res<Rc<SnapHold>> {
    let b = Box::new(map.clone());
    // SAFETY: the snapshot borrows the boxed map, which never moves (a Box's contents
    // stay put) and is dropped after it (SnapHold's field order).
    let r: &'static OrderedMap = unsafe { &*(&*b as *const OrderedMap) };
    let snap = r.snapshot()?;
    Ok(Rc::new(SnapHold { snap, _map: b }))
}

/// Opens a snapshot of the map as of its latest commit. It lasts until
/// `shoal_ordered_snapshot_close`: hold it only as long as needed (pages freed by later
/// commits are reused only after it ends; a process killed while holding one pins
/// nothing).
///
/// Errors: `SHOAL_TOO_MANY`, `SHOAL_READ_ONLY` (a snapshot's pin is a write to the store
/// file), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `map` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_open(
    map: *const shoal_ordered,
    out: *mut *mut shoal_ordered_snapshot,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        let hold = hold_one(m)?;
        let h = Box::into_raw(Box::new(shoal_ordered_snapshot {
            hold,
            thread: here(),
        }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Opens snapshots of `n` ordered maps of one store all as of the same commit: a
/// transaction over several of them is in every snapshot or in none.
///
/// * `maps`, `n`: the maps (at least one).
/// * `out`: an array of `n` that receives the snapshots, in the order of `maps` (all
///   NULL on failure). Close each with `shoal_ordered_snapshot_close`.
///
/// Errors: `SHOAL_INVALID` (`n` is 0, maps of different stores), and as
/// `shoal_ordered_snapshot_open`.
///
/// # Safety
/// `maps` is NULL or has `n` readable elements, each NULL or a live handle; `out` NULL
/// or has `n` writable elements.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_open_many(
    maps: *const *const shoal_ordered,
    n: usize,
    out: *mut *mut shoal_ordered_snapshot,
) -> shoal_status {
    ffi(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        for i in 0..n {
            // SAFETY: n writable elements (contract).
            unsafe { out.add(i).write(std::ptr::null_mut()) };
        }
        // SAFETY: forwarded contract; each snapshot borrows its own boxed map and is
        // dropped before it (SnapHold's field order).
        let (boxes, refs) = unsafe { boxed_maps(maps, n) }?;
        let snaps = refs[0].snapshot_with(&refs[1..])?;
        for (i, (snap, b)) in snaps.into_iter().zip(boxes).enumerate() {
            let h = shoal_ordered_snapshot {
                hold: Rc::new(SnapHold { snap, _map: b }),
                thread: here(),
            };
            // SAFETY: i < n writable elements (contract).
            unsafe { out.add(i).write(Box::into_raw(Box::new(h))) };
        }
        Ok(SHOAL_OK)
    })
}

/// # Safety
/// `p` is NULL or a live snapshot.
pub(crate) unsafe fn snap_ref<'a>(
    p: *const shoal_ordered_snapshot,
) -> Res<&'a shoal_ordered_snapshot> {
    if p.is_null() {
        return Err(null("snapshot"));
    }
    // SAFETY: a live handle (contract).
    let s = unsafe { &*p };
    same_thread(s.thread, "snapshot")?;
    Ok(s)
}

/// Ends a snapshot. NULL is allowed. Iterators opened on it keep its view until they
/// are closed.
///
/// Errors: `SHOAL_INVALID` (called from another thread than the one that opened it; the
/// snapshot stays open).
///
/// # Safety
/// `snap` is NULL or a live snapshot, not used again after `SHOAL_OK`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_close(
    snap: *mut shoal_ordered_snapshot,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { close_bound(snap, |s| s.thread, "snapshot") }
}

/// Copies the value of `key` as the snapshot has it. Returns and errors as
/// `shoal_ordered_get`, plus `SHOAL_INVALID` from another thread.
///
/// # Safety
/// `snap` is NULL or a live snapshot; the rest as `shoal_ordered_get`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_get(
    snap: *const shoal_ordered_snapshot,
    key: *const c_void,
    key_len: usize,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { snap_ref(snap) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let value_len = out_ptr(value_len, "value_len")?;
        let v = s.hold.snap.get(key)?.ok_or_else(absent)?;
        // SAFETY: forwarded contract.
        unsafe { give_value(&v, buf, cap, value_len) }?;
        Ok(SHOAL_OK)
    })
}

/// Stores the snapshot's number of entries in `*len` and, if `sequence` is not NULL,
/// the number of the commit it shows in `*sequence`.
///
/// Errors: `SHOAL_INVALID` (another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `snap` is NULL or a live snapshot; `len` and `sequence` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_len(
    snap: *const shoal_ordered_snapshot,
    len: *mut u64,
    sequence: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { snap_ref(snap) }?;
        let len = out_ptr(len, "len")?;
        // SAFETY: writable or NULL (contract).
        unsafe {
            len.write(s.hold.snap.len());
            write_opt(sequence, s.hold.snap.sequence());
        }
        Ok(SHOAL_OK)
    })
}

/// The exact number of entries with `lo <= key < hi` in the snapshot (NULL bounds: none).
///
/// Errors: `SHOAL_INVALID` (another thread), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// As `shoal_ordered_count_range`, with a live snapshot.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_count_range(
    snap: *const shoal_ordered_snapshot,
    lo: *const shoal_bytes,
    hi: *const shoal_bytes,
    count: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { snap_ref(snap) }?;
        let count = out_ptr(count, "count")?;
        // SAFETY: forwarded contract.
        let (lo, hi) = unsafe { (bound(lo, "lo")?, bound(hi, "hi")?) };
        let n = s.hold.snap.count_range(lo.as_deref(), hi.as_deref())?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { count.write(n) };
        Ok(SHOAL_OK)
    })
}

fn iter_of(
    hold: Rc<SnapHold>,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    flags: u32,
) -> Res<*mut shoal_ordered_iter> {
    if flags & !SHOAL_ORDERED_REVERSE != 0 {
        return Err(Fail::new(
            SHOAL_INVALID,
            format!("unknown range flags {flags:#x}"),
        ));
    }
    // SAFETY: the iterator is kept beside `hold`, declared before it.
    let it = unsafe { hold.pinned() }.iter(lo.as_deref(), hi.as_deref())?;
    Ok(Box::into_raw(Box::new(shoal_ordered_iter {
        it: Some(it),
        _hold: hold,
        thread: here(),
        rev: flags & SHOAL_ORDERED_REVERSE != 0,
        current: None,
    })))
}

/// Starts an iteration over the entries with `lo <= key < hi` of the snapshot (NULL
/// bounds: none), in key order, or descending with `SHOAL_ORDERED_REVERSE`. Read them
/// with `shoal_ordered_iter_next`; free the iterator with `shoal_ordered_iter_close`.
///
/// Errors: `SHOAL_INVALID` (unknown flags, another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `snap` is NULL or a live snapshot; `lo`, `hi` NULL or readable with their data;
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_snapshot_range(
    snap: *const shoal_ordered_snapshot,
    lo: *const shoal_bytes,
    hi: *const shoal_bytes,
    flags: u32,
    out: *mut *mut shoal_ordered_iter,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { snap_ref(snap) }?;
        // SAFETY: forwarded contract.
        let (lo, hi) = unsafe { (bound(lo, "lo")?, bound(hi, "hi")?) };
        let it = iter_of(s.hold.clone(), lo, hi, flags)?;
        // SAFETY: as above.
        unsafe { out.write(it) };
        Ok(SHOAL_OK)
    })
}

/// As `shoal_ordered_snapshot_range` over a snapshot of its own, taken now, which lasts
/// as long as the iterator.
///
/// Errors: as `shoal_ordered_snapshot_open` and `shoal_ordered_snapshot_range`.
///
/// # Safety
/// `map` is NULL or a live handle; the rest as `shoal_ordered_snapshot_range`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_range(
    map: *const shoal_ordered,
    lo: *const shoal_bytes,
    hi: *const shoal_bytes,
    flags: u32,
    out: *mut *mut shoal_ordered_iter,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // SAFETY: forwarded contract.
        let (lo, hi) = unsafe { (bound(lo, "lo")?, bound(hi, "hi")?) };
        let it = iter_of(hold_one(m)?, lo, hi, flags)?;
        // SAFETY: as above.
        unsafe { out.write(it) };
        Ok(SHOAL_OK)
    })
}

/// Moves to the next entry and points `*key`/`*value` at it (with their lengths).
///
/// The pointers stay valid until the next call on this iterator or its close; they may be
/// NULL when their length is 0. `value` and `value_len` may be NULL to skip the value.
///
/// Returns `SHOAL_OK` or `SHOAL_DONE` (no more entries; again on later calls). Errors:
/// `SHOAL_INVALID` (another thread), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`; an error ends
/// the iteration.
///
/// # Safety
/// `iter` is NULL or a live iterator; `key`, `key_len` NULL or writable; `value`,
/// `value_len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_iter_next(
    iter: *mut shoal_ordered_iter,
    key: *mut *const c_void,
    key_len: *mut usize,
    value: *mut *const c_void,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        if iter.is_null() {
            return Err(null("iter"));
        }
        // SAFETY: a live iterator (contract); the thread check follows.
        let it = unsafe { &mut *iter };
        same_thread(it.thread, "iterator")?;
        let key = out_ptr(key, "key")?;
        let key_len = out_ptr(key_len, "key_len")?;
        it.current = None;
        let rev = it.rev;
        let next = it
            .it
            .as_mut()
            .and_then(|i| if rev { i.next_back() } else { i.next() });
        let e = match next {
            Some(Ok(e)) => e,
            Some(Err(e)) => {
                it.it = None;
                return Err(e.into());
            }
            None => {
                it.it = None;
                return Err(Fail::new(SHOAL_DONE, "end of iteration"));
            }
        };
        let (k, v) = it.current.insert(e);
        let p = |b: &[u8]| {
            if b.is_empty() {
                std::ptr::null()
            } else {
                b.as_ptr() as *const c_void
            }
        };
        // SAFETY: non-NULL or optional, writable (contract).
        unsafe {
            key.write(p(k));
            key_len.write(k.len());
            write_opt(value, p(v));
            write_opt(value_len, v.len());
        }
        Ok(SHOAL_OK)
    })
}

/// Ends an iteration and frees the iterator. NULL is allowed.
///
/// Errors: `SHOAL_INVALID` (called from another thread; the iterator stays open).
///
/// # Safety
/// `iter` is NULL or a live iterator, not used again after `SHOAL_OK`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_iter_close(iter: *mut shoal_ordered_iter) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { close_bound(iter, |i| i.thread, "iterator") }
}

/// Begins a write transaction over `n` ordered maps of one store (their writer locks
/// are taken in one global order, so transactions over overlapping sets never deadlock;
/// one writer at a time per map, readers never wait). End it with
/// `shoal_ordered_txn_commit` or `shoal_ordered_txn_abort`, which free it.
///
/// Errors: `SHOAL_INVALID` (`n` is 0, maps of different stores), `SHOAL_TIMEOUT`
/// (another writer held a map past the store's lock timeout), `SHOAL_READ_ONLY`,
/// `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `maps` is NULL or has `n` readable elements, each NULL or a live handle; `out` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_begin(
    maps: *const *const shoal_ordered,
    n: usize,
    out: *mut *mut shoal_ordered_txn,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract; the transaction borrows the boxed maps and is
        // dropped before them (shoal_ordered_txn's Drop and field order).
        let (boxes, refs) = unsafe { boxed_maps(maps, n) }?;
        let txn = refs[0].write_with(&refs[1..])?;
        let h = Box::into_raw(Box::new(shoal_ordered_txn {
            nested: Vec::new(),
            txn: Some(Box::new(txn)),
            _maps: boxes,
            thread: here(),
            alive: Rc::new(()),
        }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// # Safety
/// `p` is NULL or a live transaction.
pub(crate) unsafe fn txn_mut<'a>(p: *mut shoal_ordered_txn) -> Res<&'a mut shoal_ordered_txn> {
    if p.is_null() {
        return Err(null("txn"));
    }
    // SAFETY: a live handle used by one thread (contract; checked next).
    let t = unsafe { &mut *p };
    same_thread(t.thread, "transaction")?;
    Ok(t)
}

/// The transaction and the map of a call in a write transaction, both checked.
///
/// # Safety
/// `txn` is NULL or a live transaction; `map` NULL or a live handle.
pub(crate) unsafe fn txn_map<'a>(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
) -> Res<(&'a mut shoal_ordered_txn, &'a OrderedMap)> {
    // SAFETY: forwarded contract.
    unsafe { Ok((txn_mut(txn)?, omap(map)?)) }
}

/// # Safety
/// As `shoal_ordered_txn_put`.
unsafe fn txn_put(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    how: Put,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let (t, m) = unsafe { txn_map(txn, map) }?;
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        match how {
            Put::Upsert => {
                t.w().put(m, key, value)?;
            }
            Put::IfAbsent if !t.w().put_if_absent(m, key, value)? => {
                return Err(Fail::new(SHOAL_EXISTS, "the key is present"))
            }
            Put::IfPresent if !t.w().put_if_present(m, key, value)? => return Err(absent()),
            _ => {}
        }
        Ok(SHOAL_OK)
    })
}

/// Sets `key` to `value` in `map` (one of the transaction's maps), seen by others only
/// once the transaction commits.
///
/// Errors: `SHOAL_INVALID` (a key longer than `SHOAL_MAX_ORDERED_KEY`, a map not in the
/// transaction, another thread), `SHOAL_FULL`, `SHOAL_NO_SPACE`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`. After an error other than `SHOAL_INVALID` or
/// `SHOAL_NULL_POINTER` the transaction can only be aborted (a commit fails).
///
/// # Safety
/// `txn` is NULL or a live transaction; `map` NULL or a live handle; `key` and `value`
/// NULL or readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_put(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { txn_put(txn, map, key, key_len, value, value_len, Put::Upsert) }
}

/// Sets `key` to `value` in `map` if `key` is absent (as the transaction sees it).
/// Returns `SHOAL_OK` or `SHOAL_EXISTS`. Errors: as `shoal_ordered_txn_put`.
///
/// # Safety
/// As `shoal_ordered_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_put_if_absent(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { txn_put(txn, map, key, key_len, value, value_len, Put::IfAbsent) }
}

/// Sets `key` to `value` in `map` if `key` is present (as the transaction sees it).
/// Returns `SHOAL_OK` or `SHOAL_NOT_FOUND`. Errors: as `shoal_ordered_txn_put`.
///
/// # Safety
/// As `shoal_ordered_txn_put`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_put_if_present(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { txn_put(txn, map, key, key_len, value, value_len, Put::IfPresent) }
}

/// Removes `key` from `map` in the transaction. Returns `SHOAL_OK` or `SHOAL_NOT_FOUND`
/// (absent as the transaction sees it). Errors: as `shoal_ordered_txn_put`.
///
/// # Safety
/// `txn` is NULL or a live transaction; `map` NULL or a live handle; `key` NULL or
/// readable for `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_remove(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let (t, m) = unsafe { txn_map(txn, map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        if !t.w().remove(m, key)? {
            return Err(absent());
        }
        Ok(SHOAL_OK)
    })
}

/// Copies the value of `key` in `map` as the transaction sees it (its own writes
/// included). Returns and errors as `shoal_ordered_get`, plus `SHOAL_INVALID` (a map not
/// in the transaction, another thread).
///
/// # Safety
/// `txn` is NULL or a live transaction; the rest as `shoal_ordered_get`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_get(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    key: *const c_void,
    key_len: usize,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let (t, m) = unsafe { txn_map(txn, map) }?;
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let value_len = out_ptr(value_len, "value_len")?;
        let v = t.w().get(m, key)?.ok_or_else(absent)?;
        // SAFETY: forwarded contract.
        unsafe { give_value(&v, buf, cap, value_len) }?;
        Ok(SHOAL_OK)
    })
}

/// Commits every write of the transaction, to every map, at once, and frees it (also on
/// failure, when nothing was committed). `sequence`, if not NULL, receives the commit's
/// number.
///
/// Errors: `SHOAL_INVALID` (another thread, or a nested transaction still open: the
/// transaction stays open), `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_TIMEOUT`,
/// `SHOAL_CORRUPT` (a write of it failed before: nothing committed),
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `txn` is NULL or a live transaction, not used again unless `SHOAL_INVALID` is
/// returned; `sequence` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_commit(
    txn: *mut shoal_ordered_txn,
    sequence: *mut u64,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract (checks the thread before taking ownership).
        if !unsafe { txn_mut(txn) }?.nested.is_empty() {
            return Err(Fail::new(
                SHOAL_INVALID,
                "a nested transaction is still open: commit or abort it before its parent",
            ));
        }
        // SAFETY: made by Box::into_raw, given back once.
        let mut t = unsafe { Box::from_raw(txn) };
        let w = t.txn.take().expect("a live transaction");
        let r = w.commit();
        drop(t);
        let seq = r?;
        // SAFETY: NULL or writable (contract).
        unsafe { write_opt(sequence, seq) };
        Ok(SHOAL_OK)
    })
}

/// Drops every write of the transaction and frees it. NULL is allowed.
///
/// Errors: `SHOAL_INVALID` (another thread; the transaction stays open).
///
/// # Safety
/// `txn` is NULL or a live transaction, not used again after `SHOAL_OK`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_abort(txn: *mut shoal_ordered_txn) -> shoal_status {
    ffi(|| {
        if txn.is_null() {
            return Ok(SHOAL_OK);
        }
        // SAFETY: forwarded contract.
        unsafe { txn_mut(txn) }?;
        // SAFETY: made by Box::into_raw, given back once; dropping aborts.
        drop(unsafe { Box::from_raw(txn) });
        Ok(SHOAL_OK)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_entry_limit_matches_the_engine() {
        assert_eq!(super::SHOAL_MAX_ORDERED_ENTRY, shoal::MAX_ORDERED_ENTRY);
        assert_eq!(super::SHOAL_MAX_ORDERED_KEY, shoal::MAX_ORDERED_KEY);
    }
}
