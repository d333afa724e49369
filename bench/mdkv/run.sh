#!/usr/bin/env bash
# mem_meta_kv_benchmark reproduced: Shoal (`shoal bench --format mdtest`, one shared map
# and one map per thread) beside the in-memory maps that benchmark measured, in one run,
# with the same keys, counts, threads, pinning and rounds:
#   std::unordered_map, one per thread (its baseline) and one behind a mutex shared by all
#   threads; absl::flat_hash_map, one per thread (bench/mdkv/maps.cc, C++);
#   hashbrown, one per thread, and dashmap, shared (crates/shoal-bench/src/bin/mdkv-maps.rs).
# Phases: PUT, GET (insertion order), GET_RAND (random order), DEL; i32 values.
#
#   bash bench/mdkv/run.sh [--keys-per-worker 10M] [--workers 1,2] [--keys-pattern seq|rand]
#                          [--rounds 3] [--pin -1|START] [--out docs/benchmarks/mem-meta-kv.md]
#                          [--no-chart] [--append]
#
# Installs what it lacks (g++ and Debian's libabsl-dev with apt-get; matplotlib from PyPI in
# a venv, target/compare-venv, for the chart), builds, runs every system for every worker
# count, and writes the report (tables, target ratios, chart next to it as .png). The raw
# results (one JSON object per system and worker count) are kept in target/mdkv/; with
# --append a run adds to the last one's (e.g. another worker count with other settings)
# and the report covers both.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PER=10M
WORKERS=1,2
PATTERN=seq
ROUNDS=3
PIN=-1
OUT=docs/benchmarks/mem-meta-kv.md
CHART=1
APPEND=
while [ $# -gt 0 ]; do
    case "$1" in
        --keys-per-worker) PER=$2; shift 2 ;;
        --workers) WORKERS=$2; shift 2 ;;
        --keys-pattern) PATTERN=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --pin) PIN=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --no-chart) CHART=; shift ;;
        --append) APPEND=1; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$PATTERN" in seq|rand) ;; *) echo "run.sh: --keys-pattern is seq or rand" >&2; exit 2 ;; esac
per=$(python3 - "$PER" <<'PY'
import sys
s = sys.argv[1].strip().replace("_", "").replace(",", "")
m = {"k": 10**3, "K": 10**3, "m": 10**6, "M": 10**6, "g": 10**9, "G": 10**9}
try:
    n = int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s)
except (ValueError, IndexError):
    sys.exit(f"run.sh: --keys-per-worker {sys.argv[1]!r} is not a count (examples: 10M, 20000)")
if n < 1:
    sys.exit("run.sh: --keys-per-worker must be at least 1")
print(n)
PY
)
IFS=, read -r -a wlist <<<"$WORKERS"
for w in "${wlist[@]}"; do
    [[ "$w" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --workers takes counts like 1,2,4" >&2; exit 2; }
done

# Build dependencies, by name, only when missing.
missing=()
command -v g++ >/dev/null || missing+=(g++)
[ -e /usr/include/absl/container/flat_hash_map.h ] || missing+=(libabsl-dev)
command -v pkg-config >/dev/null || missing+=(pkg-config)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$TARGET/mdkv
mkdir -p "$WORK"
cargo build --release --locked -p shoal-cli -p shoal-bench --bin shoal --bin mdkv-maps >&2
SHOAL=$TARGET/release/shoal
RMAPS=$TARGET/release/mdkv-maps
CMAPS=$WORK/maps
# shellcheck disable=SC2046
g++ -O3 -std=c++20 -Wall -Wextra -o "$CMAPS" bench/mdkv/maps.cc \
    $(pkg-config --cflags --libs absl_flat_hash_map absl_hash) -lpthread

# The C++ keys must be Shoal's (the vectors of crates/shoal-cli/src/benchkeys.rs).
want='file.mdtest.0.0
file.mdtest.12.123456
file.mdtest.11068231.14131662
file.mdtest.6611818.6180956
file.mdtest.12126993.17484513
636 103 389'
if [ "$("$CMAPS" --selftest)" != "$want" ]; then
    echo "run.sh: bench/mdkv/maps.cc does not make the keys shoal bench makes" >&2
    exit 1
fi

RESULTS=$WORK/results.jsonl
RUNS=$WORK/runs.txt
if [ -z "$APPEND" ] || [ ! -f "$RESULTS" ]; then
    : >"$RESULTS"
    : >"$RUNS"
fi
before=$(wc -l <"$RESULTS")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
for w in "${wlist[@]}"; do
    keys=$((per * w))
    common=(--threads "$w" --keys "$keys" --keys-pattern "$PATTERN" --pin "$PIN" --rounds "$ROUNDS")
    for sys in shoal shoal-private std std-mutex absl hashbrown dashmap; do
        echo "=== $sys, $w worker(s), $keys keys" >&2
        case "$sys" in
            shoal|shoal-private)
                extra=(); [ "$sys" = shoal-private ] && extra=(--private-maps)
                "$SHOAL" bench "${common[@]}" --value-type i32 --format mdtest --json \
                    "${extra[@]}" >"$WORK/one.json"
                python3 - "$sys" "$WORK/one.json" >>"$RESULTS" <<'PY'
import json, sys
v = json.load(open(sys.argv[2]))
name = {"shoal": "Shoal (shared)", "shoal-private": "Shoal (per thread)"}[sys.argv[1]]
put = [p for p in v["phases"] if p["phase"] == "PUT"]
print(json.dumps({
    "system": name, "workers": v["workers"], "keys": v["keys"],
    "keys_pattern": v["keys_pattern"], "pin": v["pin"], "rounds": v["rounds"],
    "phases": [{"phase": "DEL" if p["phase"] == "REMOVE" else p["phase"], "round": p["round"],
                "ops": p["ops"], "seconds": p["seconds"]} for p in v["phases"]],
    "memory_bytes": max(p["resident_bytes"] for p in put) - v["resident_before"],
    "entries": put[0]["entries"],
    "failed_checks": sum(p["failed_checks"] for p in v["phases"]),
}))
PY
                ;;
            std|std-mutex|absl) "$CMAPS" --map "$sys" "${common[@]}" >>"$RESULTS" ;;
            hashbrown|dashmap) "$RMAPS" --map "$sys" "${common[@]}" >>"$RESULTS" ;;
        esac
    done
done
got=$(wc -l <"$RESULTS")
if [ "$got" -ne $((before + 7 * ${#wlist[@]})) ]; then
    echo "run.sh: $((got - before)) results from this run, expected $((7 * ${#wlist[@]}))" >&2
    exit 1
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
secs=$(($(date +%s) - t0))

PY=python3
if [ -n "$CHART" ]; then
    VENV=$TARGET/compare-venv
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    if "$VENV/bin/python" -m pip install --quiet -r bench/requirements-compare.txt; then
        PY=$VENV/bin/python
    else
        echo "run.sh: matplotlib did not install; the report has no chart" >&2
        CHART=
    fi
fi
cmd="bash bench/mdkv/run.sh --keys-per-worker $PER --workers $WORKERS --keys-pattern $PATTERN --rounds $ROUNDS --pin $PIN${APPEND:+ --append}"
printf '%s\t%s\t%s\t%s\n' "$cmd" "$load_before" "$load_after" "$secs" >>"$RUNS"
"$PY" bench/mdkv/report.py --results "$RESULTS" --runs "$RUNS" --out "$OUT" ${CHART:+--chart}
echo "wrote $OUT" >&2
