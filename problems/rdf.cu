// Distance between an A atom and a B atom. With a periodic box (params::box > 0)
// each coordinate difference is wrapped to its minimum image.
__device__ float wrap(float d) {
  const float box = params::box;
  if (box > 0.0f) d -= box * rintf(d / box);
  return d;
}

__device__ float min_image_distance(float3 a, float3 b) {
  const float dx = wrap(a.x - b.x);
  const float dy = wrap(a.y - b.y);
  const float dz = wrap(a.z - b.z);
  return sqrtf(dx * dx + dy * dy + dz * dz);
}
