#!/usr/bin/env bash
# Tests of the Python binding (bindings/python): creates a venv (bindings/python/.venv,
# gitignored), pip-installs ./bindings/python (maturin builds the Rust extension) plus
# pytest, hypothesis and mypy from PyPI (versions pinned in bindings/python/requirements-test.txt),
# then runs bindings/python/tests.
#
#   bash scripts/test-python.sh [pytest args...]
#
# Needs: Rust (cargo) and Python >= 3.11 with venv/pip. PYTHON picks the interpreter
# (default python3). The Rust build goes to target/python (CARGO_TARGET_DIR overrides),
# so reruns are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY_DIR=$ROOT/bindings/python
VENV=$PY_DIR/.venv
PYTHON=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/python}
export CARGO_TERM_COLOR=never
export PIP_DISABLE_PIP_VERSION_CHECK=1
step() { printf '\n=== %s\n' "$*"; }

step "python"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version; print(sys.version)'
command -v cargo >/dev/null || { echo "cargo not found: the binding needs Rust" >&2; exit 1; }

step "venv ($VENV)"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pip' 2>/dev/null; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
VPY=$VENV/bin/python

step "pip install pytest hypothesis mypy (pinned: bindings/python/requirements-test.txt)"
"$VPY" -m pip install --quiet -r "$PY_DIR/requirements-test.txt"

step "rustfmt --check (binding crate)"
if cargo fmt --version >/dev/null 2>&1; then
    (cd "$PY_DIR" && cargo fmt -- --check)
else
    echo "rustfmt not installed; skipped"
fi

step "pip install ./bindings/python (maturin release build)"
# --force-reinstall: same version number, new build. --no-deps: the package has none.
"$VPY" -m pip install --quiet --force-reinstall --no-deps "$PY_DIR"
"$VPY" -c 'import shoal, sys; print("shoal", shoal.__version__, "from", shoal.__file__)'

step "stubtest: the type stubs (shoal/__init__.pyi) match the module"
SCRATCH=$(mktemp -d)
(cd "$SCRATCH" && MYPY_CACHE_DIR="$SCRATCH/.mypy_cache" "$VPY" -m mypy.stubtest shoal)
rm -rf "$SCRATCH"

step "pytest bindings/python/tests"
cd "$PY_DIR"
set +e
"$VPY" -m pytest -q -p no:cacheprovider tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit "$rc"
