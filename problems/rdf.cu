// Distance between two atoms. With a periodic box (params::box.lx > 0) the
// separation is taken to its minimum image. The distance is the square root
// of the squared distance, a non-decreasing map of a cheaper key (the spec
// says so), so that shell edges are tested on the squared distance.

// Whole edge vectors come off the separation, one edge at a time: first the
// last (the only one with a z part) until |z| <= lz / 2, then the second
// until |y| <= ly / 2, then the first. A minimum image shorter than half the
// box's smallest width has every component below half its box length, so
// this finds it for every pair the histogram can count (the runner refuses
// an r_max above that). The box is a compile-time constant here (but see
// TWOBS_BOX_AT_RUN_TIME below): a cube's tilt terms vanish, and so do a unit
// box's multiplies.
// A template on the box's type too, so that an open box (lx = 0) never
// instantiates, nor checks, the reciprocals of its lengths.
//
// The number of edges to take off is the component times the length's
// reciprocal (a constant), rounded to the nearest integer: a division would
// cost a dozen instructions a component, more than the rest of the pair.
// This rounds otherwise than the quotient would only where the component is
// within about 2^-24 of itself of an odd multiple of half the length: the
// image left is then within a few ulps of -/+ half the length, and either is,
// to rounding, a minimum one. (At an r_max of exactly half the width such a
// pair may fall either side of the last edge, as with a division.) Each edge
// comes off in one fused multiply-add, one rounding.
//
// nearest<unit>(x, s) is rintf(x s) for |x s| < 2^22: the product plus 1.5 x 2^23,
// rounded once (to the nearest integer, ties to even), less 1.5 x 2^23; all on
// the FP32 pipe, where rintf is a conversion instruction, which Hopper issues
// at an eighth of the FP32 rate. Separations of points in the box are a few
// box lengths at most. Where s is 1 (a unit box), the same sum without the
// product: one operand fewer for ptxas to hold in a register. The constant
// is float's: the CPU backend's --f64 reads float as double, whose sums round
// to whole numbers only at 1.5 x 2^52.
template <bool unit>
__device__ __forceinline__ float nearest(float x, float s) {
  constexpr float M = sizeof(float) == 4 ? 0x1.8p23f : 0x1.8p52;
  return (unit ? x + M : fmaf(x, s, M)) - M;
}

template <bool periodic, typename Box = PeriodicBox<float>>
__device__ float3 min_image(float3 d) {
  constexpr Box box = params::box;
  if constexpr (periodic) {
    constexpr float per_lx = 1.0f / box.lx, per_ly = 1.0f / box.ly, per_lz = 1.0f / box.lz;
    const float nz = nearest<box.lz == 1.0f>(d.z, per_lz);
    if (box.xz != 0.0f) d.x = fmaf(-(box.xz * box.lz), nz, d.x);
    if (box.yz != 0.0f) d.y = fmaf(-(box.yz * box.lz), nz, d.y);
    d.z = fmaf(-box.lz, nz, d.z);
    const float ny = nearest<box.ly == 1.0f>(d.y, per_ly);
    if (box.xy != 0.0f) d.x = fmaf(-(box.xy * box.ly), ny, d.x);
    d.y = fmaf(-box.ly, ny, d.y);
    d.x = fmaf(-box.lx, nearest<box.lx == 1.0f>(d.x, per_lx), d.x);
  }
  return d;
}

#ifdef TWOBS_BOX_AT_RUN_TIME
// The same arithmetic with a box read at run time (one kernel for every box of
// an NPT trajectory): the reciprocals and tilted components come with the box,
// rounded as the compiler folds them above, and a unit length's product by 1
// is exact. A tilt's terms are taken whether or not it is 0, with no branch in
// the pair loop: a zero tilt's product is a zero, and a component plus a zero
// is the component (its sign of zero aside, which no square sees). So both
// give the same bits.
__device__ float3 min_image_at_run_time(float3 d) {
  const auto& box = params::box;
  const float nz = nearest<false>(d.z, box.per_lz);
  d.x = fmaf(-box.xz_lz, nz, d.x);
  d.y = fmaf(-box.yz_lz, nz, d.y);
  d.z = fmaf(-box.lz, nz, d.z);
  const float ny = nearest<false>(d.y, box.per_ly);
  d.x = fmaf(-box.xy_ly, ny, d.x);
  d.y = fmaf(-box.ly, ny, d.y);
  d.x = fmaf(-box.lx, nearest<false>(d.x, box.per_lx), d.x);
  return d;
}
#endif

__device__ float squared_min_image_distance(float3 a, float3 b) {
#ifdef TWOBS_BOX_AT_RUN_TIME
  const float3 d = min_image_at_run_time(make_float3(a.x - b.x, a.y - b.y, a.z - b.z));
#else
  const float3 d = min_image<(params::box.lx > 0.0f)>(make_float3(a.x - b.x, a.y - b.y, a.z - b.z));
#endif
  return fmaf(d.z, d.z, fmaf(d.y, d.y, d.x * d.x));  // two roundings fewer than the plain sum, and two instructions
}

// Non-decreasing over every key, and one value for every NaN key, as a key
// map must be: no key the key function makes is negative, and negative ones
// and NaNs map to 0 (not fmaxf, which passes a signaling NaN on the host).
__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }

// A fast approximation of root (within 2^-21 of it, or NaN; 2^-23 on sm_90,
// measured on every key), to bracket a shell with: on the GPU one approximate
// square root instruction.
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
