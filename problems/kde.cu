// Gaussian kernel of bandwidth params::h between two 3-D points.
__device__ float gaussian(float3 a, float3 b) {
  const float dx = a.x - b.x;
  const float dy = a.y - b.y;
  const float dz = a.z - b.z;
  const float d2 = dx * dx + dy * dy + dz * dz;
  return expf(-d2 * (0.5f / (params::h * params::h)));
}
