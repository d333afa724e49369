#!/usr/bin/env bash
# Instructions per single-key call from Python (see hotpath.py), measured with callgrind:
# the difference of two runs of R1 and R2 rounds over 100,000 keys, per call.
#   bash bindings/python/bench/hotpath.sh [python] [ops...]
# `python` must import the shoal to measure (default: bindings/python/.venv/bin/python).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${1:-$HERE/../.venv/bin/python}
shift || true
OPS=${*:-get getm in put ins del dict_get dict_put}
R1=${R1:-1}
R2=${R2:-3}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
total() { # op rounds
    if ! valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$1.$2" "$PY" "$HERE/hotpath.py" "$1" "$2" \
        >"$OUT/log" 2>&1; then
        cat "$OUT/log" >&2
        return 1
    fi
    grep -E '^totals:' "$OUT/cg.$1.$2" | awk '{print $2}'
}
for op in $OPS; do
    a=$(total "$op" "$R1") || exit 1
    b=$(total "$op" "$R2") || exit 1
    echo "$op: $(((b - a) / ((R2 - R1) * 100000))) instructions per loop iteration"
done
