#!/usr/bin/env bash
# Kill storm with a linearizability check: 8 processes run random operations on a few
# hot keys while random ones are SIGKILLed and replaced; then Porcupine checks every
# logged history (tools/linearizability). The suite (scripts/test.sh) runs them inside
# `cargo test` (30 s on a variable-size map, 15 s each on a fixed-size map and on a map
# with UIDs); this runs one of any length:
#
#   bash scripts/linearizability.sh [SECONDS] [KIND]   # default 600 (10 minutes), variable
#
# KIND is the map's: variable (default), fixed (a fixed-size map) or uids (a map with
# UIDs, by-key and by-UID operations mixed); or txn: the multi-key transaction storm
# (crates/shoal-torture/tests/txn_storm.rs), strictly serializable, in 3-second rounds.
#
# SHOAL_SEED repeats a run's random choices; SHOAL_LINEAR_WORKERS, _KEYS, _EPOCH_MS,
# _PERIOD_US, _ACTIVE_US tune it (see crates/shoal-torture/tests/linearizability.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
kind=${2:-variable}
case $kind in
variable) test=kill_storm_is_linearizable; var=SHOAL_LINEAR_SECS ;;
fixed) test=fixed_map_kill_storm_is_linearizable; var=SHOAL_LINEAR_FIXED_SECS ;;
uids) test=uid_map_kill_storm_is_linearizable; var=SHOAL_LINEAR_UIDS_SECS ;;
txn) ;;
*) echo "unknown kind $kind: variable, fixed, uids or txn" >&2; exit 2 ;;
esac
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
export GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p target
(cd tools/linearizability && go vet ./... && go test ./... && go build -o ../../target/lincheck .)
if [ "$kind" = txn ]; then
    exec env SHOAL_LINCHECK="$PWD/target/lincheck" SHOAL_TXN_LIN_ROUNDS=$(((secs + 2) / 3)) \
        cargo test --release --locked -p shoal-torture --features shoal/failpoints \
        --test txn_storm -- --exact transfers_under_kills_are_strictly_serializable --nocapture
fi
env SHOAL_LINCHECK="$PWD/target/lincheck" "$var=$secs" \
    cargo test --release --locked -p shoal-torture --features shoal/failpoints \
    --test linearizability -- --exact "$test" --nocapture
