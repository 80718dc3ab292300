#!/usr/bin/env bash
# Packs what an MPI run needs on a machine without MPI (the GPU machines):
# the release binary built with --features mpi, MPICH's library and the
# libraries it links (UCX, hwloc, ...), and MPICH's launcher (mpiexec.hydra,
# hydra_pmi_proxy), into .mpi-carry/bundle.tar.xz, which `carry` takes
# (git ignores .mpi-carry: its own .gitignore says `*`). There:
#   mkdir -p /tmp/mpi && tar -xJf .mpi-carry/bundle.tar.xz -C /tmp/mpi
#   export PATH=/tmp/mpi/bin:$PATH LD_LIBRARY_PATH=/tmp/mpi/lib
# and UCX finds its transports in /tmp/mpi/lib/ucx. bench/ranks.sh does this.
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
