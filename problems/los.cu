// Separations across and along the line of sight, the z axis, as Corrfunc's
// theory.DDrppi and theory.DDsmu take them. With a periodic box
// (params::box.lx > 0) the separation is its minimum image, taken as
// rdf.cu takes it: whole edge vectors off, the last edge first, each count
// of edges the component times the length's reciprocal rounded to the
// nearest whole number on the FP32 pipe. A minimum image shorter than half
// the box's smallest width is found for every pair (the runner refuses
// larger ranges in a box); an open box (lx = 0) drops the branch.
__device__ __forceinline__ float los_nearest(float x) {
  constexpr float M = sizeof(float) == 4 ? 0x1.8p23f : 0x1.8p52;  // rintf(x) for |x| < 2^22
  return (x + M) - M;
}

__device__ float3 los_separation(float3 a, float3 b) {
  float3 d = make_float3(a.x - b.x, a.y - b.y, a.z - b.z);
  const auto& box = params::box;
  if (box.lx > 0.0f) {
    const float nz = los_nearest(d.z * (1.0f / box.lz));
    d.x = fmaf(-(box.xz * box.lz), nz, d.x);
    d.y = fmaf(-(box.yz * box.lz), nz, d.y);
    d.z = fmaf(-box.lz, nz, d.z);
    const float ny = los_nearest(d.y * (1.0f / box.ly));
    d.x = fmaf(-(box.xy * box.ly), ny, d.x);
    d.y = fmaf(-box.ly, ny, d.y);
    d.x = fmaf(-box.lx, los_nearest(d.x * (1.0f / box.lx)), d.x);
  }
  return d;
}

// rp = sqrt(dx^2 + dy^2) across the line of sight, pi = |dz| along it.
__device__ Value2 rp_pi(float3 a, float3 b) {
  const float3 d = los_separation(a, b);
  return {sqrtf(fmaf(d.y, d.y, d.x * d.x)), fabsf(d.z)};
}

// s = sqrt(dx^2 + dy^2 + dz^2), mu = |dz| / s, the cosine of the angle to
// the line of sight (0 where s = 0).
__device__ Value2 s_mu(float3 a, float3 b) {
  const float3 d = los_separation(a, b);
  const float s = sqrtf(fmaf(d.z, d.z, fmaf(d.y, d.y, d.x * d.x)));
  return {s, s > 0.0f ? fabsf(d.z) / s : 0.0f};
}
