#!/usr/bin/env bash
# Builds the native half of the Java binding into OUT (the Maven build bundles OUT in the
# jar): libshoal_ffi.so, the C ABI, from cargo (release), and libshoaljni.so, the JNI
# shim that Java 17-21 call, from src/main/c with gcc, linked to libshoal_ffi.so with an
# $ORIGIN run path so that the two load from one directory; and native.index, a line per
# library (SHA-256, size, name) for the loader.
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

# The index the loader reads instead of the libraries' bytes: a fresh JVM hashes a few
# lines, not megabytes in the interpreter (about 90 ms), to name its cache directory and
# to know whether a library there is already whole.
(cd "$OUT" && for f in libshoal_ffi.so libshoaljni.so; do
    printf '%s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
done) > "$OUT/native.index.tmp"
mv -f "$OUT/native.index.tmp" "$OUT/native.index"
