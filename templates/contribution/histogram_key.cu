{% include "contribution/bucket.cu" %}
{% include "contribution/keys.cu" %}
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

// A key's bucket without its value. The spec's estimate of the value, within
// p = 2^-{{ stage.estimate_error }} of it, scaled by SCALE / (1 + p) and by SCALE (1 + 2^-24) /
// (1 - p) (EstimateError::bracket_scales), brackets the bucket of the value
// scaled and rounded, and the bucket floor(value x SCALE) is non-decreasing in
// the value: where both ends of the bracket floor to one bucket, that is the
// key's. Elsewhere (a pair within about p + 2^-24 of a bucket edge, a NaN)
// the value decides, unless the bracket's lower end is past the last bucket
// already. The lower edge is 0 (min = 0), so the bracket needs no
// subtraction. The keys probe checks every float key against its value's
// bucket.
{%- if stage.estimate_error == 23 %}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#error "this bracket trusts sqrt.approx as measured on sm_90 only: generate the kernel for this GPU (twobs gen --device)"
#endif
{%- endif %}
constexpr float SCALE_BELOW = {{ stage.scale_below }};  // rounded down
constexpr float SCALE_ABOVE = {{ stage.scale_above }};  // rounded up
static_assert(LO == Value(0), "the bracket is for histograms from 0");

// 2^24 - SLOTS, floor_scaled's addend, and minus its bits (mod 2^32), read as
// operands from constant memory: written as literals, ptxas re-creates both
// in registers in every step of the pair loop (about 0.4 instructions a pair).
// Past the last bucket the sum reaches 2^24, where floats lie 2 or more apart,
// so that the bracket's two ends of a pair there agree more often (RDF's
// pairs beyond r_max, most of its pairs).
static_assert(SLOTS < (1u << 23), "the bracket's floors are exact below 2^23 buckets");
constexpr float FLOOR_ZERO = 16777216.0f - static_cast<float>(SLOTS);  // floor_scaled's bucket 0
__constant__ float FLOOR_BASE = FLOOR_ZERO;
// The bits of FLOOR_ZERO: 2^24's less SLOTS, the floats below 2^24 being 1 apart.
__constant__ unsigned FLOOR_BASE_BITS_NEGATED = 0u - (0x4B800000u - SLOTS);

// FLOOR_ZERO + floor(x s) in a float, exactly for 0 <= x s < SLOTS; below 0
// a float under FLOOR_ZERO (no bucket), from SLOTS on at least 2^24 (no
// bucket), and non-decreasing in x s. One multiply-add rounded down on the
// GPU; on the CPU the product of two floats is exact in double.
__device__ __forceinline__ float floor_scaled(float x, float s) {
#ifdef __CUDA_ARCH__
  return __fmaf_rd(x, s, FLOOR_BASE);
#else
  return static_cast<float>(std::floor(static_cast<double>(x) * static_cast<double>(s)) + FLOOR_ZERO);
#endif
}

// The bucket of the bracket's lower end; sure when the upper end's is the
// same (not near an edge, not NaN).
__device__ __forceinline__ unsigned bucket_of_key_fast(float twobs_k, bool& twobs_sure) {
  const float twobs_e = twobs_estimate(twobs_k);
  const float twobs_below = floor_scaled(twobs_e, SCALE_BELOW);
  const float twobs_above = floor_scaled(twobs_e, SCALE_ABOVE);
  twobs_sure = twobs_below == twobs_above;
  // Past the last bucket, and below 0 (bits under FLOOR_ZERO's, or a sign), is no bucket.
  return min(__float_as_uint(twobs_below) + FLOOR_BASE_BITS_NEGATED, SLOTS);
}

// The bucket of a key the bracket is unsure of. Where the bracket's lower
// end is past the last bucket, so is the value (RDF's pairs beyond r_max,
// most of its unsure ones); elsewhere the value decides.
__device__ __forceinline__ unsigned bucket_of_unsure_key(float twobs_k) {
  constexpr float PAST_LAST = FLOOR_ZERO + static_cast<float>(SLOTS);  // 2^24: floor_scaled's bucket SLOTS
  const float twobs_below = floor_scaled(twobs_estimate(twobs_k), SCALE_BELOW);
  return twobs_below >= PAST_LAST ? SLOTS : bucket_of(twobs_map(twobs_k));
}

__device__ __forceinline__ unsigned bucket_of_key(float twobs_k) {
  bool twobs_sure;
  const unsigned twobs_slot = bucket_of_key_fast(twobs_k, twobs_sure);
  return twobs_sure ? twobs_slot : bucket_of_unsure_key(twobs_k);
}

// The bucket of a key, and of its value, which the key probe checks it
// against; the edges are the smallest keys of each bucket, for the probe to
// look around.
__device__ __forceinline__ unsigned key_slot(Key twobs_k) { return bucket_of_key(twobs_k); }
__device__ __forceinline__ unsigned value_slot(Key twobs_k) { return bucket_of(twobs_map(twobs_k)); }
__device__ __forceinline__ unsigned key_edges() { return SLOTS + 1; }

// What the key probe checks on every key.
__device__ __forceinline__ bool key_agrees(Key twobs_k) { return key_slot(twobs_k) == value_slot(twobs_k); }
// And what it measures, the bracket's premise: how far the estimate of a
// positive normal key's value lies from that value, relatively. Elsewhere 0:
// zeros, subnormals, infinities, negatives and NaNs, like a NaN estimate, are
// the bracket's own cases, which key_agrees checks.
__device__ __forceinline__ double key_estimate_error(Key twobs_k) {
  const unsigned twobs_exponent = (__float_as_uint(twobs_k) >> 23) & 0xffu;
  if (__float_as_uint(twobs_k) >> 31 || twobs_exponent == 0 || twobs_exponent == 0xffu) return 0.0;
  const double twobs_v = twobs_map(twobs_k), twobs_e = twobs_estimate(twobs_k);
  if (!(twobs_v > 0.0) || twobs_e != twobs_e || twobs_e == twobs_v) return 0.0;
  if (twobs_v > 3.4028234663852886e38) return 1.0 / 0.0;  // a finite estimate of an infinite value
  return (twobs_e > twobs_v ? twobs_e - twobs_v : twobs_v - twobs_e) / twobs_v;
}
__device__ __forceinline__ Key key_edge(unsigned twobs_j) {
  return smallest_key([twobs_j](Key twobs_k) { return (twobs_map(twobs_k) - LO) * SCALE >= Value(twobs_j); });
}

// Nothing to set up: the bracket's scales are constants.
__device__ __forceinline__ void prepare_contribution() { prepare_buckets(); }

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {bucket_of_key(twobs_key(twobs_a, twobs_b)), 1u};
}

// The bracket's scales are constants: nothing to read.
struct Setup {};

__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup&,
                                                Contribution& twobs_c) {
  bool twobs_sure;
  twobs_c = {bucket_of_key_fast(twobs_key(twobs_a, twobs_b), twobs_sure), 1u};
  return twobs_sure;
}

// The exact answer where contribute_fast was unsure.
__device__ __forceinline__ Contribution contribute_unsure(const Point& twobs_a, const Point& twobs_b) {
  return {bucket_of_unsure_key(twobs_key(twobs_a, twobs_b)), 1u};
}
