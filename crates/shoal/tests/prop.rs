//! Model-based property tests: every map operation, checked against a `std` `HashMap`.
//!
//! What this proves, for random operation sequences (shrunk to a minimal one on failure):
//! * `put`, `swap`, `insert`, `replace`, `remove`, `take`, `get`, `get_into`, `contains`,
//!   `len`, `clear`, `iter`, `keys`, `stats`, `Store::compact`, `drop_map` + re-create
//!   and a full close/reopen (`Store::open_existing`) each return exactly what a
//!   `HashMap` model says, and `iter`/`keys` yield every key exactly once;
//! * this holds with keys from a small space (overwrites and removes hit constantly) and
//!   from large ones, with 0-length keys and values, keys of the maximum length, values
//!   around the largest record a chunk holds and values several chunks long (large-record
//!   runs), in maps with tiny segments (1-4 main buckets, 1-2 stash buckets: constant
//!   splits), in a store with 64 KiB chunks (so the cleaner and compaction move live
//!   records while the sequence runs);
//! * several maps of one store, whose records interleave in the same data chunks and
//!   share keys, stay independent (including across drops and re-creations);
//! * records with and without checksums; the byte counters (`stats().live_bytes`) equal
//!   the model's record sizes exactly;
//! * after every case `Store::check()` finds no problem, and reopening the store finds
//!   the same contents;
//! * regressions: `compact` terminates when slack it cannot reclaim exceeds a chunk, and a
//!   handle on a dropped map answers NotFound even after its chunk was reused.
//!
//! Case counts are small enough for `cargo test --release -p shoal --test prop` to take
//! well under a minute on two cores (a quarter of them in a debug build);
//! `PROPTEST_CASES` overrides them. Every failure prints the minimal operation sequence
//! and the `PROPTEST_RNG_SEED` that reproduces it; fixed sequences prove the configuration
//! reaches splits, large records and the cleaner whatever the case count.

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use shoal::{Error, Map, MapOptions, OpenMode, Options, PutOutcome, Store, MAX_KEY_LEN};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;

const CHUNK: u64 = 64 * 1024;

// ---------------------------------------------------------------------------------------
// Generated inputs
// ---------------------------------------------------------------------------------------

/// A key: either a new one, or the n-th (mod len, in sorted order) key present in the
/// model of the map at the time the operation runs, so that removes and reads hit even
/// in large key spaces.
#[derive(Clone)]
enum KeyRef {
    New(Vec<u8>),
    Old(u16),
}

impl fmt::Debug for KeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyRef::New(k) => write!(f, "New({})", show_key(k)),
            KeyRef::Old(i) => write!(f, "Old({i})"),
        }
    }
}

fn show_key(k: &[u8]) -> String {
    if k.len() <= 40 {
        format!("b\"{}\"", k.escape_ascii())
    } else {
        format!("<{} bytes: b\"{}\"...>", k.len(), k[..16].escape_ascii())
    }
}

/// A value, described by its length and a seed (cheap to print and to shrink).
#[derive(Clone, Copy)]
struct Val {
    len: u32,
    seed: u8,
}

impl Val {
    fn bytes(self) -> Vec<u8> {
        (0..self.len)
            .map(|j| (j.wrapping_mul(2_654_435_761) >> 13) as u8 ^ self.seed)
            .collect()
    }
}

impl fmt::Debug for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Val({}B#{})", self.len, self.seed)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(usize, KeyRef, Val),
    Swap(usize, KeyRef, Val),
    Insert(usize, KeyRef, Val),
    Replace(usize, KeyRef, Val),
    Remove(usize, KeyRef),
    Take(usize, KeyRef),
    Get(usize, KeyRef),
    GetInto(usize, KeyRef),
    Contains(usize, KeyRef),
    Len(usize),
    Clear(usize),
    Iter(usize),
    Keys(usize),
    Stats(usize),
    /// Put of a key of exactly `MAX_KEY_LEN` bytes (its record is a large record).
    MaxKey(usize, u8, Val),
    /// Every call with a key one byte too long fails with InvalidArgument, changing nothing.
    OversizeKey(usize),
    Compact,
    DropRecreate(usize),
    Reopen,
    Check,
}

/// Keys `0..n` of a small space: index 0 is the empty key; lengths vary.
fn key_of(i: u16) -> Vec<u8> {
    if i == 0 {
        return Vec::new();
    }
    let mut k = format!("k{i}").into_bytes();
    k.resize(k.len() + (i as usize * 7) % 23, b'.');
    k
}

fn max_key(tag: u8) -> Vec<u8> {
    let mut k = vec![tag; MAX_KEY_LEN];
    k[0] = b'M';
    k
}

fn small_keys(n: u16) -> BoxedStrategy<KeyRef> {
    Union::new_weighted(vec![
        (12, (0..n).prop_map(|i| KeyRef::New(key_of(i))).boxed()),
        (3, any::<u16>().prop_map(KeyRef::Old).boxed()),
        (
            1,
            prop::collection::vec(any::<u8>(), 0..6)
                .prop_map(KeyRef::New)
                .boxed(),
        ),
    ])
    .boxed()
}

fn large_keys(n: u16) -> BoxedStrategy<KeyRef> {
    Union::new_weighted(vec![
        (8, (0..n).prop_map(|i| KeyRef::New(key_of(i))).boxed()),
        (6, any::<u16>().prop_map(KeyRef::Old).boxed()),
        (
            4,
            prop::collection::vec(any::<u8>(), 0..48)
                .prop_map(KeyRef::New)
                .boxed(),
        ),
        (
            1,
            prop::collection::vec(any::<u8>(), 48..600)
                .prop_map(KeyRef::New)
                .boxed(),
        ),
    ])
    .boxed()
}

/// Value lengths: mostly small, some medium, some around the largest record a 64 KiB
/// chunk holds (65,408 bytes of records), and some several chunks long.
fn vals(large_weight: u32) -> BoxedStrategy<Val> {
    let len = Union::new_weighted(vec![
        (30, (0u32..16).boxed()),
        (30, (16u32..1024).boxed()),
        (15, (1024u32..16_384).boxed()),
        (3, (65_300u32..65_500).boxed()),
        (
            large_weight,
            prop_oneof![Just(300 * 1024u32), 130_000u32..400_000].boxed(),
        ),
    ]);
    (len, any::<u8>())
        .prop_map(|(len, seed)| Val { len, seed })
        .boxed()
}

/// Operation mix, in units where a `put` weighs 96: `structural` weighs each of compact,
/// reopen and check; `wipe` each of clear and drop + re-create (kept rare where state
/// must build up for segments to split).
fn ops(
    keys: BoxedStrategy<KeyRef>,
    vals: BoxedStrategy<Val>,
    structural: u32,
    wipe: u32,
) -> BoxedStrategy<Op> {
    let m = 0usize..3;
    let mkv = (m.clone(), keys.clone(), vals.clone());
    let mk = (m.clone(), keys);
    let s = structural;
    let mut arms: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (
            96,
            mkv.clone().prop_map(|(m, k, v)| Op::Put(m, k, v)).boxed(),
        ),
        (
            24,
            mkv.clone().prop_map(|(m, k, v)| Op::Swap(m, k, v)).boxed(),
        ),
        (
            24,
            mkv.clone()
                .prop_map(|(m, k, v)| Op::Insert(m, k, v))
                .boxed(),
        ),
        (24, mkv.prop_map(|(m, k, v)| Op::Replace(m, k, v)).boxed()),
        (32, mk.clone().prop_map(|(m, k)| Op::Remove(m, k)).boxed()),
        (16, mk.clone().prop_map(|(m, k)| Op::Take(m, k)).boxed()),
        (32, mk.clone().prop_map(|(m, k)| Op::Get(m, k)).boxed()),
        (12, mk.clone().prop_map(|(m, k)| Op::GetInto(m, k)).boxed()),
        (12, mk.prop_map(|(m, k)| Op::Contains(m, k)).boxed()),
        (8, m.clone().prop_map(Op::Len).boxed()),
        (8, m.clone().prop_map(Op::Iter).boxed()),
        (4, m.clone().prop_map(Op::Keys).boxed()),
        (4, m.clone().prop_map(Op::Stats).boxed()),
        (
            3,
            (m.clone(), 0u8..3, vals)
                .prop_map(|(m, t, v)| Op::MaxKey(m, t, v))
                .boxed(),
        ),
        (2, m.clone().prop_map(Op::OversizeKey).boxed()),
    ];
    if s > 0 {
        arms.push((s, Just(Op::Compact).boxed()));
        arms.push((s, Just(Op::Reopen).boxed()));
        arms.push((s, Just(Op::Check).boxed()));
    }
    if wipe > 0 {
        arms.push((wipe, m.clone().prop_map(Op::Clear).boxed()));
        arms.push((wipe, m.prop_map(Op::DropRecreate).boxed()));
    }
    Union::new_weighted(arms).boxed()
}

/// A case's store: per-map options (tiny segments: constant splits; now and then the
/// defaults) and whether records carry checksums.
type Setup = (Vec<Option<(u32, u32)>>, bool);

fn setup_of(maps: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Setup> {
    (
        prop::collection::vec(prop::option::weighted(0.85, (1u32..=4, 1u32..=2)), maps),
        any::<bool>(),
    )
}

fn map_specs() -> impl Strategy<Value = Setup> {
    setup_of(1..=3)
}

fn map_options(spec: Option<(u32, u32)>) -> MapOptions {
    match spec {
        Some((segment_buckets, stash_buckets)) => MapOptions {
            segment_buckets,
            stash_buckets,
            uids: false,
            ..Default::default()
        },
        None => MapOptions::default(),
    }
}

// ---------------------------------------------------------------------------------------
// The harness: a store, its maps, and the model
// ---------------------------------------------------------------------------------------

/// What a case exercised (to prove the configuration reaches the code it is meant to).
#[derive(Default, Debug, Clone, Copy)]
struct Seen {
    cases: u64,
    ops: u64,
    chunks_cleaned: u64,
    cases_cleaned: u64,
    splits: u64,
    large_puts: u64,
    reopens: u64,
    drops: u64,
}

impl Seen {
    fn add(&mut self, o: Seen) {
        self.cases += o.cases;
        self.ops += o.ops;
        self.chunks_cleaned += o.chunks_cleaned;
        self.cases_cleaned += o.cases_cleaned;
        self.splits += o.splits;
        self.large_puts += o.large_puts;
        self.reopens += o.reopens;
        self.drops += o.drops;
    }
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("temp dir")
}

fn store_options(checksums: bool) -> Options {
    Options {
        checksums: Some(checksums),
        chunk_size: CHUNK,
        max_threads: 16,
        max_processes: 16,
        max_maps: 16,
        ..Options::default()
    }
}

type Model = HashMap<Vec<u8>, Vec<u8>>;

struct Harness {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Option<Store>,
    names: Vec<String>,
    opts: Vec<MapOptions>,
    maps: Vec<Map>,
    model: Vec<Model>,
    seen: Seen,
    /// Records end with a 4-byte CRC32C.
    checksums: bool,
    /// Splits of dropped map incarnations (each incarnation counts its own).
    splits_before: u64,
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

/// Short description of a value for failure messages (values may be 400 KB).
fn show(v: Option<&[u8]>) -> String {
    match v {
        None => "None".into(),
        Some(v) if v.len() <= 16 => format!("Some(b\"{}\")", v.escape_ascii()),
        Some(v) => format!(
            "Some(<{} bytes, xxh3 {:016x}>)",
            v.len(),
            shoal::format_hash(0, v)
        ),
    }
}

fn same(ctx: &str, got: Option<&[u8]>, want: Option<&[u8]>) -> Result<(), TestCaseError> {
    if got != want {
        return Err(fail(format!(
            "{ctx}: got {}, the model says {}",
            show(got),
            show(want)
        )));
    }
    Ok(())
}

impl Harness {
    fn new((specs, checksums): &Setup) -> Result<Harness, TestCaseError> {
        let dir = tmpdir();
        let path = dir.path().join("prop.shoal");
        let store = Store::open_with(&path, &store_options(*checksums), OpenMode::CreateNew)
            .map_err(|e| fail(format!("create store: {e}")))?;
        let mut h = Harness {
            _dir: dir,
            path,
            store: None,
            names: Vec::new(),
            opts: Vec::new(),
            maps: Vec::new(),
            model: Vec::new(),
            checksums: *checksums,
            seen: Seen {
                cases: 1,
                ..Seen::default()
            },
            splits_before: 0,
        };
        for (i, spec) in specs.iter().enumerate() {
            let name = format!("map-{i}");
            let o = map_options(*spec);
            let m = store
                .map_with(&name, &o, true)
                .map_err(|e| fail(format!("create {name}: {e}")))?;
            h.names.push(name);
            h.opts.push(o);
            h.maps.push(m);
            h.model.push(Model::new());
        }
        h.store = Some(store);
        Ok(h)
    }

    fn store(&self) -> &Store {
        self.store.as_ref().expect("store open")
    }

    fn resolve(&self, m: usize, k: &KeyRef) -> Vec<u8> {
        match k {
            KeyRef::New(k) => k.clone(),
            KeyRef::Old(i) => {
                let model = &self.model[m];
                if model.is_empty() {
                    return key_of(1);
                }
                let mut keys: Vec<&Vec<u8>> = model.keys().collect();
                keys.sort();
                keys[*i as usize % keys.len()].clone()
            }
        }
    }

    /// Applies one operation to the store and the model, comparing every result.
    fn apply(&mut self, i: usize, op: &Op) -> Result<(), TestCaseError> {
        let n = self.maps.len();
        let ctx = format!("op #{i} {op:?}");
        let e = |r: Error| fail(format!("{ctx}: unexpected error: {r}"));
        self.seen.ops += 1;
        match op {
            Op::Put(m, k, v) | Op::Swap(m, k, v) | Op::Insert(m, k, v) | Op::Replace(m, k, v) => {
                let m = m % n;
                let key = self.resolve(m, k);
                let val = v.bytes();
                let map = &self.maps[m];
                let model = &mut self.model[m];
                let old = model.get(&key).cloned();
                if val.len() as u64 > CHUNK {
                    self.seen.large_puts += 1;
                }
                match op {
                    Op::Put(..) => {
                        let got = map.put(&key, &val).map_err(e)?;
                        let want = if old.is_some() {
                            PutOutcome::Replaced
                        } else {
                            PutOutcome::Inserted
                        };
                        if got != want {
                            return Err(fail(format!(
                                "{ctx}: put returned {got:?}, want {want:?}"
                            )));
                        }
                        model.insert(key, val);
                    }
                    Op::Swap(..) => {
                        let got = map.swap(&key, &val).map_err(e)?;
                        same(&ctx, got.as_deref(), old.as_deref())?;
                        model.insert(key, val);
                    }
                    Op::Insert(..) => {
                        let got = map.put_if_absent(&key, &val).map_err(e)?;
                        if got != old.is_none() {
                            return Err(fail(format!(
                                "{ctx}: insert returned {got}, key present: {}",
                                old.is_some()
                            )));
                        }
                        model.entry(key).or_insert(val);
                    }
                    _ => {
                        let got = map.put_if_present(&key, &val).map_err(e)?;
                        if got != old.is_some() {
                            return Err(fail(format!(
                                "{ctx}: replace returned {got}, key present: {}",
                                old.is_some()
                            )));
                        }
                        if old.is_some() {
                            model.insert(key, val);
                        }
                    }
                }
            }
            Op::Remove(m, k) | Op::Take(m, k) => {
                let m = m % n;
                let key = self.resolve(m, k);
                let old = self.model[m].remove(&key);
                let map = &self.maps[m];
                if matches!(op, Op::Remove(..)) {
                    let got = map.remove(&key).map_err(e)?;
                    if got != old.is_some() {
                        return Err(fail(format!(
                            "{ctx}: remove returned {got}, key present: {}",
                            old.is_some()
                        )));
                    }
                } else {
                    let got = map.take(&key).map_err(e)?;
                    same(&ctx, got.as_deref(), old.as_deref())?;
                }
            }
            Op::Get(m, k) | Op::GetInto(m, k) | Op::Contains(m, k) => {
                let m = m % n;
                let key = self.resolve(m, k);
                let want = self.model[m].get(&key);
                let map = &self.maps[m];
                match op {
                    Op::Get(..) => same(
                        &ctx,
                        map.get(&key).map_err(e)?.as_deref(),
                        want.map(|v| v.as_slice()),
                    )?,
                    Op::GetInto(..) => {
                        let mut buf = b"leftover garbage".to_vec();
                        let found = map.get_into(&key, &mut buf).map_err(e)?;
                        if found != want.is_some() || (!found && !buf.is_empty()) {
                            return Err(fail(format!(
                                "{ctx}: get_into returned {found} with {} bytes",
                                buf.len()
                            )));
                        }
                        if found {
                            same(&ctx, Some(&buf), want.map(|v| v.as_slice()))?;
                        }
                    }
                    _ => {
                        let got = map.contains(&key).map_err(e)?;
                        if got != want.is_some() {
                            return Err(fail(format!("{ctx}: contains returned {got}")));
                        }
                    }
                }
            }
            Op::Len(m) => {
                let m = m % n;
                let got = self.maps[m].len().map_err(e)?;
                if got != self.model[m].len() as u64 {
                    return Err(fail(format!(
                        "{ctx}: len {got}, the model has {}",
                        self.model[m].len()
                    )));
                }
                if self.maps[m].is_empty().map_err(e)? != self.model[m].is_empty() {
                    return Err(fail(format!("{ctx}: is_empty disagrees with len {got}")));
                }
            }
            Op::Clear(m) => {
                let m = m % n;
                self.maps[m].clear().map_err(e)?;
                self.model[m].clear();
                if self.maps[m].len().map_err(e)? != 0 {
                    return Err(fail(format!("{ctx}: len after clear is not 0")));
                }
            }
            Op::Iter(m) => self.verify_iter(&ctx, m % n)?,
            Op::Keys(m) => self.verify_keys(&ctx, m % n)?,
            Op::Stats(m) => {
                let m = m % n;
                let st = self.maps[m].stats().map_err(e)?;
                if st.entries != self.model[m].len() as u64 {
                    return Err(fail(format!(
                        "{ctx}: stats say {} entries, the model has {}",
                        st.entries,
                        self.model[m].len()
                    )));
                }
                if st.segments == 0 || st.segments > 1 << st.directory_depth {
                    return Err(fail(format!(
                        "{ctx}: {} segments with directory depth {}",
                        st.segments, st.directory_depth
                    )));
                }
                // Record bytes: a 2-byte header (map id < 8, key and value shorter than
                // 64), else varint map id (1 byte: ids < 16) and varint lengths; key,
                // value, and with checksums a 4-byte CRC32C.
                let crc = if self.checksums { 4 } else { 0 };
                let short = self.maps[m].id() < 8;
                let varint = |n: usize| {
                    if n < 1 << 7 {
                        1
                    } else if n < 1 << 14 {
                        2
                    } else {
                        3
                    }
                };
                let want: u64 = self.model[m]
                    .iter()
                    .map(|(k, v)| {
                        let header = if short && k.len() < 64 && v.len() < 64 {
                            2
                        } else {
                            1 + varint(k.len()) + varint(v.len())
                        };
                        (header + k.len() + v.len() + crc) as u64
                    })
                    .sum();
                if st.live_bytes != want {
                    return Err(fail(format!(
                        "{ctx}: stats say {} live bytes, the model's records take {want}",
                        st.live_bytes
                    )));
                }
                let ss = self.store().stats().map_err(e)?;
                let mut live = 0;
                for map in &self.maps {
                    live += map.stats().map_err(e)?.live_bytes;
                }
                if ss.live_bytes != live
                    || ss.live_bytes > ss.data_bytes
                    || ss.maps != self.maps.len() as u64
                {
                    return Err(fail(format!(
                        "{ctx}: store stats do not add up (maps' live bytes {live}): {ss:?}"
                    )));
                }
            }
            Op::MaxKey(m, tag, v) => {
                let m = m % n;
                let key = max_key(*tag);
                let val = v.bytes();
                let old = self.model[m].insert(key.clone(), val.clone());
                let got = self.maps[m].put(&key, &val).map_err(e)?;
                let want = if old.is_some() {
                    PutOutcome::Replaced
                } else {
                    PutOutcome::Inserted
                };
                if got != want {
                    return Err(fail(format!("{ctx}: put returned {got:?}, want {want:?}")));
                }
                same(
                    &ctx,
                    self.maps[m].get(&key).map_err(e)?.as_deref(),
                    Some(&val),
                )?;
            }
            Op::OversizeKey(m) => {
                let m = m % n;
                let key = vec![b'x'; MAX_KEY_LEN + 1];
                let map = &self.maps[m];
                let before = map.len().map_err(e)?;
                let results = [
                    map.put(&key, b"v").map(|_| ()),
                    map.put_if_absent(&key, b"v").map(|_| ()),
                    map.get(&key).map(|_| ()),
                    map.contains(&key).map(|_| ()),
                    map.remove(&key).map(|_| ()),
                    map.take(&key).map(|_| ()),
                ];
                for r in results {
                    if !matches!(r, Err(Error::InvalidArgument(_))) {
                        return Err(fail(format!(
                            "{ctx}: a {} byte key gave {r:?}, not InvalidArgument",
                            key.len()
                        )));
                    }
                }
                if map.len().map_err(e)? != before {
                    return Err(fail(format!("{ctx}: a rejected call changed the map")));
                }
            }
            Op::Compact => {
                self.store().compact().map_err(e)?;
            }
            Op::DropRecreate(m) => self.drop_recreate(&ctx, m % n)?,
            Op::Reopen => self.reopen(&ctx)?,
            Op::Check => {
                self.check(&ctx)?;
                self.verify_all(&ctx)?;
            }
        }
        Ok(())
    }

    fn verify_iter(&self, ctx: &str, m: usize) -> Result<(), TestCaseError> {
        let model = &self.model[m];
        let mut seen: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for item in self.maps[m].iter() {
            let (k, v) =
                item.map_err(|e| fail(format!("{ctx}: iter of {}: {e}", self.names[m])))?;
            match model.get(&k) {
                None => {
                    return Err(fail(format!(
                        "{ctx}: iter of {} yielded {}, absent from the model",
                        self.names[m],
                        show_key(&k)
                    )))
                }
                Some(want) => same(
                    &format!("{ctx}: iter value of {}", show_key(&k)),
                    Some(&v),
                    Some(want),
                )?,
            }
            if seen.insert(k.clone(), v).is_some() {
                return Err(fail(format!(
                    "{ctx}: iter of {} yielded {} twice",
                    self.names[m],
                    show_key(&k)
                )));
            }
        }
        if seen.len() != model.len() {
            let missing: Vec<String> = model
                .keys()
                .filter(|k| !seen.contains_key(*k))
                .take(5)
                .map(|k| show_key(k))
                .collect();
            return Err(fail(format!(
                "{ctx}: iter of {} yielded {} keys, the model has {} (missing e.g. {missing:?})",
                self.names[m],
                seen.len(),
                model.len()
            )));
        }
        Ok(())
    }

    fn verify_keys(&self, ctx: &str, m: usize) -> Result<(), TestCaseError> {
        let model = &self.model[m];
        let mut seen = HashSet::new();
        for k in self.maps[m].keys() {
            let k = k.map_err(|e| fail(format!("{ctx}: keys of {}: {e}", self.names[m])))?;
            if !model.contains_key(&k) {
                return Err(fail(format!(
                    "{ctx}: keys of {} yielded {}, absent from the model",
                    self.names[m],
                    show_key(&k)
                )));
            }
            if !seen.insert(k.clone()) {
                return Err(fail(format!(
                    "{ctx}: keys of {} yielded {} twice",
                    self.names[m],
                    show_key(&k)
                )));
            }
        }
        if seen.len() != model.len() {
            return Err(fail(format!(
                "{ctx}: keys of {} yielded {} keys, the model has {}",
                self.names[m],
                seen.len(),
                model.len()
            )));
        }
        Ok(())
    }

    /// Every map: len, every model key by get, full iteration; the store's map list.
    fn verify_all(&self, ctx: &str) -> Result<(), TestCaseError> {
        let mut names = self
            .store()
            .maps()
            .map_err(|e| fail(format!("{ctx}: maps(): {e}")))?;
        names.sort();
        let mut want = self.names.clone();
        want.sort();
        if names != want {
            return Err(fail(format!("{ctx}: maps() = {names:?}, want {want:?}")));
        }
        for m in 0..self.maps.len() {
            let map = &self.maps[m];
            let len = map.len().map_err(|e| fail(format!("{ctx}: len: {e}")))?;
            if len != self.model[m].len() as u64 {
                return Err(fail(format!(
                    "{ctx}: {} has len {len}, the model {}",
                    self.names[m],
                    self.model[m].len()
                )));
            }
            for (k, v) in &self.model[m] {
                let got = map.get(k).map_err(|e| fail(format!("{ctx}: get: {e}")))?;
                same(
                    &format!("{ctx}: {} get {}", self.names[m], show_key(k)),
                    got.as_deref(),
                    Some(v),
                )?;
            }
            self.verify_iter(ctx, m)?;
        }
        Ok(())
    }

    fn check(&self, ctx: &str) -> Result<(), TestCaseError> {
        let r = self
            .store()
            .check()
            .map_err(|e| fail(format!("{ctx}: check(): {e}")))?;
        if !r.is_ok() {
            return Err(fail(format!("{ctx}: check() found problems:\n{r}")));
        }
        Ok(())
    }

    fn splits_now(&self) -> u64 {
        self.maps
            .iter()
            .map(|m| m.stats().map(|s| s.splits).unwrap_or(0))
            .sum()
    }

    fn drop_recreate(&mut self, ctx: &str, m: usize) -> Result<(), TestCaseError> {
        let e = |r: Error| fail(format!("{ctx}: unexpected error: {r}"));
        let name = self.names[m].clone();
        self.splits_before += self.maps[m].stats().map(|s| s.splits).unwrap_or(0);
        let old = self.maps[m].clone();
        let store = self.store().clone();
        if !store.drop_map(&name).map_err(e)? {
            return Err(fail(format!(
                "{ctx}: drop_map({name}) said it did not exist"
            )));
        }
        self.seen.drops += 1;
        let gone = |what: &str, r: Result<(), Error>| -> Result<(), TestCaseError> {
            match r {
                Err(Error::NotFound(_)) => Ok(()),
                r => Err(fail(format!(
                    "{ctx}: {what} on a dropped map gave {r:?}, not NotFound"
                ))),
            }
        };
        gone("get", old.get(b"k1").map(|_| ()))?;
        gone("len", old.len().map(|_| ()))?;
        gone("put", old.put(b"k1", b"zombie").map(|_| ()))?;
        gone("open_map", store.open_map(&name).map(|_| ()))?;
        if store.drop_map(&name).map_err(e)? {
            return Err(fail(format!(
                "{ctx}: second drop_map({name}) said it existed"
            )));
        }
        let new = store.map_with(&name, &self.opts[m], true).map_err(e)?;
        self.model[m].clear();
        // The old handle must not reach the new incarnation.
        gone("put after re-create", old.put(b"k1", b"zombie").map(|_| ()))?;
        gone("clear after re-create", old.clear())?;
        if new.len().map_err(e)? != 0
            || new.get(b"k1").map_err(e)?.is_some()
            || new.iter().count() != 0
        {
            return Err(fail(format!("{ctx}: re-created {name} is not empty")));
        }
        self.maps[m] = new;
        Ok(())
    }

    /// Drops every handle, reopens with `Store::open_existing`, and verifies everything.
    fn reopen(&mut self, ctx: &str) -> Result<(), TestCaseError> {
        self.maps.clear();
        self.store = None;
        let store =
            Store::open_existing(&self.path).map_err(|e| fail(format!("{ctx}: reopen: {e}")))?;
        for name in &self.names {
            let m = store
                .open_map(name)
                .map_err(|e| fail(format!("{ctx}: open_map({name}) after reopen: {e}")))?;
            self.maps.push(m);
        }
        self.store = Some(store);
        self.seen.reopens += 1;
        self.check(ctx)?;
        self.verify_all(ctx)
    }

    /// End of a case: full verification, check, and a reopen.
    fn finish(mut self) -> Result<Seen, TestCaseError> {
        self.check("end of case")?;
        self.verify_all("end of case")?;
        let splits = self.splits_before + self.splits_now();
        let cleaned = self
            .store()
            .stats()
            .map_err(|e| fail(format!("stats: {e}")))?
            .chunks_cleaned;
        self.reopen("reopen at end of case")?;
        let mut seen = self.seen;
        seen.splits = splits;
        seen.chunks_cleaned = cleaned;
        seen.cases_cleaned = (cleaned > 0) as u64;
        Ok(seen)
    }
}

fn run_case(setup: &Setup, ops: &[Op]) -> Result<Seen, TestCaseError> {
    let mut h = Harness::new(setup)?;
    for (i, op) in ops.iter().enumerate() {
        h.apply(i, op)?;
    }
    h.finish()
}

// ---------------------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------------------

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Runs `cases` cases (or `PROPTEST_CASES`) with a printed, reproducible seed; returns
/// the totals of what the cases exercised.
fn run<S>(
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(&S::Value) -> Result<Seen, TestCaseError>,
) -> Seen
where
    S: Strategy,
    S::Value: fmt::Debug,
{
    let cases = env_u32("PROPTEST_CASES").unwrap_or(default_cases);
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let total = Mutex::new(Seen::default());
    let mut runner = TestRunner::new(config);
    let r = runner.run(&strategy, |v| {
        let s = test(&v)?;
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

/// Sanity floors on what a run exercised, enforced only when enough cases ran for them
/// to be all but certain.
fn expect_coverage(name: &str, total: &Seen, cases: u32, min_cases: u32, what: &[(&str, u64)]) {
    if cases < min_cases {
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

/// `PROPTEST_CASES`, else `default` (a quarter of it in a debug build, which runs the
/// engine about 20 times slower).
fn cases_or(default: u32) -> u32 {
    let scaled = if cfg!(debug_assertions) {
        (default / 4).max(4)
    } else {
        default
    };
    env_u32("PROPTEST_CASES").unwrap_or(scaled)
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

/// Small key space: every operation, overwrites and removes hitting constantly, in 1-3
/// maps sharing keys, with structural operations (clear, compact, drop, reopen, check).
#[test]
fn small_key_space_every_operation() {
    let cases = cases_or(96);
    let strategy = (
        map_specs(),
        prop::collection::vec(ops(small_keys(64), vals(2), 4, 2), 1..400),
    );
    let total = run(
        "small_key_space_every_operation",
        cases,
        strategy,
        |(specs, ops)| run_case(specs, ops),
    );
    expect_coverage(
        "small_key_space_every_operation",
        &total,
        cases,
        24,
        &[
            ("large records", total.large_puts),
            ("reopens", total.reopens),
            ("drops", total.drops),
        ],
    );
}

/// Large key spaces: mostly distinct keys, so tiny segments split over and over and
/// directories double; removes and reads still hit through `KeyRef::Old`.
#[test]
fn large_key_space_splits() {
    let cases = cases_or(48);
    // Two thirds fresh inserts (so maps grow to hundreds of keys), one third every other
    // operation.
    let fresh = (
        0usize..3,
        prop::collection::vec(any::<u8>(), 0..40),
        vals(1),
    )
        .prop_map(|(m, k, v)| Op::Insert(m, KeyRef::New(k), v))
        .boxed();
    let mix = Union::new_weighted(vec![(2, fresh), (1, ops(large_keys(5000), vals(1), 2, 0))]);
    let strategy = (map_specs(), prop::collection::vec(mix, 100..1500));
    let total = run("large_key_space_splits", cases, strategy, |(specs, ops)| {
        run_case(specs, ops)
    });
    expect_coverage(
        "large_key_space_splits",
        &total,
        cases,
        12,
        &[("splits", total.splits)],
    );
}

/// Overwrite-heavy: a handful of keys rewritten with medium and large values, so dead
/// bytes pile up in sealed 64 KiB chunks and the cleaner (and `compact`) move live
/// records of several maps while the sequence runs.
#[test]
fn cleaner_runs_during_sequences() {
    let cases = cases_or(48);
    let medium = (
        prop_oneof![1024u32..8192, 8192u32..20_000, Just(300 * 1024)],
        any::<u8>(),
    )
        .prop_map(|(len, seed)| Val { len, seed })
        .boxed();
    let writes = Union::new_weighted(vec![
        (
            8,
            (0usize..3, small_keys(10), medium.clone())
                .prop_map(|(m, k, v)| Op::Put(m, k, v))
                .boxed(),
        ),
        (
            2,
            (0usize..3, small_keys(10), medium)
                .prop_map(|(m, k, v)| Op::Swap(m, k, v))
                .boxed(),
        ),
        (
            2,
            (0usize..3, small_keys(10))
                .prop_map(|(m, k)| Op::Remove(m, k))
                .boxed(),
        ),
        (
            2,
            (0usize..3, small_keys(10))
                .prop_map(|(m, k)| Op::Get(m, k))
                .boxed(),
        ),
        (1, ops(small_keys(10), vals(1), 4, 4)),
    ]);
    let strategy = (map_specs(), prop::collection::vec(writes, 100..300));
    let total = run(
        "cleaner_runs_during_sequences",
        cases,
        strategy,
        |(specs, ops)| run_case(specs, ops),
    );
    expect_coverage(
        "cleaner_runs_during_sequences",
        &total,
        cases,
        8,
        &[("the cleaner", total.chunks_cleaned)],
    );
}

/// Maps stay independent: the same keys written to three maps in interleaved order (so
/// their records share data chunks), with drops, re-creations, clears and compactions.
#[test]
fn maps_sharing_chunks_stay_independent() {
    let cases = cases_or(48);
    let strategy = (
        setup_of(3..=3),
        prop::collection::vec(ops(small_keys(24), vals(1), 8, 8), 50..250),
    );
    let total = run(
        "maps_sharing_chunks_stay_independent",
        cases,
        strategy,
        |(specs, ops)| run_case(specs, ops),
    );
    expect_coverage(
        "maps_sharing_chunks_stay_independent",
        &total,
        cases,
        12,
        &[("drops", total.drops)],
    );
}

/// Reopen: a random history, every handle dropped, `Store::open_existing`, the same
/// contents; then a second history on the reopened store and another reopen.
#[test]
fn reopen_finds_the_same_contents() {
    let cases = cases_or(32);
    let no_reopen = |o: &Op| !matches!(o, Op::Reopen);
    let seq = || {
        prop::collection::vec(
            ops(small_keys(40), vals(2), 4, 2).prop_filter("no reopen", no_reopen),
            20..200,
        )
    };
    let strategy = (map_specs(), seq(), seq());
    run(
        "reopen_finds_the_same_contents",
        cases,
        strategy,
        |(specs, a, b)| {
            let mut h = Harness::new(specs)?;
            for (i, op) in a.iter().enumerate() {
                h.apply(i, op)?;
            }
            h.reopen("first reopen")?;
            for (i, op) in b.iter().enumerate() {
                h.apply(a.len() + i, op)?;
            }
            h.finish()
        },
    );
}

// ---------------------------------------------------------------------------------------
// Fixed sequences: prove the configuration reaches splits, large runs and the cleaner
// whatever PROPTEST_CASES says.
// ---------------------------------------------------------------------------------------

#[test]
fn fixed_sequence_reaches_splits_large_records_and_the_cleaner() {
    let mut ops = Vec::new();
    for round in 0..40u32 {
        for k in 0..12u16 {
            let len = if (round + k as u32) % 17 == 0 {
                300 * 1024
            } else {
                2000 + 700 * k as u32
            };
            ops.push(Op::Put(
                k as usize % 3,
                KeyRef::New(key_of(k)),
                Val {
                    len,
                    seed: round as u8,
                },
            ));
        }
        if round % 10 == 9 {
            ops.push(Op::Check);
            ops.push(Op::Remove(0, KeyRef::Old(round as u16)));
        }
    }
    for k in 0..600u16 {
        ops.push(Op::Insert(
            1,
            KeyRef::New(format!("split-{k}").into_bytes()),
            Val {
                len: k as u32 % 40,
                seed: 1,
            },
        ));
    }
    ops.push(Op::Compact);
    ops.push(Op::Reopen);
    ops.push(Op::DropRecreate(2));
    ops.push(Op::Iter(1));
    let seen = run_case(
        &(vec![Some((1, 1)), Some((2, 1)), Some((4, 2))], true),
        &ops,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    println!("{seen:?}");
    assert!(seen.chunks_cleaned > 0, "the cleaner never ran: {seen:?}");
    assert!(seen.splits > 10, "too few splits: {seen:?}");
    assert!(seen.large_puts > 0, "no large record: {seen:?}");
}

#[test]
fn empty_keys_and_values_and_max_keys() {
    let ops = vec![
        Op::Put(0, KeyRef::New(vec![]), Val { len: 0, seed: 0 }),
        Op::Get(0, KeyRef::New(vec![])),
        Op::Put(0, KeyRef::New(b"a".to_vec()), Val { len: 0, seed: 0 }),
        Op::Swap(0, KeyRef::New(vec![]), Val { len: 5, seed: 1 }),
        Op::MaxKey(0, 1, Val { len: 0, seed: 0 }),
        Op::MaxKey(
            0,
            1,
            Val {
                len: 70_000,
                seed: 3,
            },
        ),
        Op::MaxKey(1, 1, Val { len: 10, seed: 3 }),
        Op::OversizeKey(0),
        Op::Iter(0),
        Op::Keys(1),
        Op::Reopen,
        Op::Take(0, KeyRef::New(vec![])),
        Op::Remove(0, KeyRef::New(max_key(1))),
        Op::Check,
    ];
    for checksums in [false, true] {
        run_case(&(vec![Some((1, 1)), None], checksums), &ops).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Runs `f` on its own thread; fails the test if it does not return within `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what} did not return within {secs} s"))
}

/// Regression: `Store::compact` looped forever when the slack no cleaning can remove
/// (here: one 33,000-byte record per 64 KiB chunk, so half of every chunk) exceeded a
/// chunk, moving the same live records from chunk to chunk without end.
#[test]
fn compact_terminates_when_slack_exceeds_a_chunk() {
    let d = tmpdir();
    let s = Store::open_with(
        d.path().join("c.shoal"),
        &store_options(false),
        OpenMode::CreateNew,
    )
    .unwrap();
    let m = s.map("m").unwrap();
    for i in 0..10u32 {
        m.put(format!("k{i}").as_bytes(), &vec![i as u8; 33_000])
            .unwrap();
    }
    let s2 = s.clone();
    within(30, "compact", move || s2.compact().unwrap());
    for i in 0..10u32 {
        assert_eq!(
            m.get(format!("k{i}").as_bytes()).unwrap(),
            Some(vec![i as u8; 33_000])
        );
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Regression: the same with no sealed chunk at all, only large-record runs whose unused
/// ends add up to more than a chunk (compact scanned for a victim forever).
#[test]
fn compact_terminates_with_only_large_records() {
    let d = tmpdir();
    let s = Store::open_with(
        d.path().join("c.shoal"),
        &store_options(false),
        OpenMode::CreateNew,
    )
    .unwrap();
    let m = s.map("m").unwrap();
    for i in 0..6u32 {
        m.put(format!("k{i}").as_bytes(), &vec![i as u8; 300 * 1024])
            .unwrap();
    }
    let s2 = s.clone();
    within(30, "compact", move || s2.compact().unwrap());
    assert_eq!(m.get(b"k5").unwrap(), Some(vec![5u8; 300 * 1024]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Regression: a handle on a dropped map must answer NotFound to everything, even after
/// the map's freed index chunk was reused for data (here by that very handle's put,
/// whose record then lies where the map header was). `clear` used to read the record
/// bytes as the directory and fail with Corrupt; a write on such a handle locked
/// whatever word the garbage pointed at before it checked that the map was alive.
#[test]
fn dropped_map_handle_is_not_found_after_its_chunk_is_reused() {
    let d = tmpdir();
    let s = Store::open_with(
        d.path().join("z.shoal"),
        &store_options(false),
        OpenMode::CreateNew,
    )
    .unwrap();
    let a = s.map("a").unwrap();
    let b = s
        .map_with(
            "b",
            &MapOptions {
                segment_buckets: 1,
                stash_buckets: 1,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap();
    assert!(s.drop_map("a").unwrap());
    // The store's first record: its data chunk is a's freed index chunk.
    b.put(b"k1", b"b's value").unwrap();
    for _ in 0..3 {
        assert!(matches!(a.put(b"k1", b"zombie"), Err(Error::NotFound(_))));
        assert!(
            matches!(a.clear(), Err(Error::NotFound(_))),
            "{:?}",
            a.clear()
        );
        assert!(matches!(a.get(b"k1"), Err(Error::NotFound(_))));
        assert!(matches!(a.remove(b"k1"), Err(Error::NotFound(_))));
        assert!(matches!(a.len(), Err(Error::NotFound(_))));
        assert!(matches!(a.iter().next(), Some(Err(Error::NotFound(_)))));
    }
    let a2 = s.map("a").unwrap();
    assert_eq!(a2.len().unwrap(), 0);
    assert!(matches!(a.clear(), Err(Error::NotFound(_))));
    assert_eq!(b.get(b"k1").unwrap().as_deref(), Some(&b"b's value"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
