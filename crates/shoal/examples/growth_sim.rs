//! The simulation behind the fixed maps' growth rule (DESIGN.md, "How fixed maps grow"):
//! segments of a fixed map's default geometry filled with uniformly hashed keys, placed as
//! the engine places them (home bucket, three neighbours, then the stash; an overflow
//! count of at most 255), grown by one of two rules:
//!
//! - `split`: a full segment splits in halves (extendible hashing, format version 6);
//! - `move`: a full segment gives the group of the key being inserted (its directory
//!   entry) to the open segment, or to a new one; the directory doubles when it has fewer
//!   than 8 entries per segment or the full segment holds one group (format version 7).
//!
//! It prints, as keys are added, the load (keys per cell), the bytes per entry beyond the
//! key and value (segments and directory only: no file, no arena, no header), and the
//! cells moved per insert. No engine code runs: it checks the rule, not its
//! implementation (`fixed_overhead` measures that).
//!
//! `cargo run --release -p shoal --example growth_sim -- move 8+8 3000000`
//! (rules `split` / `move`; geometries `4+4`, `8+8`, `16+16` (7 cells per 256-byte
//! bucket), `16+16w` (15 per 512-byte bucket, the version-7 rule); N keys).

use std::env;

/// A 64-bit mixer (splitmix64's finaliser): uniform hashes without the engine.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A segment geometry: buckets, cells per bucket, bytes.
struct Geometry {
    n_main: u64,
    n_stash: u64,
    cells: u8,
    bucket_bytes: u64,
    cell_bytes: u64,
}

impl Geometry {
    fn segment_bytes(&self) -> u64 {
        (64 + self.bucket_bytes * (self.n_main + self.n_stash)).next_multiple_of(128)
    }
    fn capacity(&self) -> u64 {
        (self.n_main + self.n_stash) * self.cells as u64
    }
    fn home(&self, h: u64) -> u64 {
        (((h >> 32) & 0xffff) * self.n_main) >> 16
    }
}

/// A segment: cells used per bucket, overflow counts, and its keys with their buckets.
#[derive(Clone)]
struct Segment {
    used: Vec<u8>,
    over: Vec<u16>,
    keys: Vec<(u64, u64)>,
    depth: u32,
}

impl Segment {
    fn new(g: &Geometry, depth: u32) -> Segment {
        Segment {
            used: vec![0; (g.n_main + g.n_stash) as usize],
            over: vec![0; g.n_main as usize],
            keys: Vec::new(),
            depth,
        }
    }

    /// Places `h` as the engine does; false if it finds no room.
    fn place(&mut self, g: &Geometry, h: u64) -> bool {
        let home = g.home(h);
        let take = |s: &mut Segment, b: u64| {
            s.used[b as usize] += 1;
            if b != home {
                s.over[home as usize] += 1;
            }
            s.keys.push((h, b));
        };
        if self.used[home as usize] < g.cells {
            take(self, home);
            return true;
        }
        if self.over[home as usize] >= 255 {
            return false;
        }
        for j in 1..=3u64.min(g.n_main - 1) {
            let b = (home + j) % g.n_main;
            if self.used[b as usize] < g.cells {
                take(self, b);
                return true;
            }
        }
        let first = ((h >> 16) & 0xffff) % g.n_stash;
        for j in 0..g.n_stash {
            let b = g.n_main + (first + j) % g.n_stash;
            if self.used[b as usize] < g.cells {
                take(self, b);
                return true;
            }
        }
        false
    }

    /// Takes out the keys `pick` selects, clearing their cells; returns their hashes.
    fn take_where(&mut self, g: &Geometry, pick: impl Fn(u64) -> bool) -> Vec<u64> {
        let mut out = Vec::new();
        let keys = std::mem::take(&mut self.keys);
        for (h, b) in keys {
            if pick(h) {
                self.used[b as usize] -= 1;
                let home = g.home(h);
                if home != b {
                    self.over[home as usize] -= 1;
                }
                out.push(h);
            } else {
                self.keys.push((h, b));
            }
        }
        out
    }
}

fn main() {
    let args: Vec<String> = env::args().collect();
    let usage = "usage: growth_sim split|move 4+4|8+8|16+16|16+16w N";
    let (Some(rule), Some(geo), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let g = match geo.as_str() {
        "4+4" => Geometry {
            n_main: 120,
            n_stash: 7,
            cells: 7,
            bucket_bytes: 64,
            cell_bytes: 8,
        },
        "8+8" => Geometry {
            n_main: 60,
            n_stash: 3,
            cells: 7,
            bucket_bytes: 128,
            cell_bytes: 16,
        },
        "16+16" => Geometry {
            n_main: 30,
            n_stash: 2,
            cells: 7,
            bucket_bytes: 256,
            cell_bytes: 32,
        },
        "16+16w" => Geometry {
            n_main: 13,
            n_stash: 2,
            cells: 15,
            bucket_bytes: 512,
            cell_bytes: 32,
        },
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let moves = match rule.as_str() {
        "split" => false,
        "move" => true,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let n: u64 = n.parse().expect("N");
    let mut segs = vec![Segment::new(&g, 0)];
    let mut dir: Vec<usize> = vec![0];
    let mut open = 0usize;
    let mut moved = 0u64;
    let mut report = 50_000u64;
    for i in 0..n {
        let h = mix(i ^ 0x9e37_79b9_7f4a_7c15);
        loop {
            let mask = dir.len() as u64 - 1;
            let s = dir[(h & mask) as usize];
            if segs[s].place(&g, h) {
                break;
            }
            if !moves {
                let d = segs[s].depth;
                if 1u64 << d == dir.len() as u64 {
                    dir.extend_from_within(..);
                }
                let out = segs[s].take_where(&g, |k| (k >> d) & 1 == 1);
                moved += out.len() as u64;
                segs[s].depth = d + 1;
                let mut new = Segment::new(&g, d + 1);
                for k in out {
                    assert!(new.place(&g, k), "a half does not fit an empty segment");
                }
                segs.push(new);
                let ns = segs.len() - 1;
                for (j, e) in dir.iter_mut().enumerate() {
                    if *e == s && (j >> d) & 1 == 1 {
                        *e = ns;
                    }
                }
                continue;
            }
            let owned = dir.iter().filter(|&&x| x == s).count();
            if owned < 2 || dir.len() < 8 * segs.len() {
                dir.extend_from_within(..);
                continue;
            }
            let group = h & mask;
            let out = segs[s].take_where(&g, |k| k & mask == group);
            moved += out.len() as u64;
            let mut target = None;
            if open != s {
                let mut t = segs[open].clone();
                if out.iter().all(|&k| t.place(&g, k)) {
                    segs[open] = t;
                    target = Some(open);
                }
            }
            let target = target.unwrap_or_else(|| {
                let mut new = Segment::new(&g, 0);
                for &k in &out {
                    assert!(new.place(&g, k), "a group does not fit an empty segment");
                }
                segs.push(new);
                open = segs.len() - 1;
                open
            });
            dir[group as usize] = target;
        }
        if i + 1 == report || i + 1 == n {
            let keys = (i + 1) as f64;
            let load = keys / (segs.len() as u64 * g.capacity()) as f64;
            let bytes = (segs.len() as u64 * g.segment_bytes() + 8 * dir.len() as u64) as f64;
            println!(
                "{:>10} keys: load {load:.3}, {:5.2} B/entry beyond the cell, {:.2} cells moved per insert, \
                 {} segments, directory {}",
                i + 1,
                bytes / keys - g.cell_bytes as f64,
                moved as f64 / keys,
                segs.len(),
                dir.len()
            );
            report = report * 5 / 4;
        }
    }
}
