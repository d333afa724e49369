//! Multi-key transactions over the hash maps of a store (fixed-size and variable-size,
//! with or without UIDs): conditions, then- and else-operations committed as one atomic
//! step; the optimistic form; consistent multi-key reads (DESIGN.md, "Multi-key
//! transactions").

use crate::api::fixed::FixedMap;
use crate::api::map::{check_sizes, copy_value, Map};
use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::hashmap::{Attempt, MapRef};
use crate::kinds::fixed::{move_group, split, wait_adders, TxnWrite};
use crate::kinds::varmap::{Hit, VarWrite};
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

/// A hash map a transaction can name: a [`FixedMap`] or a variable-size [`Map`] (with or
/// without UIDs). Conditions, operations and snapshot reads take any of them, so one
/// transaction may mix maps of both kinds.
pub trait TxnTarget {
    /// The map as a transaction holds it (a cheap clone of the handle).
    fn txn_map(&self) -> TxnMap;
}

impl TxnTarget for FixedMap {
    fn txn_map(&self) -> TxnMap {
        TxnMap(Target::Fixed(self.clone()))
    }
}

impl TxnTarget for Map {
    fn txn_map(&self) -> TxnMap {
        TxnMap(Target::Var(self.clone()))
    }
}

impl TxnTarget for TxnMap {
    fn txn_map(&self) -> TxnMap {
        self.clone()
    }
}

/// A map named by a transaction ([`TxnTarget::txn_map`]): either kind of hash map.
#[derive(Clone)]
pub struct TxnMap(Target);

#[derive(Clone)]
enum Target {
    Fixed(FixedMap),
    Var(Map),
}

impl TxnMap {
    fn mref(&self) -> &MapRef {
        match &self.0 {
            Target::Fixed(f) => &f.f.m,
            Target::Var(m) => &m.m,
        }
    }
    fn id(&self) -> u64 {
        self.mref().id
    }
    fn sh(&self) -> &Arc<Shared> {
        match &self.0 {
            Target::Fixed(f) => &f.sh,
            Target::Var(m) => &m.sh,
        }
    }
    /// The map's name.
    pub fn name(&self) -> &str {
        match &self.0 {
            Target::Fixed(f) => f.name(),
            Target::Var(m) => m.name(),
        }
    }
    fn var(&self) -> Option<&Map> {
        match &self.0 {
            Target::Var(m) => Some(m),
            Target::Fixed(_) => None,
        }
    }
    fn check_key(&self, key: &[u8]) -> Result<()> {
        match &self.0 {
            Target::Fixed(f) => f.check_key(key),
            Target::Var(_) => check_sizes(key, None),
        }
    }
    /// A value a transaction may write: the map's size (fixed), or a record that fits one
    /// data chunk (variable: a transaction publishes no large record, whose run a txn
    /// slot can hold only one of at a time).
    fn check_value(&self, key: &[u8], v: &[u8]) -> Result<()> {
        match &self.0 {
            Target::Fixed(f) => f.check_value(v),
            Target::Var(m) => {
                check_sizes(key, Some(v))?;
                let room = m.sh.g.chunk_size() - CHUNK_HDR;
                // The longest record header (two 5-byte varints and the map id's) and a
                // checksum: what a record adds to its key and value at most.
                let rec = key.len() as u64 + v.len() as u64 + m.m.vtrail + 24;
                if rec > room {
                    return Err(Error::InvalidArgument(format!(
                        "a transaction's record of a {}-byte key and a {}-byte value does not \
                         fit one data chunk ({room} bytes); write larger values outside \
                         transactions",
                        key.len(),
                        v.len()
                    )));
                }
                Ok(())
            }
        }
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match &self.0 {
            Target::Fixed(f) => f.get(key),
            Target::Var(m) => m.get(key),
        }
    }
}

#[derive(Clone, Debug)]
enum Check {
    Present,
    Absent,
    Equals(Vec<u8>),
    Int(IntCmp, i64),
    Version(u64),
}

/// A condition of a transaction on one key, evaluated under the transaction's locks on
/// the state before any of its writes.
#[derive(Clone)]
pub struct Cond {
    map: TxnMap,
    key: Vec<u8>,
    check: Check,
}

impl Cond {
    /// Holds when `key` is present in `map`.
    pub fn present<M: TxnTarget + ?Sized>(map: &M, key: &[u8]) -> Cond {
        Cond::new(map, key, Check::Present)
    }
    /// Holds when `key` is absent from `map`.
    pub fn absent<M: TxnTarget + ?Sized>(map: &M, key: &[u8]) -> Cond {
        Cond::new(map, key, Check::Absent)
    }
    /// Holds when `key` is present with exactly `value`.
    pub fn equals<M: TxnTarget + ?Sized>(map: &M, key: &[u8], value: &[u8]) -> Cond {
        Cond::new(map, key, Check::Equals(value.to_vec()))
    }
    /// Holds when `key` is present and its value, read as a little-endian `i64`, compares
    /// with `operand` as `cmp` says. A fixed map's values must be 8 bytes; in a
    /// variable-size map a value of another length fails the condition, as an absent key
    /// does.
    pub fn int<M: TxnTarget + ?Sized>(map: &M, key: &[u8], cmp: IntCmp, operand: i64) -> Cond {
        Cond::new(map, key, Check::Int(cmp, operand))
    }
    /// Holds when `key` is present and its UID entry's version is `version` (a map with
    /// UIDs: [`Map::version`] reads it; every change to the key moves it). An absent key
    /// fails it; on any other map it is [`Error::InvalidArgument`] at the commit.
    pub fn version<M: TxnTarget + ?Sized>(map: &M, key: &[u8], version: u64) -> Cond {
        Cond::new(map, key, Check::Version(version))
    }
    fn new<M: TxnTarget + ?Sized>(map: &M, key: &[u8], check: Check) -> Cond {
        Cond {
            map: map.txn_map(),
            key: key.to_vec(),
            check,
        }
    }
    fn holds(&self, cur: Option<&[u8]>, ver: Option<u64>) -> bool {
        match (&self.check, cur) {
            (Check::Present, c) => c.is_some(),
            (Check::Absent, c) => c.is_none(),
            (Check::Equals(v), Some(c)) => v[..] == *c,
            (Check::Version(x), Some(_)) => ver == Some(*x),
            (Check::Int(cmp, x), Some(c)) => {
                let Ok(b) = c.try_into() else {
                    return false;
                };
                let v = i64::from_le_bytes(b);
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
/// or variable-size map. Each key may be written by at most one operation of a list.
///
/// Redo-list cost (a transaction's writes share one list of 20 words, see
/// [`Transaction`]). Fixed-size map: a put, put-if-present or add of a present key costs
/// its value's words (one for an 8-byte value) plus its bucket's header; an insert or
/// remove costs its bucket's header, its home bucket's header when the cell is elsewhere,
/// and the map's entry counter. Variable-size map: a replace costs its slot, its bucket's
/// header and the map's byte counter; an insert or remove, its slot, its bucket's header,
/// its home bucket's header when the slot is in the stash, and the map's entry and byte
/// counters; with UIDs, a replace adds 2 (the entry's location and version), an insert 4
/// (the free list or high-water mark, the entry's hash, location and version), a remove 3.
/// A header or counter shared by several writes counts once.
///
/// In a variable-size map, a put, put-if-present or add whose value has the length of
/// the key's current value (at most [`crate::IN_PLACE_MAX_LEN`] bytes, or
/// [`crate::IN_PLACE_MAX_UIDS_LEN`] with UIDs, in a store without checksums) overwrites it
/// in place, as a single-key put does: nothing is appended and no record dies. It costs
/// the value's words (one per word it touches: an 8-byte value not 8-aligned touches
/// two) and its bucket's header, with UIDs one more (the entry's version). Should the
/// list not fit that way, every write of it appends instead, at the costs above, so a
/// list that fits as appends always commits. A 2-key transfer of 8-byte values costs 4
/// words in a fixed map, 4 to 6 in a variable one, 6 to 8 in one with UIDs.
#[derive(Clone)]
pub struct TxnOp {
    map: TxnMap,
    key: Vec<u8>,
    kind: OpKind,
}

impl TxnOp {
    /// Reads `key` (its value is the operation's [`OpResult::value`]); writes nothing.
    pub fn get<M: TxnTarget + ?Sized>(map: &M, key: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Get)
    }
    /// Inserts `key` or replaces its value.
    pub fn put<M: TxnTarget + ?Sized>(map: &M, key: &[u8], value: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Put(value.to_vec()))
    }
    /// Inserts `key` if it is absent (not applied otherwise).
    pub fn put_if_absent<M: TxnTarget + ?Sized>(map: &M, key: &[u8], value: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Insert(value.to_vec()))
    }
    /// Replaces `key`'s value if it is present (not applied otherwise).
    pub fn put_if_present<M: TxnTarget + ?Sized>(map: &M, key: &[u8], value: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Replace(value.to_vec()))
    }
    /// Removes `key` if it is present (not applied otherwise).
    pub fn remove<M: TxnTarget + ?Sized>(map: &M, key: &[u8]) -> TxnOp {
        TxnOp::new(map, key, OpKind::Remove)
    }
    /// Adds `delta` (wrapping) to `key`'s 8-byte little-endian integer value; an absent
    /// key counts as 0 and is created. Unlike [`FixedMap::add`], it takes the segment's
    /// lock, as every write of a transaction does. In a variable-size map, a present
    /// value that is not 8 bytes makes the commit [`Error::InvalidArgument`], with
    /// nothing changed.
    pub fn add<M: TxnTarget + ?Sized>(map: &M, key: &[u8], delta: i64) -> TxnOp {
        TxnOp::new(map, key, OpKind::Add(delta))
    }
    fn new<M: TxnTarget + ?Sized>(map: &M, key: &[u8], kind: OpKind) -> TxnOp {
        TxnOp {
            map: map.txn_map(),
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
/// an *else* list of operations on keys of any hash maps of the store (fixed-size and
/// variable-size, with or without UIDs, mixed freely). [`commit`] evaluates every
/// condition and applies the list they choose as one atomic step: no reader, writer or
/// crash sees part of it (DESIGN.md, "Multi-key transactions").
///
/// **Limits.** The keys involved (in conditions and both lists) may lie in at most 8
/// index segments (6 segments and UID maps together when a variable-size map is
/// involved: its appends and UID table growth take the allocator's and directory's
/// locks), and the chosen list's writes must fit one redo list of 20 words (costs on
/// [`TxnOp`]): a 2-key transfer of 8-byte values takes 4 in a fixed map, at most 6 in a
/// variable one (its values in place). A variable-size map's record (key, value and header) must fit one data chunk.
/// Past any of these, `commit` is [`Error::InvalidArgument`] ("transaction too large")
/// and nothing changes. A key written twice in one list, a key or value of the wrong
/// size, a map of another store, an integer condition or add on a fixed map whose values
/// are not 8 bytes, or a version condition on a map without UIDs are `InvalidArgument`
/// too.
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
    map: &'a TxnMap,
    key: &'a [u8],
    h: u64,
    seg: u64,
}

/// A key's state under the transaction's locks.
struct Cur {
    value: Option<Vec<u8>>,
    /// A map with UIDs: the key's entry version.
    version: Option<u64>,
    /// A variable-size map: where the key's record is.
    hit: Option<Hit>,
}

impl Store {
    /// A new, empty [`Transaction`] on this store's hash maps. Its lock waits last at most
    /// the store's lock timeout (`Options::lock_timeout`) in all; see
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
    /// timeout. Maps of both kinds may be mixed (as `&dyn TxnTarget`). See DESIGN.md,
    /// "Consistent multi-key reads" (a single-key lock-free [`FixedMap::add`] undone by
    /// another between the read and its re-check is the one change it may miss;
    /// transactions' adds are always seen).
    pub fn snapshot_get<M: TxnTarget + ?Sized>(
        &self,
        keys: &[(&M, &[u8])],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        let mut maps = Vec::with_capacity(keys.len());
        let mut hashes = Vec::with_capacity(keys.len());
        for (m, k) in keys {
            let m = m.txn_map();
            same_store(sh, &m)?;
            m.check_key(k)?;
            hashes.push(hash(sh.g.seed, k));
            maps.push(m);
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
                if let Some(m) = maps.get(i) {
                    m.mref().backoff(sh, hashes[i], tries, &wait)?;
                }
            }
            tries += 1;
            seen.clear();
            out.clear();
            for (i, (m, (_, k))) in maps.iter().zip(keys).enumerate() {
                let r = match &m.0 {
                    Target::Fixed(f) => f.f.read_recorded(sh, hashes[i], k, &mut seen)?,
                    Target::Var(v) => v.m.read_recorded(sh, hashes[i], k, &mut seen)?,
                };
                match r {
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
    reads: Vec<(TxnMap, Vec<u8>, Option<Vec<u8>>)>,
    writes: Vec<TxnOp>,
}

impl TxnReads<'_> {
    /// Reads `key` and records the value: the commit happens only if it is still the
    /// key's value then. Reading a key again returns the value recorded first.
    pub fn get<M: TxnTarget + ?Sized>(&mut self, map: &M, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let map = map.txn_map();
        same_store(self.sh, &map)?;
        if let Some((_, _, v)) = self
            .reads
            .iter()
            .find(|(m, k, _)| m.id() == map.id() && k[..] == *key)
        {
            return Ok(v.clone());
        }
        let v = map.get(key)?;
        self.reads.push((map, key.to_vec(), v.clone()));
        Ok(v)
    }

    /// Reads `key` as an 8-byte little-endian `i64` (0 when absent), recorded as
    /// [`TxnReads::get`] records.
    pub fn get_i64<M: TxnTarget + ?Sized>(&mut self, map: &M, key: &[u8]) -> Result<i64> {
        let name = map.txn_map();
        Ok(match self.get(map, key)? {
            Some(v) => i64::from_le_bytes(v[..].try_into().map_err(|_| {
                Error::InvalidArgument(format!(
                    "map {:?}: key's value has {} bytes, not 8",
                    name.name(),
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

fn same_store(sh: &Shared, m: &TxnMap) -> Result<()> {
    if !std::ptr::eq(sh, &**m.sh()) {
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
                Check::Equals(v) => {
                    if let Target::Fixed(f) = &c.map.0 {
                        f.check_value(v)?
                    }
                }
                Check::Int(..) => eight(&c.map)?,
                Check::Version(_) if c.map.mref().vtrail == 0 => {
                    return Err(Error::InvalidArgument(format!(
                        "a version condition needs a map with UIDs; map {:?} has none",
                        c.map.name()
                    )));
                }
                _ => {}
            }
        }
        for list in [&self.then, &self.els] {
            for (i, op) in list.iter().enumerate() {
                same_store(sh, &op.map)?;
                op.map.check_key(&op.key)?;
                match &op.kind {
                    OpKind::Put(v) | OpKind::Insert(v) | OpKind::Replace(v) => {
                        op.map.check_value(&op.key, v)?
                    }
                    OpKind::Add(_) => eight(&op.map)?,
                    OpKind::Get | OpKind::Remove => {}
                }
                let writes = |o: &TxnOp| !matches!(o.kind, OpKind::Get);
                if writes(op)
                    && list[..i]
                        .iter()
                        .any(|o| writes(o) && o.map.id() == op.map.id() && o.key == op.key)
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
        let mut tx = crate::txn::Op::new(sh, t);
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
            if !keys.iter().any(|x| x.map.id() == m.id() && x.key == k) {
                keys.push(Key {
                    map: m,
                    key: k,
                    h: hash(sh.g.seed, k),
                    seg: 0,
                });
            }
        }
        let idx = |m: &TxnMap, k: &[u8]| {
            keys.iter()
                .position(|x| x.map.id() == m.id() && x.key == k)
                .unwrap_or(0)
        };
        let cond_at: Vec<usize> = self.conds.iter().map(|c| idx(&c.map, &c.key)).collect();
        let then_at: Vec<usize> = self.then.iter().map(|o| idx(&o.map, &o.key)).collect();
        let els_at: Vec<usize> = self.els.iter().map(|o| idx(&o.map, &o.key)).collect();
        // A variable map's writes append records (the allocator's lock) and may grow its
        // UID table (the directory's lock) while the segment locks are held: room for
        // both in the held-lock list.
        let reserve = if keys.iter().any(|k| k.map.var().is_some()) {
            2
        } else {
            0
        };
        let mut growths = 0u32;
        loop {
            // (lock word, whether it is a fixed map's segment, whose adders to drain)
            let mut locks = Vec::with_capacity(keys.len());
            for k in keys.iter_mut() {
                let m = k.map.mref();
                if !m.alive(sh) {
                    return Err(m.dropped());
                }
                let (_, _, e) = m.locate(sh, k.h, sh.file_end())?;
                k.seg = entry_seg(e);
                // Every key's lock line and home bucket on their way at once: a commit's
                // time is mostly these misses, which the locks and lookups below would
                // otherwise take one after another.
                match &k.map.0 {
                    Target::Fixed(f) => f.f.prefetch_home(sh, k.seg, k.h),
                    Target::Var(v) => v.m.prefetch_home(sh, k.seg, k.h),
                }
                locks.push((k.seg + S_LOCK, k.map.var().is_none()));
            }
            locks.sort_unstable();
            locks.dedup();
            if locks.len() as u64 + reserve > T_NHELD {
                return Err(too_large(&format!(
                    "its keys lie in {} segments",
                    locks.len()
                )));
            }
            let mut held = Held {
                tx: &tx,
                locks: Vec::with_capacity(locks.len()),
            };
            for &(l, fixed) in &locks {
                tx.lock(l)?;
                held.locks.push(l);
                if fixed {
                    wait_adders(&tx, l - S_LOCK, self.timeout)?;
                }
            }
            // Under the locks: every key must still be in the segment locked for it (a
            // split or move may have finished between the first look and the lock).
            let mut moved = false;
            for k in &keys {
                let m = k.map.mref();
                if !m.alive(sh) {
                    return Err(m.dropped());
                }
                let (_, _, e) = m.locate(sh, k.h, sh.file_end())?;
                moved |= entry_seg(e) != k.seg;
            }
            if moved {
                continue;
            }
            crate::rt::failpoint!("txn.locked");
            let mut cur = Vec::with_capacity(keys.len());
            for k in &keys {
                cur.push(match &k.map.0 {
                    Target::Fixed(f) => Cur {
                        value: f.f.locked_value(sh, k.seg, k.h, k.key),
                        version: None,
                        hit: None,
                    },
                    Target::Var(m) => match m.m.find_locked(sh, k.seg, k.h, k.key) {
                        None => Cur {
                            value: None,
                            version: None,
                            hit: None,
                        },
                        Some(hit) => Cur {
                            value: Some(copy_value(sh, &hit, &m.name)?),
                            version: m.m.locked_version(sh, &hit)?,
                            hit: Some(hit),
                        },
                    },
                });
            }
            let succeeded = self
                .conds
                .iter()
                .zip(&cond_at)
                .all(|(c, &i)| c.holds(cur[i].value.as_deref(), cur[i].version));
            let (ops, at) = if succeeded {
                (&self.then, &then_at)
            } else {
                (&self.els, &els_at)
            };
            // What each operation writes: decided from the state under the locks.
            let mut writes = Vec::with_capacity(ops.len());
            for (op, &i) in ops.iter().zip(at) {
                let old = cur[i].value.as_deref();
                writes.push(match (&op.kind, old) {
                    (OpKind::Get, _) => None,
                    (OpKind::Put(v), _) => Some(Some(v.clone())),
                    (OpKind::Insert(v), None) => Some(Some(v.clone())),
                    (OpKind::Replace(v), Some(_)) => Some(Some(v.clone())),
                    (OpKind::Remove, Some(_)) => Some(None),
                    (OpKind::Add(d), o) => {
                        let v = match o {
                            None => 0,
                            Some(b) => i64::from_le_bytes(b.try_into().map_err(|_| {
                                Error::InvalidArgument(format!(
                                    "a transaction adds to key {:?} of map {:?}, whose value \
                                     has {} bytes, not 8",
                                    String::from_utf8_lossy(&op.key),
                                    op.map.name(),
                                    b.len()
                                ))
                            })?),
                        };
                        Some(Some(v.wrapping_add(*d).to_le_bytes().to_vec()))
                    }
                    _ => None,
                });
            }
            // Maps with UIDs whose keys are inserted or removed: their UID locks, after
            // every segment lock, in offset order too.
            let mut uid_locks: Vec<u64> = ops
                .iter()
                .zip(at)
                .zip(&writes)
                .filter(|((op, &i), w)| {
                    op.map.mref().vtrail != 0
                        && op.map.var().is_some()
                        && matches!(
                            (w, &cur[i].value),
                            (Some(None), Some(_)) | (Some(Some(_)), None)
                        )
                })
                .map(|((op, _), _)| op.map.mref().hdr + M_UID_LOCK)
                .collect();
            uid_locks.sort_unstable();
            uid_locks.dedup();
            if (held.locks.len() + uid_locks.len()) as u64 + reserve > T_NHELD {
                return Err(too_large(&format!(
                    "its keys lie in {} segments of maps, {} of them with UIDs to update",
                    held.locks.len(),
                    uid_locks.len()
                )));
            }
            for &l in &uid_locks {
                tx.lock(l)?;
                held.locks.push(l);
            }
            // A variable map's value of the key's current length goes in place (the
            // single-key path's rule: `Map::in_place_ok`) when the whole plan fits that
            // way. A value's words may cost more of the redo list than an append's slot
            // and shared counter, so a plan that overflows with values in place is made
            // again with every value appended: the limit stays the appends' one.
            let mut in_place = true;
            let (plan, results, appended, olds, full) = loop {
                let mut plan = Plan::new();
                let mut results = Vec::with_capacity(ops.len());
                let mut appended: Vec<(u64, u64)> = Vec::new();
                let mut olds: Vec<(u64, u64)> = Vec::new();
                let mut went_in_place = false;
                let mut full = None;
                let mut r: Result<()> = Ok(());
                for (&i, w) in at.iter().zip(&writes) {
                    let k = &keys[i];
                    let step = (|| -> Result<bool> {
                        let Some(w) = w else { return Ok(true) };
                        match &k.map.0 {
                            Target::Fixed(f) => {
                                let w = match w {
                                    Some(v) => TxnWrite::Put(v),
                                    None => TxnWrite::Remove,
                                };
                                f.f.plan_write(&tx, &mut plan, k.seg, k.h, k.key, w)
                            }
                            Target::Var(m) => {
                                let hit = cur[i].hit.as_ref();
                                let w = match w {
                                    Some(v)
                                        if in_place
                                            && hit.is_some_and(|h| h.vlen == v.len() as u64)
                                            && m.in_place_ok(Some(v)) =>
                                    {
                                        went_in_place = true;
                                        return m.m.plan_write(
                                            &tx,
                                            &mut plan,
                                            k.seg,
                                            k.h,
                                            hit,
                                            VarWrite::InPlace(v),
                                        );
                                    }
                                    Some(v) => {
                                        let (off, len) = m.append(&tx, k.key, v)?;
                                        appended.push((off, len));
                                        VarWrite::Put(off, len)
                                    }
                                    None => VarWrite::Remove,
                                };
                                if let Some(h) = hit {
                                    olds.push((h.off, h.rec_len));
                                }
                                m.m.plan_write(&tx, &mut plan, k.seg, k.h, hit, w)
                            }
                        }
                    })();
                    // Between two writes' plans: nothing shared may have changed yet (a
                    // value in place, too, is only in the plan).
                    crate::rt::failpoint!("txn.op_planned");
                    match step {
                        Ok(true) => {}
                        Ok(false) => {
                            full = Some(i);
                            break;
                        }
                        Err(e) => {
                            r = Err(e);
                            break;
                        }
                    }
                    results.push(OpResult {
                        applied: w.is_some(),
                        value: cur[i].value.clone(),
                    });
                }
                if r.is_err() || full.is_some() {
                    // Nothing was committed: the records appended for the plan are dead.
                    for &(off, len) in &appended {
                        crate::alloc::note_dead_own(&tx, off, len);
                    }
                }
                if r.is_err() && went_in_place && plan.overflowed() {
                    in_place = false;
                    continue;
                }
                r?;
                break (plan, results, appended, olds, full);
            };
            if let Some(i) = full {
                // No free cell or slot for an insert: grow that segment by the ordinary
                // path, with none of the transaction's locks held, and start again.
                drop(held);
                growths += 1;
                if growths > 64 {
                    return Err(Error::StoreFull(format!(
                        "a transaction's inserts found no room in map {:?} after 64 growth steps",
                        keys[i].map.name()
                    )));
                }
                let h = keys[i].h;
                match &keys[i].map.0 {
                    Target::Fixed(f) => {
                        let f = &f.f;
                        let seg = f.lock_segment(&tx, h)?;
                        let r = if f.m.groups {
                            move_group(&tx, f, seg, h)
                        } else {
                            split(&tx, f, seg)
                        };
                        tx.unlock(seg + S_LOCK);
                        r?;
                    }
                    Target::Var(m) => {
                        let seg = m.m.lock_segment(&tx, h)?;
                        let r = crate::kinds::varmap::split(&tx, &m.m, seg);
                        tx.unlock(seg + S_LOCK);
                        r?;
                    }
                }
                continue;
            }
            crate::rt::failpoint!("txn.planned");
            // The records these writes replace or remove die with the commit. Their
            // chunks' dead-bytes hints are added to now, while slots still point at them
            // (as a single-key write does), and a large one's run serial read for the
            // free that follows.
            let olds: Vec<(u64, u64)> = olds
                .iter()
                .map(|&(off, len)| {
                    crate::alloc::note_dead_at(&tx, off, len);
                    (off, crate::alloc::large_serial(sh, off))
                })
                .collect();
            if plan.len() > 0 {
                let redo = plan.redo();
                tx.commit(I_REDO, &[], &redo);
                crate::rt::failpoint!("txn.committed");
                for (bo, odd) in plan.odd_headers() {
                    sh.w(bo).store(odd, Relaxed);
                }
                // Headers odd, versions busy, no value byte changed yet (an in-place
                // value's bytes are changed only by the apply, which recovery replays).
                crate::rt::failpoint!("txn.marked");
                tx.apply_range(&redo, 0, redo.n / 2);
                crate::rt::failpoint!("txn.half_applied");
                tx.apply_range(&redo, redo.n / 2, redo.n);
                crate::rt::failpoint!("txn.applied");
                tx.done();
            }
            drop(held);
            if !appended.is_empty() || !olds.is_empty() {
                for &(off, serial) in &olds {
                    crate::alloc::free_if_large(&tx, off, serial);
                }
                let consumed = appended.iter().map(|a| a.1).sum();
                crate::cleaner::maybe_clean(&tx, consumed);
                for k in keys.iter().filter(|k| k.map.var().is_some()) {
                    crate::hashmap::prepare_growth(&tx.housekeeping(), k.map.mref());
                }
                crate::alloc::allocate_ahead(sh);
            }
            crate::api::batch::flush_unless_batching(sh)?;
            return Ok(TxnOutcome { succeeded, results });
        }
    }
}

/// The locks a commit holds, released on every way out (in reverse order).
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

/// Integer conditions and adds need 8-byte values: checked up front for a fixed map; a
/// variable-size map's value is checked under the locks.
fn eight(m: &TxnMap) -> Result<()> {
    if let Target::Fixed(f) = &m.0 {
        if f.f.geo.value_size != 8 {
            return Err(Error::InvalidArgument(format!(
                "integer conditions and adds need 8-byte values; map {:?} has {}-byte values",
                f.name(),
                f.f.geo.value_size
            )));
        }
    }
    Ok(())
}
