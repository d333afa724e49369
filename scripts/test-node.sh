#!/usr/bin/env bash
# Tests of the Node binding (bindings/node): `npm ci` installs the pinned packages
# (bindings/node/package-lock.json: @napi-rs/cli, TypeScript, @types/node, and lmdb for
# the benchmarks) and runs the package's install script, which builds the addon (napi
# build, cargo) and the TypeScript API (tsc); then rustfmt and clippy on the addon crate,
# a type check of a TypeScript program against the generated index.d.ts, and the tests
# (node --test bindings/node/test/*.test.js).
#
#   bash scripts/test-node.sh
#
# Needs: Rust (cargo), Node >= 20.17 with npm. The Rust build goes to target/node
# (CARGO_TARGET_DIR overrides), so reruns are incremental. The test reading what Python
# wrote runs if bindings/python/.venv exists (scripts/test-python.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
NODE_DIR=$ROOT/bindings/node
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/node}
export CARGO_TERM_COLOR=never
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
step() { printf '\n=== %s\n' "$*"; }

step "node"
node -e 'const [a, b] = process.versions.node.split(".").map(Number);
  if (a < 20 || (a === 20 && b < 17)) { console.error("Node >= 20.17 needed, not " + process.version); process.exit(1); }
  console.log("node", process.version)'
command -v cargo >/dev/null || { echo "cargo not found: the addon needs Rust" >&2; exit 1; }

step "npm ci (pinned by bindings/node/package-lock.json; builds the addon and dist/)"
(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)

step "rustfmt --check, clippy -D warnings (addon crate)"
if cargo fmt --version >/dev/null 2>&1; then
    (cd "$NODE_DIR" && cargo fmt -- --check)
else
    echo "rustfmt not installed; skipped"
fi
if cargo clippy --version >/dev/null 2>&1; then
    (cd "$NODE_DIR" && cargo clippy --release --locked -- -D warnings)
else
    echo "clippy not installed; skipped"
fi

step "types: a TypeScript program type-checks against the generated dist/index.d.ts"
(cd "$NODE_DIR" && ./node_modules/.bin/tsc -p test/types/tsconfig.json)

step "node --test bindings/node/test"
cd "$NODE_DIR"
node --test test/*.test.js
