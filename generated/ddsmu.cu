// twobs kernel: ddsmu (problems/ddsmu.xml)
// Pairs of one set (one input) or of A x B (two inputs) counted by their separation s in [s_min, s_max) and the cosine of its angle to the line of sight (the z axis), mu = |dz| / s in [0, mu_max); minimum images in a periodic box
//
// Input: one set (self), element f32 x 3; pair function `s_mu` from problems/los.cu (symmetric)
// Output: 2-D histogram of s in s_bins = 20 buckets over [s_min = 0, s_max = 0.1) x mu in mu_bins = 10 buckets over [0, mu_max = 1)
// Parameters: s_bins = 20, s_min = 0, s_max = 0.1, mu_bins = 10, mu_max = 1, box = 0
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for ddsmu on h100: 1000000 points, 499999500000 pairs (lower_triangle)
//   visit         lower_triangle  one set and a symmetric function: each unordered pair i < j once
//   output class  TypeII          output 1600 B: above alpha = 16 B, within beta = 232448 B of shared memory per block
//   test          values          the spec declares no key map: each pair's value is tested
//   output        aop             16 copies by lane id (AOP) per block (the copy model's choice is shown below): measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   input_cache   register_shm    register_shm: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   block_size    512             512 threads a block: measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   points/thread 4               4 own points per thread (~40 registers): measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)
//   copies        16              measured on this kind of GPU (the copy model below is shown for comparison)
//   counter       unsigned        32-bit counters, native shared atomics: a copy counts at most 2048 own points x 1000000 partners = 2048000000 < 2^32 pairs
//   diagonal      balanced        thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)
//   resources                     grid 489 blocks; 19008 B shared per block (6144 B tile + 12864 B output + 0 B key test); ~40 registers per thread (estimate)
//   occupancy                     3 blocks = 1536 threads per multiprocessor (limited by Registers); R = 2 rounds
//
//   copy model (eq. 1-5): H_S = 200 elements, C_L = 1, C_LP = 0.03 (fitted to SDH times measured on an H100), gamma = 13697
//     copies   k  shared/block  blocks/SM  threads/SM  rounds R  L(k)/C_L     R x L
//          1  32          6944          3        1536         2    1.161       2.3
//          2  16          7744          3        1536         2    1.022       2.0
//          4   8          9344          3        1536         2    1.004       2.0
//          8   4         12544          3        1536         2    1.001       2.0
//         16   2         18944          3        1536         2    1.000       2.0
//         32   1         31744          3        1536         2    1.000       2.0  <- least
//
// Launch: 489 blocks of 512 threads, 19008 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/ddsmu.xml --device h100
// ------------------------------------------------------------------ types
typedef float3 Point;
typedef float Value;
// The two values of a pair (<output kind="histogram2d">), one member per <axis>.
struct Value2 {
  Value s, mu;
};

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
[[maybe_unused]] constexpr unsigned s_bins = 20u;
[[maybe_unused]] constexpr float s_min = 0.0f;
[[maybe_unused]] constexpr float s_max = 0.1f;
[[maybe_unused]] constexpr unsigned mu_bins = 10u;
[[maybe_unused]] constexpr float mu_max = 1.0f;
[[maybe_unused]] constexpr PeriodicBox<float> box = PeriodicBox<float>{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
}  // namespace params

// ------------------------------------------------------------------ the pairwise function
#line 1 "problems/los.cu"
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
#line 38 "problems/los.cu"
__device__ __forceinline__ Value2 twobs_pair(const Point& twobs_a, const Point& twobs_b) { return s_mu(twobs_a, twobs_b); }
#line 115 "ddsmu.cu"
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

// ------------------------------------------------------------------ what a pair contributes: histogram2d
// A 2-D histogram: the pair function returns two values (Value2, a member
// per <axis>), and each is bucketed exactly as a 1-D histogram buckets its
// value (contribution/bucket.cu): linear axes by floor((v - LO) * SCALE) in
// Value arithmetic, log-spaced ones by their edges (f32 values: from the
// value's bits and a table, contribution/bucket_table.cu). Cell (i, j) is
// slot i * BINS_1 + j; a pair outside either axis (or NaN) adds nothing.

// Axis 0, `s`: static_cast<unsigned>(params::s_bins) buckets.
[[maybe_unused]] constexpr unsigned BINS_0 = static_cast<unsigned>(params::s_bins);
[[maybe_unused]] constexpr Value LO_0 = 0.0f;
[[maybe_unused]] constexpr Value SCALE_0 = 200.0f;
__device__ __forceinline__ void prepare_buckets_0() {}

// Below min is tested on the value: a product that underflows to -0 would pass x >= 0.
__device__ __forceinline__ unsigned bucket_of_0(Value v) {
  const Value x = (v - LO_0) * SCALE_0;
  return (v >= LO_0 && x < Value(BINS_0)) ? static_cast<unsigned>(x) : BINS_0;
}

// Axis 1, `mu`: static_cast<unsigned>(params::mu_bins) buckets.
[[maybe_unused]] constexpr unsigned BINS_1 = static_cast<unsigned>(params::mu_bins);
[[maybe_unused]] constexpr Value LO_1 = 0.0f;
[[maybe_unused]] constexpr Value SCALE_1 = 10.0f;
__device__ __forceinline__ void prepare_buckets_1() {}

// Below min is tested on the value: a product that underflows to -0 would pass x >= 0.
__device__ __forceinline__ unsigned bucket_of_1(Value v) {
  const Value x = (v - LO_1) * SCALE_1;
  return (v >= LO_1 && x < Value(BINS_1)) ? static_cast<unsigned>(x) : BINS_1;
}

[[maybe_unused]] constexpr unsigned SLOTS = BINS_0 * BINS_1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  const Value2 twobs_v = twobs_pair(twobs_a, twobs_b);
  const unsigned twobs_i = bucket_of_0(twobs_v.s);
  const unsigned twobs_j = bucket_of_1(twobs_v.mu);
  const unsigned twobs_slot = twobs_i < BINS_0 && twobs_j < BINS_1 ? twobs_i * BINS_1 + twobs_j : SLOTS;
  return {twobs_slot, 1u};
}

// Each value is tested as it is; log-spaced axes load their edges.
__device__ __forceinline__ void prepare_contribution() {
  prepare_buckets_0();
  prepare_buckets_1();
}

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
extern "C" __global__ void __launch_bounds__(B) twobs_ddsmu(
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
