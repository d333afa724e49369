//! `shoal-compare --kind ordered`: Shoal's ordered maps against LMDB and libmdbx, their
//! natural peers (copy-on-write B+trees), on the same sorted-data workloads in one run.
//!
//! Every row runs on a fresh store, in forked worker processes (as the hash-map suite), with
//! its phases' keys and values laid out before the clock starts, in the order the phase
//! uses them. Reads of the peers go in read transactions of `--batch` gets (or of
//! `--batch / 100` scans of 100); Shoal's reads go in snapshots of the same size: a
//! snapshot is its read transaction.

use crate::peers::{he, mrc, mval, LmdbKv, Lookup, MdbxKv, Single};
use crate::report::{fmt_ops, median_spread};
use crate::{fork_worker, parse_count, parse_min_secs, reap, setup_done, share, Worker};
use mdbx_sys as mx;
use shoal_bench::key_val;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::ops::Bound;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

const HELP: &str = "\
shoal-compare --kind ordered: Shoal's ordered maps against LMDB and libmdbx (B+trees, their
natural peers) on sorted-data workloads, in one run. Keys 'key:%012d' (16 bytes, sorted in
index order), values 'val:%012d' padded to --vals bytes.

Phases of a row, for 1 and 2 processes (2 = two forked processes over one map; writes: both
write, each its own keys; reads: both read the whole map):
  LOAD      N inserts in random order (or key order in the 'sorted' rows), --batch puts per
            write transaction for every system; then bytes per entry (file / N)
  GET       point gets in random order, --batch per read transaction (Shoal: per snapshot),
            every value checked
  GET1      the same, one read transaction per get (Shoal: OrderedMap::get_into, which
            takes a snapshot only when a commit lands during the lookup)
  SCAN100   range scans of 100 entries forward from a random key (entries/s), 10 scans per
            read transaction
  SCAN100R  the same backward (the 100 entries <= a random key, descending)
  SCANALL   the whole map forward in one read transaction (entries/s)
  SCANALLR  the whole map backward
  PUT1      one put per write transaction (replaces a value of the worker's own keys)
  CRUD      libmdbx's transaction mix: per write transaction 2 inserts, 1 read, 1 update,
            1 delete (new keys spread among the existing ones); transactions/s
GET and the scans repeat until they lasted --min-secs; LOAD and CRUD are one pass; PUT1
stops at --min-secs. Rows run --repeats times, interleaved; cells are the median repeat.
The sorted rows (LOAD in key order, 1 process) are separate: sorted inserts append at the
right edge of a B-tree, its best case. Shoal has two: sorted puts, and its `append` (a bulk
load that fills pages instead of splitting them), against the peers' sorted puts.

libmdbx runs with WRITEMAP | SAFE_NOSYNC (its lazy-write mode), LMDB with WRITEMAP | NOSYNC
| NOMETASYNC: Shoal does not fsync either.

Options:
  --keys N        keys (default 1M)
  --vals LIST     value sizes (default 16,100)
  --systems LIST  among shoal,lmdb,mdbx (default all)
  --procs LIST    process counts (default 1,2)
  --batch B       puts per write txn in LOAD, gets per read txn in GET (default 1000)
  --crud T        CRUD transactions (default 200k, shared by the processes)
  --phases LIST   among LOAD,GET,SCAN100,SCAN100R,SCANALL,SCANALLR,PUT1,CRUD (LOAD always)
  --sorted B      also the sorted-LOAD rows (default true)
  --repeats R     (default 3)    --min-secs S (default 2)    --seed S (default 1)
  --dir DIR       (default /dev/shm)
  --md PATH       write the Markdown report there too
  --repro CMD     the command shown in the report";

/// A system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OSys {
    Shoal,
    Lmdb,
    Mdbx,
}

const ALL: [OSys; 3] = [OSys::Shoal, OSys::Lmdb, OSys::Mdbx];

impl OSys {
    fn key(self) -> &'static str {
        match self {
            OSys::Shoal => "shoal",
            OSys::Lmdb => "lmdb",
            OSys::Mdbx => "mdbx",
        }
    }
    fn label(self) -> &'static str {
        match self {
            OSys::Shoal => "Shoal ordered map",
            OSys::Lmdb => "LMDB",
            OSys::Mdbx => "libmdbx",
        }
    }
}

/// A phase of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OPhase {
    Load,
    Get,
    Get1,
    Scan100,
    Scan100Rev,
    ScanAll,
    ScanAllRev,
    Put1,
    Crud,
}

const PHASES: [OPhase; 9] = [
    OPhase::Load,
    OPhase::Get,
    OPhase::Get1,
    OPhase::Scan100,
    OPhase::Scan100Rev,
    OPhase::ScanAll,
    OPhase::ScanAllRev,
    OPhase::Put1,
    OPhase::Crud,
];

impl OPhase {
    fn name(self) -> &'static str {
        match self {
            OPhase::Load => "LOAD",
            OPhase::Get => "GET",
            OPhase::Get1 => "GET1",
            OPhase::Scan100 => "SCAN100",
            OPhase::Scan100Rev => "SCAN100R",
            OPhase::ScanAll => "SCANALL",
            OPhase::ScanAllRev => "SCANALLR",
            OPhase::Put1 => "PUT1",
            OPhase::Crud => "CRUD",
        }
    }
    /// What the phase's rate counts.
    fn unit(self) -> &'static str {
        match self {
            OPhase::Scan100 | OPhase::Scan100Rev | OPhase::ScanAll | OPhase::ScanAllRev => {
                "entries/s"
            }
            OPhase::Crud => "txns/s",
            _ => "ops/s",
        }
    }
}

/// Options of the ordered mode.
#[derive(Clone, Debug)]
pub struct OArgs {
    keys: usize,
    vals: Vec<usize>,
    systems: Vec<OSys>,
    procs: Vec<usize>,
    batch: usize,
    crud: usize,
    phases: Vec<OPhase>,
    sorted: bool,
    repeats: usize,
    min_secs: f64,
    seed: u64,
    dir: PathBuf,
    md: Option<PathBuf>,
    repro: Option<String>,
}

fn parse(args: &[String]) -> Result<OArgs, String> {
    let mut a = OArgs {
        keys: 1_000_000,
        vals: vec![16, 100],
        systems: ALL.to_vec(),
        procs: vec![1, 2],
        batch: 1000,
        crud: 200_000,
        phases: PHASES.to_vec(),
        sorted: true,
        repeats: 3,
        min_secs: 2.0,
        seed: 1,
        dir: PathBuf::from("/dev/shm"),
        md: None,
        repro: None,
    };
    crate::each_arg(args, HELP, |arg, val| {
        match arg {
            "--keys" => a.keys = parse_count(&val()?)?,
            "--vals" => a.vals = crate::list_of(&val()?, parse_count)?,
            "--procs" => a.procs = crate::list_of(&val()?, parse_count)?,
            "--batch" => a.batch = parse_count(&val()?)?.max(1),
            "--crud" => a.crud = parse_count(&val()?)?.max(1),
            "--repeats" => a.repeats = parse_count(&val()?)?,
            "--seed" => a.seed = parse_count(&val()?)? as u64,
            "--dir" => a.dir = PathBuf::from(val()?),
            "--md" => a.md = Some(PathBuf::from(val()?)),
            "--repro" => a.repro = Some(val()?),
            "--sorted" => {
                a.sorted = match val()?.as_str() {
                    "true" | "yes" | "1" => true,
                    "false" | "no" | "0" => false,
                    o => return Err(format!("--sorted {o:?}: true or false")),
                }
            }
            "--systems" => {
                a.systems = crate::list_of(&val()?, |s| {
                    ALL.into_iter()
                        .find(|x| x.key() == s)
                        .ok_or_else(|| format!("unknown system {s:?}"))
                })?
            }
            "--phases" => {
                let v = val()?;
                let want: Vec<&str> = v.split(',').map(str::trim).collect();
                if let Some(bad) = want
                    .iter()
                    .find(|w| !PHASES.iter().any(|p| p.name().eq_ignore_ascii_case(w)))
                {
                    return Err(format!("--phases: unknown phase {bad:?}"));
                }
                a.phases = PHASES
                    .into_iter()
                    .filter(|p| {
                        *p == OPhase::Load || want.iter().any(|w| p.name().eq_ignore_ascii_case(w))
                    })
                    .collect();
            }
            "--min-secs" => a.min_secs = parse_min_secs(&val()?)?,
            _ => {
                return Err(format!(
                    "unknown argument {arg:?} (see --kind ordered --help)"
                ))
            }
        }
        Ok(())
    })?;
    if a.keys < 1000 || a.keys > 1_000_000_000 {
        return Err("--keys must be between 1000 and 10^9".into());
    }
    if a.vals.iter().any(|&v| !(16..=900).contains(&v)) {
        return Err("--vals: sizes between 16 and 900 bytes".into());
    }
    if a.procs.iter().any(|&p| p == 0 || p > 64) {
        return Err("process counts must be 1..=64".into());
    }
    if a.repeats == 0 || a.repeats > 100 {
        return Err("--repeats must be 1..=100".into());
    }
    Ok(a)
}

// ---------------------------------------------------------------------------------------
// Records: the keys and values of a phase, laid out in the order it uses them.

/// Key `i`'s value, `v` bytes: `val:%012d` then filler.
fn value_of(i: u64, v: usize) -> Vec<u8> {
    let (_, val) = key_val(i);
    let mut out = vec![b'.'; v];
    out[..16].copy_from_slice(&val);
    out
}

/// Keys and values back to back (`16 + v` bytes each).
struct Recs {
    v: usize,
    buf: Vec<u8>,
}

impl Recs {
    fn new(idx: &[u32], v: usize) -> Recs {
        let mut buf = Vec::with_capacity(idx.len() * (16 + v));
        for &i in idx {
            let (k, _) = key_val(i as u64);
            buf.extend_from_slice(&k);
            if v > 0 {
                buf.extend_from_slice(&value_of(i as u64, v));
            }
        }
        Recs { v, buf }
    }
    fn keys_only(keys: impl Iterator<Item = [u8; 16]>) -> Recs {
        let mut buf = Vec::new();
        for k in keys {
            buf.extend_from_slice(&k);
        }
        Recs { v: 0, buf }
    }
    fn len(&self) -> usize {
        self.buf.len() / (16 + self.v)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> (&[u8], &[u8]) {
        let r = &self.buf[i * (16 + self.v)..(i + 1) * (16 + self.v)];
        r.split_at(16)
    }
    /// Consecutive ranges of `per` records.
    fn chunks(&self, per: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let n = self.len();
        (0..n.div_ceil(per)).map(move |c| c * per..((c + 1) * per).min(n))
    }
}

/// The CRUD transaction `j`'s two new keys: `key:` + 11 digits + a letter, so that they fall
/// among the loaded keys (`key:` + 12 digits) at spread-out places, never at the right edge.
fn crud_keys(j: u64, n: usize) -> ([u8; 16], [u8; 16]) {
    let groups = (n as u64 / 10).max(1);
    let range = groups * 26;
    // A multiplier coprime with `range` makes j -> j * m mod range a permutation.
    let mut m = (0x9E37_79B9_7F4A_7C15 % range) | 1;
    while gcd(m, range) != 1 {
        m += 2;
    }
    let one = |x: u64| {
        let c = (x as u128 * m as u128 % range as u128) as u64;
        let (k, _) = key_val(c / 26);
        let mut out = [0u8; 16];
        out[..4].copy_from_slice(b"key:");
        out[4..15].copy_from_slice(&k[5..16]);
        out[15] = b'a' + (c % 26) as u8;
        out
    };
    (one(2 * j), one(2 * j + 1))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// What a worker counted in a phase.
#[derive(Default)]
struct C {
    ops: u64,
    errors: u64,
    first_error: Option<String>,
}

impl C {
    fn error(&mut self, what: impl FnOnce() -> String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }
}

// ---------------------------------------------------------------------------------------
// The systems.

/// One system, as opened by one worker.
trait OKv {
    /// Puts `r` in one write transaction; new keys are checked to be new where the system
    /// says so.
    fn put_txn(&mut self, r: &Recs, range: std::ops::Range<usize>, c: &mut C)
        -> Result<(), String>;
    /// Gets in one read transaction, each value checked.
    fn get_txn(&mut self, r: &Recs, range: std::ops::Range<usize>, c: &mut C)
        -> Result<(), String>;
    /// Scans of `len` entries from each key of `range` (forward: keys >= it; backward: keys
    /// <= it, descending), in one read transaction; counts the entries.
    fn scan_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        len: usize,
        rev: bool,
    ) -> Result<u64, String>;
    /// Every entry, in one read transaction.
    fn scan_all(&mut self, rev: bool) -> Result<u64, String>;
    /// One CRUD transaction on new keys `a`, `b`: insert both, read `a`, update `b`,
    /// delete `a`.
    fn crud(&mut self, a: &[u8], b: &[u8], vals: &[Vec<u8>; 2], c: &mut C) -> Result<(), String>;
    /// Bytes of the file.
    fn bytes(&mut self) -> Result<u64, String>;
}

const MAP: &str = "compare";

struct ShoalO {
    store: shoal::Store,
    map: shoal::OrderedMap,
    /// GET's value buffer: the peers compare values where they lie, Shoal copies them
    /// out (its pages are shared memory that Rust code reads only through `mem`).
    buf: Vec<u8>,
    /// LOAD appends (`WriteTxn::append`, its sorted bulk load) instead of putting.
    append: bool,
}

fn se(e: shoal::Error) -> String {
    e.to_string()
}

impl ShoalO {
    fn create(path: &Path) -> Result<(), String> {
        let _ = std::fs::remove_file(path);
        let store = shoal::Store::create(path).map_err(se)?;
        store.ordered_map(MAP).map_err(se)?;
        Ok(())
    }
    fn open(path: &Path) -> Result<ShoalO, String> {
        let store = shoal::Store::open_existing(path).map_err(se)?;
        let map = store.ordered_map(MAP).map_err(se)?;
        Ok(ShoalO {
            store,
            map,
            buf: Vec::with_capacity(1024),
            append: false,
        })
    }
}

fn check(got: Option<&[u8]>, want: &[u8]) -> Lookup {
    match got {
        None => Lookup::Missing,
        Some(v) if v == want => Lookup::Ok,
        Some(_) => Lookup::Wrong,
    }
}

fn ks(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// The smallest key after every key that starts with `k`... and after `k` itself: `k` + 0.
fn after(k: &[u8]) -> [u8; 17] {
    let mut out = [0u8; 17];
    out[..16].copy_from_slice(k);
    out
}

impl OKv for ShoalO {
    fn put_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        c: &mut C,
    ) -> Result<(), String> {
        let single = range.len() == 1;
        if single {
            let (k, v) = r.get(range.start);
            self.map.put(k, v).map_err(se)?;
            c.ops += 1;
            return Ok(());
        }
        let mut w = self.map.write().map_err(se)?;
        for i in range {
            let (k, v) = r.get(i);
            if self.append {
                w.append(k, v).map_err(se)?;
            } else if !w.put(k, v).map_err(se)? {
                c.error(|| format!("LOAD {} replaced a value", ks(k)));
            }
            c.ops += 1;
        }
        w.commit().map_err(se)?;
        Ok(())
    }
    fn get_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        c: &mut C,
    ) -> Result<(), String> {
        if range.len() == 1 {
            let (k, v) = r.get(range.start);
            let found = self.map.get_into(k, &mut self.buf).map_err(se)?;
            let l = check(found.then_some(&self.buf[..]), v);
            if l != Lookup::Ok {
                c.error(|| format!("GET1 {}: {l:?}", ks(k)));
            }
            c.ops += 1;
            return Ok(());
        }
        let s = self.map.snapshot().map_err(se)?;
        for i in range {
            let (k, v) = r.get(i);
            let found = s.get_into(k, &mut self.buf).map_err(se)?;
            let l = check(found.then_some(&self.buf[..]), v);
            if l != Lookup::Ok {
                c.error(|| format!("GET {}: {l:?}", ks(k)));
            }
            c.ops += 1;
        }
        Ok(())
    }
    fn scan_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        len: usize,
        rev: bool,
    ) -> Result<u64, String> {
        let s = self.map.snapshot().map_err(se)?;
        let mut total = 0u64;
        for i in range {
            let (k, _) = r.get(i);
            let mut left = len;
            let mut f = |k: &[u8], v: &[u8]| {
                std::hint::black_box((k, v));
                left -= 1;
                left > 0
            };
            if rev {
                s.for_each(None, Some(&after(k)), true, &mut f)
                    .map_err(se)?;
            } else {
                s.for_each(Some(k), None, false, &mut f).map_err(se)?;
            }
            total += (len - left) as u64;
        }
        Ok(total)
    }
    fn scan_all(&mut self, rev: bool) -> Result<u64, String> {
        let s = self.map.snapshot().map_err(se)?;
        let mut n = 0u64;
        s.for_each(None, None, rev, |k, v| {
            std::hint::black_box((k, v));
            n += 1;
            true
        })
        .map_err(se)?;
        Ok(n)
    }
    fn crud(&mut self, a: &[u8], b: &[u8], vals: &[Vec<u8>; 2], c: &mut C) -> Result<(), String> {
        let mut w = self.map.write().map_err(se)?;
        if !w.put(a, &vals[0]).map_err(se)? | !w.put(b, &vals[0]).map_err(se)? {
            c.error(|| format!("CRUD insert {} replaced a value", ks(a)));
        }
        let l = check(w.get(a).map_err(se)?.as_deref(), &vals[0]);
        if l != Lookup::Ok {
            c.error(|| format!("CRUD read {}: {l:?}", ks(a)));
        }
        w.put(b, &vals[1]).map_err(se)?;
        if !w.remove(a).map_err(se)? {
            c.error(|| format!("CRUD delete {} found nothing", ks(a)));
        }
        w.commit().map_err(se)?;
        c.ops += 1;
        Ok(())
    }
    fn bytes(&mut self) -> Result<u64, String> {
        Ok(self.store.stats().map_err(se)?.file_size)
    }
}

impl OKv for LmdbKv {
    fn put_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        c: &mut C,
    ) -> Result<(), String> {
        let mut t = self.env.write_txn().map_err(he)?;
        for i in range {
            let (k, v) = r.get(i);
            self.db.put(&mut t, k, v).map_err(he)?;
            c.ops += 1;
        }
        t.commit().map_err(he)
    }
    fn get_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        c: &mut C,
    ) -> Result<(), String> {
        let t = self.env.read_txn().map_err(he)?;
        for i in range {
            let (k, v) = r.get(i);
            let l = check(self.db.get(&t, k).map_err(he)?, v);
            if l != Lookup::Ok {
                c.error(|| format!("GET {}: {l:?}", ks(k)));
            }
            c.ops += 1;
        }
        Ok(())
    }
    fn scan_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        len: usize,
        rev: bool,
    ) -> Result<u64, String> {
        let t = self.env.read_txn().map_err(he)?;
        let mut total = 0u64;
        for i in range {
            let (k, _) = r.get(i);
            if rev {
                let b: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Unbounded, Bound::Included(k));
                for e in self.db.rev_range(&t, &b).map_err(he)?.take(len) {
                    std::hint::black_box(e.map_err(he)?);
                    total += 1;
                }
            } else {
                let b: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(k), Bound::Unbounded);
                for e in self.db.range(&t, &b).map_err(he)?.take(len) {
                    std::hint::black_box(e.map_err(he)?);
                    total += 1;
                }
            }
        }
        Ok(total)
    }
    fn scan_all(&mut self, rev: bool) -> Result<u64, String> {
        let t = self.env.read_txn().map_err(he)?;
        let mut n = 0u64;
        if rev {
            for e in self.db.rev_iter(&t).map_err(he)? {
                std::hint::black_box(e.map_err(he)?);
                n += 1;
            }
        } else {
            for e in self.db.iter(&t).map_err(he)? {
                std::hint::black_box(e.map_err(he)?);
                n += 1;
            }
        }
        Ok(n)
    }
    fn crud(&mut self, a: &[u8], b: &[u8], vals: &[Vec<u8>; 2], c: &mut C) -> Result<(), String> {
        let mut t = self.env.write_txn().map_err(he)?;
        self.db.put(&mut t, a, &vals[0]).map_err(he)?;
        self.db.put(&mut t, b, &vals[0]).map_err(he)?;
        let l = check(self.db.get(&t, a).map_err(he)?, &vals[0]);
        if l != Lookup::Ok {
            c.error(|| format!("CRUD read {}: {l:?}", ks(a)));
        }
        self.db.put(&mut t, b, &vals[1]).map_err(he)?;
        if !self.db.delete(&mut t, a).map_err(he)? {
            c.error(|| format!("CRUD delete {} found nothing", ks(a)));
        }
        t.commit().map_err(he)?;
        c.ops += 1;
        Ok(())
    }
    fn bytes(&mut self) -> Result<u64, String> {
        crate::peers::Kv::bytes(self)
    }
}

/// A libmdbx cursor (closed on drop).
struct MCursor(*mut mx::MDBX_cursor);

impl MCursor {
    fn open(t: *mut mx::MDBX_txn, dbi: mx::MDBX_dbi) -> Result<MCursor, String> {
        let mut c = std::ptr::null_mut();
        // SAFETY: a live transaction; `c` receives the cursor.
        mrc("cursor_open", unsafe {
            mx::mdbx_cursor_open(t, dbi, &mut c)
        })?;
        Ok(MCursor(c))
    }
    /// One cursor step; false at the end.
    #[inline]
    fn step(&mut self, key: &mut mx::MDBX_val, op: mx::MDBX_cursor_op) -> Result<bool, String> {
        let mut val = mval(&[]);
        // SAFETY: a live cursor; key and value receive pointers into the map, only read
        // while the transaction lives.
        let rc = unsafe { mx::mdbx_cursor_get(self.0, key, &mut val, op) };
        if rc == mx::MDBX_NOTFOUND {
            return Ok(false);
        }
        mrc("cursor_get", rc)?;
        std::hint::black_box((key.iov_base, val.iov_base, val.iov_len));
        Ok(true)
    }
}

impl Drop for MCursor {
    fn drop(&mut self) {
        // SAFETY: our cursor, closed once.
        unsafe { mx::mdbx_cursor_close(self.0) };
    }
}

impl OKv for MdbxKv {
    fn put_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        c: &mut C,
    ) -> Result<(), String> {
        let mut t = self.txn(false)?;
        for i in range {
            let (k, v) = r.get(i);
            t.put(k, v)?;
            c.ops += 1;
        }
        t.commit()
    }
    fn get_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        c: &mut C,
    ) -> Result<(), String> {
        let mut t = self.txn(true)?;
        for i in range {
            let (k, v) = r.get(i);
            let l = t.get(k, v)?;
            if l != Lookup::Ok {
                c.error(|| format!("GET {}: {l:?}", ks(k)));
            }
            c.ops += 1;
        }
        Ok(())
    }
    fn scan_txn(
        &mut self,
        r: &Recs,
        range: std::ops::Range<usize>,
        len: usize,
        rev: bool,
    ) -> Result<u64, String> {
        let t = self.txn(true)?;
        let mut cur = MCursor::open(t.t, self.dbi)?;
        let mut total = 0u64;
        for i in range {
            let (k, _) = r.get(i);
            let mut key = mval(k);
            let (first, next) = if rev {
                (mx::MDBX_TO_KEY_LESSER_OR_EQUAL, mx::MDBX_PREV)
            } else {
                (mx::MDBX_SET_RANGE, mx::MDBX_NEXT)
            };
            let mut ok = cur.step(&mut key, first)?;
            let mut got = 0;
            while ok {
                got += 1;
                if got == len {
                    break;
                }
                ok = cur.step(&mut key, next)?;
            }
            total += got as u64;
        }
        drop(cur);
        drop(t);
        Ok(total)
    }
    fn scan_all(&mut self, rev: bool) -> Result<u64, String> {
        let t = self.txn(true)?;
        let mut cur = MCursor::open(t.t, self.dbi)?;
        let (first, next) = if rev {
            (mx::MDBX_LAST, mx::MDBX_PREV)
        } else {
            (mx::MDBX_FIRST, mx::MDBX_NEXT)
        };
        let mut key = mval(&[]);
        let mut n = 0u64;
        let mut ok = cur.step(&mut key, first)?;
        while ok {
            n += 1;
            ok = cur.step(&mut key, next)?;
        }
        drop(cur);
        drop(t);
        Ok(n)
    }
    fn crud(&mut self, a: &[u8], b: &[u8], vals: &[Vec<u8>; 2], c: &mut C) -> Result<(), String> {
        let mut t = self.txn(false)?;
        t.put(a, &vals[0])?;
        t.put(b, &vals[0])?;
        let l = t.get(a, &vals[0])?;
        if l != Lookup::Ok {
            c.error(|| format!("CRUD read {}: {l:?}", ks(a)));
        }
        t.put(b, &vals[1])?;
        if !t.remove(a)? {
            c.error(|| format!("CRUD delete {} found nothing", ks(a)));
        }
        t.commit()?;
        c.ops += 1;
        Ok(())
    }
    fn bytes(&mut self) -> Result<u64, String> {
        crate::peers::Kv::bytes(self)
    }
}

fn open(sys: OSys, path: &Path, n: usize) -> Result<Box<dyn OKv>, String> {
    Ok(match sys {
        OSys::Shoal => Box::new(ShoalO::open(path)?),
        OSys::Lmdb => Box::new(LmdbKv::open(path, n, 1)?),
        OSys::Mdbx => Box::new(MdbxKv::open_flags(
            path,
            n,
            1,
            mx::MDBX_WRITEMAP | mx::MDBX_SAFE_NOSYNC,
        )?),
    })
}

// ---------------------------------------------------------------------------------------
// Rows, workers, repeats.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    sys: OSys,
    p: usize,
    v: usize,
    sorted: bool,
    /// Shoal's sorted LOAD by `append` instead of puts.
    append: bool,
}

impl Plan {
    fn label(&self) -> String {
        format!(
            "{}{}, {} B values, {} proc",
            self.sys.label(),
            if self.append {
                " (sorted LOAD by append)"
            } else if self.sorted {
                " (sorted LOAD)"
            } else {
                ""
            },
            self.v,
            self.p
        )
    }
}

/// One phase's result in one repeat.
#[derive(Clone, Debug, Default)]
struct PR {
    ops: u64,
    secs: f64,
    /// CPU time of the workers (a steadier measure than wall time on a loaded machine).
    cpu_secs: f64,
    errors: u64,
    first_error: Option<String>,
}

impl PR {
    fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops as f64 / self.secs
        } else {
            0.0
        }
    }
}

type Rep = (Vec<(OPhase, PR)>, Option<u64>);

/// What every worker of a row shares.
struct Shared<'a> {
    a: &'a OArgs,
    plan: Plan,
    path: &'a Path,
    /// LOAD's order (random or sorted).
    load: &'a [u32],
    /// GET's and the scans' random order.
    order: &'a [u32],
}

fn worker(
    s: &Shared<'_>,
    w: usize,
    cmds: &mut BufReader<File>,
    reps: &mut File,
) -> Result<(), String> {
    let (a, p, v, n) = (s.a, s.plan.p, s.plan.v, s.a.keys);
    let mut kv = if s.plan.append {
        let mut o = ShoalO::open(s.path)?;
        o.append = true;
        Box::new(o)
    } else {
        open(s.plan.sys, s.path, n)?
    };
    let io = |e: std::io::Error| e.to_string();
    writeln!(reps, "ready").map_err(io)?;
    let mut line = String::new();
    loop {
        line.clear();
        if cmds.read_line(&mut line).map_err(io)? == 0 {
            return Ok(());
        }
        let cmd = line.trim();
        if cmd == "exit" {
            return Ok(());
        }
        if cmd == "bytes" {
            writeln!(reps, "bytes {}", kv.bytes()?).map_err(io)?;
            continue;
        }
        let phase = PHASES
            .into_iter()
            .find(|ph| ph.name() == cmd)
            .ok_or_else(|| format!("bad command {cmd:?}"))?;
        let mut c = C::default();
        // Laid out before the clock starts, in the order of use.
        let recs = match phase {
            OPhase::Load | OPhase::Put1 => Recs::new(&s.load[share(n, p, w)], v),
            OPhase::Get | OPhase::Get1 => Recs::new(&s.order[share(n, p, w)], v),
            OPhase::Scan100 | OPhase::Scan100Rev => {
                // Every process scans from its own random keys.
                let o = &s.order[share(n, p, w)];
                Recs::new(&o[..o.len().min(200_000)], 0)
            }
            OPhase::ScanAll | OPhase::ScanAllRev => Recs::new(&[], 0),
            OPhase::Crud => {
                let r = share(a.crud, p, w);
                Recs::keys_only(r.flat_map(|j| {
                    let (x, y) = crud_keys(j as u64, n);
                    [x, y]
                }))
            }
        };
        let crud_vals = [value_of(u64::MAX / 2 % 1_000_000_000_000, v), {
            let mut x = value_of(7, v);
            x[0] = b'U';
            x
        }];
        let cpu0 = shoal_bench::thread_cpu_ns();
        let t = Instant::now();
        let done = |t: &Instant| t.elapsed().as_secs_f64() >= a.min_secs;
        match phase {
            OPhase::Load => {
                for r in recs.chunks(a.batch) {
                    kv.put_txn(&recs, r, &mut c)?;
                }
            }
            OPhase::Put1 => 'outer: loop {
                for r in recs.chunks(1) {
                    kv.put_txn(&recs, r, &mut c)?;
                    if c.ops % 1024 == 0 && done(&t) {
                        break 'outer;
                    }
                }
                if done(&t) {
                    break;
                }
            },
            OPhase::Get | OPhase::Get1 => 'outer: loop {
                let per = if phase == OPhase::Get { a.batch } else { 1 };
                for (j, r) in recs.chunks(per).enumerate() {
                    kv.get_txn(&recs, r, &mut c)?;
                    // The clock read every 1024 gets, as in PUT1.
                    if (per > 1 || j % 1024 == 1023) && done(&t) {
                        break 'outer;
                    }
                }
            },
            OPhase::Scan100 | OPhase::Scan100Rev => 'outer: loop {
                let rev = phase == OPhase::Scan100Rev;
                for r in recs.chunks(10) {
                    let want: u64 = r
                        .clone()
                        .map(|i| {
                            let k: u64 = std::str::from_utf8(&recs.get(i).0[4..])
                                .ok()
                                .and_then(|d| d.parse().ok())
                                .unwrap_or(0);
                            if rev {
                                (k + 1).min(100)
                            } else {
                                (n as u64 - k).min(100)
                            }
                        })
                        .sum();
                    let got = kv.scan_txn(&recs, r, 100, rev)?;
                    if got != want {
                        c.error(|| format!("{}: {got} entries, not {want}", phase.name()));
                    }
                    c.ops += got;
                    if done(&t) {
                        break 'outer;
                    }
                }
            },
            OPhase::ScanAll | OPhase::ScanAllRev => loop {
                let got = kv.scan_all(phase == OPhase::ScanAllRev)?;
                if got != n as u64 {
                    c.error(|| format!("{}: {got} entries, not {n}", phase.name()));
                }
                c.ops += got;
                if done(&t) {
                    break;
                }
            },
            OPhase::Crud => {
                for j in 0..recs.len() / 2 {
                    let (x, _) = recs.get(2 * j);
                    let (y, _) = recs.get(2 * j + 1);
                    kv.crud(x, y, &crud_vals, &mut c)?;
                }
            }
        }
        let nanos = t.elapsed().as_nanos();
        let cpu = shoal_bench::thread_cpu_ns() - cpu0;
        let fe = c.first_error.unwrap_or_default().replace('\n', " ");
        writeln!(reps, "done {} {} {nanos} {cpu} {fe}", c.ops, c.errors).map_err(io)?;
    }
}

fn run_once(a: &OArgs, plan: Plan, base: &Path) -> Result<Rep, String> {
    let path = match plan.sys {
        OSys::Shoal => base.join(format!("ordered-{}.shoal", plan.p)),
        s => base.join(format!("ordered-{}-{}", s.key(), plan.p)),
    };
    let load: Vec<u32> = if plan.sorted {
        (0..a.keys as u32).collect()
    } else {
        shoal_bench::shuffled(a.keys, a.seed ^ 0x7075_7473)
    };
    let order = shoal_bench::shuffled(a.keys, a.seed);
    let sh = Shared {
        a,
        plan,
        path: &path,
        load: &load,
        order: &order,
    };
    let r = drive(&sh);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&path);
    r
}

fn drive(s: &Shared<'_>) -> Result<Rep, String> {
    let setup = fork_worker(&[], |_, reps| {
        match s.plan.sys {
            OSys::Shoal => ShoalO::create(s.path)?,
            sys => drop(open(sys, s.path, s.a.keys)?),
        }
        writeln!(reps, "ready").map_err(|e| e.to_string())
    })?;
    setup_done(setup)?;
    let mut workers: Vec<Worker> = Vec::new();
    let mut out: Rep = (Vec::new(), None);
    let phases: Vec<OPhase> = if s.plan.sorted {
        vec![OPhase::Load]
    } else {
        s.a.phases.clone()
    };
    let result = (|| {
        for w in 0..s.plan.p {
            let fds: Vec<RawFd> = workers.iter().flat_map(|w| w.fds()).collect();
            workers.push(fork_worker(&fds, |cmds, reps| worker(s, w, cmds, reps))?);
        }
        for w in workers.iter_mut() {
            let r = w.recv()?;
            if r != "ready" {
                return Err(format!("worker said {r:?}"));
            }
        }
        for &phase in &phases {
            for w in workers.iter_mut() {
                w.send(phase.name())?;
            }
            let mut pr = PR::default();
            for w in workers.iter_mut() {
                let r = w.recv()?;
                let f: Vec<&str> = r.splitn(6, ' ').collect();
                let num = |i: usize| -> Result<u128, String> {
                    f.get(i)
                        .and_then(|x| x.parse().ok())
                        .ok_or_else(|| format!("bad reply {r:?}"))
                };
                if f.first() != Some(&"done") {
                    return Err(format!("bad reply {r:?}"));
                }
                pr.ops += num(1)? as u64;
                pr.errors += num(2)? as u64;
                pr.secs = pr.secs.max(num(3)? as f64 / 1e9);
                pr.cpu_secs += num(4)? as f64 / 1e9;
                let fe = f.get(5).map(|x| x.trim()).unwrap_or("");
                if !fe.is_empty() && pr.first_error.is_none() {
                    pr.first_error = Some(fe.to_string());
                }
            }
            eprintln!(
                "  {:<46} {:<8} {:>12.0} {}  ({} in {:.3} s; {:.0} per CPU-second{})",
                s.plan.label(),
                phase.name(),
                pr.rate(),
                phase.unit(),
                pr.ops,
                pr.secs,
                pr.ops as f64 / pr.cpu_secs.max(1e-9),
                match &pr.first_error {
                    Some(e) => format!(", {} ERRORS: {e}", pr.errors),
                    None => String::new(),
                }
            );
            out.0.push((phase, pr));
            if phase == OPhase::Load {
                workers[0].send("bytes")?;
                let r = workers[0].recv()?;
                out.1 = r.strip_prefix("bytes ").and_then(|b| b.parse().ok());
            }
        }
        Ok(())
    })();
    reap(workers);
    result.map(|()| out)
}

/// Runs the ordered mode with the arguments after `--kind ordered`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let Some((a, base)) = crate::start(args, parse, |a| &a.dir, "o") else {
        return 2;
    };
    let load_before = crate::report::loadavg();
    let t0 = Instant::now();
    let mut plans = Vec::new();
    for &v in &a.vals {
        for &p in &a.procs {
            for &sys in &a.systems {
                plans.push(Plan {
                    sys,
                    p,
                    v,
                    sorted: false,
                    append: false,
                });
            }
        }
    }
    if a.sorted {
        for &v in &a.vals {
            for &sys in &a.systems {
                plans.push(Plan {
                    sys,
                    p: 1,
                    v,
                    sorted: true,
                    append: false,
                });
                if sys == OSys::Shoal {
                    plans.push(Plan {
                        sys,
                        p: 1,
                        v,
                        sorted: true,
                        append: true,
                    });
                }
            }
        }
    }
    let mut reps: Vec<Vec<Rep>> = vec![Vec::new(); plans.len()];
    let mut failed: Vec<Option<String>> = vec![None; plans.len()];
    for rep in 0..a.repeats {
        for (i, plan) in plans.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            eprintln!("{}, repeat {} of {}", plan.label(), rep + 1, a.repeats);
            match run_once(&a, *plan, &base) {
                Ok(r) => reps[i].push(r),
                Err(e) => {
                    eprintln!("  failed: {e}");
                    failed[i] = Some(e)
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    let load_after = crate::report::loadavg();
    let md = markdown(&a, &plans, &reps, &failed, load_before, load_after, t0);
    if let Some(path) = &a.md {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!("shoal-compare: {}: {e}", path.display());
            return 2;
        }
    }
    println!("{md}");
    let errors: u64 = reps
        .iter()
        .flatten()
        .flat_map(|r| r.0.iter().map(|(_, p)| p.errors))
        .sum();
    if errors > 0 || failed.iter().any(Option::is_some) {
        eprintln!("shoal-compare: {errors} wrong results, or a row failed");
        return 1;
    }
    0
}

// ---------------------------------------------------------------------------------------
// The report.

/// A phase's median over the repeats, and half the range over it.
fn median(reps: &[Rep], ph: OPhase, cpu: bool) -> Option<(f64, f64)> {
    median_spread(
        reps.iter()
            .filter_map(|x| {
                x.0.iter().find(|(q, _)| *q == ph).map(|(_, p)| {
                    if cpu {
                        p.ops as f64 / p.cpu_secs.max(1e-9)
                    } else {
                        p.rate()
                    }
                })
            })
            .collect(),
    )
}

/// Targets of the issue: (phase, processes, ratio Shoal / libmdbx at least).
const TARGETS: [(OPhase, usize, f64); 9] = [
    (OPhase::Get, 1, 1.2),
    (OPhase::Get1, 1, 1.2),
    (OPhase::Scan100, 1, 1.2),
    (OPhase::ScanAll, 1, 1.2),
    (OPhase::Put1, 1, 1.5),
    (OPhase::Put1, 2, 2.0),
    (OPhase::Load, 1, 1.5),
    (OPhase::Load, 2, 2.0),
    (OPhase::Crud, 1, 2.0),
];

#[allow(clippy::too_many_arguments)]
fn markdown(
    a: &OArgs,
    plans: &[Plan],
    reps: &[Vec<Rep>],
    failed: &[Option<String>],
    load_before: String,
    load_after: String,
    t0: Instant,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Ordered maps: Shoal against LMDB and libmdbx, {} keys\n",
        a.keys
    );
    let _ = writeln!(
        s,
        "Run of {} s; load average before: {}, after: {}. Command: `{}`. libmdbx {}, {}.\n",
        t0.elapsed().as_secs(),
        load_before,
        load_after,
        a.repro
            .clone()
            .unwrap_or_else(|| "shoal-compare --kind ordered".into()),
        MdbxKv::version(),
        LmdbKv::version(),
    );
    let _ = writeln!(
        s,
        "Median of {} repeats, ± half their range. LOAD: {} puts per write transaction; GET: {} \
         gets per read transaction (Shoal: per snapshot); SCAN100: 10 scans per read \
         transaction; PUT1: one put per write transaction; CRUD: {} transactions of 2 inserts, \
         1 read, 1 update, 1 delete. Keys inserted in random order except in the sorted rows.\n",
        a.repeats, a.batch, a.batch, a.crud
    );
    let find = |sys: OSys, p: usize, v: usize, sorted: bool, append: bool| {
        plans.iter().position(|pl| {
            pl.sys == sys && pl.p == p && pl.v == v && pl.sorted == sorted && pl.append == append
        })
    };
    for (&v, cpu) in a
        .vals
        .iter()
        .flat_map(|v| [false, true].map(move |c| (v, c)))
    {
        if cpu {
            let _ = writeln!(
                s,
                "### {v}-byte values, per CPU-second of the workers\n\nThe same phases, \
                 divided by the CPU time of the worker processes instead of wall time: steadier \
                 on a loaded machine (with 2 processes, the sum of both).\n"
            );
        } else {
            let _ = writeln!(s, "## {v}-byte values\n");
        }
        let _ = write!(s, "| system | procs |");
        for ph in &a.phases {
            let _ = write!(s, " {} ({}) |", ph.name(), ph.unit());
        }
        let _ = writeln!(s, " bytes/entry |");
        let _ = writeln!(s, "|---|---|{}---|", "---|".repeat(a.phases.len()));
        for (i, pl) in plans.iter().enumerate() {
            if pl.v != v {
                continue;
            }
            let name = if pl.append {
                format!("{}, sorted LOAD by append", pl.sys.label())
            } else if pl.sorted {
                format!("{}, sorted LOAD", pl.sys.label())
            } else {
                pl.sys.label().to_string()
            };
            let _ = write!(s, "| {name} | {} |", pl.p);
            if let Some(e) = &failed[i] {
                let _ = writeln!(s, " failed: {e} |");
                continue;
            }
            for &ph in &a.phases {
                match median(&reps[i], ph, cpu) {
                    Some((m, sp)) => {
                        let _ = write!(s, " {} ±{:.0}% |", fmt_ops(m), sp * 100.0);
                    }
                    None => {
                        let _ = write!(s, " |");
                    }
                }
            }
            let bytes = reps[i].last().and_then(|r| r.1);
            match bytes {
                Some(b) => {
                    let _ = writeln!(s, " {:.1} |", b as f64 / a.keys as f64);
                }
                None => {
                    let _ = writeln!(s, " |");
                }
            }
        }
        let _ = writeln!(s);
        for peer in [OSys::Mdbx, OSys::Lmdb] {
            let _ = writeln!(
                s,
                "Shoal / {} ({v}-byte values{}):\n",
                peer.label(),
                if cpu { ", per CPU-second" } else { "" }
            );
            let _ = write!(s, "| procs |");
            for ph in &a.phases {
                let _ = write!(s, " {} |", ph.name());
            }
            let _ = writeln!(s, " bytes/entry |");
            let _ = writeln!(s, "|---|{}---|", "---|".repeat(a.phases.len()));
            let mut rows: Vec<(String, usize, bool, bool)> = a
                .procs
                .iter()
                .map(|&p| (p.to_string(), p, false, false))
                .collect();
            if a.sorted {
                rows.push(("1, sorted LOAD".into(), 1, true, false));
                // Shoal's append against the peers' sorted puts.
                rows.push(("1, sorted LOAD, Shoal by append".into(), 1, true, true));
            }
            for (label, p, sorted, append) in rows {
                let (Some(x), Some(y)) = (
                    find(OSys::Shoal, p, v, sorted, append),
                    find(peer, p, v, sorted, false),
                ) else {
                    continue;
                };
                let _ = write!(s, "| {label} |");
                for &ph in &a.phases {
                    match (median(&reps[x], ph, cpu), median(&reps[y], ph, cpu)) {
                        (Some((m, _)), Some((q, _))) if q > 0.0 => {
                            let t = TARGETS
                                .iter()
                                .find(|t| t.0 == ph && t.1 == p && !sorted && peer == OSys::Mdbx);
                            let mark = match t {
                                Some(t) if m / q >= t.2 => format!(" (target {}: met)", t.2),
                                Some(t) => format!(" (target {}: not met)", t.2),
                                None => String::new(),
                            };
                            let _ = write!(s, " {:.2}×{mark} |", m / q);
                        }
                        _ => {
                            let _ = write!(s, " |");
                        }
                    }
                }
                let bx = reps[x].last().and_then(|r| r.1);
                let by = reps[y].last().and_then(|r| r.1);
                match (bx, by) {
                    (Some(bx), Some(by)) if by > 0 => {
                        let mark = if peer == OSys::Mdbx && !sorted {
                            if bx as f64 / by as f64 <= 1.2 {
                                " (target ≤ 1.2: met)"
                            } else {
                                " (target ≤ 1.2: not met)"
                            }
                        } else {
                            ""
                        };
                        let _ = writeln!(s, " {:.2}×{mark} |", bx as f64 / by as f64);
                    }
                    _ => {
                        let _ = writeln!(s, " |");
                    }
                }
            }
            let _ = writeln!(s);
        }
    }
    let errors: Vec<String> = plans
        .iter()
        .zip(reps)
        .flat_map(|(pl, r)| {
            r.iter().flat_map(move |x| {
                x.0.iter().filter_map(move |(ph, p)| {
                    p.first_error.as_ref().map(|e| {
                        format!(
                            "{} {}: {} errors, first: {e}",
                            pl.label(),
                            ph.name(),
                            p.errors
                        )
                    })
                })
            })
        })
        .collect();
    if errors.is_empty() {
        let _ = writeln!(s, "Every result was checked and correct.");
    } else {
        let _ = writeln!(s, "ERRORS:\n");
        for e in errors {
            let _ = writeln!(s, "- {e}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crud_keys_are_new_distinct_and_spread_among_the_loaded_keys() {
        let n = 10_000;
        let first = key_val(0).0;
        let last = key_val(n as u64 - 1).0;
        let mut seen = std::collections::HashSet::new();
        let (mut low_half, mut total) = (0, 0);
        for j in 0..n as u64 {
            let (a, b) = crud_keys(j, n);
            for k in [a, b] {
                assert!(seen.insert(k), "CRUD key {} twice", ks(&k));
                // A letter in the last place: never one of the loaded keys (all digits).
                assert!(k[15].is_ascii_lowercase());
                assert!(k > first && k < last || k > last, "{}", ks(&k));
                low_half += (k < key_val(n as u64 / 2).0) as u32;
                total += 1;
            }
        }
        assert!(
            (total / 3..total * 2 / 3).contains(&low_half),
            "{low_half} of {total}"
        );
    }

    #[test]
    fn scans_of_100_expect_what_the_map_holds() {
        // The checks of SCAN100 read the key's index back from its digits.
        let (k, _) = key_val(123_456);
        let d: u64 = std::str::from_utf8(&k[4..]).unwrap().parse().unwrap();
        assert_eq!(d, 123_456);
    }
}
