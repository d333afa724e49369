#!/usr/bin/env bash
# ABI-overhead benchmark: the same puts and gets through the C ABI (bench_c.c, linked to
# libshoal.so) and through the Rust API (src/bin/bench.rs), alternating ROUNDS times in
# one run; prints each round, the median ns per call of each, and the C/Rust ratio.
# Then the same comparison inside one process (the exported functions called directly vs
# the Rust API, in alternating chunks), which load from other processes skews less.
# For load-independent figures, count instructions instead (see README.md):
#   valgrind --tool=callgrind target/release/shoal-ffi-bench-c /dev/shm/x.shoal 20000 1024
#
#   bash crates/shoal-ffi/bench/run.sh [OPS=10000000] [KEYS=65536] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/../../.."
OPS=${1:-10000000} KEYS=${2:-65536} ROUNDS=${3:-3}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
REL="$CARGO_TARGET_DIR/release"
cargo build --release --locked -p shoal-ffi --lib --bin shoal-ffi-bench
# Linked by hand, as crates/shoal-ffi/README.md says (the plain cargo build's SONAME is
# its file name, libshoal_ffi.so).
cc -O2 -std=c11 -Icrates/shoal-ffi/include crates/shoal-ffi/bench/bench_c.c -o "$REL/shoal-ffi-bench-c" \
    -L"$REL" -lshoal_ffi -Wl,-rpath,"$REL"
STORE=/dev/shm/shoal-ffi-bench-$$.shoal
echo "ops=$OPS keys=$KEYS (8-byte keys and values), rounds=$ROUNDS, store in /dev/shm"
c_put=() c_get=() r_put=() r_get=()
for _ in $(seq "$ROUNDS"); do
    c=$("$REL/shoal-ffi-bench-c" "$STORE" "$OPS" "$KEYS")
    r=$("$REL/shoal-ffi-bench" "$STORE" "$OPS" "$KEYS")
    echo "  $c"
    echo "  $r"
    c_put+=("$(sed -E 's/.*put_ns=([0-9.]+).*/\1/' <<<"$c")")
    c_get+=("$(sed -E 's/.*get_ns=([0-9.]+).*/\1/' <<<"$c")")
    r_put+=("$(sed -E 's/.*put_ns=([0-9.]+).*/\1/' <<<"$r")")
    r_get+=("$(sed -E 's/.*get_ns=([0-9.]+).*/\1/' <<<"$r")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cp=$(median "${c_put[@]}") cg=$(median "${c_get[@]}") rp=$(median "${r_put[@]}") rg=$(median "${r_get[@]}")
awk -v cp="$cp" -v cg="$cg" -v rp="$rp" -v rg="$rg" 'BEGIN {
    printf "median ns/call   C ABI   Rust API   C/Rust\n"
    printf "put            %7.1f   %8.1f   %6.3f\n", cp, rp, cp / rp
    printf "get            %7.1f   %8.1f   %6.3f\n", cg, rg, cg / rg
}'
echo
"$REL/shoal-ffi-bench" --interleaved "$STORE" $((OPS / 10)) "$KEYS" $((ROUNDS * 4 + 1))
