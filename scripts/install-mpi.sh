#!/usr/bin/env bash
# Installs what the MPI build (`cargo build --features mpi`) and its tests
# (tests/ranks.rs) need: an MPI (Debian's MPICH: mpiexec, mpicc, libmpich)
# and libclang, which the mpi crate's bindgen reads MPI's header with.
# Does nothing where they are already installed. Root, or sudo, for apt.
set -euo pipefail
have() { command -v "$1" >/dev/null 2>&1; }
libclang() { ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' || ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; }
if have mpiexec && have mpicc && libclang; then
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  have sudo || { echo "install-mpi.sh: needs root or sudo for apt-get" >&2; exit 1; }
  sudo=sudo
fi
echo "installing MPICH and libclang (apt)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends mpich libmpich-dev libclang-dev >/dev/null
have mpiexec && have mpicc
