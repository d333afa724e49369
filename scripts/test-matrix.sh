#!/usr/bin/env bash
# The cross-language matrix: one store opened at the same time by a worker process in
# each language - Rust (the engine's API), C (shoal.h), C++ (shoal.hpp), Python, Java on
# JDK 22+ (FFM) and on JDK 17 (JNI), Go and Node - each through its own binding. The
# workers (tests/matrix/, and crates/shoal/examples/matrix_worker.rs) all follow one
# protocol:
#
#   1. check the golden vectors of tests/vectors/golden.tsv (FORMAT.md, "Golden vectors")
#      with an XXH3 implementation of the language's own ecosystem;
#   2. open the store and, creating them with recorded types if nobody has yet, the maps
#      mx_var (variable: utf8 -> utf8), mx_fixed (fixed 16 -> 8 bytes: bytes -> f64),
#      mx_inline (fixed 8 -> 8, an inline map: u64 -> i64), mx_count_fixed (fixed u64 ->
#      i64), mx_count_var (variable utf8 -> i64) and mx_sync (utf8 -> utf8);
#   3. barrier: set "ready/LANG" in mx_sync and wait for every language's;
#   4. write KEYS keys of its own in each of mx_var ("LANG/i" -> "LANG:i:é€"), mx_fixed
#      (LANG padded with '.' to 10 bytes + i in 6 digits -> 1000 id + i + 0.25) and
#      mx_inline ((id + 1) << 32 | i -> -(1000 id + i) - 1), id being the language's
#      index in LANGS; then ADDS atomic adds of 1, to mx_count_fixed key (r mod 4) and to
#      mx_count_var "total"; then set "done/LANG";
#   5. read every language's keys in the three maps (waiting, bounded, for each to
#      appear) and compare their values; Java, Python and Node read them through maps
#      opened without codecs, whose codecs come from the types recorded in the file;
#   6. once every language is done, check the counters' exact totals (ADDS x languages).
#
# Any mismatch makes the worker exit non-zero with its language, the map, the other
# language and the key; this script then prints that worker's output and fails. Every
# wait is bounded (180 s in the workers, 300 s per process here).
#
#   bash scripts/test-matrix.sh            # KEYS=200 ADDS=2000 (MATRIX_KEYS, MATRIX_ADDS)
#
# It reuses what the binding scripts built when it is up to date (the Python venv of
# scripts/test-python.sh, the jar of scripts/test-java.sh, the addon of
# scripts/test-node.sh) and builds what is missing. Needs what those scripts need, plus
# libxxhash-dev (installed with apt-get if missing). Pinned: tests/matrix/requirements.txt
# (Python), tests/matrix/go/go.sum, tests/matrix/node/package-lock.json, the Java hash
# library's version below.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
NODE_CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/node}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR="$ROOT/$CARGO_TARGET_DIR" ;; esac
export CARGO_TERM_COLOR=never
export GOFLAGS="-mod=readonly -buildvcs=false"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
export PIP_DISABLE_PIP_VERSION_CHECK=1
OUT=$CARGO_TARGET_DIR/matrix
KEYS=${MATRIX_KEYS:-200}
ADDS=${MATRIX_ADDS:-2000}
# Java's XXH3 for the golden vectors (Maven Central).
ZAH=net.openhft:zero-allocation-hashing:0.16
LANGS=rust,c,cpp,python,java,java17,go,node
mkdir -p "$OUT"
step() { printf '\n=== %s\n' "$*"; }

step "tools"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
missing=()
[ -f /usr/include/xxhash.h ] || missing+=(libxxhash-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v mvn >/dev/null || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
# The JDKs, found as scripts/test-java.sh finds them.
jdk_feature() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
JDK17=${JDK17_HOME:-}
JDK25=${JDK25_HOME:-}
for d in /usr/lib/jvm/*/; do
    d=${d%/}
    [ -x "$d/bin/javac" ] || continue
    f=$(jdk_feature "$d")
    case "$f" in
        17) [ -n "$JDK17" ] || JDK17=$d ;;
        *) if [ "${f%%.*}" -ge 22 ] 2>/dev/null; then
               if [ -z "$JDK25" ] || [ "$f" -gt "$(jdk_feature "$JDK25")" ]; then JDK25=$d; fi
           fi ;;
    esac
done
[ -n "$JDK17" ] || { echo "no JDK 17 found (set JDK17_HOME)" >&2; exit 1; }
[ -n "$JDK25" ] || { echo "no JDK 22+ found (set JDK25_HOME)" >&2; exit 1; }
go version
node --version
echo "JDK 17: $JDK17; JDK 22+: $JDK25"

# Whether $1 is missing or older than anything under the paths after it.
stale() {
    local out=$1
    shift
    [ ! -e "$out" ] || [ -n "$(find "$@" -newer "$out" -type f -print -quit 2>/dev/null)" ]
}

step "libshoal and the Rust worker (cargo build --release)"
cargo build --release --locked -p shoal-ffi --lib --quiet
cargo build --release --locked -p shoal --example matrix_worker --quiet
REL=$CARGO_TARGET_DIR/release

step "C and C++ workers"
gcc -std=c11 -O1 -Wall -Werror -D_POSIX_C_SOURCE=200809L -I crates/shoal-ffi/include \
    -o "$OUT/c-worker" tests/matrix/worker.c -L "$REL" -l:libshoal_ffi.so -lxxhash -Wl,-rpath,"$REL"
g++ -std=c++17 -O1 -Wall -Werror -I crates/shoal-ffi/include \
    -o "$OUT/cpp-worker" tests/matrix/worker.cpp -L "$REL" -l:libshoal_ffi.so -lxxhash -Wl,-rpath,"$REL"

step "Python: the binding's venv (bindings/python/.venv) and xxhash"
VENV=$ROOT/bindings/python/.venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
INSTALLED=$("$VENV/bin/python" -c 'import shoal; print(shoal.__file__)' 2>/dev/null || true)
if [ -z "$INSTALLED" ] || stale "$INSTALLED" crates/shoal/src bindings/python/src bindings/python/python; then
    CARGO_TARGET_DIR=$CARGO_TARGET_DIR/python \
        "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$ROOT/bindings/python"
fi
"$VENV/bin/python" -m pip install --quiet -r tests/matrix/requirements.txt

step "Java: the jar (bindings/java), the hash library, the worker"
JAR=$ROOT/bindings/java/target/shoal-0.1.0.jar
if stale "$JAR" bindings/java/src bindings/java/pom.xml crates/shoal/src crates/shoal-ffi/src; then
    (cd bindings/java && JAVA_HOME=$JDK25 mvn -B -q -ntp -Dstyle.color=never package -DskipTests \
        -Dshoal.cargo.target="$CARGO_TARGET_DIR")
fi
ZAH_JAR=$OUT/java-lib/zero-allocation-hashing-${ZAH##*:}.jar
if [ ! -f "$ZAH_JAR" ]; then
    JAVA_HOME=$JDK25 mvn -B -q -ntp -Dstyle.color=never dependency:copy -Dartifact="$ZAH" \
        -DoutputDirectory="$OUT/java-lib"
fi
JCP=$JAR:$ZAH_JAR
"$JDK17/bin/javac" --release 17 -cp "$JCP" -d "$OUT/java" tests/matrix/Worker.java

step "Go worker (tests/matrix/go)"
PC_DIR=$CARGO_TARGET_DIR/go/pkgconfig
mkdir -p "$PC_DIR"
cat > "$PC_DIR/shoal.pc" <<PC
Name: shoal
Description: Shoal's C ABI, from the cargo build of this checkout
Version: 0
Libs: -L$REL -Wl,-rpath,$REL -lshoal_ffi
Cflags: -I$ROOT/crates/shoal-ffi/include
PC
(cd tests/matrix/go && PKG_CONFIG_PATH="$PC_DIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" go build -o "$OUT/go-worker" .)

step "Node: the addon (bindings/node) and the worker's packages"
if stale "$ROOT/bindings/node/dist/index.js" bindings/node/lib bindings/node/src crates/shoal/src; then
    (cd bindings/node && CARGO_TARGET_DIR=$NODE_CARGO_TARGET_DIR npm ci --no-audit --no-fund --loglevel=error)
fi
(cd tests/matrix/node && npm ci --no-audit --no-fund --loglevel=error)

step "the matrix: $LANGS on one store, $KEYS keys per map each, $ADDS adds each"
STORE=/dev/shm/shoal-matrix-$$.shoal
LOGS=$OUT/logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
rm -f "$STORE"
trap 'rm -f "$STORE"' EXIT
VEC=$ROOT/tests/vectors/golden.tsv
cmd_of() {
    case "$1" in
        rust) echo "$REL/examples/matrix_worker" ;;
        c) echo "$OUT/c-worker" ;;
        cpp) echo "$OUT/cpp-worker" ;;
        python) echo "$VENV/bin/python $ROOT/tests/matrix/worker.py" ;;
        java) echo "$JDK25/bin/java --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -cp $JCP:$OUT/java Worker" ;;
        java17) echo "$JDK17/bin/java -cp $JCP:$OUT/java Worker" ;;
        go) echo "$OUT/go-worker" ;;
        node) echo "node $ROOT/tests/matrix/node/worker.js" ;;
    esac
}
declare -A PIDS
IFS=, read -ra ALL <<<"$LANGS"
# Started together; the workers' own barrier (step 3) makes them overlap whatever each
# one's start-up costs.
for lang in "${ALL[@]}"; do
    # shellcheck disable=SC2046
    timeout -k 10 300 $(cmd_of "$lang") "$STORE" "$lang" "$LANGS" "$KEYS" "$ADDS" "$VEC" \
        >"$LOGS/$lang.log" 2>&1 &
    PIDS[$lang]=$!
done
failed=()
for lang in "${ALL[@]}"; do
    if wait "${PIDS[$lang]}"; then
        grep -h "^matrix $lang: ok" "$LOGS/$lang.log" || { failed+=("$lang"); }
    else
        failed+=("$lang")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    for lang in "${failed[@]}"; do
        echo
        echo "--- matrix: $lang FAILED (exit or no ok line); its output:" >&2
        cat "$LOGS/$lang.log" >&2
    done
    echo
    echo "matrix: $(( ${#ALL[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed (${failed[*]})" >&2
    exit 1
fi
echo
echo "matrix: ${#ALL[@]} passed, 0 failed"
