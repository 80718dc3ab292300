// Distance between two atoms of a periodic cube of side L: each component of
// the separation taken to its nearest image.
__device__ float distance(float3 a, float3 b) {
  float dx = a.x - b.x;
  float dy = a.y - b.y;
  float dz = a.z - b.z;
  dx -= params::L * rintf(dx / params::L);
  dy -= params::L * rintf(dy / params::L);
  dz -= params::L * rintf(dz / params::L);
  return sqrtf(dx * dx + dy * dy + dz * dz);
}
