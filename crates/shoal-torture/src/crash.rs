//! The per-fail-point crash driver's workload and model (used by the `shoal-crash` binary
//! and `tests/crash_points.rs`).
//!
//! A workload is a deterministic list of operations generated from a seed ([`generate`]):
//! puts of new keys (enough for many splits and directory doublings of a map with tiny
//! segments), then a mix of overwrites (enough dead space for the cleaner), removes,
//! insert/replace/swap/take, compare-and-swap, update, add, get_or_insert, put_many,
//! remove_many, clear (of a second map), compact, large values (more than a chunk), and
//! checked reads. The child runs it on [`THREADS`] threads in turn (op `i` on thread
//! `i % THREADS`, one at a time), so a crash leaves that many dead txn slots for the next
//! opener to recover, and it appends `A i` to its ack log after op `i` returned.
//!
//! [`Model::apply`] gives each op's effect and result. After a crash in op `i`, the store
//! must hold the model's state after ops `0..i` or after `0..=i`: per key, the value
//! before or after op `i` (for a single-key op this is the whole store being one of the
//! two states; `put_many`, `remove_many` and `clear` are atomic per key only, as their
//! documentation says). See [`allowed`] and [`compare`].

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{Map, MapOptions, PutOutcome, Store};
use std::collections::{BTreeMap, BTreeSet};

/// Threads the child runs the workload on, in turn.
pub const THREADS: usize = 4;
/// The two maps: "m" (tiny segments: many splits) and "aux" (default segments, with UIDs;
/// cleared now and then).
pub const MAPS: [&str; 2] = ["m", "aux"];
/// Chunk size of the crash stores (the smallest allowed: the cleaner runs early).
pub const CHUNK: u64 = 64 * 1024;

/// The options of map "m": 2 main buckets and 1 stash bucket, 45 slots per segment.
pub fn tiny_segments() -> MapOptions {
    MapOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        uids: false,
        ..Default::default()
    }
}

/// The options of map "aux": UIDs, so that its writes (values overwritten in place among
/// them) move UID entries too.
pub fn aux_options() -> MapOptions {
    MapOptions {
        uids: true,
        ..MapOptions::default()
    }
}

/// The store options of the crash stores.
pub fn store_options() -> shoal::Options {
    shoal::Options {
        chunk_size: CHUNK,
        lock_timeout: std::time::Duration::from_secs(30),
        ..shoal::Options::default()
    }
}

/// One operation. `m` is the map index into [`MAPS`].
#[derive(Clone, Debug)]
pub enum Op {
    /// `put`
    Put(usize, Vec<u8>, Vec<u8>),
    /// `swap`
    Swap(Vec<u8>, Vec<u8>),
    /// `put_if_absent`
    Insert(Vec<u8>, Vec<u8>),
    /// `put_if_present`
    Replace(Vec<u8>, Vec<u8>),
    /// `remove`
    Remove(Vec<u8>),
    /// `take`
    Take(Vec<u8>),
    /// `compare_and_swap(key, expected, new)`
    Cas(Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>),
    /// `update(key, update_fn)`
    Update(Vec<u8>),
    /// `add(key, delta)`
    Add(Vec<u8>, i64),
    /// `get_or_insert(key, default)`
    GetOrInsert(Vec<u8>, Vec<u8>),
    /// `put_many`
    PutMany(Vec<(Vec<u8>, Vec<u8>)>),
    /// `remove_many`
    RemoveMany(Vec<Vec<u8>>),
    /// `clear` of map "aux"
    ClearAux,
    /// `Store::compact`
    Compact,
    /// a checked `get`
    Get(Vec<u8>),
}

/// What an op returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// Nothing to compare.
    Unit,
    /// A yes/no result.
    Bool(bool),
    /// A value or none.
    Val(Option<Vec<u8>>),
    /// A number.
    Int(i64),
}

/// The function `Op::Update` applies: grow the value by one byte, remove it at 40 bytes.
pub fn update_fn(cur: Option<&[u8]>) -> Option<Vec<u8>> {
    match cur {
        None => Some(b"u".to_vec()),
        Some(c) if c.len() >= 40 => None,
        Some(c) => {
            let mut v = c.to_vec();
            v.push(b'a' + (c.len() % 26) as u8);
            Some(v)
        }
    }
}

/// The value op `idx` writes to `key`: `KEY@IDX:` and then filler, `len` bytes at least.
pub fn value(key: &[u8], idx: usize, len: usize) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(format!("@{idx}:").as_bytes());
    let mut x = (idx as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'!' + (x % 90) as u8);
    }
    v
}

/// A state of both maps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// Per map, its entries.
    pub maps: [BTreeMap<Vec<u8>, Vec<u8>>; 2],
}

impl Model {
    /// Applies `op`; returns what the store must return.
    pub fn apply(&mut self, op: &Op) -> Out {
        let m = &mut self.maps[0];
        match op {
            Op::Put(i, k, v) => Out::Bool(self.maps[*i].insert(k.clone(), v.clone()).is_some()),
            Op::Swap(k, v) => Out::Val(m.insert(k.clone(), v.clone())),
            Op::Insert(k, v) => {
                if m.contains_key(k) {
                    Out::Bool(false)
                } else {
                    m.insert(k.clone(), v.clone());
                    Out::Bool(true)
                }
            }
            Op::Replace(k, v) => match m.get_mut(k) {
                Some(old) => {
                    *old = v.clone();
                    Out::Bool(true)
                }
                None => Out::Bool(false),
            },
            Op::Remove(k) => Out::Bool(m.remove(k).is_some()),
            Op::Take(k) => Out::Val(m.remove(k)),
            Op::Cas(k, e, n) => {
                if m.get(k) != e.as_ref() {
                    return Out::Bool(false);
                }
                match n {
                    Some(n) => m.insert(k.clone(), n.clone()),
                    None => m.remove(k),
                };
                Out::Bool(true)
            }
            Op::Update(k) => {
                let new = update_fn(m.get(k).map(|v| &v[..]));
                match &new {
                    Some(v) => m.insert(k.clone(), v.clone()),
                    None => m.remove(k),
                };
                Out::Val(new)
            }
            Op::Add(k, d) => {
                let cur = m
                    .get(k)
                    .map(|v| i64::from_le_bytes(v[..8].try_into().unwrap()))
                    .unwrap_or(0);
                let new = cur.wrapping_add(*d);
                m.insert(k.clone(), new.to_le_bytes().to_vec());
                Out::Int(new)
            }
            Op::GetOrInsert(k, d) => {
                Out::Val(Some(m.entry(k.clone()).or_insert(d.clone()).clone()))
            }
            Op::PutMany(items) => {
                for (k, v) in items {
                    m.insert(k.clone(), v.clone());
                }
                Out::Unit
            }
            Op::RemoveMany(keys) => {
                let n = keys.iter().filter(|k| m.remove(*k).is_some()).count();
                Out::Int(n as i64)
            }
            Op::ClearAux => {
                self.maps[1].clear();
                Out::Unit
            }
            Op::Compact => Out::Unit,
            Op::Get(k) => Out::Val(m.get(k).cloned()),
        }
    }
}

/// Runs `op` on the store (`maps` are the handles of [`MAPS`]).
pub fn run(store: &Store, maps: &[Map], op: &Op) -> shoal::Result<Out> {
    let m = &maps[0];
    Ok(match op {
        Op::Put(i, k, v) => Out::Bool(maps[*i].put(k, v)? == PutOutcome::Replaced),
        Op::Swap(k, v) => Out::Val(m.swap(k, v)?),
        Op::Insert(k, v) => Out::Bool(m.put_if_absent(k, v)?),
        Op::Replace(k, v) => Out::Bool(m.put_if_present(k, v)?),
        Op::Remove(k) => Out::Bool(m.remove(k)?),
        Op::Take(k) => Out::Val(m.take(k)?),
        Op::Cas(k, e, n) => Out::Bool(m.compare_and_swap(k, e.as_deref(), n.as_deref())?),
        Op::Update(k) => Out::Val(m.update(k, update_fn)?),
        Op::Add(k, d) => Out::Int(m.add(k, *d)?),
        Op::GetOrInsert(k, d) => Out::Val(Some(m.get_or_insert(k, d)?)),
        Op::PutMany(items) => {
            let v: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            m.put_many(&v)?;
            Out::Unit
        }
        Op::RemoveMany(keys) => {
            let v: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            Out::Int(m.remove_many(&v)? as i64)
        }
        Op::ClearAux => {
            maps[1].clear()?;
            Out::Unit
        }
        Op::Compact => {
            store.compact()?;
            Out::Unit
        }
        Op::Get(k) => Out::Val(m.get(k)?),
    })
}

/// The workload's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// The seed of every random choice.
    pub seed: u64,
    /// Keys of map "m" (the first `keys` ops insert them).
    pub keys: usize,
    /// Operations in all.
    pub ops: usize,
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i}").into_bytes()
}

/// The length of `key`'s current value in map 0, if `wanted` and it is short enough to be
/// overwritten in place (`shoal::IN_PLACE_MAX_LEN`): a put of that length takes the
/// in-place path (its own fail points).
fn same_len(model: &Model, key: &[u8], wanted: bool) -> Option<usize> {
    same_len_in(model, 0, key, wanted, shoal::IN_PLACE_MAX_LEN)
}

/// [`same_len`] in map `m`, for values of at most `max` bytes.
fn same_len_in(model: &Model, m: usize, key: &[u8], wanted: bool, max: usize) -> Option<usize> {
    let cur = model.maps[m].get(key)?;
    (wanted && cur.len() <= max).then_some(cur.len())
}

/// The workload of `p` (the same list every time for the same parameters).
pub fn generate(p: &Params) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(p.seed);
    let mut model = Model::default();
    let mut ops = Vec::with_capacity(p.ops);
    let small = |rng: &mut StdRng| match rng.random_range(0..100) {
        0..85 => rng.random_range(16..300),
        85..99 => rng.random_range(300..3000),
        // More than a chunk: a large record with a run of its own, of 2 to 4 chunks (runs
        // of different lengths are split and merged).
        _ => rng.random_range(CHUNK as usize + 100..3 * CHUNK as usize + 6000),
    };
    // Right after the inserts, a merge for sure: four records of 5 chunks (at the end of
    // the file, side by side: no free run is that long yet) are removed, and one of 18
    // chunks needs their runs merged.
    let merge_ops = |idx: usize| -> Option<Op> {
        let j = idx.checked_sub(p.keys)?;
        let big = |j: usize| format!("big{j}").into_bytes();
        let len = |chunks: u64| (chunks * CHUNK) as usize - 1000;
        match j {
            0..4 => Some(Op::Put(0, big(j), value(&big(j), idx, len(5)))),
            4..8 => Some(Op::Remove(big(j - 4))),
            8 => Some(Op::Put(0, big(4), value(&big(4), idx, len(18)))),
            _ => None,
        }
    };
    for idx in 0..p.ops {
        let pick_key = |rng: &mut StdRng| key(rng.random_range(0..p.keys + p.keys / 10 + 1));
        let op = if let Some(op) = merge_ops(idx).filter(|_| p.ops > p.keys + 20) {
            op
        } else if idx == p.ops - p.ops / 8 && idx > p.keys {
            // One compaction late in the run for sure, when the overwrites have left dead
            // space: the random ones may all come early, and the large values' runs (most
            // of the data) keep the cleaner's own threshold out of reach. One workload in
            // CI never reached the cleaner's fail points without it.
            Op::Compact
        } else if idx < p.keys {
            // Puts of new keys: splits and directory doublings.
            let k = key(idx);
            let len = rng.random_range(16..200);
            let v = value(&k, idx, len);
            Op::Put(0, k, v)
        } else {
            let r = rng.random_range(0..1000);
            match r {
                0..300 => {
                    let k = pick_key(&mut rng);
                    let len = same_len(&model, &k, r < 120).unwrap_or_else(|| small(&mut rng));
                    let v = value(&k, idx, len);
                    Op::Put(0, k, v)
                }
                300..360 => {
                    let k = pick_key(&mut rng);
                    let len = same_len(&model, &k, r < 330).unwrap_or_else(|| small(&mut rng));
                    let v = value(&k, idx, len);
                    Op::Swap(k, v)
                }
                360..420 => {
                    let k = pick_key(&mut rng);
                    let len = small(&mut rng);
                    let v = value(&k, idx, len);
                    Op::Insert(k, v)
                }
                420..480 => {
                    let k = pick_key(&mut rng);
                    let len = same_len(&model, &k, r < 450).unwrap_or_else(|| small(&mut rng));
                    let v = value(&k, idx, len);
                    Op::Replace(k, v)
                }
                480..560 => Op::Remove(pick_key(&mut rng)),
                560..600 => Op::Take(pick_key(&mut rng)),
                600..650 => {
                    let k = pick_key(&mut rng);
                    let cur = model.maps[0].get(&k).cloned();
                    let expected = if rng.random_range(0..10) < 7 {
                        cur
                    } else {
                        Some(value(&k, idx + 1_000_000, 20))
                    };
                    let new = if rng.random_range(0..10) < 8 {
                        let len = rng.random_range(16..300);
                        Some(value(&k, idx, len))
                    } else {
                        None
                    };
                    Op::Cas(k, expected, new)
                }
                650..690 => Op::Update(format!("u{}", rng.random_range(0..20)).into_bytes()),
                690..730 => Op::Add(
                    format!("c{}", rng.random_range(0..20)).into_bytes(),
                    rng.random_range(-1000..1000),
                ),
                730..760 => {
                    let k = pick_key(&mut rng);
                    let v = value(&k, idx, rng.random_range(16..100));
                    Op::GetOrInsert(k, v)
                }
                760..780 => {
                    let n = rng.random_range(2..7);
                    let mut keys = BTreeSet::new();
                    while keys.len() < n {
                        keys.insert(pick_key(&mut rng));
                    }
                    Op::PutMany(
                        keys.into_iter()
                            .map(|k| {
                                let v = value(&k, idx, rng.random_range(16..300));
                                (k, v)
                            })
                            .collect(),
                    )
                }
                780..800 => {
                    let n = rng.random_range(2..6);
                    let mut keys = BTreeSet::new();
                    while keys.len() < n {
                        keys.insert(pick_key(&mut rng));
                    }
                    Op::RemoveMany(keys.into_iter().collect())
                }
                800..880 => {
                    let k = format!("a{}", rng.random_range(0..150)).into_bytes();
                    let max = shoal::IN_PLACE_MAX_UIDS_LEN;
                    let len = same_len_in(&model, 1, &k, r < 840, max)
                        .unwrap_or_else(|| rng.random_range(16..400));
                    let v = value(&k, idx, len);
                    Op::Put(1, k, v)
                }
                880..884 => Op::ClearAux,
                884..888 => Op::Compact,
                _ => Op::Get(pick_key(&mut rng)),
            }
        };
        model.apply(&op);
        ops.push(op);
    }
    ops
}

/// The model's state after the first `n` ops.
pub fn state_after(ops: &[Op], n: usize) -> Model {
    let mut m = Model::default();
    for op in &ops[..n] {
        m.apply(op);
    }
    m
}

/// For each map and key the crash may have touched, the values allowed at the end
/// (`None` = absent): the state before op `i` and after it, per key.
pub type Allowed = [BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>; 2];

/// What may be in the store after the first `acked` ops were acknowledged and op
/// `acked` (if any, and if `in_flight`) was interrupted.
pub fn allowed(ops: &[Op], acked: usize, in_flight: bool) -> Allowed {
    let before = state_after(ops, acked);
    let mut after = before.clone();
    if in_flight && acked < ops.len() {
        after.apply(&ops[acked]);
    }
    let mut out: Allowed = Default::default();
    for (i, o) in out.iter_mut().enumerate() {
        let keys: BTreeSet<&Vec<u8>> = before.maps[i].keys().chain(after.maps[i].keys()).collect();
        for k in keys {
            let mut v = vec![before.maps[i].get(k).cloned()];
            let a = after.maps[i].get(k).cloned();
            if a != v[0] {
                v.push(a);
            }
            o.insert(k.clone(), v);
        }
    }
    out
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => format!(
            "{} bytes {:?}",
            v.len(),
            String::from_utf8_lossy(&v[..v.len().min(48)])
        ),
    }
}

/// Compares the store's maps with the allowed states: every key (by `get` and by
/// iteration, which must agree), `len()`, and no key the model does not know.
/// Returns the problems found (empty when all is well).
pub fn compare(maps: &[Map], allowed: &Allowed) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, map) in maps.iter().enumerate() {
        let name = MAPS[i];
        let mut iterated: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for item in map.iter() {
            match item {
                Ok((k, v)) => {
                    if iterated.insert(k.clone(), v).is_some() {
                        problems.push(format!(
                            "{name}: iteration returned {:?} twice",
                            String::from_utf8_lossy(&k)
                        ));
                    }
                }
                Err(e) => {
                    problems.push(format!("{name}: iteration failed: {e}"));
                    break;
                }
            }
        }
        let keys: BTreeSet<&Vec<u8>> = allowed[i].keys().chain(iterated.keys()).collect();
        for k in keys {
            let ks = String::from_utf8_lossy(k);
            let got = match map.get(k) {
                Ok(g) => g,
                Err(e) => {
                    problems.push(format!("{name}: get {ks}: {e}"));
                    continue;
                }
            };
            if got.as_ref() != iterated.get(k) {
                problems.push(format!(
                    "{name}: key {ks}: get gives {}, iteration {}",
                    show(&got),
                    show(&iterated.get(k).cloned())
                ));
            }
            let ok: &[Option<Vec<u8>>] = allowed[i].get(k).map(|v| &v[..]).unwrap_or(&[None]);
            if !ok.contains(&got) {
                problems.push(format!(
                    "{name}: key {ks} is {}; allowed: {}",
                    show(&got),
                    ok.iter().map(show).collect::<Vec<_>>().join(" or ")
                ));
            }
        }
        match map.len() {
            Ok(n) if n == iterated.len() as u64 => {}
            Ok(n) => problems.push(format!(
                "{name}: len() is {n}, iteration gave {} keys",
                iterated.len()
            )),
            Err(e) => problems.push(format!("{name}: len(): {e}")),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_is_deterministic_and_varied() {
        let p = Params {
            seed: 7,
            keys: 300,
            ops: 3000,
        };
        let a = generate(&p);
        let b = generate(&p);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let kinds: BTreeSet<String> = a
            .iter()
            .map(|o| format!("{o:?}").split('(').next().unwrap().to_string())
            .collect();
        assert!(kinds.len() >= 14, "too few kinds of op: {kinds:?}");
    }

    #[test]
    fn allowed_states_of_an_interrupted_op() {
        let k = b"k1".to_vec();
        let ops = vec![
            Op::Put(0, k.clone(), b"one".to_vec()),
            Op::Put(0, k.clone(), b"two".to_vec()),
        ];
        let a = allowed(&ops, 1, true);
        assert_eq!(a[0][&k], vec![Some(b"one".to_vec()), Some(b"two".to_vec())]);
        let a = allowed(&ops, 1, false);
        assert_eq!(a[0][&k], vec![Some(b"one".to_vec())]);
        let a = allowed(&ops, 0, true);
        assert_eq!(a[0][&k], vec![None, Some(b"one".to_vec())]);
    }
}
