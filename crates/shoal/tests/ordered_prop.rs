//! Model-based property test of ordered maps: every operation, checked against a
//! `BTreeMap` per map.
//!
//! What this proves, for random operation sequences over 1-3 ordered maps of one store
//! (shrunk to a minimal one on failure):
//! * `put`, `put_if_absent`, `put_if_present`, `remove`, `get`, `contains_key`, `len`,
//!   `is_empty`, `range` and `count_range` of [`OrderedMap`]; `get`, `range`,
//!   `range_rev`, `for_each` (stopped early), `count_range`, `first`, `last`, `len` of
//!   [`Snapshot`]s, with random bounds (absent, present keys, keys between, inverted);
//!   every write of [`WriteTxn`] and [`MultiWriteTxn`] (and their reads of their own
//!   writes), committed or aborted (explicitly or by drop), each return exactly what the
//!   model says;
//! * a transaction's writes are seen by no one before its commit (reads of the map from
//!   outside it, mid-transaction), and an aborted one leaves nothing;
//! * snapshots (of one map, or of all at one commit with `snapshot_with`) taken
//!   mid-sequence and read later, after more writes, show the model as of the instant
//!   they were taken;
//! * keys of random lengths up to the longest ([`MAX_ORDERED_KEY`]), keys that are prefixes
//!   of others (long ones too: past 984 bytes a key is kept out of line with its first 64
//!   bytes in the page, so compares of keys sharing longer prefixes read the rest), values
//!   from empty to several pages (past [`MAX_ORDERED_ENTRY`] of key and value together a
//!   value is kept out of line); a key one byte too long is `InvalidArgument`, from every
//!   write path, and changes nothing;
//! * a write naming a map outside a multi-map transaction is `InvalidArgument`;
//! * closing and reopening the store between steps keeps every map's contents, and
//!   `Store::check` finds no problem at the end of every case.
//!
//! `cargo test --release -p shoal --test ordered_prop` takes well under a minute on two
//! cores (a quarter of the cases in a debug build); `PROPTEST_CASES` overrides the count.
//! Every failure prints the minimal operation sequence and the `PROPTEST_RNG_SEED` that
//! reproduces it. The operations are one enum ([`Op`], [`TxOp`], [`Read`]): a new
//! operation of the API is a new variant, its generator and its model step.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use shoal::{
    Error, MultiWriteTxn, Nestable, Nested, OrderedMap, Snapshot, Store, WriteCursor, WriteIter,
    WriteTxn, MAX_ORDERED_ENTRY, MAX_ORDERED_KEY,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The longest key a page keeps whole (longer ones are kept out of line).
const LONG_KEY: usize = 984;

// ---------------------------------------------------------------------------------------
// Generated inputs
// ---------------------------------------------------------------------------------------

/// A key by its tag and length (cheap to print and shrink): keys of one tag are prefixes
/// of one another, so comparisons of keys that share long prefixes are exercised.
#[derive(Clone, Copy, Debug)]
struct K {
    tag: u8,
    len: u16,
}

impl K {
    fn bytes(self) -> Vec<u8> {
        (0..self.len as usize)
            .map(|j| {
                if j == 0 {
                    self.tag
                } else {
                    self.tag.wrapping_mul(31) ^ (j / 3) as u8
                }
            })
            .collect()
    }
}

/// A key: a new one, or the n-th (mod len, in key order) key of the model the operation
/// reads, so that reads and removes hit.
#[derive(Clone, Copy)]
enum KeyRef {
    New(K),
    Old(u16),
}

impl fmt::Debug for KeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyRef::New(k) => write!(f, "New(tag {} len {})", k.tag, k.len),
            KeyRef::Old(i) => write!(f, "Old({i})"),
        }
    }
}

/// A value by its wanted length and a seed; its length is cut to what the key leaves of
/// the entry limit.
#[derive(Clone, Copy)]
struct Val {
    len: u16,
    seed: u8,
}

impl fmt::Debug for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Val(len {} seed {})", self.len, self.seed)
    }
}

impl Val {
    fn bytes(self, key_len: usize) -> Vec<u8> {
        // Values that fill the leaf's limit with their key, and larger ones, out of line.
        let len = match self.len as usize {
            n if n <= MAX_ORDERED_ENTRY => n.min(MAX_ORDERED_ENTRY.saturating_sub(key_len)),
            n => n,
        };
        (0..len)
            .map(|j| (j as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ self.seed)
            .collect()
    }
}

/// A write or read inside a transaction.
#[derive(Clone, Debug)]
enum TxOp {
    Put(KeyRef, Val),
    PutIfAbsent(KeyRef, Val),
    PutIfPresent(KeyRef, Val),
    Remove(KeyRef),
    /// The transaction's own view of a key.
    Get(KeyRef),
    /// A read of the map from outside the transaction (a snapshot): the last commit.
    Outside(KeyRef),
    /// A put of an entry over the limit.
    TooBig(KeyRef),
    /// A read of the transaction's own state (ranges, counts, ends, iterators).
    Read(Read),
    /// A walk of a cursor over the transaction's own state, writing at the cursor too.
    Cursor(Vec<Move>),
    /// A nested transaction: committed into its parent (true) or aborted.
    Nested(Vec<TxOp>, bool),
}

/// A move of a cursor inside a write transaction, or a write at it.
#[derive(Clone, Debug)]
enum Move {
    First,
    Last,
    Seek(KeyRef),
    SeekGe(KeyRef),
    SeekLe(KeyRef),
    Next,
    Prev,
    /// Sets the value of the entry the cursor stands on.
    PutCurrent(Val),
    /// Removes the entry the cursor stands on.
    RemoveCurrent,
    /// Keeps the cursor's place, writes `put` through the transaction, takes it up again.
    Detour(KeyRef, Val),
}

/// A read of a snapshot (or of the map).
#[derive(Clone, Debug)]
enum Read {
    Get(KeyRef),
    Range(Option<KeyRef>, Option<KeyRef>, bool),
    /// `for_each` stopped after this many entries.
    Prefix(Option<KeyRef>, Option<KeyRef>, bool, u8),
    Count(Option<KeyRef>, Option<KeyRef>),
    Ends,
}

/// One step of a case. Map numbers are taken modulo the case's map count.
#[derive(Clone, Debug)]
enum Op {
    Put(u8, KeyRef, Val),
    PutIfAbsent(u8, KeyRef, Val),
    PutIfPresent(u8, KeyRef, Val),
    Remove(u8, KeyRef),
    /// A put of an entry over the limit (`InvalidArgument`, nothing changes).
    TooBig(u8, KeyRef, u8),
    /// A read through the map handle.
    MapRead(u8, Read),
    /// A transaction on one map: committed, aborted, or dropped.
    Txn(u8, Vec<TxOp>, End),
    /// A transaction over the maps of `mask` (and the first map named): its steps name
    /// maps of the whole store, those outside it are `InvalidArgument`.
    Multi(u8, u8, Vec<(u8, TxOp)>, End),
    /// A snapshot of one map, kept.
    Snap(u8),
    /// Snapshots of every map at one commit, kept.
    SnapAll,
    /// A read of the n-th kept snapshot (mod how many are kept).
    SnapRead(u8, Read),
    /// Drops the n-th kept snapshot.
    SnapDrop(u8),
    /// Closes the store (every snapshot dropped) and opens it again.
    Reopen,
    /// `Store::check`.
    Check,
}

#[derive(Clone, Copy, Debug)]
enum End {
    Commit,
    Abort,
    Drop,
}

fn key() -> BoxedStrategy<K> {
    let len = prop_oneof![
        4 => 0u16..4,
        3 => 4u16..40,
        1 => 40u16..=LONG_KEY as u16,
        1 => (LONG_KEY as u16 + 1)..=MAX_ORDERED_KEY as u16,
    ];
    (0u8..12, len).prop_map(|(tag, len)| K { tag, len }).boxed()
}

fn key_ref() -> BoxedStrategy<KeyRef> {
    prop_oneof![
        3 => key().prop_map(KeyRef::New),
        2 => any::<u16>().prop_map(KeyRef::Old),
    ]
    .boxed()
}

fn bound() -> BoxedStrategy<Option<KeyRef>> {
    prop_oneof![1 => Just(None), 3 => key_ref().prop_map(Some)].boxed()
}

fn val() -> BoxedStrategy<Val> {
    let len = prop_oneof![
        4 => 0u16..8,
        3 => 8u16..100,
        1 => 100u16..=MAX_ORDERED_ENTRY as u16,
        1 => (MAX_ORDERED_ENTRY as u16 + 1)..12_000,
    ];
    (len, any::<u8>())
        .prop_map(|(len, seed)| Val { len, seed })
        .boxed()
}

fn read() -> BoxedStrategy<Read> {
    prop_oneof![
        3 => key_ref().prop_map(Read::Get),
        3 => (bound(), bound(), any::<bool>()).prop_map(|(a, b, r)| Read::Range(a, b, r)),
        1 => (bound(), bound(), any::<bool>(), 0u8..5)
            .prop_map(|(a, b, r, n)| Read::Prefix(a, b, r, n)),
        2 => (bound(), bound()).prop_map(|(a, b)| Read::Count(a, b)),
        1 => Just(Read::Ends),
    ]
    .boxed()
}

fn a_move() -> BoxedStrategy<Move> {
    prop_oneof![
        1 => Just(Move::First),
        1 => Just(Move::Last),
        1 => key_ref().prop_map(Move::Seek),
        2 => key_ref().prop_map(Move::SeekGe),
        2 => key_ref().prop_map(Move::SeekLe),
        5 => Just(Move::Next),
        4 => Just(Move::Prev),
        1 => val().prop_map(Move::PutCurrent),
        2 => Just(Move::RemoveCurrent),
        1 => (key_ref(), val()).prop_map(|(k, v)| Move::Detour(k, v)),
    ]
    .boxed()
}

/// A step of a transaction with no nested transaction in it.
fn flat_tx_op() -> BoxedStrategy<TxOp> {
    prop_oneof![
        6 => (key_ref(), val()).prop_map(|(k, v)| TxOp::Put(k, v)),
        1 => (key_ref(), val()).prop_map(|(k, v)| TxOp::PutIfAbsent(k, v)),
        1 => (key_ref(), val()).prop_map(|(k, v)| TxOp::PutIfPresent(k, v)),
        3 => key_ref().prop_map(TxOp::Remove),
        2 => key_ref().prop_map(TxOp::Get),
        1 => key_ref().prop_map(TxOp::Outside),
        1 => key_ref().prop_map(TxOp::TooBig),
        2 => read().prop_map(TxOp::Read),
        2 => prop::collection::vec(a_move(), 1..16).prop_map(TxOp::Cursor),
    ]
    .boxed()
}

fn tx_op() -> BoxedStrategy<TxOp> {
    prop_oneof![
        12 => flat_tx_op(),
        1 => (prop::collection::vec(flat_tx_op(), 0..12), any::<bool>())
            .prop_map(|(ops, keep)| TxOp::Nested(ops, keep)),
    ]
    .boxed()
}

fn end() -> BoxedStrategy<End> {
    prop_oneof![4 => Just(End::Commit), 1 => Just(End::Abort), 1 => Just(End::Drop)].boxed()
}

fn op() -> BoxedStrategy<Op> {
    let m = 0u8..3;
    prop_oneof![
        12 => (m.clone(), key_ref(), val()).prop_map(|(m, k, v)| Op::Put(m, k, v)),
        2 => (m.clone(), key_ref(), val()).prop_map(|(m, k, v)| Op::PutIfAbsent(m, k, v)),
        2 => (m.clone(), key_ref(), val()).prop_map(|(m, k, v)| Op::PutIfPresent(m, k, v)),
        5 => (m.clone(), key_ref()).prop_map(|(m, k)| Op::Remove(m, k)),
        1 => (m.clone(), key_ref(), 0u8..3).prop_map(|(m, k, w)| Op::TooBig(m, k, w)),
        5 => (m.clone(), read()).prop_map(|(m, r)| Op::MapRead(m, r)),
        3 => (m.clone(), prop::collection::vec(tx_op(), 0..24), end())
            .prop_map(|(m, ops, e)| Op::Txn(m, ops, e)),
        2 => (
            m.clone(),
            0u8..8,
            prop::collection::vec((0u8..3, tx_op()), 0..24),
            end()
        )
            .prop_map(|(m, mask, ops, e)| Op::Multi(m, mask, ops, e)),
        2 => m.clone().prop_map(Op::Snap),
        1 => Just(Op::SnapAll),
        5 => (any::<u8>(), read()).prop_map(|(i, r)| Op::SnapRead(i, r)),
        1 => any::<u8>().prop_map(Op::SnapDrop),
        1 => Just(Op::Reopen),
        1 => Just(Op::Check),
    ]
    .boxed()
}

/// A bulk load: many puts into one map at once, so that cases reach trees of several
/// levels (splits, then merges as removes follow).
fn fill() -> BoxedStrategy<Op> {
    // Tags of the whole byte range: mostly distinct keys, so the map grows. Some are kept
    // out of line, and those of one tag are prefixes of one another: separators between
    // them are long, some out of line too.
    let len = prop_oneof![12 => 0u16..60, 1 => (LONG_KEY as u16 - 40)..3000];
    let k = (any::<u8>(), len).prop_map(|(tag, len)| K { tag, len });
    (
        0u8..3,
        prop::collection::vec((k, val()), 50..600),
        any::<bool>(),
    )
        .prop_map(|(m, kv, commit)| {
            let ops = kv
                .into_iter()
                .map(|(k, v)| TxOp::Put(KeyRef::New(k), v))
                .collect();
            Op::Txn(m, ops, if commit { End::Commit } else { End::Abort })
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------

/// What the cases exercised, summed over a run (coverage floors).
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    commits: u64,
    aborts: u64,
    multi_commits: u64,
    snapshot_reads_after_writes: u64,
    reopens: u64,
    entries_at_limit: u64,
    long_keys: u64,
    largest_map: u64,
    /// Cursor moves inside write transactions that landed on an entry.
    txn_cursor_hits: u64,
    /// Cursor moves from the gap a removal at the cursor left, landing on an entry.
    gap_moves: u64,
    /// Nested transactions aborted after writing.
    nested_aborts: u64,
}

impl Seen {
    fn add(&mut self, o: Seen) {
        self.commits += o.commits;
        self.aborts += o.aborts;
        self.multi_commits += o.multi_commits;
        self.snapshot_reads_after_writes += o.snapshot_reads_after_writes;
        self.reopens += o.reopens;
        self.entries_at_limit += o.entries_at_limit;
        self.long_keys += o.long_keys;
        self.largest_map = self.largest_map.max(o.largest_map);
        self.txn_cursor_hits += o.txn_cursor_hits;
        self.gap_moves += o.gap_moves;
        self.nested_aborts += o.nested_aborts;
    }
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

fn show(k: &[u8]) -> String {
    if k.len() <= 24 {
        format!("b\"{}\"", k.escape_ascii())
    } else {
        format!("<{} bytes: b\"{}\"...>", k.len(), k[..12].escape_ascii())
    }
}

fn resolve(model: &Model, k: KeyRef) -> Vec<u8> {
    match k {
        KeyRef::New(k) => k.bytes(),
        KeyRef::Old(i) if model.is_empty() => K { tag: 0, len: i % 3 }.bytes(),
        KeyRef::Old(i) => model.keys().nth(i as usize % model.len()).unwrap().clone(),
    }
}

/// A key one byte longer than the longest (from a key of the model, so that it may
/// extend one), with a small value.
fn too_big(model: &Model, k: KeyRef) -> (Vec<u8>, Vec<u8>) {
    let mut key = resolve(model, k);
    key.resize(MAX_ORDERED_KEY + 1, b'~');
    (key, vec![7; 3])
}

fn invalid<T: fmt::Debug>(ctx: &str, r: shoal::Result<T>) -> Result<(), TestCaseError> {
    match r {
        Err(Error::InvalidArgument(_)) => Ok(()),
        other => Err(fail(format!(
            "{ctx}: expected InvalidArgument, got {other:?}"
        ))),
    }
}

fn ok<T>(ctx: &str, r: shoal::Result<T>) -> Result<T, TestCaseError> {
    r.map_err(|e| fail(format!("{ctx}: {e}")))
}

fn same<T: PartialEq + fmt::Debug>(ctx: &str, got: T, want: T) -> Result<(), TestCaseError> {
    if got == want {
        Ok(())
    } else {
        Err(fail(format!("{ctx}: got {got:?}, want {want:?}")))
    }
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn model_range(model: &Model, lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> Entries {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    if let (Some(l), Some(h)) = (lo, hi) {
        if l >= h {
            return Vec::new();
        }
    }
    let lo = lo.as_ref().map_or(Unbounded, |k| Included(k.clone()));
    let hi = hi.as_ref().map_or(Unbounded, |k| Excluded(k.clone()));
    model
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn summary(e: &Entries) -> Vec<(String, usize)> {
    e.iter().map(|(k, v)| (show(k), v.len())).collect()
}

fn same_entries(ctx: &str, got: &Entries, want: &Entries) -> Result<(), TestCaseError> {
    if got == want {
        return Ok(());
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    Err(fail(format!(
        "{ctx}: {} entries, want {}; first difference at {at}: got {:?}, want {:?}",
        got.len(),
        want.len(),
        summary(&got[at.min(got.len())..(at + 1).min(got.len())].to_vec()),
        summary(&want[at.min(want.len())..(at + 1).min(want.len())].to_vec()),
    )))
}

/// Checks a read of a snapshot against the model it was taken at.
fn snap_read(ctx: &str, s: &Snapshot<'_>, model: &Model, r: &Read) -> Result<(), TestCaseError> {
    let b = |k: &Option<KeyRef>| k.map(|k| resolve(model, k));
    match r {
        Read::Get(k) => {
            let k = resolve(model, *k);
            same(
                &format!("{ctx}: get {}", show(&k)),
                ok(ctx, s.get(&k))?,
                model.get(&k).cloned(),
            )
        }
        Read::Range(lo, hi, rev) => {
            let (lo, hi) = (b(lo), b(hi));
            let mut want = model_range(model, &lo, &hi);
            let got = if *rev {
                want.reverse();
                ok(ctx, s.range_rev(lo.as_deref(), hi.as_deref()))?
            } else {
                ok(ctx, s.range(lo.as_deref(), hi.as_deref()))?
            };
            let what = format!(
                "{ctx}: range{} {:?}..{:?}",
                if *rev { "_rev" } else { "" },
                lo.as_deref().map(show),
                hi.as_deref().map(show)
            );
            same_entries(&what, &got, &want)
        }
        Read::Prefix(lo, hi, rev, n) => {
            let (lo, hi) = (b(lo), b(hi));
            let mut want = model_range(model, &lo, &hi);
            if *rev {
                want.reverse();
            }
            want.truncate(*n as usize + 1);
            let mut got = Vec::new();
            ok(
                ctx,
                s.for_each(lo.as_deref(), hi.as_deref(), *rev, |k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    got.len() <= *n as usize
                }),
            )?;
            same_entries(
                &format!("{ctx}: for_each stopped after {}", n + 1),
                &got,
                &want,
            )
        }
        Read::Count(lo, hi) => {
            let (lo, hi) = (b(lo), b(hi));
            same(
                &format!(
                    "{ctx}: count_range {:?}..{:?}",
                    lo.as_deref().map(show),
                    hi.as_deref().map(show)
                ),
                ok(ctx, s.count_range(lo.as_deref(), hi.as_deref()))?,
                model_range(model, &lo, &hi).len() as u64,
            )
        }
        Read::Ends => {
            let kv = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
            same(&format!("{ctx}: len"), s.len(), model.len() as u64)?;
            same(&format!("{ctx}: is_empty"), s.is_empty(), model.is_empty())?;
            same(
                &format!("{ctx}: first"),
                ok(ctx, s.first())?,
                kv(model.first_key_value()),
            )?;
            same(
                &format!("{ctx}: last"),
                ok(ctx, s.last())?,
                kv(model.last_key_value()),
            )
        }
    }
}

/// Checks a read through the map handle (its own snapshot) against the model.
fn map_read(ctx: &str, m: &OrderedMap, model: &Model, r: &Read) -> Result<(), TestCaseError> {
    let b = |k: &Option<KeyRef>| k.map(|k| resolve(model, k));
    match r {
        Read::Get(k) => {
            let k = resolve(model, *k);
            let c = format!("{ctx}: map get {}", show(&k));
            same(&c, ok(ctx, m.get(&k))?, model.get(&k).cloned())?;
            same(&c, ok(ctx, m.contains_key(&k))?, model.contains_key(&k))
        }
        Read::Range(lo, hi, _) | Read::Prefix(lo, hi, _, _) => {
            let (lo, hi) = (b(lo), b(hi));
            let got = ok(ctx, m.range(lo.as_deref(), hi.as_deref()))?;
            same_entries(
                &format!("{ctx}: map range"),
                &got,
                &model_range(model, &lo, &hi),
            )
        }
        Read::Count(lo, hi) => {
            let (lo, hi) = (b(lo), b(hi));
            same(
                &format!("{ctx}: map count_range"),
                ok(ctx, m.count_range(lo.as_deref(), hi.as_deref()))?,
                model_range(model, &lo, &hi).len() as u64,
            )
        }
        Read::Ends => {
            same(
                &format!("{ctx}: map len"),
                ok(ctx, m.len())?,
                model.len() as u64,
            )?;
            same(
                &format!("{ctx}: map is_empty"),
                ok(ctx, m.is_empty())?,
                model.is_empty(),
            )
        }
    }
}

fn verify_map(ctx: &str, m: &OrderedMap, model: &Model) -> Result<(), TestCaseError> {
    let got = ok(ctx, m.range(None, None))?;
    let want: Entries = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    same_entries(&format!("{ctx}: whole map {}", m.name()), &got, &want)?;
    same(
        &format!("{ctx}: len"),
        ok(ctx, m.len())?,
        model.len() as u64,
    )
}

fn check_store(ctx: &str, s: &Store) -> Result<(), TestCaseError> {
    let r = ok(ctx, s.check())?;
    if r.is_ok() {
        Ok(())
    } else {
        Err(fail(format!("{ctx}: check: {r}")))
    }
}

/// A kept snapshot: of which map, and the model as of when it was taken.
struct Kept<'m> {
    snap: Snapshot<'m>,
    map: usize,
    model: Model,
    /// Commits since it was taken (reads then prove it kept its view).
    writes_since: bool,
}

/// A write inside a transaction, on the model `next` of its map, through `f` (the
/// transaction's own call). Returns what the model says the call returns.
enum Step {
    Put(Vec<u8>, Vec<u8>),
    PutIfAbsent(Vec<u8>, Vec<u8>),
    PutIfPresent(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

fn model_step(next: &mut Model, s: &Step) -> bool {
    match s {
        Step::Put(k, v) => next.insert(k.clone(), v.clone()).is_none(),
        Step::PutIfAbsent(k, v) => {
            let absent = !next.contains_key(k);
            if absent {
                next.insert(k.clone(), v.clone());
            }
            absent
        }
        Step::PutIfPresent(k, v) => {
            let present = next.contains_key(k);
            if present {
                next.insert(k.clone(), v.clone());
            }
            present
        }
        Step::Remove(k) => next.remove(k).is_some(),
    }
}

fn step_of(model: &Model, op: &TxOp) -> Option<Step> {
    let kv = |k: KeyRef, v: Val| {
        let k = resolve(model, k);
        let v = v.bytes(k.len());
        (k, v)
    };
    Some(match *op {
        TxOp::Put(k, v) => {
            let (k, v) = kv(k, v);
            Step::Put(k, v)
        }
        TxOp::PutIfAbsent(k, v) => {
            let (k, v) = kv(k, v);
            Step::PutIfAbsent(k, v)
        }
        TxOp::PutIfPresent(k, v) => {
            let (k, v) = kv(k, v);
            Step::PutIfPresent(k, v)
        }
        TxOp::Remove(k) => Step::Remove(resolve(model, k)),
        _ => return None,
    })
}

fn describe(s: &Step) -> String {
    match s {
        Step::Put(k, v) => format!("put {} ({} bytes)", show(k), v.len()),
        Step::PutIfAbsent(k, v) => format!("put_if_absent {} ({} bytes)", show(k), v.len()),
        Step::PutIfPresent(k, v) => format!("put_if_present {} ({} bytes)", show(k), v.len()),
        Step::Remove(k) => format!("remove {}", show(k)),
    }
}

/// Whether a step's entry fills the leaf's limit or passes it (its value out of line).
fn at_limit(s: &Step) -> bool {
    matches!(s, Step::Put(k, v) | Step::PutIfAbsent(k, v) | Step::PutIfPresent(k, v)
        if k.len() + v.len() >= MAX_ORDERED_ENTRY)
}

/// Whether a step puts a key kept out of line.
fn long_key(s: &Step) -> bool {
    matches!(s, Step::Put(k, _) | Step::PutIfAbsent(k, _) | Step::PutIfPresent(k, _)
        if k.len() > LONG_KEY)
}

struct Case {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    n: usize,
    models: Vec<Model>,
    seen: Seen,
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("om{i}")).collect()
}

impl Case {
    /// Runs `ops` from `*i` on a freshly opened store until a `Reopen` (consumed) or the
    /// end. Snapshots live only within one such stretch.
    fn stretch(&mut self, ops: &[Op], i: &mut usize) -> Result<(), TestCaseError> {
        let store = ok("open", Store::open(&self.path))?;
        let maps: Vec<OrderedMap> = names(self.n)
            .iter()
            .map(|n| ok("ordered_map", store.ordered_map(n)))
            .collect::<Result<_, _>>()?;
        for (m, model) in maps.iter().zip(&self.models) {
            verify_map(&format!("op {i} (after open)"), m, model)?;
        }
        let mut kept: Vec<Kept<'_>> = Vec::new();
        while *i < ops.len() {
            let op = &ops[*i];
            let ctx = format!("op {i} {op:?}");
            *i += 1;
            match op {
                Op::Reopen => {
                    self.seen.reopens += 1;
                    drop(kept);
                    return Ok(());
                }
                Op::Check => check_store(&ctx, &store)?,
                Op::Snap(m) => {
                    let m = *m as usize % self.n;
                    let snap = ok(&ctx, maps[m].snapshot())?;
                    kept.push(Kept {
                        snap,
                        map: m,
                        model: self.models[m].clone(),
                        writes_since: false,
                    });
                }
                Op::SnapAll => {
                    let others: Vec<&OrderedMap> = maps[1..].iter().collect();
                    let snaps = ok(&ctx, maps[0].snapshot_with(&others))?;
                    let seq = snaps[0].sequence();
                    for (m, snap) in snaps.into_iter().enumerate() {
                        same(&format!("{ctx}: sequence of map {m}"), snap.sequence(), seq)?;
                        kept.push(Kept {
                            snap,
                            map: m,
                            model: self.models[m].clone(),
                            writes_since: false,
                        });
                    }
                }
                Op::SnapRead(j, r) => {
                    if kept.is_empty() {
                        continue;
                    }
                    let k = &kept[*j as usize % kept.len()];
                    let c = format!("{ctx} (a snapshot of map {})", k.map);
                    snap_read(&c, &k.snap, &k.model, r)?;
                    if k.writes_since {
                        self.seen.snapshot_reads_after_writes += 1;
                    }
                }
                Op::SnapDrop(j) => {
                    if !kept.is_empty() {
                        let n = kept.len();
                        kept.remove(*j as usize % n);
                    }
                }
                Op::MapRead(m, r) => {
                    let m = *m as usize % self.n;
                    map_read(&ctx, &maps[m], &self.models[m], r)?;
                }
                Op::TooBig(m, k, way) => {
                    let m = *m as usize % self.n;
                    let (k, v) = too_big(&self.models[m], *k);
                    match way {
                        0 => invalid(&ctx, maps[m].put(&k, &v))?,
                        1 => invalid(&ctx, maps[m].put_if_absent(&k, &v))?,
                        _ => invalid(&ctx, maps[m].put_if_present(&k, &v))?,
                    }
                }
                Op::Put(m, k, v) | Op::PutIfAbsent(m, k, v) | Op::PutIfPresent(m, k, v) => {
                    let m = *m as usize % self.n;
                    let model = &mut self.models[m];
                    let k = resolve(model, *k);
                    let v = v.bytes(k.len());
                    if k.len() + v.len() >= MAX_ORDERED_ENTRY {
                        self.seen.entries_at_limit += 1;
                    }
                    self.seen.long_keys += (k.len() > LONG_KEY) as u64;
                    let map = &maps[m];
                    match op {
                        Op::Put(..) => {
                            ok(&ctx, map.put(&k, &v))?;
                            model_step(model, &Step::Put(k, v));
                        }
                        Op::PutIfAbsent(..) => {
                            let got = ok(&ctx, map.put_if_absent(&k, &v))?;
                            same(&ctx, got, model_step(model, &Step::PutIfAbsent(k, v)))?;
                        }
                        _ => {
                            let got = ok(&ctx, map.put_if_present(&k, &v))?;
                            same(&ctx, got, model_step(model, &Step::PutIfPresent(k, v)))?;
                        }
                    }
                    written(&mut kept, m);
                }
                Op::Remove(m, k) => {
                    let m = *m as usize % self.n;
                    let k = resolve(&self.models[m], *k);
                    let got = ok(&ctx, maps[m].remove(&k))?;
                    same(&ctx, got, model_step(&mut self.models[m], &Step::Remove(k)))?;
                    written(&mut kept, m);
                }
                Op::Txn(m, tops, end) => {
                    let m = *m as usize % self.n;
                    self.txn(&ctx, &maps[m], m, tops, *end)?;
                    if matches!(end, End::Commit) {
                        written(&mut kept, m);
                    }
                }
                Op::Multi(first, mask, tops, end) => {
                    let first = *first as usize % self.n;
                    let mut inside = vec![first];
                    inside.extend((0..self.n).filter(|&j| j != first && mask & (1 << j) != 0));
                    self.multi(&ctx, &maps, &inside, tops, *end)?;
                    if matches!(end, End::Commit) {
                        for &j in &inside {
                            written(&mut kept, j);
                        }
                    }
                }
            }
            let largest = self
                .models
                .iter()
                .map(|m| m.len() as u64)
                .max()
                .unwrap_or(0);
            self.seen.largest_map = self.seen.largest_map.max(largest);
        }
        for (m, model) in maps.iter().zip(&self.models) {
            verify_map("end of the case", m, model)?;
        }
        for k in &kept {
            snap_read(
                "end of the case",
                &k.snap,
                &k.model,
                &Read::Range(None, None, false),
            )?;
        }
        drop(kept);
        check_store("end of the case", &store)
    }

    fn txn(
        &mut self,
        ctx: &str,
        map: &OrderedMap,
        m: usize,
        tops: &[TxOp],
        end: End,
    ) -> Result<(), TestCaseError> {
        let committed = self.models.clone();
        let mut next = committed.clone();
        let mut w = ok(ctx, map.write())?;
        let tops: Vec<(u8, TxOp)> = tops.iter().map(|t| (m as u8, t.clone())).collect();
        // The one map of a single-map transaction is found by its index: the other
        // entries of `maps` are never named.
        let mut maps: Vec<OrderedMap> = Vec::new();
        for _ in 0..=m {
            maps.push(map.clone());
        }
        tx_steps(
            &mut self.seen,
            ctx,
            &mut w,
            &maps,
            &[m],
            &committed,
            &mut next,
            &tops,
        )?;
        match end {
            End::Commit => {
                ok(ctx, w.commit())?;
                self.models[m] = next.swap_remove(m);
                self.seen.commits += 1;
            }
            End::Abort => {
                w.abort();
                self.seen.aborts += 1;
            }
            End::Drop => {
                drop(w);
                self.seen.aborts += 1;
            }
        }
        verify_map(&format!("{ctx}: after it ended"), map, &self.models[m])
    }

    fn multi(
        &mut self,
        ctx: &str,
        maps: &[OrderedMap],
        inside: &[usize],
        tops: &[(u8, TxOp)],
        end: End,
    ) -> Result<(), TestCaseError> {
        let committed = self.models.clone();
        let mut next = self.models.clone();
        let others: Vec<&OrderedMap> = inside[1..].iter().map(|&j| &maps[j]).collect();
        let mut t = ok(ctx, maps[inside[0]].write_with(&others))?;
        tx_steps(
            &mut self.seen,
            ctx,
            &mut t,
            maps,
            inside,
            &committed,
            &mut next,
            tops,
        )?;
        match end {
            End::Commit => {
                ok(ctx, t.commit())?;
                self.models = next;
                self.seen.multi_commits += 1;
            }
            End::Abort => {
                t.abort();
                self.seen.aborts += 1;
            }
            End::Drop => {
                drop(t);
                self.seen.aborts += 1;
            }
        }
        for (m, model) in maps.iter().zip(&self.models) {
            verify_map(&format!("{ctx}: after it ended"), m, model)?;
        }
        Ok(())
    }
}

/// The calls of a transaction's steps, the same on a [`WriteTxn`] (which ignores the
/// map: it has one) and a [`MultiWriteTxn`].
trait Tx<'m>: Nestable + Sized {
    fn put(&mut self, m: &OrderedMap, k: &[u8], v: &[u8]) -> shoal::Result<bool>;
    fn put_if_absent(&mut self, m: &OrderedMap, k: &[u8], v: &[u8]) -> shoal::Result<bool>;
    fn put_if_present(&mut self, m: &OrderedMap, k: &[u8], v: &[u8]) -> shoal::Result<bool>;
    fn remove(&mut self, m: &OrderedMap, k: &[u8]) -> shoal::Result<bool>;
    fn get(&mut self, m: &OrderedMap, k: &[u8]) -> shoal::Result<Option<Vec<u8>>>;
    fn cursor(&mut self, m: &OrderedMap) -> shoal::Result<WriteCursor<'_, 'm>>;
    fn cursor_at(
        &mut self,
        m: &OrderedMap,
        p: shoal::CursorPlace,
    ) -> shoal::Result<WriteCursor<'_, 'm>>;
    fn iter(
        &self,
        m: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> shoal::Result<WriteIter<'_, 'm>>;
    fn prefix(&self, m: &OrderedMap, p: &[u8]) -> shoal::Result<WriteIter<'_, 'm>>;
    fn range(&self, m: &OrderedMap, lo: Option<&[u8]>, hi: Option<&[u8]>)
        -> shoal::Result<Entries>;
    fn range_rev(
        &self,
        m: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> shoal::Result<Entries>;
    fn count_range(
        &self,
        m: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> shoal::Result<u64>;
    fn first(&self, m: &OrderedMap) -> shoal::Result<Option<(Vec<u8>, Vec<u8>)>>;
    fn last(&self, m: &OrderedMap) -> shoal::Result<Option<(Vec<u8>, Vec<u8>)>>;
    fn len(&self, m: &OrderedMap) -> shoal::Result<u64>;
    fn nest(&mut self) -> Nested<'_, Self>;
}

/// The map argument of a [`MultiWriteTxn`]'s calls, in [`tx_impl`].
fn on(m: &OrderedMap) -> &OrderedMap {
    m
}

/// [`Tx`] for transaction type `$t`, by its own calls: with `on` they take the map first
/// (a [`MultiWriteTxn`]'s), without it they have theirs (a [`WriteTxn`]'s). `$extra`: the
/// calls whose shapes differ between the two.
macro_rules! tx_impl {
    ($t:ident $(, $on:ident)?; $($extra:item)*) => {
        impl<'m> Tx<'m> for $t<'m> {
            fn put(&mut self, _m: &OrderedMap, k: &[u8], v: &[u8]) -> shoal::Result<bool> {
                $t::put(self, $($on(_m),)? k, v)
            }
            fn put_if_absent(&mut self, _m: &OrderedMap, k: &[u8], v: &[u8]) -> shoal::Result<bool> {
                $t::put_if_absent(self, $($on(_m),)? k, v)
            }
            fn put_if_present(&mut self, _m: &OrderedMap, k: &[u8], v: &[u8]) -> shoal::Result<bool> {
                $t::put_if_present(self, $($on(_m),)? k, v)
            }
            fn remove(&mut self, _m: &OrderedMap, k: &[u8]) -> shoal::Result<bool> {
                $t::remove(self, $($on(_m),)? k)
            }
            fn get(&mut self, _m: &OrderedMap, k: &[u8]) -> shoal::Result<Option<Vec<u8>>> {
                $t::get(self, $($on(_m),)? k)
            }
            fn cursor_at(
                &mut self,
                _m: &OrderedMap,
                p: shoal::CursorPlace,
            ) -> shoal::Result<WriteCursor<'_, 'm>> {
                $t::cursor_at(self, $($on(_m),)? p)
            }
            fn iter(
                &self,
                _m: &OrderedMap,
                lo: Option<&[u8]>,
                hi: Option<&[u8]>,
            ) -> shoal::Result<WriteIter<'_, 'm>> {
                $t::iter(self, $($on(_m),)? lo, hi)
            }
            fn prefix(&self, _m: &OrderedMap, p: &[u8]) -> shoal::Result<WriteIter<'_, 'm>> {
                $t::prefix(self, $($on(_m),)? p)
            }
            fn range(
                &self,
                _m: &OrderedMap,
                lo: Option<&[u8]>,
                hi: Option<&[u8]>,
            ) -> shoal::Result<Entries> {
                $t::range(self, $($on(_m),)? lo, hi)
            }
            fn range_rev(
                &self,
                _m: &OrderedMap,
                lo: Option<&[u8]>,
                hi: Option<&[u8]>,
            ) -> shoal::Result<Entries> {
                $t::range_rev(self, $($on(_m),)? lo, hi)
            }
            fn count_range(
                &self,
                _m: &OrderedMap,
                lo: Option<&[u8]>,
                hi: Option<&[u8]>,
            ) -> shoal::Result<u64> {
                $t::count_range(self, $($on(_m),)? lo, hi)
            }
            fn first(&self, _m: &OrderedMap) -> shoal::Result<Option<(Vec<u8>, Vec<u8>)>> {
                $t::first(self, $($on(_m))?)
            }
            fn last(&self, _m: &OrderedMap) -> shoal::Result<Option<(Vec<u8>, Vec<u8>)>> {
                $t::last(self, $($on(_m))?)
            }
            fn nest(&mut self) -> Nested<'_, Self> {
                self.nested()
            }
            $($extra)*
        }
    };
}

tx_impl!(WriteTxn;
    fn cursor(&mut self, _: &OrderedMap) -> shoal::Result<WriteCursor<'_, 'm>> {
        Ok(WriteTxn::cursor(self))
    }
    fn len(&self, _: &OrderedMap) -> shoal::Result<u64> {
        Ok(WriteTxn::len(self))
    }
);
tx_impl!(MultiWriteTxn, on;
    fn cursor(&mut self, m: &OrderedMap) -> shoal::Result<WriteCursor<'_, 'm>> {
        MultiWriteTxn::cursor(self, m)
    }
    fn len(&self, m: &OrderedMap) -> shoal::Result<u64> {
        MultiWriteTxn::len(self, m)
    }
);

/// Runs the steps `tops` of a transaction over the maps `inside` (each step names a map
/// of the store by index; one outside the transaction is refused) against `next`, the
/// models as the transaction has them, and `committed`, as readers outside have them.
#[allow(clippy::too_many_arguments)]
fn tx_steps<'m, T: Tx<'m>>(
    seen: &mut Seen,
    ctx: &str,
    t: &mut T,
    maps: &[OrderedMap],
    inside: &[usize],
    committed: &[Model],
    next: &mut Vec<Model>,
    tops: &[(u8, TxOp)],
) -> Result<(), TestCaseError> {
    let n = committed.len();
    for (j, (m, top)) in tops.iter().enumerate() {
        let m = *m as usize % n;
        let map = &maps[m];
        let c = format!("{ctx}: step {j} on map {m}");
        if !inside.contains(&m) && !matches!(top, TxOp::Outside(_)) {
            let k = resolve(&next[m], KeyRef::Old(0));
            invalid(&c, t.put(map, &k, b"v"))?;
            invalid(&c, t.remove(map, &k))?;
            invalid(&c, t.get(map, &k))?;
            invalid(&c, t.cursor(map).map(|_| ()))?;
            invalid(&c, t.range(map, None, None))?;
            continue;
        }
        match top {
            TxOp::Get(k) => {
                let k = resolve(&next[m], *k);
                same(
                    &format!("{c}: get {}", show(&k)),
                    ok(&c, t.get(map, &k))?,
                    next[m].get(&k).cloned(),
                )?;
            }
            TxOp::Outside(k) => {
                let k = resolve(&next[m], *k);
                same(
                    &format!("{c}: read from outside the transaction {}", show(&k)),
                    ok(&c, map.get(&k))?,
                    committed[m].get(&k).cloned(),
                )?;
            }
            TxOp::TooBig(k) => {
                let (k, v) = too_big(&next[m], *k);
                invalid(&c, t.put(map, &k, &v))?;
                invalid(&c, t.put_if_present(map, &k, &v))?;
            }
            TxOp::Read(r) => tx_read(&c, t, map, &next[m], r)?,
            TxOp::Cursor(moves) => {
                let model = &mut next[m];
                tx_cursor(seen, &c, t, map, model, moves)?;
            }
            TxOp::Nested(ops, keep) => {
                let before = next.clone();
                let inner: Vec<(u8, TxOp)> = ops.iter().map(|o| (m as u8, o.clone())).collect();
                let mut nested = t.nest();
                tx_steps(
                    seen,
                    &c,
                    &mut *nested,
                    maps,
                    inside,
                    committed,
                    next,
                    &inner,
                )?;
                if *keep {
                    nested.commit();
                } else {
                    nested.abort();
                    if *next != before {
                        seen.nested_aborts += 1;
                    }
                    *next = before;
                }
                // The parent reads what the nested transaction left it.
                let got = ok(&c, t.range(map, None, None))?;
                let want: Entries = next[m]
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                same_entries(&format!("{c}: after the nested transaction"), &got, &want)?;
            }
            _ => {
                let s = step_of(&next[m], top).unwrap();
                if at_limit(&s) {
                    seen.entries_at_limit += 1;
                }
                seen.long_keys += long_key(&s) as u64;
                let c = format!("{c}: {}", describe(&s));
                let got = match &s {
                    Step::Put(k, v) => ok(&c, t.put(map, k, v))?,
                    Step::PutIfAbsent(k, v) => ok(&c, t.put_if_absent(map, k, v))?,
                    Step::PutIfPresent(k, v) => ok(&c, t.put_if_present(map, k, v))?,
                    Step::Remove(k) => ok(&c, t.remove(map, k))?,
                };
                same(&c, got, model_step(&mut next[m], &s))?;
            }
        }
    }
    Ok(())
}

/// Checks a read of a transaction's own state against the model it should have.
fn tx_read<'m, T: Tx<'m>>(
    ctx: &str,
    t: &mut T,
    map: &OrderedMap,
    model: &Model,
    r: &Read,
) -> Result<(), TestCaseError> {
    let b = |k: &Option<KeyRef>| k.map(|k| resolve(model, k));
    match r {
        Read::Get(k) => {
            let k = resolve(model, *k);
            same(
                &format!("{ctx}: txn get {}", show(&k)),
                ok(ctx, t.get(map, &k))?,
                model.get(&k).cloned(),
            )
        }
        Read::Range(lo, hi, rev) => {
            let (lo, hi) = (b(lo), b(hi));
            let mut want = model_range(model, &lo, &hi);
            let got = if *rev {
                want.reverse();
                ok(ctx, t.range_rev(map, lo.as_deref(), hi.as_deref()))?
            } else {
                ok(ctx, t.range(map, lo.as_deref(), hi.as_deref()))?
            };
            let what = format!(
                "{ctx}: txn range{} {:?}..{:?}",
                if *rev { "_rev" } else { "" },
                lo.as_deref().map(show),
                hi.as_deref().map(show)
            );
            same_entries(&what, &got, &want)
        }
        Read::Prefix(lo, hi, rev, n) => {
            let (lo, hi) = (b(lo), b(hi));
            // The first n + 1 entries from the chosen end, then the rest from the other.
            let want = model_range(model, &lo, &hi);
            let it = ok(ctx, t.iter(map, lo.as_deref(), hi.as_deref()))?;
            let mut it = it.map(|e| e.map_err(|e| fail(format!("{ctx}: txn iter: {e}"))));
            let k = (*n as usize + 1).min(want.len());
            let mut got = Vec::new();
            for _ in 0..k {
                let e = if *rev { it.next_back() } else { it.next() };
                got.push(e.ok_or_else(|| fail(format!("{ctx}: txn iter ended early")))??);
            }
            let rest: Vec<_> = if *rev {
                it.collect::<Result<_, _>>()?
            } else {
                let mut r: Vec<_> = it.rev().collect::<Result<_, _>>()?;
                r.reverse();
                r
            };
            let mut all = got;
            if *rev {
                all.reverse();
                let mut v = rest;
                v.extend(all);
                all = v;
            } else {
                all.extend(rest);
            }
            same_entries(&format!("{ctx}: txn iter from both ends"), &all, &want)?;
            // A prefix scan: the entries whose key starts with the low bound.
            if let Some(p) = lo {
                let got: Entries = ok(ctx, t.prefix(map, &p)?.collect())?;
                let want: Entries = model
                    .range(p.clone()..)
                    .take_while(|(k, _)| k.starts_with(&p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                same_entries(&format!("{ctx}: txn prefix {}", show(&p)), &got, &want)?;
            }
            Ok(())
        }
        Read::Count(lo, hi) => {
            let (lo, hi) = (b(lo), b(hi));
            same(
                &format!(
                    "{ctx}: txn count_range {:?}..{:?}",
                    lo.as_deref().map(show),
                    hi.as_deref().map(show)
                ),
                ok(ctx, t.count_range(map, lo.as_deref(), hi.as_deref()))?,
                model_range(model, &lo, &hi).len() as u64,
            )
        }
        Read::Ends => {
            let kv = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
            same(
                &format!("{ctx}: txn len"),
                ok(ctx, t.len(map))?,
                model.len() as u64,
            )?;
            same(
                &format!("{ctx}: txn first"),
                ok(ctx, t.first(map))?,
                kv(model.first_key_value()),
            )?;
            same(
                &format!("{ctx}: txn last"),
                ok(ctx, t.last(map))?,
                kv(model.last_key_value()),
            )
        }
    }
}

/// Where a model cursor stands.
#[derive(Clone, Debug)]
enum At {
    Nothing,
    On(Vec<u8>),
    /// Where the entry it stood on was before it was removed at the cursor.
    Gap(Vec<u8>),
}

/// Walks a cursor over a transaction's own state, writing at it, against the model.
fn tx_cursor<'m, T: Tx<'m>>(
    seen: &mut Seen,
    ctx: &str,
    t: &mut T,
    map: &OrderedMap,
    model: &mut Model,
    moves: &[Move],
) -> Result<(), TestCaseError> {
    use std::ops::Bound::{Excluded, Unbounded};
    let mut at = At::Nothing;
    let mut c = ok(ctx, t.cursor(map))?;
    for (j, mv) in moves.iter().enumerate() {
        let cx = format!("{ctx}: cursor move {j} {mv:?} from {at:?}");
        let key_of = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, _)| k.clone());
        let to = |k: Option<Vec<u8>>| k.map_or(At::Nothing, At::On);
        let from_gap = matches!(at, At::Gap(_));
        let landed = match mv {
            Move::First => to(key_of(model.first_key_value())),
            Move::Last => to(key_of(model.last_key_value())),
            Move::Seek(k) => {
                let k = resolve(model, *k);
                to(model.contains_key(&k).then_some(k))
            }
            Move::SeekGe(k) => to(key_of(model.range(resolve(model, *k)..).next())),
            Move::SeekLe(k) => to(key_of(model.range(..=resolve(model, *k)).next_back())),
            Move::Next => match &at {
                // A cursor on nothing is not stepped (where it goes is not what this
                // test models).
                At::Nothing => continue,
                At::On(k) => to(key_of(model.range((Excluded(k.clone()), Unbounded)).next())),
                At::Gap(g) => to(key_of(model.range(g.clone()..).next())),
            },
            Move::Prev => match &at {
                At::Nothing => continue,
                At::On(k) => to(key_of(model.range(..k.clone()).next_back())),
                At::Gap(g) => to(key_of(model.range(..=g.clone()).next_back())),
            },
            Move::PutCurrent(v) => {
                let want = matches!(at, At::On(_));
                let k = match &at {
                    At::On(k) => k.clone(),
                    _ => Vec::new(),
                };
                let v = v.bytes(k.len());
                same(&cx, ok(&cx, c.put_current(&v))?, want)?;
                if want {
                    model.insert(k, v);
                }
                at.clone()
            }
            Move::RemoveCurrent => {
                let want = matches!(at, At::On(_));
                same(&cx, ok(&cx, c.remove_current())?, want)?;
                match &at {
                    At::On(k) => {
                        model.remove(k);
                        At::Gap(k.clone())
                    }
                    other => other.clone(),
                }
            }
            Move::Detour(k, v) => {
                let place = c.into_place();
                let k = resolve(model, *k);
                let v = v.bytes(k.len());
                ok(&cx, t.put(map, &k, &v))?;
                model.insert(k, v);
                c = ok(&cx, t.cursor_at(map, place))?;
                at.clone()
            }
        };
        let on = match mv {
            Move::First => Some(c.first()),
            Move::Last => Some(c.last()),
            Move::Seek(k) => Some(c.seek(&resolve(model, *k))),
            Move::SeekGe(k) => Some(c.seek_ge(&resolve(model, *k))),
            Move::SeekLe(k) => Some(c.seek_le(&resolve(model, *k))),
            Move::Next => Some(c.move_next()),
            Move::Prev => Some(c.move_prev()),
            _ => None,
        };
        if let Some(on) = on {
            same(
                &format!("{cx}: stands on an entry"),
                ok(&cx, on)?,
                matches!(landed, At::On(_)),
            )?;
        }
        let moved = matches!(
            mv,
            Move::First
                | Move::Last
                | Move::Seek(_)
                | Move::SeekGe(_)
                | Move::SeekLe(_)
                | Move::Next
                | Move::Prev
        );
        let want = match &landed {
            At::On(k) => Some((k.clone(), model[k].clone())),
            _ => None,
        };
        let got = c.entry().map(|(k, v)| (k.to_vec(), v.to_vec()));
        if got != want {
            let brief =
                |e: &Option<(Vec<u8>, Vec<u8>)>| e.as_ref().map(|(k, v)| (show(k), v.len()));
            return Err(fail(format!(
                "{cx}: entry {:?}, want {:?} (or the same key with other value bytes)",
                brief(&got),
                brief(&want)
            )));
        }
        if let At::On(k) = &landed {
            if moved {
                seen.txn_cursor_hits += 1;
                if from_gap {
                    seen.gap_moves += 1;
                }
            }
            same(
                &format!("{cx}: position"),
                ok(&cx, c.position())?,
                Some(model.range(..k.clone()).count() as u64),
            )?;
        }
        at = landed;
    }
    Ok(())
}

/// Marks the snapshots of map `m` as having seen a commit since they were taken.
fn written(kept: &mut [Kept<'_>], m: usize) {
    for k in kept.iter_mut().filter(|k| k.map == m) {
        k.writes_since = true;
    }
}

fn run_case(n: usize, ops: &[Op]) -> Result<Seen, TestCaseError> {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("temp dir");
    let mut c = Case {
        path: dir.path().join("o.shoal"),
        _dir: dir,
        n,
        models: vec![Model::new(); n],
        seen: Seen::default(),
    };
    let mut i = 0;
    while i < ops.len() {
        c.stretch(ops, &mut i)?;
    }
    Ok(c.seen)
}

// ---------------------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------------------

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// `PROPTEST_CASES`, else `default` (a quarter of it in a debug build).
fn cases_or(default: u32) -> u32 {
    let scaled = if cfg!(debug_assertions) {
        (default / 4).max(4)
    } else {
        default
    };
    env_u32("PROPTEST_CASES").unwrap_or(scaled)
}

/// Runs `cases` cases with a printed, reproducible seed (`PROPTEST_RNG_SEED`); returns
/// the totals of what they exercised.
fn run<S>(name: &str, cases: u32, strategy: S) -> Seen
where
    S: Strategy<Value = (usize, Vec<Op>)>,
{
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    let total = Mutex::new(Seen::default());
    let mut runner = TestRunner::new(config);
    let r = runner.run(&strategy, |(n, ops)| {
        let s = run_case(n, &ops)?;
        total.lock().unwrap().add(s);
        Ok(())
    });
    let total = *total.lock().unwrap();
    match r {
        Ok(()) => {
            println!("{name}: {cases} cases passed (PROPTEST_RNG_SEED={seed}); exercised {total:?}");
            total
        }
        Err(TestError::Fail(why, value)) => panic!(
            "{name} failed: {why}\nminimal failing input: {value:#?}\nreproduce with PROPTEST_RNG_SEED={seed} PROPTEST_CASES={cases}"
        ),
        Err(TestError::Abort(why)) => panic!("{name} aborted: {why} (PROPTEST_RNG_SEED={seed})"),
    }
}

fn floors(name: &str, cases: u32, total: &Seen, what: &[(&str, u64)]) {
    if cases < 16 {
        println!("{name}: only {cases} cases; coverage floors not enforced");
        return;
    }
    for (label, v) in what {
        assert!(
            *v > 0,
            "{name}: {cases} cases never exercised {label}: {total:?}"
        );
    }
}

/// Every operation, in 1-3 maps, small and large keys and values, with snapshots,
/// transactions of both kinds, reopens and checks.
#[test]
fn ordered_maps_follow_a_btreemap_through_every_operation() {
    let name = "ordered_maps_follow_a_btreemap_through_every_operation";
    let cases = cases_or(256);
    let total = run(
        name,
        cases,
        (1usize..=3, prop::collection::vec(op(), 1..400)),
    );
    floors(
        name,
        cases,
        &total,
        &[
            ("commits", total.commits),
            ("multi-map commits", total.multi_commits),
            ("aborts", total.aborts),
            (
                "snapshot reads after writes",
                total.snapshot_reads_after_writes,
            ),
            ("reopens", total.reopens),
            (
                "entries at the leaf's limit or out of line",
                total.entries_at_limit,
            ),
            ("puts of keys kept out of line", total.long_keys),
            (
                "cursor moves inside write transactions",
                total.txn_cursor_hits,
            ),
            ("cursor moves from a removed entry's gap", total.gap_moves),
            (
                "nested transactions aborted after writing",
                total.nested_aborts,
            ),
        ],
    );
}

/// Bulk loads among the other operations: trees of several levels that split and then
/// shrink, snapshots of big trees kept while they change.
#[test]
fn ordered_maps_follow_a_btreemap_in_deep_trees() {
    let name = "ordered_maps_follow_a_btreemap_in_deep_trees";
    let cases = cases_or(64);
    let ops = prop::collection::vec(prop_oneof![1 => fill(), 6 => op()], 1..120);
    let total = run(name, cases, (1usize..=3, ops));
    floors(
        name,
        cases,
        &total,
        &[(
            "a map of over 1000 entries",
            (total.largest_map > 1000) as u64,
        )],
    );
}
