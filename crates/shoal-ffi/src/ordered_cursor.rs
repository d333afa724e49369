//! Ordered maps from C: cursors over a snapshot, and nested write transactions
//! (savepoints).

use crate::ordered::{
    close_bound, here, omap, same_thread, shoal_ordered_txn, snap_ref, txn_mut, SnapHold,
};
use crate::*;
use shoal::{CursorMoves, CursorPlace, OrderedCursor, OrderedMap, WriteCursor};
use std::ffi::c_void;
use std::rc::{Rc, Weak};
use std::thread::ThreadId;

/// A position in an ordered map's snapshot (`shoal_ordered_cursor_open`), or in a map
/// as a write transaction has it, its own writes included
/// (`shoal_ordered_txn_cursor_open`): it seeks, steps both ways, and says where it
/// stands. Each move returns `SHOAL_OK` when the cursor then stands on an entry,
/// `SHOAL_NOT_FOUND` when it stands on none. In a multimap each (key, value) pair is an
/// entry, in key order then value order.
///
/// After a move that returns `SHOAL_NOT_FOUND`, reposition the cursor (first, last or
/// a seek) before stepping with next or prev.
///
/// A cursor on a write transaction reads its innermost open nested transaction, and
/// stays usable across the transaction's writes: it then stands on its entry as they
/// left it or, if they removed it, in the gap it left (next goes to the entry after it,
/// prev to the one before). It writes at where it stands
/// (`shoal_ordered_cursor_put_current`, `shoal_ordered_cursor_remove_current`). Once the
/// transaction ends, every call on it but close is `SHOAL_INVALID`.
///
/// Thread safety: used only by the thread that opened it. A snapshot's cursor holds its
/// own reference to the snapshot: closing the snapshot first is allowed.
pub struct shoal_ordered_cursor {
    over: Over,
    thread: ThreadId,
}

/// What a cursor reads.
enum Over {
    Snap {
        /// Declared before `hold`: it borrows the snapshot, so it must drop first.
        c: OrderedCursor<'static>,
        _hold: Rc<SnapHold>,
    },
    Txn(TxnCursor),
}

/// A cursor on a write transaction: its place, taken up on the transaction at each call
/// (the transaction is written through its own handle between calls, which a borrow
/// held by the cursor would forbid).
struct TxnCursor {
    txn: *mut shoal_ordered_txn,
    /// Upgrades while the transaction lives.
    alive: Weak<()>,
    map: OrderedMap,
    place: Option<CursorPlace>,
}

impl TxnCursor {
    /// Runs `f` on the cursor taken up on the transaction's innermost level.
    fn with<R>(&mut self, f: impl FnOnce(&mut WriteCursor<'_, '_>) -> shoal::Result<R>) -> Res<R> {
        if self.alive.upgrade().is_none() {
            return Err(Fail::new(
                SHOAL_INVALID,
                "the write transaction of this cursor has ended",
            ));
        }
        // SAFETY: the transaction lives (its token upgrades: it is dropped with the
        // transaction) and is used by this thread only (checked in txn_mut); no other
        // reference to it is live during this call.
        let t = unsafe { txn_mut(self.txn) }?;
        let mut c = match self.place.take() {
            Some(p) => t.w().cursor_at(&self.map, p)?,
            None => t.w().cursor(&self.map)?,
        };
        let r = f(&mut c);
        self.place = Some(c.into_place());
        Ok(r?)
    }
}

impl shoal_ordered_cursor {
    /// Runs `f` on the cursor, whatever it reads.
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn CursorMoves) -> shoal::Result<R>) -> Res<R> {
        match &mut self.over {
            Over::Snap { c, .. } => Ok(f(c)?),
            Over::Txn(t) => t.with(|c| f(c)),
        }
    }

    /// The entry it stands on (for a transaction's cursor, as of its last call).
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        match &self.over {
            Over::Snap { c, .. } => c.entry(),
            Over::Txn(t) => t.place.as_ref().and_then(CursorPlace::entry),
        }
    }
}

/// Opens a cursor over a snapshot, standing on no entry until it moves. Free it with
/// `shoal_ordered_cursor_close`.
///
/// Errors: `SHOAL_INVALID` (another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `snap` is NULL or a live snapshot; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_open(
    snap: *const shoal_ordered_snapshot,
    out: *mut *mut shoal_ordered_cursor,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let s = unsafe { snap_ref(snap) }?;
        let hold = s.hold.clone();
        // SAFETY: the cursor is kept beside `hold`, declared before it.
        let c = unsafe { hold.pinned() }.cursor();
        let h = Box::into_raw(Box::new(shoal_ordered_cursor {
            over: Over::Snap { c, _hold: hold },
            thread: here(),
        }));
        // SAFETY: as above.
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// Opens a cursor over `map` as the write transaction `txn` has it (its own writes, and
/// those of its open nested transactions, included), standing on no entry until it
/// moves. The cursor functions (`shoal_ordered_cursor_*`) take it as they take a
/// snapshot's; it also writes at where it stands. Free it with
/// `shoal_ordered_cursor_close` (before or after the transaction ends).
///
/// Errors: `SHOAL_INVALID` (a map not in the transaction, another thread),
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `txn` is NULL or a live transaction; `map` NULL or a live handle; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_cursor_open(
    txn: *mut shoal_ordered_txn,
    map: *const shoal_ordered,
    out: *mut *mut shoal_ordered_cursor,
) -> shoal_status {
    ffi(|| {
        let out = out_ptr(out, "out")?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: forwarded contract.
        let t = unsafe { txn_mut(txn) }?;
        // SAFETY: forwarded contract.
        let m = unsafe { omap(map) }?;
        // A map outside the transaction is refused now rather than at the first move.
        t.w().cursor(m)?;
        let h = Box::into_raw(Box::new(shoal_ordered_cursor {
            over: Over::Txn(TxnCursor {
                txn,
                alive: Rc::downgrade(&t.alive),
                map: m.clone(),
                place: None,
            }),
            thread: here(),
        }));
        // SAFETY: non-NULL, writable (contract).
        unsafe { out.write(h) };
        Ok(SHOAL_OK)
    })
}

/// # Safety
/// `p` is NULL or a live cursor.
unsafe fn cur<'a>(p: *mut shoal_ordered_cursor) -> Res<&'a mut shoal_ordered_cursor> {
    if p.is_null() {
        return Err(null("cursor"));
    }
    // SAFETY: a live cursor (contract); the thread is checked next.
    let c = unsafe { &mut *p };
    same_thread(c.thread, "cursor")?;
    Ok(c)
}

/// Runs a move; `SHOAL_NOT_FOUND` when the cursor stands on no entry after it.
///
/// # Safety
/// `p` is NULL or a live cursor.
unsafe fn go(
    p: *mut shoal_ordered_cursor,
    f: impl FnOnce(&mut dyn CursorMoves) -> shoal::Result<bool>,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { cur(p) }?;
        on_entry(c.with(f)?)
    })
}

/// `SHOAL_OK` if a cursor stands (or stood, for a write at it) on an entry, else
/// `SHOAL_NOT_FOUND`.
fn on_entry(on: bool) -> Res<shoal_status> {
    if on {
        Ok(SHOAL_OK)
    } else {
        Err(Fail::new(SHOAL_NOT_FOUND, "the cursor stands on no entry"))
    }
}

/// Moves to the first entry. Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (the snapshot is
/// empty). Errors: `SHOAL_INVALID` (another thread), `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_first(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.first()) }
}

/// Moves to the last entry. Returns and errors as `shoal_ordered_cursor_first`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_last(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.last()) }
}

/// Moves to the next entry. Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (past the last).
/// Errors as `shoal_ordered_cursor_first`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_next(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.move_next()) }
}

/// Moves to the previous entry. Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (before the
/// first). Errors as `shoal_ordered_cursor_first`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_prev(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.move_prev()) }
}

/// How a seek places the cursor.
#[derive(Clone, Copy)]
enum Seek {
    Exact,
    Ge,
    Le,
}

/// # Safety
/// As `shoal_ordered_cursor_seek`.
unsafe fn seek(
    cursor: *mut shoal_ordered_cursor,
    key: *const c_void,
    key_len: usize,
    how: Seek,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: forwarded contract.
        let c = unsafe { cur(cursor) }?;
        let on = c.with(|c| match how {
            Seek::Exact => c.seek(key),
            Seek::Ge => c.seek_ge(key),
            Seek::Le => c.seek_le(key),
        })?;
        if on {
            Ok(SHOAL_OK)
        } else {
            Err(Fail::new(SHOAL_NOT_FOUND, "no such entry"))
        }
    })
}

/// Moves to `key` (in a multimap, its first value). Returns `SHOAL_OK` or
/// `SHOAL_NOT_FOUND` (absent: the cursor stands on no entry). Errors: `SHOAL_INVALID`
/// (a key of the wrong form, another thread), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `cursor` is NULL or a live cursor; `key` NULL or readable for `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_seek(
    cursor: *mut shoal_ordered_cursor,
    key: *const c_void,
    key_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { seek(cursor, key, key_len, Seek::Exact) }
}

/// Moves to the first entry whose key is at least `key` (in a multimap, that key's
/// first value). Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (every key is smaller).
/// Errors as `shoal_ordered_cursor_seek`.
///
/// # Safety
/// As `shoal_ordered_cursor_seek`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_seek_ge(
    cursor: *mut shoal_ordered_cursor,
    key: *const c_void,
    key_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { seek(cursor, key, key_len, Seek::Ge) }
}

/// Moves to the last entry whose key is at most `key` (in a multimap, that key's last
/// value). Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (every key is larger). Errors as
/// `shoal_ordered_cursor_seek`.
///
/// # Safety
/// As `shoal_ordered_cursor_seek`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_seek_le(
    cursor: *mut shoal_ordered_cursor,
    key: *const c_void,
    key_len: usize,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { seek(cursor, key, key_len, Seek::Le) }
}

/// Multimap: moves to the first value of the next key. Returns `SHOAL_OK` or
/// `SHOAL_NOT_FOUND` (no next key, or the cursor stood on no entry). Errors:
/// `SHOAL_INVALID` (a map without duplicates, another thread), `SHOAL_CORRUPT`,
/// `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_next_key(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.next_key()) }
}

/// Multimap: moves to the last value of the previous key. Returns and errors as
/// `shoal_ordered_cursor_next_key`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_prev_key(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.prev_key()) }
}

/// Multimap: moves to the next value of the same key. Returns `SHOAL_OK` or
/// `SHOAL_NOT_FOUND` (at the key's last value: the cursor stays there). Errors as
/// `shoal_ordered_cursor_next_key`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_next_value(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.next_value()) }
}

/// Multimap: moves to the previous value of the same key. Returns `SHOAL_OK` or
/// `SHOAL_NOT_FOUND` (at the key's first value: the cursor stays there). Errors as
/// `shoal_ordered_cursor_next_key`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_prev_value(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { go(cursor, |c| c.prev_value()) }
}

/// Multimap: moves to the pair (`key`, `value`), or, with `ge` true, to the first value
/// of `key` at least `value`. Returns
/// `SHOAL_OK` or `SHOAL_NOT_FOUND` (no such pair: the cursor stands on no entry).
/// Errors as `shoal_ordered_cursor_next_key`, plus a key and value too long together.
///
/// # Safety
/// `cursor` is NULL or a live cursor; `key` and `value` NULL or readable for their
/// lengths.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_seek_value(
    cursor: *mut shoal_ordered_cursor,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    ge: bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let (key, value) = unsafe { key_value(key, key_len, value, value_len) }?;
        // SAFETY: forwarded contract.
        let c = unsafe { cur(cursor) }?;
        let on = c.with(|c| {
            if ge {
                c.seek_value_ge(key, value)
            } else {
                c.seek_value(key, value)
            }
        })?;
        if on {
            Ok(SHOAL_OK)
        } else {
            Err(Fail::new(SHOAL_NOT_FOUND, "no such pair"))
        }
    })
}

/// Points `*key`/`*value` at the entry the cursor stands on (with their lengths; either
/// pair of out-parameters may be NULL to skip it). The pointers stay valid until the
/// cursor's next call or its close; they may be NULL when their length is 0. A cursor on
/// a write transaction reads its entry again first, as the transaction's writes since
/// its last call left it (`SHOAL_NOT_FOUND` if they removed it).
///
/// Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (on no entry). Errors: `SHOAL_INVALID`
/// (another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `cursor` is NULL or a live cursor; the out-parameters NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_get(
    cursor: *mut shoal_ordered_cursor,
    key: *mut *const c_void,
    key_len: *mut usize,
    value: *mut *const c_void,
    value_len: *mut usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { cur(cursor) }?;
        // A transaction's cursor reads its entry again, as the writes since left it.
        c.with(|_| Ok(()))?;
        let (k, v) = c
            .entry()
            .ok_or_else(|| Fail::new(SHOAL_NOT_FOUND, "the cursor stands on no entry"))?;
        let p = |b: &[u8]| {
            if b.is_empty() {
                std::ptr::null()
            } else {
                b.as_ptr() as *const c_void
            }
        };
        // SAFETY: NULL or writable (contract).
        unsafe {
            write_opt(key, p(k));
            write_opt(key_len, k.len());
            write_opt(value, p(v));
            write_opt(value_len, v.len());
        }
        Ok(SHOAL_OK)
    })
}

/// Stores where the cursor stands in `*position`: the number of entries before its
/// entry (0 for the first), in time logarithmic in the map's size. Returns `SHOAL_OK`
/// or `SHOAL_NOT_FOUND` (on no entry). Errors: `SHOAL_INVALID` (another thread),
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `cursor` is NULL or a live cursor; `position` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_position(
    cursor: *mut shoal_ordered_cursor,
    position: *mut u64,
) -> shoal_status {
    ffi(|| {
        let position = out_ptr(position, "position")?;
        // SAFETY: forwarded contract.
        let c = unsafe { cur(cursor) }?;
        let at = c
            .with(|c| c.position())?
            .ok_or_else(|| Fail::new(SHOAL_NOT_FOUND, "the cursor stands on no entry"))?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { position.write(at) };
        Ok(SHOAL_OK)
    })
}

/// Stores the number of values of the key the cursor stands on in `*count` (1 in a map
/// without duplicates; 0 on no entry).
///
/// Errors: `SHOAL_INVALID` (another thread), `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `cursor` is NULL or a live cursor; `count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_count_values(
    cursor: *mut shoal_ordered_cursor,
    count: *mut u64,
) -> shoal_status {
    ffi(|| {
        let count = out_ptr(count, "count")?;
        // SAFETY: forwarded contract.
        let n = unsafe { cur(cursor) }?.with(|c| c.count_values())?;
        // SAFETY: non-NULL, writable (contract).
        unsafe { count.write(n) };
        Ok(SHOAL_OK)
    })
}

/// The write transaction's cursor of `p`, for a write at it.
///
/// # Safety
/// `p` is NULL or a live cursor.
unsafe fn txn_cur<'a>(p: *mut shoal_ordered_cursor) -> Res<&'a mut TxnCursor> {
    // SAFETY: forwarded contract.
    match &mut unsafe { cur(p) }?.over {
        Over::Txn(t) => Ok(t),
        Over::Snap { .. } => Err(Fail::new(
            SHOAL_INVALID,
            "a snapshot's cursor does not write: open one on a write transaction",
        )),
    }
}

/// Sets the value of the entry the cursor stands on to `value`, in its write
/// transaction; the cursor stays on it (in a multimap, the pair with the old value gives
/// way to the pair with `value`, and the cursor stands on that). Returns `SHOAL_OK` or
/// `SHOAL_NOT_FOUND` (on no entry: nothing written).
///
/// Errors: `SHOAL_INVALID` (a snapshot's cursor, an ended transaction, a value too long
/// for a multimap's pair, another thread), and the errors of `shoal_ordered_txn_put`.
///
/// # Safety
/// `cursor` is NULL or a live cursor; `value` NULL or readable for `value_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_put_current(
    cursor: *mut shoal_ordered_cursor,
    value: *const c_void,
    value_len: usize,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let value = unsafe { bytes(value, value_len, "value") }?;
        // SAFETY: forwarded contract.
        let t = unsafe { txn_cur(cursor) }?;
        on_entry(t.with(|c| c.put_current(value))?)
    })
}

/// Removes the entry the cursor stands on, in its write transaction; the cursor then
/// stands in the gap it left (next goes to the entry after it, prev to the one before).
/// Returns `SHOAL_OK` or `SHOAL_NOT_FOUND` (on no entry: nothing removed).
///
/// Errors: as `shoal_ordered_cursor_put_current`.
///
/// # Safety
/// `cursor` is NULL or a live cursor.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_remove_current(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let t = unsafe { txn_cur(cursor) }?;
        on_entry(t.with(|c| c.remove_current())?)
    })
}

/// Frees a cursor (and its hold on the snapshot). NULL is allowed.
///
/// Errors: `SHOAL_INVALID` (another thread; the cursor stays open).
///
/// # Safety
/// `cursor` is NULL or a live cursor, not used again after `SHOAL_OK`.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_cursor_close(
    cursor: *mut shoal_ordered_cursor,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { close_bound(cursor, |c| c.thread, "cursor") }
}

/// Opens a nested transaction (a savepoint) inside the innermost open level of `txn`:
/// until it ends, the transaction's calls act in it; `shoal_ordered_txn_nested_commit`
/// keeps its writes (and markers) in its parent, `shoal_ordered_txn_nested_abort` undoes
/// them as if never made. Nested transactions nest again; the commit of `txn` needs
/// every nested one ended (`SHOAL_INVALID` otherwise); an abort of `txn` drops them.
///
/// Errors: `SHOAL_INVALID` (another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `txn` is NULL or a live transaction.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_nested_begin(
    txn: *mut shoal_ordered_txn,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let t = unsafe { txn_mut(txn) }?;
        let parent: *mut shoal::MultiWriteTxn<'static> = t.w();
        // SAFETY: `parent` is the boxed transaction (it never moves) or, through the
        // innermost nested guard, the same one; the new guard is dropped before that
        // guard and before the transaction (innermost first: shoal_ordered_txn's Drop),
        // and every use goes through the innermost guard while it lives.
        let guard = unsafe { (*parent).nested() };
        t.nested.push(guard);
        Ok(SHOAL_OK)
    })
}

/// # Safety
/// As `shoal_ordered_txn_nested_commit`.
unsafe fn end_nested(txn: *mut shoal_ordered_txn, keep: bool) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let t = unsafe { txn_mut(txn) }?;
        let g = t
            .nested
            .pop()
            .ok_or_else(|| Fail::new(SHOAL_INVALID, "no nested transaction is open"))?;
        if keep {
            g.commit();
        }
        Ok(SHOAL_OK)
    })
}

/// Ends the innermost nested transaction of `txn`, keeping its writes in its parent.
///
/// Errors: `SHOAL_INVALID` (none open, another thread), `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `txn` is NULL or a live transaction.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_nested_commit(
    txn: *mut shoal_ordered_txn,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { end_nested(txn, true) }
}

/// Ends the innermost nested transaction of `txn`, undoing its writes.
///
/// Errors: as `shoal_ordered_txn_nested_commit`.
///
/// # Safety
/// `txn` is NULL or a live transaction.
#[no_mangle]
pub unsafe extern "C" fn shoal_ordered_txn_nested_abort(
    txn: *mut shoal_ordered_txn,
) -> shoal_status {
    // SAFETY: forwarded contract.
    unsafe { end_nested(txn, false) }
}
