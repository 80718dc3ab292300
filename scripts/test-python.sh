#!/usr/bin/env bash
# The Python package's tests (pytest, CPU backend): builds the extension into
# a virtual environment of its own under target/ (maturin, numpy, pytest and
# scipy from PyPI), and compares every function with the command line built
# beside it. scripts/test.sh runs this after the Rust tests.
#
# With --mpi first: the extension with its `mpi` feature and mpi4py built
# against the same MPI (scripts/install-mpi.sh), for python/tests/test_mpi.py
# (`comm=` under mpiexec -n 1, 2, 4); the other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

features=()
if [[ ${1:-} == --mpi ]]; then
  shift
  features=(--features mpi)
fi
VENV="${TWOBS_PY_VENV:-$PWD/target/py-venv}"
# The peers the tests compare with: scipy, freud, MDAnalysis (and its test trajectories).
REQUIREMENTS=("maturin>=1.9,<2" "numpy>=1.21" "pytest>=7" "scipy>=1.9" "freud-analysis>=3" "MDAnalysis>=2.7"
              "MDAnalysisTests>=2.7" "pdoc>=14")
INSTALLED="$VENV/.installed-$(echo "${REQUIREMENTS[*]}" | sha256sum | cut -c1-12)"
if [[ ! -e "$INSTALLED" ]]; then
  echo "making $VENV: ${REQUIREMENTS[*]}" >&2
  [[ -x "$VENV/bin/pip" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
  touch "$INSTALLED"
fi
if [[ ${#features[@]} -gt 0 && ! -e "$VENV/.mpi4py" ]]; then
  # From source against the MPI on the PATH (mpicc): a communicator's handle
  # means something to twobs only in the MPI library twobs links.
  echo "building mpi4py against $(command -v mpicc)" >&2
  MPICC=mpicc "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-binary=mpi4py "mpi4py==4.1.2"
  touch "$VENV/.mpi4py"
fi
# The command line the tests compare with.
cargo build --locked --quiet
# `maturin develop` installs the package in the environment, the extension in place (python/twobs).
VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" maturin develop --locked --profile dev --quiet "${features[@]}"
# Without arguments pytest runs its testpaths (python/tests, pyproject.toml).
"$VENV/bin/python" -m pytest -q "$@"
# The API reference, from the docstrings (numpy style), warnings as errors:
# target/pydoc/index.html.
if [[ $# -eq 0 ]]; then
  (cd target && "$VENV/bin/python" -W error -m pdoc --docformat numpy -o pydoc twobs twobs.mda)
  echo "test-python.sh: the API reference is target/pydoc/index.html" >&2
fi
