#!/usr/bin/env bash
# The comparison suite, in one command: Shoal against hashbrown (in-process), LMDB, libmdbx
# and Redis on the same workloads (PUT, GET, MIX 98/2, REMOVE; 1 and 2 processes; Shoal
# also with 8), with the ratio Shoal / peer measured in the same run.
#
#   bash scripts/compare.sh [--readme] [--keys N] [more shoal-compare options, see --help]
#
# --readme also replaces the README's comparison section (between the compare:begin and
# compare:end markers) with this run's tables and ops chart.
#
# Installs what it needs when missing (with apt-get: libclang for the libmdbx bindings,
# redis-server; a Python venv in target/compare-venv with bench/requirements-compare.txt),
# builds crates/shoal-compare, runs it, and writes
#   docs/benchmarks/compare-N.md     the tables (ops/s, Shoal / peer, the targets)
#   docs/benchmarks/compare-N.json   the raw figures
#   docs/benchmarks/compare-N-*.png  the charts (bench/plot_compare.py)
# A peer that cannot be installed or started is reported as "skipped: <why>" in the table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TERM_COLOR=never
export PIP_DISABLE_PIP_VERSION_CHECK=1
step() { printf '\n=== %s\n' "$*" >&2; }

# N as the binary reads it (1M, 10_000_000, 500k): needed for the file names.
keys=1000000
readme=
args=()
for a in "$@"; do
    if [ "$a" = --readme ]; then readme=1; else args+=("$a"); fi
done
set -- ${args[@]+"${args[@]}"}
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = --keys ] && [ $((i + 1)) -lt ${#args[@]} ]; then
        k=${args[$((i + 1))]//[_,]/}
        case $k in
            *[mM]) keys=$((${k%?} * 1000000)) ;;
            *[kK]) keys=$((${k%?} * 1000)) ;;
            *) keys=$k ;;
        esac
    fi
done

step "build dependencies"
bash scripts/install-build-deps.sh
if ! command -v redis-server >/dev/null; then
    echo "installing redis-server" >&2
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends redis-server >/dev/null; }; then
        echo "redis-server could not be installed: Redis will be reported as skipped" >&2
    fi
fi
# Debian's package starts a server of its own: the suite starts its own on a Unix socket.

step "build (release)"
cargo build --release --locked -p shoal-compare
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/shoal-compare

OUT=docs/benchmarks
mkdir -p "$OUT"
step "run ($keys keys)"
rc=0
"$BIN" --json --md "$OUT/compare-$keys.md" --repro "bash scripts/compare.sh $*" "$@" \
    >"$OUT/compare-$keys.json" || rc=$?
if [ ! -s "$OUT/compare-$keys.json" ]; then
    echo "shoal-compare failed (exit $rc)" >&2
    exit 1
fi

step "charts"
VENV=${CARGO_TARGET_DIR:-$ROOT/target}/compare-venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if "$VENV/bin/python" -m pip install --quiet -r bench/requirements-compare.txt; then
    "$VENV/bin/python" bench/plot_compare.py "$OUT/compare-$keys.json" "$OUT/compare-$keys"
else
    echo "matplotlib could not be installed: no charts" >&2
fi
if [ -n "$readme" ]; then
    step "README"
    python3 bench/update_readme.py "$OUT/compare-$keys.md"
fi
cat "$OUT/compare-$keys.md"
exit $rc
