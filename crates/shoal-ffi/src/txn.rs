//! Multi-key transactions over fixed-size maps: an array of conditions, a *then* and an
//! *else* array of operations, committed as one atomic step with results per operation
//! (`shoal_txn_commit`); consistent multi-key reads (`shoal_snapshot_get`). See the
//! engine's `Store::transaction` and DESIGN.md, "Multi-key transactions".

use crate::atomic::{ptr_of, shoal_bytes, shoal_many_fn};
use crate::fixed::{fixed_ref, shoal_fixed};
use crate::kv::{key_arg, value_arg};
use crate::store::store_ref;
use crate::*;
use shoal::{Cond, FixedMap, IntCmp, TxnOp};
use std::ffi::c_void;

/// `shoal_txn_cond.kind`: the key is present.
pub const SHOAL_TXN_PRESENT: u32 = 1;
/// `shoal_txn_cond.kind`: the key is absent.
pub const SHOAL_TXN_ABSENT: u32 = 2;
/// `shoal_txn_cond.kind`: the key is present with exactly `value`.
pub const SHOAL_TXN_EQUALS: u32 = 3;
/// `shoal_txn_cond.kind`: the key is present and its value, a little-endian `int64_t`
/// (8-byte values only), compares with `operand` as `cmp` says.
pub const SHOAL_TXN_INT: u32 = 4;

/// `shoal_txn_cond.cmp`: value == operand.
pub const SHOAL_CMP_EQ: u32 = 1;
/// `shoal_txn_cond.cmp`: value != operand.
pub const SHOAL_CMP_NE: u32 = 2;
/// `shoal_txn_cond.cmp`: value < operand.
pub const SHOAL_CMP_LT: u32 = 3;
/// `shoal_txn_cond.cmp`: value <= operand.
pub const SHOAL_CMP_LE: u32 = 4;
/// `shoal_txn_cond.cmp`: value > operand.
pub const SHOAL_CMP_GT: u32 = 5;
/// `shoal_txn_cond.cmp`: value >= operand.
pub const SHOAL_CMP_GE: u32 = 6;

/// `shoal_txn_op.kind`: read the key (its value is the result); write nothing.
pub const SHOAL_TXN_GET: u32 = 1;
/// `shoal_txn_op.kind`: insert the key or replace its value with `value`.
pub const SHOAL_TXN_PUT: u32 = 2;
/// `shoal_txn_op.kind`: insert the key with `value` if absent.
pub const SHOAL_TXN_PUT_IF_ABSENT: u32 = 3;
/// `shoal_txn_op.kind`: replace the key's value with `value` if present.
pub const SHOAL_TXN_PUT_IF_PRESENT: u32 = 4;
/// `shoal_txn_op.kind`: remove the key if present.
pub const SHOAL_TXN_REMOVE: u32 = 5;
/// `shoal_txn_op.kind`: add `delta` (wrapping) to the key's little-endian `int64_t` value
/// (8-byte values only); an absent key counts as 0 and is created.
pub const SHOAL_TXN_ADD: u32 = 6;

/// A condition of `shoal_txn_commit`, on one key of a fixed-size map.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_txn_cond {
    /// The map (of the store the transaction is committed on).
    pub map: *const shoal_fixed,
    /// The key: exactly the map's key size.
    pub key: *const c_void,
    /// The key's length.
    pub key_len: usize,
    /// `SHOAL_TXN_PRESENT`, `_ABSENT`, `_EQUALS` or `_INT`.
    pub kind: u32,
    /// For `SHOAL_TXN_INT`: `SHOAL_CMP_EQ` … `SHOAL_CMP_GE`; 0 otherwise.
    pub cmp: u32,
    /// For `SHOAL_TXN_EQUALS`: the value (exactly the map's value size); NULL otherwise.
    pub value: *const c_void,
    /// The value's length.
    pub value_len: usize,
    /// For `SHOAL_TXN_INT`: the operand.
    pub operand: i64,
}

/// An operation of `shoal_txn_commit` on one key of a fixed-size map, with its result
/// fields, which the call fills in for the operations of the list that ran.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_txn_op {
    /// The map (of the store the transaction is committed on).
    pub map: *const shoal_fixed,
    /// The key: exactly the map's key size.
    pub key: *const c_void,
    /// The key's length.
    pub key_len: usize,
    /// `SHOAL_TXN_GET`, `_PUT`, `_PUT_IF_ABSENT`, `_PUT_IF_PRESENT`, `_REMOVE` or `_ADD`.
    pub kind: u32,
    /// Out: 1 if the operation changed the map (0 for a get, a put-if-absent of a present
    /// key, a put-if-present or remove of an absent one).
    pub applied: u32,
    /// For the puts: the value (exactly the map's value size).
    pub value: *const c_void,
    /// The value's length.
    pub value_len: usize,
    /// For `SHOAL_TXN_ADD`: the delta.
    pub delta: i64,
    /// Out, optional: a buffer of exactly the map's value size (or NULL with
    /// `old_cap` 0) that receives the key's value before the transaction.
    pub old: *mut c_void,
    /// The size of `old`: 0 (no copy) or the map's value size.
    pub old_cap: usize,
    /// Out: 1 if the key was present before the transaction (then `old` holds its value).
    pub old_present: u32,
    /// Reserved; set to 0.
    pub reserved: u32,
}

/// A map argument that must belong to `store`.
///
/// # Safety
/// `p` is NULL or a live handle.
unsafe fn map_arg<'a>(p: *const shoal_fixed) -> Res<&'a FixedMap> {
    // SAFETY: forwarded contract.
    unsafe { fixed_ref(p) }
}

/// The operations of one list.
///
/// # Safety
/// `ops` is NULL or has `n` readable elements whose pointers follow
/// `shoal_txn_commit`'s contract.
unsafe fn op_list(ops: *const shoal_txn_op, n: usize, what: &'static str) -> Res<Vec<TxnOp>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if ops.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL with n readable elements (caller's contract).
    let ops = unsafe { std::slice::from_raw_parts(ops, n) };
    let mut out = Vec::with_capacity(n);
    for (i, o) in ops.iter().enumerate() {
        let item = |f: Fail| kv::item(i, f);
        // SAFETY: forwarded contract.
        let m = unsafe { map_arg(o.map) }.map_err(item)?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(m, o.key, o.key_len) }.map_err(item)?;
        // SAFETY: forwarded contract.
        let val = || unsafe { value_arg(m, o.value, o.value_len, "value", "value_len") };
        kv::exact(
            o.old_cap,
            Some(m.value_size()).filter(|_| o.old_cap != 0),
            "old_cap",
        )
        .map_err(item)?;
        if o.old_cap != 0 && o.old.is_null() {
            return Err(item(null("old")));
        }
        out.push(match o.kind {
            SHOAL_TXN_GET => TxnOp::get(m, key),
            SHOAL_TXN_PUT => TxnOp::put(m, key, val().map_err(item)?),
            SHOAL_TXN_PUT_IF_ABSENT => TxnOp::put_if_absent(m, key, val().map_err(item)?),
            SHOAL_TXN_PUT_IF_PRESENT => TxnOp::put_if_present(m, key, val().map_err(item)?),
            SHOAL_TXN_REMOVE => TxnOp::remove(m, key),
            SHOAL_TXN_ADD => TxnOp::add(m, key, o.delta),
            k => {
                return Err(item(Fail::new(
                    SHOAL_INVALID,
                    format!("unknown operation kind {k}"),
                )))
            }
        });
    }
    Ok(out)
}

/// Commits a transaction on `store`'s fixed-size maps: evaluates every condition of
/// `conds` and applies the operations of `then_ops` (all hold) or `else_ops` (some
/// fails), as one atomic step that no reader, writer or crash sees in part.
///
/// * `conds`, `n_conds`: the conditions (NULL when `n_conds` is 0).
/// * `then_ops`, `n_then`, `else_ops`, `n_else`: the two lists (NULL when empty). Each
///   key may be written by at most one operation of a list. The result fields (`applied`,
///   `old`, `old_present`) of the list that ran are filled in; the other list's are left
///   as they were.
/// * `succeeded`: receives true if every condition held (the *then* list ran).
///
/// Limits: the keys involved may lie in at most 8 index segments and the writes of the
/// list that runs must fit one redo list of 20 words (a 2-key transfer of 8-byte values
/// takes 4; see the engine's `TxnOp`); past either, `SHOAL_INVALID` ("transaction too
/// large") and nothing changes.
///
/// Errors: `SHOAL_INVALID` (a key or value of the wrong size, an unknown kind or
/// comparison, an integer condition or add on values that are not 8 bytes, a key
/// written twice in one list, a map of another store, `old_cap` other than 0 or the
/// value size, too large; the message names the item), `SHOAL_NOT_FOUND` (a map was
/// dropped), `SHOAL_TIMEOUT`, `SHOAL_FULL`, `SHOAL_NO_SPACE`, `SHOAL_TOO_MANY`,
/// `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `conds` is NULL or has `n_conds` readable elements,
/// `then_ops` and `else_ops` NULL or `n_then` and `n_else` writable elements; every map
/// pointer in them is NULL or a live handle, every key and value pointer NULL or readable
/// for its length, every `old` NULL or writable for `old_cap` bytes; `succeeded` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn shoal_txn_commit(
    store: *const shoal_store,
    conds: *const shoal_txn_cond,
    n_conds: usize,
    then_ops: *mut shoal_txn_op,
    n_then: usize,
    else_ops: *mut shoal_txn_op,
    n_else: usize,
    succeeded: *mut bool,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let succeeded = out_ptr(succeeded, "succeeded")?;
        let mut t = s.transaction();
        if n_conds > 0 {
            if conds.is_null() {
                return Err(null("conds"));
            }
            // SAFETY: non-NULL with n_conds readable elements (caller's contract).
            let cs = unsafe { std::slice::from_raw_parts(conds, n_conds) };
            for (i, c) in cs.iter().enumerate() {
                let item = |f: Fail| kv::item(i, f);
                // SAFETY: forwarded contract.
                let m = unsafe { map_arg(c.map) }.map_err(item)?;
                // SAFETY: forwarded contract.
                let key = unsafe { key_arg(m, c.key, c.key_len) }.map_err(item)?;
                let cmp = match c.cmp {
                    SHOAL_CMP_EQ => Some(IntCmp::Eq),
                    SHOAL_CMP_NE => Some(IntCmp::Ne),
                    SHOAL_CMP_LT => Some(IntCmp::Lt),
                    SHOAL_CMP_LE => Some(IntCmp::Le),
                    SHOAL_CMP_GT => Some(IntCmp::Gt),
                    SHOAL_CMP_GE => Some(IntCmp::Ge),
                    _ => None,
                };
                t = t.when(match (c.kind, cmp) {
                    (SHOAL_TXN_PRESENT, _) => Cond::present(m, key),
                    (SHOAL_TXN_ABSENT, _) => Cond::absent(m, key),
                    (SHOAL_TXN_EQUALS, _) => {
                        // SAFETY: forwarded contract.
                        let v = unsafe { value_arg(m, c.value, c.value_len, "value", "value_len") }
                            .map_err(item)?;
                        Cond::equals(m, key, v)
                    }
                    (SHOAL_TXN_INT, Some(cmp)) => Cond::int(m, key, cmp, c.operand),
                    (k, _) => {
                        return Err(item(Fail::new(
                            SHOAL_INVALID,
                            format!("unknown condition kind {k} or comparison {}", c.cmp),
                        )))
                    }
                });
            }
        }
        // SAFETY: forwarded contract.
        for op in unsafe { op_list(then_ops, n_then, "then_ops") }? {
            t = t.then(op);
        }
        // SAFETY: forwarded contract.
        for op in unsafe { op_list(else_ops, n_else, "else_ops") }? {
            t = t.otherwise(op);
        }
        let out = t.commit()?;
        let (ops, n) = if out.succeeded {
            (then_ops, n_then)
        } else {
            (else_ops, n_else)
        };
        for (i, r) in out.results.iter().enumerate().take(n) {
            // SAFETY: i < n, and the list has n writable elements (caller's contract).
            let o = unsafe { &mut *ops.add(i) };
            o.applied = r.applied as u32;
            o.old_present = r.value.is_some() as u32;
            if let (Some(v), true) = (&r.value, o.old_cap != 0) {
                // SAFETY: `old` is non-NULL (checked) with old_cap = the value size
                // writable bytes (caller's contract), and `v` has the value size.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), o.old as *mut u8, v.len()) };
            }
        }
        // SAFETY: checked non-NULL, writable (caller's contract).
        unsafe { succeeded.write(out.succeeded) };
        Ok(SHOAL_OK)
    })
}

/// Reads `n` keys as of one instant: every value passed to `cb` was its key's value at
/// the same moment (absent then: `present` false). Takes no lock and writes nothing, so
/// writers never wait for it; it retries while writers change the keys, and fails with
/// `SHOAL_TIMEOUT` after the store's lock timeout.
///
/// * `maps`, `keys`, `n`: key `i` is `keys[i]` in map `maps[i]` (fixed-size maps of
///   `store`; each key exactly its map's key size). NULL when `n` is 0.
/// * `cb`: called once per key, in order, after every key was read, with `ctx`, the
///   key's index and its value (valid only during the call).
///
/// Errors: `SHOAL_INVALID` (a key of the wrong length, a map of another store; the
/// message names the item), `SHOAL_NOT_FOUND` (a map was dropped), `SHOAL_TIMEOUT`,
/// `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `maps` and `keys` are NULL or have `n` readable
/// elements, each map NULL or a live handle, each key's `data` NULL or readable for its
/// `len`; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_snapshot_get(
    store: *const shoal_store,
    maps: *const *const shoal_fixed,
    keys: *const shoal_bytes,
    n: usize,
    cb: shoal_many_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        if n > 0 && (maps.is_null() || keys.is_null()) {
            return Err(null(if maps.is_null() { "maps" } else { "keys" }));
        }
        let mut req = Vec::with_capacity(n);
        for i in 0..n {
            let item = |f: Fail| kv::item(i, f);
            // SAFETY: i < n readable elements (caller's contract).
            let (mp, k) = unsafe { (*maps.add(i), *keys.add(i)) };
            // SAFETY: forwarded contract.
            let m = unsafe { map_arg(mp) }.map_err(item)?;
            // SAFETY: forwarded contract.
            let key = unsafe { key_arg(m, k.data, k.len) }.map_err(item)?;
            req.push((m, key));
        }
        let vals = s.snapshot_get(&req)?;
        for (i, v) in vals.iter().enumerate() {
            let (p, len) = v
                .as_deref()
                .map_or((std::ptr::null(), 0), |b| (ptr_of(b), b.len()));
            // SAFETY: cb is a valid function that does not unwind (caller's contract).
            unsafe { cb(ctx, i, p, len, v.is_some()) };
        }
        Ok(SHOAL_OK)
    })
}
