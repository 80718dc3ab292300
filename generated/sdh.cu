// twobs kernel: sdh (problems/sdh.xml)
// Spatial distance histogram: Euclidean distances between the pairs of points (3-D, or as many coordinates as the input has) of one set (one input) or of A x B (two inputs), counted into buckets over [r_min, r_max)
//
// Input: one set (self), element f32 x 3; pair function `distance` from problems/distance.cu (symmetric)
// Output: histogram of bins = 500 buckets over [r_min = 0, r_max = 1.7320508)
// Parameters: bins = 500, r_min = 0, r_max = 1.7320508
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for sdh on h100: 1000000 points, 499999500000 pairs (lower_triangle)
//   visit         lower_triangle  one set and a symmetric function: each unordered pair i < j once
//   output class  TypeII          output 4000 B: above alpha = 16 B, within beta = 232448 B of shared memory per block
//   test          keys            distance(a, b) is root(squared_distance(a, b)): each pair's bucket comes from approx_root(key), within 2^-23 of the value (as measured on every key on sm_90), scaled by 1 / (1 + 2^-23) and (1 + 2^-24) / (1 - 2^-23), which brackets the value; root only where the bracket spans a bucket edge
//   output        aop             16 copies by lane id (AOP) per block (the copy model's choice is shown below): measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   input_cache   register_shm    register_shm: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   block_size    512             512 threads a block: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   points/thread 4               4 own points per thread (~40 registers): measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   copies        16              measured on this kind of GPU (the copy model below is shown for comparison)
//   counter       unsigned        32-bit counters, native shared atomics: a copy counts at most 2048 own points x 1000000 partners = 2048000000 < 2^32 pairs
//   diagonal      balanced        thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)
//   resources                     grid 489 blocks; 38208 B shared per block (6144 B tile + 32064 B output + 0 B key test); ~40 registers per thread (estimate)
//   occupancy                     3 blocks = 1536 threads per multiprocessor (limited by Registers); R = 2 rounds
//
//   copy model (eq. 1-5): H_S = 500 elements, C_L = 1, C_LP = 0.03 (fitted to SDH times measured on an H100), gamma = 13697
//     copies   k  shared/block  blocks/SM  threads/SM  rounds R  L(k)/C_L     R x L
//          1  32          8144          3        1536         2    1.044       2.1
//          2  16         10144          3        1536         2    1.008       2.0
//          4   8         14144          3        1536         2    1.002       2.0
//          8   4         22144          3        1536         2    1.000       2.0
//         16   2         38144          3        1536         2    1.000       2.0
//         32   1         70144          3        1536         2    1.000       2.0  <- least
//
// Launch: 489 blocks of 512 threads, 38208 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/sdh.xml --device h100 --dims 3
// ------------------------------------------------------------------ types
typedef float3 Point;
typedef float Value;

// The point's coordinates by number, for snippets of any dimension: in an
// unrolled loop over DIMS every index is a constant and coord a register.
[[maybe_unused]] constexpr unsigned DIMS = 3;
__device__ __forceinline__ float coord(const Point& p, unsigned i) {
  return i == 0 ? p.x : i == 1 ? p.y : p.z;
}

// A periodic box (a parameter of type="box"): edge vectors (lx, 0, 0),
// (xy ly, ly, 0), (xz lz, yz lz, lz), tilt factors as in HOOMD and freud;
// lx == 0 for open boundaries.
template <typename T>
struct PeriodicBox {
  T lx, ly, lz, xy, xz, yz;
};

// Parameters are compile-time constants: the runner recompiles when they change.
namespace params {
[[maybe_unused]] constexpr unsigned bins = 500u;
[[maybe_unused]] constexpr float r_min = 0.0f;
[[maybe_unused]] constexpr float r_max = 1.7320508f;
}  // namespace params

// ------------------------------------------------------------------ the pairwise function
#line 1 "problems/distance.cu"
// Euclidean distance between two points of DIMS coordinates: the square root
// of the squared distance, a non-decreasing map of a cheaper key (the spec
// says so), so that thresholds and bucket edges are tested on the squared
// distance. The built-ins take DIMS from their input (dims_from_input).
__device__ float squared_distance(const Point& a, const Point& b) {
  const float d0 = coord(a, 0) - coord(b, 0);
  float sum = d0 * d0;
  // In 3-D: fmaf(dz, dz, fmaf(dy, dy, dx * dx)), a rounding fewer per
  // coordinate than the plain sum, and an instruction fewer.
#pragma unroll
  for (unsigned i = 1; i < DIMS; ++i) {
    const float d = coord(a, i) - coord(b, i);
    sum = fmaf(d, d, sum);
  }
  return sum;
}

// Non-decreasing over every key, and one value for every NaN key, as a key
// map must be: no key the key function makes is negative, and negative ones
// and NaNs map to 0 (not fmaxf, which passes a signaling NaN on the host).
__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }

// A fast approximation of root (within 2^-21 of it, or NaN; 2^-23 on sm_90,
// measured on every key), to bracket a histogram bucket with: on the GPU one
// approximate square root instruction.
__device__ float approx_root(float k) {
#ifdef __CUDA_ARCH__
  float r;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(k));
  return r;
#else
  return sqrtf(k);
#endif
}

__device__ float distance(const Point& a, const Point& b) { return root(squared_distance(a, b)); }
#line 36 "problems/distance.cu"
__device__ __forceinline__ Value twobs_pair(const Point& twobs_a, const Point& twobs_b) { return distance(twobs_a, twobs_b); }
#line 5 "problems/distance.cu"
__device__ __forceinline__ Value twobs_key(const Point& twobs_a, const Point& twobs_b) { return squared_distance(twobs_a, twobs_b); }
#line 21 "problems/distance.cu"
__device__ __forceinline__ Value twobs_map(Value twobs_k) { return root(twobs_k); }
#line 26 "problems/distance.cu"
__device__ __forceinline__ Value twobs_estimate(Value twobs_k) { return approx_root(twobs_k); }
#line 108 "sdh.cu"
// The calls into the snippet above are rendered at the lines of the functions
// they call, so that a parameter or return type that does not fit is reported there.

// Everything twobs defines after the snippet lives in its own namespace, so
// that no name of the user's can clash with it.
namespace twobs_generated {
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = 512;  // threads per block = points per tile
constexpr unsigned R = 4;  // own points per thread: each tile point serves R pairs
[[maybe_unused]] constexpr unsigned TILE_BYTES = 6144;  // the input tile's shared memory; the output's follows
[[maybe_unused]] constexpr bool UNORDERED_PAIRS = true;  // a pair is (min, max), not (own, other)
[[maybe_unused]] constexpr unsigned FULL_WARP = 0xffffffffu;
#define TWOBS_THREAD threadIdx.x  // fragments that set up shared state split it over the block
#define TWOBS_THREADS B

__device__ __forceinline__ unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

// A point set: one array per component (SoA), each padded to a multiple of
// 1024 elements so that whole tiles and 16-byte loads stay in bounds.
struct Set {
  const float* x;
  const float* y;
  const float* z;
  unsigned n;
};

// A grid's shape for a search of rings (src/stage/mod.rs RingShape): cells
// per axis (axis 0 varies fastest), a bit per wrapping axis, a ring's reach.
struct RingShape {
  unsigned cells[3];
  unsigned periodic;
  double reach;
};

__device__ __forceinline__ Point load_point(const Set& s, unsigned i) {
  Point p;
  p.x = s.x[i];
  p.y = s.y[i];
  p.z = s.z[i];
  return p;
}

// What the output stage learns about its thread. Own point r of the thread
// is A's point i0 + r * B (so that the block's loads of them coalesce).
struct Here {
  unsigned i0;               // the thread's first own point in set A's block
  unsigned own_end;          // the end of the block's own points: those at or past it are padding
  unsigned a_offset;         // whole-input index of A's first point
  unsigned other_offset;     // likewise for the other set
  unsigned char* output_smem;  // the output's shared memory, after the input tile

  __device__ __forceinline__ unsigned own(unsigned r) const { return i0 + r * B; }
  __device__ __forceinline__ bool valid(unsigned r) const { return own(r) < own_end; }
};

// ------------------------------------------------------------------ what a pair contributes: histogram
[[maybe_unused]] constexpr unsigned SLOTS = static_cast<unsigned>(params::bins);
[[maybe_unused]] constexpr Value LO = 0.0f;
[[maybe_unused]] constexpr Value SCALE = 288.67514f;

// The nearest whole number to x in [0, SLOTS - 1], without a conversion instruction.
__device__ __forceinline__ int guess_index(float x) {
  x = fminf(fmaxf(x, 0.0f), static_cast<float>(SLOTS - 1));  // a NaN guess becomes 0
  return __float_as_int(x + 12582912.0f) - 0x4B400000;        // 1.5 x 2^23: the low bits are round(x)
}
__device__ __forceinline__ int guess_index(double x) {
  return static_cast<int>(fmin(fmax(x, 0.0), static_cast<double>(SLOTS - 1)));
}

// bucket = floor((v - LO) * SCALE) in Value arithmetic, SCALE = bins / (max - min)
// rounded once on the host; values outside [min, max) and NaN fall in no
// bucket (SLOTS). Below min is tested on the value: a product that
// underflows to -0 (SCALE < 1) would pass x >= 0.
__device__ __forceinline__ void prepare_buckets() {}

__device__ __forceinline__ unsigned bucket_of(Value v) {
  const Value x = (v - LO) * SCALE;
  return (v >= LO && x < Value(SLOTS)) ? static_cast<unsigned>(x) : SLOTS;
}

// Keys (the spec's key map): the value of a pair is map(key) with map
// non-decreasing, so whether a value passes a test, or reaches a bucket,
// holds for all keys from some edge on. Each edge is the smallest key that
// passes, found by bisection over the keys in order with the very arithmetic
// of map; each backend finds its edges when it starts, with its own
// arithmetic. Pairs are then tested on the key alone. A NaN key is tested on
// its value.
typedef Value Key;

// Non-NaN keys in order, as unsigned integers (sign-magnitude to offset binary).
__device__ __forceinline__ unsigned long long key_rank(float k) {
  const unsigned u = __float_as_uint(k);
  return (u & 0x80000000u) ? static_cast<unsigned long long>(~u) : static_cast<unsigned long long>(u | 0x80000000u);
}
__device__ __forceinline__ float key_of_rank(unsigned long long r, float) {
  const unsigned u = static_cast<unsigned>(r);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
__device__ __forceinline__ float key_infinity(float) { return __uint_as_float(0x7f800000u); }
__device__ __forceinline__ unsigned long long key_rank(double k) {
  const unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(k));
  return (u >> 63) ? ~u : (u | (1ull << 63));
}
__device__ __forceinline__ double key_of_rank(unsigned long long r, double) {
  return __longlong_as_double(static_cast<long long>((r >> 63) ? (r & ~(1ull << 63)) : ~r));
}
__device__ __forceinline__ double key_infinity(double) { return __longlong_as_double(0x7ff0000000000000LL); }

// The smallest key k with passes(k), for passes false and then true along the
// keys: -inf when every key passes, NaN when none does (a comparison
// `k >= edge` is then false for every key).
template <class Passes>
__device__ Key smallest_key(Passes passes) {
  const Key inf = key_infinity(Key(0));
  if (!passes(inf)) return inf - inf;  // NaN
  if (passes(-inf)) return -inf;
  unsigned long long lo = key_rank(-inf), hi = key_rank(inf);  // passes(lo) false, passes(hi) true
  while (hi - lo > 1) {
    const unsigned long long mid = lo + (hi - lo) / 2;
    if (passes(key_of_rank(mid, Key(0)))) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return key_of_rank(hi, Key(0));
}

// The key before first_fail, the smallest key that fails (as smallest_key
// gives it): the largest key that passes, +inf when none fails, NaN when
// every key does (a comparison `k <= edge` is then false for every key).
__device__ __forceinline__ Key key_before(Key first_fail) {
  const Key inf = key_infinity(Key(0));
  if (first_fail != first_fail) return inf;  // none fails
  if (first_fail == -inf) return inf - inf;   // every key fails: NaN
  return key_of_rank(key_rank(first_fail) - 1, Key(0));
}

typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

// A key's bucket without its value. The spec's estimate of the value, within
// p = 2^-23 of it, scaled by SCALE / (1 + p) and by SCALE (1 + 2^-24) /
// (1 - p) (EstimateError::bracket_scales), brackets the bucket of the value
// scaled and rounded, and the bucket floor(value x SCALE) is non-decreasing in
// the value: where both ends of the bracket floor to one bucket, that is the
// key's. Elsewhere (a pair within about p + 2^-24 of a bucket edge, a NaN)
// the value decides, unless the bracket's lower end is past the last bucket
// already. The lower edge is 0 (min = 0), so the bracket needs no
// subtraction. The keys probe checks every float key against its value's
// bucket.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#error "this bracket trusts sqrt.approx as measured on sm_90 only: generate the kernel for this GPU (twobs gen --device)"
#endif
constexpr float SCALE_BELOW = 288.67508f;  // rounded down
constexpr float SCALE_ABOVE = 288.6752f;  // rounded up
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

// ------------------------------------------------------------------ input stage: register_shm
// Register-SHM: each thread keeps its own points in registers; the block
// stages the other tile in shared memory with 16-byte loads, one array per
// component, and every thread reads it back (broadcast, no bank conflicts),
// RUN points of each array in one load.
constexpr unsigned RUN = 4;
// Tiles start where every array's 16-byte loads are aligned.
[[maybe_unused]] constexpr unsigned TILE_ALIGN = 4;
template <class T>
struct alignas(RUN * sizeof(T)) Run {
  T v[RUN];
};

struct Tiles {
  float* x;
  float* y;
  float* z;

  __device__ __forceinline__ explicit Tiles(unsigned char* smem) {
    x = reinterpret_cast<float*>(smem + 0);
    y = reinterpret_cast<float*>(smem + 2048);
    z = reinterpret_cast<float*>(smem + 4096);
  }

  __device__ __forceinline__ static void copy16(const void* from, void* to, unsigned bytes) {
    const uint4* src = static_cast<const uint4*>(from);
    uint4* dst = static_cast<uint4*>(to);
    for (unsigned k = threadIdx.x; k < bytes / 16; k += B) dst[k] = src[k];
  }

  __device__ __forceinline__ void load(const Set& s, unsigned start) {
    __syncthreads();  // everyone is done with the previous tile
    copy16(s.x + start, x, B * sizeof(float));
    copy16(s.y + start, y, B * sizeof(float));
    copy16(s.z + start, z, B * sizeof(float));
    __syncthreads();
  }

  __device__ __forceinline__ Point at(unsigned j) const {
    Point p;
    p.x = x[j];
    p.y = y[j];
    p.z = z[j];
    return p;
  }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    unsigned j = 0;
    // Unrolled a little (Tallying::tile_runs_unrolled): a full tile of a constant length would otherwise unroll whole.
#pragma unroll 2
    for (; j + RUN <= len; j += RUN) {
      const Run<float> run_x = *reinterpret_cast<const Run<float>*>(x + j);
      const Run<float> run_y = *reinterpret_cast<const Run<float>*>(y + j);
      const Run<float> run_z = *reinterpret_cast<const Run<float>*>(z + j);
#pragma unroll
      for (unsigned k = 0; k < RUN; ++k) {
        Point p;
        p.x = run_x.v[k];
        p.y = run_y.v[k];
        p.z = run_z.v[k];
        f(j + k, p);
      }
    }
    for (; j < len; ++j) f(j, at(j));
  }
};

// ------------------------------------------------------------------ output stage: aop16
// Output privatization in shared memory: COPIES private copies of the totals
// per block; lane l updates copy l % COPIES, so only lanes that share a copy
// can collide (AOP, section 3.3.2; COPIES = 1 is plain OP). Copy c of slot s
// is word s * COPIES + c: with 32 copies the lanes of a warp hit 32 different
// banks. A pair that adds nothing adds to slot SLOTS, which is never read, so
// that no pair branches. The copies are summed into the global totals once
// per block.
constexpr unsigned COPIES = 16;
typedef unsigned Counter;  // what a copy counts in

// Adds to the counter at a shared-memory address: one multiply-add makes the
// address of a slot's copy (a generic pointer would take three instructions).
__device__ __forceinline__ void add_to_copy(unsigned address, unsigned v) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(address), "r"(v) : "memory");
}
__device__ __forceinline__ void add_to_copy(unsigned address, unsigned long long v) {
  atomicAdd(static_cast<unsigned long long*>(__cvta_shared_to_generic(address)), v);
}
__device__ __forceinline__ void add_to_copy(unsigned address, double v) {
  atomicAdd(static_cast<double*>(__cvta_shared_to_generic(address)), v);
}

struct Output {
  Total* out;
  Setup setup;  // the contribution's, read once
  Counter* copies;
  unsigned mine;  // the shared-memory address of this lane's copy of slot 0

  __device__ __forceinline__ Output(Total* totals, const Here& here)
      : out(totals),
        copies(reinterpret_cast<Counter*>(here.output_smem)),
        mine(static_cast<unsigned>(__cvta_generic_to_shared(copies + (threadIdx.x & (COPIES - 1))))) {
    for (unsigned k = threadIdx.x; k < COPIES * (SLOTS + 1); k += B) copies[k] = Counter(0);
    __syncthreads();
  }
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  // The pairs of every own point with tile point (j, q): the contribution's
  // fast answers, made exact where a lane of the warp is unsure of one (one
  // vote for R pairs, so that sure pairs never branch).
  template <class Valid>
  __device__ __forceinline__ void offer(const Here&, const Point (&own)[R], unsigned, const Point& q,
                                        const Valid& valid) {
    Contribution c[R];
    bool all = true;
#pragma unroll
    for (unsigned r = 0; r < R; ++r) all = contribute_fast(own[r], q, setup, c[r]) && all;
    if (!__all_sync(FULL_WARP, all)) {
#pragma unroll
      for (unsigned r = 0; r < R; ++r) {
        Contribution again;  // the same fast answer again: cheaper than keeping R flags through the loop
        if (!contribute_fast(own[r], q, setup, again)) c[r] = contribute_unsure(own[r], q);
      }
    }
#pragma unroll
    for (unsigned r = 0; r < R; ++r) take(c[r], valid(r));
  }

  // One pair, where a visit pattern offers pairs one at a time.
  __device__ __forceinline__ void add(unsigned, unsigned, const Point& own, unsigned, const Point& q, bool valid) {
    take(contribute(own, q), valid);
  }


  __device__ __forceinline__ void take(const Contribution& c, bool valid) {
    const unsigned slot = valid ? c.slot : SLOTS;
    add_to_copy(mine + slot * (COPIES * sizeof(Counter)), static_cast<Counter>(c.amount));
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(const Here&) {
    __syncthreads();
    for (unsigned k = threadIdx.x; k < SLOTS; k += B) {
      Total total = Total(0);
#pragma unroll
      for (unsigned c = 0; c < COPIES; ++c) total += copies[k * COPIES + c];
      if (total != Total(0)) atomicAdd(out + k, total);
    }
  }
};

// Offers the pairs of a thread's own points with tile point (j, q);
// valid(r) says whether own point r's pair is in the visit. Every lane of
// the warp offers together (the output may vote).
struct Offer {
  Output& out;
  const Here& here;
  const Point (&own)[R];

  template <class Valid>
  __device__ __forceinline__ void operator()(unsigned j, const Point& q, const Valid& valid) const {
    out.offer(here, own, j, q, valid);
  }
};

// ------------------------------------------------------------------ kernel: lower_triangle
extern "C" __global__ void __launch_bounds__(B) twobs_sdh(
    const float* a_x,
    const float* a_y,
    const float* a_z,
    unsigned n_a,
    unsigned a_offset,
    unsigned other_offset,
    unsigned step_first,
    unsigned step_end,
    Total* totals) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Set a = { a_x, a_y, a_z, n_a };
  [[maybe_unused]] const Set& other = a;
  const unsigned t = threadIdx.x;
  const unsigned block = blockIdx.x;
  const unsigned first = block * B * R;  // the block's first own point
  const unsigned own_end = a.n;          // own points at or past it are padding

  const Here here = {first + t, own_end, a_offset, other_offset, smem + TILE_BYTES};
  prepare_contribution();
  __syncthreads();
  Point own[R];
#pragma unroll
  for (unsigned r = 0; r < R; ++r) own[r] = load_point(a, here.own(r));  // padding rows are loaded, never counted
  // Interior blocks own no padding: their full tiles skip every validity test.
  [[maybe_unused]] const bool all_own_valid = first + B * R <= own_end;
  Output out(totals, here);
  Tiles tiles(smem);
  [[maybe_unused]] const auto always = [](unsigned) { return true; };
  [[maybe_unused]] const auto own_valid = [&](unsigned r) { return here.valid(r); };
  [[maybe_unused]] const Offer offer{out, here, own};
  // Circulant pairing of spans of B x R points: block b meets the spans
  // b+1 .. b+M/2 (mod M), so every unordered pair of spans is visited once and
  // every block does the same work; the last step pairs the block's own points
  // with each other. A step loads the span's R tiles in turn.
  const unsigned span = B * R;
  const unsigned spans = (a.n + span - 1) / span;
  const unsigned offdiag = (spans - 1) / 2 + ((spans % 2 == 0 && block < spans / 2) ? 1 : 0);
  const unsigned steps = offdiag + 1;
  for (unsigned s = out.first_step(step_first); s < umin(steps, step_end); ++s) {
    out.begin_step(s);
    const bool diagonal = s == offdiag;
    const unsigned partner = diagonal ? block : (block + 1 + s) % spans;
#pragma unroll 1
    for (unsigned u = 0; u < R; ++u) {  // not unrolled: own[] is indexed by the unrolled r only
      const unsigned start = partner * span + u * B;
      if (start >= a.n) break;  // the same in every thread
      tiles.load(a, start);
      const unsigned len = umin(B, a.n - start);
      if (!diagonal) {
        if (all_own_valid && len == B) {
          tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(start + jl, q, always); });
        } else {
          tiles.for_each(len, [&](unsigned jl, const Point& q) { offer(start + jl, q, own_valid); });
        }
      } else {
        // Own rows before u meet the whole tile, row u meets it by the diagonal
        // pattern, rows after u come later (the pair is met from their side).
        if (u > 0) {
          tiles.for_each(len, [&](unsigned jl, const Point& q) {
            offer(start + jl, q, [&](unsigned r) { return r < u && here.valid(r); });
          });
        }
        // Load-balanced pairing (section 3.4.1): thread t meets (t + d) % B for
        // d = 1..B/2; at d = B/2 only the lower half, so each pair is met once.
#pragma unroll
        for (unsigned r = 0; r < R; ++r) {
          if (r != u) continue;
#pragma unroll 4
          for (unsigned d = 1; d <= B / 2; ++d) {
            const unsigned jl = (t + d) & (B - 1);
            const bool valid = here.valid(r) && jl < len && (d < B / 2 || t < B / 2);
            out.add(r, here.own(r), own[r], start + jl, tiles.at(jl), valid);
          }
        }

      }
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }

  out.finish(here);
}
}  // namespace twobs_generated
