// Euclidean distance between two 3-D points: the square root of the squared
// distance, a non-decreasing map of a cheaper key (the spec says so), so that
// thresholds and bucket edges are tested on the squared distance.
__device__ float squared_distance(float3 a, float3 b) {
  const float dx = a.x - b.x;
  const float dy = a.y - b.y;
  const float dz = a.z - b.z;
  return fmaf(dz, dz, fmaf(dy, dy, dx * dx));  // two roundings fewer than the plain sum, and two instructions
}

// Non-decreasing over every key, as a key map must be: no key the key
// function makes is negative, and negative ones map to 0.
__device__ float root(float k) { return sqrtf(fmaxf(k, 0.0f)); }

// A fast approximation of root, only to guess a bucket the key edges then correct.
__device__ float approx_root(float k) { return k * rsqrtf(k); }

__device__ float distance(float3 a, float3 b) { return root(squared_distance(a, b)); }
