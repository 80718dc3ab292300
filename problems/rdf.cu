// Distance between an A atom and a B atom. With a periodic box (params::box > 0)
// each coordinate difference is wrapped to its minimum image. The distance is
// the square root of the squared distance, a non-decreasing map of a cheaper
// key (the spec says so), so that shell edges are tested on the squared distance.
__device__ float wrap(float d) {
  const float box = params::box;
  if (box > 0.0f) d -= box * rintf(d / box);
  return d;
}

__device__ float squared_min_image_distance(float3 a, float3 b) {
  const float dx = wrap(a.x - b.x);
  const float dy = wrap(a.y - b.y);
  const float dz = wrap(a.z - b.z);
  return fmaf(dz, dz, fmaf(dy, dy, dx * dx));  // two roundings fewer than the plain sum, and two instructions
}

// Non-decreasing over every key, as a key map must be: no key the key
// function makes is negative, and negative ones map to 0.
__device__ float root(float k) { return sqrtf(fmaxf(k, 0.0f)); }

// A fast approximation of root, only to guess a shell the key edges then correct.
__device__ float approx_root(float k) { return k * rsqrtf(k); }

__device__ float min_image_distance(float3 a, float3 b) { return root(squared_min_image_distance(a, b)); }
