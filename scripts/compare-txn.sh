#!/usr/bin/env bash
# 2-key transfers in transactions, in one command: `shoal-compare --kind txn` (Shoal's
# multi-key transactions on a fixed-size and a variable-size map against libmdbx and LMDB
# write transactions, one transfer each, and Redis MULTI/EXEC and a Lua script, pipelined;
# 1, 2 and 8 processes), with the ratios Shoal / peer of the same run, the targets of the
# transactions issue, and every system's account sum checked after every row.
#
#   bash scripts/compare-txn.sh [--accounts N] [more options, see
#                                target/release/shoal-compare --kind txn --help]
#
# Installs what it needs when missing (libclang for the libmdbx bindings; redis-server,
# whose rows are reported as failed when it cannot be installed), writes
# docs/benchmarks/txn-N.md (the tables) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TERM_COLOR=never

accounts=1000000
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = --accounts ] && [ $((i + 1)) -lt ${#args[@]} ]; then
        k=${args[$((i + 1))]//[_,]/}
        case $k in
            *[mM]) accounts=$((${k%?} * 1000000)) ;;
            *[kK]) accounts=$((${k%?} * 1000)) ;;
            *) accounts=$k ;;
        esac
    fi
done

bash scripts/install-build-deps.sh
if ! command -v redis-server >/dev/null; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends redis-server >/dev/null; } ||
        echo "redis-server could not be installed: its rows will say so" >&2
fi
cargo build --release --locked -p shoal-compare
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/shoal-compare
mkdir -p docs/benchmarks
"$BIN" --kind txn --md "docs/benchmarks/txn-$accounts.md" \
    --repro "bash scripts/compare-txn.sh $*" "$@" >/dev/null
cat "docs/benchmarks/txn-$accounts.md"
