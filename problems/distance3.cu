// Euclidean distance between two 3-D points.
__device__ float distance(float3 a, float3 b) {
  const float dx = a.x - b.x;
  const float dy = a.y - b.y;
  const float dz = a.z - b.z;
  return sqrtf(dx * dx + dy * dy + dz * dz);
}
