//! Multi-key transactions over fixed-size maps: conditions, then- and else-operations
//! committed as one atomic step; the optimistic form; consistent multi-key reads
//! (DESIGN.md, "Multi-key transactions").

use crate::api::fixed::FixedMap;
use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::hashmap::Attempt;
use crate::kinds::fixed::{move_group, split, wait_adders, TxnWrite};
use crate::mem::fence;
use crate::shared::Shared;
use crate::store::Store;
use crate::txn::{too_large, Plan, Txn};
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Duration;

/// How an integer condition compares a key's value (an 8-byte little-endian `i64`) with
/// its operand: `value OP operand`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntCmp {
    /// `value == operand`.
    Eq,
    /// `value != operand`.
    Ne,
    /// `value < operand`.
    Lt,
    /// `value <= operand`.
    Le,
    /// `value > operand`.
    Gt,
    /// `value >= operand`.
    Ge,
}

#[derive(Clone, Debug)]
enum Check {
    Present,
    Absent,
    Equals(Vec<u8>),
    Int(IntCmp, i64),
}

/// A condition of a transaction on one key, evaluated under the transaction's locks on
/// the state before any of its writes.
#[derive(Clone)]
pub struct Cond {
    map: FixedMap,
    key: Vec<u8>,
    check: Check,
}

impl Cond {
    /// Holds when `key` is present in `map`.
    pub fn present(map: &FixedMap, key: &[u8]) -> Cond {
        Cond::new(map, key, Check::Present)
    }
    /// Holds when `key` is absent from `map`.
    pub fn absent(map: &FixedMap, key: &[u8]) -> Cond {
        Cond::new(map, key, Check::Absent)
    }
    /// Holds when `key` is present with exactly `value`.
    pub fn equals(map: &FixedMap, key: &[u8], value: &[u8]) -> Cond {
        Cond::new(map, key, Check::Equals(value.to_vec()))
    }
    /// Holds when `key` is present and its value, read as a little-endian `i64` (the
    /// map's values must be 8 bytes), compares with `operand` as `cmp` says. An absent
    /// key fails every integer condition.
    pub fn int(map: &FixedMap, key: &[u8], cmp: IntCmp, operand: i64) -> Cond {
        Cond::new(map, key, Check::Int(cmp, operand))
    }
    fn new(map: &FixedMap, key: &[u8], check: Check) -> Cond {
        Cond {
            map: map.clone(),
            key: key.to_vec(),
            check,
        }
    }
    fn holds(&self, cur: Option<&[u8]>) -> bool {
        match (&self.check, cur) {
            (Check::Present, c) => c.is_some(),
            (Check::Absent, c) => c.is_none(),
            (Check::Equals(v), Some(c)) => v[..] == *c,
            (Check::Int(cmp, x), Some(c)) => {
                let v = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                match cmp {
                    IntCmp::Eq => v == *x,
                    IntCmp::Ne => v != *x,
                    IntCmp::Lt => v < *x,
                    IntCmp::Le => v <= *x,
                    IntCmp::Gt => v > *x,
                    IntCmp::Ge => v >= *x,
                }
            }
            (_, None) => false,
        }
    }
}

#[derive(Clone, Debug)]
enum OpKind {
    Get,
    Put(Vec<u8>),
    Insert(Vec<u8>),
    Replace(Vec<u8>),
    Remove,
    Add(i64),
}

/// One operation of a transaction's *then* or *else* list, on one key of a fixed-size
/// map. Each key may be written by at most one operation of a list.
///
/// Redo-list cost (a transaction's writes share one list of 20 words, see
/// [`Transaction`]): a put, put-if-present or add of a present key costs its value's words (one
/// for an 8-byte value) plus its bucket's header; an insert or remove costs its bucket's
/// header, its home bucket's header when the cell is elsewhere, and the map's entry
/// counter. A header or counter shared by several writes counts once.
#[derive(Clone)]
pub struct TxnOp {
    map: FixedMap,
    key: Vec<u8>,
    kind: OpKind,
}

impl TxnOp {
    /// Reads `key` (its value is the operation's [`OpResult::value`]); writes nothing.
    pub fn get(map: &FixedMap, key: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Get)
    }
    /// Inserts `key` or replaces its value.
    pub fn put(map: &FixedMap, key: &[u8], value: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Put(value.to_vec()))
    }
    /// Inserts `key` if it is absent (not applied otherwise).
    pub fn put_if_absent(map: &FixedMap, key: &[u8], value: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Insert(value.to_vec()))
    }
    /// Replaces `key`'s value if it is present (not applied otherwise).
    pub fn put_if_present(map: &FixedMap, key: &[u8], value: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Replace(value.to_vec()))
    }
    /// Removes `key` if it is present (not applied otherwise).
    pub fn remove(map: &FixedMap, key: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Remove)
    }
    /// Adds `delta` (wrapping) to `key`'s 8-byte little-endian integer value; an absent
    /// key counts as 0 and is created. Unlike [`FixedMap::add`], it takes the segment's
    /// lock, as every write of a transaction does.
    pub fn add(map: &FixedMap, key: &[u8], delta: i64) -> TxnOp {
        TxnOp::new(map, key, OpKind::Add(delta))
    }
    fn new(map: &FixedMap, key: &[u8], kind: OpKind) -> TxnOp {
        TxnOp {
            map: map.clone(),
            key: key.to_vec(),
            kind,
        }
    }
}

/// What one operation of the list that ran did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpResult {
    /// Whether it changed the map (always false for a get; false for a put-if-absent of
    /// a present key, a put-if-present or remove of an absent one).
    pub applied: bool,
    /// The key's value before the transaction (`None`: absent).
    pub value: Option<Vec<u8>>,
}

/// What a committed transaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOutcome {
    /// Whether every condition held (the *then* list ran) or not (the *else* list ran).
    pub succeeded: bool,
    /// One result per operation of the list that ran, in order.
    pub results: Vec<OpResult>,
}

/// A multi-key transaction being built ([`Store::transaction`]): conditions, a *then* list and
/// an *else* list of operations on keys of fixed-size maps of the store. [`commit`]
/// evaluates every condition and applies the list they choose as one atomic step: no
/// reader, writer or crash sees part of it (DESIGN.md, "Multi-key transactions").
///
/// **Limits.** The keys involved (in conditions and both lists) may lie in at most 8
/// index segments, and the chosen list's writes must fit one redo list of 20 words
/// (costs on [`TxnOp`]): a 2-key transfer of 8-byte values takes 4. Past either,
/// `commit` is [`Error::InvalidArgument`] ("transaction too large") and nothing changes.
/// A key written twice in one list, a key or value of the wrong size, a map of another
/// store or an integer condition or add on values that are not 8 bytes are
/// `InvalidArgument` too.
///
/// [`commit`]: Transaction::commit
#[must_use = "a transaction does nothing until it is committed"]
pub struct Transaction<'s> {
    sh: &'s Arc<Shared>,
    conds: Vec<Cond>,
    then: Vec<TxnOp>,
    els: Vec<TxnOp>,
    timeout: Duration,
}

/// A key of a transaction, its hash and (once located) its segment.
struct Key<'a> {
    map: &'a FixedMap,
    key: &'a [u8],
    h: u64,
    seg: u64,
}

impl Store {
    /// A new, empty [`Transaction`] on this store's fixed-size maps. Its lock waits last
    /// at most the store's lock timeout (`Options::lock_timeout`) in all; see
    /// [`Transaction::timeout`].
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction {
            sh: &self.sh,
            conds: Vec::new(),
            then: Vec::new(),
            els: Vec::new(),
            timeout: self.sh.lock_timeout,
        }
    }

    /// Reads `keys` (each a map and a key) as of one instant: every value returned was the
    /// key's value at the same moment (`None`: absent then), with no lock taken and
    /// nothing written, so writers never wait for it. It retries while writers change
    /// the keys it reads, and gives up with [`Error::Timeout`] after the store's lock
    /// timeout. See DESIGN.md, "Consistent multi-key reads" (a single-key lock-free
    /// [`FixedMap::add`] undone by another between the read and its re-check is the one
    /// change it may miss; transactions' adds are always seen).
    pub fn snapshot_get(&self, keys: &[(&FixedMap, &[u8])]) -> Result<Vec<Option<Vec<u8>>>> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        let mut hashes = Vec::with_capacity(keys.len());
        for (m, k) in keys {
            same_store(sh, m)?;
            m.check_key(k)?;
            hashes.push(hash(sh.g.seed, k));
        }
        let wait = Wait::begin(sh.lock_timeout, sh.lock_timeout);
        let mut seen = Vec::with_capacity(4 * keys.len());
        let mut out = Vec::with_capacity(keys.len());
        let mut tries = 0u32;
        'again: loop {
            if tries > 0 {
                // The backoff of the key that failed (or of the first): it recovers a
                // dead writer of that key's segment, and gives up at the deadline.
                let i = out.len().min(keys.len().saturating_sub(1));
                if let Some((m, _)) = keys.get(i) {
                    m.f.m.backoff(sh, hashes[i], tries, &wait)?;
                }
            }
            tries += 1;
            seen.clear();
            out.clear();
            for (i, (m, k)) in keys.iter().enumerate() {
                match m.f.read_recorded(sh, hashes[i], k, &mut seen)? {
                    Attempt::Done(v) => out.push(v),
                    Attempt::Retry => continue 'again,
                }
            }
            fence(Acquire);
            crate::rt::failpoint!("txn.snapshot_read");
            if seen.iter().any(|(o, v)| sh.w(*o).load(Relaxed) != *v) {
                out.clear();
                continue;
            }
            return Ok(out);
        }
    }

    /// The optimistic form of a transaction: runs `f`, which reads keys through its
    /// [`TxnReads`] and records writes in it, with no lock held; then commits the writes
    /// only if every key `f` read still holds the value (or absence) it read, as one
    /// atomic step. Otherwise it runs `f` again (with backoff), until the store's lock
    /// timeout, then [`Error::Timeout`]. `f` may run more than once, and must have no
    /// effect outside its `TxnReads`. Returns `f`'s result of the run that committed.
    ///
    /// Committing on equal values is serializable: at the commit every key read holds what
    /// `f` saw, so its writes are what it would have computed at that instant.
    pub fn optimistic<T>(&self, mut f: impl FnMut(&mut TxnReads) -> Result<T>) -> Result<T> {
        let _call = crate::deadline::call();
        let wait = Wait::begin(self.sh.lock_timeout, self.sh.lock_timeout);
        let mut tries = 0u32;
        loop {
            let mut r = TxnReads {
                sh: &self.sh,
                reads: Vec::new(),
                writes: Vec::new(),
            };
            let out = f(&mut r)?;
            let mut t = self.transaction();
            for (m, k, v) in &r.reads {
                t = t.when(match v {
                    Some(v) => Cond::equals(m, k, v),
                    None => Cond::absent(m, k),
                });
            }
            for op in r.writes {
                t = t.then(op);
            }
            if t.commit()?.succeeded {
                return Ok(out);
            }
            tries += 1;
            if wait.expired() {
                return Err(wait.timeout());
            }
            if tries > 4 {
                crate::rt::sleep(Duration::from_micros(10 << tries.min(10)));
            } else {
                crate::rt::yield_now();
            }
        }
    }
}

/// The reads and buffered writes of one run of [`Store::optimistic`]'s closure.
pub struct TxnReads<'s> {
    sh: &'s Arc<Shared>,
    reads: Vec<(FixedMap, Vec<u8>, Option<Vec<u8>>)>,
    writes: Vec<TxnOp>,
}

impl TxnReads<'_> {
    /// Reads `key` and records the value: the commit happens only if it is still the
    /// key's value then. Reading a key again returns the value recorded first.
    pub fn get(&mut self, map: &FixedMap, key: &[u8]) -> Result<Option<Vec<u8>>> {
        same_store(self.sh, map)?;
        if let Some((_, _, v)) = self
            .reads
            .iter()
            .find(|(m, k, _)| m.f.m.id == map.f.m.id && k[..] == *key)
        {
            return Ok(v.clone());
        }
        let v = map.get(key)?;
        self.reads.push((map.clone(), key.to_vec(), v.clone()));
        Ok(v)
    }

    /// Reads `key` as an 8-byte little-endian `i64` (0 when absent), recorded as
    /// [`TxnReads::get`] records.
    pub fn get_i64(&mut self, map: &FixedMap, key: &[u8]) -> Result<i64> {
        Ok(match self.get(map, key)? {
            Some(v) => i64::from_le_bytes(v[..].try_into().map_err(|_| {
                Error::InvalidArgument(format!(
                    "map {:?} has {}-byte values, not 8",
                    map.name(),
                    v.len()
                ))
            })?),
            None => 0,
        })
    }

    /// Records a write, applied at the commit if nothing read has changed.
    pub fn write(&mut self, op: TxnOp) {
        self.writes.push(op);
    }
}

fn same_store(sh: &Shared, m: &FixedMap) -> Result<()> {
    if !std::ptr::eq(sh, &*m.sh) {
        return Err(Error::InvalidArgument(format!(
            "map {:?} belongs to another store (or another open handle of it) than the transaction",
            m.name()
        )));
    }
    Ok(())
}

impl<'s> Transaction<'s> {
    /// Adds a condition: the *then* list runs only if every condition holds.
    pub fn when(mut self, c: Cond) -> Self {
        self.conds.push(c);
        self
    }
    /// Adds an operation to the *then* list (run when every condition holds).
    pub fn then(mut self, op: TxnOp) -> Self {
        self.then.push(op);
        self
    }
    /// Adds an operation to the *else* list (run when some condition fails).
    pub fn otherwise(mut self, op: TxnOp) -> Self {
        self.els.push(op);
        self
    }
    /// Makes the commit's lock waits last at most `timeout` in all.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn validate(&self) -> Result<()> {
        let sh = &**self.sh;
        for c in &self.conds {
            same_store(sh, &c.map)?;
            c.map.check_key(&c.key)?;
            match &c.check {
                Check::Equals(v) => c.map.check_value(v)?,
                Check::Int(..) => eight(&c.map)?,
                _ => {}
            }
        }
        for list in [&self.then, &self.els] {
            for (i, op) in list.iter().enumerate() {
                same_store(sh, &op.map)?;
                op.map.check_key(&op.key)?;
                match &op.kind {
                    OpKind::Put(v) | OpKind::Insert(v) | OpKind::Replace(v) => {
                        op.map.check_value(v)?
                    }
                    OpKind::Add(_) => eight(&op.map)?,
                    OpKind::Get | OpKind::Remove => {}
                }
                let writes = |o: &TxnOp| !matches!(o.kind, OpKind::Get);
                if writes(op)
                    && list[..i]
                        .iter()
                        .any(|o| writes(o) && o.map.f.m.id == op.map.f.m.id && o.key == op.key)
                {
                    return Err(Error::InvalidArgument(format!(
                        "a transaction writes key {:?} of map {:?} twice in one list",
                        String::from_utf8_lossy(&op.key),
                        op.map.name()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Evaluates the conditions and applies the list they choose, as one atomic step
    /// (see [`Transaction`]). Returns which list ran and what each of its operations did.
    pub fn commit(self) -> Result<TxnOutcome> {
        let _call = crate::deadline::call();
        self.validate()?;
        let sh = &**self.sh;
        let t = crate::txn::thread_txn(self.sh)?;
        let mut tx = Txn::new(sh, t);
        tx.timeout = self.timeout;
        if tx.holds_locks() {
            return Err(Error::InvalidArgument(
                "a transaction cannot run inside another call that holds locks".into(),
            ));
        }
        let mut keys: Vec<Key> = Vec::new();
        let all = self
            .conds
            .iter()
            .map(|c| (&c.map, &c.key[..]))
            .chain(self.then.iter().map(|o| (&o.map, &o.key[..])))
            .chain(self.els.iter().map(|o| (&o.map, &o.key[..])));
        for (m, k) in all {
            if !keys.iter().any(|x| x.map.f.m.id == m.f.m.id && x.key == k) {
                keys.push(Key {
                    map: m,
                    key: k,
                    h: hash(sh.g.seed, k),
                    seg: 0,
                });
            }
        }
        let idx = |m: &FixedMap, k: &[u8]| {
            keys.iter()
                .position(|x| x.map.f.m.id == m.f.m.id && x.key == k)
                .unwrap_or(0)
        };
        let cond_at: Vec<usize> = self.conds.iter().map(|c| idx(&c.map, &c.key)).collect();
        let then_at: Vec<usize> = self.then.iter().map(|o| idx(&o.map, &o.key)).collect();
        let els_at: Vec<usize> = self.els.iter().map(|o| idx(&o.map, &o.key)).collect();
        let mut growths = 0u32;
        loop {
            let mut locks = Vec::with_capacity(keys.len());
            for k in keys.iter_mut() {
                if !k.map.f.m.alive(sh) {
                    return Err(k.map.f.m.dropped());
                }
                let (_, _, e) = k.map.f.m.locate(sh, k.h, sh.file_end())?;
                k.seg = entry_seg(e);
                locks.push(k.seg + S_LOCK);
            }
            locks.sort_unstable();
            locks.dedup();
            if locks.len() as u64 > T_NHELD {
                return Err(too_large(&format!(
                    "its keys lie in {} segments",
                    locks.len()
                )));
            }
            let held = Held {
                tx: &tx,
                locks: Vec::with_capacity(locks.len()),
            };
            let mut held = held;
            for &l in &locks {
                tx.lock(l)?;
                held.locks.push(l);
                wait_adders(&tx, l - S_LOCK, self.timeout)?;
            }
            // Under the locks: every key must still be in the segment locked for it (a
            // split or move may have finished between the first look and the lock).
            let mut moved = false;
            for k in &keys {
                if !k.map.f.m.alive(sh) {
                    return Err(k.map.f.m.dropped());
                }
                let (_, _, e) = k.map.f.m.locate(sh, k.h, sh.file_end())?;
                moved |= entry_seg(e) != k.seg;
            }
            if moved {
                continue;
            }
            crate::rt::failpoint!("txn.locked");
            let cur: Vec<Option<Vec<u8>>> = keys
                .iter()
                .map(|k| k.map.f.locked_value(sh, k.seg, k.h, k.key))
                .collect();
            let succeeded = self
                .conds
                .iter()
                .zip(&cond_at)
                .all(|(c, &i)| c.holds(cur[i].as_deref()));
            let (ops, at) = if succeeded {
                (&self.then, &then_at)
            } else {
                (&self.els, &els_at)
            };
            let mut plan = Plan::new();
            let mut results = Vec::with_capacity(ops.len());
            let mut full = None;
            for (op, &i) in ops.iter().zip(at) {
                let k = &keys[i];
                let old = cur[i].clone();
                let word;
                let w = match (&op.kind, &old) {
                    (OpKind::Get, _) => None,
                    (OpKind::Put(v), _) => Some(TxnWrite::Put(v)),
                    (OpKind::Insert(v), None) => Some(TxnWrite::Put(v)),
                    (OpKind::Replace(v), Some(_)) => Some(TxnWrite::Put(v)),
                    (OpKind::Remove, Some(_)) => Some(TxnWrite::Remove),
                    (OpKind::Add(d), o) => {
                        let v = o
                            .as_deref()
                            .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                            .unwrap_or(0);
                        word = v.wrapping_add(*d).to_le_bytes();
                        Some(TxnWrite::Put(&word[..]))
                    }
                    _ => None,
                };
                let applied = w.is_some();
                if let Some(w) = w {
                    if !k.map.f.plan_write(&tx, &mut plan, k.seg, k.h, k.key, w)? {
                        full = Some(i);
                        break;
                    }
                }
                results.push(OpResult {
                    applied,
                    value: old,
                });
            }
            if let Some(i) = full {
                // No free cell for an insert: grow that segment by the ordinary path,
                // with none of the transaction's locks held, and start again.
                drop(held);
                growths += 1;
                if growths > 64 {
                    return Err(Error::StoreFull(format!(
                        "a transaction's inserts found no room in map {:?} after 64 growth steps",
                        keys[i].map.name()
                    )));
                }
                let (f, h) = (&keys[i].map.f, keys[i].h);
                let seg = f.lock_segment(&tx, h)?;
                let r = if f.m.groups {
                    move_group(&tx, f, seg, h)
                } else {
                    split(&tx, f, seg)
                };
                tx.unlock(seg + S_LOCK);
                r?;
                continue;
            }
            crate::rt::failpoint!("txn.planned");
            if plan.len() > 0 {
                let redo = plan.redo();
                tx.commit(I_REDO, &[], &redo);
                crate::rt::failpoint!("txn.committed");
                for (bo, odd) in plan.odd_headers() {
                    sh.w(bo).store(odd, Relaxed);
                }
                tx.apply_range(&redo, 0, redo.n / 2);
                crate::rt::failpoint!("txn.half_applied");
                tx.apply_range(&redo, redo.n / 2, redo.n);
                crate::rt::failpoint!("txn.applied");
                tx.done();
            }
            drop(held);
            crate::api::batch::flush_unless_batching(sh)?;
            return Ok(TxnOutcome { succeeded, results });
        }
    }
}

/// The segment locks a commit holds, released on every way out.
struct Held<'a, 't> {
    tx: &'a Txn<'t>,
    locks: Vec<u64>,
}

impl Drop for Held<'_, '_> {
    fn drop(&mut self) {
        for &l in self.locks.iter().rev() {
            self.tx.unlock(l);
        }
    }
}

fn eight(m: &FixedMap) -> Result<()> {
    if m.f.geo.value_size != 8 {
        return Err(Error::InvalidArgument(format!(
            "integer conditions and adds need 8-byte values; map {:?} has {}-byte values",
            m.name(),
            m.f.geo.value_size
        )));
    }
    Ok(())
}
