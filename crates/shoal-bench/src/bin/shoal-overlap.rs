//! `shoal-overlap`: why a single Shoal get loses to hashbrown on a large map, measured.
//!
//! A get on 10 M random keys is a chain of cache (and TLB) misses. hashbrown's chain is
//! longer than Shoal's (control bytes, slot, key on the heap, value on the heap, against
//! bucket and record), yet it gets more per second: its get is so short (~100
//! instructions) that the core's reorder window holds the next gets while one waits, so
//! the misses of consecutive gets overlap. This tool shows it by lengthening hashbrown's
//! get: after each one it runs `pad` extra instructions that depend on nothing (`mov eax,
//! 1`), which cost a few cycles of execution but take room in the window. If the argument
//! holds, hashbrown's rate falls towards Shoal's as `pad` grows, and below it once its
//! gets no longer overlap. Shoal's single get (about 480 instructions, callgrind) is
//! padded the same way in the same run, interleaved: where its rate does not fall with
//! the padding, its gets already do not overlap, and only a get short enough to bring
//! the next one's first miss into the window would be faster.
//!
//! It ends by measuring what a miss costs on this machine: a pointer chase through one
//! random cycle over the lines of a buffer as large as the store's file, one load after
//! another and then four chains at once. Two misses in series per get at that latency
//! bound what a single get can do when consecutive gets do not overlap.
//!
//! `cargo run --release -p shoal-bench --bin shoal-overlap -- --keys 10000000`

use shoal_bench::{mops, Data};
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

type HbMap = hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>;

const HELP: &str = "\
shoal-overlap: hashbrown and Shoal gets, each lengthened by N independent instructions.

USAGE: shoal-overlap [--keys N] [--reps R]

  --keys N   keys (default 10000000), key:%012d -> val:%012d, gets in one shuffled order
  --reps R   passes of each kind; the best is reported (default 2)

x86_64 only (the padding is inline assembly). The store is /dev/shm/shoal-overlap-PID.shoal,
removed at the end.";

/// The extra instructions per hashbrown get that the tool tries.
const PADS: [u32; 7] = [0, 25, 50, 100, 150, 300, 600];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal-overlap: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let (mut keys, mut reps) = (10_000_000usize, 2usize);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            it.next()
                .ok_or_else(|| format!("{name} needs a value"))?
                .replace('_', "")
                .parse()
                .map_err(|e| format!("{name}: {e}"))
        };
        match a.as_str() {
            "--keys" => keys = num("--keys")?,
            "--reps" => reps = num("--reps")?.max(1),
            "-h" | "--help" => {
                println!("{HELP}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if !cfg!(target_arch = "x86_64") {
        return Err("the padding is x86_64 inline assembly; not built for this target".into());
    }
    if keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    let data = Data::generate(keys, 1);
    let path = format!("/dev/shm/shoal-overlap-{}.shoal", std::process::id());
    let store = shoal::Store::create(&path).map_err(|e| format!("create {path}: {e}"))?;
    let result = measure(&store, &data, reps);
    drop(store);
    let _ = shoal::Store::destroy(&path);
    result
}

fn measure(store: &shoal::Store, data: &Data, reps: usize) -> Result<(), String> {
    let n = data.len();
    let map = store.map("m").map_err(|e| format!("map: {e}"))?;
    let mut hb = HbMap::default();
    for i in 0..n {
        map.put(data.key(i), data.val(i))
            .map_err(|e| format!("put: {e}"))?;
        hb.insert(data.key(i).to_vec(), data.val(i).to_vec());
    }
    let mut buf = Vec::new();
    let best = |f: &mut dyn FnMut() -> Result<u64, String>| -> Result<f64, String> {
        let mut best = 0f64;
        for _ in 0..reps {
            let t = Instant::now();
            let found = f()?;
            if found != n as u64 {
                return Err(format!("found {found} of {n} keys"));
            }
            best = best.max(mops(n, t.elapsed()));
        }
        Ok(best)
    };
    println!("N = {n} keys (16-byte keys and values), gets in one shuffled order, best of {reps}");
    println!(
        "{:>24}  {:>16}  {:>16}  {:>9}",
        "pad (instructions)", "Shoal M gets/s", "hashbrown M/s", "hb/Shoal"
    );
    for pad in PADS {
        // Interleaved, so that the host's noise falls on both alike.
        let shoal = best(&mut || shoal_gets_padded(&map, data, pad, &mut buf))?;
        let hb_rate = best(&mut || Ok(hb_gets_padded(&hb, data, pad, &mut buf)))?;
        println!(
            "{:>24}  {shoal:>16.2}  {hb_rate:>16.2}  {:>8.2}x",
            format!("+ {pad}"),
            hb_rate / shoal
        );
    }
    let lat = memory_latency(store.stats().map_err(|e| format!("stats: {e}"))?.file_size);
    println!(
        "memory, random lines of a {} MiB buffer: one load after another {:.0} ns each; \
         four independent chains {:.0} ns per load",
        lat.bytes >> 20,
        lat.dependent_ns,
        lat.four_chains_ns
    );
    println!(
        "  a get that misses twice in series (bucket, then record) and overlaps nothing: \
         {:.2} M gets/s at most",
        1e3 / (2.0 * lat.dependent_ns)
    );
    Ok(())
}

/// What a cache (and TLB) miss costs on this machine.
struct Latency {
    bytes: u64,
    dependent_ns: f64,
    four_chains_ns: f64,
}

/// Chases pointers through one random cycle over the 64-byte lines of a buffer as large as
/// the store's file (anonymous memory, the allocator's pages): first one chain, each load's
/// address the previous load's value, then four chains interleaved, whose misses overlap.
/// The first is the latency a chain of dependent misses pays per link; the second what
/// overlap buys.
fn memory_latency(bytes: u64) -> Latency {
    const LINE: usize = 8; // u64 words per 64-byte line
    let lines = (bytes as usize / 64).max(1024);
    let mut next = vec![0u64; lines * LINE];
    // Sattolo's shuffle: one cycle through every line (an xorshift: repeatable).
    let mut perm: Vec<u32> = (0..lines as u32).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        perm.swap(i, (x % i as u64) as usize);
    }
    for i in 0..lines {
        next[perm[i] as usize * LINE] = (perm[(i + 1) % lines] as usize * LINE) as u64;
    }
    let steps = 20_000_000usize.min(lines * 4);
    let t = Instant::now();
    let mut p = 0usize;
    for _ in 0..steps {
        p = next[p] as usize;
    }
    let dependent_ns = t.elapsed().as_nanos() as f64 / steps as f64;
    let mut q = [
        0usize,
        perm[lines / 4] as usize * LINE,
        perm[lines / 2] as usize * LINE,
        perm[3 * lines / 4] as usize * LINE,
    ];
    let t = Instant::now();
    for _ in 0..steps / 4 {
        for c in q.iter_mut() {
            *c = next[*c] as usize;
        }
    }
    let four_chains_ns = t.elapsed().as_nanos() as f64 / (steps / 4 * 4) as f64;
    black_box((p, q));
    Latency {
        bytes: (lines * 64) as u64,
        dependent_ns,
        four_chains_ns,
    }
}

/// Shoal gets through `get_into` (a reused buffer), each followed by `pad` independent
/// instructions. Returns the keys found.
#[inline(never)]
fn shoal_gets_padded(
    map: &shoal::Map,
    data: &Data,
    pad: u32,
    buf: &mut Vec<u8>,
) -> Result<u64, String> {
    let mut found = 0;
    for &i in &data.order {
        if map
            .get_into(data.key(i as usize), buf)
            .map_err(|e| format!("get: {e}"))?
        {
            black_box(&*buf);
            found += 1;
        }
        padding(pad);
    }
    Ok(found)
}

/// hashbrown gets that copy the value into a reused buffer (like `get_into`), each
/// followed by `pad` independent instructions. Returns the keys found.
#[inline(never)]
fn hb_gets_padded(hb: &HbMap, data: &Data, pad: u32, buf: &mut Vec<u8>) -> u64 {
    let mut found = 0;
    for &i in &data.order {
        if let Some(v) = hb.get(data.key(i as usize)) {
            buf.clear();
            buf.extend_from_slice(v);
            black_box(&*buf);
            found += 1;
        }
        padding(pad);
    }
    found
}

/// `pad` instructions that read and write no memory and depend on nothing: they retire
/// in a few cycles but each takes a slot of the reorder window.
#[inline(always)]
fn padding(pad: u32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assembly only writes eax, which is declared clobbered; it touches no
    // memory and no stack.
    unsafe {
        use std::arch::asm;
        macro_rules! movs {
            ($n:literal) => {
                asm!(concat!(".rept ", $n, "\nmov eax, 1\n.endr"), out("eax") _, options(nomem, nostack, preserves_flags))
            };
        }
        match pad {
            0 => {}
            25 => movs!(25),
            50 => movs!(50),
            100 => movs!(100),
            150 => movs!(150),
            300 => movs!(300),
            _ => movs!(600),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = pad;
}
