#!/usr/bin/env bash
# Builds the native half of the Java binding into OUT (the Maven build bundles OUT in the
# jar): libshoal_ffi.so, the C ABI, from cargo (release), and libshoaljni.so, the JNI
# shim that Java 17-21 call, from src/main/c with gcc, linked to libshoal_ffi.so with an
# $ORIGIN run path so that the two load from one directory.
#
#   bash build-native.sh OUT [CARGO_TARGET_DIR]
#
# Needs cargo, gcc and a JDK's include/ (JAVA_HOME, or the javac on PATH).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=$1
TARGET=${2:-${CARGO_TARGET_DIR:-$ROOT/target}}
mkdir -p "$OUT"

(cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release --locked -p shoal-ffi --lib --quiet)
# Debug info is most of the file: the jar carries the stripped library (symbols kept).
strip --strip-debug -o "$OUT/libshoal_ffi.so.tmp" "$TARGET/release/libshoal_ffi.so"
mv -f "$OUT/libshoal_ffi.so.tmp" "$OUT/libshoal_ffi.so"

JDK=${JAVA_HOME:-}
if [ -z "$JDK" ]; then
    JDK=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
fi
gcc -O2 -fPIC -shared -std=c11 -Wall -Wextra -Werror \
    -I"$ROOT/crates/shoal-ffi/include" -I"$JDK/include" -I"$JDK/include/linux" \
    -o "$OUT/libshoaljni.so" "$HERE/src/main/c/shoal_jni.c" \
    -L"$OUT" -l:libshoal_ffi.so -Wl,-rpath,'$ORIGIN' -Wl,--no-undefined
