#!/usr/bin/env bash
# KNN's parts on a GPU machine, run by run (K = 16; the 1M 3-D set,
# three runs, and 10M 3-D points, two runs): compute, index (of which the
# GPU's grid), upload, kernel and download, from each run's report.
# Usage: scripts/probe-knn-host.sh (from the repository root, with target/release/twobs)
set -euo pipefail
export TWOBS_CACHE=${TWOBS_CACHE:-/tmp/twobs-cache}
python3 -c "
import numpy as np
r = np.random.default_rng(12345); r.random((2_000_000, 2), dtype=np.float32)
np.save('/tmp/p3.npy', r.random((1_000_000, 3), dtype=np.float32) * 100)
np.save('/tmp/p10.npy', np.random.default_rng(2468).random((10_000_000, 3), dtype=np.float32) * 100)"
for f in p3 p3 p3 p10 p10; do
  target/release/twobs run knn --input /tmp/$f.npy --param k=16 --backend cuda --index grid \
    --out /tmp/o.npy --report /tmp/r.json --quiet
  python3 -c "
import json; t = json.load(open('/tmp/r.json'))['timings']; g = t['gpu']
print(f\"$f compute {t['compute_s']:.4f} index {t['index_s']:.4f} grid {g['grid_s']:.4f} up {g['upload_s']:.4f} kernel {g['kernel_s']:.4f} down {g['download_s']:.4f}\")"
done
