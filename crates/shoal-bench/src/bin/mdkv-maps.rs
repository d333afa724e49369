//! `mdkv-maps`: the Rust maps beside `shoal bench --format mdtest` in bench/mdkv/run.sh, run
//! as mem_meta_kv_benchmark runs its maps: `hashbrown` (one map per thread, as that
//! benchmark's maps are private) and `dashmap` (one map shared by all threads), both with
//! foldhash, keys `Box<[u8]>` and `i32` values.
//!
//! ```text
//! mdkv-maps --map hashbrown|dashmap --threads N --keys TOTAL --keys-pattern seq|rand
//!           [--pin START] [--rounds R]
//! ```
//!
//! Keys, shares and phases are those of `shoal bench` (crates/shoal-cli/src/benchkeys.rs,
//! whose test vectors this file's tests repeat): thread w owns keys w, w + N, ...; PUT, GET
//! in insertion order, GET_RAND in a random order, DEL; in the shared map a thread reads the
//! next thread's keys, in a private map its own. Keys are made from their index inside the
//! timed loops. The report in the benchmark's layout goes to stderr, one JSON object to
//! stdout (the same fields as bench/mdkv/maps.cc's).

use dashmap::DashMap;
use foldhash::fast::RandomState;
use std::sync::Barrier;
use std::time::Instant;

type Hb = hashbrown::HashMap<Box<[u8]>, i32, RandomState>;
type Dm = DashMap<Box<[u8]>, i32, RandomState>;

const M1: u64 = 0x9e37_79b9_7f4a_7c15;
const M2: u64 = 0xbf58_476d_1ce4_e5b9;
const KEY_SEED: u64 = 0x5348_4f41_4c4b_4559;
const ORDER_SEED: u64 = 0x4f52_4445_5221_2121;

/// A permutation of `0..n` computed per index (as `Perm` in benchkeys.rs).
#[derive(Clone, Copy)]
struct Perm {
    n: u64,
    mask: u64,
    shift: u32,
    seed: u64,
}

impl Perm {
    fn new(n: u64, seed: u64) -> Perm {
        let mask = n.max(1).next_power_of_two() - 1;
        Perm {
            n,
            mask,
            shift: mask.count_ones().div_ceil(2).max(1),
            seed,
        }
    }

    fn get(&self, mut x: u64) -> u64 {
        loop {
            x = x.wrapping_mul(M1).wrapping_add(self.seed) & self.mask;
            x ^= x >> self.shift;
            x = x.wrapping_mul(M2) & self.mask;
            x ^= x >> self.shift;
            x = x.wrapping_mul(M1) & self.mask;
            if x < self.n {
                return x;
            }
        }
    }
}

fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(M2);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn put_dec(out: &mut [u8], mut n: u64) -> usize {
    let mut tmp = [0u8; 20];
    let mut k = tmp.len();
    loop {
        k -= 1;
        tmp[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = tmp.len() - k;
    out[..len].copy_from_slice(&tmp[k..]);
    len
}

#[derive(Clone, Copy)]
struct Gen {
    rand: bool,
    keys: u64,
    perm: Perm,
}

impl Gen {
    fn key(&self, i: u64, buf: &mut [u8; 64]) -> usize {
        let (a, b) = if self.rand {
            (self.perm.get(i), mix64(i ^ KEY_SEED) % self.keys)
        } else {
            (i / 10_000, i)
        };
        buf[..12].copy_from_slice(b"file.mdtest.");
        let mut k = 12 + put_dec(&mut buf[12..], a);
        buf[k] = b'.';
        k += 1;
        k + put_dec(&mut buf[k..], b)
    }
}

struct Opts {
    map: String,
    threads: u64,
    keys: u64,
    rand: bool,
    pin: i64,
    rounds: u64,
}

const PHASES: [&str; 4] = ["PUT", "GET", "GET_RAND", "DEL"];

fn rss_bytes() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// One phase of worker `w` on its map: the operations that returned a wrong result.
/// `shared` is the shared map, if there is one, else `private` is the worker's own.
fn phase(o: &Opts, g: &Gen, w: u64, p: usize, shared: Option<&Dm>, private: &mut Hb) -> u64 {
    let n = o.threads;
    let src = if shared.is_some() { (w + 1) % n } else { w };
    let mut kb = [0u8; 64];
    let mut err = 0u64;
    let get = |i: u64, kb: &mut [u8; 64], private: &mut Hb| {
        let l = g.key(i, kb);
        let v = match shared {
            Some(m) => m.get(&kb[..l]).map(|r| *r),
            None => private.get(&kb[..l]).copied(),
        };
        (v != Some(i as i32)) as u64
    };
    match PHASES[p] {
        "PUT" => {
            for i in (w..o.keys).step_by(n as usize) {
                let l = g.key(i, &mut kb);
                let fresh = match shared {
                    Some(m) => m.insert(kb[..l].into(), i as i32).is_none(),
                    None => private.insert(kb[..l].into(), i as i32).is_none(),
                };
                err += !fresh as u64;
            }
        }
        "GET" => {
            for i in (src..o.keys).step_by(n as usize) {
                err += get(i, &mut kb, private);
            }
        }
        "GET_RAND" => {
            let len = if src >= o.keys {
                0
            } else {
                (o.keys - src - 1) / n + 1
            };
            let order = Perm::new(len, ORDER_SEED);
            for j in 0..len {
                err += get(src + n * order.get(j), &mut kb, private);
            }
        }
        _ => {
            for i in (w..o.keys).step_by(n as usize) {
                let l = g.key(i, &mut kb);
                let gone = match shared {
                    Some(m) => m.remove(&kb[..l]).is_some(),
                    None => private.remove(&kb[..l]).is_some(),
                };
                err += !gone as u64;
            }
        }
    }
    err
}

fn run(o: &Opts) -> Result<bool, String> {
    let n = o.threads;
    let g = Gen {
        rand: o.rand,
        keys: o.keys,
        perm: Perm::new(o.keys, KEY_SEED),
    };
    let shared_map: Option<Dm> =
        (o.map == "dashmap").then(|| Dm::with_hasher(RandomState::default()));
    let system = if shared_map.is_some() {
        "dashmap (shared)"
    } else {
        "hashbrown (per thread)"
    };
    let start = Barrier::new(n as usize + 1);
    let end = Barrier::new(n as usize + 1);
    let rss0 = rss_bytes();
    let phases = 4 * o.rounds as usize;
    let mut json = format!(
        "{{\"system\":\"{system}\",\"workers\":{n},\"keys\":{},\"keys_pattern\":\"{}\",\"pin\":{},\"rounds\":{},\"phases\":[",
        o.keys,
        if o.rand { "rand" } else { "seq" },
        o.pin,
        o.rounds
    );
    eprintln!(
        "{system} benchmark, pid {}\n{n} thread(s), start_core {}\nEach thread put, get, delete {} elements, total {} ops",
        std::process::id(),
        o.pin,
        (o.keys - 1) / n + 1,
        o.keys
    );
    let mut mem = 0i64;
    let errors: u64 = std::thread::scope(|s| -> Result<u64, String> {
        let handles: Vec<_> = (0..n)
            .map(|w| {
                let (start, end, g, shared) = (&start, &end, &g, shared_map.as_ref());
                s.spawn(move || -> Result<u64, String> {
                    // Pinning errors are reported after the phases, which must not wait on a
                    // thread that is gone: the thread runs them unpinned.
                    let pinned = if o.pin >= 0 {
                        let core = o.pin as u64 + w;
                        let mut set = rustix::thread::CpuSet::new();
                        set.set(core as usize);
                        rustix::thread::sched_setaffinity(None, &set)
                            .map_err(|e| format!("cannot pin thread {w} to core {core}: {e}"))
                    } else {
                        Ok(())
                    };
                    let mut private = Hb::with_hasher(RandomState::default());
                    let mut err = 0;
                    for p in 0..phases {
                        start.wait();
                        err += phase(o, g, w, p % 4, shared, &mut private);
                        end.wait();
                    }
                    pinned.map(|_| err)
                })
            })
            .collect();
        for p in 0..phases {
            // The clock starts before the barrier: on a busy machine this thread may be
            // scheduled out after it, while the workers run.
            let t0 = Instant::now();
            start.wait();
            end.wait();
            let secs = t0.elapsed().as_secs_f64();
            let mops = o.keys as f64 / secs / 1e6;
            let name = PHASES[p % 4];
            if p % 4 == 0 {
                let cost = rss_bytes() - rss0;
                mem = mem.max(cost);
                let mbs = cost as f64 / secs / 1e6;
                eprintln!(
                    "[PUT] total {mops:.4} Mops, in {secs:.4} s, {mbs:.4} MB/s, cost {:.4} MB\n      per-thread {:.4} Mops, {:.4} MB/s",
                    cost as f64 / 1e6,
                    mops / n as f64,
                    mbs / n as f64
                );
            } else {
                eprintln!(
                    "[{name}] total {mops:.4} Mops, in {secs:.4} s\n      per-thread {:.4} Mops",
                    mops / n as f64
                );
            }
            json.push_str(&format!(
                "{}{{\"phase\":\"{name}\",\"round\":{},\"ops\":{},\"seconds\":{secs:.6}}}",
                if p > 0 { "," } else { "" },
                p / 4,
                o.keys
            ));
        }
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| "a thread panicked".to_string())??;
        }
        Ok(total)
    })?;
    eprintln!(
        "memory: {:.4} MB (VmRSS growth with {} entries), {:.1} bytes per entry",
        mem as f64 / 1e6,
        o.keys,
        mem as f64 / o.keys as f64
    );
    println!(
        "{json}],\"memory_bytes\":{mem},\"entries\":{},\"failed_checks\":{errors}}}",
        o.keys
    );
    if errors > 0 {
        eprintln!("mdkv-maps: {errors} operations returned a wrong result");
    }
    Ok(errors == 0)
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        map: String::new(),
        threads: 1,
        keys: 0,
        rand: false,
        pin: -1,
        rounds: 1,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| format!("missing value after {a}"))?;
        let num = || {
            v.parse::<u64>()
                .map_err(|_| format!("{a} takes a number, not {v:?}"))
        };
        match a.as_str() {
            "--map" => o.map = v.clone(),
            "--threads" => o.threads = num()?,
            "--keys" => o.keys = num()?,
            "--rounds" => o.rounds = num()?,
            "--pin" => {
                o.pin = v
                    .parse::<i64>()
                    .ok()
                    .filter(|&p| p >= -1)
                    .ok_or_else(|| format!("--pin takes a core number or -1, not {v:?}"))?
            }
            "--keys-pattern" => {
                o.rand = match v.as_str() {
                    "seq" => false,
                    "rand" => true,
                    _ => return Err(format!("--keys-pattern is seq or rand, not {v:?}")),
                }
            }
            _ => return Err(format!("unknown option {a}")),
        }
    }
    if o.map != "hashbrown" && o.map != "dashmap" {
        return Err("--map is hashbrown or dashmap".into());
    }
    if !(1..=1024).contains(&o.threads) {
        return Err("--threads is 1 to 1024".into());
    }
    if o.keys < o.threads {
        return Err("--keys must be at least --threads".into());
    }
    if o.rounds == 0 {
        return Err("--rounds is at least 1".into());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get()) as u64;
    if o.pin >= 0 && o.pin as u64 + o.threads > cpus {
        return Err(format!(
            "--pin {} with {} threads needs more than the {cpus} cores of this machine",
            o.pin, o.threads
        ));
    }
    Ok(o)
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(|o| run(&o)) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("mdkv-maps: {e}\nusage: mdkv-maps --map hashbrown|dashmap --threads N --keys TOTAL --keys-pattern seq|rand [--pin START] [--rounds R]");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(g: &Gen, i: u64) -> String {
        let mut b = [0u8; 64];
        let n = g.key(i, &mut b);
        String::from_utf8(b[..n].to_vec()).unwrap()
    }

    /// The vectors of crates/shoal-cli/src/benchkeys.rs: the same keys as `shoal bench`.
    #[test]
    fn keys_match_shoal_bench() {
        let keys = 20_000_000;
        let seq = Gen {
            rand: false,
            keys,
            perm: Perm::new(keys, KEY_SEED),
        };
        assert_eq!(key(&seq, 123_456), "file.mdtest.12.123456");
        let rand = Gen { rand: true, ..seq };
        let got: Vec<String> = [0, 1, 19_999_999].iter().map(|&i| key(&rand, i)).collect();
        assert_eq!(
            got,
            [
                "file.mdtest.11068231.14131662",
                "file.mdtest.6611818.6180956",
                "file.mdtest.12126993.17484513"
            ]
        );
        let p = Perm::new(1000, ORDER_SEED);
        assert_eq!([p.get(0), p.get(1), p.get(999)], [636, 103, 389]);
    }
}
