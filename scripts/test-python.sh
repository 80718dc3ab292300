#!/usr/bin/env bash
# The Python package's tests (pytest, CPU backend): builds the extension into
# a virtual environment of its own under target/ (maturin, numpy, pytest and
# scipy from PyPI), and compares every function with the command line built
# beside it. scripts/test.sh runs this after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${TWOBS_PY_VENV:-$PWD/target/py-venv}"
REQUIREMENTS=("maturin>=1.9,<2" "numpy>=1.21" "pytest>=7" "scipy>=1.9")
if [[ ! -e "$VENV/.installed" ]]; then
  echo "making $VENV: ${REQUIREMENTS[*]}" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
  touch "$VENV/.installed"
fi
# The command line the tests compare with.
cargo build --locked --quiet
# `maturin develop` installs the package in the environment, the extension in place (python/twobs).
VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" maturin develop --locked --profile dev --quiet
"$VENV/bin/python" -m pytest -q python/tests "$@"
