//! The systems under test, each behind [`Kv`]: what one worker process does in a phase.
//!
//! Every system runs the same op lists (see `main.rs`): an op is a key index, with the
//! high bit set in MIX for "remove this key, then put it back" (two operations).
//! Every result is checked: a GET must return the key's own value, a PUT of a new key
//! must insert, a REMOVE must find its key.

use shoal_bench::key_val;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The high bit of a MIX op: remove the key and put it back.
pub const REMOVE_PUT: u32 = 1 << 31;

/// One operation with its key and value, formatted before the timed loop.
///
/// A worker lays out its ops for a phase in the order it runs them, so the timed loop reads
/// its keys and values sequentially (the prefetcher has them in cache): reading them from
/// an array in key order, at random, would add a cache miss of the harness's own to every
/// operation of every system, and formatting them inside the loop would lengthen the loop
/// body and shrink how many lookups the CPU overlaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// The key's index, with [`REMOVE_PUT`] set in MIX for "remove, then put back".
    pub code: u32,
    /// `key:%012d` of the index.
    pub key: [u8; 16],
    /// `val:%012d` of the index.
    pub val: [u8; 16],
}

impl Op {
    /// The op for `code`.
    pub fn new(code: u32) -> Op {
        let (key, val) = key_val((code & !REMOVE_PUT) as u64);
        Op { code, key, val }
    }
}

/// The phases, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// N inserts into an empty map (each worker its own keys, in key order).
    Put,
    /// N gets in shuffled order.
    Get,
    /// 98% gets of random keys, 2% remove + put of one of the worker's own keys.
    Mix,
    /// Every key removed, in shuffled order.
    Remove,
}

/// All phases.
pub const PHASES: [Phase; 4] = [Phase::Put, Phase::Get, Phase::Mix, Phase::Remove];

impl Phase {
    /// Upper-case name, as in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Put => "PUT",
            Phase::Get => "GET",
            Phase::Mix => "MIX",
            Phase::Remove => "REMOVE",
        }
    }
}

/// What a worker counted in one phase.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Operations done (a MIX remove + put counts 2).
    pub ops: u64,
    /// Wrong results (value mismatch, insert that replaced, remove that found nothing…).
    pub errors: u64,
    /// MIX gets that found no value (possible only while another process has the key
    /// removed for a moment; an error with one process).
    pub misses: u64,
    /// The first error, for the report.
    pub first_error: Option<String>,
}

impl Counts {
    fn error(&mut self, what: impl FnOnce() -> String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }
}

/// One system, as opened by one worker process.
pub trait Kv {
    /// Runs `ops` of `phase`.
    fn run(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String>;

    /// Runs ops outside the timed part (only Redis, whose unpipelined runs may be capped,
    /// does this faster than `run`).
    fn fill(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        self.run(phase, ops, c)
    }

    /// Bytes the system uses for its data now (see the report's notes for what each counts).
    fn bytes(&mut self) -> Result<u64, String>;
}

/// Single-operation systems: [`run_single`] drives them through a phase.
pub trait Single {
    /// Puts; returns whether the key was new (None if the system cannot tell).
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String>;
    /// Gets; returns whether found and equal to `expect` (Err(..) describes a mismatch).
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String>;
    /// Removes; returns whether the key was present.
    fn remove(&mut self, k: &[u8]) -> Result<bool, String>;
}

/// Outcome of a checked get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Found, with the expected value.
    Ok,
    /// Absent.
    Missing,
    /// Found, with another value.
    Wrong,
}

/// Checks a value against the expected one.
#[inline(always)]
fn check(got: Option<&[u8]>, expect: &[u8]) -> Lookup {
    match got {
        None => Lookup::Missing,
        Some(v) if v == expect => Lookup::Ok,
        Some(_) => Lookup::Wrong,
    }
}

fn key_str(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// One op of any phase on a single-op system.
#[inline(always)]
fn one<S: Single + ?Sized>(s: &mut S, phase: Phase, op: &Op, c: &mut Counts) -> Result<(), String> {
    let (k, v) = (&op.key[..], &op.val[..]);
    match phase {
        Phase::Put => {
            if s.put(k, v)? == Some(false) {
                c.error(|| format!("PUT {} replaced a value", key_str(k)));
            }
            c.ops += 1;
        }
        Phase::Get => {
            let r = s.get(k, v)?;
            if r != Lookup::Ok {
                c.error(|| format!("GET {}: {r:?}", key_str(k)));
            }
            c.ops += 1;
        }
        Phase::Mix if op.code & REMOVE_PUT != 0 => {
            if !s.remove(k)? {
                c.error(|| format!("MIX remove {} found nothing", key_str(k)));
            }
            if s.put(k, v)? == Some(false) {
                c.error(|| format!("MIX put {} replaced a value", key_str(k)));
            }
            c.ops += 2;
        }
        Phase::Mix => {
            match s.get(k, v)? {
                Lookup::Ok => {}
                Lookup::Missing => c.misses += 1,
                Lookup::Wrong => c.error(|| format!("MIX get {}: wrong value", key_str(k))),
            }
            c.ops += 1;
        }
        Phase::Remove => {
            if !s.remove(k)? {
                c.error(|| format!("REMOVE {} found nothing", key_str(k)));
            }
            c.ops += 1;
        }
    }
    Ok(())
}

/// Runs a phase one operation at a time.
pub fn run_single<S: Single + ?Sized>(
    s: &mut S,
    phase: Phase,
    ops: &[Op],
    c: &mut Counts,
) -> Result<(), String> {
    for op in ops {
        one(s, phase, op, c)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Shoal

/// Shoal: one map in a store file.
pub struct ShoalKv {
    store: shoal::Store,
    map: shoal::Map,
    buf: Vec<u8>,
}

/// The map every worker uses.
pub const MAP: &str = "compare";

impl ShoalKv {
    /// Creates the store (setup, once per run).
    pub fn create(path: &Path) -> Result<(), String> {
        let _ = std::fs::remove_file(path);
        let store = shoal::Store::create(path).map_err(|e| e.to_string())?;
        store.map(MAP).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Opens the store a setup created.
    pub fn open(path: &Path) -> Result<ShoalKv, String> {
        let store = shoal::Store::open_existing(path).map_err(|e| e.to_string())?;
        let map = store.map(MAP).map_err(|e| e.to_string())?;
        Ok(ShoalKv {
            store,
            map,
            buf: Vec::with_capacity(64),
        })
    }
}

impl Single for ShoalKv {
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String> {
        match self.map.put(k, v) {
            Ok(o) => Ok(Some(o == shoal::PutOutcome::Inserted)),
            Err(e) => Err(e.to_string()),
        }
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        match self.map.get_into(k, &mut self.buf) {
            Ok(true) => Ok(check(Some(&self.buf), expect)),
            Ok(false) => Ok(Lookup::Missing),
            Err(e) => Err(e.to_string()),
        }
    }
    #[inline]
    fn remove(&mut self, k: &[u8]) -> Result<bool, String> {
        self.map.remove(k).map_err(|e| e.to_string())
    }
}

impl Kv for ShoalKv {
    fn run(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        run_single(self, phase, ops, c)
    }
    fn bytes(&mut self) -> Result<u64, String> {
        Ok(self.store.stats().map_err(|e| e.to_string())?.file_size)
    }
}

// ---------------------------------------------------------------------------------------
// hashbrown (in-process: one process only)

type HMap = hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>;

/// `hashbrown::HashMap<Vec<u8>, Vec<u8>>` with foldhash, in the worker's own heap.
pub struct HashbrownKv {
    map: HMap,
    heap_before: usize,
}

impl HashbrownKv {
    /// An empty map (heap use counted from here).
    pub fn new() -> HashbrownKv {
        HashbrownKv {
            map: HMap::default(),
            heap_before: shoal_bench::allocated_bytes(),
        }
    }
}

impl Single for HashbrownKv {
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String> {
        Ok(Some(self.map.insert(k.to_vec(), v.to_vec()).is_none()))
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        Ok(check(self.map.get(k).map(|v| &v[..]), expect))
    }
    #[inline]
    fn remove(&mut self, k: &[u8]) -> Result<bool, String> {
        Ok(self.map.remove(k).is_some())
    }
}

impl Kv for HashbrownKv {
    fn run(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        run_single(self, phase, ops, c)
    }
    fn bytes(&mut self) -> Result<u64, String> {
        Ok(shoal_bench::allocated_bytes().saturating_sub(self.heap_before) as u64)
    }
}

// ---------------------------------------------------------------------------------------
// LMDB (heed: liblmdb compiled from source)

use heed::types::Bytes;

/// Map size for `n` keys: generous (the file is sparse on tmpfs).
fn map_size(n: usize) -> usize {
    ((n * 512 + (256 << 20)) + 0xFFFF) & !0xFFFF
}

/// LMDB: the unnamed database of an environment in a directory, opened with
/// NOSYNC | NOMETASYNC | WRITEMAP.
pub struct LmdbKv {
    pub(crate) env: heed::Env,
    pub(crate) db: heed::Database<'static, Bytes, Bytes>,
    batch: usize,
}

impl LmdbKv {
    /// Opens (creating if needed) the environment in `dir`. `batch` > 1: that many ops per
    /// transaction.
    pub fn open(dir: &Path, n: usize, batch: usize) -> Result<LmdbKv, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let e = |e: heed::Error| format!("LMDB: {e}");
        let mut o = heed::EnvOpenOptions::new();
        o.map_size(map_size(n)).max_readers(126).max_dbs(1);
        // SAFETY: NOSYNC/NOMETASYNC only give up durability after an OS crash (the file is
        // in tmpfs anyway); WRITEMAP is used by every process that opens this environment.
        unsafe {
            o.flags(
                heed::EnvFlags::NO_SYNC | heed::EnvFlags::NO_META_SYNC | heed::EnvFlags::WRITE_MAP,
            );
        }
        // SAFETY: the environment is opened once per process (heed checks it).
        let env = unsafe { o.open(dir) }.map_err(e)?;
        let rtxn = env.read_txn().map_err(e)?;
        let db: heed::Database<'_, Bytes, Bytes> = env
            .open_databases_and_commit(rtxn, |dbo, rtxn| {
                dbo.open_database(rtxn, None)
                    .map(heed::CommitOrAbort::<_, ()>::Commit)
            })
            .map_err(e)?
            .unwrap_commit()
            .ok_or("LMDB: no unnamed database")?;
        let db: heed::Database<'static, Bytes, Bytes> =
            // SAFETY: only the lifetime changes: `db` is a handle (a dbi number) valid as
            // long as `env`, which this struct owns and drops after it.
            unsafe { std::mem::transmute(db) };
        Ok(LmdbKv { env, db, batch })
    }

    /// LMDB's version string.
    pub fn version() -> String {
        let (mut a, mut b, mut c) = (0, 0, 0);
        // SAFETY: mdb_version writes three ints and returns a static string.
        let s = unsafe { lmdb_master_sys::mdb_version(&mut a, &mut b, &mut c) };
        // SAFETY: a NUL-terminated static string.
        let v = unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy();
        v.split(':').next().unwrap_or("LMDB").trim().to_string()
    }
}

pub(crate) fn he(e: heed::Error) -> String {
    format!("LMDB: {e}")
}

impl Single for LmdbKv {
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String> {
        let mut t = self.env.write_txn().map_err(he)?;
        self.db.put(&mut t, k, v).map_err(he)?;
        t.commit().map_err(he)?;
        Ok(None)
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        let t = self.env.read_txn().map_err(he)?;
        Ok(check(self.db.get(&t, k).map_err(he)?, expect))
    }
    #[inline]
    fn remove(&mut self, k: &[u8]) -> Result<bool, String> {
        let mut t = self.env.write_txn().map_err(he)?;
        let r = self.db.delete(&mut t, k).map_err(he)?;
        t.commit().map_err(he)?;
        Ok(r)
    }
}

impl Kv for LmdbKv {
    fn run(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        if self.batch <= 1 {
            return run_single(self, phase, ops, c);
        }
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for chunk in ops.chunks(self.batch) {
            let (reads, writes) = batch_split(phase, chunk, &mut reads, &mut writes);
            if !reads.is_empty() {
                let t = self.env.read_txn().map_err(he)?;
                let mut r = LmdbRead { db: self.db, t: &t };
                run_single(&mut r, phase, reads, c)?;
            }
            if !writes.is_empty() {
                let mut t = self.env.write_txn().map_err(he)?;
                let mut b = LmdbTxn {
                    db: self.db,
                    t: &mut t,
                };
                run_single(&mut b, phase, writes, c)?;
                t.commit().map_err(he)?;
            }
        }
        Ok(())
    }
    fn bytes(&mut self) -> Result<u64, String> {
        let info = self.env.info();
        let psize = self.env.unnamed_database_stat().page_size as u64;
        Ok((info.last_page_number as u64 + 1) * psize)
    }
}

/// The ops of one batch of a batched B-tree variant, split into those that only read (run
/// in one read transaction) and those that write (run in one write transaction). Reads
/// never take the single writer lock: with several processes, a MIX batch's 98% gets
/// must not queue behind another process's writes. In MIX the batch's gets run before its
/// remove + put pairs; a pair restores the key's value, so the gets' results are the same.
fn batch_split<'a>(
    phase: Phase,
    chunk: &'a [Op],
    reads: &'a mut Vec<Op>,
    writes: &'a mut Vec<Op>,
) -> (&'a [Op], &'a [Op]) {
    match phase {
        Phase::Get => (chunk, &[]),
        Phase::Put | Phase::Remove => (&[], chunk),
        Phase::Mix => {
            reads.clear();
            writes.clear();
            for &op in chunk {
                if op.code & REMOVE_PUT != 0 {
                    writes.push(op);
                } else {
                    reads.push(op);
                }
            }
            (&reads[..], &writes[..])
        }
    }
}

/// Gets inside one LMDB read transaction (the batched variant's reads).
struct LmdbRead<'a, 'e> {
    db: heed::Database<'static, Bytes, Bytes>,
    t: &'a heed::RoTxn<'e>,
}

impl Single for LmdbRead<'_, '_> {
    fn put(&mut self, _: &[u8], _: &[u8]) -> Result<Option<bool>, String> {
        Err("LMDB: a put in a read transaction".into())
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        Ok(check(self.db.get(self.t, k).map_err(he)?, expect))
    }
    fn remove(&mut self, _: &[u8]) -> Result<bool, String> {
        Err("LMDB: a remove in a read transaction".into())
    }
}

/// Ops inside one LMDB write transaction (the batched variant).
struct LmdbTxn<'a, 'e> {
    db: heed::Database<'static, Bytes, Bytes>,
    t: &'a mut heed::RwTxn<'e>,
}

impl Single for LmdbTxn<'_, '_> {
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String> {
        self.db.put(self.t, k, v).map_err(he)?;
        Ok(None)
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        Ok(check(self.db.get(self.t, k).map_err(he)?, expect))
    }
    #[inline]
    fn remove(&mut self, k: &[u8]) -> Result<bool, String> {
        self.db.delete(self.t, k).map_err(he)
    }
}

// ---------------------------------------------------------------------------------------
// libmdbx (the C library through mdbx-sys, which builds it from source)
//
// Called directly: the `libmdbx` wrapper crate hands every write transaction to a
// manager thread over channels, which costs more than libmdbx's own commit.

use mdbx_sys as mx;

/// libmdbx: the unnamed table of an environment in a directory, WRITEMAP, UtterlyNoSync.
pub struct MdbxKv {
    pub(crate) env: *mut mx::MDBX_env,
    pub(crate) dbi: mx::MDBX_dbi,
    batch: usize,
}

fn mdbx_err(what: &str, rc: i32) -> String {
    // SAFETY: mdbx_strerror returns a static NUL-terminated string.
    let m = unsafe { std::ffi::CStr::from_ptr(mx::mdbx_strerror(rc)) };
    format!("libmdbx {what}: {}", m.to_string_lossy())
}

pub(crate) fn mrc(what: &str, rc: i32) -> Result<(), String> {
    if rc == mx::MDBX_SUCCESS {
        Ok(())
    } else {
        Err(mdbx_err(what, rc))
    }
}

#[inline(always)]
pub(crate) fn mval(b: &[u8]) -> mx::MDBX_val {
    mx::MDBX_val {
        iov_base: b.as_ptr() as *mut libc::c_void,
        iov_len: b.len(),
    }
}

/// One libmdbx transaction (aborted on drop unless committed).
pub(crate) struct MdbxTxn {
    pub(crate) t: *mut mx::MDBX_txn,
    dbi: mx::MDBX_dbi,
}

impl MdbxTxn {
    fn begin(env: *mut mx::MDBX_env, dbi: mx::MDBX_dbi, ro: bool) -> Result<MdbxTxn, String> {
        let mut t = std::ptr::null_mut();
        let flags = if ro {
            mx::MDBX_TXN_RDONLY
        } else {
            mx::MDBX_TXN_READWRITE
        };
        // SAFETY: a valid environment; `t` receives the transaction.
        mrc("txn_begin", unsafe {
            mx::mdbx_txn_begin_ex(
                env,
                std::ptr::null_mut(),
                flags,
                &mut t,
                std::ptr::null_mut(),
            )
        })?;
        Ok(MdbxTxn { t, dbi })
    }

    pub(crate) fn commit(mut self) -> Result<(), String> {
        let t = std::mem::replace(&mut self.t, std::ptr::null_mut());
        // SAFETY: a live transaction, consumed here.
        mrc("commit", unsafe {
            mx::mdbx_txn_commit_ex(t, std::ptr::null_mut())
        })
    }
}

impl Drop for MdbxTxn {
    fn drop(&mut self) {
        if !self.t.is_null() {
            // SAFETY: a live transaction, consumed here.
            unsafe { mx::mdbx_txn_abort_ex(self.t, std::ptr::null_mut()) };
        }
    }
}

impl Single for MdbxTxn {
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String> {
        let (key, mut val) = (mval(k), mval(v));
        // SAFETY: a live write transaction; the buffers outlive the call.
        mrc("put", unsafe {
            mx::mdbx_put(self.t, self.dbi, &key, &mut val, mx::MDBX_UPSERT)
        })?;
        Ok(None)
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        let key = mval(k);
        let mut val = mval(&[]);
        // SAFETY: a live transaction; `val` receives a pointer into the map, valid until
        // the transaction ends (it is only read before that).
        let rc = unsafe { mx::mdbx_get(self.t, self.dbi, &key, &mut val) };
        if rc == mx::MDBX_NOTFOUND {
            return Ok(Lookup::Missing);
        }
        mrc("get", rc)?;
        // SAFETY: see above.
        let got = unsafe { std::slice::from_raw_parts(val.iov_base as *const u8, val.iov_len) };
        Ok(check(Some(got), expect))
    }
    #[inline]
    fn remove(&mut self, k: &[u8]) -> Result<bool, String> {
        let key = mval(k);
        // SAFETY: a live write transaction.
        let rc = unsafe { mx::mdbx_del(self.t, self.dbi, &key, std::ptr::null()) };
        if rc == mx::MDBX_NOTFOUND {
            return Ok(false);
        }
        mrc("del", rc)?;
        Ok(true)
    }
}

/// Sets libmdbx's log level to errors only (its notices, e.g. at each fork, go to stderr).
pub fn quiet() {
    // SAFETY: sets the library's log level; the default logger is kept.
    unsafe { mx::mdbx_setup_debug(mx::MDBX_LOG_ERROR, mx::MDBX_DBG_DONTCHANGE, None) };
}

impl MdbxKv {
    /// Opens (creating if needed) the environment in `dir`, WRITEMAP | UTTERLY_NOSYNC.
    pub fn open(dir: &Path, n: usize, batch: usize) -> Result<MdbxKv, String> {
        MdbxKv::open_flags(dir, n, batch, mx::MDBX_WRITEMAP | mx::MDBX_UTTERLY_NOSYNC)
    }

    /// Opens (creating if needed) the environment in `dir` with environment `flags`.
    pub fn open_flags(
        dir: &Path,
        n: usize,
        batch: usize,
        flags: mx::MDBX_env_flags,
    ) -> Result<MdbxKv, String> {
        // 4x LMDB's bound: with two writer processes libmdbx's file grew to ~550 B/entry
        // in our runs (freed pages not reused), so the smaller bound ended in
        // MDBX_MAP_FULL. The file is sparse: only used pages count.
        MdbxKv::open_sized(dir, 4 * map_size(n), batch, flags)
    }

    /// Opens (creating if needed) the environment in `dir`, at most `upper` bytes, with
    /// environment `flags`.
    pub fn open_sized(
        dir: &Path,
        upper: usize,
        batch: usize,
        flags: mx::MDBX_env_flags,
    ) -> Result<MdbxKv, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cpath = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|e| e.to_string())?;
        quiet();
        let mut env = std::ptr::null_mut();
        // SAFETY: plain libmdbx calls on the environment created here; on failure it is
        // closed before returning.
        unsafe {
            mrc("env_create", mx::mdbx_env_create(&mut env))?;
            let r = (|| {
                mrc(
                    "set_geometry",
                    mx::mdbx_env_set_geometry(env, -1, -1, upper as isize, 64 << 20, -1, -1),
                )?;
                mrc(
                    "set_option",
                    mx::mdbx_env_set_option(env, mx::MDBX_opt_max_readers, 126),
                )?;
                mrc(
                    "env_open",
                    mx::mdbx_env_open(env, cpath.as_ptr(), flags, 0o644),
                )
            })();
            if let Err(e) = r {
                mx::mdbx_env_close_ex(env, true);
                return Err(e);
            }
        }
        let mut kv = MdbxKv { env, dbi: 0, batch };
        let t = MdbxTxn::begin(env, 0, false)?;
        // SAFETY: a live write transaction; the unnamed table always exists.
        mrc("dbi_open", unsafe {
            mx::mdbx_dbi_open(t.t, std::ptr::null(), mx::MDBX_DB_DEFAULTS, &mut kv.dbi)
        })?;
        t.commit()?;
        Ok(kv)
    }

    /// libmdbx's version.
    pub fn version() -> String {
        // SAFETY: a static struct exported by the library.
        let v = unsafe { &mx::mdbx_version };
        format!("{}.{}.{}", v.major, v.minor, v.patch)
    }

    pub(crate) fn txn(&self, ro: bool) -> Result<MdbxTxn, String> {
        MdbxTxn::begin(self.env, self.dbi, ro)
    }
}

impl Drop for MdbxKv {
    fn drop(&mut self) {
        // SAFETY: the environment is ours and no transaction is live.
        unsafe { mx::mdbx_env_close_ex(self.env, true) };
    }
}

impl Single for MdbxKv {
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<Option<bool>, String> {
        let mut t = self.txn(false)?;
        t.put(k, v)?;
        t.commit()?;
        Ok(None)
    }
    #[inline]
    fn get(&mut self, k: &[u8], expect: &[u8]) -> Result<Lookup, String> {
        self.txn(true)?.get(k, expect)
    }
    #[inline]
    fn remove(&mut self, k: &[u8]) -> Result<bool, String> {
        let mut t = self.txn(false)?;
        let r = t.remove(k)?;
        t.commit()?;
        Ok(r)
    }
}

impl Kv for MdbxKv {
    fn run(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        if self.batch <= 1 {
            return run_single(self, phase, ops, c);
        }
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for chunk in ops.chunks(self.batch) {
            let (reads, writes) = batch_split(phase, chunk, &mut reads, &mut writes);
            if !reads.is_empty() {
                let mut t = self.txn(true)?;
                run_single(&mut t, phase, reads, c)?;
            }
            if !writes.is_empty() {
                let mut t = self.txn(false)?;
                run_single(&mut t, phase, writes, c)?;
                t.commit()?;
            }
        }
        Ok(())
    }
    fn bytes(&mut self) -> Result<u64, String> {
        // SAFETY: zeroed plain-data structs filled by libmdbx.
        let mut info: mx::MDBX_envinfo = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut st: mx::MDBX_stat = unsafe { std::mem::zeroed() };
        // SAFETY: a live environment and correctly sized output structs.
        unsafe {
            mrc(
                "env_info",
                mx::mdbx_env_info_ex(
                    self.env,
                    std::ptr::null(),
                    &mut info,
                    std::mem::size_of_val(&info),
                ),
            )?;
            mrc(
                "env_stat",
                mx::mdbx_env_stat_ex(
                    self.env,
                    std::ptr::null(),
                    &mut st,
                    std::mem::size_of_val(&st),
                ),
            )?;
        }
        Ok((info.mi_last_pgno + 1) * st.ms_psize as u64)
    }
}

// ---------------------------------------------------------------------------------------
// Redis (the real server, over a Unix socket, with a minimal RESP client)

/// A minimal RESP2 client on a Unix socket.
pub struct Resp {
    r: BufReader<UnixStream>,
    w: BufWriter<UnixStream>,
    line: Vec<u8>,
}

/// A reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and other simple strings.
    Status(String),
    /// `:n`.
    Int(i64),
    /// `$n` bulk string, or `$-1` (None).
    Bulk(Option<Vec<u8>>),
    /// `-ERR …`.
    Error(String),
    /// `*n`: an array of `n` replies, which follow (read each with [`Resp::read_into`]).
    Array(i64),
}

impl Resp {
    /// Connects to the server's socket.
    pub fn connect(sock: &Path) -> std::io::Result<Resp> {
        let s = UnixStream::connect(sock)?;
        Ok(Resp {
            r: BufReader::with_capacity(1 << 16, s.try_clone()?),
            w: BufWriter::with_capacity(1 << 16, s),
            line: Vec::with_capacity(64),
        })
    }

    /// Queues one command (sent at the next [`Resp::flush`]).
    pub fn send(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        write!(self.w, "*{}\r\n", args.len())?;
        for a in args {
            write!(self.w, "${}\r\n", a.len())?;
            self.w.write_all(a)?;
            self.w.write_all(b"\r\n")?;
        }
        Ok(())
    }

    /// Sends what is queued.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }

    /// Reads one reply into `bulk` (for bulk strings; cleared first).
    pub fn read_into(&mut self, bulk: &mut Vec<u8>) -> std::io::Result<Reply> {
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
        self.line.clear();
        self.r.read_until(b'\n', &mut self.line)?;
        if self.line.len() < 3 {
            return Err(bad("connection closed"));
        }
        let body = &self.line[1..self.line.len() - 2];
        let text = || String::from_utf8_lossy(body).into_owned();
        let num = || -> std::io::Result<i64> {
            std::str::from_utf8(body)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("bad number"))
        };
        match self.line[0] {
            b'+' => Ok(Reply::Status(text())),
            b'-' => Ok(Reply::Error(text())),
            b':' => Ok(Reply::Int(num()?)),
            b'*' => Ok(Reply::Array(num()?)),
            b'$' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                bulk.clear();
                bulk.resize(n as usize + 2, 0);
                self.r.read_exact(bulk)?;
                bulk.truncate(n as usize);
                Ok(Reply::Bulk(Some(Vec::new())))
            }
            _ => Err(bad("unexpected reply type")),
        }
    }

    /// Sends one command and reads its reply (bulk replies are returned whole).
    pub fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        self.send(args)?;
        self.flush()?;
        let mut b = Vec::new();
        match self.read_into(&mut b)? {
            Reply::Bulk(Some(_)) => Ok(Reply::Bulk(Some(b))),
            r => Ok(r),
        }
    }

    /// A field of `INFO memory` (e.g. `used_memory`).
    pub fn info_memory(&mut self, field: &str) -> Result<u64, String> {
        match self
            .call(&[b"INFO", b"memory"])
            .map_err(|e| e.to_string())?
        {
            Reply::Bulk(Some(b)) => {
                let s = String::from_utf8_lossy(&b);
                s.lines()
                    .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_owned))
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| format!("INFO memory has no {field}"))
            }
            r => Err(format!("INFO memory: {r:?}")),
        }
    }
}

/// Redis: SET / GET / DEL, unpipelined (`pipeline` 1) or `pipeline` commands per round trip.
pub struct RedisKv {
    c: Resp,
    pipeline: usize,
    bulk: Vec<u8>,
    baseline: u64,
}

impl RedisKv {
    /// Connects; remembers `used_memory` now as the baseline for [`Kv::bytes`].
    pub fn open(sock: &Path, pipeline: usize) -> Result<RedisKv, String> {
        let mut c = Resp::connect(sock).map_err(|e| format!("Redis {}: {e}", sock.display()))?;
        let baseline = c.info_memory("used_memory")?;
        Ok(RedisKv {
            c,
            pipeline: pipeline.max(1),
            bulk: Vec::with_capacity(64),
            baseline,
        })
    }

    fn reply(&mut self) -> Result<Reply, String> {
        self.c
            .read_into(&mut self.bulk)
            .map_err(|e| format!("Redis: {e}"))
    }

    fn queue(&mut self, phase: Phase, op: &Op) -> Result<(), String> {
        let (k, v) = (&op.key[..], &op.val[..]);
        let r = match phase {
            Phase::Put => self.c.send(&[b"SET", k, v]),
            Phase::Get => self.c.send(&[b"GET", k]),
            Phase::Mix if op.code & REMOVE_PUT != 0 => self
                .c
                .send(&[b"DEL", k])
                .and_then(|_| self.c.send(&[b"SET", k, v])),
            Phase::Mix => self.c.send(&[b"GET", k]),
            Phase::Remove => self.c.send(&[b"DEL", k]),
        };
        r.map_err(|e| format!("Redis: {e}"))
    }

    fn expect_ok(&mut self, c: &mut Counts, what: &str, k: &[u8]) -> Result<(), String> {
        match self.reply()? {
            Reply::Status(s) if s == "OK" => {}
            r => c.error(|| format!("{what} {}: {r:?}", key_str(k))),
        }
        Ok(())
    }

    fn expect_del(&mut self, c: &mut Counts, what: &str, k: &[u8]) -> Result<(), String> {
        match self.reply()? {
            Reply::Int(1) => {}
            r => c.error(|| format!("{what} {}: {r:?}", key_str(k))),
        }
        Ok(())
    }

    fn collect(&mut self, phase: Phase, op: &Op, c: &mut Counts) -> Result<(), String> {
        let (k, v) = (&op.key[..], &op.val[..]);
        match phase {
            Phase::Put => {
                self.expect_ok(c, "SET", k)?;
                c.ops += 1;
            }
            Phase::Remove => {
                self.expect_del(c, "DEL", k)?;
                c.ops += 1;
            }
            Phase::Mix if op.code & REMOVE_PUT != 0 => {
                self.expect_del(c, "MIX DEL", k)?;
                self.expect_ok(c, "MIX SET", k)?;
                c.ops += 2;
            }
            Phase::Get | Phase::Mix => {
                let r = self.reply()?;
                let got = match r {
                    Reply::Bulk(Some(_)) => Some(&self.bulk[..]),
                    Reply::Bulk(None) => None,
                    r => return Err(format!("GET {}: {r:?}", key_str(k))),
                };
                match (check(got, v), phase) {
                    (Lookup::Ok, _) => {}
                    (Lookup::Missing, Phase::Mix) => c.misses += 1,
                    (r, _) => c.error(|| format!("{} {}: {r:?}", phase.name(), key_str(k))),
                }
                c.ops += 1;
            }
        }
        Ok(())
    }

    fn run_pipelined(
        &mut self,
        phase: Phase,
        ops: &[Op],
        c: &mut Counts,
        per: usize,
    ) -> Result<(), String> {
        for chunk in ops.chunks(per) {
            for op in chunk {
                self.queue(phase, op)?;
            }
            self.c.flush().map_err(|e| format!("Redis: {e}"))?;
            for op in chunk {
                self.collect(phase, op, c)?;
            }
        }
        Ok(())
    }
}

impl Kv for RedisKv {
    fn run(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        let per = self.pipeline;
        self.run_pipelined(phase, ops, c, per)
    }
    fn fill(&mut self, phase: Phase, ops: &[Op], c: &mut Counts) -> Result<(), String> {
        self.run_pipelined(phase, ops, c, 1000)
    }
    fn bytes(&mut self) -> Result<u64, String> {
        Ok(self
            .c
            .info_memory("used_memory")?
            .saturating_sub(self.baseline))
    }
}

/// A `redis-server` the suite started (stopped on drop).
pub struct RedisServer {
    child: std::process::Child,
    /// Its Unix socket.
    pub sock: PathBuf,
    dir: PathBuf,
    /// `redis-server --version`.
    pub version: String,
}

impl RedisServer {
    /// Starts `redis-server` on a Unix socket in a fresh directory under `base`, without
    /// persistence; waits until it answers PING.
    pub fn start(base: &Path) -> Result<RedisServer, String> {
        let version = std::process::Command::new("redis-server")
            .arg("--version")
            .output()
            .map_err(|e| format!("redis-server not found ({e}); scripts/compare.sh installs it"))?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let dir = base.join("redis");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let sock = dir.join("redis.sock");
        let child = std::process::Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&sock)
            .args([
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--daemonize", "no", "--loglevel", "warning", "--dir"])
            .arg(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        let mut s = RedisServer {
            child,
            sock,
            dir,
            version,
        };
        let t0 = std::time::Instant::now();
        loop {
            if let Ok(mut c) = Resp::connect(&s.sock) {
                if let Ok(Reply::Status(p)) = c.call(&[b"PING"]) {
                    if p == "PONG" {
                        return Ok(s);
                    }
                }
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!("redis-server exited at start ({st})"));
            }
            if t0.elapsed().as_secs() > 10 {
                return Err("redis-server did not answer within 10 s".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Empties the server (between runs).
    pub fn flush_all(&self) -> Result<(), String> {
        let mut c = Resp::connect(&self.sock).map_err(|e| e.to_string())?;
        match c.call(&[b"FLUSHALL"]).map_err(|e| e.to_string())? {
            Reply::Status(_) => Ok(()),
            r => Err(format!("FLUSHALL: {r:?}")),
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Ok(mut c) = Resp::connect(&self.sock) {
            let _ = c.call(&[b"SHUTDOWN", b"NOSAVE"]);
        }
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_secs() < 5 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_reads_never_share_a_write_transaction() {
        let ops = |codes: &[u32]| codes.iter().map(|&c| Op::new(c)).collect::<Vec<Op>>();
        let chunk = ops(&[5, 7 | REMOVE_PUT, 9, 11, 13 | REMOVE_PUT]);
        let (mut r, mut w) = (Vec::new(), Vec::new());
        let (reads, writes) = batch_split(Phase::Mix, &chunk, &mut r, &mut w);
        assert_eq!(reads, ops(&[5, 9, 11]));
        assert_eq!(writes, ops(&[7 | REMOVE_PUT, 13 | REMOVE_PUT]));
        assert_eq!(&writes[0].key, b"key:000000000007");
        let (mut r, mut w) = (Vec::new(), Vec::new());
        let (reads, writes) = batch_split(Phase::Get, &chunk[..1], &mut r, &mut w);
        assert_eq!((reads, writes), (&chunk[..1], &[][..]));
        let two = ops(&[1, 2]);
        for phase in [Phase::Put, Phase::Remove] {
            let (mut r, mut w) = (Vec::new(), Vec::new());
            let (reads, writes) = batch_split(phase, &two, &mut r, &mut w);
            assert_eq!((reads, writes), (&[][..], &two[..]));
        }
    }
}
