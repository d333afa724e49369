#!/usr/bin/env bash
# A soak run (not part of the test suite): the kill storm plus a mixed workload on one
# store for MINUTES (default 5), sampling every second the RSS of the long-lived
# processes and the store's file size, failing if either grows without bound (the rule
# is in crates/shoal-torture/src/bin/shoal-soak.rs and docs/RELIABILITY.md).
#
#   bash scripts/soak.sh [MINUTES] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-5}
shift || true
cargo build --release --locked -p shoal-torture --bins -q
exec target/release/shoal-soak --minutes "$MINUTES" "$@"
