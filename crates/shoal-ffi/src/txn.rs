//! Multi-key transactions over a store's hash maps, fixed-size and variable-size (with or
//! without UIDs) mixed freely: an array of conditions, a *then* and an *else* array of
//! operations, committed as one atomic step with results per operation
//! (`shoal_txn_commit`); consistent multi-key reads (`shoal_snapshot_get`). See the
//! engine's `Store::transaction` and DESIGN.md, "Multi-key transactions".
//!
//! Each condition, operation and snapshot key names its map by two pointers, a
//! `shoal_fixed *` and a `shoal_map *`, exactly one of them non-NULL: one array then
//! mixes both kinds without a tagged union in the ABI.

use crate::atomic::{ptr_of, shoal_bytes, shoal_many_fn};
use crate::fixed::{fixed_ref, shoal_fixed};
use crate::map::{map_ref, shoal_map};
use crate::store::store_ref;
use crate::*;
use shoal::{Cond, IntCmp, KvMap, TxnMap, TxnOp, TxnTarget};
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
/// `shoal_txn_cond.kind`: the key is present and its UID entry's version is `version`
/// (variable-size maps with UIDs only: `shoal_map_version` reads it, and every change to
/// the key moves it). An absent key fails it; on a map without UIDs it is
/// `SHOAL_INVALID`.
pub const SHOAL_TXN_VERSION: u32 = 5;

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

/// A condition of `shoal_txn_commit`, on one key of a hash map.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_txn_cond {
    /// A fixed-size map (of the store the transaction is committed on), or NULL when
    /// `vmap` names the map.
    pub map: *const shoal_fixed,
    /// A variable-size map (of the same store), or NULL when `map` names the map.
    /// Exactly one of `map` and `vmap` is non-NULL.
    pub vmap: *const shoal_map,
    /// The key: exactly a fixed map's key size; any length for a variable map.
    pub key: *const c_void,
    /// The key's length.
    pub key_len: usize,
    /// `SHOAL_TXN_PRESENT`, `_ABSENT`, `_EQUALS`, `_INT` or `_VERSION`.
    pub kind: u32,
    /// For `SHOAL_TXN_INT`: `SHOAL_CMP_EQ` … `SHOAL_CMP_GE`; 0 otherwise.
    pub cmp: u32,
    /// For `SHOAL_TXN_EQUALS`: the value (exactly a fixed map's value size; any length
    /// for a variable map); NULL otherwise.
    pub value: *const c_void,
    /// The value's length.
    pub value_len: usize,
    /// For `SHOAL_TXN_INT`: the operand.
    pub operand: i64,
    /// For `SHOAL_TXN_VERSION`: the version the key's UID entry must have.
    pub version: u64,
}

/// An operation of `shoal_txn_commit` on one key of a hash map, with its result fields,
/// which the call fills in for the operations of the list that ran.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shoal_txn_op {
    /// A fixed-size map (of the store the transaction is committed on), or NULL when
    /// `vmap` names the map.
    pub map: *const shoal_fixed,
    /// A variable-size map (of the same store), or NULL when `map` names the map.
    /// Exactly one of `map` and `vmap` is non-NULL.
    pub vmap: *const shoal_map,
    /// The key: exactly a fixed map's key size; any length for a variable map.
    pub key: *const c_void,
    /// The key's length.
    pub key_len: usize,
    /// `SHOAL_TXN_GET`, `_PUT`, `_PUT_IF_ABSENT`, `_PUT_IF_PRESENT`, `_REMOVE` or `_ADD`.
    pub kind: u32,
    /// Out: 1 if the operation changed the map (0 for a get, a put-if-absent of a present
    /// key, a put-if-present or remove of an absent one).
    pub applied: u32,
    /// For the puts: the value (exactly a fixed map's value size; any length for a
    /// variable map).
    pub value: *const c_void,
    /// The value's length.
    pub value_len: usize,
    /// For `SHOAL_TXN_ADD`: the delta.
    pub delta: i64,
    /// Out, optional: a buffer (or NULL with `old_cap` 0) that receives the key's value
    /// before the transaction, if it fits.
    pub old: *mut c_void,
    /// The size of `old`: 0 (no copy wanted); for a fixed map, at least its value size.
    pub old_cap: usize,
    /// Out: 1 if the key was present before the transaction (then `old` holds its value
    /// when it fits).
    pub old_present: u32,
    /// Reserved; set to 0.
    pub reserved: u32,
    /// Out: the length of the key's value before the transaction (0 if absent), whether
    /// or not it fit `old`: a value longer than a non-zero `old_cap` is not copied, and
    /// the call returns `SHOAL_BUFFER_TOO_SMALL` after committing.
    pub old_len: usize,
}

/// The map named by a pair of handles, with the lengths its keys and values must have
/// (`None`: any).
struct Target {
    map: TxnMap,
    key_size: Option<usize>,
    value_size: Option<usize>,
}

impl Target {
    /// The key argument.
    ///
    /// # Safety
    /// `key` is NULL or readable for `len` bytes.
    unsafe fn key<'b>(&self, key: *const c_void, len: usize) -> Res<&'b [u8]> {
        kv::exact(len, self.key_size, "key_len")?;
        // SAFETY: forwarded contract.
        unsafe { bytes(key, len, "key") }
    }
    /// A value argument.
    ///
    /// # Safety
    /// `value` is NULL or readable for `len` bytes.
    unsafe fn value<'b>(&self, value: *const c_void, len: usize) -> Res<&'b [u8]> {
        kv::exact(len, self.value_size, "value_len")?;
        // SAFETY: forwarded contract.
        unsafe { bytes(value, len, "value") }
    }
}

/// Element `i` of an array of handles that may be NULL as a whole (then every element
/// counts as NULL).
///
/// # Safety
/// `a` is NULL or has more than `i` readable elements.
unsafe fn at<T>(a: *const *const T, i: usize) -> *const T {
    if a.is_null() {
        return std::ptr::null();
    }
    // SAFETY: non-NULL with more than i readable elements (caller's contract).
    unsafe { *a.add(i) }
}

/// The map of a (`shoal_fixed *`, `shoal_map *`) pair, exactly one of them non-NULL.
///
/// # Safety
/// Each pointer is NULL or a live handle.
unsafe fn map_arg(f: *const shoal_fixed, v: *const shoal_map) -> Res<Target> {
    match (f.is_null(), v.is_null()) {
        (false, true) => {
            // SAFETY: forwarded contract.
            let m = unsafe { fixed_ref(f) }?;
            Ok(Target {
                map: m.txn_map(),
                key_size: KvMap::key_size(m),
                value_size: KvMap::value_size(m),
            })
        }
        (true, false) => {
            // SAFETY: forwarded contract.
            let m = unsafe { map_ref(v) }?;
            Ok(Target {
                map: m.txn_map(),
                key_size: None,
                value_size: None,
            })
        }
        (true, true) => Err(null("map (or vmap)")),
        (false, false) => Err(Fail::new(
            SHOAL_INVALID,
            "both map and vmap given; exactly one names the map",
        )),
    }
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
        let t = unsafe { map_arg(o.map, o.vmap) }.map_err(item)?;
        let m = &t.map;
        // SAFETY: forwarded contract.
        let key = unsafe { t.key(o.key, o.key_len) }.map_err(item)?;
        // SAFETY: forwarded contract.
        let val = || unsafe { t.value(o.value, o.value_len) };
        // A fixed map's values have one length, so a buffer too small for it is refused
        // before anything changes rather than reported after the commit.
        if let Some(size) = t.value_size.filter(|&n| o.old_cap != 0 && o.old_cap < n) {
            return Err(item(Fail::new(
                SHOAL_INVALID,
                format!(
                    "old_cap: {} bytes given; this map's values are {size}",
                    o.old_cap
                ),
            )));
        }
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

/// Commits a transaction on `store`'s hash maps (fixed-size and variable-size, mixed
/// freely; each item names its map by `map` or `vmap`): evaluates every condition of
/// `conds` and applies the operations of `then_ops` (all hold) or `else_ops` (some
/// fails), as one atomic step that no reader, writer or crash sees in part.
///
/// * `conds`, `n_conds`: the conditions (NULL when `n_conds` is 0).
/// * `then_ops`, `n_then`, `else_ops`, `n_else`: the two lists (NULL when empty). Each
///   key may be written by at most one operation of a list. The result fields (`applied`,
///   `old`, `old_present`, `old_len`) of the list that ran are filled in; the other
///   list's are left as they were.
/// * `succeeded`: receives true if every condition held (the *then* list ran).
///
/// Limits: the keys involved may lie in at most 8 index segments and the writes of the
/// list that runs must fit one redo list of 20 words (a 2-key transfer of 8-byte values
/// takes 4; see the engine's `TxnOp`); past either, `SHOAL_INVALID` ("transaction too
/// large") and nothing changes.
///
/// `SHOAL_BUFFER_TOO_SMALL`: the transaction committed (`succeeded` and every result
/// field are set) but some operation's old value was longer than its non-zero `old_cap`
/// and was not copied; its `old_len` says how long it was. Read it again (with
/// `shoal_map_get` or a `SHOAL_TXN_GET` transaction): do not commit again.
///
/// Errors (nothing changed): `SHOAL_INVALID` (a key or value of the wrong size for a
/// fixed map or too long for a variable one, an unknown kind or comparison, an integer
/// condition or add on values that are not 8 bytes, a version condition on a map without
/// UIDs, a key written twice in one list, a map of another store, both `map` and `vmap`
/// set, a non-zero `old_cap` below a fixed map's value size, too large; the message names
/// the item), `SHOAL_NOT_FOUND` (a map was dropped), `SHOAL_TIMEOUT`, `SHOAL_FULL`,
/// `SHOAL_NO_SPACE`, `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER` (also
/// neither `map` nor `vmap` set).
///
/// # Safety
/// `store` is NULL or a live handle; `conds` is NULL or has `n_conds` readable elements,
/// `then_ops` and `else_ops` NULL or `n_then` and `n_else` writable elements; every map
/// and vmap pointer in them is NULL or a live handle, every key and value pointer NULL or readable
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
                let target = unsafe { map_arg(c.map, c.vmap) }.map_err(item)?;
                let m = &target.map;
                // SAFETY: forwarded contract.
                let key = unsafe { target.key(c.key, c.key_len) }.map_err(item)?;
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
                        let v = unsafe { target.value(c.value, c.value_len) }.map_err(item)?;
                        Cond::equals(m, key, v)
                    }
                    (SHOAL_TXN_INT, Some(cmp)) => Cond::int(m, key, cmp, c.operand),
                    (SHOAL_TXN_VERSION, _) => Cond::version(m, key, c.version),
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
        let mut short = None;
        for (i, r) in out.results.iter().enumerate().take(n) {
            // SAFETY: i < n, and the list has n writable elements (caller's contract).
            let o = unsafe { &mut *ops.add(i) };
            o.applied = r.applied as u32;
            o.old_present = r.value.is_some() as u32;
            o.old_len = r.value.as_ref().map_or(0, |v| v.len());
            if let (Some(v), true) = (&r.value, o.old_cap != 0) {
                if v.len() > o.old_cap {
                    short.get_or_insert((i, v.len(), o.old_cap));
                    continue;
                }
                // SAFETY: `old` is non-NULL (checked) with old_cap >= v.len() writable
                // bytes (caller's contract), and does not overlap the engine's copy `v`.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), o.old as *mut u8, v.len()) };
            }
        }
        // SAFETY: checked non-NULL, writable (caller's contract).
        unsafe { succeeded.write(out.succeeded) };
        match short {
            None => Ok(SHOAL_OK),
            Some((i, need, cap)) => Err(Fail::new(
                SHOAL_BUFFER_TOO_SMALL,
                format!(
                    "item {i}: old: {need} bytes needed, the buffer has {cap} \
                     (the transaction committed)"
                ),
            )),
        }
    })
}

/// Reads `n` keys as of one instant: every value passed to `cb` was its key's value at
/// the same moment (absent then: `present` false). Takes no lock and writes nothing, so
/// writers never wait for it; it retries while writers change the keys, and fails with
/// `SHOAL_TIMEOUT` after the store's lock timeout.
///
/// * `maps`, `vmaps`, `keys`, `n`: key `i` is `keys[i]` in map `maps[i]` (a fixed-size
///   map) or `vmaps[i]` (a variable-size map), exactly one of the two non-NULL; maps of
///   `store`, each key exactly a fixed map's key size. Either array may be NULL when
///   every key is in a map of the other kind; all NULL when `n` is 0.
/// * `cb`: called once per key, in order, after every key was read, with `ctx`, the
///   key's index and its value (valid only during the call).
///
/// Errors: `SHOAL_INVALID` (a key of the wrong length, a map of another store, both
/// `maps[i]` and `vmaps[i]` set; the message names the item), `SHOAL_NOT_FOUND` (a map was dropped), `SHOAL_TIMEOUT`,
/// `SHOAL_TOO_MANY`, `SHOAL_CORRUPT`, `SHOAL_NULL_POINTER`.
///
/// # Safety
/// `store` is NULL or a live handle; `maps`, `vmaps` and `keys` are NULL or have `n`
/// readable elements, each map and vmap NULL or a live handle, each key's `data` NULL or readable for its
/// `len`; `cb` does not unwind.
#[no_mangle]
pub unsafe extern "C" fn shoal_snapshot_get(
    store: *const shoal_store,
    maps: *const *const shoal_fixed,
    vmaps: *const *const shoal_map,
    keys: *const shoal_bytes,
    n: usize,
    cb: shoal_many_fn,
    ctx: *mut c_void,
) -> shoal_status {
    ffi(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { store_ref(store) }?;
        let cb = cb.ok_or_else(|| null("cb"))?;
        if n > 0 && keys.is_null() {
            return Err(null("keys"));
        }
        if n > 0 && maps.is_null() && vmaps.is_null() {
            return Err(null("maps"));
        }
        let mut targets = Vec::with_capacity(n);
        let mut ks = Vec::with_capacity(n);
        for i in 0..n {
            let item = |f: Fail| kv::item(i, f);
            // SAFETY: i < n readable elements of each non-NULL array (caller's contract).
            let (fp, vp, k) = unsafe { (at(maps, i), at(vmaps, i), *keys.add(i)) };
            // SAFETY: forwarded contract.
            let t = unsafe { map_arg(fp, vp) }.map_err(item)?;
            // SAFETY: forwarded contract.
            ks.push(unsafe { t.key(k.data, k.len) }.map_err(item)?);
            targets.push(t.map);
        }
        let req: Vec<(&TxnMap, &[u8])> = targets.iter().zip(ks).collect();
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
