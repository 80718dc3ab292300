#!/usr/bin/env python3
"""How far the built-ins' estimate of a distance is from the distance, on every float key.

The estimate is one `sqrt.approx.ftz.f32` (problems/distance.cu, approx_root);
the bracket of a bucket from keys (src/stage/contribution.rs, EstimateError) must
reach past its error plus the rounding of value x scale. This runs on the
GPU (CuPy) over all 2^32 bit patterns and prints, for the positive normal
keys, the largest relative error of the estimate against the exact square
root (in double) and against sqrtf (IEEE, what root() returns), in units of
2^-24; and what the estimate gives for zeros, subnormals, infinities,
negatives and NaNs.

Usage (device): python3 bench/estimate-error.py
"""
import math

import cupy as cp

SOURCE = r"""
extern "C" __global__ void errors(unsigned long long* worst, unsigned long long* classes) {
  // worst[0]: max |e - sqrt(k)| / sqrt(k); worst[1]: max |e - sqrtf(k)| / sqrtf(k), as double bits
  // classes: [0] normal keys, [1] subnormal keys whose estimate is 0, [2] other subnormal,
  // [3] +0/-0 giving 0, [4] +inf giving +inf, [5] negatives and NaNs giving NaN, [6] anything else
  unsigned long long local0 = 0, local1 = 0;
  unsigned long long c[7] = {0, 0, 0, 0, 0, 0, 0};
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < (1ull << 32);
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const unsigned u = (unsigned)i;
    const float k = __uint_as_float(u);
    float e;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(k));
    const unsigned exponent = (u >> 23) & 0xff;
    if (!(u >> 31) && exponent != 0 && exponent != 0xff) {
      const double exact = sqrt((double)k);
      const double v = (double)__fsqrt_rn(k);
      const double r0 = fabs((double)e - exact) / exact, r1 = fabs((double)e - v) / v;
      local0 = max(local0, (unsigned long long)__double_as_longlong(r0));
      local1 = max(local1, (unsigned long long)__double_as_longlong(r1));
      c[0]++;
    } else if (!(u >> 31) && exponent == 0 && (u & 0x7fffff)) {
      c[e == 0.0f ? 1 : 2]++;
    } else if ((u & 0x7fffffff) == 0) {
      c[e == 0.0f ? 3 : 6]++;
    } else if (u == 0x7f800000u) {
      c[isinf(e) && e > 0 ? 4 : 6]++;
    } else {
      c[isnan(e) || (u >> 31 && exponent == 0 && e == 0.0f) ? 5 : 6]++;
    }
  }
  atomicMax(worst, local0);
  atomicMax(worst + 1, local1);
  for (int j = 0; j < 7; ++j) atomicAdd(classes + j, c[j]);
}
"""


def main():
    kernel = cp.RawKernel(SOURCE, "errors")
    worst = cp.zeros(2, dtype=cp.uint64)
    classes = cp.zeros(7, dtype=cp.uint64)
    kernel((132 * 16,), (256,), (worst, classes))
    w = worst.view(cp.float64).get()
    c = classes.get()
    for name, r in (("exact sqrt", w[0]), ("sqrtf (IEEE)", w[1])):
        print(f"estimate against {name}: max relative error {r:.6e} = {r * 2**24:.4f} x 2^-24 = 2^{math.log2(r):.3f}")
    labels = ["positive normal keys", "subnormal keys, estimate 0 (ftz)", "subnormal keys, estimate not 0",
              "zeros, estimate 0", "+inf, estimate +inf", "negative keys and NaNs, estimate NaN (-subnormal: 0)",
              "anything else"]
    for label, n in zip(labels, c):
        print(f"{label}: {int(n)}")
    assert sum(int(n) for n in c) == 1 << 32


if __name__ == "__main__":
    main()
