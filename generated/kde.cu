// twobs kernel: kde (problems/kde.xml)
// Kernel density sum: the Gaussian kernel exp(-d^2 / 2h^2) summed over all pairs of points (3-D, or as many coordinates as the input has)
//
// Input: one set (self), element f32 x 3; pair function `gaussian` from problems/kde.cu (symmetric)
// Output: sum of pair values (f64)
// Parameters: h = 0.05
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for kde on h100: 1000000 points, 499999500000 pairs (lower_triangle)
//   visit         lower_triangle  one set and a symmetric function: each unordered pair i < j once
//   output class  TypeI           output 8 B fits in registers (alpha = 16 B)
//   test          values          the spec declares no key map: each pair's value is tested
//   output        register        Type-I: accumulate in registers, reduce once per block
//   input_cache   register_shm    register_shm: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   block_size    512             512 threads a block: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   points/thread 4               4 own points per thread (~40 registers): measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   diagonal      balanced        thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)
//   resources                     grid 489 blocks; 6144 B shared per block (6144 B tile + 0 B output + 0 B key test); ~40 registers per thread (estimate)
//   occupancy                     3 blocks = 1536 threads per multiprocessor (limited by Registers); R = 2 rounds
//
//   copy model (eq. 1-5): H_S = 1 elements, C_L = 1, C_LP = 0.03 (fitted to SDH times measured on an H100), gamma = 6849
//     copies   k  shared/block  blocks/SM  threads/SM  rounds R  L(k)/C_L     R x L
//          1  32          6152          3        1536         2    1.916       3.8
//          2  16          6160          3        1536         2    1.436       2.9
//          4   8          6176          3        1536         2    1.196       2.4
//          8   4          6208          3        1536         2    1.076       2.2
//         16   2          6272          3        1536         2    1.019       2.0
//         32   1          6400          3        1536         2    1.000       2.0  <- least
//
// Launch: 489 blocks of 512 threads, 6144 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/kde.xml --device h100 --dims 3
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
[[maybe_unused]] constexpr float h = 0.05f;
}  // namespace params

// ------------------------------------------------------------------ the pairwise function
#line 1 "problems/kde.cu"
// Gaussian kernel of bandwidth params::h between two points of DIMS coordinates.
__device__ float gaussian(const Point& a, const Point& b) {
  float d2 = 0.0f;
#pragma unroll
  for (unsigned i = 0; i < DIMS; ++i) {
    const float d = coord(a, i) - coord(b, i);
    d2 = i == 0 ? d * d : d2 + d * d;  // in 3-D: dx * dx + dy * dy + dz * dz
  }
  return expf(-d2 * (0.5f / (params::h * params::h)));
}
#line 2 "problems/kde.cu"
__device__ __forceinline__ Value twobs_pair(const Point& twobs_a, const Point& twobs_b) { return gaussian(twobs_a, twobs_b); }
#line 72 "kde.cu"
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

// ------------------------------------------------------------------ what a pair contributes: sum
// A sum is a total of one slot: every pair adds its value (times its points'
// weights where they have them), in f64.
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef double Tally;
typedef double Total;

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {0u, static_cast<double>(twobs_pair(twobs_a, twobs_b))};
}

// No setup: the value is tested as it is.
__device__ __forceinline__ void prepare_contribution() {}

// Every answer of contribute is exact: the fast path is the same, and needs nothing set up.
struct Setup {};

__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup&,
                                                Contribution& twobs_c) {
  twobs_c = contribute(twobs_a, twobs_b);
  return true;
}

// Never called: the fast answer is always sure.
__device__ __forceinline__ Contribution contribute_unsure(const Point& twobs_a, const Point& twobs_b) {
  return contribute(twobs_a, twobs_b);
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

  // Nothing kept apart from the tally.
  __device__ __forceinline__ void settle() {}

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
extern "C" __global__ void __launch_bounds__(B) twobs_kde(
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
