"""Writes the report of bench/mdkv/run.sh: a table per worker count (median Mops per phase
and the spread over the rounds, memory), the issue's target ratios, and a chart.

Input: one JSON object per line, per system and worker count, with "phases" (phase,
round, ops, seconds), "memory_bytes" and "entries". Anything after the line
"<!-- notes -->" in an existing report is kept: hand-written notes survive a rerun.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

PHASES = ["PUT", "GET", "GET_RAND", "DEL"]
NOTES = "<!-- notes -->"


def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine():
    cpu = "unknown cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
        ram = f"{mem / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration):
        ram = "RAM unknown"
    return f"{cpu}, {os.cpu_count()} cpus, {ram}, Linux {platform.release()}"


def summarize(r):
    """Per phase: (median Mops, min, max, median seconds)."""
    out = {}
    for ph in PHASES:
        runs = [p for p in r["phases"] if p["phase"] == ph]
        if not runs:
            continue
        # The round with the median rate (the lower middle one of an even count), as
        # `shoal bench` reports it.
        runs.sort(key=lambda p: p["ops"] / p["seconds"])
        mid = runs[(len(runs) - 1) // 2]
        mops = [p["ops"] / p["seconds"] / 1e6 for p in runs]
        out[ph] = (mid["ops"] / mid["seconds"] / 1e6, mops[0], mops[-1], mid["seconds"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chart", action="store_true")
    ap.add_argument("--runs", required=True, help="per run: command, load before, after, seconds (tab-separated)")
    a = ap.parse_args()

    rows = [json.loads(l) for l in open(a.results) if l.strip()]
    if not rows:
        sys.exit("report.py: no results")
    bad = [f'{r["system"]} ({r["workers"]} workers)' for r in rows if r["failed_checks"]]
    if bad:
        sys.exit("report.py: failed checks in " + ", ".join(bad))
    workers = sorted({r["workers"] for r in rows})
    first = rows[0]
    per = first["keys"] // first["workers"]
    if len({r["keys"] // r["workers"] for r in rows}) > 1:
        per = "varying"
    ncpu = os.cpu_count() or 1
    runs = [l.rstrip("\n").split("\t") for l in open(a.runs) if l.strip()]
    loads = [float(x) for r in runs for x in (r[1] + " " + r[2]).split()]
    busy = any(l > ncpu for l in loads)

    md = ["# mem_meta_kv_benchmark reproduced: Shoal beside the maps it measured", ""]
    md += [
        "Written by `bench/mdkv/run.sh`. Every system runs in the same run, one after another,",
        "with the same keys, key counts, threads, pinning and rounds; the figures are medians",
        "over the rounds, with the slowest and fastest round in brackets.",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- commit: {sh('git', 'rev-parse', '--short', 'HEAD')}"
        + (" (with uncommitted changes)" if sh("git", "status", "--porcelain", "--untracked-files=no") else ""),
        f"- machine: {machine()}",
    ]
    for cmd, lb, la, secs in runs:
        md += [
            f"- command: `{cmd}`",
            f"  - load average (1, 5, 15 min): {lb} before, {la} after; it took {secs} s",
        ]
    if busy:
        md.append(
            "- **the machine was busy** (load average above its cores): other processes shared "
            "the CPUs, so absolute figures are low and noisy; compare the ratios"
        )
    md += [
        f"- keys: {per if isinstance(per, str) else f'{per:,}'} per worker, pattern `{first['keys_pattern']}` "
        + ("(`file.mdtest.%d.%d` with (i / 10000, i))" if first["keys_pattern"] == "seq"
           else "(`file.mdtest.%d.%d` with two pseudo-random integers below the key count)")
        + "; values `int32_t`; pinning "
        + ("off" if first["pin"] < 0 else f"from core {first['pin']}")
        + "; rounds of PUT, GET, GET_RAND, DEL (how many: in each table's heading)",
        "- order: worker w owns keys w, w+N, w+2N, ... and PUTs and DELs them in that order; "
        "GET reads in the order of insertion (records written one after another), GET_RAND "
        "the same keys in a random order; in a shared map a worker reads the next worker's "
        "keys, in a private map its own",
        "- memory: growth of the process's resident set during the first PUT (maps in the "
        "process), or the resident size of the store file (Shoal), in 10^6 bytes; bytes per "
        "entry = memory / entries",
        "",
    ]

    summaries = {}
    for w in workers:
        these = [r for r in rows if r["workers"] == w]
        rounds = sorted({r["rounds"] for r in these})
        pw = sorted({r["keys"] // w for r in these})
        lens = [s[3] for r in these for s in summarize(r).values()]
        md += [
            f"## {w} worker{'s' if w > 1 else ''} ({', '.join(f'{k:,}' for k in pw)} keys each, "
            f"{'/'.join(map(str, rounds))} round{'s' if rounds != [1] else ''})",
            "",
            f"Phase lengths (median round): {min(lens):.2f} s to {max(lens):.2f} s"
            + ("; phases under 2 s are noisy on a shared machine." if min(lens) < 2 else ".")
            + ("" if rounds != [1] else " One round: no spread."),
            "",
        ]
        md += [
            "| system | PUT Mops | GET Mops | GET_RAND Mops | DEL Mops | PUT MB/s | memory MB | bytes/entry |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in these:
            s = summarize(r)
            summaries[(r["system"], w)] = (s, r)
            cells = []
            for ph in PHASES:
                med, lo, hi, _ = s[ph]
                cells.append(f"{med:.2f} ({lo:.2f}-{hi:.2f})" if r["rounds"] > 1 else f"{med:.2f}")
            mem = r["memory_bytes"]
            mbs = mem / s["PUT"][3] / 1e6
            md.append(
                f"| {r['system']} | " + " | ".join(cells)
                + f" | {mbs:.0f} | {mem / 1e6:.0f} | {mem / r['entries']:.1f} |"
            )
        md.append("")

    md += ["## Targets (same-run ratios)", ""]
    md += ["| workers | target | ratio | holds |", "|---:|---|---:|---|"]

    def ratio(w, a_sys, b_sys, ph):
        a_ = summaries.get((a_sys, w))
        b_ = summaries.get((b_sys, w))
        if not a_ or not b_:
            return None
        if ph == "memory":
            return a_[1]["memory_bytes"] / max(1, b_[1]["memory_bytes"])
        return a_[0][ph][0] / b_[0][ph][0]

    sh_, std, mtx = "Shoal (shared)", "std::unordered_map (per thread)", "std::unordered_map (shared, mutex)"
    targets = [
        ("Shoal shared GET ≥ 1.0× std::unordered_map behind a mutex", sh_, mtx, "GET", 1.0, True),
        ("Shoal shared GET ≥ 0.5× private std::unordered_maps", sh_, std, "GET", 0.5, True),
        ("(random order) Shoal shared GET_RAND ≥ 1.0× std::unordered_map behind a mutex", sh_, mtx, "GET_RAND", 1.0, True),
        ("(random order) Shoal shared GET_RAND ≥ 0.5× private std::unordered_maps", sh_, std, "GET_RAND", 0.5, True),
        ("Shoal shared PUT ≥ 1.0× private std::unordered_maps", sh_, std, "PUT", 1.0, True),
        ("Shoal shared memory ≤ 0.5× std::unordered_map's", sh_, std, "memory", 0.5, False),
    ]
    for w in workers:
        for text, x, y, ph, bound, at_least in targets:
            v = ratio(w, x, y, ph)
            if v is None:
                continue
            ok = v >= bound if at_least else v <= bound
            md.append(f"| {w} | {text} | {v:.2f}× | {'yes' if ok else '**no**'} |")
    md.append("")

    if a.chart:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        png = os.path.splitext(a.out)[0] + ".png"
        systems = list(dict.fromkeys(r["system"] for r in rows))
        fig, axes = plt.subplots(1, len(workers), figsize=(7 * len(workers), 5), squeeze=False)
        width = 0.8 / len(systems)
        for ax, w in zip(axes[0], workers):
            for k, sysname in enumerate(systems):
                got = summaries.get((sysname, w))
                if not got:
                    continue
                s = got[0]
                xs = [j + (k - (len(systems) - 1) / 2) * width for j in range(len(PHASES))]
                med = [s[p][0] for p in PHASES]
                err = [[s[p][0] - s[p][1] for p in PHASES], [s[p][2] - s[p][0] for p in PHASES]]
                ax.bar(xs, med, width, yerr=err, capsize=2, label=sysname)
            ax.set_xticks(range(len(PHASES)))
            ax.set_xticklabels(PHASES)
            ax.set_ylabel("Mops (all workers)")
            ax.set_title(f"{w} worker{'s' if w > 1 else ''}, {summaries[(systems[0], w)][1]['keys'] // w:,} keys each ({first['keys_pattern']})")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        md += [f"![Mops per phase and system]({os.path.basename(png)})", ""]

    kept = ""
    if os.path.exists(a.out):
        old = open(a.out).read()
        if NOTES in old:
            kept = old[old.index(NOTES):]
    md.append(kept if kept else NOTES + "\n")
    with open(a.out, "w") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
