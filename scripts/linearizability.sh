#!/usr/bin/env bash
# Kill storm with a linearizability check: 8 processes run random operations on a few
# hot keys while random ones are SIGKILLed and replaced; then Porcupine checks every
# logged history (tools/linearizability). The suite (scripts/test.sh) runs the 30 s
# form inside `cargo test`; this runs one of any length:
#
#   bash scripts/linearizability.sh [SECONDS]      # default 600 (10 minutes)
#
# SHOAL_SEED repeats a run's random choices; SHOAL_LINEAR_WORKERS, _KEYS, _EPOCH_MS,
# _PERIOD_US, _ACTIVE_US tune it (see crates/shoal-torture/tests/linearizability.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
export GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p target
(cd tools/linearizability && go vet ./... && go test ./... && go build -o ../../target/lincheck .)
SHOAL_LINCHECK="$PWD/target/lincheck" SHOAL_LINEAR_SECS="$secs" \
    cargo test --release --locked -p shoal-torture --features shoal/failpoints \
    --test linearizability -- --exact kill_storm_is_linearizable --nocapture
