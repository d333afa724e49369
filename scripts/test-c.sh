#!/usr/bin/env bash
# The C ABI's C/C++ build and tests (crates/shoal-ffi): links a program by hand to the
# library a plain cargo build writes, as the README says; builds libshoal with
# cargo --release through CMake, runs ctest (C API tests against the shared and the
# static library, two processes in C, the C++ wrapper's GoogleTest tests, the
# multi-process counter) plain and again with AddressSanitizer + UBSan, then installs
# to a temporary prefix and builds consumers with find_package(Shoal) and pkg-config.
# Installs what it needs (cmake, a C/C++ compiler, pkg-config, GoogleTest) with apt-get.
#
# Environment: CARGO_TARGET_DIR (default target/), SHOAL_C_BUILD_DIR (default
# $CARGO_TARGET_DIR/cmake-c), JOBS (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR="$ROOT/$CARGO_TARGET_DIR" ;; esac
BUILD="${SHOAL_C_BUILD_DIR:-$CARGO_TARGET_DIR/cmake-c}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
export RUST_BACKTRACE=0 # the panic-barrier tests panic on purpose; keep the log short
step() { printf '\n=== %s\n' "$*"; }

step "tools"
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v gcc >/dev/null || missing+=(gcc)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
command -v pkg-config >/dev/null || missing+=(pkg-config)
if [ ! -f /usr/include/gtest/gtest.h ] || ! ls /usr/lib/*/cmake/GTest/GTestConfig.cmake \
    /usr/lib/cmake/GTest/GTestConfig.cmake >/dev/null 2>&1; then
    missing+=(libgtest-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
cmake --version | head -1
gcc --version | head -1

step "link by hand, as crates/shoal-ffi/README.md says"
# A plain cargo build, then cc -lshoal_ffi: the program must find the library at run time
# (the library's SONAME is its file name), through its rpath or LD_LIBRARY_PATH.
REL="$CARGO_TARGET_DIR/release"
HAND="$BUILD/by-hand"
mkdir -p "$HAND"
env -u SHOAL_FFI_SONAME cargo build --release --locked -p shoal-ffi --lib
cc crates/shoal-ffi/tests/consumer/by_hand.c -I crates/shoal-ffi/include -L "$REL" -lshoal_ffi \
    -Wl,-rpath,"$REL" -o "$HAND/by_hand"
"$HAND/by_hand" "$HAND/by-hand.shoal"
cc crates/shoal-ffi/tests/consumer/by_hand.c -I crates/shoal-ffi/include -L "$REL" -lshoal_ffi \
    -o "$HAND/by_hand_ld"
LD_LIBRARY_PATH="$REL" "$HAND/by_hand_ld" "$HAND/by-hand.shoal"

step "build (plain)"
cmake -S crates/shoal-ffi -B "$BUILD/plain" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSHOAL_CARGO_TARGET_DIR="$CARGO_TARGET_DIR" >/dev/null
cmake --build "$BUILD/plain" -j "$JOBS"

step "ctest (plain)"
(cd "$BUILD/plain" && ctest --output-on-failure -j "$JOBS")

step "build (AddressSanitizer + UndefinedBehaviorSanitizer)"
cmake -S crates/shoal-ffi -B "$BUILD/asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHOAL_SANITIZE=ON \
    -DSHOAL_CARGO_TARGET_DIR="$CARGO_TARGET_DIR" >/dev/null
cmake --build "$BUILD/asan" -j "$JOBS"

step "ctest (sanitized)"
# Leak checking needs ptrace-like access that some sandboxes deny: probe it first.
probe="$BUILD/asan/lsan-probe"
printf 'int main(void){return 0;}\n' | gcc -x c -fsanitize=address - -o "$probe"
if ASAN_OPTIONS=detect_leaks=1 "$probe" >/dev/null 2>&1; then leaks=1; else
    leaks=0
    echo "note: LeakSanitizer does not work here; running without leak checks"
fi
export ASAN_OPTIONS="detect_leaks=$leaks:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$BUILD/asan" && ctest --output-on-failure -j "$JOBS")
unset ASAN_OPTIONS UBSAN_OPTIONS

step "install, then use it: find_package(Shoal) and pkg-config"
PREFIX="$BUILD/prefix"
rm -rf "$PREFIX" "$BUILD/consumer"
cmake --install "$BUILD/plain" --prefix "$PREFIX" >/dev/null
cmake -S crates/shoal-ffi/tests/consumer -B "$BUILD/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$BUILD/consumer" -j "$JOBS" >/dev/null
"$BUILD/consumer/consumer_shared"
"$BUILD/consumer/consumer_static"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
echo "pkg-config --cflags --libs shoal: $(pkg-config --cflags --libs shoal)"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Werror crates/shoal-ffi/tests/consumer/pkgconfig.c -o "$BUILD/consumer/pkgconfig" \
    $(pkg-config --cflags --libs shoal) -Wl,-rpath,"$(pkg-config --variable=libdir shoal)"
"$BUILD/consumer/pkgconfig"

echo
echo "C/C++ tests passed (plain and sanitized); install checked"
