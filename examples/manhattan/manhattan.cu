// L1 distance between two 4-D points.
__device__ float l1(float4 a, float4 b) {
  return fabsf(a.x - b.x) + fabsf(a.y - b.y) + fabsf(a.z - b.z) + fabsf(a.w - b.w);
}
