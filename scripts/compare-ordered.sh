#!/usr/bin/env bash
# Ordered maps against LMDB and libmdbx, in one command: `shoal-compare --kind ordered`
# (LOAD in random order, GET, range scans of 100 entries and of the whole map in both
# directions, one put per transaction, libmdbx's CRUD transaction mix, bytes per entry; 1 and
# 2 processes; 16- and 100-byte values; sorted LOAD as separate rows), with the ratios
# Shoal / peer of the same run and the targets of the ordered-map issue.
#
#   bash scripts/compare-ordered.sh [--keys N] [more options, see
#                                    target/release/shoal-compare --kind ordered --help]
#
# Writes docs/benchmarks/ordered-N.md (the tables) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TERM_COLOR=never

keys=1000000
args=("$@")
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

bash scripts/install-build-deps.sh
cargo build --release --locked -p shoal-compare
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/shoal-compare
mkdir -p docs/benchmarks
"$BIN" --kind ordered --md "docs/benchmarks/ordered-$keys.md" \
    --repro "bash scripts/compare-ordered.sh $*" "$@" >/dev/null
cat "docs/benchmarks/ordered-$keys.md"
