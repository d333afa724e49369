#!/usr/bin/env bash
# Installs (with apt-get, only when missing) what building the whole workspace needs beyond
# Rust: a C compiler (LMDB and libmdbx are compiled from source by their crates) and
# libclang (mdbx-sys generates its bindings with bindgen at build time).
set -euo pipefail
missing=()
command -v cc >/dev/null || missing+=(gcc)
have_clang=
# The C API (libclang.so, libclang-14.so.1, ...), not libclang-cpp, which other packages
# bring and which bindgen cannot use.
for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so*; do
    [ -e "$f" ] && have_clang=1 && break
done
if [ -z "$have_clang" ] && [ -z "${LIBCLANG_PATH:-}" ]; then
    missing+=(libclang-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
