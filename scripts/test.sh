#!/usr/bin/env bash
# The whole test suite: what `.ci/run` runs, and the README's second command.
# Installs what it needs (from the package registries), then runs, in order:
# formatting, the engine's layering check, lints, the linearizability checker's self-tests (Go), unit + integration
# tests (multi-process, kill and per-fail-point crash tests included (the logs' crash driver
# and writer SIGKILL storm, crates/shoal/tests/log_crash.rs, among them), an 8 s storm of
# transactions killed at random (crates/shoal-torture/tests/txn_storm.rs), an ordered-map
# storm checked for strict serializability (crates/shoal-torture/tests/ordered_storm.rs,
# 2 rounds of 3 s), and kill storms
# whose histories that checker verifies: 30 s on a variable-size map, 15 s each on a
# fixed-size map and a map with UIDs), the model checks under shuttle, a short fuzzing
# run, the bindings' suites (C and C++, Python, Node, Java on JDK 17 and 25, Go), and the
# cross-language matrix (every language on one store at once, scripts/test-matrix.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
step() { printf '\n=== %s\n' "$*"; }

step "toolchain"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo --version

step "build dependencies (C compiler, libclang for the libmdbx bindings of shoal-compare)"
bash scripts/install-build-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "layers: every module of the engine imports only its own layer or below (scripts/layers.txt)"
bash scripts/layers.sh crates/shoal/src scripts/layers.txt --allow scripts/layers-allow.txt

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p shoal --all-targets --locked --features failpoints -- -D warnings
cargo clippy -p shoal-torture --all-targets --locked --features failpoints -- -D warnings
cargo clippy -p shoal --all-targets --locked --features paranoid -- -D warnings

step "linearizability checker (tools/linearizability, Go + Porcupine): vet, self-tests"
# The Go toolchain; modules come from the proxy, pinned by the committed go.sum.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
go version
(cd tools/linearizability && GOFLAGS="-mod=readonly -buildvcs=false" go vet ./... && GOFLAGS="-mod=readonly -buildvcs=false" go test ./...)

# With fail points on, the per-fail-point crash driver (shoal-torture/tests/crash_points.rs) runs.
step "cargo test (release: the multi-process and kill tests need real speed; fail points on)"
cargo test --workspace --release --locked --features shoal/failpoints,shoal-torture/failpoints

step "mem_meta_kv_benchmark harness, smoke (bench/mdkv/run.sh: every system, tiny key counts)"
bash bench/mdkv/run.sh --keys-per-worker 2000 --workers 1,2 --rounds 2 --no-chart --out target/mdkv/smoke.md

step "the soak's online allocator checks (feature paranoid): the index scan they rest on"
cargo test -p shoal --release --locked --features paranoid --lib paranoid

step "model checking (shuttle, cfg(shuttle))"
RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle cargo test -p shoal --release --locked --test model 2>&1

step "fuzzing, short form (cargo-fuzz: open_check, ops_model, fixed_model; 45 s each)"
bash scripts/fuzz.sh 45

step "C ABI, C++ header, packaging (ctest plain and sanitized)"
bash scripts/test-c.sh

step "Python binding (bindings/python)"
bash scripts/test-python.sh

step "Node binding (bindings/node)"
bash scripts/test-node.sh

step "Java binding (bindings/java)"
bash scripts/test-java.sh

step "Go binding (bindings/go)"
bash scripts/test-go.sh

step "cross-language matrix: Rust, C, C++, Python, Java, Go and Node on one store"
bash scripts/test-matrix.sh

echo
echo "all test steps passed"
