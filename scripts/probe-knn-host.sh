export TWOBS_CACHE=/tmp/twobs-cache
python3 -c "
import numpy as np
r=np.random.default_rng(12345); r.random((2_000_000,2),dtype=np.float32)
np.save('/tmp/p3.npy', r.random((1_000_000,3),dtype=np.float32)*100)
np.save('/tmp/p10.npy', np.random.default_rng(2468).random((10_000_000,3),dtype=np.float32)*100)"
for f in p3 p3 p3 p10 p10; do target/release/twobs run knn --input /tmp/$f.npy --param k=16 --backend cuda --index grid --out /tmp/o.npy --report /tmp/r.json --quiet 2>&1 | grep TIMING | tr '\n' ' '; python3 -c "
import json; t=json.load(open('/tmp/r.json'))['timings']; g=t['gpu']; print(f\"compute {t['compute_s']:.4f} index {t['index_s']:.4f} grid {g['grid_s']:.4f} up {g['upload_s']:.4f} kern {g['kernel_s']:.4f} down {g['download_s']:.4f}\")"; done
