// Euclidean distance between two 2-D points.
__device__ float distance(float2 a, float2 b) {
  const float dx = a.x - b.x;
  const float dy = a.y - b.y;
  return sqrtf(dx * dx + dy * dy);
}
