#!/usr/bin/env bash
# Benchmarks of the Python binding against other shared dicts (see bench.py):
#   bash bindings/python/bench/run.sh --keys 100000 [--budget 10] [--only shoal,redis]
# Creates bindings/python/.venv-bench, installs shoal (./bindings/python) and the peers
# from PyPI, redis-server with apt-get if it is missing, and writes
# docs/benchmarks/python-<keys>.md and .png. A peer that cannot be installed is reported
# as skipped, with the reason.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$PWD
VENV=$ROOT/bindings/python/.venv-bench
PYTHON=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/python}
export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
VPY=$VENV/bin/python
FAIL=$(mktemp)
trap 'rm -f "$FAIL"' EXIT

echo "=== installing shoal and matplotlib"
"$VPY" -m pip install --quiet --force-reinstall --no-deps "$ROOT/bindings/python"
"$VPY" -m pip install --quiet matplotlib || echo "matplotlib not installed: no chart"

echo "=== installing peers"
try_pip() { # peer-id package...
    local id=$1
    shift
    local log
    if ! log=$("$VPY" -m pip install --quiet "$@" 2>&1); then
        printf '%s\tpip install %s failed: %s\n' "$id" "$*" "$(echo "$log" | grep -v '^ *$' | tail -1)" >>"$FAIL"
        echo "  $id: install failed"
    fi
}
try_pip lmdb lmdb
try_pip ultradict UltraDict atomics
try_pip shared-memory-dict shared-memory-dict
try_pip diskcache diskcache
try_pip redis redis
if ! command -v redis-server >/dev/null; then
    echo "  redis-server missing: apt-get install redis-server"
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null 2>&1 || true
    fi
    command -v redis-server >/dev/null ||
        printf 'redis\tredis-server is not installed and apt-get install redis-server did not work\n' >>"$FAIL"
fi

echo "=== running"
"$VPY" "$ROOT/bindings/python/bench/bench.py" --install-failures "$FAIL" "$@"
