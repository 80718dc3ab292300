// Euclidean distance between two points of DIMS coordinates: the square root
// of the squared distance, a non-decreasing map of a cheaper key (the spec
// says so), so that thresholds and bucket edges are tested on the squared
// distance. The built-ins take DIMS from their input (dims_from_input).
__device__ float squared_distance(const Point& a, const Point& b) {
  const float d0 = coord(a, 0) - coord(b, 0);
  float sum = d0 * d0;
  // In 3-D: fmaf(dz, dz, fmaf(dy, dy, dx * dx)), a rounding fewer per
  // coordinate than the plain sum, and an instruction fewer.
#pragma unroll
  for (unsigned i = 1; i < DIMS; ++i) {
    const float d = coord(a, i) - coord(b, i);
    sum = fmaf(d, d, sum);
  }
  return sum;
}

// Non-decreasing over every key, and one value for every NaN key, as a key
// map must be: no key the key function makes is negative, and negative ones
// and NaNs map to 0 (not fmaxf, which passes a signaling NaN on the host).
__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }

// A fast approximation of root (within 2^-21 of it, or NaN; 2^-23 on sm_90,
// measured on every key), to bracket a histogram bucket with: on the GPU one
// approximate square root instruction.
__device__ float approx_root(float k) {
#ifdef __CUDA_ARCH__
  float r;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(k));
  return r;
#else
  return sqrtf(k);
#endif
}

__device__ float distance(const Point& a, const Point& b) { return root(squared_distance(a, b)); }
