//! `shoal-features`: the issue-3 feature benchmarks, each a same-run ratio.
//!
//! * get, put (replace), update and remove by UID vs by key, over N keys of a map with
//!   UIDs, in one shuffled order (the writes: passes by key and by UID alternating);
//! * `get_many_with` (batches of 256) vs single gets, same keys, same order;
//! * `put_many` (batches of 1024) vs single puts, replacing the same keys in the same order;
//! * u64 → u64 gets: an inline map (fixed 8+8) vs a variable map vs an in-process
//!   `hashbrown::HashMap<u64, u64>`;
//! * `add` on one hot key, in a variable map (under the key's segment lock) and in an
//!   inline map (fixed 8+8, lock-free): one process vs two processes at once (total ops/s).
//!
//! `cargo run --release -p shoal-bench --bin shoal-features -- --keys 10000000`

use shoal_bench::{mops, Data, Phase, PhaseTime, SchedStat};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Entries handed to one `put_many` call.
const PUT_MANY_BATCH: usize = 1024;

const HELP: &str = "\
shoal-features: get/put/update/remove by UID vs by key, get_many vs get, put_many vs put, hot-key add from 1 and 2 processes.

USAGE: shoal-features [--keys N] [--reps R] [--adds A] [--store PATH]

  --keys N     keys in the map (default 10000000), key:%012d -> val:%012d
  --reps R     repetitions of each timed pass; the best is reported (default 2)
  --adds A     adds per process in the hot-key passes (default 2000000)
  --store PATH store file (default /dev/shm/shoal-features-PID.shoal), removed at the end";

struct Args {
    keys: usize,
    reps: usize,
    adds: u64,
    store: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        keys: 10_000_000,
        reps: 2,
        adds: 2_000_000,
        store: format!("/dev/shm/shoal-features-{}.shoal", std::process::id()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(f) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match f.as_str() {
            "--keys" => a.keys = val("--keys")?.parse().map_err(|e| format!("--keys: {e}"))?,
            "--reps" => a.reps = val("--reps")?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--adds" => a.adds = val("--adds")?.parse().map_err(|e| format!("--adds: {e}"))?,
            "--store" => a.store = val("--store")?,
            "-h" | "--help" => return Err(HELP.into()),
            other => return Err(format!("unknown argument {other:?}\n\n{HELP}")),
        }
    }
    if a.keys == 0 || a.reps == 0 || a.adds == 0 {
        return Err("--keys, --reps and --adds must be positive".into());
    }
    Ok(a)
}

/// Best (fastest) of `reps` timed runs of `f`, which returns a checksum kept alive.
fn best(
    reps: usize,
    ops: usize,
    sched: &mut Option<SchedStat>,
    mut f: impl FnMut() -> Result<u64, String>,
) -> Result<(f64, PhaseTime), String> {
    let mut out = (0.0, PhaseTime::default());
    for _ in 0..reps {
        let p = Phase::start(sched);
        std::hint::black_box(f()?);
        let (d, t) = p.end(sched);
        let r = mops(ops, d);
        if r > out.0 {
            out = (r, t);
        }
    }
    Ok(out)
}

/// The inline (fixed 8+8) map of the hot-key adds, and its hot key.
const HOT_INLINE: &str = "hot-inline";
const HOT_KEY: [u8; 8] = *b"hot\0\0\0\0\0";

/// Child process: `--add-worker PATH N KIND` adds 1 to the hot key N times (KIND `var`:
/// key "hot" of the variable map "hot"; `inline`: the inline map's), after waiting for the
/// parent's "go" key (so two children start together).
fn add_worker(path: &str, n: u64, inline: bool) -> Result<(), String> {
    let s = shoal::Store::open_existing(path).map_err(|e| e.to_string())?;
    let m = s.open_map("hot").map_err(|e| e.to_string())?;
    let fixed = s.fixed_map(HOT_INLINE, 8, 8).map_err(|e| e.to_string())?;
    let start = Instant::now();
    while !m.contains(b"go").map_err(|e| e.to_string())? {
        if start.elapsed() > Duration::from_secs(60) {
            return Err("no go signal within 60 s".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    for _ in 0..n {
        match inline {
            true => fixed.add(&HOT_KEY, 1),
            false => m.add(b"hot", 1),
        }
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs `procs` add workers at once; returns total M adds/s (wall time from go to the
/// last exit).
fn hot_adds(path: &str, procs: usize, n: u64, inline: bool) -> Result<f64, String> {
    let s = shoal::Store::open_existing(path).map_err(|e| e.to_string())?;
    let m = s.map("hot").map_err(|e| e.to_string())?;
    let fixed = s.fixed_map(HOT_INLINE, 8, 8).map_err(|e| e.to_string())?;
    let count = || match inline {
        true => fixed.add(&HOT_KEY, 0),
        false => m.add(b"hot", 0),
    };
    m.remove(b"go").map_err(|e| e.to_string())?;
    let before = count().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut kids = Vec::new();
    for _ in 0..procs {
        kids.push(
            Command::new(&exe)
                .args([
                    "--add-worker",
                    path,
                    &n.to_string(),
                    if inline { "inline" } else { "var" },
                ])
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?,
        );
    }
    // Let them open the store and reach the wait loop.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    m.put(b"go", b"").map_err(|e| e.to_string())?;
    for mut k in kids {
        let st = k.wait().map_err(|e| e.to_string())?;
        if !st.success() {
            return Err(format!("an add worker failed: {st}"));
        }
    }
    let d = t.elapsed();
    let after = count().map_err(|e| e.to_string())?;
    if after - before != (procs as u64 * n) as i64 {
        return Err(format!(
            "lost adds: {} counted, {} made",
            after - before,
            procs as u64 * n
        ));
    }
    Ok(mops(procs * n as usize, d))
}

/// Gets of N u64 keys (values u64) in the shuffled order: from an inline map (a fixed
/// 8+8 map: cells in the index), from a variable map, and from an in-process
/// `hashbrown::HashMap<u64, u64>`. Best of `reps`, M ops/s each.
fn u64_maps(
    s: &shoal::Store,
    n: usize,
    order: &[u32],
    reps: usize,
    sched: &mut Option<SchedStat>,
) -> Result<(f64, f64, f64), String> {
    let e = |e: shoal::Error| e.to_string();
    let key = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let inline = s.fixed_map("u64-inline", 8, 8).map_err(e)?;
    let var = s.map("u64-variable").map_err(e)?;
    let mut hb: hashbrown::HashMap<u64, u64, foldhash::fast::RandomState> =
        hashbrown::HashMap::default();
    for i in 0..n as u64 {
        let k = key(i).to_le_bytes();
        inline.put(&k, &i.to_le_bytes()).map_err(e)?;
        var.put(&k, &i.to_le_bytes()).map_err(e)?;
        hb.insert(key(i), i);
    }
    let mut out = [0u8; 8];
    let (r_inline, _) = best(reps, n, sched, || {
        let mut sum = 0u64;
        for &i in order {
            inline
                .get_into(&key(i as u64).to_le_bytes(), &mut out)
                .map_err(e)?;
            sum = sum.wrapping_add(u64::from_le_bytes(out));
        }
        Ok(sum)
    })?;
    let mut buf = Vec::new();
    let (r_var, _) = best(reps, n, sched, || {
        let mut sum = 0u64;
        for &i in order {
            var.get_into(&key(i as u64).to_le_bytes(), &mut buf)
                .map_err(e)?;
            sum = sum.wrapping_add(buf[0] as u64);
        }
        Ok(sum)
    })?;
    let (r_hb, _) = best(reps, n, sched, || {
        let mut sum = 0u64;
        for &i in order {
            sum = sum.wrapping_add(*hb.get(&key(i as u64)).ok_or("missing key")?);
        }
        Ok(sum)
    })?;
    Ok((r_inline, r_var, r_hb))
}

fn run(a: &Args) -> Result<(), String> {
    let e = |e: shoal::Error| e.to_string();
    let n = a.keys;
    eprintln!("generating {n} keys...");
    let data = Data::generate(n, 1);
    let mut sched = SchedStat::open();
    let s = shoal::Store::create(&a.store).map_err(e)?;
    let m = s
        .map_with(
            "uids",
            &shoal::MapOptions {
                uids: true,
                ..Default::default()
            },
            true,
        )
        .map_err(e)?;
    eprintln!("loading {n} keys into a map with UIDs...");
    let t = Instant::now();
    let mut uids = Vec::with_capacity(n);
    for i in 0..n {
        uids.push(m.put_with_uid(data.key(i), data.val(i)).map_err(e)?.1);
    }
    let load = mops(n, t.elapsed());
    let mut buf = Vec::new();
    eprintln!("get by key / by UID...");
    let (get_key, tk) = best(a.reps, n, &mut sched, || {
        let mut sum = 0u64;
        for &i in &data.order {
            m.get_into(data.key(i as usize), &mut buf).map_err(e)?;
            sum += buf[15] as u64;
        }
        Ok(sum)
    })?;
    let (get_uid, tu) = best(a.reps, n, &mut sched, || {
        let mut sum = 0u64;
        for &i in &data.order {
            m.get_by_uid_into(uids[i as usize], &mut buf).map_err(e)?;
            sum += buf[15] as u64;
        }
        Ok(sum)
    })?;
    eprintln!("get_many...");
    let (get_many, tm) = best(a.reps, n, &mut sched, || {
        let mut sum = 0u64;
        let mut keys: Vec<&[u8]> = Vec::with_capacity(256);
        for chunk in data.order.chunks(256) {
            keys.clear();
            keys.extend(chunk.iter().map(|&i| data.key(i as usize)));
            m.get_many_with(&keys, |_, v| {
                if let Some(v) = v {
                    sum += v[15] as u64;
                }
            })
            .map_err(e)?;
        }
        Ok(sum)
    })?;
    let writes = n.min(2_000_000);
    eprintln!(
        "put, update and remove by key / by UID ({writes} each, {} passes each, interleaved)...",
        a.reps
    );
    // Interleaved passes (key, UID, key, UID...), best of each: one pass of each in a
    // fixed order let the host's drift decide the ratio. Every put and update writes a
    // value of the same length that differs from the current one, so that each one
    // changes bytes (in place, format version 6).
    let mut by = [[0.0f64; 2]; 3]; // [put, update, remove][key, UID]
    let mut put_many = 0.0f64;
    let refill = shoal_bench::shuffled(writes, 2);
    for r in 0..a.reps {
        let v = [b'a' + (2 * r % 26) as u8; 16];
        let (k, _) = best(1, writes, &mut sched, || {
            for &i in &data.order[..writes] {
                m.put(data.key(i as usize), &v).map_err(e)?;
            }
            Ok(0)
        })?;
        let v = [b'A' + (2 * r % 26) as u8; 16];
        let (pm, _) = best(1, writes, &mut sched, || {
            let mut items: Vec<(&[u8], &[u8])> = Vec::with_capacity(PUT_MANY_BATCH);
            for chunk in data.order[..writes].chunks(PUT_MANY_BATCH) {
                items.clear();
                items.extend(chunk.iter().map(|&i| (data.key(i as usize), &v[..])));
                m.put_many(&items).map_err(e)?;
            }
            Ok(0)
        })?;
        put_many = put_many.max(pm);
        let v = [b'b' + (2 * r % 26) as u8; 16];
        let (u, _) = best(1, writes, &mut sched, || {
            for &i in &data.order[..writes] {
                m.put_by_uid(uids[i as usize], &v).map_err(e)?;
            }
            Ok(0)
        })?;
        let (uk, _) = best(1, writes, &mut sched, || {
            for &i in &data.order[..writes] {
                m.update(data.key(i as usize), |old| {
                    old.map(|o| o.iter().map(|b| b ^ 0x20).collect())
                })
                .map_err(e)?;
            }
            Ok(0)
        })?;
        let (uu, _) = best(1, writes, &mut sched, || {
            for &i in &data.order[..writes] {
                m.update_by_uid(uids[i as usize], |old| {
                    Some(old.iter().map(|b| b ^ 0x20).collect())
                })
                .map_err(e)?;
            }
            Ok(0)
        })?;
        // Removes empty the keys; each pass is followed by putting them back (not timed),
        // which hands out new UIDs. They go back in another random order: put back in the
        // passes' order, their records and entries would lie in the order the next passes
        // visit them, and the hardware prefetcher would hide most of their misses.
        let (rk, _) = best(1, writes, &mut sched, || {
            for &i in &data.order[..writes] {
                m.remove(data.key(i as usize)).map_err(e)?;
            }
            Ok(0)
        })?;
        for &j in &refill {
            let i = data.order[j as usize] as usize;
            uids[i] = m.put_with_uid(data.key(i), &v).map_err(e)?.1;
        }
        let (ru, _) = best(1, writes, &mut sched, || {
            for &i in &data.order[..writes] {
                m.remove_by_uid(uids[i as usize]).map_err(e)?;
            }
            Ok(0)
        })?;
        for &j in &refill {
            let i = data.order[j as usize] as usize;
            uids[i] = m.put_with_uid(data.key(i), &v).map_err(e)?.1;
        }
        eprintln!(
            "  pass {r}: M/s by key, by UID: put {k:.2}, {u:.2}; update {uk:.2}, {uu:.2}; remove {rk:.2}, {ru:.2}; put_many {pm:.2}"
        );
        for (b, (x, y)) in by.iter_mut().zip([(k, u), (uk, uu), (rk, ru)]) {
            b[0] = b[0].max(x);
            b[1] = b[1].max(y);
        }
    }
    drop(m);
    // The u64 maps get a fresh store: the removes above left millions of dead records,
    // and cleaning them while the u64 maps load made the variable map's later gets 40%
    // slower (1.85 M/s against 3.14 in one run), a measure of that history, not of the map.
    drop(s);
    shoal::Store::destroy(&a.store).map_err(e)?;
    let s = shoal::Store::create(&a.store).map_err(e)?;
    eprintln!("u64 -> u64: inline map, variable map, hashbrown...");
    let ints = u64_maps(&s, n, &data.order, a.reps, &mut sched)?;
    eprintln!("hot-key add, 1 and 2 processes...");
    let (mut one, mut two, mut one_inline, mut two_inline) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for _ in 0..a.reps {
        one = one.max(hot_adds(&a.store, 1, a.adds, false)?);
        two = two.max(hot_adds(&a.store, 2, a.adds, false)?);
        one_inline = one_inline.max(hot_adds(&a.store, 1, a.adds, true)?);
        two_inline = two_inline.max(hot_adds(&a.store, 2, a.adds, true)?);
    }
    let la = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "N = {n} keys (16-byte keys key:%012d, 16-byte values), best of {} reps; load average {}",
        a.reps,
        la.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!();
    println!("| measure | M ops/s | CPU share | ratio |");
    println!("|---|---|---|---|");
    println!("| load (put_with_uid, N inserts) | {load:.2} | | |");
    println!(
        "| get by key (get_into) | {get_key:.2} | {:.0}% | 1.00 |",
        tk.cpu_share * 100.0
    );
    println!(
        "| get by UID (get_by_uid_into) | {get_uid:.2} | {:.0}% | {:.2}× get by key |",
        tu.cpu_share * 100.0,
        get_uid / get_key
    );
    println!(
        "| get_many_with (256 per call) | {get_many:.2} | {:.0}% | {:.2}× get by key |",
        tm.cpu_share * 100.0,
        get_many / get_key
    );
    for (what, [k, u]) in ["put (replace)", "update", "remove"].iter().zip(by) {
        println!("| {what} by key | {k:.2} | | 1.00 |");
        println!("| {what} by UID | {u:.2} | | {:.2}× by key |", u / k);
    }
    println!(
        "| put_many (replace, {PUT_MANY_BATCH} per call) | {put_many:.2} | | {:.2}× put (replace) by key |",
        put_many / by[0][0]
    );
    let (inl, var, hb) = ints;
    println!(
        "| u64→u64 get, inline map (fixed 8+8) | {inl:.2} | | {:.2}× hashbrown, {:.2}× variable map |",
        inl / hb,
        inl / var
    );
    println!(
        "| u64→u64 get, variable map | {var:.2} | | {:.2}× hashbrown |",
        var / hb
    );
    println!("| u64→u64 get, hashbrown HashMap<u64, u64> (in-process) | {hb:.2} | | 1.00 |");
    println!("| add, one hot key, variable map, 1 process | {one:.2} | | 1.00 |");
    println!(
        "| add, one hot key, variable map, 2 processes (total) | {two:.2} | | {:.2}× 1 process |",
        two / one
    );
    println!("| add, one hot key, inline map, 1 process | {one_inline:.2} | | 1.00 |");
    println!(
        "| add, one hot key, inline map, 2 processes (total) | {two_inline:.2} | | {:.2}× 1 process |",
        two_inline / one_inline
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--add-worker") && args.len() == 5 {
        return match args[3].parse() {
            Ok(n) => match add_worker(&args[2], n, args[4] == "inline") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("add worker: {e}");
                    ExitCode::FAILURE
                }
            },
            Err(e) => {
                eprintln!("add worker: bad count: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = run(&a);
    let _ = shoal::Store::destroy(&a.store);
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal-features: {e}");
            ExitCode::FAILURE
        }
    }
}
