#!/usr/bin/env bash
# The Java binding's JMH benchmarks (bindings/java/bench) against Chronicle Map (Maven
# Central) and ConcurrentHashMap, in one run: 16-byte keys and values, 1 M and 10 M keys;
# get, put and a 98/2 get/put mix, one thread per JVM, on JDK 17 (Shoal via JNI) and on
# the JDK 22+ beside it (Shoal via FFM); latency percentiles (JMH sample mode); the same
# from 2 JVMs at once; the time to open the 10 M-key store in a fresh JVM. Raw JMH JSON in
# docs/benchmarks/raw/java-*, the summary tables on stdout (docs/benchmarks/java.md).
#
#   bash bindings/java/bench/run.sh   # KEYS="1000000 10000000" by default
#   STAGES="open twojvm" bash bindings/java/bench/run.sh   # some of: thrpt sample open twojvm
#
# Shoal and ConcurrentHashMap run with no JVM flags; Chronicle Map needs its documented
# --add-exports/--add-opens flags on Java 17+ (CHRONICLE_FLAGS below).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$PWD
KEYS=${KEYS:-"1000000 10000000"}
STAGES=${STAGES:-"thrpt sample open twojvm"}
stage() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
RAW=$ROOT/docs/benchmarks/raw
mkdir -p "$RAW"
# The JDKs, found as scripts/test-java.sh finds them: a 17 and the newest 22+ in /usr/lib/jvm.
jdk_feature() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
JDK17=${JDK17_HOME:-}
JDK25=${JDK25_HOME:-}
for d in /usr/lib/jvm/*/; do
    d=${d%/}
    [ -x "$d/bin/javac" ] || continue
    f=$(jdk_feature "$d")
    if [ "$f" = 17 ]; then
        [ -n "$JDK17" ] || JDK17=$d
    elif [ "${f%%.*}" -ge 22 ] 2>/dev/null && { [ -z "$JDK25" ] || [ "$f" -gt "$(jdk_feature "$JDK25")" ]; }; then
        JDK25=$d
    fi
done
[ -n "$JDK17" ] && [ -n "$JDK25" ] || { echo "need a JDK 17 and a JDK 22+ (JDK17_HOME, JDK25_HOME)" >&2; exit 1; }
CHRONICLE_FLAGS="--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED --add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED --add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED --add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED -Dchronicle.analytics.disable=true"

export JAVA_HOME=$JDK25
(cd bindings/java && mvn -B -q -ntp install -DskipITs -Dshoal.cargo.target="${CARGO_TARGET_DIR:-$ROOT/target}")
(cd bindings/java/bench && mvn -B -q -ntp package)
B=$ROOT/bindings/java/bench/target
CP="$B/shoal-bench-0.1.0.jar:$(ls "$B"/lib/*.jar | tr '\n' ':')"
P_KEYS=$(echo $KEYS | tr ' ' ',')
jmh() { # jdk label extra-args...
    local jdk=$1 label=$2
    shift 2
    echo "--- $label" >&2
    rm -f "$RAW/java-$label.json"
    # ignoreLock: the two-JVM stage runs two JMH instances at once, by design.
    "$jdk/bin/java" -Djmh.ignoreLock=true -cp "$CP" org.openjdk.jmh.Main -rf json -rff "$RAW/java-$label.json" "$@" \
        > "$RAW/java-$label.log" 2>&1 || { tail -30 "$RAW/java-$label.log" >&2; exit 1; }
}
THR="-wi 1 -w 2 -i 5 -r 2"
stage thrpt && for jdk in 17 25; do
    J=$JDK17; [ $jdk = 25 ] && J=$JDK25
    jmh "$J" "thrpt-jdk$jdk" "MapBench" -p keys="$P_KEYS" -p impl=shoal,shoal-fixed,chm $THR
    jmh "$J" "thrpt-chronicle-jdk$jdk" "MapBench" -p keys="$P_KEYS" -p impl=chronicle $THR \
        -jvmArgsAppend "$CHRONICLE_FLAGS"
done
stage sample && jmh "$JDK25" "sample-jdk25" "MapBench.(get|put)$" -bm sample -tu ns -p keys="$P_KEYS" -p impl=shoal,shoal-fixed,chm $THR
stage sample && jmh "$JDK25" "sample-chronicle-jdk25" "MapBench.(get|put)$" -bm sample -tu ns -p keys="$P_KEYS" -p impl=chronicle $THR \
    -jvmArgsAppend "$CHRONICLE_FLAGS"
BIG=${KEYS##* }
# On both JDKs: a first open pays for the library's loading and linking, which differ
# (JNI on 17, the FFM API's bootstrap on 22+).
stage open && jmh "$JDK25" "open-shoal" "OpenBench" -p keys="$BIG" -p impl=shoal
stage open && jmh "$JDK25" "open-chronicle" "OpenBench" -p keys="$BIG" -p impl=chronicle -jvmArgsAppend "$CHRONICLE_FLAGS"
stage open && jmh "$JDK17" "open-shoal-jdk17" "OpenBench" -p keys="$BIG" -p impl=shoal
stage open && jmh "$JDK17" "open-chronicle-jdk17" "OpenBench" -p keys="$BIG" -p impl=chronicle -jvmArgsAppend "$CHRONICLE_FLAGS"
# Two JVMs at once on the same file (ConcurrentHashMap cannot be shared: not run).
SMALL=${KEYS%% *}
stage twojvm && for impl in shoal shoal-fixed chronicle; do
    for op in get put mix98get2put; do
        flags=""; [ $impl = chronicle ] && flags=$CHRONICLE_FLAGS
        for n in 1 2; do
            jmh "$JDK25" "twojvm-$impl-$op-$n" "MapBench.$op\$" -p keys="$SMALL" -p impl=$impl $THR \
                ${flags:+-jvmArgsAppend "$flags"} &
        done
        wait
        for n in 1 2; do
            [ -s "$RAW/java-twojvm-$impl-$op-$n.json" ] || { echo "two-JVM run $impl $op $n failed" >&2; exit 1; }
        done
    done
done
python3 "$ROOT/bindings/java/bench/report.py" "$RAW"
