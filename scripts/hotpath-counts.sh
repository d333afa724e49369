#!/usr/bin/env bash
# Instructions per operation on the engine's hot paths (crates/shoal/examples/hot_phases.rs),
# counted by callgrind: repeatable for the same binary whatever else the machine does, so
# that a change to the engine's structure can show it left them where they were.
# Usage: bash scripts/hotpath-counts.sh [KEYS]   (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
keys="${1:-100000}"
cargo build --release --locked -p shoal --example hot_phases >&2
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" target/release/examples/hot_phases "$keys" 2>/dev/null
callgrind_annotate --inclusive=yes "$out" 2>/dev/null | python3 -c '
import re, sys
keys = int(sys.argv[1])
passes = {"var_put_new_length": 2}
rows = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*hot_phases::(\w+)", line)
    if m and m.group(2) != "main":
        rows.setdefault(m.group(2), int(m.group(1).replace(",", "")))
print("%-22s %16s   (%d keys)" % ("phase", "instructions/op", keys))
for name, total in sorted(rows.items()):
    print("%-22s %16.1f" % (name, total / keys / passes.get(name, 1)))
' "$keys"
