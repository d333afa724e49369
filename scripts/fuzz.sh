#!/usr/bin/env bash
# Runs the libFuzzer targets in fuzz/ (cargo-fuzz) for SECONDS each (default 60).
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     targets: open_check ops_model fixed_model
#                                                  (default all three)
#
# Installs what it needs: the nightly toolchain (rustup) and cargo-fuzz (pinned). Seeds
# the corpora with real store files and op sequences written by the engine's test
# crates/shoal/tests/fuzz_seeds.rs (nothing binary is kept in git), then fuzzes each
# target; a crash, panic, timeout (-timeout, default 20 s per input) or leak fails the
# script, and libFuzzer leaves the input in fuzz/artifacts/TARGET/. Corpora grow in
# fuzz/corpus/ (ignored by git) from run to run.
#
# SANITIZER=address (default none: plain instrumented build, ~2x more executions; the
# engine's unsafe code is confined to two modules) builds with AddressSanitizer.
# The targets are built with debug assertions (DEBUG_ASSERTIONS=0 turns them off, for
# ~25% more executions): overflow checks, and every byte read checked against the
# store's file end (`Region::checking_file_end`), which catches reads past the end that
# stay inside the file's last page, where no SIGBUS would.
# JOBS=N runs N fuzzing processes per target (default 1). SHOAL_FUZZ_DISK=1 makes
# open_check also open one input in four as a file on disk (unclean-store verification and
# Store::repair; three fsyncs per such input, so only in the long form, with TIMEOUT=60).
# TIMEOUT=S is libFuzzer's per-input limit (default 20). Prints executions per target.
#
# Past crash inputs (fuzz/regressions/TARGET/NAME.gz) are replayed before fuzzing: put
# each new crash input there, gzipped, with its fix.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(open_check ops_model fixed_model)
SANITIZER=${SANITIZER:-none}
JOBS=${JOBS:-1}
TIMEOUT=${TIMEOUT:-20}
BUILD=(-s "$SANITIZER")
[ "${DEBUG_ASSERTIONS:-1}" = 1 ] && BUILD+=(-a)
CARGO_FUZZ_VERSION=0.13.1

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# Seeds: real store files (open_check) and op sequences (ops_model, fixed_model).
SHOAL_FUZZ_SEEDS="$PWD/fuzz/corpus" cargo test -p shoal --release --locked \
    --features failpoints --test fuzz_seeds -q >/dev/null

cd fuzz
cargo +nightly fuzz build "${BUILD[@]}"
export SHOAL_FUZZ_DISK_DIR="$PWD/target/disk"
mkdir -p "$SHOAL_FUZZ_DISK_DIR"
declare -A MAXLEN=([open_check]=720896 [ops_model]=1200 [fixed_model]=1200)
status=0

# Every input that ever crashed a target (fuzz/regressions/TARGET/*.gz, gzipped) is
# replayed first, each once: a fixed bug that comes back fails here whatever the random
# fuzzing below happens to find.
for t in "${TARGETS[@]}"; do
    [ -d "regressions/$t" ] || continue
    replay="target/regressions/$t"
    rm -rf "$replay" && mkdir -p "$replay"
    for f in regressions/"$t"/*.gz; do
        gunzip -c "$f" >"$replay/$(basename "$f" .gz)"
    done
    log="target/replay-$t.log"
    if cargo +nightly fuzz run "${BUILD[@]}" "$t" "$replay"/* -- -timeout="$TIMEOUT" \
        -rss_limit_mb=4096 >"$log" 2>&1; then
        echo "  $t: replayed $(ls "$replay" | wc -l) past crash inputs, all pass"
    else
        status=1
        echo "  $t: a past crash input fails again; the end of its log ($PWD/$log):"
        tail -60 "$log" | cut -c1-400
    fi
done

for t in "${TARGETS[@]}"; do
    log="target/fuzz-$t.log"
    echo "fuzzing $t for ${SECONDS_EACH}s (sanitizer $SANITIZER, $JOBS job(s))"
    mkdir -p "corpus/$t" "artifacts/$t"
    if cargo +nightly fuzz run "${BUILD[@]}" "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb=4096 \
        -max_len="${MAXLEN[$t]:-4096}" -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" \
        $([ "$JOBS" -gt 1 ] && echo "-fork=$JOBS") >"$log" 2>&1; then
        execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{s+=$2} END {print s+0}')
        [ "$execs" = 0 ] && execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
        echo "  $t: OK, $execs executions in ${SECONDS_EACH}s, corpus $(ls "corpus/$t" | wc -l) inputs"
    else
        status=1
        echo "  $t: FAILED; the end of its log ($PWD/$log):"
        tail -60 "$log" | cut -c1-400
        ls -l "artifacts/$t" || true
    fi
done
exit $status
