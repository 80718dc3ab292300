// twobs kernel: 2pcf (problems/2pcf.xml)
// Two-point correlation pair count: the number of pairs of points (3-D, or as many coordinates as the input has) closer than r
//
// Input: one set (self), element f32 x 3; pair function `distance` from problems/distance.cu (symmetric)
// Output: count of pairs with value < r = 0.1
// Parameters: r = 0.1
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for 2pcf on h100: 1000000 points, 499999500000 pairs (lower_triangle)
//   visit         lower_triangle  one set and a symmetric function: each unordered pair i < j once
//   output class  TypeI           output 8 B fits in registers (alpha = 16 B)
//   test          keys            distance(a, b) is root(squared_distance(a, b)): each pair is tested on the key, one comparison against an edge found by bisection at start with root's own arithmetic; the count in registers adds each pair's indicator, 1 or 0 from that one comparison, counting failures where a NaN key passes
//   output        register        Type-I: accumulate in registers, reduce once per block
//   input_cache   register_shm    register_shm: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   block_size    512             512 threads a block: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   points/thread 4               4 own points per thread (~40 registers): measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   diagonal      balanced        thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)
//   resources                     grid 489 blocks; 6156 B shared per block (6144 B tile + 0 B output + 12 B key test); ~40 registers per thread (estimate)
//   occupancy                     3 blocks = 1536 threads per multiprocessor (limited by Registers); R = 2 rounds
//
//   copy model (eq. 1-5): H_S = 1 elements, C_L = 1, C_LP = 0.03 (fitted to SDH times measured on an H100), gamma = 13697
//     copies   k  shared/block  blocks/SM  threads/SM  rounds R  L(k)/C_L     R x L
//          1  32          6148          3        1536         2    1.916       3.8
//          2  16          6152          3        1536         2    1.436       2.9
//          4   8          6160          3        1536         2    1.196       2.4
//          8   4          6176          3        1536         2    1.076       2.2
//         16   2          6208          3        1536         2    1.019       2.0
//         32   1          6272          3        1536         2    1.000       2.0  <- least
//
// Launch: 489 blocks of 512 threads, 6144 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/2pcf.xml --device h100 --dims 3
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
[[maybe_unused]] constexpr float r = 0.1f;
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
#line 104 "2pcf.cu"
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

// ------------------------------------------------------------------ what a pair contributes: count
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

constexpr Value THRESHOLD = static_cast<Value>(params::r);
constexpr unsigned PASS = 0, FAIL = 1;  // the slots of a threshold's test

// The largest key whose value passes: with map non-decreasing and the test
// `value < THRESHOLD`, exactly the keys up to it pass.
__shared__ Key twobs_last_pass;

// The smallest key whose value fails: -inf when every key fails, NaN when
// none does (a comparison `k >= edge` is then false for every key).
__device__ __forceinline__ Key find_first_fail() {
  return smallest_key([](Key twobs_k) { return !(twobs_map(twobs_k) < THRESHOLD); });
}
__device__ __forceinline__ Key find_last_pass() { return key_before(find_first_fail()); }

// The slot of a key, from its value, which the key probe checks the rest against.
__device__ __forceinline__ unsigned value_slot(Key twobs_k) { return twobs_map(twobs_k) < THRESHOLD ? PASS : FAIL; }

// The slot of a key, from the edge. A NaN key is tested on its value (map
// may send it anywhere).
__device__ __forceinline__ unsigned key_slot_fast(Key twobs_k, Key twobs_edge) { return twobs_k <= twobs_edge ? PASS : FAIL; }
__device__ __forceinline__ unsigned key_slot(Key twobs_k) {
  return twobs_k == twobs_k ? key_slot_fast(twobs_k, twobs_last_pass) : value_slot(twobs_k);
}
__device__ __forceinline__ unsigned key_edges() { return 1; }
__device__ __forceinline__ Key key_edge(unsigned) { return twobs_last_pass; }

// A count by indicators: each pair adds 1 where it is counted and 0 where
// not, one comparison of its key with an edge (one FSET on the GPU, which
// reads one register fewer than a multiply-add of the key). An ordered
// comparison is false for a NaN key, so the NaN keys, which have one value
// (docs/spec.md), must be the ones not counted:
// - where a NaN key passes (the built-ins' do: their map sends NaN to 0), the
//   count counts failures, k >= first_fail, and takes them from the pairs it
//   met;
// - else it counts passes, k <= last_pass.
// Either edge may be NaN (no key fails, no key passes) or infinite (every key
// does), and the comparison is still exactly the key's test.
__shared__ Key twobs_first_fail;
__shared__ bool twobs_counts_fails;

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) {
    twobs_first_fail = find_first_fail();
    twobs_last_pass = key_before(twobs_first_fail);
    twobs_counts_fails = value_slot(key_infinity(Key(0)) - key_infinity(Key(0))) == PASS;
  }
}

// The pair's indicator: 1 where the count counts the key (FAILS: a failure,
// else a pass), 0 elsewhere and for NaN.
template <bool FAILS>
__device__ __forceinline__ Key key_counted(Key twobs_k, Key twobs_first_fail, Key twobs_last_pass) {
  return (FAILS ? twobs_k >= twobs_first_fail : twobs_k <= twobs_last_pass) ? Key(1) : Key(0);
}

// No estimate: nothing to measure.
__device__ __forceinline__ double key_estimate_error(Key) { return 0.0; }

// What the key probe checks on every key: its slot from the edge, and the
// indicator the count adds, against its value's slot.
__device__ __forceinline__ bool key_agrees(Key twobs_k) {
  const unsigned twobs_slot = value_slot(twobs_k);
  const Key twobs_counted = twobs_counts_fails ? key_counted<true>(twobs_k, twobs_first_fail, twobs_last_pass)
                                               : key_counted<false>(twobs_k, twobs_first_fail, twobs_last_pass);
  const unsigned twobs_counts = twobs_counts_fails ? FAIL : PASS;
  return key_slot(twobs_k) == twobs_slot && twobs_counted == (twobs_slot == twobs_counts ? Key(1) : Key(0));
}

// A count is a total of one slot: a pair adds 1 when its key passes, else 0
// (an amount, not a slot, so that adding it is one instruction).
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {0u, key_slot(twobs_key(twobs_a, twobs_b)) == PASS ? 1u : 0u};
}

// What a thread reads once, after the set-up: the edges, kept in registers.
struct Setup {
  Key last_pass, first_fail;
  bool counts_fails;
  __device__ __forceinline__ Setup()
      : last_pass(twobs_last_pass), first_fail(twobs_first_fail), counts_fails(twobs_counts_fails) {}
};

// Sure unless the key is NaN, which is tested on its value.
__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s,
                                                Contribution& twobs_c) {
  const Key twobs_k = twobs_key(twobs_a, twobs_b);
  twobs_c = {0u, key_slot_fast(twobs_k, twobs_s.last_pass) == PASS ? 1u : 0u};
  return twobs_k == twobs_k;
}

// The exact answer where contribute_fast was unsure (a NaN key).
__device__ __forceinline__ Contribution contribute_unsure(const Point& twobs_a, const Point& twobs_b) {
  return contribute(twobs_a, twobs_b);
}

// The pair's indicator (key_counted).
template <bool FAILS>
__device__ __forceinline__ Key counted(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s) {
  return key_counted<FAILS>(twobs_key(twobs_a, twobs_b), twobs_s.first_fail, twobs_s.last_pass);
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
#pragma unroll 4
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

// ------------------------------------------------------------------ output stage: register
// Register output (Type-I): each thread tallies every slot in registers; one
// block reduction and one atomicAdd per slot and block at the end.

// Sum of v over the block; the result is valid in thread 0.
template <class T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T warp_sums[B / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_WARP, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < B / 32 ? warp_sums[threadIdx.x] : T(0);
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_WARP, v, o);
  }
  __syncthreads();
  return v;
}

struct Output {
  Total* out;
  Setup setup;  // the contribution's, read once
  Tally tally[SLOTS];

  __device__ __forceinline__ Output(Total* totals, const Here&) : out(totals) {
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) tally[k] = Tally(0);
  }
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  // A count by indicators (count_key.cu): each pair adds its 1 or 0 to a
  // float, which holds every whole number up to 2^24 exactly; each step
  // moves it into the integer tally. A step meets at most B x R x R pairs (a
  // lower triangle's span), far below that.
  static_assert(B * R * R < (1u << 24), "a step's indicators stay exact in a float");
  Key counted = Key(0);  // the step's counted pairs
  Tally met = 0;         // the step's pairs, where failures are counted

  // Whether the count counts failures, the same in every thread: the kernel
  // walks its pairs with count<true> then, else with count<false>.
  __device__ __forceinline__ bool counts_fails() const { return setup.counts_fails; }

  // The pairs of every own point with tile point q, counted.
  template <bool FAILS, class Valid>
  __device__ __forceinline__ void count(const Point (&own)[R], const Point& q, const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (valid(r)) {
        counted += twobs_generated::counted<FAILS>(own[r], q, setup);
        if (FAILS) ++met;
      }
    }
  }

  // One pair, where a visit pattern offers pairs one at a time (tested exactly).
  __device__ __forceinline__ void add(unsigned, unsigned, const Point& own, unsigned, const Point& q, bool valid) {
    take(contribute(own, q), valid);
  }

  // Moves the step's count into the tally.
  __device__ __forceinline__ void settle() {
    const Tally step = static_cast<Tally>(counted);
    tally[0] += setup.counts_fails ? met - step : step;
    counted = Key(0);
    met = 0;
  }

  __device__ __forceinline__ void take(const Contribution& c, bool valid) {
    const unsigned slot = valid ? c.slot : SLOTS;
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) tally[k] += slot == k ? c.amount : Tally(0);
  }

  __device__ __forceinline__ bool end_step(unsigned) {
    settle();
    return false;
  }

  __device__ __forceinline__ void finish(const Here&) {
    settle();  // end_step settled every step: this keeps pairs offered outside one
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) {
      const Total total = block_sum<Total>(tally[k]);
      if (threadIdx.x == 0 && total != Total(0)) atomicAdd(out + k, total);
    }
  }
};

// Counts the pairs of a thread's own points with tile point q, where other
// outputs offer them (output/offer_indicators.cu): failures where FAILS, else passes.
template <bool FAILS>
struct Count {
  Output& out;
  const Point (&own)[R];

  template <class Valid>
  __device__ __forceinline__ void operator()(unsigned, const Point& q, const Valid& valid) const {
    out.template count<FAILS>(own, q, valid);
  }
};

// ------------------------------------------------------------------ kernel: lower_triangle
extern "C" __global__ void __launch_bounds__(B) twobs_2pcf(
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
  // The walk is chosen once, the same in every thread, so that no pair tests
  // which comparison counts it.
  if (out.counts_fails()) {
    [[maybe_unused]] const Count<true> offer{out, own};
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

  } else {
    [[maybe_unused]] const Count<false> offer{out, own};
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

  }
  out.finish(here);
}
}  // namespace twobs_generated
