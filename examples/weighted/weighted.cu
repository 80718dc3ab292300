// A point is (x, y, z, weight).
// Euclidean distance between the positions of two points.
__device__ float distance(float4 a, float4 b) {
  const float dx = a.x - b.x;
  const float dy = a.y - b.y;
  const float dz = a.z - b.z;
  return sqrtf(dx * dx + dy * dy + dz * dz);
}

// A pair weighs the product of its points' weights.
__device__ float weight_product(float4 a, float4 b) { return a.w * b.w; }
