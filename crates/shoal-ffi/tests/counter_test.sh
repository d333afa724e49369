#!/bin/sh
# Runs PROCS `counter` processes at once, each adding N, and checks the total.
# Usage: counter_test.sh COUNTER_BIN PROCS N
set -eu
bin=$1 procs=$2 n=$3
store=/tmp/shoal-counter-test-$$.shoal
rm -f "$store"
trap 'rm -f "$store"' EXIT
pids=
i=0
while [ "$i" -lt "$procs" ]; do
    "$bin" "$store" "$n" >/dev/null &
    pids="$pids $!"
    i=$((i + 1))
done
for p in $pids; do wait "$p"; done
"$bin" "$store" 0 --expect $((procs * n))
