//! `shoal-compare --kind txn`: 2-key transfers between accounts, Shoal's multi-key
//! transactions against libmdbx and LMDB write transactions and Redis `MULTI`/`EXEC` and
//! Lua scripts, in one run.
//!
//! Every row runs on a fresh store loaded with the same accounts, in forked worker
//! processes (as the hash-map suite), each with its transfers laid out before the clock
//! starts. After each row the accounts are summed: transfers move money, so the sum must be
//! the initial one, whatever the process count.

use crate::peers::{he, mrc, mval, LmdbKv, MdbxKv, RedisServer, Reply, Resp, Single};
use crate::report::{fmt_ops, median_spread};
use crate::{
    fork_worker, parse_count, parse_min_secs, proc_cpu_ns, reap, setup_done, share, Worker,
};
use mdbx_sys as mx;
use shoal::{Cond, IntCmp, TxnOp, TxnTarget};
use shoal_bench::{key_val, SplitMix64};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

const HELP: &str = "\
shoal-compare --kind txn: 2-key transfers between random accounts, one atomic transaction
each, in one run: Shoal's transactions (on a fixed-size map and on a variable-size map)
against libmdbx and LMDB write transactions and Redis (MULTI/EXEC and a Lua script, both
pipelined), from 1, 2 and 8 processes.

Accounts are keys 'key:%012d' (16 bytes) with 8-byte integer balances (little-endian i64;
decimal strings in Redis), all starting at --balance. A transfer moves an amount of 1 to 100
from one random account to another: it reads both balances, checks that the source has
at least the amount, and writes both, as one transaction:
  shoal-fixed  a transaction on a fixed-size map (16-byte keys, 8-byte values): condition
               `source >= amount` (integer compare), then two adds
  shoal-var    the same on a variable-size map
  mdbx         libmdbx, one write transaction per transfer (get both, check, put both,
               commit; abort when declined), WRITEMAP | SAFE_NOSYNC (its lazy-write mode:
               Shoal does not fsync either)
  lmdb         LMDB, the same, WRITEMAP | NOSYNC | NOMETASYNC
  redis-multi  Redis MULTI, DECRBY, INCRBY, EXEC, --pipeline transfers per round trip
               (the WATCH-free form: it cannot check the balance, so it never declines)
  redis-lua    Redis EVALSHA of a script that checks the balance and moves the amount,
               --pipeline transfers per round trip
Every process does its own transfers over all the accounts (processes contend on them).
The transfers are repeated in passes until the phase has lasted --min-secs; every row runs
--repeats times on a fresh store, rows interleaved; cells are the median repeat and half
the range of the repeats. After each row the accounts are summed: the sum must equal the
initial sum (and no balance may be negative, except after redis-multi), or the run fails.

Options:
  --accounts N    accounts (default 1M)
  --xfers N       transfers laid out, shared by the processes (default 1M); passes repeat
  --balance B     initial balance of every account (default 1000)
  --systems LIST  among shoal-fixed,shoal-var,mdbx,lmdb,redis-multi,redis-lua (default all)
  --procs LIST    process counts (default 1,2,8)
  --pipeline P    transfers per Redis round trip (default 100)
  --repeats R     (default 3)    --min-secs S (default 2)    --seed S (default 1)
  --dir DIR       (default /dev/shm)
  --md PATH       write the Markdown report there too
  --repro CMD     the command shown in the report";

/// A system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TSys {
    ShoalFixed,
    ShoalVar,
    Mdbx,
    Lmdb,
    RedisMulti,
    RedisLua,
}

const ALL: [TSys; 6] = [
    TSys::ShoalFixed,
    TSys::ShoalVar,
    TSys::Mdbx,
    TSys::Lmdb,
    TSys::RedisMulti,
    TSys::RedisLua,
];

impl TSys {
    fn key(self) -> &'static str {
        match self {
            TSys::ShoalFixed => "shoal-fixed",
            TSys::ShoalVar => "shoal-var",
            TSys::Mdbx => "mdbx",
            TSys::Lmdb => "lmdb",
            TSys::RedisMulti => "redis-multi",
            TSys::RedisLua => "redis-lua",
        }
    }
    fn label(self) -> &'static str {
        match self {
            TSys::ShoalFixed => "Shoal, fixed-size map",
            TSys::ShoalVar => "Shoal, variable-size map",
            TSys::Mdbx => "libmdbx (1 transfer/txn)",
            TSys::Lmdb => "LMDB (1 transfer/txn)",
            TSys::RedisMulti => "Redis MULTI/EXEC, pipelined",
            TSys::RedisLua => "Redis Lua (EVALSHA), pipelined",
        }
    }
    fn redis(self) -> bool {
        matches!(self, TSys::RedisMulti | TSys::RedisLua)
    }
    /// Whether it checks the source's balance (so no balance may end negative).
    fn checks(self) -> bool {
        self != TSys::RedisMulti
    }
}

/// Options of the transaction mode.
#[derive(Clone, Debug)]
struct TArgs {
    accounts: usize,
    xfers: usize,
    balance: i64,
    systems: Vec<TSys>,
    procs: Vec<usize>,
    pipeline: usize,
    repeats: usize,
    min_secs: f64,
    seed: u64,
    dir: PathBuf,
    md: Option<PathBuf>,
    repro: Option<String>,
}

fn parse(args: &[String]) -> Result<TArgs, String> {
    let mut a = TArgs {
        accounts: 1_000_000,
        xfers: 1_000_000,
        balance: 1000,
        systems: ALL.to_vec(),
        procs: vec![1, 2, 8],
        pipeline: 100,
        repeats: 3,
        min_secs: 2.0,
        seed: 1,
        dir: PathBuf::from("/dev/shm"),
        md: None,
        repro: None,
    };
    crate::each_arg(args, HELP, |arg, val| {
        match arg {
            "--accounts" | "--keys" => a.accounts = parse_count(&val()?)?,
            "--xfers" => a.xfers = parse_count(&val()?)?,
            "--balance" => a.balance = parse_count(&val()?)? as i64,
            "--procs" => a.procs = crate::list_of(&val()?, parse_count)?,
            "--pipeline" => a.pipeline = parse_count(&val()?)?.max(1),
            "--repeats" => a.repeats = parse_count(&val()?)?,
            "--seed" => a.seed = parse_count(&val()?)? as u64,
            "--dir" => a.dir = PathBuf::from(val()?),
            "--md" => a.md = Some(PathBuf::from(val()?)),
            "--repro" => a.repro = Some(val()?),
            "--systems" => {
                a.systems = crate::list_of(&val()?, |s| {
                    ALL.into_iter()
                        .find(|x| x.key() == s)
                        .ok_or_else(|| format!("unknown system {s:?}"))
                })?
            }
            "--min-secs" => a.min_secs = parse_min_secs(&val()?)?,
            _ => return Err(format!("unknown argument {arg:?} (see --kind txn --help)")),
        }
        Ok(())
    })?;
    if a.accounts < 2 || a.accounts > 1_000_000_000 {
        return Err("--accounts must be between 2 and 10^9".into());
    }
    if a.xfers == 0 {
        return Err("--xfers must be at least 1".into());
    }
    if !(100..=1_000_000_000_000).contains(&a.balance) {
        return Err("--balance must be between 100 and 10^12".into());
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
// Transfers, laid out before the clock starts.

/// One transfer: `amt` from account `from` to account `to` (distinct), with the amount
/// also in decimal for Redis.
#[derive(Clone, Copy)]
struct Xfer {
    from: [u8; 16],
    to: [u8; 16],
    amt: i64,
    dec: [u8; 3],
    dec_len: u8,
}

impl Xfer {
    fn dec(&self) -> &[u8] {
        &self.dec[..self.dec_len as usize]
    }
}

/// Worker `w` of `p`'s transfers: its share of `total`, between random distinct accounts
/// of `n`, amounts 1 to 100. Each worker draws from its own seed.
fn transfers(a: &TArgs, p: usize, w: usize) -> Vec<Xfer> {
    let n = a.accounts as u64;
    let mut r = SplitMix64(a.seed ^ 0x7866_6572 ^ ((w as u64 + 1) << 40));
    share(a.xfers, p, w)
        .map(|_| {
            let from = r.below(n);
            let to = (from + 1 + r.below(n - 1)) % n;
            let amt = 1 + r.below(100) as i64;
            let s = amt.to_string();
            let mut dec = [0u8; 3];
            dec[..s.len()].copy_from_slice(s.as_bytes());
            Xfer {
                from: key_val(from).0,
                to: key_val(to).0,
                amt,
                dec,
                dec_len: s.len() as u8,
            }
        })
        .collect()
}

/// What a worker counted.
#[derive(Default)]
struct C {
    /// Transfers committed.
    done: u64,
    /// Transfers whose source had too little (nothing written).
    declined: u64,
}

/// One system, as opened by one worker.
trait Bank {
    /// Runs `xs` in order, one transaction each.
    fn run(&mut self, xs: &[Xfer], c: &mut C) -> Result<(), String>;
    /// The sum of the `n` accounts' balances, and how many are negative (a missing
    /// account is an error).
    fn audit(&mut self, n: usize) -> Result<(i128, u64), String>;
}

fn se(e: shoal::Error) -> String {
    e.to_string()
}

fn i64_of(b: &[u8], k: &[u8]) -> Result<i64, String> {
    b.try_into().map(i64::from_le_bytes).map_err(|_| {
        format!(
            "account {} has a {}-byte balance",
            String::from_utf8_lossy(k),
            b.len()
        )
    })
}

fn missing(k: &[u8]) -> String {
    format!("account {} is missing", String::from_utf8_lossy(k))
}

// ---------------------------------------------------------------------------------------
// Shoal

const MAP: &str = "accounts";

/// Shoal: the accounts in a fixed-size map (16-byte keys, 8-byte values) or a variable-size
/// map of the store.
struct ShoalBank {
    store: shoal::Store,
    map: ShoalMap,
}

enum ShoalMap {
    Fixed(shoal::FixedMap),
    Var(shoal::Map),
}

impl ShoalBank {
    fn open(path: &Path, sys: TSys) -> Result<ShoalBank, String> {
        let store = shoal::Store::open_existing(path).map_err(se)?;
        let map = match sys {
            TSys::ShoalFixed => ShoalMap::Fixed(store.fixed_map(MAP, 16, 8).map_err(se)?),
            _ => ShoalMap::Var(store.map(MAP).map_err(se)?),
        };
        Ok(ShoalBank { store, map })
    }

    /// Creates the store and loads the accounts (setup, untimed).
    fn create(path: &Path, sys: TSys, n: usize, balance: i64) -> Result<(), String> {
        let _ = std::fs::remove_file(path);
        drop(shoal::Store::create(path).map_err(se)?);
        let b = ShoalBank::open(path, sys)?;
        let v = balance.to_le_bytes();
        let keys: Vec<[u8; 16]> = (0..n as u64).map(|i| key_val(i).0).collect();
        for chunk in keys.chunks(10_000) {
            let items: Vec<(&[u8], &[u8])> = chunk.iter().map(|k| (&k[..], &v[..])).collect();
            match &b.map {
                ShoalMap::Fixed(m) => m.put_many(&items).map_err(se)?,
                ShoalMap::Var(m) => m.put_many(&items).map_err(se)?,
            }
        }
        Ok(())
    }

    /// One transfer: condition `source >= amount`, then two adds.
    #[inline]
    fn xfer<M: TxnTarget>(store: &shoal::Store, m: &M, x: &Xfer) -> Result<bool, String> {
        let out = store
            .transaction()
            .when(Cond::int(m, &x.from, IntCmp::Ge, x.amt))
            .then(TxnOp::add(m, &x.from, -x.amt))
            .then(TxnOp::add(m, &x.to, x.amt))
            .commit()
            .map_err(se)?;
        Ok(out.succeeded)
    }
}

impl Bank for ShoalBank {
    fn run(&mut self, xs: &[Xfer], c: &mut C) -> Result<(), String> {
        for x in xs {
            let ok = match &self.map {
                ShoalMap::Fixed(m) => ShoalBank::xfer(&self.store, m, x)?,
                ShoalMap::Var(m) => ShoalBank::xfer(&self.store, m, x)?,
            };
            if ok {
                c.done += 1;
            } else {
                c.declined += 1;
            }
        }
        Ok(())
    }
    fn audit(&mut self, n: usize) -> Result<(i128, u64), String> {
        let (mut sum, mut neg) = (0i128, 0u64);
        let mut buf = Vec::with_capacity(8);
        for i in 0..n as u64 {
            let k = key_val(i).0;
            let v = match &self.map {
                ShoalMap::Fixed(m) => {
                    let mut b = [0u8; 8];
                    if !m.get_into(&k, &mut b).map_err(se)? {
                        return Err(missing(&k));
                    }
                    i64::from_le_bytes(b)
                }
                ShoalMap::Var(m) => {
                    if !m.get_into(&k, &mut buf).map_err(se)? {
                        return Err(missing(&k));
                    }
                    i64_of(&buf, &k)?
                }
            };
            sum += v as i128;
            neg += (v < 0) as u64;
        }
        Ok((sum, neg))
    }
}

// ---------------------------------------------------------------------------------------
// LMDB and libmdbx: one write transaction per transfer.

fn lmdb_open(path: &Path, n: usize) -> Result<LmdbKv, String> {
    LmdbKv::open(path, n, 1)
}

fn mdbx_open(path: &Path, n: usize) -> Result<MdbxKv, String> {
    MdbxKv::open_flags(path, n, 1, mx::MDBX_WRITEMAP | mx::MDBX_SAFE_NOSYNC)
}

impl Bank for LmdbKv {
    fn run(&mut self, xs: &[Xfer], c: &mut C) -> Result<(), String> {
        for x in xs {
            let mut t = self.env.write_txn().map_err(he)?;
            let a = match self.db.get(&t, &x.from).map_err(he)? {
                Some(b) => i64_of(b, &x.from)?,
                None => return Err(missing(&x.from)),
            };
            let b = match self.db.get(&t, &x.to).map_err(he)? {
                Some(b) => i64_of(b, &x.to)?,
                None => return Err(missing(&x.to)),
            };
            if a < x.amt {
                // Dropping the transaction aborts it: nothing was written.
                c.declined += 1;
                continue;
            }
            self.db
                .put(&mut t, &x.from, &(a - x.amt).to_le_bytes())
                .map_err(he)?;
            self.db
                .put(&mut t, &x.to, &(b + x.amt).to_le_bytes())
                .map_err(he)?;
            t.commit().map_err(he)?;
            c.done += 1;
        }
        Ok(())
    }
    fn audit(&mut self, n: usize) -> Result<(i128, u64), String> {
        let t = self.env.read_txn().map_err(he)?;
        let (mut sum, mut neg) = (0i128, 0u64);
        for i in 0..n as u64 {
            let k = key_val(i).0;
            let v = match self.db.get(&t, &k).map_err(he)? {
                Some(b) => i64_of(b, &k)?,
                None => return Err(missing(&k)),
            };
            sum += v as i128;
            neg += (v < 0) as u64;
        }
        Ok((sum, neg))
    }
}

/// A balance in a libmdbx transaction.
fn mdbx_get(t: *mut mx::MDBX_txn, dbi: mx::MDBX_dbi, k: &[u8]) -> Result<i64, String> {
    let key = mval(k);
    let mut val = mval(&[]);
    // SAFETY: a live transaction; `val` receives a pointer into the map, read below while
    // the transaction lives.
    let rc = unsafe { mx::mdbx_get(t, dbi, &key, &mut val) };
    if rc == mx::MDBX_NOTFOUND {
        return Err(missing(k));
    }
    mrc("get", rc)?;
    // SAFETY: see above: `iov_len` bytes at `iov_base`, valid until the transaction ends.
    let b = unsafe { std::slice::from_raw_parts(val.iov_base as *const u8, val.iov_len) };
    i64_of(b, k)
}

impl Bank for MdbxKv {
    fn run(&mut self, xs: &[Xfer], c: &mut C) -> Result<(), String> {
        for x in xs {
            let mut t = self.txn(false)?;
            let a = mdbx_get(t.t, self.dbi, &x.from)?;
            let b = mdbx_get(t.t, self.dbi, &x.to)?;
            if a < x.amt {
                // Dropping the transaction aborts it: nothing was written.
                c.declined += 1;
                continue;
            }
            t.put(&x.from, &(a - x.amt).to_le_bytes())?;
            t.put(&x.to, &(b + x.amt).to_le_bytes())?;
            t.commit()?;
            c.done += 1;
        }
        Ok(())
    }
    fn audit(&mut self, n: usize) -> Result<(i128, u64), String> {
        let t = self.txn(true)?;
        let (mut sum, mut neg) = (0i128, 0u64);
        for i in 0..n as u64 {
            let v = mdbx_get(t.t, self.dbi, &key_val(i).0)?;
            sum += v as i128;
            neg += (v < 0) as u64;
        }
        Ok((sum, neg))
    }
}

// ---------------------------------------------------------------------------------------
// Redis

/// The Lua transfer: KEYS[1] source, KEYS[2] destination, ARGV[1] amount; 1 if moved, 0 if
/// the source had too little.
const LUA: &str = "local a = tonumber(ARGV[1]) \
local b = tonumber(redis.call('GET', KEYS[1])) \
if b == nil or b < a then return 0 end \
redis.call('DECRBY', KEYS[1], a) \
redis.call('INCRBY', KEYS[2], a) \
return 1";

struct RedisBank {
    c: Resp,
    pipeline: usize,
    /// The script's SHA1 for EVALSHA; None: MULTI/EXEC.
    sha: Option<Vec<u8>>,
    bulk: Vec<u8>,
}

fn re(e: std::io::Error) -> String {
    format!("Redis: {e}")
}

impl RedisBank {
    fn open(sock: &Path, sys: TSys, pipeline: usize) -> Result<RedisBank, String> {
        let mut c = Resp::connect(sock).map_err(|e| format!("Redis {}: {e}", sock.display()))?;
        let sha = if sys == TSys::RedisLua {
            match c.call(&[b"SCRIPT", b"LOAD", LUA.as_bytes()]).map_err(re)? {
                Reply::Bulk(Some(s)) => Some(s),
                r => return Err(format!("Redis SCRIPT LOAD: {r:?}")),
            }
        } else {
            None
        };
        Ok(RedisBank {
            c,
            pipeline: pipeline.max(1),
            sha,
            bulk: Vec::with_capacity(64),
        })
    }

    /// Sets every account to `balance` (setup, untimed: pipelined SETs).
    fn load(sock: &Path, n: usize, balance: i64) -> Result<(), String> {
        let mut c = Resp::connect(sock).map_err(re)?;
        let v = balance.to_string();
        let mut bulk = Vec::new();
        for chunk in (0..n as u64).collect::<Vec<_>>().chunks(1000) {
            for &i in chunk {
                c.send(&[b"SET", &key_val(i).0, v.as_bytes()]).map_err(re)?;
            }
            c.flush().map_err(re)?;
            for _ in chunk {
                match c.read_into(&mut bulk).map_err(re)? {
                    Reply::Status(s) if s == "OK" => {}
                    r => return Err(format!("Redis SET: {r:?}")),
                }
            }
        }
        Ok(())
    }

    fn reply(&mut self) -> Result<Reply, String> {
        self.c.read_into(&mut self.bulk).map_err(re)
    }

    fn expect(&mut self, what: &str, want: Reply) -> Result<(), String> {
        let r = self.reply()?;
        if r != want {
            return Err(format!("Redis {what}: {r:?}, not {want:?}"));
        }
        Ok(())
    }
}

impl Bank for RedisBank {
    fn run(&mut self, xs: &[Xfer], c: &mut C) -> Result<(), String> {
        for chunk in xs.chunks(self.pipeline) {
            for x in chunk {
                let r = match &self.sha {
                    Some(sha) => self
                        .c
                        .send(&[b"EVALSHA", sha, b"2", &x.from, &x.to, x.dec()]),
                    None => self
                        .c
                        .send(&[b"MULTI"])
                        .and_then(|_| self.c.send(&[b"DECRBY", &x.from, x.dec()]))
                        .and_then(|_| self.c.send(&[b"INCRBY", &x.to, x.dec()]))
                        .and_then(|_| self.c.send(&[b"EXEC"])),
                };
                r.map_err(re)?;
            }
            self.c.flush().map_err(re)?;
            for _ in chunk {
                if self.sha.is_some() {
                    match self.reply()? {
                        Reply::Int(1) => c.done += 1,
                        Reply::Int(0) => c.declined += 1,
                        r => return Err(format!("Redis EVALSHA: {r:?}")),
                    }
                    continue;
                }
                self.expect("MULTI", Reply::Status("OK".into()))?;
                self.expect("DECRBY", Reply::Status("QUEUED".into()))?;
                self.expect("INCRBY", Reply::Status("QUEUED".into()))?;
                self.expect("EXEC", Reply::Array(2))?;
                for what in ["EXEC's DECRBY", "EXEC's INCRBY"] {
                    match self.reply()? {
                        Reply::Int(_) => {}
                        r => return Err(format!("Redis {what}: {r:?}")),
                    }
                }
                c.done += 1;
            }
        }
        Ok(())
    }
    fn audit(&mut self, n: usize) -> Result<(i128, u64), String> {
        let (mut sum, mut neg) = (0i128, 0u64);
        for chunk in (0..n as u64).collect::<Vec<_>>().chunks(1000) {
            for &i in chunk {
                self.c.send(&[b"GET", &key_val(i).0]).map_err(re)?;
            }
            self.c.flush().map_err(re)?;
            for &i in chunk {
                let k = key_val(i).0;
                let v: i64 = match self.reply()? {
                    Reply::Bulk(Some(_)) => std::str::from_utf8(&self.bulk)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("account {}: not a number", i))?,
                    Reply::Bulk(None) => return Err(missing(&k)),
                    r => return Err(format!("Redis GET: {r:?}")),
                };
                sum += v as i128;
                neg += (v < 0) as u64;
            }
        }
        Ok((sum, neg))
    }
}

// ---------------------------------------------------------------------------------------
// Rows, workers, repeats.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    sys: TSys,
    p: usize,
}

/// One row's repeat.
#[derive(Clone, Debug, Default)]
struct Rep {
    /// Transfers committed and declined, over all workers.
    done: u64,
    declined: u64,
    /// Wall time of the slowest worker.
    secs: f64,
    /// CPU time of the workers (and of the Redis server).
    cpu_secs: f64,
    /// The accounts' sum after the row, and how many balances were negative.
    sum: i128,
    negative: u64,
}

impl Rep {
    /// Transfers (committed or declined) per second.
    fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            (self.done + self.declined) as f64 / self.secs
        } else {
            0.0
        }
    }
    fn per_cpu(&self) -> f64 {
        if self.cpu_secs > 0.0 {
            (self.done + self.declined) as f64 / self.cpu_secs
        } else {
            f64::NAN
        }
    }
}

/// What every worker of a row shares.
struct Shared<'a> {
    a: &'a TArgs,
    plan: Plan,
    path: &'a Path,
    sock: Option<&'a Path>,
}

fn open(s: &Shared<'_>) -> Result<Box<dyn Bank>, String> {
    let (a, sys) = (s.a, s.plan.sys);
    Ok(match sys {
        TSys::ShoalFixed | TSys::ShoalVar => Box::new(ShoalBank::open(s.path, sys)?),
        TSys::Mdbx => Box::new(mdbx_open(s.path, a.accounts)?),
        TSys::Lmdb => Box::new(lmdb_open(s.path, a.accounts)?),
        TSys::RedisMulti | TSys::RedisLua => Box::new(RedisBank::open(
            s.sock.ok_or("no Redis server")?,
            sys,
            a.pipeline,
        )?),
    })
}

fn worker(
    s: &Shared<'_>,
    w: usize,
    cmds: &mut BufReader<File>,
    reps: &mut File,
) -> Result<(), String> {
    let a = s.a;
    let mut bank = open(s)?;
    // Laid out before the clock starts, in the order of use.
    let xs = transfers(a, s.plan.p, w);
    // The clock is read between groups of whole pipelines.
    let step = a.pipeline * (1000 / a.pipeline).max(1);
    let io = |e: std::io::Error| e.to_string();
    writeln!(reps, "ready").map_err(io)?;
    let mut line = String::new();
    loop {
        line.clear();
        if cmds.read_line(&mut line).map_err(io)? == 0 {
            return Ok(());
        }
        match line.trim() {
            "exit" => return Ok(()),
            "audit" => {
                let (sum, neg) = bank.audit(a.accounts)?;
                writeln!(reps, "audit {sum} {neg}").map_err(io)?;
            }
            "XFER" => {
                let mut c = C::default();
                let cpu0 = shoal_bench::thread_cpu_ns();
                let t = Instant::now();
                'passes: while !xs.is_empty() {
                    for chunk in xs.chunks(step) {
                        bank.run(chunk, &mut c)?;
                        if t.elapsed().as_secs_f64() >= a.min_secs {
                            break 'passes;
                        }
                    }
                    if a.min_secs == 0.0 {
                        break;
                    }
                }
                let nanos = t.elapsed().as_nanos();
                let cpu = shoal_bench::thread_cpu_ns() - cpu0;
                writeln!(reps, "done {} {} {nanos} {cpu}", c.done, c.declined).map_err(io)?;
            }
            cmd => return Err(format!("bad command {cmd:?}")),
        }
    }
}

fn run_once(
    a: &TArgs,
    plan: Plan,
    base: &Path,
    redis: &Result<RedisServer, String>,
) -> Result<Rep, String> {
    let path = match plan.sys {
        TSys::ShoalFixed | TSys::ShoalVar => base.join(format!("txn-{}.shoal", plan.p)),
        s => base.join(format!("txn-{}-{}", s.key(), plan.p)),
    };
    let (sock, server) = match (plan.sys.redis(), redis) {
        (true, Ok(r)) => {
            r.flush_all()?;
            (Some(r.sock.as_path()), Some(r.pid()))
        }
        (true, Err(e)) => return Err(e.clone()),
        _ => (None, None),
    };
    let sh = Shared {
        a,
        plan,
        path: &path,
        sock,
    };
    let r = drive(&sh, server);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&path);
    r
}

fn drive(s: &Shared<'_>, server: Option<u32>) -> Result<Rep, String> {
    let (a, sys) = (s.a, s.plan.sys);
    // Setup in a child of its own: the parent never opens a store (it forks the workers).
    let setup = fork_worker(&[], |_, reps| {
        match sys {
            TSys::ShoalFixed | TSys::ShoalVar => {
                ShoalBank::create(s.path, sys, a.accounts, a.balance)?
            }
            TSys::Mdbx | TSys::Lmdb => {
                let v = a.balance.to_le_bytes();
                let keys: Vec<[u8; 16]> = (0..a.accounts as u64).map(|i| key_val(i).0).collect();
                if sys == TSys::Mdbx {
                    let m = mdbx_open(s.path, a.accounts)?;
                    for chunk in keys.chunks(10_000) {
                        let mut t = m.txn(false)?;
                        for k in chunk {
                            t.put(k, &v)?;
                        }
                        t.commit()?;
                    }
                } else {
                    let l = lmdb_open(s.path, a.accounts)?;
                    for chunk in keys.chunks(10_000) {
                        let mut t = l.env.write_txn().map_err(he)?;
                        for k in chunk {
                            l.db.put(&mut t, k, &v).map_err(he)?;
                        }
                        t.commit().map_err(he)?;
                    }
                }
            }
            TSys::RedisMulti | TSys::RedisLua => {
                RedisBank::load(s.sock.ok_or("no Redis server")?, a.accounts, a.balance)?
            }
        }
        writeln!(reps, "ready").map_err(|e| e.to_string())
    })?;
    setup_done(setup)?;
    let mut workers: Vec<Worker> = Vec::new();
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
        let mut rep = Rep::default();
        let server0 = server.and_then(proc_cpu_ns);
        for w in workers.iter_mut() {
            w.send("XFER")?;
        }
        for w in workers.iter_mut() {
            let r = w.recv()?;
            let f: Vec<&str> = r.split(' ').collect();
            let num = |i: usize| -> Result<u128, String> {
                f.get(i)
                    .and_then(|x| x.parse().ok())
                    .ok_or_else(|| format!("bad reply {r:?}"))
            };
            if f.first() != Some(&"done") {
                return Err(format!("bad reply {r:?}"));
            }
            rep.done += num(1)? as u64;
            rep.declined += num(2)? as u64;
            rep.secs = rep.secs.max(num(3)? as f64 / 1e9);
            rep.cpu_secs += num(4)? as f64 / 1e9;
        }
        if let Some(pid) = server {
            match (server0, proc_cpu_ns(pid)) {
                (Some(x), Some(y)) => rep.cpu_secs += (y - x) as f64 / 1e9,
                _ => rep.cpu_secs = f64::NAN,
            }
        }
        workers[0].send("audit")?;
        let r = workers[0].recv()?;
        let f: Vec<&str> = r.split(' ').collect();
        match (f.first(), f.get(1).and_then(|x| x.parse().ok()), f.get(2)) {
            (Some(&"audit"), Some(sum), Some(neg)) => {
                rep.sum = sum;
                rep.negative = neg.parse().map_err(|_| format!("bad reply {r:?}"))?;
            }
            _ => return Err(format!("bad reply {r:?}")),
        }
        Ok(rep)
    })();
    reap(workers);
    result
}

/// Runs the transaction mode with the arguments after `--kind txn`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let Some((a, base)) = crate::start(args, parse, |a| &a.dir, "t") else {
        return 2;
    };
    let load_before = crate::report::loadavg();
    let t0 = Instant::now();
    let redis = if a.systems.iter().any(|s| s.redis()) {
        RedisServer::start(&base)
    } else {
        Err("not requested".into())
    };
    if let (Err(e), true) = (&redis, a.systems.iter().any(|s| s.redis())) {
        eprintln!("Redis skipped: {e}");
    }
    let mut plans = Vec::new();
    for &p in &a.procs {
        for &sys in &a.systems {
            plans.push(Plan { sys, p });
        }
    }
    let initial = a.accounts as i128 * a.balance as i128;
    let mut reps: Vec<Vec<Rep>> = vec![Vec::new(); plans.len()];
    let mut failed: Vec<Option<String>> = vec![None; plans.len()];
    // Repeats outermost: a change in the machine's load hits every row alike.
    for rep in 0..a.repeats {
        for (i, plan) in plans.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            eprintln!(
                "{}, {} proc, repeat {} of {}",
                plan.sys.label(),
                plan.p,
                rep + 1,
                a.repeats
            );
            match run_once(&a, *plan, &base, &redis) {
                Ok(r) => {
                    let bad = if r.sum != initial {
                        Some(format!("sum {} after the run, not {initial}", r.sum))
                    } else if plan.sys.checks() && r.negative > 0 {
                        Some(format!("{} negative balances", r.negative))
                    } else {
                        None
                    };
                    eprintln!(
                        "  {:>10.0} transfers/s ({} committed, {} declined in {:.2} s; {:.0} \
                         per CPU-second); sum {} {}",
                        r.rate(),
                        r.done,
                        r.declined,
                        r.secs,
                        r.per_cpu(),
                        r.sum,
                        if bad.is_none() { "= initial" } else { "WRONG" }
                    );
                    if let Some(b) = bad {
                        failed[i] = Some(format!("WRONG: {b}"));
                    }
                    reps[i].push(r);
                }
                Err(e) => {
                    eprintln!("  failed: {e}");
                    failed[i] = Some(format!("failed: {e}"));
                }
            }
        }
    }
    let redis_version = redis.as_ref().ok().map(|r| r.version.clone());
    drop(redis);
    let _ = std::fs::remove_dir_all(&base);
    let load_after = crate::report::loadavg();
    let md = markdown(&Report {
        a: &a,
        plans: &plans,
        reps: &reps,
        failed: &failed,
        load_before,
        load_after,
        secs: t0.elapsed().as_secs_f64(),
        redis_version,
    });
    if let Some(path) = &a.md {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!("shoal-compare: {}: {e}", path.display());
            return 2;
        }
    }
    println!("{md}");
    if failed.iter().any(Option::is_some) {
        eprintln!("shoal-compare: a row failed or its sum was wrong");
        return 1;
    }
    0
}

// ---------------------------------------------------------------------------------------
// The report.

struct Report<'a> {
    a: &'a TArgs,
    plans: &'a [Plan],
    reps: &'a [Vec<Rep>],
    failed: &'a [Option<String>],
    load_before: String,
    load_after: String,
    secs: f64,
    redis_version: Option<String>,
}

/// The median of `f` over the repeats (the lower one for an even count), and half their
/// range over it.
fn median(reps: &[Rep], f: impl Fn(&Rep) -> f64) -> Option<(f64, f64)> {
    median_spread(reps.iter().map(f).filter(|x| x.is_finite()).collect())
}

/// The targets: (peer, process count or None for every count, Shoal / peer at
/// least).
const TARGETS: [(TSys, Option<usize>, f64); 2] =
    [(TSys::Mdbx, Some(2), 5.0), (TSys::RedisMulti, None, 2.0)];

fn markdown(r: &Report<'_>) -> String {
    use std::fmt::Write as _;
    let a = r.a;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# 2-key transfers: Shoal transactions against libmdbx, LMDB and Redis\n"
    );
    let _ = writeln!(s, "- date: {}", crate::report::date_utc());
    let _ = writeln!(s, "- commit: {}", crate::report::commit());
    let _ = writeln!(
        s,
        "- command: `{}`",
        a.repro
            .clone()
            .unwrap_or_else(|| "shoal-compare --kind txn".into())
    );
    let _ = writeln!(
        s,
        "- machine: {} cores; load average before: {}, after: {}; run of {:.0} s",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        r.load_before,
        r.load_after,
        r.secs
    );
    let _ = writeln!(
        s,
        "- peers: libmdbx {} (WRITEMAP | SAFE_NOSYNC), {} (WRITEMAP | NOSYNC | NOMETASYNC), {}",
        MdbxKv::version(),
        LmdbKv::version(),
        r.redis_version.as_deref().unwrap_or("Redis not run")
    );
    let _ = writeln!(
        s,
        "- workload: {} accounts (`key:%012d`, 8-byte balances, each {} at the start); \
         {} transfers laid out before timing, shared by the processes, each of 1 to 100 \
         between two random distinct accounts; passes repeated for at least {} s; {} \
         repeats per row on a fresh store, rows interleaved; cells are the median repeat \
         ± half the range of the repeats",
        a.accounts, a.balance, a.xfers, a.min_secs, a.repeats
    );
    let _ = writeln!(
        s,
        "- one transfer = one transaction: Shoal `Store::transaction()` with the condition \
         `Cond::int(source, Ge, amount)` and two `TxnOp::add`; libmdbx and LMDB one write \
         transaction per transfer (get both, check, put both, commit; abort when declined); \
         Redis `MULTI`, `DECRBY`, `INCRBY`, `EXEC` ({p} transfers per round trip; it cannot \
         check the balance, so it never declines) and `EVALSHA` of a Lua script that checks \
         and moves ({p} per round trip)",
        p = a.pipeline
    );
    let _ = writeln!(
        s,
        "- a rate counts every transfer, committed or declined (the declined column); per \
         CPU-second divides by the CPU time of the workers (and of the Redis server), a \
         steadier figure on a loaded machine\n"
    );
    let initial = a.accounts as i128 * a.balance as i128;
    let find = |sys: TSys, p: usize| {
        r.plans
            .iter()
            .position(|pl| pl.sys == sys && pl.p == p)
            .filter(|&i| r.failed[i].is_none() && !r.reps[i].is_empty())
    };
    let shoals = [TSys::ShoalFixed, TSys::ShoalVar];
    for &p in &a.procs {
        let _ = writeln!(s, "## {p} process{}\n", if p == 1 { "" } else { "es" });
        let _ = writeln!(
            s,
            "| system | transfers/s | per CPU-second | declined | sum after | Shoal fixed / it | Shoal variable / it |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---|---:|---:|");
        for (i, pl) in r.plans.iter().enumerate() {
            if pl.p != p {
                continue;
            }
            let _ = write!(s, "| {} |", pl.sys.label());
            if let Some(e) = &r.failed[i] {
                let _ = writeln!(s, " {e} | | | | | |");
                continue;
            }
            let reps = &r.reps[i];
            let (m, sp) = median(reps, Rep::rate).unwrap_or((0.0, 0.0));
            let cpu = median(reps, Rep::per_cpu)
                .map(|(c, _)| fmt_ops(c))
                .unwrap_or_else(|| "?".into());
            let declined: u64 = reps.iter().map(|x| x.declined).sum();
            let total: u64 = reps.iter().map(|x| x.done + x.declined).sum();
            let sums_ok = reps.iter().all(|x| x.sum == initial);
            let _ = write!(
                s,
                " {} ±{:.0}% | {cpu} | {:.3}% | {} |",
                fmt_ops(m),
                sp * 100.0,
                100.0 * declined as f64 / total.max(1) as f64,
                if sums_ok {
                    format!("{initial} in each repeat")
                } else {
                    "WRONG".into()
                }
            );
            for sh in shoals {
                match (find(sh, p), median(reps, Rep::rate)) {
                    (Some(j), Some((q, _))) if q > 0.0 => {
                        let (x, _) = median(&r.reps[j], Rep::rate).unwrap_or((0.0, 0.0));
                        let _ = write!(s, " {:.2}× |", x / q);
                    }
                    _ => {
                        let _ = write!(s, " |");
                    }
                }
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "## The targets (same-run ratios of transfers/s)\n\nMet or not by the ratio of \
         transfers per second (wall clock); the ratio per CPU-second is in brackets.\n"
    );
    let _ = writeln!(s, "| target | procs | Shoal fixed | Shoal variable |");
    let _ = writeln!(s, "|---|---:|---|---|");
    for (peer, at, want) in TARGETS {
        for &p in &a.procs {
            if at.is_some_and(|x| x != p) {
                continue;
            }
            let _ = write!(s, "| ≥ {want}× {} | {p} |", peer.label());
            for sh in shoals {
                match (find(sh, p), find(peer, p)) {
                    (Some(x), Some(y)) => {
                        let ratio = |f: fn(&Rep) -> f64| {
                            let (m, _) = median(&r.reps[x], f).unwrap_or((0.0, 0.0));
                            let (q, _) = median(&r.reps[y], f).unwrap_or((0.0, 0.0));
                            if q > 0.0 {
                                m / q
                            } else {
                                f64::NAN
                            }
                        };
                        let (wall, cpu) = (ratio(Rep::rate), ratio(Rep::per_cpu));
                        let _ = write!(
                            s,
                            " {wall:.2}× ({cpu:.2}× per CPU-second): {} |",
                            if wall >= want { "met" } else { "not met" }
                        );
                    }
                    _ => {
                        let _ = write!(s, " not run |");
                    }
                }
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(s);
    if r.failed.iter().all(Option::is_none) {
        let _ = writeln!(
            s,
            "Every row's account sum was {initial} after every repeat, and no balance was \
             negative after a system that checks the balance."
        );
    } else {
        let _ = writeln!(s, "FAILURES:\n");
        for (pl, f) in r.plans.iter().zip(r.failed) {
            if let Some(f) = f {
                let _ = writeln!(s, "- {}, {} proc: {f}", pl.sys.label(), pl.p);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_are_between_distinct_accounts_and_differ_by_worker() {
        let mut a = parse(&[]).unwrap();
        a.accounts = 3;
        a.xfers = 3000;
        let x0 = transfers(&a, 2, 0);
        let x1 = transfers(&a, 2, 1);
        assert_eq!(x0.len() + x1.len(), 3000);
        for x in x0.iter().chain(&x1) {
            assert_ne!(x.from, x.to);
            assert!((1..=100).contains(&x.amt));
            assert_eq!(std::str::from_utf8(x.dec()).unwrap(), x.amt.to_string());
            assert!(x.from <= key_val(2).0 && x.to <= key_val(2).0);
        }
        assert!(x0.iter().zip(&x1).any(|(p, q)| p.from != q.from));
    }

    #[test]
    fn medians_and_spreads() {
        let rep = |secs: f64| Rep {
            done: 100,
            secs,
            ..Rep::default()
        };
        let (m, sp) = median(&[rep(1.0), rep(2.0), rep(0.5)], Rep::rate).unwrap();
        assert_eq!(m, 100.0);
        assert_eq!(sp, (200.0 - 50.0) / 2.0 / 100.0);
    }
}
