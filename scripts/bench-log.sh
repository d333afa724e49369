#!/usr/bin/env bash
# Builds and runs shoal-logbench: writer processes through Shoal's log against O_APPEND
# writes to one file, a pipe and a Unix datagram socket (docs/benchmarks/log.md), then a
# dead writer's hole (a build with fail points). Arguments go to the throughput run,
# e.g. `scripts/bench-log.sh --writers 4 --reps 5`.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load:$(uptime | sed 's/.*load average//')"
cargo build --release --locked -p shoal-bench --bin shoal-logbench
./target/release/shoal-logbench "$@"
# The fail points build goes to its own target directory: the throughput binary above
# carries no fail point checks on the append path.
cargo build --release --locked -p shoal-bench --features failpoints --bin shoal-logbench \
    --target-dir target/failpoints
./target/failpoints/release/shoal-logbench --writers 1 --secs 0.2 --reps 1 \
    --paced-secs 0.2 --ways shoal --hole 10 | sed -n '/dead writer/,$p'
echo "# load after:$(uptime | sed 's/.*load average//')"
