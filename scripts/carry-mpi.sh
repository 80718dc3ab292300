#!/usr/bin/env bash
# Packs what an MPI run needs on a machine without MPI (the GPU machines):
# the release binary built with --features mpi, MPICH's library and the
# libraries it links (UCX, hwloc, ...), and MPICH's launcher (mpiexec.hydra,
# hydra_pmi_proxy), into .mpi-carry/bundle.tar.xz, which `carry` takes
# (git ignores .mpi-carry: its own .gitignore says `*`). There:
#   mkdir -p /tmp/mpi && tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi
#   export PATH=/tmp/mpi/bin:$PATH LD_LIBRARY_PATH=/tmp/mpi/lib
# and UCX finds its transports in /tmp/mpi/lib/ucx. bench/ranks.sh does this.
#
# With --python, also what the Python package's comm= needs there
# (scripts/gpu-suite.sh ranks), into .mpi-carry/py: an mpi4py wheel for the
# device's Python 3.12 built from source against this machine's MPICH
# (mpicc), and the twobs wheel built with its `mpi` feature (abi3; not
# repaired: it links libmpich.so.12, which the bundle's lib/ provides there).
# That needs python3.12 here (pyenv has one) and target/py-venv
# (scripts/test-python.sh makes it).
#
# Usage: cargo build --release --features mpi && scripts/carry-mpi.sh [--python]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/twobs
[[ -x $bin ]] || { echo "build it first: cargo build --release --features mpi" >&2; exit 1; }
ldd "$bin" | grep libmpich >/dev/null || { echo "$bin was built without --features mpi" >&2; exit 1; }
stage=target/mpi-bundle
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib/ucx" .mpi-carry
echo '*' > .mpi-carry/.gitignore
cp "$bin" bench/ranks.sh bench/ranks-memory.sh "$stage/bin/"
cp "$(command -v mpiexec.hydra)" "$(command -v hydra_pmi_proxy)" "$stage/bin/"
ln -s mpiexec.hydra "$stage/bin/mpiexec"
# Every library twobs and the launcher link that is not the C library itself.
for exe in "$bin" "$stage/bin/mpiexec.hydra" "$stage/bin/hydra_pmi_proxy"; do
  ldd "$exe" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libgcc_s|libresolv|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# UCX's shared-memory transport modules (the network ones need drivers the machine lacks).
cp -L /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0 "$stage/lib/ucx/"
tar -C "$stage" -cJf .mpi-carry/bundle.tar.xz .
ls -l .mpi-carry/bundle.tar.xz
if [[ ${1:-} == --python ]]; then
  mkdir -p .mpi-carry/py
  rm -f .mpi-carry/py/*.whl
  MPICC=mpicc python3.12 -m pip wheel --quiet --disable-pip-version-check --no-deps --no-binary=mpi4py "mpi4py==4.1.2" -w .mpi-carry/py
  target/py-venv/bin/maturin build --release --locked --features mpi --auditwheel skip -o .mpi-carry/py
  ls -l .mpi-carry/py
fi
