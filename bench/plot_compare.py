"""Charts of a shoal-compare run (see scripts/compare.sh).

    python bench/plot_compare.py RESULT.json OUT_PREFIX

writes OUT_PREFIX-ops.png (ops/s per phase and system, 1 and 2 processes, log scale),
OUT_PREFIX-ratio.png (Shoal / peer for the per-op peers, with the targets) and
OUT_PREFIX-bytes.png (bytes per entry after PUT).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PHASES = ["PUT", "GET", "MIX", "REMOVE"]
COLORS = {
    "shoal": "#d62728",
    "hashbrown": "#7f7f7f",
    "lmdb": "#1f77b4",
    "lmdb-batch": "#aec7e8",
    "mdbx": "#2ca02c",
    "mdbx-batch": "#98df8a",
    "redis": "#9467bd",
    "redis-pipe": "#c5b0d5",
}
TARGETS = {"lmdb": 10.0, "mdbx": 10.0, "redis": 50.0, "hashbrown": 1.0}


def is_main(res, r):
    """A full row in the run's main PUT order (not a PUT-only row in key order)."""
    return not r.get("put_only") and r.get("order", res["put_order"]) == res["put_order"]


def ok_runs(res, procs):
    return [r for r in res["runs"] if r["procs"] == procs and not r["skipped"] and is_main(res, r)]


def rate(run, phase):
    p = run["phases"].get(phase)
    if not p or p["errors"] or not p["ops"]:
        return None
    return p["ops_per_sec"]


def plot_ops(res, out):
    procs = sorted({r["procs"] for r in res["runs"] if r["procs"] <= 2})
    fig, axes = plt.subplots(1, len(procs), figsize=(7 * len(procs), 5), squeeze=False)
    for ax, p in zip(axes[0], procs):
        runs = ok_runs(res, p)
        width = 0.8 / max(len(runs), 1)
        for i, r in enumerate(runs):
            xs, ys = [], []
            for j, ph in enumerate(PHASES):
                v = rate(r, ph)
                if v:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(v)
            ax.bar(xs, ys, width, label=r["label"], color=COLORS.get(r["system"]))
        ax.set_yscale("log")
        ax.set_xticks(range(len(PHASES)), PHASES)
        ax.set_ylabel("ops/s (all processes)")
        ax.set_title(f"{p} process{'es' if p > 1 else ''}")
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(
        f"Shoal and peers, {res['keys']:,} keys of 16 B, 16-byte values, PUT in {res['put_order']} order, "
        f"median of {res.get('repeats', 1)} ({res['date']})"
    )
    fig.tight_layout()
    fig.savefig(f"{out}-ops.png", dpi=110)
    plt.close(fig)


def plot_ratio(res, out):
    peers = [s for s in TARGETS if any(r["system"] == s and not r["skipped"] for r in res["runs"])]
    if not peers:
        return
    fig, axes = plt.subplots(1, len(peers), figsize=(4.2 * len(peers), 4.5), squeeze=False)
    for ax, peer in zip(axes[0], peers):
        runs = [r for r in res["runs"] if r["system"] == peer and not r["skipped"] and is_main(res, r)]
        width = 0.8 / max(len(runs), 1)
        for i, r in enumerate(runs):
            xs, ys = [], []
            for j, ph in enumerate(["PUT", "GET", "MIX"]):
                v = r["phases"].get(ph, {}).get("shoal_ratio")
                if v:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(v)
            ax.bar(xs, ys, width, label=f"{r['procs']} proc", alpha=0.55 + 0.45 * (i == 0),
                   color=COLORS.get(peer))
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.0f}×" if y >= 10 else f"{y:.2g}×", (x, y), ha="center", va="bottom", fontsize=7)
        ax.axhline(TARGETS[peer], color="black", ls="--", lw=1, label=f"target {TARGETS[peer]:g}×")
        ax.axhline(1.0, color="gray", lw=0.6)
        ax.set_yscale("log")
        ax.set_xticks(range(3), ["PUT", "GET", "MIX"])
        ax.set_title(f"Shoal / {runs[0]['label']}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.suptitle(f"Shoal / peer, same run ({res['keys']:,} keys); above 1 = Shoal faster")
    fig.tight_layout()
    fig.savefig(f"{out}-ratio.png", dpi=110)
    plt.close(fig)


def plot_bytes(res, out):
    seen, names, vals, cols = set(), [], [], []
    for r in sorted(res["runs"], key=lambda r: r["procs"]):
        if r["skipped"] or r["bytes_per_entry"] is None or r["system"] in seen or not is_main(res, r):
            continue
        seen.add(r["system"])
        names.append(r["label"])
        vals.append(r["bytes_per_entry"])
        cols.append(COLORS.get(r["system"]))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(names) + 1.5))
    ax.barh(names, vals, color=cols)
    for i, v in enumerate(vals):
        ax.annotate(f"{v:.1f}", (v, i), va="center", fontsize=8)
    ax.axvline(32, color="black", ls=":", lw=1, label="key + value = 32 B")
    ax.invert_yaxis()
    ax.set_xlabel("bytes per entry after PUT (1 process)")
    ax.legend(fontsize=8)
    ax.set_title(f"Memory per entry, {res['keys']:,} keys")
    fig.tight_layout()
    fig.savefig(f"{out}-bytes.png", dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        res = json.load(f)
    plot_ops(res, sys.argv[2])
    plot_ratio(res, sys.argv[2])
    plot_bytes(res, sys.argv[2])
    print(f"charts: {sys.argv[2]}-ops.png, -ratio.png, -bytes.png")


if __name__ == "__main__":
    main()
