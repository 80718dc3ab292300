// Distance between two atoms. With a periodic box (params::box.lx > 0) the
// separation is taken to its minimum image. The distance is the square root
// of the squared distance, a non-decreasing map of a cheaper key (the spec
// says so), so that shell edges are tested on the squared distance.

// Whole edge vectors come off the separation, one edge at a time: first the
// last (the only one with a z part) until |z| <= lz / 2, then the second
// until |y| <= ly / 2, then the first. A minimum image shorter than half the
// box's smallest width has every component below half its box length, so
// this finds it for every pair the histogram can count (the runner refuses
// an r_max above that). The box is a compile-time constant: a cube's tilt
// terms vanish.
// A template on the box's type too, so that an open box (lx = 0) never
// instantiates, nor checks, the divisions by its lengths.
//
// nearest(x) is rintf(x) for |x| < 2^22 (adding and taking off 1.5 x 2^23
// rounds to the nearest integer, ties to even), on the FP32 pipe: rintf is a
// conversion instruction, which Hopper issues at an eighth of the FP32 rate.
// Separations of points in the box are a few box lengths at most.
__device__ __forceinline__ float nearest(float x) { return (x + 12582912.0f) - 12582912.0f; }

template <bool periodic, typename Box = PeriodicBox<float>>
__device__ float3 min_image(float3 d) {
  constexpr Box box = params::box;
  if constexpr (periodic) {
    const float nz = nearest(d.z / box.lz);
    if (box.xz != 0.0f) d.x -= (box.xz * box.lz) * nz;
    if (box.yz != 0.0f) d.y -= (box.yz * box.lz) * nz;
    d.z -= box.lz * nz;
    const float ny = nearest(d.y / box.ly);
    if (box.xy != 0.0f) d.x -= (box.xy * box.ly) * ny;
    d.y -= box.ly * ny;
    d.x -= box.lx * nearest(d.x / box.lx);
  }
  return d;
}

__device__ float squared_min_image_distance(float3 a, float3 b) {
  const float3 d = min_image<(params::box.lx > 0.0f)>(make_float3(a.x - b.x, a.y - b.y, a.z - b.z));
  return fmaf(d.z, d.z, fmaf(d.y, d.y, d.x * d.x));  // two roundings fewer than the plain sum, and two instructions
}

// Non-decreasing over every key, and one value for every NaN key, as a key
// map must be: no key the key function makes is negative, and negative ones
// and NaNs map to 0 (not fmaxf, which passes a signaling NaN on the host).
__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }

// A fast approximation of root (within 2^-21 of it, or NaN), to bracket a
// shell with: on the GPU one approximate square root instruction.
__device__ float approx_root(float k) {
#ifdef __CUDA_ARCH__
  float r;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(k));
  return r;
#else
  return sqrtf(k);
#endif
}

__device__ float min_image_distance(float3 a, float3 b) { return root(squared_min_image_distance(a, b)); }
