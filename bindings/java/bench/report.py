"""Summarises the JMH JSON files of bindings/java/bench/run.sh as the tables of docs/benchmarks/java.md."""
import glob
import json
import os
import sys

raw = sys.argv[1]


def load(label):
    path = os.path.join(raw, f"java-{label}.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def rows(*labels):
    out = {}
    for label in labels:
        for r in load(label):
            name = r["benchmark"].rsplit(".", 1)[1]
            p = r.get("params", {})
            out[(name, p.get("impl"), p.get("keys"))] = r["primaryMetric"]
    return out


for jdk in ("17", "25"):
    t = rows(f"thrpt-jdk{jdk}", f"thrpt-chronicle-jdk{jdk}")
    backend = "JNI" if jdk == "17" else "FFM"
    print(f"\n### Throughput, one thread, JDK {jdk} (Shoal via {backend}), million ops/s\n")
    print("| op | keys | Shoal | Shoal fixed | Chronicle Map | ConcurrentHashMap | Shoal / Chronicle | fixed / Chronicle | Shoal / CHM |")
    print("|---|---|---|---|---|---|---|---|---|")
    for op in ("get", "put", "mix98get2put"):
        for keys in sorted({k[2] for k in t}, key=int):
            g = lambda impl: t.get((op, impl, keys), {}).get("score")
            e = lambda impl: t.get((op, impl, keys), {}).get("scoreError")
            s, f, c, h = g("shoal"), g("shoal-fixed"), g("chronicle"), g("chm")
            fmt = lambda v, impl: "-" if v is None else f"{v:.2f} ± {e(impl):.2f}"
            ratio = lambda a, b: "-" if a is None or b is None else f"{a / b:.2f}×"
            print(f"| {op} | {int(keys):,} | {fmt(s, 'shoal')} | {fmt(f, 'shoal-fixed')} | {fmt(c, 'chronicle')} | {fmt(h, 'chm')} | {ratio(s, c)} | {ratio(f, c)} | {ratio(s, h)} |")

t = rows("sample-jdk25", "sample-chronicle-jdk25")
print("\n### Latency, JDK 25, ns (JMH sample mode)\n")
print("| op | keys | map | p50 | p99 | p99.99 |")
print("|---|---|---|---|---|---|")
for (op, impl, keys), m in sorted(t.items(), key=lambda x: (x[0][0], int(x[0][2]), x[0][1])):
    pc = m.get("scorePercentiles", {})
    print(f"| {op} | {int(keys):,} | {impl} | {pc.get('50.0', 0):.0f} | {pc.get('99.0', 0):.0f} | {pc.get('99.99', 0):.0f} |")

print("\n### Open an existing store and read one key, fresh JVM, ms\n")
print("| JDK | map | keys | library already loaded | mean of 5 | min | max |")
print("|---|---|---|---|---|---|---|")
for jdk, suffix in (("25 (FFM)", ""), ("17 (JNI)", "-jdk17")):
    for label in ("open-shoal" + suffix, "open-chronicle" + suffix):
        for r in load(label):
            m = r["primaryMetric"]
            data = [x for fork in m["rawData"] for x in fork]
            p = r["params"]
            print(f"| {jdk} | {p['impl']} | {int(p['keys']):,} | {'yes' if p.get('warm') == 'true' else 'no'} | {m['score']:.1f} | {min(data):.1f} | {max(data):.1f} |")

print("\n### Two JVMs at once on one file, JDK 25, million ops/s (sum of both; each)\n")
print("| op | Shoal | Shoal fixed | Chronicle Map | Shoal / Chronicle | fixed / Chronicle |")
print("|---|---|---|---|---|---|")
for op in ("get", "put", "mix98get2put"):
    res = {}
    for impl in ("shoal", "shoal-fixed", "chronicle"):
        scores = [r["primaryMetric"]["score"] for n in (1, 2) for r in load(f"twojvm-{impl}-{op}-{n}")]
        res[impl] = scores
    cell = lambda s: "-" if len(s) != 2 else f"{sum(s):.2f} ({s[0]:.2f} + {s[1]:.2f})"
    ratio = lambda a, b: "-" if len(a) != 2 or len(b) != 2 else f"{sum(a) / sum(b):.2f}×"
    print(f"| {op} | {cell(res['shoal'])} | {cell(res['shoal-fixed'])} | {cell(res['chronicle'])} | {ratio(res['shoal'], res['chronicle'])} | {ratio(res['shoal-fixed'], res['chronicle'])} |")
