#!/usr/bin/env bash
# The Python package's tests (pytest, CPU backend), on the wheel a user
# installs: scripts/build-wheel.sh builds it (abi3, manylinux2014, the
# `twobs` command inside), it goes into a virtual environment of its own
# under target/ (numpy, pytest, scipy and the peers from PyPI), and the tests
# run there without cargo on the PATH, comparing every function with the
# command line built beside it; then the wheel's `twobs` command runs rdf.
# scripts/test.sh runs this after the Rust tests.
#
# With --mpi first: the extension with its `mpi` feature (maturin develop:
# it links this machine's MPI, so it is no wheel to hand on) and mpi4py built
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
# The peers the tests compare with: scipy, freud, MDAnalysis (and its test trajectories), TreeCorr.
REQUIREMENTS=("maturin>=1.9,<2" "numpy>=1.21" "pytest>=7" "scipy>=1.9" "freud-analysis>=3" "MDAnalysis>=2.7"
              "MDAnalysisTests>=2.7" "pdoc>=14" "treecorr>=5")
source scripts/venv.sh
venv_with "$VENV" "${REQUIREMENTS[@]}"
if [[ ${#features[@]} -gt 0 && ! -e "$VENV/.mpi4py" ]]; then
  # From source against the MPI on the PATH (mpicc): a communicator's handle
  # means something to twobs only in the MPI library twobs links.
  echo "building mpi4py against $(command -v mpicc)" >&2
  MPICC=mpicc "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-binary=mpi4py "mpi4py==4.1.2"
  touch "$VENV/.mpi4py"
fi
# The command line the tests compare with: scripts/test.sh's `cargo test` has
# just built it (target/debug/twobs, with the tests' features), so it says so
# and the build is skipped; alone, this script builds it.
[[ -n ${TWOBS_CLI_BUILT:-} ]] || cargo build --locked --quiet
if [[ ${#features[@]} -gt 0 ]]; then
  # `maturin develop` installs the package in the environment, the extension in place (python/twobs).
  VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" maturin develop --locked --profile dev --quiet "${features[@]}"
  "$VENV/bin/python" -m pytest -q "$@"
  exit 0
fi
wheel=$(scripts/build-wheel.sh --profile dev | tail -1)
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
# Without cargo: the PATH of the environment and the system's tools (the CPU backend's C++ compiler).
BARE_PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin"
if env PATH="$BARE_PATH" sh -c 'command -v cargo' >/dev/null; then
  echo "test-python.sh: cargo is still on $BARE_PATH" >&2
  exit 1
fi
installed=$(cd /tmp && env PATH="$BARE_PATH" "$VENV/bin/python" -c 'import twobs; print(twobs.__file__)')
[[ $installed == "$VENV"/* ]] || { echo "test-python.sh: twobs came from $installed, not the wheel" >&2; exit 1; }
# Without arguments pytest runs its testpaths (python/tests, pyproject.toml).
env PATH="$BARE_PATH" "$VENV/bin/python" -m pytest -q "$@"
# The wheel's own command line, as a user runs it after pip install.
(cd target && env PATH="$BARE_PATH" twobs run rdf --backend cpu --input uniform:2000 --quiet \
  --out wheel-rdf.csv && test -s wheel-rdf.csv)
echo "test-python.sh: $(basename "$wheel") installed, its tests and its twobs command ran without cargo" >&2
# The API reference, from the docstrings (numpy style), warnings as errors:
# target/pydoc/index.html.
if [[ $# -eq 0 ]]; then
  (cd target && "$VENV/bin/python" -W error -m pdoc --docformat numpy -o pydoc twobs twobs.mda)
  echo "test-python.sh: the API reference is target/pydoc/index.html" >&2
fi
