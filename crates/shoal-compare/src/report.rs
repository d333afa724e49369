//! The report: Markdown (tables of ops/s, ratios "Shoal / peer", the targets) and
//! JSON (for `bench/plot_compare.py`).

use crate::peers::{Phase, PHASES};
use crate::{Args, Order, PutOrders, RunResult, Sys};
use std::fmt::Write as _;

/// `/proc/loadavg`'s first three fields.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

fn mem_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map(|k| format!("{:.0} GiB", k / 1024.0 / 1024.0))
        .unwrap_or_else(|| "?".into())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

pub(crate) fn date_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// The commit the binary's sources are at (`git describe --always --dirty`), when run
/// inside the repository.
pub(crate) fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=7"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0)
}

/// The median of `r` (the lower one for an even count), and half the range over it;
/// `None` for no values.
pub fn median_spread(mut r: Vec<f64>) -> Option<(f64, f64)> {
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    let m = r[(r.len() - 1) / 2];
    let spread = if m > 0.0 {
        (r[r.len() - 1] - r[0]) / 2.0 / m
    } else {
        0.0
    };
    Some((m, spread))
}

/// `1.23 M`, `456 k`.
pub fn fmt_ops(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.0} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn fmt_ratio(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}×")
    } else if x >= 10.0 {
        format!("{x:.1}×")
    } else {
        format!("{x:.2}×")
    }
}

/// Everything the report needs.
pub struct Report<'a> {
    pub args: &'a Args,
    pub runs: &'a [RunResult],
    pub load_before: String,
    pub load_after: String,
    pub secs: f64,
    pub redis_version: Option<String>,
}

/// One of the targets, evaluated.
struct Target {
    what: String,
    phase: &'static str,
    value: Option<f64>,
    /// The same ratio in operations per CPU-second.
    cpu_value: Option<f64>,
    goal: f64,
    /// true: value must be >= goal; false: value must be < goal.
    at_least: bool,
}

impl Target {
    fn met(&self) -> Option<bool> {
        self.value.map(|v| {
            if self.at_least {
                v >= self.goal
            } else {
                v < self.goal
            }
        })
    }
}

impl Report<'_> {
    /// A full row (every phase, in the main PUT order).
    fn run(&self, sys: Sys, p: usize) -> Option<&RunResult> {
        self.runs
            .iter()
            .find(|r| r.sys == sys && r.procs == p && r.skipped.is_none() && self.is_main(r))
    }

    fn is_main(&self, r: &RunResult) -> bool {
        !r.put_only && r.order == self.args.put_order.main()
    }

    /// The PUT-only row in key order of `--put-order both`.
    fn key_order_run(&self, sys: Sys, p: usize) -> Option<&RunResult> {
        self.runs.iter().find(|r| {
            r.sys == sys
                && r.procs == p
                && r.skipped.is_none()
                && r.put_only
                && r.order == Order::Keys
        })
    }

    fn ops(&self, sys: Sys, p: usize, ph: Phase) -> Option<f64> {
        let r = self.run(sys, p)?.phase(ph)?;
        (r.ops > 0 && r.errors == 0).then(|| r.ops_per_sec())
    }

    fn bpe(&self, sys: Sys) -> Option<f64> {
        let r = self
            .runs
            .iter()
            .filter(|r| r.sys == sys && r.skipped.is_none() && self.is_main(r))
            .min_by_key(|r| r.procs)?;
        r.bytes.map(|b| b as f64 / self.args.keys as f64)
    }

    fn ratio(&self, peer: Sys, p: usize, ph: Phase) -> Option<f64> {
        Some(self.ops(Sys::Shoal, p, ph)? / self.ops(peer, p, ph)?)
    }

    fn ops_cpu(&self, sys: Sys, p: usize, ph: Phase) -> Option<f64> {
        let r = self.run(sys, p)?.phase(ph)?;
        if r.errors > 0 {
            return None;
        }
        r.ops_per_cpu_sec()
    }

    /// Shoal / peer in operations per CPU-second.
    fn ratio_cpu(&self, peer: Sys, p: usize, ph: Phase) -> Option<f64> {
        Some(self.ops_cpu(Sys::Shoal, p, ph)? / self.ops_cpu(peer, p, ph)?)
    }

    fn targets(&self) -> Vec<Target> {
        let mut t = Vec::new();
        let goals = [
            (Sys::Lmdb, 10.0),
            (Sys::Mdbx, 10.0),
            (Sys::Redis, 50.0),
            (Sys::Hashbrown, 1.0),
        ];
        for (peer, goal) in goals {
            for &p in &self.args.procs {
                if peer == Sys::Hashbrown && p > 1 {
                    continue;
                }
                if !self.args.systems.contains(&peer) {
                    continue;
                }
                for ph in [Phase::Put, Phase::Get, Phase::Mix] {
                    t.push(Target {
                        what: format!(
                            "Shoal / {} ≥ {} ({p} proc{})",
                            peer.label(self.args),
                            fmt_ratio(goal),
                            if p > 1 { "s" } else { "" }
                        ),
                        phase: ph.name(),
                        value: self.ratio(peer, p, ph),
                        cpu_value: self.ratio_cpu(peer, p, ph),
                        goal,
                        at_least: true,
                    });
                }
            }
        }
        let many = self.args.many_procs;
        if many > 0 {
            let v = self
                .ops(Sys::Shoal, many, Phase::Mix)
                .zip(self.ops(Sys::Shoal, 2, Phase::Mix))
                .map(|(a, b)| a / b);
            t.push(Target {
                what: format!("Shoal MIX, {many} processes / 2 processes ≥ 0.70×"),
                phase: "MIX",
                value: v,
                cpu_value: self
                    .ops_cpu(Sys::Shoal, many, Phase::Mix)
                    .zip(self.ops_cpu(Sys::Shoal, 2, Phase::Mix))
                    .map(|(a, b)| a / b),
                goal: 0.7,
                at_least: true,
            });
        }
        if let Some(sb) = self.bpe(Sys::Shoal) {
            for peer in [Sys::Hashbrown, Sys::Lmdb, Sys::Mdbx, Sys::Redis] {
                if !self.args.systems.contains(&peer) {
                    continue;
                }
                t.push(Target {
                    what: format!("bytes/entry: Shoal / {} < 1", peer.label(self.args)),
                    phase: "bytes",
                    value: self.bpe(peer).map(|pb| sb / pb),
                    cpu_value: None,
                    goal: 1.0,
                    at_least: false,
                });
            }
        }
        t
    }

    fn cell(&self, r: &RunResult, ph: Phase) -> String {
        match r.phase(ph) {
            None => "–".into(),
            Some(x) if x.errors > 0 => format!("{} errors", x.errors),
            Some(x) => format!(
                "{}{}{}",
                fmt_ops(x.ops_per_sec()),
                if x.capped { "*" } else { "" },
                x.spread()
                    .map(|s| format!(" ±{:.0}%", 100.0 * s))
                    .unwrap_or_default()
            ),
        }
    }

    /// The label of a row in the tables.
    fn row_label(&self, r: &RunResult) -> String {
        if r.put_only && r.order == Order::Keys {
            format!("{}, PUT in key order", r.sys.label(self.args))
        } else {
            r.sys.label(self.args)
        }
    }

    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let a = self.args;
        let n = a.keys;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# Shoal compared with hashbrown, LMDB, libmdbx and Redis: {} keys\n",
            group(n)
        );
        let _ = writeln!(s, "- date: {}", date_utc());
        let _ = writeln!(s, "- commit: {}", commit());
        let _ = writeln!(
            s,
            "- machine: {}, {} cores, {} RAM, Linux {}",
            cpu_model(),
            cores(),
            mem_total(),
            kernel()
        );
        let _ = writeln!(
            s,
            "- load average (1, 5, 15 min): {} before, {} after; the run took {:.0} s",
            self.load_before, self.load_after, self.secs
        );
        let busy = |l: &str| {
            l.split_whitespace()
                .next()
                .and_then(|x| x.parse::<f64>().ok())
                .is_some_and(|x| x > cores() as f64)
        };
        if busy(&self.load_before) || busy(&self.load_after) {
            let _ = writeln!(
                s,
                "- **the machine was busy** (load average above its {} cores): other \
                 processes shared the CPUs, so absolute figures are low and noisy, and runs \
                 with more processes than free cores suffer most; ratios compare systems \
                 measured minutes apart under that load",
                cores()
            );
        }
        if let Some(r) = &a.repro {
            let _ = writeln!(s, "- command: `{r}`");
        }
        // The program by name, not by the path it ran from (which names this machine).
        let argv: Vec<String> = std::iter::once("shoal-compare".to_string())
            .chain(std::env::args().skip(1))
            .map(|x| if x.contains(' ') { format!("'{x}'") } else { x })
            .collect();
        let _ = writeln!(s, "- binary invocation: `{}`", argv.join(" "));
        let _ = writeln!(
            s,
            "- versions: {} (heed, built from source), libmdbx {} (mdbx-sys, built from \
             source, called directly), {}",
            crate::peers::LmdbKv::version(),
            crate::peers::MdbxKv::version(),
            self.redis_version.as_deref().unwrap_or("Redis: not run")
        );
        let main_order = match a.put_order {
            PutOrders::Keys => {
                "PUT in key order in every row (`--put-order keys`: the B-trees' best case)"
            }
            PutOrders::Shuffled => "PUT in a shuffled order (each worker its own keys)",
            PutOrders::Both => {
                "PUT in a shuffled order (each worker its own keys); the rows \
                                marked \"PUT in key order\" are separate PUT-only runs that \
                                insert in key order, which flatters the B-trees"
            }
        };
        let _ = writeln!(
            s,
            "- key order: {main_order}; GET and REMOVE in one shuffled order, MIX on random keys"
        );
        let _ = writeln!(
            s,
            "- repeats: {} fresh runs per row, rows interleaved; each cell is the median \
             repeat's ops/s ± half the range of the repeats (min to max) over that median",
            a.repeats
        );
        let _ = writeln!(
            s,
            "- phase lengths: GET and MIX repeat their passes for at least {} s per run; PUT \
             and REMOVE are one pass of all N keys (see \"Phase lengths\" for the medians)",
            a.min_secs
        );
        let _ = writeln!(
            s,
            "\nKeys `key:%012d` (16 bytes), values 16 bytes. Every result is checked (a GET must \
             return the key's own value). Each worker formats its keys and values before \
             a phase, laid out in the order the phase reads them, so a random order costs no \
             cache miss of the harness's own. Ratios are Shoal's ops/s over the peer's at the same \
             process count, measured in this run.\n"
        );
        s.push_str("## Throughput (ops/s, all processes together)\n\n");
        s.push_str("| system | procs | PUT | GET | MIX 98/2 | REMOVE | bytes/entry |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for r in self.runs {
            if let Some(why) = &r.skipped {
                let _ = writeln!(
                    s,
                    "| {} | {} | skipped: {} | | | | |",
                    self.row_label(r),
                    r.procs,
                    why.replace('|', "/")
                );
                continue;
            }
            let bpe = r
                .bytes
                .map(|b| format!("{:.1}", b as f64 / n as f64))
                .unwrap_or_else(|| "–".into());
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                self.row_label(r),
                r.procs,
                self.cell(r, Phase::Put),
                self.cell(r, Phase::Get),
                self.cell(r, Phase::Mix),
                self.cell(r, Phase::Remove),
                bpe
            );
        }
        s.push_str("\n## Shoal / peer (same run, same process count; above 1 = Shoal faster)\n\n");
        s.push_str(
            "| peer | procs | PUT | GET | MIX 98/2 | REMOVE | bytes/entry, Shoal / peer |\n",
        );
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for r in self.runs {
            if r.sys == Sys::Shoal || r.skipped.is_some() || !self.is_main(r) {
                continue;
            }
            let cells: Vec<String> = PHASES
                .iter()
                .map(|&ph| {
                    self.ratio(r.sys, r.procs, ph)
                        .map(fmt_ratio)
                        .unwrap_or_else(|| "–".into())
                })
                .collect();
            let shoal_bytes = self.run(Sys::Shoal, r.procs).and_then(|s| s.bytes);
            let b = match (shoal_bytes, r.bytes) {
                (Some(sb), Some(pb)) if pb > 0 => fmt_ratio(sb as f64 / pb as f64),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.sys.label(a),
                r.procs,
                cells[0],
                cells[1],
                cells[2],
                cells[3],
                b
            );
        }
        s.push_str(
            "\n## Shoal / peer per CPU-second (same run; less sensitive to other load)\n\n\
             Operations per CPU-second of the worker processes (plus the Redis server's), \
             Shoal's over the peer's. A process that sleeps waiting for a lock spends no CPU, \
             so with 2 processes this favours the peer that blocks.\n\n",
        );
        s.push_str("| peer | procs | PUT | GET | MIX 98/2 | REMOVE |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|\n");
        for r in self.runs {
            if r.sys == Sys::Shoal || r.skipped.is_some() || !self.is_main(r) {
                continue;
            }
            let cells: Vec<String> = PHASES
                .iter()
                .map(|&ph| {
                    self.ratio_cpu(r.sys, r.procs, ph)
                        .map(fmt_ratio)
                        .unwrap_or_else(|| "–".into())
                })
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                r.sys.label(a),
                r.procs,
                cells[0],
                cells[1],
                cells[2],
                cells[3]
            );
        }
        if a.put_order == PutOrders::Both {
            s.push_str(
                "\n## PUT in key order against shuffled (separate rows, same run)\n\n\
                 Sorted inserts append at the right edge of a B-tree (LMDB, libmdbx): their \
                 best case. A hash table's work does not depend on the order.\n\n\
                 | system | procs | PUT shuffled | PUT in key order | key order / shuffled | \
                 bytes/entry shuffled | bytes/entry key order |\n\
                 |---|---:|---:|---:|---:|---:|---:|\n",
            );
            for r in self.runs {
                if !self.is_main(r) || r.skipped.is_some() {
                    continue;
                }
                let Some(k) = self.key_order_run(r.sys, r.procs) else {
                    continue;
                };
                let (sh, ko) = (r.phase(Phase::Put), k.phase(Phase::Put));
                let ratio = match (sh, ko) {
                    (Some(x), Some(y)) if x.ops_per_sec() > 0.0 => {
                        fmt_ratio(y.ops_per_sec() / x.ops_per_sec())
                    }
                    _ => "–".into(),
                };
                let bpe = |b: Option<u64>| {
                    b.map(|b| format!("{:.1}", b as f64 / n as f64))
                        .unwrap_or_else(|| "–".into())
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    r.sys.label(a),
                    r.procs,
                    self.cell(r, Phase::Put),
                    self.cell(k, Phase::Put),
                    ratio,
                    bpe(r.bytes),
                    bpe(k.bytes)
                );
            }
        }
        s.push_str(
            "\n## Phase lengths (seconds, median repeat; all repeats in the JSON report)\n\n\
             | system | procs | PUT | GET | MIX 98/2 | REMOVE |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for r in self.runs {
            if r.skipped.is_some() {
                continue;
            }
            let secs = |ph| {
                r.phase(ph)
                    .map(|x| format!("{:.2}", x.secs))
                    .unwrap_or_else(|| "–".into())
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                self.row_label(r),
                r.procs,
                secs(Phase::Put),
                secs(Phase::Get),
                secs(Phase::Mix),
                secs(Phase::Remove)
            );
        }
        s.push_str("\n## Targets\n\n");
        s.push_str(
            "| target | phase | measured (ops/s) | met? | per CPU-second |\n\
             |---|---|---:|---|---:|\n",
        );
        let targets = self.targets();
        for t in &targets {
            let (v, m) = match (t.value, t.met()) {
                (Some(v), Some(true)) => (fmt_ratio(v), "met".to_string()),
                (Some(v), Some(false)) => (
                    fmt_ratio(v),
                    if t.at_least {
                        format!("**missed** ({:.0}% of the target)", 100.0 * v / t.goal)
                    } else {
                        "**missed**".to_string()
                    },
                ),
                _ => ("–".into(), "not measured".into()),
            };
            let c = match t.cpu_value {
                Some(c) if c >= t.goal => format!("{} (met)", fmt_ratio(c)),
                Some(c) => format!("{} (missed)", fmt_ratio(c)),
                None => "–".into(),
            };
            let _ = writeln!(s, "| {} | {} | {} | {} | {} |", t.what, t.phase, v, m, c);
        }
        let met = targets.iter().filter(|t| t.met() == Some(true)).count();
        let measured = targets.iter().filter(|t| t.met().is_some()).count();
        let _ = writeln!(s, "\n{met} of {measured} measured targets met.\n");
        s.push_str("## Notes\n\n");
        let _ = writeln!(
            s,
            "- 2 processes: two worker processes forked after the data is generated; each \
             opens the store itself and does half of every phase's ops; the phase's time is \
             the slower worker's. Redis: two client processes, one server (a third process).\n\
             - PUT: {put_order}; GET and REMOVE go in one shuffled order; MIX picks \
             random keys (a remove + put counts as 2 ops). Each row runs {reps} times, each \
             time on a fresh store; GET and MIX loop over their ops until they have lasted \
             {min_secs} s.\n\
             - Shoal: `Map::put`, `Map::get_into`, `Map::remove` on one map of a store in \
             {dir}; bytes/entry = file size / N.\n\
             - hashbrown: `HashMap<Vec<u8>, Vec<u8>>` with foldhash in the worker's own heap \
             (one process only: the upper bound); bytes/entry = heap bytes counted by the \
             allocator / N.\n\
             - LMDB: heed, one unnamed database, env flags NOSYNC | NOMETASYNC | WRITEMAP, \
             in {dir}; 1 txn/op = a write transaction per put or remove and a read \
             transaction per get (the per-op comparison); batched = {b} ops per transaction: \
             gets in read transactions (never behind the writer lock), puts and removes in \
             write transactions; a MIX batch of {b} ops runs its gets in one read transaction, \
             then its remove + put pairs in one write transaction. bytes/entry = (last page + 1) × page \
             size / N.\n\
             - libmdbx: the same, with UtterlyNoSync durability (no flush at all, like LMDB's NOSYNC) and WRITEMAP. \
             Its writer lock is a priority-inheritance mutex: with 2 processes and 1 txn/op, \
             each commit can hand the lock to the other process through the kernel while that \
             one spins for it, and PUT and REMOVE then collapse in some runs \
             (docs/benchmarks/libmdbx-two-writers.md).\n\
             - Redis: the real server, started by the suite on a Unix socket with `--save '' \
             --appendonly no`, SET/GET/DEL with a minimal RESP client; pipelined = {pl} \
             commands per round trip. bytes/entry = INFO `used_memory` delta / N.",
            dir = a.dir.display(),
            b = a.batch,
            pl = a.pipeline,
            reps = a.repeats,
            min_secs = a.min_secs,
            put_order = match a.put_order.main() {
                Order::Shuffled => "keys inserted in a shuffled order; the \"PUT in key \
                                    order\" rows insert in key order, which favours the B-trees \
                                    (LMDB, libmdbx append at the right edge of the tree)",
                Order::Keys => "keys inserted in key order (`--put-order keys`), which favours \
                                the B-trees (LMDB, libmdbx append at the right edge of the tree)",
            }
        );
        let not_run: Vec<&str> = crate::ALL
            .iter()
            .filter(|x| !a.systems.contains(x))
            .map(|x| x.key())
            .collect();
        if !not_run.is_empty() {
            let _ = writeln!(
                s,
                "- not run in this invocation (left out with `--systems`): {}.",
                not_run.join(", ")
            );
        }
        if self
            .runs
            .iter()
            .any(|r| r.phases.iter().any(|(_, p)| p.capped))
        {
            let _ = writeln!(
                s,
                "- \\* capped: unpipelined Redis ran at most {} timed ops per phase (split \
                 among the processes); the rest of PUT was loaded untimed (pipelined), the \
                 rest of the other phases skipped.",
                group(a.redis_cap)
            );
        }
        s
    }

    /// The JSON report (for the plots).
    pub fn json(&self) -> String {
        let a = self.args;
        let runs: Vec<serde_json::Value> = self
            .runs
            .iter()
            .map(|r| {
                let phases: serde_json::Map<String, serde_json::Value> = r
                    .phases
                    .iter()
                    .map(|(ph, p)| {
                        (
                            ph.name().to_string(),
                            serde_json::json!({
                                "ops": p.ops,
                                "secs": p.secs,
                                "ops_per_sec": p.ops_per_sec(),
                                "cpu_secs": if p.cpu_secs.is_finite() { Some(p.cpu_secs) } else { None },
                                "ops_per_cpu_sec": p.ops_per_cpu_sec(),
                                "shoal_ratio_cpu": if r.sys == Sys::Shoal || !self.is_main(r) { None } else { self.ratio_cpu(r.sys, r.procs, *ph) },
                                "rates": p.rates,
                                "secs_each": p.secs_each,
                                "spread": p.spread(),
                                "errors": p.errors,
                                "misses": p.misses,
                                "first_error": p.first_error,
                                "capped": p.capped,
                                "shoal_ratio": if r.sys == Sys::Shoal || !self.is_main(r) { None } else { self.ratio(r.sys, r.procs, *ph) },
                            }),
                        )
                    })
                    .collect();
                serde_json::json!({
                    "system": r.sys.key(),
                    "label": r.sys.label(a),
                    "procs": r.procs,
                    "order": r.order.key(),
                    "put_only": r.put_only,
                    "repeats": r.repeats,
                    "skipped": r.skipped,
                    "bytes": r.bytes,
                    "bytes_per_entry": r.bytes.map(|b| b as f64 / a.keys as f64),
                    "phases": phases,
                })
            })
            .collect();
        let targets: Vec<serde_json::Value> = self
            .targets()
            .iter()
            .map(|t| {
                serde_json::json!({
                    "target": t.what, "phase": t.phase, "value": t.value,
                    "goal": t.goal, "met": t.met(), "cpu_value": t.cpu_value,
                })
            })
            .collect();
        serde_json::json!({
            "keys": a.keys,
            "date": date_utc(),
            "machine": format!("{}, {} cores, {} RAM", cpu_model(), cores(), mem_total()),
            "load_before": self.load_before,
            "load_after": self.load_after,
            "many_procs": a.many_procs,
            "commit": commit(),
            "put_order": a.put_order.main().key(),
            "key_order_rows": a.put_order == PutOrders::Both,
            "repeats": a.repeats,
            "min_secs": a.min_secs,
            "runs": runs,
            "targets": targets,
        })
        .to_string()
    }
}

/// `1000000` as `1,000,000`.
pub fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
