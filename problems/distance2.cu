// Euclidean distance between two 2-D points: the square root of the squared
// distance, a non-decreasing map of a cheaper key (the spec says so), so that
// thresholds are tested on the squared distance.
__device__ float squared_distance(float2 a, float2 b) {
  const float dx = a.x - b.x;
  const float dy = a.y - b.y;
  return fmaf(dy, dy, dx * dx);  // one rounding fewer than the plain sum, and one instruction
}

// Non-decreasing over every key, as a key map must be: no key the key
// function makes is negative, and negative ones map to 0.
__device__ float root(float k) { return sqrtf(fmaxf(k, 0.0f)); }

// A fast approximation of root, only to guess a bucket the key edges then correct.
__device__ float approx_root(float k) { return k * rsqrtf(k); }

__device__ float distance(float2 a, float2 b) { return root(squared_distance(a, b)); }
