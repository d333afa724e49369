#!/usr/bin/env bash
# Tests of the Java binding (bindings/java): builds the jar with Maven (which runs cargo
# for libshoal_ffi.so and gcc for the JNI shim, and bundles both), runs the JUnit 5 suite
# from the jar on JDK 17 (the JNI path) and on JDK 22+ (the FFM path) - the randomized
# comparison with ConcurrentHashMap, the multi-JVM kill test, the interop test with
# Python (the binding in bindings/python/.venv, installed here if missing) and C (a program
# compiled here), the queue sets' tests (QueueTest, QueueMultiProcessTest) - then uses the
# jar from a clean project with no JVM flags on both JDKs.
#
#   bash scripts/test-java.sh [extra mvn args, e.g. -Dshoal.test.seed=123]
#
# Needs: Rust (cargo), gcc, JDK 17 and a JDK 22+ (JDK25_HOME, else the newest of
# /usr/lib/jvm/*), Maven (installed with apt-get if missing), Python >= 3.9 with venv.
# Maven artifacts come from Maven Central at the versions fixed in bindings/java/pom.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JDIR=$ROOT/bindings/java
export CARGO_TERM_COLOR=never
step() { printf '\n=== %s\n' "$*"; }

step "JDKs and Maven"
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
echo "JDK 17: $JDK17"
echo "JDK 22+: $JDK25 ($(jdk_feature "$JDK25"))"
if ! command -v mvn >/dev/null; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends maven >/dev/null
fi
# Maven runs on the newer JDK: it compiles the Java 22 classes (FFM) beside the Java 17 ones.
export JAVA_HOME=$JDK25
mvn -v | sed -n 1p

step "Python binding for the interop test (bindings/python/.venv)"
VENV=$ROOT/bindings/python/.venv
if ! "$VENV/bin/python" -c 'import shoal' 2>/dev/null; then
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}/python \
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$ROOT/bindings/python"
fi
"$VENV/bin/python" -c 'import shoal; print("python shoal", shoal.__version__)'

step "C program for the interop test"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build --release --locked -p shoal-ffi --lib --quiet
mkdir -p "$JDIR/target"
gcc -O1 -Wall -Werror -I"$ROOT/crates/shoal-ffi/include" -o "$JDIR/target/interop" \
    "$JDIR/src/test/c/interop.c" -L"$TARGET/release" -l:libshoal_ffi.so -Wl,-rpath,"$TARGET/release"

step "mvn verify: build the jar, JUnit on JDK 17 (JNI) and JDK $(jdk_feature "$JDK25") (FFM)"
# Failsafe adds each run's results to the summary a failed run left behind, so a later
# run would fail on the old failure: start from none.
rm -rf "$JDIR"/target/failsafe-*
(cd "$JDIR" && mvn -B -ntp -Dstyle.color=never verify \
    -Dshoal.cargo.target="$TARGET" \
    -Dshoal.test.jvm17="$JDK17/bin/java" -Dshoal.test.jvm25="$JDK25/bin/java" \
    -Dshoal.python="$VENV/bin/python" -Dshoal.cprog="$JDIR/target/interop" \
    -Dshoal.requireInterop=true "$@")
JAR=$JDIR/target/shoal-0.1.0.jar

step "the jar from a clean project, no JVM flags, on JDK 17 and JDK $(jdk_feature "$JDK25")"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cat > "$SCRATCH/Main.java" <<'JAVA'
import io.shoal.*;

public class Main {
    public static void main(String[] args) {
        String name = "java-clean-" + ProcessHandle.current().pid();
        try (ShoalStore store = Shoal.open(name)) {
            ShoalMap<String, Long> m = store.map("m", Codecs.STRING, Codecs.LONG);
            m.merge("hits", 1L, Long::sum);
            long v = m.addAndGet("hits", 41);
            if (v != 42) throw new AssertionError(v);
            System.out.println("ok " + Shoal.backend() + " " + v);
        } finally {
            Shoal.remove(name);
        }
    }
}
JAVA
# A fresh cache directory, to show the extraction from the jar works from nothing.
"$JDK17/bin/javac" --release 17 -cp "$JAR" -d "$SCRATCH/classes" "$SCRATCH/Main.java"
for jdk in "$JDK17" "$JDK25"; do
    out=$(XDG_CACHE_HOME="$SCRATCH/cache" "$jdk/bin/java" -cp "$JAR:$SCRATCH/classes" Main 2>"$SCRATCH/err")
    echo "$(jdk_feature "$jdk"): $out"
    case "$out" in ok\ *) ;; *) cat "$SCRATCH/err" >&2; exit 1 ;; esac
done
ls -l "$SCRATCH/cache/shoal-java"/*
# A cached library cut short (a disk that filled, a hand edit) is rewritten from the jar,
# and a whole one is used as it is.
cached=$(ls "$SCRATCH/cache/shoal-java"/*/libshoal_ffi.so)
size=$(stat -c %s "$cached")
truncate -s 4096 "$cached"
out=$(XDG_CACHE_HOME="$SCRATCH/cache" "$JDK25/bin/java" -cp "$JAR:$SCRATCH/classes" Main 2>"$SCRATCH/err")
case "$out" in ok\ *) ;; *) cat "$SCRATCH/err" >&2; exit 1 ;; esac
[ "$(stat -c %s "$cached")" = "$size" ] || { echo "the cut library was not rewritten" >&2; exit 1; }
echo "a cut library in the cache was rewritten: $out"
# The Java 22+ part of the API (SegmentCodec and Element.segment(), in META-INF/versions/22)
# from javac --release 22.
cat > "$SCRATCH/Seg.java" <<'JAVA'
import io.shoal.*;
import java.lang.foreign.MemorySegment;

public class Seg {
    public static void main(String[] args) {
        String name = "java-seg-" + ProcessHandle.current().pid();
        try (ShoalStore store = Shoal.open(name)) {
            ShoalMap<MemorySegment, MemorySegment> m = store.map("m", SegmentCodec.INSTANCE, SegmentCodec.INSTANCE);
            m.put(MemorySegment.ofArray(new byte[] {1, 2}), MemorySegment.ofArray(new byte[] {3}));
            byte[] v = m.get(MemorySegment.ofArray(new byte[] {1, 2})).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            if (v.length != 1 || v[0] != 3) throw new AssertionError();
            // A queue element's bytes as a segment (Element.segment(), Java 22+ only):
            // written in place, seen by the next holder, unusable once pushed.
            try (ShoalQueueSet qs = store.queueSet("q", QueueOptions.of(16, 2).queue("work"))) {
                int free = qs.queue("free"), work = qs.queue("work");
                Element e = qs.pull(free);
                MemorySegment seg = e.segment();
                if (seg.byteSize() != 16) throw new AssertionError(seg);
                seg.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, 0x1234_5678_9abcL);
                qs.push(work, e);
                try {
                    seg.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0);
                    throw new AssertionError("a pushed element's segment still works");
                } catch (IllegalStateException expected) {
                    // revoked at the push
                }
                try (Element got = qs.pull(work)) {
                    long x = got.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0);
                    if (x != 0x1234_5678_9abcL) throw new AssertionError(Long.toHexString(x));
                }
            }
            System.out.println("ok segments");
        } finally {
            Shoal.remove(name);
        }
    }
}
JAVA
"$JDK25/bin/javac" --release 22 -cp "$JAR" -d "$SCRATCH/seg" "$SCRATCH/Seg.java"
out=$(XDG_CACHE_HOME="$SCRATCH/cache" "$JDK25/bin/java" -cp "$JAR:$SCRATCH/seg" Seg 2>"$SCRATCH/err")
echo "$out"
[ "$out" = "ok segments" ] || { cat "$SCRATCH/err" >&2; exit 1; }
# An application jar that declares Enable-Native-Access (as Java 24+ asks of code calling
# native libraries) runs on the newer JDK without even the native-access warning.
printf 'Main-Class: Main\nClass-Path: %s\nEnable-Native-Access: ALL-UNNAMED\n' "$JAR" > "$SCRATCH/manifest"
"$JDK25/bin/jar" --create --file "$SCRATCH/app.jar" --manifest "$SCRATCH/manifest" -C "$SCRATCH/classes" .
out=$(XDG_CACHE_HOME="$SCRATCH/cache" "$JDK25/bin/java" -jar "$SCRATCH/app.jar" 2>"$SCRATCH/err")
echo "java -jar app.jar: $out"
case "$out" in ok\ ffm*) ;; *) cat "$SCRATCH/err" >&2; exit 1 ;; esac
if grep -q WARNING "$SCRATCH/err"; then
    echo "warnings printed despite Enable-Native-Access:" >&2
    cat "$SCRATCH/err" >&2
    exit 1
fi
echo
echo "java binding: all tests passed"
