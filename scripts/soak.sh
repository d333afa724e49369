#!/usr/bin/env bash
# A soak run (not part of the test suite): the kill storm plus a mixed workload on one
# store for MINUTES (default 5), sampling every second the RSS of the long-lived
# processes and the store's file size, failing if either grows without bound (the rule
# is in crates/shoal-torture/src/bin/shoal-soak.rs and docs/RELIABILITY.md).
#
#   bash scripts/soak.sh [MINUTES] [--seed S] [--paranoid]
#
# --paranoid builds the engine with its online allocator checks (crates/shoal/src/
# paranoid.rs: a scan of the whole index at every take, free, merge and page release of a
# run; a worker that finds a slot into such a run aborts with a backtrace, and the soak
# reports it). Slower. With SHOAL_TRACE=FILE set, every process also appends a line per
# allocator step to FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-5}
shift || true
args=()
features=()
target=target
for a in "$@"; do
    if [ "$a" = --paranoid ]; then
        features=(--features paranoid)
        # Its own target directory: the checked binaries never replace the plain ones.
        target=target/paranoid
    else
        args+=("$a")
    fi
done
CARGO_TARGET_DIR=$target cargo build --release --locked -p shoal-torture --bins -q "${features[@]}"
exec "$target/release/shoal-soak" --minutes "$MINUTES" "${args[@]}"
