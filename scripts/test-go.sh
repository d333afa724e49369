#!/usr/bin/env bash
# Tests of the Go binding (bindings/go): builds libshoal with cargo (release), writes a
# pkg-config file for it under the cargo target dir (the binding finds the header and
# the library through pkg-config, name "shoal"), then runs gofmt, go vet and
# go test -race (the randomized model test, the multi-process counters with a worker
# killed by SIGKILL, interoperation with Python when bindings/python/.venv exists) and
# compiles the benchmarks' module.
#
#   bash scripts/test-go.sh [go test args...]
#
# Needs: Rust (cargo), Go >= 1.24 (on PATH, or in /usr/local/go/bin), a C compiler,
# pkg-config. Modules come from the Go proxy, pinned by the committed go.sum files.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR="$ROOT/$CARGO_TARGET_DIR" ;; esac
export CARGO_TERM_COLOR=never
export RUST_BACKTRACE=0 # the panic-barrier test panics on purpose; keep the log short
export GOFLAGS="-mod=readonly -buildvcs=false"
step() { printf '\n=== %s\n' "$*"; }

step "tools"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
go version
# pkg-config finds the library; liblmdb-dev is the LMDB the benchmarks compare with.
missing=()
command -v pkg-config >/dev/null || missing+=(pkg-config)
[ -f /usr/include/lmdb.h ] || missing+=(liblmdb-dev)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

step "libshoal (cargo build --release -p shoal-ffi)"
cargo build --release --locked -p shoal-ffi --lib
REL="$CARGO_TARGET_DIR/release"
PC_DIR="$CARGO_TARGET_DIR/go/pkgconfig"
mkdir -p "$PC_DIR"
# The library of a plain cargo build is libshoal_ffi.so; its directory goes in the rpath
# so that test binaries (and the workers they start) find it without LD_LIBRARY_PATH.
cat > "$PC_DIR/shoal.pc" <<PC
Name: shoal
Description: Shoal's C ABI, from the cargo build of this checkout
Version: 0
Libs: -L$REL -Wl,-rpath,$REL -lshoal_ffi
Cflags: -I$ROOT/crates/shoal-ffi/include
PC
export PKG_CONFIG_PATH="$PC_DIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pkg-config --cflags --libs shoal

cd "$ROOT/bindings/go"
step "gofmt"
unformatted=$(gofmt -l . )
if [ -n "$unformatted" ]; then
    echo "not gofmt-formatted:" >&2
    echo "$unformatted" >&2
    exit 1
fi

step "go vet (binding, benchmarks)"
go vet ./...
(cd bench && go vet ./...)

step "go test -race"
go test -race -count=1 "$@" ./...

step "benchmarks compile and run once (go test -run '^$' -bench . -benchtime 1x)"
(cd bench && go test -count=1 -run '^$' -bench . -benchtime 1x ./... >/dev/null)
echo "ok"
